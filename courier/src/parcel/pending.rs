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
use serde::de::DeserializeOwned;

use super::error::{CallError, Failure};
use crate::runtime::LocalityId;
use crate::sched::JoinHandle;

/// What a pending call is completed with: the encoded output or a failure.
pub(crate) type Completion = Result<Vec<u8>, Failure>;

/// Number of independently locked shards; a power of two.
const SHARDS: usize = 16;
const SHARD_BITS: u32 = SHARDS.trailing_zeros();

struct Entry {
    /// The localities the call passes through (the target, and the
    /// continuation's locality if any); losing either fails the call.
    path: [LocalityId; 2],
    reply: oneshot::Sender<Completion>,
}

/// One place of a shard's slab. The generation grows every time the place
/// is freed, so a late or duplicated response for an earlier call that
/// used it finds a different generation and is ignored.
#[derive(Default)]
struct Slot {
    generation: u32,
    entry: Option<Entry>,
}

/// The calls of one shard: a slab indexed by the request id, reusing freed
/// places (no hashing, and memory stays put from one burst to the next).
#[derive(Default)]
struct Shard {
    slots: Vec<Slot>,
    free: Vec<u32>,
    len: usize,
}

/// A request id: `generation << 32 | index << SHARD_BITS | shard`.
fn request_id(shard: usize, index: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | (u64::from(index) << SHARD_BITS) | shard as u64
}

/// The (shard, index, generation) of a request id.
fn split_id(request: u64) -> (usize, usize, u32) {
    let low = request as u32;
    (
        (low as usize) & (SHARDS - 1),
        (low >> SHARD_BITS) as usize,
        (request >> 32) as u32,
    )
}

impl Shard {
    fn insert(&mut self, entry: Entry) -> Option<(u32, u32)> {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let index = u32::try_from(self.slots.len())
                    .ok()
                    .filter(|&i| i < (u32::MAX >> SHARD_BITS))?;
                self.slots.push(Slot::default());
                index
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.entry = Some(entry);
        self.len += 1;
        Some((index, slot.generation))
    }

    fn remove(&mut self, index: usize, generation: u32) -> Option<Entry> {
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        let entry = slot.entry.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index as u32);
        self.len -= 1;
        Some(entry)
    }
}

/// Calls waiting for their result, by request id.
pub(crate) struct PendingTable {
    next: AtomicU64,
    shards: [Mutex<Shard>; SHARDS],
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
            next: AtomicU64::new(0),
            shards: std::array::from_fn(|_| Mutex::default()),
        }
    }
}

impl PendingTable {
    /// Registers a call passing through `path`; returns its request id and
    /// the receiver of its completion.
    ///
    /// # Panics
    ///
    /// With more than 2^32 calls pending at once.
    pub(crate) fn register(&self, path: [LocalityId; 2]) -> (u64, oneshot::Receiver<Completion>) {
        let shard = (self.next.fetch_add(1, Ordering::Relaxed) as usize) & (SHARDS - 1);
        let (reply, rx) = oneshot::channel();
        let (index, generation) = self.shards[shard]
            .lock()
            .insert(Entry { path, reply })
            .expect("more than 2^32 calls pending at once");
        (request_id(shard, index, generation), rx)
    }

    /// Completes `request`. Returns false if no such call is pending (a
    /// duplicate or forged response).
    pub(crate) fn complete(&self, request: u64, completion: Completion) -> bool {
        let (shard, index, generation) = split_id(request);
        let entry = self.shards[shard].lock().remove(index, generation);
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
                let mut shard = shard.lock();
                let doomed: Vec<(usize, u32)> = shard
                    .slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.entry.as_ref().is_some_and(&pred))
                    .map(|(i, s)| (i, s.generation))
                    .collect();
                doomed
                    .into_iter()
                    .filter_map(|(i, g)| shard.remove(i, g))
                    .collect()
            };
            for entry in failed {
                let _ = entry.reply.send(Err(failure()));
            }
        }
    }

    /// Number of calls waiting.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len).sum()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(byte: u8) -> Completion {
        Ok(vec![byte])
    }

    #[test]
    fn a_call_completes_once_and_a_reused_place_ignores_stale_ids() {
        let table = PendingTable::default();
        let path = [LocalityId::new(1); 2];
        let (first, mut rx) = table.register(path);
        assert!(table.complete(first, ok(1)));
        assert_eq!(rx.try_recv().unwrap(), Some(ok(1)));
        assert!(!table.complete(first, ok(2)), "a duplicate response");
        // Fill every shard so that the first place is reused.
        let ids: Vec<_> = (0..SHARDS).map(|_| table.register(path)).collect();
        let reused = ids
            .iter()
            .find(|(id, _)| split_id(*id).0 == split_id(first).0)
            .unwrap();
        assert_eq!(split_id(reused.0).1, split_id(first).1);
        assert_ne!(reused.0, first);
        assert!(
            !table.complete(first, ok(3)),
            "a stale id for a reused place"
        );
        assert_eq!(table.len(), SHARDS);
        for (id, _) in &ids {
            assert!(table.complete(*id, ok(4)));
        }
        assert_eq!(table.len(), 0);
        assert!(!table.complete(u64::MAX, ok(5)), "a forged id");
    }

    #[test]
    fn losing_a_peer_fails_only_its_calls() {
        let table = PendingTable::default();
        let (_, mut to_one) = table.register([LocalityId::new(1); 2]);
        let (_, mut via_one) = table.register([LocalityId::new(2), LocalityId::new(1)]);
        let (two, mut to_two) = table.register([LocalityId::new(2); 2]);
        table.fail_peer(LocalityId::new(1), "gone");
        assert!(matches!(
            to_one.try_recv(),
            Ok(Some(Err(Failure::PeerLost(_))))
        ));
        assert!(matches!(
            via_one.try_recv(),
            Ok(Some(Err(Failure::PeerLost(_))))
        ));
        assert_eq!(to_two.try_recv().unwrap(), None);
        assert!(table.complete(two, ok(1)));
        assert_eq!(table.len(), 0);
    }
}
