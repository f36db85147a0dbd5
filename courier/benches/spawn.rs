//! Task spawn + execute overhead: empty tasks on one worker of one locality.
//!
//! `cargo bench -p courier --bench spawn`
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use courier::{Config, Transport};
use criterion::{Criterion, criterion_group, criterion_main};

/// Spawns `n` empty tasks from inside a task and awaits them all; returns
/// the time taken, measured on the worker.
fn spawn_empty_tasks(n: u64) -> Duration {
    let config = Config::new()
        .localities(1)
        .workers(1)
        .transport(Transport::Inproc);
    courier::launch(config, move |rt| async move {
        let start = Instant::now();
        let mut handles = Vec::with_capacity(n as usize);
        for _ in 0..n {
            handles.push(rt.spawn(async {}));
        }
        for handle in handles {
            handle.await;
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
