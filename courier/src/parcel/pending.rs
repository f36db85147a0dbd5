//! The pending-result table, [`CallFuture`] and [`BatchFuture`].
//!
//! A remote call takes a place in the table under a fresh request id; the
//! response parcel (or the loss of a locality on the call's path) completes
//! it, and the call's future takes the result from the same place. The
//! table is a sharded slab: a request id names its place directly, with a
//! generation that turns stale or duplicated responses away, and the result
//! and the waker live in the place itself (no channel per call).
//!
//! A batch of calls ([`Runtime::call_batch`](crate::Runtime::call_batch))
//! takes one place for all its calls: each call carries the batch's request
//! id and its own *part* number, and each response is decoded straight into
//! the batch's typed result vector, so a batch of a million calls makes one
//! future and one waker, not a million.

use std::any::Any;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use crossbeam_utils::CachePadded;
use serde::de::DeserializeOwned;

use super::error::{CallError, Failure};
use crate::ids::LocalityId;
use crate::sync::{Mutex, MutexGuard};

/// Number of independently locked shards; a power of two.
const SHARDS: usize = 16;
const SHARD_BITS: u32 = SHARDS.trailing_zeros();

/// The localities a batch of calls sent to: losing any fails it. A bit per
/// locality.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Path(Box<[u64]>);

impl Path {
    /// The path of a batch that sent nothing yet, among `count` localities.
    pub(crate) fn empty_set(count: u32) -> Path {
        Path(vec![0u64; (count as usize).div_ceil(64)].into_boxed_slice())
    }

    /// The path of a batch of calls to `dests`, among `count` localities.
    #[cfg(test)]
    pub(crate) fn of_batch(count: u32, dests: impl IntoIterator<Item = LocalityId>) -> Path {
        let mut path = Path::empty_set(count);
        for d in dests {
            path.insert(d);
        }
        path
    }

    /// Adds `peer` to the path.
    pub(crate) fn insert(&mut self, peer: LocalityId) {
        if let Some(word) = self.0.get_mut(peer.index() / 64) {
            *word |= 1 << (peer.index() % 64);
        }
    }

    /// Whether the path passes through `peer`.
    pub(crate) fn contains(&self, peer: LocalityId) -> bool {
        self.0
            .get(peer.index() / 64)
            .is_some_and(|w| w & (1 << (peer.index() % 64)) != 0)
    }
}

/// Where the typed results of a batch go as their responses come.
pub(crate) trait BatchSink: Send + 'static {
    /// Decodes the result of part `part`. Returns whether it was new (a
    /// duplicated or out-of-range part is ignored).
    fn put(&mut self, part: u32, bytes: &[u8]) -> Result<bool, Failure>;

    /// Forgets the parts from `parts` on: the batch sent fewer calls than
    /// it made room for.
    fn truncate(&mut self, parts: u32);

    /// The sink as `Any`, for the future to take its typed results back.
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

/// The results of a batch of calls of an action returning `T`.
pub(crate) struct BatchResults<T> {
    values: Vec<Option<T>>,
    /// How many calls the batch has sent so far: a result for a part not
    /// sent yet is forged (and must not make the vector grow).
    sent: Arc<AtomicU32>,
}

impl<T> BatchResults<T> {
    /// Results with room for `expected` calls; `sent` counts the calls sent.
    pub(crate) fn new(expected: usize, sent: Arc<AtomicU32>) -> Self {
        BatchResults {
            values: Vec::with_capacity(expected),
            sent,
        }
    }
}

