//! `Runtime::spawn` and dynamic inlining (issue #16): results are the
//! same whatever the inlining decides, a measured short site runs inline
//! and a long one never does, a site whose children grew is queued again
//! by its next sample, `Inlining::Never` never inlines, a child
//! that waits on its first poll still completes, a panic comes back where
//! the handle is awaited, and deep nesting stays within its bound.
//!
//! On one worker, a queued child cannot have run before its parent waits:
//! a handle that is finished right after `spawn` returned is one whose
//! child ran inline. That is what most of these tests observe; no timing
//! is asserted.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use courier::par::Inlining;
use courier::{BoxError, JoinHandle, Runtime};
use futures::FutureExt;
use futures::channel::oneshot;
use futures::future::BoxFuture;

/// Runs `main` as the main function of a one-locality job of `workers`
/// workers under `inlining`.
fn run<T: Send + 'static>(
    workers: usize,
    inlining: Inlining,
    main: impl FnOnce(Runtime) -> BoxFuture<'static, Result<T, BoxError>> + Send + 'static,
) -> T {
    let config = common::inproc(1).workers(workers).inlining(inlining);
    courier::launch(config, main).expect("the job")
}

/// What one run of [`tree`] saw.
#[derive(Debug, Default)]
struct Seen {
    /// Nodes run.
    nodes: AtomicU64,
    /// Children whose handle was finished right after `spawn` returned,
    /// by the depth of their parent (deeper ones in the last entry).
    at_once: [AtomicU64; 8],
}

/// A tree of spawns, `fanout` children a node and `depth` levels below
/// this one, summing a value per node: node `i`'s value is `i`, its
/// children are `fanout·i + 1 ..= fanout·i + fanout` (a heap's numbering).
fn tree(rt: Runtime, i: u64, depth: u32, level: usize, seen: Arc<Seen>) -> BoxFuture<'static, u64> {
    const FANOUT: u64 = 3;
    Box::pin(async move {
        seen.nodes.fetch_add(1, Ordering::Relaxed);
        if depth == 0 {
            return i;
        }
        let children: Vec<JoinHandle<u64>> = (1..=FANOUT)
            .map(|k| {
                let child = rt.spawn(tree(
                    rt.clone(),
                    FANOUT * i + k,
                    depth - 1,
                    level + 1,
                    Arc::clone(&seen),
                ));
                if child.is_finished() {
                    seen.at_once[level.min(7)].fetch_add(1, Ordering::Relaxed);
                }
                child
            })
            .collect();
        let mut sum = i;
        for child in children {
            sum += child.await;
        }
        sum
    })
}

/// The sum of the node numbers of a tree of `depth` levels below its root
/// 0, fanout 3: nodes 0 to (3^(depth+1) − 1)/2 − 1.
fn tree_sum(depth: u32) -> (u64, u64) {
    let nodes = (3u64.pow(depth + 1) - 1) / 2;
    (nodes * (nodes - 1) / 2, nodes)
}

#[test]
fn inlining_never_changes_results() {
    const DEPTH: u32 = 6;
    const RUNS: usize = 12;
    let (sum, nodes) = tree_sum(DEPTH);
    for workers in [1, 2] {
        for inlining in [Inlining::Adaptive, Inlining::Never, Inlining::Depth(2)] {
            let (sums, counts, at_once, inlined) = run(workers, inlining, |rt| {
                Box::pin(async move {
                    let mut inlined = rt.counters(["/threads{locality#0/total}/count/inlined"])?;
                    inlined.reset().await?;
                    let (mut sums, mut counts, mut at_once) = (Vec::new(), Vec::new(), 0);
                    // Several runs: the adaptive policy measures the first
                    // and inlines in the next ones.
                    for _ in 0..RUNS {
                        let seen = Arc::new(Seen::default());
                        sums.push(tree(rt.clone(), 0, DEPTH, 0, Arc::clone(&seen)).await);
                        counts.push(seen.nodes.load(Ordering::Relaxed));
                        at_once += seen
                            .at_once
                            .iter()
                            .map(|n| n.load(Ordering::Relaxed))
                            .sum::<u64>();
                    }
                    let inlined = inlined.evaluate(false).await?[0].value;
                    Ok((sums, counts, at_once, inlined))
                })
            });
            let what = format!("{inlining:?} on {workers} workers");
            assert!(
                sums.iter().all(|&s| s == sum),
                "{what}: sums {sums:?}, not {sum}"
            );
            assert!(
                counts.iter().all(|&n| n == nodes),
                "{what}: nodes run {counts:?}, not {nodes} each"
            );
            match inlining {
                // On two workers a thief may finish a queued leaf before
                // its parent looks: the count says whether any ran inline.
                Inlining::Never => {
                    assert_eq!(inlined, 0.0, "{what}: a child ran inline");
                    if workers == 1 {
                        assert_eq!(at_once, 0, "{what}: a child ran inline");
                    }
                }
                // Only the adaptive policy on one worker is sure to inline
                // (on two, a thief may keep the deque empty).
                Inlining::Adaptive if workers > 1 => {}
                _ => assert!(at_once > 0, "{what}: no child ran inline"),
            }
        }
    }
}

