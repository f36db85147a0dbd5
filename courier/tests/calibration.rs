//! The α-β calibration of sends (`adapt/calibration.rs`, the start-up
//! probe of `runtime/probe.rs`): the counters `/network/time/alpha` and
//! `/network/time/beta` after real traffic, the probe's frames at a
//! receiver, and the counters' parameters.
//!
//! Only sanity is asserted of the values (α > 0, β finite and ≥ 0):
//! send times on a shared CI machine are whatever they are.

mod common;

use std::time::{Duration, Instant};

use common::value;
use courier::__private::{probe_frame, receive_frame};
use courier::counters::CounterError;
use courier::{LocalityId, Runtime};

/// α and β of the TCP prior (`adapt::TCP_PRIOR`): what the counters read
/// before any frame if the start-up probe did not run.
const TCP_PRIOR: (f64, f64) = (6_000.0, 0.1);

/// How long a locality's probe may take to show, at most: its budget is
/// a few ms; a loaded CI machine may stretch it.
const PROBE_DEADLINE: Duration = Duration::from_secs(10);

/// α and β of the in-process prior (`adapt::INPROC_PRIOR`).
const INPROC_PRIOR: (f64, f64) = (60.0, 0.0005);

/// Sizes of the arguments of the traffic: frames from tens of bytes to
/// 64 KiB, so that β is fitted from the traffic, not only the probe.
const SIZES: [usize; 4] = [16, 1_024, 16_384, 65_536];

#[courier::action]
fn take(bytes: Vec<u8>) -> usize {
    bytes.len()
}

/// α and β as `locality` sees them, towards `peer` (or the mean over its
/// peers, for `None`), with their names.
async fn alpha_beta(
    rt: &Runtime,
    locality: u32,
    peer: Option<u32>,
) -> Result<(f64, f64), courier::BoxError> {
    let at = peer.map_or(String::new(), |p| format!("@locality#{p}"));
    let alpha = format!("/network{{locality#{locality}/total}}/time/alpha{at}");
    let beta = format!("/network{{locality#{locality}/total}}/time/beta{at}");
    let values = rt.counters([&alpha, &beta])?.evaluate(false).await?;
    Ok((value(&values, &alpha), value(&values, &beta)))
}

/// Calls `take` on locality 1 `n` times, cycling through [`SIZES`], one
/// call at a time (sparse traffic: a frame each way per call).
async fn traffic(rt: &Runtime, n: usize) -> Result<(), courier::BoxError> {
    for i in 0..n {
        let len = SIZES[i % SIZES.len()];
        assert_eq!(rt.call(rt.locality(1), take, (vec![7; len],)).await?, len);
    }
    Ok(())
}

fn assert_sane((alpha, beta): (f64, f64), what: &str) {
    assert!(alpha > 0.0, "{what}: alpha {alpha} ns is not positive");
    assert!(
        beta.is_finite() && beta >= 0.0,
        "{what}: beta {beta} ns/B is not finite and non-negative"
    );
}

