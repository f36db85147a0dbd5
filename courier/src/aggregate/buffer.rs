//! One coalescing buffer: the parcels of one action and kind waiting for
//! one destination on one worker, the setting that governs them, and what
//! they have done.
//!
//! The clock is read twice per frame, not per parcel: when the first parcel
//! enters an empty buffer (to arm the flush timer and to see whether the
//! traffic is sparse) and when the frame leaves. The arrival statistics are
//! built from those stamps: the gap before a frame's first parcel is
//! measured, and the gaps between its parcels are taken as evenly spread
//! between its first parcel and its departure.

use std::sync::Arc;

use parking_lot::Mutex;

use super::policy::{Coalescing, CountPolicy, Filled, FlushPolicy, Reason};
use crate::clock::{POLL_BUCKETS, poll_bucket};
use crate::parcel::{FRAME_HEADROOM, FrameBuilder};

/// Buckets of the arrival-gap histogram: powers of two of nanoseconds, as
/// for task polls (bucket `k` holds gaps of `2^(k-1)` to `2^k - 1` ns).
pub(crate) const GAP_BUCKETS: usize = POLL_BUCKETS;

/// What the buffers of one action have done; summed over destinations,
/// workers and kinds (calls, responses, routed calls) for the
/// `/coalescing` counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LaneStats {
    /// Parcels that went through a buffer (bypassed ones included).
    pub(crate) parcels: u64,
    /// Messages (frames) flushed.
    pub(crate) messages: u64,
    /// Flushes per [`Reason`].
    pub(crate) flushes: [u64; Reason::ALL.len()],
    /// Number and sum of the gaps between consecutive parcels.
    pub(crate) gaps: u64,
    pub(crate) gap_sum_ns: u64,
    /// Gaps per power-of-two bucket.
    pub(crate) gap_histogram: [u64; GAP_BUCKETS],
}

/// Awaited calls that left a set's buffers (in frames, or alone when
/// coalescing is off), and the sum of the moments they were issued, in ns
/// on the aggregator's clock (wrapping): each call of a frame is taken to
/// have come midway between the frame's first parcel and its departure,
/// as the gaps are. With the responses' arrivals, the integral of the
/// calls in flight (`runtime/tuning.rs`). Behind a small lock of their
/// own, outside the set's, taken once a frame: the tuning loop reads
/// them every epoch, on whichever thread sends, and taking a worker's
/// set from another thread would cost that worker a `membarrier` (an
/// interrupt of its core: a tail of 50–80 µs on 1 % of
/// the calls awaited one at a time, BENCHMARKS.md issue #15, eighth
/// part). One lock for both: a reading of the count without its moments
/// would be off by the time since the clock's start.
#[derive(Debug, Default)]
pub(crate) struct Departures(Mutex<(u64, u64)>);

impl Departures {
    /// Counts `calls` awaited calls issued at `issued_ns` that left.
    pub(crate) fn leave(&self, calls: u64, issued_ns: u64) {
        let mut departed = self.0.lock();
        departed.0 += calls;
        departed.1 = departed.1.wrapping_add(calls.wrapping_mul(issued_ns));
    }

    /// The calls that left, and the sum of their moments (wrapping).
    pub(crate) fn load(&self) -> (u64, u64) {
        *self.0.lock()
    }
}

impl Default for LaneStats {
    fn default() -> Self {
        LaneStats {
            parcels: 0,
            messages: 0,
            flushes: [0; Reason::ALL.len()],
            gaps: 0,
            gap_sum_ns: 0,
            gap_histogram: [0; GAP_BUCKETS],
        }
    }
}

impl LaneStats {
    /// Adds `other` to these.
    pub(crate) fn add(&mut self, other: &LaneStats) {
        self.parcels += other.parcels;
        self.messages += other.messages;
        for (a, b) in self.flushes.iter_mut().zip(&other.flushes) {
            *a += b;
        }
        self.gaps += other.gaps;
        self.gap_sum_ns += other.gap_sum_ns;
        for (a, b) in self.gap_histogram.iter_mut().zip(&other.gap_histogram) {
            *a += b;
        }
    }

