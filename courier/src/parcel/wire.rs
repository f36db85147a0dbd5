//! The wire format of frames, runs and parcels, and its bounds-checked
//! reader. Safe Rust: a malformed frame is a [`DecodeError`], never a panic.
//!
//! A frame is what a transport carries in one message. Its parcels come in
//! *runs*: a run names its kind and its action once, and its parcels carry
//! only what differs from one to the next.
//!
//! ```text
//! frame    = headroom(4) version(u8) kind(u8) source(u32) body
//! kind 0   : run*                                     -- parcels
//! kind 1   : control message (postcard)
//! run      = run_kind(u8) action(u64) count(u32) len(u32) body[len]
//! run 0    : call*count                               -- calls of `action`
//! run 128  : call*count                               -- calls whose responses may wait
//! run 1    : response*count                           -- results of calls of `action`
//! run 2    : routed*count                             -- calls of `action` to forward
//! call     = reply args_len(varint) args[args_len]
//! reply    = 0                                        -- nobody
//!          | 1 locality(u32) request(u64) part(varint) -- a caller
//!          | 2 locality(u32) action(u64) (0 | 1 locality(u32) request(u64) part(varint))
//!                                                     -- a continuation
//!          | 3 request(u64) part(varint)              -- the caller is the frame's source
//! response = request(u64) part(varint) status(u8) len(varint) bytes[len]
//! routed   = dest(u32) call_len(varint) call[call_len]
//! ```
//!
//! Fixed-width integers are little-endian; `varint` is unsigned LEB128 of
//! at most five bytes. The four bytes of headroom belong to the transport
//! (TCP writes its length prefix there), so a frame is sent without copying;
//! decoding starts after them. A response's status is 0 for success
//! (`bytes` is the encoded output) or 1 (`bytes` is an encoded
//! [`RemoteError`]). A call's `part` says which call of a batch it is (0
//! for a single call; see [`Runtime::call_batch`](crate::Runtime::call_batch)).
//! A run of calls whose kind carries [`RESPONSES_WAIT`] (128) says that
//! their caller awaits each with many others: their responses may wait
//! for company at the responder, under its own coalescing, instead of
//! leaving when the run has run (`aggregate/answer.rs`). No other kind
//! carries it.
//!
//! A histogram update (`post` of an action taking one small integer) costs
//! three to five bytes on the wire: the reply tag, the length and the
//! argument.

use serde::{Deserialize, Serialize};

use crate::ids::ActionId;
use crate::ids::LocalityId;

use super::error::RemoteError;

/// Version of the frame layout; a peer speaking another version is refused
/// at connection time and its frames would fail to decode.
pub(crate) const WIRE_VERSION: u8 = 3;

/// Bytes at the start of every encoded frame reserved for the transport.
pub(crate) const FRAME_HEADROOM: usize = 4;

pub(super) const KIND_PARCELS: u8 = 0;
/// The bit of a run of calls' kind that lets their responses wait (see
/// the module docs).
pub(super) const RESPONSES_WAIT: u8 = 0x80;
pub(super) const KIND_CONTROL: u8 = 1;

/// Offset of the sender in an encoded frame (headroom included).
pub(super) const SOURCE_OFFSET: usize = FRAME_HEADROOM + 2;
/// Length of the frame header (headroom included).
pub(super) const FRAME_HEADER: usize = SOURCE_OFFSET + 4;
/// Length of a run header.
pub(super) const RUN_HEADER: usize = 1 + 8 + 4 + 4;

pub(super) const REPLY_NOBODY: u8 = 0;
pub(super) const REPLY_CALLER: u8 = 1;
pub(super) const REPLY_CONTINUE: u8 = 2;
pub(super) const REPLY_SOURCE: u8 = 3;
/// A post that names its origin (a routed post: the frame that carries it
/// comes from another locality).
pub(super) const REPLY_POST_FROM: u8 = 4;

/// What the parcels of one run are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum RunKind {
    /// Calls of the run's action, to run here.
    Calls = 0,
    /// Results of calls of the run's action, for pending calls here.
    Responses = 1,
    /// Calls of the run's action for other localities, to forward.
    Routed = 2,
}

impl RunKind {
    /// Every kind, in tag order.
    pub(crate) const ALL: [RunKind; 3] = [RunKind::Calls, RunKind::Responses, RunKind::Routed];

    fn from_tag(tag: u8) -> Option<RunKind> {
        RunKind::ALL.get(usize::from(tag)).copied()
    }
}

