//! Segmented and vector calls (seed 002, Zhao, Balaji, Gropp, Thakur):
//! what travels and where the output lands.
//!
//! A segmented call ([`Runtime::call_segments`](crate::Runtime::call_segments))
//! has a sequence of *segments* as input: the smallest unit the runtime may
//! split it at. It travels as *pipeline units*, each a whole number of
//! segments ([`SegmentUnit`]); the handler runs once per unit, as units
//! arrive, and returns up to `max_out` items per segment
//! ([`SegmentOutput`], the vector AM's output with its per-segment counts).
//!
//! At the origin every segment has a fixed place for its output,
//! `max_out` items wide (seed 002 Fig. 4b), so units that finish out of
//! order are copied in place with no reordering ([`SegmentResults`]).
//! The target packs a unit's output (only the items produced, after the
//! counts) when less than `pack_below` of its slots are used, and sends
//! the whole slot array otherwise (the paper's threshold, default 0.8):
//! the origin then copies the unit's block in one piece.

use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::DeserializeOwned;
use serde::ser::SerializeTuple;
use serde::{Deserialize, Serialize};

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::error::{CallError, Failure};
use super::pending::{BatchSink, PendingCall};
use crate::ids::LocalityId;

/// The most output slots (segments × `max_out`) one unit may ask its
/// target for; keep `max_out` × the segments of a unit below it.
pub const MAX_UNIT_SLOTS: usize = 1 << 24;

/// The default `pack_below` of [`SegmentOptions`]: seed 002's 0.8.
pub const DEFAULT_PACK_BELOW: f32 = 0.8;

/// How a segmented call travels and what it returns: see
/// [`Runtime::call_segments`](crate::Runtime::call_segments).
///
/// ```
/// let options = courier::SegmentOptions::new(10).pack_below(1.0);
/// assert_eq!(options.max_out(), 10);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SegmentOptions {
    max_out: u32,
    pack_below: f32,
    unit_bytes: Option<usize>,
}

impl SegmentOptions {
    /// At most `max_out` output items per segment (the size of each
    /// segment's place at the origin). A unit holds at most
    /// [`MAX_UNIT_SLOTS`] / `max_out` segments.
    pub fn new(max_out: u32) -> Self {
        SegmentOptions {
            max_out,
            pack_below: DEFAULT_PACK_BELOW,
            unit_bytes: None,
        }
    }

    /// Packs a unit's output when less than this fraction of its slots
    /// is used, sends all its slots otherwise: 0.8 by default (seed 002),
    /// 1.0 always packs (AMV(1.0)), 0.0 never does (a plain AM's output).
    pub fn pack_below(mut self, fraction: f32) -> Self {
        self.pack_below = fraction;
        self
    }

    /// The input bytes of one pipeline unit, at most (a unit has at least
    /// one segment). Default: a quarter of the credit window, so that four
    /// units are in flight; 256 KiB without flow control.
    pub fn unit_bytes(mut self, bytes: usize) -> Self {
        self.unit_bytes = Some(bytes.max(1));
        self
    }

    /// The most output items per segment.
    pub fn max_out(&self) -> u32 {
        self.max_out
    }

    /// The packing threshold.
    pub fn packing_threshold(&self) -> f32 {
        self.pack_below
    }

    pub(crate) fn unit_bytes_or(&self, default: usize) -> usize {
        self.unit_bytes.unwrap_or(default)
    }
}

/// One pipeline unit of a segmented call, as its handler receives it: a
/// whole number of consecutive segments.
///
/// # Examples
///
/// ```
/// use courier::{SegmentOutput, SegmentUnit};
///
/// /// For every number, its absolute value (one output item per segment).
/// #[courier::action]
/// fn absolute(unit: SegmentUnit<i32>) -> SegmentOutput<i32> {
///     let mut out = unit.output();
///     for (i, x) in unit.segments().iter().enumerate() {
///         out.push(i, x.abs()).unwrap();
///     }
///     out
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentUnit<S> {
    first: u64,
    max_out: u32,
    pack_below: f32,
    segments: Vec<S>,
}

