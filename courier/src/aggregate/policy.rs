//! Flush policies: when a buffer of parcels becomes a message.
//!
//! [`Coalescing`] is what a user sets per action (and per destination):
//! off, the HPX count policy ([`CountPolicy`], Wagle et al. 2018 Algorithm 1), or
//! the TRAM byte policy ([`BytePolicy`], Narayanan 2020). Both policies implement
//! the one internal [`FlushPolicy`] trait, which the buffer asks after every
//! parcel it takes.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How the parcels of one action to one destination are coalesced into
/// messages.
///
/// Set it for every action (but those marked
/// `#[courier::action(coalescing = false)]`) with
/// [`Config::coalescing`](crate::Config::coalescing), `--coalescing` or
/// `COURIER_COALESCING`, for one action with
/// [`Config::coalesce_action`](crate::Config::coalesce_action), and for any
/// action while the program runs with
/// [`Runtime::set_coalescing`](crate::Runtime::set_coalescing).
///
/// The text form (flags, environment) is `off`, `on` (the count policy
/// with its defaults), `count[:key=value,...]`
/// with keys `num_parcels`, `interval_us`, `max_bytes`, or
/// `bytes[:key=value,...]` with keys `buffer_bytes`, `threshold`,
/// `cutoff`, `timeout_us`; both also take `dimensions` (1 or 2, see
/// [`Coalescing::dimensions`]). `adaptive[:max_bytes=N,max_parcels=N,kappa=F,split=N]`
/// lets the runtime tune the count policy ([`AdaptivePolicy`]). Keys
/// left out keep their defaults.
///
/// # Examples
///
/// ```
/// use courier::{BytePolicy, Coalescing, CountPolicy};
///
/// let hpx: Coalescing = "count:num_parcels=64,interval_us=500".parse().unwrap();
/// assert_eq!(hpx, Coalescing::Count(CountPolicy { num_parcels: 64, interval_us: 500, ..CountPolicy::DEFAULT }));
///
/// let tram: Coalescing = "bytes:buffer_bytes=8192,threshold=0.8".parse().unwrap();
/// assert_eq!(tram, Coalescing::Bytes(BytePolicy { buffer_bytes: 8192, threshold: 0.8, ..BytePolicy::DEFAULT }));
///
/// // TRAM's constraint f_t + f_c <= 1 is checked:
/// assert!("bytes:threshold=0.9,cutoff=0.2".parse::<Coalescing>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Coalescing {
    /// Every parcel is sent as its own message, at once.
    Off,
    /// Count parcels (HPX, Wagle et al. 2018 Algorithm 1).
    Count(CountPolicy),
    /// Count bytes (Charm++ TRAM, Narayanan 2020).
    Bytes(BytePolicy),
    /// Let the runtime choose and change the count policy's parameters
    /// while the program runs, from its counters, within the bounds given
    /// (see [`AdaptivePolicy`]).
    Adaptive(AdaptivePolicy),
}

impl Coalescing {
    /// The coalescing of every action unless configured otherwise
    /// ([`Config::coalescing`](crate::Config::coalescing)): adaptive, each
    /// locality's tuner setting the count policy of every action towards
    /// every destination from the traffic it measures
    /// ([`AdaptivePolicy::DEFAULT`]'s bounds). In issue #15's workload
    /// matrix (BENCHMARKS.md) it came within 5 % of the best static setting
    /// of each workload and phase, and never behind the count policy with
    /// its defaults (`on`), the default before it.
    ///
    /// ```
    /// use courier::{AdaptivePolicy, Coalescing};
    ///
    /// assert_eq!(Coalescing::DEFAULT, Coalescing::Adaptive(AdaptivePolicy::DEFAULT));
    /// assert_eq!(Coalescing::default(), Coalescing::DEFAULT);
    /// // The count policy with its defaults, the default before adaptive:
    /// assert_eq!("on".parse::<Coalescing>(), Ok(Coalescing::ON));
    /// ```
    pub const DEFAULT: Coalescing = Coalescing::Adaptive(AdaptivePolicy::DEFAULT);

