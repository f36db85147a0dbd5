//! Starting a locality: making its state, its workers (each holding the
//! thread-local [`Runtime`] handle), the background work they do for it,
//! its flush timer, and (with peers, on a network transport) the probe of
//! what its sends cost.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::Runtime;
use super::gather::Collectives;
use super::inbox::Inbox;
use super::liveness::{Liveness, LivenessSettings};
use super::locality::{ControlState, Locality, ParcelWork};
use super::monitor;
use super::post_failures::{OnPostFailure, PostFailures};
use super::probe::CalibrationSettings;
use super::states::{StateMaker, States};
use super::traffic::Traffic;
use super::watchdog::Watchdog;
use crate::adapt::Calibration;
use crate::aggregate::{Aggregator, Coalescing};
use crate::flow::{Budget, Ledger, SendWindows};
use crate::ids::LocalityId;
use crate::sched::{BackgroundWork, BlockOutcome, Scheduler};
use crate::transport::Transport;

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

    fn awaits_network(&self) -> bool {
        self.0
            .upgrade()
            .is_some_and(|l| !l.pending.is_empty() && !l.aggregator.task_sleeps())
    }

    fn before_idle(&self) -> bool {
        match self.0.upgrade() {
            Some(l) => l.aggregator.flush_idle_worker(&*l) | l.give_owed_credit(),
            None => false,
        }
    }

    fn next_watched_in_ns(&self) -> Option<u64> {
        self.0.upgrade()?.aggregator.next_watched_in_ns()
    }

    fn wake_due(&self) -> bool {
        self.0.upgrade().is_some_and(|l| l.aggregator.wake_due())
    }
}

/// What a locality is made with besides its place in the job: the parts
/// of the job's configuration it uses (the launch room makes them from
/// `Config`).
#[derive(Debug)]
pub(crate) struct Settings<'a> {
    /// Worker threads.
    pub(crate) workers: usize,
    /// The CPU each worker is kept on (`None`: where the OS puts it).
    pub(crate) worker_cpus: Option<Vec<usize>>,
    /// The largest frame it sends or accepts.
    pub(crate) max_frame_bytes: usize,
    /// The coalescing of actions that ask for the default.
    pub(crate) coalescing: Coalescing,
    /// Coalescing set by action slot.
    pub(crate) action_coalescing: Vec<(usize, Coalescing)>,
    /// Flow control: windows, hint, pool and queue limit.
    pub(crate) credit: Budget,
    /// Makers of the program's per-locality state.
    pub(crate) states: &'a [StateMaker],
    /// The failure detector.
    pub(crate) liveness: LivenessSettings,
    /// Polls longer than this are reported (`None`: none).
    pub(crate) watchdog: Option<Duration>,
    /// What a failed post does.
    pub(crate) on_post_failure: OnPostFailure,
    /// How `par::join` decides, encoded by `par` (see
    /// `Scheduler::set_join_policy`).
    pub(crate) join_policy: u64,
    /// Whether adaptive coalescing reports its decisions at INFO.
    pub(crate) print_adapt: bool,
    /// What sends are assumed to cost, and whether to measure it at
    /// start-up (`probe.rs`).
    pub(crate) calibration: CalibrationSettings,
}

impl Locality {
    /// Creates locality `here` of `count` and starts its workers.
    pub(crate) fn start(
        here: LocalityId,
        count: u32,
        transport: Box<dyn Transport>,
        settings: Settings<'_>,
    ) -> std::io::Result<Arc<Locality>> {
        let Settings {
            workers,
            worker_cpus,
            max_frame_bytes,
            coalescing,
            action_coalescing,
            credit,
            states,
            liveness,
            watchdog,
            on_post_failure,
            join_policy,
            print_adapt,
            calibration,
        } = settings;
        let sched = Scheduler::new(workers);
        sched.set_join_policy(join_policy);
        let aggregator = Arc::new(Aggregator::new(
            here,
            count,
            max_frame_bytes,
            Arc::clone(&sched),
            coalescing,
            &action_coalescing,
        ));
        let locality = Arc::new_cyclic(|me| Locality {
            here,
            count,
            sched: Arc::clone(&sched),
            transport,
            pending: Arc::default(),
            max_frame_bytes,
            traffic: Traffic::new(count as usize),
            calibration: Calibration::new(here, count, calibration.prior),
            started: std::time::Instant::now(),
            aggregator,
            stopping: AtomicBool::new(false),
            control: Mutex::new(ControlState::default()),
            control_changed: Condvar::new(),
            states: States::make(states, here, count),
            collectives: Collectives::default(),
            parcel_work: ParcelWork::default(),
            windows: SendWindows::new(count, &credit),
            ledger: Ledger::new(count, &credit),
            inbox: Inbox::default(),
            trains: super::trains::Trains::new(count),
            run_sizes: super::run_sizes::RunSizes::new(crate::action::registry().entries().len()),
            segment_stats: Arc::default(),
            liveness: Liveness::new(count, liveness),
            watchdog: Watchdog::new(watchdog),
            post_failures: PostFailures::new(on_post_failure),
            tuning: crate::adapt::Tuning::new(
                crate::action::registry().entries().len(),
                print_adapt,
            ),
            epochs: super::epochs::Epochs::default(),
            me: me.clone(),
        });
        sched.set_background(Arc::new(Progress(Arc::downgrade(&locality))));
        let runtime = Runtime::new(Arc::clone(&locality));
        let on_start = Arc::new(move |_index| {
            super::handle::set_current(runtime.clone());
        });
        sched.start(&format!("courier-{}", here.get()), worker_cpus, on_start)?;
        let weak = Arc::downgrade(&locality);
        locality.aggregator.start_timer(move |key, deadline| {
            let Some(locality) = weak.upgrade() else {
                return false;
            };
            locality.aggregator.flush_due(&*locality, key, deadline);
            true
        })?;
        monitor::start(&locality)?;
        if calibration.probe && count > 1 {
            locality.probe_send_costs();
        }
        locality.epochs.start_if_adaptive(&locality);
        Ok(locality)
    }
}
