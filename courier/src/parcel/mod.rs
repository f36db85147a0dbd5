//! Parcels: the active messages that carry calls and their results, and
//! the frames that carry parcels.
//!
//! - `wire`: the versioned layout of frames, runs and parcels, and the
//!   bounds-checked reader of received frames.
//! - `frame`: [`FrameBuilder`], a run of parcels being built, arguments
//!   and results encoded straight into it.
//! - `encode`, `decode`: the serializer that writes them and the
//!   deserializer that reads them in place (postcard's format).
//! - `pending`: the table of calls waiting for their results,
//!   [`CallFuture`] and [`BatchFuture`].
//! - `error`: [`CallError`], why a call produced no result.
//! - `fuzz` (tests and the `test-hooks` feature only): valid frames,
//!   mutated, fed to every decoder.
//!
//! A frame built by a coalescing buffer holds one *run*: the parcels of one
//! action for one destination, the action named once in the run's header.
//! A parcel carries only its reply slot and its arguments (three to five
//! bytes for a small `post`); a response only its request id and output.

mod decode;
mod encode;
mod error;
mod frame;
#[cfg(any(test, feature = "test-hooks"))]
mod fuzz;
mod pending;
#[cfg(test)]
mod samples;
mod segments;
mod wire;

pub(crate) use decode::decode;
pub use error::CallError;
pub(crate) use error::{Failure, FrameTooLarge, RemoteError, panic_message};
pub(crate) use frame::{EncodeError, FrameBuilder, FrameMark, encode_control};
#[cfg(feature = "test-hooks")]
pub use fuzz::FuzzFrames;
pub use pending::{BatchFuture, CallFuture};
pub(crate) use pending::{
    BatchResults, LocalOutcome, LocalRun, Path, PendingCall, PendingTable, Response,
};
pub use segments::{
    DEFAULT_PACK_BELOW, MAX_UNIT_SLOTS, SegmentFull, SegmentOptions, SegmentOutput, SegmentResults,
    SegmentUnit, SegmentsFuture,
};
pub(crate) use segments::{SegmentSink, SegmentStats, SegmentUnitRef, split_units};
pub(crate) use wire::{
    ActivityCounts, Caller, Checkpoint, Control, DecodeError, FRAME_HEADROOM, FrameBody, Padding,
    ParcelReader, ReplyTo, RunKind, WIRE_VERSION, decode_call, decode_frame,
};
