//! Every counter type Courier has, how each is sampled, and what reset
//! means for it.

use serde::{Deserialize, Serialize};

use std::sync::atomic::Ordering;

use super::name::{CounterName, Index, Instance, glob_match, parse_index};
use crate::action::action_slot;
use crate::adapt::SendCost;
use crate::aggregate::{Coalescing, LaneStats, Reason};
use crate::clock::POLL_BUCKETS;
use crate::ids::LocalityId;
use crate::runtime::DirectionCounts;
use crate::runtime::Metrics;
use crate::sched::{PERF_EVENTS as EVENTS, Perf};
use crate::sched::{StatsSnapshot, WorkerStats};
use crate::suggest::edit_distance;

/// A sample of a counter, in the form that says how to take a difference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Raw {
    /// A monotonic count or time: the value is the growth since the reset.
    Count(u64),
    /// `num / den` of two monotonic sums: the value is the growth of `num`
    /// over the growth of `den` since the reset (0 when `den` did not grow).
    Ratio { num: u64, den: u64 },
    /// A level (memory, uptime): a reset does not change it.
    Gauge(f64),
    /// Task-poll counts per power-of-two duration bucket (see
    /// `sched::POLL_BUCKETS`) and the sum of the durations in ns; a reset
    /// subtracts bucket by bucket. The scalar value is the number of polls.
    Histogram { counts: Vec<u64>, sum_ns: u64 },
}

impl Raw {
    /// The counter's value relative to `base`, the sample taken at the last
    /// reset. Monotonic sources make every difference non-negative; a base
    /// of another kind (impossible for one counter) is ignored.
    pub(crate) fn value_since(&self, base: Option<&Raw>) -> f64 {
        match (self, base) {
            (&Raw::Count(now), Some(&Raw::Count(then))) => now.saturating_sub(then) as f64,
            (&Raw::Count(now), _) => now as f64,
            (&Raw::Ratio { num, den }, Some(&Raw::Ratio { num: n0, den: d0 })) => {
                ratio(num.saturating_sub(n0), den.saturating_sub(d0))
            }
            (&Raw::Ratio { num, den }, _) => ratio(num, den),
            (&Raw::Gauge(v), _) => v,
            (Raw::Histogram { .. }, base) => self
                .histogram_since(base)
                .map_or(0.0, |(c, _)| c.iter().sum::<u64>() as f64),
        }
    }

    /// A histogram's bucket counts and duration sum relative to `base`.
    pub(crate) fn histogram_since(&self, base: Option<&Raw>) -> Option<(Vec<u64>, u64)> {
        let Raw::Histogram { counts, sum_ns } = self else {
            return None;
        };
        match base {
            Some(Raw::Histogram {
                counts: c0,
                sum_ns: s0,
            }) => Some((
                counts
                    .iter()
                    .zip(c0)
                    .map(|(c, b)| c.saturating_sub(*b))
                    .collect(),
                sum_ns.saturating_sub(*s0),
            )),
            _ => Some((counts.clone(), *sum_ns)),
        }
    }
}

/// How a histogram counter's buckets are laid out: `@min,max,buckets`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct HistogramSpec {
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) buckets: usize,
}

impl HistogramSpec {
    /// Without parameters: 0 to 1 ms in 20 buckets.
    pub(crate) const DEFAULT: HistogramSpec = HistogramSpec {
        min: 0.0,
        max: 1_000_000.0,
        buckets: 20,
    };

    /// Parses `min,max,buckets` (ns, ns, count).
    pub(crate) fn parse(params: Option<&str>) -> Result<HistogramSpec, String> {
        let Some(params) = params else {
            return Ok(Self::DEFAULT);
        };
        let bad = || {
            format!(
                "histogram parameters must be `min,max,buckets` with min < max and 1 to 1000 buckets, not `{params}`"
            )
        };
        let parts: Vec<&str> = params.split(',').map(str::trim).collect();
        let [min, max, buckets] = parts[..] else {
            return Err(bad());
        };
        let spec = HistogramSpec {
            min: min.parse().map_err(|_| bad())?,
            max: max.parse().map_err(|_| bad())?,
            buckets: buckets.parse().map_err(|_| bad())?,
        };
        if spec.min >= spec.max || !(1..=1000).contains(&spec.buckets) || spec.min < 0.0 {
            return Err(bad());
        }
        Ok(spec)
    }

    /// Spreads power-of-two bucket counts over this layout: `buckets + 2`
    /// counts, the first below `min`, the last at or above `max`. A
    /// power-of-two bucket's count is assumed spread evenly over its range,
    /// so counts are fractional where ranges straddle a boundary.
    pub(crate) fn rebin(&self, log2_counts: &[u64]) -> Vec<f64> {
        let width = (self.max - self.min) / self.buckets as f64;
        let mut edges = vec![f64::NEG_INFINITY];
        edges.extend((0..=self.buckets).map(|i| self.min + i as f64 * width));
        edges.push(f64::INFINITY);
        let mut out = vec![0.0; self.buckets + 2];
        for (k, &count) in log2_counts.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let count = count as f64;
            if k == 0 {
                // Exactly 0 ns.
                let slot = edges
                    .windows(2)
                    .position(|e| e[0] <= 0.0 && 0.0 < e[1])
                    .unwrap_or(0);
                out[slot] += count;
                continue;
            }
            let lo = 2f64.powi(k as i32 - 1);
            let hi = 2f64.powi(k as i32);
            for (slot, e) in edges.windows(2).enumerate() {
                let overlap = hi.min(e[1]) - lo.max(e[0]);
                if overlap > 0.0 {
                    out[slot] += count * overlap / (hi - lo);
                }
            }
        }
        out
    }
}

fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

/// What a sampler reads: one locality's statistics at one moment.
pub(crate) struct Sources<'a> {
    pub(crate) metrics: Metrics<'a>,
    pub(crate) stats: StatsSnapshot,
    pub(crate) sent: DirectionCounts,
    pub(crate) received: DirectionCounts,
}

impl<'a> Sources<'a> {
    /// Reads everything once, so that the counters of one query agree.
    pub(crate) fn read(metrics: Metrics<'a>) -> Self {
        Sources {
            metrics,
            stats: metrics.scheduler(),
            sent: metrics.traffic().sent.load(),
            received: metrics.traffic().received.load(),
        }
    }

    /// The statistics of one worker, or the sum over all of them.
    fn worker(&self, instance: Instance) -> Option<WorkerStats> {
        match instance {
            Instance::Total => Some(self.stats.total()),
            Instance::Worker(Index::At(k)) => self.stats.workers.get(k as usize).copied(),
            Instance::Worker(Index::All) => None,
        }
    }
}

/// Where a counter type has instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Instances {
    /// `total` and every `worker-thread#K`.
    PerWorker,
    /// `total` only.
    Locality,
}

/// Samples a counter: the sources, the instance, and the `@parameters`.
type Sampler = fn(&Sources<'_>, Instance, Option<&str>) -> Result<Raw, String>;

/// What a counter accepts after `@`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parameters {
    None,
    /// An action name: the counter then covers that action's calls only.
    Action,
    /// `min,max,buckets` of a histogram (see [`HistogramSpec`]).
    Histogram,
    /// An action name, then optionally `,min,max,buckets` of a histogram.
    ActionHistogram,
    /// A peer, `locality#N`: the counter then covers what concerns it.
    Locality,
}

/// The peer a `@locality#N` parameter names.
pub(crate) fn parse_peer(params: &str) -> Result<LocalityId, String> {
    match parse_index(params.trim(), "locality#", "locality") {
        Ok(Index::At(n)) => Ok(LocalityId::new(n)),
        Ok(Index::All) => Err(format!(
            "`@{params}`: name one peer (`@locality#N`), or none for the mean over the peers"
        )),
        Err(e) => Err(format!("`@{params}`: {}", e.0)),
    }
}

/// The cost of a frame to the peer that `params` names, or the mean over
/// the peers weighted by their recent frames. 0 for a locality without
/// peers, and towards the locality itself (it sends itself no frames), so
/// that `@locality#N` can be read on every locality at once.
fn send_cost(s: &Sources<'_>, params: Option<&str>) -> Result<SendCost, String> {
    const NONE: SendCost = SendCost {
        alpha_ns: 0.0,
        beta_ns_per_byte: 0.0,
    };
    let calibration = s.metrics.calibration();
    let Some(params) = params else {
        return Ok(calibration.mean().unwrap_or(NONE));
    };
    let peer = parse_peer(params)?;
    if peer == s.metrics.here() {
        return Ok(NONE);
    }
    calibration
        .cost(peer)
        .ok_or_else(|| format!("{peer} is not a locality of this job"))
}

impl CounterType {
    /// The bucket layout of a histogram counter from its `@parameters`.
    pub(crate) fn histogram_spec(&self, params: Option<&str>) -> Result<HistogramSpec, String> {
        match self.parameters {
            Parameters::ActionHistogram => {
                HistogramSpec::parse(params.and_then(|p| p.split_once(',')).map(|(_, h)| h))
            }
            _ => HistogramSpec::parse(params),
        }
    }
}

/// One counter type: its name, unit, help text, and how to sample it.
pub(crate) struct CounterType {
    /// `/object/counter`.
    pub(crate) name: &'static str,
    /// The unit of the value: `ns`, `s`, `B`, or empty for plain numbers.
    pub(crate) unit: &'static str,
    pub(crate) help: &'static str,
    pub(crate) instances: Instances,
    pub(crate) parameters: Parameters,
    sample: Sampler,
}

impl std::fmt::Debug for CounterType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CounterType")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

macro_rules! worker_counter {
    ($name:literal, $unit:literal, $help:literal, |$w:ident| $raw:expr) => {
        CounterType {
            name: $name,
            unit: $unit,
            help: $help,
            instances: Instances::PerWorker,
            parameters: Parameters::None,
            sample: |s, i, _| {
                s.worker(i)
                    .map(|$w| $raw)
                    .ok_or_else(|| format!("no instance {i}"))
            },
        }
    };
}

macro_rules! locality_counter {
    ($name:literal, $unit:literal, $help:literal, |$s:ident| $raw:expr) => {
        CounterType {
            name: $name,
            unit: $unit,
            help: $help,
            instances: Instances::Locality,
            parameters: Parameters::None,
            sample: |$s, i, _| {
                (i == Instance::Total)
                    .then(|| $raw)
                    .ok_or_else(|| format!("no instance {i}"))
            },
        }
    };
}

