//! Worker threads kept on CPUs of their own (`Binding`): over TCP, each
//! locality's workers take the CPUs of the process's mask in turn.

#![cfg(target_os = "linux")]

mod common;

use courier::{Binding, Config, TransportKind};

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

/// [`my_cpus`], which must be 2 or more: on one CPU, bound and unbound
/// workers look the same.
fn two_or_more_cpus() -> Vec<usize> {
    let allowed = my_cpus();
    assert!(
        allowed.len() >= 2,
        "this test needs at least 2 CPUs in its mask, not {allowed:?}"
    );
    allowed
}

/// The CPUs the worker running this call may run on.
#[courier::action]
fn worker_cpus() -> Vec<usize> {
    my_cpus()
}

/// Runs a job of `config`; returns each locality's worker CPUs.
fn cpus_of_each_locality(config: Config) -> Vec<Vec<usize>> {
    courier::launch(config, |rt| async move {
        let mut all = Vec::new();
        for l in rt.localities() {
            all.push(rt.call(l, worker_cpus, ()).await?);
        }
        Ok(all)
    })
    .expect("the job ran")
}

/// A two-locality TCP job under `bind`; returns each locality's worker
/// CPUs. Locality 1 is a child process running test `name` again, in
/// which `launch` joins the job and never returns.
fn job(bind: Binding, name: &str) -> Vec<Vec<usize>> {
    cpus_of_each_locality(
        Config::new()
            .localities(2)
            .transport(TransportKind::Tcp)
            .workers(1)
            .bind(bind)
            .child_args(["--exact", name, "--nocapture", "--test-threads=1"]),
    )
}

#[test]
fn bound_workers_take_the_cpus_of_the_mask_in_turn() {
    let allowed = two_or_more_cpus();
    let seen = job(
        Binding::Cores,
        "bound_workers_take_the_cpus_of_the_mask_in_turn",
    );
    let expected: Vec<Vec<usize>> = (0..2).map(|l| vec![allowed[l % allowed.len()]]).collect();
    assert_eq!(seen, expected, "allowed CPUs: {allowed:?}");
}

#[test]
fn unbound_workers_keep_the_mask_of_the_process() {
    let allowed = two_or_more_cpus();
    let seen = job(
        Binding::None,
        "unbound_workers_keep_the_mask_of_the_process",
    );
    assert_eq!(seen, vec![allowed.clone(), allowed]);
}

/// The MPI cases of this file and the sizes they run at. Unbound by the
/// launcher, the ranks of a node share its CPUs: `auto` gives each
/// rank's worker a CPU of its own, unless a rank's mask differs.
#[cfg(feature = "mpi")]
#[test]
fn under_mpirun() {
    common::mpirun_with(
        &[
            "mpi_auto_binds_ranks_that_share_the_cpus",
            "mpi_auto_leaves_ranks_with_masks_of_their_own_unbound",
        ],
        &[2],
        &["--bind-to", "none"],
    );
}

#[test]
#[ignore = "an MPI case: run by under_mpirun"]
fn mpi_auto_leaves_ranks_with_masks_of_their_own_unbound() {
    let allowed = two_or_more_cpus();
    // Both ranks narrow their masks as a launcher's binding would: rank 0
    // to an even number of the CPUs (the whole mask where that is even),
    // rank 1 to the last of those. Half of rank 0's CPUs as workers a
    // rank: were the two ranks taken to share rank 0's mask, `auto` would
    // bind rank 0 to its first half.
    let even = &allowed[..allowed.len() / 2 * 2];
    let last = *even.last().expect("two or more");
    let local_rank = std::env::var("OMPI_COMM_WORLD_LOCAL_RANK").expect("run by mpirun");
    let mine: &[usize] = if local_rank == "1" { &[last] } else { even };
    if mine != allowed {
        let mut set = rustix::thread::CpuSet::new();
        mine.iter().for_each(|&cpu| set.set(cpu));
        rustix::thread::sched_setaffinity(None, &set).expect("narrow the mask");
    }
    let seen = cpus_of_each_locality(common::mpi().workers(even.len() / 2));
    assert_eq!(seen[0], even, "rank 0 keeps its whole mask");
    assert_eq!(seen[1], vec![last], "rank 1 keeps its own");
}

#[test]
#[ignore = "an MPI case: run by under_mpirun"]
fn mpi_auto_binds_ranks_that_share_the_cpus() {
    let allowed = my_cpus();
    // Two ranks of half the CPUs' workers each fill an even mask.
    let workers = (allowed.len() / 2).max(1);
    let fills = allowed.len() >= 2 && allowed.len() % 2 == 0;
    let seen = cpus_of_each_locality(common::mpi().workers(workers));
    for (rank, cpus) in seen.iter().enumerate() {
        if fills {
            let slice = &allowed[rank * workers..(rank + 1) * workers];
            assert!(
                cpus.len() == 1 && slice.contains(&cpus[0]),
                "rank {rank}'s worker runs on {cpus:?}, not one of {slice:?}"
            );
        } else {
            assert_eq!(cpus, &allowed, "rank {rank}: left unbound");
        }
    }
}
