//! [`Config`]: how many localities, which transport, how many workers.
//!
//! The table of every variable is on [`Config`].

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;

use std::path::PathBuf;
use std::time::Duration;

use crate::adapt::{INPROC_PRIOR, MPI_PRIOR, TCP_PRIOR};
use crate::aggregate::Coalescing;
use crate::counters::{CounterFormat, PrintOptions};
use crate::flow::{Budget, DEFAULT_CREDIT_POOL, DEFAULT_CREDIT_WINDOW};
use crate::ids::LocalityId;
use crate::runtime::LocalitySettings as Settings;
use crate::runtime::StateMaker;
use crate::runtime::{CalibrationSettings, Error};
use crate::runtime::{DEFAULT_PEER_TIMEOUT, DEFAULT_WATCHDOG, LivenessSettings, OnPostFailure};
use crate::sched::HostPlace;

/// How localities talk to each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[non_exhaustive]
pub enum TransportKind {
    /// Each locality is a process; frames travel over TCP sockets. The
    /// program starts its other localities itself unless a launcher did.
    #[default]
    Tcp,
    /// All localities are thread pools of this one process; frames are still
    /// encoded and decoded, as over a network. For tests and debugging.
    Inproc,
    /// Each locality is a rank of an MPI job started by `mpirun` or `srun`
    /// (needs the `mpi` feature). Chosen by itself when the process finds
    /// it was started by an MPI launcher and no transport was set.
    Mpi,
}

impl FromStr for TransportKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "tcp" => Ok(TransportKind::Tcp),
            "inproc" => Ok(TransportKind::Inproc),
            "mpi" => Ok(TransportKind::Mpi),
            other => Err(Error::Config(format!(
                "unknown transport `{other}`: expected `tcp`, `inproc` or `mpi`"
            ))),
        }
    }
}

impl TransportKind {
    /// How a locality of this transport learns what its sends cost: the
    /// network transports probe their peers at start-up (a few
    /// milliseconds); the in-process one starts from its prior and learns
    /// from its traffic, so that in-process jobs start at once.
    fn calibration(self) -> CalibrationSettings {
        match self {
            TransportKind::Tcp => CalibrationSettings {
                prior: TCP_PRIOR,
                probe: true,
            },
            TransportKind::Inproc => CalibrationSettings {
                prior: INPROC_PRIOR,
                probe: false,
            },
            TransportKind::Mpi => CalibrationSettings {
                prior: MPI_PRIOR,
                probe: true,
            },
        }
    }
}

/// Who makes MPI progress under the MPI transport (`COURIER_MPI_PROGRESS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MpiProgress {
    /// The workers drive MPI from their background work, one at a time,
    /// when MPI grants `MPI_THREAD_SERIALIZED` or better; one MPI thread
    /// otherwise.
    #[default]
    Workers,
    /// One MPI thread makes every MPI call, whatever MPI grants (what an
    /// MPI with only `MPI_THREAD_FUNNELED` gets anyway).
    Funneled,
}

impl FromStr for MpiProgress {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "workers" => Ok(MpiProgress::Workers),
            "funneled" => Ok(MpiProgress::Funneled),
            other => Err(Error::Config(format!(
                "unknown MPI progress mode `{other}`: expected `workers` or `funneled`"
            ))),
        }
    }
}

/// Whether each worker thread is kept on a CPU of its own
/// (`COURIER_BIND`, `--bind`; HPX's `--hpx:bind`).
///
/// Left to the OS, two localities of a host that answer each other's
/// messages tend to share one CPU while the other idles (Linux puts a
/// woken thread on its waker's CPU). Bound, each worker of the host has
/// a CPU of its own from those the process may use (its affinity mask,
/// as read by the thread that calls [`launch`](crate::launch), or under
/// MPI once `MPI_Init`, which may bind the rank, has run), in turn
/// across the localities of the host that share that mask: locality `i`
/// of them, with `w` workers, takes the CPUs `i·w` to `i·w + w − 1` of
/// its mask, around again when they run out.
///
/// Only worker threads are bound. Courier's other threads (timers, the
/// quiescence waves, counter output) run on the CPUs of the thread that
/// started them, as it was before it was bound: for those Courier starts
/// itself, the mask of the thread that called `launch` (or of the MPI
/// thread). A thread
/// that an action starts, and a pool such as rayon's that it builds,
/// inherits the CPU of the worker running the action, and
/// `std::thread::available_parallelism()` reads 1 there: a program that
/// runs threads of its own inside actions wants [`Binding::None`], or
/// sets their mask itself.
///
/// Two jobs started at once on one host know nothing of each other and
/// would take the same CPUs: run them with [`Binding::None`], or each in
/// a mask of its own (`taskset`, a batch system's allocation), which the
/// binding keeps to. Binding is done on Linux alone; elsewhere, and where
/// the mask cannot be read, workers stay where the OS puts them (with a
/// warning when [`Binding::Cores`] was asked for).
///
/// ```
/// use courier::{Binding, Config};
///
/// let config = Config::new().bind(Binding::Cores);
/// assert_eq!("none".parse::<Binding>().unwrap(), Binding::None);
/// # let _ = config;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[non_exhaustive]
pub enum Binding {
    /// [`Cores`](Binding::Cores) where Courier knows the place of each of
    /// several localities on a host and their workers fill its CPUs (each
    /// gets one, and fewer than a locality's workers are left over, as
    /// with the default number of workers): a job of several localities
    /// that the program or `courier run` started on one host, or an MPI
    /// job whose ranks on a node share one mask. [`None`](Binding::None)
    /// otherwise: with more workers than CPUs; with CPUs left for other
    /// jobs, which the OS then spreads; under an MPI launcher's own
    /// binding, which gives ranks masks of their own; under the
    /// in-process transport, whose localities share the process with
    /// others (such as tests); and for a host that runs one locality
    /// (`courier run -n 1`, one MPI rank a node), with no other locality
    /// to keep off its CPUs.
    #[default]
    Auto,
    /// Every worker on a CPU of its own, around again when there are more
    /// workers than CPUs. MPI ranks of a node that share a mask take it in
    /// turn, as under `auto`, also when the launcher gave other ranks
    /// other masks. Where Courier does not know the locality's place on
    /// its host (a job across hosts started by hand), each locality starts
    /// from the first CPU of its mask.
    Cores,
    /// Where the OS puts them.
    None,
}

