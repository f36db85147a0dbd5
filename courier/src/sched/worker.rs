//! The worker loop: find a task, run it, account for the time, do background
//! work, park.

use std::cell::{Cell, OnceCell};
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;

use super::task::Runnable;
use crossbeam_deque::{Steal, Worker};
use crossbeam_utils::Backoff;

use super::deque::{TaskDeque, steal_tasks};
use super::fork::fork_join_with;
use super::scheduler::{Scheduler, SchedulerId};
use super::spin::{LongSpin, WAKE_WATCH_NS};
use super::stats::{PollHistogram, WorkerStats};
use super::{BACKGROUND_INTERVAL, PUBLISH_AFTER_NS, SPIN_ROUNDS};
use crate::clock::{POLL_BUCKETS, clock, poll_bucket};

/// What a worker thread knows about itself.
struct Local {
    /// The scheduler this thread works for.
    owner: Arc<Scheduler>,
    index: usize,
    queue: TaskDeque,
    /// Tasks of forked closures offered by this worker (`fork.rs`).
    offers: Worker<Runnable>,
}

thread_local! {
    /// The deque of the worker running on this thread, if it is one.
    static LOCAL: OnceCell<Rc<Local>> = const { OnceCell::new() };
    /// (id of the scheduler, index) of the worker running on this
    /// thread, for the send path to find its worker's buffers: a type
    /// without `Drop`, so reading it is a plain load. Id 0 is no
    /// scheduler's.
    static WORKER: Cell<(u64, usize)> = const { Cell::new((0, 0)) };
    /// The id of the scheduler this thread works for if its spawns are
    /// inlined adaptively (`Inlining::Adaptive`, the default), else 0:
    /// the one look `Runtime::spawn` takes before its adaptive path.
    static ADAPTIVE_FOR: Cell<u64> = const { Cell::new(0) };
    /// Whether this thread is the only worker of its scheduler: then it
    /// always has parallel slack (`parallel_slack`), without a look at
    /// its deque.
    static SOLO: Cell<bool> = const { Cell::new(false) };
    /// The scheduler's join policy plus one, on its worker threads (0:
    /// not a worker): what `par::join` reads on every call.
    static JOIN_POLICY: Cell<u64> = const { Cell::new(0) };
    /// Tasks finished on this thread, copied into the worker's stats when
    /// it publishes them.
    static FINISHED: Cell<u64> = const { Cell::new(0) };
    /// Spawned tasks whose first poll this thread ran inline and that
    /// completed in it: counted as spawned, finished and inlined when the
    /// worker publishes its stats (see `count_inlined`).
    static INLINED_DONE: Cell<u64> = const { Cell::new(0) };
    /// Spawned tasks whose first poll this thread ran inline and that
    /// went on as queued tasks, copied into the worker's count of inlined
    /// first polls when it publishes its stats.
    static INLINED_WAITED: Cell<u64> = const { Cell::new(0) };
}

/// Which deque of a worker a task goes to.
#[derive(Debug, Clone, Copy)]
pub(super) enum Queue {
    /// Spawned and woken tasks.
    Tasks,
    /// Tasks of forked closures (`fork.rs`).
    Offers,
}