#[test]
fn a_fixed_depth_inlines_the_spawns_from_that_depth_on() {
    const DEPTH: u32 = 5;
    let seen = run(1, Inlining::Depth(3), |rt| {
        Box::pin(async move {
            let seen = Arc::new(Seen::default());
            tree(rt.clone(), 0, DEPTH, 0, Arc::clone(&seen)).await;
            Ok(seen)
        })
    });
    let at_once: Vec<u64> = seen
        .at_once
        .iter()
        .map(|n| n.load(Ordering::Relaxed))
        .collect();
    // Children of nodes at depths 0, 1, 2 are queued; of nodes at depths
    // 3 and 4 (3^3 and 3^4 nodes, three children each) run inline.
    assert_eq!(at_once, [0, 0, 0, 81, 243, 0, 0, 0]);
}

/// Spawns the short child of this one site.
fn short(rt: &Runtime) -> JoinHandle<u64> {
    rt.spawn(async { 7 })
}

/// On locality 1, spawns `n` short children one after another (awaiting
/// each), after one to measure the site; returns how many ran inline.
#[courier::action]
async fn spawn_short_children(n: u64) -> u64 {
    let rt = courier::current();
    let first = short(&rt);
    assert!(!first.is_finished(), "an unmeasured site is queued");
    assert_eq!(first.await, 7);
    let mut inline = 0;
    for _ in 0..n {
        let child = short(&rt);
        inline += u64::from(child.is_finished());
        assert_eq!(child.await, 7);
    }
    inline
}

#[test]
fn a_short_site_runs_inline_once_measured_and_is_counted() {
    const N: u64 = 200;
    for (inlining, expect_inline) in [(Inlining::Adaptive, true), (Inlining::Never, false)] {
        let config = common::inproc(2).workers(1).inlining(inlining);
        let (inline, counted) = courier::launch(config, |rt| async move {
            let mut set = rt.counters(["/threads{locality#1/total}/count/inlined"])?;
            set.reset().await?;
            let inline = rt.call(rt.locality(1), spawn_short_children, (N,)).await?;
            let counted = set.evaluate(false).await?[0].value;
            Ok((inline, counted))
        })
        .unwrap();
        assert_eq!(counted, inline as f64, "{inlining:?}: the counter");
        if expect_inline {
            // A sample that a loaded machine stretched past the threshold
            // queues a few children until the next sample: most run inline.
            assert!(inline > N / 2, "{inlining:?}: {inline} of {N} ran inline");
        } else {
            assert_eq!(inline, 0, "{inlining:?}: a child ran inline");
        }
    }
}

/// A child's duration well above the threshold from which it is worth
/// a task (`λ_min` times the measured task overhead), whatever the build
/// and the load: four times it, at least 1 ms.
async fn well_above_threshold(rt: &Runtime) -> Result<Duration, BoxError> {
    let mut set = rt.counters([
        "/par{locality#0/total}/time/task-overhead",
        "/par{locality#0/total}/parameter/lambda-min",
    ])?;
    let values = set.evaluate(false).await?;
    let threshold_ns = values[0].value * values[1].value;
    assert!(
        threshold_ns > 0.0,
        "the overhead is measured before main runs"
    );
    Ok(Duration::from_nanos((4.0 * threshold_ns) as u64).max(Duration::from_millis(1)))
}

