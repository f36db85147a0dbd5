//! The adaptive-coalescing loop of one locality: every [`EPOCH`], it reads
//! what the locality sent of each adaptive action to each destination and
//! what a parcel and a message cost, hands that to the tuner of the
//! action towards that destination (`adapt/tuner.rs`), and puts the
//! tuner's decisions in force towards it.
//!
//! The threads that send run the loop: after each frame to a peer,
//! [`Epochs::tick`] ends the epoch once [`EPOCH`] has passed since the
//! last one, on one of them (a worker, the flush timer, a caller off the
//! workers; a task that sends for seconds without yielding is tuned
//! meanwhile). The loop is on from the first adaptive setting (at
//! start-up or from [`Runtime::set_coalescing`]). It wakes nothing: a
//! locality that sends nothing runs no epoch, and has nothing to tune;
//! the epoch that ends after such a quiet spell spans it, so its rates
//! are the means over it (a blip, which the tuner confirms over later
//! epochs before it acts). A thread of its own, woken 100 times a second
//! on every locality, cost the sparse ping-pong 1 µs a round trip on two
//! cores (BENCHMARKS.md, issue #15, twelfth part).
//!
//! What it measures, per action and destination: Q (call parcels a
//! second, posts and calls: seed 004's rate of the parcels that fill one
//! buffer); per action: S (bytes of arguments a parcel) and the share of
//! its parcels that are calls someone waits for (awaited calls its
//! buffers took over call parcels sent), from the traffic counters; per
//! destination: α, the fixed cost of a frame to it from the α-β
//! calibration of the sends (`adapt/calibration.rs`: the start-up probe,
//! then the traffic; the mean over the peers before it has one); for the
//! locality: how many calls are awaited together (the awaited calls a
//! worker issued before it ran out of tasks, `aggregate::Bursts`, or so
//! far in a poll that issues them still; for callers off the workers,
//! the calls in flight on average), how long an awaited call
//! takes to come back (the calls in flight on average over the calls a
//! second, Little's law), both from the integral of the calls in flight
//! over the epoch, exact from the moments the calls left and their
//! responses arrived ([`InFlight`]: the clock reads a frame already
//! makes, a call sent alone being a frame, and no sampling), and the cost
//! of a parcel, background time (sending and receiving) per parcel sent
//! and received. From the share and the calls awaited together the model
//! infers κ (`Traffic::kappa`): a caller awaiting each result alone
//! tolerates no delay; a stream of posts, or a million calls awaited
//! together, much. (A caller with nothing else to do also has its
//! buffers flushed by its idle worker, whatever the setting.)
//!
//! [`Runtime::set_coalescing`]: crate::Runtime::set_coalescing

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::epochs::{Epochs, Loop, Reading};
use super::locality::{Locality, report};
use super::traffic::Arrivals;
use crate::adapt::{Bounds, Epoch, Machine, Traffic, Tuner};
use crate::ids::LocalityId;

/// The time between two looks at the counters. Long enough for an epoch
/// of a busy action to hold thousands of parcels, short enough that three
/// decisions fit in the 0.1 s phases of seed 000's toy application. A
/// guess, tune me.
pub(crate) const EPOCH: Duration = Duration::from_millis(10);

/// α when the calibration has none yet and no frame was timed: loopback
/// TCP's cost of a message on the machine of BENCHMARKS.md (≈ 7 µs a
/// round trip, a few µs to send).
const PRIOR_ALPHA_NS: f64 = 5_000.0;

impl Epochs {
    /// Turns the loop on if one of the actions of `locality` is adaptive
    /// and it has peers (a lone locality sends nothing).
    pub(crate) fn start_if_adaptive(&self, locality: &Locality) {
        let aggregator = &locality.aggregator;
        if locality.count >= 2
            && (0..aggregator.actions()).any(|s| aggregator.adaptive(s).is_some())
        {
            self.turn_on();
        }
    }

    /// Ends the epoch if it is due, on one of the threads of `locality`
    /// that call it: reads the counters, lets each tuner judge the epoch
    /// and puts its decisions in force (flushing what buffers held, whose
    /// frames call this again: their epoch is not due). Called after each
    /// frame sent to a peer, with no buffer set taken; a load, and a
    /// clock read and a load under adaptive coalescing, when nothing is
    /// due.
    pub(crate) fn tick(&self, locality: &Locality) {
        if !self.is_on() {
            return;
        }
        let now = locality.aggregator.now_ns();
        let Some(mut state) = self.turn(now, EPOCH.as_nanos() as u64) else {
            return;
        };
        if locality.is_stopping() {
            return;
        }
        let reading = Reading::take(locality);
        match &mut *state {
            Some(state) => state.epoch(locality, reading),
            None => *state = Some(Loop::new(reading)),
        }
    }
}

