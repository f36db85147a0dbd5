//! The tuner of one action's coalescing towards one destination: reads
//! one epoch of counters at a time and decides, now and then, a new
//! setting.
//!
//! It works in *phases*: stretches of traffic alike in rate (Q), parcel
//! size (S) and the share of awaited calls. A phase begins when an epoch's
//! traffic differs from the phase's by more than a factor
//! ([`PhaseChange`]) for [`CONFIRM_EPOCHS`] epochs in a row (one odd epoch
//! does not make a phase); epochs with too few parcels to judge are
//! skipped. In each phase the tuner makes at most three decisions:
//!
//! 1. the model's setting (`model.rs`, `n* = √(2Qα/κ)` within the bounds,
//!    and for traffic that tolerates delay at least the calls awaited
//!    together, which were issued together: a burst that fits in a
//!    message goes in [`BURST_PARTS`] parts, so that its first responses
//!    come back while the rest is issued, or in one where the parts
//!    would be small),
//!    unless the one in force is close to it, or the traffic tolerates
//!    delay and the one in force sends buffers of `n*` to `4n*` parcels
//!    already (counting what its timer cuts short: `parcels_held`): the
//!    range the next step searches, entered from its cheap side: the
//!    search goes on from it (step 2 with four times what it holds,
//!    judged against the epochs that made the phase), as moving down to
//!    `n*` first would cost a short phase its dearest trial;
//! 2. for traffic that tolerates delay (posts, more calls awaited
//!    together than a message holds), four times as many parcels a
//!    message, to see whether the model's α undervalued a message (a
//!    receiver's cost per message, cache effects: what α does not see);
//!    not for a burst that fits in a message, whose larger count would
//!    only make its calls wait;
//! 3. back to the model's setting if the larger one raised the cost per
//!    parcel by more than [`TOLERANCE`]. Within it, the larger one stays:
//!    the cost of coalescing is flat above its optimum and steep below
//!    (seed 004's Chapel sweep; the matrix of BENCHMARKS.md, where every
//!    workload lost more to 16–64 parcels a message than to 16,384), so
//!    a tie goes to the larger.
//!
//! Traffic whose callers wait (κ ≥ 0.1) gets one decision, the model's
//! setting (one parcel a message, coalescing off, for a caller that
//! awaits each call alone): on an idle machine that was the fastest setting for
//! calls awaited one at a time, paced or sparse (BENCHMARKS.md, issue
//! #15, where the default count with its idle flush cost them 4–350 %
//! more).
//!
//! Awaited calls are judged by how long they take to come back (the
//! epoch's `latency_ns`), not by the cost of a parcel, where the model
//! puts few of them in a message (at most [`SMALL_COUNT`]) and a message
//! a call is affordable (`Q·α` at most [`AFFORDABLE_OFF`] of a core):
//! step 2 is then to try them without coalescing (`Reason::TryOff`),
//! and step 3 to go back to the model's setting if they came back more
//! than [`TOLERANCE`] later without it (`Reason::RevertOff`). The model
//! cannot see what a loaded locality's queues add to a buffered call,
//! nor tell calls issued together from calls a busy worker issued one by
//! one without running out of tasks.
//!
//! Awaited calls that slow down by more than the phase change's factor
//! under a setting that holds them far longer than the model's would
//! (`Tuner::holds_far_longer`), and at least [`STAND_IN_WAIT_NS`] a
//! buffer, do not wait out the slowdown's confirmation in those buffers:
//! off stands in from the first such epoch, once a phase
//! (`Reason::OffUntilConfirmed`, the new phase's first decision; what
//! comes together is still coalesced under off), or, for bursts the model
//! sends in parts, those parts (`Reason::PartsUntilConfirmed`: the toy's
//! bursts after its batch waited 100 ms in the batch's buffers of 16,384
//! parcels), and the phase's setting comes back if the slowdown does not
//! last (`Reason::NotAPhase`).
//!
//! Then it stays put until the traffic changes: no decision is made while
//! it is steady.
//!
//! The calls of a phase awaited a thousand or more together let their
//! responses wait for company at the responder (`Tuner::responses_wait`,
//! said in their frames; see `aggregate/answer.rs`). That is no decision:
//! it follows the phase.

use std::fmt;

use super::model::{
    Bounds, Machine, Traffic, Wait, best_parcels_per_message, count_policy, parcels_held,
};
use crate::aggregate::{Coalescing, CountPolicy, MIN_SPLIT_PARCELS, PATIENT_WAIT_US};

/// What one epoch of counters says of one action towards one destination.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Epoch {
    pub(crate) traffic: Traffic,
    /// Parcels sent in the epoch.
    pub(crate) parcels: u64,
    /// What a parcel cost the locality in the epoch, in ns: background
    /// time (sending and receiving) per parcel.
    pub(crate) cost_ns_per_parcel: f64,
    /// The mean time from an awaited call being issued (into its buffer)
    /// to its response coming back, in ns, over the epoch (the locality's
    /// calls, by Little's law: calls in flight over calls a second,
    /// `runtime/tuning.rs`); `None` when too few calls left to tell.
    pub(crate) latency_ns: Option<f64>,
}

/// An epoch with fewer parcels than this says too little to judge: a
/// quiet moment, not a phase. A guess, tune me.
pub(crate) const MIN_PARCELS: u64 = 64;

/// Epochs in a row that must differ from the phase before a new phase
/// begins: hysteresis against odd epochs (the tail of a burst, a pause).
/// Two let ig's batch tails (10 ms at a tenth of the rate) restart the
/// tuning several times a run (BENCHMARKS.md, issue #15).
pub(crate) const CONFIRM_EPOCHS: u32 = 3;

/// Epochs in a row the rate must stay below the phase's (by
/// [`PhaseChange`]) before a new phase begins: a slowdown must last
/// 100 ms. Slower traffic wants fewer parcels a message, but too few costs
/// far more than too many (the matrix of BENCHMARKS.md, issue #15), and a
/// slowdown is often the tail of a burst: ig's between two batches set
/// 133 parcels a message for the first 30 ms of the next batch.
pub(crate) const CONFIRM_SLOWER_EPOCHS: u32 = 10;

/// The shortest wait in a buffer of the setting in force (the time its
/// first parcel waits for the others, at the slower rate) for which off
/// (or a burst's parts) stands in while a slowdown of awaited calls is confirmed
/// (`Tuner::stand_in_until_confirmed`): 30–60 loopback round trips (15–30 µs
/// on the machine of BENCHMARKS.md). The
/// dips of parquet's iterations (0.4 ms under its 64 parcels) must not
/// make two decisions in a steady phase; steady calls after bursts waited
/// 10 ms. A guess, tune me.
const STAND_IN_WAIT_NS: f64 = 1e6;

/// How many times faster than its phase traffic of posts must be, while
/// coalescing is off, for one epoch to begin a new phase. A guess, tune
/// me.
pub(crate) const OFF_SPEEDUP: f64 = 8.0;

/// Epochs whose cost per parcel is averaged to judge a setting, after
/// one left out (it mixes the old setting, and the flush of the change).
/// One epoch's cost swung 3–40 ns on ig. A guess, tune me.
pub(crate) const MEASURE_EPOCHS: u32 = 4;

/// What the epochs of a setting said once [`MEASURE_EPOCHS`] of them are
/// in: the mean cost per parcel, and the mean latency of the epochs that
/// measured one.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Measured {
    cost_ns: f64,
    latency_ns: Option<f64>,
}

/// The cost per parcel and the call latency of the setting in force,
/// averaged over epochs.
#[derive(Debug, Clone, Copy, Default)]
struct Samples {
    skip: u32,
    sum: f64,
    count: u32,
    latency_sum: f64,
    latencies: u32,
}

impl Samples {
    /// Samples of a setting just put in force: its first epoch is left out.
    fn after_change() -> Self {
        Samples {
            skip: 1,
            ..Samples::default()
        }
    }

    /// Adds an epoch's cost and latency; their means once there are
    /// [`MEASURE_EPOCHS`].
    fn add(&mut self, cost: f64, latency: Option<f64>) -> Option<Measured> {
        if self.skip > 0 {
            self.skip -= 1;
            return None;
        }
        self.sum += cost;
        self.count += 1;
        if let Some(latency) = latency {
            self.latency_sum += latency;
            self.latencies += 1;
        }
        (self.count >= MEASURE_EPOCHS).then(|| Measured {
            cost_ns: self.sum / f64::from(self.count),
            latency_ns: (self.latencies > 0).then(|| self.latency_sum / f64::from(self.latencies)),
        })
    }
}

/// The weight of a new epoch in a phase's moving mean is 1 over this. A
/// guess, tune me.
pub(crate) const PHASE_MEAN_EPOCHS: u32 = 8;

/// A larger setting is given up only if it raises the cost per parcel by
/// more than this fraction: within it, the difference is the noise of
/// the measure (the background time per parcel of four epochs moved by
/// up to 28 % between two settings of the same cost on histo, where
/// 0.05 sent one locality back to a setting 12 % slower; BENCHMARKS.md,
/// issue #15). Too large a setting costs more than that (1.5× at 16,384
/// parcels in the matrix's worst case).
pub(crate) const TOLERANCE: f64 = 0.25;

/// How many times the model's parcels a message the tuner tries for
/// traffic that tolerates delay.
const LARGER: f64 = 4.0;

/// Counts (or parcels held) within this ratio of each other are alike:
/// a decision between them is not worth its flush and its epochs of
/// measure (a quarter either way, as [`TOLERANCE`] for costs). A guess,
/// tune me.
const ALIKE: std::ops::RangeInclusive<f64> = 0.8..=1.25;

/// κ at or above which traffic counts as latency-bound: the tuner then
/// trusts the model and does not try larger messages. A call awaited with
/// nine others is at 0.1.
const LATENCY_BOUND_KAPPA: f64 = 0.1;

/// κ at or below which the responses to awaited calls may wait for
/// company at their responder (`Tuner::responses_wait`), and the calls
/// at least as long in their own buffers ([`wait`]): calls awaited a
/// thousand or more together, whose caller needs the last response of
/// many. Left to go when their run of calls has run, parquet's responses
/// took a message a run of 64 rows, half its messages (BENCHMARKS.md,
/// issue #15, eighteenth part); bursts of 500 awaited calls, split into
/// parts so that the first responses come back while the rest are
/// issued, keep that. A guess, tune me.
pub(crate) const RESPONSES_WAIT_KAPPA: f64 = 1e-3;

