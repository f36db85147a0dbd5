//! [`launch`]: start a job, run main on the root, wait for the job to go
//! idle, stop every locality.
//!
//! A job starts in one of three ways:
//!
//! - **threads**: the in-process transport, or a single locality; every
//!   locality is a thread pool of this process.
//! - **self-launch**: TCP with more than one locality and no `COURIER_RANK`
//!   in the environment. This process becomes locality 0, starts the others
//!   as copies of itself (same executable and arguments, with `COURIER_*`
//!   variables saying which locality each is), and serves the rendezvous.
//! - **join**: `COURIER_RANK` is set (by a self-launching parent, by `courier
//!   run`, or by hand across hosts). The process becomes that locality.
//!
//! Only locality 0 runs main and returns from [`launch`]. Every other
//! locality serves calls until the root stops the job and then exits the
//! process with status 0, or with status 1 when it lost the root.

use std::future::Future;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use super::bootstrap;
use super::job::{Children, JobEnv, launched_by_mpi};
#[cfg(feature = "mpi")]
use super::mpi_job;
use super::role::{Main, MainFuture, run_member, run_root, serve_until_shutdown};
use super::{Config, TransportKind};
use crate::action::registry;
use crate::counters::list_counters;
use crate::ids::LocalityId;
use crate::parcel::Control;
use crate::runtime::Locality;
use crate::runtime::{BoxError, Error, Runtime};
use crate::sched::HostPlace;
use crate::transport::inproc::{Fabric, Inproc};
use crate::transport::tcp::Secret;
use crate::transport::tcp::Tcp;

/// How long the root waits for the processes it started to exit.
const CHILD_EXIT_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs a job: starts its localities, runs `main` on locality 0, waits until
/// every parcel sent has been delivered and executed, and stops every
/// locality.
///
/// On locality 0, returns main's output, or an [`Error`] if the job could not
/// start, main failed, or a locality failed. On every other locality of a
/// multi-process job, **does not return**: the process serves calls and
/// exits when the job ends. Code before `launch` therefore runs on every
/// locality, code after it only on the root.
///
/// # Environment
///
/// A process started as a locality of a job (`COURIER_RANK` set) takes
/// `COURIER_SECRET` out of its environment here, so that the processes its
/// actions start do not inherit it. Call `launch` before starting threads
/// that read the environment through C's `getenv`.
///
/// # Process exit
///
/// `launch` and [`launch_spmd`] are the only places Courier ends the
/// process: a non-root locality of a `launch` job exits with status 0 when
/// the root stops the job (1 when it lost the root; an MPI rank after
/// finalizing MPI), and [`Config::list_counters`] prints the counter types
/// and exits with status 0.
///
/// # Examples
///
/// ```
/// use courier::{Config, TransportKind};
///
/// #[courier::action]
/// fn hello(name: String) -> String {
///     format!("hello {name} from {}", courier::current().here())
/// }
///
/// let greeting = courier::launch(Config::new().localities(2).transport(TransportKind::Inproc), |rt| async move {
///     Ok(rt.call(rt.locality(1), hello, ("you".to_owned(),)).await?)
/// })
/// .unwrap();
/// assert_eq!(greeting, "hello you from locality#1");
/// ```
pub fn launch<T, F, Fut>(config: Config, main: F) -> Result<T, Error>
where
    F: FnOnce(Runtime) -> Fut,
    Fut: Future<Output = Result<T, BoxError>> + Send + 'static,
    T: Send + 'static,
{
    start(config, Main::Root(Box::new(move |rt| Box::pin(main(rt)))))
}

/// Runs a job whose main function runs on *every* locality (SPMD, as an
/// MPI program or a bale kernel does): each locality runs `main`, the job
/// ends once every `main` has returned and no parcel is left, and
/// `launch_spmd` returns each locality's own result on that locality.
///
/// Code after `launch_spmd` runs on every locality of a multi-process job
/// (each process continues with its own result); under
/// `TransportKind::Inproc` only the root's result is returned. The localities
/// synchronize with the collectives of [`Runtime`] ([`barrier`](Runtime::barrier),
/// [`all_reduce`](Runtime::all_reduce), [`quiesce`](Runtime::quiesce)).
///
/// # Errors
///
/// On the root, as [`launch`], and [`Error::RemoteMain`] when another
/// locality's `main` failed; elsewhere, that locality's own failure.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use courier::{Config, TransportKind};
///
/// struct Count(AtomicU64);
///
/// #[courier::action]
/// fn bump() {
///     courier::with_state(|c: &Count| c.0.fetch_add(1, Ordering::Relaxed));
/// }
///
/// let config = Config::new()
///     .localities(4)
///     .transport(TransportKind::Inproc)
///     .state(|_, _| Count(AtomicU64::new(0)));
/// let total = courier::launch_spmd(config, |rt| async move {
///     // Every locality bumps every locality ten times...
///     for dest in rt.localities() {
///         for _ in 0..10 {
///             rt.post(dest, bump, ())?;
///         }
///     }
///     // ...and waits until every bump of every locality has run.
///     rt.quiesce().await?;
///     let mine = rt.state::<Count>().0.load(Ordering::Relaxed);
///     Ok(rt.all_reduce(mine, |a, b| a + b).await?)
/// })
/// .unwrap();
/// assert_eq!(total, 4 * 4 * 10);
/// ```
pub fn launch_spmd<T, F, Fut>(config: Config, main: F) -> Result<T, Error>
where
    F: Fn(Runtime) -> Fut,
    Fut: Future<Output = Result<T, BoxError>> + Send + 'static,
    T: Send + 'static,
{
    let main = move |rt| -> MainFuture<T> { Box::pin(main(rt)) };
    start(config, Main::Every(&main))
}

