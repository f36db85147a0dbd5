//! Segmented and vector calls: a call of many times the target's buffers
//! completes, every segment's output lands at its place, the handler runs
//! once per unit, and units travel packed or whole by the threshold.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::with_deadline;
use courier::{Config, Runtime, SegmentOptions, SegmentOutput, SegmentUnit};

/// Units this process's handlers ran.
static UNITS_RUN: AtomicU64 = AtomicU64::new(0);

/// For segment `n`, `n % (MAX + 1)` items `n * 100 + k`: a vector AM whose
/// output varies from nothing to every slot.
const MAX: u32 = 5;

#[courier::action]
fn varied(unit: SegmentUnit<u64>) -> SegmentOutput<u64> {
    UNITS_RUN.fetch_add(1, Ordering::Relaxed);
    let mut out = unit.output();
    for (i, &n) in unit.segments().iter().enumerate() {
        for k in 0..n % u64::from(MAX + 1) {
            out.push(i, n * 100 + k).unwrap();
        }
    }
    out
}

fn expected(n: u64) -> Vec<u64> {
    (0..n % u64::from(MAX + 1)).map(|k| n * 100 + k).collect()
}

async fn counter(rt: &Runtime, name: &str) -> Result<f64, courier::BoxError> {
    let values = rt.counters([name])?.evaluate(false).await?;
    Ok(values[0].value)
}

/// One call of `n` segments to locality 1, checked segment by segment.
fn big_call(config: Config, n: u64, options: SegmentOptions) {
    with_deadline("a segmented call", Duration::from_secs(60), move || {
        courier::launch(config, move |rt| async move {
            let segments: Vec<u64> = (0..n).collect();
            let out = rt
                .call_segments(rt.locality(1), varied, &segments, options)
                .await?;
            assert_eq!(out.len(), n as usize);
            for i in 0..n {
                assert_eq!(out.segment(i as usize), expected(i), "segment {i}");
                let place = i as usize * MAX as usize;
                let len = expected(i).len();
                assert_eq!(&out.data()[place..place + len], expected(i).as_slice());
            }
            let units = counter(&rt, "/segments{locality#0/total}/count/units").await?;
            assert!(units > 10.0, "only {units} units");
            let packed = counter(&rt, "/segments{locality#0/total}/count/units-packed").await?;
            let whole = counter(&rt, "/segments{locality#0/total}/count/units-whole").await?;
            assert_eq!(packed + whole, units, "every unit came back once");
            Ok(())
        })
        .unwrap();
    });
}

#[test]
fn a_call_of_ten_times_the_targets_buffers_completes_inproc() {
    // 20,000 segments of about 4 bytes: 80 KB against a 4 KiB window.
    big_call(
        common::inproc(2).workers(1).credit_window(4096),
        20_000,
        SegmentOptions::new(MAX),
    );
}

#[test]
fn a_call_of_ten_times_the_targets_buffers_completes_tcp() {
    big_call(
        common::tcp("a_call_of_ten_times_the_targets_buffers_completes_tcp", 2)
            .workers(1)
            .credit_window(4096),
        20_000,
        SegmentOptions::new(MAX),
    );
}

#[test]
fn the_handler_runs_once_per_unit_and_none_is_lost_in_parallel_calls() {
    let config = common::inproc(3).workers(2).credit_window(8192);
    with_deadline(
        "parallel segmented calls",
        Duration::from_secs(60),
        move || {
            courier::launch(config, |rt| async move {
                let before = UNITS_RUN.load(Ordering::Relaxed);
                let segments: Vec<u64> = (0..3000).collect();
                let options = SegmentOptions::new(MAX).unit_bytes(64);
                let calls: Vec<_> = (0..6)
                    .map(|k| rt.call_segments(rt.locality(1 + k % 2), varied, &segments, options))
                    .collect();
                for call in calls {
                    let out = call.await?;
                    for i in [0usize, 1, 5, 6, 2999] {
                        assert_eq!(out.segment(i), expected(i as u64));
                    }
                }
                let units = counter(&rt, "/segments{locality#0/total}/count/units").await?;
                let calls = counter(&rt, "/segments{locality#0/total}/count/calls").await?;
                assert_eq!(calls, 6.0);
                // Inproc: every handler ran in this process.
                assert_eq!((UNITS_RUN.load(Ordering::Relaxed) - before) as f64, units);
                Ok(())
            })
            .unwrap();
        },
    );
}

/// A unit's output is packed below the threshold and whole above it.
#[courier::action]
fn fill(unit: SegmentUnit<u32>) -> SegmentOutput<u32> {
    let mut out = unit.output();
    for (i, &items) in unit.segments().iter().enumerate() {
        for k in 0..items {
            out.push(i, k).unwrap();
        }
    }
    out
}

#[test]
fn the_threshold_switches_between_packed_and_whole() {
    courier::launch(common::inproc(2), |rt| async move {
        let stat = |name: &'static str| {
            let rt = rt.clone();
            async move { counter(&rt, &format!("/segments{{locality#0/total}}/count/{name}")).await }
        };
        // One unit of 10 segments with 10 slots each.
        let options = SegmentOptions::new(10).unit_bytes(1 << 20);
        let low = vec![3u32; 10]; // 30 %
        let high = vec![9u32; 10]; // 90 %
        for (segments, pack_below, packed) in [
            (&low, 0.8, true),
            (&high, 0.8, false),
            (&high, 1.0, true),
            (&low, 0.0, false),
        ] {
            let before = (stat("units-packed").await?, stat("units-whole").await?);
            let out = rt
                .call_segments(rt.locality(1), fill, segments, options.pack_below(pack_below))
                .await?;
            assert_eq!(out.segment(4).len(), segments[4] as usize);
            let after = (stat("units-packed").await?, stat("units-whole").await?);
            let went = if packed { (1.0, 0.0) } else { (0.0, 1.0) };
            assert_eq!(
                (after.0 - before.0, after.1 - before.1),
                went,
                "{}% used, threshold {pack_below}",
                segments[0] * 10
            );
        }
        // Packed, the 30 % output is smaller than whole.
        let packed = stat("bytes-packed").await?;
        let whole = stat("bytes-whole").await?;
        assert!(packed > 0.0 && whole > 0.0);
        Ok(())
    })
    .unwrap();
}

#[test]
fn an_empty_segmented_call_resolves_at_once() {
    courier::launch(common::inproc(2), |rt| async move {
        let none: [u64; 0] = [];
        let out = rt
            .call_segments(rt.locality(1), varied, &none, SegmentOptions::new(MAX))
            .await?;
        assert!(out.is_empty());
        Ok(())
    })
    .unwrap();
}
