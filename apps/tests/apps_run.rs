//! The apps as real programs: each kernel (histo, ig in every mode,
//! randomaccess, alltoall) runs with tiny sizes on two localities, in one
//! process (`--transport inproc`) and as two processes over TCP (the
//! default transport), and must exit with status 0 and report no error;
//! a job randomaccess cannot run is refused with a clear message; the
//! toy and pingpong's `--latency-only` follow the configured coalescing;
//! every workload of the toy gets every result right and reports its figure.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// How long one run may take before the test kills it and fails.
const DEADLINE: Duration = Duration::from_secs(60);

/// The two ways the apps run here: threads of one process, and processes
/// over TCP (no `--transport`: TCP is the default).
const TRANSPORTS: [&[&str]; 2] = [&["--transport", "inproc"], &[]];

/// What a finished program printed.
#[derive(Debug)]
struct Output {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Reads all of a child's pipe on a thread of its own (so that a full pipe
/// never stalls the child while we wait for it).
fn drain(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<String> {
    let mut pipe = pipe.expect("the pipe was asked for");
    thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Waits for `child`, killing it after [`DEADLINE`].
fn wait(child: &mut Child, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for the app") {
            return status;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} took more than {DEADLINE:?}");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Runs the app `exe` with `args`, without any `COURIER_*` variable of
/// the environment that runs the tests.
fn run(exe: &str, args: &[&str]) -> Output {
    run_with(exe, args, &[])
}

/// The command line and output of a run, for a failed assertion.
fn shown(exe: &str, args: &[&str], out: &Output) -> String {
    format!(
        "{exe} {}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        out.stdout,
        out.stderr
    )
}

/// Runs the app `exe` with `args` as [`run`] does and asserts that it
/// succeeded; returns its output and [`shown`].
fn run_ok(exe: &str, args: &[&str]) -> (Output, String) {
    let out = run(exe, args);
    let shown = shown(exe, args, &out);
    assert!(out.status.success(), "exit status {}: {shown}", out.status);
    (out, shown)
}

/// Runs the app `exe` with `args` and then `transport` as [`run_ok`]
/// does and asserts that it printed `phases` lines `phase N: ...`;
/// returns them and [`shown`].
fn run_phases(
    exe: &str,
    args: &[&str],
    transport: &[&str],
    phases: usize,
) -> (Vec<String>, String) {
    let args: Vec<&str> = args.iter().chain(transport).copied().collect();
    let (out, shown) = run_ok(exe, &args);
    let lines: Vec<String> = out
        .lines_starting("phase ")
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(lines.len(), phases, "{shown}");
    (lines, shown)
}

impl Output {
    /// The lines of standard output that start with `prefix`.
    fn lines_starting(&self, prefix: &str) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with(prefix))
            .collect()
    }
}

/// Like [`run`], with the variables `env` set.
fn run_with(exe: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let what = format!("{exe} {}", args.join(" "));
    let mut command = Command::new(exe);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("COURIER_") {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().copied());
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = wait(&mut child, &what);
    Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// Runs the app on two localities over both transports and checks that it succeeded and that
/// each of its `run N:` lines shows every one of `clean` (`key=value`).
fn assert_clean(exe: &str, args: &[&str], clean: &[&str]) {
    for transport in TRANSPORTS {
        let args: Vec<&str> = ["--localities", "2"]
            .iter()
            .chain(args)
            .chain(transport)
            .copied()
            .collect();
        let (out, shown) = run_ok(exe, &args);
        let runs = out.lines_starting("run ");
        assert!(!runs.is_empty(), "no `run N:` line: {shown}");
        for line in runs {
            for key in clean {
                assert!(
                    line.split_whitespace().any(|word| word == *key),
                    "no `{key}` in `{line}`: {shown}"
                );
            }
        }
    }
}

#[test]
fn histo_counts_every_update() {
    assert_clean(
        env!("CARGO_BIN_EXE_histo"),
        &["--updates", "20000", "--table", "1000", "--runs", "2"],
        &["wrong=0"],
    );
}

#[test]
fn ig_reads_every_value_in_every_mode() {
    for mode in ["batch", "futures", "posts"] {
        assert_clean(
            env!("CARGO_BIN_EXE_ig"),
            &[
                "--reads", "20000", "--table", "1000", "--runs", "2", "--mode", mode,
            ],
            &["wrong=0"],
        );
    }
}

#[test]
fn the_stencil_matches_the_serial_solution_to_the_bit() {
    for chunk in ["auto", "7"] {
        assert_clean(
            env!("CARGO_BIN_EXE_stencil"),
            &["--nx", "2000", "--steps", "20", "--chunk", chunk],
            &["wrong=0"],
        );
    }
}

#[test]
fn randomaccess_leaves_no_error() {
    assert_clean(
        env!("CARGO_BIN_EXE_randomaccess"),
        &["--log-table-size", "10", "--runs", "2"],
        &["errors=0", "checksum_ok=true"],
    );
}

#[test]
fn alltoall_delivers_every_message() {
    assert_clean(
        env!("CARGO_BIN_EXE_alltoall"),
        &["--messages", "1000", "--ack-every", "64", "--runs", "2"],
        &["errors=0"],
    );
}

#[test]
fn randomaccess_refuses_a_job_that_is_not_a_power_of_two() {
    let out = run(
        env!("CARGO_BIN_EXE_randomaccess"),
        &["--localities", "3", "--transport", "inproc", "--runs", "1"],
    );
    assert!(
        !out.status.success(),
        "3 localities ran: {}{}",
        out.stdout,
        out.stderr
    );
    assert!(
        out.stderr.contains("power of two") && out.stderr.contains("not 3"),
        "the error does not say what is wrong: {}",
        out.stderr
    );
}

/// The toy's `phase N:` lines, checking that it succeeded.
fn toy_phases(args: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let exe = env!("CARGO_BIN_EXE_toy");
    let mut all = vec![
        "--transport",
        "inproc",
        "--parcels",
        "2000",
        "--phases",
        "2",
    ];
    all.extend(args);
    let out = run_with(exe, &all, env);
    assert!(
        out.status.success(),
        "toy {all:?} {env:?}: {}\n{}{}",
        out.status,
        out.stdout,
        out.stderr
    );
    let phases: Vec<String> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("phase "))
        .map(String::from)
        .collect();
    assert_eq!(phases.len(), 2, "{}", out.stdout);
    phases
}

#[test]
fn the_configured_coalescing_governs_the_toy_unless_its_own_flags_say_otherwise() {
    let has = |phases: &[String], word: &str| {
        phases
            .iter()
            .all(|l| l.split_whitespace().any(|w| w == word))
    };
    let per_action = toy_phases(
        &["--coalesce-action", "get_cplx=count:num_parcels=512"],
        &[],
    );
    assert!(has(&per_action, "num_parcels=512"), "{per_action:?}");
    let from_env = toy_phases(&[], &[("COURIER_COALESCING", "count:num_parcels=256")]);
    assert!(has(&from_env, "num_parcels=256"), "{from_env:?}");
    let flag = toy_phases(
        &["--coalescing", "count:num_parcels=300,interval_us=7"],
        &[],
    );
    assert!(
        has(&flag, "num_parcels=300") && has(&flag, "interval_us=7"),
        "{flag:?}"
    );
    // The toy's own per-phase flag still wins for its phases.
    let phased = toy_phases(
        &[
            "--coalesce-action",
            "get_cplx=count:num_parcels=512",
            "--phase-num-parcels",
            "16,4",
        ],
        &[],
    );
    assert!(
        phased[0].contains("num_parcels=16") && phased[1].contains("num_parcels=4"),
        "{phased:?}"
    );
}

#[test]
fn every_toy_workload_gets_every_result_right_and_reports_its_figure_and_decisions() {
    let exe = env!("CARGO_BIN_EXE_toy");
    // Phases of 20 ms: 100 steady calls (one every 200 µs), 10 bursts of
    // 50 (one every 2 ms), 133 sparse calls (one every 150 µs).
    let expected = [
        ("batch", "calls_per_s", Some(2000)),
        ("bursty", "latency_us", Some(500)),
        ("steady", "latency_us", Some(100)),
        ("sparse", "latency_us", Some(133)),
        ("awaits", "latency_us", None),
    ];
    let args = [
        "--localities",
        "2",
        "--coalescing",
        "adaptive",
        "--workload",
        "batch,bursty,steady,sparse,awaits",
        "--phases",
        "5",
        "--parcels",
        "2000",
        "--phase-ms",
        "20",
        "--rate",
        "5000",
        "--burst",
        "50",
        "--burst-period-us",
        "2000",
        "--sparse-gap-us",
        "150",
    ];
    for transport in TRANSPORTS {
        let (phases, shown) = run_phases(exe, &args, transport, expected.len());
        for (line, (workload, figure, calls)) in phases.iter().zip(expected) {
            let value = |key: &str| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
                    .unwrap_or_else(|| panic!("no `{key}=` in `{line}`: {shown}"))
            };
            assert_eq!(value("workload"), workload, "{shown}");
            assert_eq!(value("wrong"), "0", "{shown}");
            let made: u64 = value("calls").parse().expect("a count of calls");
            match calls {
                Some(n) => assert_eq!(made, n, "{line}: {shown}"),
                None => assert!(made > 0, "{line}: {shown}"),
            }
            let figure: f64 = value(figure).parse().expect("a number");
            assert!(figure > 0.0, "{line}: {shown}");
            // Adaptive coalescing's decisions during the phase, and the
            // setting it left in force: a count policy, or off (calls
            // awaited one at a time, once the tuner saw an epoch of them).
            let _: u64 = value("decisions").parse().expect("a count of decisions");
            let off = line.split_whitespace().any(|w| w == "coalescing=off");
            if !off {
                let _: u32 = value("num_parcels").parse().expect("num_parcels in force");
            }
        }
    }
}