    /// The count policy with its defaults ([`CountPolicy::DEFAULT`]), the
    /// text form `on` or `count`: the default before adaptive.
    ///
    /// ```
    /// use courier::{Coalescing, CountPolicy};
    ///
    /// assert_eq!(Coalescing::ON, Coalescing::Count(CountPolicy::DEFAULT));
    /// ```
    pub const ON: Coalescing = Coalescing::Count(CountPolicy::DEFAULT);
}

impl Default for Coalescing {
    /// [`Coalescing::DEFAULT`]: adaptive.
    fn default() -> Self {
        Coalescing::DEFAULT
    }
}

/// HPX's policy (Wagle et al. 2018 Algorithm 1): a message holds up to `num_parcels`
/// parcels. The first parcel into an empty buffer starts a timer of
/// `interval_us`; the buffer is flushed when it holds `num_parcels` parcels,
/// when another parcel of the size of the last would take it over
/// `max_bytes`, or when the timer fires. A parcel that comes more than
/// `interval_us` after the previous one, into an empty buffer, goes out at
/// once: sparse traffic gets no added latency.
///
/// Unlike HPX, each worker fills buffers of its own, and a worker about to
/// run out of tasks flushes them (under either policy): a lone call never
/// waits for the timer when there is nothing else to do, and the timer only
/// matters while the worker stays busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountPolicy {
    /// Parcels per message (HPX `num_messages`).
    pub num_parcels: u32,
    /// Longest wait of the first parcel, and the gap above which a parcel
    /// counts as sparse, in microseconds (HPX `interval`).
    pub interval_us: u64,
    /// Bytes a message may hold whatever its count (a memory bound),
    /// counted on the wire, headers included: the buffer is flushed as
    /// soon as another parcel of the size of the last would take the
    /// frame over it, so a frame of parcels of one size stays within it.
    /// A parcel of more than about half of it leaves at once, with what
    /// the buffer held.
    pub max_bytes: usize,
    /// Virtual topology: 1 sends straight to the destination, 2 routes
    /// through a 2D grid (TRAM `numDimensions`; see [`Coalescing::dimensions`]).
    pub dimensions: u8,
}

impl CountPolicy {
    /// 4096 parcels, 100 µs, 64 KiB, direct.
    ///
    /// The count amortizes a message's fixed cost (about 7 µs on loopback
    /// TCP, 0.2–4 µs over MPI shared memory, BENCHMARKS.md) below 2 ns a
    /// parcel; the 64 KiB bound keeps a buffer of larger parcels within the
    /// size the transports move best. HPX's example uses fewer parcels, but
    /// it pays a task per parcel on receipt where Courier pays a few
    /// nanoseconds.
    pub const DEFAULT: CountPolicy = CountPolicy {
        num_parcels: 4096,
        interval_us: 100,
        max_bytes: 64 << 10,
        dimensions: 1,
    };
}

/// TRAM's policy (Narayanan 2020 §1.4, Appendix B): a buffer of `buffer_bytes`
/// (b) is flushed once it holds more than `threshold`·b bytes (f_t) or its
/// first parcel waited `timeout_us`; a parcel larger than `cutoff`·b (f_c)
/// is not buffered but sent at once, after what the buffer holds (in the same
/// message, so that order is kept). Requires f_t + f_c ≤ 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BytePolicy {
    /// Buffer size b in bytes (TRAM `bufferSize`).
    pub buffer_bytes: usize,
    /// Threshold fraction f_t in (0, 1] (TRAM `thresholdNum/thresholdDen`).
    pub threshold: f64,
    /// Cutoff fraction f_c in [0, 1] (TRAM `cutoffNum/cutoffDen`).
    pub cutoff: f64,
    /// Longest wait of the first parcel, in microseconds (TRAM `timeout`).
    pub timeout_us: u64,
    /// Virtual topology: 1 or 2 (TRAM `numDimensions`; see
    /// [`Coalescing::dimensions`]).
    pub dimensions: u8,
}

