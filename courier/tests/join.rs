//! `par::join` and dynamic inlining (issue #16): results and side effects
//! are the same whatever the inlining decides, every closure runs exactly
//! once, panics come back to the caller, and the adaptive policy forks
//! costly children and inlines cheap ones.
//!
//! The join counters (and the tables of call sites) belong to the process, so
//! the tests of this file take turns (`common::take_turns`).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use courier::par::{self, Inlining};
use courier::{BoxError, Runtime};

/// Counts the calls of `fib` so that a closure run twice (or never) shows.
fn fib(n: u64, calls: &AtomicU64) -> u64 {
    calls.fetch_add(1, Ordering::Relaxed);
    if n < 2 {
        return n;
    }
    let (a, b) = par::join(|| fib(n - 1, calls), || fib(n - 2, calls));
    a + b
}

/// Merge sort on borrowed halves: the closures borrow the caller's stack.
fn sort(v: &mut [u64], scratch: &mut [u64]) {
    if v.len() <= 1 {
        return;
    }
    let mid = v.len() / 2;
    {
        let (lo, hi) = v.split_at_mut(mid);
        let (slo, shi) = scratch.split_at_mut(mid);
        par::join(|| sort(lo, slo), || sort(hi, shi));
    }
    let (mut i, mut j) = (0, mid);
    for slot in scratch.iter_mut() {
        if j >= v.len() || (i < mid && v[i] <= v[j]) {
            *slot = v[i];
            i += 1;
        } else {
            *slot = v[j];
            j += 1;
        }
    }
    v.copy_from_slice(scratch);
}

/// A balanced tree of `depth` levels of joins whose leaves call `leaf`;
/// returns the number of leaves.
fn tree(depth: u32, leaf: &(dyn Fn() + Sync)) -> u64 {
    if depth == 0 {
        leaf();
        return 1;
    }
    let (a, b) = par::join(|| tree(depth - 1, leaf), || tree(depth - 1, leaf));
    a + b
}

fn forks(rt: &Runtime) -> u64 {
    counter(rt, "/par{locality#0/total}/count/forks") as u64
}

fn counter(rt: &Runtime, name: &str) -> f64 {
    let mut set = rt.counters([name]).expect("counter name");
    futures::executor::block_on(set.evaluate(false)).expect("evaluate")[0].value
}

fn with_inlining<T: Send + 'static>(
    inlining: Inlining,
    main: impl FnOnce(Runtime) -> Result<T, BoxError> + Send + 'static,
) -> T {
    let config = common::inproc(1).workers(2).inlining(inlining);
    courier::launch(config, move |rt| async move { main(rt) }).expect("the job")
}

#[test]
fn results_and_calls_are_the_same_under_every_inlining() {
    let _turn = common::take_turns();
    let input: Vec<u64> = (0..20_000u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40)
        .collect();
    let mut expected = input.clone();
    expected.sort_unstable();
    for inlining in [
        Inlining::Adaptive,
        Inlining::Never,
        Inlining::Depth(0),
        Inlining::Depth(3),
    ] {
        let input = input.clone();
        let (value, calls, sorted, leaves, forked) = with_inlining(inlining, move |rt| {
            let calls = AtomicU64::new(0);
            let value = fib(18, &calls);
            let mut v = input;
            let mut scratch = vec![0; v.len()];
            sort(&mut v, &mut scratch);
            let before = forks(&rt);
            let leaves = tree(6, &|| {});
            let forked = forks(&rt) - before;
            Ok((value, calls.into_inner(), v, leaves, forked))
        });
        assert_eq!(value, 2584, "{inlining:?}");
        // fib(n) makes 2·fib(n+1) − 1 calls: each closure ran once.
        assert_eq!(calls, 2 * 4181 - 1, "{inlining:?}");
        assert!(sorted == expected, "{inlining:?}: the merge sort is wrong");
        assert_eq!(leaves, 64, "{inlining:?}");
        match inlining {
            // Every one of the tree's 63 joins forks.
            Inlining::Never => assert_eq!(forked, 63),
            Inlining::Depth(0) => assert_eq!(forked, 0),
            // Depths 0, 1 and 2 fork: 1 + 2 + 4 joins.
            Inlining::Depth(3) => assert_eq!(forked, 7),
            _ => {}
        }
    }
}

