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
//! Where the child runs inline, the decision reads four thread-locals
//! (whether this thread is an adaptive worker of this scheduler, whose id
//! the `Runtime` keeps; where it is in the tree; the site's table from
//! the thread's cache; whether it is the only worker) and takes one of
//! the spawns that the site's last sample at this depth let run inline
//! without a look (`Site::take_inline`): the estimate and the threshold
//! are compared when none is left: for the next sample, run out of line
//! (`run_sampled`), and on the path of every queued spawn.
//!
//! What an inlined empty child costs (the `spawn` bench, BENCHMARKS.md,
//! issue #16's tenth part): ~6.1 ns, against 1.8 ns for the same children
//! awaited as plain futures (~4.3 ns over them); 81 instructions with the
//! await, a few for each step described here.
//!
//! # Running inline, and waiting
//!
//! The future is boxed and polled once, here, with a waker that does
//! nothing (`Scheduler::poll_inline`). The box is the block the thread
//! keeps for inline runs at this level of nesting (`pooled::Slotted`): a
//! load and two stores of a thread-local, where a block from the pool's
//! list took a chain of loads and stores through the list (and glibc's
//! `malloc` and `free` ~140 instructions). If it completes (or panics), the
//! handle returned holds its output (or its panic, resumed where the
//! handle is awaited, as for a task): no task, no queue, no atomic
//! operation. If it waits (it returns `Pending` on that poll: it awaits a
//! call, a channel its parent fills later, a `yield_now`), the boxed
//! future becomes a queued task, which polls it again at once and so
//! registers a real waker: nothing is lost, and the child goes on as any
//! task. A child that waits is not worth inlining (its task is made
//! anyway, and polled twice): a first poll that waits counts as a duration
//! of [`WAITS_NS`], above any threshold, so the site is queued from then
//! on at that depth, until a sample measures a poll that completes. The
//! block goes with the task, and the level gets a new one.
//!
//! Why not make the task first and run it here (`runnable.run()`): that
//! keeps the allocation and the atomic state changes of a task and only
//! saves the deque; boxing the future costs a block kept for the purpose,
//! and nothing else when the poll completes, which is what a short child
//! does.
//! The box cannot be avoided: a future that was polled may not move, and
//! one that waits must move into a task.
//!
//! # Measuring
//!
//! What is measured is the duration of a child's first poll (all of it
//! when it completes at once, which is what running it inline costs the
//! parent): every time while a (site, depth) has no estimate; then, of the
//! children run inline, one in [`SAMPLE_EVERY`] per (site, depth) on this
//! thread, or one in [`SAMPLE_FAR_BELOW`] while the last estimate is below
//! the threshold over [`FAR_BELOW`] (each sample lets that many less one
//! run inline untimed, `Site::allow_inline`); of the queued ones, one in
//! [`SAMPLE_EVERY`] per site (`Site::tick`; a queued task's first poll is
//! timed where it runs and recorded in the spawning thread's table). So a
//! site whose children grew is queued again within a few calls, and one
//! whose children shrank is inlined. The estimate follows the longest
//! recent durations (`sites.rs`, `Site::record`). Under `Depth` and
//! `Never` nothing is timed.
//!
//! # What the child sees
//!
//! Run inline, a child runs on the parent's thread inside the parent's
//! poll: its depth of spawns is the parent's plus one, and its depth of
//! `join`s the parent's, as a task's is that of the worker that polls it
//! (which may be waiting inside a join). The depth of joins only keys
//! the joins' measured durations and places `Inlining::Depth`'s cutoff
//! for joins; setting it to 0 for the child and back
//! took ~1 ns of the ~8 of an inlined empty child (the `spawn` bench),
//! and holding it in the word of the spawns' depths made every inlined
//! `join` ~14 % slower.
//! Its time counts as the parent task's (`/threads/time/*`), and it is
//! counted as a task spawned and finished (`/threads/count/cumulative`)
//! and in `/threads/count/inlined` when its worker next publishes its
//! counts (`worker::count_inlined`).
//!
//! [`Runtime::spawn`]: crate::Runtime::spawn

use std::cell::Cell;
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::granularity::task_threshold_ns;
use super::inlining::{Inlining, from_code};
use super::join::JoinHandle;
use super::scheduler::{Scheduler, SchedulerId};
use super::sites::{self, Site};
use super::worker::{adaptive_worker_of, parallel_slack, spawn_policy};
use crate::clock::clock;

/// Inline runs of spawned children that may nest on one thread's stack;
/// a spawn deeper than this is queued. A guess, tune me: deep enough that
/// the leaves of a tree of spawns (most of its tasks) run inline, shallow
/// enough that the frames of the nested polls stay far below a worker's
/// 2 MiB stack.
pub(crate) const INLINE_NESTING_MAX: u32 = 16;

