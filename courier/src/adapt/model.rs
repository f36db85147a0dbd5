//! The cost model behind adaptive coalescing: how many parcels a message
//! should carry, from the traffic (Q, S), the machine (α) and the
//! latency tolerance of the traffic (κ).
//!
//! Narayanan 2020 §4 (seed 004) prices the parcels one locality sends
//! during a flush period with the α-β model: without aggregation each
//! parcel pays α; with it, a message of `n` parcels pays α once and each
//! parcel waits on average `n / 2Q` for the buffer to fill, at a cost
//! `c(t) = κ·t` (Eq. 4.10). Aggregation pays while `b·f_t < 2QSα/κ`
//! (Eq. 4.13, `b·f_t = n·S` bytes a message). Seed 004 stops at that
//! bound; the cost per parcel it implies,
//!
//! ```text
//! cost(n) = α/n + κ·n/(2Q)
//! ```
//!
//! is least at `n* = √(2Qα/κ)` (the economic order quantity), which is
//! below the break-even `2Qα/κ` whenever aggregation pays at all. That is
//! the starting point the tuner takes (`tuner.rs`), within the bounds of
//! memory and credit, and then checks against what the counters say.
//!
//! κ is the cost of delaying one parcel by one second, in seconds: 1 for
//! a call its caller awaits with nothing else to do (the delay is the
//! caller's), less when the caller awaits other calls with it (issued
//! together, their delays overlap), and small for posts nobody waits for (they only
//! matter at the next barrier). Courier infers it from the traffic
//! ([`Traffic::kappa`]); a latency-bound caller also gets its buffers
//! flushed when its worker runs out of tasks, whatever the setting.

use crate::aggregate::{AdaptivePolicy, CountPolicy};

/// What one locality sent of one action towards one destination during
/// an epoch of the tuner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Traffic {
    /// Parcels per second (Q).
    pub(crate) parcels_per_s: f64,
    /// Bytes of arguments per parcel (S).
    pub(crate) bytes_per_parcel: f64,
    /// The share of the parcels that are calls whose caller awaits the
    /// result (0 for posts).
    pub(crate) awaited: f64,
    /// Calls awaited together with an awaited call, itself included
    /// (their delays overlap): the calls its worker issued with it before
    /// it ran out of tasks (or so far, in a poll that issues them still),
    /// or the calls in flight with it for callers off the workers
    /// (`runtime/tuning.rs`); below 1 when unknown: awaited calls then
    /// count as posts.
    pub(crate) together: f64,
}

/// κ of posts: a microsecond of delay costs a tenth of a nanosecond.
/// Posts are waited for only at the next barrier or quiescence, which the
/// idle flush reaches at once. Measured: with 1e-3 the model chose
/// 200–300 parcels a message for histo, ig and toy over loopback TCP,
/// where 4,096 did better (BENCHMARKS.md, issue #15); 1e-4 puts them at
/// 600–1,000 before the tuner tries four times that. Tune me on other
/// machines.
pub(crate) const KAPPA_POSTS: f64 = 1e-4;

impl Traffic {
    /// This traffic moved `weight` (0 to 1) of the way towards `other`:
    /// a step of a moving or a running mean. The calls awaited together
    /// step by their reciprocal, the share of a call's delay that counts
    /// in κ: a mean of their counts is dominated by the largest (an epoch
    /// of a batch's 25,000 and two of bursts of 500 make 8,700, κ a 17th
    /// of the bursts', and a second phase once the batch's epoch is out
    /// of the mean). Where one side does not know them (below 1, see
    /// [`Traffic::kappa`]), the other's stand: an epoch that saw no
    /// burst says nothing of how calls overlap.
    pub(crate) fn toward(&self, other: &Traffic, weight: f64) -> Traffic {
        let step = |a: f64, b: f64| a + (b - a) * weight;
        let together = match (self.together >= 1.0, other.together >= 1.0) {
            (true, true) => 1.0 / step(1.0 / self.together, 1.0 / other.together),
            (true, false) => self.together,
            (false, true) => other.together,
            (false, false) => step(self.together, other.together),
        };
        Traffic {
            parcels_per_s: step(self.parcels_per_s, other.parcels_per_s),
            bytes_per_parcel: step(self.bytes_per_parcel, other.bytes_per_parcel),
            awaited: step(self.awaited, other.awaited),
            together,
        }
    }

    /// Whether most of the parcels are calls whose caller awaits the
    /// result: the traffic whose callers' waits the tuner weighs.
    pub(crate) fn mostly_awaited(&self) -> bool {
        self.awaited >= 0.5
    }

