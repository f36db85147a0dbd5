//! Jobs started by a launcher (`courier run`), not by the program itself.

mod common;

use courier::launcher::Launcher;
use courier::{Config, TransportKind};

#[courier::action]
fn rank_squared() -> u32 {
    let here = courier::current().here().get();
    here * here
}

/// The job body: run only inside a launched process (COURIER_RANK set).
fn job() {
    let result = courier::launch(
        Config::new().transport(TransportKind::Tcp),
        |rt| async move {
            let mut total = 0;
            for l in rt.localities() {
                total += rt.call(l, rank_squared, ()).await?;
            }
            Ok((rt.num_localities(), total))
        },
    );
    // Only locality 0 gets here.
    assert_eq!(result.unwrap(), (3, 1 + 4));
}

#[test]
fn launched_job_of_three_runs_main_once() {
    if std::env::var_os("COURIER_RANK").is_some() {
        return job();
    }
    let exe = std::env::current_exe().unwrap();
    let status = Launcher::new(
        3,
        exe,
        [
            "--exact",
            "launched_job_of_three_runs_main_once",
            "--nocapture",
        ],
    )
    .run()
    .unwrap();
    assert!(status.success(), "{status}");
}

/// A launched job whose locality 0 fails: the launcher reports it.
#[test]
fn launcher_reports_a_failing_job() {
    if std::env::var_os("COURIER_RANK").is_some() {
        let result = courier::launch(Config::new(), |_rt| async {
            Err::<(), _>("deliberate failure".into())
        });
        // Locality 0 ends the process as a failing program would, without
        // a failing test in the output.
        assert!(result.is_err());
        std::process::exit(3);
    }
    let exe = std::env::current_exe().unwrap();
    let status = Launcher::new(
        2,
        exe,
        ["--exact", "launcher_reports_a_failing_job", "--nocapture"],
    )
    .run()
    .unwrap();
    assert_eq!(status.code(), Some(3));
}

#[test]
fn a_job_env_without_its_other_variables_is_a_config_error() {
    // Runs in a child so that the variable does not leak into other tests.
    if std::env::var_os("COURIER_TEST_CHILD").is_some() {
        let err = courier::launch(Config::new(), |_rt| async { Ok(()) }).unwrap_err();
        assert!(
            err.to_string().contains("COURIER_ROOT") || err.to_string().contains("COURIER_SECRET"),
            "{err}"
        );
        return;
    }
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_job_env_without_its_other_variables_is_a_config_error",
            "--nocapture",
        ])
        .env("COURIER_TEST_CHILD", "1")
        .env("COURIER_RANK", "1")
        .env("COURIER_LOCALITIES", "2")
        .status()
        .unwrap();
    assert!(status.success());
}
