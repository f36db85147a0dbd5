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
#[derive(Debug)]
pub(crate) struct Perf {
    /// Kernel thread ids of the workers, by worker index; `None` until the
    /// worker has started.
    tids: Mutex<Vec<Option<i32>>>,
    /// Per worker: its counters, opened on the first read that needs them.
    counters: Mutex<Vec<Option<WorkerEvents>>>,
}

impl Perf {
    /// The counters of `workers` worker threads, none opened yet.
    pub(crate) fn new(workers: usize) -> Self {
        Perf {
            tids: Mutex::new(vec![None; workers]),
            counters: Mutex::new((0..workers).map(|_| None).collect()),
        }
    }

    /// Records the calling thread as worker `index`. Called on each worker
    /// thread when it starts.
    pub(crate) fn register_current_thread(&self, index: usize) {
        if let Some(slot) = self.tids.lock().get_mut(index) {
            *slot = sys::current_tid();
        }
    }

    /// Reads event `event` (an index into [`EVENTS`]) of worker `k`,
    /// opening its counters first if needed.
    fn read_worker(
        &self,
        counters: &mut [Option<WorkerEvents>],
        k: usize,
        event: usize,
    ) -> Result<u64, String> {
        let slot = counters
            .get_mut(k)
            .ok_or_else(|| format!("no worker-thread#{k}"))?;
        if slot.is_none() {
            let tid = self.tids.lock()[k]
                .ok_or_else(|| format!("worker-thread#{k} has not started yet"))?;
            *slot = Some((0..EVENTS.len()).map(|e| sys::open(e, tid)).collect());
        }
        match &mut slot.as_mut().expect("opened above")[event] {
            Ok(counter) => counter
                .read()
                .map_err(|e| format!("reading {}: {e}", EVENTS[event].0)),
            Err(why) => Err(why.clone()),
        }
    }

    /// Reads event `event` (an index into [`EVENTS`]) summed over the
    /// workers.
    pub(crate) fn read_total(&self, event: usize) -> Result<u64, String> {
        let mut counters = self.counters.lock();
        (0..counters.len())
            .map(|k| self.read_worker(&mut counters, k, event))
            .sum()
    }

    /// Reads event `event` (an index into [`EVENTS`]) of worker `k`.
    pub(crate) fn read(&self, k: usize, event: usize) -> Result<u64, String> {
        self.read_worker(&mut self.counters.lock(), k, event)
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
    pub(crate) fn open(event: usize, tid: i32) -> Result<Counter, String> {
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

    pub(crate) fn open(event: usize, _tid: i32) -> Result<Counter, String> {
        Err(format!(
            "{} is not supported: perf events exist on Linux only",
            super::EVENTS[event].0
        ))
    }
}
