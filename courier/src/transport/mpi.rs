//! The MPI transport: localities are the ranks of `MPI_COMM_WORLD`, started
//! by `mpirun` or `srun`, and every frame is one MPI message.
//!
//! Sends are nonblocking (`MPI_Isend` of the frame's own buffer, no copy),
//! with at most [`MAX_OUTSTANDING`] requests in flight; more frames wait in
//! a queue until earlier ones complete. Receives probe for any message with
//! Courier's tag (`MPI_Improbe`) and receive it whole (`MPI_Mrecv`) into a
//! buffer of its exact size. Workers drive both from their background work,
//! like the other transports; every MPI call is made under one lock, so MPI
//! must grant `MPI_THREAD_SERIALIZED` or `MPI_THREAD_MULTIPLE` (checked at
//! start-up). MPI has no readiness notification, so a parked driver polls:
//! it spins for [`SPIN`], then polls with growing pauses (up to
//! [`MAX_PAUSE`]) on a condition variable that [`Transport::wake`] signals.
//!
//! A failed peer aborts the whole job (MPI's default error handler), so
//! `Sink::peer_lost` is only used for a peer that breaks the frame protocol.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use mpi::request::{Request, StaticScope};
use mpi::topology::{Communicator, SimpleCommunicator};
use parking_lot::{Condvar, Mutex};

use super::{Sink, Transport};
use crate::parcel::FRAME_HEADROOM;
use crate::runtime::LocalityId;
use crate::sched::{BlockOutcome, clock};

/// The MPI tag of Courier's frames.
const TAG: i32 = 0x0C0E;

/// Most nonblocking sends in flight at once; further frames queue.
pub(crate) const MAX_OUTSTANDING: usize = 256;

/// Most messages one poll receives, so that a flood cannot starve the
/// worker's own tasks.
const MAX_RECEIVES_PER_POLL: usize = 64;

/// How long a parked driver polls without pausing: about a round trip, so
/// that a reply to what it just sent is picked up at once. A guess, tune me.
const SPIN: Duration = Duration::from_micros(200);

/// The longest pause between two polls of a parked driver: the added
/// latency of a message to an idle locality. A guess, tune me.
const MAX_PAUSE: Duration = Duration::from_micros(100);

/// A frame being sent: the request and the buffer it reads, which must stay
/// put until the request completes.
struct InFlight {
    request: Request<'static, [u8], StaticScope>,
    buffer: *mut Vec<u8>,
}

/// Everything that touches MPI, used under one lock.
struct State {
    world: SimpleCommunicator,
    in_flight: Vec<InFlight>,
    queued: VecDeque<(LocalityId, Vec<u8>)>,
}

// SAFETY: `State` holds MPI handles (raw pointers in Open MPI) and the
// buffers of requests in flight. It lives in a `Mutex`, so one thread uses
// it at a time, and the transport is only built when MPI granted
// `MPI_THREAD_SERIALIZED` or more, which allows MPI calls from any thread
// as long as they do not overlap. The buffers are owned (leaked boxes) and
// touched only by MPI until their request completes.
#[allow(unsafe_code)]
unsafe impl Send for State {}

impl State {
    /// Completes finished sends and starts queued ones; returns whether
    /// anything changed.
    fn progress_sends(&mut self) -> bool {
        let mut did = false;
        let mut unfinished = Vec::with_capacity(self.in_flight.len());
        for InFlight { request, buffer } in self.in_flight.drain(..) {
            match request.test() {
                Ok(_status) => {
                    // SAFETY: `buffer` came from `Box::into_raw` in `start`,
                    // and its request just completed: MPI no longer reads it
                    // and nothing else refers to it.
                    #[allow(unsafe_code)]
                    drop(unsafe { Box::from_raw(buffer) });
                    did = true;
                }
                Err(request) => unfinished.push(InFlight { request, buffer }),
            }
        }
        self.in_flight = unfinished;
        while self.in_flight.len() < MAX_OUTSTANDING {
            let Some((dest, frame)) = self.queued.pop_front() else {
                break;
            };
            self.start(dest, frame);
            did = true;
        }
        did
    }

    /// Starts a nonblocking send of `frame` (after its headroom) to `dest`.
    fn start(&mut self, dest: LocalityId, frame: Vec<u8>) {
        let buffer = Box::into_raw(Box::new(frame));
        // SAFETY: the box is leaked until `progress_sends` (or `State::drop`)
        // sees the request complete, so the slice outlives the request.
        #[allow(unsafe_code)]
        let frame: &'static Vec<u8> = unsafe { &*buffer };
        let bytes = &frame[FRAME_HEADROOM..];
        let request = self
            .world
            .process_at_rank(dest.get() as i32)
            .immediate_send_with_tag(StaticScope, bytes, TAG);
        self.in_flight.push(InFlight { request, buffer });
    }

