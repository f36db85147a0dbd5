//! What it costs this locality to send a frame to each peer: the α-β
//! model `t(s) = α + β·s` of seed 004 (Narayanan 2020, §1.2 Eq. 1.1; its
//! chapter 4 tunes aggregation with it), α the fixed cost of one frame in
//! ns, β the cost of each byte in ns/B, fitted per peer from the frames
//! this locality sends.
//!
//! # What is measured
//!
//! The sender's side only: the time `send_frame` takes to finish a frame
//! and hand it to the transport (a TCP `write`, an MPI `Isend`, a push
//! into an in-process queue), the same time `/serialize/time/sent` sums.
//! It is what a frame costs the locality that sends it, which is what
//! coalescing saves (seed 004 Eq. 4.1-4.2 are the sender's costs). A frame
//! that waits for credit is not a sample (its send comes later, untimed).
//!
//! # The estimator
//!
//! Per peer, a weighted least-squares fit of `(bytes, ns)` samples with
//! exponential forgetting (recursive least squares with a forgetting
//! factor): every sample multiplies the weight of all earlier ones by
//! [`FORGETTING`] = 1 − 1/256, so the fit describes about the last 256
//! frames and follows a change of regime (a receiver that got busy, a
//! congested link) within about 600 frames (90 % of a step; the unit
//! tests check 700). Its state is six decayed sums (Σw, Σw·s, Σw·t,
//! Σw·s², Σw·s·t, Σw·|r|); a sample costs a dozen multiply-adds, and the
//! line (two divisions) is solved from the sums by each reader and, for
//! clipping, every [`REFIT_EVERY`] samples.
//!
//! - **Outliers.** A sample more than [`CLIP_SPREADS`] (6) *spreads*
//!   above what the current fit predicts counts as that much above it
//!   (winsorizing, as a Huber estimator does), the spread being the fit's
//!   mean absolute residual, decayed like the sums (and at least 1/8 of
//!   the prediction, so that a fit of noiseless samples still follows a
//!   step). A thread descheduled in the middle of a send (a 1 ms sample
//!   where 5 µs ± 1.5 µs are usual) then moves the fit by about 1 % (the
//!   unit tests allow 3 %), where it would otherwise move α by about
//!   4 µs (a sample far from the mean size moves α more than its 1/256
//!   share: it has leverage). Samples below the prediction are kept as
//!   they are: they are bounded by 0. A real step up is followed all the
//!   same: the clipped residuals raise the spread, which widens the band
//!   by about 2 % per sample until the samples fit in it (20 times slower
//!   within 900 frames, in the tests).
//! - **A slope the samples do not determine.** When every frame has about
//!   the same size, the samples say nothing about β. The fit then keeps
//!   the peer's *prior* β (the start-up probe's, or the transport's
//!   documented value) and fits α alone: β is a ridge regression towards
//!   the prior, `β = (C_st + κ·β₀) / (C_ss + κ)`, with `C_ss`, `C_st` the
//!   weighted (co)variances of size and time and `κ` =
//!   [`PRIOR_STIFFNESS_B2`]. Frames of equal size give `C_ss = C_st = 0`
//!   and β = β₀ exactly; a spread of sizes moves β to what the samples
//!   say as soon as they say it better than the prior does (a few frames
//!   64 KiB apart suffice). α = mean time − β · mean size. Both are
//!   clamped at 0.
//!
//! # Cost on the send path
//!
//! Each peer's fit sits in a cache-line-aligned slot behind a mutex that
//! the send path only *tries* to take: a sample that finds the slot busy
//! (another worker sending to the same peer at the same moment, or a
//! reader) is dropped, never waited for. A sample is the lock's two
//! compare-and-swaps and the arithmetic above: 8 ns on the benchmark
//! machine (`cargo bench -p courier --bench calibration`), against the
//! 1-12 µs of a TCP send and the 50-300 ns of an in-process one.
//!
//! # Readers
//!
//! Counters and a tuner read [`Calibration::cost`] of a peer, or
//! [`Calibration::mean`] over the peers (weighted by their recent
//! samples); each read takes the peer's lock for a few nanoseconds and is
//! current to the last sample.

use crate::ids::LocalityId;
use crate::sync::Mutex;

/// The weight every earlier sample keeps when a new one comes: the fit's
/// memory is `1 / (1 − FORGETTING)` = 256 samples. With the send times of
/// loopback TCP here (a standard deviation of about 3 µs around 5-12 µs,
/// measured by timing `write`s of 16 B to 64 KiB), 256 samples give α to
/// about 0.2 µs, and a change of regime is 90 % followed after
/// `ln 10 × 256` ≈ 590 frames: tens of milliseconds of traffic of one
/// frame per parcel, the time scale a tuner acts on. A guess from those
/// figures; tune me.
pub(crate) const FORGETTING: f64 = 1.0 - 1.0 / 256.0;

