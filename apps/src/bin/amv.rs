//! Seed 002's two segmented operations (Zhao, Balaji, Gropp, Thakur,
//! "Optimization Strategies for MPI-Interoperable Active Messages",
//! section V) over `Runtime::call_segments`: plain AMs, whose outputs come
//! back whole, against vector AMs (AMV), whose outputs come back packed
//! below a threshold.
//!
//! ```text
//! cargo build --release -p courier-apps --bin amv
//! amv --op search --mode all --percent 30 --runs 5      # Fig. 9, one point
//! amv --op absval --mode amv08 --percent 90 --calls 500
//! amv --op search --latency --segments 400 --repeat 50  # Fig. 5, one point
//! amv --op absval --latency --segments 1000 --credit-window 8192
//! ```
//!
//! - `--op search` (remote search, the genome-assembly case): every
//!   locality makes the same dataset of `--dataset` sequences of 20
//!   characters over `ACGT` from `--seed`, sorted. Each segment is one
//!   query of 20 characters; the handler on locality 1 finds the
//!   sequences that share the query's first [`PREFIX`] characters (a
//!   binary search of the sorted dataset) and returns the first few of
//!   them, at most [`SEARCH_MAX_OUT`] (10) sequences per segment.
//! - `--op absval` (absolute values): each segment holds 100 `i32`; the
//!   handler returns the absolute values of the segment's first integers,
//!   at most [`ABSVAL_MAX_OUT`] (100) per segment.
//!
//! `--percent P` sets how much of the maximum output the handlers produce
//! (the x axis of the paper's Fig. 9): segment `g` of a call gets
//! `floor((g + 1)·P·max/100) − floor(g·P·max/100)` items, P % of the
//! maximum on average and never fewer than one. `--mode` picks how outputs
//! travel: `am` never packs (`pack_below(0.0)`, the whole output buffer,
//! MPIX_AM), `amv1` always packs (AMV(1.0)), `amv08` packs below 80 % of
//! the slots (AMV(0.8), Courier's default); `all` runs the three
//! interleaved, round by round, so they are compared side by side.
//!
//! A throughput run has locality 0 issue `--calls` segmented calls of
//! `--segments` segments to locality 1, at most `--in-flight` outstanding
//! (it awaits the oldest when that many are out), and times them from the
//! first call to the last result. Every result is then checked against the
//! origin's own recomputation from the same dataset (and, for a search,
//! every returned sequence is looked up in the dataset). The bytes that
//! came back are the run's difference of
//! `/segments{locality#0/total}/count/bytes-packed` + `bytes-whole`
//! (`bytes_back`: the outputs' encodings) and of
//! `/serialize{locality#0/total}/count/received` (`frame_bytes`: whole
//! frames received by locality 0). `--latency` times one call at a time
//! instead (`--repeat` calls per run, the median), for the paper's Fig. 5;
//! runtime flags such as `--credit-window` and this program's
//! `--unit-bytes` set the buffer and pipeline unit sizes.
//!
//! Prints one `run N: op=.. mode=.. ...` line per run, a median line per
//! mode, and exits non-zero when a result failed verification.

use std::collections::VecDeque;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use courier::{
    BoxError, Runtime, RuntimeArgs, SegmentOptions, SegmentOutput, SegmentResults, SegmentUnit,
    SegmentsFuture,
};
use courier_apps::kernel::{SplitMix64, exit_code, median};

/// Characters of a sequence (a segment of a search, and each of its
/// output items).
const SEQ_LEN: usize = 20;

/// A sequence of [`SEQ_LEN`] characters over `ACGT`.
type Seq = [u8; SEQ_LEN];

/// Characters a dataset sequence shares with a query to match it.
const PREFIX: usize = 4;

/// Most output sequences per search segment (the paper's 10).
const SEARCH_MAX_OUT: u32 = 10;

/// Integers per absolute-value segment, and most outputs per segment.
const ABSVAL_MAX_OUT: u32 = 100;

/// Untimed calls of each mode before the first run.
const WARM_UP_CALLS: u32 = 20;

/// The four bases.
const BASES: [u8; 4] = *b"ACGT";

