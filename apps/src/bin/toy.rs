//! The toy application of Wagle et al. 2018 (Listing 1): locality 0 calls `get_cplx`
//! on locality 1 `--parcels` times, awaits every result and checks that each
//! is exactly (13.3, −23.8); `--phases` times, one line per phase with the
//! network overhead n_oh and the task overhead of every locality.
//!
//! ```text
//! cargo run --release -p courier-apps --bin toy -- --localities 2
//! toy --coalescing off                        # one message per call
//! toy --num-parcels 2048 --interval-us 2000   # the count policy's parameters
//! toy --phase-num-parcels 128,16,4,1          # Wagle et al. 2018 Fig. 9: change them per phase
//! ```
//!
//! Each phase line is `phase N: key=value ...`, which `courier sweep` reads.

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use courier::{CallFuture, Runtime, RuntimeArgs};
use courier_apps::phases::{CoalescingArgs, PhaseCounters, describe};
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
    #[command(flatten)]
    coalescing: CoalescingArgs,
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
    courier::report_to_stderr();
    let cli = Cli::parse();
    let config = cli.runtime.config(2);
    let transport = config.transport_kind();
    let (parcels, phases) = (cli.parcels, cli.phases);
    let result = courier::launch(config, move |rt| async move {
        println!(
            "toy: {} localities over {transport:?}, {parcels} calls of get_cplx per phase, {phases} phases",
            rt.num_localities()
        );
        // Per phase, as Wagle et al. 2018 measures: network overhead (Eq. 4) and task
        // overhead (Eq. 2) on every locality.
        let mut counters = PhaseCounters::new(&rt)?;
        let mut wrong_total = 0;
        for p in 1..=phases {
            if let Some(setting) = cli.coalescing.setting(&cli.runtime, p) {
                rt.set_coalescing_everywhere(get_cplx, setting).await?;
            }
            // What is in force, from the flags above or the configuration.
            let setting = rt.coalescing(get_cplx, rt.locality(1 % rt.num_localities()));
            counters.start().await?;
            let start = Instant::now();
            let wrong = phase(&rt, parcels).await?;
            let secs = start.elapsed().as_secs_f64();
            println!(
                "phase {p}: seconds={secs:.4} calls_per_s={:.0} wrong={wrong} {} {}",
                parcels as f64 / secs,
                describe(setting),
                counters.finish().await?
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
