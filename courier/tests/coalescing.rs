//! Coalescing: exactly-once delivery under both policies while settings
//! change, sparse bypass, cutoff, the flush timer, flushing at shutdown,
//! per-action isolation, and counters that match the parcels sent.

mod common;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Rng, checksum};
use courier::{BytePolicy, CallFuture, Coalescing, Config, CountPolicy, LocalityId, Runtime};
use serde_bytes::ByteBuf;

/// Every call of `record` this process ran: (run, target, origin, seq).
static RECORDED: Mutex<Vec<(u64, u32, u32, u64)>> = Mutex::new(Vec::new());

/// Records the call; answers with the payload's checksum.
#[courier::action(coalescing)]
fn record(run: u64, origin: u32, seq: u64, payload: ByteBuf) -> (u64, u64) {
    let here = courier::current().here().get();
    RECORDED.lock().unwrap().push((run, here, origin, seq));
    (seq, checksum(&payload))
}

/// This locality's record of run `run`, as (origin, seq).
#[courier::action]
fn recorded(run: u64) -> Vec<(u32, u64)> {
    let here = courier::current().here().get();
    RECORDED
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.0 == run && r.1 == here)
        .map(|r| (r.2, r.3))
        .collect()
}

/// A random setting: off, or either policy with small random parameters.
fn random_setting(rng: &mut Rng) -> Coalescing {
    match rng.below(3) {
        0 => Coalescing::Off,
        1 => Coalescing::Count(CountPolicy {
            num_parcels: 1 + rng.below(64) as u32,
            interval_us: rng.below(2000),
            max_bytes: 256 + rng.below(100_000) as usize,
            dimensions: 1 + rng.below(2) as u8,
        }),
        _ => {
            let threshold = 0.1 + rng.below(80) as f64 / 100.0;
            Coalescing::Bytes(BytePolicy {
                buffer_bytes: 64 + rng.below(50_000) as usize,
                threshold,
                cutoff: (1.0 - threshold) * rng.below(101) as f64 / 100.0,
                timeout_us: rng.below(2000),
                dimensions: 1 + rng.below(2) as u8,
            })
        }
    }
}

/// Calls awaiting their answer: (call, seq, checksum of the payload).
type Pending = Vec<(CallFuture<(u64, u64)>, u64, u64)>;

/// Calls `record` on random localities `calls` times, changing this
/// locality's setting for it every few calls; checks every answer.
#[courier::action]
async fn storm(run: u64, calls: u64) -> u64 {
    let rt = courier::current();
    let here = rt.here().get();
    let mut rng = Rng::new(run ^ (u64::from(here) << 32));
    let mut pending: Pending = Vec::new();
    for seq in 0..calls {
        if rng.below(50) == 0 {
            rt.set_coalescing(record, random_setting(&mut rng)).unwrap();
        }
        if rng.below(200) == 0 {
            let dest = rt.locality(rng.below(u64::from(rt.num_localities())) as u32);
            rt.set_coalescing_to(record, dest, random_setting(&mut rng))
                .unwrap();
        }
        let dest = rng.below(u64::from(rt.num_localities())) as u32;
        let len = match rng.below(100) {
            0 => rng.below(200_000) as usize,
            1..=10 => rng.below(5_000) as usize,
            _ => rng.below(64) as usize,
        };
        let payload = rng.bytes(len);
        let sum = checksum(&payload);
        let call = rt.call(
            LocalityId::new(dest),
            record,
            (run, here, seq, ByteBuf::from(payload)),
        );
        pending.push((call, seq, sum));
        if pending.len() >= 500 {
            check(&mut pending).await;
        }
    }
    check(&mut pending).await;
    calls
}

async fn check(pending: &mut Pending) {
    for (call, seq, sum) in pending.drain(..) {
        assert_eq!(call.await.expect("a record call failed"), (seq, sum));
    }
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
        let mut seen: BTreeMap<(u32, u64), u32> = BTreeMap::new();
        for l in rt.localities() {
            for key in rt.call(l, recorded, (run,)).await? {
                *seen.entry(key).or_default() += 1;
            }
        }
        assert_eq!(seen.len() as u64, u64::from(n) * calls, "lost calls");
        assert!(seen.values().all(|&c| c == 1), "duplicated calls");
        Ok(())
    })
    .unwrap();
}

