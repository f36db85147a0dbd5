//! Coalescing: parcels of one action for one destination wait in a buffer
//! and leave together as one frame.
//!
//! - `policy`: [`Coalescing`] (off, HPX [`CountPolicy`], TRAM
//!   [`BytePolicy`]) and the flush decision behind it.
//! - `settings`: the setting of every action towards every destination.
//! - `set`: one worker's buffers.
//! - `buffer`: one buffer and its statistics.
//! - `timer`: the flush timer thread; `entry`: its hold on a set (one
//!   entry, and whether the set holds parcels), loom-checked.
//! - `topology`: the 2D virtual grid.
//!
//! The `Runtime` methods that change settings are in the runtime room
//! (`runtime/coalescing.rs`); this room sends through the small
//! [`Outbox`] trait, not through the locality.
//!
//! The way of a coalesced parcel: the sender appends it to *its worker's*
//! buffer of (action, run kind, destination), encoding the arguments
//! straight into the frame being built; the policy decides whether the
//! buffer goes out now. A set has at most one timer entry, made by the
//! first parcel into an empty buffer when the set has none; an entry that
//! finds its set emptied ends there (or, for a worker's set in use, renews
//! itself every millisecond, so that bursts do not wake the timer thread
//! each time). A worker about to run out of
//! tasks flushes everything it holds, so a lone call never waits when there
//! is nothing else to do. A flushed frame is handed to the [`Outbox`] by the
//! thread that flushed it, after the set's lock is released; a long stream
//! of sends makes network progress between its frames. Results of calls
//! coalesce in the responder's buffers of the same action, as calls do.
//! Before a locality reports its activity to termination detection it
//! flushes every buffer, so no parcel waits for a job that looks idle.
//!
//! Parcels may overtake one another (two workers fill two buffers for the
//! same destination), as parcels handled by several workers always could.

mod answer;
mod buffer;
mod entry;
mod policy;
mod set;
mod settings;
mod timer;
mod topology;
mod wakes;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) use answer::{AnsweredRun, Answering, PATIENT_WAIT_US, sent_when_done};
pub(crate) use buffer::LaneStats;
pub(crate) use policy::Reason;
pub use policy::{AdaptivePolicy, BytePolicy, Coalescing, CountPolicy};
pub(crate) use set::MIN_SPLIT_PARCELS;
pub(crate) use timer::{Key, Lateness};

use buffer::Buffer;
use entry::Fired;
use set::{BufferSet, Buffers, CHECK_EVERY, Locked, lane, lane_parts};
use settings::{Settings, Split};
use timer::{Epoch, FlushTimer};

use crate::action::registry;
use crate::ids::ActionId;
use crate::ids::LocalityId;
use crate::parcel::{EncodeError, FRAME_HEADROOM, Failure, FrameBuilder, FrameMark, RunKind};
use crate::sched::{Scheduler, WAKE_WATCH_NS, current_poll};

/// Where flushed frames go: the locality's send path.
pub(crate) trait Outbox: Send + Sync {
    /// Sends a frame of parcels to `dest` (this locality included). An
    /// error is the frame's: its parcels' callers learn it.
    fn send_frame(&self, dest: LocalityId, frame: FrameBuilder) -> Result<(), Failure>;

    /// Makes what network progress is possible without blocking: called
    /// between the frames of a long stream of sends, so that the stream
    /// does not starve the locality's receiving.
    fn progress(&self);
}

/// The coalescing buffers of one locality and their flush timer.
#[derive(Debug)]
pub(crate) struct Aggregator {
    here: LocalityId,
    count: u32,
    max_frame_bytes: usize,
    epoch: Epoch,
    settings: Settings,
    /// One set per worker, and a last one shared by every other thread.
    sets: Box<[BufferSet]>,
    sched: Arc<Scheduler>,
    /// Calls of each action this locality forwarded for others.
    forwarded: Box<[AtomicU64]>,
    timer: FlushTimer,
    bursts: Bursts,
    /// α over the cost of a call on a burst's way (`f64` bits; 0: not
    /// known yet, bursts leave whole): what sizes the parts a burst of
    /// awaited calls is split into (see [`Aggregator::split_parcels`]).
    /// Set by adaptive coalescing's tuning loop.
    split_ratio: AtomicU64,
    /// Held while a setting changes, from the table to the buffers, so
    /// that the program's changes and the tuners' do not interleave (the
    /// table saying one setting and the buffers holding another). Taken
    /// before the table and the buffer sets; a parcel never takes it.
    /// The last field: placed after `settings`, among the fields every
    /// push reads, it cost histo 4 % (BENCHMARKS.md, issue #15,
    /// eighteenth part).
    changing: parking_lot::Mutex<()>,
}

/// The awaited calls the workers issue between two moments they run out
/// of tasks: a worker with nothing left to do waits for what it issued,
/// so a burst is what its callers await together (a call awaited alone:
/// 1; 500 calls issued, then awaited: 500; a steady stream of calls each
/// awaited by a task of its own: 1 per gap between them). Unlike the
/// calls in flight, a burst does not grow when coalescing delays the
/// calls (calls issued every 20 µs and held 200 µs are ten in flight,
/// and a tuner that took that for tolerance held them longer still).
/// Counted at each idle point as n and n², so that `Σn² / Σn` is the
/// burst a call is part of. A worker whose task is still issuing calls
/// in one poll (a batch of 400,000) has a burst open: the tuner counts
/// it as it stands ([`Aggregator::open_bursts`]), at least that many
/// calls awaited together. Callers off the workers have no idle point:
/// the tuner falls back to the calls in flight for them
/// (`runtime/tuning.rs`).
#[derive(Debug, Default)]
struct Bursts {
    sum: AtomicU64,
    squares: AtomicU64,
}

