//! Per-worker time and task accounting.
//!
//! A worker counts in plain fields ([`WorkerStats`]) and copies them into
//! cache-line-aligned atomics ([`PublishedStats`]) at maintenance points:
//! before it parks, at every background-work call, and after any task poll
//! longer than [`super::PUBLISH_AFTER_NS`]. Readers load with
//! `Acquire`; a value is at most [`super::BACKGROUND_INTERVAL`] tasks (or one
//! long-running task) behind the truth, and exact for a parked worker.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::POLL_BUCKETS;

/// What one worker has done so far. Owned by the worker thread.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WorkerStats {
    /// Tasks run to completion or to a pending poll (each poll counts once).
    pub(crate) polls: u64,
    /// Tasks that finished (their future returned `Ready` or panicked).
    pub(crate) finished: u64,
    /// Nanoseconds spent inside task polls (`t_exec` of Wagle et al. 2018 Eq. 2).
    pub(crate) exec_ns: u64,
    /// Nanoseconds spent in the worker loop outside parking: task polls plus
    /// finding tasks and bookkeeping (`t_func` of Wagle et al. 2018 Eq. 1).
    pub(crate) func_ns: u64,
    /// Nanoseconds spent in background work (network progress), Wagle et al. 2018 Eq. 3.
    pub(crate) background_ns: u64,
    /// Nanoseconds spent parked or spinning with nothing to do.
    pub(crate) idle_ns: u64,
    /// Tasks taken from another worker's deque or the injector.
    pub(crate) steals: u64,
    /// Tasks this worker spawned whose first poll it ran inline, inside
    /// the spawning code, rather than queued (`sched/inline.rs`).
    pub(crate) inlined: u64,
}

/// Per-bucket poll counts of one worker.
pub(crate) type PollHistogram = [u64; POLL_BUCKETS];

/// The published copy of a worker's [`WorkerStats`]: one cache line pair per
/// worker so that publishing never false-shares with a neighbour.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct PublishedStats {
    polls: AtomicU64,
    finished: AtomicU64,
    exec_ns: AtomicU64,
    func_ns: AtomicU64,
    background_ns: AtomicU64,
    idle_ns: AtomicU64,
    steals: AtomicU64,
    inlined: AtomicU64,
    poll_histogram: [AtomicU64; POLL_BUCKETS],
    /// Tasks this worker spawned: exact at every moment (counted as they
    /// are spawned, not published), written only by the worker.
    spawned: AtomicU64,
    /// When the poll running now began (raw clock ticks), 0 between polls:
    /// what the watchdog reads. Written only by the worker.
    running_since: AtomicU64,
    /// What the poll running now does, as its code labelled it (0: not
    /// labelled; see [`label_poll`](super::label_poll)).
    running_label: AtomicU64,
}

impl Default for PublishedStats {
    fn default() -> Self {
        PublishedStats {
            polls: AtomicU64::default(),
            finished: AtomicU64::default(),
            exec_ns: AtomicU64::default(),
            func_ns: AtomicU64::default(),
            background_ns: AtomicU64::default(),
            idle_ns: AtomicU64::default(),
            steals: AtomicU64::default(),
            inlined: AtomicU64::default(),
            poll_histogram: std::array::from_fn(|_| AtomicU64::default()),
            spawned: AtomicU64::default(),
            running_since: AtomicU64::default(),
            running_label: AtomicU64::default(),
        }
    }
}

impl PublishedStats {
    /// Copies `stats` and `histogram` in. Only the owning worker calls
    /// this, so plain stores suffice.
    pub(crate) fn publish(&self, stats: &WorkerStats, histogram: &PollHistogram) {
        for (slot, &count) in self.poll_histogram.iter().zip(histogram) {
            slot.store(count, Ordering::Relaxed);
        }
        self.polls.store(stats.polls, Ordering::Release);
        self.finished.store(stats.finished, Ordering::Release);
        self.exec_ns.store(stats.exec_ns, Ordering::Release);
        self.func_ns.store(stats.func_ns, Ordering::Release);
        self.background_ns
            .store(stats.background_ns, Ordering::Release);
        self.idle_ns.store(stats.idle_ns, Ordering::Release);
        self.steals.store(stats.steals, Ordering::Release);
        self.inlined.store(stats.inlined, Ordering::Release);
    }

