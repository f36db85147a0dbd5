//! What the α-β calibration costs the send path: one sample (`record`:
//! try to take the peer's fit, add the sample, refit), as `send_frame`
//! pays it once per frame sent to another locality.
//!
//! `cargo bench -p courier --bench calibration`.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use courier::__private::calibration_samples;
use criterion::{Criterion, criterion_group, criterion_main};

/// Samples of a mixed regime: sizes from 12 B to 64 KiB, times about
/// those of loopback TCP.
fn samples() -> Vec<(u64, u64)> {
    (0..4096u64)
        .map(|i| {
            let bytes = 12 + (i * 7919) % 65_536;
            (bytes, 5_000 + bytes / 10 + (i * 104_729) % 2_000)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let samples = samples();
    c.bench_function("calibration/record", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(samples.len() as u64) as usize;
                let start = Instant::now();
                std::hint::black_box(calibration_samples(&samples[..n]));
                total += start.elapsed();
                left -= n as u64;
            }
            total
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