impl<T: DeserializeOwned + Send + 'static> BatchSink for BatchResults<T> {
    fn put(&mut self, part: u32, bytes: &[u8]) -> Result<bool, Failure> {
        if part >= self.sent.load(Ordering::Acquire) {
            return Ok(false);
        }
        let index = part as usize;
        if index >= self.values.len() {
            self.values.resize_with(index + 1, || None);
        }
        let place = &mut self.values[index];
        if place.is_some() {
            return Ok(false);
        }
        let value =
            super::decode::decode(bytes).map_err(|e| Failure::DecodeResult(e.to_string()))?;
        *place = Some(value);
        Ok(true)
    }

    fn truncate(&mut self, parts: u32) {
        self.values.resize_with(parts as usize, || None);
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

/// What a finished call or batch leaves for its future.
enum Output {
    /// A single call's encoded output.
    Single(Bytes),
    /// A batch's results, every part filled.
    Batch(Box<dyn BatchSink>),
}

/// A failure, and the locality it came from when known.
type Failed = (Failure, Option<LocalityId>);

/// What a batch keeps in its place of the table, beside what any call does.
struct Batch {
    /// Where it sent calls.
    path: Path,
    /// How many calls it sent; unknown (`None`) until it is sealed.
    parts: Option<u32>,
    /// How many results came.
    done: u32,
    sink: Option<Box<dyn BatchSink>>,
}

/// The life of one place of the table. Kept small (a place is 48 bytes):
/// a million calls in flight is a common case, and their places are
/// touched three times each.
#[derive(Default)]
enum State {
    /// Free for the next call.
    #[default]
    Free,
    /// A call waits for its result; its future may have left a waker.
    /// `hops` are the localities a single call passes through (the target,
    /// the continuation's locality, the first hop of its virtual topology);
    /// a batch keeps its own.
    Waiting {
        hops: [LocalityId; 3],
        waker: Option<Waker>,
        batch: Option<Box<Batch>>,
    },
    /// Every result came (or one failure); the future has not taken it yet.
    Done(Result<Output, Box<Failed>>),
    /// The future was dropped first: the results are thrown away as they
    /// come, `remaining` more of them.
    Abandoned {
        hops: [LocalityId; 3],
        remaining: u32,
        batch: Option<Box<Batch>>,
    },
}

/// Whether losing `peer` fails a call with these hops and batch.
fn involves(hops: &[LocalityId; 3], batch: &Option<Box<Batch>>, peer: LocalityId) -> bool {
    match batch {
        Some(batch) => batch.path.contains(peer),
        None => hops.contains(&peer),
    }
}

/// Whether a response from `from` to a call with these hops and batch
/// comes from a locality the call did not go to (the remote end of a
/// request is checked, not just its id). A batch's path is known once it
/// is sealed; until then, while it still sends, any member may answer.
fn is_stranger(hops: &[LocalityId; 3], batch: &Option<Box<Batch>>, from: LocalityId) -> bool {
    match batch {
        Some(b) if b.parts.is_none() => false,
        _ => !involves(hops, batch, from),
    }
}

/// One place of a shard's slab. The generation changes every time the place
/// is freed, so a late or duplicated response for an earlier call that
/// used it finds a different generation and is ignored. It changes to a
/// pseudo-random value from a per-process random seed: request ids travel
/// to other localities, and one must not be able to tell from the ids it
/// sees which ids other callers wait on.
#[derive(Default)]
struct Slot {
    generation: u32,
    state: State,
}

/// The calls of one shard: a slab indexed by the request id, reusing freed
/// places (no hashing, and memory stays put from one burst to the next).
struct Shard {
    slots: Vec<Slot>,
    free: Vec<u32>,
    len: usize,
    /// The state of the generator of generations (xorshift64*, never 0).
    rng: u64,
}

impl Default for Shard {
    fn default() -> Self {
        use std::hash::{BuildHasher, Hasher};
        // std's per-process random keys: a seed no peer can know.
        let seed = std::hash::RandomState::new().build_hasher().finish();
        Shard {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
            rng: seed | 1,
        }
    }
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

/// How a response completes a place.
pub(crate) enum Response<'a> {
    /// The encoded output, a part of the frame that brought it.
    Output(&'a Bytes, &'a [u8]),
    /// Why there is none.
    Failed(Failure),
}

impl Shard {
    /// The next generation: pseudo-random, never `old`.
    fn next_generation(&mut self, old: u32) -> u32 {
        loop {
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            let generation = (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32;
            if generation != old {
                return generation;
            }
        }
    }

    fn insert(&mut self, state: State) -> Option<(u32, u32)> {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let index = u32::try_from(self.slots.len())
                    .ok()
                    .filter(|&i| i < (u32::MAX >> SHARD_BITS))?;
                let generation = self.next_generation(0);
                self.slots.push(Slot {
                    generation,
                    state: State::Free,
                });
                index
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.state = state;
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
        let old = slot.generation;
        self.slots[index].generation = self.next_generation(old);
        self.free.push(index as u32);
        self.len -= 1;
    }

    /// Applies the response for `part` of a pending request from `from`;
    /// returns whether the request was pending, and the waker to wake
    /// (after the lock is released).
    fn complete(
        &mut self,
        index: usize,
        generation: u32,
        part: u32,
        from: Option<LocalityId>,
        response: Response<'_>,
    ) -> (bool, Option<Waker>) {
        let Some(slot) = self.slot(index, generation) else {
            return (false, None);
        };
        match &mut slot.state {
            State::Waiting {
                waker, batch, hops, ..
            } => {
                // A response from a locality the call or batch did not go
                // to: another member guessing request ids.
                if from.is_some_and(|f| is_stranger(hops, batch, f)) {
                    return (false, None);
                }
                let result = match (response, batch) {
                    (Response::Failed(failure), _) => Err(Box::new((failure, from))),
                    // A part number for a single call: forged.
                    (Response::Output(..), None) if part != 0 => return (false, None),
                    (Response::Output(frame, bytes), None) => {
                        Ok(Output::Single(frame.slice_ref(bytes)))
                    }
                    (Response::Output(_, bytes), Some(batch)) => {
                        let sink = batch.sink.as_mut().expect("a waiting batch has its sink");
                        match sink.put(part, bytes) {
                            Ok(false) => return (false, None),
                            Err(failure) => Err(Box::new((failure, from))),
                            Ok(true) => {
                                batch.done += 1;
                                if batch.parts != Some(batch.done) {
                                    return (true, None);
                                }
                                Ok(Output::Batch(
                                    batch.sink.take().expect("a waiting batch has its sink"),
                                ))
                            }
                        }
                    }
                };
                let waker = waker.take();
                slot.state = State::Done(result);
                (true, waker)
            }
            State::Abandoned {
                remaining,
                hops,
                batch,
            } => {
                if from.is_some_and(|f| is_stranger(hops, batch, f)) {
                    return (false, None);
                }
                if *remaining > 1 && matches!(response, Response::Output(..)) {
                    *remaining -= 1;
                } else {
                    self.free(index);
                }
                (true, None)
            }
            State::Done(_) | State::Free => (false, None),
        }
    }
}

/// Calls waiting for their result, by request id.
pub(crate) struct PendingTable {
    shards: [Mutex<Shard>; SHARDS],
    /// Each shard's number of places taken, as of its last change: read
    /// without the locks by [`is_empty`](Self::is_empty). A cache line
    /// each: threads that register on different shards share no line
    /// for it.
    held: [CachePadded<AtomicUsize>; SHARDS],
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
            shards: std::array::from_fn(|_| Mutex::default()),
            held: std::array::from_fn(|_| CachePadded::new(AtomicUsize::new(0))),
        }
    }
}