/// Spawns the child of this one site, which spins for `spin`.
fn sized_child(rt: &Runtime, spin: Duration) -> JoinHandle<u64> {
    rt.spawn(async move {
        common::spin(spin);
        1u64
    })
}

#[test]
fn a_long_site_is_never_inlined() {
    let queued = run(1, Inlining::Adaptive, |rt| {
        Box::pin(async move {
            let long = well_above_threshold(&rt).await?;
            let mut queued = 0;
            for _ in 0..5 {
                let child = sized_child(&rt, long);
                queued += u64::from(!child.is_finished());
                assert_eq!(child.await, 1);
            }
            Ok(queued)
        })
    });
    assert_eq!(queued, 5, "a long child ran inline");
}

#[test]
fn a_site_whose_children_grew_is_queued_again_by_its_next_sample() {
    // The most spawns a site measured far below the threshold runs
    // inline between two samples (`SAMPLE_FAR_BELOW` in `inline.rs`).
    const BETWEEN_SAMPLES: u64 = 256;
    let (short_inline, long_inline, last_queued) = run(1, Inlining::Adaptive, |rt| {
        Box::pin(async move {
            let long = well_above_threshold(&rt).await?;
            let mut short_inline = 0;
            for _ in 0..2 * BETWEEN_SAMPLES {
                let child = sized_child(&rt, Duration::ZERO);
                short_inline += u64::from(child.is_finished());
                assert_eq!(child.await, 1);
            }
            let (mut long_inline, mut last_queued) = (0, 0);
            for i in 0..BETWEEN_SAMPLES + 8 {
                let child = sized_child(&rt, long);
                let inline = child.is_finished();
                long_inline += u64::from(inline);
                if i >= BETWEEN_SAMPLES + 3 {
                    last_queued += u64::from(!inline);
                }
                assert_eq!(child.await, 1);
            }
            Ok((short_inline, long_inline, last_queued))
        })
    });
    assert!(
        short_inline > BETWEEN_SAMPLES,
        "{short_inline} short children ran inline"
    );
    assert!(
        long_inline <= BETWEEN_SAMPLES,
        "{long_inline} long children ran inline, more than between two samples"
    );
    assert_eq!(last_queued, 5, "the last long children ran inline");
}

/// Spawns the child of this one site: it returns 1 at once, or (given a
/// receiver) waits for what its parent sends after `spawn` returned. It
/// sets `started` when it starts.
fn waiting_child(
    rt: &Runtime,
    rx: Option<oneshot::Receiver<u64>>,
    started: Arc<AtomicBool>,
) -> JoinHandle<u64> {
    rt.spawn(async move {
        started.store(true, Ordering::Relaxed);
        match rx {
            Some(rx) => rx.await.expect("the parent sends") + 1,
            None => 1,
        }
    })
}

/// Attempts at running a child inline after measuring its site: a sample
/// that a loaded machine stretched past the threshold queues it instead.
const ATTEMPTS: usize = 8;

#[test]
fn a_child_that_waits_on_its_first_poll_completes() {
    let out = common::with_deadline("a child that waits", Duration::from_secs(60), || {
        run(1, Inlining::Adaptive, |rt| {
            Box::pin(async move {
                let started = Arc::new(AtomicBool::new(false));
                let mut outcomes = Vec::new();
                for _ in 0..ATTEMPTS {
                    // Measured short: children that do not wait.
                    for _ in 0..16 {
                        assert_eq!(waiting_child(&rt, None, Arc::clone(&started)).await, 1);
                    }
                    let (tx, rx) = oneshot::channel();
                    started.store(false, Ordering::Relaxed);
                    let child = waiting_child(&rt, Some(rx), Arc::clone(&started));
                    // Run inline, it ran up to its `.await`, and waits.
                    let ran_inline = started.load(Ordering::Relaxed);
                    let finished = child.is_finished();
                    tx.send(41).expect("the child waits");
                    outcomes.push((ran_inline, finished, child.await));
                    if ran_inline {
                        break;
                    }
                }
                Ok(outcomes)
            })
        })
    });
    assert!(
        out.iter()
            .all(|&(_, finished, value)| !finished && value == 42),
        "{out:?}"
    );
    assert!(out.last().is_some_and(|o| o.0), "never ran inline: {out:?}");
}