/// How long the first parcel of a buffer of `traffic`, whose κ is
/// `kappa`, waits: the longest the model sets for posts that tolerate
/// delay, twice the fill time for the rest. Awaited calls keep the
/// shorter wait even where many are awaited together: a caller that is
/// not a worker, or a worker that never runs out of tasks, has no idle
/// flush to send what its buffers hold. Calls awaited a thousand or more
/// together (κ at most [`RESPONSES_WAIT_KAPPA`]) wait at least as long
/// as their patient responses may ([`PATIENT_WAIT_US`]): a sender
/// stalled for credit then pushes nothing for a while, and twice
/// parquet's fill time (130–170 µs) cut its rows' buffers short by the
/// timer and sent the first row after the stall alone (BENCHMARKS.md,
/// issue #15, nineteenth part).
fn wait(traffic: &Traffic, kappa: f64) -> Wait {
    if kappa < LATENCY_BOUND_KAPPA && !traffic.mostly_awaited() {
        Wait::Longest
    } else if kappa <= RESPONSES_WAIT_KAPPA {
        Wait::AtLeast {
            us: PATIENT_WAIT_US,
        }
    } else {
        Wait::Fill
    }
}

/// How many messages a burst of awaited calls that fits in one is sent
/// in ([`Tuner::in_parts`]): the responder answers the first part while
/// the caller issues the rest. Bursts of 500 awaited calls came back in
/// 113–115 µs sent in messages of 125 or 250 under a static count, 144 µs
/// in one message of 500 and 182 µs in one of up to 2,000; under
/// adaptive, 109–124 µs in parts of 125, within 3 % of the static 250,
/// where the burst split by the model's `split` alone (two parts of 250
/// at the count of the burst) took 123–138 µs (BENCHMARKS.md, issue #15,
/// twenty-third part). The aggregator's own split of a worker's burst
/// (`Aggregator::split_parcels`) still applies under the count this
/// sets: a frame leaves at the smaller of the two. The middle of the flat
/// stretch; tune me.
const BURST_PARTS: f64 = 4.0;

/// The most parcels a message of the model's setting for which awaited
/// calls get a trial without coalescing: the calls the model would put
/// in one message are few, so a message a call is not many more. A
/// guess, tune me.
const SMALL_COUNT: u32 = 64;

/// The share of a core that sending every parcel in a message of its
/// own may take (`Q·α`) for awaited calls to get a trial without
/// coalescing. Above it, a message a call would load the sender more
/// than coalescing could cost its callers (bursts of 500 calls at
/// 100,000 a second take 0.9–2.6 cores that way). A guess, tune me.
const AFFORDABLE_OFF: f64 = 0.5;

/// How much traffic must change to begin a new phase: the rate by a
/// factor of 2, the parcel size by 1.5, the awaited share by a quarter,
/// κ by 4 (the calls awaited together: a burst of 500 at 100,000 calls
/// a second and a steady 50,000 awaited one by one differ by less than 2×
/// in rate, by 100× in κ). Guesses, tune me.
#[derive(Debug, Clone, Copy)]
struct PhaseChange;

impl PhaseChange {
    const RATE: f64 = 2.0;
    const SIZE: f64 = 1.5;
    const AWAITED: f64 = 0.25;
    const KAPPA: f64 = 4.0;

    fn between(a: &Traffic, b: &Traffic) -> bool {
        let ratio = |x: f64, y: f64| x.max(1e-9) / y.max(1e-9);
        let rate = ratio(a.parcels_per_s, b.parcels_per_s);
        let size = ratio(a.bytes_per_parcel, b.bytes_per_parcel);
        !(1.0 / Self::RATE..=Self::RATE).contains(&rate)
            || !(1.0 / Self::SIZE..=Self::SIZE).contains(&size)
            || (a.awaited - b.awaited).abs() > Self::AWAITED
            || !(1.0 / Self::KAPPA..=Self::KAPPA).contains(&ratio(a.kappa(), b.kappa()))
    }
}

/// Why the tuner chose a setting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Reason {
    /// A phase began: the model's setting for its traffic.
    NewPhase {
        parcels_per_s: f64,
        bytes_per_parcel: f64,
        kappa: f64,
        alpha_ns: f64,
    },
    /// Trying four times the parcels a message: the setting in force
    /// sent `parcels` a message (the model's count, or what a setting
    /// whose timer cut its buffers short held: four times that may be a
    /// smaller count, with a longer timer unless it waits the longest
    /// already) and cost this much a parcel.
    TryLarger {
        parcels: f64,
        cost_ns_per_parcel: f64,
    },
    /// The larger setting cost this much a parcel against the model's:
    /// back to the model's.
    Revert { larger_ns: f64, model_ns: f64 },
    /// Trying the awaited calls without coalescing; under the model's
    /// setting they took this long to come back.
    TryOff { latency_ns: f64 },
    /// Without coalescing the awaited calls took this long to come back,
    /// against this long under the model's setting: back to the model's.
    RevertOff { off_ns: f64, model_ns: f64 },
    /// Awaited calls slowed down to this rate under a setting that holds
    /// them far longer than the model's would: off (what comes together
    /// is still coalesced) until the new phase is confirmed.
    OffUntilConfirmed { parcels_per_s: f64 },
    /// Bursts of awaited calls slowed down to this rate under a setting
    /// that holds them far longer than the model's would: the model's
    /// parts (off would send them a message a call) until the new phase
    /// is confirmed.
    PartsUntilConfirmed { parcels_per_s: f64 },
    /// The slowdown did not last: back to the phase's setting.
    NotAPhase,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Reason::NewPhase {
                parcels_per_s,
                bytes_per_parcel,
                kappa,
                alpha_ns,
            } => write!(
                f,
                "new phase: Q = {parcels_per_s:.0}/s, S = {bytes_per_parcel:.0} B, \
                 κ = {kappa:.1e}, α = {alpha_ns:.0} ns: √(2Qα/κ)"
            ),
            Reason::TryLarger {
                parcels,
                cost_ns_per_parcel,
            } => write!(
                f,
                "trying 4× the parcels a message (now {parcels:.0} a message, \
                 {cost_ns_per_parcel:.1} ns a parcel)"
            ),
            Reason::Revert {
                larger_ns,
                model_ns,
            } => write!(
                f,
                "the larger setting cost {larger_ns:.1} ns a parcel against {model_ns:.1}: back"
            ),
            Reason::TryOff { latency_ns } => write!(
                f,
                "trying a message a call (calls now take {:.1} µs)",
                latency_ns / 1e3
            ),
            Reason::RevertOff { off_ns, model_ns } => write!(
                f,
                "calls took {:.1} µs without coalescing against {:.1}: back",
                off_ns / 1e3,
                model_ns / 1e3
            ),
            Reason::OffUntilConfirmed { parcels_per_s } => write!(
                f,
                "awaited calls slowed to {parcels_per_s:.0}/s, held far longer than the \
                 model's setting would: off until the phase is confirmed"
            ),
            Reason::PartsUntilConfirmed { parcels_per_s } => write!(
                f,
                "bursts of awaited calls slowed to {parcels_per_s:.0}/s, held far longer than \
                 the model's setting would: its parts until the phase is confirmed"
            ),
            Reason::NotAPhase => write!(f, "the slowdown did not last: back"),
        }
    }
}

/// A setting the tuner chose, and why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Decision {
    pub(crate) setting: Coalescing,
    pub(crate) reason: Reason,
}

/// Where the tuner is within a phase.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    /// The model's setting is in force; the next epoch measures it, and
    /// a larger one is tried next if `search`.
    Measure { model: Coalescing, search: bool },
    /// The larger setting is in force; the next epoch measures it against
    /// the model's cost.
    Compare { model: Coalescing, model_ns: f64 },
    /// Coalescing is off for awaited calls; the next epochs measure their
    /// latency against the model's setting's.
    CompareOff { model: Coalescing, model_ns: f64 },
    /// Nothing to do until the traffic changes.
    Settled,
}

/// Epochs in a row unlike the phase in force: the next phase once they
/// are enough (one epoch for posts many times faster under off,
/// [`CONFIRM_EPOCHS`] for most changes, [`CONFIRM_SLOWER_EPOCHS`] for a
/// slowdown).
#[derive(Debug, Clone, Copy)]
struct Candidate {
    /// The traffic and cost per parcel (under the setting in force) of
    /// its last [`CONFIRM_EPOCHS`] epochs, a ring.
    recent: [(Traffic, f64); CONFIRM_EPOCHS as usize],
    /// Epochs so far.
    epochs: u32,
}

impl Candidate {
    /// A candidate of one epoch, of `traffic` at `cost` a parcel.
    fn new(traffic: Traffic, cost: f64) -> Self {
        Candidate {
            recent: [(traffic, cost); CONFIRM_EPOCHS as usize],
            epochs: 1,
        }
    }

    /// Adds its next epoch.
    fn add(&mut self, traffic: Traffic, cost: f64) {
        self.recent[(self.epochs % CONFIRM_EPOCHS) as usize] = (traffic, cost);
        self.epochs += 1;
    }

    /// The traffic and cost of the phase it would begin: the mean of its
    /// last [`CONFIRM_EPOCHS`] epochs (of all while they are fewer). Its
    /// first epoch, the one the change came in, still counted the last
    /// phase: a window forgets it after a slowdown's ten epochs, where a
    /// moving mean kept part of it (a batch's 4.4 M calls a second
    /// before bursts at 100,000 began the bursts' phase at 184,000, and
    /// a second phase could follow in the same toy phase; BENCHMARKS.md,
    /// issue #15, sixteenth part).
    fn mean(&self) -> (Traffic, f64) {
        let n = self.epochs.min(CONFIRM_EPOCHS) as usize;
        let (mut traffic, mut cost) = self.recent[0];
        for (i, (t, c)) in self.recent[..n].iter().enumerate().skip(1) {
            let weight = 1.0 / (i + 1) as f64;
            traffic = traffic.toward(t, weight);
            cost += (c - cost) * weight;
        }
        (traffic, cost)
    }
}

