//! The Inncabs task benchmarks (Thoman et al. 2015; ported to HPX and
//! measured with its counters in Grubel et al. 2016, seed 003): fib,
//! nqueens, sort, strassen, sparselu, health, floorplan and uts, each as
//! one fork-join kernel run three ways: plain sequential calls, `rayon::join`,
//! and `courier::par::join` under three inlining policies.
//!
//! ```text
//! cargo run --release -p courier-apps --bin tasks -- --runs 5
//! tasks --bench fib,uts --workers 2 --depth 8
//! tasks --quick                    # tiny inputs, one run (the tests)
//! tasks --fib-n 35 --sort-len 8388608 --uts-depth 10   # bigger inputs
//! ```
//!
//! For each benchmark the modes `seq`, `rayon`, `never`, `depth:D` and
//! `adaptive` run `--runs` times, interleaved (every mode once per round,
//! so that noise hits them alike). Every run is checked: against a known
//! answer where there is one (fib, nqueens, sort, strassen, uts), and its
//! digest against the first sequential run's (all); any mismatch is
//! printed and the exit status is 1. Only the kernel is timed: each
//! Courier run is one `courier::launch` (the inlining policy is a job's
//! setting), whose launch is not timed. Prints
//! the median seconds of every mode and adaptive's ratios to `seq`,
//! `rayon` and the better of `never` and `depth`; then, per benchmark
//! under `adaptive`, the tasks, task duration and task overhead from
//! Courier's counters, as in seed 003's Table V, with the joins that
//! forked and that ran inline.
//!
//! Every mode allocates with mimalloc, this program's global allocator:
//! under glibc's `malloc`, the kernels that free on one thread what
//! another allocated (health moves patients between lists) ran 2–5×
//! slower in some processes than in others, in every parallel mode alike.

/// See the module docs: glibc's allocator made health bimodal.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod fib;
mod floorplan;
mod fork;
mod health;
mod nqueens;
mod sort;
mod sparselu;
mod strassen;
mod uts;

use std::collections::BTreeMap;
use std::fmt;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use courier::par::Inlining;
use courier::{BoxError, RuntimeArgs, TransportKind};

use fork::Par;

/// The check of a run, called after the clock stopped: a digest of the
/// run's result, or why the result is wrong.
type Check = Box<dyn FnOnce() -> Result<u64, String> + Send>;

/// A benchmark's kernel with its input built, to run once with a fork.
type Kernel = Box<dyn FnOnce(Par) -> Check + Send>;

/// One benchmark of the suite.
struct Benchmark {
    /// Its Inncabs name.
    name: &'static str,
    /// Its input, for the table.
    input: String,
    /// Builds a fresh input (not timed) and returns the kernel on it.
    prepare: Box<dyn Fn() -> Kernel>,
}

/// Every benchmark, in the order they run.
const NAMES: [&str; 8] = [
    "fib",
    "nqueens",
    "sort",
    "strassen",
    "sparselu",
    "health",
    "floorplan",
    "uts",
];

/// The default cutoff of `depth` mode. On 2 workers, a binary fork tree
/// cut at depth 8 leaves up to 2^8 = 256 tasks: over 100 per worker to
/// balance an unbalanced tree (uts, floorplan), while each is still large
/// enough to hide the task overhead even for fib(30) (fib(22), ~20 µs).
/// The usual hand-tuned choice ("a few hundred tasks per core"), not tuned
/// per benchmark.
const DEFAULT_DEPTH: u32 = 8;

/// The Courier counters read around each `adaptive` run (COUNTERS.md):
/// tasks run, their mean duration and overhead (seed 003's Table V), the
/// joins that forked and that ran inline, and the measured task overhead
/// that the adaptive policy compares durations with.
const COUNTERS: [&str; 6] = [
    "/threads{locality#0/total}/count/cumulative",
    "/threads{locality#0/total}/time/average",
    "/threads{locality#0/total}/time/average-overhead",
    "/par{locality#0/total}/count/forks",
    "/par{locality#0/total}/count/inlined",
    "/par{locality#0/total}/time/task-overhead",
];