/// Spawns the child of this one site: returns 1, or panics.
fn maybe_panicking_child(rt: &Runtime, panic: bool) -> JoinHandle<u64> {
    rt.spawn(async move {
        assert!(!panic, "the child panics");
        1
    })
}

#[test]
fn a_panic_of_a_child_run_inline_comes_back_where_it_is_awaited() {
    let outcomes = run(1, Inlining::Adaptive, |rt| {
        Box::pin(async move {
            let mut outcomes = Vec::new();
            for _ in 0..ATTEMPTS {
                for _ in 0..16 {
                    assert_eq!(maybe_panicking_child(&rt, false).await, 1);
                }
                let child = maybe_panicking_child(&rt, true);
                let ran_inline = child.is_finished();
                let payload = std::panic::AssertUnwindSafe(child)
                    .catch_unwind()
                    .await
                    .expect_err("the child panicked");
                // A dropped handle's panic goes nowhere; the parent goes on.
                drop(maybe_panicking_child(&rt, true));
                let after = maybe_panicking_child(&rt, false).await;
                outcomes.push((ran_inline, payload.downcast_ref::<&str>().copied(), after));
                if ran_inline {
                    break;
                }
            }
            Ok(outcomes)
        })
    });
    assert!(
        outcomes
            .iter()
            .all(|&(_, payload, after)| payload == Some("the child panics") && after == 1),
        "{outcomes:?}"
    );
    assert!(
        outcomes.last().is_some_and(|o| o.0),
        "never ran inline: {outcomes:?}"
    );
}

/// A chain of `n` spawns, each awaiting the next.
fn chain(rt: Runtime, n: u64) -> BoxFuture<'static, u64> {
    Box::pin(async move {
        if n == 0 {
            return 0;
        }
        let next = rt.spawn(chain(rt.clone(), n - 1));
        next.await + 1
    })
}

#[test]
fn a_deep_chain_of_spawns_inlined_stays_within_the_nesting_bound() {
    // Every spawn would run inline (a cutoff at depth 0) but for the
    // bound: nested 20,000 deep, the inline polls would overflow a
    // worker's stack.
    const N: u64 = 20_000;
    for workers in [1, 2] {
        let out = run(workers, Inlining::Depth(0), |rt| {
            Box::pin(async move { Ok(chain(rt.clone(), N).await) })
        });
        assert_eq!(out, N, "on {workers} workers");
    }
}

#[test]
fn spawns_from_outside_the_workers_are_queued() {
    const N: u64 = 64;
    let config = common::inproc(1).workers(1);
    let out = courier::launch(config, |rt| async move {
        let outside = rt.clone();
        let (tx, rx) = oneshot::channel();
        std::thread::spawn(move || {
            // The site as a worker would have measured it.
            assert_eq!(futures::executor::block_on(short(&outside)), 7);
            // The only worker is kept busy until the children are spawned
            // (or for a while, should it run here instead).
            let gate = Arc::new(AtomicBool::new(false));
            let open = Arc::clone(&gate);
            let busy = outside.spawn(async move {
                let start = std::time::Instant::now();
                while !open.load(Ordering::Acquire) && start.elapsed() < Duration::from_secs(2) {
                    std::hint::spin_loop();
                }
            });
            let children: Vec<_> = (0..N).map(|_| short(&outside)).collect();
            let at_once = children.iter().filter(|c| c.is_finished()).count();
            gate.store(true, Ordering::Release);
            futures::executor::block_on(busy);
            let sum: u64 = children.into_iter().map(futures::executor::block_on).sum();
            let _ = tx.send((sum, at_once));
        });
        Ok(rx.await?)
    })
    .unwrap();
    assert_eq!(out, (N * 7, 0), "(sum, children finished at once)");
}