    /// Counts `n` gaps of `gap_ns` each.
    fn add_gaps(&mut self, n: u64, gap_ns: u64) {
        if n > 0 {
            self.gaps += n;
            self.gap_sum_ns += n * gap_ns;
            self.gap_histogram[poll_bucket(gap_ns)] += n;
        }
    }
}

/// What a parcel into a non-empty buffer may do without the policy being
/// asked: below these it just stays. Derived from the setting (and the
/// receiver's frame limit) once, so that the common push is three
/// comparisons.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// Parcels below which the buffer stays: `setting_parcels`, or a part
    /// of a burst below it ([`Buffer::cut_at`]).
    parcels: u32,
    /// Parcels below which the buffer stays by its setting: a count
    /// policy's count, no bound for a byte policy (`u32::MAX`), 0 for off.
    setting_parcels: u32,
    /// Frame bytes below which the buffer stays with another parcel of
    /// the size of the last (the count policy's bound; the byte policy's
    /// threshold, which the policy checks without it when it is near).
    bytes: usize,
    /// Largest parcel that stays.
    parcel_bytes: usize,
}

impl Limits {
    fn of(setting: Coalescing, max_frame_bytes: usize) -> Self {
        // A frame above the receiver's limit must be split first.
        let frame = max_frame_bytes.saturating_add(FRAME_HEADROOM + 1);
        let (parcels, bytes, parcel_bytes) = match setting.in_force() {
            // `in_force` is never adaptive.
            Coalescing::Off | Coalescing::Adaptive(_) => (0, 0, 0),
            Coalescing::Count(p) => (p.num_parcels, p.max_bytes, usize::MAX),
            Coalescing::Bytes(p) => {
                let b = p.buffer_bytes as f64;
                // Flushed above threshold·b; sent at once above cutoff·b.
                let threshold = (p.threshold * b).floor() as usize + 1;
                let cutoff = (p.cutoff * b).floor() as usize;
                (u32::MAX, threshold, cutoff)
            }
        };
        Limits {
            parcels,
            setting_parcels: parcels,
            bytes: bytes.min(frame),
            parcel_bytes,
        }
    }
}

/// The parcels of one action and kind for one destination.
#[derive(Debug)]
pub(crate) struct Buffer {
    /// The parcels so far, already framed.
    pub(crate) frame: FrameBuilder,
    /// The setting for this action and destination.
    setting: Coalescing,
    limits: Limits,
    max_frame_bytes: usize,
    /// Deadline of this buffer's entry in the flush timer, if armed.
    pub(crate) armed: Option<u64>,
    /// Whether the buffer is on its set's list of buffers holding parcels.
    pub(crate) listed: bool,
    /// When the frame's first parcel came (ns on the aggregator's clock).
    first_ns: u64,
    /// The latest stamp of this buffer: the last frame's departure or the
    /// first parcel of the current frame.
    last_ns: Option<u64>,
    /// Size of the last frame flushed, to size the next one.
    last_frame_bytes: usize,
    /// Awaited calls in the frame.
    pub(crate) awaited: u32,
    pub(crate) stats: LaneStats,
    /// Where the awaited calls that leave this buffer are counted: its
    /// set's.
    pub(crate) departures: Arc<Departures>,
    /// The setting in force for this action and destination while the
    /// buffer holds its parcels under a count policy of its own instead
    /// (see [`escape`](Self::escape)).
    escaped_from: Option<Coalescing>,
}

impl Buffer {
    pub(crate) fn new(
        frame: FrameBuilder,
        setting: Coalescing,
        max_frame_bytes: usize,
        departures: Arc<Departures>,
    ) -> Self {
        Buffer {
            frame,
            setting,
            limits: Limits::of(setting, max_frame_bytes),
            max_frame_bytes,
            armed: None,
            listed: false,
            first_ns: 0,
            last_ns: None,
            last_frame_bytes: 0,
            awaited: 0,
            stats: LaneStats::default(),
            departures,
            escaped_from: None,
        }
    }

