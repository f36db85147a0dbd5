//! Failures end as errors with clear messages, never as hangs or crashes of
//! healthy localities: handler panics, unknown actions, malformed and
//! oversized frames, lost peers, bad configuration.

mod common;

use std::time::{Duration, Instant};

use courier::{Action, Config, Error, LocalityId, TransportKind};

#[courier::action]
fn explode(message: String) -> u32 {
    panic!("{message}")
}

#[courier::action]
fn double(x: u64) -> u64 {
    2 * x
}

fn panics_become_errors(config: Config) {
    courier::launch(config, |rt| async move {
        let err = rt
            .call(rt.locality(1), explode, ("kaboom".into(),))
            .await
            .unwrap_err();
        assert!(err.is_panic(), "{err}");
        assert_eq!(err.panic_message(), Some("kaboom"));
        assert!(
            err.to_string().contains("explode") && err.to_string().contains("locality#1"),
            "{err}"
        );
        // Locally too, without the network.
        let err = rt
            .call(rt.here(), explode, ("local".into(),))
            .await
            .unwrap_err();
        assert_eq!(err.panic_message(), Some("local"));
        // The locality that panicked is still healthy.
        assert_eq!(rt.call(rt.locality(1), double, (21,)).await?, 42);
        Ok(())
    })
    .unwrap();
}

#[test]
fn handler_panic_is_an_error_inproc() {
    panics_become_errors(common::inproc(2));
}

#[test]
fn handler_panic_is_an_error_tcp() {
    panics_become_errors(common::tcp("handler_panic_is_an_error_tcp", 2));
}

/// The MPI cases of this file and the sizes they run at.
#[cfg(feature = "mpi")]
#[test]
fn under_mpirun() {
    common::mpirun(
        &[
            "mpi_handler_panic_is_an_error",
            "mpi_unknown_action_is_an_error",
        ],
        &[2, 4],
    );
}

#[test]
#[ignore = "an MPI case: run by under_mpirun"]
fn mpi_handler_panic_is_an_error() {
    panics_become_errors(common::mpi());
}

/// An action implemented by hand and deliberately not registered, as if the
/// receiver ran a different binary.
#[derive(Clone, Copy, Debug, Default)]
struct Unregistered;

impl Action for Unregistered {
    type Args = ();
    type Output = u8;
    const NAME: &'static str = "tests::Unregistered";

    async fn invoke(self, (): ()) -> u8 {
        7
    }
}

fn unknown_action_is_an_error_in(config: Config) {
    courier::launch(config, |rt| async move {
        let err = rt.call(rt.locality(1), Unregistered, ()).await.unwrap_err();
        assert!(err.is_unknown_action(), "{err}");
        assert!(err.to_string().contains("same binary"), "{err}");
        assert_eq!(rt.call(rt.locality(1), double, (2,)).await?, 4);
        Ok(())
    })
    .unwrap();
}

#[test]
fn unknown_action_is_an_error() {
    unknown_action_is_an_error_in(common::tcp("unknown_action_is_an_error", 2));
}

#[test]
#[ignore = "an MPI case: run by under_mpirun"]
fn mpi_unknown_action_is_an_error() {
    unknown_action_is_an_error_in(common::mpi());
}

#[test]
fn calls_to_missing_localities_fail_at_once() {
    courier::launch(common::inproc(2), |rt| async move {
        let err = rt.call(LocalityId::new(5), double, (1,)).await.unwrap_err();
        assert!(err.is_no_such_locality(), "{err}");
        assert!(
            rt.post(LocalityId::new(2), double, (1,))
                .unwrap_err()
                .is_no_such_locality()
        );
        Ok(())
    })
    .unwrap();
}

/// A frame no locality accepts.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
enum BadFrame {
    /// A valid header followed by a parcel of an unknown kind.
    Garbage,
    /// A frame of this many bytes.
    Oversized(u32),
}

/// Sends a bad raw frame to the root.
#[courier::action]
fn send_raw_to_root(bad: BadFrame) {
    let body = match bad {
        BadFrame::Garbage => {
            let mut body = courier::__private::frame_header(LocalityId::new(1));
            body.extend_from_slice(&[1, 0, 0, 0, 9, 9, 9]);
            body
        }
        BadFrame::Oversized(len) => vec![0; len as usize],
    };
    let rt = courier::current();
    courier::__private::send_raw_frame(&rt, LocalityId::ROOT, &body, 0).expect("raw send failed");
}

#[courier::action]
async fn never_returns() -> u8 {
    std::future::pending().await
}

