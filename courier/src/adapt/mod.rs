//! Policies that read counters and set parameters while the program
//! runs: adaptive coalescing (issue #15).
//!
//! - `model`: the cost model, how many parcels a message should carry
//!   from the traffic (Q, S), the machine (α) and the latency tolerance
//!   (κ), after Narayanan 2020 §4.
//! - `tuner`: one action's tuner towards one destination: phases,
//!   hysteresis, at most three decisions a phase.

// The tuner is built and tested on synthetic traces first; the runtime's
// policy loop that feeds it counters comes next.
#![allow(dead_code)]

mod model;
mod tuner;
