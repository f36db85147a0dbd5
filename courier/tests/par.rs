//! Parallel loops (issue #16): every index runs exactly once whatever the
//! chunking, results combine in the order of the range, `Auto` sizes chunks
//! from what the iterations cost, and a panicking body fails the awaiting
//! task.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use courier::Error;
use courier::par::{self, Chunking, LoopReport};

/// The chunkings the exactly-once tests try: the degenerate sizes, a
/// prime, one larger than any range, and auto.
const CHUNKINGS: [Chunking; 5] = [
    Chunking::Static(0),
    Chunking::Static(1),
    Chunking::Static(7),
    Chunking::Static(1 << 20),
    Chunking::Auto,
];

fn check_report(report: &LoopReport, len: usize) {
    let chunked = len - report.measured;
    assert_eq!(report.chunks, chunked.div_ceil(report.chunk), "{report:?}");
    assert!(report.chunk >= 1, "{report:?}");
}

#[test]
fn every_index_runs_exactly_once() {
    let config = common::inproc(1).workers(2);
    courier::launch(config, |_rt| async move {
        // The last is reversed, hence empty, on purpose.
        #[allow(clippy::reversed_empty_ranges)]
        let ranges = [0..0, 5..5, 0..1, 3..1000, 0..100_000, 7..3];
        for range in ranges {
            for chunking in CHUNKINGS {
                let end = range.end.max(range.start);
                let seen: Arc<Vec<AtomicU8>> =
                    Arc::new((0..end + 10).map(|_| AtomicU8::new(0)).collect());
                let counts = Arc::clone(&seen);
                let report = par::for_each(range.clone(), chunking, move |i| {
                    counts[i].fetch_add(1, Ordering::Relaxed);
                })
                .await;
                for (i, n) in seen.iter().enumerate() {
                    let expected = u8::from(range.contains(&i));
                    assert_eq!(
                        n.load(Ordering::Relaxed),
                        expected,
                        "index {i} of {range:?} with {chunking:?}"
                    );
                }
                check_report(&report, range.len());
                if let Chunking::Static(n) = chunking {
                    assert_eq!(report.chunk, n.max(1));
                    assert_eq!(report.measured, 0);
                }
            }
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn map_reduce_combines_in_the_order_of_the_range() {
    let config = common::inproc(1).workers(2);
    courier::launch(config, |_rt| async move {
        for chunking in [Chunking::Static(1), Chunking::Static(33), Chunking::Auto] {
            // Concatenation: associative, not commutative.
            let (report, all) = par::map_reduce(
                10..5000,
                chunking,
                Vec::new(),
                |i| vec![i],
                |mut a, b| {
                    a.extend(b);
                    a
                },
            )
            .await;
            assert_eq!(all, (10..5000).collect::<Vec<_>>(), "{chunking:?}");
            check_report(&report, 4990);
            let (_, sum) =
                par::map_reduce(0..100_000, chunking, 0u64, |i| i as u64, |a, b| a + b).await;
            assert_eq!(sum, 99_999 * 100_000 / 2);
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn auto_chunks_cheap_iterations_together_and_expensive_ones_apart() {
    let config = common::inproc(1).workers(2);
    courier::launch(config, |_rt| async move {
        let cheap = par::for_each(0..1_000_000, Chunking::Auto, |i| {
            std::hint::black_box(i);
        })
        .await;
        // 2 ms an iteration: far above λ_min task overheads even in a debug
        // build (where a task costs about 1 µs; 200 µs was not, and auto
        // rightly chunked 6 of them together under CI).
        let costly = par::for_each(0..40, Chunking::Auto, |_| {
            common::spin(Duration::from_millis(2))
        })
        .await;
        assert!(cheap.chunk >= 100, "{cheap:?}");
        assert!(
            cheap.chunks >= 8,
            "every worker gets chunks to share: {cheap:?}"
        );
        // A chunk of λ_min task overheads holds about one 2 ms iteration.
        assert!(costly.chunk <= 4, "{costly:?}");
        assert!(costly.chunk * 100 <= cheap.chunk, "{costly:?} {cheap:?}");
        assert!(costly.measured <= 2, "{costly:?}");
        assert!(costly.iteration_ns.unwrap() >= 2_000_000.0, "{costly:?}");
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_panicking_body_fails_the_task_that_awaits_the_loop() {
    let config = common::inproc(1).workers(2);
    let result = courier::launch(config, |_rt| async move {
        par::for_each(0..1000, Chunking::Static(10), |i| {
            assert!(i != 567, "index {i}")
        })
        .await;
        Ok(())
    });
    let Err(Error::MainPanicked(message)) = result else {
        panic!("the loop's panic was lost: {result:?}");
    };
    assert!(message.contains("index 567"), "{message}");
}

#[test]
fn the_task_overhead_and_lambda_min_are_counters() {
    let config = common::inproc(1).workers(2);
    courier::launch(config, |rt| async move {
        let report = par::for_each(0..100_000, Chunking::Auto, |i| {
            std::hint::black_box(i);
        })
        .await;
        let values = rt
            .counters([
                "/par{locality#0/total}/time/task-overhead",
                "/par{locality#0/total}/parameter/lambda-min",
            ])?
            .evaluate(false)
            .await?;
        let overhead = values[0].value;
        // Spawning, running and joining an empty task: more than a
        // nanosecond, far less than a millisecond.
        assert!(overhead > 1.0 && overhead < 1e6, "{overhead} ns");
        assert_eq!(values[1].value, par::LAMBDA_MIN);
        // Auto sized its chunks from it: λ_min overheads of the iteration
        // time (or the share of the range four chunks per worker leave).
        let target = par::LAMBDA_MIN * overhead.max(50.0) / report.iteration_ns.unwrap().max(0.01);
        assert!(
            report.chunk as f64 <= target.ceil() && report.chunk <= 100_000usize.div_ceil(8),
            "{report:?}, overhead {overhead} ns"
        );
        Ok(())
    })
    .unwrap();
}

/// The locality it ran on, its block, and the sum of the block's indices
/// by a local auto-chunked loop.
#[courier::action]
async fn block_sum(start: usize, end: usize) -> (u32, usize, usize, u64) {
    let (_, sum) =
        par::map_reduce(start..end, Chunking::Auto, 0u64, |i| i as u64, |a, b| a + b).await;
    (courier::current().here().get(), start, end, sum)
}

fn check_blocks(parts: &[(u32, usize, usize, u64)], range: std::ops::Range<usize>, n: u32) {
    assert_eq!(parts.len(), n as usize, "one call per locality");
    let mut at = range.start;
    for (rank, (here, start, end, sum)) in parts.iter().enumerate() {
        assert_eq!(*here, rank as u32, "block {rank} ran on locality {rank}");
        assert_eq!(*start, at, "the blocks are contiguous, in locality order");
        assert_eq!(*sum, (*start..*end).map(|i| i as u64).sum::<u64>());
        at = *end;
    }
    assert_eq!(at, range.end, "the blocks cover the range");
    let total: u64 = parts.iter().map(|p| p.3).sum();
    assert_eq!(total, range.map(|i| i as u64).sum::<u64>());
}

#[test]
fn for_each_locality_gives_every_locality_one_block() {
    let config = common::inproc(3).workers(1);
    courier::launch(config, |rt| async move {
        for range in [0..1_000_000, 10..12, 5..5] {
            let parts = par::for_each_locality(&rt, range.clone(), block_sum).await?;
            check_blocks(&parts, range, 3);
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn for_each_locality_over_tcp() {
    let name = "for_each_locality_over_tcp";
    courier::launch(common::tcp(name, 2).workers(1), |rt| async move {
        let parts = par::for_each_locality(&rt, 3..200_003, block_sum).await?;
        check_blocks(&parts, 3..200_003, 2);
        Ok(())
    })
    .unwrap();
}

#[test]
fn slice_loops_visit_every_element_once_and_reduce_in_order() {
    let config = common::inproc(1).workers(2);
    courier::launch(config, |_rt| async move {
        for len in [0usize, 1, 5, 1000, 100_003] {
            for chunking in CHUNKINGS {
                // Each element counts its visits, borrowed from this stack.
                let mut visits = vec![0u8; len];
                par::for_each_mut(&mut visits, chunking, |v| *v += 1);
                assert!(
                    visits.iter().all(|v| *v == 1),
                    "len {len}, {chunking:?}: an element was visited {} times",
                    visits.iter().find(|v| **v != 1).unwrap()
                );
                // Concatenation is associative, not commutative: the
                // result is in order only if every piece is combined in
                // the order of the slice.
                let items: Vec<usize> = (0..len).collect();
                let ordered = par::map_reduce_slice(
                    &items,
                    chunking,
                    Vec::new(),
                    |i| vec![*i],
                    |mut a, b| {
                        a.extend(b);
                        a
                    },
                );
                assert_eq!(ordered, items, "len {len}, {chunking:?}");
            }
        }
        Ok(())
    })
    .unwrap();
}
