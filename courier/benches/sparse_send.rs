//! The send path of sparse traffic: every parcel a frame of its own
//! (coalescing off), so that what a frame costs the sender (finishing it,
//! counting it, the α-β calibration's sample, handing it to the
//! transport) is paid per parcel. Two in-process localities: locality 0
//! posts empty calls to locality 1 and waits until they all ran.
//!
//! `cargo bench -p courier --bench sparse_send`. A regression bench: run
//! it before and after a change to the send path, side by side.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use courier::{Coalescing, Config, TransportKind};
use criterion::{Criterion, criterion_group, criterion_main};

#[courier::action]
fn nothing() {}

/// Posts `n` calls of `nothing` from locality 0 to locality 1, one frame
/// each, and waits until they ran; returns the time from the first post
/// to the end of the wait.
fn post_sparse(n: u64) -> Duration {
    let config = Config::new()
        .localities(2)
        .workers(1)
        .transport(TransportKind::Inproc)
        .coalescing(Coalescing::Off);
    courier::launch(config, move |rt| async move {
        let peer = rt.locality(1);
        let start = Instant::now();
        for _ in 0..n {
            rt.post(peer, nothing, ())?;
        }
        rt.quiesce().await?;
        Ok(start.elapsed())
    })
    .expect("the bench job failed")
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("sparse_send");
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("post_one_frame_each_inproc", |b| b.iter_custom(post_sparse));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
