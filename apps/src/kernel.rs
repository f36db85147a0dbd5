//! What the bale-style kernels (histo, ig, randomaccess, alltoall) share:
//! the cyclic layout of a distributed table, a seedable random stream
//! every locality can replay, and timing a region barrier to barrier.

use std::time::Instant;

use courier::{BoxError, LocalityId, Runtime};

/// Global index `g` of a table spread cyclically over `p` localities lives
/// on locality `g % p` at local index `g / p` (bale's layout).
#[inline]
pub fn owner(g: u64, p: u32) -> LocalityId {
    LocalityId::new(match u32::try_from(g) {
        // A 32-bit division costs about half a 64-bit one.
        Ok(g) => g % p,
        Err(_) => (g % u64::from(p)) as u32,
    })
}

/// The local index of global index `g` on its owner.
#[inline]
pub fn local(g: u64, p: u32) -> u64 {
    match u32::try_from(g) {
        Ok(g) => u64::from(g / p),
        Err(_) => g / u64::from(p),
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): a small, fast, seedable stream
/// that any locality can replay to check another's work.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The stream of locality `rank` for a run seeded with `seed`.
    pub fn for_locality(seed: u64, rank: u32) -> Self {
        SplitMix64(seed ^ (u64::from(rank) + 1).wrapping_mul(0xD1B5_4A32_D192_ED03))
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The next value below `n` (multiply-shift: no division).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Times `region` on every locality from a barrier to a barrier (bale's
/// timing): returns the slowest locality's seconds, the same everywhere.
///
/// # Collective
///
/// Every locality calls it.
pub async fn timed<F, Fut>(rt: &Runtime, region: F) -> Result<f64, BoxError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<(), BoxError>>,
{
    rt.barrier().await?;
    let start = Instant::now();
    region().await?;
    rt.barrier().await?;
    let mine = start.elapsed().as_secs_f64();
    Ok(rt.all_reduce(mine, f64::max).await?)
}

/// What one timed run of a kernel measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Seconds of the timed region.
    pub seconds: f64,
    /// Millions of operations per locality per second.
    pub rate: f64,
    /// Wrong results found by the verification (every locality's).
    pub wrong: u64,
}

/// Runs a kernel's `runs` timed runs one after the other (`run(r)` for r
/// from 1); on the root prints a `run N: seconds=.. {rate_key}=.. wrong=..`
/// line per run and a median line. Returns the wrong results of every run.
///
/// # Collective
///
/// Every locality calls it.
pub async fn runs<F, Fut>(
    rt: &Runtime,
    name: &str,
    rate_key: &str,
    runs: u32,
    mut run: F,
) -> Result<u64, BoxError>
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = Result<Measured, BoxError>>,
{
    let root = rt.here().get() == 0;
    let mut rates = Vec::new();
    let mut wrong = 0;
    for r in 1..=runs {
        let m = run(r).await?;
        rates.push(m.rate);
        wrong += m.wrong;
        if root {
            println!(
                "run {r}: seconds={:.4} {rate_key}={:.2} wrong={}",
                m.seconds, m.rate, m.wrong
            );
        }
    }
    if root {
        println!(
            "{name}: median {rate_key}={:.2} over {runs} runs, {wrong} wrong",
            median(&rates)
        );
    }
    Ok(wrong)
}

/// The exit status of a kernel whose job returned `result` (its wrong
/// results): success only if it ran and nothing was wrong; says why not.
pub fn exit_code(name: &str, result: Result<u64, courier::Error>) -> std::process::ExitCode {
    match result {
        Ok(0) => std::process::ExitCode::SUCCESS,
        Ok(wrong) => {
            eprintln!("{name}: {wrong} results failed verification");
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_is_cyclic() {
        for g in 0..100 {
            let (o, l) = (owner(g, 3), local(g, 3));
            assert_eq!(l * 3 + u64::from(o.get()), g);
        }
    }

    #[test]
    fn streams_replay_and_differ_by_locality() {
        let a: Vec<u64> = (0..5)
            .map({
                let mut r = SplitMix64::for_locality(1, 0);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..5)
            .map({
                let mut r = SplitMix64::for_locality(1, 0);
                move |_| r.next_u64()
            })
            .collect();
        let c: Vec<u64> = (0..5)
            .map({
                let mut r = SplitMix64::for_locality(1, 1);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut r = SplitMix64::for_locality(7, 0);
        assert!((0..1000).all(|_| r.below(10) < 10));
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
