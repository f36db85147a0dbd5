//! [`FrameBuilder`]: one run of parcels being built into a frame, the
//! arguments and results encoded straight into it (see `wire.rs` for the
//! layout).

use serde::Serialize;

use super::error::RemoteError;
use super::wire::{
    Caller, FRAME_HEADER, FRAME_HEADROOM, KIND_PARCELS, REPLY_CALLER, REPLY_CONTINUE, REPLY_NOBODY,
    REPLY_POST_FROM, REPLY_SOURCE, RESPONSES_WAIT, RUN_HEADER, ReplyTo, RunKind, SOURCE_OFFSET,
    VARINT_MAX, WIRE_VERSION, put_varint, varint_len, write_varint,
};
use crate::ids::ActionId;
use crate::ids::LocalityId;

/// Why a parcel could not be added to a frame. The frame is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EncodeError {
    /// The value's `Serialize` implementation failed.
    #[error("{0}")]
    Serialize(String),
    /// An encoded value above the 4 GiB a length can say.
    #[error("an encoded value of {0} bytes is larger than 4 GiB")]
    TooLarge(usize),
}

/// Bytes reserved in a frame before a value is encoded into it: room for
/// most parcels' arguments, so that the encoder's pushes do not grow the
/// vector one by one.
const SMALL_VALUE: usize = 32;

/// Offset of the run header's count (headroom included).
const COUNT_OFFSET: usize = FRAME_HEADER + 1 + 8;
/// Offset of the run header's byte length.
const LEN_OFFSET: usize = COUNT_OFFSET + 4;
/// Offset of the first parcel.
const PARCELS_OFFSET: usize = FRAME_HEADER + RUN_HEADER;

/// A frame holding one run of parcels: the parcels of one action for one
/// destination (a coalescing buffer), or a single parcel.
#[derive(Debug)]
pub(crate) struct FrameBuilder {
    buf: Vec<u8>,
    source: LocalityId,
    kind: RunKind,
    action: ActionId,
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

impl FrameBuilder {
    /// Starts a frame sent by `source` with a run of `kind` for `action`,
    /// with room for `capacity` bytes.
    pub(crate) fn with_capacity(
        source: LocalityId,
        kind: RunKind,
        action: ActionId,
        capacity: usize,
    ) -> Self {
        let mut buf = Vec::with_capacity(capacity.max(PARCELS_OFFSET + 16));
        buf.extend_from_slice(&[0; FRAME_HEADROOM]);
        buf.push(WIRE_VERSION);
        buf.push(KIND_PARCELS);
        buf.extend_from_slice(&source.get().to_le_bytes());
        buf.push(kind as u8);
        buf.extend_from_slice(&action.to_bits().to_le_bytes());
        buf.extend_from_slice(&[0; 8]); // count and length, set by `finish`
        debug_assert_eq!(buf.len(), PARCELS_OFFSET);
        debug_assert_eq!(
            &buf[SOURCE_OFFSET..SOURCE_OFFSET + 4],
            &source.get().to_le_bytes()
        );
        FrameBuilder {
            buf,
            source,
            kind,
            action,
            count: 0,
            payload: 0,
        }
    }

    /// Starts a frame with a small buffer: for a parcel that travels alone.
    pub(crate) fn new(source: LocalityId, kind: RunKind, action: ActionId) -> Self {
        Self::with_capacity(source, kind, action, 64)
    }

    /// The sender written in the header.
    pub(crate) fn source(&self) -> LocalityId {
        self.source
    }

    /// The kind of the run.
    pub(crate) fn kind(&self) -> RunKind {
        self.kind
    }

    /// Says whether the responses to this frame's calls may wait for
    /// company at the responder (the run kind's [`RESPONSES_WAIT`] bit):
    /// their caller awaits each with many others. Only a run of calls
    /// carries it; for another kind this does nothing.
    pub(crate) fn set_responses_wait(&mut self, wait: bool) {
        if self.kind == RunKind::Calls {
            self.buf[FRAME_HEADER] = RunKind::Calls as u8 | if wait { RESPONSES_WAIT } else { 0 };
        }
    }

