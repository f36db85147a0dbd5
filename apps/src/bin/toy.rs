//! The toy application of seed 000 (Listing 1): locality 0 calls `get_cplx`
//! on locality 1 `--parcels` times, awaits every result and checks that each
//! is exactly (13.3, −23.8); `--phases` times, one line per phase with the
//! network overhead n_oh and the task overhead of every locality.
//!
//! ```text
//! cargo run --release -p courier-apps --bin toy -- --localities 2
//! toy --coalescing off                        # one message per call
//! toy --num-parcels 2048 --interval-us 2000   # the count policy's parameters
//! toy --phase-num-parcels 128,16,4,1          # seed 000 Fig. 9: change them per phase
//! ```
//!
//! Each phase line is `phase N: key=value ...`, which `courier sweep` reads.

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use courier::{CallFuture, Coalescing, CountPolicy, Runtime, RuntimeArgs};
use num_complex::Complex64;

/// The value every call must return.
const EXPECTED: Complex64 = Complex64::new(13.3, -23.8);

/// Returns a constant complex number: the smallest useful remote call.
/// Coalesced like HPX's `HPX_ACTION_USES_MESSAGE_COALESCING(get_cplx)`.
#[courier::action(coalescing)]
fn get_cplx() -> Complex64 {
    EXPECTED
}

/// Toy application: many tiny remote calls from locality 0 to locality 1.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// Calls per phase.
    #[arg(long, default_value_t = 1_000_000)]
    parcels: u64,
    /// Number of phases.
    #[arg(long, default_value_t = 4)]
    phases: u32,
    /// Parcels per message (count policy) [default: --coalescing's, or 128].
    #[arg(long, value_name = "N")]
    num_parcels: Option<u32>,
    /// Wait interval of the count policy in µs [default: --coalescing's, or 100].
    #[arg(long, value_name = "US")]
    interval_us: Option<u64>,
    /// Parcels per message of each phase in turn (seed 000 Fig. 9), e.g.
    /// 128,16,4,1; overrides --num-parcels.
    #[arg(long, value_name = "N,N,...", value_delimiter = ',')]
    phase_num_parcels: Vec<u32>,
}

impl Cli {
    /// The setting of `get_cplx` in phase `p` (from 1).
    fn setting(&self, p: u32) -> Coalescing {
        let base = match self.runtime.coalescing {
            Some(Coalescing::Off) => return Coalescing::Off,
            Some(Coalescing::Count(policy)) => policy,
            _ => CountPolicy::DEFAULT,
        };
        let by_phase = (!self.phase_num_parcels.is_empty())
            .then(|| self.phase_num_parcels[(p as usize - 1) % self.phase_num_parcels.len()]);
        let changed =
            by_phase.is_some() || self.num_parcels.is_some() || self.interval_us.is_some();
        if !changed {
            // Whatever --coalescing (or COURIER_COALESCING) set, bytes included.
            return self.runtime.coalescing.unwrap_or(Coalescing::Count(base));
        }
        Coalescing::Count(CountPolicy {
            num_parcels: by_phase.or(self.num_parcels).unwrap_or(base.num_parcels),
            interval_us: self.interval_us.unwrap_or(base.interval_us),
            ..base
        })
    }
}

/// Runs one phase; returns how many results were wrong.
async fn phase(rt: &Runtime, parcels: u64) -> Result<u64, courier::CallError> {
    let target = rt.locality(rt.num_localities().min(2) - 1);
    let calls: Vec<CallFuture<Complex64>> = (0..parcels)
        .map(|_| rt.call(target, get_cplx, ()))
        .collect();
    let mut wrong = 0;
    for call in calls {
        if call.await? != EXPECTED {
            wrong += 1;
        }
    }
    Ok(wrong)
}

/// `num_parcels=N interval_us=N`, or the setting's text form.
fn describe(setting: Coalescing) -> String {
    match setting {
        Coalescing::Count(p) => format!(
            "num_parcels={} interval_us={}",
            p.num_parcels, p.interval_us
        ),
        other => format!("coalescing={other}"),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(bad) = cli.phase_num_parcels.iter().find(|&&n| n == 0) {
        eprintln!("toy: --phase-num-parcels values must be at least 1, not {bad}");
        return ExitCode::FAILURE;
    }
    let config = cli.runtime.config(2);
    let transport = config.transport_kind();
    let (parcels, phases) = (cli.parcels, cli.phases);
    let result = courier::launch(config, move |rt| async move {
        println!(
            "toy: {} localities over {transport:?}, {parcels} calls of get_cplx per phase, {phases} phases",
            rt.num_localities()
        );
        // Per phase, as seed 000 measures: network overhead (Eq. 4) and task
        // overhead (Eq. 2) on every locality, reset at each phase start.
        let mut overheads = rt.counters([
            "/threads{locality#*/total}/background-overhead",
            "/threads{locality#*/total}/time/average-overhead",
        ])?;
        let mut wrong_total = 0;
        for p in 1..=phases {
            let setting = cli.setting(p);
            rt.set_coalescing_everywhere(get_cplx, setting).await?;
            overheads.reset().await?;
            let start = Instant::now();
            let wrong = phase(&rt, parcels).await?;
            let secs = start.elapsed().as_secs_f64();
            let values = overheads.evaluate(false).await?;
            let mut n_oh = Vec::new();
            let mut summary = Vec::new();
            for v in &values {
                let locality = v.name.split(['#', '/']).nth(2).unwrap_or("?");
                if v.name.ends_with("background-overhead") {
                    n_oh.push(v.value);
                    summary.push(format!("n_oh@{locality}={:.4}", v.value));
                } else {
                    summary.push(format!("task_overhead_ns@{locality}={:.1}", v.value));
                }
            }
            println!(
                "phase {p}: seconds={secs:.4} calls_per_s={:.0} wrong={wrong} {} n_oh={:.4} {}",
                parcels as f64 / secs,
                describe(setting),
                n_oh.iter().sum::<f64>() / n_oh.len().max(1) as f64,
                summary.join(" ")
            );
            wrong_total += wrong;
        }
        Ok(wrong_total)
    });
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(wrong) => {
            eprintln!("toy: {wrong} results differed from {EXPECTED}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("toy: {e}");
            ExitCode::FAILURE
        }
    }
}