    /// The setting this buffer's parcels are held under: its own count
    /// policy while it is [`escaped`](Self::escaped).
    pub(crate) fn setting(&self) -> Coalescing {
        self.setting
    }

    /// The setting in force for this action and destination (the one
    /// [`set`](Self::set) last gave), also while the buffer is escaped.
    pub(crate) fn setting_in_force(&self) -> Coalescing {
        self.escaped_from.unwrap_or(self.setting)
    }

    /// Changes the setting of this buffer (the caller flushes it); an
    /// escape ends.
    pub(crate) fn set(&mut self, setting: Coalescing) {
        self.setting = setting;
        self.limits = Limits::of(setting, self.max_frame_bytes);
        self.escaped_from = None;
    }

    /// Whether the buffer holds its parcels under a count policy of its
    /// own instead of the setting in force (see [`escape`](Self::escape)).
    pub(crate) fn escaped(&self) -> bool {
        self.escaped_from.is_some()
    }

    /// Holds the parcels of this empty buffer under `policy` from `now_ns`
    /// on, instead of the setting in force, until the next
    /// [`set`](Self::set) or [`restore`](Self::restore): an adaptive
    /// action's parcels that came together although its setting is off
    /// (`Aggregator::escape_off`), or patient responses
    /// (`aggregate/answer.rs`). The parcels that came before, alone, came
    /// together with the next one: the buffer is stamped `now_ns`, so that
    /// the count policy's sparse bypass does not send the next one alone
    /// as well.
    pub(crate) fn escape(&mut self, policy: CountPolicy, now_ns: u64) {
        debug_assert!(self.frame.is_empty());
        let from = self.setting_in_force();
        self.set(Coalescing::Count(policy));
        self.escaped_from = Some(from);
        self.last_ns = Some(now_ns);
    }

    /// Ends the escape of this empty buffer: its parcels are held under
    /// the setting in force again.
    pub(crate) fn restore(&mut self) {
        debug_assert!(self.frame.is_empty());
        if let Some(from) = self.escaped_from {
            self.set(from);
        }
    }

    /// Accounts for the parcel just appended (it took `parcel_bytes`) to a
    /// buffer that held others, if it stays: the common case, no clock, no
    /// policy. Returns false when the policy must look at it
    /// ([`pushed`](Self::pushed)).
    #[inline]
    pub(crate) fn pushed_fast(&mut self, parcel_bytes: usize) -> bool {
        let stays = self.frame.len() < self.limits.parcels
            && self.frame.byte_len() + parcel_bytes < self.limits.bytes
            && parcel_bytes <= self.limits.parcel_bytes;
        if stays {
            self.stats.parcels += 1;
        }
        stays
    }

    /// Sends the frame this buffer begins once it holds `parcels`, a part
    /// of a burst (`Aggregator::split_parcels`; `u32::MAX`: by its setting
    /// alone), if its setting is a count policy and would hold more.
    /// Called with the first parcel of each frame.
    pub(crate) fn cut_at(&mut self, parcels: u32) {
        let cut = match self.setting.in_force() {
            Coalescing::Count(_) => parcels,
            _ => u32::MAX,
        };
        self.limits.parcels = self.limits.setting_parcels.min(cut);
    }

