//! HPCC RandomAccess (GUPS, the MPIRandomAccess variant) on Courier: every
//! locality holds `2^--log-table-size` 64-bit words of one table (HPCC's
//! block layout: global index `g` lives on locality `g >> k`), and makes
//! its share of `--updates-factor` × the table's size updates `T[g] ^= ran`
//! from HPCC's random stream, by posting one tiny action (the value only)
//! per update to the owner of `g`.
//!
//! ```text
//! cargo run --release -p courier-apps --bin randomaccess -- --localities 2
//! randomaccess --log-table-size 24 --runs 5
//! randomaccess --lookahead 0 --coalescing count:num_parcels=4096   # beyond HPCC's look-ahead
//! ```
//!
//! The number of localities must be a power of two (HPCC's power-of-two
//! variant). Locality `r` generates stream positions `f·2^k·r + 1 ..=
//! f·2^k·(r + 1)` (from `HPCC_starts`, as the reference code does), so the
//! localities together make exactly the updates of the sequential
//! benchmark. The timed region runs from a barrier to a barrier and ends
//! with `quiesce` (every update has run); GUP/s = updates / seconds / 1e9.
//!
//! HPCC lets a processor hold at most 1024 updates back (`--lookahead`):
//! the coalescing buffers of the update action are sized to
//! `lookahead / localities` parcels so that all of a locality's buffers
//! together never hold more. Each run is verified as HPCC does: the same
//! update stream is applied again, untimed (XOR undoes it), and every word
//! must be back to `T[i] = i`; HPCC accepts up to 1% of the table in error,
//! Courier applies every update exactly once, so the expected count is 0.
//! A checksum also checks the timed run itself: the XOR of `T[i] ^ i` over
//! the whole table must equal the XOR of every update value. Prints one
//! `run N: key=value ...` line per run and exits non-zero when more than
//! 1% of the table is wrong.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

use clap::Parser;
use courier::{Action, BoxError, Coalescing, CountPolicy, LocalityId, Runtime, RuntimeArgs};
use courier_apps::kernel::{median, timed};

/// HPCC's primitive polynomial over GF(2): x^63 + x^2 + x + 1.
const POLY: u64 = 0x7;

/// The period of HPCC's random stream.
const PERIOD: i64 = 1_317_624_576_693_539_401;

/// The largest fraction of the table HPCC accepts in error.
const MAX_ERROR_FRACTION: f64 = 0.01;

/// The next value of HPCC's random stream.
#[inline]
fn hpcc_next(ran: u64) -> u64 {
    (ran << 1) ^ if (ran as i64) < 0 { POLY } else { 0 }
}

/// The `n`-th value of HPCC's random stream (the value 1 stepped `n`
/// times): `HPCC_starts` of the reference code, by powers of the 64×64
/// matrix of the generator over GF(2).
fn hpcc_starts(mut n: i64) -> u64 {
    while n < 0 {
        n += PERIOD;
    }
    while n > PERIOD {
        n -= PERIOD;
    }
    if n == 0 {
        return 0x1;
    }
    // m2[i] is the value 1 stepped 2i times.
    let mut m2 = [0u64; 64];
    let mut temp: u64 = 0x1;
    for m in &mut m2 {
        *m = temp;
        temp = hpcc_next(temp);
        temp = hpcc_next(temp);
    }
    let mut i: i32 = 62;
    while i >= 0 && (n >> i) & 1 == 0 {
        i -= 1;
    }
    let mut ran: u64 = 0x2;
    while i > 0 {
        let mut temp = 0;
        for (j, m) in m2.iter().enumerate() {
            if (ran >> j) & 1 != 0 {
                temp ^= m;
            }
        }
        ran = temp;
        i -= 1;
        if (n >> i) & 1 != 0 {
            ran = hpcc_next(ran);
        }
    }
    ran
}

/// This locality's block of the table.
struct Table {
    /// `T[local]`; global index `(here << k) + local`.
    words: Vec<AtomicU64>,
    /// `2^k - 1`: the local index of an update value.
    mask: u64,
}

/// One update: `T[ran & mask] ^= ran` on the owner of `ran`'s global index.
#[courier::action]
fn ra_update(ran: u64) {
    courier::with_state(|t: &Table| {
        t.words[(ran & t.mask) as usize].fetch_xor(ran, Ordering::Relaxed)
    });
}

/// HPCC RandomAccess over Courier.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// log2 of the words of the table per locality (k): the table has
    /// 2^k × localities words.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=40))]
    log_table_size: u32,
    /// Updates per word of the table (HPCC: 4).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1024))]
    updates_factor: u64,
    /// Updates a locality may hold in its coalescing buffers (HPCC's
    /// look-ahead limit, 1024); 0 leaves the update action's coalescing to
    /// --coalescing and --coalesce-action.
    #[arg(long, default_value_t = 1024)]
    lookahead: u32,
    /// Timed runs (each verified).
    #[arg(long, default_value_t = 3)]
    runs: u32,
}