#[test]
fn pingpong_latency_only_times_both_patterns_under_the_configured_coalescing() {
    let exe = env!("CARGO_BIN_EXE_pingpong");
    let args = [
        "--latency-only",
        "--iterations",
        "50",
        "--pause-us",
        "10",
        "--coalescing",
        "count:num_parcels=64,interval_us=10",
    ];
    for transport in TRANSPORTS {
        let (phases, shown) = run_phases(exe, &args, transport, 2);
        for (line, pattern) in phases.iter().zip(["back_to_back", "sparse"]) {
            let words: Vec<&str> = line.split_whitespace().collect();
            assert!(
                words.contains(&format!("pattern={pattern}").as_str()),
                "{shown}"
            );
            assert!(words.contains(&"round_trips=50"), "{shown}");
            assert!(
                words.contains(&"coalescing=count:num_parcels=64,interval_us=10,max_bytes=65536"),
                "{shown}"
            );
        }
    }
}

#[test]
fn a_tcp_job_under_an_mpi_launcher_is_a_clear_error() {
    // What `mpirun -np 2 toy --transport tcp` gives every rank.
    for transport in ["tcp", "inproc"] {
        let out = run_with(
            env!("CARGO_BIN_EXE_toy"),
            &["--transport", transport, "--parcels", "10", "--phases", "1"],
            &[("OMPI_COMM_WORLD_SIZE", "2"), ("OMPI_COMM_WORLD_RANK", "0")],
        );
        assert!(!out.status.success(), "{}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.contains("an MPI launcher started this process")
                && out
                    .stderr
                    .contains(&format!("the transport is {transport}")),
            "{}",
            out.stderr
        );
        assert!(!out.stdout.contains("phase 1:"), "it ran: {}", out.stdout);
    }
}

