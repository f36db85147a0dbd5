//! Parallelism inside a locality: fork-join with dynamic inlining
//! ([`join`]) and parallel loops ([`for_each`], [`map_reduce`]).
//!
//! [`join`] runs two closures, the second inline or as a task another
//! worker may take, decided per call site and nesting depth from measured
//! durations against `λ_min` times the measured task overhead (see
//! [`Inlining`] for the policies and `sched/sites.rs` for what is measured). An
//! inlined join costs about 3 ns, a fork about 175 ns (the `spawn` bench).
//!
//! The parallel loops run the iterations of a range on this locality's
//! workers, in chunks, each chunk a task ([`for_each`], [`map_reduce`]:
//! `async`, bodies `'static`), or the elements of a slice, halved with
//! [`join`] ([`for_each_mut`], [`map_reduce_slice`]: they borrow);
//! [`for_each_locality`] gives
//! each locality of the job one block of a range, to loop over with its
//! own workers.
//!
//! How big a chunk is decides whether a loop is fast: a chunk much shorter
//! than the cost of a task ([`/threads/time/average-overhead`], about 200 ns
//! here) spends its time scheduling; a chunk so long that there are fewer
//! chunks than workers leaves workers idle. [`Chunking::Static`] takes the
//! size from the program; [`Chunking::Auto`] measures it (HPX's
//! `auto_chunk_size` is the model; see `chunk.rs`):
//!
//! 1. it runs the first iterations in the calling task, doubling their
//!    number until they took 20 µs or the range ends,
//!    which gives the time of one iteration, `t`;
//! 2. it sizes chunks to last `λ_min × o`, where `o` is what a task costs
//!    the loop (spawn, run, join: measured once per process by spawning
//!    and joining 1,024 empty tasks after as many to warm up,
//!    `/par/time/task-overhead`; at least the workers' own
//!    `/threads/time/average-overhead`) and `λ_min` =
//!    [`LAMBDA_MIN`]: the ratio of a task's duration to its overhead past
//!    which a larger task no longer helps (measured; see its docs);
//! 3. it caps the size so that every worker gets at least
//!    four chunks to steal from each other, when the range is long enough.
//!
//! The loops are `async`: the calling task awaits its chunks, and its
//! worker runs chunks meanwhile. The body is `Fn + Send + Sync + 'static`
//! (shared by every chunk through an `Arc`): borrow data by putting it in
//! an `Arc` too.
//!
//! [`/threads/time/average-overhead`]: crate::counters

mod chunk;
mod distributed;
mod join;
mod loops;
mod overhead;
mod slices;

pub use crate::sched::Inlining;
pub use chunk::{Chunking, LAMBDA_MIN};
pub use distributed::for_each_locality;
pub use join::join;

pub(crate) use crate::sched::policy_code;
pub use loops::{LoopReport, for_each, map_reduce};
pub use slices::{AUTO_LEAF_NS, for_each_mut, map_reduce_slice};

pub(crate) use overhead::measured_ns as measured_task_overhead_ns;

/// Measures this process's task overhead (once; see `overhead.rs`) and
/// sets the task granularity threshold, `λ_min` times it, from which
/// [`join`] forks and a received run of calls is split into tasks.
pub(crate) async fn measure_task_overhead(rt: &crate::runtime::Runtime) {
    let ns = overhead::task_overhead_ns(rt).await;
    crate::sched::set_task_threshold_ns((LAMBDA_MIN * ns) as u64);
}
pub(crate) use crate::sched::joins;
