//! [`Metrics`]: what the counters room reads of a locality, through one
//! handle, so that counters never reach into the locality's fields
//! (tokio's `Handle::metrics()` is the model). Every reading is a plain
//! value or a shared reference to a source that counts on its own.

use std::time::Duration;

use super::locality::Locality;
use super::{Runtime, Traffic};
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

    /// The coalescing buffers' settings and statistics.
    pub(crate) fn coalescing(self) -> &'a Aggregator {
        &self.locality.aggregator
    }
}