/// The shard the calling thread registers its next call in: each thread
/// goes round the shards on its own, so that threads rarely meet on a
/// shard and no counter is shared between them.
fn next_shard() -> usize {
    thread_local! {
        static NEXT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    NEXT.with(|next| {
        let shard = next.get();
        next.set(shard.wrapping_add(1));
        shard & (SHARDS - 1)
    })
}

impl PendingTable {
    fn insert(self: &Arc<Self>, state: State) -> (u64, PendingCall) {
        let shard = next_shard();
        let (index, generation) = {
            let mut guard = self.shards[shard].lock();
            let place = guard.insert(state);
            self.mirror(shard, &guard);
            place.expect("more than 2^32 calls pending at once")
        };
        let request = request_id(shard, index, generation);
        let call = PendingCall {
            table: Arc::clone(self),
            request,
            taken: false,
        };
        (request, call)
    }

    /// Registers a call passing through `hops`; returns its request id and
    /// the handle its future waits on.
    ///
    /// # Panics
    ///
    /// With more than 2^32 calls pending at once.
    pub(crate) fn register(self: &Arc<Self>, hops: [LocalityId; 3]) -> (u64, PendingCall) {
        self.insert(State::Waiting {
            hops,
            waker: None,
            batch: None,
        })
    }

    /// Registers a batch of calls whose results `sink` decodes, before its
    /// calls are sent; [`seal`](Self::seal) says how many were and where.
    pub(crate) fn register_batch(self: &Arc<Self>, sink: Box<dyn BatchSink>) -> (u64, PendingCall) {
        self.insert(State::Waiting {
            hops: [LocalityId::ROOT; 3],
            waker: None,
            batch: Some(Box::new(Batch {
                path: Path::empty_set(0),
                parts: None,
                done: 0,
                sink: Some(sink),
            })),
        })
    }

    /// Says that batch `request` sent `parts` calls, to the localities of
    /// `path`: it is complete once that many results came (at once, if they
    /// all did already).
    pub(crate) fn seal(&self, request: u64, parts: u32, path: Path) {
        let (shard, index, generation) = split_id(request);
        let mut shard = self.shards[shard].lock();
        let Some(slot) = shard.slot(index, generation) else {
            return;
        };
        let State::Waiting {
            batch: Some(batch),
            waker,
            ..
        } = &mut slot.state
        else {
            return;
        };
        batch.path = path;
        batch.parts = Some(parts);
        let sink = batch.sink.as_mut().expect("a waiting batch has its sink");
        sink.truncate(parts);
        if batch.done == parts {
            let sink = batch.sink.take().expect("a waiting batch has its sink");
            debug_assert!(waker.is_none(), "a batch's future comes after its seal");
            slot.state = State::Done(Ok(Output::Batch(sink)));
        }
    }

    /// Completes `part` of `request` with a response from `from` (`None`:
    /// from this locality). Returns false if no such call is pending (a
    /// duplicate or forged response).
    pub(crate) fn complete(
        &self,
        request: u64,
        part: u32,
        from: Option<LocalityId>,
        response: Response<'_>,
    ) -> bool {
        let (shard, index, generation) = split_id(request);
        let (pending, waker) = {
            let mut guard = self.shards[shard].lock();
            let completed = guard.complete(index, generation, part, from, response);
            self.mirror(shard, &guard);
            completed
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        pending
    }

    /// A completer for the responses of one run from `from`: it keeps a
    /// shard locked while consecutive responses fall in it (the parts of a
    /// batch share its request, so a run of them takes the lock once), and
    /// wakes the waiting tasks when it is dropped.
    pub(crate) fn completer(&self, from: Option<LocalityId>) -> Completer<'_> {
        Completer {
            table: self,
            from,
            shard: None,
            wakers: Vec::new(),
        }
    }

    /// Fails `request` at once (its call could not be sent).
    pub(crate) fn fail(&self, request: u64, failure: Failure) {
        self.complete(request, 0, None, Response::Failed(failure));
    }

    /// Fails every call whose path includes `peer`.
    pub(crate) fn fail_peer(&self, peer: LocalityId, reason: &str) {
        self.fail_where(
            |hops, batch| involves(hops, batch, peer),
            || Failure::PeerLost(reason.to_owned()),
            Some(peer),
        );
    }

    /// Fails every pending call (shutdown).
    pub(crate) fn fail_all(&self, failure: impl Fn() -> Failure) {
        self.fail_where(|_, _| true, failure, None);
    }

    fn fail_where(
        &self,
        pred: impl Fn(&[LocalityId; 3], &Option<Box<Batch>>) -> bool,
        failure: impl Fn() -> Failure,
        from: Option<LocalityId>,
    ) {
        for (number, shard) in self.shards.iter().enumerate() {
            let mut wakers = Vec::new();
            {
                let mut shard = shard.lock();
                for index in 0..shard.slots.len() {
                    let slot = &shard.slots[index];
                    let doomed = match &slot.state {
                        State::Waiting { hops, batch, .. }
                        | State::Abandoned { hops, batch, .. } => pred(hops, batch),
                        State::Done(_) | State::Free => false,
                    };
                    if doomed {
                        let generation = slot.generation;
                        let (_, waker) =
                            shard.complete(index, generation, 0, from, Response::Failed(failure()));
                        wakers.extend(waker);
                    }
                }
                self.mirror(number, &shard);
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

    /// Whether no call waits (or was completed and not yet taken), as of
    /// each shard's last change: without taking the locks, for a worker
    /// deciding whether to wait for responses (`sched/spin.rs`).
    pub(crate) fn is_empty(&self) -> bool {
        self.held.iter().all(|h| h.load(Ordering::Relaxed) == 0)
    }

    /// Publishes shard `shard`'s number of places taken, `guard` its lock.
    fn mirror(&self, shard: usize, guard: &Shard) {
        self.held[shard].store(guard.len, Ordering::Relaxed);
    }
}

/// Completes the responses of one run; see [`PendingTable::completer`].
pub(crate) struct Completer<'a> {
    table: &'a PendingTable,
    from: Option<LocalityId>,
    shard: Option<(usize, MutexGuard<'a, Shard>)>,
    wakers: Vec<Waker>,
}

impl Completer<'_> {
    /// Completes `part` of `request`; returns false if no such call is
    /// pending (a duplicate or forged response). Never inlined: inlined
    /// into the receive path's frame handler (`runtime/receive.rs`),
    /// which it was after a change there of a few lines, the two took
    /// 9.5 % of ig's samples against 6.8 % apart, and ig and toy ran
    /// 3–5 % slower (BENCHMARKS.md, issue #15, nineteenth part).
    #[inline(never)]
    pub(crate) fn complete(&mut self, request: u64, part: u32, response: Response<'_>) -> bool {
        let (shard, index, generation) = split_id(request);
        let guard = match &mut self.shard {
            Some((held, guard)) if *held == shard => guard,
            held => {
                *held = None;
                &mut held.insert((shard, self.table.shards[shard].lock())).1
            }
        };
        let (pending, waker) = guard.complete(index, generation, part, self.from, response);
        self.table.mirror(shard, guard);
        self.wakers.extend(waker);
        pending
    }
}

impl Drop for Completer<'_> {
    fn drop(&mut self) {
        self.shard = None;
        for waker in self.wakers.drain(..) {
            waker.wake();
        }
    }
}

/// The waiting end of a pending call: polls its place in the table and
/// frees it; dropped early, it leaves the results to be thrown away.
pub(crate) struct PendingCall {
    table: Arc<PendingTable>,
    request: u64,
    taken: bool,
}

impl PendingCall {
    /// Polls a batch for its sink, taken back as `S`; a failure comes with
    /// the locality to blame, `here` when unknown.
    pub(crate) fn poll_sink<S: 'static>(
        &mut self,
        cx: &mut Context<'_>,
        here: LocalityId,
    ) -> Poll<Result<Box<S>, (Failure, LocalityId)>> {
        match self.poll_completion(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(Output::Batch(sink))) => Poll::Ready(Ok(sink
                .into_any()
                .downcast::<S>()
                .unwrap_or_else(|_| unreachable!("a batch's sink holds its output type")))),
            Poll::Ready(Ok(Output::Single(_))) => {
                unreachable!("a batch completed as a single call")
            }
            Poll::Ready(Err(failed)) => {
                let (failure, from) = *failed;
                Poll::Ready(Err((failure, from.unwrap_or(here))))
            }
        }
    }

    fn poll_completion(&mut self, cx: &mut Context<'_>) -> Poll<Result<Output, Box<Failed>>> {
        if self.taken {
            return Poll::Ready(Err(Box::new((Failure::ShuttingDown, None))));
        }
        let (shard_number, index, generation) = split_id(self.request);
        let mut shard = self.table.shards[shard_number].lock();
        let Some(slot) = shard.slot(index, generation) else {
            self.taken = true;
            return Poll::Ready(Err(Box::new((Failure::ShuttingDown, None))));
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
                let State::Done(result) = std::mem::take(&mut slot.state) else {
                    unreachable!("matched Done above")
                };
                shard.free(index);
                self.table.mirror(shard_number, &shard);
                self.taken = true;
                Poll::Ready(result)
            }
            State::Abandoned { .. } | State::Free => {
                self.taken = true;
                Poll::Ready(Err(Box::new((Failure::ShuttingDown, None))))
            }
        }
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        if self.taken {
            return;
        }
        let (shard_number, index, generation) = split_id(self.request);
        let mut shard = self.table.shards[shard_number].lock();
        let Some(slot) = shard.slot(index, generation) else {
            return;
        };
        match std::mem::take(&mut slot.state) {
            State::Waiting { hops, batch, .. } => {
                let remaining = match &batch {
                    Some(b) => b.parts.unwrap_or(u32::MAX).saturating_sub(b.done),
                    None => 1,
                };
                slot.state = State::Abandoned {
                    hops,
                    remaining,
                    batch,
                };
            }
            State::Done(_) => {
                shard.free(index);
                self.table.mirror(shard_number, &shard);
            }
            other => slot.state = other,
        }
    }
}