#[test]
fn exactly_once_inproc_with_changing_settings() {
    exactly_once(common::inproc(3).workers(2), 1, 4000);
}

/// The MPI cases of this file and the sizes they run at.
#[cfg(feature = "mpi")]
#[test]
fn under_mpirun() {
    common::mpirun(&["mpi_exactly_once_with_changing_settings"], &[2, 4]);
}

#[test]
#[ignore = "an MPI case: run by under_mpirun"]
fn mpi_exactly_once_with_changing_settings() {
    exactly_once(common::mpi(), 3, 2000);
}

#[test]
fn exactly_once_tcp_with_changing_settings() {
    exactly_once(
        common::tcp("exactly_once_tcp_with_changing_settings", 2),
        2,
        4000,
    );
}

/// An action left uncoalesced unless a test turns it on.
#[courier::action(coalescing = false)]
fn echo(x: u64) -> u64 {
    x
}

/// When the calls of `stamp` ran, in ns since [`epoch`], by sequence number.
static STAMPS: Mutex<BTreeMap<u64, u64>> = Mutex::new(BTreeMap::new());

fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Records when it ran.
#[courier::action(coalescing = false)]
fn stamp(seq: u64) {
    let now = epoch().elapsed().as_nanos() as u64;
    STAMPS.lock().unwrap().insert(seq, now);
}

/// The value of one counter of locality `l`.
async fn counter(rt: &Runtime, l: u32, name: &str) -> f64 {
    let full = format!("/coalescing{{locality#{l}/total}}/{name}");
    let mut set = rt.counters([full.as_str()]).unwrap();
    set.evaluate(false).await.unwrap()[0].value
}

