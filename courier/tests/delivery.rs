//! Exactly-once delivery with checked results, over both transports, plus
//! continuations, nested calls, and shutdown with parcels in flight.

mod common;

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{Rng, checksum};
use courier::{CallFuture, Config, LocalityId};
use serde_bytes::ByteBuf;

/// Every call `deliver` received in this process: (run, target, origin, seq).
static RECEIVED: Mutex<Vec<(u64, u32, u32, u64)>> = Mutex::new(Vec::new());

/// Records the call and answers with who ran it and the payload's checksum.
#[courier::action]
fn deliver(run: u64, origin: u32, seq: u64, payload: ByteBuf) -> (u32, u64, u64) {
    let here = courier::current().here().get();
    RECEIVED.lock().unwrap().push((run, here, origin, seq));
    (here, seq, checksum(&payload))
}

/// Calls random localities `calls` times with random payloads (some of
/// several MB) and checks every answer; returns the number checked.
#[courier::action]
async fn storm(run: u64, calls: u64) -> u64 {
    let rt = courier::current();
    let here = rt.here().get();
    let mut rng = Rng::new(run ^ (u64::from(here) << 32));
    let mut expected = Vec::new();
    let mut futures: Vec<CallFuture<(u32, u64, u64)>> = Vec::new();
    for seq in 0..calls {
        let dest = rng.below(u64::from(rt.num_localities())) as u32;
        let len = match rng.below(100) {
            0 => 1_000_000 + rng.below(3_000_000) as usize,
            1..=10 => rng.below(70_000) as usize,
            _ => rng.below(200) as usize,
        };
        let payload = rng.bytes(len);
        expected.push((dest, seq, checksum(&payload)));
        futures.push(rt.call(
            LocalityId::new(dest),
            deliver,
            (run, here, seq, ByteBuf::from(payload)),
        ));
    }
    for (future, want) in futures.into_iter().zip(expected) {
        let got = future.await.expect("a storm call failed");
        assert_eq!(got, want, "wrong answer from {}", want.0);
    }
    calls
}

/// This locality's record of run `run`.
#[courier::action]
fn received(run: u64) -> Vec<(u32, u64)> {
    let here = courier::current().here().get();
    RECEIVED
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.0 == run && r.1 == here)
        .map(|r| (r.2, r.3))
        .collect()
}

fn exactly_once(config: Config, run: u64, calls: u64) {
    courier::launch(config, move |rt| async move {
        let n = rt.num_localities();
        let storms: Vec<_> = rt
            .localities()
            .map(|l| rt.call(l, storm, (run, calls)))
            .collect();
        for s in storms {
            assert_eq!(s.await?, calls);
        }
        let mut seen = Vec::new();
        for l in rt.localities() {
            seen.extend(rt.call(l, received, (run,)).await?);
        }
        let unique: BTreeSet<(u32, u64)> = seen.iter().copied().collect();
        assert_eq!(unique.len(), seen.len(), "a call ran more than once");
        let all: BTreeSet<(u32, u64)> = (0..n)
            .flat_map(|o| (0..calls).map(move |s| (o, s)))
            .collect();
        assert_eq!(unique, all, "a call never ran");
        Ok(())
    })
    .unwrap();
}

#[test]
fn exactly_once_inproc_2() {
    exactly_once(common::inproc(2), 1, 300);
}

#[test]
fn exactly_once_inproc_4() {
    exactly_once(common::inproc(4).workers(2), 2, 200);
}

#[test]
fn exactly_once_tcp_2() {
    exactly_once(common::tcp("exactly_once_tcp_2", 2), 3, 300);
}

#[test]
fn exactly_once_tcp_4() {
    exactly_once(common::tcp("exactly_once_tcp_4", 4), 4, 150);
}

/// The MPI cases of this file and the sizes they run at.
#[cfg(feature = "mpi")]
#[test]
fn under_mpirun() {
    common::mpirun(&["mpi_exactly_once"], &[2, 4]);
    common::mpirun(
        &[
            "mpi_continuations",
            "mpi_nested_calls",
            "mpi_shutdown_waits_for_parcels_in_flight",
        ],
        &[4],
    );
}

#[test]
#[ignore = "an MPI case: run by under_mpirun"]
fn mpi_exactly_once() {
    exactly_once(common::mpi(), 5, 200);
}

