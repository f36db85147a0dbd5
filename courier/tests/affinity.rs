//! Worker threads kept on CPUs of their own (`Bind`): over TCP, each
//! locality's workers take the CPUs of the process's mask in turn.

#![cfg(target_os = "linux")]

use courier::{Bind, Config, TransportKind};

/// The CPUs the calling thread may run on, from `/proc`.
fn my_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/thread-self/status").expect("read /proc");
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list in /proc/thread-self/status")
        .trim();
    list.split(',')
        .flat_map(|range| {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
            a..=b
        })
        .collect()
}

/// The CPUs the worker running this call may run on.
#[courier::action]
fn worker_cpus() -> Vec<usize> {
    my_cpus()
}

/// A two-locality TCP job under `bind`; returns each locality's worker
/// CPUs. Locality 1 is a child process running test `name` again, in
/// which `launch` joins the job and never returns.
fn job(bind: Bind, name: &str) -> Vec<Vec<usize>> {
    let config = Config::new()
        .localities(2)
        .transport(TransportKind::Tcp)
        .workers(1)
        .bind(bind)
        .child_args(["--exact", name, "--nocapture", "--test-threads=1"]);
    courier::launch(config, |rt| async move {
        let mut all = Vec::new();
        for l in rt.localities() {
            all.push(rt.call(l, worker_cpus, ()).await?);
        }
        Ok(all)
    })
    .expect("the job ran")
}

#[test]
fn bound_workers_take_the_cpus_of_the_mask_in_turn() {
    let allowed = my_cpus();
    let seen = job(
        Bind::Cores,
        "bound_workers_take_the_cpus_of_the_mask_in_turn",
    );
    let expected: Vec<Vec<usize>> = (0..2).map(|l| vec![allowed[l % allowed.len()]]).collect();
    assert_eq!(seen, expected, "allowed CPUs: {allowed:?}");
}

#[test]
fn unbound_workers_keep_the_mask_of_the_process() {
    let allowed = my_cpus();
    let seen = job(Bind::None, "unbound_workers_keep_the_mask_of_the_process");
    assert_eq!(seen, vec![allowed.clone(), allowed]);
}
