//! Responses that leave with the run of calls they answer.
//!
//! Under adaptive coalescing, a responder has no traffic of its own of
//! an action to tune the responses from (its tuner sees the calls it
//! sends), so the responses follow the coalescing the caller chose for
//! the calls: while a task handles a received run of calls whole, the
//! responses it makes for the run's caller wait in the worker's buffer
//! without arming the flush timer (which costs the timer thread a
//! wake-up and the arm a system call on a sparse stream), and the task
//! sends them in one message when the run is done
//! ([`Aggregator::flush_responses`](super::Aggregator::flush_responses)).
//! A run of one call gets its response at once, as with coalescing off;
//! a run of a thousand gets one message.

use std::cell::Cell;

use crate::ids::LocalityId;

thread_local! {
    /// The (action slot, caller) whose run of calls this thread is
    /// handling in an [`Answering`] scope, if any.
    static ANSWERING: Cell<Option<(usize, LocalityId)>> = const { Cell::new(None) };
}

/// While alive, the responses of the action in `slot` to `caller` made on
/// this thread are the run's (see the module docs); ends the scope when
/// dropped, also when unwinding.
#[derive(Debug)]
pub(crate) struct Answering(Option<(usize, LocalityId)>);

impl Answering {
    /// Opens the scope of a run of calls of the action in `slot` from
    /// `caller`.
    pub(crate) fn enter(slot: usize, caller: LocalityId) -> Answering {
        Answering(ANSWERING.replace(Some((slot, caller))))
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        ANSWERING.set(self.0);
    }
}

/// Whether a response of the action in `slot` to `dest` belongs to the
/// run this thread is answering: it is sent when the run is done.
#[inline]
pub(crate) fn answering(slot: usize, dest: LocalityId) -> bool {
    ANSWERING.get() == Some((slot, dest))
}
