//! The wire format of frames and parcels. Safe Rust, bounds-checked: a
//! malformed frame is a [`DecodeError`], never a panic.
//!
//! A frame is what a transport carries in one message:
//!
//! ```text
//! frame    = headroom(4) version(u8) kind(u8) source(u32) body
//! kind 0   : count(u32) parcel*count
//! kind 1   : control message (postcard)
//! parcel   = 0 action(u64) reply_to len(u32) args[len]              -- a call
//!          | 1 request(u64) status(u8) len(u32) bytes[len]          -- a response
//!          | 2 dest(u32) action(u64) len(u32) call[len]             -- a call to forward
//! reply_to = 0                                                      -- nobody
//!          | 1 caller                                               -- the caller
//!          | 2 locality(u32) action(u64) (0 | 1 caller)             -- a continuation
//! caller   = locality(u32) request(u64)
//! ```
//!
//! Integers are little-endian. The four bytes of headroom belong to the
//! transport (TCP writes its length prefix there) so that a frame is sent
//! without copying; decoding starts after them. A response's status is 0 for
//! success (`bytes` is the encoded output) or 1 (`bytes` is an encoded
//! [`RemoteError`]).

use serde::{Deserialize, Serialize};

use crate::action::ActionId;
use crate::runtime::LocalityId;

use super::error::RemoteError;

/// Version of the frame layout; a peer speaking another version is refused
/// at connection time and its frames would fail to decode.
pub(crate) const WIRE_VERSION: u8 = 1;

/// Bytes at the start of every encoded frame reserved for the transport.
pub(crate) const FRAME_HEADROOM: usize = 4;

const KIND_PARCELS: u8 = 0;
const KIND_CONTROL: u8 = 1;
const PARCEL_CALL: u8 = 0;
const PARCEL_RESPONSE: u8 = 1;
const PARCEL_ROUTED: u8 = 2;
const REPLY_NOBODY: u8 = 0;
const REPLY_CALLER: u8 = 1;
const REPLY_CONTINUE: u8 = 2;

/// Where a call's result goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caller {
    /// The locality waiting for the result.
    pub(crate) locality: LocalityId,
    /// Its pending-table key.
    pub(crate) request: u64,
}

/// What happens to a call's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyTo {
    /// Nothing: fire and forget.
    Nobody,
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

/// One active message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Parcel {
    /// Run `action` with the encoded `args`.
    Call {
        action: ActionId,
        reply: ReplyTo,
        args: Vec<u8>,
    },
    /// The result of the call registered as `request` at the receiver.
    Response {
        request: u64,
        result: Result<Vec<u8>, RemoteError>,
    },
    /// A call of `action` for `dest`, encoded as a call parcel, that the
    /// receiver forwards (a hop of a virtual topology).
    Routed {
        dest: LocalityId,
        action: ActionId,
        call: Vec<u8>,
    },
}

/// Runtime-internal messages (termination detection, shutdown).
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
}

/// Monotonic counters of one locality, compared across two waves to detect
/// that the whole job is idle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ActivityCounts {
    pub(crate) parcels_sent: u64,
    pub(crate) parcels_received: u64,
    pub(crate) tasks_spawned: u64,
    pub(crate) tasks_finished: u64,
}

/// A decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FrameBody {
    Parcels(Vec<Parcel>),
    Control(Control),
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
    #[error("{0} trailing bytes after the last parcel")]
    Trailing(usize),
    #[error("bad control message: {0}")]
    Control(String),
    #[error("bad error payload in a response: {0}")]
    RemoteError(String),
}

/// Builds a frame of parcels.
#[derive(Debug)]
pub(crate) struct FrameBuilder {
    buf: Vec<u8>,
    count: u32,
    /// Bytes of arguments and results (without parcel headers).
    payload: u64,
}

/// A position in a [`FrameBuilder`], to split the parcels after it off.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameMark {
    len: usize,
    count: u32,
    payload: u64,
}

const SOURCE_OFFSET: usize = FRAME_HEADROOM + 2;
const COUNT_OFFSET: usize = FRAME_HEADROOM + 6;
const PARCELS_OFFSET: usize = COUNT_OFFSET + 4;