    /// Accounts for the parcel just appended (it took `parcel_bytes`) and
    /// asks `policy` whether to flush. `now_ns` is given for the first
    /// parcel of a frame only. A parcel that `came_with_others` (a
    /// response to a run of many calls: the others follow it) is never
    /// sparse, however long ago the last one left: the policy sees no gap
    /// before it, and still its count and its bytes.
    pub(crate) fn pushed(
        &mut self,
        policy: &dyn FlushPolicy,
        parcel_bytes: usize,
        now_ns: Option<u64>,
        came_with_others: bool,
    ) -> Option<Reason> {
        self.stats.parcels += 1;
        let mut gap_ns = None;
        if let Some(now) = now_ns {
            gap_ns = self.stamp(now);
            self.first_ns = now;
        }
        if came_with_others {
            gap_ns = Some(0);
        }
        let parcels = self.frame.len();
        policy
            .after_push(Filled {
                parcels,
                bytes: self.frame.byte_len(),
                parcel_bytes,
                gap_ns,
            })
            .or_else(|| (parcels >= self.limits.parcels).then_some(Reason::Split))
    }

    /// Takes every parcel out as one frame, leaving at `now_ns` (None when
    /// empty). The caller disarms the timer.
    pub(crate) fn take(&mut self, reason: Reason, now_ns: u64) -> Option<FrameBuilder> {
        if self.frame.is_empty() {
            return None;
        }
        let gaps = u64::from(self.frame.len()) - 1;
        let span = now_ns.saturating_sub(self.first_ns);
        if let Some(average) = span.checked_div(gaps) {
            self.stats.add_gaps(gaps, average);
            // The remainder of the division, so that the gaps sum to the span.
            self.stats.gap_sum_ns += span - gaps * average;
        }
        self.last_ns = Some(now_ns);
        let awaited = std::mem::take(&mut self.awaited);
        if awaited > 0 {
            let midway = self.first_ns.min(now_ns) + span / 2;
            self.departures.leave(u64::from(awaited), midway);
        }
        let capacity = self.last_frame_bytes.max(self.frame.byte_len());
        let mut next = FrameBuilder::with_capacity(
            self.frame.source(),
            self.frame.kind(),
            self.frame.action(),
            capacity,
        );
        next.set_responses_wait(self.frame.responses_wait());
        let frame = std::mem::replace(&mut self.frame, next);
        self.last_frame_bytes = frame.byte_len();
        self.count_message(reason);
        Some(frame)
    }

    /// Counts a parcel that left at `now_ns` in a message of its own,
    /// past the buffer, for `reason`. It stamps the buffer as a flush
    /// does: the next parcel's gap, which the count policy's sparse
    /// bypass judges, runs from it. (Unstamped, the first response of a
    /// run after a lone one, microseconds later, saw the gap since the
    /// last frame and left alone too: a message more a burst under
    /// adaptive coalescing; BENCHMARKS.md, issue #15, thirteenth part.)
    pub(crate) fn sent_alone(&mut self, reason: Reason, now_ns: u64) {
        self.stats.parcels += 1;
        self.stamp(now_ns);
        self.count_message(reason);
    }

    /// Stamps the buffer with a parcel that came at `now_ns` (the first of
    /// a frame, or one sent alone): counts its gap since the last stamp,
    /// which it returns (`None` for the buffer's first parcel).
    fn stamp(&mut self, now_ns: u64) -> Option<u64> {
        let gap = self.last_ns.map(|t| now_ns.saturating_sub(t));
        if let Some(gap) = gap {
            self.stats.add_gaps(1, gap);
        }
        self.last_ns = Some(now_ns);
        gap
    }

    /// Counts a message flushed for `reason`.
    pub(crate) fn count_message(&mut self, reason: Reason) {
        self.stats.messages += 1;
        self.stats.flushes[reason.index()] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ActionId, LocalityId};
    use crate::parcel::{ReplyTo, RunKind};

    /// A buffer of calls under the default count policy (100 µs).
    fn buffer() -> (Buffer, CountPolicy) {
        let policy = CountPolicy::DEFAULT;
        let frame = FrameBuilder::new(LocalityId::new(0), RunKind::Calls, ActionId::from_bits(7));
        let buffer = Buffer::new(
            frame,
            Coalescing::Count(policy),
            1 << 20,
            Arc::new(Departures::default()),
        );
        (buffer, policy)
    }