/// Which operation the calls run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Op {
    /// Remote search of 20-character queries in a dataset.
    Search,
    /// Absolute values of 100 integers per segment.
    Absval,
}

impl Op {
    /// The name in output lines.
    fn name(self) -> &'static str {
        match self {
            Op::Search => "search",
            Op::Absval => "absval",
        }
    }
}

/// How outputs travel back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Plain AM: never packed, the whole output buffer (`pack_below(0.0)`).
    Am,
    /// AMV(1.0): always packed.
    Amv1,
    /// AMV(0.8): packed below 80 % of the slots.
    Amv08,
    /// The three interleaved, run by run.
    All,
}

impl Mode {
    /// The threshold this mode asks for (`All` has none).
    fn pack_below(self) -> f32 {
        match self {
            Mode::Am | Mode::All => 0.0,
            Mode::Amv1 => 1.0,
            Mode::Amv08 => 0.8,
        }
    }

    /// The name in output lines.
    fn name(self) -> &'static str {
        match self {
            Mode::Am => "am",
            Mode::Amv1 => "amv1",
            Mode::Amv08 => "amv08",
            Mode::All => "all",
        }
    }

    /// The modes a run of `self` compares.
    fn expand(self) -> Vec<Mode> {
        match self {
            Mode::All => vec![Mode::Am, Mode::Amv1, Mode::Amv08],
            m => vec![m],
        }
    }
}

/// Seed 002's remote search and absolute values, AM against AMV.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// The operation.
    #[arg(long, value_enum, default_value_t = Op::Search)]
    op: Op,
    /// How outputs travel back (all: the three side by side).
    #[arg(long, value_enum, default_value_t = Mode::All)]
    mode: Mode,
    /// Output produced, in percent of the maximum (10 to 100).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(10..=100))]
    percent: u32,
    /// Segmented calls per throughput run.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    calls: u32,
    /// Segments per call.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    segments: u32,
    /// Calls outstanding at most.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    in_flight: u32,
    /// Runs per mode.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Sequences in the search dataset.
    #[arg(long, default_value_t = 65_536, value_parser = clap::value_parser!(u32).range(1..))]
    dataset: u32,
    /// Seed of the dataset and the inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Time one call at a time (Fig. 5) instead of throughput.
    #[arg(long)]
    latency: bool,
    /// Calls timed per latency run (their median is the run's latency).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// Input bytes per pipeline unit [default: a quarter of the credit window].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    unit_bytes: Option<u64>,
}

/// What every locality knows: the output rule and the search dataset.
#[derive(Debug)]
struct Setup {
    /// Output produced, in percent of the maximum.
    percent: u32,
    /// The search dataset, sorted (empty for `absval`).
    dataset: Vec<Seq>,
}

impl Setup {
    /// The setup of an `op` run at `percent` (with a search dataset of
    /// `dataset` sequences made from `seed`): the same on every locality.
    fn new(op: Op, percent: u32, seed: u64, dataset: u32) -> Self {
        let dataset = match op {
            Op::Search => make_dataset(seed, dataset),
            Op::Absval => Vec::new(),
        };
        Setup { percent, dataset }
    }

    /// The sequences of the dataset that match `query`: those sharing its
    /// first [`PREFIX`] characters, in sorted order.
    fn matches(&self, query: &Seq) -> &[Seq] {
        let prefix = &query[..PREFIX];
        let start = self.dataset.partition_point(|s| &s[..PREFIX] < prefix);
        let len = self.dataset[start..].partition_point(|s| &s[..PREFIX] == prefix);
        &self.dataset[start..start + len]
    }

    /// The search output of `query` at global segment `g`.
    fn search(&self, g: u64, query: &Seq) -> &[Seq] {
        let all = self.matches(query);
        let k = items(g, self.percent, SEARCH_MAX_OUT) as usize;
        &all[..k.min(all.len())]
    }
}

/// Items segment `g` produces at `percent` of `max_out`: P % of the
/// maximum on average over consecutive segments, at least one for P ≥ 10.
fn items(g: u64, percent: u32, max_out: u32) -> u32 {
    let per = u64::from(percent) * u64::from(max_out);
    (((g + 1) * per) / 100 - (g * per) / 100) as u32
}

