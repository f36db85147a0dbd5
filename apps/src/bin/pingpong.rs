//! Round-trip latency and bandwidth between two localities, 8 B to 4 MiB,
//! with the same ping-pong over raw TCP sockets in the same run; then the
//! latency of sparse 8-byte round trips with coalescing off and on.
//!
//! Prints, per size, the median round trip through Courier and through a
//! plain socket, then alpha (µs per message) and beta (ns per byte) of the
//! one-way time `t(s) = alpha + beta·s`, fitted by least squares weighted by
//! 1/t² (relative error, so small sizes count as much as large ones).
//!
//! ```text
//! cargo run --release -p courier-apps --bin pingpong -- --transport tcp
//! pingpong --latency-only --coalescing count:num_parcels=64,interval_us=10
//! ```
//!
//! `--latency-only` measures only 8-byte round trips under the configured
//! coalescing (`--coalescing`), back to back and sparse (a `--pause-us`
//! pause before each), and prints them as `phase N: key=value ...` lines
//! for `courier sweep` and `bench/adapt-matrix.sh`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use courier::{Coalescing, CountPolicy, Runtime, RuntimeArgs};
use serde_bytes::ByteBuf;

/// Sends the bytes back.
#[courier::action]
fn echo(bytes: ByteBuf) -> ByteBuf {
    bytes
}

/// Starts a raw-socket echo server in this process; returns its port.
#[courier::action]
fn start_raw_echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("cannot listen for the raw echo");
    let port = listener.local_addr().expect("raw echo address").port();
    std::thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else {
            return;
        };
        let _ = stream.set_nodelay(true);
        let mut buf = Vec::new();
        loop {
            let mut len = [0u8; 4];
            if stream.read_exact(&mut len).is_err() {
                return;
            }
            // One buffer, one write: the prefix and the payload together.
            buf.resize(4 + u32::from_le_bytes(len) as usize, 0);
            buf[..4].copy_from_slice(&len);
            if stream.read_exact(&mut buf[4..]).is_err() || stream.write_all(&buf).is_err() {
                return;
            }
        }
    });
    port
}

/// Ping-pong between locality 0 and locality 1.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// Round trips per size for the small sizes (fewer for large ones).
    #[arg(long, default_value_t = 5_000)]
    iterations: u32,
    /// Largest message in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    max_bytes: usize,
    /// Only time `--iterations` 8-byte round trips back to back and as many
    /// sparse ones under the configured coalescing (`--coalescing`), in
    /// alternating blocks, and print them as `phase` lines; skips the size
    /// sweep and the off/on comparison.
    #[arg(long)]
    latency_only: bool,
    /// Pause before each sparse round trip of `--latency-only`, in µs.
    #[arg(long, value_name = "US", default_value_t = 300)]
    pause_us: u64,
}

/// The sizes of the sweep: 8 B, then ×8 up to `max`, and `max` itself.
fn sizes(max: usize) -> Vec<usize> {
    let mut sizes: Vec<usize> = std::iter::successors(Some(8usize), |s| Some(s * 8))
        .take_while(|s| *s < max)
        .collect();
    sizes.push(max);
    sizes
}

/// Round trips to do for messages of `size` bytes.
fn iterations_for(size: usize, small: u32) -> u32 {
    let budget = (256usize << 20) / size.max(1);
    small.min(u32::try_from(budget).unwrap_or(u32::MAX)).max(20)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Times `iters` round trips with `round_trip`, after a few for warm-up;
/// returns the median.
async fn time_round_trips<F, Fut>(iters: u32, mut round_trip: F) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    for _ in 0..iters.min(50) {
        round_trip().await?;
    }
    let mut samples = Vec::with_capacity(iters as usize);
    for _ in 0..iters {
        let start = Instant::now();
        round_trip().await?;
        samples.push(start.elapsed());
    }
    Ok(median(samples))
}

