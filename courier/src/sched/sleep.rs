//! Parking idle workers without losing wake-ups.
//!
//! # Protocol
//!
//! `idle` counts workers that are parked or about to park. A worker parks in
//! three steps, all under `state`'s lock:
//!
//! 1. increment `idle` (SeqCst);
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

use std::sync::atomic::{AtomicUsize, Ordering, fence};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

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
                self.condvar.wait_for(&mut state, BUSY_RETRY);
                state.waiters -= 1;
                self.idle.fetch_sub(1, Ordering::SeqCst);
                return 0;
            }
        }
        state.waiters += 1;
        self.condvar.wait(&mut state);
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