    /// κ, the cost of one second of delay of one parcel in seconds: 1 per
    /// awaited call shared among the calls awaited together, [`KAPPA_POSTS`] for
    /// the rest (and for awaited calls whose overlap is unknown).
    pub(crate) fn kappa(&self) -> f64 {
        let awaited = self.awaited.clamp(0.0, 1.0);
        if self.together < 1.0 {
            return KAPPA_POSTS;
        }
        awaited / self.together + (1.0 - awaited) * KAPPA_POSTS
    }
}

/// The machine's cost of one message to the destination (seed 004's α),
/// in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Machine {
    pub(crate) alpha_ns: f64,
}

/// The cost of an awaited call on a burst's way that splitting the burst
/// overlaps (issuing it, answering it), against which a part's messages
/// size the parts (`Aggregator::split_parcels`: √(n·2α/c) calls a part
/// for a burst of n). Measured on toy's bursts of 500 after a batch over
/// loopback TCP (α 3–6 µs) with the ratio fixed: 15, 30 and 60 (parts of
/// 87 to 173) came within 2 % of each other, 120 (two parts) 3 % behind
/// them, whole bursts 7 % (BENCHMARKS.md, issue #15, fifteenth part),
/// where a later session found two parts 2–10 % ahead of three (twentieth
/// part). A guess, tune me.
pub(crate) const SPLIT_PARCEL_NS: f64 = 100.0;

/// The messages a part of a split burst costs on the burst's way: its
/// calls' to the destination and its responses' back, each α (the
/// fifteenth part's model counted the first only).
const MESSAGES_A_PART: f64 = 2.0;

impl Machine {
    /// A part's messages (`MESSAGES_A_PART` times α) over
    /// [`SPLIT_PARCEL_NS`]: what sizes the parts a burst of awaited calls
    /// is split into on this machine.
    pub(crate) fn split_ratio(&self) -> f64 {
        MESSAGES_A_PART * self.alpha_ns / SPLIT_PARCEL_NS
    }
}

/// What the tuner may set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bounds {
    /// Bytes a buffer may hold (memory per destination, and within the
    /// credit the destination grants: see [`Bounds::within_credit`]).
    pub(crate) max_bytes: usize,
    /// Parcels a message may hold.
    pub(crate) max_parcels: u32,
}

impl From<AdaptivePolicy> for Bounds {
    fn from(p: AdaptivePolicy) -> Self {
        Bounds {
            max_bytes: p.max_bytes,
            max_parcels: p.max_parcels,
        }
    }
}

/// A tuned buffer holds at most this fraction of the destination's
/// credit window: the target gives credit back a quarter window at a
/// time, so a buffer of a quarter window leaves once that much is back.
const WINDOW_FRACTION: usize = 4;

impl Bounds {
    /// These bounds within a credit window of `window` bytes per origin
    /// (0: flow control off, no bound): at most a quarter of it a buffer.
    pub(crate) fn within_credit(self, window: usize) -> Bounds {
        let max_bytes = match window {
            0 => self.max_bytes,
            w => self.max_bytes.min((w / WINDOW_FRACTION).max(1)),
        };
        Bounds { max_bytes, ..self }
    }

    /// The most parcels of `traffic` a message within these bounds holds
    /// (by its parcels and by its bytes).
    pub(crate) fn most_parcels(&self, traffic: &Traffic) -> f64 {
        let by_bytes = self.max_bytes as f64 / traffic.bytes_per_parcel.max(1.0);
        by_bytes.min(f64::from(self.max_parcels))
    }
}

/// The parcels a message should carry: `√(2Qα/κ)`, at least 1.
pub(crate) fn best_parcels_per_message(traffic: &Traffic, machine: &Machine, kappa: f64) -> f64 {
    let q_per_ns = traffic.parcels_per_s.max(0.0) * 1e-9;
    let n = (2.0 * q_per_ns * machine.alpha_ns.max(0.0) / kappa).sqrt();
    if n.is_finite() { n.max(1.0) } else { 1.0 }
}

/// Shortest and longest wait of a buffer's first parcel the model sets:
/// below 10 µs the timer costs more than it saves, beyond 10 ms a parcel
/// waits longer than any phase this was measured on. The longest is also
/// the wait of posts that tolerate delay ([`Wait::Longest`]), where it was
/// measured against 1 ms and 100 µs; the shortest is a guess, tune me.
const INTERVAL_US: (u64, u64) = (10, 10_000);

/// A wait of the first parcel of this many times the time a buffer takes
/// to fill: the timer flushes only a buffer whose traffic slowed down.
const FILL_TIMES_PER_INTERVAL: f64 = 2.0;

