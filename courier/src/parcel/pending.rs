//! The pending-result table and [`CallFuture`].
//!
//! A remote call registers a one-shot channel under a fresh request id; the
//! response parcel (or the loss of a locality on the call's path) completes it.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use futures::channel::oneshot;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use serde::de::DeserializeOwned;

use super::error::{CallError, Failure};
use crate::runtime::LocalityId;
use crate::sched::JoinHandle;

/// What a pending call is completed with: the encoded output or a failure.
pub(crate) type Completion = Result<Vec<u8>, Failure>;

/// Number of independently locked shards; a power of two.
const SHARDS: usize = 16;

struct Entry {
    /// The localities the call passes through (the target, and the
    /// continuation's locality if any); losing either fails the call.
    path: [LocalityId; 2],
    reply: oneshot::Sender<Completion>,
}

/// Calls waiting for their result, by request id.
pub(crate) struct PendingTable {
    next: AtomicU64,
    shards: [Mutex<FxHashMap<u64, Entry>>; SHARDS],
}

impl std::fmt::Debug for PendingTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingTable")
            .field("len", &self.len())
            .finish()
    }
}

impl Default for PendingTable {
    fn default() -> Self {
        PendingTable {
            next: AtomicU64::new(1),
            shards: std::array::from_fn(|_| Mutex::new(FxHashMap::default())),
        }
    }
}

impl PendingTable {
    fn shard(&self, request: u64) -> &Mutex<FxHashMap<u64, Entry>> {
        &self.shards[(request as usize) & (SHARDS - 1)]
    }

    /// Registers a call passing through `path`; returns its request id and
    /// the receiver of its completion.
    pub(crate) fn register(&self, path: [LocalityId; 2]) -> (u64, oneshot::Receiver<Completion>) {
        let request = self.next.fetch_add(1, Ordering::Relaxed);
        let (reply, rx) = oneshot::channel();
        self.shard(request)
            .lock()
            .insert(request, Entry { path, reply });
        (request, rx)
    }

    /// Completes `request`. Returns false if no such call is pending (a
    /// duplicate or forged response).
    pub(crate) fn complete(&self, request: u64, completion: Completion) -> bool {
        let entry = self.shard(request).lock().remove(&request);
        match entry {
            Some(entry) => {
                // The caller may have dropped its future: nothing to do then.
                let _ = entry.reply.send(completion);
                true
            }
            None => false,
        }
    }

    /// Fails every call whose path includes `peer`.
    pub(crate) fn fail_peer(&self, peer: LocalityId, reason: &str) {
        self.fail_where(
            |e| e.path.contains(&peer),
            || Failure::PeerLost(reason.to_owned()),
        );
    }

    /// Fails every pending call (shutdown).
    pub(crate) fn fail_all(&self, failure: impl Fn() -> Failure) {
        self.fail_where(|_| true, failure);
    }

    fn fail_where(&self, pred: impl Fn(&Entry) -> bool, failure: impl Fn() -> Failure) {
        for shard in &self.shards {
            let failed: Vec<Entry> = {
                let mut map = shard.lock();
                let keys: Vec<u64> = map
                    .iter()
                    .filter(|(_, e)| pred(e))
                    .map(|(k, _)| *k)
                    .collect();
                keys.iter().filter_map(|k| map.remove(k)).collect()
            };
            for entry in failed {
                let _ = entry.reply.send(Err(failure()));
            }
        }
    }

    /// Number of calls waiting.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }
}

enum State<T> {
    Remote(oneshot::Receiver<Completion>),
    Local(async_task::FallibleTask<Result<T, Failure>>),
    Failed(Option<Failure>),
}

/// The future result of a call: resolves to the action's output or to a
/// [`CallError`] saying why there is none.
///
/// Dropping it does not cancel the call; the result is then discarded.
#[must_use = "a call's result is lost unless its future is awaited"]
pub struct CallFuture<T> {
    action: &'static str,
    locality: LocalityId,
    state: State<T>,
    _output: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for CallFuture<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallFuture")
            .field("action", &self.action)
            .field("locality", &self.locality)
            .finish_non_exhaustive()
    }
}

impl<T> CallFuture<T> {
    pub(crate) fn remote(
        action: &'static str,
        locality: LocalityId,
        rx: oneshot::Receiver<Completion>,
    ) -> Self {
        Self::with_state(action, locality, State::Remote(rx))
    }

    pub(crate) fn local(
        action: &'static str,
        locality: LocalityId,
        task: JoinHandle<Result<T, Failure>>,
    ) -> Self {
        Self::with_state(action, locality, State::Local(task.fallible()))
    }

    pub(crate) fn failed(action: &'static str, locality: LocalityId, failure: Failure) -> Self {
        Self::with_state(action, locality, State::Failed(Some(failure)))
    }

    fn with_state(action: &'static str, locality: LocalityId, state: State<T>) -> Self {
        CallFuture {
            action,
            locality,
            state,
            _output: PhantomData,
        }
    }

    /// The full path of the called action.
    pub fn action(&self) -> &'static str {
        self.action
    }

    /// The locality the call went to.
    pub fn locality(&self) -> LocalityId {
        self.locality
    }
}

impl<T> Unpin for CallFuture<T> {}

impl<T: DeserializeOwned> Future for CallFuture<T> {
    type Output = Result<T, CallError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let result = match &mut this.state {
            State::Remote(rx) => match Pin::new(rx).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(Ok(bytes))) => {
                    postcard::from_bytes(&bytes).map_err(|e| Failure::DecodeResult(e.to_string()))
                }
                Poll::Ready(Ok(Err(failure))) => Err(failure),
                Poll::Ready(Err(oneshot::Canceled)) => Err(Failure::ShuttingDown),
            },
            State::Local(task) => match Pin::new(task).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(result)) => result,
                // The scheduler dropped the task: the job is ending.
                Poll::Ready(None) => Err(Failure::ShuttingDown),
            },
            State::Failed(failure) => Err(failure
                .take()
                .expect("CallFuture polled after it returned its result")),
        };
        Poll::Ready(result.map_err(|f| CallError::new(this.action, this.locality, f)))
    }
}
