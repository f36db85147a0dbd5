//! The pending-result table and [`CallFuture`].
//!
//! A remote call takes a place in the table under a fresh request id; the
//! response parcel (or the loss of a locality on the call's path) completes
//! it, and the call's future takes the result from the same place. The
//! table is a sharded slab: a request id names its place directly, with a
//! generation that turns stale or duplicated responses away, and the result
//! and the waker live in the place itself (no channel per call).

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

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

/// The life of one place of the table.
#[derive(Default)]
enum State {
    /// Free for the next call.
    #[default]
    Free,
    /// A call waits for its result; its future may have left a waker. The
    /// path lists the localities the call passes through (the target, the
    /// continuation's locality, the first hop of its virtual topology);
    /// losing any of them fails the call.
    Waiting {
        path: [LocalityId; 3],
        waker: Option<Waker>,
    },
    /// The result came; the future has not taken it yet.
    Done(Completion),
    /// The future was dropped first: the result will be thrown away.
    Abandoned { path: [LocalityId; 3] },
}

/// One place of a shard's slab. The generation grows every time the place
/// is freed, so a late or duplicated response for an earlier call that
/// used it finds a different generation and is ignored.
#[derive(Default)]
struct Slot {
    generation: u32,
    state: State,
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
    fn insert(&mut self, path: [LocalityId; 3]) -> Option<(u32, u32)> {
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
        slot.state = State::Waiting { path, waker: None };
        self.len += 1;
        Some((index, slot.generation))
    }

    /// The place of a request, if the request is still the one there.
    fn slot(&mut self, index: usize, generation: u32) -> Option<&mut Slot> {
        self.slots
            .get_mut(index)
            .filter(|s| s.generation == generation && !matches!(s.state, State::Free))
    }

    fn free(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        slot.state = State::Free;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index as u32);
        self.len -= 1;
    }

    /// Stores the result of a waiting call; returns whether the request was
    /// pending, and the waker to wake (after the lock is released).
    fn complete(
        &mut self,
        index: usize,
        generation: u32,
        completion: Completion,
    ) -> (bool, Option<Waker>) {
        let Some(slot) = self.slot(index, generation) else {
            return (false, None);
        };
        match &mut slot.state {
            State::Waiting { waker, .. } => {
                let waker = waker.take();
                slot.state = State::Done(completion);
                (true, waker)
            }
            State::Abandoned { .. } => {
                self.free(index);
                (true, None)
            }
            State::Done(_) | State::Free => (false, None),
        }
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
    /// the handle its future waits on.
    ///
    /// # Panics
    ///
    /// With more than 2^32 calls pending at once.
    pub(crate) fn register(self: &Arc<Self>, path: [LocalityId; 3]) -> (u64, PendingCall) {
        let shard = (self.next.fetch_add(1, Ordering::Relaxed) as usize) & (SHARDS - 1);
        let (index, generation) = self.shards[shard]
            .lock()
            .insert(path)
            .expect("more than 2^32 calls pending at once");
        let request = request_id(shard, index, generation);
        let call = PendingCall {
            table: Arc::clone(self),
            request,
            taken: false,
        };
        (request, call)
    }

    /// Completes `request`. Returns false if no such call is pending (a
    /// duplicate or forged response).
    pub(crate) fn complete(&self, request: u64, completion: Completion) -> bool {
        let (shard, index, generation) = split_id(request);
        let (pending, waker) = self.shards[shard]
            .lock()
            .complete(index, generation, completion);
        if let Some(waker) = waker {
            waker.wake();
        }
        pending
    }

    /// Fails every call whose path includes `peer`.
    pub(crate) fn fail_peer(&self, peer: LocalityId, reason: &str) {
        self.fail_where(
            |path| path.contains(&peer),
            || Failure::PeerLost(reason.to_owned()),
        );
    }

    /// Fails every pending call (shutdown).
    pub(crate) fn fail_all(&self, failure: impl Fn() -> Failure) {
        self.fail_where(|_| true, failure);
    }

    fn fail_where(&self, pred: impl Fn(&[LocalityId; 3]) -> bool, failure: impl Fn() -> Failure) {
        for shard in &self.shards {
            let mut wakers = Vec::new();
            {
                let mut shard = shard.lock();
                for index in 0..shard.slots.len() {
                    let slot = &shard.slots[index];
                    let doomed = match &slot.state {
                        State::Waiting { path, .. } | State::Abandoned { path } => pred(path),
                        State::Done(_) | State::Free => false,
                    };
                    if doomed {
                        let generation = slot.generation;
                        let (_, waker) = shard.complete(index, generation, Err(failure()));
                        wakers.extend(waker);
                    }
                }
            }
            for waker in wakers {
                waker.wake();
            }
        }
    }

    /// Number of calls waiting (or completed and not yet taken).
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len).sum()
    }
}

