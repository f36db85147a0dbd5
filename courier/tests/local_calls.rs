//! Calls of this locality's own short synchronous actions run inline in
//! the caller when their future is first polled (issue #16): the result
//! and the count of runs are those of the usual path, a dropped future's
//! call still runs once, a panic fails the call alone, and costly actions
//! or futures polled off the workers take the usual path.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use courier::Runtime;

static RUNS: AtomicU64 = AtomicU64::new(0);

#[courier::action]
fn square(x: u64) -> u64 {
    RUNS.fetch_add(1, Ordering::SeqCst);
    x * x
}

#[courier::action]
fn fails(x: u64) -> u64 {
    assert!(x < 10, "x is too large: {x}");
    x
}

#[courier::action]
fn slow(us: u64) -> u64 {
    common::spin(Duration::from_micros(us));
    us
}

/// Makes calls of `square` the usual way until they are measured.
async fn warm_up(rt: &Runtime) {
    for i in 0..4 {
        assert_eq!(rt.call(rt.here(), square, (i,)).await.unwrap(), i * i);
    }
}

#[test]
fn a_short_local_call_runs_inline_once_when_polled() {
    courier::launch(common::inproc(1).workers(2), |rt| async move {
        warm_up(&rt).await;
        let before = RUNS.load(Ordering::SeqCst);
        let mut call = rt.call(rt.here(), square, (7,));
        // Inline: done within its first poll (the usual path needs a
        // frame to itself and a task first).
        assert!(matches!(futures::poll!(&mut call), Poll::Ready(Ok(49))));
        assert_eq!(RUNS.load(Ordering::SeqCst) - before, 1);
        // Dropped unpolled: the call still runs, once.
        drop(rt.call(rt.here(), square, (8,)));
        rt.quiesce().await?;
        assert_eq!(RUNS.load(Ordering::SeqCst) - before, 2);
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_panicking_inline_call_fails_alone() {
    courier::launch(common::inproc(1).workers(1), |rt| async move {
        for i in 0..4 {
            rt.call(rt.here(), fails, (i,)).await?;
        }
        let mut call = rt.call(rt.here(), fails, (11,));
        match futures::poll!(&mut call) {
            Poll::Ready(Err(e)) => {
                assert!(
                    e.panic_message().unwrap().contains("x is too large: 11"),
                    "{e}"
                )
            }
            other => panic!("expected an inline failure, got {other:?}"),
        }
        assert_eq!(rt.call(rt.here(), fails, (3,)).await?, 3);
        Ok(())
    })
    .unwrap();
}

#[test]
fn costly_calls_and_calls_polled_off_the_workers_go_the_usual_way() {
    courier::launch(common::inproc(1).workers(2), |rt| async move {
        // Twice the threshold a call: not worth running in the caller.
        let mut set = rt.counters([
            "/par{locality#0/total}/time/task-overhead",
            "/par{locality#0/total}/parameter/lambda-min",
        ])?;
        let values = set.evaluate(false).await?;
        let us = (2.0 * values[0].value * values[1].value / 1e3).ceil() as u64;
        for _ in 0..3 {
            rt.call(rt.here(), slow, (us,)).await?;
        }
        let mut call = rt.call(rt.here(), slow, (us,));
        assert!(
            futures::poll!(&mut call).is_pending(),
            "a costly call ran inline"
        );
        assert_eq!(call.await?, us);
        // A short call awaited on a thread of the program's own.
        warm_up(&rt).await;
        let call = rt.call(rt.here(), square, (5,));
        let out = std::thread::spawn(move || futures::executor::block_on(call))
            .join()
            .unwrap();
        assert_eq!(out?, 25);
        Ok(())
    })
    .unwrap();
}
