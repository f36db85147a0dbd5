//! The processes of a job: what a launcher tells each one through the
//! environment ([`JobEnv`]), and the child processes a launcher started
//! ([`Children`]).

use std::ffi::{OsStr, OsString};
use std::net::SocketAddr;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::ids::LocalityId;
use crate::runtime::Error;
use crate::transport::tcp::Secret;

/// What a launcher told this process through the environment.
#[derive(Debug)]
pub(crate) struct JobEnv {
    /// This process's locality.
    pub(crate) rank: u32,
    /// Localities in the job.
    pub(crate) count: u32,
    /// Where the rendezvous is served.
    pub(crate) root: SocketAddr,
    /// The job secret.
    pub(crate) secret: Secret,
    /// Whether a launcher (not rank 0) serves the rendezvous.
    pub(crate) launcher: bool,
    /// Localities on this host, to size the worker pools.
    pub(crate) local_localities: u32,
}

impl JobEnv {
    /// Reads the job from `COURIER_*` variables; `None` when `COURIER_RANK`
    /// is not set (this process was not started as part of a job).
    pub(crate) fn from_env() -> Result<Option<JobEnv>, Error> {
        let Ok(rank) = std::env::var("COURIER_RANK") else {
            return Ok(None);
        };
        let var = |name: &str| {
            std::env::var(name)
                .map_err(|_| Error::Config(format!("COURIER_RANK is set but {name} is not")))
        };
        let parse = |name: &str, value: &str| -> Result<u32, Error> {
            value
                .trim()
                .parse()
                .map_err(|e| Error::Config(format!("{name}={value:?}: {e}")))
        };
        let count = parse("COURIER_LOCALITIES", &var("COURIER_LOCALITIES")?)?;
        let rank = parse("COURIER_RANK", &rank)?;
        if rank >= count {
            return Err(Error::Config(format!(
                "COURIER_RANK={rank} but the job has {count} localities"
            )));
        }
        let root = var("COURIER_ROOT")?;
        let root = std::net::ToSocketAddrs::to_socket_addrs(&root)
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| {
                Error::Config(format!("COURIER_ROOT={root:?} is not a host:port address"))
            })?;
        let local_localities = match std::env::var("COURIER_LOCAL_LOCALITIES") {
            Ok(v) => parse("COURIER_LOCAL_LOCALITIES", &v)?,
            Err(_) => 1,
        };
        Ok(Some(JobEnv {
            rank,
            count,
            root,
            secret: Secret::from_hex(&take_secret().ok_or_else(|| {
                Error::Config("COURIER_RANK is set but COURIER_SECRET is not".into())
            })?)?,
            launcher: std::env::var("COURIER_LAUNCHER").is_ok_and(|v| v == "1"),
            local_localities,
        }))
    }

    /// The command that starts `program args` as this locality of the job.
    /// Its secret goes in `COURIER_SECRET`, which the child takes out of
    /// its environment once it has read it ([`take_secret`]).
    pub(crate) fn command(&self, program: &OsStr, args: &[OsString]) -> Command {
        let mut command = Command::new(program);
        command
            .args(args)
            .env("COURIER_RANK", self.rank.to_string())
            .env("COURIER_LOCALITIES", self.count.to_string())
            .env("COURIER_ROOT", self.root.to_string())
            .env("COURIER_SECRET", self.secret.to_hex())
            .env("COURIER_TRANSPORT", "tcp")
            .env(
                "COURIER_LOCAL_LOCALITIES",
                self.local_localities.to_string(),
            );
        if self.launcher {
            command.env("COURIER_LAUNCHER", "1");
        } else {
            command.env_remove("COURIER_LAUNCHER");
        }
        command
    }
}
/// The job secret from `COURIER_SECRET`, which is removed from the
/// environment the first time: the processes a program's actions start
/// must not inherit it. Later calls (a second job in the same process)
/// get the value read first.
///
/// The variable stays visible in `/proc/PID/environ` (the process's
/// initial environment, readable by the same user only); what the process
/// passes on is its current environment.
fn take_secret() -> Option<String> {
    static TAKEN: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let mut taken = TAKEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if taken.is_none() {
        let value = std::env::var("COURIER_SECRET").ok()?;
        remove_secret_from_environment();
        *taken = Some(value);
    }
    taken.clone()
}

#[allow(unsafe_code)]
fn remove_secret_from_environment() {
    // SAFETY: `remove_var` races with code that reads the environment
    // without Rust's environment lock (C's `getenv` on another thread).
    // It runs once, in `launch`, before Courier starts a thread; the
    // documentation of `launch` asks programs to call it before they start
    // threads of their own that read the environment from C.
    unsafe { std::env::remove_var("COURIER_SECRET") };
}

/// How long the root waits for a child it declared lost to exit before it
/// kills it: a crashed one has exited already; a stopped or hung one
/// never will.
const LOST_EXIT_TIMEOUT: Duration = Duration::from_millis(200);

/// The processes a self-launching root or a launcher started. Killed if
/// dropped before they exited (a failed start-up must not leave orphans).
#[derive(Debug, Default)]
pub(crate) struct Children(Vec<(LocalityId, Child)>);

impl Children {
    /// Starts `command` as locality `rank`.
    pub(crate) fn spawn(&mut self, rank: LocalityId, mut command: Command) -> Result<(), Error> {
        let child = command.spawn().map_err(|e| {
            Error::startup(format!(
                "cannot start {rank} ({:?}): {e}",
                command.get_program()
            ))
        })?;
        self.0.push((rank, child));
        Ok(())
    }

    /// Hands the processes over; they are no longer killed on drop.
    pub(crate) fn into_inner(mut self) -> Vec<(LocalityId, Child)> {
        std::mem::take(&mut self.0)
    }

    /// Fails if a child exited (before it could have joined the job).
    pub(crate) fn check_running(&mut self) -> Result<(), String> {
        for (rank, child) in &mut self.0 {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "{rank} (process {}) exited with {status} before it joined",
                    child.id()
                ));
            }
        }
        Ok(())
    }

    /// Waits for every child to exit, killing those that take longer than
    /// `timeout`, and those of `lost` (the job declared them lost: dead
    /// already, or stopped or hung) after [`LOST_EXIT_TIMEOUT`]. Returns how
    /// each one ended, for error messages.
    pub(crate) fn wait(
        &mut self,
        timeout: Duration,
        lost: &[LocalityId],
    ) -> Vec<(LocalityId, String)> {
        let start = Instant::now();
        let mut exits = Vec::new();
        for (rank, child) in std::mem::take(&mut self.0) {
            let limit = if lost.contains(&rank) {
                LOST_EXIT_TIMEOUT.min(timeout)
            } else {
                timeout
            };
            exits.push((rank, wait_child(rank, child, start + limit)));
        }
        exits
    }
}

fn wait_child(rank: LocalityId, mut child: Child, deadline: Instant) -> String {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return format!("process {} exited with {status}", child.id()),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                tracing::warn!("{rank} (process {}) did not exit; killing it", child.id());
                let _ = child.kill();
                let _ = child.wait();
                return format!("process {} had to be killed", child.id());
            }
            Err(e) => return format!("waiting for process {} failed: {e}", child.id()),
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Environment variables that MPI launchers set in every rank: Open MPI,
/// PMI (MPICH's Hydra, Slurm's `srun --mpi=pmi2`) and PMIx (`srun --mpi=pmix`).
const LAUNCHER_VARIABLES: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"];

/// Whether an MPI launcher started this process.
pub(super) fn launched_by_mpi() -> bool {
    LAUNCHER_VARIABLES
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}