/// The tuner of one action towards one destination.
#[derive(Debug, Clone)]
pub(crate) struct Tuner {
    bounds: Bounds,
    /// The traffic of the phase in force: the mean of the last epochs
    /// that began it ([`Candidate::mean`]), then a moving mean of its
    /// epochs.
    phase: Option<Traffic>,
    /// Epochs in a row unlike the phase: the next phase, once enough.
    candidate: Option<Candidate>,
    /// The cost of the setting in force, being measured.
    samples: Samples,
    step: Step,
    in_force: Coalescing,
    /// Decisions in the current phase (at most 3; off standing in and
    /// the way back from it, once a phase, are counted apart).
    in_phase: u32,
    /// The setting of the phase in force and its decisions so far, while
    /// off stands in for it until a slowdown of awaited calls is
    /// confirmed as a new phase (`Reason::OffUntilConfirmed`).
    stood_in_for: Option<(Coalescing, u32)>,
    /// Whether off stood in during the phase in force: once a phase, so
    /// that dips and returns do not flap.
    stood_in_this_phase: bool,
    /// Decisions made in all.
    decisions: u64,
    /// κ the program declared for the action, instead of the one inferred
    /// from its traffic.
    declared_kappa: Option<f64>,
}

impl Tuner {
    /// A tuner of a setting now `in_force`, choosing within `bounds`.
    pub(crate) fn new(in_force: Coalescing, bounds: Bounds) -> Self {
        Tuner {
            bounds,
            phase: None,
            candidate: None,
            samples: Samples::default(),
            step: Step::Settled,
            in_force,
            in_phase: 0,
            stood_in_for: None,
            stood_in_this_phase: false,
            decisions: 0,
            declared_kappa: None,
        }
    }

    /// This tuner, with the latency tolerance κ the program declared for
    /// the action (`None`: inferred from the traffic).
    pub(crate) fn declared_kappa(self, kappa: Option<f64>) -> Self {
        Tuner {
            declared_kappa: kappa,
            ..self
        }
    }

    /// κ of `traffic`: the declared one, else the one it implies.
    pub(crate) fn kappa(&self, traffic: &Traffic) -> f64 {
        self.declared_kappa.unwrap_or_else(|| traffic.kappa())
    }

    /// Whether the calls of the phase in force let their responses wait
    /// for company at the responder, under a patient policy of its own
    /// (see `aggregate/answer.rs`): most of them are awaited, and their κ
    /// is at most [`RESPONSES_WAIT_KAPPA`], and so is the traffic of the
    /// epochs that may begin the next phase, if any (bursts after a
    /// batch do not wait for it to be confirmed, 30–100 ms). False before
    /// the first phase.
    pub(crate) fn responses_wait(&self) -> bool {
        let patient = |traffic: &Traffic| {
            traffic.mostly_awaited() && self.kappa(traffic) <= RESPONSES_WAIT_KAPPA
        };
        self.phase.as_ref().is_some_and(patient)
            && self
                .candidate
                .as_ref()
                .is_none_or(|candidate| patient(&candidate.mean().0))
    }

    /// The setting in force.
    #[cfg(test)]
    pub(crate) fn in_force(&self) -> Coalescing {
        self.in_force
    }

    /// Decisions made so far.
    #[cfg(test)]
    pub(crate) fn decisions(&self) -> u64 {
        self.decisions
    }

    /// Takes one epoch, measured under the setting in force; returns the
    /// setting to put in force next, if it changes.
    pub(crate) fn observe(&mut self, epoch: &Epoch, machine: &Machine) -> Option<Decision> {
        if epoch.parcels < MIN_PARCELS {
            return None;
        }
        let now = &epoch.traffic;
        match self.phase {
            Some(phase) if !PhaseChange::between(&phase, now) => {
                // Alike: the phase goes on; its mean follows slow drift.
                self.candidate = None;
                self.phase = Some(phase.toward(now, 1.0 / f64::from(PHASE_MEAN_EPOCHS)));
                if let Some((setting, in_phase)) = self.stood_in_for.take() {
                    // The phase goes on with the decisions it had made.
                    let decision = self.decide(setting, Reason::NotAPhase);
                    self.in_phase = in_phase;
                    return decision;
                }
            }
            phase => {
                // Unlike the phase (or the first traffic): a candidate for
                // the next phase, which begins with the mean of its recent
                // epochs once they are enough ([`Candidate::mean`]).
                // A batch of calls after calls awaited one at a time
                // waits for its three epochs as most changes do: what one
                // poll issues together is coalesced meanwhile all the
                // same (`Aggregator::push`).
                let cost = epoch.cost_ns_per_parcel;
                let candidate = match self.candidate.as_mut() {
                    Some(candidate) => {
                        candidate.add(*now, cost);
                        *candidate
                    }
                    None => *self.candidate.insert(Candidate::new(*now, cost)),
                };
                let count = candidate.epochs;
                let (mean, mean_cost) = candidate.mean();
                // The phase's own setting, also while off stands in.
                let setting = self.stood_in_for.map_or(self.in_force, |(s, _)| s);
                let confirm = match phase {
                    // Awaited calls the model would send off, one message
                    // each at an affordable rate, wait for no slowdown's
                    // ten epochs: under the last phase's count they wait
                    // for company (steady calls after bursts ran their
                    // first 100 ms under the bursts' 2,000 parcels and
                    // 10 ms), and a mistaken phase costs at most half a
                    // core for a few epochs.
                    Some(phase)
                        if now.parcels_per_s < phase.parcels_per_s
                            && setting != Coalescing::Off
                            && self.model(&mean, machine).1 == Coalescing::Off
                            && mean.mostly_awaited() =>
                    {
                        CONFIRM_EPOCHS
                    }
                    Some(phase) if now.parcels_per_s < phase.parcels_per_s => CONFIRM_SLOWER_EPOCHS,
                    // Posts many times faster while coalescing is off pay
                    // a message a post until the phase is confirmed, where
                    // many tasks post one each (those one poll issues
                    // together are coalesced all the same): one epoch
                    // confirms it. Not for awaited calls: the first epoch
                    // of a batch after calls awaited one at a time still
                    // counts the lone calls, whose κ of 1 made the model
                    // choose 3 parcels a message for the batch.
                    Some(phase)
                        if setting == Coalescing::Off
                            && !now.mostly_awaited()
                            && now.parcels_per_s > phase.parcels_per_s * OFF_SPEEDUP =>
                    {
                        1
                    }
                    _ => CONFIRM_EPOCHS,
                };
                if count < confirm {
                    return self.stand_in_until_confirmed(phase.as_ref(), &mean, machine);
                }
                self.candidate = None;
                return self.begin_phase(&mean, mean_cost, machine);
            }
        }
        if self.step == Step::Settled {
            return None;
        }
        let measured = self
            .samples
            .add(epoch.cost_ns_per_parcel, epoch.latency_ns)?;
        let cost = measured.cost_ns;
        match self.step {
            Step::Settled => None,
            Step::Measure { model, search } => {
                self.step = Step::Settled;
                if self.in_phase >= 2 {
                    // No room left for a trial and its way back: off
                    // stood in while the phase was confirmed.
                    return None;
                }
                let Coalescing::Count(policy) = model else {
                    return None;
                };
                if let Some(latency_ns) = measured.latency_ns
                    && self.worth_trying_off(&policy, machine)
                {
                    self.step = Step::CompareOff {
                        model,
                        model_ns: latency_ns,
                    };
                    return self.decide(Coalescing::Off, Reason::TryOff { latency_ns });
                }
                if self.kappa(&epoch.traffic) >= LATENCY_BOUND_KAPPA || !search {
                    return None;
                }
                self.try_larger(model, f64::from(policy.num_parcels), &epoch.traffic, cost)
            }
            Step::CompareOff { model, model_ns } => {
                self.step = Step::Settled;
                // Within the tolerance, off stays: the callers wait for
                // no buffer and no timer, and the measure is noisy.
                let off_ns = measured.latency_ns?;
                if off_ns <= model_ns * (1.0 + TOLERANCE) {
                    return None;
                }
                self.decide(model, Reason::RevertOff { off_ns, model_ns })
            }
            Step::Compare { model, model_ns } => {
                self.step = Step::Settled;
                let larger_ns = cost;
                if larger_ns <= model_ns * (1.0 + TOLERANCE) {
                    return None;
                }
                self.decide(
                    model,
                    Reason::Revert {
                        larger_ns,
                        model_ns,
                    },
                )
            }
        }
    }

    /// Begins a phase of `traffic`, whose epochs so far cost `cost_ns` a
    /// parcel under the setting in force.
    fn begin_phase(
        &mut self,
        traffic: &Traffic,
        cost_ns: f64,
        machine: &Machine,
    ) -> Option<Decision> {
        self.phase = Some(*traffic);
        let stood_in = self.stood_in_for.take().is_some();
        self.stood_in_this_phase = false;
        if !stood_in {
            self.in_phase = 0;
        }
        let kappa = self.kappa(traffic);
        // A burst that fits in a message gets no larger trial: a larger
        // count only makes its calls wait for the timer or the idle
        // flush, and the cost per parcel, which would judge it, does not
        // see that wait (bursts of 500 came back in 144 µs under 500
        // parcels a message, 182 µs under the 2,000 the trial kept).
        let search = kappa < LATENCY_BOUND_KAPPA && self.burst(traffic).is_none();
        let (n, model) = self.model(traffic, machine);
        self.step = Step::Measure { model, search };
        if stood_in
            && let Coalescing::Count(policy) = model
            && self.worth_trying_off(&policy, machine)
        {
            // Off stood in while the phase was confirmed: the trial
            // without coalescing the model's few parcels a message would
            // get is what ran.
            self.step = Step::Settled;
            self.samples = Samples::default();
            return None;
        }
        if search && let Some(held) = self.holds_between(traffic, n, n * LARGER) {
            // Already where the model's search begins, on the cheap side
            // of the optimum: moving down to the model's count first would
            // cost the phase its dearest trial. The epochs that made the
            // phase measured the setting in force; the search goes on from
            // there, with four times what its buffers hold.
            self.samples = Samples::default();
            return self.try_larger(self.in_force, held, traffic, cost_ns);
        }
        if !differs(&model, &self.in_force, traffic) {
            self.samples = Samples::default();
            return None;
        }
        self.decide(
            model,
            Reason::NewPhase {
                parcels_per_s: traffic.parcels_per_s,
                bytes_per_parcel: traffic.bytes_per_parcel,
                kappa,
                alpha_ns: machine.alpha_ns,
            },
        )
    }

    /// The calls of a burst of `traffic` that fits in a message: calls
    /// awaited together, in traffic that tolerates delay, no more than a
    /// message of the bounds holds. `None` for other traffic.
    fn burst(&self, traffic: &Traffic) -> Option<f64> {
        // `together` below 1: how the calls overlap is not known.
        (traffic.together >= 1.0
            && self.kappa(traffic) < LATENCY_BOUND_KAPPA
            && traffic.mostly_awaited()
            && traffic.together <= self.bounds.most_parcels(traffic))
        .then_some(traffic.together)
    }

