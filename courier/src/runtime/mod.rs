//! The runtime: what a locality is and does while a job runs, and the
//! [`Runtime`] handle programs hold.
//!
//! The way of a parcel through this room, in file names:
//! `send` (a call or post becomes a parcel in a coalescing buffer, or a
//! frame of its own) → the `aggregate` and `transport` rooms →
//! `receive` (a frame's runs are dispatched: calls to the `action` room's
//! executor, responses to the pending calls) → `respond` (a call's output
//! or failure goes back to its caller).
//!
//! - `locality`: one locality's shared state (scheduler, transport,
//!   pending calls, aggregator); `start`: making it and starting its
//!   workers; `probe`: timing sends to its peers at start-up (the α-β
//!   calibration of the `adapt` room); `metrics`: what the counters room
//!   reads of it.
//! - `handle`: [`Runtime`], the handle programs hold.
//! - `send`, `receive`, `respond`: the parcel's way, above; `inbox`:
//!   received calls waiting to run; `credit`: flow control (the `flow`
//!   room's windows and ledger, waiting for credit, giving it back);
//!   `segments`: segmented calls, sent in units that fit the credit.
//! - `control`: the control protocol (lost peers, shutdown, reports);
//!   `monitor`: a thread per locality that watches what busy workers
//!   cannot: its peers (`liveness`: heartbeats, the peer timeout, a
//!   locality that lost its root ends) and its long tasks (`watchdog`);
//!   `post_failures`: failed posts, reported to the locality that posted.
//! - `termination`: detecting that the whole job is idle, then stopping it.
//! - `collective`: barrier, all-gather, all-reduce, quiescence; `gather`:
//!   each locality's record of them.
//! - `coalescing`: the [`Runtime`] methods that read and change coalescing.
//! - `state`: reading per-locality program state; `states`: its store;
//!   `time`: [`sleep`].
//! - `traffic`: what a locality sent and received (counted per frame).
//! - `tuning`: adaptive coalescing's loop, run every 10 ms by the
//!   threads that send; `epochs`: what the locality keeps of it.
//! - `error`: [`Error`], why a job failed, and [`BoxError`].
//!
//! Starting and ending a job (configuration, processes, rendezvous) is
//! the `launch` room's, above this one and the counters.

mod coalescing;
mod collective;
mod control;
mod credit;
mod epochs;
mod error;
mod gather;
mod handle;
mod inbox;
mod liveness;
mod locality;
mod metrics;
mod monitor;
mod post_failures;
mod probe;
mod receive;
mod respond;
mod run_sizes;
mod segments;
mod send;
mod start;
mod state;
mod states;
mod termination;
mod time;
mod traffic;
mod trains;
mod tuning;
mod watchdog;

pub use coalescing::CoalescingError;
pub use error::{BoxError, Error};
pub use handle::{Runtime, current, try_current};
pub use state::with_state;
pub use time::{Sleep, Timeout, sleep};

pub use liveness::DEFAULT_PEER_TIMEOUT;
pub(crate) use liveness::LivenessSettings;
pub(crate) use locality::{Locality, report};
pub(crate) use metrics::Metrics;
pub use post_failures::OnPostFailure;
pub(crate) use probe::CalibrationSettings;
pub(crate) use start::Settings as LocalitySettings;
pub(crate) use states::StateMaker;
pub(crate) use termination::{shut_down_peers, wait_for_quiescence};
pub(crate) use traffic::{DirectionCounts, Traffic};
pub use watchdog::DEFAULT_WATCHDOG;