/// Adaptive coalescing: each locality's tuner sets the count policy of
/// the action from the traffic it measures (rate and size of parcels,
/// the cost of a message, how many callers wait), at most three times
/// per phase of the traffic and never while it is steady. It starts
/// from the default count policy. A burst of awaited calls a worker
/// issues leaves split into parts (see [`AdaptivePolicy::split`]), so
/// that the destination starts on the first while the rest is issued
/// (counted by `/coalescing/count/flush-split`). Text form: `adaptive` or
/// `adaptive:max_bytes=B,max_parcels=N,kappa=K,split=N` (each optional).
///
/// # Examples
///
/// ```
/// use courier::{AdaptivePolicy, Coalescing};
///
/// let a: Coalescing = "adaptive:max_bytes=16384".parse().unwrap();
/// assert_eq!(a, Coalescing::Adaptive(AdaptivePolicy { max_bytes: 16384, ..AdaptivePolicy::DEFAULT }));
/// // An action whose every call a caller waits for, while its worker
/// // has other work: a second of delay costs a second.
/// let urgent: Coalescing = "adaptive:kappa=1".parse().unwrap();
/// assert_eq!(urgent, Coalescing::Adaptive(AdaptivePolicy { kappa: Some(1.0), ..AdaptivePolicy::DEFAULT }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AdaptivePolicy {
    /// Bytes a buffer may hold at most (per destination and worker). The
    /// tuner also keeps a buffer within a quarter of the destination's
    /// credit window (`Config::credit_window`), the credit a target gives
    /// back at a time.
    pub max_bytes: usize,
    /// Parcels a message may hold at most.
    pub max_parcels: u32,
    /// The action's latency tolerance κ, if the program declares it: what
    /// delaying one parcel by a second costs, in seconds (seed 004's
    /// `c(t) = κ·t`). 1 for a call its caller waits for with nothing else
    /// to do, `1/k` for one of `k` calls awaited together; `None` (the
    /// default): inferred from the traffic, as 1 per awaited call shared
    /// among the calls awaited with it and 1e-4 per post. The tuner
    /// sets `√(2Qα/κ)` parcels a message, and tries larger ones only
    /// below κ = 0.1, where posts also wait up to 10 ms for their buffer
    /// to fill (awaited calls twice the time it takes to fill, and at
    /// least 1 ms where a thousand or more are awaited together, whose
    /// responses then also wait for company): a lower κ buys larger
    /// messages with longer waits.
    pub kappa: Option<f64>,
    /// The calls a part of a burst of awaited calls holds: a burst a
    /// worker issues (the calls it issues before it runs out of tasks)
    /// leaves split into parts, so that the destination starts on the
    /// first while the worker issues the rest. `None` (the default): the
    /// model's, about `√(n·2α/c)` calls a part for a burst of `n` (α the
    /// cost of a message the tuner measures, two a part: its calls' and
    /// its responses'; `c` = 100 ns the cost of a call on the burst's
    /// way), at least 64; `Some(0)`: bursts leave whole (at the count in
    /// force); `Some(k)`: parts of `k` calls. A part never holds more
    /// than the count in force.
    pub split: Option<u32>,
}

impl AdaptivePolicy {
    /// 64 KiB (the count policy's byte bound) and 16,384 parcels (4× its
    /// count).
    pub const DEFAULT: AdaptivePolicy = AdaptivePolicy {
        max_bytes: 64 << 10,
        max_parcels: 16 << 10,
        kappa: None,
        split: None,
    };

    /// The count policy patient responses wait under
    /// (`aggregate/answer.rs`) where `in_force` is the action's setting
    /// towards their caller: as many as these bounds allow, for
    /// [`PATIENT_WAIT_US`](super::answer::PATIENT_WAIT_US) or the
    /// interval in force, whichever is longer.
    pub(crate) fn patient(&self, in_force: Coalescing) -> CountPolicy {
        let in_force_us = in_force.policy().map_or(0, |p| {
            u64::try_from(p.wait().as_micros()).unwrap_or(u64::MAX)
        });
        CountPolicy {
            num_parcels: self.max_parcels,
            interval_us: in_force_us.max(super::answer::PATIENT_WAIT_US),
            max_bytes: self.max_bytes,
            dimensions: 1,
        }
    }

    /// The setting buffers start from: the default count policy within
    /// these bounds.
    pub(crate) fn start(&self) -> CountPolicy {
        CountPolicy {
            num_parcels: CountPolicy::DEFAULT.num_parcels.min(self.max_parcels),
            max_bytes: self.max_bytes,
            ..CountPolicy::DEFAULT
        }
    }
}

