//! [`Locality`]: the state one locality shares between its workers, and what
//! it does with every frame it receives.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::FutureExt;
use parking_lot::{Condvar, Mutex};
use rustc_hash::FxHashMap;

use super::LocalityId;
use super::error::panic_message;
use crate::action::{ActionId, ErasedOutput, registry};
use crate::aggregate::{Aggregator, Reason};
use crate::counters::{Perf, Traffic};
use crate::parcel::{
    ActivityCounts, Caller, Control, FRAME_HEADROOM, Failure, FrameBody, FrameBuilder, Parcel,
    PendingTable, RemoteError, ReplyTo, decode_call, decode_frame, encode_control,
};
use crate::sched::{BackgroundWork, BlockOutcome, Scheduler};
use crate::sched::{charge_network, clock};
use crate::transport::{Sink, Transport, check_frame_len};

/// Most calls of one received frame that one task runs in a row: enough to
/// amortise a spawn, few enough that idle workers can steal the others.
/// A guess, tune me.
const CALLS_PER_TASK: usize = 32;

/// Prints a runtime message on standard error, prefixed with the locality.
macro_rules! report {
    ($here:expr, $($arg:tt)*) => {
        eprintln!("courier: {}: {}", $here, format_args!($($arg)*))
    };
}
pub(crate) use report;

/// What the control messages and lost peers have told this locality.
#[derive(Debug, Default)]
pub(crate) struct ControlState {
    /// Peers lost while the job ran, with the reason.
    pub(crate) lost: Vec<(LocalityId, String)>,
    /// Latest quiescence report of every peer: (wave, counts).
    pub(crate) reports: FxHashMap<LocalityId, (u64, ActivityCounts)>,
    /// The root asked this locality to stop.
    pub(crate) shutdown_requested: bool,
    /// Peers that acknowledged the shutdown (at the root).
    pub(crate) acked: Vec<LocalityId>,
}

/// One locality: its scheduler, its end of the transport, its pending calls.
pub(crate) struct Locality {
    pub(crate) here: LocalityId,
    pub(crate) count: u32,
    pub(crate) sched: Arc<Scheduler>,
    pub(crate) transport: Box<dyn Transport>,
    pub(crate) pending: Arc<PendingTable>,
    pub(crate) max_frame_bytes: usize,
    /// Parcels, frames and bytes in and out.
    pub(crate) traffic: Traffic,
    /// When this locality started, for `/runtime/uptime` and counter timestamps.
    pub(crate) started: std::time::Instant,
    /// Perf-event counters of the workers, opened on first use.
    pub(crate) perf: Perf,
    /// Coalescing buffers and their flush timer.
    pub(crate) aggregator: Aggregator,
    /// Set once the job is ending: lost connections are expected then.
    stopping: AtomicBool,
    pub(crate) control: Mutex<ControlState>,
    pub(crate) control_changed: Condvar,
}

impl std::fmt::Debug for Locality {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locality")
            .field("here", &self.here)
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

/// The background work of a locality's workers: drive its transport. Holds
/// the locality weakly so that the scheduler does not keep it alive.
struct Progress(std::sync::Weak<Locality>);

impl BackgroundWork for Progress {
    fn poll(&self) -> bool {
        self.0.upgrade().is_some_and(|l| l.transport.poll(&l))
    }

    fn block(&self, timeout: Duration) -> BlockOutcome {
        match self.0.upgrade() {
            Some(l) => l.transport.block(&l, timeout),
            None => BlockOutcome::Unsupported,
        }
    }

    fn wake(&self) {
        if let Some(l) = self.0.upgrade() {
            l.transport.wake();
        }
    }
}

impl Locality {
    /// Creates locality `here` of `count` and starts its workers.
    pub(crate) fn start(
        here: LocalityId,
        count: u32,
        workers: usize,
        transport: Box<dyn Transport>,
        config: &super::Config,
    ) -> std::io::Result<Arc<Locality>> {
        let max_frame_bytes = config.max_frame_bytes;
        let sched = Scheduler::new(workers);
        let locality = Arc::new(Locality {
            here,
            count,
            sched: Arc::clone(&sched),
            transport,
            pending: Arc::default(),
            max_frame_bytes,
            traffic: Traffic::default(),
            started: std::time::Instant::now(),
            perf: Perf::new(workers),
            aggregator: Aggregator::new(
                here,
                count,
                max_frame_bytes,
                config.coalescing,
                &config.action_settings().unwrap_or_default(),
            ),
            stopping: AtomicBool::new(false),
            control: Mutex::new(ControlState::default()),
            control_changed: Condvar::new(),
        });
        sched.set_background(Arc::new(Progress(Arc::downgrade(&locality))));
        let runtime = super::Runtime::new(Arc::clone(&locality));
        let on_start = Arc::new(move |index| {
            runtime.inner().perf.register_current_thread(index);
            super::handle::set_current(runtime.clone());
        });
        sched.start(&format!("courier-{}", here.get()), on_start)?;
        locality.aggregator.start_timer(Arc::downgrade(&locality))?;
        Ok(locality)
    }