/// How many spreads (mean absolute residuals) above the prediction a
/// sample may lie before it is clipped there. Loopback TCP sends are
/// bimodal here (about 0.75 µs back to back while the receiver is busy,
/// 11 µs when the write wakes it; measured as for [`FORGETTING`]): a
/// mixture of both has a spread of several µs, and 6 spreads keep both
/// modes; a lone descheduled send lies hundreds of spreads out. Below 6,
/// the upper tail of ordinary noise starts being clipped (for a
/// Laplace-like scatter, P(r > 6 spreads) ≈ e⁻⁶ ≈ 0.25 %). A guess from
/// those figures; tune me.
pub(crate) const CLIP_SPREADS: f64 = 6.0;

/// Samples between two refits of the band that samples are clipped
/// against: a refit costs two divisions and a dozen other operations,
/// more than the rest of a sample (the `calibration` bench on the
/// benchmark machine: 21 ns a sample refitting every time, 8 ns every
/// 8th), and a band 8 samples old differs from a fresh one by about
/// 8/256 of the change since. A guess from those figures; tune me.
const REFIT_EVERY: u32 = 8;

/// The smallest spread, as a fraction of the prediction: samples that
/// scatter less (a test's exact line, a very steady link) still leave a
/// band of `6 / 8` of the prediction, so that a step up is followed.
const MIN_SPREAD_FRACTION: f64 = 1.0 / 8.0;

/// The smallest spread in ns, for a prediction that has come down to a
/// few ns (an in-process transport between bursts): about the clock's
/// resolution on the benchmark machine. A guess; tune me.
const MIN_SPREAD_NS: f64 = 20.0;

/// The scatter of single send times, in ns, that the prior β is weighed
/// against (about the standard deviation measured as for [`FORGETTING`]).
const SEND_NOISE_NS: f64 = 3_000.0;

/// How far the prior β may be off, in ns/B. The start-up probe's β from
/// medians of 8 sends of each of two sizes 64 KiB apart, with the noise
/// above, is good to about `1.25 × 3000 × √2 / (√8 × 65536)` ≈ 0.03 ns/B,
/// but the transports' documented priors stand for machines whose β
/// differ by orders of magnitude (seed 004 §1.2: 0.1 to 100 ns/B), and a
/// stiffer prior biases the fit of varied traffic towards it (by
/// `κ / (C_ss + κ)` of the gap). A guess between those; tune me.
const PRIOR_BETA_SD: f64 = 0.2;

/// κ of the ridge towards the prior β, in B² of weighted size variance:
/// `(SEND_NOISE_NS / PRIOR_BETA_SD)²`, the Bayesian weight of a prior
/// with that uncertainty against samples with that noise. The samples
/// take over once `C_ss` exceeds it: 256 frames whose sizes have a
/// standard deviation of 940 B, or one pair of frames 64 KiB apart.
pub(crate) const PRIOR_STIFFNESS_B2: f64 =
    (SEND_NOISE_NS / PRIOR_BETA_SD) * (SEND_NOISE_NS / PRIOR_BETA_SD);

/// The cost of sending a frame of `s` bytes, `t(s) = α + β·s`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SendCost {
    /// α: the fixed cost of one frame, in ns.
    pub(crate) alpha_ns: f64,
    /// β: the cost of each byte, in ns/B.
    pub(crate) beta_ns_per_byte: f64,
}

/// The prior of TCP: α and β of sparse sends over loopback TCP on the
/// benchmark machine (2-core VM): `/network/time/alpha` and `beta` of
/// locality 0 after the 400 one-at-a-time calls of 16 B to 64 KiB of
/// `tests/calibration.rs`, median of 10 runs (α 6.3 µs, range 4.7-13.5;
/// β 0.11 ns/B, range 0.07-0.23; 10 runs on a quieter machine: α 4.9-5.4
/// µs, β 0.068-0.086 ns/B). A job over TCP replaces it by its
/// start-up probe within milliseconds; it stands for a peer only until
/// then, or if every probe failed.
pub(crate) const TCP_PRIOR: SendCost = SendCost {
    alpha_ns: 6_000.0,
    beta_ns_per_byte: 0.1,
};

/// The prior of MPI: raw MPI over shared memory, one way, from the
/// ping-pong fit of BENCHMARKS.md (`mpi_pingpong`: α 0.276 µs, β 0.186
/// ns/B). The MPI transport's sends are `MPI_Isend`s, which return before
/// the copy; the start-up probe replaces this.
pub(crate) const MPI_PRIOR: SendCost = SendCost {
    alpha_ns: 276.0,
    beta_ns_per_byte: 0.186,
};

