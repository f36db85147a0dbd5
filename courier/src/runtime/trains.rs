//! Trains: runs of calls of one caller that wait in the inbox together.
//!
//! A caller whose coalescing is off (adaptive's choice for calls awaited
//! one or two at a time) sends each call in a message of its own. While
//! the responder is busy (a long task, or its core taken by the OS for a
//! few milliseconds), those messages queue up, and when it gets to them,
//! each is a run of one call whose response would leave alone
//! (`aggregate/answer.rs`): a message a call back, a system call each,
//! while the caller's calls keep coming. Such runs are a *train*: their
//! calls came one at a time but wait together, so their responses leave
//! together, when the last run queued of the train is done (runs of many
//! calls already answer together, and keep doing so run by run: the
//! parts of a burst). The toy's steady phase (a call every 20 µs, under
//! adaptive coalescing, which sends them off) met stalls of its
//! responder of 1–4 ms, every half a second, on the 2-core VM of
//! BENCHMARKS.md (`kdamond`, the kernel's data-access monitor, paging out, takes a
//! core): a response a run, 18 of 60 phases had a p99 above 500 µs and
//! the phases' mean latency averaged 30.7 µs; with trains, 10 and 23.2
//! µs, where a static count that holds the responses for the idle
//! worker had 11 and 24.6 (issue #15, twenty-fourth part).
//!
//! The counts are kept per caller, with atomics: workers that pop runs of
//! one caller at once may see a train end early or late, which only
//! sends a response alone or leaves one for the idle worker or the
//! timer.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::ids::LocalityId;

/// Where a run of calls stands among its caller's runs in the inbox,
/// when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Train {
    /// No other run of its caller waited with it.
    Alone,
    /// More runs of its caller wait behind it.
    Inner,
    /// The last of runs of its caller that waited together.
    Last,
}

impl Train {
    /// Whether its calls came with others of its caller's.
    pub(crate) fn with_others(self) -> bool {
        self != Train::Alone
    }
}

/// The runs of calls of each caller waiting in a locality's inbox.
#[derive(Debug)]
pub(crate) struct Trains {
    /// Runs of each caller queued and not yet started.
    queued: Box<[AtomicU32]>,
    /// Whether a train of each caller's runs is under way.
    open: Box<[AtomicBool]>,
}

impl Trains {
    /// Trains of `localities` callers.
    pub(crate) fn new(localities: u32) -> Trains {
        Trains {
            queued: (0..localities).map(|_| AtomicU32::new(0)).collect(),
            open: (0..localities).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// A run of calls of `caller` was queued.
    pub(crate) fn queued(&self, caller: LocalityId) {
        if let Some(queued) = self.queued.get(caller.index()) {
            queued.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A run of calls of `caller` (queued with [`queued`](Self::queued))
    /// starts: where it stands among the caller's runs.
    pub(crate) fn start(&self, caller: LocalityId) -> Train {
        let (Some(queued), Some(open)) = (
            self.queued.get(caller.index()),
            self.open.get(caller.index()),
        ) else {
            return Train::Alone;
        };
        let before = queued
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_sub(1))
            })
            .unwrap_or_else(|n| n);
        if before > 1 {
            open.store(true, Ordering::Relaxed);
            Train::Inner
        } else if open.swap(false, Ordering::Relaxed) {
            Train::Last
        } else {
            Train::Alone
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_queued_together_make_a_train_that_ends_with_the_last() {
        let trains = Trains::new(3);
        let (a, b) = (LocalityId::new(1), LocalityId::new(2));
        trains.queued(a);
        assert_eq!(trains.start(a), Train::Alone, "one run alone");
        for _ in 0..3 {
            trains.queued(a);
        }
        trains.queued(b);
        assert_eq!(trains.start(a), Train::Inner);
        assert_eq!(trains.start(b), Train::Alone, "another caller's run");
        assert_eq!(trains.start(a), Train::Inner);
        // One more joins the train while it runs.
        trains.queued(a);
        assert_eq!(trains.start(a), Train::Inner);
        assert_eq!(trains.start(a), Train::Last);
        trains.queued(a);
        assert_eq!(trains.start(a), Train::Alone, "the train is over");
        assert!(!Train::Alone.with_others());
        assert!(Train::Inner.with_others() && Train::Last.with_others());
    }

    #[test]
    fn a_caller_out_of_range_or_a_start_without_a_queue_is_alone() {
        let trains = Trains::new(2);
        assert_eq!(trains.start(LocalityId::new(1)), Train::Alone);
        trains.queued(LocalityId::new(7));
        assert_eq!(trains.start(LocalityId::new(7)), Train::Alone);
    }
}
