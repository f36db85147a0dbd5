//! Joining an MPI job: under `mpirun` or `srun`, a process takes its
//! locality id and the number of localities from `MPI_COMM_WORLD` and uses
//! the MPI transport. Only with the `mpi` feature; without it, a process
//! that finds itself started by an MPI launcher says so instead of
//! starting a job of its own on every rank.

#[cfg(feature = "mpi")]
use std::future::Future;

#[cfg(feature = "mpi")]
use super::{BoxError, Config, Error, LocalityId};

/// Environment variables that MPI launchers set in every rank: Open MPI,
/// PMI (MPICH's Hydra, Slurm's `srun --mpi=pmi2`) and PMIx (`srun --mpi=pmix`).
const LAUNCHER_VARIABLES: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"];

/// Whether an MPI launcher started this process.
pub(super) fn launched_by_mpi() -> bool {
    LAUNCHER_VARIABLES
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

/// Becomes the locality of this MPI rank; runs `main` on rank 0. Other
/// ranks serve until the root stops the job, then finalize MPI and exit.
#[cfg(feature = "mpi")]
pub(super) fn join_mpi<T, F, Fut>(config: &Config, main: F) -> Result<T, Error>
where
    F: FnOnce(super::Runtime) -> Fut,
    Fut: Future<Output = Result<T, BoxError>> + Send + 'static,
    T: Send + 'static,
{
    use mpi::Threading;
    use mpi::collective::CommunicatorCollectives;
    use mpi::topology::Communicator;

    use super::launch::{run_root, serve_until_shutdown};
    use super::locality::Locality;
    use crate::action::registry;
    use crate::transport::mpi::Mpi;

    let Some((universe, threading)) = mpi::initialize_with_threading(Threading::Multiple) else {
        return Err(Error::startup(
            "MPI is already initialized in this process: under MPI, launch runs once per process",
        ));
    };
    if threading < Threading::Serialized {
        return Err(Error::startup(format!(
            "MPI granted only {threading:?} thread support; Courier's workers call MPI under a lock \
             and need MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE (use an MPI library built with \
             thread support)"
        )));
    }
    let world = universe.world();
    let (rank, size) = (world.rank() as u32, world.size() as u32);
    if config.localities_explicit && config.localities != size {
        return Err(Error::Config(format!(
            "the program asks for {} localities but the MPI launcher started {size} ranks",
            config.localities
        )));
    }
    let fingerprint = registry().fingerprint();
    let mut all = vec![0u64; size as usize];
    world.all_gather_into(&fingerprint, &mut all[..]);
    if let Some(other) = all.iter().position(|&f| f != fingerprint) {
        return Err(Error::startup(format!(
            "rank {other} runs a different binary (its actions differ from rank {rank}'s): \
             build once and run the same executable on every rank"
        )));
    }
    let local = world.split_shared(rank as i32).size() as u32;
    let here = LocalityId::new(rank);
    let transport = Mpi::new(world, config.max_frame_bytes);
    let workers = config.workers_for(local);
    let locality = Locality::start(here, size, workers, Box::new(transport), config)
        .map_err(|e| Error::startup(format!("cannot start the worker threads of {here}: {e}")))?;
    if rank == 0 {
        let result = run_root(config, &locality, main);
        locality.stop();
        drop(locality);
        drop(universe); // MPI_Finalize, after every worker stopped calling MPI
        return result;
    }
    let code = serve_until_shutdown(&locality);
    drop(locality);
    drop(universe);
    std::process::exit(code)
}
