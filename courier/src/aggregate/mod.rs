//! Coalescing: parcels of one action for one destination wait in a buffer
//! and leave together as one frame.
//!
//! - `policy`: [`Coalescing`] (off, HPX [`CountPolicy`], TRAM
//!   [`BytePolicy`]) and the flush decision behind it.
//! - `buffer`: one buffer and its statistics.
//! - `timer`: the flush timer thread.
//! - `api`: the [`Runtime`](crate::Runtime) methods that change settings.
//!
//! The way of a coalesced parcel: the sender appends it to the buffer of
//! (action, destination) under that buffer's lock, encoding the arguments
//! straight into the frame being built; the policy decides whether the
//! buffer goes out now. The first parcel into an empty buffer arms the
//! flush timer, and every flush disarms it. A flushed frame is sent by the
//! thread that flushed it (the sender, or the timer thread) after the lock
//! is released. Responses to a coalesced action's calls use the responder's
//! buffer of the same action towards the caller, so results coalesce too.
//! Before a locality reports its activity to termination detection it
//! flushes every buffer, so no parcel waits for a job that looks idle.
//!
//! Parcels of a coalesced action may overtake one another (two flushes of a
//! buffer can be sent by two threads), as parcels handled by several
//! workers always could.

mod api;
mod buffer;
mod policy;
mod timer;
mod topology;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

pub(crate) use buffer::LaneStats;
pub(crate) use policy::Reason;
pub use policy::{BytePolicy, Coalescing, CountPolicy};
pub(crate) use timer::Lateness;

use buffer::Buffer;
use timer::{Epoch, FlushTimer, Key};

use crate::action::registry;
use crate::parcel::{FRAME_HEADROOM, Failure, FrameBuilder};
use crate::runtime::{Locality, LocalityId};

/// The buffers of one action, one per destination, made on first use.
#[derive(Debug)]
struct Lane {
    /// Whether any destination of this action has coalescing on: the one
    /// load an uncoalesced action pays.
    active: AtomicBool,
    /// Whether any setting of this action routes through a 2D grid.
    routed: AtomicBool,
    /// Calls of this action this locality forwarded for others.
    forwarded: AtomicU64,
    /// The setting of destinations without one of their own.
    default: Mutex<Coalescing>,
    buffers: Box<[OnceLock<Box<Mutex<Buffer>>>]>,
}

/// The coalescing buffers of one locality and their flush timer.
#[derive(Debug)]
pub(crate) struct Aggregator {
    here: LocalityId,
    max_frame_bytes: usize,
    epoch: Epoch,
    lanes: Box<[Lane]>,
    timer: FlushTimer,
}

impl Aggregator {
    /// Buffers for `count` destinations; actions marked
    /// `#[courier::action(coalescing)]` start with `default`, those in
    /// `per_action` (registry slot, setting) with theirs, the others off.
    pub(crate) fn new(
        here: LocalityId,
        count: u32,
        max_frame_bytes: usize,
        default: Coalescing,
        per_action: &[(usize, Coalescing)],
    ) -> Self {
        let epoch = Epoch::now();
        let lanes = registry()
            .entries()
            .iter()
            .enumerate()
            .map(|(slot, entry)| {
                let configured = per_action.iter().rev().find(|(s, _)| *s == slot);
                let setting = match configured {
                    Some((_, setting)) => *setting,
                    None if entry.coalescing() => default,
                    None => Coalescing::Off,
                };
                Lane {
                    active: AtomicBool::new(setting.is_on()),
                    routed: AtomicBool::new(setting.dimensions() > 1),
                    forwarded: AtomicU64::new(0),
                    default: Mutex::new(setting),
                    buffers: (0..count).map(|_| OnceLock::new()).collect(),
                }
            })
            .collect();
        Aggregator {
            here,
            max_frame_bytes,
            epoch,
            lanes,
            timer: FlushTimer::new(epoch),
        }
    }

    /// Starts the flush timer thread of `locality`.
    pub(crate) fn start_timer(&self, locality: std::sync::Weak<Locality>) -> std::io::Result<()> {
        let name = format!("courier-{}-timer", self.here.get());
        self.timer.start(name, move |key, deadline| {
            let Some(locality) = locality.upgrade() else {
                return false;
            };
            locality.aggregator.flush_due(&locality, key, deadline);
            true
        })
    }