impl<S> SegmentUnit<S> {
    /// The index, in the whole call, of this unit's first segment.
    pub fn first(&self) -> u64 {
        self.first
    }

    /// The unit's segments.
    pub fn segments(&self) -> &[S] {
        &self.segments
    }

    /// The unit's segments, owned.
    pub fn into_segments(self) -> Vec<S> {
        self.segments
    }

    /// An empty output for this unit: `max_out` slots per segment, packed
    /// or sent whole as the call asked.
    ///
    /// # Panics
    ///
    /// Panics (failing this call only, as any panic of a handler does) if
    /// the unit asks for more than [`MAX_UNIT_SLOTS`] slots: a unit from a
    /// broken or hostile caller must not make the target allocate without
    /// bound.
    pub fn output<U: Default + Clone>(&self) -> SegmentOutput<U> {
        let slots = self
            .segments
            .len()
            .checked_mul(self.max_out as usize)
            .filter(|&slots| slots <= MAX_UNIT_SLOTS)
            .unwrap_or_else(|| {
                panic!(
                    "a unit of {} segments of {} output items each is above {MAX_UNIT_SLOTS} slots",
                    self.segments.len(),
                    self.max_out
                )
            });
        SegmentOutput {
            max_out: self.max_out,
            pack_below: self.pack_below,
            counts: vec![0; self.segments.len()],
            slots: vec![U::default(); slots],
        }
    }
}

/// A unit as the origin sends it: the same bytes as a [`SegmentUnit`],
/// borrowing the caller's segments.
#[derive(Debug, Serialize)]
pub(crate) struct SegmentUnitRef<'a, S> {
    pub(crate) first: u64,
    pub(crate) max_out: u32,
    pub(crate) pack_below: f32,
    pub(crate) segments: &'a [S],
}

/// Splits `segments` into pipeline units of at most `unit_bytes` encoded
/// bytes and `max_out` × segments ≤ [`MAX_UNIT_SLOTS`] each (at least one
/// segment each): the first segment of every unit, then the number of
/// segments.
pub(crate) fn split_units<S: Serialize>(
    segments: &[S],
    unit_bytes: usize,
    max_out: u32,
) -> Result<Vec<u64>, super::EncodeError> {
    let most = (MAX_UNIT_SLOTS / (max_out as usize).max(1)).max(1);
    let mut bounds = vec![0];
    let mut scratch = Vec::new();
    let mut bytes = 0;
    let mut first = 0;
    for (i, segment) in segments.iter().enumerate() {
        scratch.clear();
        super::encode::encode(segment, &mut scratch)
            .map_err(|e| super::EncodeError::Serialize(e.to_string()))?;
        if bytes > 0 && (bytes + scratch.len() > unit_bytes || i - first == most) {
            bounds.push(i as u64);
            bytes = 0;
            first = i;
        }
        bytes += scratch.len();
    }
    if !segments.is_empty() {
        bounds.push(segments.len() as u64);
    }
    Ok(bounds)
}

/// Returned by [`SegmentOutput::push`] when a segment's slots are full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("segment {segment} already has its {max_out} output items")]
pub struct SegmentFull {
    /// The segment, within its unit.
    pub segment: usize,
    /// Its slots.
    pub max_out: u32,
}

/// What a segmented call's handler returns for one unit: up to `max_out`
/// items per segment, each segment at its own slots.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentOutput<U> {
    max_out: u32,
    pack_below: f32,
    counts: Vec<u32>,
    slots: Vec<U>,
}

impl<U> SegmentOutput<U> {
    /// Appends `item` to the output of segment `segment` (its index within
    /// the unit).
    ///
    /// # Panics
    ///
    /// Panics if the unit has no segment `segment`.
    pub fn push(&mut self, segment: usize, item: U) -> Result<(), SegmentFull> {
        let count = self.counts[segment];
        if count >= self.max_out {
            return Err(SegmentFull {
                segment,
                max_out: self.max_out,
            });
        }
        self.slots[segment * self.max_out as usize + count as usize] = item;
        self.counts[segment] = count + 1;
        Ok(())
    }

