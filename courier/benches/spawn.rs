//! Task spawn + execute overhead: empty tasks on one worker of one
//! locality, queued (inlining off) and run inline by `spawn` (adaptive
//! inlining); what `par::join` costs inlined and forked; an awaited call
//! of a short action of the same locality.
//!
//! `cargo bench -p courier --bench spawn` (the system's allocator);
//! `cargo bench -p courier --bench spawn_mimalloc` runs the same with
//! mimalloc as the global allocator.
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use courier::par::Inlining;
use courier::{Config, TransportKind};
use criterion::{Criterion, criterion_group, criterion_main};

/// Tasks spawned before the spawner awaits them: keeps the working set in
/// cache, as a real fan-out does, instead of measuring page faults.
const BATCH: u64 = 1024;

/// What each spawned task does.
#[derive(Debug, Clone, Copy)]
enum Child {
    /// Nothing: done in its first poll.
    Empty,
    /// Yields once: its first poll waits, so adaptive inlining queues it
    /// (the queued path with the decision's cost).
    YieldsOnce,
}

/// Spawns `n` tasks doing `child` from inside a task, in batches of
/// [`BATCH`], and awaits them all, under `inlining`; returns the time
/// taken, measured on the worker. With `read_counters`, another thread
/// evaluates a set of thread counters every 10 ms meanwhile (the cost of
/// always-on counters being read).
fn spawn_tasks(
    n: u64,
    workers: usize,
    read_counters: bool,
    inlining: Inlining,
    child: Child,
) -> Duration {
    let config = Config::new()
        .localities(1)
        .workers(workers)
        .transport(TransportKind::Inproc)
        .inlining(inlining);
    courier::launch(config, move |rt| async move {
        let stop = Arc::new(AtomicBool::new(false));
        let reader = read_counters.then(|| {
            let mut set = rt
                .counters([
                    "/threads{locality#0/total}/*",
                    "/threads{locality#0/worker-thread#*}/*",
                ])
                .expect("counter names");
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    futures::executor::block_on(set.evaluate(false)).expect("evaluate");
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        });
        let mut handles = Vec::with_capacity(BATCH as usize);
        let start = Instant::now();
        let mut left = n;
        while left > 0 {
            let batch = left.min(BATCH);
            handles.extend((0..batch).map(|_| {
                rt.spawn(async move {
                    if let Child::YieldsOnce = child {
                        courier::yield_now().await;
                    }
                })
            }));
            for handle in handles.drain(..) {
                handle.await;
            }
            left -= batch;
        }
        let elapsed = start.elapsed();
        stop.store(true, Ordering::Relaxed);
        if let Some(reader) = reader {
            reader.join().expect("counter reader");
        }
        Ok(elapsed)
    })
    .expect("the bench job failed")
}

/// The baseline of [`spawn_tasks`] run inline: `n` of its empty children
/// made in batches of [`BATCH`] inside a task and awaited there, as plain
/// futures.
fn futures_awaited_directly(n: u64) -> Duration {
    let config = Config::new()
        .localities(1)
        .workers(1)
        .transport(TransportKind::Inproc);
    courier::launch(config, move |_rt| async move {
        let mut children = Vec::with_capacity(BATCH as usize);
        let start = Instant::now();
        let mut left = n;
        while left > 0 {
            let batch = left.min(BATCH);
            let child = std::hint::black_box(Child::Empty);
            children.extend((0..batch).map(|_| async move {
                if let Child::YieldsOnce = child {
                    courier::yield_now().await;
                }
            }));
            for child in children.drain(..) {
                child.await;
            }
            left -= batch;
        }
        Ok(start.elapsed())
    })
    .expect("the bench job failed")
}

/// A balanced tree of joins with empty leaves: `2^depth - 1` joins.
fn tree(depth: u32) -> u64 {
    if depth == 0 {
        return 1;
    }
    let (a, b) = courier::par::join(
        || tree(std::hint::black_box(depth - 1)),
        || tree(std::hint::black_box(depth - 1)),
    );
    a + b
}

/// The same tree without joins: the baseline of [`tree`].
fn plain_tree(depth: u32) -> u64 {
    if depth == 0 {
        return 1;
    }
    // Opaque calls: the compiler would otherwise sum the tree in closed form.
    let (a, b) = (
        plain_tree(std::hint::black_box(depth - 1)),
        plain_tree(std::hint::black_box(depth - 1)),
    );
    a + b
}