impl FrameBuilder {
    /// Starts a parcel frame sent by `source`.
    pub(crate) fn new(source: LocalityId) -> Self {
        Self::with_capacity(source, 64)
    }

    /// Starts a parcel frame with room for `capacity` bytes.
    pub(crate) fn with_capacity(source: LocalityId, capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(capacity.max(PARCELS_OFFSET));
        buf.extend_from_slice(&[0; FRAME_HEADROOM]);
        buf.push(WIRE_VERSION);
        buf.push(KIND_PARCELS);
        buf.extend_from_slice(&source.get().to_le_bytes());
        buf.extend_from_slice(&0u32.to_le_bytes());
        FrameBuilder {
            buf,
            count: 0,
            payload: 0,
        }
    }

    /// The sender written in the header.
    pub(crate) fn source(&self) -> LocalityId {
        let bytes = self.buf[SOURCE_OFFSET..SOURCE_OFFSET + 4]
            .try_into()
            .expect("four bytes");
        LocalityId::new(u32::from_le_bytes(bytes))
    }

    /// Bytes of the frame so far, headroom included.
    pub(crate) fn byte_len(&self) -> usize {
        self.buf.len()
    }

    /// The current end of the frame.
    pub(crate) fn mark(&self) -> FrameMark {
        FrameMark {
            len: self.buf.len(),
            count: self.count,
            payload: self.payload,
        }
    }

    /// Moves the parcels appended after `mark` into a new frame.
    pub(crate) fn split_off(&mut self, mark: FrameMark) -> FrameBuilder {
        let mut tail =
            FrameBuilder::with_capacity(self.source(), PARCELS_OFFSET + self.buf.len() - mark.len);
        tail.buf.extend_from_slice(&self.buf[mark.len..]);
        tail.count = self.count - mark.count;
        tail.payload = self.payload - mark.payload;
        self.buf.truncate(mark.len);
        self.count = mark.count;
        self.payload = mark.payload;
        tail
    }

    /// Appends a call whose arguments are encoded straight into the frame.
    pub(crate) fn push_call<T: Serialize + ?Sized>(
        &mut self,
        action: ActionId,
        reply: ReplyTo,
        args: &T,
    ) -> Result<(), postcard::Error> {
        let mark = self.buf.len();
        self.buf.push(PARCEL_CALL);
        self.buf.extend_from_slice(&action.to_bits().to_le_bytes());
        encode_reply(&mut self.buf, reply);
        let result = self.push_encoded(args);
        if result.is_err() {
            self.buf.truncate(mark);
        } else {
            self.count += 1;
        }
        result
    }

    /// Appends a call whose arguments are already encoded.
    pub(crate) fn push_call_bytes(&mut self, action: ActionId, reply: ReplyTo, args: &[u8]) {
        self.buf.push(PARCEL_CALL);
        self.buf.extend_from_slice(&action.to_bits().to_le_bytes());
        encode_reply(&mut self.buf, reply);
        self.push_bytes(args);
        self.count += 1;
    }

