//! [`Runtime`]: the handle through which a program calls actions and spawns tasks.

use std::cell::{Cell, OnceCell};
use std::future::Future;
use std::sync::Arc;

use super::locality::Locality;
use crate::ids::LocalityId;
use crate::sched::JoinHandle;

/// A handle to the running locality: call actions, spawn tasks, ask where
/// you are. Cheap to clone.
///
/// The main function receives one from [`launch`](crate::launch); code
/// running inside an action or task gets one from [`current`].
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
/// let sum = courier::launch(Config::new().localities(3).transport(TransportKind::Inproc), |rt| async move {
///     let mut sum = 0;
///     for l in rt.localities() {
///         sum += rt.call(l, square, (u64::from(l.get()) + 1,)).await?;
///     }
///     Ok(sum)
/// })
/// .unwrap();
/// assert_eq!(sum, 1 + 4 + 9);
/// ```
#[derive(Clone)]
pub struct Runtime {
    locality: Arc<Locality>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("here", &self.here())
            .field("localities", &self.num_localities())
            .finish()
    }
}

thread_local! {
    /// The runtime of the locality this thread works for: set once, when a
    /// worker thread starts (a `OnceCell`, so reading it is a load and a
    /// check, no borrow flag).
    static CURRENT: OnceCell<Current> = const { OnceCell::new() };
    /// The locality of `CURRENT` as a plain pointer, for the hot lookups
    /// (an action reaching its locality's state once per call): a type
    /// without `Drop`, so reading it is a load. Null unless `CURRENT` holds
    /// the runtime whose `Arc` keeps that locality alive.
    static CURRENT_LOCALITY: Cell<*const Locality> = const { Cell::new(std::ptr::null()) };
}

/// The runtime in `CURRENT`; dropping it (when the thread ends) clears
/// `CURRENT_LOCALITY` first, so the pointer never outlives the `Arc`.
struct Current(Runtime);

impl Drop for Current {
    fn drop(&mut self) {
        let _ = CURRENT_LOCALITY.try_with(|c| c.set(std::ptr::null()));
    }
}

pub(super) fn set_current(runtime: Runtime) {
    let locality = Arc::as_ptr(&runtime.locality);
    CURRENT.with(|c| {
        if c.set(Current(runtime)).is_err() {
            unreachable!("a worker thread belongs to one locality");
        }
    });
    CURRENT_LOCALITY.with(|c| c.set(locality));
}

/// Runs `f` with the locality this thread works for, found with one load.
#[inline]
pub(crate) fn with_current_locality<R>(f: impl FnOnce(Option<&Locality>) -> R) -> R {
    let locality = CURRENT_LOCALITY.with(Cell::get);
    // SAFETY: the pointer is null or was taken from the `Arc<Locality>` of
    // the runtime in `CURRENT`, which is set once and never taken out
    // before the thread ends, and whose drop clears the pointer first
    // (`Current::drop`). So a non-null pointer points to a live locality
    // for as long as this thread runs `f`, which cannot end the thread.
    #[allow(unsafe_code)]
    let locality = unsafe { locality.as_ref() };
    f(locality)
}

/// The runtime of the locality this thread works for.
///
/// # Panics
///
/// Panics when called outside a Courier worker thread (outside actions and
/// tasks); use [`try_current`] to check.
///
/// # Examples
///
/// ```
/// # use courier::{Config, TransportKind};
/// #[courier::action]
/// fn where_am_i() -> u32 {
///     courier::current().here().get()
/// }
/// # courier::launch(Config::new().localities(2).transport(TransportKind::Inproc), |rt| async move {
/// #     assert_eq!(rt.call(rt.locality(1), where_am_i, ()).await?, 1);
/// #     Ok(())
/// # }).unwrap();
/// ```
pub fn current() -> Runtime {
    try_current().expect("courier::current() called outside a Courier worker thread")
}

/// The runtime of the locality this thread works for, if it is a worker thread.
pub fn try_current() -> Option<Runtime> {
    CURRENT.with(|c| c.get().map(|current| current.0.clone()))
}

impl Runtime {
    pub(crate) fn new(locality: Arc<Locality>) -> Self {
        Runtime { locality }
    }

    pub(crate) fn inner(&self) -> &Arc<Locality> {
        &self.locality
    }

    /// The locality this code runs on.
    pub fn here(&self) -> LocalityId {
        self.locality.here
    }

    /// The number of localities in the job.
    pub fn num_localities(&self) -> u32 {
        self.locality.count
    }

    /// The locality of rank `rank`.
    ///
    /// # Panics
    ///
    /// Panics if the job has no such locality.
    pub fn locality(&self, rank: u32) -> LocalityId {
        assert!(
            rank < self.locality.count,
            "locality#{rank} does not exist: the job has {} localities",
            self.locality.count
        );
        LocalityId::new(rank)
    }

    /// Every locality of the job, in rank order.
    pub fn localities(&self) -> impl Iterator<Item = LocalityId> + use<> {
        (0..self.locality.count).map(LocalityId::new)
    }

    /// This locality's worker threads.
    pub(crate) fn worker_count(&self) -> usize {
        self.locality.sched.workers()
    }

    /// The average cost of scheduling a task on this locality so far
    /// (`/threads/time/average-overhead`), once it has run enough tasks to
    /// say (a thousand).
    pub(crate) fn scheduling_overhead_ns(&self) -> Option<f64> {
        let snapshot = self.locality.sched.snapshot();
        let total = snapshot.total();
        (total.finished >= 1000)
            .then(|| total.func_ns.saturating_sub(total.exec_ns) as f64 / total.finished as f64)
    }

    /// Spawns a task on this locality's scheduler.
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.locality.sched.spawn(future)
    }
}