    /// Appends a post (8 bytes of arguments) to the buffer's frame;
    /// returns the bytes it took.
    fn push(buffer: &mut Buffer) -> usize {
        push_post(buffer, &0u64)
    }

    /// Appends a post of `args` to the buffer's frame; returns the bytes
    /// it took.
    fn push_post(buffer: &mut Buffer, args: &(impl serde::Serialize + ?Sized)) -> usize {
        let before = buffer.frame.byte_len();
        let origin = LocalityId::new(0);
        buffer
            .frame
            .push_call(ReplyTo::Post { origin }, args)
            .unwrap();
        buffer.frame.byte_len() - before
    }

    #[test]
    fn a_parcel_sent_alone_stamps_its_buffer_for_the_sparse_bypass() {
        let (mut buffer, policy) = buffer();
        // The last frame left at 0; a parcel leaves alone 5 ms later (as
        // the response to a run of one call does, `answer.rs`).
        push(&mut buffer);
        assert!(buffer.take(Reason::Idle, 0).is_some());
        buffer.sent_alone(Reason::Bypass, 5_000_000);
        // 10 µs after the lone one, within the interval: the parcel stays.
        let bytes = push(&mut buffer);
        assert_eq!(buffer.pushed(&policy, bytes, Some(5_010_000), false), None);
        assert_eq!(buffer.stats.flushes[Reason::Bypass.index()], 1);
        // Its gaps are counted as a pushed parcel's are: the lone one's
        // from the last frame, the next one's from the lone one.
        assert_eq!(buffer.stats.parcels, 2);
        assert_eq!(buffer.stats.gap_sum_ns, 5_000_000 + 10_000);
    }

    #[test]
    fn a_frame_cut_as_a_part_of_a_burst_leaves_there_and_the_next_at_its_count() {
        let (mut buffer, policy) = buffer();
        let count = policy.num_parcels;
        // The last frame left at 0.
        push(&mut buffer);
        assert!(buffer.take(Reason::Idle, 0).is_some());
        // A frame begun as a part of 3 (`Aggregator::split_parcels`): the
        // policy takes the first, the fast path keeps the second, and the
        // third goes to the policy, and leaves.
        let bytes = push(&mut buffer);
        buffer.cut_at(3);
        assert_eq!(buffer.pushed(&policy, bytes, Some(1_000), false), None);
        let bytes = push(&mut buffer);
        assert!(buffer.pushed_fast(bytes));
        let bytes = push(&mut buffer);
        assert!(!buffer.pushed_fast(bytes));
        assert_eq!(
            buffer.pushed(&policy, bytes, None, false),
            Some(Reason::Split)
        );
        assert!(buffer.take(Reason::Split, 2_000).is_some());
        // The next frame is no part: it stays until the count.
        let bytes = push(&mut buffer);
        buffer.cut_at(u32::MAX);
        assert_eq!(buffer.pushed(&policy, bytes, Some(2_100), false), None);
        for _ in 2..count {
            let bytes = push(&mut buffer);
            assert!(buffer.pushed_fast(bytes));
        }
        let bytes = push(&mut buffer);
        assert!(!buffer.pushed_fast(bytes));
        assert_eq!(
            buffer.pushed(&policy, bytes, None, false),
            Some(Reason::Count)
        );
        // A part larger than the count changes nothing; a byte policy
        // (TRAM's) is not cut.
        buffer.cut_at(count + 1);
        assert_eq!(buffer.limits.parcels, count);
        buffer.set(Coalescing::Bytes(super::super::policy::BytePolicy::DEFAULT));
        buffer.cut_at(3);
        assert_eq!(buffer.limits.parcels, u32::MAX);
    }

