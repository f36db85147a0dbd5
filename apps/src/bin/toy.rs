//! The toy application of seed 000 (Listing 1): locality 0 calls `get_cplx`
//! on locality 1 `--parcels` times, awaits every result and checks that each
//! is exactly (13.3, −23.8); `--phases` times, one line per phase.
//!
//! ```text
//! cargo run --release -p courier-apps --bin toy -- --localities 2
//! ```

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use courier::{CallFuture, Runtime, RuntimeArgs};
use num_complex::Complex64;

/// The value every call must return.
const EXPECTED: Complex64 = Complex64::new(13.3, -23.8);

/// Returns a constant complex number: the smallest useful remote call.
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

fn main() -> ExitCode {
    let cli = Cli::parse();
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
            overheads.reset().await?;
            let start = Instant::now();
            let wrong = phase(&rt, parcels).await?;
            let secs = start.elapsed().as_secs_f64();
            let values = overheads.evaluate(false).await?;
            let summary: Vec<String> = values
                .iter()
                .map(|v| {
                    let kind = if v.name.ends_with("background-overhead") {
                        "n_oh"
                    } else {
                        "task overhead"
                    };
                    let locality = v.name.split(['#', '/']).nth(2).unwrap_or("?");
                    format!("{kind}@{locality} {:.3}{}", v.value, v.unit)
                })
                .collect();
            println!(
                "phase {p}: {parcels} calls in {secs:.3} s = {:.3} M calls/s, {wrong} wrong results; {}",
                parcels as f64 / secs / 1e6,
                summary.join(", ")
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
