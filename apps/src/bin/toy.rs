//! The toy application of Wagle et al. 2018 (Listing 1): locality 0 calls `get_cplx`
//! on locality 1 and checks that each result is exactly (13.3, −23.8);
//! `--phases` times, one line per phase with the network overhead n_oh and
//! the task overhead of every locality.
//!
//! How a phase calls (`--workload`, cycled over the phases), and its figure:
//!
//! | workload | calls | figure (better) |
//! |---|---|---|
//! | `batch` (default) | `--parcels` calls, then every result awaited in order | `calls_per_s` (higher) |
//! | `steady` | one call every 1/`--rate` s for `--phase-ms`, at most `--window` in flight | `latency_us` (lower) |
//! | `bursty` | `--burst` calls at once every `--burst-period-us` for `--phase-ms` | `latency_us` (lower) |
//! | `sparse` | one call every `--sparse-gap-us` for `--phase-ms`, at most `--window` in flight | `latency_us` (lower) |
//! | `awaits` | one call at a time, each awaited before the next, for `--phase-ms` | `latency_us` (lower) |
//!
//! `latency_us` is the mean time from issuing a call to its result (taken
//! by a task that awaits that call alone, so as soon as the result comes);
//! `p50_us` and `p99_us` are its median and 99th percentile.
//! Paced calls keep to their schedule: after a late wake-up the calls due
//! meanwhile leave at once.
//!
//! ```text
//! cargo run --release -p courier-apps --bin toy -- --localities 2
//! toy --coalescing off                        # one message per call
//! toy --num-parcels 2048 --interval-us 2000   # the count policy's parameters
//! toy --phase-num-parcels 128,16,4,1          # Wagle et al. 2018 Fig. 9: change them per phase
//! toy --workload bursty,steady,sparse,awaits --coalescing adaptive --print-adapt
//! ```
//!
//! Each phase line is `phase N: key=value ...`, which `courier sweep` reads:
//! `workload`, `seconds`, `calls`, `calls_per_s`, `latency_us`, `p50_us`,
//! `p99_us` (all but `batch`), `wrong`, the setting in force at the end of the phase (for
//! `adaptive`, the count policy its tuner chose), then `decisions` (the
//! most decisions of adaptive coalescing any locality made during the
//! phase, `decisions@L` each), `n_oh` and the task overheads.

use std::collections::VecDeque;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use courier::{CallError, CallFuture, JoinHandle, LocalityId, Runtime, RuntimeArgs};
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

/// How a phase calls; see the table in the crate docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Workload {
    /// Every call issued, then every result awaited in order.
    Batch,
    /// One call at a time at a steady rate, results awaited as they come.
    Steady,
    /// Bursts of calls issued at once, a pause between them.
    Bursty,
    /// One call now and then, each awaited later.
    Sparse,
    /// One call at a time, each awaited before the next.
    Awaits,
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = clap::ValueEnum::to_possible_value(self).expect("no variant is skipped");
        f.write_str(name.get_name())
    }
}

/// Toy application: many tiny remote calls from locality 0 to locality 1.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    runtime: RuntimeArgs,
    #[command(flatten)]
    coalescing: CoalescingArgs,
    /// How each phase calls, cycled over the phases.
    #[arg(long, value_delimiter = ',', default_value = "batch")]
    workload: Vec<Workload>,
    /// Calls per `batch` phase.
    #[arg(long, default_value_t = 1_000_000)]
    parcels: u64,
    /// Number of phases.
    #[arg(long, default_value_t = 4)]
    phases: u32,
    /// Length of a phase of every workload but `batch`, in ms.
    #[arg(long, default_value_t = 300)]
    phase_ms: u64,
    /// Calls a second of `steady` (the default: 15,000 calls in a 300 ms phase).
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..))]
    rate: u64,
    /// Calls in flight at most (`steady`, `sparse`): the oldest is awaited
    /// before one more leaves.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    window: u64,
    /// Calls a burst of `bursty`.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
    burst: u64,
    /// Time from one burst to the next in µs (`bursty`).
    #[arg(long, default_value_t = 5000)]
    burst_period_us: u64,
    /// Time from one call to the next in µs (`sparse`).
    #[arg(long, default_value_t = 150)]
    sparse_gap_us: u64,
}