/// A counter of the locality (`total` only) that takes `@parameters` of
/// the kind `$parameters`: `$sample` makes its sample, a
/// `Result<Raw, String>`, from the sources `$s` and the parameters
/// `$params`.
macro_rules! parameterized_counter {
    (
        $name:literal,
        $unit:literal,
        $help:literal,
        $parameters:ident,
        |$s:ident, $params:ident| $sample:expr
    ) => {
        CounterType {
            name: $name,
            unit: $unit,
            help: $help,
            instances: Instances::Locality,
            parameters: Parameters::$parameters,
            sample: |$s, i, $params| {
                if i != Instance::Total {
                    return Err(format!("no instance {i}"));
                }
                $sample
            },
        }
    };
}

/// Reads perf event `event` for `instance`.
fn read_perf(perf: &Perf, event: usize, instance: Instance) -> Result<u64, String> {
    match instance {
        Instance::Total => perf.read_total(event),
        Instance::Worker(Index::At(k)) => perf.read(k as usize, event),
        Instance::Worker(Index::All) => Err("a wildcard instance cannot be read".into()),
    }
}

macro_rules! perf_counter {
    ($index:literal) => {
        CounterType {
            name: EVENTS[$index].0,
            unit: "",
            help: EVENTS[$index].1,
            instances: Instances::PerWorker,
            parameters: Parameters::None,
            sample: |s, i, _| read_perf(s.metrics.perf(), $index, i).map(Raw::Count),
        }
    };
}

/// A traffic counter that can be narrowed to one action's calls with
/// `@ACTION`.
macro_rules! traffic_counter {
    ($name:literal, $unit:literal, $help:literal, $dir:ident, $field:ident) => {
        per_action_counter!($name, $unit, $help, |s, slot| Raw::Count(match slot {
            None => s.$dir.$field,
            Some(slot) => s.metrics.traffic().$dir.per_action[slot]
                .$field
                .load(Ordering::Relaxed),
        }))
    };
}

/// The coalescing statistics of the action named in `params` (its part
/// before any comma), or of every action.
fn coalescing_stats(s: &Sources<'_>, params: Option<&str>) -> Result<LaneStats, String> {
    let aggregator = &s.metrics.coalescing();
    match params.map(|p| p.split(',').next().unwrap_or(p)) {
        None | Some("") => Ok(aggregator.stats(None)),
        Some(action) => Ok(aggregator.stats(Some(action_slot(action)?))),
    }
}

/// A `/coalescing` counter of one action (or all of them, without `@ACTION`).
macro_rules! coalescing_counter {
    ($name:literal, $unit:literal, $help:literal, |$c:ident| $raw:expr) => {
        parameterized_counter!($name, $unit, $help, Action, |s, params| {
            let $c = coalescing_stats(s, params)?;
            Ok($raw)
        })
    };
}

/// A count of the locality that `@ACTION` narrows to one action: `$slot`
/// is the action's registry slot, or `None` for every action.
macro_rules! per_action_counter {
    ($name:literal, $unit:literal, $help:literal, |$s:ident, $slot:ident| $raw:expr) => {
        parameterized_counter!($name, $unit, $help, Action, |$s, params| {
            let $slot = params.map(action_slot).transpose()?;
            Ok($raw)
        })
    };
}

/// A `/flow` counter of the locality.
macro_rules! flow_counter {
    ($name:literal, $unit:literal, $help:literal, |$f:ident| $raw:expr) => {
        locality_counter!($name, $unit, $help, |s| {
            let $f = s.metrics.flow();
            $raw
        })
    };
}

/// A `/segments` counter of the locality: a field of its segment stats.
macro_rules! segments_counter {
    ($name:literal, $unit:literal, $help:literal, $field:ident) => {
        locality_counter!($name, $unit, $help, |s| Raw::Count(
            s.metrics
                .segments()
                .$field
                .load(std::sync::atomic::Ordering::Relaxed)
        ))
    };
}

/// The number of flushes of one reason.
macro_rules! flush_counter {
    ($name:literal, $reason:ident, $help:literal) => {
        coalescing_counter!($name, "", $help, |c| Raw::Count(
            c.flushes[Reason::$reason.index()]
        ))
    };
}

/// A parameter of an action's current coalescing setting (towards
/// destinations without a setting of their own).
macro_rules! parameter_counter {
    ($name:literal, $unit:literal, $help:literal, |$setting:ident| $value:expr) => {
        parameterized_counter!($name, $unit, $help, Action, |s, params| {
            let action = params.ok_or("needs @ACTION")?;
            let $setting = s.metrics.coalescing().default_setting(action_slot(action)?);
            let value: f64 = $value;
            Ok(Raw::Gauge(value))
        })
    };
}

/// One of the adaptive-coalescing model's inputs last measured for
/// `@ACTION`: `|q, s, kappa| value`.
macro_rules! model_counter {
    ($name:literal, $unit:literal, $help:literal, |$q:ident, $size:ident, $kappa:ident| $value:expr) => {
        parameterized_counter!($name, $unit, $help, Action, |s, params| {
            let action = params.ok_or("needs @ACTION")?;
            let ($q, $size, $kappa) = s.metrics.adapt_inputs(action_slot(action)?);
            Ok(Raw::Gauge($value))
        })
    };
}