/// The Inncabs task benchmarks: seq vs rayon vs Courier's join policies.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// Benchmarks to run, comma-separated [default: all:
    /// fib,nqueens,sort,strassen,sparselu,health,floorplan,uts].
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(NAMES))]
    bench: Vec<String>,
    /// Repetitions of every mode (interleaved); medians are printed.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Cutoff of the `depth` mode: fork above this nesting depth of joins.
    #[arg(long, default_value_t = DEFAULT_DEPTH)]
    depth: u32,
    /// Tiny inputs and one run (for tests); explicit sizes still apply.
    #[arg(long)]
    quick: bool,
    /// fib's n [default: 30; quick 20].
    #[arg(long)]
    fib_n: Option<u32>,
    /// nqueens' board size [default: 12; quick 7].
    #[arg(long)]
    nqueens_n: Option<usize>,
    /// sort's number of elements [default: 2^21; quick 10,000].
    #[arg(long)]
    sort_len: Option<usize>,
    /// strassen's matrix order, a power of two [default: 1024; quick 128].
    #[arg(long)]
    strassen_n: Option<usize>,
    /// sparselu's blocks per side [default: 50; quick 8].
    #[arg(long)]
    sparselu_blocks: Option<usize>,
    /// sparselu's block side [default: 32; quick 8].
    #[arg(long)]
    sparselu_block_size: Option<usize>,
    /// health's levels of villages [default: 6; quick 3].
    #[arg(long)]
    health_levels: Option<i32>,
    /// health's time steps [default: 400; quick 20].
    #[arg(long)]
    health_steps: Option<u32>,
    /// floorplan's cells [default: 13; quick 6].
    #[arg(long)]
    floorplan_cells: Option<usize>,
    /// uts's depth limit; 10 is T1, with its published size [default: 10; quick 5].
    #[arg(long)]
    uts_depth: Option<u32>,
    /// Corrupts the digest of BENCH's `adaptive` runs, to show that the
    /// checks catch it (for tests).
    #[arg(long = "break", value_name = "BENCH", hide = true)]
    corrupt: Option<String>,
}

impl Cli {
    /// `explicit`, else the quick or the default size.
    fn size<T>(&self, explicit: Option<T>, default: T, quick: T) -> T {
        explicit.unwrap_or(if self.quick { quick } else { default })
    }

    /// The benchmark named `name`.
    fn benchmark(&self, name: &str) -> Benchmark {
        match name {
            "fib" => fib::benchmark(self.size(self.fib_n, 30, 20)),
            "nqueens" => nqueens::benchmark(self.size(self.nqueens_n, 12, 7)),
            "sort" => sort::benchmark(self.size(self.sort_len, 1 << 21, 10_000)),
            "strassen" => strassen::benchmark(self.size(self.strassen_n, 1024, 128)),
            "sparselu" => sparselu::benchmark(
                self.size(self.sparselu_blocks, 50, 8),
                self.size(self.sparselu_block_size, 32, 8),
            ),
            "health" => health::benchmark(health::Params {
                levels: self.size(self.health_levels, 6, 3),
                steps: self.size(self.health_steps, 400, 20),
                ..health::Params::DEFAULT
            }),
            "floorplan" => floorplan::benchmark(self.size(self.floorplan_cells, 13, 6)),
            "uts" => uts::benchmark(self.size(self.uts_depth, uts::T1_DEPTH, 5)),
            other => unreachable!("clap accepts only known names, not {other}"),
        }
    }
}

/// How a run forks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Plain calls.
    Seq,
    /// `rayon::join` on a pool of the same number of workers.
    Rayon,
    /// `courier::par::join` with this inlining policy.
    Courier(Inlining),
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::Seq => f.write_str("seq"),
            Mode::Rayon => f.write_str("rayon"),
            Mode::Courier(inlining) => write!(f, "{inlining}"),
        }
    }
}

/// What one run gave: its kernel's seconds, its check, and the counters
/// read around the kernel (`adaptive` only).
struct Run {
    seconds: f64,
    check: Check,
    counters: Vec<(String, f64)>,
}

/// Runs `kernel` with `par` and times it (no counters yet).
fn timed(kernel: Kernel, par: Par) -> Run {
    let start = Instant::now();
    let check = kernel(par);
    Run {
        seconds: start.elapsed().as_secs_f64(),
        check,
        counters: Vec::new(),
    }
}