/// Runs `n` joins (trees of 1,023) on one worker under `inlining`;
/// returns the time taken, measured on the worker.
fn joins(n: u64, inlining: Inlining) -> Duration {
    let config = Config::new()
        .localities(1)
        .workers(1)
        .transport(TransportKind::Inproc)
        .inlining(inlining);
    courier::launch(config, move |_rt| async move {
        let trees = n.div_ceil(1023);
        let start = Instant::now();
        for _ in 0..trees {
            std::hint::black_box(tree(std::hint::black_box(10)));
        }
        Ok(start.elapsed().mul_f64(n as f64 / (trees * 1023) as f64))
    })
    .expect("the bench job failed")
}

/// A short synchronous action, for local calls.
#[courier::action]
fn square(x: u64) -> u64 {
    x.wrapping_mul(x)
}

/// `square` as an `async` action: its local calls take the usual path (a
/// parcel to this locality, a task), the baseline of the inline ones.
#[courier::action]
async fn square_async(x: u64) -> u64 {
    x.wrapping_mul(x)
}

/// Makes and awaits `n` calls of `square` (or, `usual`, `square_async`)
/// on this locality, one at a time, after 16 to measure the action (short
/// local calls of a synchronous action then run inline in the caller);
/// returns the time of the `n`.
fn local_calls(n: u64, usual: bool) -> Duration {
    let config = Config::new()
        .localities(1)
        .workers(1)
        .transport(TransportKind::Inproc);
    courier::launch(config, move |rt| async move {
        let call = |i| match usual {
            false => rt.call(rt.here(), square, (i,)),
            true => rt.call(rt.here(), square_async, (i,)),
        };
        for i in 0..16 {
            call(i).await?;
        }
        let start = Instant::now();
        for i in 0..n {
            std::hint::black_box(call(i).await?);
        }
        Ok(start.elapsed())
    })
    .expect("the bench job failed")
}

fn bench(c: &mut Criterion) {
    c.bench_function("local_call_awaited", |b| {
        b.iter_custom(|n| local_calls(n, false))
    });
    c.bench_function("local_call_awaited_usual_path", |b| {
        b.iter_custom(|n| local_calls(n, true))
    });
    // What `par::join` costs when it inlines its second closure (a fixed
    // cutoff of 0: every join inlines) and when it forks it (inlining
    // off: one worker, so every fork is taken back by its caller).
    c.bench_function("join_inlined", |b| {
        b.iter_custom(|n| joins(n, Inlining::Depth(0)))
    });
    c.bench_function("join_baseline_plain_calls", |b| {
        b.iter_custom(|n| {
            let trees = n.div_ceil(1023);
            let start = Instant::now();
            for _ in 0..trees {
                std::hint::black_box(plain_tree(std::hint::black_box(10)));
            }
            start.elapsed().mul_f64(n as f64 / (trees * 1023) as f64)
        })
    });
    c.bench_function("join_forked_and_taken_back", |b| {
        b.iter_custom(|n| joins(n, Inlining::Never))
    });
    // Queued: inlining off, every spawn is a task.
    c.bench_function("spawn_and_run_empty_task", |b| {
        b.iter_custom(|n| spawn_tasks(n, 1, false, Inlining::Never, Child::Empty))
    });
    // Run inline by `spawn` once the site is measured (the first batch of
    // each run is queued: the site is measured when its first task runs).
    c.bench_function("spawn_and_run_empty_task_inlined", |b| {
        b.iter_custom(|n| spawn_tasks(n, 1, false, Inlining::Adaptive, Child::Empty))
    });
    // The baseline of the inlined spawn: the same children, made, kept in
    // the same batches and awaited in a task, without `spawn`.
    c.bench_function("spawn_baseline_futures_awaited_directly", |b| {
        b.iter_custom(futures_awaited_directly)
    });
    // Queued by the adaptive policy (a first poll that waits): what the
    // decision adds to the queued path, against the same under `Never`.
    c.bench_function("spawn_and_run_task_yielding_once", |b| {
        b.iter_custom(|n| spawn_tasks(n, 1, false, Inlining::Adaptive, Child::YieldsOnce))
    });
    c.bench_function("spawn_and_run_task_yielding_once_never_inlined", |b| {
        b.iter_custom(|n| spawn_tasks(n, 1, false, Inlining::Never, Child::YieldsOnce))
    });
    // The cost of counters being read: two workers in both (the sampling
    // task needs a worker while the spawning task runs), read or not;
    // tasks queued (inlining off).
    c.bench_function("empty_tasks_2_workers_counters_never_read", |b| {
        b.iter_custom(|n| spawn_tasks(n, 2, false, Inlining::Never, Child::Empty))
    });
    c.bench_function("empty_tasks_2_workers_counters_read_every_10ms", |b| {
        b.iter_custom(|n| spawn_tasks(n, 2, true, Inlining::Never, Child::Empty))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
