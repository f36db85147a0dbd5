//! Starting a job from outside: what `courier run -n N -- program` does.
//!
//! The launcher serves the rendezvous and starts N copies of the program
//! with `COURIER_RANK` 0 to N−1; each joins the job, and locality 0 runs
//! main. The launcher's exit status is the job's: it waits for every
//! process and fails if any failed.

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::process::{Child, ExitStatus};
use std::time::Duration;

use super::bootstrap;
use super::job::{Children, JobEnv};
use crate::ids::LocalityId;
use crate::runtime::Error;
use crate::transport::tcp::Secret;

/// A job to launch: a program, its arguments and the number of localities.
///
/// # Examples
///
/// ```no_run
/// let launcher = courier::launcher::Launcher::new(4, "./target/release/toy", ["--parcels", "1000"]);
/// let status = launcher.run().unwrap();
/// assert!(status.success());
/// ```
#[derive(Debug, Clone)]
pub struct Launcher {
    count: u32,
    program: OsString,
    args: Vec<OsString>,
    listen: IpAddr,
}

impl Launcher {
    /// A job of `count` localities, each running `program` with `args`.
    pub fn new<I, S>(count: u32, program: impl Into<OsString>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Launcher {
            count,
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            listen: IpAddr::V4(Ipv4Addr::LOCALHOST),
        }
    }

    /// Sets the address the rendezvous listens on (default 127.0.0.1).
    pub fn listen(mut self, ip: IpAddr) -> Self {
        self.listen = ip;
        self
    }

    /// Starts the processes, serves the rendezvous, and waits for all of
    /// them. Returns the status of locality 0, or an error naming the first
    /// locality that failed.
    pub fn run(&self) -> Result<ExitStatus, Error> {
        if self.count == 0 {
            return Err(Error::Config("a job needs at least one locality".into()));
        }
        let secret = Secret::random()?;
        let rendezvous = TcpListener::bind((self.listen, 0))
            .map_err(|e| Error::startup(format!("cannot listen on {}: {e}", self.listen)))?;
        let root = rendezvous
            .local_addr()
            .map_err(|e| Error::startup(format!("rendezvous address: {e}")))?;
        let mut children = Children::default();
        for rank in 0..self.count {
            let job = JobEnv {
                rank,
                count: self.count,
                root,
                secret,
                launcher: true,
                local_localities: self.count,
            };
            children.spawn(
                LocalityId::new(rank),
                job.command(&self.program, &self.args),
            )?;
        }
        // On an error the dropped `children` kill every process started.
        bootstrap::serve(&rendezvous, self.count, &secret, None, &mut || {
            children.check_running()
        })?;
        wait_all(children.into_inner())
    }
}

/// Waits for every locality. When one fails, the others get a grace period
/// to notice and exit on their own before they are killed.
fn wait_all(mut children: Vec<(LocalityId, Child)>) -> Result<ExitStatus, Error> {
    let mut root_status = None;
    let mut failure: Option<(LocalityId, ExitStatus)> = None;
    let mut grace_ends = None;
    while !children.is_empty() {
        let mut i = 0;
        while i < children.len() {
            match children[i].1.try_wait() {
                Ok(Some(status)) => {
                    let (rank, _) = children.swap_remove(i);
                    if rank == LocalityId::ROOT {
                        root_status = Some(status);
                    }
                    if !status.success() && failure.is_none() {
                        failure = Some((rank, status));
                        grace_ends = Some(std::time::Instant::now() + Duration::from_secs(5));
                    }
                }
                _ => i += 1,
            }
        }
        if grace_ends.is_some_and(|t| std::time::Instant::now() > t) {
            for (rank, child) in &mut children {
                tracing::warn!("killing {rank}, which did not stop after the job failed");
                let _ = child.kill();
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    match (failure, root_status) {
        (Some((rank, status)), _) if rank != LocalityId::ROOT => {
            Err(Error::LocalitiesLost(vec![(
                rank,
                format!("exited with {status}"),
            )]))
        }
        (_, Some(status)) => Ok(status),
        (Some((_, status)), None) => Ok(status),
        (None, None) => Err(Error::startup("locality#0 never ran")),
    }
}
