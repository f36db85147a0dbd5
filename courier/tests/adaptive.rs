//! Adaptive coalescing: every post runs exactly once while the tuners
//! change the settings under load, over every transport, and what they
//! set stays within the bounds given.
//!
//! The tests take turns (`common::take_turns`): what the tuners decide
//! comes from what they measure (a message's cost α, rates, latencies),
//! which the file's other tests running beside them on two cores move
//! (in one of ten release runs side by side, a stream of a post every
//! 50 µs was turned off).

mod common;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use courier::{AdaptivePolicy, CallError, CallFuture, Coalescing, Config, CountPolicy, Runtime};
use serde_bytes::ByteBuf;

/// (run, locality, source, sequence number) of every `tally` that ran in
/// this process (in-process localities share it).
static SEEN: Mutex<Vec<(u64, u32, u32, u64)>> = Mutex::new(Vec::new());

/// Records that it ran.
#[courier::action]
fn tally(run: u64, source: u32, seq: u64, _padding: ByteBuf) {
    let here = courier::current().here().get();
    SEEN.lock().unwrap().push((run, here, source, seq));
}

/// What this locality recorded for `run`.
#[courier::action]
fn seen(run: u64) -> Vec<(u32, u64)> {
    let here = courier::current().here().get();
    let all = SEEN.lock().unwrap();
    all.iter()
        .filter(|&&(r, l, _, _)| r == run && l == here)
        .map(|&(_, _, s, q)| (s, q))
        .collect()
}

