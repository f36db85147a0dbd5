//! What a locality does once its job has started, by role: the root runs
//! main, waits for the job to go idle and stops the others; in an SPMD job
//! every other locality runs main too and reports back; every non-root
//! locality serves calls until the root stops the job. Shared by the ways a
//! job starts (`run.rs`: threads, self-launch, join; `mpi_job.rs`).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::Config;
use crate::counters::Printer;
use crate::ids::LocalityId;
use crate::parcel::{Control, panic_message};
use crate::runtime::{BoxError, Error, Locality, Runtime, report};
use crate::runtime::{shut_down_peers, wait_for_quiescence};

/// How long a non-root locality may take to flush its last frames at shutdown.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The future of a main function.
pub(super) type MainFuture<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

/// A job's main function: run on the root only ([`launch`]), or on every
/// locality ([`launch_spmd`]).
pub(super) enum Main<'f, T> {
    Root(Box<dyn FnOnce(Runtime) -> MainFuture<T> + 'f>),
    Every(&'f (dyn Fn(Runtime) -> MainFuture<T> + 'f)),
}

impl<T: Send + 'static> Main<'_, T> {
    /// Whether every locality runs it.
    pub(super) fn spmd(&self) -> bool {
        matches!(self, Main::Every(_))
    }

    /// The root's main future.
    pub(super) fn for_root(self, rt: Runtime) -> MainFuture<T> {
        let main = match self {
            Main::Root(main) => main(rt.clone()),
            Main::Every(main) => main(rt.clone()),
        };
        after_measuring(rt, main)
    }
}

/// `main`, after this process's task overhead was measured (once per
/// process, a fraction of a millisecond): what
/// [`par::join`](crate::par::join) decides from, before any program code
/// runs.
fn after_measuring<T: Send + 'static>(rt: Runtime, main: MainFuture<T>) -> MainFuture<T> {
    Box::pin(async move {
        crate::par::measure_task_overhead(&rt).await;
        main.await
    })
}

/// Runs `main` on the root locality, waits for the job to go idle and stops
/// the other localities. Leaves the root's own scheduler running.
pub(super) fn run_root<T: Send + 'static>(
    config: &Config,
    root: &Arc<Locality>,
    main: Main<'_, T>,
) -> Result<T, Error> {
    let spmd = main.spmd();
    let rt = Runtime::new(Arc::clone(root));
    let printer = match config.counters.is_active() {
        true => Printer::start(&rt, &config.counters).map(Some),
        false => Ok(None),
    };
    let metrics = match config.counters_http {
        Some(addr) => rt.serve_metrics(addr).map(Some).map_err(|e| {
            Error::Config(format!(
                "cannot serve counters at http://{addr}/metrics: {e}"
            ))
        }),
        None => Ok(None),
    };
    let started = printer
        .map_err(|e| Error::Config(e.to_string()))
        .and_then(|p| metrics.map(|m| (p, m)));
    let outcome = match started {
        Err(e) => Err(e),
        Ok((mut printer, metrics)) => {
            let task = root.sched.spawn(main.for_root(rt));
            let outcome =
                std::panic::catch_unwind(AssertUnwindSafe(|| futures::executor::block_on(task)));
            let remote = if spmd { wait_for_mains(root) } else { None };
            // Counter traffic must stop for the job to look idle.
            drop(metrics);
            if let Some(printer) = &mut printer {
                printer.stop_periodic();
            }
            wait_for_quiescence(root);
            if let Some(printer) = printer {
                printer.finish();
            }
            match (outcome, remote) {
                (Ok(Ok(_)), Some((locality, message))) => {
                    Err(Error::RemoteMain { locality, message })
                }
                (Ok(Ok(value)), None) => Ok(value),
                (Ok(Err(error)), _) => Err(Error::Main(error)),
                (Err(panic), _) => Err(Error::MainPanicked(panic_message(&*panic))),
            }
        }
    };
    let lost = shut_down_peers(root);
    root.pending
        .fail_all(|| crate::parcel::Failure::ShuttingDown);
    if !lost.is_empty() {
        return Err(Error::LocalitiesLost(lost));
    }
    match (outcome, root.post_failures.first()) {
        (Ok(_), Some((origin, message))) => Err(Error::PostFailed { origin, message }),
        (outcome, _) => outcome,
    }
}

/// At the root of an SPMD job: waits until every other locality's main
/// returned (or a locality was lost); returns the first that failed.
fn wait_for_mains(root: &Locality) -> Option<(LocalityId, String)> {
    let mut control = root.control.lock();
    while control.mains_done.len() + 1 < root.count as usize && control.lost.is_empty() {
        root.control_changed.wait(&mut control);
    }
    control
        .mains_done
        .iter()
        .find_map(|(l, error)| Some((*l, error.clone()?)))
}

/// Runs an SPMD job's main on a locality other than the root: tells the
/// root when it returned, serves until the job ends, and returns its result.
pub(super) fn run_member<T: Send + 'static>(
    locality: &Arc<Locality>,
    main: &(dyn Fn(Runtime) -> MainFuture<T> + '_),
) -> Result<T, Error> {
    let task = locality.sched.spawn({
        let rt = Runtime::new(Arc::clone(locality));
        after_measuring(rt.clone(), main(rt))
    });
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| futures::executor::block_on(task)));
    let error = match &outcome {
        Ok(Ok(_)) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(panic) => Some(format!("it panicked: {}", panic_message(&**panic))),
    };
    locality.send_control(LocalityId::ROOT, &Control::MainDone { error });
    if serve_until_shutdown(locality) != 0 {
        let lost = locality.control.lock().lost.clone();
        return Err(Error::LocalitiesLost(lost));
    }
    match (outcome, locality.post_failures.first()) {
        (Ok(Ok(_)), Some((origin, message))) => Err(Error::PostFailed { origin, message }),
        (Ok(Ok(value)), None) => Ok(value),
        (Ok(Err(error)), _) => Err(Error::Main(error)),
        (Err(panic), _) => Err(Error::MainPanicked(panic_message(&*panic))),
    }
}

/// Serves a non-root locality until the root stops the job; returns the
/// status the process should exit with.
pub(super) fn serve_until_shutdown(locality: &Arc<Locality>) -> i32 {
    let mut control = locality.control.lock();
    loop {
        // Losing another locality fails the calls that involve it; the root,
        // connected to every locality, sees the loss too and ends the job.
        if let Some((_, why)) = control.lost.iter().find(|(l, _)| *l == LocalityId::ROOT) {
            report!(
                error,
                locality.here,
                "stopping: lost the root locality: {why}"
            );
            // The program has its answer: the failure detector must not end
            // the process under it.
            locality.liveness.release();
            return 1;
        }
        if control.shutdown_requested {
            break;
        }
        locality.control_changed.wait(&mut control);
    }
    drop(control);
    if !locality.transport.flush(&**locality, FLUSH_TIMEOUT) {
        report!(
            warn,
            locality.here,
            "could not send its last frames within {FLUSH_TIMEOUT:?}"
        );
    }
    locality.stop();
    0
}