/// The Inncabs benchmarks of `tasks`, on tiny inputs: each benchmark's
/// `verified NAME:` line, or its failure.
fn tasks(args: &[&str]) -> (Output, String) {
    let exe = env!("CARGO_BIN_EXE_tasks");
    let args: Vec<&str> = ["--quick", "--workers", "2"]
        .iter()
        .chain(args)
        .copied()
        .collect();
    let out = run(exe, &args);
    let shown = shown(exe, &args, &out);
    (out, shown)
}

#[test]
fn every_task_benchmark_agrees_with_its_sequential_run_in_every_mode() {
    let (out, shown) = tasks(&[]);
    assert!(out.status.success(), "exit status {}: {shown}", out.status);
    for name in [
        "fib",
        "nqueens",
        "sort",
        "strassen",
        "sparselu",
        "health",
        "floorplan",
        "uts",
    ] {
        assert!(
            out.stdout.contains(&format!("verified {name}:")),
            "{name} not verified: {shown}"
        );
    }
}

#[test]
fn a_wrong_task_result_fails_the_run() {
    let (out, shown) = tasks(&["--bench", "fib,uts", "--break", "uts"]);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(out.stdout.contains("verified fib:"), "{shown}");
    assert!(out.stdout.contains("FAILED uts"), "{shown}");
    assert!(
        out.stderr.contains("uts adaptive run 0: result"),
        "no message names the wrong run: {shown}"
    );
}