    /// The counters compared by termination detection. Every coalescing
    /// buffer is flushed first: a job whose parcels wait in buffers is not idle.
    pub(crate) fn activity(&self) -> ActivityCounts {
        self.aggregator.flush_all(self, Reason::Shutdown);
        let snapshot = self.sched.snapshot();
        ActivityCounts {
            parcels_sent: self.traffic.sent.parcels.load(Ordering::SeqCst),
            parcels_received: self.traffic.received.parcels.load(Ordering::SeqCst),
            tasks_spawned: snapshot.spawned,
            tasks_finished: snapshot.finished(),
        }
    }

    /// Whether the job is ending.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Marks the job as ending: calls fail from now on and lost connections
    /// are expected.
    pub(crate) fn set_stopping(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// Stops this locality: its workers finish their current task and exit,
    /// queued tasks are dropped, and its connections are closed.
    pub(crate) fn stop(&self) {
        self.aggregator.flush_all(self, Reason::Shutdown);
        self.aggregator.stop_timer();
        self.set_stopping();
        self.sched.shutdown();
        self.transport.close();
    }

    /// Whether `dest` is a locality of this job.
    pub(crate) fn check_dest(&self, dest: LocalityId) -> Result<(), Failure> {
        if dest.get() >= self.count {
            Err(Failure::NoSuchLocality { count: self.count })
        } else if self.is_stopping() {
            Err(Failure::ShuttingDown)
        } else {
            Ok(())
        }
    }

    /// Sends a frame of parcels to another locality.
    pub(crate) fn send_parcels(
        &self,
        dest: LocalityId,
        frame: FrameBuilder,
    ) -> Result<(), Failure> {
        let start = clock().raw();
        let count = u64::from(frame.len());
        let payload = frame.payload_bytes();
        let frame = frame.finish();
        check_frame_len(&frame, self.max_frame_bytes).map_err(Failure::EncodeArgs)?;
        let wire = frame.len() as u64;
        let sent = &self.traffic.sent;
        // Count before sending so that the receiver never counts a parcel
        // the sender has not (termination detection relies on it).
        sent.parcels.fetch_add(count, Ordering::SeqCst);
        let result = self.transport.send(dest, frame).map_err(|reason| {
            sent.parcels.fetch_sub(count, Ordering::SeqCst);
            Failure::PeerLost(reason)
        });
        let ns = clock().delta_as_nanos(start, clock().raw());
        charge_network(ns);
        if result.is_ok() {
            sent.add_message(payload, wire, ns);
        }
        result
    }

    /// Sends one parcel of `action` to another locality: into the action's
    /// coalescing buffer for `dest` when it has one, else in a frame of its
    /// own. `push` appends the parcel to a frame.
    pub(crate) fn send_parcel(
        &self,
        dest: LocalityId,
        action: ActionId,
        mut push: impl FnMut(&mut FrameBuilder) -> Result<(), Failure>,
    ) -> Result<(), Failure> {
        if let Some(slot) = registry().slot(action) {
            if let Some(result) = self.aggregator.push(self, dest, slot, &mut push) {
                return result;
            }
        }
        let mut frame = FrameBuilder::new(self.here);
        push(&mut frame)?;
        self.send_parcels(dest, frame)
    }

    /// Where a call of `action` for `dest` goes first (its virtual topology).
    pub(crate) fn first_hop(&self, action: ActionId, dest: LocalityId) -> LocalityId {
        match registry().slot(action) {
            Some(slot) => self.aggregator.first_hop(slot, dest, self.count),
            None => dest,
        }
    }

    /// Forwards a call for `dest` that came through this locality.
    fn forward(&self, dest: LocalityId, action: ActionId, call: &[u8]) -> Result<(), String> {
        if dest.get() >= self.count {
            return Err(format!(
                "asked to forward a call to {dest}, not a locality of this job"
            ));
        }
        if let Some(slot) = registry().slot(action) {
            self.aggregator.count_forwarded(slot);
        }
        // A failure means `dest` is lost; its caller learns it from that loss.
        let _ = self.send_parcel(dest, action, |frame| {
            frame.push_encoded_parcel(call);
            Ok(())
        });
        Ok(())
    }

    /// Sends a control message; failures mean the peer is lost, which is
    /// reported separately.
    pub(crate) fn send_control(&self, dest: LocalityId, control: &Control) {
        let _ = self
            .transport
            .send(dest, encode_control(self.here, control));
    }

    /// Runs an encoded call here: spawns a task that runs the action and
    /// routes its output as `reply` says.
    pub(crate) fn run_call(self: &Arc<Self>, action: ActionId, reply: ReplyTo, args: Vec<u8>) {
        let locality = Arc::clone(self);
        drop(self.sched.spawn(async move {
            let result = execute(action, &args).await;
            locality.route_result(action, reply, result);
        }));
    }

    /// Runs the calls of one frame: one task per [`CALLS_PER_TASK`] calls,
    /// each call run in that task when its first poll finishes it (sync
    /// actions always do) and spawned as a task of its own when it waits.
    fn run_calls(self: &Arc<Self>, calls: Vec<(ActionId, ReplyTo, Vec<u8>)>) {
        if calls.len() <= 1 {
            for (action, reply, args) in calls {
                self.run_call(action, reply, args);
            }
            return;
        }
        let mut calls = calls.into_iter().peekable();
        while calls.peek().is_some() {
            let chunk: Vec<_> = calls.by_ref().take(CALLS_PER_TASK).collect();
            let locality = Arc::clone(self);
            drop(self.sched.spawn(async move {
                for (action, reply, args) in chunk {
                    locality.run_inline(action, reply, args);
                }
            }));
        }
    }

    /// Runs a call on the current task if it finishes in its first poll;
    /// otherwise hands it to a task of its own.
    fn run_inline(self: &Arc<Self>, action: ActionId, reply: ReplyTo, args: Vec<u8>) {
        let mut run = match start(action, &args) {
            Ok(run) => run,
            Err(error) => return self.route_result(action, reply, Err(error)),
        };
        let mut cx = Context::from_waker(Waker::noop());
        match std::panic::catch_unwind(AssertUnwindSafe(|| run.as_mut().poll(&mut cx))) {
            Ok(Poll::Ready(output)) => self.route_result(action, reply, finished(output)),
            Ok(Poll::Pending) => {
                let locality = Arc::clone(self);
                drop(self.sched.spawn(async move {
                    let result = finish(run).await;
                    locality.route_result(action, reply, result);
                }));
            }
            Err(panic) => self.route_result(
                action,
                reply,
                Err(RemoteError::Panicked(panic_message(&*panic))),
            ),
        }
    }

    fn route_result(
        self: &Arc<Self>,
        action: ActionId,
        reply: ReplyTo,
        result: Result<Vec<u8>, RemoteError>,
    ) {
        match (reply, result) {
            (ReplyTo::Caller(caller), result) => self.respond(action, caller, result),
            (ReplyTo::Nobody, Ok(_)) => {}
            (ReplyTo::Nobody, Err(error)) => report!(
                self.here,
                "a posted call of `{}` failed: {error:?}",
                action_name(action)
            ),
            (
                ReplyTo::Continue {
                    caller: Some(caller),
                    ..
                },
                Err(error),
            ) => self.respond(action, caller, Err(error)),
            (ReplyTo::Continue { caller: None, .. }, Err(error)) => report!(
                self.here,
                "a posted call of `{}` with a continuation failed: {error:?}",
                action_name(action)
            ),
            (
                ReplyTo::Continue {
                    locality,
                    action: next,
                    caller,
                },
                Ok(output),
            ) => {
                // The output of `A` is the encoding of `(A::Output,)`, the
                // argument tuple of the continuation.
                let reply = caller.map_or(ReplyTo::Nobody, ReplyTo::Caller);
                if locality == self.here {
                    self.run_call(next, reply, output);
                    return;
                }
                let sent = self.send_parcel(locality, next, |frame| {
                    frame.push_call_bytes(next, reply, &output);
                    Ok(())
                });
                if sent.is_ok() {
                    self.traffic.sent.add_call(next, output.len() as u64);
                }
                if let Err(failure) = sent {
                    let error = RemoteError::Forward {
                        locality: locality.get(),
                        reason: format!("{failure:?}"),
                    };
                    match caller {
                        Some(caller) => self.respond(next, caller, Err(error)),
                        None => report!(self.here, "{error:?}"),
                    }
                }
            }
        }
    }

    /// Delivers the result of a call of `action` to its caller; a remote
    /// caller's response coalesces with the other parcels of `action`.
    fn respond(&self, action: ActionId, caller: Caller, result: Result<Vec<u8>, RemoteError>) {
        if caller.locality == self.here {
            self.pending
                .complete(caller.request, result.map_err(Failure::Remote));
            return;
        }
        let send = |result: &Result<Vec<u8>, RemoteError>| {
            self.send_parcel(caller.locality, action, |frame| {
                frame.push_response(caller.request, result);
                Ok(())
            })
        };
        if let Err(Failure::EncodeArgs(too_large)) = send(&result) {
            let _ = send(&Err(RemoteError::BadOutput(too_large)));
        }
        // Any other failure means the caller is lost: nobody to tell.
    }

    fn handle_control(&self, source: LocalityId, control: Control) {
        match control {
            Control::QuiescenceQuery { wave } => {
                let counts = self.activity();
                self.send_control(source, &Control::QuiescenceReport { wave, counts });
            }
            Control::QuiescenceReport { wave, counts } => {
                self.control.lock().reports.insert(source, (wave, counts));
                self.control_changed.notify_all();
            }
            Control::Shutdown => {
                self.set_stopping();
                self.send_control(source, &Control::ShutdownAck);
                self.control.lock().shutdown_requested = true;
                self.control_changed.notify_all();
            }
            Control::ShutdownAck => {
                self.control.lock().acked.push(source);
                self.control_changed.notify_all();
            }
        }
    }
}

/// The name of an action for messages.
fn action_name(id: ActionId) -> String {
    registry()
        .get(id)
        .map_or_else(|| format!("{id}"), |e| e.name().to_owned())
}

/// Decodes the arguments and makes the action's future (nothing of the
/// action runs yet).
fn start(id: ActionId, args: &[u8]) -> Result<ErasedOutput, RemoteError> {
    let Some(entry) = registry().get(id) else {
        return Err(RemoteError::UnknownAction { id: id.to_bits() });
    };
    entry
        .start(args)
        .map_err(|e| RemoteError::BadArguments(e.to_string()))
}

/// The result of an action's future that finished.
fn finished(output: Result<Vec<u8>, postcard::Error>) -> Result<Vec<u8>, RemoteError> {
    output.map_err(|e| RemoteError::BadOutput(e.to_string()))
}

/// Runs an action's future to its end; a panic becomes
/// [`RemoteError::Panicked`].
async fn finish(run: ErasedOutput) -> Result<Vec<u8>, RemoteError> {
    match AssertUnwindSafe(run).catch_unwind().await {
        Ok(output) => finished(output),
        Err(panic) => Err(RemoteError::Panicked(panic_message(&*panic))),
    }
}

/// Decodes the arguments, runs the action, encodes its output. A panic in
/// the action becomes [`RemoteError::Panicked`].
async fn execute(id: ActionId, args: &[u8]) -> Result<Vec<u8>, RemoteError> {
    finish(start(id, args)?).await
}

impl Sink for Arc<Locality> {
    fn frame(&self, source: LocalityId, bytes: &[u8]) -> Result<(), String> {
        let start = clock().raw();
        let (claimed, body) =
            decode_frame(bytes).map_err(|e| format!("malformed frame from {source}: {e}"))?;
        if claimed != source {
            return Err(format!(
                "{source} sent a frame claiming to come from {claimed}"
            ));
        }
        match body {
            FrameBody::Parcels(parcels) => {
                let received = &self.traffic.received;
                received
                    .parcels
                    .fetch_add(parcels.len() as u64, Ordering::SeqCst);
                let mut payload = 0;
                let mut calls = Vec::with_capacity(parcels.len());
                for parcel in parcels {
                    // A call routed to this locality is an ordinary call
                    // once unwrapped (`decode_call` only returns calls).
                    let parcel = match parcel {
                        Parcel::Routed { dest, call, .. } if dest == self.here => {
                            decode_call(&call).map_err(|e| {
                                format!("malformed forwarded call from {source}: {e}")
                            })?
                        }
                        other => other,
                    };
                    match parcel {
                        Parcel::Call {
                            action,
                            reply,
                            args,
                        } => {
                            payload += args.len() as u64;
                            received.add_call(action, args.len() as u64);
                            calls.push((action, reply, args));
                        }
                        Parcel::Routed { dest, action, call } => {
                            payload += call.len() as u64;
                            self.forward(dest, action, &call)?;
                        }
                        Parcel::Response { request, result } => {
                            payload += result.as_ref().map_or(0, |bytes| bytes.len() as u64);
                            // An unknown request is a response to a call that
                            // already failed (its path lost a locality).
                            self.pending
                                .complete(request, result.map_err(Failure::Remote));
                        }
                    }
                }
                self.run_calls(calls);
                let wire = (bytes.len() + FRAME_HEADROOM) as u64;
                received.add_message(payload, wire, clock().delta_as_nanos(start, clock().raw()));
            }
            FrameBody::Control(control) => self.handle_control(source, control),
        }
        Ok(())
    }

    fn peer_lost(&self, peer: LocalityId, reason: String) {
        let mut control = self.control.lock();
        if self.is_stopping() || control.acked.contains(&peer) {
            return;
        }
        report!(self.here, "lost {peer}: {reason}");
        self.pending.fail_peer(peer, &reason);
        control.lost.push((peer, reason));
        drop(control);
        self.control_changed.notify_all();
    }
}
