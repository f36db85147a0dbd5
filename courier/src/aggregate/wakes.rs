//! Tasks' wake-ups on a locality's timer (`sleep`, call deadlines): when
//! each is due, which the workers watch, and when the timer thread is to
//! act on them.
//!
//! A wake-up asked for on a worker and due within `WAKE_WATCH_NS`
//! (`sched/spin.rs`) is *watched*: the workers wake the task themselves,
//! an idle one spinning until it is due, and the timer thread only backs
//! it up a grace after its deadline ([`watched_grace_ns`]), without a spin. Others
//! are the timer thread's, which spins the last microseconds before them.
//! Either may be woken by whoever finds it due first: a worker between
//! tasks, or the timer thread awake for another deadline.

use std::collections::BTreeSet;
use std::task::Waker;

use rustc_hash::FxHashMap;

/// How late the timer thread wakes a task whose wake-up the workers
/// watch, on a locality of several workers: a backup, for when no worker
/// got to it (one that asked for it runs a long task while the others
/// are parked, or all run tasks: a busy worker looks for due wake-ups
/// only every few tasks). A guess, tune me.
pub(crate) const WATCHED_GRACE_NS: u64 = 50_000;

/// The same on a locality of one worker, which alone can run the task:
/// a backup gains nothing before that worker is free (it looks for due
/// wake-ups between tasks and when it runs out of them, and an idle one
/// spins for a watched wake-up instead of parking: `sched/spin.rs`), but
/// the thread wakes for it, due or taken, and on a busy core that
/// wake-up preempts a worker. A paced stream of a call every 20 µs, each
/// after a sleep (the toy's steady phase, a worker a locality on two
/// cores), woke the thread some 21,000 times a second at 50 µs, and the
/// calls' median latency was 31–40 µs; at 1 ms, a tenth as often and
/// 13–16 µs (issue #15, twenty-fourth part). At 1 ms it still woke
/// every millisecond, each time taking the core from a worker for some
/// 10 µs: at 10 ms the caller's timer thread was switched in 728 times
/// in eight steady phases instead of 4,583, and the phases' median p99
/// fell from 53 to 41 µs under adaptive (that of `count:4096/1000`,
/// 45 to 41; issue #15, twenty-fifth part). So the backup is a safety
/// net only.
pub(crate) const LONE_WORKER_GRACE_NS: u64 = 10_000_000;

/// How late the timer thread wakes a watched task on a locality of
/// `workers` workers.
pub(crate) fn watched_grace_ns(workers: usize) -> u64 {
    if workers <= 1 {
        LONE_WORKER_GRACE_NS
    } else {
        WATCHED_GRACE_NS
    }
}

/// The pending wake-ups of one locality's tasks.
#[derive(Debug)]
pub(crate) struct Wakes {
    /// Watched wake-ups: (deadline, id).
    watched: BTreeSet<(u64, u64)>,
    /// The timer thread's wake-ups: (deadline, id).
    unwatched: BTreeSet<(u64, u64)>,
    /// The wakers of the sleeping tasks, by id.
    wakers: FxHashMap<u64, Waker>,
    last_id: u64,
    /// How late the timer thread backs a watched wake-up up
    /// ([`watched_grace_ns`]).
    grace_ns: u64,
}

impl Default for Wakes {
    fn default() -> Self {
        Wakes {
            watched: BTreeSet::new(),
            unwatched: BTreeSet::new(),
            wakers: FxHashMap::default(),
            last_id: 0,
            grace_ns: WATCHED_GRACE_NS,
        }
    }
}

impl Wakes {
    /// Backs watched wake-ups up `grace_ns` after their deadline.
    pub(crate) fn set_grace_ns(&mut self, grace_ns: u64) {
        self.grace_ns = grace_ns;
    }

    /// Adds a wake-up of `waker` at `deadline`, `watched` by the workers or
    /// not; returns its id for [`cancel`](Self::cancel).
    pub(crate) fn insert(&mut self, deadline: u64, waker: Waker, watched: bool) -> u64 {
        self.last_id += 1;
        let id = self.last_id;
        self.wakers.insert(id, waker);
        let set = if watched {
            &mut self.watched
        } else {
            &mut self.unwatched
        };
        set.insert((deadline, id));
        id
    }