impl Reading {
    /// Reads the counters of `l`.
    fn take(l: &Locality) -> Self {
        let sent = &l.traffic.sent;
        let received = &l.traffic.received;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        // Arrivals before departures: a response is counted after its
        // call left, so every response read has its call among the
        // departures read after it (the calls in flight never go below 0).
        let answered = *l.traffic.responses_at.lock();
        let (left, issued_ns) = l.aggregator.departures();
        Reading {
            actions: sent
                .per_action
                .iter()
                .enumerate()
                .map(|(slot, a)| {
                    let awaited = l.aggregator.awaited_calls(slot);
                    (load(&a.parcels), load(&a.payload_bytes), awaited)
                })
                .collect(),
            messages: load(&sent.messages),
            send_ns: load(&sent.time_ns),
            parcels: load(&sent.parcels) + load(&received.parcels),
            background_ns: load(&sent.time_ns) + load(&received.time_ns),
            bursts: l.aggregator.bursts(),
            open_bursts: l.aggregator.open_bursts(),
            left,
            issued_ns,
            answered,
            at_ns: l.aggregator.now_ns(),
            calls_to: (0..sent.per_action.len())
                .map(|slot| match l.aggregator.adaptive(slot) {
                    Some(_) => (0..l.count)
                        .map(|d| l.traffic.calls_to.get(slot, LocalityId::new(d)))
                        .collect(),
                    None => Vec::new(),
                })
                .collect(),
        }
    }
}

/// Fewer awaited calls than this leaving in an epoch say too little of
/// their latency. A guess, tune me.
const MIN_AWAITED_FOR_LATENCY: u64 = 32;

/// The calls in flight over one epoch, from their departures and their
/// responses' arrivals (no sampling: the loop reads them once an
/// epoch).
#[derive(Debug, Clone, Copy, PartialEq)]
struct InFlight {
    /// The integral of the calls in flight over the epoch, in call·ns.
    integral: f64,
    /// Awaited calls that left in the epoch.
    left: u64,
    /// The epoch's length in ns.
    span_ns: u64,
}

impl InFlight {
    /// The calls in flight from `last` to `now`. With `L(t)` the calls
    /// in flight (left, less answered), `A` the sum of the moments they
    /// were issued and `B` that of the moments their responses arrived,
    /// `∫₀ᵗ L = L(t)·t − A(t) + B(t)`: each reading gives that value,
    /// their difference the epoch's integral. The sums wrap; the
    /// difference does not (it fits in 63 bits).
    fn between(now: &Reading, last: &Reading) -> InFlight {
        let so_far = |r: &Reading| integral_so_far(r.left, r.issued_ns, r.answered, r.at_ns);
        let integral = so_far(now).wrapping_sub(so_far(last)) as i64;
        InFlight {
            integral: integral.max(0) as f64,
            left: now.left.saturating_sub(last.left),
            span_ns: now.at_ns.saturating_sub(last.at_ns),
        }
    }

    /// The calls in flight on average.
    fn mean(&self) -> f64 {
        self.integral / self.span_ns.max(1) as f64
    }

    /// The mean time from an awaited call leaving to its response, in ns
    /// (Little's law: the calls in flight on average over the calls a
    /// second); `None` when fewer than [`MIN_AWAITED_FOR_LATENCY`] left. A
    /// call that is never answered (its locality was lost) stays in
    /// flight, and adds its epochs to every later mean.
    fn latency_ns(&self) -> Option<f64> {
        (self.left >= MIN_AWAITED_FOR_LATENCY).then(|| self.integral / self.left as f64)
    }
}

/// `∫₀ᵗ L = L(t)·t − A(t) + B(t)` at `t = at_ns`, modulo 2⁶⁴, from the
/// calls that `left` by then, the sum of their issue moments `issued_ns`
/// (`A`) and their responses `answered` (their count and `B`).
fn integral_so_far(left: u64, issued_ns: u64, answered: Arrivals, at_ns: u64) -> u64 {
    left.wrapping_sub(answered.count)
        .wrapping_mul(at_ns)
        .wrapping_sub(issued_ns)
        .wrapping_add(answered.sum_ns)
}