/// A `/network/time` counter: the α-β fit of this locality's sends to the
/// peer `@locality#N`, or (without it) the mean over its peers.
macro_rules! send_cost_counter {
    ($name:literal, $unit:literal, $help:literal, |$c:ident| $value:expr) => {
        parameterized_counter!($name, $unit, $help, Locality, |s, params| {
            let $c = send_cost(s, params)?;
            Ok(Raw::Gauge($value))
        })
    };
}

/// Time a worker spent in its loop, busy or not: t_func + background + idle.
fn overall(w: &WorkerStats) -> u64 {
    w.func_ns + w.background_ns + w.idle_ns
}

/// Task time with scheduling and background work (the denominator of n_oh).
fn busy(w: &WorkerStats) -> u64 {
    w.func_ns + w.background_ns
}

/// Every counter type, sorted by name.
pub(crate) static TYPES: &[CounterType] = &[
    per_action_counter!(
        "/adapt/count/decisions",
        "",
        "settings the adaptive-coalescing tuner of this locality put in force (at most three per phase of the traffic); @ACTION: of that action",
        |s, slot| Raw::Count(s.metrics.adapt_decisions(slot))
    ),
    model_counter!(
        "/adapt/model/kappa",
        "",
        "kappa, the latency tolerance the adaptive-coalescing model assumed for @ACTION in its last epoch: the cost of delaying a parcel by one second, in seconds",
        |_q, _s, kappa| kappa
    ),
    model_counter!(
        "/adapt/model/parcel-rate",
        "1/s",
        "Q, the parcels of @ACTION this locality sent per second in the adaptive-coalescing tuner's last epoch with traffic",
        |q, _s, _kappa| q
    ),
    model_counter!(
        "/adapt/model/parcel-size",
        "B",
        "S, the mean bytes of arguments of a parcel of @ACTION in the adaptive-coalescing tuner's last epoch with traffic",
        |_q, size, _kappa| size
    ),
    locality_counter!(
        "/adapt/time/call-latency",
        "ns",
        "the mean time from an awaited call leaving this locality to its response coming back, in the adaptive-coalescing tuner's last epoch with enough such calls (the calls in flight over the calls a second)",
        |s| Raw::Gauge(s.metrics.call_latency_ns())
    ),
    coalescing_counter!(
        "/coalescing/count/average-parcels-per-message",
        "",
        "parcels per message flushed from coalescing buffers",
        |c| Raw::Ratio {
            num: c.parcels,
            den: c.messages
        }
    ),
    flush_counter!(
        "/coalescing/count/flush-answered",
        Answered,
        "flushes of an adaptive action's responses once the run of calls they answer was handled"
    ),
    flush_counter!(
        "/coalescing/count/flush-bypass",
        Bypass,
        "parcels sent at once because they came long after the previous one (sparse traffic; under adaptive coalescing, not the responses to a run of many calls), or answer a run of one call (adaptive)"
    ),
    flush_counter!(
        "/coalescing/count/flush-bytes",
        Bytes,
        "flushes because another parcel would have taken the frame over max_bytes, or it passed threshold x buffer_bytes (or the frame limit)"
    ),
    flush_counter!(
        "/coalescing/count/flush-changed",
        Changed,
        "flushes because the setting changed or the program called flush()"
    ),
    flush_counter!(
        "/coalescing/count/flush-count",
        Count,
        "flushes because the buffer held num_parcels parcels"
    ),
    flush_counter!(
        "/coalescing/count/flush-cutoff",
        Cutoff,
        "flushes because a parcel exceeded cutoff x buffer_bytes"
    ),
    flush_counter!(
        "/coalescing/count/flush-idle",
        Idle,
        "flushes because the worker that filled the buffer ran out of tasks"
    ),
    flush_counter!(
        "/coalescing/count/flush-shutdown",
        Shutdown,
        "flushes at termination checks (the job looked idle) and at shutdown"
    ),
    flush_counter!(
        "/coalescing/count/flush-split",
        Split,
        "flushes of a part of a burst of an adaptive action's awaited calls, so that the destination starts on it while the rest is issued"
    ),
    flush_counter!(
        "/coalescing/count/flush-timer",
        Timer,
        "flushes by the flush timer (interval_us or timeout_us elapsed)"
    ),
    per_action_counter!(
        "/coalescing/count/forwarded",
        "",
        "calls this locality forwarded for others (a hop of a 2D grid, dimensions=2)",
        |s, slot| Raw::Count(s.metrics.coalescing().forwarded(slot))
    ),
    coalescing_counter!(
        "/coalescing/count/messages",
        "",
        "messages (frames) flushed from coalescing buffers",
        |c| Raw::Count(c.messages)
    ),
    coalescing_counter!(
        "/coalescing/count/parcels",
        "",
        "parcels that went through coalescing buffers (calls and responses)",
        |c| Raw::Count(c.parcels)
    ),
    parameter_counter!(
        "/coalescing/parameter/buffer-bytes",
        "B",
        "buffer_bytes of the byte policy (0 for other policies)",
        |c| match c {
            Coalescing::Bytes(p) => p.buffer_bytes as f64,
            _ => 0.0,
        }
    ),
    parameter_counter!(
        "/coalescing/parameter/cutoff",
        "",
        "cutoff fraction of the byte policy (0 for other policies)",
        |c| match c {
            Coalescing::Bytes(p) => p.cutoff,
            _ => 0.0,
        }
    ),
    parameter_counter!(
        "/coalescing/parameter/interval",
        "us",
        "interval_us of the count policy, timeout_us of the byte policy (0 when off)",
        |c| match c.in_force() {
            Coalescing::Off | Coalescing::Adaptive(_) => 0.0,
            Coalescing::Count(p) => p.interval_us as f64,
            Coalescing::Bytes(p) => p.timeout_us as f64,
        }
    ),
    parameter_counter!(
        "/coalescing/parameter/max-bytes",
        "B",
        "max_bytes of the count policy (0 for other policies)",
        |c| match c {
            Coalescing::Count(p) => p.max_bytes as f64,
            _ => 0.0,
        }
    ),
    parameter_counter!(
        "/coalescing/parameter/num-parcels",
        "",
        "num_parcels of the count policy (0 for other policies)",
        |c| match c {
            Coalescing::Count(p) => f64::from(p.num_parcels),
            _ => 0.0,
        }
    ),
    parameter_counter!(
        "/coalescing/parameter/policy",
        "",
        "the policy in force: 0 off, 1 count (HPX), 2 bytes (TRAM); an adaptive action shows the count policy its tuner set",
        |c| match c.in_force() {
            Coalescing::Off | Coalescing::Adaptive(_) => 0.0,
            Coalescing::Count(_) => 1.0,
            Coalescing::Bytes(_) => 2.0,
        }
    ),
    parameter_counter!(
        "/coalescing/parameter/threshold",
        "",
        "threshold fraction of the byte policy (0 for other policies)",
        |c| match c {
            Coalescing::Bytes(p) => p.threshold,
            _ => 0.0,
        }
    ),
    coalescing_counter!(
        "/coalescing/time/average-parcel-arrival",
        "ns",
        "mean time between consecutive parcels into the same buffer",
        |c| Raw::Ratio {
            num: c.gap_sum_ns,
            den: c.gaps
        }
    ),
    locality_counter!(
        "/coalescing/time/average-timer-lateness",
        "ns",
        "mean delay of the flush timer after a deadline",
        |s| {
            let (counts, sum_ns) = s.metrics.coalescing().timer_lateness().load();
            Raw::Ratio {
                num: sum_ns,
                den: counts.iter().sum(),
            }
        }
    ),
    parameterized_counter!(
        "/coalescing/time/parcel-arrival-histogram",
        "ns",
        "histogram of the gaps between consecutive parcels into the same buffer, @ACTION[,min,max,buckets] in ns",
        ActionHistogram,
        |s, params| {
            let c = coalescing_stats(s, params)?;
            Ok(Raw::Histogram {
                counts: c.gap_histogram.to_vec(),
                sum_ns: c.gap_sum_ns,
            })
        }
    ),
    parameterized_counter!(
        "/coalescing/time/timer-lateness",
        "ns",
        "histogram of the flush timer's delay after its deadlines, @min,max,buckets in ns",
        Histogram,
        |s, _params| {
            let (counts, sum_ns) = s.metrics.coalescing().timer_lateness().load();
            Ok(Raw::Histogram { counts, sum_ns })
        }
    ),
    traffic_counter!(
        "/data/count/received",
        "B",
        "bytes of arguments and results received",
        received,
        payload_bytes
    ),
    traffic_counter!(
        "/data/count/sent",
        "B",
        "bytes of arguments and results sent",
        sent,
        payload_bytes
    ),
    flow_counter!(
        "/flow/count/borrow-requests",
        "",
        "requests to borrow from other localities' pools",
        |f| Raw::Count(f.borrow_requests)
    ),
    flow_counter!(
        "/flow/count/borrowed-bytes",
        "B",
        "bytes borrowed from other localities' pools",
        |f| Raw::Count(f.borrowed_bytes)
    ),
    flow_counter!(
        "/flow/count/credit-returns-received",
        "",
        "credit messages received (flow control)",
        |f| Raw::Count(f.credits_received)
    ),
    flow_counter!(
        "/flow/count/credit-returns-sent",
        "",
        "credit messages sent back as received calls finished",
        |f| Raw::Count(f.credits_sent)
    ),
    flow_counter!(
        "/flow/count/held-bytes",
        "B",
        "charge of received calls not yet run (bounded by the window per origin)",
        |f| Raw::Gauge(f.held_bytes as f64)
    ),
    flow_counter!(
        "/flow/count/inbox",
        "",
        "received runs of calls waiting to run",
        |f| Raw::Gauge(f.inbox as f64)
    ),
    flow_counter!(
        "/flow/count/lent-bytes",
        "B",
        "bytes this locality's pool lent",
        |f| Raw::Count(f.lent_bytes)
    ),
    flow_counter!(
        "/flow/count/outstanding-bytes",
        "B",
        "charge sent to other localities and not yet given back",
        |f| Raw::Gauge(f.outstanding_bytes as f64)
    ),
    flow_counter!(
        "/flow/count/pool-free",
        "B",
        "bytes of this locality's pool not lent now",
        |f| Raw::Gauge(f.pool_free as f64)
    ),
    flow_counter!(
        "/flow/count/queued-bytes",
        "B",
        "charge of frames waiting for credit",
        |f| Raw::Gauge(f.queued_bytes as f64)
    ),
    flow_counter!(
        "/flow/count/queued-frames",
        "",
        "frames that had to wait for credit",
        |f| Raw::Count(f.frames_queued)
    ),
    flow_counter!(
        "/flow/count/waits",
        "",
        "sends of the program that waited for credit",
        |f| Raw::Count(f.waits)
    ),
    flow_counter!(
        "/flow/parameter/window",
        "B",
        "the credit window each origin has at a locality (0: flow control off)",
        |f| Raw::Gauge(f.window as f64)
    ),
    flow_counter!(
        "/flow/time/wait",
        "ns",
        "time the program's sends waited for credit (running received calls meanwhile)",
        |f| Raw::Count(f.wait_ns)
    ),
    locality_counter!(
        "/messages/count/received",
        "",
        "frames of parcels received (one network message each)",
        |s| Raw::Count(s.received.messages)
    ),
    locality_counter!(
        "/messages/count/sent",
        "",
        "frames of parcels sent (one network message each)",
        |s| Raw::Count(s.sent.messages)
    ),
    locality_counter!(
        "/network/count/rejected",
        "",
        "connections turned away: strangers, handshakes too slow or over the cap, late connections",
        |s| Raw::Count(s.metrics.rejected_connections())
    ),
    send_cost_counter!(
        "/network/time/alpha",
        "ns",
        "alpha of the alpha-beta model: the fixed cost of sending one frame, fitted from the frames sent; @locality#N: to that peer, else the mean over the peers weighted by their recent frames",
        |c| c.alpha_ns
    ),
    send_cost_counter!(
        "/network/time/beta",
        "ns/B",
        "beta of the alpha-beta model: the cost of sending each byte of a frame, fitted from the frames sent; @locality#N: to that peer, else the mean over the peers weighted by their recent frames",
        |c| c.beta_ns_per_byte
    ),
    locality_counter!(
        "/par/count/forks",
        "",
        "par::join calls of this process whose second closure was offered as a task",
        |_s| Raw::Count(crate::par::joins().0)
    ),
    locality_counter!(
        "/par/count/inlined",
        "",
        "par::join calls of this process that ran their second closure inline (each thread adds its count every 4,096 such calls)",
        |_s| Raw::Count(crate::par::joins().1)
    ),
    locality_counter!(
        "/par/parameter/lambda-min",
        "",
        "the ratio of a chunk's duration to the task overhead that auto-chunked parallel loops aim at",
        |_s| Raw::Gauge(crate::par::LAMBDA_MIN)
    ),
    locality_counter!(
        "/par/time/task-overhead",
        "ns",
        "what a task costs a parallel loop or a forked join (spawn, run, join), measured once per process before its main function runs",
        |_s| Raw::Gauge(crate::par::measured_task_overhead_ns().unwrap_or(0.0))
    ),
    per_action_counter!(
        "/parcels/count/failed",
        "",
        "posts of this locality that failed where they ran (panic, bad arguments, unknown action); @ACTION: of that action",
        |s, slot| Raw::Count(s.metrics.failed_posts(slot))
    ),
    traffic_counter!(
        "/parcels/count/received",
        "",
        "parcels (calls and responses) received from other localities",
        received,
        parcels
    ),
    traffic_counter!(
        "/parcels/count/sent",
        "",
        "parcels (calls and responses) sent to other localities",
        sent,
        parcels
    ),
    perf_counter!(0),
    perf_counter!(1),
    perf_counter!(2),
    perf_counter!(3),
    perf_counter!(4),
    perf_counter!(5),
    locality_counter!(
        "/runtime/memory/resident",
        "B",
        "resident set size of the process (Linux; 0 elsewhere)",
        |_s| Raw::Gauge(resident_bytes() as f64)
    ),
    locality_counter!(
        "/runtime/uptime",
        "s",
        "time since the locality started",
        |s| Raw::Gauge(s.metrics.uptime().as_secs_f64())
    ),
    segments_counter!(
        "/segments/count/bytes-packed",
        "B",
        "bytes of unit outputs that came back packed",
        bytes_packed
    ),
    segments_counter!(
        "/segments/count/bytes-whole",
        "B",
        "bytes of unit outputs that came back whole",
        bytes_whole
    ),
    segments_counter!("/segments/count/calls", "", "segmented calls made", calls),
    segments_counter!(
        "/segments/count/segments",
        "",
        "segments of the segmented calls made",
        segments
    ),
    segments_counter!(
        "/segments/count/units",
        "",
        "pipeline units the segmented calls were sent in",
        units
    ),
    segments_counter!(
        "/segments/count/units-packed",
        "",
        "units whose output came back packed (below the threshold)",
        units_packed
    ),
    segments_counter!(
        "/segments/count/units-whole",
        "",
        "units whose output came back whole (every slot)",
        units_whole
    ),
    locality_counter!(
        "/serialize/count/received",
        "B",
        "bytes of whole frames received, headers included",
        |s| Raw::Count(s.received.wire_bytes)
    ),
    locality_counter!(
        "/serialize/count/sent",
        "B",
        "bytes of whole frames sent, headers included",
        |s| Raw::Count(s.sent.wire_bytes)
    ),
    locality_counter!(
        "/serialize/time/received",
        "ns",
        "time decoding received frames and dispatching their parcels",
        |s| Raw::Count(s.received.time_ns)
    ),
    locality_counter!(
        "/serialize/time/sent",
        "ns",
        "time encoding frames and handing them to the transport",
        |s| Raw::Count(s.sent.time_ns)
    ),
    worker_counter!(
        "/threads/background-overhead",
        "",
        "network overhead n_oh = background time / (task loop time + background time), Wagle et al. 2018 Eq. 4",
        |w| Raw::Ratio {
            num: w.background_ns,
            den: busy(&w)
        }
    ),
    locality_counter!(
        "/threads/background-receive-overhead",
        "",
        "time decoding and dispatching received frames / (task loop time + background time)",
        |s| Raw::Ratio {
            num: s.received.time_ns,
            den: busy(&s.stats.total())
        }
    ),
    locality_counter!(
        "/threads/background-send-overhead",
        "",
        "time finishing and sending frames (part of the background time on workers) / (task loop time + background time)",
        |s| Raw::Ratio {
            num: s.sent.time_ns,
            den: busy(&s.stats.total())
        }
    ),
    worker_counter!(
        "/threads/background-work",
        "ns",
        "time in background work (network progress), Wagle et al. 2018 Eq. 3",
        |w| Raw::Count(w.background_ns)
    ),
    worker_counter!("/threads/count/cumulative", "", "tasks finished", |w| {
        Raw::Count(w.finished)
    }),
    worker_counter!(
        "/threads/count/inlined",
        "",
        "tasks spawned with Runtime::spawn whose first poll ran inline, in the spawning code (also counted in count/cumulative once finished)",
        |w| Raw::Count(w.inlined)
    ),
    locality_counter!(
        "/threads/count/long-running",
        "",
        "tasks that ran longer than the watchdog threshold (--watchdog), each reported on stderr with what it runs",
        |s| Raw::Count(s.metrics.long_running_tasks())
    ),
    worker_counter!(
        "/threads/count/stolen",
        "",
        "tasks taken from another worker's queue",
        |w| Raw::Count(w.steals)
    ),
    worker_counter!(
        "/threads/idle-rate",
        "",
        "share of the worker loop's time spent with nothing to do",
        |w| Raw::Ratio {
            num: w.idle_ns,
            den: overall(&w)
        }
    ),
    worker_counter!(
        "/threads/time/average",
        "ns",
        "average time inside a task (t_exec / tasks)",
        |w| Raw::Ratio {
            num: w.exec_ns,
            den: w.finished
        }
    ),
    worker_counter!(
        "/threads/time/average-overhead",
        "ns",
        "average scheduling cost of a task ((t_func - t_exec) / tasks), Wagle et al. 2018 Eq. 2",
        |w| Raw::Ratio {
            num: w.func_ns.saturating_sub(w.exec_ns),
            den: w.finished
        }
    ),
    worker_counter!(
        "/threads/time/cumulative",
        "ns",
        "time inside tasks (t_exec)",
        |w| Raw::Count(w.exec_ns)
    ),
    worker_counter!(
        "/threads/time/cumulative-overhead",
        "ns",
        "time scheduling tasks (t_func - t_exec)",
        |w| Raw::Count(w.func_ns.saturating_sub(w.exec_ns))
    ),
    worker_counter!(
        "/threads/time/overall",
        "ns",
        "time in the worker loop: tasks, scheduling, background work and idling",
        |w| Raw::Count(overall(&w))
    ),
    CounterType {
        name: "/threads/time/poll-distribution",
        unit: "ns",
        help: "histogram of task poll durations, @min,max,buckets in ns (default 0,1000000,20)",
        instances: Instances::PerWorker,
        parameters: Parameters::Histogram,
        sample: |s, i, _| {
            let (counts, sum_ns) = match i {
                Instance::Total => {
                    let mut total = [0u64; POLL_BUCKETS];
                    for h in &s.stats.poll_histograms {
                        for (t, c) in total.iter_mut().zip(h) {
                            *t += c;
                        }
                    }
                    (total, s.stats.total().exec_ns)
                }
                Instance::Worker(Index::At(k)) => {
                    let k = k as usize;
                    match (s.stats.poll_histograms.get(k), s.stats.workers.get(k)) {
                        (Some(h), Some(w)) => (*h, w.exec_ns),
                        _ => return Err(format!("no instance {i}")),
                    }
                }
                Instance::Worker(Index::All) => return Err(format!("no instance {i}")),
            };
            Ok(Raw::Histogram {
                counts: counts.to_vec(),
                sum_ns,
            })
        },
    },
];

