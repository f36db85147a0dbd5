//! [`Locality`]: the state one locality shares between its workers, and
//! how it stops.
//!
//! How it starts is in `start.rs`; how a program's calls become parcels
//! and frames leave, in `send.rs`;
//! what a locality does with a received frame, in `receive.rs` and
//! `inbox.rs`; flow control, in `credit.rs`; how
//! results go back, in `respond.rs`; the control protocol, in `control.rs`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Condvar, Mutex};
use rustc_hash::FxHashMap;

use super::Traffic;
use super::gather::Collectives;
use super::inbox::Inbox;
use super::liveness::Liveness;
use super::post_failures::PostFailures;
use super::states::States;
use super::watchdog::Watchdog;
use crate::adapt::Calibration;
use crate::aggregate::{Aggregator, Outbox, Reason};
use crate::flow::{Ledger, SendWindows};
use crate::ids::LocalityId;
use crate::parcel::{
    ActivityCounts, Control, Failure, FrameBuilder, PendingTable, RunKind, SegmentStats,
    encode_control,
};
use crate::sched::Scheduler;
use crate::transport::Transport;

/// Reports what happened to locality `$here` through `tracing` at
/// `$level` (`warn`, `error`, `info`): `locality#N: message`. Courier
/// prints nothing itself; see `report_to_stderr`.
macro_rules! report {
    ($level:ident, $here:expr, $($arg:tt)*) => {
        tracing::$level!("{}: {}", $here, format_args!($($arg)*))
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
    /// The root asked its peers to stop (at the root): acknowledgements
    /// count from then on.
    pub(crate) shutdown_sent: bool,
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
    /// What a frame to each peer costs to send (α and β), from the
    /// start-up probe and every frame sent since.
    pub(crate) calibration: Calibration,
    /// When this locality started, for `/runtime/uptime` and counter timestamps.
    pub(crate) started: std::time::Instant,
    /// Coalescing buffers and their flush timer.
    pub(crate) aggregator: Arc<Aggregator>,
    /// Set once the job is ending: lost connections are expected then.
    pub(super) stopping: AtomicBool,
    pub(crate) control: Mutex<ControlState>,
    pub(crate) control_changed: Condvar,
    /// The program's per-locality state.
    pub(crate) states: States,
    /// Collectives and quiescence requests of this locality.
    pub(crate) collectives: Collectives,
    /// Work received parcels started and finished (runs of calls, calls
    /// that waited): what quiescence waits for.
    pub(super) parcel_work: ParcelWork,
    /// Credit windows towards every destination, and frames waiting for credit.
    pub(crate) windows: SendWindows,
    /// What every origin has in this locality, and the credit owed back.
    pub(crate) ledger: Ledger,
    /// What this locality's segmented calls did.
    pub(crate) segment_stats: Arc<SegmentStats>,
    /// Received runs of calls waiting to run.
    pub(crate) inbox: Inbox<Delivery>,
    /// The runs of each caller in the inbox.
    pub(super) trains: super::trains::Trains,
    /// How many received calls of each action a task runs.
    pub(super) run_sizes: super::run_sizes::RunSizes,
    /// When every peer was last heard from and sent to (the failure detector).
    pub(crate) liveness: Liveness,
    /// Reports tasks that run too long.
    pub(crate) watchdog: Watchdog,
    /// Posts that failed, here and of this locality elsewhere.
    pub(crate) post_failures: PostFailures,
    /// Adaptive coalescing's decisions and the model's inputs.
    pub(crate) tuning: crate::adapt::Tuning,
    /// Adaptive coalescing's loop, run by the threads that send.
    pub(crate) epochs: super::epochs::Epochs,
    /// This locality, for the tasks it spawns to hold.
    pub(super) me: Weak<Locality>,
}

/// Counts of parcel work: monotonic, compared across waves.
#[derive(Debug, Default)]
pub(super) struct ParcelWork {
    started: std::sync::atomic::AtomicU64,
    finished: std::sync::atomic::AtomicU64,
}

/// One received run of calls waiting in the inbox, with the credit its
/// running gives back.
pub(crate) struct Delivery {
    pub(super) source: LocalityId,
    pub(super) body: bytes::Bytes,
    pub(super) action: crate::ids::ActionId,
    pub(super) count: u32,
    /// The run as it came, not a piece of one split between tasks.
    pub(super) whole: bool,
    /// Whether its caller lets the responses wait for company
    /// (`Run::responses_wait`, `aggregate/answer.rs`).
    pub(super) patient: bool,
    /// The part of its frame's charge this run holds.
    pub(super) credit: usize,
    pub(super) work: WorkGuard,
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

impl Locality {
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
        self.liveness.release();
        self.sched.shutdown();
        self.transport.close();
    }

    /// Whether `locality` is one of this job's (a locality index read from
    /// the wire may name any).
    #[inline]
    pub(crate) fn exists(&self, locality: LocalityId) -> bool {
        locality.get() < self.count
    }

    /// Whether `dest` is a locality of this job.
    #[inline]
    pub(crate) fn check_dest(&self, dest: LocalityId) -> Result<(), Failure> {
        if !self.exists(dest) {
            Err(Failure::NoSuchLocality { count: self.count })
        } else if self.is_stopping() {
            Err(Failure::ShuttingDown)
        } else {
            self.post_failures.check()
        }
    }

    /// Sends a control message; failures mean the peer is lost, which is
    /// reported separately.
    pub(crate) fn send_control(&self, dest: LocalityId, control: &Control) {
        let _ = self.transmit(dest, encode_control(self.here, control));
    }

    /// Hands a frame to the transport, noting for the failure detector
    /// that `dest` was sent something. Every frame leaves through here.
    #[inline]
    pub(crate) fn transmit(
        &self,
        dest: LocalityId,
        frame: Vec<u8>,
    ) -> Result<(), crate::transport::SendError> {
        self.liveness.sent(dest);
        self.transport.send(dest, frame)
    }

    /// Sends one parcel in a frame of its own, past the buffers: for
    /// failures, and for actions this binary did not register.
    pub(crate) fn send_alone(
        &self,
        dest: LocalityId,
        kind: RunKind,
        action: crate::ids::ActionId,
        encode: impl FnOnce(&mut FrameBuilder) -> Result<(), crate::parcel::EncodeError>,
    ) -> Result<(), Failure> {
        let mut frame = FrameBuilder::new(self.here, kind, action);
        encode(&mut frame).map_err(|e| Failure::EncodeArgs(e.to_string()))?;
        self.send_frame(dest, frame)
    }
}
