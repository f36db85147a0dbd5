//! Performance counters: named values that show where a program's time
//! goes, queried by name on any locality, after HPX's counter framework
//! (Grubel, Kaiser, Huck and Cook, *Using Intrinsic Performance Counters to
//! Assess Efficiency in Task-based Parallel Applications*).
//!
//! ```
//! use courier::{Config, TransportKind};
//!
//! let config = Config::new().localities(2).transport(TransportKind::Inproc);
//! courier::launch(config, |rt| async move {
//!     let mut set = rt.counters(["/parcels{locality#*/total}/count/sent"])?;
//!     for value in set.evaluate(false).await? {
//!         println!("{} = {}", value.name, value.value);
//!     }
//!     Ok(())
//! })
//! .unwrap();
//! ```
//!
//! [`Runtime::counters`](crate::Runtime::counters) makes a [`CounterSet`]
//! (HPX name grammar, wildcards, `/arithmetics/...` and
//! `/statistics{...}/...` counters); [`Runtime::serve_metrics`](crate::Runtime::serve_metrics)
//! serves every counter to Prometheus; `--print-counter` prints them
//! ([`CounterFormat`]). The full list, with formulas, is in `COUNTERS.md`.
//!
//! Inside: `handle` (those two methods), `name` (the grammar), `registry`
//! (every counter type and how it is sampled from a locality's
//! `runtime::Metrics`), `set`, `value`, `derived`, `print`, `prometheus` (the exposition
//! format) and `http` (the server of `/metrics`).
//!
//! The sources are cheap enough to stay on: each worker counts in plain
//! fields and publishes them to its own cache-line-aligned atomics at
//! maintenance points (before parking and every few dozen tasks); traffic is
//! counted with relaxed atomic adds per frame. A sample is therefore at
//! most one maintenance interval behind a busy worker and exact for an idle
//! one.

mod derived;
mod handle;
mod http;
mod name;
mod print;
mod prometheus;
mod registry;
mod set;
mod value;

pub use http::MetricsServer;
pub use print::CounterFormat;
pub(crate) use print::{PrintOptions, Printer, list_counters};
pub use set::{CounterError, CounterSet};
pub use value::{CounterKind, CounterValue, Histogram};
