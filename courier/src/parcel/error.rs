//! [`CallError`]: why a call produced no result.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ids::LocalityId;

/// A failure reported by the locality that ran (or tried to run) an action.
/// Travels in response parcels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum RemoteError {
    /// The handler panicked with this message.
    Panicked(String),
    /// The receiver has no action with this id.
    UnknownAction { id: u64 },
    /// The arguments did not decode as the action's parameter types.
    BadArguments(String),
    /// The output did not encode.
    BadOutput(String),
    /// A continuation's target locality was lost before the result could go on.
    Forward { locality: u32, reason: String },
}

/// Why a call failed, without the call's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    Remote(RemoteError),
    PeerLost(String),
    NoSuchLocality {
        count: u32,
    },
    ShuttingDown,
    EncodeArgs(String),
    /// The frame carrying the call was larger than the receiver accepts.
    FrameTooLarge(FrameTooLarge),
    DecodeResult(String),
    /// An earlier post failed and `Config::on_post_failure` is `Fail`.
    PostFailed(String),
    /// No result came within the call's deadline (`CallFuture::timeout`).
    TimedOut(std::time::Duration),
}

/// A frame longer than its receiver accepts (`max_frame_bytes`) or than
/// its `u32` length prefix can say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "a frame of {len} bytes exceeds the limit of {limit} bytes (max_frame_bytes: raise it on \
     every locality with Config::max_frame_bytes, --max-frame-bytes or COURIER_MAX_FRAME_BYTES)"
)]
pub(crate) struct FrameTooLarge {
    /// The frame's length without the transport's headroom.
    pub(crate) len: usize,
    /// The limit it broke.
    pub(crate) limit: usize,
}

/// Why a call produced no result.
///
/// Returned by awaiting a [`CallFuture`](crate::CallFuture). Use the `is_*`
/// predicates to tell the cases apart; [`Display`](fmt::Display) says which
/// action, which locality and why.
///
/// # Examples
///
/// ```
/// use courier::{Config, TransportKind};
///
/// #[courier::action]
/// fn explode() -> u32 {
///     panic!("boom")
/// }
///
/// courier::launch(Config::new().localities(2).transport(TransportKind::Inproc), |rt| async move {
///     let err = rt.call(rt.locality(1), explode, ()).await.unwrap_err();
///     assert!(err.is_panic());
///     assert_eq!(err.panic_message(), Some("boom"));
///     Ok(())
/// })
/// .unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    action: &'static str,
    locality: LocalityId,
    failure: Failure,
}

impl CallError {
    pub(crate) fn new(action: &'static str, locality: LocalityId, failure: Failure) -> Self {
        CallError {
            action,
            locality,
            failure,
        }
    }

    /// The full path of the action that was called.
    pub fn action(&self) -> &'static str {
        self.action
    }

    /// The locality the call was sent to.
    pub fn locality(&self) -> LocalityId {
        self.locality
    }

    /// Whether the handler panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self.failure, Failure::Remote(RemoteError::Panicked(_)))
    }

    /// The handler's panic message, if it panicked with a string.
    pub fn panic_message(&self) -> Option<&str> {
        match &self.failure {
            Failure::Remote(RemoteError::Panicked(msg)) => Some(msg),
            _ => None,
        }
    }

    /// Whether the receiver did not know the action (it runs another binary).
    pub fn is_unknown_action(&self) -> bool {
        matches!(
            self.failure,
            Failure::Remote(RemoteError::UnknownAction { .. })
        )
    }

    /// Whether the connection to a locality involved in the call was lost.
    pub fn is_peer_lost(&self) -> bool {
        matches!(
            self.failure,
            Failure::PeerLost(_) | Failure::Remote(RemoteError::Forward { .. })
        )
    }

    /// Whether arguments or results failed to encode or decode.
    pub fn is_codec(&self) -> bool {
        matches!(
            self.failure,
            Failure::EncodeArgs(_)
                | Failure::FrameTooLarge(_)
                | Failure::DecodeResult(_)
                | Failure::Remote(RemoteError::BadArguments(_) | RemoteError::BadOutput(_))
        )
    }

    /// Whether the call's frame was larger than the receiver accepts
    /// (`Config::max_frame_bytes`). A call alone in a frame above the limit
    /// fails so; one among others is sent in a frame of its own first.
    pub fn is_too_large(&self) -> bool {
        matches!(self.failure, Failure::FrameTooLarge(_))
    }

    /// Whether the destination is not a locality of this job.
    pub fn is_no_such_locality(&self) -> bool {
        matches!(self.failure, Failure::NoSuchLocality { .. })
    }

    /// Whether no result came within the deadline the caller set with
    /// [`CallFuture::timeout`](crate::CallFuture::timeout). The call may
    /// still run on its locality; its result is then dropped.
    pub fn is_timed_out(&self) -> bool {
        matches!(self.failure, Failure::TimedOut(_))
    }

    /// Whether the send was refused because an earlier post failed and
    /// [`Config::on_post_failure`](crate::Config::on_post_failure) is
    /// [`OnPostFailure::Fail`](crate::OnPostFailure::Fail).
    pub fn is_post_failure(&self) -> bool {
        matches!(self.failure, Failure::PostFailed(_))
    }

    /// Whether the runtime was shutting down.
    pub fn is_shutting_down(&self) -> bool {
        matches!(self.failure, Failure::ShuttingDown)
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "call of `{}` on {} failed: ", self.action, self.locality)?;
        match &self.failure {
            Failure::Remote(error) => write!(f, "{error}"),
            Failure::PeerLost(reason) => write!(f, "the connection was lost: {reason}"),
            Failure::NoSuchLocality { count } => {
                write!(f, "no such locality (the job has {count})")
            }
            Failure::ShuttingDown => write!(f, "the runtime is shutting down"),
            Failure::EncodeArgs(e) => write!(f, "the arguments did not encode: {e}"),
            Failure::FrameTooLarge(e) => write!(f, "the arguments did not encode: {e}"),
            Failure::DecodeResult(e) => write!(f, "the result did not decode: {e}"),
            Failure::PostFailed(why) => write!(f, "not sent: {why} (on_post_failure is `fail`)"),
            Failure::TimedOut(limit) => write!(
                f,
                "no result within {limit:?} (CallFuture::timeout); the call may still run \
                 there, and its result will be dropped"
            ),
        }
    }
}

impl std::error::Error for CallError {}

/// Why the receiver could not run a call, in the words of a
/// [`CallError`] (and of the report of a failed post).
impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteError::Panicked(msg) => write!(f, "the action panicked: {msg}"),
            RemoteError::UnknownAction { id } => write!(
                f,
                "the locality has no action with id {id:#018x} (is it running the same binary?)"
            ),
            RemoteError::BadArguments(e) => write!(f, "the arguments did not decode there: {e}"),
            RemoteError::BadOutput(e) => write!(f, "the result did not encode there: {e}"),
            RemoteError::Forward { locality, reason } => write!(
                f,
                "its result could not be forwarded to the continuation on locality#{locality}: {reason}"
            ),
        }
    }
}

/// Turns a panic payload into its message.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}
