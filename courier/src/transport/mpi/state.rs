//! Everything that touches MPI for one locality: the world communicator,
//! the sends in flight and the frames waiting to be sent.

use std::collections::VecDeque;

use mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use mpi::request::{Request, StaticScope};
use mpi::topology::{Communicator, SimpleCommunicator};

use super::{MAX_OUTSTANDING, MAX_RECEIVES_PER_POLL, TAG};
use crate::ids::LocalityId;
use crate::parcel::FRAME_HEADROOM;

/// A frame being sent: the request and the buffer it reads, which must stay
/// put until the request completes.
struct InFlight {
    request: Request<'static, [u8], StaticScope>,
    buffer: *mut Vec<u8>,
}

/// Everything that touches MPI, used by one thread at a time.
pub(super) struct State {
    pub(super) world: SimpleCommunicator,
    in_flight: Vec<InFlight>,
    pub(super) queued: VecDeque<(LocalityId, Vec<u8>)>,
}

// SAFETY: `State` holds MPI handles (raw pointers in Open MPI) and the
// buffers of requests in flight. One thread uses it at a time: either it
// lives in a `Mutex` and MPI granted `MPI_THREAD_SERIALIZED` or more (MPI
// calls from any thread, never overlapping), or it never leaves the thread
// that initialized MPI (funneled progress). The buffers are owned (leaked
// boxes) and touched only by MPI until their request completes.
#[allow(unsafe_code)]
unsafe impl Send for State {}

impl State {
    /// Completes finished sends and starts queued ones; returns whether
    /// anything changed.
    pub(super) fn progress_sends(&mut self) -> bool {
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
    pub(super) fn receive(&mut self) -> Vec<(LocalityId, Vec<u8>)> {
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

    /// Frames queued or in flight.
    pub(super) fn pending(&self) -> usize {
        self.in_flight.len() + self.queued.len()
    }

    pub(super) fn is_idle(&self) -> bool {
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

impl State {
    /// A state with nothing in flight.
    pub(super) fn new(world: SimpleCommunicator) -> State {
        State {
            world,
            in_flight: Vec::new(),
            queued: VecDeque::new(),
        }
    }
}
