//! The flush timer: one thread per locality that flushes buffers whose
//! first parcel has waited long enough (Wagle et al. 2018 §II.B: a dedicated thread,
//! ~33 µs late on average there).
//!
//! Deadlines live in an ordered set keyed by (deadline, buffer set); the
//! aggregator keeps one entry per set and decides, when it fires, whether
//! the set needs anything (see `Aggregator::flush_due`). The thread sleeps
//! on a condition variable until the
//! earliest deadline and is woken only when a new deadline comes before the
//! one it sleeps for. On Linux it asks for a timer slack of 1 ns, since the
//! default 50 µs slack would be most of its lateness, and it spins the last
//! [`SPIN_NS`] before a deadline. Every firing records how late it was, for
//! `/coalescing/time/timer-lateness`.
//!
//! Tasks' wake-ups ([`FlushTimer::wake_at`], for `sleep` and timeouts)
//! are kept apart from the buffers' deadlines, with the earliest in an
//! atomic, so that workers wake due tasks themselves
//! ([`FlushTimer::wake_due`]): between tasks, and when they run out of
//! tasks, when one that is due within `WAKE_WATCH_NS` makes them spin for
//! it instead of parking (`sched/spin.rs`). A wake-up that a worker asked
//! for that soon is *watched*: this thread leaves it to the workers and
//! backs it up only [`WATCHED_GRACE_NS`] late, without a spin. Otherwise
//! this thread would spin for it and then wake the worker, which on two
//! cores kept a third thread spinning beside two localities' workers, and
//! put a wake-up between the two threads (the toy's steady phase: a call
//! every 20 µs, each after a sleep).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::clock::{POLL_BUCKETS, clock, poll_bucket};

/// The timer sleeps until this many ns before a deadline and spins the
/// rest: waking from a sleep takes 10 µs and more on a VM, even with the
/// timer slack at 1 ns. A firing costs at most this much CPU.
const SPIN_NS: u64 = 20_000;

/// How late this thread wakes a task whose wake-up a worker watches: a
/// backup only, for a worker that stayed busy with one long task. A
/// guess, tune me.
const WATCHED_GRACE_NS: u64 = 50_000;

/// A task's wake-up due within this many ns of being asked for makes
/// [`FlushTimer::task_sleeps`] true until it is due: the timer thread will
/// need a core for it soon. A later one (a call's timeout, a long sleep)
/// does not, nor does it keep idle workers from spinning for the network
/// (`sched/spin.rs`) while it waits.
pub(crate) const SOON_NS: u64 = 1_000_000;

/// Which buffers a deadline belongs to: a set (a worker's, or the one
/// shared by other threads). A set has at most one live entry: when it
/// fires, the set's due buffers are flushed and the entry is renewed for
/// the next deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Key {
    pub(crate) set: u32,
    /// Whether the deadline should be met closely (the timer spins its last
    /// microseconds for it); a worker's set gets a grace period anyway.
    pub(crate) precise: bool,
}

/// Nanoseconds on one locality's coalescing clock (the TSC, via quanta).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Epoch(u64);

impl Epoch {
    pub(crate) fn now() -> Epoch {
        Epoch(clock().raw())
    }

    /// Nanoseconds since the epoch.
    pub(crate) fn elapsed_ns(&self) -> u64 {
        self.ns_at(clock().raw())
    }

    /// Nanoseconds from the epoch to `raw`, a reading of [`clock`].
    pub(crate) fn ns_at(&self, raw: u64) -> u64 {
        clock().delta_as_nanos(self.0, raw)
    }
}

#[derive(Debug, Default)]
struct Queue {
    /// The buffers' deadlines.
    due: BTreeSet<(u64, Key)>,
    /// The tasks' wake-ups: (deadline, id).
    wakes: BTreeSet<(u64, u64)>,
    /// The sleeping tasks, by id.
    sleepers: rustc_hash::FxHashMap<u64, Sleeper>,
    next_sleeper: u64,
    /// The deadline the thread sleeps until (`u64::MAX`: none), or `None`
    /// while it runs (it looks at the queue before sleeping again).
    sleeping_until: Option<u64>,
    stop: bool,
}