#[test]
fn adaptive_inlining_forks_costly_children_and_inlines_cheap_ones() {
    let _turn = common::take_turns();
    let (cheap, costly): (u64, Vec<u64>) = with_inlining(Inlining::Adaptive, |rt| {
        let overhead = counter(&rt, "/par{locality#0/total}/time/task-overhead");
        let lambda = counter(&rt, "/par{locality#0/total}/parameter/lambda-min");
        assert!(overhead > 0.0, "the overhead is measured before main runs");
        let threshold = Duration::from_nanos((overhead * lambda) as u64);
        // Cheap: 127 joins of empty leaves (a top child of 63 joins takes
        // a few µs even in a debug build on a loaded machine, a tenth of
        // the threshold; 1,023 came near it there and forked twice); the
        // second run knows them.
        tree(7, &|| {});
        let before = forks(&rt);
        tree(7, &|| {});
        let cheap = forks(&rt) - before;
        // Costly: every leaf takes twice the threshold, so every join's
        // second closure is worth a task.
        // The estimates of this site were learned on cheap leaves: each
        // worker finds the children costly the first time it runs them
        // (a worker learns in its own tables), so within a run per
        // worker and one more, every join forks.
        let leaf = threshold * 2;
        let mut costly = Vec::new();
        while costly.last() != Some(&7) && costly.len() < 4 {
            let before = forks(&rt);
            tree(3, &|| common::spin(leaf));
            costly.push(forks(&rt) - before);
        }
        Ok((cheap, costly))
    });
    assert_eq!(cheap, 0, "cheap children known to be cheap are inlined");
    assert!(
        costly.len() <= 3 && costly.last() == Some(&7),
        "all 7 joins of costly children fork by the third run: {costly:?}"
    );
}

#[test]
fn deep_joins_that_grew_costly_fork_again_once_sampled() {
    let _turn = common::take_turns();
    // One worker: it runs every join, so its tables see every change (with
    // two, a worker that runs few of the costly joins at a depth spends
    // the untimed calls it was given on them over more runs).
    let config = common::inproc(1).workers(1).inlining(Inlining::Adaptive);
    let runs: Vec<u64> = courier::launch(config, |rt| async move {
        // Read with `.await`: the one worker must be free to answer.
        let mut set = rt.counters([
            "/par{locality#0/total}/time/task-overhead",
            "/par{locality#0/total}/parameter/lambda-min",
            "/par{locality#0/total}/count/forks",
        ])?;
        let values = set.evaluate(false).await?;
        let threshold = Duration::from_nanos((values[0].value * values[1].value) as u64);
        // Cheap leaves, learned: the deep joins (depths 3 to 5) then run
        // inline without a look until their next sample (7, 15 and 31 of
        // them).
        for _ in 0..3 {
            tree(6, &|| {});
        }
        // The same joins, now costly: each one's next sample finds it so
        // and lets none run untimed after it, so they fork from then on.
        let leaf = threshold * 2;
        let mut runs = Vec::new();
        while runs.last() != Some(&63) && runs.len() < 4 {
            let before = set.evaluate(false).await?[2].value;
            tree(6, &|| common::spin(leaf));
            runs.push((set.evaluate(false).await?[2].value - before) as u64);
        }
        Ok::<_, BoxError>(runs)
    })
    .expect("the job");
    // The first costly run spends what is left of the untimed calls (at
    // most 7, 15 and 31 at depths 3 to 5, fewer than the joins there);
    // its samples find them costly.
    assert!(
        runs.len() <= 2 && runs.last() == Some(&63),
        "all 63 joins of costly children fork from the second run on: {runs:?}"
    );
}

