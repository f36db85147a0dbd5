//! The watchdog: a task that runs longer than a threshold is reported
//! while it runs (a log line naming the worker, how long, and the action
//! whose received calls it runs, if any) and counted
//! (`/threads/count/long-running`), so that "stuck" is visible instead of
//! a job that waits in silence.
//!
//! Workers publish when their current poll began and what it was
//! labelled with (`sched`: [`label_poll`](crate::sched::label_poll));
//! the locality's monitor thread (`monitor.rs`) reads them every round
//! and reports each long poll once; this file keeps the threshold, the
//! count, and the words for what a poll runs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::action::registry;
use crate::ids::ActionId;

/// The default threshold: a task is a few microseconds; ten seconds is a
/// handler that never finishes or a program that blocks a worker.
pub const DEFAULT_WATCHDOG: Duration = Duration::from_secs(10);

/// The poll label of a run of received calls of `action`.
pub(crate) fn action_label(action: ActionId) -> u64 {
    // Never 0, which means "not labelled".
    action.to_bits().max(1)
}

/// The watchdog of one locality.
#[derive(Debug)]
pub(crate) struct Watchdog {
    threshold: Option<Duration>,
    /// Polls that ran past the threshold, ever.
    long_running: AtomicU64,
}

/// What the monitor thread remembers between two rounds: the poll of each
/// worker already reported (by its start).
#[derive(Debug, Default)]
pub(super) struct Reported(pub(super) Vec<u64>);

impl Watchdog {
    /// A watchdog reporting polls longer than `threshold` (`None`: none).
    pub(crate) fn new(threshold: Option<Duration>) -> Watchdog {
        Watchdog {
            threshold,
            long_running: AtomicU64::new(0),
        }
    }

    /// How often the monitor should look: a fifth of the threshold, at
    /// most a second.
    pub(super) fn interval(&self) -> Option<Duration> {
        self.threshold
            .map(|t| (t / 5).clamp(Duration::from_millis(1), Duration::from_secs(1)))
    }

    /// The threshold, if it watches.
    pub(super) fn threshold(&self) -> Option<Duration> {
        self.threshold
    }

    /// Counts a poll that ran past the threshold.
    pub(super) fn count_long_running(&self) {
        self.long_running.fetch_add(1, Ordering::Relaxed);
    }

    /// Polls that ran past the threshold so far (`/threads/count/long-running`).
    pub(crate) fn long_running(&self) -> u64 {
        self.long_running.load(Ordering::Relaxed)
    }
}

/// What a poll labelled `label` runs.
pub(super) fn describe(label: u64) -> String {
    if label == 0 {
        return "a task of the program (its main function, a spawned task or an async \
                action's continuation)"
            .into();
    }
    match registry()
        .entries()
        .iter()
        .find(|e| action_label(e.id()) == label)
    {
        Some(entry) => format!("received calls of `{}`", entry.name()),
        None => "received calls of an unknown action".into(),
    }
}
