//! Funneled progress: when MPI allows calls from one thread only, the MPI
//! thread makes them all. Workers put frames to send in the outbox and take
//! received frames from the inbox; the MPI thread moves frames between
//! those queues and MPI, and wakes a parked driver when frames arrive.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::state::State;
use super::{MAX_PAUSE, SPIN, Wakeup};
use crate::ids::LocalityId;

/// Frames on their way to or from MPI.
pub(crate) type Frames = VecDeque<(LocalityId, Vec<u8>)>;

/// The queues between the workers and the MPI thread.
#[derive(Debug, Default)]
pub(crate) struct Funnel {
    outbox: Mutex<Frames>,
    inbox: Mutex<Frames>,
    /// Frames handed to the funnel and not yet completely sent.
    unsent: AtomicUsize,
    /// Set when the outbox gets a frame; the MPI thread waits on it.
    work: Mutex<bool>,
    work_ready: Condvar,
    stop: AtomicBool,
    /// Wakes the transport's parked driver when frames arrive.
    driver: Mutex<Option<std::sync::Arc<Wakeup>>>,
}

impl Funnel {
    /// Connects the funnel to the driver it wakes.
    pub(crate) fn set_driver(&self, wakeup: std::sync::Arc<Wakeup>) {
        *self.driver.lock() = Some(wakeup);
    }

    /// Queues a frame for the MPI thread.
    pub(crate) fn send(&self, dest: LocalityId, frame: Vec<u8>) {
        self.unsent.fetch_add(1, Ordering::SeqCst);
        self.outbox.lock().push_back((dest, frame));
        *self.work.lock() = true;
        self.work_ready.notify_one();
    }

    /// The frames received so far.
    pub(crate) fn take_received(&self) -> Frames {
        std::mem::take(&mut *self.inbox.lock())
    }

    /// Whether every frame handed over was sent.
    pub(crate) fn all_sent(&self) -> bool {
        self.unsent.load(Ordering::SeqCst) == 0
    }

    /// Ends [`Funnel::run`].
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        *self.work.lock() = true;
        self.work_ready.notify_one();
    }

    /// The MPI thread's loop: send, receive, hand over, and when idle poll
    /// with growing pauses (MPI cannot wake a thread).
    pub(super) fn run(&self, state: &mut State) {
        crate::clock::precise_sleeps();
        let mut idle_since = Instant::now();
        let mut pause = Duration::from_micros(10);
        while !self.stop.load(Ordering::SeqCst) {
            let outgoing = std::mem::take(&mut *self.outbox.lock());
            let handed = !outgoing.is_empty();
            state.queued.extend(outgoing);
            let before = state.pending();
            let sent = state.progress_sends();
            let completed = before.saturating_sub(state.pending());
            if completed > 0 {
                self.unsent.fetch_sub(completed, Ordering::SeqCst);
            }
            let frames = state.receive();
            let received = !frames.is_empty();
            if received {
                self.inbox.lock().extend(frames);
                if let Some(driver) = &*self.driver.lock() {
                    driver.wake();
                }
            }
            if handed || sent || received {
                idle_since = Instant::now();
                pause = Duration::from_micros(10);
                continue;
            }
            if idle_since.elapsed() < SPIN {
                // Poll again soon, but let the workers have the core: they
                // are who makes the next frames.
                std::thread::yield_now();
                continue;
            }
            let mut work = self.work.lock();
            if !*work {
                self.work_ready.wait_for(&mut work, pause);
            }
            *work = false;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }
}