impl BytePolicy {
    /// 16 KiB, f_t = 0.9, f_c = 0.1, 100 µs, direct (the example of Narayanan 2020
    /// Appendix B with a round buffer size and one dimension).
    pub const DEFAULT: BytePolicy = BytePolicy {
        buffer_bytes: 16 << 10,
        threshold: 0.9,
        cutoff: 0.1,
        timeout_us: 100,
        dimensions: 1,
    };
}

impl Coalescing {
    /// Checks the parameters: at least one parcel per message, a buffer of
    /// at least 64 bytes, fractions in range with f_t + f_c ≤ 1.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=2).contains(&self.dimensions()) {
            return Err(format!(
                "dimensions must be 1 (direct) or 2 (2D grid), not {}",
                self.dimensions()
            ));
        }
        match *self {
            Coalescing::Off => Ok(()),
            Coalescing::Adaptive(p) => {
                if p.max_parcels == 0 {
                    return Err("max_parcels must be at least 1".into());
                }
                if p.max_bytes < 64 {
                    return Err(format!(
                        "max_bytes must be at least 64, not {}",
                        p.max_bytes
                    ));
                }
                if let Some(k) = p.kappa
                    && !(k.is_finite() && k > 0.0)
                {
                    return Err(format!("kappa must be a positive number, not {k}"));
                }
                Ok(())
            }
            Coalescing::Count(p) => {
                if p.num_parcels == 0 {
                    return Err("num_parcels must be at least 1".into());
                }
                if p.max_bytes == 0 {
                    return Err("max_bytes must be at least 1".into());
                }
                Ok(())
            }
            Coalescing::Bytes(p) => {
                if p.buffer_bytes < 64 {
                    return Err(format!(
                        "buffer_bytes must be at least 64, not {}",
                        p.buffer_bytes
                    ));
                }
                if !(p.threshold > 0.0 && p.threshold <= 1.0) {
                    return Err(format!("threshold must be in (0, 1], not {}", p.threshold));
                }
                if !(0.0..=1.0).contains(&p.cutoff) {
                    return Err(format!("cutoff must be in [0, 1], not {}", p.cutoff));
                }
                if p.threshold + p.cutoff > 1.0 + 1e-12 {
                    return Err(format!(
                        "threshold + cutoff must be at most 1 (Narayanan 2020 Eq. 1.3), not {} + {}",
                        p.threshold, p.cutoff
                    ));
                }
                Ok(())
            }
        }
    }

    /// The virtual topology calls travel through (Narayanan 2020 §2.1): 1, each
    /// call goes straight to its destination; 2, the localities form a grid
    /// of ⌈√N⌉ columns and a call to a locality in another row and column
    /// goes first to the locality in the caller's row and the destination's
    /// column, which forwards it (coalesced with its own parcels, without
    /// decoding the arguments). A locality then aggregates towards
    /// O(√N) neighbours instead of N. Responses always go straight back.
    pub fn dimensions(&self) -> u8 {
        match self {
            Coalescing::Off | Coalescing::Adaptive(_) => 1,
            Coalescing::Count(p) => p.dimensions,
            Coalescing::Bytes(p) => p.dimensions,
        }
    }

    /// Whether parcels are buffered at all.
    pub fn is_on(&self) -> bool {
        !matches!(self, Coalescing::Off)
    }

    /// The setting buffers hold: an adaptive one's starting count policy,
    /// any other as it is.
    pub(crate) fn in_force(self) -> Coalescing {
        match self {
            Coalescing::Adaptive(p) => Coalescing::Count(p.start()),
            other => other,
        }
    }

    /// The policy behind this setting, if any.
    pub(crate) fn policy(&self) -> Option<&dyn FlushPolicy> {
        match self {
            Coalescing::Off | Coalescing::Adaptive(_) => None,
            Coalescing::Count(p) => Some(p),
            Coalescing::Bytes(p) => Some(p),
        }
    }
}