enum Waiting {
    Remote(PendingCall),
    Failed(Option<Failure>),
    Local(LocalCall),
}

/// What a local call that may run inline does: run when the future is
/// first polled (`true`: the output, boxed, or the call's pending entry if
/// it could not run there), or go the usual way if the future is dropped
/// unpolled (`false`).
pub(crate) type LocalRun = Box<dyn FnOnce(bool) -> Option<Result<LocalOutcome, Failure>> + Send>;

/// How a [`LocalRun`] that was asked to run went.
pub(crate) enum LocalOutcome {
    /// It ran here: the output.
    Ran(Box<dyn std::any::Any + Send>),
    /// It was sent the usual way: its pending entry.
    Sent(PendingCall),
}

/// A local call not run yet: runs the usual way when dropped unpolled.
struct LocalCall(Option<LocalRun>);

impl Drop for LocalCall {
    fn drop(&mut self) {
        if let Some(run) = self.0.take() {
            run(false);
        }
    }
}

/// The future result of a call: resolves to the action's output or to a
/// [`CallError`] saying why there is none.
///
/// Dropping it does not cancel the call; the result is then discarded.
#[must_use = "a call's result is lost unless its future is awaited"]
pub struct CallFuture<T> {
    action: &'static str,
    locality: LocalityId,
    state: Waiting,
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

