//! The monitor thread (issue #14). The failure detector: a stopped
//! locality is declared lost within the peer timeout, a quiet or busy one
//! is not, and a locality whose only worker is stuck in a handler still
//! ends when it loses its root, instead of staying behind as an orphan.
//! The watchdog: a task that runs too long is counted and reported with
//! the action it runs.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use courier::{Config, Error, TransportKind};

/// This process's id.
#[courier::action]
fn process_id() -> u32 {
    std::process::id()
}

/// A call that is answered only when the job ends.
#[courier::action]
async fn never_returns() -> u8 {
    std::future::pending().await
}

#[courier::action]
fn double(x: u64) -> u64 {
    2 * x
}

/// Holds the worker that runs it for `ms` milliseconds, as a long
/// computation does.
#[courier::action]
fn hold_worker(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// Holds the worker that runs it for ever.
#[courier::action]
fn spin_forever() {
    loop {
        std::hint::spin_loop();
    }
}

fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("cannot run kill");
    assert!(status.success(), "kill {signal} {pid}: {status}");
}

fn tcp(name: &str, n: u32, timeout: Duration) -> Config {
    common::tcp(name, n).peer_timeout(Some(timeout))
}

#[test]
fn a_stopped_locality_is_lost_within_the_peer_timeout() {
    const TIMEOUT: Duration = Duration::from_millis(1000);
    let result = common::with_deadline(
        "a job with a stopped locality",
        Duration::from_secs(60),
        || {
            courier::launch(
                tcp(
                    "a_stopped_locality_is_lost_within_the_peer_timeout",
                    3,
                    TIMEOUT,
                ),
                |rt| async move {
                    let victim = rt.call(rt.locality(1), process_id, ()).await?;
                    let waiting: Vec<_> = (0..5)
                        .map(|_| rt.call(rt.locality(1), never_returns, ()))
                        .collect();
                    rt.flush();
                    signal(victim, "-STOP");
                    let stopped = Instant::now();
                    for call in waiting {
                        let err = call.await.unwrap_err();
                        assert!(err.is_peer_lost(), "{err}");
                    }
                    let detected = stopped.elapsed();
                    eprintln!("a stopped locality was declared lost after {detected:?}");
                    signal(victim, "-CONT");
                    // A fifth of the timeout may pass between a heartbeat and
                    // the stop, a fifth between two checks.
                    assert!(
                        detected >= TIMEOUT * 3 / 5 && detected < TIMEOUT * 2,
                        "detected after {detected:?} with a timeout of {TIMEOUT:?}"
                    );
                    // The other peer is still served.
                    assert_eq!(rt.call(rt.locality(2), double, (21,)).await?, 42);
                    Ok(())
                },
            )
        },
    );
    let Err(Error::LocalitiesLost(lost)) = result else {
        panic!("the job did not fail: {result:?}");
    };
    assert!(
        lost.iter()
            .any(|(l, why)| l.get() == 1 && why.contains("sent nothing for")),
        "{lost:?}"
    );
}

#[test]
fn quiet_and_busy_localities_are_not_taken_for_lost_ones() {
    const TIMEOUT: Duration = Duration::from_millis(300);
    let config = tcp(
        "quiet_and_busy_localities_are_not_taken_for_lost_ones",
        3,
        TIMEOUT,
    )
    .workers(1);
    let sum = courier::launch(config, |rt| async move {
        // Every locality's only worker is held for five timeouts: nobody
        // drives a transport but the detectors.
        let hold = 5 * TIMEOUT.as_millis() as u64;
        for peer in [1, 2] {
            rt.post(rt.locality(peer), hold_worker, (hold,))?;
        }
        rt.flush();
        std::thread::sleep(Duration::from_millis(hold));
        // Then a job with no traffic at all for as long.
        courier::sleep(5 * TIMEOUT).await;
        let a = rt.call(rt.locality(1), double, (1,)).await?;
        let b = rt.call(rt.locality(2), double, (2,)).await?;
        Ok(a + b)
    })
    .unwrap();
    assert_eq!(sum, 6);
}

#[test]
fn peer_timeouts_parse_and_bad_ones_are_clear_errors() {
    use clap::Parser;
    use courier::RuntimeArgs;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        runtime: RuntimeArgs,
    }
    let timeout = |args: &[&str]| {
        Cli::try_parse_from([&["prog"], args].concat()).map(|c| c.runtime.peer_timeout)
    };
    assert_eq!(
        timeout(&["--peer-timeout", "0.5"]).unwrap(),
        Some(Duration::from_millis(500))
    );
    assert_eq!(
        timeout(&["--peer-timeout", "250ms"]).unwrap(),
        Some(Duration::from_millis(250))
    );
    assert_eq!(
        timeout(&["--peer-timeout", "off"]).unwrap(),
        Some(Duration::ZERO)
    );
    assert_eq!(timeout(&[]).unwrap(), None);
    for bad in ["soon", "-1", "0", "1e9", "NaN"] {
        let flag = format!("--peer-timeout={bad}");
        let err = timeout(&[&flag]).err().unwrap().to_string();
        assert!(
            err.contains("peer-timeout") && err.contains(bad),
            "{bad}: {err}"
        );
    }
    let err = courier::launch(
        Config::new().peer_timeout(Some(Duration::from_micros(5))),
        |_rt| async { Ok(()) },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("peer_timeout"), "{err}");
}

// A locality that lost its root must end even when its only worker is
// stuck: the tests below run a job in a process of their own (the
// `#[ignore]`d root below), kill or stop that root, and watch its child.