/// Posts `per_phase` tallies to every other locality in each of three
/// phases unlike one another: tiny parcels in chunks of 128 a
/// millisecond (at least 150 ms, so that the tuners see a phase of many
/// epochs however loaded the machine is), a pause, parcels of 200 bytes
/// as fast as it can, a pause, tiny ones at another pace. Returns how
/// many it posted.
#[courier::action]
async fn storm(run: u64, per_phase: u64) -> u64 {
    let rt = courier::current();
    let here = rt.here().get();
    let others: Vec<_> = rt.localities().filter(|&l| l != rt.here()).collect();
    let mut seq = 0;
    for phase in 0..3u64 {
        let padding = if phase == 1 { 200 } else { 0 };
        for i in 0..per_phase {
            let dest = others[(i as usize) % others.len()];
            rt.post(
                dest,
                tally,
                (run, here, seq, ByteBuf::from(vec![7; padding])),
            )
            .expect("post");
            seq += 1;
            if phase == 0 && i % 128 == 0 {
                courier::yield_now().await;
                std::thread::sleep(Duration::from_millis(1));
            }
            if phase == 2 && i % 64 == 0 {
                courier::yield_now().await;
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    seq
}

/// The value of counter `name` (without its instance) on locality `l`.
async fn counter(rt: &Runtime, l: u32, name: &str, param: &str) -> f64 {
    let (object, rest) = name[1..].split_once('/').expect("a counter name");
    let full = format!("/{object}{{locality#{l}/total}}/{rest}@{param}");
    let mut set = rt.counters([full.as_str()]).unwrap();
    set.evaluate(false).await.unwrap()[0].value
}

/// Runs the storms under adaptive coalescing with bounds of 8 KiB and
/// 1,000 parcels a buffer, and a credit window of `window` bytes (`None`:
/// the default); checks every post ran once and the settings in force.
fn exactly_once(config: Config, run: u64, per_phase: u64, window: Option<usize>) {
    let bounds = AdaptivePolicy {
        max_bytes: 8192,
        // The start (the default count policy within these bounds: 1,000
        // parcels) is above what 8 KiB of these parcels allow: the first
        // phase's setting differs from it, whatever α and the rate are
        // (and its 100 µs timer sends a dozen parcels of the first phase
        // a message, far below the model's count).
        max_parcels: 1000,
        kappa: None,
        split: None,
    };
    let mut config = config.coalescing(Coalescing::Adaptive(bounds));
    // A tuned buffer holds at most a quarter of the credit window.
    let mut max_bytes = 8192.0;
    if let Some(window) = window {
        config = config.credit_window(window);
        max_bytes = f64::min(max_bytes, (window / 4) as f64);
    }
    courier::launch(config, move |rt| async move {
        let n = rt.num_localities();
        let storms: Vec<_> = rt
            .localities()
            .map(|l| rt.call(l, storm, (run, per_phase)))
            .collect();
        let mut posted = 0;
        for s in storms {
            posted += s.await?;
        }
        rt.quiesce().await?;
        let mut runs: BTreeMap<(u32, u64), u32> = BTreeMap::new();
        for l in rt.localities() {
            for key in rt.call(l, seen, (run,)).await? {
                *runs.entry(key).or_default() += 1;
            }
        }
        assert_eq!(posted, u64::from(n) * 3 * per_phase);
        assert_eq!(runs.len() as u64, posted, "lost posts");
        assert!(runs.values().all(|&c| c == 1), "duplicated posts");
        let mut decisions = 0.0;
        for l in 0..n {
            let d = counter(&rt, l, "/adapt/count/decisions", "tally").await;
            // At most three a phase for each destination's tuner; the job
            // has three phases of posts (and the calls that start and
            // check them).
            let most = 12.0 * f64::from(n - 1);
            assert!(d <= most, "locality {l}: {d} decisions for {} peers", n - 1);
            decisions += d;
            let parcels = counter(&rt, l, "/coalescing/parameter/num-parcels", "tally").await;
            let bytes = counter(&rt, l, "/coalescing/parameter/max-bytes", "tally").await;
            assert!(parcels <= 1000.0, "locality {l}: num_parcels {parcels}");
            assert!(bytes <= max_bytes, "locality {l}: max_bytes {bytes}");
            // The model's inputs of the last epoch with traffic: posts of
            // a few bytes to 200 of arguments (encoded), which tolerate delay.
            let q = counter(&rt, l, "/adapt/model/parcel-rate", "tally").await;
            let size = counter(&rt, l, "/adapt/model/parcel-size", "tally").await;
            let kappa = counter(&rt, l, "/adapt/model/kappa", "tally").await;
            assert!(q > 0.0, "locality {l}: Q = {q}");
            assert!((1.0..=250.0).contains(&size), "locality {l}: S = {size}");
            assert!(kappa > 0.0 && kappa < 0.1, "locality {l}: κ = {kappa}");
        }
        assert!(decisions >= 1.0, "no tuner changed a setting");
        Ok(())
    })
    .unwrap();
}

#[test]
fn adaptive_exactly_once_inproc() {
    let _turn = common::take_turns();
    // A window of 16 KiB: buffers of at most 4 KiB.
    exactly_once(common::inproc(3).workers(2), 1, 20_000, Some(16 << 10));
}

#[test]
fn adaptive_exactly_once_tcp() {
    let _turn = common::take_turns();
    exactly_once(common::tcp("adaptive_exactly_once_tcp", 2), 2, 20_000, None);
}

/// The MPI case of this file and the sizes it runs at.
#[cfg(feature = "mpi")]
#[test]
fn under_mpirun() {
    let _turn = common::take_turns();
    common::mpirun(&["mpi_adaptive_exactly_once"], &[2]);
}

#[test]
#[ignore = "an MPI case: run by under_mpirun"]
fn mpi_adaptive_exactly_once() {
    let _turn = common::take_turns();
    exactly_once(common::mpi(), 3, 20_000, None);
}

/// Returns its argument.
#[courier::action]
fn echo(x: u64) -> u64 {
    x
}

/// Calls `echo` on `peer` one call at a time, awaiting each, for `ms`
/// milliseconds; returns how many calls it made.
async fn one_at_a_time(rt: &Runtime, peer: courier::LocalityId, ms: u64) -> u64 {
    let start = std::time::Instant::now();
    let mut calls = 0;
    while start.elapsed() < Duration::from_millis(ms) {
        assert_eq!(rt.call(peer, echo, (calls,)).await.unwrap(), calls);
        calls += 1;
    }
    calls
}

#[test]
fn calls_awaited_one_at_a_time_are_not_delayed_and_posts_are() {
    let _turn = common::take_turns();
    let config = common::inproc(2).coalescing(Coalescing::Adaptive(AdaptivePolicy::DEFAULT));
    courier::launch(config, |rt| async move {
        let peer = rt.locality(1);
        // A caller with one call in flight: a second of delay costs it a
        // second (κ = 1), whatever the rate.
        let calls = one_at_a_time(&rt, peer, 200).await;
        let kappa = counter(&rt, 0, "/adapt/model/kappa", "echo").await;
        let more = one_at_a_time(&rt, peer, 50).await;
        assert!(calls + more > 0);
        assert!(kappa > 0.5, "κ of calls awaited one at a time: {kappa}");
        // Posts of the same action tolerate delay.
        let start = std::time::Instant::now();
        let mut posts = 0u64;
        while start.elapsed() < Duration::from_millis(200) {
            rt.post(peer, echo, (posts,))?;
            posts += 1;
            if posts % 64 == 0 {
                courier::yield_now().await;
            }
        }
        let kappa = counter(&rt, 0, "/adapt/model/kappa", "echo").await;
        assert!(kappa < 1e-3, "κ of posts: {kappa}");
        rt.quiesce().await?;
        Ok(())
    })
    .unwrap();
}

/// A task that issues a batch of calls in one poll, then awaits them,
/// awaits them together: while it issues them, the tuner counts the
/// calls so far as a burst, not the calls in flight that stood in for
/// workers that had not run out of tasks (toy's batch ran at κ 1.7e-3
/// and 600 parcels a message that way, where its best static settings
/// hold thousands).
#[test]
fn a_batch_issued_in_one_poll_is_awaited_together_while_it_is_issued() {
    let _turn = common::take_turns();
    // A credit window of 16 KiB keeps a few hundred calls in flight.
    let config = common::inproc(2)
        .coalescing(Coalescing::Adaptive(AdaptivePolicy::DEFAULT))
        .credit_window(16 << 10);
    courier::launch(config, |rt| async move {
        let peer = rt.locality(1 - rt.here().get());
        let start = std::time::Instant::now();
        let mut calls = Vec::new();
        // 100 ms of calls, no await: the tuner's epochs end on this
        // thread as its frames leave.
        while start.elapsed() < Duration::from_millis(100) {
            calls.push(rt.call(peer, echo, (calls.len() as u64,)));
        }
        let issued = calls.len();
        let kappa = counter(&rt, rt.here().get(), "/adapt/model/kappa", "echo").await;
        for (i, call) in calls.into_iter().enumerate() {
            assert_eq!(call.await?, i as u64);
        }
        // Without the open burst: κ 2.4e-3 (420 in flight); with it,
        // about one over the calls issued 10 ms before the loop ended.
        assert!(
            kappa < 1e-4,
            "κ {kappa} after {issued} calls issued in one poll"
        );
        Ok(())
    })
    .unwrap();
}

/// Bursts of 200 awaited calls, each issued in one poll and awaited
/// before the next after a pause, for 150 ms under `policy`; checks every
/// result and returns the bursts and the parts this locality split them
/// into (`/coalescing/count/flush-split`).
fn split_bursts(policy: AdaptivePolicy) -> (f64, f64) {
    let config = common::inproc(2).coalescing(Coalescing::Adaptive(policy));
    let split = Arc::new(Mutex::new((0.0, 0.0)));
    let out = Arc::clone(&split);
    courier::launch(config, move |rt| async move {
        let peer = rt.locality(1 - rt.here().get());
        let start = std::time::Instant::now();
        let mut bursts = 0.0;
        while start.elapsed() < Duration::from_millis(150) {
            let calls: Vec<_> = (0..200u64).map(|i| rt.call(peer, echo, (i,))).collect();
            for (i, call) in calls.into_iter().enumerate() {
                assert_eq!(call.await?, i as u64);
            }
            bursts += 1.0;
            rt.sleep(Duration::from_millis(2)).await;
        }
        let parts = counter(
            &rt,
            rt.here().get(),
            "/coalescing/count/flush-split",
            "echo",
        )
        .await;
        if rt.here().get() == 0 {
            *out.lock().unwrap() = (bursts, parts);
        }
        Ok(())
    })
    .unwrap();
    Arc::try_unwrap(split).unwrap().into_inner().unwrap()
}

/// A burst of awaited calls leaves split into parts, so that the
/// destination starts on the first while the worker issues the rest
/// (toy's bursts of 500 after a batch came back 7–9 % sooner in three or
/// four parts over loopback TCP).
/// Once the tuning loop knows α (its first epoch) and the worker its last
/// burst, each burst of 200 leaves in parts (in process, where a message
/// costs less than a call, of the fewest calls: 64), below the tuner's
/// count for it (the burst: too few calls for the tuner's own four
/// parts); `split=0` sends them whole, `split=50` in parts of 50.
///
/// A release build's: the model takes a call to cost `c` = 100 ns, a
/// release build's figure, while α is measured. Unoptimized, a message
/// in process measured 14–20 µs, so parts of √(200·2α/c) ≥ 200 calls:
/// the model rightly sent most bursts of 200 whole (12–20 parts in 54–58
/// bursts).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "a release build's: the model's call cost c is an optimized call's"
)]
fn a_burst_of_awaited_calls_leaves_split_into_parts() {
    let _turn = common::take_turns();
    let (bursts, parts) = split_bursts(AdaptivePolicy::DEFAULT);
    assert!(
        parts >= bursts / 2.0,
        "{bursts} bursts of 200 calls, {parts} parts"
    );
    let whole = AdaptivePolicy {
        split: Some(0),
        ..AdaptivePolicy::DEFAULT
    };
    let (bursts, parts) = split_bursts(whole);
    assert!(
        bursts > 0.0 && parts == 0.0,
        "{bursts} bursts, {parts} parts"
    );
    let fifty = AdaptivePolicy {
        split: Some(50),
        ..AdaptivePolicy::DEFAULT
    };
    let (bursts, parts) = split_bursts(fifty);
    assert!(
        parts >= bursts,
        "{bursts} bursts of 200 calls, {parts} parts"
    );
}

/// Returns its argument after 2 ms.
#[courier::action]
fn slow_echo(x: u64) -> u64 {
    std::thread::sleep(Duration::from_millis(2));
    x
}

/// Calls in flight, each with the value it must return.
type InFlight = VecDeque<(u64, CallFuture<u64>)>;

/// Issues `call(0)`, `call(1)`, … for 300 ms, `pause` after each, with at
/// most `window` in flight (the oldest is awaited, and checked, before
/// one more leaves); returns the calls still in flight.
async fn keep_calling(
    rt: &Runtime,
    window: usize,
    pause: Option<Duration>,
    call: impl Fn(u64) -> CallFuture<u64>,
) -> Result<InFlight, CallError> {
    let start = std::time::Instant::now();
    let mut in_flight = VecDeque::new();
    let mut issued = 0u64;
    while start.elapsed() < Duration::from_millis(300) {
        if in_flight.len() == window {
            let (i, call): (u64, CallFuture<u64>) = in_flight.pop_front().unwrap();
            assert_eq!(call.await?, i);
        }
        in_flight.push_back((issued, call(issued)));
        issued += 1;
        if let Some(pause) = pause {
            rt.sleep(pause).await;
        }
    }
    Ok(in_flight)
}

/// Awaits every call in flight and checks what each returned.
async fn drain(in_flight: InFlight) -> Result<(), CallError> {
    for (i, call) in in_flight {
        assert_eq!(call.await?, i);
    }
    Ok(())
}

/// Calls issued one at a time, each awaited by itself later, are awaited
/// alone however many are in flight: a call every 200 µs to an action
/// that takes 2 ms keeps eight in flight, which the tuner once took for
/// calls awaited together (κ = 1/8, and so more delay; under coalescing
/// that delays them, more in flight still).
#[test]
fn calls_issued_one_at_a_time_are_awaited_alone_however_many_are_in_flight() {
    let _turn = common::take_turns();
    let config = common::inproc(2).coalescing(Coalescing::Adaptive(AdaptivePolicy::DEFAULT));
    courier::launch(config, |rt| async move {
        let peer = rt.locality(1);
        let pause = Some(Duration::from_micros(200));
        let in_flight = keep_calling(&rt, 8, pause, |i| rt.call(peer, slow_echo, (i,))).await?;
        let kappa = counter(&rt, 0, "/adapt/model/kappa", "slow_echo").await;
        drain(in_flight).await?;
        assert!(kappa > 0.5, "κ of calls issued one at a time: {kappa}");
        Ok(())
    })
    .unwrap();
}

/// Under adaptive coalescing the responder sends the responses to a run
/// of calls when the run is done: a caller awaiting one call at a time
/// gets each response in a message of its own at once, past the buffer
/// (not when the run ends, the responder's worker goes idle or its timer
/// fires), and a burst of calls gets its responses in few messages.
#[test]
fn responses_leave_with_the_run_of_calls_they_answer() {
    let _turn = common::take_turns();
    let config = common::inproc(2).coalescing(Coalescing::Adaptive(AdaptivePolicy::DEFAULT));
    courier::launch(config, |rt| async move {
        let peer = rt.locality(1);
        let messages = || counter(&rt, 1, "/coalescing/count/messages", "echo");
        let flushes = |reason: &'static str| {
            let rt = rt.clone();
            async move { counter(&rt, 1, &format!("/coalescing/count/flush-{reason}"), "echo").await }
        };
        // A burst: 2,000 calls at once, their responses in few messages.
        let burst: Vec<_> = (0..2000).map(|i| rt.call(peer, echo, (i,))).collect();
        for (i, call) in burst.into_iter().enumerate() {
            assert_eq!(call.await?, i as u64);
        }
        let after_burst = messages().await;
        assert!(after_burst <= 100.0, "2,000 responses in {after_burst} messages");
        let held = (flushes("idle").await, flushes("timer").await);
        let answered = flushes("answered").await;
        let bypass = flushes("bypass").await;
        // One call at a time: each response in a message of its own, sent
        // at once past the buffer, none held for the end of its run, the
        // idle worker or the timer.
        let calls = one_at_a_time(&rt, peer, 100).await as f64;
        assert_eq!(messages().await - after_burst, calls, "one response a message");
        assert_eq!(flushes("bypass").await - bypass, calls, "sent at once");
        assert_eq!(flushes("answered").await, answered, "held for their runs");
        assert_eq!(
            (flushes("idle").await, flushes("timer").await),
            held,
            "responses held back"
        );
        Ok(())
    })
    .unwrap();
}