/// Parcels a task issues in one poll from which on the parcels of an
/// adaptive action whose setting is off are coalesced all the same (see
/// `Aggregator::escape_off`): the task issued them together, and they
/// leave when the worker runs out of tasks. A call awaited alone, or a
/// few together, stays a message of its own; so do calls issued one a
/// poll by a busy worker (a first version counted the calls since the
/// worker last ran out of tasks, and held some of a paced stream's calls
/// behind the worker's other tasks). A guess, tune me.
const BURST_CALLS: u64 = 16;

/// The frames a flush took, to send once the set's lock is released.
type Taken = Vec<(LocalityId, FrameBuilder)>;

/// How long after a buffer's deadline the timer thread flushes it when the
/// buffer belongs to a worker: the worker itself flushes due buffers as it
/// pushes (every [`CHECK_EVERY`] parcels) or when it runs out of tasks, so
/// the timer acts only for a worker busy with something else (a long task).
/// A guess, tune me.
const TIMER_GRACE_NS: u64 = 20_000;

/// A worker that looked at the clock this recently is pushing: the timer
/// leaves its set to it. Several times what [`CHECK_EVERY`] parcels take.
const ACTIVE_NS: u64 = 50_000;

/// When the timer left a set to its pushing worker, it looks again this
/// much later: the longest a parcel can wait beyond its deadline when its
/// worker stops pushing for a long task right after the timer looked. A
/// guess, tune me.
const LIVENESS_NS: u64 = 1_000_000;

/// A worker's set whose buffers were armed this recently keeps a timer
/// entry, renewed every [`LIVENESS_NS`], even while it is empty: its next
/// parcel then finds an entry and does not wake the timer thread. Without
/// it, traffic in bursts shorter than the interval (a ping-pong) woke the
/// timer for every parcel and doubled the round trip on a busy machine.
const KEEP_ENTRY_NS: u64 = 10 * LIVENESS_NS;

fn encode_failure(e: EncodeError) -> Failure {
    Failure::EncodeArgs(e.to_string())
}

impl Aggregator {
    /// Buffers for `count` destinations and the workers of `sched`; actions
    /// that coalesce by default start with `default`, those in `per_action`
    /// (registry slot, setting) with theirs, the others off.
    pub(crate) fn new(
        here: LocalityId,
        count: u32,
        max_frame_bytes: usize,
        sched: Arc<Scheduler>,
        default: Coalescing,
        per_action: &[(usize, Coalescing)],
    ) -> Self {
        let epoch = Epoch::now();
        let entries = registry().entries();
        let settings = Settings::new(entries.iter().enumerate().map(|(slot, entry)| {
            match per_action.iter().rev().find(|(s, _)| *s == slot) {
                Some((_, setting)) => *setting,
                None if entry.coalescing() => default,
                None => Coalescing::Off,
            }
        }));
        let lanes = lane(entries.len(), RunKind::Calls);
        let workers = sched.workers();
        let sets = (0..=workers)
            .map(|set| BufferSet::new(lanes, count as usize, set < workers))
            .collect();
        Aggregator {
            here,
            count,
            max_frame_bytes,
            epoch,
            settings,
            changing: parking_lot::Mutex::new(()),
            sets,
            sched,
            forwarded: entries.iter().map(|_| AtomicU64::new(0)).collect(),
            timer: FlushTimer::new(epoch, workers),
            bursts: Bursts::default(),
            split_ratio: AtomicU64::new(0),
        }
    }

    /// Starts the flush timer thread: `fire(key, deadline)` is called when
    /// a deadline passes (it calls [`flush_due`](Self::flush_due)) and
    /// returns false once the locality is gone.
    pub(crate) fn start_timer(
        &self,
        fire: impl Fn(Key, u64) -> bool + Send + 'static,
    ) -> std::io::Result<()> {
        let name = format!("courier-{}-timer", self.here.get());
        self.timer.start(name, fire)
    }

    /// Stops the flush timer thread.
    pub(crate) fn stop_timer(&self) {
        self.timer.stop();
    }

    /// The awaited calls that left this locality's buffers, ever, and the
    /// sum of the moments they were issued (wrapping; see
    /// [`Departures`](buffer::Departures)), read without taking the sets.
    pub(crate) fn departures(&self) -> (u64, u64) {
        self.sets.iter().fold((0, 0), |(calls, sum), set| {
            let (c, s) = set.departures.load();
            (calls + c, sum.wrapping_add(s))
        })
    }

    /// Calls whose result someone waits for that this locality sent
    /// through its buffers, ever (calls to itself included), of the action
    /// in registry slot `slot`.
    pub(crate) fn awaited_calls(&self, slot: usize) -> u64 {
        self.sets
            .iter()
            .map(|s| s.awaited.get(slot).map_or(0, |c| c.load(Ordering::Relaxed)))
            .sum()
    }

    /// The set of the calling thread: its worker's, or the shared one.
    #[inline]
    fn my_set(&self) -> (usize, bool) {
        match self.sched.current_worker() {
            Some(index) => (index, true),
            None => (self.sets.len() - 1, false),
        }
    }

