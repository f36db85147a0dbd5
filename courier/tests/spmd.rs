//! SPMD programs: a main function on every locality, per-locality state,
//! the collectives (barrier, all-gather, all-reduce) and quiescence, over
//! inproc, TCP and MPI; quiescence from a root-only program; a failing
//! locality's main.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use courier::{BoxError, Config, Error, LocalityId, Runtime};

/// What one locality received: a count per origin, and who it is.
struct Tally {
    here: LocalityId,
    from: Vec<AtomicU64>,
}

/// Sizes the tallies for up to this many localities.
const MAX_LOCALITIES: usize = 16;

fn tally_state(config: Config) -> Config {
    config.state(|here, _| Tally {
        here,
        from: (0..MAX_LOCALITIES).map(|_| AtomicU64::new(0)).collect(),
    })
}

#[courier::action]
fn tally(origin: u32) {
    courier::with_state(|t: &Tally| t.from[origin as usize].fetch_add(1, Ordering::Relaxed));
}

/// A call whose work includes a wait: quiescence must wait for it.
#[courier::action]
async fn slow_tally(origin: u32) {
    courier::sleep(Duration::from_millis(2)).await;
    courier::yield_now().await;
    courier::with_state(|t: &Tally| t.from[origin as usize].fetch_add(1, Ordering::Relaxed));
}

/// Rounds of every locality posting to every locality, each round closed
/// by quiescence and a barrier, checked against the per-origin tallies.
async fn kernel(rt: Runtime, per_dest: u64) -> Result<u64, BoxError> {
    const ROUNDS: u64 = 3;
    const SLOW: u64 = 2;
    let n = rt.num_localities();
    let here = rt.here().get();
    let state = rt.state::<Tally>();
    assert_eq!(state.here, rt.here(), "each locality has its own state");
    let ranks = rt.all_gather(&here).await?;
    assert_eq!(ranks, (0..n).collect::<Vec<_>>());
    for round in 1..=ROUNDS {
        for dest in rt.localities() {
            for _ in 0..per_dest {
                rt.post(dest, tally, (here,))?;
            }
            for _ in 0..SLOW {
                rt.post(dest, slow_tally, (here,))?;
            }
        }
        // Quiescence then a barrier: once every locality is past both,
        // every parcel of the round has run everywhere.
        rt.quiesce().await?;
        rt.barrier().await?;
        for origin in 0..n as usize {
            assert_eq!(
                state.from[origin].load(Ordering::Relaxed),
                round * (per_dest + SLOW),
                "{} from locality#{origin} after round {round}",
                rt.here()
            );
        }
        rt.barrier().await?;
    }
    let mine: u64 = state.from.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    let total = rt.all_reduce(mine, |a, b| a + b).await?;
    let expected = u64::from(n * n) * ROUNDS * (per_dest + SLOW);
    assert_eq!(total, expected);
    let max = rt.all_reduce(u64::from(here), u64::max).await?;
    assert_eq!(max, u64::from(n - 1));
    Ok(total)
}

#[test]
fn collectives_and_quiescence_inproc() {
    let config = tally_state(common::inproc(4).workers(1));
    let total = courier::launch_spmd(config, |rt| kernel(rt, 300)).unwrap();
    assert_eq!(total, 16 * 3 * 302);
}

#[test]
fn collectives_and_quiescence_tcp() {
    let config = tally_state(common::tcp("collectives_and_quiescence_tcp", 3));
    // Every process of the job returns here, each with the same total.
    let total = courier::launch_spmd(config, |rt| kernel(rt, 2000)).unwrap();
    assert_eq!(total, 9 * 3 * 2002);
}

/// The MPI cases of this file and the sizes they run at.
#[cfg(feature = "mpi")]
#[test]
fn under_mpirun() {
    common::mpirun(&["mpi_collectives_and_quiescence"], &[2, 4]);
}

#[test]
#[ignore = "an MPI case: run by under_mpirun"]
fn mpi_collectives_and_quiescence() {
    let total = courier::launch_spmd(tally_state(common::mpi()), |rt| kernel(rt, 1000)).unwrap();
    assert!(total > 0);
}

#[courier::action]
fn tally_of(origin: u32) -> u64 {
    courier::with_state(|t: &Tally| t.from[origin as usize].load(Ordering::Relaxed))
}

#[test]
fn quiescence_from_a_root_only_program() {
    let config = tally_state(common::tcp("quiescence_from_a_root_only_program", 3));
    courier::launch(config, |rt| async move {
        for dest in rt.localities() {
            for _ in 0..500 {
                rt.post(dest, tally, (0,))?;
            }
            rt.post(dest, slow_tally, (0,))?;
        }
        rt.quiesce().await?;
        for dest in rt.localities() {
            assert_eq!(rt.call(dest, tally_of, (0,)).await?, 501, "{dest}");
        }
        // Nothing sent since: quiet at once.
        rt.quiesce().await?;
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_failing_main_elsewhere_fails_the_job_at_the_root() {
    let config = common::inproc(3);
    let result = courier::launch_spmd(config, |rt| async move {
        if rt.here().get() == 2 {
            return Err("locality two gives up".into());
        }
        Ok(rt.here().get())
    });
    match result {
        Err(Error::RemoteMain { locality, message }) => {
            assert_eq!(locality, LocalityId::new(2));
            assert!(message.contains("gives up"), "{message}");
        }
        other => panic!("the job did not fail: {other:?}"),
    }
}

#[test]
fn a_collective_value_that_does_not_decode_is_an_error() {
    courier::launch_spmd(common::inproc(2), |rt| async move {
        // Locality 0 gathers a u64, locality 1 a string: each decodes the
        // other's value as its own type and fails.
        let result = if rt.here().get() == 0 {
            rt.all_gather(&7u64).await.map(drop)
        } else {
            rt.all_gather(&"not a number".to_owned()).await.map(drop)
        };
        let err = result.unwrap_err();
        assert!(err.is_codec(), "{err}");
        Ok(())
    })
    .unwrap();
}

#[test]
fn sleep_and_yield_let_other_tasks_run() {
    courier::launch(common::inproc(1).workers(1), |rt| async move {
        let done = std::sync::Arc::new(AtomicU64::new(0));
        let other = {
            let done = std::sync::Arc::clone(&done);
            rt.spawn(async move {
                done.store(1, Ordering::SeqCst);
            })
        };
        // One worker: the other task runs only if this one lets it.
        while done.load(Ordering::SeqCst) == 0 {
            courier::yield_now().await;
        }
        other.await;
        let start = std::time::Instant::now();
        let sleeper = rt.spawn(courier::sleep(Duration::from_millis(20)));
        courier::sleep(Duration::from_millis(5)).await;
        sleeper.await;
        assert!(start.elapsed() >= Duration::from_millis(20));
        // A dropped sleep leaves nothing behind.
        drop(rt.sleep(Duration::from_secs(3600)));
        Ok(())
    })
    .unwrap();
}
