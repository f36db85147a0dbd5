//! What a locality keeps of its adaptive-coalescing loop (`tuning.rs`,
//! which runs it): whether it is on, when the current epoch ends, and what
//! one epoch hands the next (the tuners, the counters' last reading).
//! The locality holds it; the loop's steps are `tuning.rs`'s.

use parking_lot::{Mutex, MutexGuard};

use super::traffic::Arrivals;
use crate::adapt::Tuner;
use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The tuning loop of one locality, run by the threads that send (see
/// `tuning.rs`).
#[derive(Default)]
pub(crate) struct Epochs {
    /// Whether the loop runs: an action is adaptive and there are peers.
    on: AtomicBool,
    /// When the current epoch ends, in ns on the aggregator's clock.
    ends_ns: AtomicU64,
    /// What the loop keeps from one epoch to the next; `None` before the
    /// first reading.
    state: Mutex<Option<Loop>>,
}

impl Epochs {
    /// Turns the loop on.
    pub(super) fn turn_on(&self) {
        self.on.store(true, Ordering::Relaxed);
    }

    /// Whether the loop is on.
    pub(super) fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The loop's state, if the caller, `now` ns on the aggregator's
    /// clock, ends the current epoch: only once it is due, and on one
    /// caller. `None` for the others, and when an epoch took longer than
    /// `length` (the later one is skipped).
    pub(super) fn turn(&self, now: u64, length: u64) -> Option<MutexGuard<'_, Option<Loop>>> {
        if !take_turn(&self.ends_ns, now, length) {
            return None;
        }
        self.state.try_lock()
    }
}

/// Whether the caller ends the epoch that ends at `ends` (ns), now at
/// `now`: only once it is due, and then only one of the callers, which
/// moves the end `length` past `now`.
fn take_turn(ends: &AtomicU64, now: u64, length: u64) -> bool {
    let due = ends.load(Ordering::Relaxed);
    now >= due
        && ends
            .compare_exchange(due, now + length, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

/// What the loop keeps from one epoch to the next.
pub(super) struct Loop {
    /// Per action and destination, its tuner once it had traffic.
    pub(super) tuners: Vec<Vec<Option<Tuner>>>,
    /// The α of the last epoch that measured one.
    pub(super) alpha_ns: f64,
    /// The reading at the end of the last epoch.
    pub(super) last: Reading,
}

/// What the counters said at one moment.
pub(super) struct Reading {
    /// Per action: (call parcels sent, their bytes of arguments, the
    /// awaited calls of it the buffers took, to any destination).
    pub(super) actions: Vec<(u64, u64, u64)>,
    pub(super) messages: u64,
    pub(super) send_ns: u64,
    pub(super) parcels: u64,
    pub(super) background_ns: u64,
    /// (Σn, Σn²) of the workers' bursts of awaited calls
    /// (`Aggregator::bursts`).
    pub(super) bursts: (u64, u64),
    /// (Σn, Σn²) of the bursts the workers had open at the reading
    /// (`Aggregator::open_bursts`).
    pub(super) open_bursts: (u64, u64),
    /// Awaited calls that left, and the sum of the moments they were
    /// issued (ns on the aggregator's clock, wrapping).
    pub(super) left: u64,
    pub(super) issued_ns: u64,
    /// Their responses that arrived, and the sum of their moments.
    pub(super) answered: Arrivals,
    /// When the reading was taken, on the aggregator's clock: the
    /// moment of the integral, and the epochs' lengths.
    pub(super) at_ns: u64,
    /// Per action, call parcels sent to each destination (adaptive
    /// actions only; empty for the others).
    pub(super) calls_to: Vec<Vec<u64>>,
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn an_epoch_ends_once_it_is_due_and_on_one_caller() {
        let ends = AtomicU64::new(0);
        // The first call ends the (empty) first epoch: the first reading.
        assert!(take_turn(&ends, 5, 10));
        assert_eq!(ends.load(Ordering::Relaxed), 15);
        assert!(!take_turn(&ends, 14, 10), "not due yet");
        assert!(take_turn(&ends, 40, 10), "late: due all the same");
        assert!(!take_turn(&ends, 40, 10), "its turn was taken");
        assert_eq!(ends.load(Ordering::Relaxed), 50, "counted from the call");
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use loom::sync::Arc;

    use super::*;

    /// Two threads that send find the same epoch due, within an epoch of
    /// each other: in every interleaving, exactly one ends it, and the
    /// next end is counted from its call.
    #[test]
    fn loom_an_epoch_due_on_two_threads_ends_on_one() {
        loom::model(|| {
            let ends = Arc::new(AtomicU64::new(100));
            let other = {
                let ends = Arc::clone(&ends);
                loom::thread::spawn(move || take_turn(&ends, 125, 10))
            };
            let mine = take_turn(&ends, 120, 10);
            let theirs = other.join().unwrap();
            assert!(
                mine ^ theirs,
                "one turn, not {}",
                u8::from(mine) + u8::from(theirs)
            );
            let end = ends.load(Ordering::Relaxed);
            assert_eq!(end, if mine { 130 } else { 135 });
        });
    }
}