/// The responses to a run of many calls leave together when the run is
/// done, however long ago the last response left: the sparse bypass
/// (which sends at once a parcel that comes long after the previous one)
/// does not send the first of them alone. Bursts of 200 calls, 2 ms
/// apart (the responder's start setting has an interval of 100 µs), each
/// sent whole (the caller's setting is a count policy with a 1 s
/// interval): the responder sends about a message of responses a message
/// of calls, and none alone but the response to a call that came alone,
/// where the bypass sent one more a burst (40 messages to 21). A run
/// split between tasks on a loaded machine may send its pieces'
/// responses apart (by the timer): the bounds allow one more every other
/// burst.
#[test]
fn the_responses_to_a_run_after_a_pause_leave_together() {
    let _turn = common::take_turns();
    let whole = AdaptivePolicy {
        split: Some(0),
        ..AdaptivePolicy::DEFAULT
    };
    let config = common::inproc(2).coalescing(Coalescing::Adaptive(whole));
    courier::launch(config, |rt| async move {
        let peer = rt.locality(1);
        // Here only: the responder keeps its adaptive setting.
        let held = CountPolicy {
            num_parcels: 4096,
            interval_us: 1_000_000,
            ..CountPolicy::DEFAULT
        };
        rt.set_coalescing(echo, Coalescing::Count(held)).unwrap();
        let bursts = 20.0;
        for _ in 0..bursts as u32 {
            std::thread::sleep(Duration::from_millis(2));
            let burst: Vec<_> = (0..200).map(|i| rt.call(peer, echo, (i,))).collect();
            for (i, call) in burst.into_iter().enumerate() {
                assert_eq!(call.await?, i as u64);
            }
        }
        let messages = |l| counter(&rt, l, "/coalescing/count/messages", "echo");
        let alone = |l| counter(&rt, l, "/coalescing/count/flush-bypass", "echo");
        let (calls, responses) = (messages(0).await, messages(1).await);
        assert!(
            responses <= calls + bursts / 2.0,
            "{responses} messages of responses to {calls} messages of calls"
        );
        let (calls_alone, responses_alone) = (alone(0).await, alone(1).await);
        assert!(
            responses_alone <= calls_alone + bursts / 2.0,
            "{responses_alone} responses alone, to {calls_alone} calls alone"
        );
        Ok(())
    })
    .unwrap();
}

