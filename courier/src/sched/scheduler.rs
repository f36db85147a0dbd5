//! The scheduler of one locality: queues, worker threads, spawning.

use std::future::Future;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use async_task::Runnable;
use crossbeam_deque::{Injector, Stealer, Worker};
use parking_lot::Mutex;

use super::join::JoinHandle;
use super::perf::Perf;
use super::sleep::Sleep;
use super::stats::{PublishedStats, StatsSnapshot};
use super::worker;

/// Work a worker does between tasks and while idle: network progress.
///
/// This is the seam between the scheduler and the transports; the scheduler
/// knows nothing else about the network.
pub(crate) trait BackgroundWork: Send + Sync + 'static {
    /// Makes whatever progress is possible without blocking. Returns whether
    /// anything was done (a frame read or written).
    fn poll(&self) -> bool;

    /// Blocks until progress was made, [`wake`](Self::wake) was called, or
    /// `timeout` passed. Must return at once if `wake` was called since the
    /// previous `block` returned (wake-ups are sticky).
    fn block(&self, timeout: Duration) -> BlockOutcome;

    /// Interrupts a blocked (or the next) [`block`](Self::block) call.
    fn wake(&self);

    /// Called by a worker that ran out of tasks, before it polls, spins or
    /// parks: the place to send what it was holding back (its coalescing
    /// buffers). Returns whether it sent anything.
    fn before_idle(&self) -> bool {
        false
    }
}

/// What a [`BackgroundWork::block`] call did.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockOutcome {
    /// The call blocked and then spent `work_ns` nanoseconds making
    /// progress (reading, decoding, dispatching); the worker counts that
    /// time as background work rather than idle time.
    Blocked { work_ns: u64 },
    /// Another thread holds the progress path; the caller should retry soon.
    Busy,
    /// There is nothing to block on (no network): park on the scheduler.
    Unsupported,
}

/// Background work for a locality without a network.
#[derive(Debug, Default)]
pub(crate) struct NoBackgroundWork;

impl BackgroundWork for NoBackgroundWork {
    fn poll(&self) -> bool {
        false
    }
    fn block(&self, _timeout: Duration) -> BlockOutcome {
        BlockOutcome::Unsupported
    }
    fn wake(&self) {}
}

