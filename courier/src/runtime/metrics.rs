//! [`Metrics`]: what the counters room reads of a locality, through one
//! handle, so that counters never reach into the locality's fields
//! (tokio's `Handle::metrics()` is the model). Every reading is a plain
//! value or a shared reference to a source that counts on its own.

use std::time::Duration;

use super::locality::Locality;
use super::{Runtime, Traffic};
use crate::adapt::Calibration;
use crate::aggregate::Aggregator;
use crate::ids::LocalityId;
use crate::sched::{Perf, StatsSnapshot};

/// The raw readings of one locality.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Metrics<'a> {
    locality: &'a Locality,
}

impl Runtime {
    /// The raw readings of the locality this handle belongs to.
    pub(crate) fn metrics(&self) -> Metrics<'_> {
        Metrics {
            locality: self.inner(),
        }
    }
}

impl<'a> Metrics<'a> {
    /// Which locality.
    pub(crate) fn here(self) -> LocalityId {
        self.locality.here
    }

    /// Time since the locality started.
    pub(crate) fn uptime(self) -> Duration {
        self.locality.started.elapsed()
    }

    /// The workers' time accounting and task counts, as last published.
    pub(crate) fn scheduler(self) -> StatsSnapshot {
        self.locality.sched.snapshot()
    }

    /// The workers' hardware and kernel event counters.
    pub(crate) fn perf(self) -> &'a Perf {
        &self.locality.sched.perf
    }

    /// Parcels, frames and bytes sent and received.
    pub(crate) fn traffic(self) -> &'a Traffic {
        &self.locality.traffic
    }

    /// Connections this locality's transport turned away (strangers,
    /// silent or slow handshakes, late connections), as its driver last
    /// published them.
    pub(crate) fn rejected_connections(self) -> u64 {
        self.locality.transport.rejected_connections()
    }

    /// Flow control: credit, queues, waits.
    pub(crate) fn flow(self) -> FlowReadings {
        let l = self.locality;
        let waits = &l.traffic.credit_waits;
        FlowReadings {
            window: l.windows.window() as u64,
            borrow_requests: l.windows.borrow_requests(),
            borrowed_bytes: l.windows.borrowed(),
            lent_bytes: l.ledger.lent_total(),
            pool_free: l.ledger.pool_free() as u64,
            queued_bytes: l.windows.queued_bytes() as u64,
            outstanding_bytes: l.windows.outstanding_bytes() as u64,
            frames_queued: l.windows.frames_queued(),
            credits_received: l.windows.credits_received(),
            credits_sent: l.ledger.returns(),
            held_bytes: l.ledger.held_bytes() as u64,
            inbox: l.inbox.len() as u64,
            waits: waits.count.load(std::sync::atomic::Ordering::Relaxed),
            wait_ns: waits.ns.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// Posts of this locality that failed where they ran, of the action in
    /// registry slot `slot` or of all.
    pub(crate) fn failed_posts(self, slot: Option<usize>) -> u64 {
        self.locality.post_failures.failed(slot)
    }

    /// Decisions of the adaptive-coalescing tuners of this locality, for
    /// the action in registry slot `slot` or for all.
    pub(crate) fn adapt_decisions(self, slot: Option<usize>) -> u64 {
        self.locality.tuning.decisions(slot)
    }

    /// The adaptive-coalescing model's inputs last measured for the action
    /// in registry slot `slot`: (Q, S, κ).
    pub(crate) fn adapt_inputs(self, slot: usize) -> (f64, f64, f64) {
        self.locality.tuning.inputs(slot)
    }

    /// How long this locality's awaited calls took to come back in the
    /// adaptive-coalescing tuner's last epoch that measured it, in ns.
    pub(crate) fn call_latency_ns(self) -> f64 {
        self.locality.tuning.latency_ns()
    }

    /// Tasks that ran past the watchdog's threshold, ever.
    pub(crate) fn long_running_tasks(self) -> u64 {
        self.locality.watchdog.long_running()
    }

    /// What the locality's segmented calls did.
    pub(crate) fn segments(self) -> &'a crate::parcel::SegmentStats {
        &self.locality.segment_stats
    }

    /// The coalescing buffers' settings and statistics.
    pub(crate) fn coalescing(self) -> &'a Aggregator {
        &self.locality.aggregator
    }

    /// What a frame to each peer costs to send (α and β).
    pub(crate) fn calibration(self) -> &'a Calibration {
        &self.locality.calibration
    }
}

/// Flow control readings of one locality (see the `flow` room).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FlowReadings {
    /// The credit window, bytes of charge (0: off).
    pub(crate) window: u64,
    /// Requests to borrow from other localities' pools, ever.
    pub(crate) borrow_requests: u64,
    /// Bytes borrowed from them, ever.
    pub(crate) borrowed_bytes: u64,
    /// Bytes this locality's pool lent, ever.
    pub(crate) lent_bytes: u64,
    /// This locality's pool not lent now.
    pub(crate) pool_free: u64,
    /// Charge of the frames waiting for credit now.
    pub(crate) queued_bytes: u64,
    /// Charge sent and not yet given back now.
    pub(crate) outstanding_bytes: u64,
    /// Frames that waited for credit, ever.
    pub(crate) frames_queued: u64,
    /// Credit messages received, ever.
    pub(crate) credits_received: u64,
    /// Credit messages sent, ever.
    pub(crate) credits_sent: u64,
    /// Charge of received calls not yet run now.
    pub(crate) held_bytes: u64,
    /// Received runs of calls waiting in the inbox now.
    pub(crate) inbox: u64,
    /// Program sends that waited for credit, ever.
    pub(crate) waits: u64,
    /// Nanoseconds they waited, in total.
    pub(crate) wait_ns: u64,
}