/// A random sequence over `ACGT`.
fn random_seq(rng: &mut SplitMix64) -> Seq {
    let mut seq = [0u8; SEQ_LEN];
    let mut bits = rng.next_u64();
    for c in &mut seq {
        *c = BASES[(bits & 3) as usize];
        bits >>= 2;
    }
    seq
}

/// The dataset of `seed`: `n` random sequences, sorted.
fn make_dataset(seed: u64, n: u32) -> Vec<Seq> {
    let mut rng = SplitMix64::for_locality(seed, 1);
    let mut data: Vec<Seq> = (0..n).map(|_| random_seq(&mut rng)).collect();
    data.sort_unstable();
    data
}

/// Remote search: for each query, the dataset sequences that match it,
/// as many as the output rule asks for.
#[courier::action]
fn amv_search(unit: SegmentUnit<Seq>) -> SegmentOutput<Seq> {
    courier::with_state(|setup: &Setup| {
        let mut out = unit.output();
        for (i, query) in unit.segments().iter().enumerate() {
            for seq in setup.search(unit.first() + i as u64, query) {
                if out.push(i, *seq).is_err() {
                    break;
                }
            }
        }
        out
    })
}

/// Absolute values: for each segment, the absolute values of its first
/// integers, as many as the output rule asks for.
#[courier::action]
fn amv_absval(unit: SegmentUnit<Vec<i32>>) -> SegmentOutput<i32> {
    courier::with_state(|setup: &Setup| {
        let mut out = unit.output();
        for (i, segment) in unit.segments().iter().enumerate() {
            let k = items(unit.first() + i as u64, setup.percent, ABSVAL_MAX_OUT) as usize;
            for x in segment.iter().take(k) {
                if out.push(i, x.wrapping_abs()).is_err() {
                    break;
                }
            }
        }
        out
    })
}

/// One of the two operations, from the origin's side: its inputs, its
/// call, and the check of its results.
trait Workload {
    /// A segment.
    type Segment: serde::Serialize;
    /// An output item.
    type Item: serde::de::DeserializeOwned + Default + Clone + Send + 'static;

    /// Most items per segment.
    const MAX_OUT: u32;

    /// The segments of a call.
    fn inputs(&self, rng: &mut SplitMix64, segments: u32) -> Vec<Self::Segment>;

    /// Starts the call.
    fn call(
        rt: &Runtime,
        segments: &[Self::Segment],
        options: SegmentOptions,
    ) -> SegmentsFuture<Self::Item>;

    /// Segments of `results` that are not what `inputs` should give.
    fn wrong(&self, inputs: &[Self::Segment], results: &SegmentResults<Self::Item>) -> u64;
}

/// The remote search, with the origin's copy of the dataset.
#[derive(Debug)]
struct Search<'a>(&'a Setup);

impl Workload for Search<'_> {
    type Segment = Seq;
    type Item = Seq;
    const MAX_OUT: u32 = SEARCH_MAX_OUT;

    fn inputs(&self, rng: &mut SplitMix64, segments: u32) -> Vec<Seq> {
        (0..segments).map(|_| random_seq(rng)).collect()
    }

    fn call(rt: &Runtime, segments: &[Seq], options: SegmentOptions) -> SegmentsFuture<Seq> {
        rt.call_segments(rt.locality(1), amv_search, segments, options)
    }

    fn wrong(&self, inputs: &[Seq], results: &SegmentResults<Seq>) -> u64 {
        if results.len() != inputs.len() {
            return inputs.len() as u64;
        }
        let setup = self.0;
        let mut wrong = 0;
        for (g, query) in inputs.iter().enumerate() {
            let got = results.segment(g);
            // Each sequence is in the dataset and matches the query...
            let genuine = got
                .iter()
                .all(|s| s[..PREFIX] == query[..PREFIX] && setup.dataset.binary_search(s).is_ok());
            // ...and they are the ones the rule picks.
            if !genuine || got != setup.search(g as u64, query) {
                wrong += 1;
            }
        }
        wrong
    }
}