    /// The calls a message of a burst of `traffic` sent in
    /// [`BURST_PARTS`] parts (rounded up), where its parts hold at least
    /// [`MIN_SPLIT_PARCELS`] calls each, the fewest the aggregator puts in
    /// a part of a burst it splits: smaller parts cost more in messages
    /// than their overlap saves.
    fn in_parts(&self, traffic: &Traffic) -> Option<f64> {
        self.burst(traffic)
            .filter(|&calls| calls >= BURST_PARTS * f64::from(MIN_SPLIT_PARCELS))
            .map(|calls| (calls / BURST_PARTS).ceil())
    }

    /// The model's parcels a message for `traffic`, and its setting.
    fn model(&self, traffic: &Traffic, machine: &Machine) -> (f64, Coalescing) {
        let kappa = self.kappa(traffic);
        // Many calls awaited together, in traffic that tolerates delay,
        // were issued together, not a few at a time as `n*` would send
        // them: a burst goes in parts ([`Tuner::in_parts`]) or in one
        // message, and more calls than a message holds (a batch) go a
        // message of the bounds at a time.
        let together = if kappa < LATENCY_BOUND_KAPPA && traffic.mostly_awaited() {
            self.in_parts(traffic).unwrap_or(traffic.together)
        } else {
            0.0
        };
        let n = best_parcels_per_message(traffic, machine, kappa).max(together);
        // Awaited calls for which a message each is affordable are sent
        // so below two parcels a message, not only below 1.5: the model
        // prices a count of 2 at half a message a parcel, but a buffered
        // message costs more than a message (the first parcel arms the
        // timer, the second waits for it or for its partner): calls at a
        // steady 50,000 a second took 330–515 µs under it, ~100 µs
        // without (BENCHMARKS.md, issue #15).
        let off_below = if traffic.mostly_awaited() && affordable_off(traffic, machine) {
            2.0
        } else {
            1.5
        };
        let model = if n < off_below {
            Coalescing::Off
        } else {
            Coalescing::Count(count_policy(n, traffic, &self.bounds, wait(traffic, kappa)))
        };
        (n, model)
    }

    /// Tries [`LARGER`] times `parcels` a message instead of `from`, which
    /// cost `cost_ns` a parcel: the next epochs judge it against that
    /// (`Step::Compare`). Nothing if that is no different from `from`.
    fn try_larger(
        &mut self,
        from: Coalescing,
        parcels: f64,
        traffic: &Traffic,
        cost_ns: f64,
    ) -> Option<Decision> {
        let kappa = self.kappa(traffic);
        let policy = count_policy(
            parcels * LARGER,
            traffic,
            &self.bounds,
            wait(traffic, kappa),
        );
        let larger = Coalescing::Count(policy);
        if !differs(&larger, &from, traffic) {
            self.step = Step::Settled;
            return None;
        }
        self.step = Step::Compare {
            model: from,
            model_ns: cost_ns,
        };
        self.decide(
            larger,
            Reason::TryLarger {
                parcels,
                cost_ns_per_parcel: cost_ns,
            },
        )
    }

    /// Whether the phase's awaited calls, now under the model's count
    /// `policy`, get a trial without coalescing, judged by how long they
    /// take to come back: most of the phase's parcels are awaited calls,
    /// the model puts few in a message ([`SMALL_COUNT`]), and a message
    /// a call takes at most [`AFFORDABLE_OFF`] of a core, and they are not
    /// a burst sent in parts ([`Tuner::in_parts`]; see
    /// `stand_in_until_confirmed` for what off cost bursts). The model
    /// prices a parcel's wait in a buffer (κ·n/2Q) but not the queues a
    /// loaded locality adds, nor how many calls are awaited together
    /// when a busy worker issues them one by one without running out of
    /// tasks: calls at a steady 50,000 a second took 250–490 µs under the
    /// 2–35 parcels a message the model chose, 56–113 µs without
    /// (BENCHMARKS.md, issue #15).
    fn worth_trying_off(&self, policy: &CountPolicy, machine: &Machine) -> bool {
        let Some(phase) = self.phase else {
            return false;
        };
        phase.mostly_awaited()
            && policy.num_parcels <= SMALL_COUNT
            && affordable_off(&phase, machine)
            && self.in_parts(&phase).is_none()
    }

    /// Off (a burst's parts, for bursts) in force at the first epoch of
    /// awaited calls that slowed down (from `phase` to the candidate
    /// phase `traffic`) under a setting
    /// that holds them far longer than the model's would, and at least
    /// [`STAND_IN_WAIT_NS`] a buffer: until the new phase is confirmed,
    /// which takes a slowdown ten epochs (three where the model sends the
    /// calls off and the phase's setting did not), they would
    /// wait in buffers meant for the faster traffic (steady calls after
    /// bursts waited up to the bursts' 10 ms, and the phase never
    /// recovered: a mean of 0.2–1.2 ms a call against `off`'s 0.07–0.16;
    /// BENCHMARKS.md, issue #15, tenth part). Calls that come together
    /// are still coalesced under off (`Aggregator::push`). Checked at
    /// each epoch of the candidate phase against its mean (so mostly at
    /// the first), once a phase. The decision is the first of the new
    /// phase; if the slowdown does not last, the phase's setting comes
    /// back (`Reason::NotAPhase`) and the phase goes on with the
    /// decisions it had made. A new phase confirmed under the stand-in
    /// keeps off without the trial its model's few parcels a message
    /// would get (that trial is what ran, with nothing to compare it to),
    /// and one left with a single decision makes no trial at all. Bursts
    /// sent in parts ([`Tuner::in_parts`]) get the model's parts
    /// instead, since off would send them a message a call (bursts of 500
    /// awaited calls came back in 1.3–2.0 ms under off, 0.1–0.14 ms in
    /// parts; BENCHMARKS.md, issue #15); the phase confirmed under them
    /// keeps them, or takes the count of its own mean where that differs
    /// by more than a quarter.
    fn stand_in_until_confirmed(
        &mut self,
        phase: Option<&Traffic>,
        traffic: &Traffic,
        machine: &Machine,
    ) -> Option<Decision> {
        let phase = phase?;
        let Coalescing::Count(policy) = self.in_force else {
            return None;
        };
        let wait_ns = parcels_held(&policy, traffic) / traffic.parcels_per_s.max(1.0) * 1e9;
        if self.stood_in_this_phase
            || traffic.parcels_per_s * PhaseChange::RATE >= phase.parcels_per_s
            || !traffic.mostly_awaited()
            || wait_ns < STAND_IN_WAIT_NS
            || !self.holds_far_longer(traffic, machine)
        {
            return None;
        }
        // Bursts sent in parts get the model's parts, not off, which
        // would send them a message a call.
        let parcels_per_s = traffic.parcels_per_s;
        let (setting, reason) = match self.in_parts(traffic) {
            Some(_) => (
                self.model(traffic, machine).1,
                Reason::PartsUntilConfirmed { parcels_per_s },
            ),
            None => (Coalescing::Off, Reason::OffUntilConfirmed { parcels_per_s }),
        };
        self.stood_in_for = Some((self.in_force, self.in_phase));
        self.stood_in_this_phase = true;
        self.in_phase = 0;
        self.decide(setting, reason)
    }

    /// Whether the setting in force would hold `traffic`'s parcels in its
    /// buffers far longer than the model's setting: [`LARGER`] times as
    /// many a buffer (at one rate, as many times the wait), or the model
    /// sends them off and the setting in force does not.
    fn holds_far_longer(&self, traffic: &Traffic, machine: &Machine) -> bool {
        match (self.in_force, self.model(traffic, machine).1) {
            (Coalescing::Off, _) => false,
            (_, Coalescing::Off) => true,
            (Coalescing::Count(in_force), Coalescing::Count(model)) => {
                parcels_held(&in_force, traffic) > LARGER * parcels_held(&model, traffic)
            }
            _ => false,
        }
    }

    /// The parcels the setting in force sends a buffer of `traffic`, if
    /// between `low` and `high` (within the tolerance of [`differs`]).
    fn holds_between(&self, traffic: &Traffic, low: f64, high: f64) -> Option<f64> {
        let Coalescing::Count(policy) = self.in_force else {
            return None;
        };
        let held = parcels_held(&policy, traffic);
        (policy.max_bytes <= self.bounds.max_bytes
            && policy.num_parcels <= self.bounds.max_parcels
            && (low * ALIKE.start()..=high * ALIKE.end()).contains(&held))
        .then_some(held)
    }

    fn decide(&mut self, setting: Coalescing, reason: Reason) -> Option<Decision> {
        debug_assert!(self.in_phase < 3, "a fourth decision in one phase");
        self.in_phase += 1;
        self.decisions += 1;
        self.in_force = setting;
        self.samples = Samples::after_change();
        Some(Decision { setting, reason })
    }
}

/// Whether sending every parcel of `traffic` in a message of its own
/// would take at most [`AFFORDABLE_OFF`] of a core (`Q·α`).
fn affordable_off(traffic: &Traffic, machine: &Machine) -> bool {
    traffic.parcels_per_s * machine.alpha_ns * 1e-9 <= AFFORDABLE_OFF
}