    /// The items produced for segment `segment` so far.
    pub fn segment(&self, segment: usize) -> &[U] {
        let start = segment * self.max_out as usize;
        &self.slots[start..start + self.counts[segment] as usize]
    }

    /// Items produced per segment.
    pub fn counts(&self) -> &[u32] {
        &self.counts
    }

    /// Whether it travels packed: fewer than `pack_below` of its slots used.
    fn packed(&self) -> bool {
        let used: u64 = self.counts.iter().map(|&c| u64::from(c)).sum();
        // In f32, as the threshold is given: 0.8 × 40 is 32, not 32.0000005.
        (used as f32) < self.pack_below * self.slots.len() as f32
    }
}

/// Items of one output as they travel: the used ones (packed) or all slots.
struct Items<'a, U> {
    output: &'a SegmentOutput<U>,
    packed: bool,
}

impl<U: Serialize> Serialize for Items<'_, U> {
    fn serialize<Z: serde::Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        use serde::ser::SerializeSeq;
        let o = self.output;
        if !self.packed {
            return o.slots.serialize(serializer);
        }
        let used: u64 = o.counts.iter().map(|&c| u64::from(c)).sum();
        let mut seq = serializer.serialize_seq(Some(used as usize))?;
        for segment in 0..o.counts.len() {
            for item in o.segment(segment) {
                seq.serialize_element(item)?;
            }
        }
        seq.end()
    }
}

/// On the wire: the counts, whether the items are packed, the items.
impl<U: Serialize> Serialize for SegmentOutput<U> {
    fn serialize<Z: serde::Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        let packed = self.packed();
        let mut tuple = serializer.serialize_tuple(4)?;
        tuple.serialize_element(&self.max_out)?;
        tuple.serialize_element(&self.counts)?;
        tuple.serialize_element(&packed)?;
        tuple.serialize_element(&Items {
            output: self,
            packed,
        })?;
        tuple.end()
    }
}

/// An output as received: what the wire says, before it is laid out.
#[derive(Debug, Deserialize)]
struct Received<U> {
    max_out: u32,
    counts: Vec<u32>,
    packed: bool,
    items: Vec<U>,
}

impl<U> Received<U> {
    /// Checks that the counts and items agree with each other and with a
    /// unit of `segments` segments of at most `max_out` items.
    fn check(&self, segments: usize, max_out: u32) -> Result<(), String> {
        if self.max_out != max_out || self.counts.len() != segments {
            return Err(format!(
                "an output for {} segments of {} items, not {segments} of {max_out}",
                self.counts.len(),
                self.max_out
            ));
        }
        if let Some(c) = self.counts.iter().find(|&&c| c > max_out) {
            return Err(format!("a segment with {c} items, above max_out {max_out}"));
        }
        let used: usize = self.counts.iter().map(|&c| c as usize).sum();
        let expected = if self.packed {
            used
        } else {
            segments * max_out as usize
        };
        if self.items.len() != expected {
            return Err(format!(
                "{} items where {expected} were due",
                self.items.len()
            ));
        }
        Ok(())
    }
}

impl<'de, U: Deserialize<'de> + Default + Clone> Deserialize<'de> for SegmentOutput<U> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let r = Received::<U>::deserialize(deserializer)?;
        r.check(r.counts.len(), r.max_out)
            .map_err(serde::de::Error::custom)?;
        let slots = if r.packed {
            let mut slots = vec![U::default(); r.counts.len() * r.max_out as usize];
            let mut items = r.items.into_iter();
            for (segment, &count) in r.counts.iter().enumerate() {
                let start = segment * r.max_out as usize;
                for (slot, item) in slots[start..start + count as usize]
                    .iter_mut()
                    .zip(&mut items)
                {
                    *slot = item;
                }
            }
            slots
        } else {
            r.items
        };
        Ok(SegmentOutput {
            max_out: r.max_out,
            pack_below: DEFAULT_PACK_BELOW,
            counts: r.counts,
            slots,
        })
    }
}

/// Every output of a segmented call, each segment at its fixed place:
/// segment `i`'s items start at `i * max_out` of [`data`](Self::data).
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentResults<U> {
    max_out: u32,
    counts: Vec<u32>,
    data: Vec<U>,
}