/// A task waiting for its wake-up.
#[derive(Debug)]
struct Sleeper {
    waker: std::task::Waker,
    /// Whether workers watch the wake-up (see the module docs).
    watched: bool,
}

impl Queue {
    /// When the thread is to wake the next task, and whether it spins the
    /// last microseconds for it: the earliest deadline, a watched one
    /// [`WATCHED_GRACE_NS`] later.
    fn wake_target(&self) -> Option<(u64, bool)> {
        let mut best: Option<(u64, bool)> = None;
        for &(deadline, id) in &self.wakes {
            if best.is_some_and(|(at, _)| deadline >= at) {
                break;
            }
            let watched = self.sleepers.get(&id).is_some_and(|s| s.watched);
            let target = if watched {
                (deadline.saturating_add(WATCHED_GRACE_NS), false)
            } else {
                (deadline, true)
            };
            if best.is_none_or(|(at, _)| target.0 < at) {
                best = Some(target);
            }
        }
        best
    }
}

/// How late the timer fired, as a histogram of power-of-two buckets.
#[derive(Debug)]
pub(crate) struct Lateness {
    buckets: [AtomicU64; POLL_BUCKETS],
    sum_ns: AtomicU64,
}

impl Default for Lateness {
    fn default() -> Self {
        Lateness {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
        }
    }
}

impl Lateness {
    fn record(&self, ns: u64) {
        self.buckets[poll_bucket(ns)].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Bucket counts and the sum of the lateness in ns.
    pub(crate) fn load(&self) -> (Vec<u64>, u64) {
        (
            self.buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            self.sum_ns.load(Ordering::Relaxed),
        )
    }
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    wakeup: Condvar,
    lateness: Lateness,
    /// The latest deadline of a task's wake-up asked for due within
    /// [`SOON_NS`].
    latest_wake: AtomicU64,
    /// The earliest deadline in `Queue::wakes` (`u64::MAX`: none), kept
    /// under the queue's lock, read without it.
    next_wake: AtomicU64,
}

impl Shared {
    /// Publishes the earliest wake-up of `queue` (under its lock).
    fn publish_next_wake(&self, queue: &Queue) {
        let next = queue
            .wakes
            .first()
            .map_or(u64::MAX, |&(deadline, _)| deadline);
        self.next_wake.store(next, Ordering::Release);
    }
}

/// The deadlines of one locality's buffers and the thread that keeps them.
#[derive(Debug)]
pub(crate) struct FlushTimer {
    epoch: Epoch,
    shared: Arc<Shared>,
}

impl FlushTimer {
    pub(crate) fn new(epoch: Epoch) -> Self {
        let shared = Shared {
            next_wake: AtomicU64::new(u64::MAX),
            ..Shared::default()
        };
        FlushTimer {
            epoch,
            shared: Arc::new(shared),
        }
    }

    /// Starts the thread; `fire(key, deadline)` flushes a buffer and returns
    /// false once the locality is gone.
    pub(crate) fn start(
        &self,
        name: String,
        fire: impl Fn(Key, u64) -> bool + Send + 'static,
    ) -> std::io::Result<()> {
        let shared = Arc::clone(&self.shared);
        let epoch = self.epoch;
        std::thread::Builder::new()
            .name(name)
            .spawn(move || run(&shared, epoch, fire))
            .map(drop)
    }

    /// Flushes `key` at `deadline` unless disarmed first.
    pub(crate) fn arm(&self, deadline: u64, key: Key) {
        let mut queue = self.shared.queue.lock();
        queue.due.insert((deadline, key));
        self.wake_thread_before(&mut queue, deadline);
    }

    /// Wakes the thread if it sleeps past `deadline`.
    fn wake_thread_before(&self, queue: &mut Queue, deadline: u64) {
        if queue.sleeping_until.is_some_and(|t| deadline < t) {
            queue.sleeping_until = None;
            self.shared.wakeup.notify_one();
        }
    }

