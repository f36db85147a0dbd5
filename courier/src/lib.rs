//! Courier: a runtime for fine-grained distributed programs.
//!
//! A Courier program is one binary run as N *localities* (processes). Each
//! locality runs a work-stealing task scheduler. Functions marked
//! [`#[courier::action]`](macro@action) can be called on any locality; a call
//! travels as a *parcel* (an active message) and its result comes back as a
//! future.
//!
//! ```
//! use courier::{Config, TransportKind};
//!
//! #[courier::action]
//! fn add(a: u64, b: u64) -> u64 {
//!     a + b
//! }
//!
//! // `TransportKind::Inproc` keeps the example in one process; the default
//! // (TCP) starts the other localities as processes of this same program.
//! let config = Config::new().localities(2).transport(TransportKind::Inproc);
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
//! The crate is a stack of rooms, one folder each; a room imports only
//! from rooms below it (`tests/layers.rs` checks every import):
//!
//! ```text
//! launch      Config, launch, launch_spmd, the rendezvous, `courier run`'s launcher
//! counters    performance counters: names, registry, sets, printers, Prometheus
//! par         fork-join with dynamic inlining (join), parallel loops (for_each,
//!             map_reduce, chunking), for_each_locality
//! runtime     Locality, the Runtime handle; send → receive → respond; credit
//!             and the inbox, segmented calls; control, termination,
//!             collectives, per-locality state, sleep
//! adapt       policies that read counters and set parameters: adaptive
//!             coalescing's model and tuner, the α-β calibration of sends
//! aggregate   coalescing: per-worker buffers, flush policies, timer, 2D grid
//! action      the Action trait, the registry, the executor of received calls
//! transport   inproc, TCP and (feature `mpi`) MPI, behind one small trait
//! flow        credit-based flow control: send windows, the receiver's ledger
//! parcel      the wire format, frames, in-place encode/decode, pending calls
//! sched       the work-stealing scheduler, JoinHandle, yield_now, fork-join on
//!             the workers, the task granularity threshold, worker perf events
//! sync · clock · ids · suggest    leaf rooms: loom-checkable synchronisation,
//!             the clock, LocalityId and ActionId, spelling suggestions
//! ```
//!
//! The way of a parcel, as files: `runtime/send.rs` (a call becomes a
//! parcel) → `aggregate/` (it waits in its worker's buffer for its
//! destination) → `transport/` (the frame travels) → `runtime/receive.rs`
//! (the frame's runs are dispatched) → `action/execute.rs` (the action
//! runs) → `runtime/respond.rs` (its result goes back) → `parcel/pending.rs`
//! (the caller's future completes).

#![deny(unsafe_code)]

extern crate self as courier;

mod action;
mod adapt;
mod aggregate;
mod clock;
pub mod counters;
mod flow;
mod ids;
mod launch;
pub mod par;
mod parcel;
mod runtime;
mod sched;
mod suggest;
mod sync;
mod transport;

pub use action::Action;
pub use aggregate::{AdaptivePolicy, BytePolicy, Coalescing, CountPolicy};
pub use courier_macros::action;
pub use flow::{DEFAULT_CREDIT_POOL, DEFAULT_CREDIT_WINDOW};
pub use ids::{ActionId, LocalityId};
#[cfg(feature = "cli")]
pub use launch::RuntimeArgs;
pub use launch::{
    Binding, Config, DEFAULT_MAX_FRAME_BYTES, MpiProgress, TransportKind, launch, launch_spmd,
    launcher, report_to_stderr,
};
pub use parcel::{
    BatchFuture, CallError, CallFuture, DEFAULT_PACK_BELOW, MAX_UNIT_SLOTS, SegmentFull,
    SegmentOptions, SegmentOutput, SegmentResults, SegmentUnit, SegmentsFuture,
};
pub use runtime::{
    BoxError, CoalescingError, DEFAULT_PEER_TIMEOUT, DEFAULT_WATCHDOG, Error, OnPostFailure,
    Runtime, Sleep, Timeout, current, sleep, try_current, with_state,
};
pub use sched::{JoinHandle, YieldNow, yield_now};