impl<U> SegmentResults<U> {
    /// The output of segment `i`.
    pub fn segment(&self, i: usize) -> &[U] {
        let start = i * self.max_out as usize;
        &self.data[start..start + self.counts[i] as usize]
    }

    /// Items produced per segment.
    pub fn counts(&self) -> &[u32] {
        &self.counts
    }

    /// The output buffer: `max_out` places per segment, the unused ones
    /// holding `U::default()` or, where a unit came whole, what its
    /// handler left there.
    pub fn data(&self) -> &[U] {
        &self.data
    }

    /// The number of segments.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether the call had no segment.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

/// The future results of a segmented call
/// ([`Runtime::call_segments`](crate::Runtime::call_segments)).
///
/// Dropping it does not cancel the call; its results are then discarded.
#[must_use = "the results of a segmented call are lost unless its future is awaited"]
pub struct SegmentsFuture<U> {
    action: &'static str,
    dest: LocalityId,
    state: Option<Result<PendingCall, Failure>>,
    _output: PhantomData<fn() -> U>,
}

impl<U> std::fmt::Debug for SegmentsFuture<U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentsFuture")
            .field("action", &self.action)
            .field("dest", &self.dest)
            .finish_non_exhaustive()
    }
}

impl<U> SegmentsFuture<U> {
    pub(crate) fn remote(action: &'static str, dest: LocalityId, call: PendingCall) -> Self {
        SegmentsFuture {
            action,
            dest,
            state: Some(Ok(call)),
            _output: PhantomData,
        }
    }

    pub(crate) fn failed(action: &'static str, dest: LocalityId, failure: Failure) -> Self {
        SegmentsFuture {
            action,
            dest,
            state: Some(Err(failure)),
            _output: PhantomData,
        }
    }
}

impl<U> Unpin for SegmentsFuture<U> {}

impl<U: DeserializeOwned + Default + Clone + Send + 'static> Future for SegmentsFuture<U> {
    type Output = Result<SegmentResults<U>, CallError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let result = match &mut this.state {
            Some(Ok(call)) => match call.poll_sink::<SegmentSink<U>>(cx, this.dest) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(result) => result.map(|sink| sink.into_results()),
            },
            Some(Err(_)) => match this.state.take() {
                Some(Err(failure)) => Err((failure, this.dest)),
                _ => unreachable!("matched above"),
            },
            None => Err((Failure::ShuttingDown, this.dest)),
        };
        Poll::Ready(result.map_err(|(f, at)| CallError::new(this.action, at, f)))
    }
}

/// What the segmented calls of one locality did, for the `/segments`
/// counters (counted at the origin, which sees both the units it sent and
/// how their outputs came back).
#[derive(Debug, Default)]
pub(crate) struct SegmentStats {
    pub(crate) calls: AtomicU64,
    pub(crate) segments: AtomicU64,
    pub(crate) units: AtomicU64,
    pub(crate) units_packed: AtomicU64,
    pub(crate) units_whole: AtomicU64,
    pub(crate) bytes_packed: AtomicU64,
    pub(crate) bytes_whole: AtomicU64,
}

impl SegmentStats {
    /// A call of `segments` segments in `units` units went out.
    pub(crate) fn record_call(&self, segments: usize, units: usize) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.segments.fetch_add(segments as u64, Ordering::Relaxed);
        self.units.fetch_add(units as u64, Ordering::Relaxed);
    }
}

/// The results of a segmented call as units come back: each unit's
/// output is laid at its place the moment it arrives.
pub(crate) struct SegmentSink<U> {
    /// The first segment of each unit, then the number of segments.
    bounds: Vec<u64>,
    done: Vec<bool>,
    results: SegmentResults<U>,
    stats: Arc<SegmentStats>,
}

