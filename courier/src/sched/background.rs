//! The seam between the scheduler and the network: [`BackgroundWork`],
//! what a worker does between tasks and while idle.

use std::time::Duration;

/// Work a worker does between tasks and while idle: network progress.
///
/// This is the seam between the scheduler and the transports; the scheduler
/// knows nothing else about the network.
pub(crate) trait BackgroundWork: Send + Sync + 'static {
    /// Makes whatever progress is possible without blocking. Returns whether
    /// anything was done (a frame read or written).
    fn poll(&self) -> bool;

    /// Blocks until progress was made, [`wake`](Self::wake) was called, or
    /// `timeout` passed. Must return at once if `wake` was called since the
    /// previous `block` returned (wake-ups are sticky).
    fn block(&self, timeout: Duration) -> BlockOutcome;

    /// Interrupts a blocked (or the next) [`block`](Self::block) call.
    fn wake(&self);

    /// Called by a worker that ran out of tasks, before it polls, spins or
    /// parks: the place to send what it was holding back (its coalescing
    /// buffers). Returns whether it sent anything.
    fn before_idle(&self) -> bool {
        false
    }

    /// Whether what this locality's tasks wait for comes from the
    /// network alone: results of its calls are due, and no task sleeps on
    /// a timer (whose thread must run to wake it). An idle worker then
    /// spins on after recent traffic instead of parking (`spin.rs`).
    fn awaits_network(&self) -> bool {
        false
    }

    /// In how many ns the earliest task's wake-up that the workers watch
    /// is due (0: it is due), if any: an idle worker spins for it
    /// (`spin.rs`).
    fn next_watched_in_ns(&self) -> Option<u64> {
        None
    }

    /// Wakes, from this worker's thread, the tasks whose wake-up on a
    /// timer is due; returns whether there were any.
    fn wake_due(&self) -> bool {
        false
    }
}

/// What a [`BackgroundWork::block`] call did.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockOutcome {
    /// The call blocked and then spent `work_ns` nanoseconds making
    /// progress (reading, decoding, dispatching); the worker counts that
    /// time as background work rather than idle time.
    Blocked { work_ns: u64 },
    /// Another thread holds the progress path; the caller should retry soon.
    Busy,
    /// There is nothing to block on (no network): park on the scheduler.
    Unsupported,
}

/// Background work for a locality without a network.
#[derive(Debug, Default)]
pub(crate) struct NoBackgroundWork;

impl BackgroundWork for NoBackgroundWork {
    fn poll(&self) -> bool {
        false
    }
    fn block(&self, _timeout: Duration) -> BlockOutcome {
        BlockOutcome::Unsupported
    }
    fn wake(&self) {}
}