/// Where the root of an orphaned job writes its child's process id.
const PID_FILE: &str = "COURIER_TEST_ORPHAN_PID_FILE";

/// The root of a job whose locality 1 is stuck in a handler: writes that
/// locality's process id to `$COURIER_TEST_ORPHAN_PID_FILE` and waits to
/// be killed. Run by the tests below, not on its own.
#[test]
#[ignore = "the root of a job run by the orphan tests below"]
fn root_of_a_job_with_a_stuck_locality() {
    let Some(file) = std::env::var_os(PID_FILE) else {
        return;
    };
    let config = Config::new()
        .localities(2)
        .transport(TransportKind::Tcp)
        .workers(1)
        .peer_timeout(Some(Duration::from_millis(500)))
        .child_args([
            "--exact",
            "root_of_a_job_with_a_stuck_locality",
            "--nocapture",
            "--test-threads=1",
            "--ignored",
        ]);
    let _ = courier::launch(config, move |rt| async move {
        let child = rt.call(rt.locality(1), process_id, ()).await?;
        rt.post(rt.locality(1), spin_forever, ())?;
        rt.flush();
        std::thread::sleep(Duration::from_millis(200));
        std::fs::write(&file, child.to_string())?;
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
        #[allow(unreachable_code)]
        Ok(())
    });
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped).
fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

/// Starts the root above, does `to_root` to it, and returns how long its
/// stuck child took to end (or fails after `limit`).
fn orphan_ends(to_root: &str, limit: Duration) -> Duration {
    let file: PathBuf =
        std::env::temp_dir().join(format!("courier-orphan-{}-{to_root}", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let mut root = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "root_of_a_job_with_a_stuck_locality",
            "--nocapture",
            "--test-threads=1",
            "--ignored",
        ])
        .env(PID_FILE, &file)
        .spawn()
        .unwrap();
    let child = read_pid(&file, Duration::from_secs(30));
    let _ = std::fs::remove_file(&file);
    signal(root.id(), to_root);
    let start = Instant::now();
    while !ended(child) && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = start.elapsed();
    let survived = !ended(child);
    // Clean up whatever happened.
    if survived {
        signal(child, "-KILL");
    }
    let _ = root.kill();
    let _ = root.wait();
    assert!(
        !survived,
        "locality 1 (process {child}) is still running {limit:?} after its root got {to_root}"
    );
    took
}

fn read_pid(file: &Path, limit: Duration) -> u32 {
    let start = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            start.elapsed() < limit,
            "the job did not start within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_locality_stuck_in_a_handler_ends_when_its_root_is_killed() {
    let took = orphan_ends("-KILL", Duration::from_secs(5));
    eprintln!("the orphan ended {took:?} after its root was killed");
}

#[test]
fn a_locality_stuck_in_a_handler_ends_when_its_root_is_stopped() {
    // The root's peer timeout is 500 ms.
    let took = orphan_ends("-STOP", Duration::from_secs(5));
    eprintln!("the orphan ended {took:?} after its root was stopped");
    assert!(took >= Duration::from_millis(300), "{took:?}");
}

async fn counter_sum(rt: &courier::Runtime, name: &str) -> Result<f64, courier::BoxError> {
    let values = rt.counters([name])?.evaluate(false).await?;
    Ok(values.iter().map(|v| v.value).sum())
}

#[test]
fn the_watchdog_counts_each_long_task_once() {
    let config = common::inproc(2)
        .workers(1)
        .watchdog(Some(Duration::from_millis(100)));
    courier::launch(config, |rt| async move {
        // Two long runs and many short ones on locality 1.
        for _ in 0..2 {
            rt.call(rt.locality(1), hold_worker, (450,)).await?;
        }
        for x in 0..100 {
            assert_eq!(rt.call(rt.locality(1), double, (x,)).await?, 2 * x);
        }
        let long = "/threads{locality#*/total}/count/long-running";
        assert_eq!(counter_sum(&rt, long).await?, 2.0);
        Ok(())
    })
    .unwrap();
    let off = common::inproc(2).workers(1).watchdog(None);
    courier::launch(off, |rt| async move {
        rt.call(rt.locality(1), hold_worker, (300,)).await?;
        let long = "/threads{locality#*/total}/count/long-running";
        assert_eq!(counter_sum(&rt, long).await?, 0.0);
        Ok(())
    })
    .unwrap();
}

/// Runs a job whose handler holds its worker past the watchdog, with
/// Courier's reports on stderr. Run by the test below, not on its own.
#[test]
#[ignore = "run by the_watchdog_names_the_action_a_stuck_worker_runs"]
fn job_with_a_long_handler() {
    if std::env::var_os("COURIER_TEST_WATCHDOG").is_none() {
        return;
    }
    courier::report_to_stderr();
    let config = common::inproc(2)
        .workers(1)
        .watchdog(Some(Duration::from_millis(100)));
    courier::launch(config, |rt| async move {
        rt.call(rt.locality(1), hold_worker, (400,)).await?;
        Ok(())
    })
    .unwrap();
}

#[test]
fn the_watchdog_names_the_action_a_stuck_worker_runs() {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "job_with_a_long_handler",
            "--nocapture",
            "--ignored",
        ])
        .env("COURIER_TEST_WATCHDOG", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("locality#1: worker 0 has been running one task for")
            && stderr.contains("received calls of `")
            && stderr.contains("hold_worker`"),
        "{stderr}"
    );
}