    /// Wakes `waker` at `deadline` (ns on the timer's epoch), `watched` by
    /// the workers or not (see the module docs); returns the id to
    /// [`cancel_wake`](Self::cancel_wake) it with.
    pub(crate) fn wake_at(&self, deadline: u64, waker: std::task::Waker, watched: bool) -> u64 {
        if deadline <= self.now_ns().saturating_add(SOON_NS) {
            self.shared
                .latest_wake
                .fetch_max(deadline, Ordering::Relaxed);
        }
        let mut queue = self.shared.queue.lock();
        queue.next_sleeper += 1;
        let id = queue.next_sleeper;
        queue.sleepers.insert(id, Sleeper { waker, watched });
        queue.wakes.insert((deadline, id));
        self.shared.publish_next_wake(&queue);
        if let Some((at, _)) = queue.wake_target() {
            self.wake_thread_before(&mut queue, at);
        }
        id
    }

    /// Wakes the tasks whose wake-up is due, here and now (a worker's
    /// thread: the woken tasks go to its own queue); returns whether there
    /// were any. Cheap when there are none: an atomic load and a clock
    /// read.
    pub(crate) fn wake_due(&self) -> bool {
        if self.shared.next_wake.load(Ordering::Acquire) > self.now_ns() {
            return false;
        }
        let mut woken = Vec::new();
        {
            let mut queue = self.shared.queue.lock();
            let now = self.now_ns();
            while let Some(&(deadline, id)) = queue.wakes.first() {
                if deadline > now {
                    break;
                }
                queue.wakes.pop_first();
                woken.extend(queue.sleepers.remove(&id).map(|s| s.waker));
            }
            self.shared.publish_next_wake(&queue);
        }
        let any = !woken.is_empty();
        woken.into_iter().for_each(std::task::Waker::wake);
        any
    }

    /// In how many ns the earliest task's wake-up is due (0: now), if any.
    pub(crate) fn next_wake_in_ns(&self) -> Option<u64> {
        match self.shared.next_wake.load(Ordering::Acquire) {
            u64::MAX => None,
            deadline => Some(deadline.saturating_sub(self.now_ns())),
        }
    }

    /// Whether a task may sleep on the timer now, to be woken soon: one
    /// asked to be woken within [`SOON_NS`], later than now (and may have
    /// cancelled it since).
    pub(crate) fn task_sleeps(&self) -> bool {
        self.shared.latest_wake.load(Ordering::Relaxed) > self.now_ns()
    }

    /// Forgets a wake-up made with [`wake_at`](Self::wake_at) (done or not).
    pub(crate) fn cancel_wake(&self, deadline: u64, id: u64) {
        let mut queue = self.shared.queue.lock();
        queue.wakes.remove(&(deadline, id));
        queue.sleepers.remove(&id);
        self.shared.publish_next_wake(&queue);
    }

    /// Nanoseconds on the timer's clock now.
    pub(crate) fn now_ns(&self) -> u64 {
        self.epoch.elapsed_ns()
    }

    /// How late the firings were.
    pub(crate) fn lateness(&self) -> &Lateness {
        &self.shared.lateness
    }