/// How long the first parcel of a buffer may wait for the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// [`FILL_TIMES_PER_INTERVAL`] times the time the buffer takes to
    /// fill at the traffic's mean rate: for traffic whose callers wait.
    Fill,
    /// The longest interval the model sets, for posts that tolerate
    /// delay: their buffers leave by their count, their bytes, or when the
    /// worker runs out of tasks. A sender stalled for credit or busy with
    /// what it receives pushes nothing for a while: a timer of twice the
    /// mean fill time then cuts its buffers short, and the sparse bypass
    /// sends the first parcel after the stall alone. RandomAccess's
    /// posts ran 11 % faster with a 10 ms interval than with 1 ms or
    /// 100 µs at any count (BENCHMARKS.md, issue #15, seventeenth part).
    Longest,
    /// As [`Fill`](Wait::Fill), but at least `us` microseconds: for calls
    /// awaited in great numbers together (`tuner::wait`).
    AtLeast { us: u64 },
}

/// The count policy holding `parcels` a message for `traffic`, within
/// `bounds`, whose first parcel may `wait` as long as it says.
pub(crate) fn count_policy(
    parcels: f64,
    traffic: &Traffic,
    bounds: &Bounds,
    wait: Wait,
) -> CountPolicy {
    let parcels = if parcels.is_finite() { parcels } else { 1.0 };
    let parcels = parcels.min(bounds.most_parcels(traffic)).max(1.0);
    let fill_times_us =
        || (parcels / traffic.parcels_per_s.max(1.0) * 1e6 * FILL_TIMES_PER_INTERVAL) as u64;
    let interval_us = match wait {
        Wait::Fill => fill_times_us(),
        Wait::Longest => INTERVAL_US.1,
        Wait::AtLeast { us } => fill_times_us().max(us),
    };
    CountPolicy {
        num_parcels: parcels.round() as u32,
        interval_us: interval_us.clamp(INTERVAL_US.0, INTERVAL_US.1),
        max_bytes: bounds.max_bytes,
        ..CountPolicy::DEFAULT
    }
}