impl FromStr for Binding {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "auto" => Ok(Binding::Auto),
            "cores" => Ok(Binding::Cores),
            "none" => Ok(Binding::None),
            other => Err(Error::Config(format!(
                "unknown binding `{other}`: expected `auto`, `cores` or `none`"
            ))),
        }
    }
}

/// The CPU of each of a locality's `workers` workers under `binding`, or
/// `None` to leave them where the OS puts them: at `place` among the
/// localities of its host, when that is known, with the process's
/// `allowed` CPUs, read only when binding ([`Binding`] says when `Auto`
/// binds).
pub(crate) fn worker_cpus(
    binding: Binding,
    transport: TransportKind,
    place: Option<HostPlace>,
    workers: usize,
    allowed: impl FnOnce() -> Vec<usize>,
) -> Option<Vec<usize>> {
    let (index, allowed) = match binding {
        Binding::None => return None,
        Binding::Cores => {
            let allowed = allowed();
            if allowed.is_empty() {
                tracing::warn!(
                    "workers stay unbound: this process's CPUs cannot be read \
                     (binding is done on Linux alone)"
                );
            }
            (place.map_or(0, |p| p.index), allowed)
        }
        Binding::Auto => {
            // Binding keeps the localities of a host off each other's
            // CPUs: there must be several, all known to Courier.
            let place = place
                .filter(|p| transport != TransportKind::Inproc && p.whole_host && p.count >= 2)?;
            let allowed = allowed();
            if !place.fills(workers, allowed.len()) {
                return None;
            }
            (place.index, allowed)
        }
    };
    let cpus = crate::sched::placement(&allowed, index, workers);
    (!cpus.is_empty()).then_some(cpus)
}

/// The default largest frame a locality accepts: 64 MiB.
///
/// The frames coalescing builds are far smaller: a buffer is flushed at
/// its byte bound plus one parcel (64 KiB for the count policy's
/// `max_bytes`, 16 KiB for the byte policy's `buffer_bytes`, by default;
/// `aggregate/buffer.rs`, `Limits::of`), and flow control sends a frame
/// larger than the credit window (4 MiB, [`DEFAULT_CREDIT_WINDOW`](crate::DEFAULT_CREDIT_WINDOW))
/// alone, once nothing else is outstanding to its target. So the limit
/// bounds single calls and results: 64 MiB, 16 credit windows and 1,024
/// default coalesced frames, leaves room for bulk arguments while a
/// peer's frame in progress costs its receiver at most that much (the
/// receive buffer grows as the bytes arrive). A call or a result above it
/// fails ([`CallError::is_too_large`](crate::CallError::is_too_large)),
/// with a message naming the setting; raise it with
/// [`Config::max_frame_bytes`], `--max-frame-bytes` or
/// `COURIER_MAX_FRAME_BYTES`, the same on every locality.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 64 << 20;