    /// Stops the flush timer thread.
    pub(crate) fn stop_timer(&self) {
        self.timer.stop();
    }

    fn buffer(&self, slot: usize, dest: LocalityId) -> &Mutex<Buffer> {
        let lane = &self.lanes[slot];
        lane.buffers[dest.get() as usize]
            .get_or_init(|| Box::new(Mutex::new(Buffer::new(self.here, *lane.default.lock()))))
    }

    /// Offers a parcel of the action in registry `slot` for `dest`:
    /// `push` appends it to a frame. Returns `None`, without calling `push`,
    /// when the action is not coalesced towards `dest`: the caller sends it
    /// alone. Otherwise the parcel is buffered, and flushed if the policy
    /// says so; an error is the parcel's own (it could not be encoded, or
    /// its frame could not be sent).
    pub(crate) fn push(
        &self,
        locality: &Locality,
        dest: LocalityId,
        slot: usize,
        push: &mut impl FnMut(&mut FrameBuilder) -> Result<(), Failure>,
    ) -> Option<Result<(), Failure>> {
        if !self.lanes.get(slot)?.active.load(Ordering::Relaxed) {
            return None;
        }
        let mut buffer = self.buffer(slot, dest).lock();
        if !buffer.setting.is_on() {
            return None;
        }
        let mark = buffer.frame().mark();
        let before = buffer.frame_bytes();
        if let Err(failure) = push(buffer.frame()) {
            return Some(Err(failure));
        }
        let parcel_bytes = buffer.frame_bytes() - before;
        let now = self.epoch.elapsed_ns();
        let decision = buffer.pushed(parcel_bytes, now);
        let too_big = buffer.frame_bytes() - FRAME_HEADROOM > self.max_frame_bytes;
        let key = (slot as u32, dest.get());
        let (first, second) = if too_big && buffer.frame().len() > 1 {
            // The frame would exceed what the receiver accepts: the others
            // go first, the new parcel after them in a frame of its own
            // (where, too large alone, it fails for its own caller).
            let tail = buffer.split_off(mark);
            let first = buffer.take(Reason::Bytes);
            buffer.count_message(Reason::Bytes);
            (first, Some(tail))
        } else if too_big {
            // Alone and too large: fail now, for its own caller.
            (buffer.take(Reason::Bytes), None)
        } else {
            (decision.and_then(|reason| buffer.take(reason)), None)
        };
        if first.is_some() {
            if let Some(deadline) = buffer.armed.take() {
                self.timer.disarm(deadline, key);
            }
        } else if buffer.frame().len() == 1 {
            if let Some(policy) = buffer.setting.policy() {
                let deadline = now + policy.wait().as_nanos() as u64;
                buffer.armed = Some(deadline);
                self.timer.arm(deadline, key);
            }
        }
        drop(buffer);
        let mut result = Ok(());
        for frame in [first, second].into_iter().flatten() {
            let sent = locality.send_parcels(dest, frame);
            result = result.and(sent);
        }
        Some(result)
    }

    /// The timer's deadline for `key` passed: flush it if still armed for it.
    fn flush_due(&self, locality: &Locality, (slot, dest): Key, deadline: u64) {
        let dest = LocalityId::new(dest);
        let mut buffer = self.buffer(slot as usize, dest).lock();
        if buffer.armed != Some(deadline) {
            return;
        }
        buffer.armed = None;
        let flushed = buffer.take(Reason::Timer);
        drop(buffer);
        if let Some(frame) = flushed {
            // A failure means the peer is lost; its calls fail through that.
            let _ = locality.send_parcels(dest, frame);
        }
    }

    /// Flushes one buffer now, if it exists and holds parcels.
    fn flush_buffer(&self, locality: &Locality, slot: usize, dest: LocalityId, reason: Reason) {
        let Some(cell) = self.lanes[slot].buffers[dest.get() as usize].get() else {
            return;
        };
        let mut buffer = cell.lock();
        let flushed = buffer.take(reason);
        if let Some(deadline) = buffer.armed.take() {
            self.timer.disarm(deadline, (slot as u32, dest.get()));
        }
        drop(buffer);
        if let Some(frame) = flushed {
            let _ = locality.send_parcels(dest, frame);
        }
    }

