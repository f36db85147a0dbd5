//! The work-stealing task scheduler of one locality.
//!
//! Each locality runs `workers` threads. A worker owns a bounded FIFO deque
//! (`deque.rs`, an `st3` queue of 4,096 tasks); tasks spawned from outside any
//! worker, and those beyond a full deque, go to a shared
//! [`crossbeam_deque::Injector`]. Thieves take half a deque at once. A task is
//! a block from the thread's pool holding its future, then its output
//! (`task.rs`); every spawn returns a [`JoinHandle`].
//!
//! A worker looks for work in this order: its own deque, the injector, the
//! other workers' deques. Between tasks it runs *background work* (network
//! progress, see [`BackgroundWork`]) every [`BACKGROUND_INTERVAL`] tasks and
//! whenever it runs dry. An idle worker spins briefly (up to 50 µs when it
//! waits for the network alone after recent traffic, `spin.rs`) and then
//! parks; the first worker to park becomes the *driver* and blocks inside the transport's
//! progress call, so an incoming frame wakes it directly. The parking protocol
//! lives in `sleep.rs` and is described there.
//!
//! Every worker keeps its time accounting (time inside tasks, in background
//! work, parked) in plain fields and publishes them to cache-padded atomics at
//! maintenance points; see `stats.rs`. Short polls are timed in groups,
//! one clock read for a few of them (`worker.rs`, `Group`).
//!
//! A task's first poll may also run inline, in the code that spawns it,
//! before any task is made for it (`Scheduler::poll_inline` in
//! `spawn.rs`, its future in a block of the thread's pool, `pooled.rs`);
//! `inline.rs` decides when, from the durations measured
//! per call site (`sites.rs`, shared with `par::join`) under the job's
//! [`Inlining`] policy (`inlining.rs`).
//!
//! When the job binds its workers ([`Binding`](crate::Binding)), each
//! worker keeps to a CPU of its own from its first instruction; which one
//! is `affinity.rs`'s to say, which also starts Courier's helper threads
//! off the workers' CPUs.

mod affinity;
mod background;
mod deque;
mod fork;
mod granularity;
mod inline;
mod inlining;
mod join;
mod perf;
mod pooled;
mod scheduler;
mod sites;
mod sleep;
mod spawn;
mod spin;
mod stats;
mod task;
mod worker;
mod yield_now;

#[cfg(feature = "mpi")]
pub(crate) use affinity::mask_key;
pub(crate) use affinity::{HostPlace, allowed_cpus, placement, spawn_unbound};
pub(crate) use background::{BackgroundWork, BlockOutcome};
pub(crate) use granularity::{set_task_threshold_ns, task_threshold_ns};
pub(crate) use inline::spawn_at;
pub use inlining::Inlining;
pub(crate) use inlining::{from_code, policy_code};
pub use join::JoinHandle;
pub(crate) use perf::{EVENTS as PERF_EVENTS, Perf};
pub(crate) use scheduler::{Scheduler, SchedulerId};
pub(crate) use sites::{
    AtDepth, count_fork, count_inlined, depth as join_depth, joins, sample_this_one, site,
    untimed_after_sample,
};
pub(crate) use spin::WAKE_WATCH_NS;
pub(crate) use stats::{StatsSnapshot, WorkerStats};
pub(crate) use worker::current_poll;
pub(crate) use worker::{charge_network, fork_join, join_policy, label_poll, on_worker};
pub use yield_now::{YieldNow, yield_now};

/// How many tasks a worker runs between two calls to background work while
/// it is busy. Tokio polls its driver every 61 ticks; ours is cheaper to poll
/// and latency matters more, so a smaller number. A guess, tune me.
pub(crate) const BACKGROUND_INTERVAL: u32 = 32;

/// A task poll longer than this many nanoseconds makes the worker publish
/// its statistics right after it, so that counters read just after a long
/// task (a phase of a main function) include it. Short polls wait for the
/// next maintenance point: publishing is seven atomic stores.
pub(crate) const PUBLISH_AFTER_NS: u64 = 50_000;

/// How many rounds an idle worker spins (with `Backoff::snooze`) before it
/// parks, or before it spins on after recent network traffic (`spin.rs`).
/// Spinning keeps wake-up latency low when work arrives in bursts. A
/// guess, tune me.
pub(crate) const SPIN_ROUNDS: u32 = 16;