    /// Whether the responses to this frame's calls may wait (see
    /// [`set_responses_wait`](Self::set_responses_wait)).
    pub(crate) fn responses_wait(&self) -> bool {
        self.buf[FRAME_HEADER] & RESPONSES_WAIT != 0
    }

    /// The action of the run.
    pub(crate) fn action(&self) -> ActionId {
        self.action
    }

    /// Number of parcels so far.
    pub(crate) fn len(&self) -> u32 {
        self.count
    }

    /// Whether the frame holds no parcel.
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of the frame so far, headroom included.
    pub(crate) fn byte_len(&self) -> usize {
        self.buf.len()
    }

    /// Bytes of arguments and results pushed so far.
    pub(crate) fn payload_bytes(&self) -> u64 {
        self.payload
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
        let tail_len = self.buf.len() - mark.len;
        let mut tail = FrameBuilder::with_capacity(
            self.source,
            self.kind,
            self.action,
            PARCELS_OFFSET + tail_len,
        );
        tail.set_responses_wait(self.responses_wait());
        tail.buf.extend_from_slice(&self.buf[mark.len..]);
        tail.count = self.count - mark.count;
        tail.payload = self.payload - mark.payload;
        self.rewind(mark);
        tail
    }

    /// Drops the parcels appended after `mark`.
    fn rewind(&mut self, mark: FrameMark) {
        self.buf.truncate(mark.len);
        self.count = mark.count;
        self.payload = mark.payload;
    }

    /// Appends a call whose arguments are encoded straight into the frame.
    #[inline]
    pub(crate) fn push_call<T: Serialize + ?Sized>(
        &mut self,
        reply: ReplyTo,
        args: &T,
    ) -> Result<(), EncodeError> {
        let mark = self.mark();
        self.put_reply(reply, false);
        self.put_encoded(args).inspect_err(|_| self.rewind(mark))?;
        self.count += 1;
        Ok(())
    }

    /// Appends a whole encoded call (reply, length, arguments) as a routed
    /// parcel carried it: a call forwarded by an intermediate locality.
    pub(crate) fn push_forwarded(&mut self, call: &[u8]) {
        self.buf.extend_from_slice(call);
        self.payload += call.len() as u64;
        self.count += 1;
    }

    /// Appends a call for `dest` that the receiver forwards. Its reply names
    /// the caller explicitly: the forwarded call reaches `dest` in a frame
    /// from the intermediate locality.
    pub(crate) fn push_routed<T: Serialize + ?Sized>(
        &mut self,
        dest: LocalityId,
        reply: ReplyTo,
        args: &T,
    ) -> Result<(), EncodeError> {
        let mark = self.mark();
        self.buf.extend_from_slice(&dest.get().to_le_bytes());
        // The call's length prefix: one byte now, widened when needed.
        let len_at = self.buf.len();
        self.buf.push(0);
        let start = self.buf.len();
        self.put_reply(reply, true);
        let encoded = self.put_encoded(args);
        let len = self.buf.len() - start;
        match encoded.and_then(|()| self.patch_len(len_at, len)) {
            Ok(()) => {
                self.count += 1;
                Ok(())
            }
            Err(e) => {
                self.rewind(mark);
                Err(e)
            }
        }
    }

    /// Appends the result of a call: the output encoded straight into the frame.
    pub(crate) fn push_response<T: Serialize + ?Sized>(
        &mut self,
        caller: Caller,
        output: &T,
    ) -> Result<(), EncodeError> {
        let mark = self.mark();
        self.put_response_header(caller, 0);
        self.put_encoded(output)
            .inspect_err(|_| self.rewind(mark))?;
        self.count += 1;
        Ok(())
    }

    /// Appends a response saying why a call produced no result.
    pub(crate) fn push_failure(&mut self, caller: Caller, error: &RemoteError) {
        self.put_response_header(caller, 1);
        let encoded = postcard::to_allocvec(error)
            .unwrap_or_else(|_| unreachable!("RemoteError always encodes"));
        // A RemoteError holds at most a panic message: far below 4 GiB.
        self.put_bytes(encoded.len() as u32, &encoded);
        self.count += 1;
    }

