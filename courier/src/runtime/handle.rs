//! [`Runtime`]: the handle through which a program calls actions and spawns tasks.

use std::cell::{Cell, OnceCell};
use std::future::Future;
use std::panic::Location;
use std::sync::Arc;

use super::locality::Locality;
use crate::ids::LocalityId;
use crate::sched::{JoinHandle, SchedulerId};

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
    /// The id of the locality's scheduler, kept here for `spawn` to tell
    /// whether it is called on one of its workers in one load, not three
    /// (the locality, its scheduler, the id).
    sched: SchedulerId,
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
        let sched = locality.sched.id();
        Runtime { locality, sched }
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

    /// Spawns a task on this locality's scheduler, or runs it at once,
    /// up to its first `.await` that waits, when that is expected to be
    /// too short to be worth a task (dynamic inlining).
    ///
    /// Called on one of this locality's workers (in a task or an action)
    /// under [`Inlining::Adaptive`] (the default), `spawn` measures how
    /// long its children's first polls take, per call site (this call's
    /// place in the source) and depth in the tree of spawns. Once a site
    /// is measured below `λ_min` times the task overhead
    /// (`/par/parameter/lambda-min`, `/par/time/task-overhead`), its next
    /// children run inline: polled once by `spawn` itself, on the calling
    /// thread, before it returns; a child that completes then costs a
    /// boxed future and no task (the returned handle is then already
    /// finished), and one that waits goes on as a task. Inlining happens
    /// only while the calling worker has another task queued for the
    /// other workers (or is the only worker), and at most 16 inline runs
    /// deep. Spawns from any other thread are always queued. See
    /// [`Inlining`] for the other policies (`Depth(n)`: a fixed depth of
    /// spawns from which children run inline) and
    /// `/threads/count/inlined` for how many did.
    ///
    /// Results do not change: the child runs as it would in a task, and
    /// its panic is resumed where its handle is awaited either way.
    ///
    /// The caveat: a child run inline runs *inside* the call to `spawn`,
    /// on the parent's thread, before the parent's next statement. A
    /// child that blocks the thread on something the parent holds across
    /// the `spawn` call (a `std::sync::Mutex` guard, a `RefCell` borrow,
    /// a spin-wait for a flag the parent sets afterwards) would deadlock
    /// or panic, where as a task it would only wait for the parent. Such
    /// code should wait with `.await` (an async lock, a channel), which a
    /// child run inline does as a task does; or opt out with
    /// [`Config::inlining`](crate::Config::inlining)`(Inlining::Never)`
    /// (or `COURIER_INLINING=never`), which also turns off `par::join`'s
    /// inlining.
    ///
    /// # Examples
    ///
    /// ```
    /// use courier::{Config, TransportKind};
    ///
    /// let sum = courier::launch(Config::new().localities(1).transport(TransportKind::Inproc), |rt| async move {
    ///     let children: Vec<_> = (0..100u64).map(|i| rt.spawn(async move { i * i })).collect();
    ///     let mut sum = 0;
    ///     for child in children {
    ///         sum += child.await;
    ///     }
    ///     Ok(sum)
    /// })
    /// .unwrap();
    /// assert_eq!(sum, 328_350);
    /// ```
    ///
    /// [`Inlining`]: crate::par::Inlining
    /// [`Inlining::Adaptive`]: crate::par::Inlining::Adaptive
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        crate::sched::spawn_at(self.sched, &self.locality.sched, Location::caller(), future)
    }

    /// Spawns a task on this locality's scheduler, never inline: for the
    /// runtime's own tasks that are meant to run in parallel (the chunks
    /// of a parallel loop) or to measure what a task costs.
    pub(crate) fn spawn_task<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.locality.sched.spawn(future)
    }
}
