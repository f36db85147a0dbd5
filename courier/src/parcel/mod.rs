//! Parcels: the active messages that carry calls and their results.
//!
//! - `codec`: the versioned wire format of frames and parcels.
//! - `pending`: the table of calls waiting for their results, and
//!   [`CallFuture`].
//! - `error`: [`CallError`], why a call produced no result.
//!
//! The way of a parcel: [`Runtime::call`](crate::Runtime::call) registers a
//! pending entry and encodes the arguments straight into a frame: the
//! action's coalescing buffer for that destination (see `aggregate`), or a
//! frame of its own that goes to the transport at once. The receiver
//! decodes the frame on the thread driving its transport and spawns one task
//! per 32 calls; the task runs each action (one that waits gets a task of
//! its own) and sends a response parcel back (or forwards the output to a
//! continuation), and the response completes the pending entry, waking the
//! caller. The pending table is a sharded slab: a request id names its
//! place directly, with a generation that turns away stale responses, and
//! the place holds the result and the waker (no channel per call).

mod codec;
mod error;
mod pending;

pub(crate) use codec::{
    ActivityCounts, Caller, Control, FRAME_HEADROOM, FrameBody, FrameBuilder, FrameMark, Parcel,
    ReplyTo, WIRE_VERSION, decode_call, decode_frame, encode_control,
};
pub use error::CallError;
pub(crate) use error::{Failure, RemoteError};
pub use pending::CallFuture;
pub(crate) use pending::PendingTable;
