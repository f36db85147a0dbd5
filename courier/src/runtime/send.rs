//! How a program's calls become parcels: the [`Runtime`] methods that call
//! actions. Each encodes its arguments straight into the calling worker's
//! buffer for (action, destination) (see `aggregate`); a call to this
//! locality takes the same way and is run by this locality's receive path,
//! with the other calls of its frame, never as a task of its own.
//!
//! Below the buffers, [`Outbox`] for [`Locality`]: a flushed frame is
//! counted (before it leaves, for termination detection) and handed to the
//! transport through its destination's credit window (`credit.rs`), or to
//! this locality's own receive path.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;

use super::Runtime;
use super::credit::Handed;
use super::locality::Locality;
use crate::action::{Action, registry, slot_of};
use crate::aggregate::Outbox;
use crate::clock::clock;
use crate::ids::LocalityId;
use crate::parcel::{
    BatchFuture, BatchResults, CallError, CallFuture, Caller, FRAME_HEADROOM, Failure,
    FrameBuilder, LocalOutcome, LocalRun, Path, PendingCall, RemoteError, ReplyTo, Response,
    RunKind,
};
use crate::sched::charge_network;
use crate::transport::{Sink, check_frame_len};

impl Runtime {
    /// Calls `action(args)` on `dest` and returns the future of its result.
    ///
    /// The call travels coalesced with the other parcels of `action` to
    /// `dest` (see [`Coalescing`](crate::Coalescing)); a call to
    /// [`here`](Self::here) runs on this locality's receive path. The future
    /// resolves to a [`CallError`] if the action panics, the locality is
    /// lost, or the arguments or result do not encode.
    pub fn call<A: Action>(
        &self,
        dest: LocalityId,
        action: A,
        args: A::Args,
    ) -> CallFuture<A::Output> {
        let _ = action;
        let l = self.inner();
        if let Err(failure) = l.check_dest(dest) {
            return CallFuture::failed(A::NAME, dest, failure);
        }
        match (dest == l.here, A::SYNC, slot_of::<A>()) {
            (true, Some(function), Some(slot)) if l.run_sizes.runs_inline(slot) => {
                CallFuture::local(A::NAME, dest, local_call::<A>(l, function, slot, args))
            }
            _ => CallFuture::remote(
                A::NAME,
                dest,
                call_pending::<A>(l, dest, dest, &args, ReplyTo::Caller),
            ),
        }
    }

    /// Calls `action(args)` on `dest` without waiting for a result (fire and
    /// forget). Returns an error only for failures known at once (no such
    /// locality, arguments that do not encode, a lost locality); a failure
    /// of the action itself is reported on the standard error of `dest`.
    ///
    /// This is the cheapest way to run code elsewhere: the parcel is a few
    /// bytes appended to a buffer, and the receiver runs a buffer's calls
    /// in a loop.
    ///
    /// # Backpressure
    ///
    /// Frames of calls leave against the receiver's credit (see
    /// [`Config::credit_window`](crate::Config::credit_window)). When more
    /// than [`Config::credit_queue`](crate::Config::credit_queue) bytes
    /// wait for credit towards `dest`, `post` (and every `call`) waits
    /// before adding to them: on a worker thread by driving the network
    /// and running the calls this locality received meanwhile, so that
    /// floods in both directions still make progress; on a thread outside
    /// the runtime by blocking. Inside an action's handler it never waits
    /// (that could close a cycle of waiting localities); what a handler
    /// sends queues for credit instead.
    #[inline]
    pub fn post<A: Action>(
        &self,
        dest: LocalityId,
        action: A,
        args: A::Args,
    ) -> Result<(), CallError> {
        let _ = action;
        let l = self.inner();
        let error = |failure| CallError::new(A::NAME, dest, failure);
        l.check_dest(dest).map_err(error)?;
        let slot = slot_of::<A>();
        let hop = slot.map_or(dest, |slot| l.aggregator.first_hop(slot, dest));
        l.before_send(hop);
        send_call::<A>(l, slot, dest, hop, ReplyTo::Post { origin: l.here }, &args).map_err(error)
    }