    /// Finishes the frame (headroom included).
    pub(crate) fn finish(mut self) -> Vec<u8> {
        let body = (self.buf.len() - PARCELS_OFFSET) as u32;
        self.buf[COUNT_OFFSET..COUNT_OFFSET + 4].copy_from_slice(&self.count.to_le_bytes());
        self.buf[LEN_OFFSET..LEN_OFFSET + 4].copy_from_slice(&body.to_le_bytes());
        self.buf
    }

    fn put_response_header(&mut self, caller: Caller, status: u8) {
        self.buf.extend_from_slice(&caller.request.to_le_bytes());
        put_varint(&mut self.buf, caller.part);
        self.buf.push(status);
    }

    #[inline]
    fn put_reply(&mut self, reply: ReplyTo, explicit: bool) {
        if reply
            == (ReplyTo::Post {
                origin: self.source,
            })
            && !explicit
        {
            // A post from this frame's sender: the tag alone.
            self.buf.push(REPLY_NOBODY);
            return;
        }
        self.put_reply_to(reply, explicit);
    }

    /// Every reply but a post from this frame's sender, which
    /// [`put_reply`](Self::put_reply) writes itself.
    fn put_reply_to(&mut self, reply: ReplyTo, explicit: bool) {
        let buf = &mut self.buf;
        let caller = |buf: &mut Vec<u8>, c: Caller| {
            buf.extend_from_slice(&c.locality.get().to_le_bytes());
            buf.extend_from_slice(&c.request.to_le_bytes());
            put_varint(buf, c.part);
        };
        match reply {
            ReplyTo::Post { origin } => {
                buf.push(REPLY_POST_FROM);
                buf.extend_from_slice(&origin.get().to_le_bytes());
            }
            ReplyTo::Caller(c) if c.locality == self.source && !explicit => {
                buf.push(REPLY_SOURCE);
                buf.extend_from_slice(&c.request.to_le_bytes());
                put_varint(buf, c.part);
            }
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

    fn put_bytes(&mut self, len: u32, bytes: &[u8]) {
        put_varint(&mut self.buf, len);
        self.buf.extend_from_slice(bytes);
        self.payload += u64::from(len);
    }

    /// Encodes `value` behind a varint length: one byte is reserved for
    /// the length, and widened (moving the value) only for a value of 128
    /// bytes or more.
    #[inline]
    fn put_encoded<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        // Room for the length and a small value, so that the encoder's
        // pushes do not grow the vector one by one.
        self.buf.reserve(SMALL_VALUE);
        let len_at = self.buf.len();
        self.buf.push(0);
        if let Err(e) = super::encode::encode(value, &mut self.buf) {
            self.buf.truncate(len_at);
            return Err(EncodeError::Serialize(e.to_string()));
        }
        let len = self.buf.len() - len_at - 1;
        if let Err(e) = self.patch_len(len_at, len) {
            self.buf.truncate(len_at);
            return Err(e);
        }
        self.payload += len as u64;
        Ok(())
    }

    /// Writes `len` as the varint at `at`, which holds one reserved byte
    /// followed by the `len` bytes it counts (moved when the varint needs
    /// more than one byte).
    #[inline]
    fn patch_len(&mut self, at: usize, len: usize) -> Result<(), EncodeError> {
        if len < 0x80 {
            // The common case: the reserved byte holds it.
            self.buf[at] = len as u8;
            return Ok(());
        }
        self.widen_len(at, len)
    }

    /// [`patch_len`](Self::patch_len) for a length of two bytes or more.
    #[cold]
    fn widen_len(&mut self, at: usize, len: usize) -> Result<(), EncodeError> {
        let value = u32::try_from(len).map_err(|_| EncodeError::TooLarge(len))?;
        let width = varint_len(value);
        let end = self.buf.len();
        self.buf.resize(end + width - 1, 0);
        self.buf.copy_within(at + 1..end, at + width);
        let mut varint = [0u8; VARINT_MAX];
        write_varint(&mut varint, value);
        self.buf[at..at + width].copy_from_slice(&varint[..width]);
        Ok(())
    }
}

/// Encodes a control frame.
pub(crate) fn encode_control(source: LocalityId, control: &super::wire::Control) -> Vec<u8> {
    let mut buf = Vec::with_capacity(32);
    buf.extend_from_slice(&[0; FRAME_HEADROOM]);
    buf.push(WIRE_VERSION);
    buf.push(super::wire::KIND_CONTROL);
    buf.extend_from_slice(&source.get().to_le_bytes());
    super::encode::encode(control, &mut buf)
        .unwrap_or_else(|_| unreachable!("control messages always encode"));
    buf
}

/// Arguments already encoded, serialized as themselves (a tuple of bytes
/// has no length prefix in postcard's format): what the frame tests and
/// the fuzz harness push to build frames of given bytes.
#[cfg(any(test, feature = "test-hooks"))]
pub(super) struct Raw<'a>(pub(super) &'a [u8]);

#[cfg(any(test, feature = "test-hooks"))]
impl Serialize for Raw<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let mut t = s.serialize_tuple(self.0.len())?;
        for b in self.0 {
            t.serialize_element(b)?;
        }
        t.end()
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::{
        Control, DecodeError, FrameBody, ParcelReader, Run, decode_call, decode_frame,
    };
    use super::*;
    use proptest::prelude::*;

