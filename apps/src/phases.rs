//! What the phase-structured apps (toy, parquet) share: the coalescing
//! flags that may change from phase to phase, and the per-phase report
//! line with the network and task overheads of every locality and the
//! decisions of adaptive coalescing.

use courier::counters::{CounterSet, CounterValue};
use courier::{Action, BoxError, Coalescing, CountPolicy, Runtime, RuntimeArgs};

/// Coalescing flags of an app whose hot action is coalesced with the count
/// policy, phase by phase. Without them the configuration governs:
/// `--coalescing` or `COURIER_COALESCING` for every coalesced action, and
/// `--coalesce-action ACTION=SPEC` for one.
#[derive(Debug, Clone, clap::Args)]
pub struct CoalescingArgs {
    /// Parcels per message (count policy) [default: that of a
    /// `--coalescing count:...`, else the count policy's default].
    #[arg(long, value_name = "N")]
    pub num_parcels: Option<u32>,
    /// Wait interval of the count policy in µs [default: that of a
    /// `--coalescing count:...`, else the count policy's default].
    #[arg(long, value_name = "US")]
    pub interval_us: Option<u64>,
    /// Parcels per message of each phase in turn (Wagle et al. 2018 Fig. 9), e.g.
    /// 128,16,4,1; overrides --num-parcels.
    #[arg(long, value_name = "N,N,...", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..))]
    pub phase_num_parcels: Vec<u32>,
}

impl CoalescingArgs {
    /// The setting these flags ask for in phase `p` (from 1), starting from
    /// `runtime`'s `--coalescing`; `None` when they ask for nothing, and the
    /// app leaves the configured setting in force.
    pub fn setting(&self, runtime: &RuntimeArgs, p: u32) -> Option<Coalescing> {
        let by_phase = (!self.phase_num_parcels.is_empty())
            .then(|| self.phase_num_parcels[(p as usize - 1) % self.phase_num_parcels.len()]);
        if by_phase.is_none() && self.num_parcels.is_none() && self.interval_us.is_none() {
            return None;
        }
        let base = match runtime.coalescing {
            Some(Coalescing::Off) => return Some(Coalescing::Off),
            Some(Coalescing::Count(policy)) => policy,
            _ => CountPolicy::DEFAULT,
        };
        Some(Coalescing::Count(CountPolicy {
            num_parcels: by_phase.or(self.num_parcels).unwrap_or(base.num_parcels),
            interval_us: self.interval_us.unwrap_or(base.interval_us),
            ..base
        }))
    }
}

/// Measures the network overhead n_oh (Wagle et al. 2018 Eq. 4), the task
/// overhead (Eq. 2) and the decisions of adaptive coalescing for one action
/// (`/adapt/count/decisions@ACTION`) of every locality over one phase,
/// and when the phase began and ended on locality 0's clock (that of
/// `--print-counter`'s `time`, for lining up periodic samples with phases).
#[derive(Debug)]
pub struct PhaseCounters {
    set: CounterSet,
    /// When the phase began: seconds since locality 0 started.
    from_s: f64,
}

/// The time of locality 0's sample among `values`: seconds since it started.
fn time_at_0(values: &[CounterValue]) -> f64 {
    values
        .iter()
        .find(|v| v.name.contains("{locality#0/"))
        .map_or(f64::NAN, |v| v.time)
}

impl PhaseCounters {
    /// Counters of every locality of `rt`'s job; the decisions are those
    /// for `action`, the phase's coalesced action.
    pub fn new<A: Action>(rt: &Runtime, action: A) -> Result<Self, BoxError> {
        let _ = action;
        Ok(PhaseCounters {
            set: rt.counters([
                "/threads{locality#*/total}/background-overhead".to_string(),
                "/threads{locality#*/total}/time/average-overhead".to_string(),
                format!("/adapt{{locality#*/total}}/count/decisions@{}", A::NAME),
            ])?,
            from_s: f64::NAN,
        })
    }

    /// Starts a phase.
    pub async fn start(&mut self) -> Result<(), BoxError> {
        self.from_s = time_at_0(&self.set.evaluate(true).await?);
        Ok(())
    }

    /// Ends a phase: `decisions=MAX decisions@0=.. n_oh=MEAN n_oh@0=..
    /// task_overhead_ns@0=.. ... from_s=.. until_s=..`, where `decisions`
    /// is the most any locality made during the phase (each locality's
    /// tuner decides for what it sends), and `from_s`, `until_s` the
    /// phase's span in seconds since locality 0 started.
    pub async fn finish(&mut self) -> Result<String, BoxError> {
        let values = self.set.evaluate(false).await?;
        let (mut n_oh, mut decisions) = (Vec::new(), Vec::new());
        let (mut head, mut parts) = (Vec::new(), Vec::new());
        for v in &values {
            let locality = v.name.split(['#', '/']).nth(2).unwrap_or("?");
            if v.name.contains("/count/decisions") {
                decisions.push(v.value);
                head.push(format!("decisions@{locality}={}", v.value));
            } else if v.name.ends_with("background-overhead") {
                n_oh.push(v.value);
                parts.push(format!("n_oh@{locality}={:.4}", v.value));
            } else {
                parts.push(format!("task_overhead_ns@{locality}={:.1}", v.value));
            }
        }
        let most = decisions.iter().copied().fold(0.0, f64::max);
        let mean = n_oh.iter().sum::<f64>() / n_oh.len().max(1) as f64;
        Ok(format!(
            "decisions={most} {} n_oh={mean:.4} {} from_s={:.4} until_s={:.4}",
            head.join(" "),
            parts.join(" "),
            self.from_s,
            time_at_0(&values)
        ))
    }
}

/// `num_parcels=N interval_us=N` for the count policy, else
/// `coalescing=SETTING`: the setting part of a phase line.
pub fn describe(setting: Coalescing) -> String {
    match setting {
        Coalescing::Count(p) => format!(
            "num_parcels={} interval_us={}",
            p.num_parcels, p.interval_us
        ),
        other => format!("coalescing={other}"),
    }
}