/// The configuration of a job, passed to [`launch`](crate::launch).
///
/// # Precedence
///
/// Defaults, then `COURIER_*` environment variables, then builder calls (and
/// the command-line flags of `RuntimeArgs` (feature `cli`), which call the builder).
///
/// # Environment variables
///
/// | variable | builder | meaning | default |
/// |---|---|---|---|
/// | `COURIER_LOCALITIES` | [`Config::localities`] | number of localities (processes) | 1 |
/// | `COURIER_TRANSPORT` | [`Config::transport`] | `tcp`, `inproc` or `mpi` | `tcp`; `mpi` under an MPI launcher |
/// | `COURIER_WORKERS` | [`Config::workers`] | worker threads per locality | cores ÷ localities on this host, at least 1 |
/// | `COURIER_LISTEN` | [`Config::listen`] | IP address localities listen on and advertise | `127.0.0.1` |
/// | `COURIER_MAX_FRAME_BYTES` | [`Config::max_frame_bytes`] | largest frame a locality accepts (`--max-frame-bytes`); a larger call or result fails | 64 MiB ([`DEFAULT_MAX_FRAME_BYTES`]: 16 credit windows, 1,024 default coalesced frames) |
/// | `COURIER_COALESCING` | [`Config::coalescing`] | coalescing of actions declared with `#[courier::action(coalescing)]` (`off`, `on`, `adaptive`, `count:...`, `bytes:...`; see [`Coalescing`]) | `adaptive` ([`Coalescing::DEFAULT`]) |
/// | `COURIER_CREDIT_WINDOW` | [`Config::credit_window`] | flow control: bytes of unfinished calls one locality may have at another, or `off` | 4 MiB ([`DEFAULT_CREDIT_WINDOW`](crate::DEFAULT_CREDIT_WINDOW)) |
/// | `COURIER_CREDIT_POOL` | [`Config::credit_pool`] | flow control: bytes a locality lends to origins beyond their windows | 16 MiB ([`DEFAULT_CREDIT_POOL`](crate::DEFAULT_CREDIT_POOL)) |
/// | `COURIER_CREDIT_HINT` | [`Config::credit_hint`] | flow control: bytes every origin may use at every target beyond its window without asking | 0 |
/// | `COURIER_PEER_TIMEOUT` | [`Config::peer_timeout`] | seconds of silence after which a peer is declared lost (`5`, `0.5`, `250ms`), or `off` | 5 s ([`DEFAULT_PEER_TIMEOUT`](crate::DEFAULT_PEER_TIMEOUT)) |
/// | `COURIER_WATCHDOG` | [`Config::watchdog`] | seconds after which a running task is reported (`10`, `0.5`, `250ms`), or `off` | 10 s ([`DEFAULT_WATCHDOG`](crate::DEFAULT_WATCHDOG)) |
/// | `COURIER_ON_POST_FAILURE` | [`Config::on_post_failure`] | `log` or `fail` ([`OnPostFailure`]) | `log` |
/// | `COURIER_INLINING` | [`Config::inlining`] | `adaptive`, `never` or `depth:N` ([`Inlining`](crate::par::Inlining)) | `adaptive` |
/// | `COURIER_PRINT_ADAPT` | [`Config::print_adapt`] | `true` or `false`: report every decision of adaptive coalescing on standard error | `false` |
/// | `COURIER_MPI_PROGRESS` | [`Config::mpi_progress`] | `workers` or `funneled` ([`MpiProgress`]) | `workers` |
/// | `COURIER_BIND` | [`Config::bind`] | `auto`, `cores` or `none`: each worker thread on a CPU of its own ([`Binding`]) | `auto` |
///
/// A value that does not parse makes [`launch`](crate::launch) fail with
/// [`Error::Config`] naming the variable.
///
/// Set by launchers (the program itself, `courier run`, or by hand across
/// hosts; see the README):
///
/// | variable | meaning |
/// |---|---|
/// | `COURIER_RANK` | this process's locality rank; its presence means "join a job" |
/// | `COURIER_ROOT` | `host:port` of the rendezvous (served by rank 0 or by `courier run`) |
/// | `COURIER_SECRET` | the job secret, 32 hex digits |
/// | `COURIER_LAUNCHER` | `1` when a launcher, not rank 0, serves the rendezvous |
/// | `COURIER_LOCAL_LOCALITIES` | localities on this host, to size the worker pools |
///
/// # Examples
///
/// ```
/// use courier::{Config, TransportKind};
///
/// let config = Config::new().localities(4).transport(TransportKind::Inproc).workers(1);
/// assert_eq!(config.num_localities(), 4);
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) localities: u32,
    pub(crate) localities_explicit: bool,
    pub(crate) transport: TransportKind,
    /// Whether the transport was chosen (environment or builder), so that
    /// a process started by `mpirun` does not switch to MPI behind it.
    pub(crate) transport_explicit: bool,
    pub(crate) workers: Option<usize>,
    pub(crate) listen: IpAddr,
    pub(crate) max_frame_bytes: usize,
    pub(crate) coalescing: Coalescing,
    pub(crate) action_coalescing: Vec<(String, Coalescing)>,
    pub(crate) child_args: Option<Vec<OsString>>,
    pub(crate) env_error: Option<String>,
    pub(crate) counters: PrintOptions,
    pub(crate) list_counters: bool,
    pub(crate) print_adapt: bool,
    pub(crate) counters_http: Option<SocketAddr>,
    pub(crate) states: Vec<StateMaker>,
    pub(crate) mpi_progress: MpiProgress,
    pub(crate) bind: Binding,
    pub(crate) credit_window: usize,
    pub(crate) credit_queue: Option<usize>,
    pub(crate) credit_pool: usize,
    pub(crate) credit_hint: usize,
    pub(crate) peer_timeout: Option<Duration>,
    pub(crate) watchdog: Option<Duration>,
    pub(crate) on_post_failure: OnPostFailure,
    pub(crate) inlining: crate::par::Inlining,
}

impl Default for Config {
    fn default() -> Self {
        Config::new()
    }
}

fn env_value<T: FromStr>(name: &str, errors: &mut Vec<String>) -> Option<T>
where
    T::Err: std::fmt::Display,
{
    let value = std::env::var(name).ok()?;
    match value.trim().parse() {
        Ok(v) => Some(v),
        Err(e) => {
            errors.push(format!("{name}={value:?}: {e}"));
            None
        }
    }
}

/// Parses a credit window: bytes, or `off` (0).
pub(crate) fn parse_credit_window(s: &str) -> Result<usize, String> {
    match s.trim() {
        "off" => Ok(0),
        n => n
            .parse()
            .map_err(|e| format!("`{n}` is not a number of bytes or `off`: {e}")),
    }
}

