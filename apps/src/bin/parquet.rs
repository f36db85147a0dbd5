//! The rotation phase of the Parquet application (Wagle et al. 2018 §IV.C): every
//! locality sends 8·Nc² parcels of Nc complex doubles (one row of its
//! rank-3 tensor each), spread round-robin over the other localities; no
//! parcel depends on another. Receivers keep an order-independent checksum
//! of the rows from each sender, which locality 0 compares after every
//! iteration with the checksum of what was sent.
//!
//! ```text
//! cargo run --release -p courier-apps --bin parquet -- --localities 4 --nc 64
//! parquet --num-parcels 4 --interval-us 5000   # Wagle et al. 2018's best setting on 4 nodes
//! ```
//!
//! Each iteration line is `phase N: key=value ...`, which `courier sweep` reads.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;

use clap::Parser;
use courier::{LocalityId, RuntimeArgs};
use courier_apps::phases::{CoalescingArgs, PhaseCounters, describe};
use num_complex::Complex64;

/// (receiving locality, iteration, source) → (rows, checksum).
type Received = HashMap<(u32, u32, u32), (u64, u64)>;

/// What each locality of this process received.
static RECEIVED: Mutex<Option<Received>> = Mutex::new(None);

/// The element `k` of row `row` that `source` sends in `iteration`.
fn element(iteration: u32, source: u32, row: u64, k: u64) -> Complex64 {
    let x = (u64::from(iteration) << 48) ^ (u64::from(source) << 40) ^ (row << 12) ^ k;
    let h = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    Complex64::new((h >> 11) as f64, (h & 0xFFFF) as f64 - 32768.0)
}

/// An order-independent checksum term of one row: a hash of its bits,
/// summed (wrapping) over rows.
fn row_hash(row: u64, values: &[Complex64]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ row;
    for v in values {
        for bits in [v.re.to_bits(), v.im.to_bits()] {
            h = (h ^ bits).wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

/// Receives one row of a rotation.
#[courier::action(coalescing)]
fn receive_row(iteration: u32, source: u32, row: u64, values: Vec<Complex64>) {
    let here = courier::current().here().get();
    let mut table = RECEIVED.lock().unwrap();
    let entry = table
        .get_or_insert_with(HashMap::new)
        .entry((here, iteration, source))
        .or_default();
    entry.0 += 1;
    entry.1 = entry.1.wrapping_add(row_hash(row, &values));
}

/// The others of `here` among `n` localities, in order.
fn others(here: u32, n: u32) -> Vec<u32> {
    (0..n).filter(|&l| l != here).collect()
}

/// Sends this locality's 8·Nc² rows of iteration `iteration`; returns,
/// per destination, the rows and the checksum sent to it.
#[courier::action]
async fn rotate(iteration: u32, nc: u64) -> Vec<(u32, u64, u64)> {
    let rt = courier::current();
    let here = rt.here().get();
    let dests = others(here, rt.num_localities());
    let mut sent: Vec<(u32, u64, u64)> = dests.iter().map(|&d| (d, 0, 0)).collect();
    let mut calls = Vec::new();
    for row in 0..8 * nc * nc {
        let slot = (row % dests.len() as u64) as usize;
        let values: Vec<Complex64> = (0..nc).map(|k| element(iteration, here, row, k)).collect();
        sent[slot].1 += 1;
        sent[slot].2 = sent[slot].2.wrapping_add(row_hash(row, &values));
        let dest = LocalityId::new(dests[slot]);
        calls.push(rt.call(dest, receive_row, (iteration, here, row, values)));
    }
    for call in calls {
        call.await.expect("a row was not delivered");
    }
    sent
}

/// What this locality received in `iteration`: (source, rows, checksum).
#[courier::action]
fn received_rows(iteration: u32) -> Vec<(u32, u64, u64)> {
    let here = courier::current().here().get();
    let table = RECEIVED.lock().unwrap();
    let mut out: Vec<(u32, u64, u64)> = table
        .iter()
        .flatten()
        .filter(|((l, i, _), _)| *l == here && *i == iteration)
        .map(|((_, _, source), (rows, sum))| (*source, *rows, *sum))
        .collect();
    out.sort_unstable();
    out
}

/// Parquet rotation: every locality sends 8·Nc² rows of Nc complex
/// doubles to the others, iteration after iteration.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    runtime: RuntimeArgs,
    #[command(flatten)]
    coalescing: CoalescingArgs,
    /// Linear dimension Nc: 8·Nc² rows of Nc complex doubles per locality.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    nc: u64,
    /// Number of rotations.
    #[arg(long, default_value_t = 4)]
    iterations: u32,
}

fn main() -> ExitCode {
    courier::report_to_stderr();
    let cli = Cli::parse();
    let config = cli.runtime.config(4);
    let transport = config.transport_kind();
    let (nc, iterations) = (cli.nc, cli.iterations);
    let result = courier::launch(config, move |rt| async move {
        let n = rt.num_localities();
        if n < 2 {
            return Err("parquet needs at least 2 localities".into());
        }
        println!(
            "parquet: {n} localities over {transport:?}, Nc={nc}: {} rows of {} B per locality per iteration",
            8 * nc * nc,
            nc * 16
        );
        let mut counters = PhaseCounters::new(&rt, receive_row)?;
        let mut bad = 0u64;
        for it in 1..=iterations {
            if let Some(setting) = cli.coalescing.setting(&cli.runtime, it) {
                rt.set_coalescing_everywhere(receive_row, setting).await?;
            }
            // What is in force, from the flags above or the configuration.
            let setting = rt.coalescing(receive_row, rt.locality(1 % rt.num_localities()));
            counters.start().await?;
            let start = Instant::now();
            let rotations: Vec<_> = rt
                .localities()
                .map(|l| rt.call(l, rotate, (it, nc)))
                .collect();
            let mut expected: HashMap<(u32, u32), (u64, u64)> = HashMap::new();
            for (source, rotation) in rotations.into_iter().enumerate() {
                for (dest, rows, sum) in rotation.await? {
                    expected.insert((dest, source as u32), (rows, sum));
                }
            }
            let secs = start.elapsed().as_secs_f64();
            let overheads = counters.finish().await?;
            let mut mismatched = 0;
            for l in rt.localities() {
                for (source, rows, sum) in rt.call(l, received_rows, (it,)).await? {
                    if expected.remove(&(l.get(), source)) != Some((rows, sum)) {
                        mismatched += 1;
                    }
                }
            }
            mismatched += expected.len();
            println!(
                "phase {it}: seconds={secs:.4} parcels_per_s={:.0} mismatched={mismatched} {} {overheads}",
                (u64::from(n) * 8 * nc * nc) as f64 / secs,
                describe(setting),
            );
            bad += mismatched as u64;
        }
        Ok(bad)
    });
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(bad) => {
            eprintln!("parquet: {bad} (receiver, sender) checksums differed from what was sent");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("parquet: {e}");
            ExitCode::FAILURE
        }
    }
}