    /// Stops the thread (it finishes a flush under way).
    pub(crate) fn stop(&self) {
        self.shared.queue.lock().stop = true;
        self.shared.wakeup.notify_one();
    }
}

/// The heads of a queue: its earliest buffer deadline and wake-up.
type Heads = (Option<(u64, Key)>, Option<(u64, u64)>);

fn heads(queue: &Queue) -> Heads {
    (queue.due.first().copied(), queue.wakes.first().copied())
}

fn run(shared: &Shared, epoch: Epoch, fire: impl Fn(Key, u64) -> bool) {
    crate::clock::precise_sleeps();
    let mut queue = shared.queue.lock();
    loop {
        if queue.stop {
            return;
        }
        let now = epoch.elapsed_ns();
        let heads = heads(&queue);
        if let (_, Some((deadline, id))) = heads
            && deadline <= now
        {
            queue.wakes.pop_first();
            shared.publish_next_wake(&queue);
            if let Some(sleeper) = queue.sleepers.remove(&id) {
                MutexGuard::unlocked(&mut queue, || sleeper.waker.wake());
            }
            continue;
        }
        if let (Some((deadline, key)), _) = heads
            && deadline <= now
        {
            queue.due.pop_first();
            shared.lateness.record(now - deadline);
            if !MutexGuard::unlocked(&mut queue, || fire(key, deadline)) {
                return;
            }
            continue;
        }
        // What to wait for: the earlier of the next flush and the next
        // wake-up; (when, whether to spin its last microseconds).
        let flush = heads.0.map(|(deadline, key)| (deadline, key.precise));
        let wake = queue.wake_target();
        let target = match (flush, wake) {
            (Some(f), Some(w)) => Some(if w.0 < f.0 { w } else { f }),
            (f, w) => f.or(w),
        };
        match target {
            Some((deadline, _)) if deadline - now > SPIN_NS => {
                queue.sleeping_until = Some(deadline);
                let sleep = Duration::from_nanos(deadline - now - SPIN_NS);
                shared.wakeup.wait_for(&mut queue, sleep);
                queue.sleeping_until = None;
            }
            Some((deadline, false)) => {
                // Close to a deadline that has a grace period: no spinning.
                queue.sleeping_until = Some(deadline);
                shared
                    .wakeup
                    .wait_for(&mut queue, Duration::from_nanos(deadline - now));
                queue.sleeping_until = None;
            }
            Some((deadline, true)) => {
                // Close to the deadline: spin the rest with the lock free
                // (a wake-up from sleep is late by about its own length),
                // and stop spinning if the queue's heads change meanwhile.
                MutexGuard::unlocked(&mut queue, || {
                    while epoch.elapsed_ns() < deadline {
                        for _ in 0..64 {
                            std::hint::spin_loop();
                        }
                        if let Some(queue) = shared.queue.try_lock()
                            && self::heads(&queue) != heads
                        {
                            return;
                        }
                    }
                });
            }
            None => {
                queue.sleeping_until = Some(u64::MAX);
                shared.wakeup.wait(&mut queue);
                queue.sleeping_until = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn fires_in_deadline_order_and_wakes_sleepers_not_cancelled() {
        let epoch = Epoch::now();
        let timer = FlushTimer::new(epoch);
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        timer
            .start("test-timer".into(), move |key, _| {
                tx.lock().send((key, epoch.elapsed_ns())).unwrap();
                true
            })
            .unwrap();
        let now = epoch.elapsed_ns();
        let key = |set| Key { set, precise: true };
        timer.arm(now + 30_000_000, key(3));
        timer.arm(now + 10_000_000, key(1));
        let woken = std::sync::Arc::new(Counter::default());
        let kept = timer.wake_at(
            now + 20_000_000,
            std::task::Waker::from(woken.clone()),
            false,
        );
        let cancelled = timer.wake_at(
            now + 5_000_000,
            std::task::Waker::from(woken.clone()),
            false,
        );
        timer.cancel_wake(now + 5_000_000, cancelled);
        let (first, t1) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        let (second, t2) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!((first, second), (key(1), key(3)));
        assert!(t1 >= now + 10_000_000 && t2 >= now + 30_000_000);
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
        assert_eq!(
            woken.0.load(Ordering::SeqCst),
            1,
            "only the kept sleeper woke"
        );
        let _ = kept;
        let (counts, _) = timer.lateness().load();
        assert_eq!(counts.iter().sum::<u64>(), 2);
        timer.stop();
    }

    #[test]
    fn a_task_sleeps_from_its_wake_up_being_asked_until_its_deadline() {
        let timer = FlushTimer::new(Epoch::now());
        assert!(!timer.task_sleeps());
        let flushed = timer.now_ns() + 60_000_000_000;
        timer.arm(
            flushed,
            Key {
                set: 0,
                precise: true,
            },
        );
        assert!(
            !timer.task_sleeps(),
            "a buffer's deadline is no sleeping task"
        );
        let timeout = timer.now_ns() + 60_000_000_000;
        timer.wake_at(timeout, std::task::Waker::noop().clone(), false);
        assert!(
            !timer.task_sleeps(),
            "a far deadline (a timeout) needs no core soon"
        );
        // Each check holds unless the deadline passed meanwhile (a loaded
        // machine may take that long between two lines).
        let deadline = timer.now_ns() + SOON_NS;
        let sleeps = || timer.task_sleeps() || timer.now_ns() >= deadline;
        let id = timer.wake_at(deadline, std::task::Waker::noop().clone(), false);
        assert!(sleeps());
        timer.wake_at(timer.now_ns(), std::task::Waker::noop().clone(), false);
        assert!(sleeps(), "the later sleeper still sleeps");
        timer.cancel_wake(deadline, id);
        // A cancelled wake-up may still count: the answer errs on the side
        // of a task sleeping (the timer is not started: nothing fires).
        assert!(sleeps());
        let timer = FlushTimer::new(Epoch::now());
        timer.wake_at(
            timer.now_ns() + 1_000,
            std::task::Waker::noop().clone(),
            false,
        );
        std::thread::sleep(Duration::from_millis(2));
        assert!(!timer.task_sleeps(), "a deadline that passed");
    }

    #[test]
    fn a_worker_wakes_the_due_tasks_and_no_others() {
        let timer = FlushTimer::new(Epoch::now());
        assert_eq!(timer.next_wake_in_ns(), None);
        assert!(!timer.wake_due(), "nothing to wake");
        let woken = Arc::new(Counter::default());
        let waker = || std::task::Waker::from(Arc::clone(&woken));
        let now = timer.now_ns();
        let far = now + 60_000_000_000;
        timer.wake_at(now, waker(), false);
        let cancelled = timer.wake_at(now, waker(), true);
        timer.cancel_wake(now, cancelled);
        let later = timer.wake_at(far, waker(), true);
        assert_eq!(timer.next_wake_in_ns(), Some(0));
        assert!(timer.wake_due());
        assert_eq!(woken.0.load(Ordering::SeqCst), 1, "only the due task woke");
        assert!(!timer.wake_due(), "the other is not due");
        assert!(
            timer
                .next_wake_in_ns()
                .is_some_and(|ns| ns > 50_000_000_000)
        );
        timer.cancel_wake(far, later);
        assert_eq!(timer.next_wake_in_ns(), None);
    }

    #[test]
    fn the_thread_waits_for_watched_wake_ups_late_and_others_on_time() {
        let mut queue = Queue::default();
        let mut add = |deadline, id, watched| {
            queue.wakes.insert((deadline, id));
            let waker = std::task::Waker::noop().clone();
            queue.sleepers.insert(id, Sleeper { waker, watched });
            queue.wake_target()
        };
        let at = 1_000_000;
        assert_eq!(add(at, 1, true), Some((at + WATCHED_GRACE_NS, false)));
        let unwatched = at + WATCHED_GRACE_NS / 2;
        assert_eq!(
            add(unwatched, 2, false),
            Some((unwatched, true)),
            "an unwatched wake-up during a watched one's grace"
        );
        assert_eq!(add(at - 1, 3, false), Some((at - 1, true)));
    }

    #[test]
    fn the_thread_wakes_a_watched_task_that_no_worker_woke() {
        let timer = FlushTimer::new(Epoch::now());
        timer.start("test-timer".into(), |_, _| true).unwrap();
        let woken = Arc::new(Counter::default());
        let deadline = timer.now_ns() + 1_000_000;
        timer.wake_at(deadline, std::task::Waker::from(Arc::clone(&woken)), true);
        let start = std::time::Instant::now();
        while woken.0.load(Ordering::SeqCst) == 0 {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the watched wake-up never came"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(timer.now_ns() >= deadline, "woken early");
        assert_eq!(timer.next_wake_in_ns(), None);
        timer.stop();
    }

    /// Counts its wake-ups.
    #[derive(Default)]
    struct Counter(AtomicU64);

    impl std::task::Wake for Counter {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}
