//! Performance counters: named values that show where a program's time
//! goes, queried by name on any locality (seed 003, HPX's counter framework).
//!
//! - `name`: the HPX name grammar, wildcards, suggestions for misspellings.
//! - `registry`: every counter type, its unit and help text, and how it is
//!   sampled from a locality's statistics.
//! - `traffic`: what a locality sent and received.
//! - `perf`: hardware and kernel events of the workers (Linux perf events).
//! - `set`: [`CounterSet`], evaluate and reset, local and remote.
//! - `derived`: `/arithmetics/...` and `/statistics{...}/...` counters.
//! - `print`: the `--print-counter` options and `--list-counters`.
//! - `prometheus`: `/metrics` over HTTP ([`MetricsServer`]).
//!
//! The sources are cheap enough to stay on: each worker counts in plain
//! fields and publishes them to its own cache-line-aligned atomics at
//! maintenance points (before parking and every few dozen tasks); traffic is
//! counted with relaxed atomic adds per frame. A sample is therefore at
//! most one maintenance interval behind a busy worker and exact for an idle
//! one. The full list, with formulas, is in `COUNTERS.md`.

mod derived;
mod name;
mod print;
mod prometheus;
mod registry;
mod set;
mod value;

pub use print::CounterFormat;
pub(crate) use print::{PrintOptions, Printer, list_counters};
pub use prometheus::MetricsServer;
pub use set::{CounterError, CounterSet};
pub use value::{CounterKind, CounterValue, Histogram};