/// The absolute values.
#[derive(Debug)]
struct Absval(u32);

impl Workload for Absval {
    type Segment = Vec<i32>;
    type Item = i32;
    const MAX_OUT: u32 = ABSVAL_MAX_OUT;

    fn inputs(&self, rng: &mut SplitMix64, segments: u32) -> Vec<Vec<i32>> {
        (0..segments)
            .map(|_| {
                (0..ABSVAL_MAX_OUT)
                    // Within ±10⁹: no i32::MIN, whose absolute value overflows.
                    .map(|_| rng.below(2_000_000_001) as i32 - 1_000_000_000)
                    .collect()
            })
            .collect()
    }

    fn call(rt: &Runtime, segments: &[Vec<i32>], options: SegmentOptions) -> SegmentsFuture<i32> {
        rt.call_segments(rt.locality(1), amv_absval, segments, options)
    }

    fn wrong(&self, inputs: &[Vec<i32>], results: &SegmentResults<i32>) -> u64 {
        if results.len() != inputs.len() {
            return inputs.len() as u64;
        }
        let mut wrong = 0;
        for (g, segment) in inputs.iter().enumerate() {
            let k = items(g as u64, self.0, ABSVAL_MAX_OUT) as usize;
            let got = results.segment(g);
            let right = got.len() == k
                && got
                    .iter()
                    .zip(segment)
                    .all(|(&a, &x)| a == x.wrapping_abs());
            if !right {
                wrong += 1;
            }
        }
        wrong
    }
}

/// Counters of locality 0 that say what came back.
const TRAFFIC: [&str; 5] = [
    "/segments{locality#0/total}/count/bytes-packed",
    "/segments{locality#0/total}/count/bytes-whole",
    "/serialize{locality#0/total}/count/received",
    "/segments{locality#0/total}/count/units-packed",
    "/segments{locality#0/total}/count/units-whole",
];

/// What came back so far: output bytes, frame bytes, units packed and
/// whole.
#[derive(Debug, Clone, Copy, Default)]
struct Traffic {
    output_bytes: f64,
    frame_bytes: f64,
    packed: f64,
    whole: f64,
}

impl Traffic {
    /// Reads the counters now.
    async fn now(rt: &Runtime) -> Result<Traffic, BoxError> {
        let values = rt.counters(TRAFFIC)?.evaluate(false).await?;
        let v: Vec<f64> = values.iter().map(|c| c.value).collect();
        if v.len() != TRAFFIC.len() {
            return Err(
                format!("{} counter values for {} counters", v.len(), TRAFFIC.len()).into(),
            );
        }
        Ok(Traffic {
            output_bytes: v[0] + v[1],
            frame_bytes: v[2],
            packed: v[3],
            whole: v[4],
        })
    }