    /// Counts a task spawned by the owning worker (only it calls this).
    #[inline]
    pub(crate) fn count_spawn(&self) {
        self.count_spawns(1);
    }

    /// Counts `n` tasks spawned by the owning worker (only it calls this).
    #[inline]
    pub(crate) fn count_spawns(&self, n: u64) {
        let spawned = self.spawned.load(Ordering::Relaxed);
        self.spawned.store(spawned + n, Ordering::Release);
    }

    /// The owning worker begins a poll at `start` (raw clock ticks).
    #[inline]
    pub(crate) fn begin_poll(&self, start: u64) {
        self.running_label.store(0, Ordering::Relaxed);
        self.running_since.store(start.max(1), Ordering::Release);
    }

    /// The owning worker's poll ended.
    #[inline]
    pub(crate) fn end_poll(&self) {
        self.running_since.store(0, Ordering::Release);
    }

    /// Labels the owning worker's current poll; returns the label it had.
    #[inline]
    pub(crate) fn label_poll(&self, label: u64) -> u64 {
        self.running_label.swap(label, Ordering::Relaxed)
    }

    /// When the owning worker's current poll began, and its label; `None`
    /// between polls.
    pub(crate) fn running(&self) -> Option<(u64, u64)> {
        let since = self.running_since.load(Ordering::Acquire);
        (since != 0).then(|| (since, self.running_label.load(Ordering::Relaxed)))
    }

    /// Tasks the owning worker spawned.
    pub(crate) fn spawned(&self) -> u64 {
        self.spawned.load(Ordering::Acquire)
    }

    /// Reads the last published poll histogram.
    pub(crate) fn load_histogram(&self) -> PollHistogram {
        std::array::from_fn(|k| self.poll_histogram[k].load(Ordering::Relaxed))
    }

    /// Reads the last published values.
    pub(crate) fn load(&self) -> WorkerStats {
        WorkerStats {
            polls: self.polls.load(Ordering::Acquire),
            finished: self.finished.load(Ordering::Acquire),
            exec_ns: self.exec_ns.load(Ordering::Acquire),
            func_ns: self.func_ns.load(Ordering::Acquire),
            background_ns: self.background_ns.load(Ordering::Acquire),
            idle_ns: self.idle_ns.load(Ordering::Acquire),
            steals: self.steals.load(Ordering::Acquire),
            inlined: self.inlined.load(Ordering::Acquire),
        }
    }
}

/// A point-in-time view of a whole scheduler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StatsSnapshot {
    /// Tasks spawned so far (exact).
    pub(crate) spawned: u64,
    /// Per-worker published statistics, indexed by worker.
    pub(crate) workers: Vec<WorkerStats>,
    /// Per-worker task-poll duration histograms, indexed by worker.
    pub(crate) poll_histograms: Vec<PollHistogram>,
}

impl StatsSnapshot {
    /// Tasks finished on all workers.
    pub(crate) fn finished(&self) -> u64 {
        self.workers.iter().map(|w| w.finished).sum()
    }

    /// The sum of every worker's statistics.
    pub(crate) fn total(&self) -> WorkerStats {
        self.workers
            .iter()
            .fold(WorkerStats::default(), |t, w| WorkerStats {
                polls: t.polls + w.polls,
                finished: t.finished + w.finished,
                exec_ns: t.exec_ns + w.exec_ns,
                func_ns: t.func_ns + w.func_ns,
                background_ns: t.background_ns + w.background_ns,
                idle_ns: t.idle_ns + w.idle_ns,
                steals: t.steals + w.steals,
                inlined: t.inlined + w.inlined,
            })
    }
}