/// Parses a peer timeout or a watchdog threshold: seconds (`5`, `0.5`,
/// `5s`), milliseconds (`250ms`), or `off` (`None`).
pub(crate) fn parse_seconds_or_off(s: &str) -> Result<Option<Duration>, String> {
    let s = s.trim();
    if s == "off" {
        return Ok(None);
    }
    let (number, scale) = match s.strip_suffix("ms") {
        Some(ms) => (ms, 1e-3),
        None => (s.strip_suffix('s').unwrap_or(s), 1.0),
    };
    let seconds = number
        .trim()
        .parse::<f64>()
        .ok()
        .map(|n| n * scale)
        .filter(|s| s.is_finite())
        .ok_or_else(|| {
            format!("`{s}` is not a number of seconds (`5`, `0.5`, `250ms`) or `off`")
        })?;
    if !(MIN_PEER_TIMEOUT.as_secs_f64()..=MAX_PEER_TIMEOUT.as_secs_f64()).contains(&seconds) {
        return Err(format!(
            "`{s}` is outside {MIN_PEER_TIMEOUT:?} to {MAX_PEER_TIMEOUT:?} (use `off` to \
             turn it off)"
        ));
    }
    Ok(Some(Duration::from_secs_f64(seconds)))
}

/// The shortest peer timeout: a few heartbeat intervals of 2 ms.
const MIN_PEER_TIMEOUT: Duration = Duration::from_millis(10);

/// The longest peer timeout: a day (longer is `off`).
const MAX_PEER_TIMEOUT: Duration = Duration::from_secs(86_400);

/// A duration variable in the syntax of [`parse_seconds_or_off`].
fn env_duration(name: &str, errors: &mut Vec<String>) -> Option<Option<Duration>> {
    let value = std::env::var(name).ok()?;
    parse_seconds_or_off(&value)
        .map_err(|e| errors.push(format!("{name}={value:?}: {e}")))
        .ok()
}

fn env_credit_window(errors: &mut Vec<String>) -> Option<usize> {
    let value = std::env::var("COURIER_CREDIT_WINDOW").ok()?;
    parse_credit_window(&value)
        .map_err(|e| errors.push(format!("COURIER_CREDIT_WINDOW={value:?}: {e}")))
        .ok()
}

impl Config {
    /// The defaults, with the `COURIER_*` environment variables applied. An
    /// invalid variable makes [`launch`](crate::launch) fail with
    /// [`Error::Config`].
    pub fn new() -> Self {
        let mut errors = Vec::new();
        let localities = env_value::<u32>("COURIER_LOCALITIES", &mut errors);
        let config = Config {
            localities: localities.unwrap_or(1),
            localities_explicit: false,
            transport: env_value("COURIER_TRANSPORT", &mut errors).unwrap_or_default(),
            transport_explicit: std::env::var_os("COURIER_TRANSPORT").is_some(),
            workers: env_value("COURIER_WORKERS", &mut errors),
            listen: env_value("COURIER_LISTEN", &mut errors)
                .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            max_frame_bytes: env_value("COURIER_MAX_FRAME_BYTES", &mut errors)
                .unwrap_or(DEFAULT_MAX_FRAME_BYTES),
            coalescing: env_value("COURIER_COALESCING", &mut errors).unwrap_or_default(),
            action_coalescing: Vec::new(),
            child_args: None,
            env_error: None,
            counters: PrintOptions::default(),
            list_counters: false,
            print_adapt: env_value("COURIER_PRINT_ADAPT", &mut errors).unwrap_or(false),
            counters_http: None,
            states: Vec::new(),
            mpi_progress: env_value("COURIER_MPI_PROGRESS", &mut errors).unwrap_or_default(),
            bind: env_value("COURIER_BIND", &mut errors).unwrap_or_default(),
            credit_window: env_credit_window(&mut errors).unwrap_or(DEFAULT_CREDIT_WINDOW),
            credit_queue: None,
            credit_pool: env_value("COURIER_CREDIT_POOL", &mut errors)
                .unwrap_or(DEFAULT_CREDIT_POOL),
            credit_hint: env_value("COURIER_CREDIT_HINT", &mut errors).unwrap_or(0),
            peer_timeout: env_duration("COURIER_PEER_TIMEOUT", &mut errors)
                .unwrap_or(Some(DEFAULT_PEER_TIMEOUT)),
            watchdog: env_duration("COURIER_WATCHDOG", &mut errors)
                .unwrap_or(Some(DEFAULT_WATCHDOG)),
            on_post_failure: env_value("COURIER_ON_POST_FAILURE", &mut errors).unwrap_or_default(),
            inlining: env_value("COURIER_INLINING", &mut errors).unwrap_or_default(),
        };
        Config {
            env_error: (!errors.is_empty()).then(|| errors.join("; ")),
            ..config
        }
    }