    /// Flushes every buffer of this locality.
    pub(crate) fn flush_all(&self, locality: &Locality, reason: Reason) {
        for (slot, lane) in self.lanes.iter().enumerate() {
            if !lane.active.load(Ordering::Relaxed) {
                continue;
            }
            for dest in 0..lane.buffers.len() {
                self.flush_buffer(locality, slot, LocalityId::new(dest as u32), reason);
            }
        }
    }

    /// Sets the coalescing of the action in `slot` towards `dest`, or towards
    /// every destination. What the buffers hold is flushed, so the setting
    /// governs the very next parcel.
    pub(crate) fn set(
        &self,
        locality: &Locality,
        slot: usize,
        dest: Option<LocalityId>,
        setting: Coalescing,
    ) {
        let lane = &self.lanes[slot];
        let mut default = lane.default.lock();
        let dests: Vec<u32> = match dest {
            Some(d) => vec![d.get()],
            None => {
                *default = setting;
                (0..lane.buffers.len() as u32).collect()
            }
        };
        // Activate first, so that no parcel slips past a buffer being turned on.
        if setting.is_on() {
            lane.active.store(true, Ordering::Relaxed);
        }
        for d in dests {
            let d = LocalityId::new(d);
            let cell = &lane.buffers[d.get() as usize];
            if dest.is_some() {
                // Not `self.buffer`: it would take the default's lock, held here.
                cell.get_or_init(|| Box::new(Mutex::new(Buffer::new(self.here, setting))));
            }
            if let Some(buffer) = cell.get() {
                buffer.lock().setting = setting;
            }
            self.flush_buffer(locality, slot, d, Reason::Changed);
        }
        let settings: Vec<Coalescing> = std::iter::once(*default)
            .chain(
                lane.buffers
                    .iter()
                    .filter_map(OnceLock::get)
                    .map(|b| b.lock().setting),
            )
            .collect();
        lane.active
            .store(settings.iter().any(Coalescing::is_on), Ordering::Relaxed);
        lane.routed.store(
            settings.iter().any(|c| c.dimensions() > 1),
            Ordering::Relaxed,
        );
    }

    /// Where a call of the action in `slot` for `dest` goes first: `dest`,
    /// or the intermediate locality of its virtual topology.
    pub(crate) fn first_hop(&self, slot: usize, dest: LocalityId, count: u32) -> LocalityId {
        let lane = &self.lanes[slot];
        if !lane.routed.load(Ordering::Relaxed) {
            return dest;
        }
        let dimensions = self.setting(slot, dest).dimensions();
        topology::first_hop(self.here, dest, count, dimensions)
    }

    /// Counts a call of the action in `slot` forwarded for another locality.
    pub(crate) fn count_forwarded(&self, slot: usize) {
        self.lanes[slot].forwarded.fetch_add(1, Ordering::Relaxed);
    }

    /// Calls of the action in `slot` (or of every action) forwarded.
    pub(crate) fn forwarded(&self, slot: Option<usize>) -> u64 {
        match slot {
            Some(slot) => self.lanes[slot].forwarded.load(Ordering::Relaxed),
            None => self
                .lanes
                .iter()
                .map(|l| l.forwarded.load(Ordering::Relaxed))
                .sum(),
        }
    }

    /// The setting of the action in `slot` towards `dest`.
    pub(crate) fn setting(&self, slot: usize, dest: LocalityId) -> Coalescing {
        let lane = &self.lanes[slot];
        match lane.buffers[dest.get() as usize].get() {
            Some(buffer) => buffer.lock().setting,
            None => *lane.default.lock(),
        }
    }

    /// The setting of the action in `slot` for destinations without one of their own.
    pub(crate) fn default_setting(&self, slot: usize) -> Coalescing {
        *self.lanes[slot].default.lock()
    }

    /// What the buffers of the action in `slot` have done, over all destinations.
    pub(crate) fn stats(&self, slot: usize) -> LaneStats {
        let mut total = LaneStats::default();
        for buffer in self.lanes[slot].buffers.iter().filter_map(OnceLock::get) {
            total.add(&buffer.lock().stats);
        }
        total
    }

    /// What the buffers of every action have done.
    pub(crate) fn total_stats(&self) -> LaneStats {
        let mut total = LaneStats::default();
        for slot in 0..self.lanes.len() {
            total.add(&self.stats(slot));
        }
        total
    }

    /// How late the flush timer fired.
    pub(crate) fn timer_lateness(&self) -> &Lateness {
        self.timer.lateness()
    }
}
