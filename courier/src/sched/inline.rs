//! Which spawns run inline: [`Runtime::spawn`] runs a new task's first
//! poll in the spawning code, before it returns, when that poll is
//! expected to be too short to be worth a task; otherwise it queues the
//! task, as it always did.
//!
//! What it costs to queue: a task is a block from the thread's pool and
//! four atomic read-modify-writes (`task.rs`), a push on the worker's deque
//! and a pop, and the worker loop's bookkeeping around the poll: about
//! 45 ns for an empty task (the `spawn` bench). A child that does less work than `λ_min`
//! times that (`task_threshold_ns`, the threshold from which `par::join`
//! forks) gains too little from running in parallel to pay for it
//! (Wagle et al., ICPP 2019).
//!
//! # The decision
//!
//! Per spawn site (the `Location` of the `rt.spawn` call, as
//! [`par::join`](crate::par::join) keys its sites) and depth in the tree
//! of spawns (a child of a task at depth `d` is at `d + 1`; a task
//! spawned from outside the tree, at 0), [`Inlining::Adaptive`] runs the
//! child inline when
//!
//! 1. the calling thread is a worker of the runtime's own scheduler
//!    (spawns from other threads are queued: there is no task to run it
//!    in);
//! 2. the site's measured duration of a first poll at this depth is known
//!    and below the threshold (an unmeasured site is queued, and measured);
//! 3. the worker has parallel slack: a task in its deque for another
//!    worker to steal, or no other worker. A fan-out of children of tens
//!    of µs, each below the threshold, would otherwise all run one after
//!    another in their parent while the other workers idle: the first
//!    child is queued, the next ones inline while it waits to be stolen,
//!    and once it is, the next is queued again (lazy task creation);
//! 4. fewer than [`INLINE_NESTING_MAX`] inline runs are on this thread's
//!    stack (each nests in its parent's poll).
//!
//! [`Inlining::Depth(n)`](Inlining::Depth) runs inline every spawn at a
//! depth of `n` or more (within the nesting bound), as `join` does with
//! its own depth: a fixed cutoff. [`Inlining::Never`] always queues.
//!
//! The decision reads three thread-locals, a site table from the
//! thread's cache, an estimate and the threshold: a few ns, on the queued
//! path too.
//!
//! # Running inline, and waiting
//!
//! The future is boxed (in a block of the thread's pool, `pooled.rs`: a
//! few loads and stores where glibc's `malloc` and `free` took ~140
//! instructions) and polled once, here, with a waker that does nothing
//! (`Scheduler::poll_inline`). If it completes (or panics), the
//! handle returned holds its output (or its panic, resumed where the
//! handle is awaited, as for a task): no task, no queue, no atomic
//! operation. If it waits (it returns `Pending` on that poll: it awaits a
//! call, a channel its parent fills later, a `yield_now`), the boxed
//! future becomes a queued task, which polls it again at once and so
//! registers a real waker: nothing is lost, and the child goes on as any
//! task. A child that waits is not worth inlining (its task is made
//! anyway, and polled twice): a first poll that waits counts as a duration
//! of [`WAITS_NS`], above any threshold, so the site is queued from then
//! on at that depth, until a sample measures a poll that completes.
//!
//! Why not make the task first and run it here (`runnable.run()`): that
//! keeps the allocation and the atomic state changes of a task and only
//! saves the deque; boxing the future costs a block from the pool, and
//! nothing else when the poll completes, which is what a short child does.
//! The box cannot be avoided: a future that was polled may not move, and
//! one that waits must move into a task.
//!
//! # Measuring
//!
//! What is measured is the duration of a child's first poll (all of it
//! when it completes at once, which is what running it inline costs the
//! parent): every time while a (site, depth) has no estimate, then one
//! call in [`SAMPLE_EVERY`] per site on this thread, inline or queued (a
//! queued task's first poll is timed where it runs and recorded in the
//! spawning thread's table), so that a site whose children grew is
//! queued again within a few calls, and one whose children shrank is
//! inlined. The estimate follows the longest recent durations
//! (`sites.rs`, `Site::record`). Under `Depth` and `Never` nothing is
//! timed.
//!
//! # What the child sees
//!
//! Run inline, a child runs on the parent's thread inside the parent's
//! poll, with the thread's state as a task of its own would find it: its
//! depth of spawns is the parent's plus one and its depth of `join`s 0.
//! Its time counts as the parent task's (`/threads/time/*`), and it is
//! counted as a task spawned and finished (`/threads/count/cumulative`)
//! and in `/threads/count/inlined`.
//!
//! [`Runtime::spawn`]: crate::Runtime::spawn

use std::cell::Cell;
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::granularity::task_threshold_ns;
use super::inlining::{Inlining, from_code, policy_code};
use super::join::JoinHandle;
use super::scheduler::Scheduler;
use super::sites::{self, AtDepth, Site};
use super::worker::{parallel_slack, spawn_policy};
use crate::clock::clock;

/// Inline runs of spawned children that may nest on one thread's stack;
/// a spawn deeper than this is queued. A guess, tune me: deep enough that
/// the leaves of a tree of spawns (most of its tasks) run inline, shallow
/// enough that the frames of the nested polls stay far below a worker's
/// 2 MiB stack.
pub(crate) const INLINE_NESTING_MAX: u32 = 16;

/// Once a (site, depth) is measured, one spawn in this many per site (per
/// thread) has its first poll timed, inline or queued: two clock reads,
/// about as much as an inlined empty child costs otherwise (at one in 8,
/// perf put 15 % of the inlined spawn bench in the clock). A power of
/// two; a guess, tune me.
pub(crate) const SAMPLE_EVERY: u32 = 32;