/// Resident set size of this process in bytes, from `/proc/self/status`.
fn resident_bytes() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The counter type called `name` exactly.
pub(crate) fn get(name: &str) -> Option<&'static CounterType> {
    TYPES.iter().find(|t| t.name == name)
}

/// The counter types matching a type pattern (with `*` wildcards).
pub(crate) fn matching(pattern: &str) -> Vec<&'static CounterType> {
    TYPES
        .iter()
        .filter(|t| glob_match(pattern, t.name))
        .collect()
}

/// Up to three existing type names close to `name`, closest first.
pub(crate) fn suggest(name: &str) -> Vec<&'static str> {
    let mut scored: Vec<(usize, &'static str)> = TYPES
        .iter()
        .map(|t| (edit_distance(name, t.name), t.name))
        .filter(|(d, n)| *d <= (n.len() / 2).max(3))
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, n)| n).collect()
}

/// A concrete counter's sample, as sent back by the locality that took it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Sample {
    pub(crate) name: String,
    pub(crate) type_name: String,
    pub(crate) raw: Raw,
    /// Seconds since the sampling locality started.
    pub(crate) time: f64,
}

/// Samples every counter `pattern` names on `sources`' locality, expanding
/// type and worker wildcards. The pattern's locality must be this one.
pub(crate) fn sample(sources: &Sources<'_>, pattern: &CounterName) -> Result<Vec<Sample>, String> {
    let here = sources.metrics.here().get();
    let types = matching(&pattern.type_name());
    if types.is_empty() {
        return Err(unknown_type_message(&pattern.type_name()));
    }
    let workers = sources.stats.workers.len() as u32;
    let time = sources.metrics.uptime().as_secs_f64();
    let mut samples = Vec::new();
    for ty in types {
        let exact = pattern.type_name() == ty.name;
        match (&pattern.parameters, ty.parameters) {
            (Some(_), Parameters::None) if exact => {
                return Err(format!("{} takes no parameters", ty.name));
            }
            (Some(_), Parameters::None) => continue,
            _ => {}
        }
        let instances: Vec<Instance> = match (pattern.instance, ty.instances) {
            (Instance::Total, _) => vec![Instance::Total],
            (Instance::Worker(_), Instances::Locality) if pattern.type_name() == ty.name => {
                return Err(format!(
                    "{} has no worker-thread instances, only `total`",
                    ty.name
                ));
            }
            (Instance::Worker(_), Instances::Locality) => continue,
            (Instance::Worker(Index::All), Instances::PerWorker) => (0..workers)
                .map(|k| Instance::Worker(Index::At(k)))
                .collect(),
            (Instance::Worker(Index::At(k)), Instances::PerWorker) if k >= workers => {
                return Err(format!(
                    "locality#{here} has {workers} worker threads, no worker-thread#{k}"
                ));
            }
            (instance @ Instance::Worker(Index::At(_)), Instances::PerWorker) => vec![instance],
        };
        for instance in instances {
            let raw = match (ty.sample)(sources, instance, pattern.parameters.as_deref()) {
                Ok(raw) => raw,
                // A wildcard type skips what this machine cannot count.
                Err(_) if pattern.type_name() != ty.name => continue,
                Err(why) => return Err(format!("{}: {why}", ty.name)),
            };
            let (object, counter) = split_type(ty.name);
            let name = CounterName {
                object: object.to_owned(),
                locality: Index::At(here),
                instance,
                counter: counter.to_owned(),
                parameters: pattern.parameters.clone(),
            };
            samples.push(Sample {
                name: name.to_string(),
                type_name: ty.name.to_owned(),
                raw,
                time,
            });
        }
    }
    Ok(samples)
}