/// Fits `t = alpha + beta·s` to one-way times, weighting by 1/t².
/// Returns (alpha in µs, beta in ns per byte).
fn fit(points: &[(usize, Duration)]) -> (f64, f64) {
    let (mut sw, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(size, rtt) in points {
        let (x, y) = (size as f64, rtt.as_secs_f64() / 2.0);
        let w = 1.0 / (y * y);
        sw += w;
        sx += w * x;
        sy += w * y;
        sxx += w * x * x;
        sxy += w * x * y;
    }
    let beta = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
    let alpha = (sy - beta * sx) / sw;
    (alpha * 1e6, beta * 1e9)
}

async fn sweep(rt: Runtime, iterations: u32, max_bytes: usize) -> anyhow::Result<()> {
    anyhow::ensure!(rt.num_localities() >= 2, "pingpong needs 2 localities");
    let peer = rt.locality(1);
    let port = rt.call(peer, start_raw_echo, ()).await?;
    let mut raw = TcpStream::connect(("127.0.0.1", port))?;
    raw.set_nodelay(true)?;
    println!(
        "{:>9} {:>8} {:>13} {:>13} {:>7}",
        "bytes", "trips", "courier µs", "raw tcp µs", "ratio"
    );
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for size in sizes(max_bytes) {
        let iters = iterations_for(size, iterations);
        let payload = ByteBuf::from(vec![7u8; size]);
        let courier = time_round_trips(iters, || {
            let call = rt.call(peer, echo, (payload.clone(),));
            async move {
                anyhow::ensure!(call.await?.len() == size, "echo returned the wrong size");
                Ok(())
            }
        })
        .await?;
        let mut back = vec![0u8; size];
        let mut message = (size as u32).to_le_bytes().to_vec();
        message.extend_from_slice(&payload);
        let direct = time_round_trips(iters, || {
            let result = (|| {
                raw.write_all(&message)?;
                let mut len = [0u8; 4];
                raw.read_exact(&mut len)?;
                raw.read_exact(&mut back)?;
                Ok(())
            })();
            async move { result }
        })
        .await?;
        println!(
            "{size:>9} {iters:>8} {:>13.2} {:>13.2} {:>7.2}",
            courier.as_secs_f64() * 1e6,
            direct.as_secs_f64() * 1e6,
            courier.as_secs_f64() / direct.as_secs_f64()
        );
        ours.push((size, courier));
        theirs.push((size, direct));
    }
    let (alpha, beta) = fit(&ours);
    let (raw_alpha, raw_beta) = fit(&theirs);
    println!("courier: alpha = {alpha:.2} µs/message, beta = {beta:.3} ns/byte");
    println!("raw tcp: alpha = {raw_alpha:.2} µs/message, beta = {raw_beta:.3} ns/byte");
    println!(
        "courier/raw per-message cost (alpha ratio): {:.2}x",
        alpha / raw_alpha
    );
    Ok(())
}

/// Sparse traffic with coalescing on must cost no latency (Wagle et al. 2018's
/// bypass): 8-byte round trips with a pause of three intervals before each,
/// coalescing off and on (count policy, both ways) in alternating blocks.
/// Back-to-back round trips with coalescing on are shown too: each waits for
/// the flush timer, which is what coalescing a latency-bound chain costs.
async fn sparse_latency(rt: &Runtime, rounds: u32) -> anyhow::Result<()> {
    let peer = rt.locality(1);
    let policy = CountPolicy {
        interval_us: 100,
        ..CountPolicy::DEFAULT
    };
    let pause = Duration::from_micros(3 * policy.interval_us);
    let payload = ByteBuf::from(vec![7u8; 8]);
    let settings = [
        ("off", Coalescing::Off, pause),
        ("on, sparse", Coalescing::Count(policy), pause),
        (
            "on, back to back",
            Coalescing::Count(policy),
            Duration::ZERO,
        ),
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); settings.len()];
    for _ in 0..5 {
        for ((_, setting, pause), samples) in settings.iter().zip(&mut samples) {
            rt.set_coalescing_everywhere(echo, *setting)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            for _ in 0..rounds {
                std::thread::sleep(*pause);
                let start = Instant::now();
                rt.call(peer, echo, (payload.clone(),)).await?;
                samples.push(start.elapsed());
            }
        }
    }
    rt.set_coalescing_everywhere(echo, Coalescing::Off)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let medians: Vec<Duration> = samples.into_iter().map(median).collect();
    println!(
        "8 B round trips, {} per setting, count policy interval_us={}:",
        5 * rounds,
        policy.interval_us
    );
    for ((name, _, pause), m) in settings.iter().zip(&medians) {
        println!(
            "  coalescing {name:<17} (pause {:>3} µs): median {:>8.2} µs, {:.2}x off",
            pause.as_micros(),
            m.as_secs_f64() * 1e6,
            m.as_secs_f64() / medians[0].as_secs_f64()
        );
    }
    // Every back-to-back round trip waited for the flush timer, twice.
    let mut lateness = rt.counters([
        "/coalescing{locality#*/total}/time/timer-lateness@0,200000,1000",
        "/coalescing{locality#*/total}/time/average-timer-lateness",
    ])?;
    let values = lateness.evaluate(false).await?;
    for v in &values {
        match &v.histogram {
            Some(h) => println!(
                "  flush timer lateness {}: {} firings, median {:.1} µs, 90th percentile {:.1} µs",
                v.name,
                v.value,
                h.quantile(0.5) / 1e3,
                h.quantile(0.9) / 1e3
            ),
            None => println!("  {}: {:.1} µs", v.name, v.value / 1e3),
        }
    }
    Ok(())
}

