//! The start-up probe: before the program runs, a locality times sends of
//! frames of two sizes to its peers and seeds the α-β fit of each
//! (`adapt/calibration.rs`) with what it measured, so that a tuner has a
//! measured α and β from the first frame on, β included, which the
//! program's own frames (often all of one size) may never pin down.
//!
//! # What is sent
//!
//! [`Control::Probe`] frames: a control message whose padding the
//! receiver skips without copying it, and otherwise ignores (only the
//! failure detector notes that the peer was heard). Per peer, rounds of
//! one small frame (no padding: 12 bytes with the transport's 4) and one
//! large (64 KiB of padding), [`WARM_UP_ROUNDS`] untimed then [`ROUNDS`]
//! timed. Each send is timed as `send_frame` times the program's frames
//! (handing the frame to the transport), with the frame built beforehand.
//! α and β are the line through the medians of the two sizes' times
//! ([`SendCost::from_medians`]), which becomes the peer's prior: what its
//! fit answers until the program sends it frames, and the β the fit keeps
//! while those frames do not determine another (all of one size). The
//! probe's sends are not samples of the fit: back to back, they are a
//! regime of their own (here about 0.9 µs for a small frame, where a
//! sparse frame that wakes the receiver takes 5-12 µs), and a fit that
//! mixed them with the program's small frames would tilt β, even below
//! 0, until it forgot them.
//!
//! # What it costs
//!
//! Over loopback TCP on the benchmark machine, 0.25-0.3 ms for one peer
//! (10 small and 10 large `write`s), 0.6-1.6 ms for 3 and 1.3-4.2 ms for
//! 7 when 4 or 8 processes share its 2 cores (BENCHMARKS.md). A locality
//! probes the next peers in rank order (`here + 1`, `here + 2`, ...
//! wrapping), so that every locality receives as many probes as it
//! sends, until it probed
//! [`MAX_PEERS`] peers or [`BUDGET`] ran out; the peers left get the mean
//! of the probed ones as their prior (same transport, usually the same
//! kind of link) and are refined by the traffic. A job of one locality,
//! and an in-process job, probe nothing (see `launch`'s choice of
//! [`CalibrationSettings`]).
//!
//! # What it must not disturb
//!
//! Probes are control frames: never parcels, so termination detection's
//! counts (parcels sent and received, tasks, parcel work) never see them,
//! and they need no credit. They are not counted in `/messages` or
//! `/serialize` either, as other control frames are not.

use std::time::Duration;

use super::locality::Locality;
use crate::adapt::SendCost;
use crate::clock::{clock, timed};
use crate::ids::LocalityId;
use crate::parcel::{Control, Padding, encode_control};
use crate::transport::check_frame_len;

/// Timed rounds per peer (one small and one large frame each). Medians of
/// 8 cut up to 3 descheduled or queued sends per size.
const ROUNDS: usize = 8;

/// Rounds sent first and not timed: the first sends on a connection pay
/// for cold caches and the kernel's first buffers (the first of 40
/// loopback `write`s took 1.5-3 times the median, measured by timing
/// `write`s of 16 B to 64 KiB here).
const WARM_UP_ROUNDS: usize = 2;

/// Padding of the large probe frame: 64 KiB, the largest frame the
/// default count policy flushes (`CountPolicy::max_bytes`), so that β is
/// measured over the sizes coalesced frames have. Smaller under a smaller
/// `max_frame_bytes`.
const LARGE_PADDING: usize = 64 << 10;

/// Room left in a frame for the probe's header when the padding is cut to
/// fit `max_frame_bytes`: the frame header (6 bytes after the headroom),
/// the variant's tag (1) and the padding's length (a varint of at most
/// 5): 12 bytes, with room to spare.
const HEADER_ROOM: usize = 64;

/// Peers a locality probes at most: beyond a few, the peers of one
/// transport add little, and each probed peer receives about 0.7 MB of
/// probes. A guess; tune me.
const MAX_PEERS: usize = 8;

/// The time a locality's probe may take: no new peer is probed after it.
/// The "a few milliseconds". A guess; tune me.
const BUDGET: Duration = Duration::from_millis(3);

/// How a locality learns what its sends cost: what it assumes before any
/// is measured and whether it probes its peers at start-up. The launch
/// room picks it by transport.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CalibrationSettings {
    /// The cost assumed for peers not yet measured.
    pub(crate) prior: SendCost,
    /// Whether to time probe frames to the peers at start-up.
    pub(crate) probe: bool,
}

impl Locality {
    /// Times probe frames to up to [`MAX_PEERS`] peers within [`BUDGET`]
    /// and seeds their fits; the peers not probed get the mean of those
    /// that were.
    pub(super) fn probe_send_costs(&self) {
        let clock = clock();
        let start = clock.raw();
        let peers: Vec<LocalityId> = (1..self.count)
            .map(|step| LocalityId::new((self.here.get() + step) % self.count))
            .collect();
        let mut measured = Vec::new();
        let mut probed = 0;
        for &peer in &peers {
            let spent = Duration::from_nanos(clock.delta_as_nanos(start, clock.raw()));
            if probed == MAX_PEERS || spent >= BUDGET {
                break;
            }
            probed += 1;
            measured.extend(self.probe_peer(peer));
        }
        if measured.is_empty() {
            return;
        }
        let n = measured.len() as f64;
        let mean = SendCost {
            alpha_ns: measured.iter().map(|c| c.alpha_ns).sum::<f64>() / n,
            beta_ns_per_byte: measured.iter().map(|c| c.beta_ns_per_byte).sum::<f64>() / n,
        };
        for &peer in &peers[probed..] {
            self.calibration.seed(peer, mean);
        }
    }

    /// Times [`ROUNDS`] small and large probe frames to `peer` (after
    /// [`WARM_UP_ROUNDS`]) and seeds its fit; returns the line of their
    /// medians, or `None` if a send failed (the peer is lost: the loss is
    /// reported elsewhere) or the sizes did not differ.
    fn probe_peer(&self, peer: LocalityId) -> Option<SendCost> {
        let large = LARGE_PADDING.min(self.max_frame_bytes.saturating_sub(HEADER_ROOM));
        let frame = |padding| {
            encode_control(
                self.here,
                &Control::Probe {
                    padding: Padding(padding),
                },
            )
        };
        let small_bytes = frame(0).len() as u64;
        let largest = frame(large);
        check_frame_len(&largest, self.max_frame_bytes).ok()?;
        let large_bytes = largest.len() as u64;
        let mut small_ns = Vec::with_capacity(ROUNDS);
        let mut large_ns = Vec::with_capacity(ROUNDS);
        for round in 0..WARM_UP_ROUNDS + ROUNDS {
            for (padding, times) in [(0, &mut small_ns), (large, &mut large_ns)] {
                let frame = frame(padding);
                let (sent, ns) = timed(|| self.transmit(peer, frame));
                sent.ok()?;
                if round >= WARM_UP_ROUNDS {
                    times.push(ns);
                }
            }
        }
        let cost = SendCost::from_medians(small_bytes, &mut small_ns, large_bytes, &mut large_ns)?;
        self.calibration.seed(peer, cost);
        Some(cost)
    }
}