/// Where a call's result goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caller {
    /// The locality waiting for the result.
    pub(crate) locality: LocalityId,
    /// Its pending-table key.
    pub(crate) request: u64,
    /// Which call of a batch this is (0 for a single call).
    pub(crate) part: u32,
}

/// What happens to a call's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyTo {
    /// Nobody waits (a post): a failure is reported to `origin`, the
    /// locality that posted it. On the wire, a post from the frame's
    /// sender is its tag alone.
    Post { origin: LocalityId },
    /// A response parcel to the caller.
    Caller(Caller),
    /// The output becomes the argument of `action` on `locality`, whose own
    /// output goes to `caller`.
    Continue {
        locality: LocalityId,
        action: ActionId,
        caller: Option<Caller>,
    },
}

impl ReplyTo {
    /// Whether someone waits for the call's result: its caller, or the
    /// caller of its continuation (not a post).
    pub(crate) fn is_awaited(&self) -> bool {
        matches!(
            self,
            ReplyTo::Caller(_)
                | ReplyTo::Continue {
                    caller: Some(_),
                    ..
                }
        )
    }
}

/// Runtime-internal messages (termination detection, shutdown,
/// collectives). They travel in frames of their own, never coalesced and
/// never counted as parcels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Control {
    /// The root asks for the activity counters of wave `wave`.
    QuiescenceQuery { wave: u64 },
    /// A locality's answer to [`Control::QuiescenceQuery`].
    QuiescenceReport { wave: u64, counts: ActivityCounts },
    /// Stop: the job is over.
    Shutdown,
    /// The answer to [`Control::Shutdown`]: nothing more will be sent.
    ShutdownAck,
    /// To the root: this locality's value for collective number `epoch`.
    Gather { epoch: u64, value: Vec<u8> },
    /// From the root: every locality's value for collective `epoch`, in
    /// rank order.
    Gathered { epoch: u64, values: Vec<Vec<u8>> },
    /// To the root: tell this locality (as request `id`) when the job has
    /// no parcel in flight or running.
    QuiesceRequest { id: u64 },
    /// From the root: the job was quiet after request `id` was made.
    QuiesceDone { id: u64 },
    /// To the root: this locality's main function returned (SPMD jobs), with
    /// its error if it failed.
    MainDone { error: Option<String> },
    /// Flow control: the sender finished `bytes` of the receiver's calls
    /// (their charge); that much credit comes back.
    Credit { bytes: u64 },
    /// Flow control: the sender asks to borrow `bytes` from the receiver's
    /// shared pool.
    Borrow { bytes: u64 },
    /// Flow control: the answer to [`Control::Borrow`], what was lent
    /// (perhaps 0).
    Lent { bytes: u64 },
    /// Flow control: the sender gives back `bytes` it borrowed.
    GiveBack { bytes: u64 },
    /// `count` posts of `action` from locality `origin` failed on locality
    /// `at`, the first with `error` (see `runtime/post_failures.rs`).
    PostsFailed {
        origin: u32,
        at: u32,
        action: u64,
        count: u64,
        error: String,
    },
    /// The sender is alive: sent when it has sent nothing else to the
    /// receiver for a heartbeat interval (see `runtime/liveness.rs`).
    Heartbeat,
    /// Nothing to do: a frame of a chosen size that the sender times
    /// sending, to measure what its frames cost (`runtime/probe.rs`). The
    /// receiver reads it and drops it; its padding is not copied.
    Probe { padding: Padding },
}

/// Bytes that only make a frame longer: encoded as a byte string of
/// zeros, decoded as its length (the bytes are skipped, never copied or
/// allocated, so a peer's probe costs the receiver no memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Padding(pub(crate) usize);

impl Serialize for Padding {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&vec![0; self.0])
    }
}

impl<'de> Deserialize<'de> for Padding {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Takes a byte string's length.
        struct Length;

        impl serde::de::Visitor<'_> for Length {
            type Value = Padding;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("padding bytes")
            }

            fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<Padding, E> {
                Ok(Padding(bytes.len()))
            }
        }

        deserializer.deserialize_bytes(Length)
    }
}

