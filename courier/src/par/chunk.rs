//! [`Chunking`]: how a parallel loop cuts its range, and the sizing of
//! [`Chunking::Auto`] from a measured iteration time.

use std::ops::Range;
use std::time::Duration;

use crate::clock::clock;

/// How a parallel loop cuts its range into chunks (one task each).
///
/// # Examples
///
/// ```
/// use courier::par::Chunking;
///
/// let fixed = Chunking::Static(1024); // 1,024 iterations a task
/// let measured = Chunking::Auto;      // sized from the first iterations
/// assert_ne!(fixed, measured);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Chunking {
    /// Chunks of this many iterations (0 is taken as 1).
    Static(usize),
    /// Chunks sized from the time of the first iterations, the task
    /// overhead and [`LAMBDA_MIN`] (see the [module docs](super)).
    #[default]
    Auto,
}

/// The ratio of a chunk's duration to the task overhead that
/// [`Chunking::Auto`] aims at: the smallest at which making chunks larger
/// no longer helps. By the overhead alone, `d / (d + o) ≥ 99 %` would need
/// only `d ≥ 99·o`; a chunk also costs what the overhead does not show
/// (cold caches, the join, the last chunks finishing one worker at a
/// time). Measured with the `loops` app on a 2-core machine, `o` being the
/// warm spawn-run-join cost (`/par/time/task-overhead`, 80 ns on one
/// worker, 160 on two, then): at 1,000 and at 2,000, auto is within 4 % of
/// the best static chunk on bodies of 2 ns, 0.2 µs and 0.2 ms, so 1,000 is
/// where larger stopped helping (BENCHMARKS.md, issue #16; with Courier's
/// own task cell, 32–52 ns on two workers, still within 5 %). Served as
/// `/par/parameter/lambda-min`; a constant until it is measured per
/// machine.
pub const LAMBDA_MIN: f64 = 1000.0;

/// How long [`Chunking::Auto`] measures before it sizes chunks: long enough
/// for a clock read (a few ns) to be noise, short enough to be a small
/// part of any loop worth running in parallel.
pub(crate) const MEASURE: Duration = Duration::from_micros(20);

/// Runs `step` on the first indices of `range`, doubling their number
/// until they took `until` or the range ends; returns how many ran and
/// the ns of one (what [`Chunking::Auto`] sizes chunks and leaves from).
pub(crate) fn measure_first(
    range: Range<usize>,
    until: Duration,
    mut step: impl FnMut(usize),
) -> (usize, f64) {
    let clock = clock();
    let start = clock.raw();
    let mut next = range.start;
    let mut batch = 1usize;
    let mut elapsed = Duration::ZERO;
    while next < range.end && elapsed < until {
        let stop = next.saturating_add(batch).min(range.end);
        (next..stop).for_each(&mut step);
        next = stop;
        batch = batch.saturating_mul(2);
        elapsed = Duration::from_nanos(clock.delta_as_nanos(start, clock.raw()));
    }
    let ran = next - range.start;
    (ran, elapsed.as_nanos() as f64 / ran.max(1) as f64)
}

/// The least task overhead [`Chunking::Auto`] assumes, in ns: a guard
/// against a measurement gone wrong, set below the cheapest
/// spawn-run-join measured here with `async_task` (80 ns on one worker);
/// since Courier's own task cell (32–52 ns on two workers) it is also
/// what the cheapest bodies' chunks are sized from, within 5 % of the
/// best static chunk (BENCHMARKS.md, issue #16, seventh part).
pub(crate) const OVERHEAD_FLOOR_NS: f64 = 50.0;

/// Chunks each worker should have, at least, when the range allows: so
/// that a worker that finishes early can steal.
pub(crate) const CHUNKS_PER_WORKER: usize = 4;

/// The chunk size of [`Chunking::Auto`] for `remaining` iterations of
/// `iteration_ns` each, on `workers` workers whose tasks cost
/// `overhead_ns`.
pub(crate) fn auto_size(
    remaining: usize,
    iteration_ns: f64,
    overhead_ns: f64,
    workers: usize,
) -> usize {
    let target_ns = LAMBDA_MIN * overhead_ns.max(OVERHEAD_FLOOR_NS);
    let by_time = (target_ns / iteration_ns.max(0.01)).ceil();
    let by_time = if by_time.is_finite() && by_time < usize::MAX as f64 {
        by_time as usize
    } else {
        usize::MAX
    };
    let balanced = remaining.div_ceil(workers.max(1) * CHUNKS_PER_WORKER);
    by_time.min(balanced).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_chunks_last_lambda_min_overheads_but_leave_work_to_steal() {
        // 10 ns iterations, 200 ns tasks: 1,000 × 200 / 10 = 20,000.
        assert_eq!(auto_size(10_000_000, 10.0, 200.0, 2), 20_000);
        // An overhead below the floor counts as the floor.
        assert_eq!(auto_size(10_000_000, 10.0, 1.0, 2), 5_000);
        // Long iterations: one per chunk.
        assert_eq!(auto_size(1_000, 1e6, 200.0, 2), 1);
        // A short range is split for the workers to share.
        assert_eq!(auto_size(8_000, 1.0, 200.0, 2), 1_000);
        // Free iterations and tiny ranges stay sane.
        assert_eq!(auto_size(3, 0.0, 200.0, 4), 1);
        assert_eq!(auto_size(0, 5.0, 200.0, 4), 1);
    }
}