/// Splits `/object/counter/path` into `object` and `counter/path`.
fn split_type(name: &'static str) -> (&'static str, &'static str) {
    name[1..].split_once('/').unwrap_or((&name[1..], ""))
}

/// The error text for a type that does not exist, with suggestions.
pub(crate) fn unknown_type_message(name: &str) -> String {
    let suggestions = suggest(name);
    if suggestions.is_empty() {
        format!("no counter type matches `{name}` (--list-counters shows them all)")
    } else {
        format!(
            "no counter type matches `{name}`; did you mean {}?",
            suggestions.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_sorted_unique_and_parse() {
        let names: Vec<&str> = TYPES.iter().map(|t| t.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
        for t in TYPES {
            let parsed = CounterName::parse(t.name).unwrap();
            assert_eq!(parsed.type_name(), t.name);
            assert!(!t.help.is_empty());
        }
    }

    #[test]
    fn every_type_is_documented_in_counters_md() {
        let doc = include_str!("../../../COUNTERS.md");
        for t in TYPES {
            assert!(
                doc.contains(&format!("`{}", t.name)),
                "COUNTERS.md lacks {}",
                t.name
            );
        }
    }

    #[test]
    fn misspelt_names_get_suggestions() {
        assert_eq!(
            suggest("/threads/count/cumulatve")[0],
            "/threads/count/cumulative"
        );
        assert!(unknown_type_message("/parcel/count/sent").contains("/parcels/count/sent"));
        assert!(suggest("/nothing/like/this/at/all/really").is_empty());
    }

    #[test]
    fn differences_after_reset_are_never_negative() {
        let base = Raw::Ratio { num: 10, den: 4 };
        assert_eq!(Raw::Ratio { num: 30, den: 8 }.value_since(Some(&base)), 5.0);
        assert_eq!(Raw::Ratio { num: 10, den: 4 }.value_since(Some(&base)), 0.0);
        assert_eq!(Raw::Count(7).value_since(Some(&Raw::Count(9))), 0.0);
        assert_eq!(Raw::Count(9).value_since(Some(&Raw::Count(7))), 2.0);
        assert_eq!(Raw::Gauge(1.5).value_since(Some(&Raw::Gauge(9.0))), 1.5);
    }
}