/// How many calls a call awaited in the epoch was awaited with: the
/// workers' bursts (`Σn² / Σn`, see `aggregate::Bursts`), those that
/// ended in the epoch (`closed`, the change of the counts over it) and
/// those still `open` at its end, counted as they stand, the calls so
/// far of a poll that issues them still. Where no burst ended (callers
/// off the workers, workers that have not run out of tasks), the calls
/// in flight on average over the epoch (`in_flight`) stand in, or an
/// open burst if larger: a task 40,000 calls into a batch it issues in
/// one poll awaits at least those together, where some 600 were in
/// flight on average in toy's batch of 400,000; a worker kept busy by
/// tasks that each await a call of their own has one call open, and
/// the calls in flight say more.
fn awaited_together(closed: (u64, u64), open: (u64, u64), in_flight: f64) -> f64 {
    let ratio = |(sum, squares): (u64, u64)| squares as f64 / sum as f64;
    if closed.0 > 0 {
        ratio((
            closed.0.saturating_add(open.0),
            closed.1.saturating_add(open.1),
        ))
    } else if open.0 > 0 {
        ratio(open).max(in_flight)
    } else {
        in_flight
    }
}

impl Loop {
    fn new(first: Reading) -> Self {
        Loop {
            tuners: Vec::new(),
            alpha_ns: PRIOR_ALPHA_NS,
            last: first,
        }
    }