/// The names most programs need: `use courier::prelude::*;`.
pub mod prelude {
    pub use crate::{
        Action, CallError, Coalescing, Config, LocalityId, Runtime, TransportKind, action, launch,
    };
}

/// Used by the `#[courier::action]` macro and Courier's own tests; not part
/// of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::action::{ActionEntry, SlotCache};
    pub use inventory;

    #[cfg(feature = "test-hooks")]
    /// Sends `body` as a raw frame (after the transport's headroom) to
    /// `dest`, bypassing encoding and the sender's size check: for testing
    /// how a locality handles malformed input. `parcels` is how many
    /// parcels the frame carries for termination detection to count as
    /// sent (the receiver counts those it decodes).
    pub fn send_raw_frame(
        rt: &crate::Runtime,
        dest: crate::LocalityId,
        body: &[u8],
        parcels: u64,
    ) -> Result<(), String> {
        let mut frame = vec![0u8; crate::parcel::FRAME_HEADROOM];
        frame.extend_from_slice(body);
        let l = rt.inner();
        l.traffic
            .sent
            .parcels
            .fetch_add(parcels, std::sync::atomic::Ordering::SeqCst);
        l.transport.send(dest, frame).map_err(|e| e.to_string())
    }

    #[cfg(feature = "test-hooks")]
    pub use crate::parcel::FuzzFrames;

    #[cfg(feature = "test-hooks")]
    /// Hands `body` (a frame without the transport's headroom) to this
    /// locality's receive path as if it had come from `source`, and
    /// returns the protocol error it found, if any (no connection is
    /// dropped for it here: a malformed run of calls, found later by the
    /// task that runs it, still drops `source`). The parcels of an
    /// accepted frame from another locality are counted as sent here, as
    /// [`send_raw_frame`] does at a sender, so that the job can still go
    /// idle.
    pub fn receive_frame(
        rt: &crate::Runtime,
        source: crate::LocalityId,
        body: &[u8],
    ) -> Result<(), String> {
        use crate::parcel::{FrameBody, decode_frame};
        use crate::transport::Sink;
        let l = rt.inner();
        let frame = bytes::Bytes::copy_from_slice(body);
        l.frame(source, frame).map_err(|e| e.to_string())?;
        if source == l.here {
            return Ok(());
        }
        let mut parcels = 0;
        if let Ok((_, FrameBody::Parcels(mut runs))) = decode_frame(body) {
            while let Ok(Some(run)) = runs.next_run() {
                parcels += u64::from(run.count);
            }
        }
        l.traffic
            .sent
            .parcels
            .fetch_add(parcels, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    #[cfg(feature = "test-hooks")]
    /// A probe frame from `source` with `padding` bytes of padding (what
    /// the start-up calibration sends), without the transport's headroom.
    pub fn probe_frame(source: crate::LocalityId, padding: usize) -> Vec<u8> {
        use crate::parcel::{Control, FRAME_HEADROOM, Padding, encode_control};
        let control = Control::Probe {
            padding: Padding(padding),
        };
        encode_control(source, &control)[FRAME_HEADROOM..].to_vec()
    }

    #[cfg(feature = "test-hooks")]
    /// Feeds `samples` (`(wire bytes, ns)`) one by one to the α-β fit of
    /// a peer, as the send path does once per frame, and returns the α it
    /// ends with: for the `calibration` bench.
    pub fn calibration_samples(samples: &[(u64, u64)]) -> f64 {
        use crate::adapt::{Calibration, TCP_PRIOR};
        use crate::ids::LocalityId;
        let calibration = Calibration::new(LocalityId::ROOT, 2, TCP_PRIOR);
        let peer = LocalityId::new(1);
        for &(bytes, ns) in samples {
            calibration.record(peer, bytes, ns);
        }
        calibration.cost(peer).map_or(0.0, |c| c.alpha_ns)
    }

    #[cfg(feature = "test-hooks")]
    /// The frame header of a parcel frame from `source` (version, kind,
    /// source) for hand-built test frames.
    pub fn frame_header(source: crate::LocalityId) -> Vec<u8> {
        let mut header = vec![crate::parcel::WIRE_VERSION, 0];
        header.extend_from_slice(&source.get().to_le_bytes());
        header
    }
}