impl fmt::Display for Coalescing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Coalescing::Off => return write!(f, "off"),
            Coalescing::Adaptive(p) => {
                write!(
                    f,
                    "adaptive:max_bytes={},max_parcels={}",
                    p.max_bytes, p.max_parcels
                )?;
                if let Some(k) = p.kappa {
                    write!(f, ",kappa={k}")?;
                }
                if let Some(n) = p.split {
                    write!(f, ",split={n}")?;
                }
                return Ok(());
            }
            Coalescing::Count(p) => write!(
                f,
                "count:num_parcels={},interval_us={},max_bytes={}",
                p.num_parcels, p.interval_us, p.max_bytes
            )?,
            Coalescing::Bytes(p) => write!(
                f,
                "bytes:buffer_bytes={},threshold={},cutoff={},timeout_us={}",
                p.buffer_bytes, p.threshold, p.cutoff, p.timeout_us
            )?,
        }
        if self.dimensions() != 1 {
            write!(f, ",dimensions={}", self.dimensions())?;
        }
        Ok(())
    }
}

impl FromStr for Coalescing {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
        let pairs = rest
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                p.split_once('=')
                    .map(|(k, v)| (k.trim(), v.trim()))
                    .ok_or_else(|| format!("`{p}` is not key=value"))
            });
        fn num<T: FromStr>(key: &str, value: &str) -> Result<T, String> {
            value
                .parse()
                .map_err(|_| format!("{key}={value}: not a valid number"))
        }
        let coalescing = match kind {
            "off" | "none" if rest.is_empty() => Coalescing::Off,
            "on" if rest.is_empty() => Coalescing::ON,
            "count" => {
                let mut p = CountPolicy::DEFAULT;
                for pair in pairs {
                    match pair? {
                        ("num_parcels", v) => p.num_parcels = num("num_parcels", v)?,
                        ("interval_us", v) => p.interval_us = num("interval_us", v)?,
                        ("max_bytes", v) => p.max_bytes = num("max_bytes", v)?,
                        ("dimensions", v) => p.dimensions = num("dimensions", v)?,
                        (k, _) => {
                            return Err(format!(
                                "count takes num_parcels, interval_us, max_bytes, dimensions; not `{k}`"
                            ));
                        }
                    }
                }
                Coalescing::Count(p)
            }
            "adaptive" => {
                let mut p = AdaptivePolicy::DEFAULT;
                for pair in pairs {
                    match pair? {
                        ("max_bytes", v) => p.max_bytes = num("max_bytes", v)?,
                        ("max_parcels", v) => p.max_parcels = num("max_parcels", v)?,
                        ("kappa", v) => p.kappa = Some(num("kappa", v)?),
                        ("split", v) => p.split = Some(num("split", v)?),
                        (k, _) => {
                            return Err(format!(
                                "adaptive takes max_bytes, max_parcels, kappa, split; not `{k}`"
                            ));
                        }
                    }
                }
                Coalescing::Adaptive(p)
            }
            "bytes" => {
                let mut p = BytePolicy::DEFAULT;
                for pair in pairs {
                    match pair? {
                        ("buffer_bytes", v) => p.buffer_bytes = num("buffer_bytes", v)?,
                        ("threshold", v) => p.threshold = num("threshold", v)?,
                        ("cutoff", v) => p.cutoff = num("cutoff", v)?,
                        ("timeout_us", v) => p.timeout_us = num("timeout_us", v)?,
                        ("dimensions", v) => p.dimensions = num("dimensions", v)?,
                        (k, _) => {
                            return Err(format!(
                                "bytes takes buffer_bytes, threshold, cutoff, timeout_us, dimensions; not `{k}`"
                            ));
                        }
                    }
                }
                Coalescing::Bytes(p)
            }
            _ => {
                return Err(format!(
                    "`{s}`: expected off, on, adaptive[:max_bytes=N,max_parcels=N,kappa=F,split=N], count[:num_parcels=N,interval_us=N,max_bytes=N,dimensions=1|2] or bytes[:buffer_bytes=N,threshold=F,cutoff=F,timeout_us=N,dimensions=1|2]"
                ));
            }
        };
        coalescing.validate()?;
        Ok(coalescing)
    }
}

