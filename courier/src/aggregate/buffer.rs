//! One coalescing buffer: the parcels of one action waiting for one
//! destination, the setting that governs them, and what they have done.

use super::policy::{Coalescing, Filled, Reason};
use crate::parcel::FrameBuilder;
use crate::runtime::LocalityId;
use crate::sched::POLL_BUCKETS;

/// Buckets of the arrival-gap histogram: powers of two of nanoseconds, as
/// for task polls (bucket `k` holds gaps of `2^(k-1)` to `2^k - 1` ns).
pub(crate) const GAP_BUCKETS: usize = POLL_BUCKETS;

/// What the buffers of one action have done; summed over destinations for
/// the `/coalescing` counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LaneStats {
    /// Parcels that went through the buffer (bypassed ones included).
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
}

/// The parcels of one action for one destination.
#[derive(Debug)]
pub(crate) struct Buffer {
    /// The parcels so far, already framed.
    frame: FrameBuilder,
    /// The setting for this action and destination.
    pub(crate) setting: Coalescing,
    /// When the last parcel came (ns on the aggregator's clock).
    last_arrival_ns: Option<u64>,
    /// Deadline of this buffer's entry in the flush timer, if armed.
    pub(crate) armed: Option<u64>,
    /// Size of the last frame flushed, to size the next one.
    last_frame_bytes: usize,
    pub(crate) stats: LaneStats,
}

impl Buffer {
    pub(crate) fn new(source: LocalityId, setting: Coalescing) -> Self {
        Buffer {
            frame: FrameBuilder::new(source),
            setting,
            last_arrival_ns: None,
            armed: None,
            last_frame_bytes: 0,
            stats: LaneStats::default(),
        }
    }

    /// Whether the buffer holds no parcel.
    pub(crate) fn is_empty(&self) -> bool {
        self.frame.len() == 0
    }

    /// The frame to append a parcel to; call [`Buffer::pushed`] after.
    pub(crate) fn frame(&mut self) -> &mut FrameBuilder {
        &mut self.frame
    }

    /// Bytes of the frame so far (headers included).
    pub(crate) fn frame_bytes(&self) -> usize {
        self.frame.byte_len()
    }

    /// Accounts for the parcel just appended (it took `parcel_bytes`, at
    /// `now_ns`) and asks the policy whether to flush.
    pub(crate) fn pushed(&mut self, parcel_bytes: usize, now_ns: u64) -> Option<Reason> {
        let gap_ns = self.last_arrival_ns.map(|t| now_ns.saturating_sub(t));
        self.last_arrival_ns = Some(now_ns);
        self.stats.parcels += 1;
        if let Some(gap) = gap_ns {
            self.stats.gaps += 1;
            self.stats.gap_sum_ns += gap;
            self.stats.gap_histogram[crate::sched::poll_bucket(gap)] += 1;
        }
        let policy = self.setting.policy()?;
        policy.after_push(Filled {
            parcels: self.frame.len(),
            bytes: self.frame.byte_len(),
            parcel_bytes,
            gap_ns,
        })
    }

    /// Takes every parcel out as one frame (None when empty) and disarms
    /// the timer; the caller removes the timer entry.
    pub(crate) fn take(&mut self, reason: Reason) -> Option<FrameBuilder> {
        if self.is_empty() {
            return None;
        }
        let source = self.frame.source();
        let capacity = self.last_frame_bytes.max(self.frame.byte_len());
        let frame = std::mem::replace(
            &mut self.frame,
            FrameBuilder::with_capacity(source, capacity),
        );
        self.last_frame_bytes = frame.byte_len();
        self.count_message(reason);
        Some(frame)
    }

    /// Counts a message flushed for `reason`.
    pub(crate) fn count_message(&mut self, reason: Reason) {
        self.stats.messages += 1;
        self.stats.flushes[reason.index()] += 1;
    }

    /// Moves the parcels appended after `mark` (a [`FrameBuilder::mark`])
    /// into a frame of their own.
    pub(crate) fn split_off(&mut self, mark: crate::parcel::FrameMark) -> FrameBuilder {
        self.frame.split_off(mark)
    }
}