/// A work-stealing scheduler: `workers` threads, one deque each, a shared
/// injector, and a parking lot.
pub(crate) struct Scheduler {
    pub(super) injector: Injector<Runnable>,
    pub(super) stealers: Vec<Stealer<Runnable>>,
    locals: Mutex<Vec<Option<Worker<Runnable>>>>,
    pub(super) sleep: Sleep,
    background: OnceLock<Arc<dyn BackgroundWork>>,
    pub(super) shutdown: AtomicBool,
    spawned: AtomicU64,
    pub(super) published: Box<[PublishedStats]>,
    threads: Mutex<Vec<thread::JoinHandle<()>>>,
    /// Hardware and kernel event counters of the workers.
    pub(crate) perf: Perf,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("workers", &self.stealers.len())
            .field("spawned", &self.spawned.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// Creates a scheduler with `workers` worker threads (not started yet).
    ///
    /// # Panics
    ///
    /// Panics if `workers` is zero.
    pub(crate) fn new(workers: usize) -> Arc<Self> {
        assert!(workers > 0, "a scheduler needs at least one worker");
        let locals: Vec<Worker<Runnable>> = (0..workers).map(|_| Worker::new_fifo()).collect();
        let stealers = locals.iter().map(Worker::stealer).collect();
        Arc::new(Scheduler {
            injector: Injector::new(),
            stealers,
            locals: Mutex::new(locals.into_iter().map(Some).collect()),
            sleep: Sleep::default(),
            background: OnceLock::new(),
            shutdown: AtomicBool::new(false),
            spawned: AtomicU64::new(0),
            published: (0..workers).map(|_| PublishedStats::default()).collect(),
            perf: Perf::new(workers),
            threads: Mutex::new(Vec::new()),
        })
    }

    /// Installs the background work. Call at most once, before [`start`](Self::start).
    pub(crate) fn set_background(&self, background: Arc<dyn BackgroundWork>) {
        if self.background.set(background).is_err() {
            unreachable!("background work installed twice");
        }
    }

    pub(super) fn background(&self) -> &dyn BackgroundWork {
        match self.background.get() {
            Some(b) => b.as_ref(),
            None => &NoBackgroundWork,
        }
    }

    /// Starts the worker threads and returns once each has run
    /// `on_start(index)`, which runs first on every worker thread
    /// (the runtime uses it to install its thread-local handle).
    pub(crate) fn start(
        self: &Arc<Self>,
        name: &str,
        on_start: Arc<dyn Fn(usize) + Send + Sync>,
    ) -> std::io::Result<()> {
        let locals: Vec<_> = self.locals.lock().iter_mut().map(Option::take).collect();
        // Wait until every worker has run `on_start`, so that what it
        // records (the thread-local handle, the thread id) is there once
        // `start` returns.
        let started = Arc::new((Mutex::new(0usize), parking_lot::Condvar::new()));
        let mut threads = self.threads.lock();
        for (index, local) in locals.into_iter().enumerate() {
            let local = local.expect("scheduler started twice");
            let sched = Arc::clone(self);
            let on_start = Arc::clone(&on_start);
            let started = Arc::clone(&started);
            let handle = thread::Builder::new()
                .name(format!("{name}-worker-{index}"))
                .spawn(move || {
                    on_start(index);
                    *started.0.lock() += 1;
                    started.1.notify_all();
                    worker::run(sched, index, local);
                })?;
            threads.push(handle);
        }
        let count = threads.len();
        drop(threads);
        let mut running = started.0.lock();
        while *running < count {
            started.1.wait(&mut running);
        }
        Ok(())
    }

    /// Spawns a task. It starts on the current worker's deque when called from
    /// a worker of this scheduler, else on the injector.
    pub(crate) fn spawn<F>(self: &Arc<Self>, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match worker::current_index(self) {
            // Only this worker writes its count: no read-modify-write.
            Some(index) => self.published[index].count_spawn(),
            None => {
                self.spawned.fetch_add(1, Ordering::Relaxed);
            }
        }
        let sched = Arc::clone(self);
        let future = worker::count_finish(future);
        let (runnable, task) = async_task::Builder::new()
            .propagate_panic(true)
            .spawn(move |_| future, move |runnable| sched.schedule(runnable));
        runnable.schedule();
        JoinHandle::new(task)
    }

    /// Puts a runnable task on a queue and wakes a worker for it.
    fn schedule(&self, runnable: Runnable) {
        match worker::push_local(self, runnable) {
            // A lone worker that queued a task for itself is awake: it
            // will find the task without being woken.
            None if self.stealers.len() == 1 => return,
            None => {}
            Some(runnable) => self.injector.push(runnable),
        }
        self.sleep.notify_one(self.background());
    }

    /// The number of worker threads.
    pub(crate) fn workers(&self) -> usize {
        self.stealers.len()
    }

    /// The index of the calling thread among this scheduler's workers, if
    /// it is one of them.
    #[inline]
    pub(crate) fn current_worker(&self) -> Option<usize> {
        worker::current_index(self)
    }

    /// Whether any queue holds a task.
    pub(super) fn has_work(&self) -> bool {
        !self.injector.is_empty() || self.stealers.iter().any(|s| !s.is_empty())
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    pub(crate) fn is_shut_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// Reads the published statistics of every worker.
    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        // Read `spawned` last: a task spawned after the worker stats were
        // read then shows as live rather than being missed.
        let workers = self.published.iter().map(PublishedStats::load).collect();
        let poll_histograms = self
            .published
            .iter()
            .map(PublishedStats::load_histogram)
            .collect();
        let by_workers: u64 = self.published.iter().map(PublishedStats::spawned).sum();
        StatsSnapshot {
            spawned: self.spawned.load(Ordering::Acquire) + by_workers,
            workers,
            poll_histograms,
        }
    }

    /// Stops the workers once they finish their current task, waits for
    /// them (except the calling thread, if it is one), and drops the tasks
    /// still queued.
    pub(crate) fn shutdown(&self) {
        self.shutdown.store(true, Ordering::Release);
        self.sleep.notify_all(self.background());
        let threads = std::mem::take(&mut *self.threads.lock());
        let me = thread::current().id();
        for handle in threads {
            if handle.thread().id() != me {
                // A worker thread only ends by returning from its loop; a
                // panic there is a broken invariant already reported.
                let _ = handle.join();
            }
        }
        while !self.injector.steal().is_empty() {}
    }
}