/// The prior of the in-process transport: a frame handed to another
/// thread pool of this process (its buffer moves, nothing is copied),
/// as `tests/calibration.rs` measured it here after 200 calls of 16 B
/// to 64 KiB (α 45-67 ns, β 0.0004-0.0005 ns/B in 4 runs of 5; the
/// fifth, 300 ns). No probe runs on this transport (it would delay every
/// in-process job for nothing): the traffic refines this.
pub(crate) const INPROC_PRIOR: SendCost = SendCost {
    alpha_ns: 60.0,
    beta_ns_per_byte: 0.0005,
};

impl SendCost {
    /// The predicted time of a frame of `bytes`, in ns.
    #[inline]
    pub(crate) fn ns(self, bytes: f64) -> f64 {
        self.alpha_ns + self.beta_ns_per_byte * bytes
    }

    /// The line through the medians of two groups of send times: `small`
    /// of frames of `small_bytes`, `large` of frames of `large_bytes`
    /// (more). Medians, so that a few descheduled sends do not matter;
    /// α and β clamped at 0. `None` if a group is empty or the sizes are
    /// not in order. Reorders the groups.
    pub(crate) fn from_medians(
        small_bytes: u64,
        small: &mut [u64],
        large_bytes: u64,
        large: &mut [u64],
    ) -> Option<SendCost> {
        if large_bytes <= small_bytes {
            return None;
        }
        let (t_small, t_large) = (median(small)?, median(large)?);
        let beta = ((t_large - t_small) / (large_bytes - small_bytes) as f64).max(0.0);
        Some(SendCost {
            alpha_ns: (t_small - beta * small_bytes as f64).max(0.0),
            beta_ns_per_byte: beta,
        })
    }
}

