//! What a locality sent and received: the raw material of the `/parcels`,
//! `/messages`, `/data` and `/serialize` counters and of the send/receive
//! split of the network overhead.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::action::registry;
use crate::ids::LocalityId;

/// Call parcels of one action in one direction.
#[derive(Debug, Default)]
pub(crate) struct ActionCounts {
    pub(crate) parcels: AtomicU64,
    pub(crate) payload_bytes: AtomicU64,
}

/// Counts of one direction (sent or received).
#[derive(Debug, Default)]
pub(crate) struct Direction {
    /// Parcels (calls and responses).
    pub(crate) parcels: AtomicU64,
    /// Frames of parcels (a message on the wire).
    pub(crate) messages: AtomicU64,
    /// Bytes of arguments and results.
    pub(crate) payload_bytes: AtomicU64,
    /// Bytes of whole frames, headers included.
    pub(crate) wire_bytes: AtomicU64,
    /// Nanoseconds spent encoding and handing frames to the transport
    /// (sent), or decoding and dispatching them (received).
    pub(crate) time_ns: AtomicU64,
    /// Call parcels per action, by registry slot. Responses are not
    /// attributed to actions (they do not name theirs on the wire).
    pub(crate) per_action: Box<[ActionCounts]>,
}

/// A plain copy of a [`Direction`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DirectionCounts {
    pub(crate) parcels: u64,
    pub(crate) messages: u64,
    pub(crate) payload_bytes: u64,
    pub(crate) wire_bytes: u64,
    pub(crate) time_ns: u64,
}

impl Direction {
    /// Counts one frame. `parcels` is counted by the caller: termination
    /// detection needs it counted at a precise moment.
    pub(crate) fn add_message(&self, payload_bytes: u64, wire_bytes: u64, time_ns: u64) {
        self.messages.fetch_add(1, Ordering::Relaxed);
        self.payload_bytes
            .fetch_add(payload_bytes, Ordering::Relaxed);
        self.wire_bytes.fetch_add(wire_bytes, Ordering::Relaxed);
        self.time_ns.fetch_add(time_ns, Ordering::Relaxed);
    }

    /// Counts `parcels` call parcels of the action in registry slot `slot`
    /// with `payload_bytes` of arguments (a run of them: once per frame).
    pub(crate) fn add_calls(&self, slot: usize, parcels: u64, payload_bytes: u64) {
        if let Some(counts) = self.per_action.get(slot) {
            counts.parcels.fetch_add(parcels, Ordering::Relaxed);
            counts
                .payload_bytes
                .fetch_add(payload_bytes, Ordering::Relaxed);
        }
    }

    /// Reads the counts. Each field is exact; fields may be from slightly
    /// different moments.
    pub(crate) fn load(&self) -> DirectionCounts {
        DirectionCounts {
            parcels: self.parcels.load(Ordering::SeqCst),
            messages: self.messages.load(Ordering::Relaxed),
            payload_bytes: self.payload_bytes.load(Ordering::Relaxed),
            wire_bytes: self.wire_bytes.load(Ordering::Relaxed),
            time_ns: self.time_ns.load(Ordering::Relaxed),
        }
    }
}

/// Call parcels of each action sent to each destination, for the tuners
/// of adaptive coalescing, which tune each destination apart
/// (`runtime/tuning.rs`). Counted once a frame, as
/// [`Direction::add_calls`]; an action's row of destinations is made with
/// its first frame, so that actions never sent cost nothing.
#[derive(Debug)]
pub(crate) struct CallsTo {
    localities: usize,
    per_action: Box<[OnceLock<Box<[AtomicU64]>>]>,
}

impl CallsTo {
    /// Counts for the registered actions towards `localities` destinations.
    fn new(localities: usize) -> Self {
        CallsTo {
            localities,
            per_action: registry()
                .entries()
                .iter()
                .map(|_| OnceLock::new())
                .collect(),
        }
    }

    /// Counts `parcels` call parcels of the action in `slot` sent to `dest`.
    pub(crate) fn add(&self, slot: usize, dest: LocalityId, parcels: u64) {
        let Some(row) = self.per_action.get(slot) else {
            return;
        };
        let row = row.get_or_init(|| (0..self.localities).map(|_| AtomicU64::new(0)).collect());
        if let Some(count) = row.get(dest.index()) {
            count.fetch_add(parcels, Ordering::Relaxed);
        }
    }

    /// Call parcels of the action in `slot` sent to `dest` so far.
    pub(crate) fn get(&self, slot: usize, dest: LocalityId) -> u64 {
        self.per_action
            .get(slot)
            .and_then(OnceLock::get)
            .and_then(|row| row.get(dest.index()))
            .map_or(0, |count| count.load(Ordering::Relaxed))
    }
}

/// Both directions of one locality's traffic.
#[derive(Debug)]
pub(crate) struct Traffic {
    pub(crate) sent: Direction,
    pub(crate) received: Direction,
    /// Call parcels sent, per action and destination.
    pub(crate) calls_to: CallsTo,
    /// How long the program's sends waited for credit (flow control).
    pub(crate) credit_waits: CreditWaits,
    /// Responses (results and failures) received for this locality's
    /// calls, its calls to itself included, and the sum of the moments
    /// they arrived, in ns on the aggregator's clock (wrapping): with the
    /// awaited calls' departures (`Aggregator::departures`), the
    /// integral of the calls in flight (`runtime/tuning.rs`). One lock for
    /// both: a reading that saw a moment without its response would be
    /// off by the time since the clock's start.
    pub(crate) responses_at: parking_lot::Mutex<Arrivals>,
}

/// Responses that arrived, and the sum of their moments (wrapping).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arrivals {
    pub(crate) count: u64,
    pub(crate) sum_ns: u64,
}

impl Arrivals {
    /// Counts `count` responses that arrived at `at_ns`.
    pub(crate) fn add(&mut self, count: u64, at_ns: u64) {
        self.count += count;
        self.sum_ns = self.sum_ns.wrapping_add(count.wrapping_mul(at_ns));
    }
}

/// How long the program's sends waited for credit.
#[derive(Debug, Default)]
pub(crate) struct CreditWaits {
    /// Sends that waited.
    pub(crate) count: AtomicU64,
    /// Nanoseconds they waited (running received calls meanwhile), in total.
    pub(crate) ns: AtomicU64,
}

impl Traffic {
    /// The traffic of a locality among `localities`, none yet.
    pub(crate) fn new(localities: usize) -> Self {
        let direction = || Direction {
            per_action: registry()
                .entries()
                .iter()
                .map(|_| ActionCounts::default())
                .collect(),
            ..Direction::default()
        };
        Traffic {
            sent: direction(),
            received: direction(),
            calls_to: CallsTo::new(localities),
            credit_waits: CreditWaits::default(),
            responses_at: parking_lot::Mutex::new(Arrivals::default()),
        }
    }
}
