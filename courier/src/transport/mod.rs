//! Transports: how frames travel between localities.
//!
//! A transport moves opaque frames (built by [`crate::parcel`]) from one
//! locality to another, in order per pair of localities, and reports lost
//! peers. It has no threads of its own: the scheduler's workers drive it as
//! their background work ([`Transport::poll`], [`Transport::block`]), and
//! everything received is handed to a [`Sink`] on the thread that drove it.
//!
//! - [`inproc`]: localities are thread pools of one process.
//! - [`tcp`]: localities are processes connected by TCP sockets.
//! - `mpi` (feature `mpi`): localities are the ranks of an MPI job.

pub(crate) mod inproc;
#[cfg(feature = "mpi")]
pub(crate) mod mpi;
pub(crate) mod tcp;

use std::time::Duration;

use bytes::Bytes;

use crate::flow::OverCredit;
use crate::ids::LocalityId;
use crate::parcel::{DecodeError, FRAME_HEADROOM, Failure, FrameTooLarge};
use crate::sched::BlockOutcome;

/// Why a transport did not take a frame ([`Transport::send`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SendError {
    /// The destination is known to be lost; the reason it was.
    #[error("{0}")]
    PeerLost(String),
    /// The destination is not a locality of this job.
    #[error("{0} is not a locality of this job")]
    NoSuchPeer(LocalityId),
    /// The frame is longer than a length prefix can say.
    #[error(transparent)]
    TooLarge(#[from] FrameTooLarge),
}

impl From<SendError> for Failure {
    fn from(e: SendError) -> Failure {
        match e {
            SendError::PeerLost(reason) => Failure::PeerLost(reason),
            SendError::NoSuchPeer(_) => Failure::PeerLost(e.to_string()),
            SendError::TooLarge(e) => Failure::FrameTooLarge(e),
        }
    }
}

/// Why a received frame broke the protocol ([`Sink::frame`]): the
/// transport drops the connection to its sender, with this as the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProtocolError {
    /// The frame, or a run or parcel in it, does not decode.
    #[error("malformed frame from {from}: {error}")]
    Malformed {
        /// Who sent it.
        from: LocalityId,
        /// What is wrong with it.
        error: DecodeError,
    },
    /// The frame names another sender than the connection it came on.
    #[error("{from} sent a frame claiming to come from {claimed}")]
    ForgedSource {
        /// Who sent it.
        from: LocalityId,
        /// Who it claims to come from.
        claimed: LocalityId,
    },
    /// The frame is beyond the credit this locality granted its sender.
    #[error("{from} broke flow control: {error}")]
    OverCredit {
        /// Who sent it.
        from: LocalityId,
        /// What it had unfinished here, and the window.
        error: OverCredit,
    },
    /// The frame is longer than this locality accepts.
    #[error(
        "{from} sent a frame of {} bytes, above the limit of {} bytes (max_frame_bytes, which \
         must be the same on every locality)",
        error.len,
        error.limit
    )]
    TooLarge {
        /// Who sent it.
        from: LocalityId,
        /// How long, and the limit.
        error: FrameTooLarge,
    },
}

/// Where a transport delivers what it receives.
pub(crate) trait Sink: Send + Sync {
    /// A frame from `source`, without its headroom. The sink may keep it
    /// (parts of it run later as tasks), so it comes as shared [`Bytes`]
    /// rather than borrowed: the transport hands over what it read without
    /// copying. An `Err` says the frame broke the protocol: the transport
    /// then drops the connection to `source` and reports it lost with that
    /// reason.
    fn frame(&self, source: LocalityId, frame: Bytes) -> Result<(), ProtocolError>;

    /// `peer` is gone (its process died, its connection broke, or it broke
    /// the protocol). Reported once per peer.
    fn peer_lost(&self, peer: LocalityId, reason: String);
}

/// Moves frames between the localities of one job. One instance per locality.
pub(crate) trait Transport: Send + Sync + 'static {
    /// Queues `frame` for `dest` and sends as much of it as possible now.
    /// The frame's first [`FRAME_HEADROOM`] bytes belong to the transport.
    /// Fails only when `dest` is already known to be lost.
    fn send(&self, dest: LocalityId, frame: Vec<u8>) -> Result<(), SendError>;

    /// Reads and writes whatever is ready without blocking; returns whether
    /// anything was done.
    fn poll(&self, sink: &dyn Sink) -> bool;

    /// Like [`poll`](Self::poll), but waits up to `timeout` for something to
    /// happen or for [`wake`](Self::wake). Wake-ups are sticky.
    fn block(&self, sink: &dyn Sink, timeout: Duration) -> BlockOutcome;

    /// Makes a blocked (or the next) [`block`](Self::block) return.
    fn wake(&self);

    /// Blocks until every queued frame was handed to the operating system,
    /// or `timeout` passed; returns whether everything went out. Called at
    /// shutdown, when no worker drives the transport any more.
    fn flush(&self, sink: &dyn Sink, timeout: Duration) -> bool;

    /// Stops talking to `peer`, which broke the protocol in a way found
    /// after its frame was accepted (a malformed call deep in a run): its
    /// connection is closed and nothing more from it is delivered. The
    /// caller reports the loss.
    fn drop_peer(&self, peer: LocalityId, reason: &str);

    /// Closes every connection (at the end of the job).
    fn close(&self);

    /// How many connections to this locality were turned away: strangers,
    /// handshakes too slow or over the cap, late connections
    /// (`/network/count/rejected`). Transports that accept no connections
    /// of their own turn none away.
    fn rejected_connections(&self) -> u64 {
        0
    }
}

/// Checks that a frame fits the `u32` length prefix and the receiver's limit.
pub(crate) fn check_frame_len(frame: &[u8], max_frame_bytes: usize) -> Result<(), FrameTooLarge> {
    let len = frame.len() - FRAME_HEADROOM;
    if len > max_frame_bytes {
        return Err(FrameTooLarge {
            len,
            limit: max_frame_bytes,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_length_limit_names_both_sizes() {
        let frame = vec![0u8; FRAME_HEADROOM + 2000];
        assert!(check_frame_len(&frame, 2000).is_ok());
        let err = check_frame_len(&frame, 1999).unwrap_err();
        assert_eq!(
            err,
            FrameTooLarge {
                len: 2000,
                limit: 1999
            }
        );
        let message = err.to_string();
        assert!(
            message.contains("2000 bytes") && message.contains("1999"),
            "{message}"
        );
    }
}