/// Monotonic counters of one locality, compared across two waves to detect
/// that the whole job is idle (tasks) or quiet (parcel work).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ActivityCounts {
    pub(crate) parcels_sent: u64,
    pub(crate) parcels_received: u64,
    pub(crate) tasks_spawned: u64,
    pub(crate) tasks_finished: u64,
    /// Work received parcels started (runs of calls, calls that waited) and
    /// finished.
    pub(crate) parcel_work_started: u64,
    pub(crate) parcel_work_finished: u64,
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    #[error("frame truncated: needed {needed} more bytes at offset {offset}")]
    Truncated { offset: usize, needed: usize },
    #[error("frame version {found} is not the supported version {WIRE_VERSION}")]
    Version { found: u8 },
    #[error("unknown {what} tag {tag} at offset {offset}")]
    Tag {
        what: &'static str,
        tag: u8,
        offset: usize,
    },
    #[error("a varint longer than {max} bytes at offset {offset}")]
    Varint { offset: usize, max: usize },
    #[error("{0} trailing bytes after the last parcel of a run")]
    Trailing(usize),
    #[error("bad control message: {0}")]
    Control(String),
    #[error("bad error payload in a response: {0}")]
    RemoteError(String),
}

/// The header of a decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FrameBody<'a> {
    /// Runs of parcels, read with [`Runs`].
    Parcels(Runs<'a>),
    Control(Control),
}

/// Decodes a frame's header (headroom excluded: `bytes` starts at the
/// version byte). Returns the sender and the body.
pub(crate) fn decode_frame(bytes: &[u8]) -> Result<(LocalityId, FrameBody<'_>), DecodeError> {
    let mut r = Reader::new(bytes);
    let version = r.u8()?;
    if version != WIRE_VERSION {
        return Err(DecodeError::Version { found: version });
    }
    let kind = r.tag("frame kind", KIND_CONTROL)?;
    let source = LocalityId::new(r.u32()?);
    if kind == KIND_CONTROL {
        let control =
            super::decode::decode(r.rest()).map_err(|e| DecodeError::Control(e.to_string()))?;
        return Ok((source, FrameBody::Control(control)));
    }
    Ok((source, FrameBody::Parcels(Runs { r })))
}

/// The runs of a parcel frame, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Runs<'a> {
    r: Reader<'a>,
}

/// One run: its header and where its body lies in the frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) kind: RunKind,
    pub(crate) action: ActionId,
    pub(crate) count: u32,
    /// Whether the responses to these calls may wait for company at the
    /// responder (a run of calls whose kind carries [`RESPONSES_WAIT`]).
    pub(crate) responses_wait: bool,
    /// The body's byte range within the bytes given to [`decode_frame`].
    pub(crate) body: std::ops::Range<usize>,
}

impl Runs<'_> {
    /// The next run, `None` after the last.
    pub(crate) fn next_run(&mut self) -> Result<Option<Run>, DecodeError> {
        if self.r.is_empty() {
            return Ok(None);
        }
        let offset = self.r.offset;
        let tag = self.r.u8()?;
        let responses_wait = tag & RESPONSES_WAIT != 0;
        let kind = RunKind::from_tag(tag & !RESPONSES_WAIT)
            .filter(|&kind| !responses_wait || kind == RunKind::Calls)
            .ok_or(DecodeError::Tag {
                what: "run",
                tag,
                offset,
            })?;
        let action = ActionId::from_bits(self.r.u64()?);
        let count = self.r.u32()?;
        let len = self.r.u32()? as usize;
        let start = self.r.offset;
        self.r.take(len)?;
        Ok(Some(Run {
            kind,
            action,
            count,
            responses_wait,
            body: start..start + len,
        }))
    }
}

/// One call as read from a run: where its result goes, its encoded arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallParcel<'a> {
    pub(crate) reply: ReplyTo,
    pub(crate) args: &'a [u8],
}

/// One response as read from a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResponseParcel<'a> {
    pub(crate) request: u64,
    pub(crate) part: u32,
    /// The encoded output, or why there is none.
    pub(crate) result: Result<&'a [u8], RemoteError>,
}

/// One routed call: its final destination and the call, encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RoutedParcel<'a> {
    pub(crate) dest: LocalityId,
    /// A whole call (`reply args_len args`), forwarded as is.
    pub(crate) call: &'a [u8],
}

/// A position in a [`ParcelReader`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Checkpoint {
    offset: usize,
    left: u32,
}

/// Reads the parcels of one run body. `source` is the frame's sender (the
/// caller of calls whose reply says "the source").
#[derive(Debug, Clone)]
pub(crate) struct ParcelReader<'a> {
    r: Reader<'a>,
    source: LocalityId,
    left: u32,
    payload: u64,
}