/// `--latency-only`: 8-byte round trips under the configured coalescing,
/// back to back (phase 1) and after a pause of `pause` (phase 2), in 5
/// alternating blocks of `iterations / 5` each, after 50 for warm-up.
/// Each phase line shows the setting in force at the end (for
/// `adaptive`, what the tuner chose).
async fn latency_only(rt: &Runtime, iterations: u32, pause: Duration) -> anyhow::Result<()> {
    anyhow::ensure!(rt.num_localities() >= 2, "pingpong needs 2 localities");
    let peer = rt.locality(1);
    let payload = ByteBuf::from(vec![7u8; 8]);
    let round_trip = || async {
        let start = Instant::now();
        rt.call(peer, echo, (payload.clone(),)).await?;
        anyhow::Ok(start.elapsed())
    };
    for _ in 0..50 {
        round_trip().await?;
    }
    let patterns = [("back_to_back", Duration::ZERO), ("sparse", pause)];
    let block = (iterations / 5).max(1);
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); patterns.len()];
    for _ in 0..5 {
        for ((_, pause), samples) in patterns.iter().zip(&mut samples) {
            for _ in 0..block {
                std::thread::sleep(*pause);
                samples.push(round_trip().await?);
            }
        }
    }
    // What is in force at the end: for `adaptive`, what its tuner chose.
    let setting = rt.coalescing(echo, peer);
    for (p, ((name, pause), samples)) in patterns.iter().zip(samples).enumerate() {
        let n = samples.len();
        println!(
            "phase {}: pattern={name} pause_us={} round_trips={n} rtt_us={:.2} coalescing={setting}",
            p + 1,
            pause.as_micros(),
            median(samples).as_secs_f64() * 1e6
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    courier::report_to_stderr();
    let cli = Cli::parse();
    let config = cli.runtime.config(2);
    let (iterations, max_bytes) = (cli.iterations, cli.max_bytes);
    let (latency_only_mode, pause) = (cli.latency_only, Duration::from_micros(cli.pause_us));
    let transport = config.transport_kind();
    let result = courier::launch(config, move |rt| async move {
        println!(
            "pingpong: {} localities over {transport:?}",
            rt.num_localities()
        );
        if latency_only_mode {
            latency_only(&rt, iterations, pause).await?;
            return Ok(());
        }
        sweep(rt.clone(), iterations, max_bytes).await?;
        sparse_latency(&rt, iterations.min(1000)).await?;
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pingpong: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_a_line() {
        let points: Vec<(usize, Duration)> = [8usize, 512, 32768, 4 << 20]
            .iter()
            .map(|&s| (s, Duration::from_secs_f64(2.0 * (5e-6 + 0.2e-9 * s as f64))))
            .collect();
        let (alpha, beta) = fit(&points);
        assert!((alpha - 5.0).abs() < 1e-3, "{alpha}");
        assert!((beta - 0.2).abs() < 1e-6, "{beta}");
    }

    #[test]
    fn sweep_spans_8_bytes_to_the_maximum() {
        assert_eq!(sizes(4 << 20).first(), Some(&8));
        assert_eq!(sizes(4 << 20).last(), Some(&(4 << 20)));
        assert_eq!(sizes(64), vec![8, 64]);
    }
}