/// Whether two settings differ enough to be worth a decision for
/// `traffic`: another kind, or counts, or the parcels their buffers hold
/// of it ([`parcels_held`]: the count, or fewer where the timer or the
/// byte bound sends first), more than a quarter apart. What a buffer
/// holds counts as much as its count: the start setting's 100 µs cuts a
/// stream of 11 M parcels a second to 1,100 of its 4,096, and the trial
/// of 4,400 at 10 ms, four times as many a message, was taken for no
/// change (RandomAccess kept the start setting all run, BENCHMARKS.md,
/// issue #15, eighteenth part). The interval alone does not count: it
/// follows the rate (twice the time the count takes to arrive), and
/// every phase would change it.
fn differs(a: &Coalescing, b: &Coalescing, traffic: &Traffic) -> bool {
    let apart = |x: f64, y: f64| !ALIKE.contains(&(x / y.max(1.0)));
    match (a, b) {
        (Coalescing::Count(a), Coalescing::Count(b)) => {
            apart(f64::from(a.num_parcels), f64::from(b.num_parcels))
                || apart(parcels_held(a, traffic), parcels_held(b, traffic))
                || a.max_bytes != b.max_bytes
        }
        (Coalescing::Off, Coalescing::Off) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::AdaptivePolicy;

    /// The count policy in force, if the setting is one.
    fn count(setting: Coalescing) -> Option<CountPolicy> {
        match setting {
            Coalescing::Count(p) => Some(p),
            _ => None,
        }
    }

    const ALPHA_NS: f64 = 7_000.0;
    const MACHINE: Machine = Machine { alpha_ns: ALPHA_NS };

    fn posts(q: f64, s: f64) -> Traffic {
        Traffic {
            parcels_per_s: q,
            bytes_per_parcel: s,
            awaited: 0.0,
            together: 0.0,
        }
    }

    /// A synthetic locality: the cost per parcel of a setting is the
    /// α-β model's plus `extra_ns_per_message` (what α does not see),
    /// with `noise` (a relative error, alternating in sign).
    fn epoch(traffic: Traffic, setting: Coalescing, extra_ns: f64, noise: f64, i: u64) -> Epoch {
        let n = count(setting).map_or(1.0, |p| f64::from(p.num_parcels));
        let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
        Epoch {
            traffic: Traffic {
                parcels_per_s: traffic.parcels_per_s * (1.0 + sign * noise),
                ..traffic
            },
            parcels: 1_000_000,
            cost_ns_per_parcel: (ALPHA_NS + extra_ns) / n * (1.0 + sign * noise),
            latency_ns: None,
        }
    }

    /// Runs `epochs` epochs of `traffic` through `tuner`; returns the
    /// decisions.
    fn run(
        tuner: &mut Tuner,
        traffic: Traffic,
        extra_ns: f64,
        noise: f64,
        epochs: u64,
    ) -> Vec<Decision> {
        (0..epochs)
            .filter_map(|i| {
                let e = epoch(traffic, tuner.in_force(), extra_ns, noise, i);
                tuner.observe(&e, &MACHINE)
            })
            .collect()
    }

    /// Runs `epochs` epochs of `traffic` whose cost per parcel is
    /// `cost(epoch, parcels a message in force)`; returns the decisions.
    fn run_costing(
        tuner: &mut Tuner,
        traffic: Traffic,
        epochs: u64,
        cost: impl Fn(u64, f64) -> f64,
    ) -> Vec<Decision> {
        (0..epochs)
            .filter_map(|i| {
                let mut e = epoch(traffic, tuner.in_force(), 0.0, 0.0, i);
                let n = count(tuner.in_force()).map_or(1.0, |p| f64::from(p.num_parcels));
                e.cost_ns_per_parcel = cost(i, n);
                tuner.observe(&e, &MACHINE)
            })
            .collect()
    }

    #[test]
    fn it_settles_in_at_most_three_decisions_and_then_makes_none() {
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        let traffic = posts(3e6, 8.0);
        let decisions = run(&mut tuner, traffic, 0.0, 0.0, 50);
        assert!((1..=3).contains(&decisions.len()), "{decisions:?}");
        assert!(matches!(decisions[0].reason, Reason::NewPhase { .. }));
        // Four times the parcels lowers this cost per parcel by 75 %: kept.
        assert_eq!(decisions.len(), 2, "{decisions:?}");
        let p = count(tuner.in_force()).expect("a count policy");
        assert_eq!(p.num_parcels, 2592, "4 × √(2Qα/κ) = 4 × 648");
        assert!(run(&mut tuner, traffic, 0.0, 0.0, 100).is_empty());
    }

    #[test]
    fn a_larger_setting_that_costs_more_is_reverted_and_a_tie_is_kept() {
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        // A cost that rises with n beyond the model's: what α missed is
        // a cost of large messages (cache misses in a receiver).
        let traffic = posts(3e6, 8.0);
        let decisions = run_costing(&mut tuner, traffic, 20, |_, n| 20.0 + n / 100.0);
        assert_eq!(decisions.len(), 3, "{decisions:?}");
        assert!(matches!(decisions[2].reason, Reason::Revert { .. }));
        assert_eq!(decisions[2].setting, decisions[0].setting);
        // A flat cost: the larger setting stays.
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        let decisions = run_costing(&mut tuner, traffic, 20, |_, _| 30.0);
        assert_eq!(decisions.len(), 2, "{decisions:?}");
    }

    #[test]
    fn a_setting_is_judged_on_the_mean_of_several_epochs() {
        // A flat cost, ±40 % from one epoch to the next: one epoch of
        // each setting would often compare 18 ns with 42.
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        let traffic = posts(3e6, 8.0);
        let decisions = run_costing(&mut tuner, traffic, 40, |i, _| {
            if i % 2 == 0 { 18.0 } else { 42.0 }
        });
        assert_eq!(decisions.len(), 2, "{decisions:?}");
        assert!(
            matches!(decisions[1].reason, Reason::TryLarger { cost_ns_per_parcel, .. } if cost_ns_per_parcel == 30.0)
        );
    }

    #[test]
    fn posts_wait_the_longest_interval_and_awaited_calls_two_fill_times() {
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        run(&mut tuner, posts(3e6, 8.0), 0.0, 0.0, 10);
        let posts = count(tuner.in_force()).expect("posts are coalesced");
        assert_eq!(posts.interval_us, 10_000, "{posts:?}");
        // Awaited 5 together (κ = 0.2) at 5 M/s: √(2 · 5e-3 · 7000 / 0.2)
        // ≈ 19 a message, which fill in 4 µs: the shortest interval.
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        run(&mut tuner, awaited(5e6, 5.0), 0.0, 0.0, 10);
        let calls = count(tuner.in_force()).expect("calls are coalesced");
        assert_eq!(
            (calls.num_parcels, calls.interval_us),
            (19, 10),
            "{calls:?}"
        );
        // Calls awaited 1,000 together (κ = 0.001) tolerate delay too, but
        // keep twice the fill time: 1,000 at 1 M/s fill in 1 ms.
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        run(&mut tuner, awaited(1e6, 1000.0), 0.0, 0.0, 10);
        let batch = count(tuner.in_force()).expect("a batch is coalesced");
        assert!(batch.interval_us < 10_000, "{batch:?}");
    }

    /// Calls awaited thousands together let their responses wait at the
    /// responder, and wait at least as long themselves; bursts of 500,
    /// calls awaited alone and posts do not; a change of phase takes it
    /// back.
    #[test]
    fn calls_awaited_thousands_together_let_their_responses_wait() {
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        assert!(!tuner.responses_wait(), "before the first phase");
        // 1 M rows of 1 KiB a second, awaited 32,768 together (parquet's):
        // 64 fill a buffer's 64 KiB in 64 µs, twice that is 128 µs.
        let rows = Traffic {
            bytes_per_parcel: 1024.0,
            ..awaited(1e6, 32_768.0)
        };
        run(&mut tuner, rows, 0.0, 0.0, 10);
        assert!(tuner.responses_wait());
        let batch = count(tuner.in_force()).expect("coalesced");
        assert_eq!(
            (batch.num_parcels, batch.interval_us),
            (64, PATIENT_WAIT_US),
            "{batch:?}"
        );
        // Into bursts of 500: their responses do not wait from their
        // first epoch on, before they are confirmed as a phase.
        let bursts = epoch(awaited(1e6, 500.0), tuner.in_force(), 0.0, 0.0, 0);
        assert_eq!(tuner.observe(&bursts, &MACHINE), None, "not yet a phase");
        assert!(!tuner.responses_wait(), "bursts after the batch");
        for (traffic, what) in [
            (awaited(1e6, 500.0), "bursts of 500"),
            (awaited(5e4, 1.0), "calls awaited alone"),
            (posts(1e6, 8.0), "posts"),
        ] {
            let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
            run(&mut tuner, traffic, 0.0, 0.0, 10);
            assert!(!tuner.responses_wait(), "{what}");
        }
    }

    /// The start setting's 100 µs cuts a stream of 11 M posts a second
    /// to 1,100 parcels a message, within the model's 1,241 to 4 × 1,241:
    /// the search goes on with four times that, 4,400, at the 10 ms of
    /// posts. That count is close to the start's 4,096, what its buffers
    /// hold is not: it is a decision (it was taken for none, and the
    /// stream kept the start setting).
    #[test]
    fn a_trial_that_holds_four_times_as_much_at_a_like_count_is_made() {
        let start = Coalescing::ON;
        assert_eq!(count(start).map(|p| p.interval_us), Some(100));
        let mut tuner = Tuner::new(start, AdaptivePolicy::DEFAULT.into());
        let decisions = run(&mut tuner, posts(11e6, 8.0), 0.0, 0.0, 10);
        let first = decisions.first().expect("a decision");
        assert!(
            matches!(first.reason, Reason::TryLarger { parcels, .. } if (parcels - 1100.0).abs() < 1.0),
            "{first:?}"
        );
        let tried = count(first.setting).expect("a count policy");
        assert_eq!((tried.num_parcels, tried.interval_us), (4400, 10_000));
    }

    #[test]
    fn noisy_steady_traffic_makes_no_decision_once_settled() {
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        let traffic = posts(3e6, 8.0);
        let first = run(&mut tuner, traffic, 0.0, 0.0, 10);
        assert!(!first.is_empty());
        // ±40 % on the rate and the cost, epoch to epoch.
        let later = run(&mut tuner, traffic, 0.0, 0.4, 200);
        assert!(later.is_empty(), "{later:?}");
        assert_eq!(tuner.decisions(), first.len() as u64);
    }

    #[test]
    fn a_phase_change_is_followed_after_some_epochs_and_a_blip_is_not() {
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        run(&mut tuner, posts(3e6, 8.0), 0.0, 0.0, 10);
        let before = tuner.decisions();
        // One epoch at a tenth of the rate: no phase.
        let blip = epoch(posts(3e5, 8.0), tuner.in_force(), 0.0, 0.0, 0);
        assert_eq!(tuner.observe(&blip, &MACHINE), None);
        assert!(run(&mut tuner, posts(3e6, 8.0), 0.0, 0.0, 5).is_empty());
        assert_eq!(tuner.decisions(), before);
        // The rate falls for good: a new phase after 100 ms.
        let slow = posts(3e4, 8.0);
        let e = epoch(slow, tuner.in_force(), 0.0, 0.0, 0);
        for _ in 1..CONFIRM_SLOWER_EPOCHS {
            assert_eq!(tuner.observe(&e, &MACHINE), None);
        }
        let d = tuner.observe(&e, &MACHINE).expect("a new phase");
        // The posts' setting waits 10 ms: at the slower rate its buffers
        // hold 300 parcels, on the cheap side of the model's 65, and the
        // search goes on from there.
        assert!(
            matches!(d.reason, Reason::TryLarger { parcels, .. } if (parcels - 300.0).abs() < 1.0),
            "{d:?}"
        );
        // A faster phase is followed after three epochs.
        let fast = epoch(posts(3e6, 8.0), tuner.in_force(), 0.0, 0.0, 0);
        for _ in 1..CONFIRM_EPOCHS {
            let d = tuner.observe(&fast, &MACHINE);
            assert!(
                d.is_none_or(|d| !matches!(d.reason, Reason::NewPhase { .. })),
                "{d:?}"
            );
        }
        let d = tuner.observe(&fast, &MACHINE).expect("a new phase");
        // From the 1,200 a message of the slow phase's trial, the same.
        assert!(
            matches!(d.reason, Reason::TryLarger { parcels, .. } if (parcels - 1200.0).abs() < 1.0),
            "{d:?}"
        );
        let e = epoch(slow, tuner.in_force(), 0.0, 0.0, 0);
        for _ in 0..CONFIRM_SLOWER_EPOCHS {
            tuner.observe(&e, &MACHINE);
        }
        let after = run(&mut tuner, slow, 0.0, 0.0, 50);
        assert!(after.len() <= 2, "{after:?}");
        // √(2 · 3e-5 · 7000 / 0.0001) ≈ 65 a message: the fast phase's
        // trial (4,800) stays, its 10 ms holding 300 of these, between
        // the model's count and four times it (with `holds_between`'s
        // margin), where the search ends.
        let policy = count(tuner.in_force()).expect("count");
        assert_eq!((policy.num_parcels, policy.interval_us), (4800, 10_000));
        let held = parcels_held(&policy, &slow);
        assert!((held - 300.0).abs() < 1.0, "{policy:?} holds {held}");
    }

    #[test]
    fn a_first_epoch_that_caught_half_a_phase_does_not_make_a_second_phase() {
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        let full = posts(3e6, 8.0);
        let half = epoch(posts(1.2e6, 8.0), tuner.in_force(), 0.0, 0.0, 0);
        assert_eq!(
            tuner.observe(&half, &MACHINE),
            None,
            "no phase on one epoch"
        );
        let decisions = run(&mut tuner, full, 0.0, 0.0, 50);
        let phases = decisions
            .iter()
            .filter(|d| matches!(d.reason, Reason::NewPhase { .. }))
            .count();
        assert_eq!(phases, 1, "{decisions:?}");
    }

    #[test]
    fn a_slowdown_begins_with_the_rate_of_its_recent_epochs() {
        // A fast phase, an epoch of its tail at half its rate, then a
        // slowdown to 90,000/s: the new phase is at about 90,000/s, not
        // pulled up by the tail (whose rate the mean of all ten would
        // hold at twice the slowdown's, so that its next epochs looked
        // unlike it again).
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        run(&mut tuner, posts(3.7e6, 8.0), 0.0, 0.0, 12);
        let tail = epoch(posts(1.6e6, 8.0), tuner.in_force(), 0.0, 0.0, 0);
        assert_eq!(tuner.observe(&tail, &MACHINE), None);
        run(
            &mut tuner,
            posts(9e4, 8.0),
            0.0,
            0.0,
            CONFIRM_SLOWER_EPOCHS as u64,
        );
        let q = tuner.phase.expect("a phase").parcels_per_s;
        assert!(q < 1.2e5, "the new phase's rate: {q}");
    }

    #[test]
    fn a_change_of_the_calls_awaited_together_is_a_new_phase() {
        // Bursts of 500 at 92,000 calls a second, then a steady 50,000
        // awaited 5 together: less than 2× apart in rate, 100× in κ.
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        run(&mut tuner, awaited(9.2e4, 500.0), 0.0, 0.0, 20);
        let steady = run(
            &mut tuner,
            awaited(5e4, 5.0),
            0.0,
            0.0,
            u64::from(CONFIRM_SLOWER_EPOCHS),
        );
        assert!(
            steady
                .iter()
                .any(|d| matches!(d.reason, Reason::NewPhase { .. })),
            "{steady:?}"
        );
    }

    #[test]
    fn calls_that_slow_down_into_ones_sent_alone_are_a_new_phase_after_three_epochs() {
        // Bursts of 500 at 92,000 calls a second, then a steady 50,000
        // awaited 5 together (κ = 0.2): the model sends those off.
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        run(&mut tuner, awaited(9.2e4, 500.0), 0.0, 0.0, 20);
        assert_ne!(tuner.in_force(), Coalescing::Off);
        let steady = epoch(awaited(5e4, 5.0), tuner.in_force(), 0.0, 0.0, 0);
        for _ in 1..CONFIRM_EPOCHS {
            assert_eq!(tuner.observe(&steady, &MACHINE), None);
        }
        let d = tuner.observe(&steady, &MACHINE).expect("a new phase");
        assert!(matches!(d.reason, Reason::NewPhase { .. }), "{d:?}");
        assert_eq!(d.setting, Coalescing::Off);
        // A batch's tail (a tenth of its rate, still awaited many
        // together) waits for the ten epochs of a slowdown.
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        run(&mut tuner, awaited(6e6, 20_000.0), 0.0, 0.0, 20);
        let tail = epoch(awaited(6e5, 20_000.0), tuner.in_force(), 0.0, 0.0, 0);
        for _ in 1..CONFIRM_SLOWER_EPOCHS {
            assert_eq!(tuner.observe(&tail, &MACHINE), None);
        }
        assert!(tuner.observe(&tail, &MACHINE).is_some());
    }

    /// A tuner settled on bursts of 8,000 awaited calls at 186,000 a
    /// second (more than a message of 64 KiB holds: 4,096 a message),
    /// and the steady 50,000 a second awaited 20 together that follow
    /// them: the model's count for those is 20 (κ = 0.05), where the
    /// bursts' setting holds some 500 of them a buffer.
    fn bursts_then_steady() -> (Tuner, Coalescing, Traffic) {
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        run(&mut tuner, awaited(1.86e5, 8000.0), 0.0, 0.0, 20);
        let bursts = tuner.in_force();
        let held = parcels_held(
            &count(bursts).expect("bursts are coalesced"),
            &awaited(5e4, 20.0),
        );
        assert!(held > 400.0, "{bursts:?} holds {held}");
        (tuner, bursts, awaited(5e4, 20.0))
    }

    #[test]
    fn awaited_calls_slowing_under_far_larger_buffers_go_off_until_the_phase_is_confirmed() {
        let (mut tuner, _, steady) = bursts_then_steady();
        let first = epoch(steady, tuner.in_force(), 0.0, 0.0, 0);
        let d = tuner.observe(&first, &MACHINE).expect("off at once");
        assert_eq!(d.setting, Coalescing::Off);
        assert!(
            matches!(d.reason, Reason::OffUntilConfirmed { .. }),
            "{d:?}"
        );
        // Once confirmed, the phase keeps off (the trial the model's count
        // of 20 would get is what ran): no decision more.
        let rest = run(&mut tuner, steady, 0.0, 0.0, 30);
        assert!(rest.is_empty(), "{rest:?}");
        assert_eq!(tuner.in_force(), Coalescing::Off);
        assert_eq!(tuner.phase.map(|p| p.parcels_per_s), Some(5e4));
    }

    #[test]
    fn bursts_after_a_batch_get_their_parts_until_the_phase_is_confirmed() {
        // The toy's bursts of 500 awaited calls every 5 ms after its batch
        // of 400,000 (4.5 M calls a second): a slowdown, under the batch's
        // 16,384 parcels and 7 ms, as the tuner set them there.
        let batch = count_with(16384, 7000);
        let mut tuner = Tuner::new(batch, AdaptivePolicy::DEFAULT.into());
        tuner.phase = Some(awaited(4.5e6, 4e5));
        let bursts = awaited(1e5, 500.0);
        assert!(tuner.holds_far_longer(&bursts, &MACHINE), "{batch:?}");
        let first = epoch(bursts, tuner.in_force(), 0.0, 0.0, 0);
        let d = tuner.observe(&first, &MACHINE).expect("parts at once");
        assert!(
            matches!(d.reason, Reason::PartsUntilConfirmed { .. }),
            "{d:?}"
        );
        assert_eq!(count(d.setting).map(|p| p.num_parcels), Some(125));
        // Confirmed, the phase keeps the parts: no decision more.
        let rest = run(&mut tuner, bursts, 0.0, 0.0, 30);
        assert!(rest.is_empty(), "{rest:?}");
        assert_eq!(tuner.in_force(), d.setting);
        assert_eq!(tuner.phase.map(|p| p.parcels_per_s), Some(1e5));
    }

    #[test]
    fn a_slowdown_that_does_not_last_gets_the_phase_setting_back() {
        let (mut tuner, bursts, steady) = bursts_then_steady();
        let first = epoch(steady, tuner.in_force(), 0.0, 0.0, 0);
        assert!(tuner.observe(&first, &MACHINE).is_some());
        let again = epoch(awaited(1.86e5, 2000.0), tuner.in_force(), 0.0, 0.0, 1);
        let d = tuner
            .observe(&again, &MACHINE)
            .expect("the bursts' setting back");
        assert_eq!(d.reason, Reason::NotAPhase);
        assert_eq!(d.setting, bursts);
        let rest = run(&mut tuner, awaited(1.86e5, 2000.0), 0.0, 0.0, 20);
        assert!(rest.is_empty(), "{rest:?}");
    }

    #[test]
    fn a_dip_that_buffers_hold_briefly_makes_no_decision() {
        // Parquet's iterations: awaited calls at 600,000 a second under 64
        // parcels a message, and an epoch at a quarter of the rate (the
        // model sends those off), whose buffers of 64 fill in 0.4 ms.
        let mut tuner = Tuner::new(count_with(64, 1698), AdaptivePolicy::DEFAULT.into());
        tuner.phase = Some(awaited(6e5, 5.0));
        let dip = epoch(awaited(1.5e5, 1.0), tuner.in_force(), 0.0, 0.0, 0);
        assert!(tuner.holds_far_longer(&dip.traffic, &MACHINE));
        assert_eq!(tuner.observe(&dip, &MACHINE), None);
    }

    #[test]
    fn off_stands_in_once_a_phase_however_often_the_traffic_dips() {
        let (mut tuner, bursts, steady) = bursts_then_steady();
        let mut decisions = Vec::new();
        for i in 0..20 {
            let traffic = if i % 2 == 0 {
                steady
            } else {
                awaited(1.86e5, 2000.0)
            };
            let e = epoch(traffic, tuner.in_force(), 0.0, 0.0, i);
            decisions.extend(tuner.observe(&e, &MACHINE));
        }
        let reasons: Vec<Reason> = decisions.iter().map(|d| d.reason).collect();
        assert!(
            matches!(
                reasons[..],
                [Reason::OffUntilConfirmed { .. }, Reason::NotAPhase]
            ),
            "{decisions:?}"
        );
        assert_eq!(tuner.in_force(), bursts);
    }

    #[test]
    fn a_phase_confirmed_under_off_with_one_decision_left_makes_no_trial() {
        // After the bursts, 40,000 calls a second awaited 80 together: κ
        // = 1/80 tolerates delay and the model's count is 80 (more than a
        // trial without coalescing is for), 200 held by the bursts'
        // setting at this rate, its first call waiting 10 ms. Off stands
        // in, the phase begins with the model's count, and no larger one
        // is tried: it could not be reverted within three decisions.
        let (mut tuner, _, _) = bursts_then_steady();
        let slower = awaited(4e4, 80.0);
        let decisions = run(&mut tuner, slower, 0.0, 0.0, 40);
        let reasons: Vec<Reason> = decisions.iter().map(|d| d.reason).collect();
        assert!(
            matches!(
                reasons[..],
                [Reason::OffUntilConfirmed { .. }, Reason::NewPhase { .. }]
            ),
            "{decisions:?}"
        );
        assert_eq!(count(tuner.in_force()).map(|p| p.num_parcels), Some(80));
    }

    /// A tuner that turned coalescing off for calls awaited one at a time.
    fn off_for_lone_calls() -> Tuner {
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        run(&mut tuner, awaited(30_000.0, 1.0), 0.0, 0.0, 10);
        assert_eq!(tuner.in_force(), Coalescing::Off);
        tuner
    }

    #[test]
    fn posts_that_speed_up_while_off_are_a_new_phase_at_once() {
        let mut tuner = off_for_lone_calls();
        let batch = epoch(posts(3e6, 8.0), tuner.in_force(), 0.0, 0.0, 0);
        let d = tuner
            .observe(&batch, &MACHINE)
            .expect("a new phase at once");
        assert!(matches!(d.reason, Reason::NewPhase { .. }), "{d:?}");
    }

    #[test]
    fn awaited_calls_that_speed_up_while_off_are_confirmed_as_any_change() {
        // What one poll issues together is coalesced under off all the
        // same (`Aggregator::push`): one odd epoch begins no phase.
        let mut tuner = off_for_lone_calls();
        let batch = epoch(awaited(3e6, 1000.0), tuner.in_force(), 0.0, 0.0, 0);
        for _ in 1..CONFIRM_EPOCHS {
            assert_eq!(tuner.observe(&batch, &MACHINE), None);
        }
        let d = tuner
            .observe(&batch, &MACHINE)
            .expect("a new phase once confirmed");
        assert!(matches!(d.reason, Reason::NewPhase { .. }), "{d:?}");
    }

    #[test]
    fn settings_stay_within_the_bounds() {
        let bounds = Bounds {
            max_bytes: 2048,
            max_parcels: 100,
        };
        for (q, s) in [(1e8, 8.0), (1e8, 1000.0), (1e6, 64.0), (10.0, 8.0)] {
            let mut tuner = Tuner::new(Coalescing::ON, bounds);
            for d in run(&mut tuner, posts(q, s), 0.0, 0.0, 20) {
                d.setting.validate().expect("a valid setting");
                if let Some(p) = count(d.setting) {
                    assert!(p.num_parcels <= 100, "{p:?}");
                    assert!(p.max_bytes <= 2048, "{p:?}");
                    assert!(
                        f64::from(p.num_parcels) * s <= 2048.0 + s,
                        "{p:?} for S = {s}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_lone_awaited_call_is_not_coalesced_and_nothing_larger_is_tried() {
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        let decisions = run(&mut tuner, awaited(20_000.0, 1.0), 0.0, 0.0, 30);
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        assert_eq!(tuner.in_force(), Coalescing::Off);
    }

    #[test]
    fn calls_awaited_together_go_in_parts_or_a_message_of_the_bounds() {
        // 500 calls awaited together at 100,000/s: √(2Qα/κ) is 26
        // parcels, but the 500 were issued at once: a quarter of them a
        // message, and no trial of more, whatever it would cost a parcel.
        let only = |traffic: Traffic, max_bytes| {
            let bounds = AdaptivePolicy {
                max_bytes,
                ..AdaptivePolicy::DEFAULT
            };
            let mut tuner = Tuner::new(Coalescing::ON, bounds.into());
            let decisions = run(&mut tuner, traffic, 0.0, 0.0, 50);
            assert_eq!(decisions.len(), 1, "{decisions:?}");
            count(decisions[0].setting).map(|p| p.num_parcels)
        };
        assert_eq!(only(awaited(1e5, 500.0), 1 << 16), Some(125));
        // 200 together are issued within a round trip: one message.
        assert_eq!(only(awaited(1e5, 200.0), 1 << 16), Some(200));
        // More than a message of the bounds holds (a batch): its bound.
        assert_eq!(only(awaited(1e5, 500.0), 400 * 16), Some(400));
    }

    #[test]
    fn a_burst_just_large_enough_for_parts_gets_parts_of_the_floor_and_no_off_trial() {
        // 257 calls awaited together at 30,000/s: four parts, rounded up
        // to 65 calls (not 64, a count small enough for a trial of off),
        // and however slowly they come back, no trial of off.
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        let decisions = run_timed(&mut tuner, awaited(3e4, 257.0), 50, latency(80.0, 300.0));
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        assert_eq!(count(decisions[0].setting).map(|p| p.num_parcels), Some(65));
        assert!(count(tuner.in_force()).is_some(), "{:?}", tuner.in_force());
    }

    #[test]
    fn awaited_calls_of_unknown_overlap_get_a_trial_of_more() {
        // Awaited calls at 3 M/s whose overlap is not known (`together`
        // 0): not a burst, so the model's count (648, as for posts) gets
        // its trial of four times as many.
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        let decisions = run(&mut tuner, awaited(3e6, 0.0), 0.0, 0.0, 50);
        assert!(
            matches!(decisions[0].reason, Reason::NewPhase { .. }),
            "{decisions:?}"
        );
        assert!(
            decisions
                .iter()
                .any(|d| matches!(d.reason, Reason::TryLarger { .. })),
            "{decisions:?}"
        );
    }

    #[test]
    fn a_setting_already_between_the_model_and_four_times_it_is_searched_from() {
        // 3 M posts/s: n* = 648. 2,000 parcels a message with a timer
        // long enough to fill them: within [n*, 4n*]. No move down to n*:
        // the next try is four times what it holds, judged against the
        // cost of the epochs that made the phase.
        let within = count_with(2_000, 10_000);
        let mut tuner = Tuner::new(within, AdaptivePolicy::DEFAULT.into());
        let decisions = run(&mut tuner, posts(3e6, 8.0), 0.0, 0.0, 50);
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        assert!(
            matches!(decisions[0].reason, Reason::TryLarger { parcels, .. } if parcels == 2_000.0),
            "{decisions:?}"
        );
        assert_eq!(
            count(decisions[0].setting).map(|p| p.num_parcels),
            Some(8_000)
        );
        // Dearer: back to the setting that was in force.
        let mut tuner = Tuner::new(within, AdaptivePolicy::DEFAULT.into());
        let decisions = run_costing(&mut tuner, posts(3e6, 8.0), 30, |_, n| 20.0 + n / 100.0);
        assert_eq!(decisions.len(), 2, "{decisions:?}");
        assert!(matches!(decisions[1].reason, Reason::Revert { .. }));
        assert_eq!(tuner.in_force(), within);
        // The same count under a 100 µs timer sends 300 parcels: below n*.
        let cut = count_with(2_000, 100);
        let mut tuner = Tuner::new(cut, AdaptivePolicy::DEFAULT.into());
        let decisions = run(&mut tuner, posts(3e6, 8.0), 0.0, 0.0, 50);
        assert!(
            matches!(decisions[0].reason, Reason::NewPhase { .. }),
            "{decisions:?}"
        );
        // Far above 4n*, or for awaited calls, the model's setting.
        let mut tuner = Tuner::new(within, AdaptivePolicy::DEFAULT.into());
        let decisions = run(&mut tuner, posts(3e5, 8.0), 0.0, 0.0, 50);
        assert!(
            matches!(decisions[0].reason, Reason::NewPhase { .. }),
            "{decisions:?}"
        );
        let mut tuner = Tuner::new(within, AdaptivePolicy::DEFAULT.into());
        assert!(!run(&mut tuner, awaited(3e6, 100.0), 0.0, 0.0, 50).is_empty());
    }

    #[test]
    fn a_declared_kappa_replaces_the_inferred_one() {
        // Posts at 3 M/s, but the program says a second of delay costs a
        // millisecond: √(2 · 0.003 · 7000 / 0.001) ≈ 205 parcels a
        // message, and then four times that.
        let large = count_with(10_000, 10_000);
        let mut tuner =
            Tuner::new(large, AdaptivePolicy::DEFAULT.into()).declared_kappa(Some(1e-3));
        let decisions = run(&mut tuner, posts(3e6, 8.0), 0.0, 0.0, 50);
        assert!(
            matches!(decisions[0].reason, Reason::NewPhase { kappa, .. } if kappa == 1e-3),
            "{decisions:?}"
        );
        assert_eq!(
            count(decisions[0].setting).map(|p| p.num_parcels),
            Some(205)
        );
        // Declared latency-bound: √(2 · 0.003 · 7000 / 1) ≈ 6.5 parcels,
        // nothing larger tried.
        let mut tuner =
            Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into()).declared_kappa(Some(1.0));
        let decisions = run(&mut tuner, posts(3e6, 8.0), 0.0, 0.0, 50);
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        assert_eq!(count(tuner.in_force()).map(|p| p.num_parcels), Some(6));
    }

    #[test]
    fn a_candidate_begins_with_the_mean_of_its_last_three_epochs() {
        let at = |q: f64| (posts(q, 8.0), q / 1000.0);
        let mut candidate = Candidate::new(at(1000.0).0, at(1000.0).1);
        let mut means = vec![candidate.mean()];
        for k in 2..=12 {
            let (traffic, cost) = at(1000.0 * f64::from(k));
            candidate.add(traffic, cost);
            means.push(candidate.mean());
        }
        // Epochs k of k,000 parcels a second: the mean of epochs 1..k
        // while k <= 3, then of k-2..k (k-1 thousand).
        let expected = |k: u32| match k {
            1..=3 => 1000.0 * f64::from(k + 1) / 2.0,
            _ => 1000.0 * f64::from(k - 1),
        };
        for (k, (traffic, cost)) in (1..).zip(&means) {
            let q = expected(k);
            assert!(
                (traffic.parcels_per_s - q).abs() < 1e-6,
                "epoch {k}: {traffic:?}"
            );
            assert!((cost - q / 1000.0).abs() < 1e-9, "epoch {k}: {cost}");
        }
        assert_eq!(candidate.epochs, 12);
    }

    /// A tuner within 1 MiB a buffer through 20 epochs of a batch of
    /// 400,000 calls awaited together at `batch_rate`, an epoch of
    /// `first`, then 40 of bursts of 500 at 100,000 calls a second;
    /// returns it and the decisions from `first` on.
    fn batch_then_bursts(batch_rate: f64, first: Traffic) -> (Tuner, Vec<Decision>) {
        let bounds = AdaptivePolicy {
            max_bytes: 1 << 20,
            ..AdaptivePolicy::DEFAULT
        };
        let mut tuner = Tuner::new(Coalescing::ON, bounds.into());
        run(&mut tuner, awaited(batch_rate, 400_000.0), 0.0, 0.0, 20);
        let first = epoch(first, tuner.in_force(), 0.0, 0.0, 0);
        let mut decisions: Vec<Decision> = tuner.observe(&first, &MACHINE).into_iter().collect();
        decisions.extend(run(&mut tuner, awaited(1e5, 500.0), 0.0, 0.0, 40));
        (tuner, decisions)
    }

    #[test]
    fn bursts_after_a_batch_begin_one_phase_though_their_first_epoch_counted_the_batch() {
        // A batch of 400,000 calls at 4 M a second; the first epoch of
        // the bursts that follow counts the batch's burst, closed at its
        // end (400,000 together); then bursts of 500 at 100,000 a second.
        // A mean of the counts carried the batch's into the bursts' phase
        // (κ 1.2e-4 against their 2e-3: 8,294 parcels a message, within
        // these bounds), and a second phase followed.
        let (_, decisions) = batch_then_bursts(4e6, awaited(1e5, 400_000.0));
        // The phase begins at the bursts' κ: from the batch's setting,
        // which sends them 819 a message, the search goes on (four times
        // that, back); no phase at the batch's κ, and no second one.
        assert!(
            decisions.iter().all(|d| match d.reason {
                Reason::NewPhase { kappa, .. } => kappa > 1e-3,
                _ => true,
            }),
            "{decisions:?}"
        );
        assert!(decisions.len() <= 3, "{decisions:?}");
        assert!(
            decisions.iter().all(|d| d.setting != Coalescing::Off),
            "bursts sent a message a call: {decisions:?}"
        );
    }

    #[test]
    fn bursts_after_a_batch_begin_at_their_own_rate_though_their_first_epoch_ran_at_the_batchs() {
        // A batch at 4.4 M calls a second; the first epoch unlike it ran
        // at the batch's rate with the bursts' 500 awaited together (the
        // switch came at its very end), then bursts of 500 at 100,000 a
        // second, confirmed as a slowdown after ten epochs. A moving mean
        // of the ten still counted 84,000 calls a second of the first
        // epoch: the phase began at 184,000 a second, where bursts a
        // little slower than these (or a batch a little faster) begin a
        // second phase within the same toy phase, four decisions in one
        // (BENCHMARKS.md, issue #15, sixteenth part).
        let (tuner, decisions) = batch_then_bursts(4.4e6, awaited(4.4e6, 500.0));
        let phases: Vec<f64> = decisions
            .iter()
            .filter_map(|d| match d.reason {
                Reason::NewPhase { parcels_per_s, .. } => Some(parcels_per_s),
                _ => None,
            })
            .collect();
        assert!(phases.iter().all(|&q| q < 1.2e5), "{decisions:?}");
        let q = tuner.phase.expect("a phase").parcels_per_s;
        assert!(q < 1.2e5, "the phase's rate: {q}");
        assert!(decisions.len() <= 3, "{decisions:?}");
    }

    /// A count policy of `n` parcels and `interval_us`, otherwise the
    /// default.
    fn count_with(n: u32, interval_us: u64) -> Coalescing {
        Coalescing::Count(CountPolicy {
            num_parcels: n,
            interval_us,
            ..CountPolicy::DEFAULT
        })
    }

    /// Calls awaited at `q` a second, `together` of them together.
    fn awaited(q: f64, together: f64) -> Traffic {
        Traffic {
            awaited: 1.0,
            together,
            ..posts(q, 16.0)
        }
    }

    /// Runs `epochs` epochs of `traffic` whose awaited calls take
    /// `latency_us(setting in force)` to come back; returns the decisions.
    fn run_timed(
        tuner: &mut Tuner,
        traffic: Traffic,
        epochs: u64,
        latency_us: impl Fn(Coalescing) -> f64,
    ) -> Vec<Decision> {
        (0..epochs)
            .filter_map(|i| {
                let mut e = epoch(traffic, tuner.in_force(), 0.0, 0.0, i);
                e.latency_ns = Some(latency_us(tuner.in_force()) * 1e3);
                tuner.observe(&e, &MACHINE)
            })
            .collect()
    }

    /// Latency in µs of calls that come back in `off_us` without
    /// coalescing and in `count_us` under any count.
    fn latency(off_us: f64, count_us: f64) -> impl Fn(Coalescing) -> f64 {
        move |setting| match setting {
            Coalescing::Off => off_us,
            _ => count_us,
        }
    }

    #[test]
    fn awaited_calls_that_come_back_sooner_without_coalescing_are_sent_without() {
        // 50,000 calls a second awaited 20 together: the model's count is
        // 20 (κ = 0.05), a message a call takes 0.35 of a core at
        // α = 7 µs. They come back in 300 µs under it, 80 µs without.
        let traffic = awaited(5e4, 20.0);
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        let decisions = run_timed(&mut tuner, traffic, 30, latency(80.0, 300.0));
        assert_eq!(decisions.len(), 2, "{decisions:?}");
        assert_eq!(count(decisions[0].setting).map(|p| p.num_parcels), Some(20));
        assert!(
            matches!(decisions[1].reason, Reason::TryOff { latency_ns } if latency_ns == 300e3),
            "{decisions:?}"
        );
        assert_eq!(tuner.in_force(), Coalescing::Off);
        // Steady: no decision however long it lasts.
        assert!(run_timed(&mut tuner, traffic, 200, latency(80.0, 300.0)).is_empty());
        // Within the tolerance, off stays too.
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        let decisions = run_timed(&mut tuner, traffic, 50, latency(110.0, 100.0));
        assert_eq!(decisions.len(), 2, "{decisions:?}");
        assert_eq!(tuner.in_force(), Coalescing::Off);
    }

    #[test]
    fn awaited_calls_that_come_back_later_without_coalescing_go_back_to_the_model() {
        let traffic = awaited(5e4, 20.0);
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        let decisions = run_timed(&mut tuner, traffic, 30, latency(400.0, 100.0));
        assert_eq!(decisions.len(), 3, "{decisions:?}");
        assert!(
            matches!(decisions[2].reason, Reason::RevertOff { off_ns, model_ns }
                if off_ns == 400e3 && model_ns == 100e3),
            "{decisions:?}"
        );
        assert_eq!(decisions[2].setting, decisions[0].setting);
        assert!(run_timed(&mut tuner, traffic, 200, latency(400.0, 100.0)).is_empty());
    }

    #[test]
    fn awaited_calls_the_model_would_pair_are_sent_alone_when_affordable() {
        // 50,000 calls a second awaited 5 together: κ = 0.2, √(2Qα/κ) =
        // 1.87 parcels a message, a message a call 0.35 of a core.
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        let decisions = run_timed(&mut tuner, awaited(5e4, 5.0), 30, latency(80.0, 300.0));
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        assert_eq!(tuner.in_force(), Coalescing::Off);
        // Posts declared as intolerant as that are paired: nobody waits
        // for them, a message each only costs.
        let mut tuner =
            Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into()).declared_kappa(Some(0.2));
        run(&mut tuner, posts(5e4, 16.0), 0.0, 0.0, 30);
        assert_eq!(count(tuner.in_force()).map(|p| p.num_parcels), Some(2));
        // Awaited calls at 200,000 a second (1.4 cores a message each),
        // whose count the model puts at 2 (κ = 0.8): paired.
        let mut tuner =
            Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into()).declared_kappa(Some(0.8));
        run(&mut tuner, awaited(2e5, 1.0), 0.0, 0.0, 30);
        assert_eq!(count(tuner.in_force()).map(|p| p.num_parcels), Some(2));
    }

    #[test]
    fn no_trial_without_coalescing_for_large_counts_dear_messages_posts_or_no_latency() {
        let never_off = |traffic: Traffic, timed: bool| {
            let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
            let decisions = if timed {
                run_timed(&mut tuner, traffic, 50, latency(1.0, 1000.0))
            } else {
                run(&mut tuner, traffic, 0.0, 0.0, 50)
            };
            assert!(!decisions.is_empty());
            assert!(
                decisions
                    .iter()
                    .all(|d| !matches!(d.reason, Reason::TryOff { .. })),
                "{traffic:?}: {decisions:?}"
            );
        };
        // Bursts of 500 awaited together: 500 a message.
        never_off(awaited(5e4, 500.0), true);
        // 100,000 a second: a message a call would take 0.7 of a core.
        never_off(awaited(1e5, 20.0), true);
        // Posts nobody awaits.
        never_off(posts(5e4, 8.0), true);
        // No latency measured (too few calls awaited in each epoch).
        never_off(awaited(5e4, 20.0), false);
    }

    #[test]
    fn quiet_epochs_are_skipped() {
        let mut tuner = Tuner::new(Coalescing::ON, AdaptivePolicy::DEFAULT.into());
        let mut e = epoch(posts(10.0, 8.0), tuner.in_force(), 0.0, 0.0, 0);
        e.parcels = MIN_PARCELS - 1;
        for _ in 0..10 {
            assert_eq!(tuner.observe(&e, &MACHINE), None);
        }
        assert_eq!(tuner.decisions(), 0);
    }
}
