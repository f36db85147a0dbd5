//! Parallel loops: `Chunking::Auto` against a sweep of static chunk sizes,
//! on three loop bodies of very different cost (issue #16), side by side
//! and interleaved in one run.
//!
//! ```text
//! cargo run --release -p courier-apps --bin loops -- --runs 5
//! ```
//!
//! Each body is `map_reduce` of a hash over a range sized so that a loop
//! takes about 0.1 s on one core; every result is checked against the same
//! sum computed sequentially. Prints, per body, the median time of every
//! setting, the best static one, and auto's ratio to it.

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use courier::par::{self, Chunking};
use courier::{BoxError, RuntimeArgs};

/// Auto chunking against a static sweep.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// Repetitions of every setting (interleaved); medians are printed.
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

/// One round of a 64-bit mix (splitmix64's finalizer).
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `rounds` rounds of [`mix`] from `i`: the body's cost.
fn body(i: usize, rounds: u32) -> u64 {
    (0..rounds).fold(i as u64, |x, _| mix(x))
}

/// A loop body: its name, iterations and rounds of `mix` per iteration.
struct Body {
    name: &'static str,
    iterations: usize,
    rounds: u32,
}

const BODIES: [Body; 3] = [
    Body {
        name: "cheap (1 round, ~2 ns)",
        iterations: 40_000_000,
        rounds: 1,
    },
    Body {
        name: "medium (100 rounds, ~0.2 µs)",
        iterations: 400_000,
        rounds: 100,
    },
    Body {
        name: "costly (100,000 rounds, ~0.2 ms)",
        iterations: 400,
        rounds: 100_000,
    },
];

/// Most chunks a static setting may make: beyond, the sweep would spend
/// seconds spawning tasks that cannot win.
const MAX_CHUNKS: usize = 400_000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> ExitCode {
    courier::report_to_stderr();
    let cli = Cli::parse();
    let runs = cli.runs.max(1);
    let result = courier::launch(cli.runtime.config(1), move |_rt| async move {
        let mut ok = true;
        for b in BODIES {
            let rounds = b.rounds;
            let expected = (0..b.iterations).fold(0u64, |a, i| a.wrapping_add(body(i, rounds)));
            let mut settings = vec![Chunking::Auto];
            let mut size = 1;
            while size <= b.iterations / 2 {
                if b.iterations.div_ceil(size) <= MAX_CHUNKS {
                    settings.push(Chunking::Static(size));
                }
                size *= 4;
            }
            let mut times = vec![Vec::new(); settings.len()];
            let mut auto_chunk = 0;
            for _ in 0..runs {
                for (k, &chunking) in settings.iter().enumerate() {
                    let start = Instant::now();
                    let (report, sum) = par::map_reduce(
                        0..b.iterations,
                        chunking,
                        0u64,
                        move |i| body(i, rounds),
                        u64::wrapping_add,
                    )
                    .await;
                    times[k].push(start.elapsed().as_secs_f64() * 1e3);
                    if sum != expected {
                        eprintln!("loops: {} with {chunking:?}: wrong sum", b.name);
                        ok = false;
                    }
                    if chunking == Chunking::Auto {
                        auto_chunk = report.chunk;
                    }
                }
            }
            let medians: Vec<f64> = times.into_iter().map(median).collect();
            println!(
                "{}: {} iterations, {runs} runs, median ms",
                b.name, b.iterations
            );
            let mut best = (f64::INFINITY, 0);
            for (k, chunking) in settings.iter().enumerate() {
                let label = match chunking {
                    Chunking::Auto => format!("auto (chunk {auto_chunk})"),
                    Chunking::Static(n) => format!("static {n}"),
                };
                println!("  {label:>22}: {:9.2}", medians[k]);
                if let Chunking::Static(n) = chunking {
                    if medians[k] < best.0 {
                        best = (medians[k], *n);
                    }
                }
            }
            println!(
                "  best static {} at {:.2} ms; auto/best = {:.3}",
                best.1,
                best.0,
                medians[0] / best.0
            );
        }
        Ok::<bool, BoxError>(ok)
    });
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("loops: {e}");
            ExitCode::FAILURE
        }
    }
}