/// Why a buffer was flushed; each reason has a `/coalescing/count/flush-*`
/// counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// `num_parcels` reached (count policy).
    Count,
    /// Another parcel of the size of the last would take the frame over
    /// `max_bytes` (count policy), the frame passed
    /// `threshold`·`buffer_bytes` (byte policy), or the next parcel would
    /// have made the frame too large.
    Bytes,
    /// The flush timer fired.
    Timer,
    /// Sparse traffic: the parcel came long after the previous one (but
    /// not a response to a run of more than one call, under adaptive
    /// coalescing); or, under adaptive coalescing, it answers a run of
    /// one call (it left at once, alone, past the buffer: `answer.rs`).
    Bypass,
    /// A parcel above `cutoff`·`buffer_bytes`.
    Cutoff,
    /// The job looked idle (termination detection), a collective
    /// (barrier, quiescence) needed it, or the job stopped.
    Shutdown,
    /// The parameters changed, or the program asked for a flush.
    Changed,
    /// The worker that filled the buffer ran out of tasks.
    Idle,
    /// Responses of an adaptive action: the run of calls they answer was
    /// handled.
    Answered,
    /// Awaited calls of an adaptive action: a part of the burst its
    /// worker is issuing, sent so that the destination starts on it while
    /// the rest is issued (see `Aggregator::split_parcels`).
    Split,
}

impl Reason {
    /// Every reason, in counter-slot order.
    pub(crate) const ALL: [Reason; 10] = [
        Reason::Count,
        Reason::Bytes,
        Reason::Timer,
        Reason::Bypass,
        Reason::Cutoff,
        Reason::Shutdown,
        Reason::Changed,
        Reason::Idle,
        Reason::Answered,
        Reason::Split,
    ];

    /// The slot of this reason in per-reason arrays.
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// What a buffer holds after it took a parcel.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Filled {
    /// Parcels in the buffer, the new one included.
    pub(crate) parcels: u32,
    /// Bytes of the frame so far (its headers and the new parcel
    /// included).
    pub(crate) bytes: usize,
    /// Bytes of the new parcel.
    pub(crate) parcel_bytes: usize,
    /// For the first parcel of a frame, nanoseconds since the buffer's
    /// previous parcel (as stamped; None for the first ever); None for the
    /// others.
    pub(crate) gap_ns: Option<u64>,
}

/// The decision a policy takes after every parcel.
pub(crate) trait FlushPolicy {
    /// Whether to flush the buffer now, and why.
    fn after_push(&self, filled: Filled) -> Option<Reason>;

    /// How long the first parcel of a buffer may wait for the others.
    fn wait(&self) -> Duration;
}

impl FlushPolicy for CountPolicy {
    fn after_push(&self, f: Filled) -> Option<Reason> {
        let sparse = f.gap_ns.is_none_or(|gap| gap > self.interval_us * 1000);
        if f.parcels == 1 && sparse {
            Some(Reason::Bypass)
        } else if f.parcels >= self.num_parcels {
            Some(Reason::Count)
        } else if f.bytes.saturating_add(f.parcel_bytes) > self.max_bytes {
            // Another parcel like this one would not fit: a message just
            // over a size costs a packet more (BENCHMARKS.md, issue #15,
            // sixteenth part: loopback TCP, frames of 65,540 bytes).
            Some(Reason::Bytes)
        } else {
            None
        }
    }

    fn wait(&self) -> Duration {
        Duration::from_micros(self.interval_us)
    }
}

impl FlushPolicy for BytePolicy {
    fn after_push(&self, f: Filled) -> Option<Reason> {
        let b = self.buffer_bytes as f64;
        if f.parcel_bytes as f64 > self.cutoff * b {
            Some(Reason::Cutoff)
        } else if f.bytes as f64 > self.threshold * b {
            Some(Reason::Bytes)
        } else {
            None
        }
    }