    /// Appends a call for `dest` that the receiver forwards.
    pub(crate) fn push_routed_call<T: Serialize + ?Sized>(
        &mut self,
        dest: LocalityId,
        action: ActionId,
        reply: ReplyTo,
        args: &T,
    ) -> Result<(), postcard::Error> {
        let mark = self.mark();
        self.buf.push(PARCEL_ROUTED);
        self.buf.extend_from_slice(&dest.get().to_le_bytes());
        self.buf.extend_from_slice(&action.to_bits().to_le_bytes());
        let len_at = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        let result = self.push_call(action, reply, args);
        if result.is_err() {
            self.buf.truncate(mark.len);
            return result;
        }
        let len = u32::try_from(self.buf.len() - len_at - 4)
            .map_err(|_| postcard::Error::SerializeBufferFull)?;
        self.buf[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
        Ok(())
    }

    /// Appends a parcel already encoded (a forwarded call).
    pub(crate) fn push_encoded_parcel(&mut self, parcel: &[u8]) {
        self.buf.extend_from_slice(parcel);
        self.payload += parcel.len() as u64;
        self.count += 1;
    }

    /// Appends a response.
    pub(crate) fn push_response(&mut self, request: u64, result: &Result<Vec<u8>, RemoteError>) {
        self.buf.push(PARCEL_RESPONSE);
        self.buf.extend_from_slice(&request.to_le_bytes());
        match result {
            Ok(bytes) => {
                self.buf.push(0);
                self.push_bytes(bytes);
            }
            Err(error) => {
                self.buf.push(1);
                let encoded = postcard::to_allocvec(error)
                    .unwrap_or_else(|_| unreachable!("RemoteError always encodes"));
                self.push_bytes(&encoded);
            }
        }
        self.count += 1;
    }

    /// Number of parcels so far.
    pub(crate) fn len(&self) -> u32 {
        self.count
    }

    /// Bytes of arguments and results pushed so far.
    pub(crate) fn payload_bytes(&self) -> u64 {
        self.payload
    }

    /// Finishes the frame (headroom included).
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.buf[COUNT_OFFSET..COUNT_OFFSET + 4].copy_from_slice(&self.count.to_le_bytes());
        self.buf
    }

    fn push_bytes(&mut self, bytes: &[u8]) {
        let len = u32::try_from(bytes.len()).expect("a parcel payload is larger than 4 GiB");
        self.payload += u64::from(len);
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf.extend_from_slice(bytes);
    }

    fn push_encoded<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), postcard::Error> {
        let len_at = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        let buf = std::mem::take(&mut self.buf);
        let mut buf = postcard::serialize_with_flavor(value, VecAppend(buf))?;
        let len = u32::try_from(buf.len() - len_at - 4)
            .map_err(|_| postcard::Error::SerializeBufferFull)?;
        buf[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
        self.buf = buf;
        self.payload += u64::from(len);
        Ok(())
    }
}

/// A postcard output flavor that appends to an existing vector.
struct VecAppend(Vec<u8>);

impl postcard::ser_flavors::Flavor for VecAppend {
    type Output = Vec<u8>;

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<Vec<u8>> {
        Ok(self.0)
    }
}

fn encode_reply(buf: &mut Vec<u8>, reply: ReplyTo) {
    fn caller(buf: &mut Vec<u8>, c: Caller) {
        buf.extend_from_slice(&c.locality.get().to_le_bytes());
        buf.extend_from_slice(&c.request.to_le_bytes());
    }
    match reply {
        ReplyTo::Nobody => buf.push(REPLY_NOBODY),
        ReplyTo::Caller(c) => {
            buf.push(REPLY_CALLER);
            caller(buf, c);
        }
        ReplyTo::Continue {
            locality,
            action,
            caller: then,
        } => {
            buf.push(REPLY_CONTINUE);
            buf.extend_from_slice(&locality.get().to_le_bytes());
            buf.extend_from_slice(&action.to_bits().to_le_bytes());
            match then {
                None => buf.push(0),
                Some(c) => {
                    buf.push(1);
                    caller(buf, c);
                }
            }
        }
    }
}

/// Encodes a control frame.
pub(crate) fn encode_control(source: LocalityId, control: &Control) -> Vec<u8> {
    let mut buf = Vec::with_capacity(32);
    buf.extend_from_slice(&[0; FRAME_HEADROOM]);
    buf.push(WIRE_VERSION);
    buf.push(KIND_CONTROL);
    buf.extend_from_slice(&source.get().to_le_bytes());
    postcard::serialize_with_flavor(control, VecAppend(buf))
        .unwrap_or_else(|_| unreachable!("control messages always encode"))
}

/// A bounds-checked reader over a frame.
struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let rest = &self.bytes[self.offset..];
        if rest.len() < n {
            return Err(DecodeError::Truncated {
                offset: self.offset,
                needed: n - rest.len(),
            });
        }
        self.offset += n;
        Ok(&rest[..n])
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    fn tag(&mut self, what: &'static str, max: u8) -> Result<u8, DecodeError> {
        let offset = self.offset;
        let tag = self.u8()?;
        if tag > max {
            return Err(DecodeError::Tag { what, tag, offset });
        }
        Ok(tag)
    }

    fn caller(&mut self) -> Result<Caller, DecodeError> {
        Ok(Caller {
            locality: LocalityId::new(self.u32()?),
            request: self.u64()?,
        })
    }
}

