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
//! The thread also wakes tasks ([`FlushTimer::wake_at`], for `sleep` and
//! call deadlines), but not alone: the earliest wake-up of any kind and
//! the earliest watched one (`wakes.rs`) are published in atomics, so
//! that workers wake due tasks themselves ([`FlushTimer::wake_due`]),
//! every few tasks and when they run out of tasks, and an idle worker
//! spins for a watched one instead of parking (`sched/spin.rs`). The
//! thread backs watched wake-ups up late and without a spin. Were it to
//! spin for them and then wake the worker, as it does for the others, a
//! paced stream of calls on two cores (the toy's steady phase: a call
//! every 20 µs, each after a sleep) would keep a third thread spinning
//! beside two localities' workers, and a wake-up between two threads
//! would stand in each call's way.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Waker;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};

use super::wakes::Wakes;
use crate::clock::{POLL_BUCKETS, clock, poll_bucket};

/// The timer sleeps until this many ns before a deadline and spins the
/// rest: waking from a sleep takes 10 µs and more on a VM, even with the
/// timer slack at 1 ns. A firing costs at most this much CPU.
const SPIN_NS: u64 = 20_000;

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
    /// The tasks' wake-ups.
    wakes: Wakes,
    /// The deadline the thread sleeps until (`u64::MAX`: none), or `None`
    /// while it runs (it looks at the queue before sleeping again).
    sleeping_until: Option<u64>,
    stop: bool,
}