/// Turns the coalescing of `echo` towards locality `peer` off where it
/// is called, as its tuner does for calls awaited one at a time (the
/// action stays adaptive).
#[courier::action]
fn echo_off_towards(peer: u32) {
    let rt = courier::current();
    rt.set_coalescing_to(echo, rt.locality(peer), Coalescing::Off)
        .unwrap();
}

/// The decisions both localities' tuners of `echo` made, ever: a round
/// in which a tuner decided anything (even away from off and back again)
/// is done again.
async fn echo_decisions(rt: &Runtime) -> f64 {
    counter(rt, 0, "/adapt/count/decisions", "echo").await
        + counter(rt, 1, "/adapt/count/decisions", "echo").await
}

/// Every message locality `l` sent (a message of its own, with
/// coalescing off, is no buffer's), and the messages its buffers of
/// `echo` sent.
async fn messages(rt: &Runtime, l: u32) -> (f64, f64) {
    let all = format!("/messages{{locality#{l}/total}}/count/sent");
    let buffered = format!("/coalescing{{locality#{l}/total}}/count/messages@echo");
    let values = rt
        .counters([all.as_str(), buffered.as_str()])
        .unwrap()
        .evaluate(false)
        .await
        .unwrap();
    (values[0].value, values[1].value)
}