#[test]
fn a_busy_workers_parcel_waits_for_the_timer_and_no_longer() {
    courier::launch(common::inproc(2), |rt| async move {
        let interval = Duration::from_millis(30);
        let policy = CountPolicy {
            num_parcels: 1000,
            interval_us: interval.as_micros() as u64,
            ..CountPolicy::DEFAULT
        };
        rt.set_coalescing(stamp, Coalescing::Count(policy))?;
        let other = rt.locality(1);
        // The first parcel ever has no predecessor: sparse, sent at once.
        rt.post(other, stamp, (1,))?;
        // The next comes right after it: queued. This task then keeps its
        // worker busy (it never runs out of tasks), so only the flush timer
        // can send the parcel.
        let sent = epoch().elapsed();
        rt.post(other, stamp, (2,))?;
        std::thread::sleep(interval * 10);
        let ran = Duration::from_nanos(STAMPS.lock().unwrap()[&2]);
        let waited = ran - sent;
        let lateness = counter(&rt, 0, "time/average-timer-lateness").await;
        assert!(waited >= interval, "ran after {waited:?}");
        let bound = interval + Duration::from_nanos(lateness as u64) + Duration::from_millis(100);
        assert!(
            waited < bound,
            "waited {waited:?}, timer {lateness} ns late"
        );
        assert_eq!(counter(&rt, 0, "count/flush-timer@stamp").await, 1.0);
        assert_eq!(counter(&rt, 0, "count/flush-bypass@stamp").await, 1.0);
        assert_eq!(counter(&rt, 0, "count/messages@stamp").await, 2.0);
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_lone_call_leaves_when_its_worker_runs_out_of_tasks() {
    courier::launch(common::inproc(2), |rt| async move {
        let policy = CountPolicy {
            num_parcels: 1000,
            interval_us: 60_000_000,
            ..CountPolicy::DEFAULT
        };
        rt.set_coalescing(echo, Coalescing::Count(policy))?;
        let other = rt.locality(1);
        for i in 0..20 {
            // Back to back: never sparse, and the timer waits a minute; the
            // call leaves as soon as this task waits for its result.
            let start = Instant::now();
            assert_eq!(rt.call(other, echo, (i,)).await?, i);
            assert!(start.elapsed() < Duration::from_secs(5));
        }
        assert_eq!(counter(&rt, 0, "count/flush-bypass@echo").await, 1.0);
        assert_eq!(counter(&rt, 0, "count/flush-idle@echo").await, 19.0);
        assert_eq!(counter(&rt, 0, "count/flush-timer@echo").await, 0.0);
        Ok(())
    })
    .unwrap();
}

#[test]
fn sparse_traffic_is_sent_at_once() {
    courier::launch(common::inproc(2), |rt| async move {
        let policy = CountPolicy {
            num_parcels: 1000,
            interval_us: 1000,
            ..CountPolicy::DEFAULT
        };
        rt.set_coalescing(echo, Coalescing::Count(policy))?;
        for i in 0..5 {
            std::thread::sleep(Duration::from_millis(3));
            let start = Instant::now();
            assert_eq!(rt.call(rt.locality(1), echo, (i,)).await?, i);
            assert!(start.elapsed() < Duration::from_secs(1));
        }
        assert_eq!(counter(&rt, 0, "count/flush-bypass@echo").await, 5.0);
        assert_eq!(counter(&rt, 0, "count/flush-timer@echo").await, 0.0);
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_parcel_above_the_cutoff_goes_out_with_the_buffer() {
    courier::launch(common::inproc(2), |rt| async move {
        let policy = BytePolicy {
            buffer_bytes: 4096,
            threshold: 0.5,
            cutoff: 0.25,
            timeout_us: 60_000_000,
            dimensions: 1,
        };
        rt.set_coalescing(record, Coalescing::Bytes(policy))?;
        let other = rt.locality(1);
        let mut calls = Vec::new();
        for (seq, len) in [(0, 10), (1, 10), (2, 10), (3, 2000)] {
            let payload = ByteBuf::from(vec![7u8; len]);
            calls.push(rt.call(other, record, (99, 0, seq, payload)));
        }
        // Answers come back (the responder does not coalesce `record` here),
        // long before the minute-long timeout.
        let start = Instant::now();
        for (seq, call) in calls.into_iter().enumerate() {
            assert_eq!(call.await?.0, seq as u64);
        }
        assert!(start.elapsed() < Duration::from_secs(30));
        assert_eq!(counter(&rt, 0, "count/flush-cutoff@record").await, 1.0);
        assert_eq!(counter(&rt, 0, "count/messages@record").await, 1.0);
        assert_eq!(counter(&rt, 0, "count/parcels@record").await, 4.0);
        Ok(())
    })
    .unwrap();
}

#[courier::action(coalescing = false)]
fn slow_lane(x: u64) {
    SLOW_LANE.fetch_add(x, Ordering::SeqCst);
}

static SLOW_LANE: AtomicU64 = AtomicU64::new(0);

#[test]
fn an_uncoalesced_action_is_never_held_up_and_termination_flushes() {
    let started = Instant::now();
    courier::launch(common::inproc(2), |rt| async move {
        let policy = CountPolicy {
            num_parcels: 1000,
            interval_us: 60_000_000,
            ..CountPolicy::DEFAULT
        };
        rt.set_coalescing(slow_lane, Coalescing::Count(policy))?;
        let other = rt.locality(1);
        // A thread that is not a worker never runs out of tasks: what it
        // buffers waits for the timer (a minute here) or for the end.
        let outside = rt.clone();
        std::thread::spawn(move || -> Result<(), courier::CallError> {
            outside.post(other, slow_lane, (1,))?; // the first parcel: sent at once
            outside.post(other, slow_lane, (10,))?; // queued for a minute
            outside.post(other, slow_lane, (100,))
        })
        .join()
        .unwrap()?;
        let start = Instant::now();
        assert_eq!(rt.call(other, echo, (5,)).await?, 5);
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(
            SLOW_LANE.load(Ordering::SeqCst),
            1,
            "the queued posts left early"
        );
        Ok(())
    })
    .unwrap();
    // The job ended without waiting a minute: the buffer was flushed when
    // the job looked idle, and every post ran once.
    assert_eq!(SLOW_LANE.load(Ordering::SeqCst), 111);
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn counters_equal_the_parcels_sent() {
    courier::launch(common::inproc(2), |rt| async move {
        let policy = CountPolicy {
            num_parcels: 10,
            interval_us: 1_000_000,
            ..CountPolicy::DEFAULT
        };
        rt.set_coalescing_everywhere(echo, Coalescing::Count(policy))
            .await?;
        let other = rt.locality(1);
        let calls: Vec<_> = (0..995).map(|i| rt.call(other, echo, (i,))).collect();
        for (i, call) in calls.into_iter().enumerate() {
            assert_eq!(call.await?, i as u64);
        }
        // Calls from locality 0, responses from locality 1.
        for l in [0, 1] {
            let parcels = counter(&rt, l, "count/parcels@echo").await;
            let messages = counter(&rt, l, "count/messages@echo").await;
            assert_eq!(parcels, 995.0, "locality#{l}");
            let mut by_reason = 0.0;
            for reason in [
                "count", "bytes", "timer", "bypass", "cutoff", "shutdown", "changed", "idle",
            ] {
                by_reason += counter(&rt, l, &format!("count/flush-{reason}@echo")).await;
            }
            assert_eq!(by_reason, messages, "locality#{l}");
            let average = counter(&rt, l, "count/average-parcels-per-message@echo").await;
            assert!((average - parcels / messages).abs() < 1e-9);
            assert!(messages < 995.0 / 5.0, "locality#{l}: {messages} messages");
            let gaps = counter(&rt, l, "time/parcel-arrival-histogram@echo,0,1000000,10").await;
            assert_eq!(gaps, 994.0, "one gap between each two parcels");
            assert_eq!(counter(&rt, l, "parameter/num-parcels@echo").await, 10.0);
            assert_eq!(counter(&rt, l, "parameter/policy@echo").await, 1.0);
        }
        // Locality 0's calls: 99 full buffers of 10, and 5 parcels that
        // the first bypass and the timer (or the end) took.
        assert!(counter(&rt, 0, "count/flush-count@echo").await >= 99.0);
        Ok(())
    })
    .unwrap();
}

#[test]
fn bad_settings_are_clear_errors() {
    courier::launch(common::inproc(1), |rt| async move {
        let bad = Coalescing::Bytes(BytePolicy {
            threshold: 0.8,
            cutoff: 0.5,
            ..BytePolicy::DEFAULT
        });
        let err = rt.set_coalescing(echo, bad).unwrap_err().to_string();
        assert!(
            err.contains("threshold + cutoff must be at most 1"),
            "{err}"
        );
        let err = rt
            .set_coalescing_to(echo, LocalityId::new(5), Coalescing::Off)
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not exist"), "{err}");
        assert_eq!(rt.coalescing(echo, rt.here()), Coalescing::Off);
        // `record` keeps the default, adaptive; in force is its tuner's
        // start, the count policy with its defaults (a lone locality tunes
        // nothing).
        assert_eq!(rt.coalescing(record, rt.here()), Coalescing::ON);
        Ok(())
    })
    .unwrap();
    let err = courier::launch(
        Config::new().coalescing(Coalescing::Count(CountPolicy {
            num_parcels: 0,
            ..CountPolicy::DEFAULT
        })),
        |_| async { Ok(()) },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("num_parcels must be at least 1"), "{err}");
    let err = courier::launch(
        Config::new().coalesce_action("ecoh", Coalescing::Off),
        |_| async { Ok(()) },
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("no action named `ecoh`") && err.contains("echo"),
        "{err}"
    );
}

#[test]
fn configuration_sets_any_action_by_name() {
    let setting: Coalescing = "count:num_parcels=7".parse().unwrap();
    let config = common::inproc(2)
        .coalesce_action("coalescing::echo", setting)
        .coalesce_action("record", Coalescing::Off);
    courier::launch(config, move |rt| async move {
        for l in rt.localities() {
            assert_eq!(rt.coalescing(echo, l), setting);
            assert_eq!(rt.coalescing(record, l), Coalescing::Off);
            assert_eq!(rt.coalescing(slow_lane, l), Coalescing::Off);
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn buffers_never_build_frames_above_the_receivers_limit() {
    let config = common::inproc(2).max_frame_bytes(16 << 10);
    courier::launch(config, |rt| async move {
        let policy = CountPolicy {
            num_parcels: 1000,
            interval_us: 1_000_000,
            max_bytes: 1 << 20,
            dimensions: 1,
        };
        rt.set_coalescing(record, Coalescing::Count(policy))?;
        let other = rt.locality(1);
        let mut calls = Vec::new();
        for seq in 0..200u64 {
            // Two parcels too large for any frame: one after others, one
            // first into an empty buffer.
            if seq == 150 {
                rt.flush();
            }
            let len = if seq == 100 || seq == 150 {
                20 << 10
            } else {
                1000
            };
            let payload = ByteBuf::from(vec![seq as u8; len]);
            calls.push(rt.call(other, record, (77, 0, seq, payload)));
        }
        rt.flush();
        for (seq, call) in calls.into_iter().enumerate() {
            match call.await {
                Ok((got, _)) => assert_eq!(got, seq as u64),
                Err(e) => {
                    assert!(seq == 100 || seq == 150, "{seq}: {e}");
                    assert!(e.is_too_large(), "{e}");
                    assert!(e.to_string().contains("exceeds the limit"), "{e}");
                }
            }
        }
        // ~15 parcels fit a frame: the buffer split long before num_parcels.
        let messages = counter(&rt, 0, "count/messages@record").await;
        assert!(messages >= 13.0, "{messages} messages");
        assert_eq!(counter(&rt, 0, "count/parcels@record").await, 200.0);
        Ok(())
    })
    .unwrap();
    let delivered = RECORDED
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.0 == 77)
        .count();
    assert_eq!(delivered, 198);
}

/// Calls `record` `per_pair` times on every other locality.
#[courier::action]
async fn call_everyone(run: u64, per_pair: u64) -> u64 {
    let rt = courier::current();
    let here = rt.here().get();
    let mut pending: Pending = Vec::new();
    for dest in rt.localities().filter(|&l| l != rt.here()) {
        for k in 0..per_pair {
            let seq = u64::from(dest.get()) * per_pair + k;
            let payload = vec![seq as u8; (seq % 100) as usize];
            let sum = checksum(&payload);
            pending.push((
                rt.call(dest, record, (run, here, seq, ByteBuf::from(payload))),
                seq,
                sum,
            ));
        }
    }
    let n = pending.len() as u64;
    check(&mut pending).await;
    n
}

#[test]
fn a_2d_grid_forwards_calls_through_one_intermediate_and_loses_none() {
    const PER_PAIR: u64 = 50;
    courier::launch(common::inproc(9), |rt| async move {
        let grid: Coalescing = "count:num_parcels=16,interval_us=500,dimensions=2".parse()?;
        rt.set_coalescing_everywhere(record, grid).await?;
        let calls: Vec<_> = rt
            .localities()
            .map(|l| rt.call(l, call_everyone, (11, PER_PAIR)))
            .collect();
        for call in calls {
            assert_eq!(call.await?, 8 * PER_PAIR);
        }
        let mut seen: BTreeMap<(u32, u64), u32> = BTreeMap::new();
        let mut forwarded = 0.0;
        for l in rt.localities() {
            for key in rt.call(l, recorded, (11,)).await? {
                *seen.entry(key).or_default() += 1;
            }
            forwarded += counter(&rt, l.get(), "count/forwarded@record").await;
        }
        assert_eq!(seen.len() as u64, 9 * 8 * PER_PAIR, "lost calls");
        assert!(seen.values().all(|&c| c == 1), "duplicated calls");
        // In a 3x3 grid each locality shares neither row nor column with 4
        // others: exactly those calls take an intermediate.
        assert_eq!(forwarded, (9 * 4 * PER_PAIR) as f64);
        Ok(())
    })
    .unwrap();
}