#[test]
fn a_panic_in_either_closure_reaches_the_caller_and_the_workers_go_on() {
    let _turn = common::take_turns();
    for inlining in [Inlining::Never, Inlining::Depth(0)] {
        let out = with_inlining(inlining, |_rt| {
            let in_b = std::panic::catch_unwind(|| par::join(|| 1, || -> u32 { panic!("in b") }));
            let in_a = std::panic::catch_unwind(|| {
                par::join(
                    || -> u32 { panic!("in a") },
                    || {
                        common::spin(Duration::from_millis(5));
                        2
                    },
                )
            });
            let after = fib(12, &AtomicU64::new(0));
            Ok((
                in_b.unwrap_err().downcast_ref::<&str>().copied(),
                in_a.unwrap_err().downcast_ref::<&str>().copied(),
                after,
            ))
        });
        assert_eq!(out, (Some("in b"), Some("in a"), 144), "{inlining:?}");
    }
}

#[test]
fn join_outside_the_workers_runs_both_closures() {
    let calls = AtomicU64::new(0);
    assert_eq!(fib(10, &calls), 55);
    assert_eq!(calls.into_inner(), 2 * 89 - 1);
}

#[test]
fn many_tasks_forking_at_once_lose_and_repeat_nothing() {
    let _turn = common::take_turns();
    let config = common::inproc(1).workers(2).inlining(Inlining::Never);
    let (sums, calls) = courier::launch(config, |rt| async move {
        let calls = std::sync::Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let calls = std::sync::Arc::clone(&calls);
                rt.spawn(async move { (0..10).map(|_| fib(14, &calls)).sum::<u64>() })
            })
            .collect();
        let mut sums = Vec::new();
        for handle in handles {
            sums.push(handle.await);
        }
        Ok((sums, calls.load(Ordering::Relaxed)))
    })
    .expect("the job");
    assert_eq!(sums, vec![3770; 8]);
    assert_eq!(calls, 8 * 10 * (2 * 610 - 1));
}

/// Spins for `us` µs and says which thread ran it.
#[courier::action(coalescing)]
fn busy(us: u64) -> String {
    common::spin(Duration::from_micros(us));
    std::thread::current().name().unwrap_or("?").to_owned()
}

#[test]
fn a_received_run_of_costly_calls_is_split_across_the_workers() {
    let _turn = common::take_turns();
    let setting = "count:num_parcels=16,interval_us=100000".parse().unwrap();
    let config = common::inproc(2)
        .workers(2)
        .coalesce_action("busy", setting);
    let (first, second) = courier::launch(config, |rt| async move {
        let overhead = counter(&rt, "/par{locality#0/total}/time/task-overhead");
        let lambda = counter(&rt, "/par{locality#0/total}/parameter/lambda-min");
        // Each call is worth a task of its own: twice the threshold, and
        // at least 2 ms, so that the other worker, woken or given a core,
        // is running long before the run is over.
        let us = ((2.0 * overhead * lambda) / 1e3).ceil().max(2000.0) as u64;
        let there = rt.locality(1);
        let mut threads = Vec::new();
        for _ in 0..2 {
            // 16 calls fill the coalescing buffer: one frame, one run.
            let names = rt.call_batch(busy, (0..16).map(|_| (there, (us,)))).await?;
            assert_eq!(names.len(), 16, "every call ran once");
            let mut names = names;
            names.sort();
            names.dedup();
            threads.push(names);
        }
        Ok((threads[0].clone(), threads[1].clone()))
    })
    .expect("the job");
    // The first run teaches what a call costs (it may run on one worker);
    // the second is split, and both workers of locality 1 take calls.
    assert!(
        first.iter().all(|t| t.starts_with("courier-1-worker")),
        "{first:?}"
    );
    assert_eq!(second.len(), 2, "the second run ran on {second:?}");
}