/// Pushes `runnable` on the calling thread's deque `queue` if the thread
/// is a worker of scheduler `id`, and wakes another worker for it; hands
/// it back otherwise. `spawned`: a new task, counted as the worker's.
#[inline]
pub(super) fn push_mine(
    id: SchedulerId,
    runnable: Runnable,
    queue: Queue,
    spawned: bool,
) -> Option<Runnable> {
    LOCAL
        .try_with(|local| match local.get() {
            Some(local) if local.owner.id == id => {
                if spawned {
                    // Only this worker writes its count: no read-modify-write.
                    local.owner.published[local.index].count_spawn();
                }
                match queue {
                    Queue::Tasks => {
                        if let Err(runnable) = local.queue.push(runnable) {
                            local.owner.injector.push(runnable);
                        }
                    }
                    Queue::Offers => local.offers.push(runnable),
                }
                local.owner.notify_for_queued();
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
                steal_offer,
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
/// them from `start` on with `steal`; sets `retry` when one was
/// contended.
fn steal_from<S>(
    victims: &[S],
    me: usize,
    start: usize,
    retry: &mut bool,
    mut steal: impl FnMut(&S) -> Steal<Runnable>,
) -> Option<Runnable> {
    let n = victims.len();
    for offset in 0..n {
        let victim = (start + offset) % n;
        if victim == me {
            continue;
        }
        match steal(&victims[victim]) {
            Steal::Success(runnable) => return Some(runnable),
            Steal::Retry => *retry = true,
            Steal::Empty => {}
        }
    }
    None
}

/// One task of a forked closure from another worker's offers.
fn steal_offer(victim: &crossbeam_deque::Stealer<Runnable>) -> Steal<Runnable> {
    victim.steal()
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
    (owner == scheduler.id.get()).then_some(index)
}

/// The join policy code of the scheduler whose worker the calling thread
/// is, if it is one.
#[inline]
pub(crate) fn join_policy() -> Option<u64> {
    JOIN_POLICY.get().checked_sub(1)
}

/// The join policy code (which `Runtime::spawn` reads too) if the calling
/// thread is one of `scheduler`'s workers; `None` on any other thread.
#[inline]
pub(crate) fn spawn_policy(scheduler: &Scheduler) -> Option<u64> {
    let policy = join_policy()?;
    current_index(scheduler)?;
    Some(policy)
}

/// Whether the calling thread is one of the workers of the scheduler
/// `id` and its spawns are inlined adaptively.
#[inline]
pub(crate) fn adaptive_worker_of(id: SchedulerId) -> bool {
    ADAPTIVE_FOR.get() == id.get()
}

/// Whether the calling worker has parallel slack: a task in its deque
/// that another worker may steal, or no other worker to feed. A spawn
/// that runs inline only then keeps the other workers as busy as queuing
/// it would (`sched/inline.rs`). False off worker threads.
#[inline]
pub(crate) fn parallel_slack() -> bool {
    SOLO.get()
        || LOCAL
            .try_with(|local| local.get().is_some_and(|local| !local.queue.is_empty()))
            .unwrap_or(false)
}

/// Counts a task spawned on the calling worker whose first poll ran
/// inline; `finished`: it completed there. One that did not goes on as a
/// queued task, counted as such. One that did is counted as spawned and
/// finished when the worker next publishes its stats, both at once: it
/// was never alive outside the spawning task's poll, so no count of live
/// tasks (`Scheduler::snapshot`, which termination reads) needs it
/// sooner, and the spawn pays one increment of a thread-local (where
/// counting it as spawned at once took ~3.5 of its ~8 ns).
#[inline]
pub(super) fn count_inlined(finished: bool) {
    let count = if finished {
        &INLINED_DONE
    } else {
        &INLINED_WAITED
    };
    count.set(count.get() + 1);
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
    /// Task polls this worker thread has begun (see [`current_poll`]); a
    /// worker's thread runs no other worker, so this is also its count of
    /// polls (`WorkerStats::polls`, copied when it publishes).
    static POLLS: Cell<u64> = const { Cell::new(0) };
}

/// Which poll of a task the calling worker thread is in: the same number
/// for everything one poll does (the inlined tasks and the forked
/// closures it runs included), a new one for the next poll; between two
/// polls (background work), the last one's; always 0 off the workers.
/// Tells calls a task issued together, in one go, from calls issued by
/// several polls.
#[inline]
pub(crate) fn current_poll() -> u64 {
    POLLS.get()
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
pub(super) fn run(sched: Arc<Scheduler>, index: usize, queue: TaskDeque, offers: Worker<Runnable>) {
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
    WORKER.set((sched.id.get(), index));
    SOLO.set(sched.workers() == 1);
    let policy = sched.join_policy.load(std::sync::atomic::Ordering::Relaxed);
    if policy == super::inlining::policy_code(super::Inlining::Adaptive) {
        ADAPTIVE_FOR.set(sched.id.get());
    }
    JOIN_POLICY.set(policy.saturating_add(1));
    let mut worker = WorkerLoop {
        sched: &sched,
        index,
        local: &local,
        stats: WorkerStats::default(),
        poll_histogram: [0; POLL_BUCKETS],
        rng: 0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1),
        clock: clock(),
        gap_ticks: 0,
        group: Group::default(),
        inlined_done_published: INLINED_DONE.get(),
        network_at: 0,
        long_spin: LongSpin::default(),
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
    /// of the next (finding the task): measured at the start of every
    /// [`GAP_SAMPLE_EVERY`]-th group of polls, and estimated for the others.
    gap_ticks: u64,
    /// The polls timed together since the last clock read (see [`Group`]).
    group: Group,
    /// Inlined children that completed (`INLINED_DONE`) already counted as
    /// spawned in the published stats.
    inlined_done_published: u64,
    /// When this worker last sent or received over the network (clock
    /// ticks): an idle worker spins longer while that was recent (see
    /// `spin.rs`). 0 before any traffic: the clock counts from boot, so
    /// that reads as long ago.
    network_at: u64,
    /// Whether it spins on past [`SPIN_ROUNDS`] when it runs out of tasks.
    long_spin: LongSpin,
}

/// Polls timed together: one clock read after `len` polls instead of one
/// after each. A clock read costs 5 to 10 ns (BENCHMARKS.md), a tenth of
/// an empty task's spawn and run; while tasks are short, reading it after
/// each is most of the cost of timing them. So while the last group's
/// polls took less than [`SHORT_POLL_NS`] each, the next [`GROUP_LEN`]
/// polls share one read: the sums (task time, time finding tasks) stay
/// exact up to the estimated gaps, and the poll histogram records each
/// poll of the group at the group's mean. A long poll after short ones is
/// thus spread over its group in the histogram (its time is exact in the
/// sums), and the group after it is timed poll by poll again.
#[derive(Debug, Default)]
struct Group {
    /// Polls run since the last clock read.
    polls: u32,
    /// Polls this group is to hold: 1 or [`GROUP_LEN`].
    len: u32,
    /// Groups ended, for the gap's sampling.
    ended: u64,
}

/// Polls a group holds while polls are short. A guess, tune me: 4 cut the
/// clock reads of empty tasks by three quarters while a long poll can hide
/// among three others at most.
const GROUP_LEN: u32 = 4;

/// A poll shorter than this (the mean of its group) keeps the next polls
/// grouped; 2 µs, well above an empty task (under 100 ns) and well below
/// what the histogram is read for (task durations of the seed 003 table,
/// tens of µs and more). A guess, tune me.
const SHORT_POLL_NS: u64 = 2_000;

/// Groups of polls between two measurements of the gap before a poll. The
/// gap varies little from one poll to the next. A guess, tune me.
const GAP_SAMPLE_EVERY: u64 = 8;

/// Polls between two looks at the shared queue before the worker's own:
/// tokio's `global_queue_interval` default, a prime so that it does not
/// beat with other periodic work.
const INJECTOR_INTERVAL: u64 = 61;

impl WorkerLoop<'_> {
    fn run(&mut self) {
        let mut since_background = 0u32;
        let mut last = self.clock.raw();
        self.group.len = 1;
        loop {
            if let Some(runnable) = self.find_task() {
                if self.group.polls == 0 && self.group.ended % GAP_SAMPLE_EVERY == 0 {
                    let start = self.clock.raw();
                    // An average over the last samples (1/4 new).
                    let gap = start.saturating_sub(last);
                    self.gap_ticks = (3 * self.gap_ticks + gap) / 4;
                }
                let slot = &self.sched.published[self.index];
                // The start for the watchdog: at most a group of short
                // polls early.
                slot.begin_poll(last + self.gap_ticks);
                POLLS.set(POLLS.get() + 1);
                runnable.run();
                slot.end_poll();
                self.group.polls += 1;
                since_background += 1;
                if self.group.polls >= self.group.len || since_background >= BACKGROUND_INTERVAL {
                    last = self.end_group(last);
                }
                if since_background >= BACKGROUND_INTERVAL {
                    since_background = 0;
                    self.background(true);
                    last = self.clock.raw();
                }
                continue;
            }
            if self.group.polls > 0 {
                self.end_group(last);
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
            let (found, mut work_ns) = self.spin(idle_start);
            if !found {
                self.publish();
                let sched = self.sched;
                let mine = &self.local.queue;
                work_ns += sched.sleep.park(sched.background(), || {
                    sched.has_work(mine) || sched.is_shut_down()
                });
            }
            last = self.clock.raw();
            let parked_ns = self.clock.delta_as_nanos(idle_start, last);
            self.stats.background_ns += work_ns.min(parked_ns);
            self.stats.idle_ns += parked_ns.saturating_sub(work_ns);
        }
    }

    /// Reads the clock at the end of the current group of polls, which
    /// began at `last` (raw ticks), accounts for its time, and returns the
    /// reading.
    fn end_group(&mut self, last: u64) -> u64 {
        let end = self.clock.raw().max(last);
        let polls = u64::from(self.group.polls);
        let span_ns = self.clock.delta_as_nanos(last, end);
        let gaps_ns = self
            .clock
            .delta_as_nanos(0, self.gap_ticks.saturating_mul(polls))
            .min(span_ns);
        let network_ns = NETWORK_NS.with(Cell::take).min(span_ns - gaps_ns);
        if network_ns > 0 {
            self.network_at = end;
        }
        let exec_ns = span_ns - gaps_ns - network_ns;
        self.stats.exec_ns += exec_ns;
        self.stats.background_ns += network_ns;
        self.stats.func_ns += span_ns - network_ns;
        let mean_ns = exec_ns / polls;
        self.poll_histogram[poll_bucket(mean_ns)] += polls;
        self.group.len = if mean_ns < SHORT_POLL_NS {
            GROUP_LEN
        } else {
            1
        };
        self.group.polls = 0;
        self.group.ended += 1;
        if exec_ns > PUBLISH_AFTER_NS {
            // A long poll would otherwise stay invisible to the
            // counters until the next maintenance point.
            self.publish();
        }
        end
    }

    /// Spins a little while from `start` (clock ticks), polling the
    /// background work each round (a frame that arrives now is handled
    /// without a park and a wake-up): [`SPIN_ROUNDS`] rounds, then on for
    /// as long as [`LongSpin`] allows after recent traffic, or until a
    /// watched wake-up of a task due within [`WAKE_WATCH_NS`] is due (this
    /// worker then wakes the task); returns whether work showed up, and
    /// the ns of background work done.
    fn spin(&mut self, start: u64) -> (bool, u64) {
        let since_network = self.clock.delta_as_nanos(self.network_at, start);
        let background = self.sched.background();
        let long_ns = self
            .long_spin
            .budget_ns(since_network, || background.awaits_network());
        let backoff = Backoff::new();
        let mut rounds = 0;
        let mut round_start = 0;
        loop {
            if rounds < SPIN_ROUNDS {
                backoff.snooze();
            } else {
                let now = self.clock.raw();
                // The first round of the long spin has no previous one.
                let lost = rounds > SPIN_ROUNDS
                    && self
                        .long_spin
                        .lost_core(self.clock.delta_as_nanos(round_start, now));
                let spun_ns = self.clock.delta_as_nanos(start, now);
                // A watched wake-up is kept even after a lost core: the
                // timer thread backs it up only late.
                let watching = background
                    .next_watched_in_ns()
                    .is_some_and(|ns| ns <= WAKE_WATCH_NS);
                if !watching && (lost || spun_ns >= long_ns) {
                    // A wake-up that came due while the core was lost.
                    return (background.wake_due(), 0);
                }
                round_start = now;
                std::thread::yield_now();
            }
            rounds += 1;
            if background.wake_due()
                || self.sched.has_work(&self.local.queue)
                || self.sched.is_shut_down()
            {
                return (true, 0);
            }
            let poll_start = self.clock.raw();
            let did = background.poll();
            // Sends made by the background work are part of its time.
            NETWORK_NS.with(Cell::take);
            if did {
                let end = self.clock.raw();
                self.network_at = end;
                return (true, self.clock.delta_as_nanos(poll_start, end));
            }
        }
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
        let woke = self.sched.background().wake_due();
        let end = self.clock.raw();
        let ns = self.clock.delta_as_nanos(start, end);
        if did {
            self.network_at = end;
        }
        // Sends made by the background work itself are part of `ns`.
        NETWORK_NS.with(Cell::take);
        if busy || did {
            self.stats.background_ns += ns;
        } else {
            self.stats.idle_ns += ns;
        }
        did || woke
    }

    fn publish(&mut self) {
        let done = INLINED_DONE.get();
        let published = &self.sched.published[self.index];
        // Spawned before finished: a reader that sees the finished count
        // with them sees them spawned too (`Scheduler::snapshot`).
        published.count_spawns(done - self.inlined_done_published);
        self.inlined_done_published = done;
        self.stats.polls = POLLS.get();
        self.stats.finished = FINISHED.get() + done;
        self.stats.inlined = done + INLINED_WAITED.get();
        published.publish(&self.stats, &self.poll_histogram);
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
        if POLLS.get() % INJECTOR_INTERVAL == INJECTOR_INTERVAL - 1 {
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
        let mine = &self.local.queue;
        loop {
            let mut retry = false;
            match self.sched.injector.steal() {
                Steal::Success(runnable) => return Some(runnable),
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
            let start = usize::try_from(self.next_random()).unwrap_or(0) % n;
            // Other workers' tasks first, then the closures they forked.
            let stolen = steal_from(&self.sched.stealers, self.index, start, &mut retry, |v| {
                steal_tasks(v, mine)
            })
            .or_else(|| {
                steal_from(
                    &self.sched.offer_stealers,
                    self.index,
                    start,
                    &mut retry,
                    steal_offer,
                )
            });
            if let Some(runnable) = stolen {
                self.stats.steals += 1;
                return Some(runnable);
            }
            if !retry {
                return None;
            }
        }
    }
}
