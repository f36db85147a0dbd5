//! Hardware and kernel event counters of the worker threads, through Linux
//! perf events (`perf_event_open`): `/perf/cycles`, `/perf/instructions`, …
//!
//! Counters are opened on the first query of any `/perf` counter of a
//! locality, one per worker thread and event, counting user-space events
//! only (which `perf_event_paranoid` ≤ 2 allows). They count from then on:
//! evaluate them with a reset, or read differences. Where the kernel or the
//! machine does not provide an event (virtual machines often have no
//! hardware counters), querying it gives an error that says so, and the
//! program goes on.

use parking_lot::Mutex;

use super::name::{Index, Instance};

/// The events, by counter type name, with their help text.
pub(crate) const EVENTS: [(&str, &str); 6] = [
    (
        "/perf/branch-misses",
        "mispredicted branches in user space (hardware)",
    ),
    (
        "/perf/cache-misses",
        "last-level cache misses in user space (hardware)",
    ),
    (
        "/perf/context-switches",
        "context switches of the worker threads (kernel)",
    ),
    ("/perf/cycles", "CPU cycles in user space (hardware)"),
    (
        "/perf/instructions",
        "instructions retired in user space (hardware)",
    ),
    (
        "/perf/page-faults",
        "page faults of the worker threads (kernel)",
    ),
];

/// Per event: the counter of one worker, or why it could not be opened.
type WorkerEvents = Vec<Result<sys::Counter, String>>;

/// The perf counters of one locality's workers.
#[derive(Debug, Default)]
pub(crate) struct Perf {
    /// Kernel thread ids of the workers, by worker index.
    tids: Mutex<Vec<Option<i32>>>,
    /// Per worker: the counters. `None` until the first query.
    counters: Mutex<Option<Vec<WorkerEvents>>>,
}

impl Perf {
    /// Records the calling thread as worker `index`. Called on each worker
    /// thread when it starts.
    pub(crate) fn register_current_thread(&self, index: usize) {
        let mut tids = self.tids.lock();
        if tids.len() <= index {
            tids.resize(index + 1, None);
        }
        tids[index] = sys::current_tid();
    }

    /// Reads event `event` (an index into [`EVENTS`]) for `instance`.
    pub(crate) fn read(&self, event: usize, instance: Instance) -> Result<u64, String> {
        let mut guard = self.counters.lock();
        let counters = guard.get_or_insert_with(|| {
            self.tids
                .lock()
                .iter()
                .map(|tid| (0..EVENTS.len()).map(|e| sys::open(e, *tid)).collect())
                .collect()
        });
        let mut read = |worker: &mut WorkerEvents| match &mut worker[event] {
            Ok(counter) => counter
                .read()
                .map_err(|e| format!("reading {}: {e}", EVENTS[event].0)),
            Err(why) => Err(why.clone()),
        };
        match instance {
            Instance::Total => counters.iter_mut().map(&mut read).sum(),
            Instance::Worker(Index::At(k)) => match counters.get_mut(k as usize) {
                Some(worker) => read(worker),
                None => Err(format!("no worker-thread#{k}")),
            },
            Instance::Worker(Index::All) => Err("a wildcard instance cannot be read".into()),
        }
    }
}

#[cfg(target_os = "linux")]
mod sys {
    use perf_event::Builder;
    use perf_event::events::{Hardware, Software};

    pub(crate) type Counter = perf_event::Counter;

    pub(crate) fn current_tid() -> Option<i32> {
        Some(rustix::thread::gettid().as_raw_nonzero().get())
    }

    /// Opens event `event` for thread `tid`, counting from now.
    pub(crate) fn open(event: usize, tid: Option<i32>) -> Result<Counter, String> {
        let name = super::EVENTS[event].0;
        let tid = tid.ok_or_else(|| format!("{name}: the worker thread is not known"))?;
        let mut builder = match event {
            0 => Builder::new(Hardware::BRANCH_MISSES),
            1 => Builder::new(Hardware::CACHE_MISSES),
            2 => Builder::new(Software::CONTEXT_SWITCHES),
            3 => Builder::new(Hardware::CPU_CYCLES),
            4 => Builder::new(Hardware::INSTRUCTIONS),
            _ => Builder::new(Software::PAGE_FAULTS),
        };
        builder
            .observe_pid(tid)
            .any_cpu()
            .exclude_kernel(true)
            .exclude_hv(true)
            .enabled(true)
            .build()
            .map_err(|e| format!("not supported here (perf_event_open: {e})"))
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    /// Never constructed: perf events exist on Linux only.
    #[derive(Debug)]
    pub(crate) enum Counter {}

    impl Counter {
        pub(crate) fn read(&mut self) -> std::io::Result<u64> {
            match *self {}
        }
    }

    pub(crate) fn current_tid() -> Option<i32> {
        None
    }

    pub(crate) fn open(event: usize, _tid: Option<i32>) -> Result<Counter, String> {
        Err(format!(
            "{} is not supported: perf events exist on Linux only",
            super::EVENTS[event].0
        ))
    }
}
