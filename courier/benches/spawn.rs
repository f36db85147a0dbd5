//! Task spawn + execute overhead: empty tasks on one worker of one locality.
//!
//! `cargo bench -p courier --bench spawn`
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use courier::{Config, Transport};
use criterion::{Criterion, criterion_group, criterion_main};

/// Tasks spawned before the spawner awaits them: keeps the working set in
/// cache, as a real fan-out does, instead of measuring page faults.
const BATCH: u64 = 1024;

/// Spawns `n` empty tasks from inside a task, in batches of [`BATCH`], and
/// awaits them all; returns the time taken, measured on the worker.
fn spawn_empty_tasks(n: u64) -> Duration {
    let config = Config::new()
        .localities(1)
        .workers(1)
        .transport(Transport::Inproc);
    courier::launch(config, move |rt| async move {
        let mut handles = Vec::with_capacity(BATCH as usize);
        let start = Instant::now();
        let mut left = n;
        while left > 0 {
            let batch = left.min(BATCH);
            handles.extend((0..batch).map(|_| rt.spawn(async {})));
            for handle in handles.drain(..) {
                handle.await;
            }
            left -= batch;
        }
        Ok(start.elapsed())
    })
    .expect("the bench job failed")
}

fn bench(c: &mut Criterion) {
    c.bench_function("spawn_and_run_empty_task", |b| {
        b.iter_custom(spawn_empty_tasks)
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