    pub(crate) fn failed(action: &'static str, locality: LocalityId, failure: Failure) -> Self {
        Self::with_state(action, locality, Waiting::Failed(Some(failure)))
    }

    /// A call of this locality that runs when first polled (see
    /// [`LocalRun`]).
    pub(crate) fn local(action: &'static str, locality: LocalityId, run: LocalRun) -> Self {
        Self::with_state(action, locality, Waiting::Local(LocalCall(Some(run))))
    }

    fn with_state(action: &'static str, locality: LocalityId, state: Waiting) -> Self {
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

    /// The error of this call when no result came within `limit`.
    pub(crate) fn timed_out(&self, limit: std::time::Duration) -> CallError {
        CallError::new(self.action, self.locality, Failure::TimedOut(limit))
    }
}

impl<T> Unpin for CallFuture<T> {}

impl<T: DeserializeOwned + 'static> Future for CallFuture<T> {
    type Output = Result<T, CallError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Waiting::Local(LocalCall(run)) = &mut this.state {
            let run = run
                .take()
                .expect("CallFuture polled after it returned its result");
            let result = match run(true).expect("a local call asked to run reports how") {
                Ok(LocalOutcome::Sent(call)) => {
                    this.state = Waiting::Remote(call);
                    return Pin::new(this).poll(cx);
                }
                Ok(LocalOutcome::Ran(output)) => match output.downcast::<T>() {
                    Ok(output) => Ok(*output),
                    Err(_) => unreachable!("a local call's output has the action's type"),
                },
                Err(failure) => Err(failure),
            };
            this.state = Waiting::Failed(None);
            return Poll::Ready(result.map_err(|f| CallError::new(this.action, this.locality, f)));
        }
        let result = match &mut this.state {
            Waiting::Local(_) => unreachable!("handled above"),
            Waiting::Remote(call) => match call.poll_completion(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(Output::Single(bytes))) => {
                    super::decode::decode(&bytes).map_err(|e| Failure::DecodeResult(e.to_string()))
                }
                Poll::Ready(Ok(Output::Batch(_))) => {
                    unreachable!("a single call completed as a batch")
                }
                Poll::Ready(Err(failed)) => Err(failed.0),
            },
            Waiting::Failed(failure) => Err(failure
                .take()
                .expect("CallFuture polled after it returned its result")),
        };
        Poll::Ready(result.map_err(|f| CallError::new(this.action, this.locality, f)))
    }
}

