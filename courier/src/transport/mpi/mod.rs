//! The MPI transport: localities are the ranks of `MPI_COMM_WORLD`, started
//! by `mpirun` or `srun`, and every frame is one MPI message.
//!
//! - `state`: the world communicator, sends in flight, queued frames.
//! - `process`: the MPI thread that initializes and finalizes MPI.
//! - `funnel`: funneled progress, for an MPI that grants only
//!   `MPI_THREAD_FUNNELED`.
//!
//! Sends are nonblocking (`MPI_Isend` of the frame's own buffer, no copy),
//! with at most [`MAX_OUTSTANDING`] requests in flight; more frames wait in
//! a queue until earlier ones complete. Receives probe for any message with
//! Courier's tag (`MPI_Improbe`) and receive it whole (`MPI_Mrecv`) into a
//! buffer of its exact size.
//!
//! Who calls MPI depends on the thread support MPI grants. With
//! `MPI_THREAD_SERIALIZED` or `MULTIPLE`, the workers drive MPI from their
//! background work, like the other transports, every call under one lock.
//! With only `MPI_THREAD_FUNNELED` (or `COURIER_MPI_PROGRESS=funneled`),
//! the MPI thread makes every call and the workers exchange frames with it
//! through two queues. MPI has no readiness notification, so whoever polls
//! while idle spins for [`SPIN`], then polls with pauses growing to
//! [`MAX_PAUSE`] on a condition variable that new work signals.
//!
//! A failed peer aborts the whole job (MPI's default error handler), so
//! `Sink::peer_lost` is used for a peer that breaks the frame protocol and
//! for one the failure detector (`runtime/liveness.rs`: heartbeats travel
//! as MPI messages) finds silent: stopped, or hung outside Courier.
//!
//! Courier deliberately keeps `MPI_ERRORS_ARE_FATAL` on its communicator
//! rather than `MPI_ERRORS_RETURN`: the rsmpi 0.8 calls this transport
//! makes discard MPI's return codes (`immediate_send_with_tag` keeps only
//! the request of `MPI_Isend`; `Request::test` ignores the code of
//! `MPI_Test` and asserts on the request it leaves), so under
//! `MPI_ERRORS_RETURN` a failed operation would pass unnoticed (a frame
//! lost in silence) or panic a worker. Returning errors needs these calls
//! made through `mpi-sys` with every code checked; until then a failed
//! rank ends the job through the MPI library, as it does by default.

mod funnel;
mod process;
mod state;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mpi::topology::Communicator;
use parking_lot::{Condvar, Mutex};

pub(crate) use funnel::Funnel;
pub(crate) use process::{MpiProcess, Progress};
use state::State;

use super::{SendError, Sink, Transport};
use crate::clock::clock;
use crate::ids::LocalityId;
use crate::sched::BlockOutcome;

/// The MPI tag of Courier's frames.
const TAG: i32 = 0x0C0E;

/// Most nonblocking sends in flight at once; further frames queue.
pub(crate) const MAX_OUTSTANDING: usize = 256;

/// Most messages one poll receives, so that a flood cannot starve the
/// worker's own tasks.
const MAX_RECEIVES_PER_POLL: usize = 64;

/// How long an idle poller polls without pausing: about a round trip, so
/// that a reply to what it just sent is picked up at once. A guess, tune me.
const SPIN: Duration = Duration::from_micros(200);

/// The longest pause between two polls of an idle poller: the added latency
/// of a message to an idle locality. A guess, tune me.
const MAX_PAUSE: Duration = Duration::from_micros(100);

/// A sticky wake-up flag with a condition variable: what a parked driver
/// waits on.
#[derive(Debug, Default)]
pub(crate) struct Wakeup {
    woken: Mutex<bool>,
    condvar: Condvar,
}

impl Wakeup {
    fn wake(&self) {
        *self.woken.lock() = true;
        self.condvar.notify_one();
    }

    fn take(&self) -> bool {
        std::mem::take(&mut *self.woken.lock())
    }

    /// Waits up to `pause` unless already woken; does not consume the wake.
    fn wait(&self, pause: Duration) {
        let mut woken = self.woken.lock();
        if !*woken {
            self.condvar.wait_for(&mut woken, pause);
        }
    }
}

/// Who makes the MPI calls.
enum Engine {
    Workers(Mutex<State>),
    Funneled(Arc<Funnel>),
}

/// One locality's end of the MPI transport.
pub(crate) struct Mpi {
    here: LocalityId,
    count: u32,
    max_frame_bytes: usize,
    engine: Engine,
    wakeup: Arc<Wakeup>,
    /// Peers that broke the protocol: their frames are dropped. (MPI cannot
    /// close one connection; a failed peer aborts the job.)
    dropped: Mutex<Vec<LocalityId>>,
    /// Held while receiving and delivering: one thread at a time delivers
    /// (a worker, or the monitor thread), so that frames reach the sink in
    /// the order MPI received them.
    delivering: Mutex<()>,
}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mpi")
            .field("here", &self.here)
            .field("count", &self.count)
            .field(
                "progress",
                &match self.engine {
                    Engine::Workers(_) => "workers",
                    Engine::Funneled(_) => "funneled",
                },
            )
            .finish_non_exhaustive()
    }
}

