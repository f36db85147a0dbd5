//! Policies that read counters and set parameters while the program
//! runs: adaptive coalescing (issue #15).
//!
//! - `model`: the cost model, how many parcels a message should carry
//!   from the traffic (Q, S), the machine (α) and the latency tolerance
//!   (κ), after Narayanan 2020 §4.
//! - `tuner`: one action's tuner towards one destination: phases,
//!   hysteresis, at most three decisions a phase.
//!
//! The runtime feeds the tuners from its counters (`runtime/tuning.rs`).

mod decisions;
mod model;
mod tuner;

pub(crate) use decisions::Tuning;
pub(crate) use model::{Machine, Traffic};
pub(crate) use tuner::{Epoch, Tuner};
