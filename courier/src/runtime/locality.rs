//! [`Locality`]: the state one locality shares between its workers, and
//! the send path under the coalescing buffers: counting frames and handing
//! them to the transport, or to this locality's own receive path.
//!
//! What a locality does with a received frame is in `receive.rs`; how a
//! program's calls become parcels, in `send.rs`; the control protocol, in
//! `control.rs`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use rustc_hash::FxHashMap;

use super::LocalityId;
use super::collective::Collectives;
use super::state::States;
use crate::action::{CallSite, EncodeOutput, registry};
use crate::aggregate::{Aggregator, Outbox, Reason};
use crate::counters::{Perf, Traffic};
use crate::parcel::{
    ActivityCounts, Control, FRAME_HEADROOM, Failure, FrameBuilder, PendingTable, RemoteError,
    ReplyTo, RunKind, encode_control,
};
use crate::sched::{BackgroundWork, BlockOutcome, Scheduler};
use crate::sched::{charge_network, clock};
use crate::transport::{Sink, Transport, check_frame_len};

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
    /// The last wave number the root used.
    pub(crate) next_wave: u64,
    /// Activity reports not yet read, by (wave, peer).
    pub(crate) reports: FxHashMap<(u64, LocalityId), ActivityCounts>,
    /// Localities whose main function returned (SPMD jobs, at the root),
    /// with its error if it failed.
    pub(crate) mains_done: Vec<(LocalityId, Option<String>)>,
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
    pub(crate) aggregator: Arc<Aggregator>,
    /// Set once the job is ending: lost connections are expected then.
    stopping: AtomicBool,
    pub(crate) control: Mutex<ControlState>,
    pub(crate) control_changed: Condvar,
    /// The program's per-locality state.
    pub(crate) states: States,
    /// Collectives and quiescence requests of this locality.
    pub(crate) collectives: Collectives,
    /// Work received parcels started and finished (runs of calls, calls
    /// that waited): what quiescence waits for.
    parcel_work: ParcelWork,
    /// This locality, for the tasks it spawns to hold.
    me: Weak<Locality>,
}

/// Counts of parcel work: monotonic, compared across waves.
#[derive(Debug, Default)]
struct ParcelWork {
    started: std::sync::atomic::AtomicU64,
    finished: std::sync::atomic::AtomicU64,
}

/// Counts a piece of parcel work as finished when dropped (it finished,
/// panicked, or was dropped at shutdown).
pub(crate) struct WorkGuard(Arc<Locality>);