// Each level of inline runs has its block (`pooled::Slotted`).
const _: () = assert!(INLINE_NESTING_MAX as usize == super::pooled::SLOTS);

/// Once a (site, depth) is measured, one spawn in this many (per thread)
/// has its first poll timed: of those run inline, per (site, depth), of
/// those queued, per site. Two clock reads,
/// about as much as an inlined empty child costs otherwise (at one in 8,
/// perf put 15 % of the inlined spawn bench in the clock). A power of
/// two; a guess, tune me.
pub(crate) const SAMPLE_EVERY: u32 = 32;

/// A site whose children take less than the threshold divided by this
/// has its first polls timed one in [`SAMPLE_FAR_BELOW`], not one in
/// [`SAMPLE_EVERY`]: its children would have to grow this many times over
/// before they are worth a task. A guess, tune me.
pub(crate) const FAR_BELOW: u64 = 8;

/// Once a (site, depth) is measured far below the threshold, one spawn in
/// this many run inline there (per thread) is timed. A power of two; at one in 32,
/// timing was 1.5 of the 10 ns of an inlined empty child (the `spawn`
/// bench). A guess, tune me.
pub(crate) const SAMPLE_FAR_BELOW: u32 = 256;

/// The duration recorded for a first poll that returned `Pending`: above
/// any threshold, so that the site is queued.
pub(crate) const WAITS_NS: u64 = u64::MAX / 4;

/// Where the code running on a thread is in the tree of spawns: the
/// depth of the running task (0 for a task spawned off the tree, from
/// another thread or by the runtime itself), and the inline runs on this
/// thread's stack, also those below a queued task polled inside one (a
/// worker that waits for a forked closure runs other tasks meanwhile):
/// the level of the next run's block (`pooled::Slotted`) and what
/// [`INLINE_NESTING_MAX`] bounds. One word, the depth in its upper half,
/// so that a child run inline is one addition away.
#[derive(Debug, Clone, Copy)]
struct Nesting(u64);

/// A child run inline: one deeper in the tree, one more run on the stack.
const ONE_DEEPER: u64 = 1 << 32 | 1;

/// The depth a task is given at most: far from the end of the half of
/// [`Nesting`] that holds it, so that the inline runs nested below it
/// (at most [`INLINE_NESTING_MAX`]) never overflow it.
const DEPTH_MAX: u32 = u32::MAX / 2;

impl Nesting {
    /// The depth of the running task.
    #[inline]
    fn depth(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// Inline runs on the thread's stack.
    #[inline]
    fn inline(self) -> u32 {
        self.0 as u32
    }

    /// Where a child run inline from here runs.
    #[inline]
    fn child(self) -> Nesting {
        Nesting(self.0 + ONE_DEEPER)
    }

    /// A task at `depth` (at most [`DEPTH_MAX`]) with the inline runs of
    /// here on the stack below it.
    #[inline]
    fn at_depth(self, depth: u32) -> Nesting {
        Nesting(u64::from(depth.min(DEPTH_MAX)) << 32 | u64::from(self.inline()))
    }
}

thread_local! {
    /// Where the running task of this thread is in the tree of spawns.
    static NESTING: Cell<Nesting> = const { Cell::new(Nesting(0)) };
}

/// Sets the thread's [`Nesting`] until dropped (also when unwinding),
/// then puts back what it was.
struct AtNesting(Nesting);

impl AtNesting {
    /// Sets the thread's nesting, `here` (read just before), to `child`
    /// until dropped.
    #[inline]
    fn enter_from(here: Nesting, child: Nesting) -> AtNesting {
        NESTING.set(child);
        AtNesting(here)
    }