    /// A parcel as a test writes and reads it.
    #[derive(Debug, Clone, PartialEq)]
    enum Parcel {
        Call(ReplyTo, Vec<u8>),
        Response(Caller, Result<Vec<u8>, RemoteError>),
        Routed(LocalityId, ReplyTo, Vec<u8>),
    }

    fn locality() -> impl Strategy<Value = LocalityId> {
        (0u32..1024).prop_map(LocalityId::new)
    }

    fn caller() -> impl Strategy<Value = Caller> {
        (locality(), any::<u64>(), any::<u32>()).prop_map(|(locality, request, part)| Caller {
            locality,
            request,
            part,
        })
    }

    fn reply() -> impl Strategy<Value = ReplyTo> {
        prop_oneof![
            locality().prop_map(|origin| ReplyTo::Post { origin }),
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

    /// Argument bytes: mostly small, sometimes longer than a one-byte length.
    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => proptest::collection::vec(any::<u8>(), 0..16),
            1 => proptest::collection::vec(any::<u8>(), 100..20_000),
        ]
    }

    /// A run of one kind: the parcels of a buffer.
    fn run() -> impl Strategy<Value = (RunKind, Vec<Parcel>)> {
        prop_oneof![
            proptest::collection::vec(
                (reply(), bytes()).prop_map(|(r, b)| Parcel::Call(r, b)),
                0..12
            )
            .prop_map(|p| (RunKind::Calls, p)),
            proptest::collection::vec(
                (
                    caller(),
                    prop_oneof![bytes().prop_map(Ok), remote_error().prop_map(Err)]
                )
                    .prop_map(|(c, r)| Parcel::Response(c, r)),
                0..12
            )
            .prop_map(|p| (RunKind::Responses, p)),
            proptest::collection::vec(
                (locality(), reply(), bytes()).prop_map(|(d, r, b)| Parcel::Routed(d, r, b)),
                0..12
            )
            .prop_map(|p| (RunKind::Routed, p)),
        ]
    }

    fn build(source: LocalityId, kind: RunKind, parcels: &[Parcel]) -> FrameBuilder {
        let mut frame = FrameBuilder::new(source, kind, ActionId::from_bits(42));
        for p in parcels {
            match p {
                Parcel::Call(reply, args) => frame.push_call(*reply, &Raw(args)).unwrap(),
                Parcel::Response(caller, Ok(out)) => {
                    frame.push_response(*caller, &Raw(out)).unwrap()
                }
                Parcel::Response(caller, Err(e)) => frame.push_failure(*caller, e),
                Parcel::Routed(dest, reply, args) => {
                    frame.push_routed(*dest, *reply, &Raw(args)).unwrap()
                }
            }
        }
        frame
    }