    /// Sends a parcel of `kind` of the action `action` (registry slot
    /// `slot`) to `dest`: `encode` appends it to a frame; `awaited`: a
    /// call of this locality's whose result someone waits for. It waits in the
    /// calling worker's buffer unless the setting is off or the policy
    /// flushes it. An error is the parcel's own: it did not encode, or a
    /// frame it went out in could not be sent.
    // The hottest function of a send: its arguments stay in registers
    // rather than in a struct built per parcel.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push(
        &self,
        outbox: &dyn Outbox,
        kind: RunKind,
        slot: usize,
        action: ActionId,
        dest: LocalityId,
        awaited: bool,
        encode: impl FnOnce(&mut FrameBuilder) -> Result<(), EncodeError>,
    ) -> Result<(), Failure> {
        let (set_index, on_worker) = self.my_set();
        if awaited && let Some(count) = self.sets[set_index].awaited.get(slot) {
            // A call of this locality's whose result someone waits for:
            // adaptive coalescing's share of awaited calls, and the calls
            // a worker awaits together (`Bursts`). An encoding error after
            // this leaves one too many: it only makes the tuner think more
            // calls overlap.
            count.fetch_add(1, Ordering::Relaxed);
            if on_worker {
                self.sets[set_index].note_awaited_poll(current_poll());
            }
        }
        let lane = lane(slot, kind);
        let mut buffers = self.lock_set(set_index, on_worker);
        let buffer = buffers.get_or_make(lane, dest.index(), || {
            let mut frame = FrameBuilder::with_capacity(self.here, kind, action, 1024);
            frame.set_responses_wait(
                kind == RunKind::Calls && self.settings.responses_wait(slot, dest),
            );
            Buffer::new(
                frame,
                self.settings.get(slot, dest),
                self.max_frame_bytes,
                Arc::clone(&self.sets[set_index].departures),
            )
        });
        let was_empty = buffer.frame.is_empty();
        let mark = buffer.frame.mark();
        let before = buffer.frame.byte_len();
        if !was_empty {
            // The common case: the parcel joins others and stays.
            encode(&mut buffer.frame).map_err(encode_failure)?;
            buffer.awaited += u32::from(awaited);
            let parcel_bytes = buffer.frame.byte_len() - before;
            if buffer.pushed_fast(parcel_bytes) {
                // The common case ends here: the set's worker looks at the
                // clock only every CHECK_EVERY parcels.
                buffers.pushes = buffers.pushes.wrapping_add(1);
                if !on_worker || buffers.pushes % CHECK_EVERY != 0 {
                    return Ok(());
                }
                return self.check_due(outbox, buffers, set_index, dest);
            }
            return self.push_slow(
                outbox,
                buffers,
                set_index,
                on_worker,
                lane,
                dest,
                mark,
                parcel_bytes,
                false,
            );
        }
        let patient = Self::responses(lane, dest, answer::patient);
        if !buffer.setting().is_on() || buffer.escaped() || patient {
            self.escape_or_restore(&mut buffers, on_worker, slot, lane, dest, patient);
        }
        let buffer = buffers
            .get_mut(lane, dest.index())
            .unwrap_or_else(|| unreachable!("the buffer was just made"));
        // The response to a run of one call leaves at once, alone, without
        // the buffer (`answer.rs`).
        let alone = Self::responses(lane, dest, answer::answering_alone);
        if alone || !buffer.setting().is_on() {
            if alone && buffer.setting().is_on() {
                // Where the setting would have held it: a parcel past
                // the buffer, as sparse traffic's.
                buffer.sent_alone(Reason::Bypass, self.epoch.elapsed_ns());
            }
            if awaited {
                // Leaves now, alone (an encoding error below leaves it
                // counted, as the awaited calls above).
                buffer.departures.leave(1, self.epoch.elapsed_ns());
            }
            drop(buffers);
            let mut frame = FrameBuilder::new(self.here, kind, action);
            encode(&mut frame).map_err(encode_failure)?;
            return outbox.send_frame(dest, frame);
        }
        encode(&mut buffer.frame).map_err(encode_failure)?;
        buffer.awaited += u32::from(awaited);
        let cut = match (awaited, on_worker, kind) {
            (true, true, RunKind::Calls) => self.split_parcels(set_index, slot),
            _ => u32::MAX,
        };
        buffer.cut_at(cut);
        let parcel_bytes = buffer.frame.byte_len() - before;
        self.push_slow(
            outbox,
            buffers,
            set_index,
            on_worker,
            lane,
            dest,
            mark,
            parcel_bytes,
            true,
        )
    }

    /// Holds the parcels into the empty buffer of `lane` to `dest` under a
    /// count policy of their own where they are patient responses
    /// ([`AdaptivePolicy::patient`]) or come together under off
    /// ([`escape_off`](Self::escape_off)), and under the setting in force
    /// otherwise (ending an escape). Out of line: the push path's common
    /// case never comes here.
    #[inline(never)]
    fn escape_or_restore(
        &self,
        buffers: &mut Locked<'_>,
        on_worker: bool,
        slot: usize,
        lane: usize,
        dest: LocalityId,
        patient: bool,
    ) {
        let in_force = match buffers.get_mut(lane, dest.index()) {
            Some(buffer) => buffer.setting_in_force(),
            None => return,
        };
        let escape = if patient {
            self.settings
                .adaptive(slot)
                .map(|bounds| bounds.patient(in_force))
        } else if in_force.is_on() {
            None
        } else {
            self.escape_off(buffers, on_worker, lane, dest)
        };
        let Some(buffer) = buffers.get_mut(lane, dest.index()) else {
            return;
        };
        match escape {
            Some(policy) if !buffer.escaped() || buffer.setting() != Coalescing::Count(policy) => {
                buffer.escape(policy, self.epoch.elapsed_ns())
            }
            Some(_) => {}
            None => buffer.restore(),
        }
    }

    /// The count policy under which the parcels into an empty buffer of an
    /// adaptive action whose setting is off (its tuner's choice for calls
    /// awaited one at a time) are held all the same, if they come
    /// together: responses to a run of more than one call being answered
    /// (those of a whole run leave when it is done, those of a piece of a
    /// run split between tasks with the count, the timer or the idle
    /// worker), or the calls and posts one poll of a task issues from the
    /// [`BURST_CALLS`]-th on (they leave when the worker runs out of
    /// tasks, or when the count or the timer says; once they have left,
    /// the next poll's first calls go alone again). The tuner judges
    /// traffic an epoch (10 ms) at a time and confirms a change of
    /// awaited calls over three: a batch of calls after calls awaited one
    /// at a time ran its first epochs a message a call, at a thirteenth
    /// of the speed (BENCHMARKS.md, issue #15, ninth part). `None` keeps
    /// the parcel alone, as off says.
    fn escape_off(
        &self,
        buffers: &mut Locked<'_>,
        on_worker: bool,
        lane: usize,
        dest: LocalityId,
    ) -> Option<CountPolicy> {
        let bounds = self.settings.adaptive(lane_parts(lane).0)?;
        let together = Self::responses(lane, dest, answer::answering_many)
            || (on_worker && buffers.count_in_poll(current_poll()) >= BURST_CALLS);
        together.then(|| bounds.start())
    }

    /// The calls at which a frame of the awaited calls the worker of
    /// `set` issues to the action in `slot` leaves, a part of the worker's
    /// burst split so that the destination starts on the first part while
    /// the worker issues the rest, and the responses to it come back
    /// meanwhile (`u32::MAX`: whole, at the setting's count; the action's
    /// `AdaptivePolicy::split` may set it). A burst of `n` calls sent in
    /// `k` parts takes about `n·c/k` (issuing the first part, at a cost
    /// `c` a call) plus the destination's work on all `n`, plus `k·2α`
    /// (a part's messages on the way: its calls', and its responses' back):
    /// least at `k = √(n·c/2α)`, parts of `√(n·2α/c)` calls
    /// (`set::split_parcels`, with `2α/c` the tuning loop's,
    /// [`set_split_ratio`](Self::set_split_ratio)). The burst is
    /// the worker's last one (between its last two idle points) or the one
    /// it has open, whichever is larger: a batch of 400,000 calls after
    /// bursts of 500 begins in parts of 250, which grow with it to a
    /// few thousand; a worker kept busy by tasks that each await a call
    /// counts its calls between idle points as one burst, and sends them
    /// in parts of its square root (BENCHMARKS.md, issue #15, fifteenth
    /// part, has what splitting measured).
    fn split_parcels(&self, set: usize, slot: usize) -> u32 {
        match self.settings.split(slot) {
            Split::Whole => u32::MAX,
            Split::Parcels(parcels) => parcels,
            Split::Model => {
                let ratio = f64::from_bits(self.split_ratio.load(Ordering::Relaxed));
                self.sets[set].split_parcels(ratio)
            }
        }
    }

    /// Sets `2α/c`, the cost of a part's messages (one each way) over that
    /// of a call on a burst's way, which sizes the parts a burst of
    /// awaited calls is split into (see
    /// [`split_parcels`](Self::split_parcels)); a ratio not above 0, or not
    /// a number, sends bursts whole (`set::split_parcels` judges it).
    pub(crate) fn set_split_ratio(&self, ratio: f64) {
        self.split_ratio.store(ratio.to_bits(), Ordering::Relaxed);
    }

    /// The rest of [`push`](Self::push) when the policy must decide: the
    /// first parcel of a frame, or one that may fill the buffer.
    #[allow(clippy::too_many_arguments)]
    fn push_slow(
        &self,
        outbox: &dyn Outbox,
        mut buffers: Locked<'_>,
        set_index: usize,
        on_worker: bool,
        lane: usize,
        dest: LocalityId,
        mark: FrameMark,
        parcel_bytes: usize,
        was_empty: bool,
    ) -> Result<(), Failure> {
        let buffer = buffers
            .get_mut(lane, dest.index())
            .unwrap_or_else(|| unreachable!("the buffer was just pushed to"));
        let setting = buffer.setting();
        let policy = setting
            .policy()
            .unwrap_or_else(|| unreachable!("an off buffer holds nothing"));
        let now = was_empty.then(|| self.epoch.elapsed_ns());
        // The responses to a run of more than one call came together and
        // leave together: the sparse bypass would send the first of them
        // alone, a message more a run (BENCHMARKS.md, issue #15,
        // seventeenth part).
        let together = Self::responses(lane, dest, answer::answering_many);
        let decision = buffer.pushed(policy, parcel_bytes, now, together);
        let too_big = buffer.frame.byte_len() - FRAME_HEADROOM > self.max_frame_bytes;
        let mut taken: Taken = Vec::new();
        if too_big || decision.is_some() {
            let now = self.epoch.elapsed_ns();
            if too_big && buffer.frame.len() > 1 {
                // The frame would exceed what the receiver accepts: the
                // others go first, the new parcel after them in a frame of
                // its own (where, too large alone, it fails for its caller).
                let tail = buffer.frame.split_off(mark);
                taken.extend(buffer.take(Reason::Bytes, now).map(|f| (dest, f)));
                buffer.count_message(Reason::Bytes);
                taken.push((dest, tail));
            } else {
                let reason = decision.unwrap_or(Reason::Bytes);
                taken.extend(buffer.take(reason, now).map(|f| (dest, f)));
            }
            buffer.armed = None;
        } else if let Some(now) = now
            && !Self::responses(lane, dest, answer::answering)
        {
            let deadline = now + policy.wait().as_nanos() as u64;
            buffer.armed = Some(deadline);
            buffers.list(lane, dest.index());
            if on_worker
                && self.sched.workers() == 1
                && Self::responses(lane, dest, answer::in_train)
            {
                // A response held for a train on a locality of one
                // worker: that worker runs the train's last run, which
                // sends it (or runs out of tasks first, or finds it due as
                // it pushes), so the timer gets no entry. Renewed by the
                // trains of a paced stream, the entry woke the timer
                // thread every millisecond, each time taking the worker's
                // core (BENCHMARKS.md, issue #15, twenty-sixth part).
                buffers.earliest = buffers.earliest.min(deadline);
            } else {
                self.arm_set(set_index, &mut buffers, deadline);
            }
        }
        buffers.pushes = buffers.pushes.wrapping_add(1);
        self.after_push(outbox, buffers, set_index, on_worker, dest, taken)
    }

    /// Whether `lane` to `dest` holds responses, to the run of calls this
    /// thread is handling, of which `question` (asked of the action's
    /// slot and `dest`) says yes: one of `answer.rs`'s, such as
    /// [`answer::answering`] (they leave when the run is done, without the
    /// timer) or [`answer::patient`] (they wait under the patient policy).
    #[inline]
    fn responses(lane: usize, dest: LocalityId, question: fn(usize, LocalityId) -> bool) -> bool {
        let (slot, kind) = lane_parts(lane);
        kind == RunKind::Responses && question(slot, dest)
    }

    /// Every [`CHECK_EVERY`]-th parcel of a worker that stays in its
    /// buffer: flushes what is due.
    #[cold]
    fn check_due(
        &self,
        outbox: &dyn Outbox,
        buffers: Locked<'_>,
        set_index: usize,
        dest: LocalityId,
    ) -> Result<(), Failure> {
        self.after_push(outbox, buffers, set_index, true, dest, Vec::new())
    }

    /// Ends a push (counted in `buffers.pushes` already): looks at the
    /// clock every [`CHECK_EVERY`] parcels for due buffers, releases the
    /// set, sends what was taken.
    fn after_push(
        &self,
        outbox: &dyn Outbox,
        mut buffers: Locked<'_>,
        set_index: usize,
        on_worker: bool,
        dest: LocalityId,
        mut taken: Taken,
    ) -> Result<(), Failure> {
        if taken.is_empty() && (!on_worker || buffers.pushes % CHECK_EVERY != 0) {
            return Ok(());
        }
        if on_worker && buffers.pushes % CHECK_EVERY == 0 {
            // The owner flushes what is due itself, long before the timer
            // thread would (see `arm_set`).
            let now = self.epoch.elapsed_ns();
            self.sets[set_index]
                .checked_ns
                .store(now, Ordering::Relaxed);
            if now >= buffers.earliest {
                self.take_due(&mut buffers, now, &mut taken);
            }
        }
        drop(buffers);
        let sent = !taken.is_empty();
        let mut result = Ok(());
        for (to, frame) in taken {
            let outcome = outbox.send_frame(to, frame);
            if to == dest {
                result = result.and(outcome);
            }
        }
        if sent && on_worker {
            outbox.progress();
        }
        result
    }

    /// Makes sure the timer will look at set `set`: by `deadline` (plus
    /// the grace a worker's set gets) if the set has no timer entry yet.
    /// A set has one entry at a time, so a stream of frames costs the timer
    /// nothing: its worker flushes its due buffers itself as it pushes,
    /// and the timer only catches a worker that stopped pushing (a long
    /// task), at its entry: by the deadline, or [`LIVENESS_NS`] after it
    /// last saw the worker pushing.
    fn arm_set(&self, set: usize, buffers: &mut Buffers, deadline: u64) {
        buffers.earliest = buffers.earliest.min(deadline);
        // Before the entry is looked at: a timer entry that fires between
        // the two sees the set holding (see `flush_due`).
        self.sets[set].timer.hold();
        self.sets[set].armed_ns.store(deadline, Ordering::Relaxed);
        let grace = if self.is_worker_set(set) {
            TIMER_GRACE_NS
        } else {
            0
        };
        self.arm_entry(set, deadline + grace);
    }

    /// Gives set `set` a timer entry at `at` if it has none.
    fn arm_entry(&self, set: usize, at: u64) {
        if self.sets[set].timer.claim(at) {
            let precise = !self.is_worker_set(set);
            self.timer.arm(
                at,
                Key {
                    set: set as u32,
                    precise,
                },
            );
        }
    }

    fn is_worker_set(&self, set: usize) -> bool {
        set + 1 < self.sets.len()
    }

    /// Takes every listed buffer of the set whose deadline passed by `now`.
    fn take_due(&self, buffers: &mut Buffers, now: u64, taken: &mut Taken) {
        for (lane, dest) in buffers.take_due(now) {
            if let Some(buffer) = buffers.get_mut(lane as usize, dest as usize) {
                buffer.armed = None;
                let to = LocalityId::new(dest);
                taken.extend(buffer.take(Reason::Timer, now).map(|f| (to, f)));
            }
        }
    }

    /// Takes the frame of one buffer, if it holds parcels.
    fn take(
        buffers: &mut Buffers,
        lane: usize,
        dest: usize,
        reason: Reason,
        now: u64,
        taken: &mut Taken,
    ) {
        let Some(buffer) = buffers.get_mut(lane, dest) else {
            return;
        };
        buffer.armed = None;
        if let Some(frame) = buffer.take(reason, now) {
            taken.push((LocalityId::new(dest as u32), frame));
        }
    }

    /// Sends what a flush took.
    fn send_taken(outbox: &dyn Outbox, taken: Taken) {
        for (dest, frame) in taken {
            // A failure means `dest` is lost; its calls fail through that.
            let _ = outbox.send_frame(dest, frame);
        }
    }

    /// The timer's entry `deadline` for the set of `key` came: flushes the
    /// set's due buffers and renews the entry for its next deadline. A set
    /// whose worker is pushing (it looked at the clock within
    /// [`ACTIVE_NS`]) is left to the worker, and looked at again after
    /// [`LIVENESS_NS`]: taking the set from another thread is what the
    /// worker's cheap lock makes dear.
    pub(crate) fn flush_due(&self, outbox: &dyn Outbox, key: Key, deadline: u64) {
        let index = key.set as usize;
        let set = &self.sets[index];
        let fired = set.timer.fire(deadline);
        if fired == Fired::Stale {
            return; // the set has another entry
        }
        // A set found idle gets a new entry from its next parcel, which
        // finds no entry (see `entry.rs`).
        let now = self.epoch.elapsed_ns();
        if fired == Fired::Idle {
            if self.is_worker_set(index)
                && now
                    < set
                        .armed_ns
                        .load(Ordering::Relaxed)
                        .saturating_add(KEEP_ENTRY_NS)
            {
                self.arm_entry(index, now + LIVENESS_NS);
            }
            return;
        }
        if self.is_worker_set(index)
            && now.saturating_sub(set.checked_ns.load(Ordering::Relaxed)) < ACTIVE_NS
        {
            self.arm_entry(index, now + LIVENESS_NS);
            return;
        }
        let mut taken = Vec::new();
        {
            let mut buffers = set.lock();
            if now >= buffers.earliest {
                self.take_due(&mut buffers, now, &mut taken);
            }
            if buffers.earliest != u64::MAX {
                let next = buffers.earliest;
                self.arm_set(index, &mut buffers, next);
            } else {
                set.timer.release();
            }
        }
        Self::send_taken(outbox, taken);
    }

    /// Locks set `set`: as its worker when `as_worker` (then `set` must
    /// come from [`my_set`](Self::my_set) on the calling thread).
    #[inline(always)]
    fn lock_set(&self, set: usize, as_worker: bool) -> Locked<'_> {
        if as_worker {
            // SAFETY: `my_set` gave this thread `set` as its worker's own:
            // set `i` goes only to the thread that is worker `i` of this
            // locality's scheduler, so one thread locks it this way.
            #[allow(unsafe_code)]
            unsafe {
                self.sets[set].lock_as_worker()
            }
        } else {
            self.sets[set].lock()
        }
    }

    /// Flushes every buffer of set `set` that holds parcels; returns
    /// whether any did.
    fn flush_set(&self, outbox: &dyn Outbox, set: usize, reason: Reason) -> bool {
        let mut taken = Vec::new();
        {
            let mut buffers = self.lock_set(set, self.my_set() == (set, true));
            let now = self.epoch.elapsed_ns();
            for (lane, dest) in buffers.take_listed() {
                Self::take(
                    &mut buffers,
                    lane as usize,
                    dest as usize,
                    reason,
                    now,
                    &mut taken,
                );
            }
            // Empty now (a buffer with parcels is listed): its timer entry,
            // if any, ends without taking the set.
            self.sets[set].timer.release();
        }
        let any = !taken.is_empty();
        Self::send_taken(outbox, taken);
        any
    }

    /// Flushes the buffers of the calling worker: it is about to run out
    /// of tasks. Returns whether it sent anything.
    pub(crate) fn flush_idle_worker(&self, outbox: &dyn Outbox) -> bool {
        match self.my_set() {
            (set, true) => {
                self.note_idle(set);
                self.flush_set(outbox, set, Reason::Idle)
            }
            _ => false,
        }
    }

    /// Counts the awaited calls the worker of `set` issued since it last
    /// ran out of tasks (see [`Bursts`]).
    fn note_idle(&self, set: usize) {
        let set = &self.sets[set];
        let total = set.awaited_total();
        let issued = total.wrapping_sub(set.idle_mark.swap(total, Ordering::Relaxed));
        if issued > 0 {
            set.last_burst.store(issued, Ordering::Relaxed);
            self.bursts.sum.fetch_add(issued, Ordering::Relaxed);
            self.bursts
                .squares
                .fetch_add(issued.saturating_mul(issued), Ordering::Relaxed);
        }
    }

    /// (Σn, Σn²) over the bursts of awaited calls so far (see [`Bursts`]).
    pub(crate) fn bursts(&self) -> (u64, u64) {
        (
            self.bursts.sum.load(Ordering::Relaxed),
            self.bursts.squares.load(Ordering::Relaxed),
        )
    }

    /// (Σn, Σn²) over the bursts the workers have open: the awaited calls
    /// each issued in its current poll, if it has not run out of tasks
    /// since (see [`Bursts`] and `set::open_burst`). Read apart from
    /// [`bursts`](Self::bursts): a burst that ends between the two reads
    /// is counted in both or, at the next reading, once.
    pub(crate) fn open_bursts(&self) -> (u64, u64) {
        (0..self.sets.len())
            .filter(|&set| self.is_worker_set(set))
            .map(|set| self.sets[set].open_burst())
            .fold((0, 0), |(sum, squares), open| {
                (
                    sum.saturating_add(open),
                    squares.saturating_add(open.saturating_mul(open)),
                )
            })
    }

    /// Sends the responses of the action in `slot` to `dest` that the
    /// calling thread's buffers hold (`Reason::Answered`): the run of
    /// calls they answer was handled (see `answer.rs`).
    pub(crate) fn flush_responses(&self, outbox: &dyn Outbox, slot: usize, dest: LocalityId) {
        let (set, on_worker) = self.my_set();
        let mut taken = Vec::new();
        {
            let mut buffers = self.lock_set(set, on_worker);
            let lane = lane(slot, RunKind::Responses);
            if buffers
                .get_mut(lane, dest.index())
                .is_none_or(|buffer| buffer.frame.is_empty())
            {
                return;
            }
            let now = self.epoch.elapsed_ns();
            Self::take(
                &mut buffers,
                lane,
                dest.index(),
                Reason::Answered,
                now,
                &mut taken,
            );
        }
        Self::send_taken(outbox, taken);
    }

    /// Flushes every buffer of this locality.
    pub(crate) fn flush_all(&self, outbox: &dyn Outbox, reason: Reason) {
        for set in 0..self.sets.len() {
            self.flush_set(outbox, set, reason);
        }
    }

    /// Sets the coalescing of the action in `slot` towards `dest`, or towards
    /// every destination. What the buffers hold is flushed, so the setting
    /// governs the very next parcel.
    pub(crate) fn set(
        &self,
        outbox: &dyn Outbox,
        slot: usize,
        dest: Option<LocalityId>,
        setting: Coalescing,
    ) {
        let taken = {
            let _changing = self.changing.lock();
            self.settings.set(slot, dest, setting);
            self.apply(slot, dest, setting.in_force())
        };
        Self::send_taken(outbox, taken);
    }

    /// Puts the setting the tuner of the adaptive action in `slot` chose
    /// for `dest` in force towards it, as [`set`](Self::set) does, and
    /// makes it the setting of the destinations without one (see
    /// [`follow_latest`](Self::follow_latest)); nothing if the program
    /// made the action's setting another meanwhile.
    pub(crate) fn tune(
        &self,
        outbox: &dyn Outbox,
        slot: usize,
        dest: LocalityId,
        setting: Coalescing,
    ) {
        let taken = {
            let _changing = self.changing.lock();
            if !self.settings.tune(slot, dest, setting) {
                return;
            }
            self.apply(slot, Some(dest), setting.in_force())
        };
        Self::send_taken(outbox, taken);
    }

    /// Puts the latest decision of the adaptive action in `slot` in force
    /// on the buffers it has towards the destinations without a setting
    /// of their own: those no tuner has judged yet, and this locality
    /// itself, which no tuner judges (its parcels cost a frame and a
    /// task here, no message). Left under the start count, a buffer to
    /// itself was cut by that count's 100 µs timer and sparse bypass all
    /// run long: half of RandomAccess's updates on two localities
    /// (BENCHMARKS.md, issue #15, eighteenth part). Where the latest
    /// decision is off, what a task issues together to itself is still
    /// coalesced ([`escape_off`](Self::escape_off)). Buffers that hold
    /// their setting already are left alone. Called once an epoch for an
    /// action its tuners decided for.
    pub(crate) fn follow_latest(&self, outbox: &dyn Outbox, slot: usize) {
        let taken = {
            let _changing = self.changing.lock();
            if self.settings.adaptive(slot).is_none() {
                return;
            }
            let latest = self.settings.default(slot);
            let own = self.settings.destinations_set_apart(slot);
            self.apply_where(slot, |dest, buffer| {
                if own.contains(&dest) {
                    return None;
                }
                (buffer.setting_in_force() != latest).then_some(latest)
            })
        };
        Self::send_taken(outbox, taken);
    }

    /// Says whether the calls of the adaptive action in `slot` to `dest`
    /// let their responses wait for company at `dest` (see `answer.rs`):
    /// the frames of calls towards it say so from the next one sent on,
    /// the one in the making included. Nothing is flushed. Nothing is
    /// said if the action is no longer adaptive (the program set another
    /// setting since its tuner judged, which took the word back).
    pub(crate) fn set_responses_wait(&self, slot: usize, dest: LocalityId, wait: bool) {
        if self.settings.responses_wait(slot, dest) == wait {
            // The common case, once an epoch: no change.
            return;
        }
        let _changing = self.changing.lock();
        if wait && self.settings.adaptive(slot).is_none() {
            return;
        }
        if !self.settings.set_responses_wait(slot, dest, wait) {
            return;
        }
        let lane = lane(slot, RunKind::Calls);
        for set in &self.sets {
            if let Some(buffer) = set.lock().get_mut(lane, dest.index()) {
                buffer.frame.set_responses_wait(wait);
            }
        }
    }

    /// Gives `dest` the setting of the adaptive action in `slot` it has
    /// now as one of its own, in force on every buffer towards it (what
    /// they hold is flushed), and returns it: its tuner starts from there,
    /// and decisions for other destinations, which move the setting of
    /// those without one, no longer move it under its tuner.
    pub(crate) fn pin(&self, outbox: &dyn Outbox, slot: usize, dest: LocalityId) -> Coalescing {
        let (setting, taken) = {
            let _changing = self.changing.lock();
            let setting = self.settings.get(slot, dest);
            self.settings.pin(slot, dest, setting);
            (setting, self.apply(slot, Some(dest), setting))
        };
        Self::send_taken(outbox, taken);
        setting
    }

    /// The bounds of the tuner of the action in `slot`, if it is adaptive.
    pub(crate) fn adaptive(&self, slot: usize) -> Option<AdaptivePolicy> {
        self.settings.adaptive(slot)
    }

    /// The number of actions with settings.
    pub(crate) fn actions(&self) -> usize {
        self.settings.len()
    }

    /// Hands every buffer of the action in `slot` (towards `dest`, or all)
    /// its new `setting`; returns what they held, as
    /// [`apply_where`](Self::apply_where) does.
    fn apply(&self, slot: usize, dest: Option<LocalityId>, setting: Coalescing) -> Taken {
        self.apply_where(slot, |d, _| {
            dest.is_none_or(|want| want == d).then_some(setting)
        })
    }

    /// Hands each buffer of the action in `slot` the setting `pick` gives
    /// it (by its destination; `None`: it stays as it is); returns what
    /// they held, for the caller to send once it no longer holds
    /// [`changing`](Self::changing) (a frame sent may end an epoch of the
    /// tuners, whose decisions take it).
    fn apply_where(
        &self,
        slot: usize,
        pick: impl Fn(LocalityId, &Buffer) -> Option<Coalescing>,
    ) -> Taken {
        let mut taken = Vec::new();
        for set in 0..self.sets.len() {
            {
                let mut buffers = self.sets[set].lock();
                for kind in RunKind::ALL {
                    let lane = lane(slot, kind);
                    let dests: Vec<usize> = buffers
                        .lane_mut(lane)
                        .filter_map(|(d, buffer)| {
                            let dest = LocalityId::new(d as u32);
                            let setting = pick(dest, buffer)?;
                            buffer.set(setting);
                            buffer
                                .frame
                                .set_responses_wait(self.settings.responses_wait(slot, dest));
                            Some(d)
                        })
                        .collect();
                    let now = self.epoch.elapsed_ns();
                    for d in dests {
                        Self::take(&mut buffers, lane, d, Reason::Changed, now, &mut taken);
                    }
                }
            }
        }
        taken
    }

    /// Where a call of the action in `slot` for `dest` goes first: `dest`,
    /// or the intermediate locality of its virtual topology.
    #[inline]
    pub(crate) fn first_hop(&self, slot: usize, dest: LocalityId) -> LocalityId {
        if !self.settings.routed(slot) {
            return dest;
        }
        self.routed_hop(slot, dest)
    }

    #[cold]
    fn routed_hop(&self, slot: usize, dest: LocalityId) -> LocalityId {
        let dimensions = self.settings.get(slot, dest).dimensions();
        topology::first_hop(self.here, dest, self.count, dimensions)
    }

    /// Counts a call of the action in `slot` forwarded for another locality.
    pub(crate) fn count_forwarded(&self, slot: usize) {
        self.forwarded[slot].fetch_add(1, Ordering::Relaxed);
    }

    /// Calls of the action in `slot` (or of every action) forwarded.
    pub(crate) fn forwarded(&self, slot: Option<usize>) -> u64 {
        match slot {
            Some(slot) => self.forwarded[slot].load(Ordering::Relaxed),
            None => self
                .forwarded
                .iter()
                .map(|f| f.load(Ordering::Relaxed))
                .sum(),
        }
    }

    /// The setting of the action in `slot` towards `dest`.
    pub(crate) fn setting(&self, slot: usize, dest: LocalityId) -> Coalescing {
        self.settings.get(slot, dest)
    }

    /// The setting of the action in `slot` for destinations without one of their own.
    pub(crate) fn default_setting(&self, slot: usize) -> Coalescing {
        self.settings.default(slot)
    }

    /// What the buffers of the action in `slot` (of every action: `None`)
    /// have done, over all workers, kinds and destinations.
    pub(crate) fn stats(&self, slot: Option<usize>) -> LaneStats {
        let mut total = LaneStats::default();
        let lanes = lane(registry().entries().len(), RunKind::Calls);
        for set in self.sets.iter() {
            let mut buffers = set.lock();
            for lane in 0..lanes {
                if slot.is_some_and(|s| lane_parts(lane).0 != s) {
                    continue;
                }
                for (_, buffer) in buffers.lane_mut(lane) {
                    total.add(&buffer.stats);
                }
            }
        }
        total
    }

    /// How late the flush timer fired.
    pub(crate) fn timer_lateness(&self) -> &Lateness {
        self.timer.lateness()
    }

    /// The timer thread's clock, in ns: for sleeping tasks.
    pub(crate) fn now_ns(&self) -> u64 {
        self.timer.now_ns()
    }

    /// Whether a task may sleep on the timer now (see
    /// [`FlushTimer::task_sleeps`]).
    pub(crate) fn task_sleeps(&self) -> bool {
        self.timer.task_sleeps()
    }

    /// `raw`, a reading of `clock()`, in ns on [`now_ns`](Self::now_ns)'s
    /// clock.
    pub(crate) fn ns_at(&self, raw: u64) -> u64 {
        self.epoch.ns_at(raw)
    }

    /// Wakes `waker` at `deadline` (ns on [`now_ns`](Self::now_ns)'s
    /// clock), from a worker or the timer thread (see `wakes.rs`); returns
    /// the id to cancel it with.
    pub(crate) fn wake_at(&self, deadline: u64, waker: std::task::Waker) -> u64 {
        // Asked for on a worker this soon, the workers watch it.
        let watched = self.sched.current_worker().is_some()
            && deadline <= self.now_ns().saturating_add(WAKE_WATCH_NS);
        self.timer.wake_at(deadline, waker, watched)
    }

    /// Forgets a wake-up of [`wake_at`](Self::wake_at).
    pub(crate) fn cancel_wake(&self, deadline: u64, id: u64) {
        self.timer.cancel_wake(deadline, id);
    }

    /// See [`FlushTimer::next_watched_in_ns`].
    pub(crate) fn next_watched_in_ns(&self) -> Option<u64> {
        self.timer.next_watched_in_ns()
    }

    /// Wakes the tasks whose wake-up is due, on this thread (see
    /// [`FlushTimer::wake_due`]).
    pub(crate) fn wake_due(&self) -> bool {
        self.timer.wake_due()
    }
}