/// The waiting end of a pending call: polls its place in the table and
/// frees it; dropped early, it leaves the result to be thrown away.
pub(crate) struct PendingCall {
    table: Arc<PendingTable>,
    request: u64,
    taken: bool,
}

impl PendingCall {
    fn poll_completion(&mut self, cx: &mut Context<'_>) -> Poll<Completion> {
        if self.taken {
            return Poll::Ready(Err(Failure::ShuttingDown));
        }
        let (shard, index, generation) = split_id(self.request);
        let mut shard = self.table.shards[shard].lock();
        let Some(slot) = shard.slot(index, generation) else {
            self.taken = true;
            return Poll::Ready(Err(Failure::ShuttingDown));
        };
        match &mut slot.state {
            State::Waiting { waker, .. } => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            State::Done(_) => {
                let State::Done(completion) = std::mem::take(&mut slot.state) else {
                    unreachable!("matched Done above")
                };
                shard.free(index);
                self.taken = true;
                Poll::Ready(completion)
            }
            State::Abandoned { .. } | State::Free => {
                self.taken = true;
                Poll::Ready(Err(Failure::ShuttingDown))
            }
        }
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        if self.taken {
            return;
        }
        let (shard, index, generation) = split_id(self.request);
        let mut shard = self.table.shards[shard].lock();
        let Some(slot) = shard.slot(index, generation) else {
            return;
        };
        match &slot.state {
            State::Waiting { path, .. } => slot.state = State::Abandoned { path: *path },
            State::Done(_) => shard.free(index),
            State::Abandoned { .. } | State::Free => {}
        }
    }
}

enum Waiting<T> {
    Remote(PendingCall),
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
    state: Waiting<T>,
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
    pub(crate) fn remote(action: &'static str, locality: LocalityId, call: PendingCall) -> Self {
        Self::with_state(action, locality, Waiting::Remote(call))
    }

    pub(crate) fn local(
        action: &'static str,
        locality: LocalityId,
        task: JoinHandle<Result<T, Failure>>,
    ) -> Self {
        Self::with_state(action, locality, Waiting::Local(task.fallible()))
    }

    pub(crate) fn failed(action: &'static str, locality: LocalityId, failure: Failure) -> Self {
        Self::with_state(action, locality, Waiting::Failed(Some(failure)))
    }

