//! Courier: a runtime for fine-grained distributed programs.
//!
//! A Courier program is one binary run as N *localities* (processes). Each
//! locality runs a work-stealing task scheduler. Functions marked
//! [`#[courier::action]`](macro@action) can be called on any locality; a call
//! travels as a *parcel* (an active message) and its result comes back as a
//! future.
//!
//! ```
//! use courier::{Config, Transport};
//!
//! #[courier::action]
//! fn add(a: u64, b: u64) -> u64 {
//!     a + b
//! }
//!
//! // `Transport::Inproc` keeps the example in one process; the default
//! // (TCP) starts the other localities as processes of this same program.
//! let config = Config::new().localities(2).transport(Transport::Inproc);
//! let sum = courier::launch(config, |rt| async move {
//!     let other = rt.locality(1);
//!     Ok(rt.call(other, add, (40, 2)).await?)
//! })
//! .unwrap();
//! assert_eq!(sum, 42);
//! ```
//!
//! # Map of the crate
//!
//! - [`runtime`](crate::Runtime): [`launch`], [`launch_spmd`], [`Config`], the
//!   [`Runtime`] handle. Inside: the locality (`locality`), what leaves it
//!   (`send`) and what arrives (`receive`), control messages (`control`),
//!   collectives (`collective`: barrier, all_gather, all_reduce), quiescence
//!   (`termination`), per-locality state (`state`, [`with_state`]) and
//!   timers (`time`, [`sleep`]).
//! - `action`: the [`Action`] trait, the registry of every action, and the
//!   monomorphized loop that runs a run of received calls (`execute`).
//! - `parcel`: the wire format (`wire`, `frame`), a postcard-compatible
//!   encoder and decoder that work in place (`encode`, `decode`), pending
//!   calls, [`CallFuture`], [`BatchFuture`], [`CallError`].
//! - `aggregate`: coalescing of parcels per action and destination
//!   ([`Coalescing`]): per-worker buffer sets, flush policies, flush timer,
//!   virtual-grid routing.
//! - `sched`: the work-stealing scheduler, [`JoinHandle`], [`yield_now`].
//! - `sync`: `BiasedLock` (a lock its owning worker takes
//!   with plain stores) and the process-wide fence it relies on.
//! - `counters`: performance counters, their names, output formats and the
//!   Prometheus endpoint.
//! - `transport`: in-process, TCP and (feature `mpi`) MPI transports.
//! - [`launcher`]: what `courier run` uses to start a job.

#![deny(unsafe_code)]

extern crate self as courier;

mod action;
mod aggregate;
mod counters;
pub mod launcher;
mod parcel;
mod runtime;
mod sched;
mod suggest;
mod sync;
mod transport;

pub use action::{Action, ActionId};
pub use aggregate::{BytePolicy, Coalescing, CountPolicy};
pub use counters::{
    CounterError, CounterFormat, CounterKind, CounterSet, CounterValue, Histogram, MetricsServer,
};
pub use courier_macros::action;
pub use parcel::{BatchFuture, CallError, CallFuture};
pub use runtime::{
    BoxError, Config, DEFAULT_MAX_FRAME_BYTES, Error, LocalityId, Runtime, RuntimeArgs, Sleep,
    Transport, current, launch, launch_spmd, sleep, try_current, with_state,
};
pub use sched::{JoinHandle, YieldNow, yield_now};

/// The names most programs need: `use courier::prelude::*;`.
pub mod prelude {
    pub use crate::{
        Action, CallError, Coalescing, Config, LocalityId, Runtime, Transport, action, launch,
    };
}

/// Used by the `#[courier::action]` macro and Courier's own tests; not part
/// of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::action::{ActionEntry, SlotCache};
    pub use inventory;

    /// Sends `body` as a raw frame (after the transport's headroom) to
    /// `dest`, bypassing encoding and the sender's size check: for testing
    /// how a locality handles malformed input.
    pub fn send_raw_frame(
        rt: &crate::Runtime,
        dest: crate::LocalityId,
        body: &[u8],
    ) -> Result<(), String> {
        let mut frame = vec![0u8; crate::parcel::FRAME_HEADROOM];
        frame.extend_from_slice(body);
        rt.inner().transport.send(dest, frame)
    }

    /// The frame header of a parcel frame from `source` (version, kind,
    /// source) for hand-built test frames.
    pub fn frame_header(source: crate::LocalityId) -> Vec<u8> {
        let mut header = vec![crate::parcel::WIRE_VERSION, 0];
        header.extend_from_slice(&source.get().to_le_bytes());
        header
    }
}