/// Decodes a frame (headroom excluded: `bytes` starts at the version byte).
/// Returns the sender and the body.
pub(crate) fn decode_frame(bytes: &[u8]) -> Result<(LocalityId, FrameBody), DecodeError> {
    let mut r = Reader { bytes, offset: 0 };
    let version = r.u8()?;
    if version != WIRE_VERSION {
        return Err(DecodeError::Version { found: version });
    }
    let kind = r.tag("frame kind", KIND_CONTROL)?;
    let source = LocalityId::new(r.u32()?);
    if kind == KIND_CONTROL {
        let control = postcard::from_bytes(&bytes[r.offset..])
            .map_err(|e| DecodeError::Control(e.to_string()))?;
        return Ok((source, FrameBody::Control(control)));
    }
    let count = r.u32()?;
    // Every parcel takes at least 14 bytes; refuse counts the frame cannot hold
    // before allocating for them.
    let mut parcels = Vec::with_capacity((count as usize).min(bytes.len() / 14));
    for _ in 0..count {
        parcels.push(decode_parcel(&mut r)?);
    }
    if r.offset != bytes.len() {
        return Err(DecodeError::Trailing(bytes.len() - r.offset));
    }
    Ok((source, FrameBody::Parcels(parcels)))
}

/// Decodes the call inside a [`Parcel::Routed`].
pub(crate) fn decode_call(bytes: &[u8]) -> Result<Parcel, DecodeError> {
    let mut r = Reader { bytes, offset: 0 };
    if bytes.first() != Some(&PARCEL_CALL) {
        return Err(DecodeError::Tag {
            what: "forwarded call",
            tag: bytes.first().copied().unwrap_or(u8::MAX),
            offset: 0,
        });
    }
    let call = decode_parcel(&mut r)?;
    if r.offset != bytes.len() {
        return Err(DecodeError::Trailing(bytes.len() - r.offset));
    }
    Ok(call)
}