/// The results of a phase's calls.
#[derive(Debug, Default)]
struct Tally {
    calls: u64,
    wrong: u64,
    /// The latency of each timed call (all but `batch`'s).
    latencies: Vec<Duration>,
}

impl Tally {
    /// A tally with room for `calls` latencies up front (at most 2²⁴), so
    /// that a timing loop does not stop to grow it.
    fn with_room(calls: u128) -> Self {
        Tally {
            latencies: Vec::with_capacity(usize::try_from(calls).unwrap_or(0).min(1 << 24)),
            ..Tally::default()
        }
    }

    /// Counts a call's result and, if it was timed, its latency.
    fn add(&mut self, value: Complex64, latency: Option<Duration>) {
        self.calls += 1;
        self.wrong += u64::from(value != EXPECTED);
        self.latencies.extend(latency);
    }

    /// ` latency_us=.. p50_us=.. p99_us=..`: the mean, median and 99th
    /// percentile of the timed calls' latencies in µs.
    fn latency_fields(&mut self) -> String {
        let n = self.latencies.len();
        if n == 0 {
            return String::new();
        }
        self.latencies.sort_unstable();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let mean = self.latencies.iter().map(|&d| us(d)).sum::<f64>() / n as f64;
        let at = |q: f64| us(self.latencies[((n - 1) as f64 * q).round() as usize]);
        format!(
            " latency_us={mean:.2} p50_us={:.2} p99_us={:.2}",
            at(0.5),
            at(0.99)
        )
    }
}

/// A call and its latency, taken by a task that awaits it alone.
type Timed = JoinHandle<Result<(Complex64, Duration), CallError>>;

/// Issues a call of `get_cplx` on `target` and times it.
fn timed_call(rt: &Runtime, target: LocalityId) -> Timed {
    let issued = Instant::now();
    let call = rt.call(target, get_cplx, ());
    rt.spawn(async move { Ok((call.await?, issued.elapsed())) })
}

/// `batch`: issues `parcels` calls, then awaits every result in order.
async fn batch(rt: &Runtime, target: LocalityId, parcels: u64) -> Result<Tally, CallError> {
    let calls: Vec<CallFuture<Complex64>> = (0..parcels)
        .map(|_| rt.call(target, get_cplx, ()))
        .collect();
    let mut tally = Tally::default();
    for call in calls {
        tally.add(call.await?, None);
    }
    Ok(tally)
}

/// How a `steady`, `bursty` or `sparse` phase calls.
#[derive(Debug, Clone, Copy)]
struct Pacing {
    /// Groups of calls in the phase.
    groups: u32,
    /// Calls issued at once.
    group: u64,
    /// Time from the start of one group to the next.
    gap: Duration,
    /// Calls in flight at most: the oldest is awaited before one more leaves.
    window: u64,
}

/// Issues `pacing.group` calls at once every `pacing.gap` from the start,
/// `pacing.groups` times; after a late wake-up the groups due meanwhile
/// leave at once.
async fn paced(rt: &Runtime, target: LocalityId, pacing: Pacing) -> Result<Tally, CallError> {
    let start = Instant::now();
    let mut in_flight: VecDeque<Timed> = VecDeque::new();
    let mut tally = Tally::with_room(u128::from(pacing.groups) * u128::from(pacing.group));
    for g in 0..pacing.groups {
        let due = start + pacing.gap * g;
        let now = Instant::now();
        if due > now {
            rt.sleep(due - now).await;
        }
        for _ in 0..pacing.group {
            if in_flight.len() as u64 >= pacing.window {
                let (value, latency) = in_flight.pop_front().expect("window ≥ 1").await?;
                tally.add(value, Some(latency));
            }
            in_flight.push_back(timed_call(rt, target));
        }
    }
    for call in in_flight {
        let (value, latency) = call.await?;
        tally.add(value, Some(latency));
    }
    Ok(tally)
}