/// Locality 1 sends the root a frame it cannot accept; the root drops the
/// connection, the pending call fails, and the job fails naming the cause.
fn bad_frame_fails_the_job(config: Config, bad: BadFrame, cause: &'static str) {
    let result = courier::launch(config, move |rt| async move {
        let waiting = rt.call(rt.locality(1), never_returns, ());
        rt.post(rt.locality(1), send_raw_to_root, (bad,))?;
        let err = waiting.await.unwrap_err();
        assert!(err.is_peer_lost(), "{err}");
        assert!(err.to_string().contains(cause), "{err}");
        Ok(())
    });
    match result {
        Err(Error::LocalitiesLost(lost)) => {
            assert_eq!(lost[0].0, LocalityId::new(1));
            assert!(lost[0].1.contains(cause), "{lost:?}");
        }
        other => panic!("the job did not fail: {other:?}"),
    }
}

#[test]
fn malformed_frame_fails_the_sender_inproc() {
    bad_frame_fails_the_job(common::inproc(2), BadFrame::Garbage, "malformed frame");
}

#[test]
fn malformed_frame_fails_the_sender_tcp() {
    bad_frame_fails_the_job(
        common::tcp("malformed_frame_fails_the_sender_tcp", 2),
        BadFrame::Garbage,
        "malformed frame",
    );
}

#[test]
fn oversized_frame_fails_the_sender_tcp() {
    let config = common::tcp("oversized_frame_fails_the_sender_tcp", 2).max_frame_bytes(64 * 1024);
    bad_frame_fails_the_job(config, BadFrame::Oversized(100_000), "above the limit");
}

#[courier::action]
fn echo(bytes: Vec<u8>) -> Vec<u8> {
    bytes
}

#[courier::action]
fn make(len: u32) -> Vec<u8> {
    vec![1; len as usize]
}