    /// Gives every locality a state of type `T`, made by `make` (called
    /// with the locality's id and the number of localities of the job) when
    /// the locality starts: what its actions share, read with
    /// [`Runtime::state`](crate::Runtime::state) or [`with_state`](crate::with_state). A second
    /// state of the same type replaces the first.
    ///
    /// Each locality has its own state, also under `TransportKind::Inproc`, where
    /// a `static` would be shared by every locality of the process. `T` must
    /// be `Sync`: every worker of the locality may use it at once.
    pub fn state<T: Send + Sync + 'static>(
        mut self,
        make: impl Fn(LocalityId, u32) -> T + Send + Sync + 'static,
    ) -> Self {
        let maker = StateMaker::new(make);
        self.states.retain(|m| m.type_id() != maker.type_id());
        self.states.push(maker);
        self
    }

    /// Sets the number of localities (at least 1).
    pub fn localities(mut self, n: u32) -> Self {
        self.localities = n;
        self.localities_explicit = true;
        self
    }

    /// Sets the transport.
    pub fn transport(mut self, transport: TransportKind) -> Self {
        self.transport = transport;
        self.transport_explicit = true;
        self
    }

    /// Sets who makes MPI progress under the MPI transport (default
    /// [`MpiProgress::Workers`]; `COURIER_MPI_PROGRESS`). Other transports
    /// ignore it.
    pub fn mpi_progress(mut self, progress: MpiProgress) -> Self {
        self.mpi_progress = progress;
        self
    }

    /// Sets whether each worker thread is kept on a CPU of its own
    /// (default [`Binding::Auto`]; `COURIER_BIND`).
    pub fn bind(mut self, bind: Binding) -> Self {
        self.bind = bind;
        self
    }

    /// Sets the number of worker threads of every locality (at least 1).
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = Some(n);
        self
    }

    /// Sets the IP address the localities listen on and advertise to each
    /// other. Use this host's address on the cluster network for multi-host jobs.
    pub fn listen(mut self, ip: IpAddr) -> Self {
        self.listen = ip;
        self
    }

    /// Sets the largest frame a locality accepts from a peer (default
    /// [`DEFAULT_MAX_FRAME_BYTES`], 64 MiB, which says why;
    /// `COURIER_MAX_FRAME_BYTES`, `--max-frame-bytes`). A peer that
    /// sends a larger one is treated as failed; a call whose arguments or
    /// result would exceed it fails with a [`CallError`](crate::CallError)
    /// ([`is_too_large`](crate::CallError::is_too_large)). Every locality
    /// of a job must use the same limit. Between 1 KiB and 4 GiB.
    pub fn max_frame_bytes(mut self, bytes: usize) -> Self {
        self.max_frame_bytes = bytes;
        self
    }

    /// The coalescing of every action (default: [`Coalescing::DEFAULT`],
    /// adaptive; `COURIER_COALESCING`).
    /// `Coalescing::Off` turns coalescing off; actions marked
    /// `#[courier::action(coalescing = false)]` stay off until configured
    /// with [`coalesce_action`](Self::coalesce_action) or
    /// [`Runtime::set_coalescing`](crate::Runtime::set_coalescing).
    pub fn coalescing(mut self, coalescing: Coalescing) -> Self {
        self.coalescing = coalescing;
        self
    }

    /// Sets the flow-control window: the bytes of received, unfinished
    /// calls one locality may have at another (each frame counts 256
    /// bytes more than its length, for the memory it takes beyond its
    /// bytes). A sender holds frames beyond it until the target
    /// gives credit back, which it does as it finishes running them, or
    /// lends it more from its pool ([`credit_pool`](Self::credit_pool)),
    /// so a locality never holds more than
    /// `(window + hint) × (localities − 1) + pool` of received calls. 0
    /// turns flow control off. Default
    /// [`DEFAULT_CREDIT_WINDOW`](crate::DEFAULT_CREDIT_WINDOW) (4 MiB);
    /// `COURIER_CREDIT_WINDOW`. Every locality of a job must use the same
    /// window: a frame beyond it is taken as a broken peer.
    pub fn credit_window(mut self, bytes: usize) -> Self {
        self.credit_window = bytes;
        self
    }

    /// Sets the shared pool of every locality: bytes of received calls it
    /// lends to origins that ran out of window and ask (seed 002's user
    /// buffers, reserved by a handshake), and takes back when they no
    /// longer need them. Default
    /// [`DEFAULT_CREDIT_POOL`](crate::DEFAULT_CREDIT_POOL) (16 MiB); 0: no
    /// pool. `COURIER_CREDIT_POOL`.
    pub fn credit_pool(mut self, bytes: usize) -> Self {
        self.credit_pool = bytes;
        self
    }

    /// Declares `bytes` that every origin may use at every target beyond
    /// its window without asking (seed 002's hint of exclusive user buffer
    /// space, `am_user_buf`): an origin that knows how much it will send
    /// skips the borrowing handshake. Every locality must get the same
    /// hint. Default 0; `COURIER_CREDIT_HINT`.
    pub fn credit_hint(mut self, bytes: usize) -> Self {
        self.credit_hint = bytes;
        self
    }

    /// Sets the peer timeout of the failure detector: a locality that hears
    /// nothing from a peer for this long declares it lost, with a message
    /// that names the silence, and the calls waiting on it fail
    /// ([`CallError::is_peer_lost`](crate::CallError::is_peer_lost)); a
    /// locality that lost its root ends its process even when its workers
    /// are stuck in handlers. Localities send each other a heartbeat when
    /// they have sent nothing else for a fifth of it (at most every
    /// second), from a thread of their own, so a busy locality is never
    /// taken for a silent one; only a stopped process (`kill -STOP`, a
    /// debugger's breakpoint), a frozen machine or a broken network is.
    /// `None` turns detection off (for debugging: heartbeats still go out).
    /// Default [`DEFAULT_PEER_TIMEOUT`](crate::DEFAULT_PEER_TIMEOUT) (5 s);
    /// `COURIER_PEER_TIMEOUT`. Multi-process jobs only: the localities of
    /// `TransportKind::Inproc` cannot stop one at a time.
    ///
    /// ```
    /// use std::time::Duration;
    /// use courier::Config;
    ///
    /// // Under a debugger: never give up on a peer held at a breakpoint.
    /// let debugging = Config::new().peer_timeout(None);
    /// // On an overloaded cluster: be patient.
    /// let patient = Config::new().peer_timeout(Some(Duration::from_secs(60)));
    /// ```
    pub fn peer_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.peer_timeout = timeout;
        self
    }

    /// Sets the watchdog threshold: a task (a run of received calls, the
    /// main function, a spawned task) that runs on a worker for longer
    /// than this without yielding is reported on stderr while it runs,
    /// naming the worker, the time and the action whose calls it runs, and
    /// counted in `/threads/count/long-running`. A report costs nothing
    /// until it is due: workers publish when each poll began, and the
    /// locality's monitor thread looks. `None` turns it off. Default
    /// [`DEFAULT_WATCHDOG`](crate::DEFAULT_WATCHDOG) (10 s);
    /// `COURIER_WATCHDOG`.
    pub fn watchdog(mut self, threshold: Option<Duration>) -> Self {
        self.watchdog = threshold;
        self
    }

    /// Sets what a locality does when one of its posts failed where it ran
    /// (its handler panicked, its arguments did not decode, the action is
    /// unknown there). The failure always comes back to the posting
    /// locality, which counts it in `/parcels/count/failed@ACTION` and logs
    /// it (the first of each action, then each time the count doubles).
    /// With [`OnPostFailure::Fail`] the job fails fast: the locality's
    /// later `post`s and `call`s fail with a
    /// [`CallError`](crate::CallError) for which
    /// [`is_post_failure`](crate::CallError::is_post_failure) holds, and
    /// [`launch`](crate::launch) returns
    /// [`Error::PostFailed`](crate::Error::PostFailed). Default
    /// [`OnPostFailure::Log`]; `COURIER_ON_POST_FAILURE`.
    pub fn on_post_failure(mut self, policy: OnPostFailure) -> Self {
        self.on_post_failure = policy;
        self
    }

    /// Reports every decision of adaptive coalescing
    /// ([`Coalescing::Adaptive`]) as it is made: the locality, the action,
    /// the setting put in force and why (the traffic and the model's
    /// inputs Q, S, κ, α, or the cost per parcel it compared), as INFO
    /// events that [`report_to_stderr`](crate::report_to_stderr) prints.
    /// Without it they are DEBUG events. Default `false`;
    /// `COURIER_PRINT_ADAPT`; `--print-adapt`.
    pub fn print_adapt(mut self, print: bool) -> Self {
        self.print_adapt = print;
        self
    }

    /// Sets how [`par::join`](crate::par::join) decides between running
    /// its second closure inline and as a task, and
    /// [`Runtime::spawn`](crate::Runtime::spawn) between running a child's
    /// first poll inline and queuing it (default
    /// [`Inlining::Adaptive`](crate::par::Inlining::Adaptive);
    /// `COURIER_INLINING`: `adaptive`, `never` or `depth:N`), on every
    /// locality of this job.
    pub fn inlining(mut self, inlining: crate::par::Inlining) -> Self {
        self.inlining = inlining;
        self
    }

    /// Sets how many bytes of frames may wait for credit towards one
    /// destination before the program's next `post` or `call` to it waits
    /// (default: a quarter of the window). See
    /// [`Runtime::post`](crate::Runtime::post) for how it waits.
    pub fn credit_queue(mut self, bytes: usize) -> Self {
        self.credit_queue = Some(bytes);
        self
    }

    /// Sets the coalescing of one action, named by its full
    /// path or a `::` suffix only it has (as in counter names): how a
    /// program's actions are coalesced can change without touching its code.
    /// Applies on every locality that gets this configuration.
    ///
    /// ```
    /// use courier::{Coalescing, Config};
    ///
    /// let config = Config::new().coalesce_action("get_cplx", "count:num_parcels=512".parse().unwrap());
    /// ```
    pub fn coalesce_action(mut self, name: impl Into<String>, setting: Coalescing) -> Self {
        self.action_coalescing.push((name.into(), setting));
        self
    }

    /// The failure detector of locality `here` of a multi-process job.
    pub(crate) fn liveness(&self, here: LocalityId) -> LivenessSettings {
        LivenessSettings {
            enabled: true,
            timeout: self.peer_timeout,
            exit_when_orphaned: here != LocalityId::ROOT,
        }
    }

    /// The settings of one locality of this job with `workers` workers,
    /// over `transport`, at `place` among the localities of its host, with
    /// the CPUs `allowed` gives (read only when binding).
    pub(crate) fn locality_settings(
        &self,
        workers: usize,
        liveness: LivenessSettings,
        transport: TransportKind,
        place: Option<HostPlace>,
        allowed: impl FnOnce() -> Vec<usize>,
    ) -> Settings<'_> {
        Settings {
            workers,
            worker_cpus: worker_cpus(self.bind, transport, place, workers, allowed),
            max_frame_bytes: self.max_frame_bytes,
            coalescing: self.coalescing,
            action_coalescing: self.action_settings().unwrap_or_default(),
            credit: Budget {
                window: self.credit_window,
                hint: self.credit_hint,
                pool: self.credit_pool,
                queue: self.credit_queue.unwrap_or(self.credit_window / 4),
            },
            states: &self.states,
            liveness,
            watchdog: self.watchdog,
            on_post_failure: self.on_post_failure,
            join_policy: crate::par::policy_code(self.inlining),
            print_adapt: self.print_adapt,
            calibration: transport.calibration(),
        }
    }

    /// The registry slots and settings of [`Config::coalesce_action`].
    pub(crate) fn action_settings(&self) -> Result<Vec<(usize, Coalescing)>, Error> {
        self.action_coalescing
            .iter()
            .map(|(name, setting)| {
                let slot = crate::action::action_slot(name)
                    .map_err(|e| Error::Config(format!("coalescing of `{name}`: {e}")))?;
                setting
                    .validate()
                    .map_err(|e| Error::Config(format!("coalescing of `{name}`: {e}")))?;
                Ok((slot, *setting))
            })
            .collect()
    }

    /// Sets the arguments the program passes to the localities it starts
    /// itself (default: its own arguments). Test harnesses use this to make
    /// the child run only the current test: `["--exact", name, "--nocapture"]`.
    pub fn child_args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.child_args = Some(args.into_iter().map(Into::into).collect());
        self
    }

    /// Prints counter `name` (HPX grammar, wildcards allowed) at the end of
    /// the job and, with [`print_counter_interval`](Self::print_counter_interval),
    /// periodically. Repeatable. A bad name fails the job at start with a
    /// [`Error::Config`] that suggests close names.
    pub fn print_counter(mut self, name: impl Into<String>) -> Self {
        self.counters.names.push(name.into());
        self
    }

    /// Like [`print_counter`](Self::print_counter), but resets the counter
    /// after each print, so each value covers one interval.
    pub fn print_counter_reset(mut self, name: impl Into<String>) -> Self {
        self.counters.reset_names.push(name.into());
        self
    }

    /// Prints the counters every `interval` while the job runs (zero: only
    /// at the end, the default).
    pub fn print_counter_interval(mut self, interval: Duration) -> Self {
        self.counters.interval = (!interval.is_zero()).then_some(interval);
        self
    }

    /// Writes printed counters to `path` instead of standard output (`-`
    /// means standard output).
    pub fn print_counter_destination(mut self, path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        self.counters.destination = (path.as_os_str() != "-").then_some(path);
        self
    }

    /// Sets the format of printed counters (default: HPX-like text lines).
    pub fn print_counter_format(mut self, format: CounterFormat) -> Self {
        self.counters.format = format;
        self
    }

    /// Makes [`launch`](crate::launch) print every counter type with its
    /// unit and help text and exit the process instead of running the job.
    pub fn list_counters(mut self, list: bool) -> Self {
        self.list_counters = list;
        self
    }

    /// Serves every counter at `http://ADDR/metrics` in the Prometheus text
    /// format while the job runs (see [`Runtime::serve_metrics`](crate::Runtime::serve_metrics)).
    /// Default: not served.
    ///
    /// The root locality binds `ADDR` exactly as given. The endpoint has
    /// no authentication: anyone who can reach `ADDR` reads every counter
    /// (action names and traffic included). Prefer a loopback address such
    /// as `127.0.0.1:9100`; a non-loopback one is served with a warning.
    pub fn counters_http(mut self, addr: SocketAddr) -> Self {
        self.counters_http = Some(addr);
        self
    }

    /// The configured number of localities.
    pub fn num_localities(&self) -> u32 {
        self.localities
    }

    /// The transport the job will use: the configured one, or MPI when an
    /// MPI launcher started this process and no transport was set.
    pub fn transport_kind(&self) -> TransportKind {
        if !self.transport_explicit && super::job::launched_by_mpi() {
            TransportKind::Mpi
        } else {
            self.transport
        }
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        if let Some(e) = &self.env_error {
            return Err(Error::Config(e.clone()));
        }
        if self.localities == 0 {
            return Err(Error::Config("the job needs at least one locality".into()));
        }
        if self.workers == Some(0) {
            return Err(Error::Config("a locality needs at least one worker".into()));
        }
        if let Err(e) = self.coalescing.validate() {
            return Err(Error::Config(format!(
                "coalescing {}: {e}",
                self.coalescing
            )));
        }
        self.action_settings()?;
        if self.max_frame_bytes < 1024 || u32::try_from(self.max_frame_bytes).is_err() {
            return Err(Error::Config(format!(
                "max_frame_bytes must be between 1 KiB and 4 GiB, not {}",
                self.max_frame_bytes
            )));
        }
        for (name, value) in [
            ("peer_timeout", self.peer_timeout),
            ("watchdog", self.watchdog),
        ] {
            if let Some(d) = value {
                if !(MIN_PEER_TIMEOUT..=MAX_PEER_TIMEOUT).contains(&d) {
                    return Err(Error::Config(format!(
                        "{name} must be between {MIN_PEER_TIMEOUT:?} and {MAX_PEER_TIMEOUT:?} \
                         (or None: off), not {d:?}"
                    )));
                }
            }
        }
        if self.credit_window != 0 && self.credit_window < 4096 {
            return Err(Error::Config(format!(
                "credit_window must be 0 (off) or at least 4 KiB, not {}",
                self.credit_window
            )));
        }
        Ok(())
    }

    /// Worker threads per locality when `local` localities share this
    /// host, or the `cpus` CPUs given (the mask an MPI rank has after
    /// `MPI_Init`, in which its workers are placed), if known: the CPUs
    /// this thread may use (`available_parallelism`, which also heeds a
    /// container's CPU quota), at most `cpus`, split among them.
    pub(crate) fn workers_for(&self, local: u32, cpus: Option<usize>) -> usize {
        self.workers.unwrap_or_else(|| {
            let usable = std::thread::available_parallelism().map_or(1, usize::from);
            let cores = cpus.filter(|&n| n > 0).map_or(usable, |n| n.min(usable));
            (cores / local.max(1) as usize).max(1)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_adaptive_unless_configured_otherwise() {
        // The variable would configure them (CI does not set it).
        if std::env::var_os("COURIER_COALESCING").is_none() {
            assert_eq!(Config::new().coalescing, Coalescing::DEFAULT);
            assert!(matches!(Config::new().coalescing, Coalescing::Adaptive(_)));
        }
        let on = Config::new().coalescing("on".parse().unwrap());
        assert!(matches!(on.coalescing, Coalescing::Count(_)));
    }

    #[test]
    fn auto_binds_a_known_place_when_the_hosts_workers_fill_the_cpus() {
        let tcp = TransportKind::Tcp;
        let at = |index, count| {
            Some(HostPlace {
                index,
                count,
                whole_host: true,
            })
        };
        let cpus = |n: usize| move || (0..n).collect::<Vec<_>>();
        // Locality 1 of 2, two workers each, four CPUs: the last two.
        assert_eq!(
            worker_cpus(Binding::Auto, tcp, at(1, 2), 2, cpus(4)),
            Some(vec![2, 3])
        );
        // Three localities of two workers on seven CPUs leave one, fewer
        // than a locality's workers would need.
        assert_eq!(
            worker_cpus(Binding::Auto, tcp, at(2, 3), 2, cpus(7)),
            Some(vec![4, 5])
        );
        // Three localities of two workers want six CPUs: left to the OS.
        assert_eq!(worker_cpus(Binding::Auto, tcp, at(1, 3), 2, cpus(4)), None);
        // Two of one worker leave two CPUs free, for other jobs maybe.
        assert_eq!(worker_cpus(Binding::Auto, tcp, at(0, 2), 1, cpus(4)), None);
        // Its place on the host unknown (a job across hosts started by
        // hand, MPI ranks under the launcher's binding).
        assert_eq!(worker_cpus(Binding::Auto, tcp, None, 1, cpus(4)), None);
        // In-process localities share the process with others (tests).
        let inproc = TransportKind::Inproc;
        assert_eq!(
            worker_cpus(Binding::Auto, inproc, at(0, 2), 1, cpus(4)),
            None
        );
        // An unreadable mask.
        assert_eq!(worker_cpus(Binding::Auto, tcp, at(0, 2), 1, cpus(0)), None);
        // One locality on its host (`courier run -n 1`, one rank a node):
        // no other locality to keep off its CPUs.
        assert_eq!(worker_cpus(Binding::Auto, tcp, at(0, 1), 2, cpus(2)), None);
        // Two MPI ranks of four on a node, in a mask the launcher gave
        // them alone: the launcher placed them.
        let group = Some(HostPlace {
            index: 1,
            count: 2,
            whole_host: false,
        });
        let mpi = TransportKind::Mpi;
        assert_eq!(worker_cpus(Binding::Auto, mpi, group, 2, cpus(4)), None);
        // Asked to bind, they take their slices of that mask.
        assert_eq!(
            worker_cpus(Binding::Cores, mpi, group, 2, cpus(4)),
            Some(vec![2, 3])
        );
    }

    #[test]
    fn default_workers_split_the_usable_cpus_within_a_known_mask() {
        let usable = std::thread::available_parallelism().map_or(1, usize::from);
        let config = Config::new();
        assert_eq!(config.workers_for(1, None), usable);
        // A mask of one CPU (an MPI rank bound in `MPI_Init`): one worker.
        assert_eq!(config.workers_for(1, Some(1)), 1);
        assert_eq!(config.workers_for(2, Some(1)), 1);
        // A mask wider than what this thread may use, or unread: as usable.
        assert_eq!(config.workers_for(1, Some(usable + 8)), usable);
        assert_eq!(config.workers_for(1, Some(0)), usable);
        // Asked for, whatever the CPUs.
        assert_eq!(Config::new().workers(3).workers_for(5, Some(1)), 3);
    }

    #[test]
    fn cores_binds_whatever_the_count_and_none_never_reads_the_mask() {
        let tcp = TransportKind::Tcp;
        let two = || vec![4, 5];
        // Locality 1 of 3, two workers each, on three CPUs: from the third.
        assert_eq!(
            worker_cpus(
                Binding::Cores,
                tcp,
                Some(HostPlace {
                    index: 1,
                    count: 3,
                    whole_host: true,
                }),
                2,
                || vec![4, 5, 6]
            ),
            Some(vec![6, 4])
        );
        // Its place unknown: from the first CPU of the mask.
        assert_eq!(
            worker_cpus(Binding::Cores, TransportKind::Inproc, None, 3, two),
            Some(vec![4, 5, 4])
        );
        assert_eq!(worker_cpus(Binding::Cores, tcp, None, 1, Vec::new), None);
        let unread = || -> Vec<usize> { panic!("the mask is read under `none`") };
        assert_eq!(worker_cpus(Binding::None, tcp, None, 1, unread), None);
    }

    #[test]
    fn bindings_parse_and_others_are_refused() {
        assert_eq!("auto".parse::<Binding>().unwrap(), Binding::Auto);
        assert_eq!("cores".parse::<Binding>().unwrap(), Binding::Cores);
        assert_eq!("none".parse::<Binding>().unwrap(), Binding::None);
        let err = "core".parse::<Binding>().unwrap_err().to_string();
        assert!(
            err.contains("`core`") && err.contains("`auto`, `cores` or `none`"),
            "{err}"
        );
    }

    #[test]
    fn progress_modes_parse_and_others_are_refused() {
        assert_eq!(
            "workers".parse::<MpiProgress>().unwrap(),
            MpiProgress::Workers
        );
        assert_eq!(
            "funneled".parse::<MpiProgress>().unwrap(),
            MpiProgress::Funneled
        );
        let err = "funnelled".parse::<MpiProgress>().unwrap_err().to_string();
        assert!(
            err.contains("`funnelled`") && err.contains("`workers` or `funneled`"),
            "{err}"
        );
    }
}