enum BatchWaiting {
    Remote(PendingCall),
    Empty,
}

/// The future results of a batch of calls
/// ([`Runtime::call_batch`](crate::Runtime::call_batch)): every output, in
/// the order of the calls, or the first [`CallError`].
///
/// Dropping it does not cancel the calls; their results are then discarded.
#[must_use = "the results of a batch are lost unless its future is awaited"]
pub struct BatchFuture<T> {
    action: &'static str,
    /// The locality to blame for a failure whose origin is unknown.
    here: LocalityId,
    state: BatchWaiting,
    _output: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for BatchFuture<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchFuture")
            .field("action", &self.action)
            .finish_non_exhaustive()
    }
}

impl<T> BatchFuture<T> {
    pub(crate) fn remote(action: &'static str, here: LocalityId, call: PendingCall) -> Self {
        Self::with_state(action, here, BatchWaiting::Remote(call))
    }

    pub(crate) fn empty(action: &'static str, here: LocalityId) -> Self {
        Self::with_state(action, here, BatchWaiting::Empty)
    }

    fn with_state(action: &'static str, here: LocalityId, state: BatchWaiting) -> Self {
        BatchFuture {
            action,
            here,
            state,
            _output: PhantomData,
        }
    }

    /// The full path of the called action.
    pub fn action(&self) -> &'static str {
        self.action
    }
}

impl<T> Unpin for BatchFuture<T> {}

