//! Mutated frames through a locality's real receive path (issue #14):
//! the root takes frames made by `courier::__private::FuzzFrames` (valid
//! frames of calls, responses and routed calls of this binary's actions,
//! mutated) as if locality#2 had sent them, and must neither panic (on
//! the receiving thread or in the tasks that run the calls) nor stop
//! serving its honest peer, locality#1.
//!
//! Control frames are left out here: what a control message does is
//! trusted from any member (a `Shutdown` stops the receiver), which is
//! another row of the issue; the decoders' harness in `parcel/fuzz.rs`
//! feeds them every mutant.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use courier::__private::{FuzzFrames, receive_frame};
use courier::{Action, Error, LocalityId};

/// Frames fed per run: a few seconds in a debug build.
const FRAMES: u64 = 200_000;

/// The seed when `COURIER_FUZZ_SEED` does not give one.
const SEED: u64 = 0x5eed_0ff2_a3e5;

/// The frame kind byte of a control frame (after the version byte).
const KIND_CONTROL: u8 = 1;

#[courier::action]
fn poke() -> u8 {
    7
}

#[courier::action]
fn poke_bytes(bytes: Vec<u8>) -> usize {
    bytes.len()
}

#[courier::action]
fn double(x: u64) -> u64 {
    x * 2
}

#[test]
fn mutated_frames_through_the_receive_path_never_panic() {
    common::library_panics();
    let seed = std::env::var("COURIER_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEED);
    let config = common::inproc(3).workers(2).credit_window(0);
    let result = courier::launch(config, move |rt| async move {
        let hostile = LocalityId::new(2);
        let mut frames = FuzzFrames::new(seed, &[<poke as Action>::ID, <poke_bytes as Action>::ID]);
        let (mut accepted, mut refused, mut control) = (0, 0, 0);
        let started = Instant::now();
        for n in 0..FRAMES {
            let mut input = frames.next_input();
            if input.get(1) == Some(&KIND_CONTROL) {
                control += 1;
                continue;
            }
            // From the hostile locality, as its connection says.
            if let Some(source) = input.get_mut(2..6) {
                source.copy_from_slice(&hostile.get().to_le_bytes());
            }
            match catch_unwind(AssertUnwindSafe(|| receive_frame(&rt, hostile, &input))) {
                Ok(Ok(())) => accepted += 1,
                Ok(Err(_)) => refused += 1,
                Err(_) => panic!(
                    "the receive path panicked on frame {n} of seed {seed:#x}: {}",
                    input.iter().map(|b| format!("{b:02x}")).collect::<String>()
                ),
            }
        }
        let took = started.elapsed();
        // The calls accepted run as tasks: give them time, then check the
        // root still serves its honest peer and itself.
        courier::sleep(Duration::from_millis(300)).await;
        assert_eq!(rt.call(rt.locality(1), double, (21,)).await?, 42);
        assert_eq!(rt.call(rt.here(), double, (2,)).await?, 4);
        assert_eq!(rt.call(rt.locality(1), poke, ()).await?, 7);
        eprintln!(
            "fuzz_receive: {accepted} frames accepted, {refused} refused, {control} control \
             frames skipped, in {took:?} (seed {seed:#x})"
        );
        assert!(
            accepted > 0 && refused > 0,
            "{accepted} accepted, {refused} refused"
        );
        Ok(())
    });
    match result {
        Ok(()) => {}
        // A malformed run of calls is found by the task that runs it,
        // which drops its sender: only the hostile locality may be lost.
        Err(Error::LocalitiesLost(lost)) => {
            assert!(
                lost.iter().all(|(l, _)| *l == LocalityId::new(2)),
                "{lost:?}"
            );
        }
        Err(other) => panic!("the job failed: {other}"),
    }
    let panics = common::library_panics().lock().unwrap();
    assert!(panics.is_empty(), "Courier panicked: {panics:?}");
}
