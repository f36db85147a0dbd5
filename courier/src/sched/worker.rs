//! The worker loop: find a task, run it, account for the time, do background
//! work, park.

use std::cell::{Cell, OnceCell};
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;

use async_task::Runnable;
use crossbeam_deque::{Steal, Worker};
use crossbeam_utils::Backoff;

use super::fork::fork_join_with;
use super::scheduler::Scheduler;
use super::stats::{PollHistogram, WorkerStats};
use super::{BACKGROUND_INTERVAL, PUBLISH_AFTER_NS, SPIN_ROUNDS};
use crate::clock::{POLL_BUCKETS, clock, poll_bucket};

/// What a worker thread knows about itself.
struct Local {
    /// The scheduler this thread works for.
    owner: Arc<Scheduler>,
    index: usize,
    queue: Worker<Runnable>,
    /// Tasks of forked closures offered by this worker (`fork.rs`).
    offers: Worker<Runnable>,
}

thread_local! {
    /// The deque of the worker running on this thread, if it is one.
    static LOCAL: OnceCell<Rc<Local>> = const { OnceCell::new() };
    /// (address of the scheduler, index) of the worker running on this
    /// thread, for the send path to find its worker's buffers: a type
    /// without `Drop`, so reading it is a plain load.
    static WORKER: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    /// The scheduler's join policy plus one, on its worker threads (0:
    /// not a worker): what `par::join` reads on every call.
    static JOIN_POLICY: Cell<u64> = const { Cell::new(0) };
    /// Tasks finished on this thread, copied into the worker's stats when
    /// it publishes them.
    static FINISHED: Cell<u64> = const { Cell::new(0) };
}

/// Pushes `runnable` on the current thread's deque if this thread is a
/// worker of `scheduler`; hands it back otherwise.
pub(super) fn push_local(scheduler: &Scheduler, runnable: Runnable) -> Option<Runnable> {
    push_mine(scheduler, runnable, |local| &local.queue)
}

/// Pushes `runnable` (a forked closure's task) on the calling thread's
/// deque of offers if it is a worker of `scheduler`; hands it back
/// otherwise.
pub(super) fn push_offer(scheduler: &Scheduler, runnable: Runnable) -> Option<Runnable> {
    push_mine(scheduler, runnable, |local| &local.offers)
}

/// Pushes `runnable` on the deque `which` of the calling thread if it is
/// a worker of `scheduler`; hands it back otherwise.
fn push_mine(
    scheduler: &Scheduler,
    runnable: Runnable,
    which: impl Fn(&Local) -> &Worker<Runnable>,
) -> Option<Runnable> {
    LOCAL
        .try_with(|local| match local.get() {
            Some(local) if std::ptr::eq(&*local.owner, scheduler) => {
                which(local).push(runnable);
                None
            }
            _ => Some(runnable),
        })
        .unwrap_or_else(|_| unreachable!("a task pushed during thread teardown"))
}

/// Runs `a` here and `b` as a task any worker of this thread's scheduler
/// may take (see `fork.rs`); off worker threads, runs `a` then `b`.
pub(crate) fn fork_join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let local = LOCAL.with(|cell| cell.get().cloned());
    let Some(local) = local else {
        return (a(), b());
    };
    fork_join_with(
        a,
        b,
        |offer| local.owner.spawn_offer(async move { offer.run_if_open() }),
        &|| help(&local),
    )
}

/// Runs one forked closure's task, if there is one to find (this
/// worker's offers, then the others', oldest first): what a
/// worker waiting for a forked closure does meanwhile. Only such tasks:
/// an unrelated task run here would nest on this stack, inside the
/// waiting task's poll, with its thread-local state.
fn help(local: &Local) -> bool {
    let runnable = local.offers.pop().or_else(|| {
        loop {
            let mut retry = false;
            let stolen = steal_from(
                &local.owner.offer_stealers,
                local.index,
                local.index,
                &mut retry,
            );
            if stolen.is_some() || !retry {
                break stolen;
            }
        }
    });
    match runnable {
        Some(runnable) => {
            runnable.run();
            true
        }
        None => false,
    }
}

/// A task from a deque among `victims` other than worker `me`'s, trying
/// them from `start` on; sets `retry` when one was contended.
fn steal_from(
    victims: &[crossbeam_deque::Stealer<Runnable>],
    me: usize,
    start: usize,
    retry: &mut bool,
) -> Option<Runnable> {
    let n = victims.len();
    for offset in 0..n {
        let victim = (start + offset) % n;
        if victim == me {
            continue;
        }
        match victims[victim].steal() {
            Steal::Success(runnable) => return Some(runnable),
            Steal::Retry => *retry = true,
            Steal::Empty => {}
        }
    }
    None
}