/// The duration recorded for a first poll that returned `Pending`: above
/// any threshold, so that the site is queued.
pub(crate) const WAITS_NS: u64 = u64::MAX / 4;

/// The code of [`Inlining::Never`], checked first: the one policy that
/// needs nothing else.
const NEVER: u64 = policy_code(Inlining::Never);

/// Where the code running on a thread is in the tree of spawns.
#[derive(Debug, Clone, Copy)]
struct Nesting {
    /// Depth of the running task: 0 for a task spawned off the tree (from
    /// another thread, or by the runtime itself).
    depth: u32,
    /// Inline runs on this thread's stack.
    inline: u32,
}

thread_local! {
    /// Where the running task of this thread is in the tree of spawns.
    static NESTING: Cell<Nesting> = const { Cell::new(Nesting { depth: 0, inline: 0 }) };
}

/// Sets the thread's [`Nesting`] until dropped (also when unwinding),
/// then puts back what it was.
struct AtNesting(Nesting);

impl AtNesting {
    #[inline]
    fn enter(nesting: Nesting) -> AtNesting {
        AtNesting(NESTING.replace(nesting))
    }
}

impl Drop for AtNesting {
    #[inline]
    fn drop(&mut self) {
        NESTING.set(self.0);
    }
}

/// Spawns `future` on `sched` from the call site `location`: runs its
/// first poll here when the module's rules say so, else queues it.
#[inline]
pub(crate) fn spawn_at<F>(
    sched: &Arc<Scheduler>,
    location: &'static Location<'static>,
    future: F,
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let policy = match spawn_policy(sched) {
        Some(policy) if policy != NEVER => policy,
        _ => return sched.spawn(future),
    };
    let here = NESTING.get();
    let (inline, learn) = match from_code(policy) {
        Inlining::Never => unreachable!("queued above"),
        Inlining::Depth(cutoff) => (here.depth >= cutoff, None),
        Inlining::Adaptive => {
            let site = sites::site(location);
            let expected = site.expected_ns(here.depth);
            let inline = expected != 0 && expected < task_threshold_ns() && parallel_slack();
            let timed = expected == 0 || site.tick() % SAMPLE_EVERY == 0;
            (inline, Some((site, timed)))
        }
    };
    if inline && here.inline < INLINE_NESTING_MAX {
        return run_inline(sched, here, learn, future);
    }
    let first = learn.and_then(|(site, timed)| timed.then_some((site, here.depth)));
    sched.spawn(in_tree(here.depth.saturating_add(1), first, future))
}

/// Runs `future`'s first poll here, as a child of the code at `here`;
/// queues the rest if it waits. `learn`: the site to record the outcome
/// in, and whether to time it.
#[inline]
fn run_inline<F>(
    sched: &Arc<Scheduler>,
    here: Nesting,
    learn: Option<(&'static Site, bool)>,
    future: F,
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let child = Nesting {
        depth: here.depth.saturating_add(1),
        inline: here.inline + 1,
    };
    let start = match learn {
        Some((_, true)) => clock().raw(),
        _ => 0,
    };
    let polled = {
        let _tree = AtNesting::enter(child);
        // Its joins start from depth 0, as in a task of its own.
        let _joins = AtDepth::enter(0);
        sched.poll_inline(future)
    };
    if let (Some((site, true)), Ok(_)) = (learn, &polled) {
        let clock = clock();
        site.record(here.depth, clock.delta_as_nanos(start, clock.raw()));
    }
    match polled {
        Ok(done) => done,
        Err(rest) => queue_rest(
            sched,
            child.depth,
            learn.map(|(site, _)| (site, here.depth)),
            rest,
        ),
    }
}

/// Queues as a task at `depth` a child run inline whose first poll
/// waited, and records the wait at `site` (its parent's depth). Out of
/// line: the rare path, which would make `run_inline` too large to be
/// inlined where it runs.
#[cold]
#[inline(never)]
fn queue_rest<F>(
    sched: &Arc<Scheduler>,
    depth: u32,
    site: Option<(&'static Site, u32)>,
    rest: F,
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    if let Some((site, at)) = site {
        site.record(at, WAITS_NS);
    }
    sched.spawn(in_tree(depth, None, rest))
}

pin_project_lite::pin_project! {
    /// A future as a task at `depth` in the tree of spawns: each of its
    /// polls runs at that depth, outside any inline run. `first`: the site
    /// and depth (its parent's) at which to record the duration of its
    /// first poll.
    struct InTree<F> {
        depth: u32,
        first: Option<(&'static Site, u32)>,
        #[pin]
        future: F,
    }
}

/// `future` as a task at `depth`, recording its first poll at `first`.
fn in_tree<F: Future>(depth: u32, first: Option<(&'static Site, u32)>, future: F) -> InTree<F> {
    InTree {
        depth,
        first,
        future,
    }
}

impl<F: Future> Future for InTree<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _tree = AtNesting::enter(Nesting {
            depth: *this.depth,
            inline: 0,
        });
        let Some((site, at)) = this.first.take() else {
            return this.future.poll(cx);
        };
        let clock = clock();
        let start = clock.raw();
        let out = this.future.poll(cx);
        let ns = match out.is_pending() {
            true => WAITS_NS,
            false => clock.delta_as_nanos(start, clock.raw()),
        };
        site.record(at, ns);
        out
    }
}
