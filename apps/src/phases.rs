//! What the phase-structured apps (toy, parquet) share: the coalescing
//! flags that may change from phase to phase, and the per-phase report
//! line with the network and task overheads of every locality.

use courier::counters::CounterSet;
use courier::{BoxError, Coalescing, CountPolicy, Runtime, RuntimeArgs};

/// Coalescing flags of an app whose hot action is coalesced with the count
/// policy, phase by phase. Without them the configuration governs:
/// `--coalescing` or `COURIER_COALESCING` for every coalesced action, and
/// `--coalesce-action ACTION=SPEC` for one.
#[derive(Debug, Clone, clap::Args)]
pub struct CoalescingArgs {
    /// Parcels per message (count policy) [default: the configured setting's].
    #[arg(long, value_name = "N")]
    pub num_parcels: Option<u32>,
    /// Wait interval of the count policy in µs [default: the configured setting's].
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

/// Measures the network overhead n_oh (Wagle et al. 2018 Eq. 4) and the task
/// overhead (Eq. 2) of every locality over one phase.
#[derive(Debug)]
pub struct PhaseCounters {
    set: CounterSet,
}

impl PhaseCounters {
    /// Counters of every locality of `rt`'s job.
    pub fn new(rt: &Runtime) -> Result<Self, BoxError> {
        Ok(PhaseCounters {
            set: rt.counters([
                "/threads{locality#*/total}/background-overhead",
                "/threads{locality#*/total}/time/average-overhead",
            ])?,
        })
    }

    /// Starts a phase.
    pub async fn start(&mut self) -> Result<(), BoxError> {
        Ok(self.set.reset().await?)
    }

    /// Ends a phase: `n_oh=MEAN n_oh@0=.. task_overhead_ns@0=.. ...`.
    pub async fn finish(&mut self) -> Result<String, BoxError> {
        let values = self.set.evaluate(false).await?;
        let mut n_oh = Vec::new();
        let mut parts = Vec::new();
        for v in &values {
            let locality = v.name.split(['#', '/']).nth(2).unwrap_or("?");
            if v.name.ends_with("background-overhead") {
                n_oh.push(v.value);
                parts.push(format!("n_oh@{locality}={:.4}", v.value));
            } else {
                parts.push(format!("task_overhead_ns@{locality}={:.1}", v.value));
            }
        }
        let mean = n_oh.iter().sum::<f64>() / n_oh.len().max(1) as f64;
        Ok(format!("n_oh={mean:.4} {}", parts.join(" ")))
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
