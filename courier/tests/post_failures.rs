//! Failed posts (issue #14): a post that fails where it runs is reported
//! back to the locality that posted it, counted there per action, and
//! under `OnPostFailure::Fail` fails the job fast.

mod common;

use std::time::{Duration, Instant};

use courier::{Config, Error, OnPostFailure, Runtime};

/// Panics on odd numbers.
#[courier::action]
fn explode_if_odd(x: u64) {
    assert!(x % 2 == 0, "odd: {x}");
}

/// Posts `n` numbers to `explode_if_odd` on `dest` from this locality.
#[courier::action]
fn relay(dest: u32, n: u64) {
    let rt = courier::current();
    for x in 0..n {
        rt.post(rt.locality(dest), explode_if_odd, (x,)).unwrap();
    }
}

async fn failed(rt: &Runtime, locality: u32) -> Result<f64, courier::BoxError> {
    let name = format!("/parcels{{locality#{locality}/total}}/count/failed@explode_if_odd");
    let values = rt.counters([name.as_str()])?.evaluate(false).await?;
    Ok(values.iter().map(|v| v.value).sum())
}

/// Waits until locality `locality` counts `expected` failed posts (the
/// reports travel after the posts ran).
async fn expect_failed(
    rt: &Runtime,
    locality: u32,
    expected: f64,
) -> Result<(), courier::BoxError> {
    let start = Instant::now();
    loop {
        let got = failed(rt, locality).await?;
        if got == expected || start.elapsed() > Duration::from_secs(10) {
            assert_eq!(got, expected, "failed posts counted by locality#{locality}");
            return Ok(());
        }
        courier::sleep(Duration::from_millis(5)).await;
    }
}

fn counted_where_posted(config: Config) {
    courier::launch(config, |rt| async move {
        for x in 0..100 {
            rt.post(rt.locality(1), explode_if_odd, (x,))?;
        }
        rt.call(rt.locality(2), relay, (1, 40)).await?;
        rt.quiesce().await?;
        expect_failed(&rt, 0, 50.0).await?;
        expect_failed(&rt, 2, 20.0).await?;
        // Where they ran, nothing was posted.
        expect_failed(&rt, 1, 0.0).await?;
        // The job goes on.
        rt.post(rt.locality(1), explode_if_odd, (2,))?;
        Ok(())
    })
    .unwrap();
}

#[test]
fn failed_posts_are_counted_where_they_were_posted_inproc() {
    counted_where_posted(common::inproc(3));
}

#[test]
fn failed_posts_are_counted_where_they_were_posted_tcp() {
    counted_where_posted(common::tcp(
        "failed_posts_are_counted_where_they_were_posted_tcp",
        3,
    ));
}

#[test]
fn failed_routed_posts_are_counted_where_they_were_posted() {
    let config = common::inproc(4);
    courier::launch(config, |rt| async move {
        // A 2x2 grid: 0 -> 3 goes through 1 (row 0, column 1).
        let grid: courier::Coalescing =
            "count:num_parcels=4,interval_us=100,dimensions=2".parse()?;
        rt.set_coalescing(explode_if_odd, grid)?;
        for x in 0..20 {
            rt.post(rt.locality(3), explode_if_odd, (x,))?;
        }
        rt.flush();
        rt.quiesce().await?;
        let forwarded = rt
            .counters(["/coalescing{locality#1/total}/count/forwarded@explode_if_odd"])?
            .evaluate(false)
            .await?;
        assert_eq!(
            forwarded[0].value, 20.0,
            "the posts did not go through locality#1"
        );
        expect_failed(&rt, 0, 10.0).await?;
        expect_failed(&rt, 1, 0.0).await?;
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_failed_post_fails_the_job_fast_when_asked() {
    let config = common::inproc(3).on_post_failure(OnPostFailure::Fail);
    let result = courier::launch(config, |rt| async move {
        rt.post(rt.locality(1), explode_if_odd, (1,))?;
        rt.flush();
        // Later sends fail once the failure is known.
        let start = Instant::now();
        let refused = loop {
            match rt.post(rt.locality(1), explode_if_odd, (2,)) {
                Ok(()) => courier::sleep(Duration::from_millis(1)).await,
                Err(e) => break e,
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "posts never failed"
            );
        };
        assert!(refused.is_post_failure(), "{refused}");
        assert!(refused.to_string().contains("odd: 1"), "{refused}");
        let call = rt.call(rt.locality(2), relay, (1, 0)).await.unwrap_err();
        assert!(call.is_post_failure(), "{call}");
        Ok(())
    });
    let Err(Error::PostFailed { origin, message }) = result else {
        panic!("the job did not fail: {result:?}");
    };
    assert_eq!(origin.get(), 0);
    assert!(
        message.contains("explode_if_odd") && message.contains("locality#1"),
        "{message}"
    );
}

#[test]
fn a_members_failed_post_fails_the_job_when_asked() {
    let config = common::tcp("a_members_failed_post_fails_the_job_when_asked", 3)
        .on_post_failure(OnPostFailure::Fail);
    let result = courier::launch(config, |rt| async move {
        rt.call(rt.locality(2), relay, (1, 2)).await?;
        Ok(())
    });
    let Err(Error::PostFailed { origin, message }) = result else {
        panic!("the job did not fail: {result:?}");
    };
    assert_eq!(origin.get(), 2, "{message}");
    assert!(message.contains("odd: 1"), "{message}");
}