/// Where an adaptive action's coalescing is off (its tuners turn it off
/// for calls awaited one at a time), calls issued together still leave
/// together: a burst of 2,000 calls goes in few messages, and so do its
/// responses and a burst of posts, at once (not epochs of the tuner
/// later); lone calls and
/// their responses go alone again after it, in messages of their own,
/// through no buffer.
#[test]
fn a_burst_is_coalesced_where_an_adaptive_action_is_off() {
    let _turn = common::take_turns();
    let config = common::inproc(2).coalescing(Coalescing::Adaptive(AdaptivePolicy::DEFAULT));
    courier::launch(config, |rt| async move {
        let peer = rt.locality(1);
        // Both ways, so that the responses' coalescing is off too. A
        // tuner may change it later (on a phase change of the traffic):
        // then the round is done again.
        let off = || async {
            rt.call(peer, echo_off_towards, (0,)).await?;
            rt.set_coalescing_to(echo, peer, Coalescing::Off).unwrap();
            Ok::<_, CallError>(())
        };
        let still_off = || async {
            let there = rt.call(peer, coalescing_of_echo, (0,)).await?;
            Ok::<_, CallError>(rt.coalescing(echo, peer) == Coalescing::Off && there)
        };
        for round in 0.. {
            assert!(round < 20, "a tuner changed the setting in every round");
            off().await?;
            let decided = echo_decisions(&rt).await;
            let before = (messages(&rt, 0).await, messages(&rt, 1).await);
            let burst: Vec<_> = (0..2000).map(|i| rt.call(peer, echo, (i,))).collect();
            for (i, call) in burst.into_iter().enumerate() {
                assert_eq!(call.await?, i as u64);
            }
            let after = (messages(&rt, 0).await, messages(&rt, 1).await);
            if !still_off().await? || echo_decisions(&rt).await != decided {
                continue;
            }
            // A few more than the frames: the counter queries themselves.
            let calls = after.0.0 - before.0.0;
            let responses = after.1.0 - before.1.0;
            assert!(calls <= 100.0, "2,000 calls in {calls} messages");
            assert!(
                responses <= 100.0,
                "2,000 responses in {responses} messages"
            );
            for i in 0..2000 {
                rt.post(peer, echo, (i,))?;
            }
            rt.flush();
            let after = (messages(&rt, 0).await, messages(&rt, 1).await);
            let posts = after.0.0 - before.0.0 - calls;
            assert!(posts <= 100.0, "2,000 posts in {posts} messages");
            assert!(one_at_a_time(&rt, peer, 20).await > 0);
            let last = (messages(&rt, 0).await, messages(&rt, 1).await);
            if !still_off().await? || echo_decisions(&rt).await != decided {
                continue;
            }
            assert_eq!(last.0.1, after.0.1, "lone calls went through a buffer");
            assert_eq!(last.1.1, after.1.1, "lone responses went through a buffer");
            break;
        }
        Ok(())
    })
    .unwrap();
}