/// Labels the task the calling worker of `scheduler` is polling with
/// `label` (what it runs, for the watchdog; 0 clears it) and returns its
/// previous label. Does nothing (and returns 0) on a thread that is not
/// one of its workers.
#[inline]
pub(crate) fn label_poll(scheduler: &Scheduler, label: u64) -> u64 {
    match current_index(scheduler) {
        Some(index) => scheduler.published[index].label_poll(label),
        None => 0,
    }
}

/// The index of the calling thread among `scheduler`'s workers, if it is one.
#[inline]
pub(super) fn current_index(scheduler: &Scheduler) -> Option<usize> {
    let (owner, index) = WORKER.get();
    (owner == std::ptr::from_ref(scheduler) as usize).then_some(index)
}

/// The join policy code of the scheduler whose worker the calling thread
/// is, if it is one.
#[inline]
pub(crate) fn join_policy() -> Option<u64> {
    JOIN_POLICY.get().checked_sub(1)
}

/// Whether the calling thread is one of `scheduler`'s workers.
pub(crate) fn on_worker(scheduler: &Scheduler) -> bool {
    current_index(scheduler).is_some()
}

/// Wraps a task's future so that the task counts as finished on the thread
/// where its future is dropped (after completing, panicking, or being
/// cancelled).
pub(super) async fn count_finish<F: Future>(future: F) -> F::Output {
    let _finished = FinishGuard;
    future.await
}

struct FinishGuard;

impl Drop for FinishGuard {
    fn drop(&mut self) {
        // `try_with`: a task dropped during thread teardown is not counted,
        // which only happens after shutdown.
        let _ = FINISHED.try_with(|f| f.set(f.get() + 1));
    }
}

thread_local! {
    /// Nanoseconds the current task spent sending frames, charged by the
    /// send path and moved from task time to background time after the poll.
    static NETWORK_NS: Cell<u64> = const { Cell::new(0) };
}

/// Charges `ns` of network work (sending a frame) done inside the current
/// task: the worker counts it as background work, not as task time, so that
/// n_oh (Wagle et al. 2018 Eq. 4) covers sending as well as receiving, as it does in
/// HPX where the parcel port sends in the background. Off worker threads
/// (the flush timer) it is ignored.
pub(crate) fn charge_network(ns: u64) {
    let _ = NETWORK_NS.try_with(|n| n.set(n.get() + ns));
}

/// The body of worker thread `index`.
pub(super) fn run(
    sched: Arc<Scheduler>,
    index: usize,
    queue: Worker<Runnable>,
    offers: Worker<Runnable>,
) {
    let local = Rc::new(Local {
        owner: Arc::clone(&sched),
        index,
        queue,
        offers,
    });
    LOCAL.with(|cell| {
        if cell.set(Rc::clone(&local)).is_err() {
            unreachable!("a thread is the worker of two schedulers");
        }
    });
    WORKER.set((Arc::as_ptr(&sched) as usize, index));
    JOIN_POLICY.set(
        sched
            .join_policy
            .load(std::sync::atomic::Ordering::Relaxed)
            .saturating_add(1),
    );
    let mut worker = WorkerLoop {
        sched: &sched,
        index,
        local: &local,
        stats: WorkerStats::default(),
        poll_histogram: [0; POLL_BUCKETS],
        rng: 0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1),
        clock: clock(),
        gap_ticks: 0,
    };
    worker.run();
    worker.publish();
}

struct WorkerLoop<'a> {
    sched: &'a Scheduler,
    index: usize,
    local: &'a Local,
    stats: WorkerStats,
    poll_histogram: PollHistogram,
    rng: u64,
    clock: &'static quanta::Clock,
    /// The usual time, in clock ticks, from the end of one poll to the start
    /// of the next (finding the task): measured on every
    /// [`GAP_SAMPLE_EVERY`]-th poll, and taken as the start of the others
    /// so that a poll costs one clock read, not two.
    gap_ticks: u64,
}

/// Polls between two measurements of the gap before a poll. A clock read
/// costs 5 to 10 ns on the machines measured (BENCHMARKS.md), as much as
/// the rest of running an empty task; the gap varies little from one poll
/// to the next. A guess, tune me.
const GAP_SAMPLE_EVERY: u64 = 8;

/// Polls between two looks at the shared queue before the worker's own:
/// tokio's `global_queue_interval` default, a prime so that it does not
/// beat with other periodic work.
const INJECTOR_INTERVAL: u64 = 61;