impl<'a> ParcelReader<'a> {
    /// A reader of `count` parcels in `body`.
    pub(crate) fn new(body: &'a [u8], count: u32, source: LocalityId) -> Self {
        ParcelReader {
            r: Reader::new(body),
            source,
            left: count,
            payload: 0,
        }
    }

    /// The locality that sent the frame being read.
    pub(crate) fn source(&self) -> LocalityId {
        self.source
    }

    /// Bytes of arguments and results read so far.
    pub(crate) fn payload_bytes(&self) -> u64 {
        self.payload
    }

    /// Where the reader is: to read the parcel there again with
    /// [`rewound`](Self::rewound).
    #[inline]
    pub(crate) fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            offset: self.r.offset,
            left: self.left,
        }
    }

    /// A reader at `checkpoint`, taken from this reader earlier.
    pub(crate) fn rewound(&self, checkpoint: Checkpoint) -> Self {
        let mut r = self.clone();
        r.r.offset = checkpoint.offset;
        r.left = checkpoint.left;
        r
    }

    /// Bytes of the body read so far: where the next parcel starts.
    pub(crate) fn offset(&self) -> usize {
        self.r.offset
    }

    /// Parcels the run's header counted that were not read yet (a parcel
    /// that failed to decode counts as read).
    pub(crate) fn left(&self) -> u32 {
        self.left
    }

    /// Checks that the body held exactly the parcels its header counted.
    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        match self.r.rest().len() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }

    fn advance(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        true
    }

    /// The next call of a calls run.
    #[inline]
    pub(crate) fn next_call(&mut self) -> Result<Option<CallParcel<'a>>, DecodeError> {
        if !self.advance() {
            return Ok(None);
        }
        // The common case, a post with small arguments: tag, one-byte
        // length, arguments.
        if let [REPLY_NOBODY, len, rest @ ..] = self.r.rest() {
            let len = usize::from(*len);
            if len < 0x80 && rest.len() >= len {
                self.r.offset += 2 + len;
                self.payload += len as u64;
                return Ok(Some(CallParcel {
                    reply: ReplyTo::Post {
                        origin: self.source,
                    },
                    args: &rest[..len],
                }));
            }
        }
        let call = read_call(&mut self.r, self.source)?;
        self.payload += call.args.len() as u64;
        Ok(Some(call))
    }

    /// The next response of a responses run.
    #[inline]
    pub(crate) fn next_response(&mut self) -> Result<Option<ResponseParcel<'a>>, DecodeError> {
        if !self.advance() {
            return Ok(None);
        }
        let r = &mut self.r;
        let request = r.u64()?;
        let part = r.varint()?;
        let status = r.tag("response status", 1)?;
        let bytes = r.bytes()?;
        self.payload += bytes.len() as u64;
        let result = if status == 0 {
            Ok(bytes)
        } else {
            Err(super::decode::decode(bytes)
                .map_err(|e| DecodeError::RemoteError(e.to_string()))?)
        };
        Ok(Some(ResponseParcel {
            request,
            part,
            result,
        }))
    }

    /// The next call of a routed run.
    pub(crate) fn next_routed(&mut self) -> Result<Option<RoutedParcel<'a>>, DecodeError> {
        if !self.advance() {
            return Ok(None);
        }
        let dest = LocalityId::new(self.r.u32()?);
        let call = self.r.bytes()?;
        self.payload += call.len() as u64;
        Ok(Some(RoutedParcel { dest, call }))
    }
}

/// Decodes a whole call forwarded inside a routed parcel; its reply names
/// its caller explicitly (the frame that carried it came from elsewhere).
pub(crate) fn decode_call(bytes: &[u8], source: LocalityId) -> Result<CallParcel<'_>, DecodeError> {
    let mut r = Reader::new(bytes);
    let call = read_call(&mut r, source)?;
    match r.rest().len() {
        0 => Ok(call),
        n => Err(DecodeError::Trailing(n)),
    }
}

#[inline]
fn read_call<'a>(r: &mut Reader<'a>, source: LocalityId) -> Result<CallParcel<'a>, DecodeError> {
    let reply = match r.tag("reply", REPLY_POST_FROM)? {
        REPLY_NOBODY => ReplyTo::Post { origin: source },
        REPLY_POST_FROM => ReplyTo::Post {
            origin: LocalityId::new(r.u32()?),
        },
        REPLY_CALLER => ReplyTo::Caller(r.caller()?),
        REPLY_SOURCE => ReplyTo::Caller(Caller {
            locality: source,
            request: r.u64()?,
            part: r.varint()?,
        }),
        // REPLY_CONTINUE: `tag` lets no other value through.
        _ => {
            let locality = LocalityId::new(r.u32()?);
            let action = ActionId::from_bits(r.u64()?);
            let caller = match r.tag("continuation caller", 1)? {
                0 => None,
                _ => Some(r.caller()?),
            };
            ReplyTo::Continue {
                locality,
                action,
                caller,
            }
        }
    };
    let args = r.bytes()?;
    Ok(CallParcel { reply, args })
}

