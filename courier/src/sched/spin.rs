//! How long a worker that ran out of tasks spins before it parks.
//!
//! Every idle worker spins [`SPIN_ROUNDS`](super::SPIN_ROUNDS) rounds,
//! polling the network each round. A worker whose locality waits for the
//! network alone (results of its calls are due, no task sleeps on a timer
//! due within 1 ms: `BackgroundWork::awaits_network`) and that sent or
//! received within [`NETWORK_ACTIVE_NS`] spins on, until
//! [`NETWORK_SPIN_NS`] after it ran out of tasks: the answer is most
//! likely a round trip away, and a parked worker pays a wake-up when it
//! comes, more than the loopback round trip itself on the 2-core VM of
//! BENCHMARKS.md (where an idle virtual CPU halts): calls awaited one at a
//! time took a mean of 22–44 µs (`off`) and 31–46 (`on`) with the short
//! spin alone, against a median of 13–14, and 11.7–15.2 µs with the long
//! one (issue #15, eighth part).
//!
//! Spinning is only free while nobody else wants the core, so the long
//! spin is kept from the cases where someone does. A task sleeping on a
//! timer needs the timer thread to run; a worker with no call of its own
//! to wait for (a responder) does not know when its next input comes. With
//! either spinning too, a paced stream of calls on two busy cores (the
//! toy's steady phase) ran 1.5–2× slower: its timer thread and the other
//! locality's worker queued behind spinning workers. And a round of the
//! long spin that took more than [`PREEMPTED_NS`] means the worker lost its
//! core meanwhile: it then parks, and the next [`COOLDOWN_IDLES`] idle
//! periods spin the short way only.
//!
//! A worker that runs out of tasks while a watched wake-up of a task (one
//! asked for on a worker, due within [`WAKE_WATCH_NS`]:
//! `aggregate/wakes.rs`) is pending spins until it is due and wakes the
//! task itself; a lost core does not stop this spin, which is that short.
//! The paced stream above sleeps 20 µs between calls; after bursts its
//! calls took a median of 42 µs this way, against 272 with the timer
//! thread spinning for each sleep and then waking the worker (issue #15,
//! eleventh part).
//!
//! HPX's idle workers spin too (`hpx.max_idle_loop_count`); MPI progress
//! engines poll without end. Here the spin is bounded and starts only
//! after network traffic, so a program without a network, or quiet for a
//! millisecond, spins as it did before.

/// A worker that sent or received over the network this recently spins
/// for up to [`NETWORK_SPIN_NS`] when it runs out of tasks. A guess, tune me.
pub(crate) const NETWORK_ACTIVE_NS: u64 = 1_000_000;

/// How long after it ran out of tasks a worker that used the network
/// lately spins before it parks, the short spin included: several
/// loopback round trips (12 µs on the machine of BENCHMARKS.md). 25 µs
/// gave calls awaited one at a time the same latency there, 100 µs no
/// better; 50 keeps a margin for slower round trips. A guess, tune me.
pub(crate) const NETWORK_SPIN_NS: u64 = 50_000;

/// A round of the long spin (a yield and a poll of the network) that
/// took longer than this lost the worker its core. A guess, tune me.
pub(crate) const PREEMPTED_NS: u64 = 10_000;

/// Idle periods after a lost core that spin only the short way: at a call
/// every 20 µs, about 5 ms. A guess, tune me.
pub(crate) const COOLDOWN_IDLES: u32 = 256;

/// A wake-up that a task asks for on a worker, due within this many ns,
/// is watched: an idle worker spins until it is due and wakes the task
/// itself, without the timer thread (see the module docs). Longer than
/// the timer thread's own spin (20 µs), since the worker has nothing else
/// to do; short enough not to hold a core long from another locality
/// that shares it. A guess, tune me.
pub(crate) const WAKE_WATCH_NS: u64 = 50_000;

/// One worker's state of the long spin.
#[derive(Debug, Default)]
pub(crate) struct LongSpin {
    /// Idle periods left that spin only the short way.
    cooldown: u32,
}

impl LongSpin {
    /// Until how long after an idle period began to spin, the short spin
    /// included, when it begins `since_network_ns` after the worker last
    /// sent or received, in ns (0: park after the short spin);
    /// `awaits_network` says whether the locality waits for the network
    /// alone (asked only after recent traffic).
    pub(crate) fn budget_ns(
        &mut self,
        since_network_ns: u64,
        awaits_network: impl FnOnce() -> bool,
    ) -> u64 {
        if since_network_ns >= NETWORK_ACTIVE_NS || !awaits_network() {
            return 0;
        }
        if self.cooldown > 0 {
            self.cooldown -= 1;
            return 0;
        }
        NETWORK_SPIN_NS
    }

    /// Says that a round of the long spin took `round_ns`; returns whether
    /// that lost the worker its core, which then parks and spins the short
    /// way for the next [`COOLDOWN_IDLES`] idle periods.
    pub(crate) fn lost_core(&mut self, round_ns: u64) -> bool {
        if round_ns <= PREEMPTED_NS {
            return false;
        }
        self.cooldown = COOLDOWN_IDLES;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spins_long_only_after_recent_traffic() {
        let mut spin = LongSpin::default();
        assert_eq!(spin.budget_ns(0, || true), NETWORK_SPIN_NS);
        assert_eq!(
            spin.budget_ns(NETWORK_ACTIVE_NS - 1, || true),
            NETWORK_SPIN_NS
        );
        assert_eq!(
            spin.budget_ns(NETWORK_ACTIVE_NS, || true),
            0,
            "a quiet network"
        );
        assert_eq!(spin.budget_ns(u64::MAX, || true), 0, "no traffic ever");
        assert_eq!(spin.budget_ns(0, || false), 0, "nothing to wait for");
    }

    #[test]
    fn a_lost_core_stops_the_long_spin_for_a_while() {
        let mut spin = LongSpin::default();
        assert!(!spin.lost_core(PREEMPTED_NS), "a round of ordinary length");
        assert_eq!(spin.budget_ns(0, || true), NETWORK_SPIN_NS);
        assert!(spin.lost_core(PREEMPTED_NS + 1));
        for idle in 0..COOLDOWN_IDLES {
            assert_eq!(
                spin.budget_ns(0, || true),
                0,
                "idle period {idle} of the cooldown"
            );
        }
        assert_eq!(
            spin.budget_ns(0, || true),
            NETWORK_SPIN_NS,
            "the cooldown is over"
        );
    }

    #[test]
    fn idle_periods_without_a_long_spin_do_not_use_up_the_cooldown() {
        let mut spin = LongSpin::default();
        assert!(spin.lost_core(u64::MAX));
        for _ in 0..2 * COOLDOWN_IDLES {
            assert_eq!(spin.budget_ns(NETWORK_ACTIVE_NS, || true), 0);
            assert_eq!(spin.budget_ns(0, || false), 0);
        }
        assert_eq!(spin.budget_ns(0, || true), 0, "still cooling down");
    }
}