    fn read(source: LocalityId, body: &[u8], run: &Run) -> Vec<Parcel> {
        let mut parcels = Vec::new();
        let mut r = ParcelReader::new(&body[run.body.clone()], run.count, source);
        match run.kind {
            RunKind::Calls => {
                while let Some(call) = r.next_call().unwrap() {
                    parcels.push(Parcel::Call(call.reply, call.args.to_vec()));
                }
            }
            RunKind::Responses => {
                while let Some(resp) = r.next_response().unwrap() {
                    let caller = Caller {
                        locality: source,
                        request: resp.request,
                        part: resp.part,
                    };
                    parcels.push(Parcel::Response(caller, resp.result.map(<[u8]>::to_vec)));
                }
            }
            RunKind::Routed => {
                while let Some(routed) = r.next_routed().unwrap() {
                    let call = decode_call(routed.call, LocalityId::new(u32::MAX)).unwrap();
                    parcels.push(Parcel::Routed(routed.dest, call.reply, call.args.to_vec()));
                }
            }
        }
        r.finish().unwrap();
        parcels
    }

    /// Responses are read back with the frame's source as their locality.
    fn as_read(source: LocalityId, parcels: &[Parcel]) -> Vec<Parcel> {
        parcels
            .iter()
            .cloned()
            .map(|p| match p {
                Parcel::Response(c, r) => Parcel::Response(
                    Caller {
                        locality: source,
                        ..c
                    },
                    r,
                ),
                other => other,
            })
            .collect()
    }

    proptest! {
        #[test]
        fn runs_round_trip(source in locality(), (kind, parcels) in run(), wait in any::<bool>()) {
            let mut frame = build(source, kind, &parcels);
            frame.set_responses_wait(wait);
            let frame = frame.finish();
            let body = &frame[FRAME_HEADROOM..];
            let (from, decoded) = decode_frame(body).unwrap();
            prop_assert_eq!(from, source);
            let FrameBody::Parcels(mut runs) = decoded else { panic!("not a parcel frame") };
            let run = runs.next_run().unwrap().unwrap();
            prop_assert_eq!((run.kind, run.action, run.count), (kind, ActionId::from_bits(42), parcels.len() as u32));
            prop_assert_eq!(run.responses_wait, wait && kind == RunKind::Calls, "only calls carry it");
            prop_assert_eq!(read(source, body, &run), as_read(source, &parcels));
            prop_assert!(runs.next_run().unwrap().is_none());
        }

        #[test]
        fn split_frames_hold_both_halves((kind, parcels) in run(), at in any::<prop::sample::Index>(), wait in any::<bool>()) {
            let source = LocalityId::new(3);
            let at = at.index(parcels.len() + 1);
            let mut whole = build(source, kind, &parcels[..at]);
            whole.set_responses_wait(wait);
            let mark = whole.mark();
            for p in &parcels[at..] {
                let one = build(source, kind, std::slice::from_ref(p)).finish();
                whole.buf.extend_from_slice(&one[PARCELS_OFFSET..]);
                whole.count += 1;
            }
            let tail = whole.split_off(mark);
            for (f, expected) in [(whole, &parcels[..at]), (tail, &parcels[at..])] {
                let bytes = f.finish();
                let body = &bytes[FRAME_HEADROOM..];
                let (_, decoded) = decode_frame(body).unwrap();
                let FrameBody::Parcels(mut runs) = decoded else { panic!("not a parcel frame") };
                let run = runs.next_run().unwrap().unwrap();
                prop_assert_eq!(run.responses_wait, wait && kind == RunKind::Calls);
                prop_assert_eq!(read(source, body, &run), as_read(source, expected));
            }
        }

        #[test]
        fn truncated_frames_are_errors((kind, parcels) in run(), cut in any::<prop::sample::Index>()) {
            prop_assume!(!parcels.is_empty());
            let source = LocalityId::new(1);
            let frame = build(source, kind, &parcels).finish();
            let body = &frame[FRAME_HEADROOM..];
            let cut = cut.index(body.len());
            let truncated = &body[..cut];
            let failed = match decode_frame(truncated) {
                Err(_) => true,
                Ok((_, FrameBody::Parcels(mut runs))) => match runs.next_run() {
                    Err(_) => true,
                    // Only an empty body decodes: nothing was cut from a run.
                    Ok(run) => run.is_none() && cut < body.len(),
                },
                Ok((_, FrameBody::Control(_))) => false,
            };
            prop_assert!(failed, "cut at {} of {}", cut, body.len());
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), count in 0u32..50) {
            if let Ok((source, FrameBody::Parcels(mut runs))) = decode_frame(&bytes) {
                while let Ok(Some(run)) = runs.next_run() {
                    for kind in RunKind::ALL {
                        let mut r = ParcelReader::new(&bytes[run.body.clone()], count, source);
                        match kind {
                            RunKind::Calls => while let Ok(Some(_)) = r.next_call() {},
                            RunKind::Responses => while let Ok(Some(_)) = r.next_response() {},
                            RunKind::Routed => while let Ok(Some(_)) = r.next_routed() {},
                        }
                    }
                }
            }
            let mut r = ParcelReader::new(&bytes, count, LocalityId::new(0));
            while let Ok(Some(_)) = r.next_call() {}
            let _ = decode_call(&bytes, LocalityId::new(0));
        }