    /// Forgets the wake-up `id` at `deadline`, done or not.
    pub(crate) fn cancel(&mut self, deadline: u64, id: u64) {
        if self.wakers.remove(&id).is_some() {
            self.watched.remove(&(deadline, id));
            self.unwatched.remove(&(deadline, id));
        }
    }

    /// Takes the wakers of every wake-up due by `now`.
    pub(crate) fn take_due(&mut self, now: u64) -> Vec<Waker> {
        let mut due = Vec::new();
        for set in [&mut self.watched, &mut self.unwatched] {
            while let Some(&(deadline, id)) = set.first()
                && deadline <= now
            {
                set.pop_first();
                due.extend(self.wakers.remove(&id));
            }
        }
        due
    }

    /// The earliest deadline of any wake-up.
    pub(crate) fn earliest(&self) -> Option<u64> {
        let first = |set: &BTreeSet<(u64, u64)>| set.first().map(|&(deadline, _)| deadline);
        match (first(&self.watched), first(&self.unwatched)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The earliest deadline of a watched wake-up.
    pub(crate) fn earliest_watched(&self) -> Option<u64> {
        self.watched.first().map(|&(deadline, _)| deadline)
    }

    /// When the timer thread is to act, and whether it spins the last
    /// microseconds before: the earliest unwatched deadline (spin), or the
    /// earliest watched one plus its grace ([`watched_grace_ns`], no spin), whichever
    /// comes first.
    pub(crate) fn target(&self) -> Option<(u64, bool)> {
        let watched = self
            .earliest_watched()
            .map(|deadline| (deadline.saturating_add(self.grace_ns), false));
        let unwatched = self
            .unwatched
            .first()
            .map(|&(deadline, _)| (deadline, true));
        match (watched, unwatched) {
            (Some(w), Some(u)) => Some(if w.0 < u.0 { w } else { u }),
            (w, u) => w.or(u),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waker() -> Waker {
        Waker::noop().clone()
    }

    #[test]
    fn takes_the_due_wake_ups_once_and_forgets_cancelled_ones() {
        let mut wakes = Wakes::default();
        assert_eq!((wakes.earliest(), wakes.target()), (None, None));
        wakes.insert(10, waker(), true);
        wakes.insert(20, waker(), false);
        let cancelled = wakes.insert(5, waker(), false);
        let later = wakes.insert(30, waker(), true);
        wakes.cancel(5, cancelled);
        assert_eq!(wakes.earliest(), Some(10));
        assert_eq!(wakes.take_due(4).len(), 0);
        assert_eq!(wakes.take_due(20).len(), 2, "the watched and the unwatched");
        assert_eq!(wakes.take_due(20).len(), 0, "each once");
        assert_eq!(wakes.earliest_watched(), Some(30));
        wakes.cancel(30, later);
        assert_eq!(
            (wakes.earliest(), wakes.take_due(u64::MAX).len()),
            (None, 0)
        );
        assert!(wakes.wakers.is_empty(), "no waker left behind");
    }

    #[test]
    fn the_thread_acts_late_for_watched_wake_ups_and_on_time_for_others() {
        let mut wakes = Wakes::default();
        let at = 1_000_000;
        wakes.insert(at, waker(), true);
        assert_eq!(wakes.target(), Some((at + WATCHED_GRACE_NS, false)));
        let unwatched = at + WATCHED_GRACE_NS / 2;
        wakes.insert(unwatched, waker(), false);
        assert_eq!(
            wakes.target(),
            Some((unwatched, true)),
            "an unwatched wake-up during a watched one's grace"
        );
        assert_eq!(wakes.earliest(), Some(at));
        wakes.insert(u64::MAX - 1, waker(), true);
        assert_eq!(wakes.target(), Some((unwatched, true)));
    }
}