/// Runs `kernel` once in `mode` on `workers` workers.
fn run(
    cli: &Cli,
    mode: Mode,
    workers: usize,
    pool: &rayon::ThreadPool,
    kernel: Kernel,
) -> Result<Run, String> {
    match mode {
        Mode::Seq => Ok(timed(kernel, Par::Seq)),
        Mode::Rayon => pool.install(|| Ok(timed(kernel, Par::Rayon))),
        Mode::Courier(inlining) => {
            let config = cli
                .runtime
                .config(1)
                .localities(1)
                .transport(TransportKind::Inproc)
                .workers(workers)
                .inlining(inlining);
            let read_counters = inlining == Inlining::Adaptive;
            courier::launch(config, move |rt| async move {
                let mut set = if read_counters {
                    Some(rt.counters(COUNTERS)?)
                } else {
                    None
                };
                if let Some(set) = &mut set {
                    set.reset().await?;
                }
                let mut run = timed(kernel, Par::Courier);
                if let Some(set) = &mut set {
                    for v in set.evaluate(false).await? {
                        run.counters.push((v.name, v.value));
                    }
                }
                Ok::<Run, BoxError>(run)
            })
            .map_err(|e| format!("courier launch: {e}"))
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Medians of one benchmark: per mode, and per counter under `adaptive`.
struct Summary {
    name: &'static str,
    input: String,
    seconds: Vec<f64>,
    counters: BTreeMap<String, f64>,
}

/// Runs every mode of `b` `runs` times, interleaved; `None` if a run was
/// wrong (reported on stderr).
fn measure(
    cli: &Cli,
    b: &Benchmark,
    modes: &[Mode],
    runs: usize,
    workers: usize,
    pool: &rayon::ThreadPool,
) -> Option<Summary> {
    let mut seconds = vec![Vec::new(); modes.len()];
    let mut counters: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut reference: Option<u64> = None;
    let mut ok = true;
    for round in 0..runs {
        for (m, &mode) in modes.iter().enumerate() {
            let outcome = run(cli, mode, workers, pool, (b.prepare)()).and_then(|r| {
                let digest = (r.check)()?;
                let corrupt = cli.corrupt.as_deref() == Some(b.name)
                    && mode == Mode::Courier(Inlining::Adaptive);
                Ok((r.seconds, r.counters, digest ^ u64::from(corrupt)))
            });
            match outcome {
                Ok((secs, values, digest)) => {
                    seconds[m].push(secs);
                    for (name, value) in values {
                        counters.entry(name).or_default().push(value);
                    }
                    match reference {
                        None => reference = Some(digest),
                        Some(r) if r != digest => {
                            eprintln!(
                                "tasks: {} {mode} run {round}: result {digest:#018x} differs from the sequential {r:#018x}",
                                b.name
                            );
                            ok = false;
                        }
                        Some(_) => {}
                    }
                }
                Err(e) => {
                    eprintln!("tasks: {} {mode} run {round}: {e}", b.name);
                    ok = false;
                }
            }
        }
    }
    ok.then(|| Summary {
        name: b.name,
        input: b.input.clone(),
        seconds: seconds.into_iter().map(median).collect(),
        counters: counters.into_iter().map(|(k, v)| (k, median(v))).collect(),
    })
}

/// The value of the counter whose name ends with `suffix`.
fn counter(s: &Summary, suffix: &str) -> Option<f64> {
    s.counters
        .iter()
        .find(|(name, _)| name.ends_with(suffix))
        .map(|(_, v)| *v)
}

fn main() -> ExitCode {
    courier::report_to_stderr();
    let cli = Cli::parse();
    let runs = if cli.quick { 1 } else { cli.runs.max(1) };
    let workers = cli
        .runtime
        .workers
        .or_else(|| std::env::var("COURIER_WORKERS").ok()?.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(workers).build() {
        Ok(pool) => pool,
        Err(e) => {
            eprintln!("tasks: rayon pool: {e}");
            return ExitCode::FAILURE;
        }
    };
    let modes = [
        Mode::Seq,
        Mode::Rayon,
        Mode::Courier(Inlining::Never),
        Mode::Courier(Inlining::Depth(cli.depth)),
        Mode::Courier(Inlining::Adaptive),
    ];
    let names: Vec<&str> = if cli.bench.is_empty() {
        NAMES.to_vec()
    } else {
        NAMES
            .into_iter()
            .filter(|n| cli.bench.iter().any(|b| b == n))
            .collect()
    };
    println!(
        "tasks: {workers} workers, {runs} runs per mode (interleaved), depth cutoff {}",
        cli.depth
    );
    let mut summaries = Vec::new();
    let mut failed = false;
    for name in names {
        let b = cli.benchmark(name);
        match measure(&cli, &b, &modes, runs, workers, &pool) {
            Some(s) => {
                println!(
                    "verified {name}: {} runs of {} modes agree ({})",
                    runs,
                    modes.len(),
                    b.input
                );
                summaries.push(s);
            }
            None => {
                println!("FAILED {name}");
                failed = true;
            }
        }
    }
    println!();
    print!("{:<10} {:<34}", "benchmark", "input");
    for mode in &modes {
        print!(" {:>9}", mode.to_string());
    }
    println!(" {:>8} {:>8} {:>10}", "a/seq", "a/rayon", "a/min(n,d)");
    for s in &summaries {
        print!("{:<10} {:<34}", s.name, s.input);
        for secs in &s.seconds {
            print!(" {secs:>9.4}");
        }
        let [seq, rayon, never, depth, adaptive] = s.seconds[..] else {
            unreachable!("five modes");
        };
        println!(
            " {:>8.3} {:>8.3} {:>10.3}",
            adaptive / seq,
            adaptive / rayon,
            adaptive / never.min(depth)
        );
    }
    println!();
    println!("adaptive, from Courier's counters (medians; cf. seed 003 Table V):");
    println!(
        "{:<10} {:>10} {:>17} {:>12} {:>10} {:>12} {:>17}",
        "benchmark",
        "tasks",
        "task duration µs",
        "overhead µs",
        "forks",
        "inlined",
        "par overhead ns"
    );
    for s in &summaries {
        let show = |suffix: &str, scale: f64, digits: usize| {
            counter(s, suffix).map_or("n/a".to_owned(), |v| format!("{:.digits$}", v * scale))
        };
        println!(
            "{:<10} {:>10} {:>17} {:>12} {:>10} {:>12} {:>17}",
            s.name,
            show("/count/cumulative", 1.0, 0),
            show("/time/average", 1e-3, 3),
            show("/time/average-overhead", 1e-3, 3),
            show("/count/forks", 1.0, 0),
            show("/count/inlined", 1.0, 0),
            show("/time/task-overhead", 1.0, 0),
        );
    }
    if failed {
        eprintln!("tasks: some results were wrong (see above)");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
