//! Helpers shared by the integration tests.
//!
//! A multi-process test starts its other localities by running this same
//! test binary again, restricted to the one test (`--exact NAME`). In those
//! children `courier::launch` joins the job and never returns.

#![allow(dead_code, unreachable_pub)]

use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use courier::{Config, TransportKind};

/// Held by a test while it runs, so that the tests of its file that take
/// it run one at a time (each file is a binary of its own, with its own
/// turn): for tests that share process-wide state (`join.rs`'s counters)
/// or whose outcome comes from what the runtime measures, which the
/// file's other tests running beside them on two cores would move
/// (`adaptive.rs`).
pub fn take_turns() -> parking_lot::MutexGuard<'static, ()> {
    static TURN: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
    TURN.lock()
}

/// The value of the counter called `name` among `values`.
pub fn value(values: &[courier::counters::CounterValue], name: &str) -> f64 {
    values
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no {name} in {values:?}"))
        .value
}

/// A TCP job of `n` processes for the test function `name`.
pub fn tcp(name: &str, n: u32) -> Config {
    Config::new()
        .localities(n)
        .transport(TransportKind::Tcp)
        .child_args(["--exact", name, "--nocapture", "--test-threads=1"])
}

/// An in-process job of `n` localities.
pub fn inproc(n: u32) -> Config {
    Config::new().localities(n).transport(TransportKind::Inproc)
}

/// Says that a test cannot run its case because `what` is missing, and
/// why. On a developer's machine the test skips with that message; under CI
/// (the `CI` variable set, as `.ci/run` does after installing every
/// prerequisite) it fails: a skipped case there would hide a broken setup.
pub fn missing_prerequisite(what: &str, why: impl std::fmt::Display) {
    if std::env::var_os("CI").is_some() {
        panic!("CI must be able to run this case, but {what}: {why}");
    }
    eprintln!("skipping: {what}: {why} (under CI this fails)");
}

/// Runs `body` on a thread of its own and fails the test with a message
/// if it has not finished after `limit`: for a test whose failure mode is
/// a hang (a lost wake-up), so that it fails instead of stalling CI. The
/// stuck thread is left behind; the test binary exits when its tests end.
pub fn with_deadline<T: Send + 'static>(
    what: &str,
    limit: Duration,
    body: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done, outcome) = mpsc::channel();
    std::thread::Builder::new()
        .name(format!("deadline: {what}"))
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
            let _ = done.send(result);
        })
        .expect("cannot start the test's thread");
    match outcome.recv_timeout(limit) {
        Ok(Ok(value)) => value,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("{what} did not finish within {limit:?}: a hang (a lost wake-up?)"),
    }
}

/// A small, seedable pseudo-random generator (xorshift64*), enough to pick
/// destinations and payloads.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// FNV-1a over `bytes`: a checksum the receiver sends back.
pub fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The configuration of a test case run under `mpirun` (see [`mpirun`]):
/// the MPI transport, which a process started by `mpirun` picks by itself.
pub fn mpi() -> Config {
    assert!(
        ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"]
            .iter()
            .any(|v| std::env::var_os(v).is_some()),
        "an MPI case runs under mpirun; `cargo test --features courier/mpi` starts it"
    );
    Config::new()
}

/// Runs each of `cases` (ignored tests of this test binary) under
/// `mpirun -np N` for every N of `sizes`, with the workers driving MPI and
/// again with funneled progress (one MPI thread), and checks that it
/// passed. Where `mpirun` is missing the cases are skipped with a message,
/// except in CI (see [`missing_prerequisite`]).
pub fn mpirun(cases: &[&str], sizes: &[u32]) {
    mpirun_with(cases, sizes, &[]);
}

/// [`mpirun`] with `options` for `mpirun` itself (Open MPI's).
pub fn mpirun_with(cases: &[&str], sizes: &[u32], options: &[&str]) {
    let exe = std::env::current_exe().expect("the test binary's path");
    for progress in ["workers", "funneled"] {
        for &n in sizes {
            for case in cases {
                if !mpirun_case(&exe, case, n, progress, options) {
                    return;
                }
            }
        }
    }
}

/// Runs one case; false when `mpirun` is missing (outside CI).
fn mpirun_case(
    exe: &std::path::Path,
    case: &str,
    n: u32,
    progress: &str,
    options: &[&str],
) -> bool {
    let output = Command::new("mpirun")
        .args(options)
        .arg("-np")
        .arg(n.to_string())
        // Open MPI: allow root (CI containers) and more ranks than cores.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .env("COURIER_MPI_PROGRESS", progress)
        .arg(exe)
        .args([
            "--ignored",
            "--exact",
            case,
            "--nocapture",
            "--test-threads=1",
        ])
        .output();
    let output = match output {
        Ok(output) => output,
        Err(e) => {
            missing_prerequisite("mpirun cannot be started (install openmpi-bin)", e);
            return false;
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        // ". 1 passed": libtest writes "test result: ", "ok" and the
        // rest apart, and the ranks' writes interleave.
        output.status.success() && stdout.contains(". 1 passed"),
        "{case} under mpirun {options:?} -np {n} ({progress} progress) failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    true
}

/// A hand-built frame from `source` holding one run of `count` calls of
/// the action `action` whose encoded calls are `calls`: for tests of what
/// a locality does with input no honest sender makes.
pub fn calls_frame(source: u32, action: courier::ActionId, count: u32, calls: &[u8]) -> Vec<u8> {
    let mut body = courier::__private::frame_header(courier::LocalityId::new(source));
    body.push(0); // a run of calls
    body.extend_from_slice(&action.to_bits().to_le_bytes());
    body.extend_from_slice(&count.to_le_bytes());
    body.extend_from_slice(&(calls.len() as u32).to_le_bytes());
    body.extend_from_slice(calls);
    body
}

/// Panics raised inside Courier's own code (not in a test's actions), as
/// `file:line: message`, recorded by a panic hook installed once.
pub fn library_panics() -> &'static std::sync::Mutex<Vec<String>> {
    static PANICS: std::sync::OnceLock<std::sync::Mutex<Vec<String>>> = std::sync::OnceLock::new();
    PANICS.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(at) = info
                .location()
                .filter(|l| l.file().contains("courier/src/"))
            {
                let payload = info.payload();
                let message = payload
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| payload.downcast_ref::<&str>().copied())
                    .unwrap_or("?");
                library_panics().lock().unwrap().push(format!(
                    "{}:{}: {message}",
                    at.file(),
                    at.line()
                ));
            }
            previous(info);
        }));
        std::sync::Mutex::new(Vec::new())
    })
}

/// Keeps the calling thread busy for `d` (a body of known cost).
pub fn spin(d: Duration) {
    let start = std::time::Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}