        #[test]
        fn typed_args_match_postcard(value in any::<(u64, String, Vec<i32>)>(), reply in reply()) {
            let mut frame = FrameBuilder::new(LocalityId::new(0), RunKind::Calls, ActionId::from_bits(7));
            frame.push_call(reply, &value).unwrap();
            let bytes = frame.finish();
            let body = &bytes[FRAME_HEADROOM..];
            let Ok((source, FrameBody::Parcels(mut runs))) = decode_frame(body) else { panic!("not a parcel frame") };
            let run = runs.next_run().unwrap().unwrap();
            let mut r = ParcelReader::new(&body[run.body], 1, source);
            let call = r.next_call().unwrap().unwrap();
            prop_assert_eq!(call.reply, reply);
            prop_assert_eq!(call.args, &postcard::to_allocvec(&value).unwrap()[..]);
            prop_assert_eq!(r.payload_bytes(), call.args.len() as u64);
        }
    }

    #[test]
    fn a_failed_encoding_leaves_the_frame_as_it_was() {
        struct Fails;
        impl Serialize for Fails {
            fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(serde::ser::Error::custom("no"))
            }
        }
        let mut frame =
            FrameBuilder::new(LocalityId::new(0), RunKind::Calls, ActionId::from_bits(7));
        frame
            .push_call(
                ReplyTo::Post {
                    origin: LocalityId::ROOT,
                },
                &5u8,
            )
            .unwrap();
        let before = (frame.byte_len(), frame.len(), frame.payload_bytes());
        assert!(
            frame
                .push_call(
                    ReplyTo::Post {
                        origin: LocalityId::ROOT
                    },
                    &Fails
                )
                .is_err()
        );
        assert!(
            frame
                .push_routed(
                    LocalityId::new(2),
                    ReplyTo::Post {
                        origin: LocalityId::ROOT
                    },
                    &Fails
                )
                .is_err()
        );
        assert_eq!(
            (frame.byte_len(), frame.len(), frame.payload_bytes()),
            before
        );
        frame
            .push_call(
                ReplyTo::Post {
                    origin: LocalityId::ROOT,
                },
                &6u8,
            )
            .unwrap();
        assert_eq!(frame.len(), 2);
    }

    #[test]
    fn a_call_to_the_source_elides_the_caller() {
        let source = LocalityId::new(5);
        let mut frame = FrameBuilder::new(source, RunKind::Calls, ActionId::from_bits(7));
        let caller = Caller {
            locality: source,
            request: 9,
            part: 0,
        };
        frame.push_call(ReplyTo::Caller(caller), &1u8).unwrap();
        // tag, request (8), part (1), length (1), argument (1)
        assert_eq!(frame.byte_len(), FRAME_HEADER + super::RUN_HEADER + 12);
        frame
            .push_call(ReplyTo::Post { origin: source }, &1u8)
            .unwrap();
        // A post from the source: the tag, the length and the argument.
        assert_eq!(frame.byte_len(), FRAME_HEADER + super::RUN_HEADER + 15);
        // A post of another locality names it.
        let other = LocalityId::new(source.get() + 1);
        frame
            .push_call(ReplyTo::Post { origin: other }, &1u8)
            .unwrap();
        assert_eq!(frame.byte_len(), FRAME_HEADER + super::RUN_HEADER + 22);
    }

    #[test]
    fn control_round_trips() {
        use super::super::wire::ActivityCounts;
        let msg = Control::QuiescenceReport {
            wave: 3,
            counts: ActivityCounts {
                parcels_sent: 1,
                parcels_received: 2,
                tasks_spawned: 3,
                tasks_finished: 4,
                parcel_work_started: 5,
                parcel_work_finished: 6,
            },
        };
        let frame = encode_control(LocalityId::new(2), &msg);
        let (from, body) = decode_frame(&frame[FRAME_HEADROOM..]).unwrap();
        assert_eq!(from, LocalityId::new(2));
        assert_eq!(body, FrameBody::Control(msg));
    }

    #[test]
    fn only_a_run_of_calls_may_let_its_responses_wait() {
        for kind in RunKind::ALL {
            let mut frame = FrameBuilder::new(LocalityId::new(0), kind, ActionId::from_bits(1));
            frame.set_responses_wait(true);
            let mut bytes = frame.finish();
            bytes[PARCELS_OFFSET - RUN_HEADER] = kind as u8 | RESPONSES_WAIT;
            let Ok((_, FrameBody::Parcels(mut runs))) = decode_frame(&bytes[FRAME_HEADROOM..])
            else {
                panic!("the frame header is fine")
            };
            match (kind, runs.next_run()) {
                (RunKind::Calls, Ok(Some(run))) => assert!(run.responses_wait),
                (RunKind::Calls, other) => panic!("a run of calls may: {other:?}"),
                (_, Err(DecodeError::Tag { what: "run", .. })) => {}
                (_, other) => panic!("{kind:?} may not: {other:?}"),
            }
        }
    }

    #[test]
    fn wrong_version_is_refused() {
        let mut frame =
            FrameBuilder::new(LocalityId::new(0), RunKind::Calls, ActionId::from_bits(1)).finish();
        frame[FRAME_HEADROOM] = WIRE_VERSION + 1;
        assert!(matches!(
            decode_frame(&frame[FRAME_HEADROOM..]),
            Err(super::super::wire::DecodeError::Version { found }) if found == WIRE_VERSION + 1
        ));
    }

    #[test]
    fn a_count_the_body_cannot_hold_is_an_error() {
        let mut frame =
            FrameBuilder::new(LocalityId::new(0), RunKind::Calls, ActionId::from_bits(1));
        frame
            .push_call(
                ReplyTo::Post {
                    origin: LocalityId::ROOT,
                },
                &1u8,
            )
            .unwrap();
        let mut bytes = frame.finish();
        bytes[COUNT_OFFSET..COUNT_OFFSET + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let body = &bytes[FRAME_HEADROOM..];
        let Ok((source, FrameBody::Parcels(mut runs))) = decode_frame(body) else {
            panic!()
        };
        let run = runs.next_run().unwrap().unwrap();
        let mut r = ParcelReader::new(&body[run.body], run.count, source);
        assert!(r.next_call().unwrap().is_some());
        assert!(
            r.next_call().is_err(),
            "the second of u32::MAX calls is not there"
        );
    }
}