    /// What came back since `before`.
    fn since(self, before: Traffic) -> Traffic {
        Traffic {
            output_bytes: self.output_bytes - before.output_bytes,
            frame_bytes: self.frame_bytes - before.frame_bytes,
            packed: self.packed - before.packed,
            whole: self.whole - before.whole,
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, Copy)]
struct Measured {
    /// Seconds of the timed calls (throughput), or the median seconds of
    /// one call (latency).
    seconds: f64,
    /// Output items received over output slots.
    fill: f64,
    /// What came back.
    traffic: Traffic,
    /// Segments whose output was wrong.
    wrong: u64,
}

/// The options of `mode`.
fn options<W: Workload>(cli: &Cli, mode: Mode) -> SegmentOptions {
    let options = SegmentOptions::new(W::MAX_OUT).pack_below(mode.pack_below());
    match cli.unit_bytes {
        Some(b) => options.unit_bytes(usize::try_from(b).unwrap_or(usize::MAX)),
        None => options,
    }
}

/// Items over slots of `results`.
fn fill<U>(results: &[SegmentResults<U>], max_out: u32) -> f64 {
    let items: u64 = results
        .iter()
        .flat_map(|r| r.counts())
        .map(|&c| u64::from(c))
        .sum();
    let slots: u64 = results
        .iter()
        .map(|r| r.len() as u64 * u64::from(max_out))
        .sum();
    items as f64 / slots.max(1) as f64
}

/// One throughput run: `--calls` calls, `--in-flight` outstanding.
async fn throughput<W: Workload>(
    rt: &Runtime,
    w: &W,
    cli: &Cli,
    mode: Mode,
    seed: u64,
) -> Result<Measured, BoxError> {
    let mut rng = SplitMix64::for_locality(seed, 0);
    let inputs: Vec<Vec<W::Segment>> = (0..cli.calls)
        .map(|_| w.inputs(&mut rng, cli.segments))
        .collect();
    let options = options::<W>(cli, mode);
    let in_flight = cli.in_flight as usize;
    let before = Traffic::now(rt).await?;
    let start = Instant::now();
    let mut out = VecDeque::with_capacity(in_flight);
    let mut results = Vec::with_capacity(inputs.len());
    for segments in &inputs {
        if out.len() == in_flight
            && let Some(oldest) = out.pop_front()
        {
            results.push(oldest.await?);
        }
        out.push_back(W::call(rt, segments, options));
    }
    while let Some(oldest) = out.pop_front() {
        results.push(oldest.await?);
    }
    let seconds = start.elapsed().as_secs_f64();
    let traffic = Traffic::now(rt).await?.since(before);
    let wrong = inputs
        .iter()
        .zip(&results)
        .map(|(i, r)| w.wrong(i, r))
        .sum();
    Ok(Measured {
        seconds,
        fill: fill(&results, W::MAX_OUT),
        traffic,
        wrong,
    })
}

/// One latency run: `--repeat` single calls one after the other (after
/// one untimed), the median of their times.
async fn latency<W: Workload>(
    rt: &Runtime,
    w: &W,
    cli: &Cli,
    mode: Mode,
    seed: u64,
) -> Result<Measured, BoxError> {
    let mut rng = SplitMix64::for_locality(seed, 0);
    let segments = w.inputs(&mut rng, cli.segments);
    let options = options::<W>(cli, mode);
    let warm = W::call(rt, &segments, options).await?;
    let mut wrong = w.wrong(&segments, &warm);
    let before = Traffic::now(rt).await?;
    let mut times = Vec::with_capacity(cli.repeat as usize);
    let mut results = Vec::with_capacity(cli.repeat as usize);
    for _ in 0..cli.repeat {
        let start = Instant::now();
        let r = W::call(rt, &segments, options).await?;
        times.push(start.elapsed().as_secs_f64());
        results.push(r);
    }
    let traffic = Traffic::now(rt).await?.since(before);
    wrong += results.iter().map(|r| w.wrong(&segments, r)).sum::<u64>();
    Ok(Measured {
        seconds: median(&times),
        fill: fill(&results, W::MAX_OUT),
        traffic,
        wrong,
    })
}

/// Every run of every mode, printed; returns the wrong segments.
async fn bench<W: Workload>(rt: &Runtime, w: &W, cli: &Cli) -> Result<u64, BoxError> {
    let modes = cli.mode.expand();
    let op = cli.op.name();
    let calls_per_run = if cli.latency { cli.repeat } else { cli.calls };
    let mut measured: Vec<Vec<Measured>> = vec![Vec::new(); modes.len()];
    // Warm up every mode (connections, allocations) untimed, but checked.
    let mut wrong = 0;
    for &mode in &modes {
        let mut rng = SplitMix64::for_locality(cli.seed, 2);
        let segments = w.inputs(&mut rng, cli.segments);
        for _ in 0..WARM_UP_CALLS {
            let r = W::call(rt, &segments, options::<W>(cli, mode)).await?;
            wrong += w.wrong(&segments, &r);
        }
    }
    let mut n = 0;
    for round in 0..cli.runs {
        for (m, &mode) in modes.iter().enumerate() {
            n += 1;
            // The same inputs for every mode of a round.
            let seed = cli.seed.wrapping_add(u64::from(round) + 1);
            let r = if cli.latency {
                latency(rt, w, cli, mode, seed).await?
            } else {
                throughput(rt, w, cli, mode, seed).await?
            };
            let t = r.traffic;
            let per_call = t.output_bytes / f64::from(calls_per_run);
            if cli.latency {
                println!(
                    "run {n}: op={op} mode={} percent={} segments={} latency_us={:.1} \
                     fill={:.3} bytes_per_call={per_call:.0} frame_bytes={:.0} \
                     units_packed={:.0} units_whole={:.0} wrong={}",
                    mode.name(),
                    cli.percent,
                    cli.segments,
                    r.seconds * 1e6,
                    r.fill,
                    t.frame_bytes,
                    t.packed,
                    t.whole,
                    r.wrong
                );
            } else {
                let calls = f64::from(cli.calls);
                println!(
                    "run {n}: op={op} mode={} percent={} seconds={:.4} calls_per_s={:.1} \
                     segments_per_s={:.0} fill={:.3} bytes_back={:.0} bytes_per_call={per_call:.0} \
                     frame_bytes={:.0} units_packed={:.0} units_whole={:.0} wrong={}",
                    mode.name(),
                    cli.percent,
                    r.seconds,
                    calls / r.seconds,
                    calls * f64::from(cli.segments) / r.seconds,
                    r.fill,
                    t.output_bytes,
                    t.frame_bytes,
                    t.packed,
                    t.whole,
                    r.wrong
                );
            }
            measured[m].push(r);
        }
    }
    if wrong > 0 {
        println!("amv: {wrong} segments wrong in the warm-up calls");
    }
    for (mode, runs) in modes.iter().zip(&measured) {
        let pick = |f: &dyn Fn(&Measured) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        let w: u64 = runs.iter().map(|r| r.wrong).sum();
        wrong += w;
        let per_call = pick(&|r| r.traffic.output_bytes) / f64::from(calls_per_run);
        let frames_per_call = pick(&|r| r.traffic.frame_bytes) / f64::from(calls_per_run);
        if cli.latency {
            println!(
                "amv: op={op} mode={} percent={} segments={} median latency_us={:.1} \
                 bytes_per_call={per_call:.0} frame_bytes_per_call={frames_per_call:.0} \
                 over {} runs, {w} wrong",
                mode.name(),
                cli.percent,
                cli.segments,
                pick(&|r| r.seconds) * 1e6,
                cli.runs
            );
        } else {
            let calls = f64::from(cli.calls);
            println!(
                "amv: op={op} mode={} percent={} median calls_per_s={:.1} segments_per_s={:.0} \
                 bytes_back={:.0} bytes_per_call={per_call:.0} frame_bytes_per_call={frames_per_call:.0} \
                 over {} runs, {w} wrong",
                mode.name(),
                cli.percent,
                pick(&|r| calls / r.seconds),
                pick(&|r| calls * f64::from(cli.segments) / r.seconds),
                pick(&|r| r.traffic.output_bytes),
                cli.runs
            );
        }
    }
    Ok(wrong)
}

fn main() -> ExitCode {
    courier::report_to_stderr();
    let cli = Cli::parse();
    let (op, percent, seed, dataset) = (cli.op, cli.percent, cli.seed, cli.dataset);
    let config = cli
        .runtime
        .config(2)
        .state(move |_, _| Setup::new(op, percent, seed, dataset));
    let transport = config.transport_kind();
    let result = courier::launch(config, move |rt| async move {
        if rt.num_localities() < 2 {
            return Err("amv needs at least 2 localities (locality 1 serves the calls)".into());
        }
        let what = if cli.latency {
            format!("latency of one call, {} calls per run", cli.repeat)
        } else {
            format!(
                "throughput, {} calls per run, {} in flight",
                cli.calls, cli.in_flight
            )
        };
        println!(
            "amv: {} localities over {transport:?}, op {}, mode {}, {} segments per call, \
             {} % of the maximum output, {what}, {} runs",
            rt.num_localities(),
            cli.op.name(),
            cli.mode.name(),
            cli.segments,
            cli.percent,
            cli.runs
        );
        match cli.op {
            Op::Search => {
                let setup = rt.state::<Setup>();
                let w = Search(setup);
                bench(&rt, &w, &cli).await
            }
            Op::Absval => bench(&rt, &Absval(cli.percent), &cli).await,
        }
    });
    exit_code("amv", result)
}
