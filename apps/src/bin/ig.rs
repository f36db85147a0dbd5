//! bale's index-gather kernel on Courier: every locality reads `--reads`
//! random entries of a table of `--table` entries per locality, spread
//! cyclically over the localities: a request to the entry's owner and its
//! value back.
//!
//! ```text
//! cargo run --release -p courier-apps --bin ig -- --localities 2
//! ig --reads 10000000 --table 10000 --mode batch     # one future for all reads (default)
//! ig --mode futures                                  # a CallFuture per read
//! ig --mode posts                                    # bale's way: a request post, a reply post
//! ```
//!
//! The indices are drawn before the timed region; the region runs from a
//! barrier to a barrier. Every value read is checked against the value the
//! entry was filled with. Prints one `run N: key=value ...` line per run and
//! exits non-zero on a mismatch.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

use clap::{Parser, ValueEnum};
use courier::{BoxError, CallFuture, Runtime, RuntimeArgs};
use courier_apps::kernel::{Measured, SplitMix64, exit_code, local, owner, runs, timed};

/// What entry `g` of the distributed table holds.
fn value_of(g: u64) -> u64 {
    g.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA5A5
}

/// This locality's part of the table, and where `--mode posts` puts the
/// values that come back.
struct Table {
    entries: Vec<u64>,
    targets: Vec<AtomicU64>,
}

/// Reads entry `index` of this locality's table.
#[courier::action]
fn ig_read(index: u32) -> u64 {
    courier::with_state(|t: &Table| t.entries[index as usize])
}

/// bale's request: read entry `index` and post it back to `origin`'s
/// target `slot`.
#[courier::action]
fn ig_request(index: u32, origin: u32, slot: u32) {
    let value = courier::with_state(|t: &Table| t.entries[index as usize]);
    let rt = courier::current();
    // The origin is a locality of the job: a post to it fails only if it
    // is lost, which fails the job.
    let _ = rt.post(rt.locality(origin), ig_reply, (slot, value));
}

/// bale's reply: the value of a read lands in its target slot.
#[courier::action]
fn ig_reply(slot: u32, value: u64) {
    courier::with_state(|t: &Table| t.targets[slot as usize].store(value, Ordering::Relaxed));
}

/// How the reads are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// One `call_batch` for every read: one future, results in order.
    Batch,
    /// One `call` per read, a `Vec` of `CallFuture`s awaited in order.
    Futures,
    /// A request post that posts the value back (bale's exstack way).
    Posts,
}

/// bale's ig kernel over Courier.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// Reads per locality per run.
    #[arg(long, default_value_t = 10_000_000)]
    reads: u64,
    /// Table entries per locality.
    #[arg(long, default_value_t = 10_000)]
    table: u32,
    /// How the reads are made.
    #[arg(long, value_enum, default_value_t = Mode::Batch)]
    mode: Mode,
    /// Timed runs (each verified).
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Seed of the random streams.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// One run: returns the seconds of the timed region and the number of
/// wrong values (over every locality).
async fn run(rt: &Runtime, cli: &Cli, seed: u64) -> Result<(f64, u64), BoxError> {
    let p = rt.num_localities();
    let global = u64::from(cli.table) * u64::from(p);
    let mut rng = SplitMix64::for_locality(seed, rt.here().get());
    let indices: Vec<u64> = (0..cli.reads).map(|_| rng.below(global)).collect();
    let here = rt.here().get();
    let mut values: Vec<u64> = Vec::new();
    let seconds = timed(rt, || async {
        match cli.mode {
            Mode::Batch => {
                let calls = indices
                    .iter()
                    .map(|&g| (owner(g, p), (local(g, p) as u32,)));
                values = rt.call_batch(ig_read, calls).await?;
            }
            Mode::Futures => {
                let calls: Vec<CallFuture<u64>> = indices
                    .iter()
                    .map(|&g| rt.call(owner(g, p), ig_read, (local(g, p) as u32,)))
                    .collect();
                values.reserve(calls.len());
                for call in calls {
                    values.push(call.await?);
                }
            }
            Mode::Posts => {
                for (slot, &g) in indices.iter().enumerate() {
                    rt.post(
                        owner(g, p),
                        ig_request,
                        (local(g, p) as u32, here, slot as u32),
                    )?;
                }
                rt.quiesce().await?;
                let table = rt.state::<Table>();
                values = table.targets[..indices.len()]
                    .iter()
                    .map(|v| v.load(Ordering::Relaxed))
                    .collect();
            }
        }
        Ok(())
    })
    .await?;
    let wrong = indices
        .iter()
        .zip(&values)
        .filter(|(g, v)| value_of(**g) != **v)
        .count() as u64
        + (indices.len() as u64).abs_diff(values.len() as u64);
    Ok((seconds, rt.all_reduce(wrong, |a, b| a + b).await?))
}

fn main() -> ExitCode {
    courier::report_to_stderr();
    let cli = Cli::parse();
    let (table, reads) = (u64::from(cli.table), cli.reads);
    let targets = if cli.mode == Mode::Posts {
        reads as usize
    } else {
        0
    };
    let config = cli.runtime.config(2).state(move |here, p| Table {
        entries: (0..table)
            .map(|l| value_of(l * u64::from(p) + u64::from(here.get())))
            .collect(),
        targets: (0..targets).map(|_| AtomicU64::new(0)).collect(),
    });
    let transport = config.transport_kind();
    let result = courier::launch_spmd(config, |rt| {
        let cli = Cli::parse();
        async move {
            let root = rt.here().get() == 0;
            if root {
                println!(
                    "ig: {} localities over {transport:?}, {} reads per locality, {} entries per locality, mode {:?}, {} runs",
                    rt.num_localities(),
                    cli.reads,
                    cli.table,
                    cli.mode,
                    cli.runs
                );
            }
            runs(&rt, "ig", "mreads_per_locality", cli.runs, |r| {
                let cli = &cli;
                let rt = &rt;
                async move {
                    let (seconds, wrong) = run(rt, cli, cli.seed + u64::from(r)).await?;
                    let rate = cli.reads as f64 / seconds / 1e6;
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
    exit_code("ig", result)
}