/// The parcels a buffer under `policy` holds when it leaves, for
/// `traffic`: its count, or fewer when the timer (the first parcel waited
/// the interval) or the byte bound sends it first. The default's 100 µs
/// sends 300 parcels of a 3 M/s stream, not 4,096.
pub(crate) fn parcels_held(policy: &CountPolicy, traffic: &Traffic) -> f64 {
    let by_timer = traffic.parcels_per_s.max(0.0) * policy.interval_us as f64 * 1e-6;
    let by_bytes = policy.max_bytes as f64 / traffic.bytes_per_parcel.max(1.0);
    f64::from(policy.num_parcels)
        .min(by_timer)
        .min(by_bytes)
        .max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::Coalescing;

    fn posts(q: f64) -> Traffic {
        Traffic {
            parcels_per_s: q,
            bytes_per_parcel: 8.0,
            awaited: 0.0,
            together: 0.0,
        }
    }

    #[test]
    fn the_best_count_is_the_square_root_of_2_q_alpha_over_kappa() {
        let machine = Machine { alpha_ns: 7_000.0 };
        // 3 M posts/s over loopback TCP: √(2 · 0.003 · 7000 / 0.0001) ≈ 648.
        let n = best_parcels_per_message(&posts(3e6), &machine, KAPPA_POSTS);
        assert!((n - 648.1).abs() < 0.5, "{n}");
        // Four times the rate, twice the parcels.
        let n4 = best_parcels_per_message(&posts(12e6), &machine, KAPPA_POSTS);
        assert!((n4 / n - 2.0).abs() < 1e-9, "{n4} vs {n}");
        // It is a minimum of the cost per parcel, and below seed 004's
        // break-even 2Qα/κ.
        let q = 3e6 * 1e-9;
        let cost = |n: f64| 7_000.0 / n + KAPPA_POSTS * n / (2.0 * q);
        assert!(cost(n) < cost(n * 1.1) && cost(n) < cost(n / 1.1));
        assert!(n < 2.0 * q * 7_000.0 / KAPPA_POSTS);
    }

    #[test]
    fn a_part_of_a_burst_costs_a_message_each_way() {
        // Loopback TCP's 5 µs a message, a part's two over 100 ns a call:
        // a burst of 500 in √(500/100) ≈ 2 parts (`set::split_parcels`).
        assert_eq!(Machine { alpha_ns: 5_000.0 }.split_ratio(), 100.0);
        assert_eq!(Machine { alpha_ns: 60.0 }.split_ratio(), 1.2);
    }

    #[test]
    fn a_mean_of_traffic_averages_the_kappa_of_the_calls_awaited_together() {
        let awaited = |together: f64| Traffic {
            parcels_per_s: 1e5,
            bytes_per_parcel: 8.0,
            awaited: 1.0,
            together,
        };
        // An epoch of a batch's 25,000, then two of bursts of 500: the
        // running mean of three.
        let mean = awaited(25_000.0)
            .toward(&awaited(500.0), 0.5)
            .toward(&awaited(500.0), 1.0 / 3.0);
        let kappas = (1.0 / 25_000.0 + 2.0 / 500.0) / 3.0;
        assert!((mean.kappa() / kappas - 1.0).abs() < 1e-9, "{mean:?}");
        assert!(mean.together < 750.0, "{mean:?}");
        // Unknown (below 1) leaves the other side's.
        assert_eq!(awaited(0.0).toward(&awaited(8.0), 0.5).together, 8.0);
        assert_eq!(awaited(8.0).toward(&awaited(0.5), 0.5).together, 8.0);
        assert_eq!(awaited(0.0).toward(&awaited(0.5), 0.5).together, 0.25);
    }

    #[test]
    fn a_tuned_buffer_holds_at_most_a_quarter_of_the_credit_window() {
        let bounds = Bounds {
            max_bytes: 64 << 10,
            max_parcels: 16_384,
        };
        assert_eq!(bounds.within_credit(0), bounds, "flow control off");
        assert_eq!(bounds.within_credit(4 << 20), bounds, "the default window");
        let small = bounds.within_credit(64 << 10);
        assert_eq!(small.max_bytes, 16 << 10);
        assert_eq!(small.max_parcels, 16_384);
        let p = count_policy(1e9, &posts(1e8), &small, Wait::Longest);
        assert!(p.max_bytes <= 16 << 10 && f64::from(p.num_parcels) * 8.0 <= 16_384.0);
    }

    #[test]
    fn a_buffer_leaves_at_its_count_its_timer_or_its_bytes_whichever_first() {
        let policy = CountPolicy {
            num_parcels: 4096,
            interval_us: 100,
            max_bytes: 16 << 10,
            ..CountPolicy::DEFAULT
        };
        // 3 M/s: 300 parcels arrive in 100 µs.
        assert!((parcels_held(&policy, &posts(3e6)) - 300.0).abs() < 1e-6);
        // 100 M/s of 8 bytes: 16 KiB hold 2,048.
        assert_eq!(parcels_held(&policy, &posts(1e8)), 2048.0);
        let slow_timer = CountPolicy {
            interval_us: 10_000,
            max_bytes: 64 << 10,
            ..policy
        };
        assert_eq!(parcels_held(&slow_timer, &posts(1e8)), 4096.0);
    }

    #[test]
    fn an_awaited_call_alone_is_not_worth_delaying() {
        let lone = Traffic {
            parcels_per_s: 20_000.0,
            bytes_per_parcel: 16.0,
            awaited: 1.0,
            together: 1.0,
        };
        assert_eq!(lone.kappa(), 1.0);
        // Calls whose overlap is unknown (none seen awaited) count as
        // posts.
        let unknown = Traffic {
            together: 0.0,
            ..lone
        };
        assert_eq!(unknown.kappa(), KAPPA_POSTS);
        // √(2 · 2e-5 · 7000 / 1) ≈ 0.53: one parcel a message.
        let n = best_parcels_per_message(&lone, &Machine { alpha_ns: 7_000.0 }, lone.kappa());
        assert_eq!(n, 1.0);
        // Many calls awaited together share the delay: worth batching again.
        let many = Traffic {
            together: 1_000.0,
            parcels_per_s: 2e6,
            ..lone
        };
        assert!(
            best_parcels_per_message(&many, &Machine { alpha_ns: 7_000.0 }, many.kappa()) > 100.0
        );
    }

    #[test]
    fn a_policy_stays_within_its_bounds_and_waits_two_fill_times_or_the_longest() {
        let bounds = Bounds {
            max_bytes: 4096,
            max_parcels: 10_000,
        };
        let p = count_policy(5_000.0, &posts(1e6), &bounds, Wait::Fill);
        assert_eq!(p.num_parcels, 512, "4096 bytes of 8-byte parcels");
        assert_eq!(p.max_bytes, 4096);
        // 512 parcels at 1 M/s fill in 512 µs.
        assert_eq!(p.interval_us, 1024);
        let slow = count_policy(100.0, &posts(10.0), &bounds, Wait::Fill);
        assert_eq!(slow.interval_us, INTERVAL_US.1);
        let zero = count_policy(f64::NAN, &posts(0.0), &bounds, Wait::Fill);
        assert_eq!(zero.num_parcels, 1);
        assert!(Coalescing::Count(zero).validate().is_ok());
        // Traffic that tolerates delay: the same count, the longest wait.
        let tolerant = count_policy(5_000.0, &posts(1e6), &bounds, Wait::Longest);
        assert_eq!(tolerant.num_parcels, 512);
        assert_eq!(tolerant.interval_us, INTERVAL_US.1);
    }
}
