//! How many received calls one task runs: measured per action.
//!
//! A frame's run of calls of one action becomes a task. When the calls
//! are cheap that is right: a task per run amortizes its overhead over
//! the run. When they are costly, one task would run them all on one
//! worker while the others idle, so the run is split: a task runs as many
//! calls as fill the task granularity threshold (`λ_min` times the
//! measured task overhead, `sched::task_threshold_ns`) and, before
//! running them, offers the rest of the run as a task of its own (which
//! splits again), so idle workers take the rest. The duration of a call
//! is measured on every run (two clock reads a run), per action, as an
//! average that rises at once to a longer duration and decays slowly to
//! shorter ones, as `par::join`'s estimates do.

use std::sync::atomic::{AtomicU64, Ordering};

/// The measured duration of one call, per action slot.
#[derive(Debug)]
pub(super) struct RunSizes {
    /// ns per call (0: not measured yet).
    call_ns: Box<[AtomicU64]>,
}

impl RunSizes {
    /// Estimates for `actions` action slots.
    pub(super) fn new(actions: usize) -> RunSizes {
        RunSizes {
            call_ns: (0..actions).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Records that a run of `calls` calls of `slot` took `ns`.
    pub(super) fn record(&self, slot: usize, calls: u32, ns: u64) {
        let Some(estimate) = self.call_ns.get(slot) else {
            return;
        };
        let per_call = (ns / u64::from(calls.max(1))).max(1);
        let old = estimate.load(Ordering::Relaxed);
        let new = if old == 0 || per_call > old {
            per_call
        } else {
            (3 * old + per_call) / 4
        };
        estimate.store(new.max(1), Ordering::Relaxed);
    }

    /// How many of a run's `count` calls of `slot` one task should run,
    /// given the threshold `threshold_ns`: all of them while the calls
    /// are not measured or fit the threshold together, else enough to
    /// fill it (at least one).
    pub(super) fn calls_per_task(&self, slot: usize, count: u32, threshold_ns: u64) -> u32 {
        let per_call = self
            .call_ns
            .get(slot)
            .map_or(0, |e| e.load(Ordering::Relaxed));
        if per_call == 0 || per_call.saturating_mul(u64::from(count)) <= 2 * threshold_ns {
            return count;
        }
        u32::try_from(threshold_ns / per_call)
            .unwrap_or(u32::MAX)
            .clamp(1, count)
    }

    /// Whether a call of `slot` made on this locality may run inline in
    /// its caller: its calls are measured and shorter than a task is
    /// worth (the granularity threshold).
    pub(super) fn runs_inline(&self, slot: usize) -> bool {
        let per_call = self
            .call_ns
            .get(slot)
            .map_or(0, |e| e.load(Ordering::Relaxed));
        per_call != 0 && per_call < crate::sched::task_threshold_ns()
    }

    /// The estimated ns per call of `slot` (0: not measured).
    #[cfg(test)]
    fn call_ns(&self, slot: usize) -> u64 {
        self.call_ns[slot].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cheap_or_unmeasured_runs_stay_whole_and_costly_ones_split_to_the_threshold() {
        let sizes = RunSizes::new(2);
        assert_eq!(sizes.calls_per_task(0, 1000, 100_000), 1000, "not measured");
        sizes.record(0, 1000, 100_000); // 100 ns a call
        assert_eq!(sizes.call_ns(0), 100);
        assert_eq!(
            sizes.calls_per_task(0, 1000, 100_000),
            1000,
            "fits twice the threshold"
        );
        assert_eq!(
            sizes.calls_per_task(0, 5000, 100_000),
            1000,
            "a threshold's worth"
        );
        sizes.record(1, 4, 4_000_000); // 1 ms a call
        assert_eq!(sizes.calls_per_task(1, 16, 100_000), 1, "at least one");
        assert_eq!(sizes.calls_per_task(1, 1, 100_000), 1);
        sizes.record(1, 1, 100); // much shorter: a quarter new
        assert_eq!(sizes.call_ns(1), 750_025);
        sizes.record(7, 1, 100); // an unknown slot is ignored
    }
}
