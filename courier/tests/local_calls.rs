//! Calls of this locality's own short synchronous actions run inline in
//! the caller when their future is first polled (issue #16): the result
//! and the count of runs are those of the usual path, a dropped future's
//! call still runs once, a panic fails the call alone, and costly actions
//! or futures polled off the workers take the usual path.

mod common;

use std::collections::HashMap;
use std::sync::Mutex;
use std::task::Poll;
use std::time::Duration;

use courier::Runtime;

/// Runs of `square` per argument: the tests of this binary run at once,
/// each with arguments of its own.
static RUNS: Mutex<Option<HashMap<u64, u64>>> = Mutex::new(None);

#[courier::action]
fn square(x: u64) -> u64 {
    *RUNS
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .entry(x)
        .or_default() += 1;
    x.wrapping_mul(x)
}

/// How many times `square(x)` ran.
fn runs(x: u64) -> u64 {
    RUNS.lock()
        .unwrap()
        .as_ref()
        .and_then(|runs| runs.get(&x).copied())
        .unwrap_or(0)
}

/// Attempts at an inline call before a test gives up: a call runs inline
/// once its action is measured short, which a measurement stretched by a
/// loaded machine (the thread preempted) can put off for a few calls.
const ATTEMPTS: u64 = 1_000;

/// Calls `square(from + i)`, polling each call once, until one completes
/// in that poll (it ran inline); those that do not are awaited (their
/// results checked). Returns the argument of the inline one.
async fn first_inlined(rt: &Runtime, from: u64) -> u64 {
    for x in from..from + ATTEMPTS {
        let mut call = rt.call(rt.here(), square, (x,));
        match futures::poll!(&mut call) {
            Poll::Ready(out) => {
                assert_eq!(out.unwrap(), x.wrapping_mul(x));
                return x;
            }
            Poll::Pending => assert_eq!(call.await.unwrap(), x.wrapping_mul(x)),
        }
    }
    panic!("no call of a short action ran inline in {ATTEMPTS} calls");
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
        // Inline: done within its first poll (the usual path needs a
        // frame to itself and a task first), and run once.
        let x = first_inlined(&rt, 1_000_000).await;
        assert_eq!(runs(x), 1);
        // Dropped unpolled: the call still runs, once.
        drop(rt.call(rt.here(), square, (2_000_000,)));
        rt.quiesce().await?;
        assert_eq!(runs(2_000_000), 1);
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
        // Fails inline (in its first poll) once `fails` is measured short;
        // on the usual path before that, the same way.
        let too_large = |e: &courier::CallError| {
            let message = e.panic_message().unwrap_or_default();
            assert!(message.contains("x is too large: 11"), "{e}");
        };
        let mut inline = false;
        for _ in 0..ATTEMPTS {
            let mut call = rt.call(rt.here(), fails, (11,));
            match futures::poll!(&mut call) {
                Poll::Ready(out) => {
                    too_large(&out.unwrap_err());
                    inline = true;
                    break;
                }
                Poll::Pending => too_large(&call.await.unwrap_err()),
            }
        }
        assert!(inline, "no failing call ran inline in {ATTEMPTS} calls");
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