impl Queue {
    /// When the thread is to act next, and whether it spins the last
    /// microseconds before: the earlier of the next buffer's deadline and
    /// the wake-ups' target (`Wakes::target`), spinning if either at that
    /// time asks for it.
    fn target(&self) -> Option<(u64, bool)> {
        let flush = self
            .due
            .first()
            .map(|&(deadline, key)| (deadline, key.precise));
        match (flush, self.wakes.target()) {
            (Some(f), Some(w)) if f.0 == w.0 => Some((f.0, f.1 || w.1)),
            (Some(f), Some(w)) => Some(if f.0 < w.0 { f } else { w }),
            (f, w) => f.or(w),
        }
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
    /// The earliest deadline of a task's wake-up (`u64::MAX`: none), and
    /// of a watched one: stored under the queue's lock, read without it.
    next_wake: AtomicU64,
    next_watched: AtomicU64,
}

impl Shared {
    /// Publishes the earliest wake-ups of `queue` (under its lock).
    fn publish_next_wakes(&self, queue: &Queue) {
        let or_none = |deadline: Option<u64>| deadline.unwrap_or(u64::MAX);
        (self.next_wake).store(or_none(queue.wakes.earliest()), Ordering::Release);
        (self.next_watched).store(or_none(queue.wakes.earliest_watched()), Ordering::Release);
    }
}

/// The deadlines of one locality's buffers and the thread that keeps them.
#[derive(Debug)]
pub(crate) struct FlushTimer {
    epoch: Epoch,
    shared: Arc<Shared>,
}

impl FlushTimer {
    /// The timer of a locality of `workers` workers (the grace of its
    /// watched wake-ups: [`watched_grace_ns`](super::wakes::watched_grace_ns)).
    pub(crate) fn new(epoch: Epoch, workers: usize) -> Self {
        let shared = Shared {
            next_wake: AtomicU64::new(u64::MAX),
            next_watched: AtomicU64::new(u64::MAX),
            ..Shared::default()
        };
        (shared.queue.lock().wakes).set_grace_ns(super::wakes::watched_grace_ns(workers));
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
        let thread = std::thread::Builder::new().name(name);
        crate::sched::spawn_unbound(thread, move || run(&shared, epoch, fire)).map(drop)
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
        let id = queue.wakes.insert(deadline, waker, watched);
        self.shared.publish_next_wakes(&queue);
        if let Some((at, _)) = queue.wakes.target() {
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
        let woken = {
            let mut queue = self.shared.queue.lock();
            let woken = queue.wakes.take_due(self.now_ns());
            self.shared.publish_next_wakes(&queue);
            woken
        };
        let any = !woken.is_empty();
        woken.into_iter().for_each(Waker::wake);
        any
    }

    /// In how many ns the earliest watched wake-up is due (0: now), if
    /// any: an idle worker spins for it (see the module docs).
    pub(crate) fn next_watched_in_ns(&self) -> Option<u64> {
        match self.shared.next_watched.load(Ordering::Acquire) {
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
        queue.wakes.cancel(deadline, id);
        self.shared.publish_next_wakes(&queue);
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

/// What the thread does next, with nothing due now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Sleep this many ns (unless woken for an earlier deadline).
    Sleep { ns: u64 },
    /// Spin until this time.
    Spin { until: u64 },
    /// Sleep until woken: no deadline.
    Wait,
}

impl Step {
    /// The step toward `target` (`Queue::target`) from `now`, before it:
    /// sleep the whole way to a target without a spin, else sleep until
    /// [`SPIN_NS`] before it and spin the rest.
    fn toward(target: Option<(u64, bool)>, now: u64) -> Step {
        match target {
            None => Step::Wait,
            Some((deadline, false)) => Step::Sleep { ns: deadline - now },
            Some((deadline, true)) if deadline - now > SPIN_NS => Step::Sleep {
                ns: deadline - now - SPIN_NS,
            },
            Some((deadline, true)) => Step::Spin { until: deadline },
        }
    }
}

fn run(shared: &Shared, epoch: Epoch, fire: impl Fn(Key, u64) -> bool) {
    crate::clock::precise_sleeps();
    let mut queue = shared.queue.lock();
    loop {
        if queue.stop {
            return;
        }
        let now = epoch.elapsed_ns();
        // Due wake-ups first, watched or not: this thread is awake anyway.
        let woken = queue.wakes.take_due(now);
        if !woken.is_empty() {
            shared.publish_next_wakes(&queue);
            MutexGuard::unlocked(&mut queue, || woken.into_iter().for_each(Waker::wake));
            continue;
        }
        if let Some(&(deadline, key)) = queue.due.first()
            && deadline <= now
        {
            queue.due.pop_first();
            shared.lateness.record(now - deadline);
            if !MutexGuard::unlocked(&mut queue, || fire(key, deadline)) {
                return;
            }
            continue;
        }
        let target = queue.target();
        match Step::toward(target, now) {
            Step::Sleep { ns } => {
                queue.sleeping_until = target.map(|(deadline, _)| deadline);
                shared.wakeup.wait_for(&mut queue, Duration::from_nanos(ns));
                queue.sleeping_until = None;
            }
            Step::Spin { until } => {
                // Close to the deadline: spin the rest with the lock free
                // (a wake-up from sleep is late by about its own length),
                // and stop spinning if the target changes meanwhile.
                MutexGuard::unlocked(&mut queue, || {
                    while epoch.elapsed_ns() < until {
                        for _ in 0..64 {
                            std::hint::spin_loop();
                        }
                        if let Some(queue) = shared.queue.try_lock()
                            && queue.target() != target
                        {
                            return;
                        }
                    }
                });
            }
            Step::Wait => {
                queue.sleeping_until = Some(u64::MAX);
                shared.wakeup.wait(&mut queue);
                queue.sleeping_until = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::wakes::WATCHED_GRACE_NS;
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn fires_in_deadline_order_and_wakes_sleepers_not_cancelled() {
        let epoch = Epoch::now();
        let timer = FlushTimer::new(epoch, 2);
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
        let timer = FlushTimer::new(Epoch::now(), 2);
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
        let timer = FlushTimer::new(Epoch::now(), 2);
        timer.wake_at(
            timer.now_ns() + 1_000,
            std::task::Waker::noop().clone(),
            false,
        );
        std::thread::sleep(Duration::from_millis(2));
        assert!(!timer.task_sleeps(), "a deadline that passed");
    }

    #[test]
    fn a_worker_wakes_the_due_tasks_and_sees_the_watched_ones() {
        let timer = FlushTimer::new(Epoch::now(), 2);
        assert_eq!(timer.next_watched_in_ns(), None);
        assert!(!timer.wake_due(), "nothing to wake");
        let woken = Arc::new(Counter::default());
        let waker = || std::task::Waker::from(Arc::clone(&woken));
        let now = timer.now_ns();
        let far = now + 60_000_000_000;
        timer.wake_at(now, waker(), false);
        assert_eq!(
            timer.next_watched_in_ns(),
            None,
            "an unwatched wake-up is the thread's"
        );
        let cancelled = timer.wake_at(now, waker(), true);
        assert_eq!(timer.next_watched_in_ns(), Some(0));
        timer.cancel_wake(now, cancelled);
        assert_eq!(timer.next_watched_in_ns(), None);
        let later = timer.wake_at(far, waker(), true);
        assert!(timer.wake_due());
        assert_eq!(woken.0.load(Ordering::SeqCst), 1, "only the due task woke");
        assert!(!timer.wake_due(), "the other is not due");
        assert!(
            timer
                .next_watched_in_ns()
                .is_some_and(|ns| ns > 50_000_000_000)
        );
        timer.cancel_wake(far, later);
        assert_eq!(timer.next_watched_in_ns(), None);
        assert!(!timer.wake_due());
    }

    #[test]
    fn the_thread_wakes_a_watched_task_no_worker_woke_after_the_grace() {
        let epoch = Epoch::now();
        let timer = FlushTimer::new(epoch, 2);
        timer.start("test-timer".into(), |_, _| true).unwrap();
        let woken = Arc::new(WokenAt {
            epoch,
            at_ns: AtomicU64::new(u64::MAX),
        });
        let deadline = timer.now_ns() + 1_000_000;
        timer.wake_at(deadline, std::task::Waker::from(Arc::clone(&woken)), true);
        let start = std::time::Instant::now();
        let at = loop {
            match woken.at_ns.load(Ordering::SeqCst) {
                u64::MAX => {
                    assert!(
                        start.elapsed() < Duration::from_secs(30),
                        "the watched wake-up never came"
                    );
                    std::thread::sleep(Duration::from_millis(1));
                }
                at => break at,
            }
        };
        // A lower bound (the thread has nothing else to wake up for): a
        // thread that spun for it would wake it at the deadline. A sleep's
        // own lateness on a VM may exceed the grace, so it is no measure
        // of the grace. The condition variable's clock and the timer's may
        // differ by a little: 1 µs of slack.
        assert!(
            at + 1_000 >= deadline + WATCHED_GRACE_NS,
            "woken {} ns after the deadline, within the workers' grace",
            at.saturating_sub(deadline)
        );
        assert_eq!(timer.next_watched_in_ns(), None);
        timer.stop();
    }

    #[test]
    fn the_thread_sleeps_the_whole_way_to_a_target_without_a_spin() {
        let now = 1_000_000;
        let far = now + 10 * SPIN_NS;
        assert_eq!(Step::toward(None, now), Step::Wait);
        assert_eq!(
            Step::toward(Some((far, false)), now),
            Step::Sleep { ns: far - now },
            "a watched wake-up's backup, a worker's buffers"
        );
        assert_eq!(
            Step::toward(Some((far, true)), now),
            Step::Sleep {
                ns: far - now - SPIN_NS
            }
        );
        let near = now + SPIN_NS / 2;
        assert_eq!(
            Step::toward(Some((near, true)), now),
            Step::Spin { until: near }
        );
        assert_eq!(
            Step::toward(Some((near, false)), now),
            Step::Sleep { ns: near - now }
        );
    }

    /// Records when it was woken, in ns since `epoch`.
    struct WokenAt {
        epoch: Epoch,
        at_ns: AtomicU64,
    }

    impl std::task::Wake for WokenAt {
        fn wake(self: std::sync::Arc<Self>) {
            self.at_ns.store(self.epoch.elapsed_ns(), Ordering::SeqCst);
        }
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