    /// Pushes posts into `buffer` under `policy` (the first at 1 µs, then
    /// through the fast path as the aggregator does) until it flushes;
    /// returns why, the parcels and the frame's bytes.
    fn fill(buffer: &mut Buffer, policy: &dyn FlushPolicy) -> (Reason, u32, usize) {
        let bytes = push(buffer);
        let mut reason = buffer.pushed(policy, bytes, Some(1_000), false);
        while reason.is_none() {
            let bytes = push(buffer);
            if !buffer.pushed_fast(bytes) {
                reason = buffer.pushed(policy, bytes, None, false);
            }
        }
        (reason.unwrap(), buffer.frame.len(), buffer.frame.byte_len())
    }

    #[test]
    fn a_count_policy_frame_of_one_parcel_size_stays_within_max_bytes_and_a_byte_policy_passes_its_threshold()
     {
        let (mut buffer, _) = buffer();
        let one = push(&mut buffer);
        let header = buffer.frame.byte_len() - one;
        let _ = buffer.take(Reason::Idle, 0);
        // Room for 40 parcels and half of one more: it leaves with 40, as
        // many as fit (it left with 41, just over the bound, before).
        let max_bytes = header + 40 * one + one / 2;
        let count = CountPolicy {
            max_bytes,
            ..CountPolicy::DEFAULT
        };
        buffer.set(Coalescing::Count(count));
        let (reason, parcels, bytes) = fill(&mut buffer, &count);
        assert_eq!((reason, parcels), (Reason::Bytes, 40), "{bytes} bytes");
        assert!(bytes <= max_bytes, "{bytes} > {max_bytes}");
        // Exactly 40 parcels' room: still 40, filling it.
        let _ = buffer.take(Reason::Bytes, 2_000);
        let exact = CountPolicy {
            max_bytes: header + 40 * one,
            ..CountPolicy::DEFAULT
        };
        buffer.set(Coalescing::Count(exact));
        assert_eq!(
            fill(&mut buffer, &exact),
            (Reason::Bytes, 40, header + 40 * one)
        );
        // TRAM's threshold is unchanged: flushed once over it, so a frame
        // passes it by up to a parcel.
        let _ = buffer.take(Reason::Bytes, 3_000);
        let tram = super::super::policy::BytePolicy {
            buffer_bytes: 1000,
            threshold: 0.9,
            cutoff: 0.1,
            ..super::super::policy::BytePolicy::DEFAULT
        };
        buffer.set(Coalescing::Bytes(tram));
        let (reason, _, bytes) = fill(&mut buffer, &tram);
        assert_eq!(reason, Reason::Bytes);
        assert!(bytes > 900 && bytes <= 900 + one, "{bytes}");
    }

    #[test]
    fn a_buffer_that_escapes_off_holds_its_next_parcel() {
        let (mut buffer, policy) = buffer();
        // Its last frame left at 0, then the tuner turned it off; the
        // parcels of a poll came alone until the escape, 7 ms later.
        push(&mut buffer);
        assert!(buffer.take(Reason::Idle, 0).is_some());
        buffer.set(Coalescing::Off);
        buffer.escape(policy, 7_000_000);
        let bytes = push(&mut buffer);
        assert_eq!(buffer.pushed(&policy, bytes, Some(7_000_100), false), None);
        assert!(buffer.escaped());
    }

    #[test]
    fn a_buffer_escaped_from_its_setting_holds_under_its_own_policy_until_restored() {
        let (mut buffer, policy) = buffer();
        let setting = buffer.setting();
        let patient = CountPolicy {
            num_parcels: 16_384,
            ..policy
        };
        buffer.escape(patient, 0);
        assert_eq!(
            (buffer.setting(), buffer.setting_in_force()),
            (Coalescing::Count(patient), setting)
        );
        // Past the setting's count, held by the escape's.
        for _ in 0..policy.num_parcels + 1 {
            let bytes = push(&mut buffer);
            assert_eq!(buffer.pushed(&patient, bytes, None, true), None);
        }
        assert!(buffer.take(Reason::Idle, 1).is_some());
        buffer.restore();
        assert!(!buffer.escaped());
        assert_eq!(
            (buffer.setting(), buffer.setting_in_force()),
            (setting, setting)
        );
    }