    fn wait(&self) -> Duration {
        Duration::from_micros(self.timeout_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(parcels: u32, bytes: usize, parcel_bytes: usize, gap_us: Option<u64>) -> Filled {
        Filled {
            parcels,
            bytes,
            parcel_bytes,
            gap_ns: gap_us.map(|g| g * 1000),
        }
    }

    #[test]
    fn count_policy_follows_algorithm_1() {
        let p = CountPolicy {
            num_parcels: 4,
            interval_us: 100,
            max_bytes: 1000,
            dimensions: 1,
        };
        // The very first parcel, and one long after the previous: sent at once.
        assert_eq!(p.after_push(filled(1, 20, 20, None)), Some(Reason::Bypass));
        assert_eq!(
            p.after_push(filled(1, 20, 20, Some(101))),
            Some(Reason::Bypass)
        );
        // Dense traffic: queued until the count.
        assert_eq!(p.after_push(filled(1, 20, 20, Some(5))), None);
        assert_eq!(p.after_push(filled(3, 60, 20, Some(5))), None);
        assert_eq!(
            p.after_push(filled(4, 80, 20, Some(5))),
            Some(Reason::Count)
        );
        // A slow parcel into a non-empty buffer is queued (the timer is running).
        assert_eq!(p.after_push(filled(2, 40, 20, Some(500))), None);
        // The memory bound: flushed when another parcel of the last one's
        // size would take the frame over it, so that frames of parcels of
        // one size stay within it.
        assert_eq!(p.after_push(filled(2, 520, 480, Some(5))), None);
        assert_eq!(
            p.after_push(filled(2, 521, 480, Some(5))),
            Some(Reason::Bytes)
        );
        assert_eq!(p.after_push(filled(3, 990, 10, Some(5))), None);
        assert_eq!(
            p.after_push(filled(3, 991, 10, Some(5))),
            Some(Reason::Bytes)
        );
        // A parcel over the bound leaves alone.
        assert_eq!(
            p.after_push(filled(1, 1200, 1200, Some(5))),
            Some(Reason::Bytes)
        );
    }

    #[test]
    fn byte_policy_follows_tram() {
        let p = BytePolicy {
            buffer_bytes: 1000,
            threshold: 0.8,
            cutoff: 0.2,
            timeout_us: 10,
            dimensions: 1,
        };
        assert_eq!(p.after_push(filled(1, 100, 100, None)), None);
        assert_eq!(p.after_push(filled(8, 800, 100, Some(1))), None);
        assert_eq!(
            p.after_push(filled(9, 801, 1, Some(1))),
            Some(Reason::Bytes)
        );
        assert_eq!(
            p.after_push(filled(2, 301, 201, Some(1))),
            Some(Reason::Cutoff)
        );
        assert_eq!(p.wait(), Duration::from_micros(10));
    }

    #[test]
    fn patient_responses_wait_a_millisecond_or_the_interval_in_force_whichever_is_longer() {
        let bounds = AdaptivePolicy::DEFAULT;
        let count = |interval_us| {
            Coalescing::Count(CountPolicy {
                interval_us,
                ..CountPolicy::DEFAULT
            })
        };
        let patient = bounds.patient(count(130));
        assert_eq!(
            (patient.num_parcels, patient.max_bytes, patient.interval_us),
            (
                bounds.max_parcels,
                bounds.max_bytes,
                super::super::answer::PATIENT_WAIT_US
            )
        );
        assert_eq!(bounds.patient(count(3_600)).interval_us, 3_600);
        assert_eq!(
            bounds.patient(Coalescing::Off).interval_us,
            super::super::answer::PATIENT_WAIT_US
        );
    }

    #[test]
    fn text_form_round_trips_and_bad_values_say_why() {
        for s in [
            "off",
            "count:num_parcels=7,interval_us=3,max_bytes=999",
            "bytes:buffer_bytes=4096,threshold=0.5,cutoff=0.5,timeout_us=20",
            "count:num_parcels=7,interval_us=3,max_bytes=999,dimensions=2",
        ] {
            let c: Coalescing = s.parse().unwrap();
            assert_eq!(c.to_string(), s);
        }
        let count = Coalescing::Count(CountPolicy::DEFAULT);
        assert_eq!("count".parse::<Coalescing>(), Ok(count));
        assert_eq!("on".parse::<Coalescing>(), Ok(count));
        assert_eq!(Coalescing::ON, count);
        assert_eq!("adaptive".parse::<Coalescing>(), Ok(Coalescing::default()));
        let err = |s: &str| s.parse::<Coalescing>().unwrap_err();
        assert!(err("count:num_parcels=0").contains("at least 1"));
        assert!(err("count:num_parcel=3").contains("not `num_parcel`"));
        assert!(err("count:num_parcels=x").contains("not a valid number"));
        assert!(err("bytes:threshold=0.7,cutoff=0.4").contains("at most 1"));
        assert!(err("bytes:threshold=0").contains("(0, 1]"));
        assert!(err("bytes:buffer_bytes=10").contains("at least 64"));
        assert!(err("sometimes").contains("expected off, on, adaptive"));
        assert!(err("count:7").contains("key=value"));
        assert!(err("count:dimensions=3").contains("1 (direct) or 2"));
    }
}
