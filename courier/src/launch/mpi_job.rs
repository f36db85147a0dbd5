//! Joining an MPI job: under `mpirun` or `srun`, a process takes its
//! locality id and the number of localities from `MPI_COMM_WORLD` and uses
//! the MPI transport. `COURIER_MPI_PROGRESS=funneled` makes one thread do
//! every MPI call even when MPI allows more (it is what an MPI granting only
//! `MPI_THREAD_FUNNELED` gets; the tests use it to cover that path). Only with the `mpi` feature; without it, a process
//! that finds itself started by an MPI launcher says so instead of
//! starting a job of its own on every rank.

#[cfg(feature = "mpi")]
use super::role::Main;
#[cfg(feature = "mpi")]
use super::{Config, TransportKind};
#[cfg(feature = "mpi")]
use crate::ids::LocalityId;
#[cfg(feature = "mpi")]
use crate::runtime::Error;

/// Becomes the locality of this MPI rank; runs `main` on rank 0. Other
/// ranks serve until the root stops the job, then finalize MPI and exit.
#[cfg(feature = "mpi")]
pub(super) fn join_mpi<T: Send + 'static>(config: &Config, main: Main<'_, T>) -> Result<T, Error> {
    use super::role::{run_member, run_root, serve_until_shutdown};
    use crate::action::registry;
    use crate::runtime::Locality;
    use crate::transport::mpi::{Mpi, MpiProcess};

    let funneled = config.mpi_progress == super::MpiProgress::Funneled;
    let fingerprint = registry().fingerprint();
    let (process, startup) = MpiProcess::start(fingerprint, funneled).map_err(Error::startup)?;
    let (rank, size) = (startup.rank, startup.size);
    if config.localities_explicit && config.localities != size {
        return Err(Error::Config(format!(
            "the program asks for {} localities but the MPI launcher started {size} ranks",
            config.localities
        )));
    }
    if let Some(other) = startup.fingerprints.iter().position(|&f| f != fingerprint) {
        return Err(Error::startup(format!(
            "rank {other} runs a different binary (its actions differ from rank {rank}'s): \
             build once and run the same executable on every rank"
        )));
    }
    let here = LocalityId::new(rank);
    let transport = Mpi::new(rank, size, startup.progress, config.max_frame_bytes);
    // The ranks that share this rank's CPUs split them.
    let workers = config.workers_for(startup.place.count, Some(startup.cpus.len()));
    let cpus = startup.cpus;
    let locality = Locality::start(
        here,
        size,
        Box::new(transport),
        config.locality_settings(
            workers,
            config.liveness(here),
            TransportKind::Mpi,
            Some(startup.place),
            || cpus,
        ),
    )
    .map_err(|e| Error::startup(format!("cannot start the worker threads of {here}: {e}")))?;
    if rank == 0 {
        let result = run_root(config, &locality, main);
        locality.stop();
        drop(locality);
        process.finish(); // MPI_Finalize, after every worker stopped calling MPI
        return result;
    }
    if let Main::Every(every) = main {
        let result = run_member(&locality, every);
        drop(locality);
        process.finish();
        return result;
    }
    let code = serve_until_shutdown(&locality);
    drop(locality);
    process.finish();
    std::process::exit(code)
}