    /// Calls `action(args)` on `dest` and passes its result, as the only
    /// argument, to `then` on `then_dest`; returns the future of `then`'s
    /// result. The intermediate result goes straight from `dest` to
    /// `then_dest`, never through the caller.
    ///
    /// # Examples
    ///
    /// ```
    /// use courier::{Config, TransportKind};
    ///
    /// #[courier::action]
    /// fn produce(n: u32) -> Vec<u32> {
    ///     (0..n).collect()
    /// }
    ///
    /// #[courier::action]
    /// fn total(v: Vec<u32>) -> u32 {
    ///     v.iter().sum()
    /// }
    ///
    /// courier::launch(Config::new().localities(3).transport(TransportKind::Inproc), |rt| async move {
    ///     let sum = rt.call_then(rt.locality(1), produce, (5,), rt.locality(2), total).await?;
    ///     assert_eq!(sum, 10);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn call_then<A, C>(
        &self,
        dest: LocalityId,
        action: A,
        args: A::Args,
        then_dest: LocalityId,
        then: C,
    ) -> CallFuture<C::Output>
    where
        A: Action,
        C: Action<Args = (A::Output,)>,
    {
        let _ = (action, then);
        let l = self.inner();
        if let Err(failure) = l.check_dest(dest).and_then(|()| l.check_dest(then_dest)) {
            return CallFuture::failed(C::NAME, then_dest, failure);
        }
        let reply = |caller| ReplyTo::Continue {
            locality: then_dest,
            action: C::ID,
            caller: Some(caller),
        };
        let pending = call_pending::<A>(l, dest, then_dest, &args, reply);
        CallFuture::remote(C::NAME, then_dest, pending)
    }

    /// Calls `action` once per `(destination, arguments)` of `calls` and
    /// returns the future of every result, in the order of the calls.
    ///
    /// A batch costs one pending entry and one future however many calls it
    /// makes: each result is decoded straight into its place in the result
    /// vector as it arrives. Use it instead of a `Vec` of [`CallFuture`]s
    /// when a task makes many calls and needs every result. The future
    /// fails with the first [`CallError`] (the other results are then
    /// discarded). Calls to one destination travel together, as calls do.
    ///
    /// # Examples
    ///
    /// ```
    /// use courier::{Config, TransportKind};
    ///
    /// #[courier::action]
    /// fn square(x: u64) -> u64 {
    ///     x * x
    /// }
    ///
    /// let squares = courier::launch(Config::new().localities(2).transport(TransportKind::Inproc), |rt| async move {
    ///     let calls = (0..10u64).map(|i| (rt.locality((i % 2) as u32), (i,)));
    ///     Ok(rt.call_batch(square, calls).await?)
    /// })
    /// .unwrap();
    /// assert_eq!(squares, (0..10u64).map(|i| i * i).collect::<Vec<_>>());
    /// ```
    pub fn call_batch<A, I>(&self, action: A, calls: I) -> BatchFuture<A::Output>
    where
        A: Action,
        I: IntoIterator<Item = (LocalityId, A::Args)>,
    {
        let _ = action;
        let l = self.inner();
        let mut calls = calls.into_iter().peekable();
        if calls.peek().is_none() {
            return BatchFuture::empty(A::NAME, l.here);
        }
        let slot = slot_of::<A>();
        let sent = Arc::new(AtomicU32::new(0));
        let expected = calls.size_hint().0;
        let sink = Box::new(BatchResults::<A::Output>::new(expected, Arc::clone(&sent)));
        let (request, pending) = l.pending.register_batch(sink);
        let mut involved = Path::empty_set(l.count);
        let mut parts = 0u32;
        for (dest, args) in calls {
            if parts == u32::MAX {
                let failure = Failure::EncodeArgs("a batch of more than 2^32 - 1 calls".into());
                l.pending
                    .complete(request, 0, Some(l.here), Response::Failed(failure));
                return BatchFuture::remote(A::NAME, l.here, pending);
            }
            // Results of this part are accepted from now on.
            sent.store(parts + 1, Ordering::Release);
            let hop = slot.map_or(dest, |slot| l.aggregator.first_hop(slot, dest));
            l.before_send(hop);
            let reply = ReplyTo::Caller(Caller {
                locality: l.here,
                request,
                part: parts,
            });
            let sent = l
                .check_dest(dest)
                .and_then(|()| send_call::<A>(l, slot, dest, hop, reply, &args));
            if let Err(failure) = sent {
                l.pending
                    .complete(request, 0, Some(dest), Response::Failed(failure));
                return BatchFuture::remote(A::NAME, l.here, pending);
            }
            involved.insert(dest);
            involved.insert(hop);
            parts += 1;
        }
        seal_batch(l, request, parts, involved);
        BatchFuture::remote(A::NAME, l.here, pending)
    }
}

/// Says that batch `request` sent `parts` calls through `path`, and fails
/// it if a locality of the path was lost while they went out (the batch
/// did not say where it sent them until now, so that loss failed nothing).
pub(super) fn seal_batch(l: &Locality, request: u64, parts: u32, path: Path) {
    l.pending.seal(request, parts, path.clone());
    // Read after the seal: a loss from now on fails the batch by its path.
    let lost = l.control.lock().lost.clone();
    if let Some((peer, reason)) = lost.into_iter().find(|(p, _)| path.contains(*p)) {
        let failure = Failure::PeerLost(reason);
        l.pending
            .complete(request, 0, Some(peer), Response::Failed(failure));
    }
}

