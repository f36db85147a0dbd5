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
//! parts of a burst; an action with a static setting answers as its
//! setting says). The toy's steady phase (a call every 20 µs, under
//! adaptive coalescing, which sends them off) met stalls of its
//! responder of 1–4 ms, every half a second, on the 2-core VM of
//! BENCHMARKS.md (`kdamond`, the kernel's data-access monitor, paging
//! out, takes a core): a response a run, 18 of 60 phases had a p99
//! above 500 µs and the phases' mean latency averaged 30.7 µs; with
//! trains, 10 and 23.2 µs, where a static count that holds the responses
//! for the idle worker had 11 and 24.6 (issue #15, twenty-fourth part).
//!
//! The state of each caller is one atomic word (its runs queued and
//! whether a train is under way), so that workers starting its last runs
//! at once see one end. The run that ends a train sends the responses of
//! the train's action (that of its last run of one call) to the caller
//! that its worker holds, whatever action that run calls; responses held
//! by another worker, or of another action in a train of several, leave
//! with the idle flush or the timer.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ids::LocalityId;

/// Where a run of calls stands among its caller's runs in the inbox,
/// when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Train {
    /// No other run of its caller waited with it.
    Alone,
    /// More runs of its caller wait behind it.
    Inner,
    /// The last of runs of its caller that waited together: when it is
    /// done, the responses of the action in `slot` (the train's last run
    /// of one call but this one) leave.
    Last { slot: usize },
}

impl Train {
    /// Whether its calls came with others of its caller's.
    pub(crate) fn with_others(self) -> bool {
        self != Train::Alone
    }
}

/// A caller's state, one word: its runs queued and not yet started (the
/// low 32 bits) and, while a train is under way, the slot of the action
/// of its last run of one call, plus one (the bits above; 0: none).
const QUEUED: u64 = u32::MAX as u64;

/// The runs of calls of each caller waiting in a locality's inbox.
#[derive(Debug)]
pub(crate) struct Trains {
    /// Of each caller, its state ([`QUEUED`]); one word, so that two
    /// workers starting its last runs at once see one end of the train.
    callers: Box<[AtomicU64]>,
}

impl Trains {
    /// Trains of `localities` callers.
    pub(crate) fn new(localities: u32) -> Trains {
        Trains {
            callers: (0..localities).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// A run of calls of `caller` was queued.
    pub(crate) fn queued(&self, caller: LocalityId) {
        if let Some(state) = self.callers.get(caller.index()) {
            state.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A run of calls of `caller`, queued with [`queued`](Self::queued),
    /// starts: where it stands among the caller's runs. `alone` is the
    /// slot of its action if it is a run whose response would leave alone
    /// (a whole run of one call whose responses are not patient:
    /// `aggregate/answer.rs`); only such a run with more behind it holds
    /// its response for the train (others answer as they would).
    pub(crate) fn start(&self, caller: LocalityId, alone: Option<usize>) -> Train {
        let Some(state) = self.callers.get(caller.index()) else {
            return Train::Alone;
        };
        let held = alone.map_or(0, |slot| (slot as u64 + 1) << 32);
        let before = state
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                let queued = s & QUEUED;
                debug_assert!(queued > 0, "a run started that was not queued");
                Some(match queued {
                    0 => s,
                    1 => 0,
                    _ if held != 0 => (queued - 1) | held,
                    _ => s - 1,
                })
            })
            .unwrap_or_else(|s| s);
        match (before & QUEUED, before >> 32) {
            (queued, _) if queued > 1 => Train::Inner,
            (_, 0) => Train::Alone,
            (_, slot) => Train::Last {
                slot: (slot - 1) as usize,
            },
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
        assert_eq!(trains.start(a, Some(3)), Train::Alone, "one run alone");
        for _ in 0..3 {
            trains.queued(a);
        }
        trains.queued(b);
        assert_eq!(trains.start(a, Some(3)), Train::Inner);
        assert_eq!(
            trains.start(b, Some(3)),
            Train::Alone,
            "another caller's run"
        );
        assert_eq!(trains.start(a, Some(3)), Train::Inner);
        // One more joins the train while it runs.
        trains.queued(a);
        assert_eq!(trains.start(a, Some(3)), Train::Inner);
        assert_eq!(trains.start(a, Some(3)), Train::Last { slot: 3 });
        trains.queued(a);
        assert_eq!(trains.start(a, Some(3)), Train::Alone, "the train is over");
        // Runs of many calls open no train, nor end one they did not open.
        trains.queued(a);
        trains.queued(a);
        assert_eq!(trains.start(a, None), Train::Inner);
        assert_eq!(trains.start(a, None), Train::Alone);
        // A train of one action's runs ended by another's (a post after
        // them): the train's action's responses leave after it.
        for _ in 0..3 {
            trains.queued(a);
        }
        assert_eq!(trains.start(a, Some(3)), Train::Inner);
        assert_eq!(trains.start(a, Some(3)), Train::Inner);
        assert_eq!(trains.start(a, Some(5)), Train::Last { slot: 3 });
        assert!(!Train::Alone.with_others());
        assert!(Train::Inner.with_others() && Train::Last { slot: 0 }.with_others());
    }

    #[test]
    fn a_caller_out_of_range_is_alone() {
        let trains = Trains::new(2);
        trains.queued(LocalityId::new(7));
        assert_eq!(trains.start(LocalityId::new(7), Some(3)), Train::Alone);
    }

    #[test]
    fn two_threads_starting_a_trains_last_runs_see_one_end() {
        // However the starts of the last two runs interleave, one of them
        // ends the train and the state is empty afterwards.
        for _ in 0..1000 {
            let trains = std::sync::Arc::new(Trains::new(2));
            let a = LocalityId::new(1);
            for _ in 0..3 {
                trains.queued(a);
            }
            assert_eq!(trains.start(a, Some(3)), Train::Inner);
            let other = {
                let trains = std::sync::Arc::clone(&trains);
                std::thread::spawn(move || trains.start(a, Some(3)))
            };
            let here = trains.start(a, Some(3));
            let there = other.join().unwrap();
            let mut seen = [here, there];
            seen.sort_by_key(|t| *t != Train::Inner);
            assert_eq!(seen, [Train::Inner, Train::Last { slot: 3 }]);
            assert_eq!(trains.callers[a.index()].load(Ordering::Relaxed), 0);
        }
    }
}