/// The median of `values` (the mean of the middle two for an even
/// count); `None` when empty. Reorders them.
fn median(values: &mut [u64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let mid = values.len() / 2;
    Some(match values.len() % 2 {
        1 => values[mid] as f64,
        _ => (values[mid - 1] as f64 + values[mid] as f64) / 2.0,
    })
}

/// The online fit of one peer (see the module docs). Plain fields: the
/// caller serializes access.
#[derive(Debug, Clone)]
pub(crate) struct Fit {
    /// The prior: β the ridge pulls towards, and the whole line before
    /// any sample.
    prior: SendCost,
    /// Σw, decayed: the effective number of samples.
    w: f64,
    /// Σw·s (sizes in bytes).
    s: f64,
    /// Σw·t (times in ns).
    t: f64,
    /// Σw·s².
    ss: f64,
    /// Σw·s·t.
    st: f64,
    /// Σw·|r|, r the residual of each (clipped) sample against the band
    /// it met.
    r: f64,
    /// Samples since `band` was refitted.
    since_refit: u32,
    /// The fit and spread that samples are clipped against, refitted
    /// every [`REFIT_EVERY`] samples (a reader refits for itself).
    band: Band,
}

impl Fit {
    /// A fit with no samples, which answers `prior`.
    pub(crate) fn new(prior: SendCost) -> Fit {
        Fit {
            prior,
            w: 0.0,
            s: 0.0,
            t: 0.0,
            ss: 0.0,
            st: 0.0,
            r: 0.0,
            since_refit: 0,
            band: Band::unknown(prior),
        }
    }

    /// Adds a frame of `bytes` that took `ns` to send.
    #[inline]
    pub(crate) fn add(&mut self, bytes: u64, ns: u64) {
        let s = bytes as f64;
        let predicted = self.band.line.ns(s);
        let spread = self
            .band
            .spread
            .max(predicted * MIN_SPREAD_FRACTION)
            .max(MIN_SPREAD_NS);
        let t = (ns as f64).min(predicted + CLIP_SPREADS * spread);
        let k = FORGETTING;
        self.w = self.w * k + 1.0;
        self.s = self.s * k + s;
        self.t = self.t * k + t;
        self.ss = self.ss * k + s * s;
        self.st = self.st * k + s * t;
        self.r = self.r * k + (t - predicted).abs();
        self.since_refit += 1;
        if self.since_refit >= REFIT_EVERY {
            self.since_refit = 0;
            self.band = self.solve();
        }
    }

    /// The current estimate.
    pub(crate) fn line(&self) -> SendCost {
        self.solve().line
    }

    /// The effective number of samples behind it (decayed: at most 256).
    pub(crate) fn weight(&self) -> f64 {
        self.w
    }

    /// Replaces the prior (by the start-up probe's measurement).
    pub(crate) fn set_prior(&mut self, prior: SendCost) {
        self.prior = prior;
        self.band = self.solve();
    }

    /// The ridge-regularized weighted least-squares line of the sums, and
    /// the mean absolute residual.
    fn solve(&self) -> Band {
        if self.w <= 0.0 {
            return Band::unknown(self.prior);
        }
        let inv_w = 1.0 / self.w;
        let (mean_s, mean_t) = (self.s * inv_w, self.t * inv_w);
        // Weighted (co)variances times Σw; rounding may leave C_ss a hair
        // below 0 when every size is the same.
        let c_ss = (self.ss - self.s * mean_s).max(0.0);
        let c_st = self.st - self.s * mean_t;
        let beta = ((c_st + PRIOR_STIFFNESS_B2 * self.prior.beta_ns_per_byte)
            / (c_ss + PRIOR_STIFFNESS_B2))
            .max(0.0);
        Band {
            line: SendCost {
                alpha_ns: (mean_t - beta * mean_s).max(0.0),
                beta_ns_per_byte: beta,
            },
            spread: self.r * inv_w,
        }
    }
}

/// What a sample is clipped against: the fit and its spread as of the
/// last refit.
#[derive(Debug, Clone, Copy)]
struct Band {
    line: SendCost,
    /// The mean absolute residual, Σw·|r| / Σw.
    spread: f64,
}

impl Band {
    /// The band before any sample: the prior, and a spread as large as
    /// its α (nothing is known of the scatter yet).
    fn unknown(prior: SendCost) -> Band {
        Band {
            line: prior,
            spread: prior.alpha_ns,
        }
    }
}

/// One peer's fit, on a cache line pair of its own so that sends to
/// different peers do not share one.
#[derive(Debug)]
#[repr(align(128))]
struct Slot(Mutex<Fit>);

/// The fits of every peer of one locality.
#[derive(Debug)]
pub(crate) struct Calibration {
    here: LocalityId,
    /// By locality index; this locality's own slot is never fed.
    peers: Box<[Slot]>,
}

impl Calibration {
    /// The fits of locality `here` of `count`, each answering `prior`
    /// until it has samples.
    pub(crate) fn new(here: LocalityId, count: u32, prior: SendCost) -> Calibration {
        Calibration {
            here,
            peers: (0..count)
                .map(|_| Slot(Mutex::new(Fit::new(prior))))
                .collect(),
        }
    }

    /// Counts a frame of `bytes` to `peer` that took `ns` to send, unless
    /// its fit is busy (then the sample is dropped: the send path never
    /// waits for it).
    #[inline]
    pub(crate) fn record(&self, peer: LocalityId, bytes: u64, ns: u64) {
        if let Some(mut fit) = self.peers.get(peer.index()).and_then(|p| p.0.try_lock()) {
            fit.add(bytes, ns);
        }
    }

    /// Gives `peer` a measured prior (the start-up probe's line): what
    /// its fit answers until frames are sent to it, and the β it keeps
    /// while they do not determine another.
    pub(crate) fn seed(&self, peer: LocalityId, prior: SendCost) {
        if let Some(slot) = self.peers.get(peer.index()) {
            slot.0.lock().set_prior(prior);
        }
    }

    /// The cost of a frame to `peer`: α and β as fitted now (`None` for
    /// this locality itself or a locality beyond the job). What a tuner
    /// asks per destination.
    pub(crate) fn cost(&self, peer: LocalityId) -> Option<SendCost> {
        (peer != self.here)
            .then(|| self.peers.get(peer.index()))
            .flatten()
            .map(|p| p.0.lock().line())
    }

    /// The mean cost over the peers, each weighted by its recent samples
    /// (the effective number of frames behind its fit), or the plain mean
    /// of their priors when none has samples. `None` without peers.
    pub(crate) fn mean(&self) -> Option<SendCost> {
        let fits: Vec<(f64, SendCost)> = self
            .peers
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != self.here.index())
            .map(|(_, p)| {
                let fit = p.0.lock();
                (fit.weight(), fit.line())
            })
            .collect();
        if fits.is_empty() {
            return None;
        }
        let total: f64 = fits.iter().map(|(w, _)| w).sum();
        let weight = |w: f64| {
            if total > 0.0 {
                w / total
            } else {
                1.0 / fits.len() as f64
            }
        };
        Some(fits.iter().fold(
            SendCost {
                alpha_ns: 0.0,
                beta_ns_per_byte: 0.0,
            },
            |sum, &(w, c)| SendCost {
                alpha_ns: sum.alpha_ns + weight(w) * c.alpha_ns,
                beta_ns_per_byte: sum.beta_ns_per_byte + weight(w) * c.beta_ns_per_byte,
            },
        ))
    }
}

#[cfg(test)]
mod tests;