/// Keeps the worker it runs on busy for `ms` milliseconds, as a long task
/// (or a core the OS took away for a while) would.
#[courier::action]
fn hold_worker(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// Calls sent a message each (the coalescing of an adaptive action off,
/// as its tuners set it for calls awaited one at a time) to a responder
/// whose only worker is busy wait in its inbox together: their responses
/// leave together when the last of them is done, not a message each
/// (`runtime/trains.rs`).
#[test]
fn calls_that_wait_together_for_a_busy_responder_are_answered_together() {
    let _turn = common::take_turns();
    let config = common::inproc(2)
        .workers(1)
        .coalescing(Coalescing::Adaptive(AdaptivePolicy::DEFAULT));
    courier::launch(config, |rt| async move {
        let peer = rt.locality(1);
        for round in 0.. {
            assert!(round < 20, "a tuner changed the setting in every round");
            rt.call(peer, echo_off_towards, (0,)).await?;
            rt.set_coalescing_to(echo, peer, Coalescing::Off).unwrap();
            let decided = echo_decisions(&rt).await;
            let before = messages(&rt, 1).await.0;
            let answered = || counter(&rt, 1, "/coalescing/count/flush-answered", "echo");
            let answered_before = answered().await;
            let firings_before = timer_firings(&rt, 1).await;
            rt.post(peer, hold_worker, (50,))?;
            rt.flush();
            rt.sleep(Duration::from_millis(10)).await;
            // One call a poll: a message each, under off.
            let mut calls = Vec::new();
            for i in 0..100 {
                calls.push(rt.call(peer, echo, (i,)));
                courier::yield_now().await;
            }
            for (i, call) in calls.into_iter().enumerate() {
                assert_eq!(call.await?, i as u64);
            }
            let responses = messages(&rt, 1).await.0 - before;
            let sent_by_the_last = answered().await - answered_before;
            let firings = timer_firings(&rt, 1).await - firings_before;
            let off_there = rt.call(peer, coalescing_of_echo, (0,)).await?;
            if rt.coalescing(echo, peer) != Coalescing::Off
                || !off_there
                || echo_decisions(&rt).await != decided
            {
                continue;
            }
            // A few more: the counter queries themselves.
            assert!(responses <= 20.0, "100 responses in {responses} messages");
            // They left with the train's last run, not only by the idle
            // worker's flush or the timer.
            assert!(
                sent_by_the_last >= 1.0,
                "no response left with the last run"
            );
            // On a locality of one worker, which runs the train's last
            // run, the held responses gave the flush timer nothing to do.
            assert_eq!(firings, 0.0, "the responder's flush timer fired");
            break;
        }
        Ok(())
    })
    .unwrap();
}

/// How many times the flush timer of locality `l` fired.
async fn timer_firings(rt: &Runtime, l: u32) -> f64 {
    let name = format!("/coalescing{{locality#{l}/total}}/time/timer-lateness");
    let mut set = rt.counters([name.as_str()]).unwrap();
    set.evaluate(false).await.unwrap()[0].value
}

/// Whether the coalescing of `echo` towards locality `peer` is off where
/// it is called.
#[courier::action]
fn coalescing_of_echo(peer: u32) -> bool {
    let rt = courier::current();
    rt.coalescing(echo, rt.locality(peer)) == Coalescing::Off
}

#[test]
fn adaptive_parses_prints_and_checks_its_bounds() {
    let _turn = common::take_turns();
    // Each text parses to its policy and prints back to it.
    for (text, policy) in [
        ("adaptive", AdaptivePolicy::DEFAULT),
        (
            "adaptive:max_bytes=4096,max_parcels=100",
            AdaptivePolicy {
                max_bytes: 4096,
                max_parcels: 100,
                kappa: None,
                split: None,
            },
        ),
        (
            "adaptive:kappa=0.5",
            AdaptivePolicy {
                kappa: Some(0.5),
                ..AdaptivePolicy::DEFAULT
            },
        ),
        (
            "adaptive:split=0",
            AdaptivePolicy {
                split: Some(0),
                ..AdaptivePolicy::DEFAULT
            },
        ),
    ] {
        let c: Coalescing = text.parse().unwrap();
        assert_eq!(c, Coalescing::Adaptive(policy), "{text}");
        assert_eq!(c.to_string().parse::<Coalescing>().unwrap(), c, "{text}");
    }
    // Each bad text is refused with the key it got wrong named.
    for (bad, key) in [
        ("adaptive:max_parcels=0", "max_"),
        ("adaptive:max_bytes=10", "max_"),
        ("adaptive:num_parcels=3", "max_"),
        ("adaptive:kappa=0", "kappa"),
        ("adaptive:kappa=-1", "kappa"),
        ("adaptive:kappa=inf", "kappa"),
        ("adaptive:kappa=x", "kappa"),
        ("adaptive:split=-1", "split"),
        ("adaptive:split=x", "split"),
    ] {
        let err = bad.parse::<Coalescing>().unwrap_err();
        assert!(err.contains(key), "{bad}: {err}");
    }
}

/// Returns its argument after 1 ms, without blocking a worker.
#[courier::action]
async fn late_echo(x: u64) -> u64 {
    courier::current().sleep(Duration::from_millis(1)).await;
    x
}

/// `/adapt/time/call-latency` is how long an awaited call takes to come
/// back: 64 calls kept in flight to an action that answers after 1 ms
/// take at least 1 ms each, and far less than the 64 ms they would take
/// one after another.
#[test]
fn the_call_latency_counter_says_how_long_awaited_calls_take() {
    let _turn = common::take_turns();
    let config = common::inproc(2).coalescing(Coalescing::Adaptive(AdaptivePolicy::DEFAULT));
    courier::launch(config, |rt| async move {
        let peer = rt.locality(1);
        let latency = || async {
            let name = "/adapt{locality#0/total}/time/call-latency";
            let mut set = rt.counters([name]).unwrap();
            set.evaluate(false).await.unwrap()[0].value
        };
        assert_eq!(latency().await, 0.0, "no epoch measured it yet");
        let in_flight = keep_calling(&rt, 64, None, |i| rt.call(peer, late_echo, (i,))).await?;
        let ns = latency().await;
        drain(in_flight).await?;
        assert!(
            (0.9e6..20e6).contains(&ns),
            "calls that take 1 ms measured at {ns} ns"
        );
        Ok(())
    })
    .unwrap();
}

/// Does nothing: a post to count.
#[courier::action]
fn noop(_x: u64) {}

/// Each destination has a tuner of its own: posts flooding locality 1
/// and posts to locality 2 once every 50 µs get different settings, the
/// fast stream more parcels a message (`√(2Qα/κ)` with each
/// destination's Q; one tuner for both would give them one setting).
#[test]
fn each_destination_is_tuned_for_its_own_traffic() {
    let _turn = common::take_turns();
    let config = common::inproc(3).coalescing(Coalescing::Adaptive(AdaptivePolicy::DEFAULT));
    courier::launch(config, |rt| async move {
        let (fast, slow) = (rt.locality(1), rt.locality(2));
        let start = std::time::Instant::now();
        let mut last_slow = start;
        let (mut to_fast, mut to_slow) = (0u64, 0u64);
        while start.elapsed() < Duration::from_millis(500) {
            rt.post(fast, noop, (to_fast,))?;
            to_fast += 1;
            if last_slow.elapsed() >= Duration::from_micros(50) {
                last_slow = std::time::Instant::now();
                rt.post(slow, noop, (to_slow,))?;
                to_slow += 1;
            }
            if to_fast % 64 == 0 {
                courier::yield_now().await;
            }
        }
        let parcels = |dest| match rt.coalescing(noop, dest) {
            Coalescing::Count(p) => p.num_parcels,
            // A parcel a message: the tuner may judge the slow stream
            // too sparse to hold.
            Coalescing::Off => 1,
            other => panic!("posts set to {other}"),
        };
        let (n_fast, n_slow) = (parcels(fast), parcels(slow));
        rt.quiesce().await?;
        assert!(
            to_fast > 8 * to_slow,
            "{to_fast} and {to_slow} posts: not a fast and a slow stream"
        );
        assert!(
            n_fast > n_slow,
            "{n_fast} parcels a message for {to_fast} posts, {n_slow} for {to_slow}"
        );
        Ok(())
    })
    .unwrap();
}

/// Posts `noop` to `peer` until its coalescing there is no longer
/// `first`, for 5 s at most, awaiting `pause()` after each; returns how
/// many it posted.
async fn post_until_tuned<F: std::future::Future<Output = ()>>(
    rt: &Runtime,
    peer: courier::LocalityId,
    first: Coalescing,
    pause: impl Fn() -> F,
) -> u64 {
    let start = std::time::Instant::now();
    let mut posts = 0u64;
    while rt.coalescing(noop, peer) == first && start.elapsed() < Duration::from_secs(5) {
        rt.post(peer, noop, (posts,)).unwrap();
        posts += 1;
        pause().await;
    }
    posts
}

/// Two localities under adaptive coalescing: `post` posts `noop` to
/// locality 1 until its setting there is no longer the one it is given
/// (the start count), and returns how many it posted; the setting must
/// have changed (`how` says how the posts came).
fn assert_posts_are_tuned<P, F>(how: &'static str, post: P)
where
    P: FnOnce(Runtime, courier::LocalityId, Coalescing) -> F + Send + 'static,
    F: std::future::Future<Output = u64> + Send + 'static,
{
    let config = common::inproc(2).coalescing(Coalescing::Adaptive(AdaptivePolicy::DEFAULT));
    courier::launch(config, |rt| async move {
        let peer = rt.locality(1);
        let first = rt.coalescing(noop, peer);
        let posts = post(rt.clone(), peer, first).await;
        let now = rt.coalescing(noop, peer);
        rt.quiesce().await?;
        assert_ne!(now, first, "after {posts} posts {how}");
        Ok(())
    })
    .unwrap();
}

/// A locality's own parcels follow the latest decision of the action's
/// tuners: no tuner judges them (they cost no message). Its buffer to
/// itself, made under the start count before any decision, kept that
/// count, its 100 µs timer and its sparse bypass, however the action
/// was tuned: posts to itself 200 µs apart all left alone, as half of
/// RandomAccess's updates were cut by the timer all run long.
#[test]
fn a_localitys_own_parcels_follow_the_latest_decision() {
    let _turn = common::take_turns();
    const GAP_US: u64 = 200;
    const POSTS: u64 = 100;
    // One worker: the task cannot resume on another worker, whose set
    // would make a new buffer to itself, under the latest decision
    // whatever the fix.
    let config = common::inproc(2)
        .workers(1)
        .coalescing(Coalescing::Adaptive(AdaptivePolicy::DEFAULT));
    courier::launch(config, |rt| async move {
        let (here, peer) = (rt.here(), rt.locality(1));
        // The buffer to itself, made under the start count.
        rt.post(here, noop, (0,))?;
        rt.quiesce().await?;
        let first = rt.coalescing(noop, peer);
        let spin = || {
            common::spin(Duration::from_micros(20));
            std::future::ready(())
        };
        let tuned_after = post_until_tuned(&rt, peer, first, spin).await;
        rt.quiesce().await?;
        let tuned = rt.coalescing(noop, peer);
        match tuned {
            Coalescing::Count(p) if p.interval_us > 2 * GAP_US && p.num_parcels > 1 => {}
            other => panic!("posts to {peer} tuned to {other} after {tuned_after}: no longer wait"),
        }
        let bypassed = || counter(&rt, 0, "/coalescing/count/flush-bypass", "noop");
        let before = bypassed().await;
        for i in 0..POSTS {
            common::spin(Duration::from_micros(GAP_US));
            rt.post(here, noop, (i,))?;
        }
        rt.quiesce().await?;
        let alone = bypassed().await - before;
        // The first may go alone: it came long after the last.
        assert!(
            alone <= 1.0,
            "{alone} of {POSTS} posts to itself {GAP_US} µs apart left alone, \
             where {peer} is tuned to {tuned}"
        );
        Ok(())
    })
    .unwrap();
}

/// Posts paced by a sleep, which leave when the worker runs out of tasks
/// (or alone, when the sleep ran late), are tuned from the start count.
#[test]
fn posts_paced_by_a_sleep_are_tuned() {
    let _turn = common::take_turns();
    assert_posts_are_tuned("20 µs apart", |rt, peer, first| async move {
        let sleep = || courier::sleep(Duration::from_micros(20));
        post_until_tuned(&rt, peer, first, sleep).await
    });
}

/// A task that sends for longer than an epoch without yielding has its
/// coalescing tuned meanwhile: the epochs end between its frames.
#[test]
fn a_task_that_never_yields_is_tuned_while_it_sends() {
    let _turn = common::take_turns();
    assert_posts_are_tuned("20 µs apart in one poll", |rt, peer, first| async move {
        // A busy wait: only an epoch that ends inside this one poll can
        // change the setting.
        let spin = || {
            common::spin(Duration::from_micros(20));
            std::future::ready(())
        };
        post_until_tuned(&rt, peer, first, spin).await
    });
}

/// The epochs end on whichever thread sends, with no thread of their own
/// to wake: posts from a thread off the workers, which the flush timer
/// sends while the workers sleep, are tuned from the start count.
#[test]
fn posts_from_a_thread_off_the_workers_are_tuned() {
    let _turn = common::take_turns();
    assert_posts_are_tuned("from a thread of its own", |rt, peer, first| async move {
        std::thread::spawn(move || {
            // The thread's own sleep, between posts made off the workers.
            let sleep = || {
                std::thread::sleep(Duration::from_micros(20));
                std::future::ready(())
            };
            futures::executor::block_on(post_until_tuned(&rt, peer, first, sleep))
        })
        .join()
        .unwrap()
    });
}

/// Echoes `x`; the padding (1 KiB) puts 64 calls in a frame of 64 KiB,
/// as parquet's rows.
#[courier::action]
fn padded_echo(x: u64, _padding: ByteBuf) -> u64 {
    x
}

/// Whether [`keep_busy`] goes on.
static BUSY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Keeps [`keep_busy`] going while alive, also when a test fails (a task
/// that never ends would keep the job from ending).
struct Busy;

impl Busy {
    fn start() -> Busy {
        BUSY.store(true, std::sync::atomic::Ordering::Relaxed);
        Busy
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        BUSY.store(false, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Keeps its locality's worker from running out of tasks (whose idle
/// flush would send what its buffers hold) while [`BUSY`] says so: spins
/// 50 µs, lets the other tasks run, again.
#[courier::action]
async fn keep_busy() {
    while BUSY.load(std::sync::atomic::Ordering::Relaxed) {
        common::spin(Duration::from_micros(50));
        courier::yield_now().await;
    }
}

/// A caller that awaits its calls thousands together lets their responses
/// wait for company at the responder, once its tuner has judged them: a
/// batch of 5,000 calls of 1 KiB comes in runs of 64, and the responses
/// of many runs share a message (the responder is kept busy, as
/// parquet's, so its idle flush does not send them a run at a time).
/// Without that, each run's responses leave when it has run
/// (`flush-answered`): parquet sent half its messages so.
#[test]
fn the_responses_to_calls_awaited_thousands_together_wait_for_company() {
    let _turn = common::take_turns();
    const CALLS: u64 = 5_000;
    let config = common::inproc(2)
        .workers(1)
        .coalescing(Coalescing::Adaptive(AdaptivePolicy::DEFAULT));
    courier::launch(config, |rt| async move {
        let peer = rt.locality(1);
        let _busy = Busy::start();
        rt.post(peer, keep_busy, ())?;
        let messages = |l| counter(&rt, l, "/coalescing/count/messages", "padded_echo");
        let answered = || counter(&rt, 1, "/coalescing/count/flush-answered", "padded_echo");
        let mut rounds = Vec::new();
        for _ in 0..60 {
            let before = (messages(0).await, messages(1).await, answered().await);
            let padding = ByteBuf::from(vec![1; 1024]);
            let batch: Vec<_> = (0..CALLS)
                .map(|i| rt.call(peer, padded_echo, (i, padding.clone())))
                .collect();
            for (i, call) in batch.into_iter().enumerate() {
                assert_eq!(call.await?, i as u64);
            }
            let calls = messages(0).await - before.0;
            let responses = messages(1).await - before.1;
            let runs_answered = answered().await - before.2;
            rounds.push((calls, responses, runs_answered));
            if runs_answered == 0.0 && responses <= calls / 2.0 {
                return Ok(());
            }
        }
        panic!("(messages of calls, of responses, runs answered) each round: {rounds:?}");
    })
    .unwrap();
}