impl WorkerLoop<'_> {
    fn run(&mut self) {
        let mut since_background = 0u32;
        let mut last = self.clock.raw();
        loop {
            if let Some(runnable) = self.find_task() {
                let start = if self.stats.polls % GAP_SAMPLE_EVERY == 0 {
                    let start = self.clock.raw();
                    // An average over the last samples (1/4 new).
                    let gap = start.saturating_sub(last);
                    self.gap_ticks = (3 * self.gap_ticks + gap) / 4;
                    start
                } else {
                    last + self.gap_ticks
                };
                let slot = &self.sched.published[self.index];
                slot.begin_poll(start);
                runnable.run();
                slot.end_poll();
                let end = self.clock.raw().max(start);
                self.stats.polls += 1;
                let poll_ns = self.clock.delta_as_nanos(start, end);
                let network_ns = NETWORK_NS.with(Cell::take).min(poll_ns);
                let exec_ns = poll_ns - network_ns;
                self.stats.exec_ns += exec_ns;
                self.stats.background_ns += network_ns;
                self.poll_histogram[poll_bucket(exec_ns)] += 1;
                self.stats.func_ns += self
                    .clock
                    .delta_as_nanos(last, end)
                    .saturating_sub(network_ns);
                last = end;
                if exec_ns > PUBLISH_AFTER_NS {
                    // A long poll would otherwise stay invisible to the
                    // counters until the next maintenance point.
                    self.publish();
                }
                since_background += 1;
                if since_background >= BACKGROUND_INTERVAL {
                    since_background = 0;
                    self.background(true);
                    last = self.clock.raw();
                }
                continue;
            }
            if self.sched.is_shut_down() {
                return;
            }
            since_background = 0;
            if self.background(false) {
                last = self.clock.raw();
                continue;
            }
            let idle_start = self.clock.raw();
            let (found, mut work_ns) = self.spin();
            if !found {
                self.publish();
                let sched = self.sched;
                work_ns += sched.sleep.park(sched.background(), || {
                    sched.has_work() || sched.is_shut_down()
                });
            }
            last = self.clock.raw();
            let parked_ns = self.clock.delta_as_nanos(idle_start, last);
            self.stats.background_ns += work_ns.min(parked_ns);
            self.stats.idle_ns += parked_ns.saturating_sub(work_ns);
        }
    }

    /// Spins a little while, polling the background work each round (a
    /// frame that arrives now is handled without a park and a wake-up);
    /// returns whether work showed up, and the ns of background work done.
    fn spin(&self) -> (bool, u64) {
        let backoff = Backoff::new();
        for _ in 0..SPIN_ROUNDS {
            backoff.snooze();
            if self.sched.has_work() || self.sched.is_shut_down() {
                return (true, 0);
            }
            let start = self.clock.raw();
            let did = self.sched.background().poll();
            // Sends made by the background work are part of its time.
            NETWORK_NS.with(Cell::take);
            if did {
                return (true, self.clock.delta_as_nanos(start, self.clock.raw()));
            }
        }
        (false, 0)
    }

    /// Runs the background work once. Time spent counts as background time
    /// when the worker was busy or when the call did something; an idle
    /// worker's empty poll counts as idle time.
    fn background(&mut self, busy: bool) -> bool {
        self.publish();
        let start = self.clock.raw();
        // A worker out of tasks first sends what it was holding back.
        let flushed = !busy && self.sched.background().before_idle();
        let did = self.sched.background().poll() || flushed;
        let ns = self.clock.delta_as_nanos(start, self.clock.raw());
        // Sends made by the background work itself are part of `ns`.
        NETWORK_NS.with(Cell::take);
        if busy || did {
            self.stats.background_ns += ns;
        } else {
            self.stats.idle_ns += ns;
        }
        did
    }

    fn publish(&mut self) {
        self.stats.finished = FINISHED.with(Cell::get);
        self.sched.published[self.index].publish(&self.stats, &self.poll_histogram);
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64: only used to pick a steal victim.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn find_task(&mut self) -> Option<Runnable> {
        // Now and then the shared queue first: a task that keeps
        // rescheduling itself here (a `yield_now` loop) must not starve the
        // tasks other threads spawn or wake (the monitor thread's
        // deliveries, the timer's wake-ups, the program's main thread).
        if self.stats.polls % INJECTOR_INTERVAL == INJECTOR_INTERVAL - 1 {
            if let Steal::Success(runnable) = self.sched.injector.steal() {
                return Some(runnable);
            }
        }
        if let Some(runnable) = self.local.queue.pop() {
            return Some(runnable);
        }
        // Offers of joins no longer on this stack: taken back or done,
        // they are finished in a moment.
        if let Some(runnable) = self.local.offers.pop() {
            return Some(runnable);
        }
        let n = self.sched.stealers.len();
        loop {
            let mut retry = false;
            match self.sched.injector.steal_batch_and_pop(&self.local.queue) {
                Steal::Success(runnable) => return Some(runnable),
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
            let start = usize::try_from(self.next_random()).unwrap_or(0) % n;
            // Other workers' tasks first, then the closures they forked.
            for victims in [&self.sched.stealers, &self.sched.offer_stealers] {
                if let Some(runnable) = steal_from(victims, self.index, start, &mut retry) {
                    self.stats.steals += 1;
                    return Some(runnable);
                }
            }
            if !retry {
                return None;
            }
        }
    }
}