    #[test]
    fn a_parcel_long_after_the_last_one_sent_alone_is_sparse() {
        let (mut buffer, policy) = buffer();
        buffer.sent_alone(Reason::Bypass, 1_000_000);
        // 200 µs later, beyond the interval: sparse, it leaves alone.
        let bytes = push(&mut buffer);
        assert_eq!(
            buffer.pushed(&policy, bytes, Some(1_200_000), false),
            Some(Reason::Bypass)
        );
    }

    #[test]
    fn a_parcel_that_came_with_others_is_not_sparse_but_its_count_and_bytes_still_count() {
        let (mut late, policy) = buffer();
        late.sent_alone(Reason::Bypass, 1_000_000);
        // 200 µs later, beyond the interval, but others follow it: held.
        let bytes = push(&mut late);
        assert_eq!(late.pushed(&policy, bytes, Some(1_200_000), true), None);
        // A count of one still sends it at once, by its count.
        let (mut counted, _) = buffer();
        let one = CountPolicy {
            num_parcels: 1,
            ..policy
        };
        let bytes = push(&mut counted);
        assert_eq!(
            counted.pushed(&one, bytes, Some(1_000), true),
            Some(Reason::Count)
        );
        // And one more of its size would take it over `max_bytes`: by its
        // bytes.
        let (mut large, _) = buffer();
        let bytes = push_post(&mut large, &vec![0u8; 600]);
        let small = CountPolicy {
            max_bytes: 1000,
            ..policy
        };
        assert_eq!(
            large.pushed(&small, bytes, Some(1_000), true),
            Some(Reason::Bytes)
        );
    }

    /// A count or byte policy from raw draws (TRAM's `threshold +
    /// cutoff <= 1` kept).
    fn policy_of(count: bool, n: u32, bytes: usize, threshold: f64, cutoff: f64) -> Coalescing {
        if count {
            Coalescing::Count(CountPolicy {
                num_parcels: n,
                max_bytes: bytes,
                ..CountPolicy::DEFAULT
            })
        } else {
            Coalescing::Bytes(super::super::policy::BytePolicy {
                buffer_bytes: bytes,
                threshold,
                cutoff: cutoff.min(1.0 - threshold),
                ..super::super::policy::BytePolicy::DEFAULT
            })
        }
    }

    proptest::proptest! {
        /// The fast path keeps a parcel only where the policy would: a
        /// buffer it keeps is never one the policy would have flushed.
        #[test]
        fn the_fast_path_keeps_only_what_the_policy_keeps(
            count in proptest::bool::ANY,
            n in 1u32..300,
            bytes in 64usize..20_000,
            threshold in 0.05f64..=1.0,
            cutoff in 0.0f64..=1.0,
            sizes in proptest::collection::vec(0usize..3_000, 1..400),
        ) {
            let setting = policy_of(count, n, bytes, threshold, cutoff);
            let (mut buffer, _) = buffer();
            buffer.set(setting);
            let policy: &dyn FlushPolicy = match &setting {
                Coalescing::Count(p) => p,
                Coalescing::Bytes(p) => p,
                _ => unreachable!(),
            };
            for (i, size) in sizes.into_iter().enumerate() {
                let parcel_bytes = push_post(&mut buffer, &vec![7u8; size]);
                let first = buffer.frame.len() == 1;
                let kept = !first && buffer.pushed_fast(parcel_bytes);
                let filled = Filled {
                    parcels: buffer.frame.len(),
                    bytes: buffer.frame.byte_len(),
                    parcel_bytes,
                    gap_ns: first.then_some(0),
                };
                let verdict = policy.after_push(filled);
                proptest::prop_assert!(
                    !kept || verdict.is_none(),
                    "{setting:?}: kept {filled:?}, the policy says {verdict:?}"
                );
                if verdict.is_some() {
                    buffer.take(Reason::Bytes, i as u64);
                }
            }
        }
    }
}
