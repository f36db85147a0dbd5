//! Starting and ending a job: its configuration, the processes or threads
//! of its localities, their rendezvous, running the main function, and
//! shutting down. The top room: it assembles the runtime, the transports
//! and the counters' printers into a job.
//!
//! - `config`: [`Config`], [`RuntimeArgs`] and the `COURIER_*` variables.
//! - `run`: [`launch`] and [`launch_spmd`]: threads (inproc),
//!   self-launched processes (TCP), or joining a launcher's job.
//! - `bootstrap`: the rendezvous where TCP localities exchange addresses.
//! - `job`: the environment a launched locality reads (`COURIER_*`).
//! - `mpi_job`: joining an MPI job (`mpirun`, `srun`; the `mpi` feature).
//! - [`launcher`]: what `courier run` uses to start a job.

#[cfg(feature = "cli")]
mod args;
mod bootstrap;
mod config;
mod job;
pub mod launcher;
mod log;
mod mpi_job;
mod role;
mod run;

#[cfg(feature = "cli")]
pub use args::RuntimeArgs;
pub use config::{Binding, Config, DEFAULT_MAX_FRAME_BYTES, MpiProgress, TransportKind};
pub use log::report_to_stderr;
pub use run::{launch, launch_spmd};
