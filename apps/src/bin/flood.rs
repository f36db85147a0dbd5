//! A flood: senders post tiny calls as fast as they can to handlers that
//! take `--handler-us` each, far more than the receivers can run. Without
//! flow control the receivers' queues (and the senders', uncoalesced)
//! grow without bound; with it, every process's memory stays within what
//! the credit window allows (`Config::credit_window`).
//!
//! ```text
//! flood --localities 2 --posts 100000000 --handler-us 1
//! flood --localities 2 --posts 2000000 --handler-us 20 --coalescing off
//! flood --localities 4 --posts 10000000 --mutual --callback
//! ```
//!
//! - `--mutual`: every locality floods every other (not only locality 0).
//! - `--callback`: every handler posts a call back to its sender (cyclic
//!   traffic: a handler that calls its caller).
//!
//! Verifies that every call ran exactly once (counts per sender, summed
//! over the job, against what was posted) and prints each locality's peak
//! resident memory (Linux `VmHWM`). Locality 0 reports progress every two
//! seconds on standard error.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use courier::{BoxError, LocalityId, Runtime, RuntimeArgs};
use courier_apps::kernel::exit_code;

/// What a locality counted.
#[derive(Default)]
struct Counts {
    /// Calls of `flood_hit` run here.
    hits: AtomicU64,
    /// Calls of `flood_back` run here.
    backs: AtomicU64,
}

/// Busy for `ns` nanoseconds, like a handler with real work.
fn spin(ns: u32) {
    if ns == 0 {
        return;
    }
    let start = Instant::now();
    let ns = Duration::from_nanos(u64::from(ns));
    while start.elapsed() < ns {
        std::hint::spin_loop();
    }
}

/// One call of the flood: `ns` of work, counted; with `back`, a call back
/// to `from`.
#[courier::action]
fn flood_hit(ns: u32, back: bool, from: u32) {
    spin(ns);
    courier::with_state(|c: &Counts| c.hits.fetch_add(1, Ordering::Relaxed));
    if back {
        let rt = courier::current();
        // The job's end fails posts; nothing else can.
        let _ = rt.post(LocalityId::new(from), flood_back, ());
    }
}

/// A handler's call back to the sender.
#[courier::action]
fn flood_back() {
    courier::with_state(|c: &Counts| c.backs.fetch_add(1, Ordering::Relaxed));
}

/// Floods of tiny calls, with their memory.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// Calls each sender posts.
    #[arg(long, default_value_t = 10_000_000)]
    posts: u64,
    /// Microseconds of work per call (fractions allowed).
    #[arg(long, default_value_t = 1.0)]
    handler_us: f64,
    /// Every locality floods every other (default: only locality 0 sends).
    #[arg(long)]
    mutual: bool,
    /// Every handler posts a call back to its sender.
    #[arg(long)]
    callback: bool,
}

/// A memory field of this process's `/proc/self/status` (`VmHWM:`, the
/// peak resident size, or `VmRSS:`, the current one) in bytes; 0 off Linux.
fn memory(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

async fn flood(rt: &Runtime, cli: &Cli) -> Result<u64, BoxError> {
    let p = rt.num_localities();
    let here = rt.here().get();
    if p < 2 {
        return Err("a flood needs at least 2 localities".into());
    }
    let ns = (cli.handler_us * 1000.0).round() as u32;
    let sends = cli.mutual || here == 0;
    rt.barrier().await?;
    let start = Instant::now();
    if sends {
        let mut last_report = Instant::now();
        for i in 0..cli.posts {
            // Round robin over the others.
            let dest = (here + 1 + (i % u64::from(p - 1)) as u32) % p;
            rt.post(LocalityId::new(dest), flood_hit, (ns, cli.callback, here))?;
            if here == 0 && i % 65_536 == 0 && last_report.elapsed() > Duration::from_secs(2) {
                last_report = Instant::now();
                eprintln!(
                    "flood: {:.1} % posted after {:.0} s, {} MiB resident here",
                    100.0 * i as f64 / cli.posts as f64,
                    start.elapsed().as_secs_f64(),
                    memory("VmRSS:") >> 20
                );
            }
        }
    }
    let posted = start.elapsed().as_secs_f64();
    // Every sender is done, then every call has run.
    rt.barrier().await?;
    rt.quiesce().await?;
    let seconds = start.elapsed().as_secs_f64();
    let counts = rt.state::<Counts>();
    let hits = counts.hits.load(Ordering::Relaxed);
    let backs = counts.backs.load(Ordering::Relaxed);
    let total_hits = rt.all_reduce(hits, |a, b| a + b).await?;
    let total_backs = rt.all_reduce(backs, |a, b| a + b).await?;
    let senders = if cli.mutual { u64::from(p) } else { 1 };
    let expected = senders * cli.posts;
    let expected_backs = if cli.callback { expected } else { 0 };
    let peaks = rt.all_gather(&memory("VmHWM:")).await?;
    if here == 0 {
        let peaks: Vec<String> = peaks.iter().map(|b| format!("{}", b >> 20)).collect();
        println!(
            "flood: {p} localities, {} calls of {} us {}{}: posted in {posted:.2} s, all run in {seconds:.2} s ({:.2} M calls/s); \
             ran {total_hits} of {expected}, callbacks {total_backs} of {expected_backs}; peak resident MiB by locality: [{}]",
            expected,
            cli.handler_us,
            if cli.mutual {
                "mutual"
            } else {
                "from locality 0"
            },
            if cli.callback { " with callbacks" } else { "" },
            expected as f64 / seconds / 1e6,
            peaks.join(", ")
        );
    }
    let wrong = u64::from(total_hits != expected) + u64::from(total_backs != expected_backs);
    Ok(wrong)
}

fn main() -> ExitCode {
    courier::report_to_stderr();
    let cli = Cli::parse();
    let config = cli.runtime.config(2).state(|_, _| Counts::default());
    let result = courier::launch_spmd(config, |rt| {
        let cli = Cli::parse();
        async move { flood(&rt, &cli).await }
    });
    exit_code("flood", result)
}