#[test]
fn tcp_alpha_and_beta_are_measured_at_start_up_and_after_traffic() {
    let config = common::tcp(
        "tcp_alpha_and_beta_are_measured_at_start_up_and_after_traffic",
        2,
    );
    courier::launch(config, |rt| async move {
        // Before the program's traffic: the start-up probe's line, once
        // it ran (locality 1 serves while it probes, so the root may ask
        // before it is done; the answers to the asking are frames that
        // locality 1 samples, which also leave the prior behind).
        for (locality, peer) in [(0, 1), (1, 0)] {
            let deadline = Instant::now() + PROBE_DEADLINE;
            let probed = loop {
                let read = alpha_beta(&rt, locality, Some(peer)).await?;
                if read != TCP_PRIOR || Instant::now() > deadline {
                    break read;
                }
                courier::sleep(Duration::from_millis(1)).await;
            };
            eprintln!("locality#{locality} -> locality#{peer} after the probe: {probed:?}");
            assert_ne!(probed, TCP_PRIOR, "locality#{locality} did not probe");
            assert_sane(probed, "after the probe");
        }
        traffic(&rt, 400).await?;
        for locality in [0, 1] {
            let peer = 1 - locality;
            let mean = alpha_beta(&rt, locality, None).await?;
            let towards = alpha_beta(&rt, locality, Some(peer)).await?;
            eprintln!(
                "locality#{locality} after traffic: mean {mean:?}, to locality#{peer} {towards:?}"
            );
            assert_sane(mean, "mean over the peers");
            assert_sane(towards, "towards the peer");
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn inproc_jobs_start_from_the_prior_and_learn_from_traffic() {
    courier::launch(common::inproc(2), |rt| async move {
        // No probe on the in-process transport: the prior, exactly.
        assert_eq!(alpha_beta(&rt, 0, Some(1)).await?, INPROC_PRIOR);
        traffic(&rt, 200).await?;
        let learned = alpha_beta(&rt, 0, Some(1)).await?;
        assert_ne!(learned, INPROC_PRIOR, "the traffic was not sampled");
        assert_sane(learned, "in-process, after traffic");
        assert_sane(alpha_beta(&rt, 1, None).await?, "responses' sender");
        Ok(())
    })
    .unwrap();
}

#[test]
fn parameters_name_one_peer_of_the_job() {
    courier::launch(common::inproc(2), |rt| async move {
        let bad_name = |name: &str| match rt.counters([name]) {
            Err(CounterError::BadName { .. }) => {}
            other => panic!("{name}: expected a bad name, got {other:?}"),
        };
        bad_name("/network/time/alpha@locality#*");
        bad_name("/network/time/beta@peer#1");
        match rt.counters(["/network/time/alpha@locality#2"]) {
            Err(CounterError::NotFound { reason, .. }) => assert!(reason.contains("2 localities")),
            other => panic!("expected no such locality, got {other:?}"),
        }
        // Towards itself a locality sends no frames: 0, so that a peer
        // can be asked of every locality at once.
        let everywhere = rt
            .counters(["/network{locality#*/total}/time/alpha@locality#0"])?
            .evaluate(false)
            .await?;
        assert_eq!(
            value(
                &everywhere,
                "/network{locality#0/total}/time/alpha@locality#0"
            ),
            0.0
        );
        assert_eq!(
            value(
                &everywhere,
                "/network{locality#1/total}/time/alpha@locality#0"
            ),
            INPROC_PRIOR.0
        );
        Ok(())
    })
    .unwrap();
    // Without peers the mean is 0.
    courier::launch(common::inproc(1), |rt| async move {
        assert_eq!(alpha_beta(&rt, 0, None).await?, (0.0, 0.0));
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_probe_frame_costs_the_receiver_nothing_and_a_bad_one_is_refused() {
    courier::launch(common::inproc(2), |rt| async move {
        let peer = LocalityId::new(1);
        let counted = [
            "/parcels{locality#0/total}/count/received",
            "/messages{locality#0/total}/count/received",
            "/serialize{locality#0/total}/count/received",
        ];
        for padding in [0, 1, 64 << 10] {
            receive_frame(&rt, peer, &probe_frame(peer, padding))
                .map_err(|e| format!("a probe of {padding} bytes was refused: {e}"))?;
        }
        let values = rt.counters(counted)?.evaluate(false).await?;
        for name in counted {
            assert_eq!(value(&values, name), 0.0, "{name}");
        }
        // Padding cut short: the length says more than the frame holds.
        let frame = probe_frame(peer, 100);
        let error = receive_frame(&rt, peer, &frame[..frame.len() - 1]).unwrap_err();
        assert!(error.contains("control"), "{error}");
        // A length of 2^35 - 1, with nothing after it.
        let mut huge = probe_frame(peer, 0);
        huge.pop();
        huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x7f]);
        let error = receive_frame(&rt, peer, &huge).unwrap_err();
        assert!(error.contains("control"), "{error}");
        Ok(())
    })
    .unwrap();
}