impl Drop for WorkGuard {
    fn drop(&mut self) {
        self.0.parcel_work.finished.fetch_add(1, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for Locality {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locality")
            .field("here", &self.here)
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

/// The background work of a locality's workers: drive its transport, and
/// send what an idle worker holds. Holds the locality weakly so that the
/// scheduler does not keep it alive.
struct Progress(Weak<Locality>);

impl BackgroundWork for Progress {
    fn poll(&self) -> bool {
        self.0.upgrade().is_some_and(|l| l.transport.poll(&*l))
    }

    fn block(&self, timeout: Duration) -> BlockOutcome {
        match self.0.upgrade() {
            Some(l) => l.transport.block(&*l, timeout),
            None => BlockOutcome::Unsupported,
        }
    }

    fn wake(&self) {
        if let Some(l) = self.0.upgrade() {
            l.transport.wake();
        }
    }

    fn before_idle(&self) -> bool {
        match self.0.upgrade() {
            Some(l) => l.aggregator.flush_idle_worker(&*l),
            None => false,
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
        let aggregator = Arc::new(Aggregator::new(
            here,
            count,
            max_frame_bytes,
            Arc::clone(&sched),
            config.coalescing,
            &config.action_settings().unwrap_or_default(),
        ));
        let locality = Arc::new_cyclic(|me| Locality {
            here,
            count,
            sched: Arc::clone(&sched),
            transport,
            pending: Arc::default(),
            max_frame_bytes,
            traffic: Traffic::default(),
            started: std::time::Instant::now(),
            perf: Perf::new(workers),
            aggregator,
            stopping: AtomicBool::new(false),
            control: Mutex::new(ControlState::default()),
            control_changed: Condvar::new(),
            states: States::make(&config.states, here, count),
            collectives: Collectives::default(),
            parcel_work: ParcelWork::default(),
            me: me.clone(),
        });
        sched.set_background(Arc::new(Progress(Arc::downgrade(&locality))));
        let runtime = super::Runtime::new(Arc::clone(&locality));
        let on_start = Arc::new(move |index| {
            runtime.inner().perf.register_current_thread(index);
            super::handle::set_current(runtime.clone());
        });
        sched.start(&format!("courier-{}", here.get()), on_start)?;
        let weak = Arc::downgrade(&locality);
        locality.aggregator.start_timer(move |key, deadline| {
            let Some(locality) = weak.upgrade() else {
                return false;
            };
            locality.aggregator.flush_due(&*locality, key, deadline);
            true
        })?;
        Ok(locality)
    }

    /// This locality, shared: for what outlives a borrow of it (tasks).
    pub(crate) fn shared(&self) -> Arc<Locality> {
        self.me
            .upgrade()
            .unwrap_or_else(|| unreachable!("a locality in use is alive"))
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
            // Finished first: a piece that starts and finishes between the
            // two loads shows as running, never the other way round.
            parcel_work_finished: self.parcel_work.finished.load(Ordering::SeqCst),
            parcel_work_started: self.parcel_work.started.load(Ordering::SeqCst),
        }
    }

    /// Counts a piece of parcel work as started; it finishes when the guard
    /// is dropped.
    pub(crate) fn start_work(&self) -> WorkGuard {
        self.parcel_work.started.fetch_add(1, Ordering::SeqCst);
        WorkGuard(self.shared())
    }

    /// Whether the job is ending.
    #[inline]
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
    #[inline]
    pub(crate) fn check_dest(&self, dest: LocalityId) -> Result<(), Failure> {
        if dest.get() >= self.count {
            Err(Failure::NoSuchLocality { count: self.count })
        } else if self.is_stopping() {
            Err(Failure::ShuttingDown)
        } else {
            Ok(())
        }
    }

    /// Sends a control message; failures mean the peer is lost, which is
    /// reported separately.
    pub(crate) fn send_control(&self, dest: LocalityId, control: &Control) {
        let _ = self
            .transport
            .send(dest, encode_control(self.here, control));
    }

    /// Sends one parcel in a frame of its own, past the buffers: for
    /// failures, and for actions this binary did not register.
    pub(crate) fn send_alone(
        &self,
        dest: LocalityId,
        kind: RunKind,
        action: crate::action::ActionId,
        encode: impl FnOnce(&mut FrameBuilder) -> Result<(), crate::parcel::EncodeError>,
    ) -> Result<(), Failure> {
        let mut frame = FrameBuilder::new(self.here, kind, action);
        encode(&mut frame).map_err(|e| Failure::EncodeArgs(e.to_string()))?;
        self.send_frame(dest, frame)
    }

    /// Reports a failed call that nobody waits for.
    fn report_failure(&self, action: &str, error: &RemoteError) {
        report!(self.here, "a posted call of `{action}` failed: {error:?}");
    }
}

impl Outbox for Locality {
    fn send_frame(&self, dest: LocalityId, frame: FrameBuilder) -> Result<(), Failure> {
        if dest == self.here {
            // This locality's own parcels take the receive path directly;
            // they are not traffic (and need no counting for termination
            // detection: they are never in flight).
            let frame = Bytes::from(frame.finish()).slice(FRAME_HEADROOM..);
            return self.frame(dest, frame).map_err(Failure::PeerLost);
        }
        let start = clock().raw();
        let count = u64::from(frame.len());
        let payload = frame.payload_bytes();
        let calls = (frame.kind() == RunKind::Calls)
            .then(|| registry().slot(frame.action()))
            .flatten();
        let frame = frame.finish();
        check_frame_len(&frame, self.max_frame_bytes).map_err(Failure::EncodeArgs)?;
        let wire = frame.len() as u64;
        let sent = &self.traffic.sent;
        // Count before sending so that the receiver never counts a parcel
        // the sender has not (termination detection relies on it).
        sent.parcels.fetch_add(count, Ordering::SeqCst);
        let result = self.transport.send(dest, frame).map_err(Failure::PeerLost);
        if result.is_err() {
            sent.parcels.fetch_sub(count, Ordering::SeqCst);
        }
        let ns = clock().delta_as_nanos(start, clock().raw());
        charge_network(ns);
        if result.is_ok() {
            sent.add_message(payload, wire, ns);
            if let Some(slot) = calls {
                sent.add_calls(slot, count, payload);
            }
        }
        result
    }

    fn progress(&self) {
        self.transport.poll(self);
    }
}

impl CallSite for Locality {
    fn send_output(&self, slot: usize, reply: ReplyTo, encode: &mut EncodeOutput<'_>) {
        let entries = registry().entries();
        let sent = match reply {
            ReplyTo::Nobody => Ok(()),
            ReplyTo::Caller(caller) => {
                let id = entries[slot].id();
                let to = caller.locality;
                self.aggregator
                    .push(self, RunKind::Responses, slot, id, to, encode)
            }
            ReplyTo::Continue {
                locality, action, ..
            } => match registry().slot(action) {
                Some(next) => {
                    self.aggregator
                        .push(self, RunKind::Calls, next, action, locality, encode)
                }
                None => self.send_alone(locality, RunKind::Calls, action, encode),
            },
        };
        let Err(failure) = sent else {
            return;
        };
        let error = match (reply, failure) {
            (_, Failure::EncodeArgs(e)) => RemoteError::BadOutput(e),
            (ReplyTo::Continue { locality, .. }, failure) => RemoteError::Forward {
                locality: locality.get(),
                reason: format!("{failure:?}"),
            },
            // The caller is lost: nobody to tell.
            _ => return,
        };
        self.send_failure(entries[slot].name(), reply, error);
    }

    fn send_failure(&self, action: &'static str, reply: ReplyTo, error: RemoteError) {
        let caller = match reply {
            ReplyTo::Caller(caller)
            | ReplyTo::Continue {
                caller: Some(caller),
                ..
            } => caller,
            ReplyTo::Nobody | ReplyTo::Continue { caller: None, .. } => {
                return self.report_failure(action, &error);
            }
        };
        let id = crate::action::ActionId::of_name(action);
        let sent = self.send_alone(caller.locality, RunKind::Responses, id, |frame| {
            frame.push_failure(caller, &error);
            Ok(())
        });
        // A failure to send means the caller is lost: nobody to tell.
        drop(sent);
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        let work = self.start_work();
        drop(self.sched.spawn(async move {
            let _work = work;
            future.await;
        }));
    }
}
