//! [`for_each`] and [`map_reduce`] over a range of indices.

use std::ops::Range;
use std::sync::Arc;

use super::chunk::{Chunking, MEASURE, auto_size, measure_first};
use super::overhead::task_overhead_ns;
use crate::runtime::{Runtime, current};

/// How a parallel loop ran: what [`Chunking::Auto`] measured and chose.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoopReport {
    /// Iterations run by the calling task before the chunks (while
    /// measuring, under [`Chunking::Auto`]).
    pub measured: usize,
    /// The time of one of those iterations, in ns (`None` under
    /// [`Chunking::Static`]).
    pub iteration_ns: Option<f64>,
    /// Iterations in each chunk (the last may have fewer).
    pub chunk: usize,
    /// Chunks, each a task.
    pub chunks: usize,
}

/// Runs `body(i)` for every `i` of `range`, in parallel on this locality's
/// workers, in chunks cut by `chunking`; returns when every iteration has
/// run. Each index is passed exactly once.
///
/// # Panics
///
/// Outside a task of the runtime; and, when awaited, if `body` panicked
/// (the panic of the first chunk that panicked is resumed).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use courier::par::{self, Chunking};
/// # use courier::{Config, TransportKind};
///
/// # courier::launch(Config::new().transport(TransportKind::Inproc), |_rt| async move {
/// let sum = Arc::new(AtomicU64::new(0));
/// let shared = Arc::clone(&sum);
/// par::for_each(0..1000, Chunking::Auto, move |i| {
///     shared.fetch_add(i as u64, Ordering::Relaxed);
/// })
/// .await;
/// assert_eq!(sum.load(Ordering::Relaxed), 999 * 1000 / 2);
/// # Ok(())
/// # }).unwrap();
/// ```
pub async fn for_each<F>(range: Range<usize>, chunking: Chunking, body: F) -> LoopReport
where
    F: Fn(usize) + Send + Sync + 'static,
{
    let (report, ()) = map_reduce(range, chunking, (), body, |(), ()| ()).await;
    report
}

/// Computes `map(i)` for every `i` of `range` in parallel, in chunks cut by
/// `chunking`, and combines the values with `reduce`, starting from
/// `identity` in every chunk. Chunks are combined in the order of the range,
/// so `reduce` needs to be associative, not commutative. Returns how the
/// loop ran, and the result.
///
/// # Panics
///
/// As [`for_each`].
///
/// # Examples
///
/// ```
/// use courier::par::{self, Chunking};
/// # use courier::{Config, TransportKind};
///
/// # courier::launch(Config::new().transport(TransportKind::Inproc), |_rt| async move {
/// let (_, squares) = par::map_reduce(0..100, Chunking::Static(8), 0u64, |i| (i * i) as u64, |a, b| a + b).await;
/// assert_eq!(squares, 328_350);
/// # Ok(())
/// # }).unwrap();
/// ```
pub async fn map_reduce<T, M, R>(
    range: Range<usize>,
    chunking: Chunking,
    identity: T,
    map: M,
    reduce: R,
) -> (LoopReport, T)
where
    T: Clone + Send + 'static,
    M: Fn(usize) -> T + Send + Sync + 'static,
    R: Fn(T, T) -> T + Send + Sync + 'static,
{
    let rt = current();
    let mut acc = identity.clone();
    let mut next = range.start;
    let end = range.end.max(range.start);
    let (chunk, iteration_ns) = match chunking {
        Chunking::Static(n) => (n.max(1), None),
        Chunking::Auto => {
            let (folded, measured, ns) = measure(next..end, acc, &map, &reduce);
            acc = folded;
            next += measured;
            let overhead = task_overhead_ns(&rt).await.max(worker_overhead_ns(&rt));
            let size = auto_size(end - next, ns, overhead, rt.worker_count());
            (size, Some(ns))
        }
    };
    let measured = next - range.start.min(end);
    let map = Arc::new(map);
    let reduce = Arc::new(reduce);
    let mut handles = Vec::with_capacity((end - next).div_ceil(chunk));
    while next < end {
        let stop = next.saturating_add(chunk).min(end);
        let (map, reduce, identity) = (Arc::clone(&map), Arc::clone(&reduce), identity.clone());
        // Tasks always (`spawn_task`): the chunks are sized to be worth
        // one, and run in parallel.
        handles.push(
            rt.spawn_task(async move { (next..stop).fold(identity, |acc, i| reduce(acc, map(i))) }),
        );
        next = stop;
    }
    let chunks = handles.len();
    for handle in handles {
        acc = reduce(acc, handle.await);
    }
    let report = LoopReport {
        measured,
        iteration_ns,
        chunk,
        chunks,
    };
    (report, acc)
}

/// Runs the first iterations of `range` here, doubling their number
/// until they took [`MEASURE`] or the range ends, folding them into `acc`.
/// Returns the fold, how many ran and the ns of one.
fn measure<T, M, R>(range: Range<usize>, acc: T, map: &M, reduce: &R) -> (T, usize, f64)
where
    M: Fn(usize) -> T,
    R: Fn(T, T) -> T,
{
    let mut acc = Some(acc);
    let (ran, ns) = measure_first(range, MEASURE, |i| {
        let folded = acc.take().expect("the fold is put back after every step");
        acc = Some(reduce(folded, map(i)));
    });
    (acc.expect("the fold is put back after every step"), ran, ns)
}

/// The scheduling overhead this locality's workers measured so far, in ns.
fn worker_overhead_ns(rt: &Runtime) -> f64 {
    rt.scheduling_overhead_ns().unwrap_or(0.0)
}
