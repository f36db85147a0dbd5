//! The runtime: localities, the [`Runtime`] handle, and [`launch`].
//!
//! - `config`: [`Config`], [`RuntimeArgs`] and the `COURIER_*` variables.
//! - `launch`: starting a job (threads, self-launched processes, or joining
//!   a launcher's job), running main, and shutting down.
//! - `bootstrap`: the rendezvous where localities exchange addresses.
//! - `mpi_job`: joining an MPI job (`mpirun`, `srun`; the `mpi` feature).
//! - `locality`: one locality's shared state: scheduler, transport, pending
//!   calls, and what it does with received frames.
//! - `termination`: detecting that the whole job is idle, then stopping it.

pub(crate) mod bootstrap;
mod collective;
mod config;
mod control;
mod error;
mod handle;
pub(crate) mod job;
mod launch;
mod locality;
mod locality_id;
mod mpi_job;
mod receive;
mod send;
mod state;
mod termination;
mod time;

pub use config::{Config, DEFAULT_MAX_FRAME_BYTES, RuntimeArgs, Transport};
pub use error::{BoxError, Error};
pub use handle::{Runtime, current, try_current};
pub use launch::{launch, launch_spmd};
pub use locality_id::LocalityId;
pub use state::with_state;
pub use time::{Sleep, sleep};

pub(crate) use locality::Locality;