impl<U: Default + Clone> SegmentSink<U> {
    /// Room for the units starting at `bounds` (ending with the number of
    /// segments) of `max_out` items per segment.
    pub(crate) fn new(bounds: Vec<u64>, max_out: u32, stats: Arc<SegmentStats>) -> Self {
        let segments = bounds.last().copied().unwrap_or(0) as usize;
        SegmentSink {
            done: vec![false; bounds.len().saturating_sub(1)],
            bounds,
            results: SegmentResults {
                max_out,
                counts: vec![0; segments],
                data: vec![U::default(); segments * max_out as usize],
            },
            stats,
        }
    }

    /// The results, every unit in place.
    pub(crate) fn into_results(self) -> SegmentResults<U> {
        self.results
    }
}

impl<U: DeserializeOwned + Default + Clone + Send + 'static> BatchSink for SegmentSink<U> {
    fn put(&mut self, part: u32, bytes: &[u8]) -> Result<bool, Failure> {
        let unit = part as usize;
        if self.done.get(unit) != Some(&false) {
            return Ok(false);
        }
        let first = self.bounds[unit] as usize;
        let segments = self.bounds[unit + 1] as usize - first;
        let max = self.results.max_out as usize;
        let received: Received<U> =
            super::decode(bytes).map_err(|e| Failure::DecodeResult(e.to_string()))?;
        received
            .check(segments, self.results.max_out)
            .map_err(Failure::DecodeResult)?;
        let r = &mut self.results;
        r.counts[first..first + segments].copy_from_slice(&received.counts);
        let (units, bytes_counter) = if received.packed {
            let mut items = received.items.into_iter();
            for (i, &count) in received.counts.iter().enumerate() {
                let start = (first + i) * max;
                for (slot, item) in r.data[start..start + count as usize]
                    .iter_mut()
                    .zip(&mut items)
                {
                    *slot = item;
                }
            }
            (&self.stats.units_packed, &self.stats.bytes_packed)
        } else {
            // The unit's block, in one piece.
            let start = first * max;
            r.data[start..start + segments * max].clone_from_slice(&received.items);
            (&self.stats.units_whole, &self.stats.bytes_whole)
        };
        units.fetch_add(1, Ordering::Relaxed);
        bytes_counter.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        self.done[unit] = true;
        Ok(true)
    }

    fn truncate(&mut self, _parts: u32) {}

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(segments: usize, max_out: u32, pack_below: f32) -> SegmentUnit<u8> {
        SegmentUnit {
            first: 0,
            max_out,
            pack_below,
            segments: vec![0; segments],
        }
    }

    fn roundtrip(out: &SegmentOutput<u32>) -> (Received<u32>, usize) {
        let mut bytes = Vec::new();
        super::super::encode::encode(out, &mut bytes).unwrap();
        (super::super::decode(&bytes).unwrap(), bytes.len())
    }

    #[test]
    fn outputs_below_the_threshold_travel_packed_and_others_whole() {
        // 4 segments of 10: 40 slots; 31 used (77 %) is below 0.8.
        let mut out = unit(4, 10, 0.8).output::<u32>();
        for i in 0..31 {
            out.push(i % 4, i as u32).unwrap();
        }
        let (r, packed_len) = roundtrip(&out);
        assert!(r.packed);
        assert_eq!(r.items.len(), 31);
        out.push(3, 99).unwrap();
        let (r, whole_len) = roundtrip(&out);
        assert!(!r.packed, "32 of 40 is not below 0.8");
        assert_eq!(r.items.len(), 40);
        assert!(whole_len > packed_len);
        // 1.0 packs all but a full output; 0.0 never packs.
        let mut always = unit(1, 2, 1.0).output::<u32>();
        always.push(0, 1).unwrap();
        assert!(roundtrip(&always).0.packed);
        assert!(!roundtrip(&unit(1, 2, 0.0).output::<u32>()).0.packed);
    }

    #[test]
    fn units_hold_whole_segments_up_to_their_bytes() {
        let segments: Vec<Vec<u8>> = [3, 3, 3, 10, 1, 1].iter().map(|&n| vec![0; n]).collect();
        // Each encodes as its length byte and its bytes: 4 4 4 11 2 2.
        assert_eq!(split_units(&segments, 8, 1).unwrap(), [0, 2, 3, 4, 6]);
        assert_eq!(split_units(&segments, 1000, 1).unwrap(), [0, 6]);
        assert_eq!(split_units(&segments, 1, 1).unwrap(), [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(split_units::<u8>(&[], 8, 1).unwrap(), [0]);
        // At most MAX_UNIT_SLOTS / max_out segments a unit.
        let max_out = (MAX_UNIT_SLOTS / 2) as u32;
        assert_eq!(split_units(&segments, 1000, max_out).unwrap(), [0, 2, 4, 6]);
    }

    #[test]
    #[should_panic(expected = "above 16777216 slots")]
    fn a_unit_asking_for_too_many_slots_fails_instead_of_allocating() {
        let _ = unit(2, u32::MAX, 0.8).output::<u32>();
    }

    #[test]
    fn a_full_segment_refuses_more() {
        let mut out = unit(2, 1, 0.8).output::<u32>();
        out.push(1, 5).unwrap();
        assert_eq!(
            out.push(1, 6),
            Err(SegmentFull {
                segment: 1,
                max_out: 1
            })
        );
        assert_eq!(out.segment(1), [5]);
        assert_eq!(out.counts(), [0, 1]);
    }

    #[test]
    fn units_land_at_their_fixed_places_in_any_order() {
        let stats = Arc::new(SegmentStats::default());
        // Units: segments 0..2, 2..5, 5..6; 3 places each.
        let mut sink = SegmentSink::<u32>::new(vec![0, 2, 5, 6], 3, Arc::clone(&stats));
        let encode = |first: u64, n: usize, pack_below: f32| {
            let u = SegmentUnit {
                first,
                max_out: 3,
                pack_below,
                segments: vec![0u8; n],
            };
            let mut out = u.output::<u32>();
            for i in 0..n {
                for k in 0..=(i % 3) {
                    out.push(i, (first as u32 + i as u32) * 10 + k as u32)
                        .unwrap();
                }
            }
            let mut bytes = Vec::new();
            super::super::encode::encode(&out, &mut bytes).unwrap();
            bytes
        };
        assert_eq!(sink.put(2, &encode(5, 1, 0.8)), Ok(true));
        assert_eq!(sink.put(1, &encode(2, 3, 0.0)), Ok(true), "sent whole");
        assert_eq!(sink.put(1, &encode(2, 3, 0.0)), Ok(false), "a duplicate");
        assert_eq!(sink.put(0, &encode(0, 2, 1.0)), Ok(true));
        assert_eq!(sink.put(3, &encode(0, 2, 1.0)), Ok(false), "no such unit");
        // A unit of the wrong shape is an error.
        let mut wrong = SegmentSink::<u32>::new(vec![0, 2], 3, Arc::clone(&stats));
        assert!(wrong.put(0, &encode(0, 3, 0.8)).is_err());
        let results = sink.into_results();
        assert_eq!(results.len(), 6);
        // Segment g of a unit starting at f made (g - f) % 3 + 1 items
        // g * 10 + k, at its place g * 3.
        for (g, f) in [0, 0, 2, 2, 2, 5].into_iter().enumerate() {
            let want: Vec<u32> = (0..=((g - f) % 3) as u32)
                .map(|k| g as u32 * 10 + k)
                .collect();
            assert_eq!(results.segment(g), want.as_slice(), "segment {g}");
            assert_eq!(&results.data()[g * 3..g * 3 + want.len()], &want[..]);
        }
        assert_eq!(stats.units_whole.load(Ordering::Relaxed), 1);
        assert_eq!(stats.units_packed.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_packed_output_decodes_into_its_slots() {
        let mut out = unit(3, 4, 0.8).output::<u32>();
        out.push(0, 1).unwrap();
        out.push(2, 7).unwrap();
        out.push(2, 8).unwrap();
        let mut bytes = Vec::new();
        super::super::encode::encode(&out, &mut bytes).unwrap();
        let back: SegmentOutput<u32> = super::super::decode(&bytes).unwrap();
        assert_eq!(back.segment(0), [1]);
        assert_eq!(back.segment(1), [] as [u32; 0]);
        assert_eq!(back.segment(2), [7, 8]);
    }
}
