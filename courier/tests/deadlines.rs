//! Call deadlines (`CallFuture::timeout`, issue #14): a call without a
//! result in time fails with a clear error, its late result is dropped, and
//! the job goes on and ends normally.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Answers `x` after `ms` milliseconds, counting its runs.
#[courier::action]
async fn answer_after(ms: u64, x: u64) -> u64 {
    courier::sleep(Duration::from_millis(ms)).await;
    courier::with_state(|runs: &Runs| runs.0.fetch_add(1, Ordering::Relaxed));
    x
}

#[derive(Default)]
struct Runs(AtomicU64);

/// How many calls of `answer_after` ran here.
#[courier::action]
fn runs_so_far() -> u64 {
    courier::with_state(|runs: &Runs| runs.0.load(Ordering::Relaxed))
}

fn calls_past_their_deadline_fail_alone(config: courier::Config) {
    let config = config.state(|_, _| Runs::default());
    courier::launch(config, |rt| async move {
        let start = Instant::now();
        // 50 calls that answer after 300 ms, given 30 ms.
        let late: Vec<_> = (0..50)
            .map(|x| {
                rt.call(rt.locality(1), answer_after, (300, x))
                    .timeout(Duration::from_millis(30))
            })
            .collect();
        for call in late {
            let err = call.await.unwrap_err();
            assert!(err.is_timed_out(), "{err}");
            assert!(!err.is_peer_lost(), "{err}");
            let message = err.to_string();
            assert!(
                message.contains("answer_after") && message.contains("no result within 30ms"),
                "{message}"
            );
        }
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(30) && waited < Duration::from_millis(290),
            "the deadlines took {waited:?}"
        );
        // Calls given enough time get their own results, not a late one's.
        for x in 100..110 {
            let got = rt
                .call(rt.locality(1), answer_after, (1, x))
                .timeout(Duration::from_secs(20))
                .await?;
            assert_eq!(got, x);
        }
        // Every call ran once, the late ones included.
        courier::sleep(Duration::from_millis(300)).await;
        rt.quiesce().await?;
        assert_eq!(rt.call(rt.locality(1), runs_so_far, ()).await?, 60);
        Ok(())
    })
    .unwrap();
}

#[test]
fn calls_past_their_deadline_fail_alone_inproc() {
    calls_past_their_deadline_fail_alone(common::inproc(2));
}

#[test]
fn calls_past_their_deadline_fail_alone_tcp() {
    calls_past_their_deadline_fail_alone(common::tcp(
        "calls_past_their_deadline_fail_alone_tcp",
        2,
    ));
}
