//! [`Chunking`]: how a parallel loop cuts its range, and the sizing of
//! [`Chunking::Auto`] from a measured iteration time.

use std::time::Duration;

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
/// no longer helps. By the overhead alone, `d / (d + o) ≥ 99 %` needs only
/// `d ≥ 99·o`; measured with the `loops` app on a 2-core machine
/// (BENCHMARKS.md, issue #16), λ = 100 left auto 4–10 % behind the best
/// static chunk on a 2 ns body, and 500 brings bodies of 2 ns, 0.2 µs and
/// 0.2 ms within 5 % (served as `/par/parameter/lambda-min`). A constant
/// for now; measuring it at start-up is issue #16's next step.
pub const LAMBDA_MIN: f64 = 500.0;

/// How long [`Chunking::Auto`] measures before it sizes chunks: long enough
/// for a clock read (a few ns) to be noise, short enough to be a small
/// part of any loop worth running in parallel.
pub(crate) const MEASURE: Duration = Duration::from_micros(20);

/// The least task overhead [`Chunking::Auto`] assumes, in ns: the cost of
/// spawning, running and joining an empty task here (BENCHMARKS.md,
/// "Task spawn"), used until the locality has measured its own.
pub(crate) const OVERHEAD_FLOOR_NS: f64 = 150.0;

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
        // 10 ns iterations, 200 ns tasks: 500 × 200 / 10 = 10,000.
        assert_eq!(auto_size(10_000_000, 10.0, 200.0, 2), 10_000);
        // An overhead below the floor counts as the floor.
        assert_eq!(auto_size(10_000_000, 10.0, 1.0, 2), 7_500);
        // Long iterations: one per chunk.
        assert_eq!(auto_size(1_000, 1e6, 200.0, 2), 1);
        // A short range is split for the workers to share.
        assert_eq!(auto_size(8_000, 1.0, 200.0, 2), 1_000);
        // Free iterations and tiny ranges stay sane.
        assert_eq!(auto_size(3, 0.0, 200.0, 4), 1);
        assert_eq!(auto_size(0, 5.0, 200.0, 4), 1);
    }
}
