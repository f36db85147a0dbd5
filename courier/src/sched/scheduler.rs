//! The scheduler of one locality: its queues, sleeping workers, background
//! work and statistics, shared by its worker threads (`worker.rs`), which
//! `spawn.rs` starts and gives tasks.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{OnceLock, Weak};
use std::thread;

use super::task::Runnable;
use crossbeam_deque::{Injector, Stealer, Worker};
use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;

use super::background::{BackgroundWork, NoBackgroundWork};
use super::deque::{TASK_DEQUE_CAPACITY, TaskDeque, TaskStealer, holds_tasks};
use super::perf::Perf;
use super::sleep::Sleep;
use super::stats::{PublishedStats, StatsSnapshot};

/// The identity of one scheduler of this process, never reused: what its
/// tasks keep to find it when they are woken, instead of holding it.
///
/// A task's schedule function keeps its scheduler's id, not an `Arc` of
/// it: cloning the `Arc` for every task and dropping it when the task
/// ended were two atomic operations on one shared counter per task, and a
/// task left in a queue kept its scheduler alive. A task woken on one of
/// its scheduler's workers (the usual case: a spawn, a wake by a task)
/// goes to that worker's deque through the thread's own state
/// (`worker.rs`); one woken anywhere else looks its scheduler up among the
/// live ones ([`Scheduler::find`]). A task woken after its scheduler is
/// gone is dropped, as it would have stayed in a queue nobody runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SchedulerId(u64);

/// The next id to hand out; 0 is never one (a thread that works for no
/// scheduler has 0 in its slot, `worker.rs`).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Every scheduler of the process that has not been dropped.
static LIVE: RwLock<Option<FxHashMap<SchedulerId, Weak<Scheduler>>>> = RwLock::new(None);

impl SchedulerId {
    fn next() -> Self {
        SchedulerId(NEXT_ID.fetch_add(1, Ordering::Relaxed))
    }

    /// The id as a number, for a thread-local slot.
    pub(crate) fn get(self) -> u64 {
        self.0
    }
}

/// A work-stealing scheduler: `workers` threads, one deque each, a shared
/// injector, and a parking lot.
pub(crate) struct Scheduler {
    /// What this scheduler's tasks keep to find it.
    pub(super) id: SchedulerId,
    pub(super) injector: Injector<Runnable>,
    pub(super) stealers: Vec<TaskStealer>,
    pub(super) locals: Mutex<Vec<Option<TaskDeque>>>,
    /// The other ends of the workers' deques of forked closures (see
    /// `fork.rs`): what an idle worker, or one waiting for a forked
    /// closure, takes from the others.
    pub(super) offer_stealers: Vec<Stealer<Runnable>>,
    pub(super) offer_locals: Mutex<Vec<Option<Worker<Runnable>>>>,
    /// How `par::join` decides on these workers: an opaque code of
    /// `par`'s, copied into each worker thread when it starts.
    pub(super) join_policy: AtomicU64,
    pub(super) sleep: Sleep,
    background: OnceLock<Arc<dyn BackgroundWork>>,
    pub(super) shutdown: AtomicBool,
    pub(super) spawned: AtomicU64,
    pub(super) published: Box<[PublishedStats]>,
    pub(super) threads: Mutex<Vec<thread::JoinHandle<()>>>,
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

impl Drop for Scheduler {
    fn drop(&mut self) {
        if let Some(live) = LIVE.write().as_mut() {
            live.remove(&self.id);
        }
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
        let locals: Vec<TaskDeque> = (0..workers)
            .map(|_| TaskDeque::new(TASK_DEQUE_CAPACITY))
            .collect();
        let stealers = locals.iter().map(TaskDeque::stealer).collect();
        // Oldest first, as the task deques (newest first made fib twice
        // slower on two workers: a waiting worker took its own latest
        // offers back as tasks instead of its thief's).
        let offers: Vec<Worker<Runnable>> = (0..workers).map(|_| Worker::new_fifo()).collect();
        let offer_stealers = offers.iter().map(Worker::stealer).collect();
        let sched = Arc::new(Scheduler {
            id: SchedulerId::next(),
            injector: Injector::new(),
            stealers,
            locals: Mutex::new(locals.into_iter().map(Some).collect()),
            offer_stealers,
            offer_locals: Mutex::new(offers.into_iter().map(Some).collect()),
            join_policy: AtomicU64::new(0),
            sleep: Sleep::default(),
            background: OnceLock::new(),
            shutdown: AtomicBool::new(false),
            spawned: AtomicU64::new(0),
            published: (0..workers).map(|_| PublishedStats::default()).collect(),
            perf: Perf::new(workers),
            threads: Mutex::new(Vec::new()),
        });
        LIVE.write()
            .get_or_insert_with(FxHashMap::default)
            .insert(sched.id, Arc::downgrade(&sched));
        sched
    }

    /// The scheduler `id`, if it is still alive.
    pub(super) fn find(id: SchedulerId) -> Option<Arc<Scheduler>> {
        LIVE.read().as_ref()?.get(&id)?.upgrade()
    }

    /// Sets the code of `par::join`'s policy on these workers. Call
    /// before [`start`](Self::start).
    pub(crate) fn set_join_policy(&self, code: u64) {
        self.join_policy.store(code, Ordering::Relaxed);
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

    /// The number of worker threads.
    pub(crate) fn workers(&self) -> usize {
        self.stealers.len()
    }

    /// This scheduler's id, which a worker thread keeps (`worker.rs`).
    pub(crate) fn id(&self) -> SchedulerId {
        self.id
    }

    /// Whether any queue holds a task, asked by the worker owning `mine`.
    pub(super) fn has_work(&self, mine: &TaskDeque) -> bool {
        !self.injector.is_empty()
            || !mine.is_empty()
            || self.stealers.iter().any(|s| holds_tasks(s, mine))
            || self.offer_stealers.iter().any(|s| !s.is_empty())
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

    /// The polls running now: (worker, raw clock ticks when it began, label).
    pub(crate) fn running_polls(&self) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        self.published
            .iter()
            .enumerate()
            .filter_map(|(worker, p)| p.running().map(|(since, label)| (worker, since, label)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scheduler_is_found_while_alive_and_not_after() {
        let sched = Scheduler::new(1);
        let id = sched.id;
        assert!(Arc::ptr_eq(&Scheduler::find(id).expect("alive"), &sched));
        drop(sched);
        assert!(
            Scheduler::find(id).is_none(),
            "a dropped scheduler is still found"
        );
        assert_ne!(Scheduler::new(1).id, id, "an id was reused");
    }
}
