//! [`Collectives`]: each locality's record of its collectives (epochs,
//! values gathered at the root, results not yet taken, quiescence answers)
//! and [`Waiting`], the future of one collective step. What the steps do is
//! in `collective.rs`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::ids::LocalityId;

/// What a waiting task waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Wait {
    /// The values of a gather, by epoch.
    Gathered(u64),
    /// The answer to a quiescence request, by id.
    Quiet(u64),
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// At the root: the values of the gathers in progress, by epoch.
    pub(super) gathering: FxHashMap<u64, Vec<Option<Vec<u8>>>>,
    /// Finished gathers of this locality not yet taken, by epoch.
    pub(super) gathered: FxHashMap<u64, Vec<Vec<u8>>>,
    /// Answered quiescence requests of this locality not yet taken.
    pub(super) quiet: FxHashSet<u64>,
    pub(super) waiters: FxHashMap<Wait, Waker>,
    /// Why every collective fails from now on (a locality was lost).
    pub(super) failed: Option<String>,
    /// At the root: the quiescence requests not answered yet.
    pub(super) requests: Vec<(LocalityId, u64)>,
    /// At the root: whether a thread is running quiescence waves.
    pub(super) waves_running: bool,
}

/// The collectives and quiescence requests of one locality.
#[derive(Debug, Default)]
pub(crate) struct Collectives {
    pub(super) next_epoch: AtomicU64,
    pub(super) next_request: AtomicU64,
    pub(super) state: Mutex<State>,
}

impl Collectives {
    pub(super) fn finish(&self, wait: Wait, state: &mut State) {
        if let Some(waker) = state.waiters.remove(&wait) {
            waker.wake();
        }
    }

    /// Fails every collective of this locality, now and later: a locality
    /// was lost.
    pub(crate) fn fail(&self, reason: &str) {
        let mut state = self.state.lock();
        state.failed.get_or_insert_with(|| reason.to_owned());
        for (_, waker) in state.waiters.drain() {
            waker.wake();
        }
    }

    /// The values of gather `epoch` came from the root.
    pub(super) fn gathered(&self, epoch: u64, values: Vec<Vec<u8>>) {
        let mut state = self.state.lock();
        state.gathered.insert(epoch, values);
        self.finish(Wait::Gathered(epoch), &mut state);
    }

    /// The root answered quiescence request `id`.
    pub(super) fn quiet(&self, id: u64) {
        let mut state = self.state.lock();
        state.quiet.insert(id);
        self.finish(Wait::Quiet(id), &mut state);
    }
}

/// The future of one collective step on this locality.
pub(super) struct Waiting<'a> {
    pub(super) collectives: &'a Collectives,
    pub(super) wait: Wait,
}

impl Future for Waiting<'_> {
    type Output = Result<Vec<Vec<u8>>, String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.collectives.state.lock();
        let done = match self.wait {
            Wait::Gathered(epoch) => state.gathered.remove(&epoch),
            Wait::Quiet(id) => state.quiet.remove(&id).then(Vec::new),
        };
        if let Some(values) = done {
            return Poll::Ready(Ok(values));
        }
        if let Some(reason) = &state.failed {
            return Poll::Ready(Err(reason.clone()));
        }
        state.waiters.insert(self.wait, cx.waker().clone());
        Poll::Pending
    }
}