/// A bounds-checked reader over a byte slice.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, offset: 0 }
    }

    fn is_empty(&self) -> bool {
        self.offset == self.bytes.len()
    }

    #[inline]
    fn rest(&self) -> &'a [u8] {
        &self.bytes[self.offset..]
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let rest = self.rest();
        if rest.len() < n {
            return Err(DecodeError::Truncated {
                offset: self.offset,
                needed: n - rest.len(),
            });
        }
        self.offset += n;
        Ok(&rest[..n])
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    #[inline]
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    #[inline]
    fn u32(&mut self) -> Result<u32, DecodeError> {
        self.array().map(u32::from_le_bytes)
    }

    #[inline]
    fn u64(&mut self) -> Result<u64, DecodeError> {
        self.array().map(u64::from_le_bytes)
    }

    #[inline]
    fn varint(&mut self) -> Result<u32, DecodeError> {
        // The common case: one byte.
        if let Some(&byte) = self.bytes.get(self.offset) {
            if byte < 0x80 {
                self.offset += 1;
                return Ok(u32::from(byte));
            }
        }
        self.varint_long()
    }

    #[cold]
    fn varint_long(&mut self) -> Result<u32, DecodeError> {
        let offset = self.offset;
        let mut value = 0u32;
        for i in 0..VARINT_MAX {
            let byte = self.u8()?;
            let bits = u32::from(byte & 0x7f);
            // The fifth byte holds the top four bits; more is an overflow.
            if i == VARINT_MAX - 1 && bits > 0x0f {
                break;
            }
            value |= bits << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::Varint {
            offset,
            max: VARINT_MAX,
        })
    }

    #[inline]
    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.varint()? as usize;
        self.take(len)
    }

    #[inline]
    fn tag(&mut self, what: &'static str, max: u8) -> Result<u8, DecodeError> {
        let offset = self.offset;
        let tag = self.u8()?;
        if tag > max {
            return Err(DecodeError::Tag { what, tag, offset });
        }
        Ok(tag)
    }

    #[inline]
    fn caller(&mut self) -> Result<Caller, DecodeError> {
        Ok(Caller {
            locality: LocalityId::new(self.u32()?),
            request: self.u64()?,
            part: self.varint()?,
        })
    }
}

/// Longest LEB128 encoding of a `u32`.
pub(super) const VARINT_MAX: usize = 5;

/// Appends `value` as unsigned LEB128.
pub(super) fn put_varint(buf: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        buf.push((value as u8) | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

/// Writes `value` as unsigned LEB128 at the start of `out`; returns its length.
pub(super) fn write_varint(out: &mut [u8; VARINT_MAX], mut value: u32) -> usize {
    let mut i = 0;
    while value >= 0x80 {
        out[i] = (value as u8) | 0x80;
        value >>= 7;
        i += 1;
    }
    out[i] = value as u8;
    i + 1
}

/// Bytes of `value` as unsigned LEB128.
pub(super) fn varint_len(value: u32) -> usize {
    match value {
        0..0x80 => 1,
        0x80..0x4000 => 2,
        0x4000..0x20_0000 => 3,
        0x20_0000..0x1000_0000 => 4,
        _ => 5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varints_round_trip(value in any::<u32>()) {
            let mut buf = Vec::new();
            put_varint(&mut buf, value);
            prop_assert_eq!(buf.len(), varint_len(value));
            let mut r = Reader::new(&buf);
            prop_assert_eq!(r.varint().unwrap(), value);
            prop_assert!(r.is_empty());
        }
    }

    #[test]
    fn overlong_varints_are_errors() {
        for bad in [
            &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01][..],
            &[0xff, 0xff, 0xff, 0xff, 0x1f],
        ] {
            assert!(matches!(
                Reader::new(bad).varint(),
                Err(DecodeError::Varint { .. })
            ));
        }
        assert_eq!(
            Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x0f]).varint(),
            Ok(u32::MAX)
        );
        assert!(matches!(
            Reader::new(&[0x80]).varint(),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
