//! bale's histogram kernel on Courier: every locality makes `--updates`
//! random +1 updates to a table of `--table` counters per locality, spread
//! cyclically over the localities, by posting one tiny action per update.
//!
//! ```text
//! cargo run --release -p courier-apps --bin histo -- --localities 2
//! histo --updates 10000000 --table 10000 --runs 5
//! ```
//!
//! The indices are drawn before the timed region; the region runs from a
//! barrier to a barrier and ends with `quiesce` (every update has run). Each
//! run is verified: every locality replays every locality's random stream
//! and checks its counters exactly. Prints one `run N: key=value ...` line
//! per run (`courier sweep` reads them) and exits non-zero on a mismatch.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

use clap::Parser;
use courier::{BoxError, Runtime, RuntimeArgs};
use courier_apps::kernel::{Measured, SplitMix64, exit_code, local, owner, runs, timed};

/// The counters of this locality.
struct Table(Vec<AtomicU64>);

/// One update: +1 to counter `index` of the locality it runs on.
#[courier::action]
fn histo_update(index: u32) {
    courier::with_state(|t: &Table| t.0[index as usize].fetch_add(1, Ordering::Relaxed));
}

/// bale's histo kernel over Courier.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// Updates per locality per run.
    #[arg(long, default_value_t = 10_000_000)]
    updates: u64,
    /// Counters per locality.
    #[arg(long, default_value_t = 10_000)]
    table: u32,
    /// Timed runs (each verified).
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Seed of the random streams.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// One run: returns the seconds of the timed region and the number of
/// counters that differ from the replayed streams (on every locality).
async fn run(rt: &Runtime, cli: &Cli, seed: u64) -> Result<(f64, u64), BoxError> {
    let p = rt.num_localities();
    let table = rt.state::<Table>();
    for c in &table.0 {
        c.store(0, Ordering::Relaxed);
    }
    let global = u64::from(cli.table) * u64::from(p);
    let mut rng = SplitMix64::for_locality(seed, rt.here().get());
    let indices: Vec<u64> = (0..cli.updates).map(|_| rng.below(global)).collect();
    let seconds = timed(rt, || async {
        for &g in &indices {
            rt.post(owner(g, p), histo_update, (local(g, p) as u32,))?;
        }
        rt.quiesce().await?;
        Ok(())
    })
    .await?;
    // Verify: replay every locality's stream, count the hits here.
    let mut expected = vec![0u64; cli.table as usize];
    for rank in 0..p {
        let mut rng = SplitMix64::for_locality(seed, rank);
        for _ in 0..cli.updates {
            let g = rng.below(global);
            if owner(g, p) == rt.here() {
                expected[local(g, p) as usize] += 1;
            }
        }
    }
    let wrong = table
        .0
        .iter()
        .zip(&expected)
        .filter(|(got, want)| got.load(Ordering::Relaxed) != **want)
        .count() as u64;
    let wrong = rt.all_reduce(wrong, |a, b| a + b).await?;
    Ok((seconds, wrong))
}

fn main() -> ExitCode {
    courier::report_to_stderr();
    let cli = Cli::parse();
    let table = cli.table as usize;
    let config = cli
        .runtime
        .config(2)
        .state(move |_, _| Table((0..table).map(|_| AtomicU64::new(0)).collect()));
    let transport = config.transport_kind();
    let result = courier::launch_spmd(config, |rt| {
        let cli = Cli::parse();
        async move {
            let root = rt.here().get() == 0;
            if root {
                println!(
                    "histo: {} localities over {transport:?}, {} updates per locality, {} counters per locality, {} runs",
                    rt.num_localities(),
                    cli.updates,
                    cli.table,
                    cli.runs
                );
            }
            runs(&rt, "histo", "mups_per_locality", cli.runs, |r| {
                let cli = &cli;
                let rt = &rt;
                async move {
                    let (seconds, wrong) = run(rt, cli, cli.seed + u64::from(r)).await?;
                    let rate = cli.updates as f64 / seconds / 1e6;
                    Ok(Measured {
                        seconds,
                        rate,
                        wrong,
                    })
                }
            })
            .await
        }
    });
    exit_code("histo", result)
}