    /// Enters a task at `depth` in the tree of spawns, with as many inline
    /// runs on the stack as there are.
    #[inline]
    fn enter_depth(depth: u32) -> AtNesting {
        let here = NESTING.get();
        NESTING.set(here.at_depth(depth));
        AtNesting(here)
    }
}

impl Drop for AtNesting {
    #[inline]
    fn drop(&mut self) {
        NESTING.set(self.0);
    }
}

/// Spawns `future` on `sched`, whose id is `id`, from the call site
/// `location`: runs its first poll here when the module's rules say so,
/// else queues it.
#[inline]
pub(crate) fn spawn_at<F>(
    id: SchedulerId,
    sched: &Arc<Scheduler>,
    location: &'static Location<'static>,
    future: F,
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    if !adaptive_worker_of(id) {
        return match spawn_policy(sched).map(from_code) {
            Some(Inlining::Depth(cutoff)) => spawn_below(sched, cutoff, future),
            _ => sched.spawn(future),
        };
    }
    let here = NESTING.get();
    let site = sites::site(location);
    if here.inline() < INLINE_NESTING_MAX && parallel_slack() && site.take_inline(here.depth()) {
        return run_inline(sched, here, Some((site, false)), future);
    }
    let expected = site.expected_ns(here.depth());
    let inline = expected != 0 && expected < task_threshold_ns();
    if inline && here.inline() < INLINE_NESTING_MAX && parallel_slack() {
        return run_sampled(sched, here, site, future);
    }
    let timed = expected == 0 || site.tick(SAMPLE_EVERY - 1);
    let first = timed.then_some((site, here.depth()));
    sched.spawn(in_tree(here.depth().saturating_add(1), first, future))
}

/// Runs `future` inline from `here`, timed: the next sample of `site`
/// once no spawn is left that may run inline untimed
/// ([`Site::take_inline`]). Out of line: one spawn in [`SAMPLE_EVERY`]
/// (or [`SAMPLE_FAR_BELOW`]) of those run inline.
#[inline(never)]
fn run_sampled<F>(
    sched: &Arc<Scheduler>,
    here: Nesting,
    site: &'static Site,
    future: F,
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    run_inline(sched, here, Some((site, true)), future)
}

/// Spawns `future` on `sched` under [`Inlining::Depth`]`(cutoff)`: inline
/// at and below the cutoff. Out of line: the adaptive path is the one
/// inlined where `spawn` is called.
#[inline(never)]
fn spawn_below<F>(sched: &Arc<Scheduler>, cutoff: u32, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let here = NESTING.get();
    if here.depth() >= cutoff && here.inline() < INLINE_NESTING_MAX {
        return run_inline(sched, here, None, future);
    }
    sched.spawn(in_tree(here.depth().saturating_add(1), None, future))
}

/// Runs `future`'s first poll here, as a child of the code at `here`;
/// queues the rest if it waits. `learn`: the site to record the outcome
/// in, and whether to time it. Always inlined: at the adaptive spawn's
/// site it is most of what an inlined child costs.
#[inline(always)]
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
    let child = here.child();
    let start = match learn {
        Some((_, true)) => clock().raw(),
        _ => 0,
    };
    let polled = {
        let _tree = AtNesting::enter_from(here, child);
        sched.poll_inline(future, here.inline())
    };
    if let (Some((site, true)), Ok(_)) = (learn, &polled) {
        let clock = clock();
        learned(site, here.depth(), clock.delta_as_nanos(start, clock.raw()));
    }
    match polled {
        Ok(done) => done,
        Err(rest) => queue_rest(
            sched,
            child.depth(),
            learn.map(|(site, _)| (site, here.depth())),
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
        learned(site, at, WAITS_NS);
    }
    sched.spawn(in_tree(depth, None, rest))
}

/// Records a first poll of `ns` at `site`, at `depth`, and when to time
/// the next: one spawn in [`SAMPLE_FAR_BELOW`] when the site's children
/// take less than the threshold over [`FAR_BELOW`], one in
/// [`SAMPLE_EVERY`] otherwise; lets the spawns until then run inline
/// without a look when the estimate is below the threshold.
fn learned(site: &Site, depth: u32, ns: u64) {
    site.record(depth, ns);
    let expected = site.expected_ns(depth);
    let threshold = task_threshold_ns();
    let every = match expected < threshold / FAR_BELOW {
        true => SAMPLE_FAR_BELOW,
        false => SAMPLE_EVERY,
    };
    site.rearm(every - 1);
    site.allow_inline(depth, if expected < threshold { every - 1 } else { 0 });
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
        let _tree = AtNesting::enter_depth(*this.depth);
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
        learned(site, at, ns);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_one_deeper_with_one_more_run_and_a_task_keeps_the_runs() {
        let here = Nesting(0).at_depth(7);
        assert_eq!((here.depth(), here.inline()), (7, 0));
        let child = here.child().child();
        assert_eq!((child.depth(), child.inline()), (9, 2));
        let task = child.at_depth(3);
        assert_eq!((task.depth(), task.inline()), (3, 2), "runs below it stay");
    }

    #[test]
    fn depths_stop_where_the_runs_below_cannot_overflow_them() {
        let deepest = Nesting(0).at_depth(u32::MAX);
        assert_eq!(deepest.depth(), DEPTH_MAX);
        let mut child = deepest;
        for _ in 0..INLINE_NESTING_MAX {
            child = child.child();
        }
        assert_eq!(child.depth(), DEPTH_MAX + INLINE_NESTING_MAX);
        assert_eq!(child.inline(), INLINE_NESTING_MAX);
    }
}