#[test]
#[ignore = "an MPI case: run by under_mpirun"]
fn mpi_continuations() {
    continuations(common::mpi());
}

#[test]
#[ignore = "an MPI case: run by under_mpirun"]
fn mpi_nested_calls() {
    nested_calls(common::mpi());
}

#[test]
#[ignore = "an MPI case: run by under_mpirun"]
fn mpi_shutdown_waits_for_parcels_in_flight() {
    shutdown_waits_for_parcels_in_flight(common::mpi());
}

#[courier::action]
fn numbers(n: u32) -> Vec<u32> {
    (0..n)
        .map(|i| i * 3 + courier::current().here().get())
        .collect()
}

#[courier::action]
fn sum_here(v: Vec<u32>) -> (u32, u64) {
    (
        courier::current().here().get(),
        v.iter().map(|&x| u64::from(x)).sum(),
    )
}

fn continuations(config: Config) {
    courier::launch(config, |rt| async move {
        let (ran_on, sum) = rt
            .call_then(rt.locality(1), numbers, (10,), rt.locality(2), sum_here)
            .await?;
        assert_eq!(ran_on, 2);
        assert_eq!(sum, (0..10u64).map(|i| i * 3 + 1).sum::<u64>());
        // The continuation may also run on the caller or the first locality.
        let (ran_on, _) = rt
            .call_then(rt.locality(2), numbers, (4,), rt.locality(0), sum_here)
            .await?;
        assert_eq!(ran_on, 0);
        let (ran_on, sum) = rt
            .call_then(rt.locality(0), numbers, (4,), rt.locality(0), sum_here)
            .await?;
        assert_eq!((ran_on, sum), (0, 18));
        Ok(())
    })
    .unwrap();
}

#[test]
fn continuations_inproc() {
    continuations(common::inproc(3));
}

#[test]
fn continuations_tcp() {
    continuations(common::tcp("continuations_tcp", 3));
}

/// Asks the next locality for its rank, recursively `depth` times.
#[courier::action]
async fn chain(depth: u32) -> Vec<u32> {
    let rt = courier::current();
    let here = rt.here().get();
    if depth == 0 {
        return vec![here];
    }
    let next = rt.locality((here + 1) % rt.num_localities());
    let mut path = rt
        .call(next, chain, (depth - 1,))
        .await
        .expect("nested call failed");
    path.insert(0, here);
    path
}

fn nested_calls(config: Config) {
    courier::launch(config, |rt| async move {
        let n = rt.num_localities();
        let path = rt.call(rt.locality(1), chain, (5,)).await?;
        let expected: Vec<u32> = (1..=6).map(|i| i % n).collect();
        assert_eq!(path, expected);
        Ok(())
    })
    .unwrap();
}

#[test]
fn nested_calls_tcp() {
    nested_calls(common::tcp("nested_calls_tcp", 3));
}

/// Posted calls counted on the root (in this process).
static TALLIED: AtomicU64 = AtomicU64::new(0);

#[courier::action]
fn tally() {
    TALLIED.fetch_add(1, Ordering::SeqCst);
}

/// Passes a post on to the root after a little work.
#[courier::action]
fn relay(spin: u32) {
    let mut x = 0u64;
    for i in 0..spin {
        x = std::hint::black_box(x.wrapping_add(u64::from(i)));
    }
    courier::current()
        .post(LocalityId::ROOT, tally, ())
        .expect("relay could not post");
}

fn shutdown_waits_for_parcels_in_flight(config: Config) {
    const POSTS: u64 = 20_000;
    courier::launch(config, |rt| async move {
        for i in 0..POSTS {
            let dest = rt.locality(1 + (i % 2) as u32);
            rt.post(dest, relay, ((i % 7) as u32 * 1000,))?;
        }
        // Return at once: everything is still in flight.
        Ok(())
    })
    .unwrap();
    assert_eq!(TALLIED.load(Ordering::SeqCst), POSTS);
}

#[test]
fn shutdown_waits_for_parcels_in_flight_tcp() {
    shutdown_waits_for_parcels_in_flight(common::tcp(
        "shutdown_waits_for_parcels_in_flight_tcp",
        3,
    ));
}