    /// Receives up to [`MAX_RECEIVES_PER_POLL`] frames: (source, bytes).
    fn receive(&mut self) -> Vec<(LocalityId, Vec<u8>)> {
        let mut frames = Vec::new();
        while frames.len() < MAX_RECEIVES_PER_POLL {
            let Some(probed) = self
                .world
                .any_process()
                .immediate_matched_probe_with_tag(TAG)
            else {
                break;
            };
            let (bytes, status) = probed.matched_receive_vec::<u8>();
            frames.push((LocalityId::new(status.source_rank() as u32), bytes));
        }
        frames
    }

    fn is_idle(&self) -> bool {
        self.in_flight.is_empty() && self.queued.is_empty()
    }
}

impl Drop for State {
    fn drop(&mut self) {
        // A request dropped unfinished panics in rsmpi; at the end of a job
        // whatever is still in flight is abandoned with its buffer.
        for in_flight in self.in_flight.drain(..) {
            std::mem::forget(in_flight.request);
        }
    }
}

/// One locality's end of the MPI transport.
pub(crate) struct Mpi {
    here: LocalityId,
    count: u32,
    max_frame_bytes: usize,
    state: Mutex<State>,
    woken: Mutex<bool>,
    wakeup: Condvar,
}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mpi")
            .field("here", &self.here)
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

impl Mpi {
    /// The transport of this rank of `world`.
    pub(crate) fn new(world: SimpleCommunicator, max_frame_bytes: usize) -> Mpi {
        let here = LocalityId::new(world.rank() as u32);
        let count = world.size() as u32;
        Mpi {
            here,
            count,
            max_frame_bytes,
            state: Mutex::new(State {
                world,
                in_flight: Vec::new(),
                queued: VecDeque::new(),
            }),
            woken: Mutex::new(false),
            wakeup: Condvar::new(),
        }
    }

    /// Progress under the lock, then delivery outside it (a sink may send).
    fn progress(&self, sink: &dyn Sink, state: parking_lot::MutexGuard<'_, State>) -> bool {
        let mut state = state;
        let sent = state.progress_sends();
        let frames = state.receive();
        drop(state);
        let received = !frames.is_empty();
        for (source, bytes) in frames {
            if bytes.len() > self.max_frame_bytes {
                sink.peer_lost(
                    source,
                    format!(
                        "sent a frame of {} bytes, above the limit of {} bytes (max_frame_bytes)",
                        bytes.len(),
                        self.max_frame_bytes
                    ),
                );
                continue;
            }
            if let Err(reason) = sink.frame(source, &bytes) {
                sink.peer_lost(source, reason);
            }
        }
        sent || received
    }

    fn take_wake(&self) -> bool {
        std::mem::take(&mut *self.woken.lock())
    }
}

/// Asks Linux for a timer slack of 1 ns on this thread (once), so that the
/// driver's short pauses are not stretched by the default 50 µs slack.
fn precise_pauses() {
    thread_local! {
        static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if !DONE.replace(true) {
        #[cfg(target_os = "linux")]
        let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
    }
}

impl Transport for Mpi {
    fn send(&self, dest: LocalityId, frame: Vec<u8>) -> Result<(), String> {
        if dest.get() >= self.count {
            return Err(format!("{dest} is not a rank of this MPI job"));
        }
        let mut state = self.state.lock();
        state.queued.push_back((dest, frame));
        state.progress_sends();
        Ok(())
    }

    fn poll(&self, sink: &dyn Sink) -> bool {
        match self.state.try_lock() {
            Some(state) => self.progress(sink, state),
            None => false,
        }
    }

    fn block(&self, sink: &dyn Sink, timeout: Duration) -> BlockOutcome {
        precise_pauses();
        let begun = Instant::now();
        let mut pause = Duration::from_micros(10);
        let mut work_ns = 0;
        loop {
            if self.take_wake() {
                return BlockOutcome::Blocked { work_ns };
            }
            // Senders hold the lock only briefly: wait for it.
            let state = self.state.lock();
            let polled = clock().raw();
            let did = self.progress(sink, state);
            if did {
                work_ns += clock().delta_as_nanos(polled, clock().raw());
                return BlockOutcome::Blocked { work_ns };
            }
            let waited = begun.elapsed();
            if waited >= timeout {
                return BlockOutcome::Blocked { work_ns };
            }
            if waited >= SPIN {
                let mut woken = self.woken.lock();
                if !*woken {
                    self.wakeup
                        .wait_for(&mut woken, pause.min(timeout - waited));
                }
                pause = (pause * 2).min(MAX_PAUSE);
            } else {
                std::hint::spin_loop();
            }
        }
    }

    fn wake(&self) {
        *self.woken.lock() = true;
        self.wakeup.notify_one();
    }

    fn flush(&self, sink: &dyn Sink, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let state = self.state.lock();
            if state.is_idle() {
                return true;
            }
            self.progress(sink, state);
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::yield_now();
        }
    }

    fn close(&self) {
        let deadline = Instant::now() + Duration::from_secs(1);
        let mut state = self.state.lock();
        while !state.is_idle() && Instant::now() < deadline {
            state.progress_sends();
            std::thread::yield_now();
        }
    }
}
