//! Policies that read counters and set parameters while the program
//! runs: adaptive coalescing (issue #15).
//!
//! - `model`: the cost model, how many parcels a message should carry
//!   from the traffic (Q, S), the machine (α) and the latency tolerance
//!   (κ), after Narayanan 2020 §4.
//! - `tuner`: one action's tuner towards one destination: phases,
//!   hysteresis, at most three decisions a phase.
//! - `calibration`: what it costs this locality to send a frame to each
//!   peer, `t(s) = α + β·s` (the α-β model of Narayanan 2020, §1.2),
//!   fitted online from the frames sent, after a prior from a start-up
//!   probe, and served as the counters `/network/time/alpha` and
//!   `/network/time/beta`.
//!
//! The runtime feeds the tuners from its counters (`runtime/tuning.rs`),
//! and the calibration from its send path and its start-up:
//!
//! ```text
//! send_frame (runtime/send.rs) ──(peer, wire bytes, ns)──▶ Calibration::record
//! start-up probe (runtime/probe.rs) ──(peer, α, β)──────▶ Calibration::seed
//! counters, a tuner ◀──────────── Calibration::cost(peer) / mean()
//! ```
//!
//! Everything here is arithmetic on measurements that come in as plain
//! values, unit-tested with synthetic ones; the room sits below the
//! runtime, which holds its state and acts on its answers.

mod calibration;
mod decisions;
mod model;
mod tuner;

pub(crate) use calibration::{Calibration, INPROC_PRIOR, MPI_PRIOR, SendCost, TCP_PRIOR};
pub(crate) use decisions::Tuning;
pub(crate) use model::{Bounds, Machine, Traffic};
pub(crate) use tuner::{Epoch, Tuner};