/// Registers a call of `A` to `dest` whose result goes to the caller as
/// `reply` says (through `then_dest`, for a continuation) and sends it; a
/// failure to send completes it at once.
fn call_pending<A: Action>(
    l: &Locality,
    dest: LocalityId,
    then_dest: LocalityId,
    args: &A::Args,
    reply: impl FnOnce(Caller) -> ReplyTo,
) -> PendingCall {
    let slot = slot_of::<A>();
    let hop = slot.map_or(dest, |slot| l.aggregator.first_hop(slot, dest));
    l.before_send(hop);
    let (request, pending) = l.pending.register([dest, then_dest, hop]);
    let reply = reply(Caller {
        locality: l.here,
        request,
        part: 0,
    });
    if let Err(failure) = send_call::<A>(l, slot, dest, hop, reply, args) {
        l.pending.fail(request, failure);
    }
    pending
}

/// A call of this locality's own synchronous action `A`, measured
/// shorter than a task is worth: it runs inline when its future is first
/// polled on one of this locality's workers (no parcel, no task; the
/// caller waits for it then anyway), as the receive path would run it
/// (its panic fails the call alone, its sends do not wait for credit);
/// polled elsewhere, or dropped unpolled, it goes the usual way.
fn local_call<A: Action>(
    l: &Locality,
    function: fn(A::Args) -> A::Output,
    slot: usize,
    args: A::Args,
) -> LocalRun {
    let l = l.shared();
    Box::new(move |polled| {
        if polled && crate::sched::on_worker(&l.sched) {
            let (output, ns) = crate::clock::timed(|| {
                let _handler = super::credit::HandlerScope::enter();
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| function(args)))
            });
            l.run_sizes.record(slot, 1, ns);
            return Some(match output {
                Ok(output) => Ok(LocalOutcome::Ran(Box::new(output))),
                Err(panic) => Err(Failure::Remote(RemoteError::Panicked(
                    crate::parcel::panic_message(&*panic),
                ))),
            });
        }
        let pending = call_pending::<A>(&l, l.here, l.here, &args, ReplyTo::Caller);
        polled.then_some(Ok(LocalOutcome::Sent(pending)))
    })
}

/// Encodes a call of `A` (registry slot `slot`, if registered) into the
/// buffer for `hop`, its first hop towards `dest`.
#[inline]
fn send_call<A: Action>(
    l: &Locality,
    slot: Option<usize>,
    dest: LocalityId,
    hop: LocalityId,
    reply: ReplyTo,
    args: &A::Args,
) -> Result<(), Failure> {
    let awaited = reply.is_awaited();
    match slot {
        Some(slot) if hop == dest => {
            l.aggregator
                .push(l, RunKind::Calls, slot, A::ID, dest, awaited, |frame| {
                    frame.push_call(reply, args)
                })
        }
        Some(slot) => l
            .aggregator
            .push(l, RunKind::Routed, slot, A::ID, hop, awaited, |frame| {
                frame.push_routed(dest, reply, args)
            }),
        // An action this binary did not register: the receiver answers it.
        None => l.send_alone(dest, RunKind::Calls, A::ID, |frame| {
            frame.push_call(reply, args)
        }),
    }
}

impl Outbox for Locality {
    fn send_frame(&self, dest: LocalityId, frame: FrameBuilder) -> Result<(), Failure> {
        if dest == self.here {
            // This locality's own parcels take the receive path directly;
            // they are not traffic (and need no counting for termination
            // detection: they are never in flight).
            let frame = Bytes::from(frame.finish()).slice(FRAME_HEADROOM..);
            return self
                .frame(dest, frame)
                .map_err(|e| Failure::PeerLost(e.to_string()));
        }
        let start = clock().raw();
        let count = u64::from(frame.len());
        let payload = frame.payload_bytes();
        let kind = frame.kind();
        let calls = (frame.kind() == RunKind::Calls)
            .then(|| registry().slot(frame.action()))
            .flatten();
        let frame = frame.finish();
        check_frame_len(&frame, self.max_frame_bytes).map_err(Failure::FrameTooLarge)?;
        let wire = frame.len() as u64;
        let sent = &self.traffic.sent;
        // Count before sending so that the receiver never counts a parcel
        // the sender has not (termination detection relies on it).
        sent.parcels.fetch_add(count, Ordering::SeqCst);
        let result = self.offer_frame(dest, kind, frame).map_err(Failure::from);
        if result.is_err() {
            sent.parcels.fetch_sub(count, Ordering::SeqCst);
        }
        let ns = clock().delta_as_nanos(start, clock().raw());
        charge_network(ns);
        let handed = result?;
        sent.add_message(payload, wire, ns);
        if let Some(slot) = calls {
            sent.add_calls(slot, count, payload);
            self.traffic.calls_to.add(slot, dest, count);
        }
        // A frame queued for credit was not sent: its time is no sample.
        if handed == Handed::Now {
            self.calibration.record(dest, wire, ns);
        }
        // Adaptive coalescing's epoch ends on the thread that sends
        // once it is due (`tuning.rs`), after this frame left.
        self.epochs.tick(self);
        Ok(())
    }

    fn progress(&self) {
        self.progress_while_sending();
    }
}