/// The sizes of a job of `p` localities.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    /// log2 of the words per locality.
    k: u32,
    /// Words per locality.
    local: u64,
    /// Words of the whole table.
    total: u64,
    /// Updates per locality.
    updates: u64,
}

impl Sizes {
    /// The sizes, or why `p` localities cannot run the benchmark.
    fn new(cli: &Cli, p: u32) -> Result<Self, String> {
        if !p.is_power_of_two() {
            return Err(format!(
                "the number of localities must be a power of two (HPCC RandomAccess's block \
                 layout), not {p}: use --localities 1, 2, 4, 8, ..."
            ));
        }
        let k = cli.log_table_size;
        if k + p.trailing_zeros() > 62 {
            return Err(format!(
                "a table of 2^{k} words on each of {p} localities has more than 2^62 words"
            ));
        }
        let local = 1u64 << k;
        Ok(Sizes {
            k,
            local,
            total: local << p.trailing_zeros(),
            updates: local * cli.updates_factor,
        })
    }
}

/// The stream value before the first update of locality `rank`'s share
/// (its updates are the next `sizes.updates` values).
fn share_start(sizes: Sizes, rank: u32) -> u64 {
    hpcc_starts((sizes.updates * u64::from(rank)) as i64)
}

/// Where update `ran` goes: its owner's rank and its index there (the
/// action finds the index again as `ran & mask`).
#[inline]
fn destination(ran: u64, sizes: Sizes) -> (u32, u64) {
    let g = ran & (sizes.total - 1);
    ((g >> sizes.k) as u32, g & (sizes.local - 1))
}

/// Applies this locality's share of the update stream: returns the XOR of
/// every value it sent.
fn apply_updates(rt: &Runtime, sizes: Sizes) -> Result<u64, BoxError> {
    let mut ran = share_start(sizes, rt.here().get());
    let mut xor = 0;
    for _ in 0..sizes.updates {
        ran = hpcc_next(ran);
        xor ^= ran;
        let (owner, _) = destination(ran, sizes);
        rt.post(LocalityId::new(owner), ra_update, (ran,))?;
    }
    Ok(xor)
}

/// Sets `T[i] = i` (global index) on this locality.
fn initialize(rt: &Runtime, sizes: Sizes) {
    let base = u64::from(rt.here().get()) << sizes.k;
    for (i, w) in rt.state::<Table>().words.iter().enumerate() {
        w.store(base + i as u64, Ordering::Relaxed);
    }
}

/// The XOR of `T[i] ^ i` over this locality's block, and how many words
/// differ from `i`.
fn survey(rt: &Runtime, sizes: Sizes) -> (u64, u64) {
    let base = u64::from(rt.here().get()) << sizes.k;
    let (mut xor, mut differ) = (0, 0);
    for (i, w) in rt.state::<Table>().words.iter().enumerate() {
        let d = w.load(Ordering::Relaxed) ^ (base + i as u64);
        xor ^= d;
        differ += u64::from(d != 0);
    }
    (xor, differ)
}

/// What one run found.
#[derive(Debug)]
struct Outcome {
    seconds: f64,
    /// Words of the whole table not back to `T[i] = i` after the replay.
    errors: u64,
    /// Whether the table after the timed run held every update value.
    checksum_ok: bool,
}

/// One run: the timed updates, then the replay that must undo them.
async fn run(rt: &Runtime, sizes: Sizes) -> Result<Outcome, BoxError> {
    let xor_all = |a: u64, b: u64| a ^ b;
    initialize(rt, sizes);
    let seconds = timed(rt, || async {
        apply_updates(rt, sizes)?;
        rt.quiesce().await?;
        Ok(())
    })
    .await?;
    let (table_xor, _) = survey(rt, sizes);
    // Verify, untimed: the same stream again undoes every update.
    let sent_xor = apply_updates(rt, sizes)?;
    rt.quiesce().await?;
    rt.barrier().await?;
    let (_, errors) = survey(rt, sizes);
    let table_xor = rt.all_reduce(table_xor, xor_all).await?;
    let sent_xor = rt.all_reduce(sent_xor, xor_all).await?;
    let errors = rt.all_reduce(errors, |a, b| a + b).await?;
    Ok(Outcome {
        seconds,
        errors,
        checksum_ok: table_xor == sent_xor,
    })
}

/// The coalescing of the update action that keeps at most `lookahead`
/// updates in a locality's buffers (one buffer per destination), on top
/// of `--coalescing`'s policy.
fn lookahead_setting(cli: &Cli, p: u32) -> Option<Coalescing> {
    if cli.lookahead == 0 {
        return None;
    }
    let num_parcels = (cli.lookahead / p).max(1);
    match cli.runtime.coalescing {
        Some(Coalescing::Off) => None,
        Some(Coalescing::Count(policy)) => Some(Coalescing::Count(CountPolicy {
            num_parcels,
            ..policy
        })),
        // Any other policy bounds its buffers itself.
        Some(other) => Some(other),
        None => Some(Coalescing::Count(CountPolicy {
            num_parcels,
            ..CountPolicy::DEFAULT
        })),
    }
}