fn decode_parcel(r: &mut Reader<'_>) -> Result<Parcel, DecodeError> {
    match r.tag("parcel", PARCEL_ROUTED)? {
        PARCEL_ROUTED => {
            let dest = LocalityId::new(r.u32()?);
            let action = ActionId::from_bits(r.u64()?);
            let call = r.bytes()?.to_vec();
            Ok(Parcel::Routed { dest, action, call })
        }
        PARCEL_CALL => {
            let action = ActionId::from_bits(r.u64()?);
            let reply = match r.tag("reply", REPLY_CONTINUE)? {
                REPLY_NOBODY => ReplyTo::Nobody,
                REPLY_CALLER => ReplyTo::Caller(r.caller()?),
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
            let args = r.bytes()?.to_vec();
            Ok(Parcel::Call {
                action,
                reply,
                args,
            })
        }
        _ => {
            let request = r.u64()?;
            let status = r.tag("response status", 1)?;
            let bytes = r.bytes()?;
            let result = if status == 0 {
                Ok(bytes.to_vec())
            } else {
                Err(postcard::from_bytes(bytes)
                    .map_err(|e| DecodeError::RemoteError(e.to_string()))?)
            };
            Ok(Parcel::Response { request, result })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn locality() -> impl Strategy<Value = LocalityId> {
        (0u32..1024).prop_map(LocalityId::new)
    }

    fn caller() -> impl Strategy<Value = Caller> {
        (locality(), any::<u64>()).prop_map(|(locality, request)| Caller { locality, request })
    }

    fn reply() -> impl Strategy<Value = ReplyTo> {
        prop_oneof![
            Just(ReplyTo::Nobody),
            caller().prop_map(ReplyTo::Caller),
            (locality(), any::<u64>(), proptest::option::of(caller())).prop_map(|(l, a, c)| {
                ReplyTo::Continue {
                    locality: l,
                    action: ActionId::from_bits(a),
                    caller: c,
                }
            }),
        ]
    }

    fn remote_error() -> impl Strategy<Value = RemoteError> {
        prop_oneof![
            ".*".prop_map(RemoteError::Panicked),
            any::<u64>().prop_map(|id| RemoteError::UnknownAction { id }),
            ".*".prop_map(RemoteError::BadArguments),
        ]
    }

    fn parcel() -> impl Strategy<Value = Parcel> {
        prop_oneof![
            (
                any::<u64>(),
                reply(),
                proptest::collection::vec(any::<u8>(), 0..300)
            )
                .prop_map(|(a, reply, args)| Parcel::Call {
                    action: ActionId::from_bits(a),
                    reply,
                    args,
                }),
            (
                any::<u64>(),
                prop_oneof![
                    proptest::collection::vec(any::<u8>(), 0..300).prop_map(Ok),
                    remote_error().prop_map(Err)
                ]
            )
                .prop_map(|(request, result)| Parcel::Response { request, result }),
            (
                locality(),
                any::<u64>(),
                proptest::collection::vec(any::<u8>(), 0..300)
            )
                .prop_map(|(dest, a, call)| Parcel::Routed {
                    dest,
                    action: ActionId::from_bits(a),
                    call,
                }),
        ]
    }

    /// Appends a routed parcel with the given (possibly garbage) call bytes.
    fn push_routed(builder: &mut FrameBuilder, dest: LocalityId, action: ActionId, call: &[u8]) {
        builder.buf.push(PARCEL_ROUTED);
        builder.buf.extend_from_slice(&dest.get().to_le_bytes());
        builder
            .buf
            .extend_from_slice(&action.to_bits().to_le_bytes());
        builder.push_bytes(call);
        builder.count += 1;
    }

    fn encode(source: LocalityId, parcels: &[Parcel]) -> Vec<u8> {
        let mut builder = FrameBuilder::new(source);
        for p in parcels {
            match p {
                Parcel::Call {
                    action,
                    reply,
                    args,
                } => builder.push_call_bytes(*action, *reply, args),
                Parcel::Response { request, result } => builder.push_response(*request, result),
                Parcel::Routed { dest, action, call } => {
                    push_routed(&mut builder, *dest, *action, call)
                }
            }
        }
        builder.finish()
    }

    #[test]
    fn a_routed_call_carries_a_call_the_next_hop_can_decode() {
        let mut builder = FrameBuilder::new(LocalityId::new(0));
        let reply = ReplyTo::Caller(Caller {
            locality: LocalityId::new(0),
            request: 9,
        });
        let action = ActionId::from_bits(77);
        builder
            .push_routed_call(LocalityId::new(8), action, reply, &(5u32, "x"))
            .unwrap();
        let frame = builder.finish();
        let (_, body) = decode_frame(&frame[FRAME_HEADROOM..]).unwrap();
        let FrameBody::Parcels(parcels) = body else {
            panic!("not a parcel frame")
        };
        let [
            Parcel::Routed {
                dest,
                action: a,
                call,
            },
        ] = &parcels[..]
        else {
            panic!("not one routed parcel: {parcels:?}")
        };
        assert_eq!((*dest, *a), (LocalityId::new(8), action));
        let Parcel::Call {
            action: inner,
            reply: r,
            args,
        } = decode_call(call).unwrap()
        else {
            panic!("not a call")
        };
        assert_eq!((inner, r), (action, reply));
        assert_eq!(args, postcard::to_allocvec(&(5u32, "x")).unwrap());
        // Forwarded as is, it is an ordinary call at the destination.
        let mut next = FrameBuilder::new(LocalityId::new(2));
        next.push_encoded_parcel(call);
        let frame = next.finish();
        let (_, body) = decode_frame(&frame[FRAME_HEADROOM..]).unwrap();
        assert!(matches!(body, FrameBody::Parcels(p) if matches!(p[0], Parcel::Call { .. })));
        assert!(decode_call(&[1, 0, 0]).is_err(), "a response is not a call");
        assert!(decode_call(&call[..call.len() - 1]).is_err());
    }

    proptest! {
        #[test]
        fn parcel_frames_round_trip(source in locality(), parcels in proptest::collection::vec(parcel(), 0..20)) {
            let frame = encode(source, &parcels);
            let (from, body) = decode_frame(&frame[FRAME_HEADROOM..]).unwrap();
            prop_assert_eq!(from, source);
            prop_assert_eq!(body, FrameBody::Parcels(parcels));
        }

        #[test]
        fn truncated_frames_are_errors(parcels in proptest::collection::vec(parcel(), 1..5), cut in any::<prop::sample::Index>()) {
            let frame = encode(LocalityId::new(1), &parcels);
            let body = &frame[FRAME_HEADROOM..];
            let cut = cut.index(body.len());
            prop_assert!(decode_frame(&body[..cut]).is_err());
        }

        #[test]
        fn split_frames_hold_both_halves(parcels in proptest::collection::vec(parcel(), 0..10), at in any::<prop::sample::Index>()) {
            let at = at.index(parcels.len() + 1);
            let mut builder = FrameBuilder::new(LocalityId::new(3));
            let mut mark = builder.mark();
            for (i, p) in parcels.iter().enumerate() {
                if i == at {
                    mark = builder.mark();
                }
                match p {
                    Parcel::Call { action, reply, args } => builder.push_call_bytes(*action, *reply, args),
                    Parcel::Response { request, result } => builder.push_response(*request, result),
                    Parcel::Routed { dest, action, call } => push_routed(&mut builder, *dest, *action, call),
                }
            }
            if at == parcels.len() {
                mark = builder.mark();
            }
            let tail = builder.split_off(mark);
            prop_assert_eq!(tail.source(), LocalityId::new(3));
            for (frame, expected) in [(builder, &parcels[..at]), (tail, &parcels[at..])] {
                let bytes = frame.finish();
                let (_, body) = decode_frame(&bytes[FRAME_HEADROOM..]).unwrap();
                prop_assert_eq!(body, FrameBody::Parcels(expected.to_vec()));
            }
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_frame(&bytes);
        }

        #[test]
        fn typed_args_match_postcard(value in any::<(u64, String, Vec<i32>)>(), reply in reply()) {
            let mut builder = FrameBuilder::new(LocalityId::new(0));
            builder.push_call(ActionId::from_bits(7), reply, &value).unwrap();
            let frame = builder.finish();
            let (_, body) = decode_frame(&frame[FRAME_HEADROOM..]).unwrap();
            let FrameBody::Parcels(parcels) = body else { panic!("not a parcel frame") };
            let Parcel::Call { args, reply: decoded, .. } = &parcels[0] else { panic!("not a call") };
            prop_assert_eq!(*decoded, reply);
            prop_assert_eq!(args.clone(), postcard::to_allocvec(&value).unwrap());
        }
    }

    #[test]
    fn control_round_trips() {
        let msg = Control::QuiescenceReport {
            wave: 3,
            counts: ActivityCounts {
                parcels_sent: 1,
                parcels_received: 2,
                tasks_spawned: 3,
                tasks_finished: 4,
            },
        };
        let frame = encode_control(LocalityId::new(2), &msg);
        let (from, body) = decode_frame(&frame[FRAME_HEADROOM..]).unwrap();
        assert_eq!(from, LocalityId::new(2));
        assert_eq!(body, FrameBody::Control(msg));
    }

    #[test]
    fn wrong_version_is_refused() {
        let mut frame = encode(LocalityId::new(0), &[]);
        frame[FRAME_HEADROOM] = WIRE_VERSION + 1;
        assert_eq!(
            decode_frame(&frame[FRAME_HEADROOM..]),
            Err(DecodeError::Version {
                found: WIRE_VERSION + 1
            })
        );
    }

    #[test]
    fn huge_count_does_not_allocate_for_it() {
        let mut frame = encode(LocalityId::new(0), &[]);
        frame[COUNT_OFFSET..COUNT_OFFSET + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode_frame(&frame[FRAME_HEADROOM..]),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
