//! Flow control (credit windows): every parcel still runs exactly once
//! under random settings and small windows, over inproc and TCP; floods
//! in both directions and handlers calling back their callers finish;
//! a thread outside the runtime waits for credit; a peer that sends
//! beyond its window is dropped.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Rng, with_deadline};
use courier::{Action, CallFuture, Coalescing, Config, Error, LocalityId, Runtime};

/// One bit per (origin, sequence number) of the calls this locality ran,
/// for `hit` and for `hit_back`, and the number of bits set twice.
struct Seen {
    hits: Vec<Vec<AtomicU64>>,
    backs: Vec<Vec<AtomicU64>>,
    twice: AtomicU64,
}

/// Calls each locality sends each other locality, at most.
const MAX_PER_PEER: u64 = 1 << 16;

impl Seen {
    fn new(localities: u32) -> Seen {
        let bits = || {
            (0..localities)
                .map(|_| (0..MAX_PER_PEER / 64).map(|_| AtomicU64::new(0)).collect())
                .collect()
        };
        Seen {
            hits: bits(),
            backs: bits(),
            twice: AtomicU64::new(0),
        }
    }

    fn mark(&self, table: &[Vec<AtomicU64>], origin: u32, seq: u64) {
        let bit = 1 << (seq % 64);
        let old = table[origin as usize][(seq / 64) as usize].fetch_or(bit, Ordering::Relaxed);
        if old & bit != 0 {
            self.twice.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Bits set for `origin` in `table`.
    fn count(table: &[Vec<AtomicU64>], origin: u32) -> u64 {
        table[origin as usize]
            .iter()
            .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
            .sum()
    }
}

fn spin(ns: u32) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_nanos(u64::from(ns)) {
        std::hint::spin_loop();
    }
}

/// A call of the flood: `ns` of work; with `back`, a post back to the
/// origin (a handler sending to its caller). Returns its sequence number.
#[courier::action]
fn hit(origin: u32, seq: u64, ns: u32, back: bool) -> u64 {
    spin(ns);
    let rt = courier::current();
    courier::with_state(|s: &Seen| s.mark(&s.hits, origin, seq));
    if back {
        rt.post(LocalityId::new(origin), hit_back, (rt.here().get(), seq))
            .expect("a handler's post failed");
    }
    seq
}

#[courier::action]
fn hit_back(from: u32, seq: u64) {
    courier::with_state(|s: &Seen| s.mark(&s.backs, from, seq));
}

/// What one flood does.
#[derive(Debug, Clone, Copy)]
struct Flood {
    /// Calls from each locality to each other one.
    per_peer: u64,
    /// Work per call.
    ns: u32,
    /// Handlers post back to their caller.
    back: bool,
}

/// Every locality sends `per_peer` calls to every other (one in 8 a
/// `call` whose result is checked, the rest posts), round robin; then
/// checks that each ran once. Returns the job's sends that waited for
/// credit and frames that queued for it.
async fn flood(rt: Runtime, f: Flood) -> Result<(f64, f64), courier::BoxError> {
    let p = rt.num_localities();
    let here = rt.here().get();
    let mut results: Vec<(u64, CallFuture<u64>)> = Vec::new();
    for seq in 0..f.per_peer {
        for k in 1..p {
            let dest = LocalityId::new((here + k) % p);
            if seq % 8 == 0 {
                results.push((seq, rt.call(dest, hit, (here, seq, f.ns, f.back))));
            } else {
                rt.post(dest, hit, (here, seq, f.ns, f.back))?;
            }
        }
    }
    for (seq, result) in results {
        assert_eq!(result.await?, seq);
    }
    rt.barrier().await?;
    rt.quiesce().await?;
    let seen = rt.state::<Seen>();
    let mut wrong = seen.twice.load(Ordering::Relaxed);
    for origin in (0..p).filter(|&o| o != here) {
        wrong += f.per_peer.abs_diff(Seen::count(&seen.hits, origin));
        if f.back {
            wrong += f.per_peer.abs_diff(Seen::count(&seen.backs, origin));
        }
    }
    if wrong != 0 {
        let counts: Vec<_> = (0..p)
            .map(|o| (Seen::count(&seen.hits, o), Seen::count(&seen.backs, o)))
            .collect();
        eprintln!(
            "locality {here}: twice {}, (hits, backs) by origin {counts:?}, expected {} each",
            seen.twice.load(Ordering::Relaxed),
            f.per_peer
        );
    }
    let wrong = rt.all_reduce(wrong, |a, b| a + b).await?;
    assert_eq!(wrong, 0, "calls lost or run twice");
    let waits = counter_sum(&rt, "/flow{locality#*/total}/count/waits").await?;
    let queued = counter_sum(&rt, "/flow{locality#*/total}/count/queued-frames").await?;
    Ok((waits, queued))
}

/// Whether the pool of every locality is whole again (every loan given
/// back), waiting up to two seconds for the last credit to come back.
async fn pools_are_whole(rt: &Runtime, pool: f64) -> Result<bool, courier::BoxError> {
    for _ in 0..200 {
        let values = rt
            .counters(["/flow{locality#*/total}/count/pool-free"])?
            .evaluate(false)
            .await?;
        if values.iter().all(|v| v.value == pool) {
            return Ok(true);
        }
        courier::sleep(Duration::from_millis(10)).await;
    }
    Ok(false)
}

async fn counter_sum(rt: &Runtime, name: &str) -> Result<f64, courier::BoxError> {
    let values = rt.counters([name])?.evaluate(false).await?;
    Ok(values.iter().map(|v| v.value).sum())
}

#[test]
fn senders_borrow_from_the_pool_and_give_every_loan_back() {
    let pool = 1 << 20;
    let config = common::inproc(2)
        .workers(1)
        .credit_window(4096)
        .credit_pool(pool)
        .coalescing("off".parse().unwrap())
        .state(|_, count| Seen::new(count));
    with_deadline("borrowing", Duration::from_secs(60), move || {
        courier::launch(config, move |rt| async move {
            for seq in 0..20_000 {
                rt.post(rt.locality(1), hit, (0, seq, 500, false))?;
            }
            rt.quiesce().await?;
            assert_eq!(rt.call(rt.locality(1), hits_from, (0,)).await?, 20_000);
            let asked = counter_sum(&rt, "/flow{locality#0/total}/count/borrow-requests").await?;
            let borrowed = counter_sum(&rt, "/flow{locality#0/total}/count/borrowed-bytes").await?;
            let lent = counter_sum(&rt, "/flow{locality#1/total}/count/lent-bytes").await?;
            assert!(
                asked > 0.0 && borrowed > 4096.0,
                "{asked} requests, {borrowed} bytes"
            );
            assert_eq!(borrowed, lent, "what was borrowed was lent");
            assert!(
                pools_are_whole(&rt, pool as f64).await?,
                "a loan was never given back"
            );
            Ok(())
        })
        .unwrap();
    });
}

#[test]
fn a_hint_lets_a_sender_use_space_beyond_its_window_without_asking() {
    let config = common::inproc(2)
        .workers(1)
        .credit_window(4096)
        .credit_hint(4 << 20)
        .credit_pool(0)
        .coalescing("off".parse().unwrap())
        .state(|_, count| Seen::new(count));
    with_deadline("a hint", Duration::from_secs(60), move || {
        courier::launch(config, move |rt| async move {
            // About 3 MB of charge: within the hint, far beyond the window.
            for seq in 0..10_000 {
                rt.post(rt.locality(1), hit, (0, seq, 500, false))?;
            }
            rt.quiesce().await?;
            assert_eq!(rt.call(rt.locality(1), hits_from, (0,)).await?, 10_000);
            let waits = counter_sum(&rt, "/flow{locality#0/total}/count/waits").await?;
            let asked = counter_sum(&rt, "/flow{locality#0/total}/count/borrow-requests").await?;
            assert_eq!((waits, asked), (0.0, 0.0), "the hint covered everything");
            Ok(())
        })
        .unwrap();
    });
}

/// Runs `f` as an SPMD job under `config` and returns (waits, frames
/// queued) over the job.
fn run_flood(what: &str, config: Config, f: Flood) -> (f64, f64) {
    let n = config.num_localities();
    let config = config.state(|_, count| Seen::new(count));
    assert!(f.per_peer <= MAX_PER_PEER);
    with_deadline(what, Duration::from_secs(120), move || {
        let _ = n;
        courier::launch_spmd(config, move |rt| flood(rt, f)).expect("the flood failed")
    })
}

/// Random coalescing: off, or a count or bytes policy with random limits.
fn random_coalescing(rng: &mut Rng) -> Coalescing {
    let spec = match rng.below(3) {
        0 => "off".to_owned(),
        1 => format!("count:num_parcels={}", 1 + rng.below(300)),
        _ => format!("bytes:buffer_bytes={}", 256 + rng.below(16_000)),
    };
    spec.parse().unwrap()
}

#[test]
fn exactly_once_under_credit_with_random_settings_inproc() {
    let mut rng = Rng::new(13);
    for round in 0..6 {
        let localities = 2 + rng.below(3) as u32;
        let window = 4096 << rng.below(5);
        let coalescing = random_coalescing(&mut rng);
        let f = Flood {
            per_peer: 3000 + rng.below(3000),
            ns: rng.below(3) as u32 * 500,
            back: rng.below(2) == 0,
        };
        let config = common::inproc(localities)
            .workers(1 + rng.below(2) as usize)
            .credit_window(window)
            .coalescing(coalescing);
        let what =
            format!("round {round}: {localities} localities, window {window}, {coalescing}, {f:?}");
        eprintln!("{what} ...");
        let (waits, queued) = run_flood(&what, config, f);
        eprintln!("{what}: {waits} waits, {queued} frames queued");
    }
}

#[test]
fn small_windows_make_senders_wait_and_every_call_still_runs_inproc() {
    let f = Flood {
        per_peer: 20_000,
        ns: 2_000,
        back: false,
    };
    let config = common::inproc(2)
        .workers(1)
        .credit_window(4096)
        .credit_pool(0)
        .coalescing("off".parse().unwrap());
    let (waits, queued) = run_flood("a small window", config, f);
    assert!(
        waits > 0.0 && queued > 0.0,
        "credit never ran out: {waits} waits, {queued} queued"
    );
}

#[test]
fn exactly_once_under_credit_tcp_3() {
    let f = Flood {
        per_peer: 10_000,
        ns: 500,
        back: true,
    };
    let config = common::tcp("exactly_once_under_credit_tcp_3", 3)
        .workers(1)
        .credit_window(8192)
        .credit_pool(64 << 10);
    let (waits, queued) = run_flood("tcp flood", config, f);
    assert!(
        waits > 0.0 && queued > 0.0,
        "credit never ran out: {waits} waits, {queued} queued"
    );
}

#[test]
fn mutual_floods_with_callbacks_do_not_deadlock_inproc_4() {
    let f = Flood {
        per_peer: 8_000,
        ns: 0,
        back: true,
    };
    let config = common::inproc(4)
        .workers(1)
        .credit_window(4096)
        .coalescing("count:num_parcels=64".parse().unwrap());
    run_flood("a mutual flood of 4", config, f);
}

/// Calls its caller back, `depth` times over, awaiting each answer: a
/// cycle of calls between two localities.
#[courier::action]
async fn ping_pong(from: u32, depth: u32, pad: serde_bytes::ByteBuf) -> u32 {
    if depth == 0 {
        return 0;
    }
    let rt = courier::current();
    let here = rt.here().get();
    let back = rt.call(LocalityId::new(from), ping_pong, (here, depth - 1, pad));
    back.await.expect("a call back failed") + 1
}

fn cyclic_calls(config: Config) {
    with_deadline("cyclic calls", Duration::from_secs(60), move || {
        courier::launch(config, |rt| async move {
            let here = rt.here().get();
            let calls: Vec<_> = (0..400)
                .map(|i| {
                    let pad = serde_bytes::ByteBuf::from(vec![i as u8; 600]);
                    rt.call(rt.locality(1), ping_pong, (here, 6, pad))
                })
                .collect();
            for c in calls {
                assert_eq!(c.await?, 6);
            }
            Ok(())
        })
        .unwrap();
    });
}

#[test]
fn cyclic_calls_do_not_deadlock_inproc() {
    cyclic_calls(common::inproc(2).workers(1).credit_window(4096));
}

#[test]
fn cyclic_calls_do_not_deadlock_tcp() {
    cyclic_calls(
        common::tcp("cyclic_calls_do_not_deadlock_tcp", 2)
            .workers(1)
            .credit_window(4096),
    );
}

#[test]
fn a_thread_outside_the_runtime_waits_for_credit() {
    let config = common::inproc(2)
        .workers(1)
        .credit_window(4096)
        .credit_pool(0)
        .coalescing("off".parse().unwrap())
        .state(|_, count| Seen::new(count));
    with_deadline("a thread outside", Duration::from_secs(60), move || {
        courier::launch(config, |rt| async move {
            let sender = rt.clone();
            let thread = std::thread::spawn(move || {
                for seq in 0..20_000 {
                    sender
                        .post(sender.locality(1), hit, (0, seq, 1_000, false))
                        .unwrap();
                }
            });
            while !thread.is_finished() {
                courier::sleep(Duration::from_millis(5)).await;
            }
            thread.join().unwrap();
            rt.quiesce().await?;
            let ran = rt.call(rt.locality(1), hits_from, (0,)).await?;
            assert_eq!(ran, 20_000);
            let values = rt
                .counters(["/flow{locality#0/total}/count/waits"])?
                .evaluate(false)
                .await?;
            assert!(values[0].value > 0.0, "the thread never waited: {values:?}");
            Ok(())
        })
        .unwrap();
    });
}

/// How many `hit`s from `origin` ran here.
#[courier::action]
fn hits_from(origin: u32) -> u64 {
    courier::with_state(|s: &Seen| Seen::count(&s.hits, origin))
}

/// Sends the root 50 frames of 1000 calls of `bump` each (3 bytes a
/// call), straight to the transport, past the credit window: the root
/// has not run the first when the second arrives.
#[courier::action]
fn send_past_the_window() {
    let mut run = Vec::new();
    for _ in 0..1000 {
        run.extend_from_slice(&[0, 1, 1]); // no caller; arguments: 1
    }
    let body = common::calls_frame(1, <bump as Action>::ID, 1000, &run);
    let rt = courier::current();
    for _ in 0..50 {
        // The connection is dropped part of the way.
        let _ = courier::__private::send_raw_frame(&rt, LocalityId::ROOT, &body, 1000);
    }
}

#[courier::action]
fn bump(by: u8) -> u8 {
    by
}

#[courier::action]
async fn never_returns() -> u8 {
    std::future::pending().await
}

#[test]
fn a_peer_beyond_its_window_is_dropped() {
    let config = common::inproc(2).workers(1).credit_window(4096);
    let result = courier::launch(config, |rt| async move {
        let waiting = rt.call(rt.locality(1), never_returns, ());
        rt.post(rt.locality(1), send_past_the_window, ())?;
        let err = waiting.await.unwrap_err();
        assert!(err.is_peer_lost(), "{err}");
        Ok(())
    });
    match result {
        Err(Error::LocalitiesLost(lost)) => {
            assert_eq!(lost[0].0, LocalityId::new(1));
            assert!(lost[0].1.contains("broke flow control"), "{lost:?}");
            assert!(lost[0].1.contains("credit_window"), "{lost:?}");
        }
        other => panic!("the job did not fail: {other:?}"),
    }
}

/// The MPI cases of this file and the sizes they run at.
#[cfg(feature = "mpi")]
#[test]
fn under_mpirun() {
    common::mpirun(&["mpi_flood_with_callbacks"], &[2, 4]);
}

#[test]
#[ignore = "an MPI case: run by under_mpirun"]
fn mpi_flood_with_callbacks() {
    let f = Flood {
        per_peer: 5_000,
        ns: 200,
        back: true,
    };
    let config = common::mpi()
        .workers(1)
        .credit_window(8192)
        .credit_pool(32 << 10);
    run_flood("an MPI flood", config, f);
}