fn start<T: Send + 'static>(config: Config, main: Main<'_, T>) -> Result<T, Error> {
    config.validate()?;
    let job = JobEnv::from_env()?;
    if config.list_counters {
        if job.as_ref().is_none_or(|j| j.rank == 0) {
            let _ = list_counters(&mut std::io::stdout().lock());
        }
        std::process::exit(0);
    }
    // A launcher's job (COURIER_RANK) is TCP unless MPI was asked for.
    let transport = if job.is_some() && !config.transport_explicit {
        config.transport
    } else {
        config.transport_kind()
    };
    match (transport, job) {
        (TransportKind::Inproc | TransportKind::Mpi, Some(_)) => Err(Error::Config(format!(
            "COURIER_RANK is set (a launcher started this process) but the transport is {transport:?}"
        ))),
        (TransportKind::Inproc | TransportKind::Tcp, None) if launched_by_mpi() => {
            Err(Error::Config(format!(
                "an MPI launcher started this process but the transport is {}: every rank \
                 would start a job of its own. Use the MPI transport (leave --transport out, \
                 or --transport mpi; it needs Courier's `mpi` feature), or start the job \
                 without mpirun",
                format!("{transport:?}").to_lowercase()
            )))
        }
        (TransportKind::Inproc, None) => run_threads(&config, main),
        (TransportKind::Tcp, None) if config.localities == 1 => run_threads(&config, main),
        (TransportKind::Tcp, None) => self_launch(&config, main),
        (TransportKind::Tcp, Some(job)) => join(&config, &job, main),
        #[cfg(feature = "mpi")]
        (TransportKind::Mpi, None) => mpi_job::join_mpi(&config, main),
        #[cfg(not(feature = "mpi"))]
        (TransportKind::Mpi, None) => Err(Error::Config(
            "this process was started by an MPI launcher (or asked for --transport mpi), but the \
             program was built without Courier's `mpi` feature: rebuild with `--features courier/mpi`"
                .into(),
        )),
    }
}

/// Runs every locality as a thread pool of this process.
fn run_threads<T: Send + 'static>(config: &Config, main: Main<'_, T>) -> Result<T, Error> {
    let count = config.localities;
    let fabric = Fabric::new(count);
    let workers = config.workers_for(count, None);
    let mut localities = Vec::new();
    for rank in 0..count {
        let here = LocalityId::new(rank);
        let transport = Inproc::new(here, Arc::clone(&fabric), config.max_frame_bytes);
        let locality = Locality::start(
            here,
            count,
            Box::new(transport),
            config.locality_settings(
                workers,
                crate::runtime::LivenessSettings::OFF,
                TransportKind::Inproc,
                Some(HostPlace {
                    index: rank,
                    count,
                    whole_host: true,
                }),
                crate::sched::allowed_cpus,
            ),
        )
        .map_err(|e| Error::startup(format!("cannot start the worker threads of {here}: {e}")));
        match locality {
            Ok(l) => localities.push(l),
            Err(e) => {
                stop_all(&localities);
                return Err(e);
            }
        }
    }
    if let Main::Every(every) = &main {
        // Each other locality's main runs as a task of its own and reports
        // to the root when it returns, as a process of its own would.
        for l in &localities[1..] {
            let task = l.sched.spawn(every(Runtime::new(Arc::clone(l))));
            let l = Arc::clone(l);
            drop(localities[0].sched.spawn(async move {
                let error = match task.await {
                    Ok(_) => None,
                    Err(e) => Some(e.to_string()),
                };
                l.send_control(LocalityId::ROOT, &Control::MainDone { error });
            }));
        }
    }
    let result = run_root(config, &localities[0], main);
    stop_all(&localities);
    result
}

fn stop_all(localities: &[Arc<Locality>]) {
    for l in localities {
        l.stop();
    }
}