    fn with_state(action: &'static str, locality: LocalityId, state: Waiting<T>) -> Self {
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
            Waiting::Remote(call) => match call.poll_completion(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(bytes)) => {
                    postcard::from_bytes(&bytes).map_err(|e| Failure::DecodeResult(e.to_string()))
                }
                Poll::Ready(Err(failure)) => Err(failure),
            },
            Waiting::Local(task) => match Pin::new(task).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(result)) => result,
                // The scheduler dropped the task: the job is ending.
                Poll::Ready(None) => Err(Failure::ShuttingDown),
            },
            Waiting::Failed(failure) => Err(failure
                .take()
                .expect("CallFuture polled after it returned its result")),
        };
        Poll::Ready(result.map_err(|f| CallError::new(this.action, this.locality, f)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    fn ok(byte: u8) -> Completion {
        Ok(vec![byte])
    }

    /// Counts its wake-ups.
    struct Counter(AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll(call: &mut PendingCall, waker: &Waker) -> Poll<Completion> {
        call.poll_completion(&mut Context::from_waker(waker))
    }

    #[test]
    fn a_call_completes_once_and_a_reused_place_ignores_stale_ids() {
        let table = Arc::new(PendingTable::default());
        let path = [LocalityId::new(1); 3];
        let (first, mut call) = table.register(path);
        assert!(table.complete(first, ok(1)));
        assert!(!table.complete(first, ok(2)), "a duplicate response");
        assert_eq!(poll(&mut call, Waker::noop()), Poll::Ready(ok(1)));
        assert!(
            !table.complete(first, ok(2)),
            "a response after the result was taken"
        );
        // Fill every shard so that the first place is reused.
        let calls: Vec<_> = (0..SHARDS).map(|_| table.register(path)).collect();
        let reused = calls
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
        for (id, _) in &calls {
            assert!(table.complete(*id, ok(4)));
        }
        drop(calls);
        assert_eq!(table.len(), 0, "dropped futures free their places");
        assert!(!table.complete(u64::MAX, ok(5)), "a forged id");
    }

    #[test]
    fn the_waker_is_woken_once_and_an_abandoned_call_frees_its_place() {
        let table = Arc::new(PendingTable::default());
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&counter));
        let (id, mut call) = table.register([LocalityId::new(1); 3]);
        assert_eq!(poll(&mut call, &waker), Poll::Pending);
        assert_eq!(poll(&mut call, &waker), Poll::Pending);
        assert!(table.complete(id, ok(7)));
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
        assert_eq!(poll(&mut call, &waker), Poll::Ready(ok(7)));
        assert_eq!(table.len(), 0);
        let (id, call) = table.register([LocalityId::new(1); 3]);
        drop(call);
        assert_eq!(table.len(), 1, "the place waits for the response");
        assert!(table.complete(id, ok(8)));
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn losing_a_peer_fails_only_its_calls() {
        let table = Arc::new(PendingTable::default());
        let (_, mut to_one) = table.register([LocalityId::new(1); 3]);
        let (_, mut via_one) =
            table.register([LocalityId::new(2), LocalityId::new(2), LocalityId::new(1)]);
        let (two, mut to_two) = table.register([LocalityId::new(2); 3]);
        let (_, abandoned) = table.register([LocalityId::new(1); 3]);
        drop(abandoned);
        table.fail_peer(LocalityId::new(1), "gone");
        let noop = Waker::noop();
        assert!(matches!(
            poll(&mut to_one, noop),
            Poll::Ready(Err(Failure::PeerLost(_)))
        ));
        assert!(matches!(
            poll(&mut via_one, noop),
            Poll::Ready(Err(Failure::PeerLost(_)))
        ));
        assert_eq!(poll(&mut to_two, noop), Poll::Pending);
        assert!(table.complete(two, ok(1)));
        assert_eq!(poll(&mut to_two, noop), Poll::Ready(ok(1)));
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn completions_race_with_polls_and_drops_from_other_threads() {
        let table = Arc::new(PendingTable::default());
        let (tx, rx) = std::sync::mpsc::channel::<u64>();
        let completer = {
            let table = Arc::clone(&table);
            std::thread::spawn(move || {
                let mut done = 0;
                for id in rx {
                    done += usize::from(table.complete(id, ok(id as u8)));
                }
                done
            })
        };
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&counter));
        let mut kept = Vec::new();
        for i in 0..20_000u32 {
            let (id, mut call) = table.register([LocalityId::new(1); 3]);
            let _ = poll(&mut call, &waker);
            tx.send(id).unwrap();
            if i % 3 == 0 {
                drop(call); // abandoned, maybe after completion
            } else {
                kept.push((id, call));
            }
        }
        drop(tx);
        assert_eq!(
            completer.join().unwrap(),
            20_000,
            "every request completed once"
        );
        for (id, mut call) in kept {
            assert_eq!(poll(&mut call, Waker::noop()), Poll::Ready(ok(id as u8)));
        }
        assert_eq!(table.len(), 0, "no place leaked");
    }
}