#[test]
fn oversized_calls_and_results_are_errors() {
    let config =
        common::tcp("oversized_calls_and_results_are_errors", 2).max_frame_bytes(64 * 1024);
    courier::launch(config, |rt| async move {
        let err = rt
            .call(rt.locality(1), echo, (vec![0; 100_000],))
            .await
            .unwrap_err();
        assert!(
            err.is_codec() && err.to_string().contains("max_frame_bytes"),
            "{err}"
        );
        for how in ["--max-frame-bytes", "COURIER_MAX_FRAME_BYTES"] {
            assert!(err.to_string().contains(how), "{err}");
        }
        let err = rt.call(rt.locality(1), make, (100_000,)).await.unwrap_err();
        assert!(
            err.is_codec() && err.to_string().contains("max_frame_bytes"),
            "{err}"
        );
        assert_eq!(rt.call(rt.locality(1), make, (1000,)).await?.len(), 1000);
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_call_above_the_default_frame_limit_fails_naming_the_setting() {
    courier::launch(common::inproc(2), |rt| async move {
        let big = vec![0; courier::DEFAULT_MAX_FRAME_BYTES];
        let err = rt.call(rt.locality(1), echo, (big,)).await.unwrap_err();
        assert!(err.is_too_large(), "{err}");
        assert!(
            err.to_string().contains("max_frame_bytes")
                && err.to_string().contains("--max-frame-bytes"),
            "{err}"
        );
        Ok(())
    })
    .unwrap();
}

/// Ends this process shortly, as a crash would.
#[courier::action]
fn die_soon(code: i32) {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        std::process::exit(code);
    });
}

/// Makes locality `victim` exit with status 3 and checks that every call
/// of `waiting` fails with a lost peer within `limit`.
async fn kill_and_expect_failures(
    rt: &courier::Runtime,
    victim: u32,
    waiting: Vec<courier::CallFuture<u8>>,
    limit: Duration,
) -> Result<(), courier::BoxError> {
    let start = Instant::now();
    rt.post(rt.locality(victim), die_soon, (3,))?;
    for call in waiting {
        let err = call.await.unwrap_err();
        assert!(err.is_peer_lost(), "{err}");
    }
    assert!(start.elapsed() < limit, "took {:?}", start.elapsed());
    Ok(())
}

#[test]
fn a_lost_intermediate_fails_the_calls_routed_through_it() {
    let result = courier::launch(
        common::tcp("a_lost_intermediate_fails_the_calls_routed_through_it", 4),
        |rt| async move {
            // A 2x2 grid: 0 -> 3 goes through 1 (row 0, column 1).
            let grid: courier::Coalescing =
                "count:num_parcels=4,interval_us=100,dimensions=2".parse()?;
            rt.set_coalescing(never_returns, grid)?;
            let waiting: Vec<_> = (0..10)
                .map(|_| rt.call(rt.locality(3), never_returns, ()))
                .collect();
            rt.flush();
            kill_and_expect_failures(&rt, 1, waiting, Duration::from_secs(5)).await?;
            Ok(())
        },
    );
    let Err(Error::LocalitiesLost(lost)) = result else {
        panic!("the job did not fail: {result:?}");
    };
    assert!(lost.iter().any(|(l, _)| l.get() == 1), "{lost:?}");
}

#[test]
fn killed_peer_fails_its_callers_within_a_second() {
    let result = courier::launch(
        common::tcp("killed_peer_fails_its_callers_within_a_second", 3),
        |rt| async move {
            let waiting: Vec<_> = (0..10)
                .map(|_| rt.call(rt.locality(1), never_returns, ()))
                .collect();
            kill_and_expect_failures(&rt, 1, waiting, Duration::from_secs(1)).await?;
            // New calls to the lost locality fail at once; the others still work.
            assert!(
                rt.call(rt.locality(1), double, (1,))
                    .await
                    .unwrap_err()
                    .is_peer_lost()
            );
            assert_eq!(rt.call(rt.locality(2), double, (4,)).await?, 8);
            Ok(())
        },
    );
    let Err(Error::LocalitiesLost(lost)) = result else {
        panic!("the job did not fail: {result:?}");
    };
    let message = Error::LocalitiesLost(lost.clone()).to_string();
    assert!(
        lost.iter()
            .any(|(l, why)| l.get() == 1 && why.contains("exit status: 3")),
        "{message}"
    );
}

#[test]
fn main_errors_and_panics_are_reported() {
    let err = courier::launch(common::inproc(2), |_rt| async move {
        Err::<(), _>("no luck".into())
    })
    .unwrap_err();
    assert!(
        matches!(err, Error::Main(_)) && err.to_string().contains("no luck"),
        "{err}"
    );
    let err = courier::launch(common::inproc(1), |_rt| async move {
        if true {
            panic!("main blew up");
        }
        Ok(())
    })
    .unwrap_err();
    assert!(err.to_string().contains("main blew up"), "{err}");
}

#[test]
fn bad_configuration_is_a_clear_error() {
    let err = courier::launch(Config::new().localities(0), |_rt| async { Ok(()) }).unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
    let err = courier::launch(common::inproc(2).workers(0), |_rt| async { Ok(()) }).unwrap_err();
    assert!(err.to_string().contains("worker"), "{err}");
    assert!(
        "udp"
            .parse::<TransportKind>()
            .unwrap_err()
            .to_string()
            .contains("udp")
    );
    assert_eq!("mpi".parse::<TransportKind>().unwrap(), TransportKind::Mpi);
    #[cfg(not(feature = "mpi"))]
    {
        let config = Config::new().localities(2).transport(TransportKind::Mpi);
        let err = courier::launch(config, |_rt| async { Ok(()) }).unwrap_err();
        assert!(
            err.to_string().contains("without Courier's `mpi` feature"),
            "{err}"
        );
    }
}

/// Counts the calls of `bump` on the locality that runs them.
static BUMPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[courier::action]
fn bump(by: u8) -> u8 {
    BUMPS.fetch_add(u64::from(by), std::sync::atomic::Ordering::SeqCst);
    by
}

/// Locality 1 sends the root one run of three calls of `bump`: the first
/// wants its result sent to a locality that does not exist, the second
/// wants it forwarded to a continuation on one, the third wants nothing.
#[courier::action]
fn send_bumps_with_bad_replies() {
    let mut run = Vec::new();
    // A caller on locality#99.
    run.push(1);
    run.extend_from_slice(&99u32.to_le_bytes());
    run.extend_from_slice(&7u64.to_le_bytes());
    run.extend_from_slice(&[0, 1, 1]); // part 0, one byte of arguments: 1
    // A continuation on locality#77 with no caller.
    run.push(2);
    run.extend_from_slice(&77u32.to_le_bytes());
    run.extend_from_slice(&<bump as Action>::ID.to_bits().to_le_bytes());
    run.extend_from_slice(&[0, 1, 10]); // no caller; arguments: 10
    // Nobody.
    run.extend_from_slice(&[0, 1, 100]);
    let body = common::calls_frame(1, <bump as Action>::ID, 3, &run);
    let rt = courier::current();
    courier::__private::send_raw_frame(&rt, LocalityId::ROOT, &body, 3).expect("raw send failed");
}

#[test]
fn replies_to_localities_that_do_not_exist_are_dropped_and_the_rest_runs() {
    common::library_panics();
    courier::launch(common::inproc(2), |rt| async move {
        BUMPS.store(0, std::sync::atomic::Ordering::SeqCst);
        rt.call(rt.locality(1), send_bumps_with_bad_replies, ())
            .await?;
        rt.quiesce().await?;
        assert_eq!(BUMPS.load(std::sync::atomic::Ordering::SeqCst), 111);
        // The locality still answers.
        assert_eq!(rt.call(rt.locality(1), double, (21,)).await?, 42);
        assert_eq!(rt.call(rt.here(), bump, (0,)).await?, 0);
        Ok(())
    })
    .unwrap();
    let panics = common::library_panics().lock().unwrap();
    assert!(panics.is_empty(), "Courier panicked: {panics:?}");
}

/// Locality 1 sends the root a shutdown acknowledgement nobody asked for
/// (a control frame: kind 1, `Control::ShutdownAck`, variant 3).
#[courier::action]
fn send_unasked_shutdown_ack() {
    let mut body = courier::__private::frame_header(LocalityId::new(1));
    body[1] = 1; // a control frame
    body.push(3); // ShutdownAck
    let rt = courier::current();
    courier::__private::send_raw_frame(&rt, LocalityId::ROOT, &body, 0).expect("raw send failed");
}

/// An early `ShutdownAck` used to be recorded, after which the root took
/// that peer's real loss for the end of the job and waited for ever.
#[test]
fn an_unasked_shutdown_ack_does_not_hide_a_later_loss() {
    let result = common::with_deadline("an unasked ack", Duration::from_secs(60), || {
        courier::launch(
            common::tcp("an_unasked_shutdown_ack_does_not_hide_a_later_loss", 2),
            |rt| async move {
                rt.call(rt.locality(1), send_unasked_shutdown_ack, ())
                    .await?;
                let waiting = vec![rt.call(rt.locality(1), never_returns, ())];
                kill_and_expect_failures(&rt, 1, waiting, Duration::from_secs(5)).await?;
                Ok(())
            },
        )
    });
    let Err(Error::LocalitiesLost(lost)) = result else {
        panic!("the job did not fail: {result:?}");
    };
    assert_eq!(lost[0].0, LocalityId::new(1), "{lost:?}");
}

/// How often each call of `tally` ran, by the index it was called with.
/// Tests that run at once use different indexes.
static TALLIES: [std::sync::atomic::AtomicU64; 32] =
    [const { std::sync::atomic::AtomicU64::new(0) }; 32];

#[courier::action]
fn tally(index: u8) -> u8 {
    TALLIES[usize::from(index)].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    index
}

/// How often each call of `tally` ran.
fn tallies() -> Vec<u64> {
    TALLIES
        .iter()
        .map(|t| t.load(std::sync::atomic::Ordering::SeqCst))
        .collect()
}

/// One encoded call of `tally(index)` that wants no result.
fn post_of_tally(index: u8) -> Vec<u8> {
    vec![0, 1, index]
}

/// Locality 1 sends the root two runs of five calls of `tally`, each
/// with calls that fail on their own: arguments that do not decode, a
/// caller or continuation on a locality that does not exist, a
/// continuation of an action that does not exist. The bad call comes
/// first in the first run.
#[courier::action]
fn send_tallies_with_failing_calls() {
    let bad_args = vec![0, 2, 0, 0]; // two bytes for a u8: does not decode
    let mut caller_99 = vec![1];
    caller_99.extend_from_slice(&99u32.to_le_bytes());
    caller_99.extend_from_slice(&7u64.to_le_bytes());
    let continuation = |locality: u32, action: u64, index: u8| {
        let mut call = vec![2];
        call.extend_from_slice(&locality.to_le_bytes());
        call.extend_from_slice(&action.to_le_bytes());
        call.extend_from_slice(&[0, 1, index]); // no caller
        call
    };
    let first = [
        bad_args.clone(),
        [&caller_99[..], &[0, 1, 1]].concat(),
        continuation(77, <tally as Action>::ID.to_bits(), 2),
        continuation(0, 0xdead, 3),
        post_of_tally(4),
    ];
    let second = [
        [&caller_99[..], &[0, 1, 5]].concat(),
        post_of_tally(6),
        bad_args,
        continuation(u32::MAX, <tally as Action>::ID.to_bits(), 8),
        post_of_tally(9),
    ];
    let rt = courier::current();
    for run in [first, second] {
        let body = common::calls_frame(1, <tally as Action>::ID, 5, &run.concat());
        courier::__private::send_raw_frame(&rt, LocalityId::ROOT, &body, 5)
            .expect("raw send failed");
    }
}

/// A call that fails (arguments that do not decode, a result for a
/// locality that does not exist) fails alone: every other call of its
/// run runs, once, wherever the bad one stands.
#[test]
fn a_failed_call_in_a_run_fails_alone() {
    common::library_panics();
    courier::launch(common::inproc(2), |rt| async move {
        rt.call(rt.locality(1), send_tallies_with_failing_calls, ())
            .await?;
        rt.quiesce().await?;
        // Index 0 and 7 had bad arguments; 3's continuation does not
        // exist (the call itself ran).
        assert_eq!(tallies()[..10], [0, 1, 1, 1, 1, 1, 1, 0, 1, 1]);
        // The root still serves locality 1.
        assert_eq!(rt.call(rt.locality(1), double, (21,)).await?, 42);
        Ok(())
    })
    .unwrap();
    let panics = common::library_panics().lock().unwrap();
    assert!(panics.is_empty(), "Courier panicked: {panics:?}");
}

/// Locality 1 sends the root a run of five calls of `tally` (indexes
/// from `base`) whose third is malformed (a reply tag no sender writes):
/// no reader can tell where the calls after it start.
#[courier::action]
fn send_tallies_around_a_malformed_call(base: u8) {
    let run = [
        post_of_tally(base),
        post_of_tally(base + 1),
        vec![9, 1, base + 2],
        post_of_tally(base + 3),
        post_of_tally(base + 4),
    ];
    let body = common::calls_frame(1, <tally as Action>::ID, 5, &run.concat());
    let rt = courier::current();
    courier::__private::send_raw_frame(&rt, LocalityId::ROOT, &body, 5).expect("raw send failed");
}

/// A malformed call ends the run as a protocol error: the calls before it
/// ran once, those after it do not run, and the sender learns it: the
/// receiver drops the connection with a reason that counts the calls not
/// run, so the sender's calls to it fail as lost and the job fails
/// naming the cause.
fn a_malformed_call_ends_its_run_loudly(config: Config, base: u8) {
    let result = courier::launch(config, move |rt| async move {
        let waiting = rt.call(rt.locality(1), never_returns, ());
        rt.post(
            rt.locality(1),
            send_tallies_around_a_malformed_call,
            (base,),
        )?;
        let err = waiting.await.unwrap_err();
        assert!(err.is_peer_lost(), "{err}");
        assert!(err.to_string().contains("malformed frame"), "{err}");
        let base = usize::from(base);
        let ran = &tallies()[base..base + 5];
        assert_eq!(ran, [1, 1, 0, 0, 0]);
        Ok(())
    });
    match result {
        Err(Error::LocalitiesLost(lost)) => {
            assert_eq!(lost[0].0, LocalityId::new(1));
            assert!(
                lost[0]
                    .1
                    .contains("3 of its 5 calls of `failures::tally` were not run"),
                "{lost:?}"
            );
        }
        other => panic!("the job did not fail: {other:?}"),
    }
}

#[test]
fn a_malformed_call_ends_its_run_loudly_inproc() {
    a_malformed_call_ends_its_run_loudly(common::inproc(2), 10);
}

#[test]
fn a_malformed_call_ends_its_run_loudly_tcp() {
    a_malformed_call_ends_its_run_loudly(
        common::tcp("a_malformed_call_ends_its_run_loudly_tcp", 2),
        20,
    );
}

/// Locality 2 sends locality `dest` a `Shutdown` only the root may send
/// (a control frame: kind 1, `Control::Shutdown`, variant 2).
#[courier::action]
fn send_forged_shutdown(dest: u32) {
    let rt = courier::current();
    let mut body = courier::__private::frame_header(rt.here());
    body[1] = 1; // a control frame
    body.push(2); // Shutdown
    courier::__private::send_raw_frame(&rt, LocalityId::new(dest), &body, 0)
        .expect("raw send failed");
}

/// A member's `Shutdown` used to stop the locality it was sent to: its
/// calls then failed as if the job were over.
#[test]
fn a_members_shutdown_is_ignored() {
    let result = courier::launch(
        common::tcp("a_members_shutdown_is_ignored", 3),
        |rt| async move {
            rt.call(rt.locality(2), send_forged_shutdown, (1,)).await?;
            std::thread::sleep(Duration::from_millis(100));
            for x in 0..10 {
                assert_eq!(rt.call(rt.locality(1), double, (x,)).await?, 2 * x);
            }
            Ok(())
        },
    );
    assert!(result.is_ok(), "{result:?}");
}