fn main() -> ExitCode {
    courier::report_to_stderr();
    let cli = Cli::parse();
    let mut config = cli.runtime.config(2);
    let p = config.num_localities();
    let sizes = match Sizes::new(&cli, p) {
        Ok(sizes) => sizes,
        Err(e) => {
            eprintln!("randomaccess: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(setting) = lookahead_setting(&cli, p) {
        if matches!(setting, Coalescing::Bytes(_)) {
            eprintln!(
                "randomaccess: --lookahead bounds the count policy only; the byte policy is left as --coalescing set it"
            );
        }
        config = config.coalesce_action(ra_update::NAME, setting);
    }
    let local = sizes.local as usize;
    let config = config.state(move |_, _| Table {
        words: (0..local).map(|_| AtomicU64::new(0)).collect(),
        mask: local as u64 - 1,
    });
    let transport = config.transport_kind();
    let result = courier::launch_spmd(config, |rt| {
        let cli = Cli::parse();
        async move {
            let p = rt.num_localities();
            // The job may have another size than the configuration said
            // (an MPI launcher's): check again.
            let sizes = Sizes::new(&cli, p)?;
            let root = rt.here().get() == 0;
            if root {
                println!(
                    "randomaccess: {p} localities over {transport:?}, 2^{} words per locality ({} in all), {} updates ({} per locality), lookahead {}, {} runs",
                    sizes.k,
                    sizes.total,
                    sizes.updates * u64::from(p),
                    sizes.updates,
                    cli.lookahead,
                    cli.runs
                );
            }
            let mut gups = Vec::new();
            let mut failed = 0;
            for r in 1..=cli.runs {
                let out = run(&rt, sizes).await?;
                let rate = (sizes.updates * u64::from(p)) as f64 / out.seconds / 1e9;
                let per_locality = sizes.updates as f64 / out.seconds / 1e6;
                let fraction = out.errors as f64 / sizes.total as f64;
                gups.push(rate);
                if fraction > MAX_ERROR_FRACTION {
                    failed += 1;
                }
                if root {
                    println!(
                        "run {r}: seconds={:.4} gups={rate:.5} mups_per_locality={per_locality:.2} errors={} error_fraction={fraction:.6} checksum_ok={}",
                        out.seconds, out.errors, out.checksum_ok
                    );
                }
            }
            if root {
                println!(
                    "randomaccess: median gups={:.5} mups_per_locality={:.2} over {} runs, {failed} runs with more than 1% of the table in error",
                    median(&gups),
                    median(&gups) * 1e3 / f64::from(p),
                    cli.runs
                );
            }
            Ok(failed)
        }
    });
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(failed) => {
            eprintln!("randomaccess: {failed} runs left more than 1% of the table in error");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("randomaccess: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_is_the_stream_stepped_n_times() {
        let mut ran = 1u64;
        for n in 0..5000i64 {
            assert_eq!(hpcc_starts(n), ran, "n = {n}");
            ran = hpcc_next(ran);
        }
        // Far out: stepping from a start agrees with a later start.
        let n = 4 * (1i64 << 20) * 3;
        let mut ran = hpcc_starts(n);
        for _ in 0..1000 {
            ran = hpcc_next(ran);
        }
        assert_eq!(ran, hpcc_starts(n + 1000));
        // The stream is periodic.
        assert_eq!(hpcc_starts(PERIOD + 5), hpcc_starts(5));
        assert_eq!(hpcc_starts(-3), hpcc_starts(PERIOD - 3));
    }

    /// The shares of 4 localities, routed to their blocks, make the table
    /// of the sequential benchmark (HPCC's scalar loop).
    #[test]
    fn shares_and_blocks_make_the_sequential_table() {
        let cli = Cli::parse_from(["randomaccess", "--log-table-size", "6"]);
        let p = 4;
        let sizes = Sizes::new(&cli, p).unwrap();
        let mut sequential: Vec<u64> = (0..sizes.total).collect();
        let mut ran = 1u64;
        for _ in 0..sizes.updates * u64::from(p) {
            ran = hpcc_next(ran);
            sequential[(ran & (sizes.total - 1)) as usize] ^= ran;
        }
        let mut blocks: Vec<Vec<u64>> = (0..u64::from(p))
            .map(|r| (0..sizes.local).map(|i| (r << sizes.k) + i).collect())
            .collect();
        for rank in 0..p {
            let mut ran = share_start(sizes, rank);
            for _ in 0..sizes.updates {
                ran = hpcc_next(ran);
                let (owner, local) = destination(ran, sizes);
                assert_eq!(local, ran & (sizes.local - 1), "the action's index");
                blocks[owner as usize][local as usize] ^= ran;
            }
        }
        assert_eq!(blocks.concat(), sequential);
    }

    #[test]
    fn only_powers_of_two() {
        let cli = Cli::parse_from(["randomaccess", "--log-table-size", "4"]);
        assert!(Sizes::new(&cli, 3).unwrap_err().contains("power of two"));
        let s = Sizes::new(&cli, 4).unwrap();
        assert_eq!((s.local, s.total, s.updates), (16, 64, 64));
    }
}