impl Mpi {
    /// The transport of rank `rank` of `size`, progressing as `progress` says.
    pub(crate) fn new(rank: u32, size: u32, progress: Progress, max_frame_bytes: usize) -> Mpi {
        let wakeup = Arc::new(Wakeup::default());
        let engine = match progress {
            Progress::Workers(world) => {
                debug_assert_eq!(world.0.rank() as u32, rank);
                Engine::Workers(Mutex::new(State::new(world.0)))
            }
            Progress::Funneled(funnel) => {
                funnel.set_driver(Arc::clone(&wakeup));
                Engine::Funneled(funnel)
            }
        };
        Mpi {
            here: LocalityId::new(rank),
            count: size,
            max_frame_bytes,
            engine,
            wakeup,
            dropped: Mutex::new(Vec::new()),
            delivering: Mutex::new(()),
        }
    }

    /// Hands received frames to the sink; a frame above the limit or one
    /// the sink rejects marks its sender as lost.
    fn deliver(&self, sink: &dyn Sink, frames: impl IntoIterator<Item = (LocalityId, Vec<u8>)>) {
        for (source, bytes) in frames {
            if self.dropped.lock().contains(&source) {
                continue;
            }
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
            if let Err(error) = sink.frame(source, Bytes::from(bytes)) {
                let reason = error.to_string();
                self.drop_peer(source, &reason);
                sink.peer_lost(source, reason);
            }
        }
    }

    /// One round of progress; returns whether anything happened. `wait`
    /// says whether to wait for the lock of worker-driven progress.
    fn progress(&self, sink: &dyn Sink, wait: bool) -> bool {
        let Some(_delivering) = self.delivering.try_lock() else {
            // Another thread is receiving; sends still progress.
            if let Engine::Workers(state) = &self.engine {
                if let Some(mut state) = state.try_lock() {
                    return state.progress_sends();
                }
            }
            return false;
        };
        match &self.engine {
            Engine::Workers(state) => {
                let state = if wait {
                    Some(state.lock())
                } else {
                    state.try_lock()
                };
                let Some(mut state) = state else {
                    return false;
                };
                let sent = state.progress_sends();
                let frames = state.receive();
                // Deliver outside the lock: a sink may send.
                drop(state);
                let received = !frames.is_empty();
                self.deliver(sink, frames);
                sent || received
            }
            Engine::Funneled(funnel) => {
                let frames = funnel.take_received();
                let received = !frames.is_empty();
                self.deliver(sink, frames);
                received
            }
        }
    }

    /// Whether every frame given to [`Transport::send`] left.
    fn all_sent(&self) -> bool {
        match &self.engine {
            Engine::Workers(state) => state.lock().is_idle(),
            Engine::Funneled(funnel) => funnel.all_sent(),
        }
    }
}

impl Transport for Mpi {
    fn send(&self, dest: LocalityId, frame: Vec<u8>) -> Result<(), SendError> {
        if dest.get() >= self.count {
            return Err(SendError::NoSuchPeer(dest));
        }
        match &self.engine {
            Engine::Workers(state) => {
                let mut state = state.lock();
                state.queued.push_back((dest, frame));
                state.progress_sends();
            }
            Engine::Funneled(funnel) => funnel.send(dest, frame),
        }
        Ok(())
    }

    fn poll(&self, sink: &dyn Sink) -> bool {
        self.progress(sink, false)
    }

    fn block(&self, sink: &dyn Sink, timeout: Duration) -> BlockOutcome {
        crate::clock::precise_sleeps();
        let begun = Instant::now();
        let mut pause = Duration::from_micros(10);
        let funneled = matches!(self.engine, Engine::Funneled(_));
        loop {
            let woken = self.wakeup.take();
            let polled = clock().raw();
            if self.progress(sink, true) {
                let work_ns = clock().delta_as_nanos(polled, clock().raw());
                return BlockOutcome::Blocked { work_ns };
            }
            if woken {
                return BlockOutcome::Blocked { work_ns: 0 };
            }
            let waited = begun.elapsed();
            if waited >= timeout {
                return BlockOutcome::Blocked { work_ns: 0 };
            }
            if funneled || waited >= SPIN {
                // The MPI thread wakes a funneled driver when frames come.
                let step = if funneled { timeout - waited } else { pause };
                self.wakeup.wait(step.min(timeout - waited));
                pause = (pause * 2).min(MAX_PAUSE);
            } else {
                std::hint::spin_loop();
            }
        }
    }

    fn wake(&self) {
        self.wakeup.wake();
    }

    fn flush(&self, sink: &dyn Sink, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.all_sent() {
                return true;
            }
            self.progress(sink, true);
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::yield_now();
        }
    }

    fn drop_peer(&self, peer: LocalityId, _reason: &str) {
        let mut dropped = self.dropped.lock();
        if !dropped.contains(&peer) {
            dropped.push(peer);
        }
    }

    fn close(&self) {
        let deadline = Instant::now() + Duration::from_secs(1);
        while !self.all_sent() && Instant::now() < deadline {
            if let Engine::Workers(state) = &self.engine {
                state.lock().progress_sends();
            }
            std::thread::yield_now();
        }
    }
}
