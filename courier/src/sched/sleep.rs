//! Parking idle workers without losing wake-ups.
//!
//! # Protocol
//!
//! `idle` counts workers that are parked or about to park. A worker parks in
//! three steps, all under `state`'s lock:
//!
//! 1. increment `idle` (SeqCst, then a SeqCst fence);
//! 2. re-check every queue (the caller passes `has_work`); if there is work,
//!    undo step 1 and return;
//! 3. either become the *driver* (if no other worker is one and the background
//!    work accepts a blocking call) and block inside the transport outside the
//!    lock, or wait on the condition variable.
//!
//! A producer pushes its task first, then issues a SeqCst fence and reads
//! `idle`. If it reads zero, any worker that parks later will see the task in
//! step 2 (the fence and the SeqCst increment order the two). If it reads
//! more than zero it takes the lock and wakes a condvar waiter, or, if the
//! only sleeper is the driver, calls [`BackgroundWork::wake`], which is
//! *sticky*: a wake that comes before the driver blocks makes its next block
//! return at once. Because the re-check in step 2 and the registration as
//! waiter/driver happen under the same lock the producer takes, the producer
//! either sees the sleeper registered or the sleeper sees the task.
//!
//! [`BackgroundWork::wake`]: super::BackgroundWork::wake

use std::time::Duration;

use crate::sync::atomic::{AtomicUsize, Ordering, fence};
use crate::sync::{Condvar, Mutex};

use super::background::{BackgroundWork, BlockOutcome};

#[derive(Debug, Default)]
struct SleepState {
    /// Workers waiting on the condition variable.
    waiters: usize,
    /// Whether a worker is blocked inside the background work.
    driver_parked: bool,
}

/// The parking lot of one scheduler.
#[derive(Debug, Default)]
pub(crate) struct Sleep {
    idle: AtomicUsize,
    state: Mutex<SleepState>,
    condvar: Condvar,
}

/// How long a driver blocks in the transport before it looks around again.
/// Only a safety margin for timers a transport may keep; wake-ups do not rely
/// on it. A guess, tune me.
const DRIVER_BLOCK: Duration = Duration::from_millis(100);

/// How long a worker that found the progress path busy waits before it
/// tries to become the driver again. A guess, tune me.
const BUSY_RETRY: Duration = Duration::from_millis(1);

impl Sleep {
    /// Parks the calling worker until it may have work. Returns at once if
    /// `has_work()` is true once the worker is registered as idle. Returns
    /// the nanoseconds of background work done while parked (as the driver).
    pub(crate) fn park(&self, background: &dyn BackgroundWork, has_work: impl Fn() -> bool) -> u64 {
        let mut state = self.state.lock();
        self.idle.fetch_add(1, Ordering::SeqCst);
        // Pairs with the producer's fence (a store-buffering pattern): the
        // SeqCst accesses alone order it in Rust's model, but loom checks
        // SeqCst accesses as acquire/release and SeqCst fences exactly,
        // and parking is not a hot path.
        fence(Ordering::SeqCst);
        if has_work() {
            self.idle.fetch_sub(1, Ordering::SeqCst);
            return 0;
        }
        if !state.driver_parked {
            state.driver_parked = true;
            drop(state);
            let outcome = background.block(DRIVER_BLOCK);
            state = self.state.lock();
            state.driver_parked = false;
            if let BlockOutcome::Blocked { work_ns } = outcome {
                self.idle.fetch_sub(1, Ordering::SeqCst);
                return work_ns;
            }
            // The background work did not block (another thread holds the
            // progress path, or there is no network). A producer may have
            // called `wake` on us meanwhile and found no waiter, so look again
            // before waiting on the condition variable.
            if has_work() {
                self.idle.fetch_sub(1, Ordering::SeqCst);
                return 0;
            }
            if outcome == BlockOutcome::Busy {
                // Come back soon: the holder of the progress path may be about
                // to park, and then nobody would watch the network.
                state.waiters += 1;
                state = self.condvar.wait_for(state, BUSY_RETRY);
                state.waiters -= 1;
                self.idle.fetch_sub(1, Ordering::SeqCst);
                return 0;
            }
        }
        state.waiters += 1;
        state = self.condvar.wait(state);
        state.waiters -= 1;
        self.idle.fetch_sub(1, Ordering::SeqCst);
        0
    }

    /// Wakes one parked worker, if any. Call after making work visible.
    pub(crate) fn notify_one(&self, background: &dyn BackgroundWork) {
        fence(Ordering::SeqCst);
        if self.idle.load(Ordering::SeqCst) == 0 {
            return;
        }
        let state = self.state.lock();
        if state.waiters > 0 {
            self.condvar.notify_one();
        } else if state.driver_parked {
            background.wake();
        }
    }

    /// Wakes every parked worker (shutdown).
    pub(crate) fn notify_all(&self, background: &dyn BackgroundWork) {
        let _state = self.state.lock();
        self.condvar.notify_all();
        background.wake();
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use loom::sync::Arc;
    use loom::sync::atomic::AtomicBool;

    use super::*;

    /// A network whose `block` waits until `wake` (sticky, as the
    /// transports' are), or which cannot block at all.
    #[derive(Default)]
    struct Network {
        can_block: bool,
        woken: Mutex<bool>,
        ready: Condvar,
    }

    impl BackgroundWork for Network {
        fn poll(&self) -> bool {
            false
        }

        fn block(&self, _timeout: Duration) -> BlockOutcome {
            if !self.can_block {
                return BlockOutcome::Unsupported;
            }
            let mut woken = self.woken.lock();
            while !*woken {
                woken = self.ready.wait(woken);
            }
            *woken = false;
            BlockOutcome::Blocked { work_ns: 0 }
        }

        fn wake(&self) {
            *self.woken.lock() = true;
            self.ready.notify_one();
        }
    }

    /// A producer makes a task visible and wakes while the worker parks:
    /// in every interleaving the worker ends up seeing the task (a lost
    /// wake-up leaves it waiting for ever, which loom reports as a
    /// deadlock).
    fn a_wake_racing_a_park_is_never_lost(can_block: bool) {
        loom::model(move || {
            let sleep = Arc::new(Sleep::default());
            let network = Arc::new(Network {
                can_block,
                ..Network::default()
            });
            let task = Arc::new(AtomicBool::new(false));
            let worker = {
                let (sleep, network, task) = (sleep.clone(), network.clone(), task.clone());
                loom::thread::spawn(move || {
                    while !task.load(Ordering::SeqCst) {
                        sleep.park(&*network, || task.load(Ordering::SeqCst));
                    }
                })
            };
            task.store(true, Ordering::SeqCst);
            sleep.notify_one(&*network);
            worker.join().unwrap();
        });
    }

    #[test]
    fn loom_a_wake_racing_a_park_on_the_condvar_is_never_lost() {
        a_wake_racing_a_park_is_never_lost(false);
    }

    #[test]
    fn loom_a_wake_racing_a_park_in_the_network_is_never_lost() {
        a_wake_racing_a_park_is_never_lost(true);
    }
}