impl<T: DeserializeOwned + Send + 'static> Future for BatchFuture<T> {
    type Output = Result<Vec<T>, CallError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let result = match &mut this.state {
            BatchWaiting::Empty => Ok(Vec::new()),
            BatchWaiting::Remote(call) => match call.poll_sink::<BatchResults<T>>(cx, this.here) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(results)) => Ok(results
                    .values
                    .into_iter()
                    .map(|v| v.expect("a finished batch has every part"))
                    .collect()),
                Poll::Ready(Err(failed)) => Err(failed),
            },
        };
        Poll::Ready(result.map_err(|(f, at)| CallError::new(this.action, at, f)))
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    /// A result as a test sees it.
    type Completion = Result<Vec<u8>, Failure>;

    fn ok(byte: u8) -> Completion {
        Ok(vec![byte])
    }

    /// Completes part 0 of `request` with `completion`.
    fn complete(table: &PendingTable, request: u64, completion: Completion) -> bool {
        match completion {
            Ok(bytes) => {
                let frame = Bytes::from(bytes);
                table.complete(request, 0, None, Response::Output(&frame, &frame[..]))
            }
            Err(failure) => table.complete(request, 0, None, Response::Failed(failure)),
        }
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
            .map(|result| match result {
                Ok(Output::Single(bytes)) => Ok(bytes.to_vec()),
                Ok(Output::Batch(_)) => panic!("a single call completed as a batch"),
                Err(failed) => Err(failed.0),
            })
    }

    #[test]
    fn a_call_completes_once_and_a_reused_place_ignores_stale_ids() {
        let table = Arc::new(PendingTable::default());
        let path = [LocalityId::new(1); 3];
        let (first, mut call) = table.register(path);
        assert!(complete(&table, first, ok(1)));
        assert!(!complete(&table, first, ok(2)), "a duplicate response");
        assert_eq!(poll(&mut call, Waker::noop()), Poll::Ready(ok(1)));
        assert!(
            !complete(&table, first, ok(2)),
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
            !complete(&table, first, ok(3)),
            "a stale id for a reused place"
        );
        assert_eq!(table.len(), SHARDS);
        for (id, _) in &calls {
            assert!(complete(&table, *id, ok(4)));
        }
        drop(calls);
        assert_eq!(table.len(), 0, "dropped futures free their places");
        assert!(!complete(&table, u64::MAX, ok(5)), "a forged id");
    }

    #[test]
    fn the_table_is_empty_without_locks_exactly_when_no_place_is_taken() {
        let table = Arc::new(PendingTable::default());
        let path = [LocalityId::new(1); 3];
        assert!(table.is_empty());
        let (taken, mut call) = table.register(path);
        let (dropped, waiting) = table.register(path);
        let (abandoned, gone) = table.register(path);
        assert!(!table.is_empty());
        assert!(complete(&table, taken, ok(1)));
        assert!(!table.is_empty(), "a result not taken yet");
        assert_eq!(poll(&mut call, Waker::noop()), Poll::Ready(ok(1)));
        assert!(complete(&table, dropped, ok(2)));
        drop(waiting);
        drop(gone);
        assert!(!table.is_empty(), "a call abandoned before its response");
        assert!(complete(&table, abandoned, ok(3)));
        assert!(table.is_empty());
        let (_, failed) = table.register(path);
        assert!(!table.is_empty());
        table.fail_all(|| Failure::ShuttingDown);
        assert!(!table.is_empty(), "failed, not taken");
        drop(failed);
        assert!(table.is_empty());
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn an_output_is_accepted_only_from_a_locality_the_call_went_to() {
        let table = Arc::new(PendingTable::default());
        // A call to 1 whose result goes to a continuation on 2.
        let hops = [LocalityId::new(1), LocalityId::new(2), LocalityId::new(1)];
        let (id, mut call) = table.register(hops);
        let frame = Bytes::from_static(&[7]);
        let output = || Response::Output(&frame, &frame[..]);
        assert!(
            !table.complete(id, 0, Some(LocalityId::new(3)), output()),
            "a member guessing the id"
        );
        assert_eq!(poll(&mut call, Waker::noop()), Poll::Pending);
        assert!(table.complete(id, 0, Some(LocalityId::new(2)), output()));
        assert_eq!(poll(&mut call, Waker::noop()), Poll::Ready(ok(7)));
        // This locality's own responses (`from` this locality) are among
        // the hops of a call to itself.
        let (id, mut call) = table.register([LocalityId::ROOT; 3]);
        assert!(table.complete(id, 0, Some(LocalityId::ROOT), output()));
        assert_eq!(poll(&mut call, Waker::noop()), Poll::Ready(ok(7)));
    }

    #[test]
    fn failures_and_batch_results_are_accepted_only_from_where_the_call_went() {
        let table = Arc::new(PendingTable::default());
        let stranger = Some(LocalityId::new(3));
        let failed = || {
            Response::Failed(Failure::Remote(crate::parcel::RemoteError::Panicked(
                "forged".into(),
            )))
        };
        // A single call to 1: a stranger cannot fail it.
        let (id, mut call) = table.register([LocalityId::new(1); 3]);
        assert!(!table.complete(id, 0, stranger, failed()));
        assert_eq!(poll(&mut call, Waker::noop()), Poll::Pending);
        assert!(table.complete(id, 0, Some(LocalityId::new(1)), failed()));
        assert!(matches!(
            poll(&mut call, Waker::noop()),
            Poll::Ready(Err(_))
        ));
        // An abandoned call's place is not freed by a stranger either.
        let (id, call) = table.register([LocalityId::new(1); 3]);
        drop(call);
        assert!(!table.complete(id, 0, stranger, failed()));
        assert_eq!(table.len(), 1);
        assert!(table.complete(id, 0, Some(LocalityId::new(1)), failed()));
        assert_eq!(table.len(), 0);
        // A sealed batch to 1 and 2 takes results from them only.
        let sent = Arc::new(AtomicU32::new(2));
        let (id, call) = table.register_batch(Box::new(BatchResults::<u32>::new(2, sent)));
        table.seal(
            id,
            2,
            Path::of_batch(4, [LocalityId::new(1), LocalityId::new(2)]),
        );
        let mut future = BatchFuture::<u32>::remote("test", LocalityId::ROOT, call);
        let put = |part: u32, value: u32, from: u32| {
            let frame = Bytes::from(postcard::to_allocvec(&value).unwrap());
            let from = Some(LocalityId::new(from));
            table.complete(id, part, from, Response::Output(&frame, &frame[..]))
        };
        assert!(!put(0, 666, 3), "a stranger's result");
        assert!(
            !table.complete(id, 0, stranger, failed()),
            "a stranger's failure"
        );
        assert!(put(0, 1, 1));
        assert!(put(1, 2, 2));
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(
            Pin::new(&mut future).poll(&mut cx),
            Poll::Ready(Ok(vec![1, 2]))
        );
    }

    #[test]
    fn request_ids_do_not_follow_from_each_other() {
        // A place reused keeps its index but changes its generation to
        // one a peer that saw the earlier id cannot predict.
        let table = Arc::new(PendingTable::default());
        let mut steps = std::collections::HashSet::new();
        let mut last = std::collections::HashMap::new();
        for _ in 0..64 * SHARDS {
            let (id, call) = table.register([LocalityId::new(1); 3]);
            drop(call);
            assert!(table.complete(id, 0, None, Response::Failed(Failure::ShuttingDown)));
            if let Some(previous) = last.insert(id as u32, id) {
                assert_ne!(id, previous, "a reused place kept its generation");
                steps.insert((id >> 32).wrapping_sub(previous >> 32) as u32);
            }
        }
        assert!(steps.len() > 32, "generations step predictably: {steps:?}");
        // A fresh table starts elsewhere.
        let (first, _call) = table.register([LocalityId::new(1); 3]);
        let other = Arc::new(PendingTable::default());
        let (other_first, _other_call) = other.register([LocalityId::new(1); 3]);
        assert_ne!(first >> 32, 0);
        assert_ne!(first >> 32, other_first >> 32);
    }

    #[test]
    fn the_waker_is_woken_once_and_an_abandoned_call_frees_its_place() {
        let table = Arc::new(PendingTable::default());
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&counter));
        let (id, mut call) = table.register([LocalityId::new(1); 3]);
        assert_eq!(poll(&mut call, &waker), Poll::Pending);
        assert_eq!(poll(&mut call, &waker), Poll::Pending);
        assert!(complete(&table, id, ok(7)));
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
        assert_eq!(poll(&mut call, &waker), Poll::Ready(ok(7)));
        assert_eq!(table.len(), 0);
        let (id, call) = table.register([LocalityId::new(1); 3]);
        drop(call);
        assert_eq!(table.len(), 1, "the place waits for the response");
        assert!(complete(&table, id, ok(8)));
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
        assert!(complete(&table, two, ok(1)));
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
                    done += usize::from(complete(&table, id, ok(id as u8)));
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

    #[test]
    fn a_batch_collects_every_part_once_and_fails_on_the_first_failure() {
        let table = Arc::new(PendingTable::default());
        let path = Path::of_batch(4, [LocalityId::new(1), LocalityId::new(3)]);
        let sent = Arc::new(AtomicU32::new(0));
        let sink = Box::new(BatchResults::<u32>::new(4, Arc::clone(&sent)));
        let (id, call) = table.register_batch(sink);
        assert!(
            !{
                let frame = Bytes::from(postcard::to_allocvec(&5u32).unwrap());
                table.complete(id, 0, None, Response::Output(&frame, &frame[..]))
            },
            "a part not sent yet"
        );
        sent.store(3, Ordering::Release);
        let put = |part: u32, value: u32| {
            let frame = Bytes::from(postcard::to_allocvec(&value).unwrap());
            table.complete(id, part, None, Response::Output(&frame, &frame[..]))
        };
        // A result may come before the batch is sealed.
        assert!(put(2, 20));
        table.seal(id, 3, path.clone());
        let mut future = BatchFuture::<u32>::remote("test", LocalityId::ROOT, call);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(!put(2, 21), "a duplicated part");
        assert!(!put(7, 70), "a part out of range");
        assert!(Pin::new(&mut future).poll(&mut cx).is_pending());
        assert!(put(0, 0));
        assert!(put(1, 10));
        assert_eq!(
            Pin::new(&mut future).poll(&mut cx),
            Poll::Ready(Ok(vec![0, 10, 20]))
        );
        assert_eq!(table.len(), 0);
        // Losing a locality the batch sent to fails it; another one does not.
        let sink = BatchResults::<u32>::new(2, Arc::new(AtomicU32::new(2)));
        let (id, call) = table.register_batch(Box::new(sink));
        table.seal(id, 2, path);
        let mut future = BatchFuture::<u32>::remote("test", LocalityId::ROOT, call);
        table.fail_peer(LocalityId::new(2), "gone");
        assert!(Pin::new(&mut future).poll(&mut cx).is_pending());
        table.fail_peer(LocalityId::new(3), "gone");
        let Poll::Ready(Err(err)) = Pin::new(&mut future).poll(&mut cx) else {
            panic!("the batch did not fail")
        };
        assert!(
            err.is_peer_lost() && err.locality() == LocalityId::new(3),
            "{err}"
        );
        assert_eq!(table.len(), 0);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use std::task::Wake;

    use loom::sync::atomic::AtomicUsize;

    use super::*;

    /// Counts its wake-ups.
    struct Counter(AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The response to a call arrives on another thread while the caller
    /// polls its future once and drops it: in every interleaving the
    /// response finds the call (waiting, done or abandoned), the waker is
    /// woken at most once and only if the poll was pending, and the place
    /// is free at the end (no result is leaked, none is taken twice).
    #[test]
    fn loom_a_call_completed_while_its_future_is_dropped_frees_its_place() {
        loom::model(|| {
            let table = Arc::new(PendingTable::default());
            let (id, mut call) = table.register([LocalityId::new(1); 3]);
            let counter = Arc::new(Counter(AtomicUsize::new(0)));
            let waker = Waker::from(Arc::clone(&counter));
            let responder = {
                let table = Arc::clone(&table);
                loom::thread::spawn(move || {
                    let frame = Bytes::from_static(b"x");
                    table.complete(id, 0, None, Response::Output(&frame, &frame[..]))
                })
            };
            let polled = call.poll_completion(&mut Context::from_waker(&waker));
            drop(call);
            assert!(responder.join().unwrap(), "the response found no call");
            assert_eq!(table.len(), 0, "a place was not freed");
            let wakes = counter.0.load(Ordering::SeqCst);
            assert!(wakes <= 1, "woken {wakes} times");
            if polled.is_ready() {
                assert_eq!(wakes, 0, "woken after the result was taken");
            }
        });
    }
}