    /// The epoch from the last reading to `now` on locality `l`.
    fn epoch(&mut self, l: &Locality, now: Reading) {
        let last = &self.last;
        let in_flight = InFlight::between(&now, last);
        let closed = (
            now.bursts.0.wrapping_sub(last.bursts.0),
            now.bursts.1.wrapping_sub(last.bursts.1),
        );
        let together = awaited_together(closed, now.open_bursts, in_flight.mean());
        let seconds = (in_flight.span_ns as f64 * 1e-9).max(1e-6);
        let latency_ns = in_flight.latency_ns();
        if let Some(ns) = latency_ns {
            l.tuning.record_latency(ns);
        }
        let messages = now.messages.saturating_sub(last.messages);
        if let Some(cost) = l.calibration.mean() {
            self.alpha_ns = cost.alpha_ns;
        } else if messages > 0 {
            self.alpha_ns = now.send_ns.saturating_sub(last.send_ns) as f64 / messages as f64;
        }
        let split_ratio = Machine {
            alpha_ns: self.alpha_ns,
        }
        .split_ratio();
        l.aggregator.set_split_ratio(split_ratio);
        let parcels = now.parcels.saturating_sub(last.parcels);
        let cost_ns_per_parcel =
            now.background_ns.saturating_sub(last.background_ns) as f64 / parcels.max(1) as f64;
        self.tuners.resize_with(l.aggregator.actions(), Vec::new);
        for (slot, row) in self.tuners.iter_mut().enumerate() {
            let Some(policy) = l.aggregator.adaptive(slot) else {
                row.clear();
                continue;
            };
            let (Some(&(p1, b1, a1)), Some(&(p0, b0, a0))) =
                (now.actions.get(slot), last.actions.get(slot))
            else {
                continue;
            };
            // The action's traffic to every destination: the model's
            // inputs the counters show, and the size and the awaited share
            // of each destination's parcels (not counted apart).
            let sent = p1.saturating_sub(p0);
            let action = Traffic {
                parcels_per_s: sent as f64 / seconds,
                bytes_per_parcel: b1.saturating_sub(b0) as f64 / sent.max(1) as f64,
                // Calls to this locality itself count among the awaited
                // but not among the parcels sent: at most 1.
                awaited: (a1.saturating_sub(a0) as f64 / sent.max(1) as f64).min(1.0),
                together,
            };
            if sent > 0 {
                let kappa = policy.kappa.unwrap_or_else(|| action.kappa());
                l.tuning.record_inputs(slot, &action, kappa);
            }
            let (Some(to_now), Some(to_last)) = (now.calls_to.get(slot), last.calls_to.get(slot))
            else {
                continue;
            };
            row.resize_with(to_now.len(), || None);
            let mut decided = false;
            for (index, tuner) in row.iter_mut().enumerate() {
                let dest = LocalityId::new(index as u32);
                let (Some(&c1), Some(&c0)) = (to_now.get(index), to_last.get(index)) else {
                    continue;
                };
                if dest == l.here {
                    continue;
                }
                let sent = c1.saturating_sub(c0);
                if tuner.is_none() && sent == 0 {
                    // No traffic yet: it follows the latest decision.
                    continue;
                }
                let tuner = tuner.get_or_insert_with(|| {
                    // From its first traffic on, the destination keeps a
                    // setting of its own, which only its tuner changes:
                    // one that followed the latest decision for another
                    // (a flood's tuner, settled, saw its setting move to a
                    // slow stream's count and kept believing its own).
                    let start = l.aggregator.pin(l, slot, dest);
                    let bounds = Bounds::from(policy).within_credit(l.windows.window());
                    Tuner::new(start, bounds).declared_kappa(policy.kappa)
                });
                let epoch = Epoch {
                    traffic: Traffic {
                        parcels_per_s: sent as f64 / seconds,
                        ..action
                    },
                    parcels: sent,
                    cost_ns_per_parcel,
                    latency_ns,
                };
                let machine = Machine {
                    alpha_ns: l
                        .calibration
                        .cost(dest)
                        .map_or(self.alpha_ns, |c| c.alpha_ns),
                };
                let decision = tuner.observe(&epoch, &machine);
                l.aggregator
                    .set_responses_wait(slot, dest, tuner.responses_wait());
                if let Some(decision) = decision {
                    decided = true;
                    l.aggregator.tune(l, slot, dest, decision.setting);
                    l.tuning.count_decision(slot);
                    let name = crate::action::registry().entries()[slot].name();
                    let (setting, reason) = (decision.setting, decision.reason);
                    if l.tuning.print() {
                        report!(
                            info,
                            l.here,
                            "adaptive coalescing of {name} to {dest}: {setting} ({reason})"
                        );
                    } else {
                        report!(
                            debug,
                            l.here,
                            "adaptive coalescing of {name} to {dest}: {setting} ({reason})"
                        );
                    }
                }
            }
            if decided {
                // Once for all the epoch's decisions: the destinations
                // without a tuner follow the latest.
                l.aggregator.follow_latest(l, slot);
            }
        }
        self.last = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two calls issued at 100 and 200 ns, answered at 300 and 500: 200
    /// and 300 ns in flight. `base` shifts every moment (the sums wrap
    /// past 2⁶⁴ when it is near it).
    fn integral_of_two_calls(base: u64, at: u64) -> u64 {
        let t = |x: u64| base.wrapping_add(x);
        let mut answered = Arrivals::default();
        let (left, issued) = match at {
            0..100 => (0, 0),
            100..200 => (1, t(100)),
            _ => (2, t(100).wrapping_add(t(200))),
        };
        if at >= 300 {
            answered.add(1, t(300));
        }
        if at >= 500 {
            answered.add(1, t(500));
        }
        integral_so_far(left, issued, answered, t(at))
    }

    #[test]
    fn a_burst_still_open_counts_as_it_stands_and_in_flight_where_none_ended() {
        // A task 40,000 calls into a batch, 300 of them in flight.
        assert_eq!(
            awaited_together((0, 0), (40_000, 40_000 * 40_000), 300.0),
            40_000.0
        );
        // Bursts of 500 that ended, and one open 100 calls in.
        let closed = (1000, 2 * 500 * 500);
        let together = awaited_together(closed, (100, 100 * 100), 300.0);
        assert!((together - 510_000.0 / 1100.0).abs() < 1e-9, "{together}");
        // No burst at all: the calls in flight.
        assert_eq!(awaited_together((0, 0), (0, 0), 3.5), 3.5);
        // Two workers kept busy by tasks that each await a call: a call
        // open on each; the calls in flight say more.
        assert_eq!(awaited_together((0, 0), (2, 2), 300.0), 300.0);
    }

    #[test]
    fn the_integral_of_the_calls_in_flight_is_exact_and_survives_wrapping() {
        for base in [0, 1 << 40, u64::MAX - 250] {
            let between = |from: u64, to: u64| {
                integral_of_two_calls(base, to).wrapping_sub(integral_of_two_calls(base, from))
            };
            assert_eq!(between(0, 1000), 200 + 300, "base {base}");
            // From 150 to 400: the first call 150 of it, the second 200.
            assert_eq!(between(150, 400), 150 + 200, "base {base}");
            assert_eq!(between(600, 1000), 0, "base {base}");
        }
    }
}