/// Starts the other localities as child processes and runs as locality 0.
fn self_launch<T: Send + 'static>(config: &Config, main: Main<'_, T>) -> Result<T, Error> {
    let count = config.localities;
    let secret = Secret::random()?;
    let rendezvous = bind(config)?;
    let root_addr = rendezvous
        .local_addr()
        .map_err(|e| Error::startup(format!("rendezvous address: {e}")))?;
    let exe = std::env::current_exe()
        .map_err(|e| Error::startup(format!("cannot find this program's executable: {e}")))?;
    let args = config
        .child_args
        .clone()
        .unwrap_or_else(|| std::env::args_os().skip(1).collect());
    let mut children = Children::default();
    for rank in 1..count {
        let job = JobEnv {
            rank,
            count,
            root: root_addr,
            secret,
            launcher: false,
            local_localities: count,
        };
        children.spawn(LocalityId::new(rank), job.command(exe.as_os_str(), &args))?;
    }
    let data = bind(config)?;
    let data_addr = local_addr(&data)?;
    let table = bootstrap::serve(&rendezvous, count, &secret, Some(data_addr), &mut || {
        children.check_running()
    })?;
    drop(rendezvous);
    let root = start_tcp_locality(
        config,
        LocalityId::ROOT,
        count,
        count,
        &table,
        data,
        &secret,
    )?;
    let result = run_root(config, &root, main);
    root.stop();
    let lost: Vec<LocalityId> = match &result {
        Err(Error::LocalitiesLost(lost)) => lost.iter().map(|(l, _)| *l).collect(),
        _ => Vec::new(),
    };
    let exits = children.wait(CHILD_EXIT_TIMEOUT, &lost);
    match result {
        Err(Error::LocalitiesLost(lost)) => Err(Error::LocalitiesLost(
            lost.into_iter()
                .map(|(l, why)| match exits.iter().find(|(c, _)| *c == l) {
                    Some((_, status)) => (l, format!("{why} ({status})")),
                    None => (l, why),
                })
                .collect(),
        )),
        other => other,
    }
}

/// Becomes the locality a launcher asked for.
fn join<T: Send + 'static>(config: &Config, job: &JobEnv, main: Main<'_, T>) -> Result<T, Error> {
    if config.localities_explicit && config.localities != job.count {
        return Err(Error::Config(format!(
            "the program asks for {} localities but was started as one of {}",
            config.localities, job.count
        )));
    }
    let here = LocalityId::new(job.rank);
    let data = bind(config)?;
    let data_addr = local_addr(&data)?;
    let table = if job.rank == 0 && !job.launcher {
        let rendezvous = TcpListener::bind(job.root).map_err(|e| {
            Error::startup(format!(
                "cannot listen for the rendezvous at COURIER_ROOT={}: {e}",
                job.root
            ))
        })?;
        bootstrap::serve(
            &rendezvous,
            job.count,
            &job.secret,
            Some(data_addr),
            &mut || Ok(()),
        )?
    } else {
        bootstrap::register(job.root, &job.secret, job.rank, job.count, data_addr)?
    };
    let locality = start_tcp_locality(
        config,
        here,
        job.count,
        job.local_localities,
        &table,
        data,
        &job.secret,
    )?;
    if job.rank == 0 {
        let result = run_root(config, &locality, main);
        locality.stop();
        return result;
    }
    match main {
        Main::Every(every) => run_member(&locality, every),
        Main::Root(_) => std::process::exit(serve_until_shutdown(&locality)),
    }
}

fn bind(config: &Config) -> Result<TcpListener, Error> {
    TcpListener::bind((config.listen, 0))
        .map_err(|e| Error::startup(format!("cannot listen on {}: {e}", config.listen)))
}

fn local_addr(listener: &TcpListener) -> Result<SocketAddr, Error> {
    listener
        .local_addr()
        .map_err(|e| Error::startup(format!("listening address: {e}")))
}

fn start_tcp_locality(
    config: &Config,
    here: LocalityId,
    count: u32,
    local_localities: u32,
    table: &[SocketAddr],
    data: TcpListener,
    secret: &Secret,
) -> Result<Arc<Locality>, Error> {
    let tcp = Tcp::connect(
        here,
        table,
        data,
        secret,
        registry().fingerprint(),
        config.max_frame_bytes,
    )?;
    Locality::start(
        here,
        count,
        Box::new(tcp),
        config.locality_settings(
            config.workers_for(local_localities, None),
            config.liveness(here),
            TransportKind::Tcp,
            // Its place on the host is known when the job is all here:
            // started by the program itself or by `courier run`.
            (local_localities == count).then_some(HostPlace {
                index: here.get(),
                count,
                whole_host: true,
            }),
            crate::sched::allowed_cpus,
        ),
    )
    .map_err(|e| Error::startup(format!("cannot start the worker threads of {here}: {e}")))
}