/// `awaits`: one call at a time for `length`.
async fn awaits(rt: &Runtime, target: LocalityId, length: Duration) -> Result<Tally, CallError> {
    let start = Instant::now();
    // Room for a call every 2 µs (a round trip takes ten times that).
    let mut tally = Tally::with_room(length.as_micros() / 2);
    while start.elapsed() < length {
        let issued = Instant::now();
        let value = rt.call(target, get_cplx, ()).await?;
        tally.add(value, Some(issued.elapsed()));
    }
    Ok(tally)
}

impl Cli {
    /// How a phase of `workload` is paced; `None` for `batch` and `awaits`.
    fn pacing(&self, workload: Workload) -> Option<Pacing> {
        let (gap, group, window) = match workload {
            Workload::Batch | Workload::Awaits => return None,
            Workload::Steady => (
                Duration::from_nanos(1_000_000_000 / self.rate),
                1,
                self.window,
            ),
            Workload::Sparse => (Duration::from_micros(self.sparse_gap_us), 1, self.window),
            Workload::Bursty => (
                Duration::from_micros(self.burst_period_us),
                self.burst,
                self.burst,
            ),
        };
        // As many groups as gaps fit in the phase, at least one.
        let groups = self.phase_ms as u128 * 1_000_000 / gap.as_nanos().max(1);
        Some(Pacing {
            groups: u32::try_from(groups.max(1)).unwrap_or(u32::MAX),
            group,
            gap,
            window,
        })
    }

    /// Runs one phase of `workload`.
    async fn phase(&self, rt: &Runtime, workload: Workload) -> Result<Tally, CallError> {
        let target = rt.locality(rt.num_localities().min(2) - 1);
        if let Some(pacing) = self.pacing(workload) {
            return paced(rt, target, pacing).await;
        }
        match workload {
            Workload::Awaits => awaits(rt, target, Duration::from_millis(self.phase_ms)).await,
            _ => batch(rt, target, self.parcels).await,
        }
    }
}

fn main() -> ExitCode {
    courier::report_to_stderr();
    let cli = Cli::parse();
    let config = cli.runtime.config(2);
    let transport = config.transport_kind();
    let result = courier::launch(config, move |rt| async move {
        let kinds: Vec<String> = cli.workload.iter().map(Workload::to_string).collect();
        println!(
            "toy: {} localities over {transport:?}, {} phases of get_cplx calls ({}; batch: {} calls, others: {} ms)",
            rt.num_localities(),
            cli.phases,
            kinds.join(","),
            cli.parcels,
            cli.phase_ms,
        );
        // Per phase, as Wagle et al. 2018 measures: network overhead (Eq. 4) and task
        // overhead (Eq. 2) on every locality, and adaptive coalescing's decisions.
        let mut counters = PhaseCounters::new(&rt, get_cplx)?;
        let mut wrong_total = 0;
        for p in 1..=cli.phases {
            if let Some(setting) = cli.coalescing.setting(&cli.runtime, p) {
                rt.set_coalescing_everywhere(get_cplx, setting).await?;
            }
            let workload = cli.workload[(p as usize - 1) % cli.workload.len()];
            counters.start().await?;
            let start = Instant::now();
            let mut tally = cli.phase(&rt, workload).await?;
            let secs = start.elapsed().as_secs_f64();
            // What is in force now, from the flags above, the configuration or the tuner.
            let setting = rt.coalescing(get_cplx, rt.locality(1 % rt.num_localities()));
            let latency = match workload {
                Workload::Batch => String::new(),
                _ => tally.latency_fields(),
            };
            println!(
                "phase {p}: workload={workload} seconds={secs:.4} calls={} calls_per_s={:.0}{latency} wrong={} {} {}",
                tally.calls,
                tally.calls as f64 / secs,
                tally.wrong,
                describe(setting),
                counters.finish().await?
            );
            wrong_total += tally.wrong;
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
