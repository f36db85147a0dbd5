//! The buffers of one worker: one per (action, run kind, destination),
//! made on first use, and the list of those holding parcels.
//!
//! Each worker fills only its own set, so two workers sending to the same
//! destination never touch the same buffer or cache line. The set's lock is
//! taken by its worker for every parcel and by another thread only to flush
//! (the flush timer, termination detection, a change of setting): a
//! [`BiasedLock`], which its owner takes with plain stores, and which lets
//! the timer flush the parcels a worker left behind while it runs a long
//! task.

use std::sync::Arc;

use super::buffer::{Buffer, Departures};
use super::entry::TimerSlot;
use crate::parcel::RunKind;
use crate::sync::BiasedLock;
use crate::sync::atomic::{AtomicU64, Ordering};

/// A locked set of buffers.
pub(crate) type Locked<'a> = crate::sync::BiasedGuard<'a, Buffers>;

/// The lane of an action and run kind: its row in a set.
pub(crate) fn lane(slot: usize, kind: RunKind) -> usize {
    slot * RunKind::ALL.len() + kind as usize
}

/// The action slot and run kind of a lane.
pub(crate) fn lane_parts(lane: usize) -> (usize, RunKind) {
    (
        lane / RunKind::ALL.len(),
        RunKind::ALL[lane % RunKind::ALL.len()],
    )
}

/// One worker's buffers, behind the lock described above.
#[derive(Debug)]
pub(crate) struct BufferSet {
    inner: BiasedLock<Buffers>,
    /// The flush timer's hold on the set (its one entry, and whether it
    /// may hold parcels). Outside the lock: the timer thread reads it
    /// without taking the set, which would cost the set's worker a
    /// `membarrier`.
    pub(crate) timer: TimerSlot,
    /// The deadline the set's last newly filled buffer got (ns on the
    /// coalescing clock): how recently the set was in use.
    pub(crate) armed_ns: AtomicU64,
    /// When the set's worker last looked at the clock for due buffers
    /// (every [`CHECK_EVERY`] parcels): the timer thread leaves a set whose
    /// worker does this to the worker.
    pub(crate) checked_ns: AtomicU64,
    /// Per action (registry slot): calls of this locality's whose result
    /// someone waits for that went through the set (into its buffers, or
    /// at once with coalescing off), ever. Written by the set's users,
    /// read by adaptive coalescing's tuner.
    pub(crate) awaited: Box<[AtomicU64]>,
    /// All of `awaited` when the set's worker last ran out of tasks
    /// (written by that worker only, in `Aggregator::note_idle`; read by
    /// the tuner, `Aggregator::open_bursts`).
    pub(crate) idle_mark: AtomicU64,
    /// The awaited calls the set's worker issued between its last two
    /// idle points, its last burst (written by that worker only, in
    /// `Aggregator::note_idle`): what sizes the parts its next burst is
    /// split into ([`BufferSet::split_parcels`]).
    pub(crate) last_burst: AtomicU64,
    /// The poll (`sched::current_poll`) of the worker's last awaited
    /// call...
    burst_poll: AtomicU64,
    /// ...and all of `awaited` before that poll's first one (both written
    /// by the set's worker only, in [`BufferSet::note_awaited_poll`];
    /// read by the tuner).
    poll_mark: AtomicU64,
    /// The awaited calls that left the set's buffers, shared with each of
    /// them (see [`Departures`]).
    pub(crate) departures: Arc<Departures>,
}

/// The buffers of one lane, by destination.
type Row = Box<[Option<Box<Buffer>>]>;

/// The buffers of a set.
#[derive(Debug)]
pub(crate) struct Buffers {
    /// `lanes[lane][dest]`; a lane's row is made when it is first used.
    lanes: Vec<Option<Row>>,
    destinations: usize,
    /// (lane, destination) of the buffers that may hold parcels; each
    /// buffer is listed at most once (`Buffer::listed`).
    listed: Vec<(u32, u32)>,
    /// Parcels pushed into the set: its owner looks at the clock every
    /// [`CHECK_EVERY`] of them.
    pub(crate) pushes: u32,
    /// The earliest deadline of a buffer of the set (`u64::MAX`: none); it
    /// may be early (its buffer flushed since), never late.
    pub(crate) earliest: u64,
    /// The poll (`sched::current_poll`) of the worker's last parcel into
    /// an empty buffer of an adaptive action that was off or escaped
    /// (`Aggregator::escape_off`)...
    poll: u64,
    /// ...and how many such parcels that poll pushed (those that joined
    /// an escaped buffer's frame are not counted).
    in_poll: u64,
}

impl Buffers {
    /// Counts a parcel pushed in `poll` into an empty buffer of an
    /// adaptive action that is off or escaped; returns how many such
    /// parcels `poll` pushed.
    pub(crate) fn count_in_poll(&mut self, poll: u64) -> u64 {
        if self.poll == poll {
            self.in_poll += 1;
        } else {
            self.poll = poll;
            self.in_poll = 1;
        }
        self.in_poll
    }
}

/// How many parcels a worker pushes between two looks at the clock for
/// buffers whose deadline passed: a clock read every 64 parcels costs
/// nothing per parcel and finds a due buffer within a few microseconds.
/// A guess, tune me.
pub(crate) const CHECK_EVERY: u32 = 64;

/// The awaited calls a worker issued since both its last idle point and
/// the start of its poll that issued the last one, from the set's total
/// (`awaited`) and the two marks: a task that issued them in one poll
/// awaits them together (toy's batch: 400,000 calls, then every result).
/// Since the idle point alone would not do: a worker kept busy by tasks
/// that each await a call of their own never runs out of tasks, and the
/// calls it issued since would grow without end, one burst; a poll of
/// such a task issues one. The total and the marks are read apart
/// (`Relaxed`, written by the worker meanwhile): a mark newer than the
/// total makes 0, not a wrap, and the figure is at most a poll's calls
/// stale.
fn open_burst(total: u64, idle_mark: u64, poll_mark: u64) -> u64 {
    total.saturating_sub(idle_mark.max(poll_mark))
}

/// The fewest calls a part of a split burst holds: smaller parts cost
/// more in messages than their overlap saves (toy's bursts of 500 came
/// back in 253 µs at 64 calls a message and in 230 at 128, over loopback
/// TCP: BENCHMARKS.md, issue #15, fourteenth part), and where a message
/// costs less than a call (in process) the model would send a few calls a
/// part. A guess, tune me.
pub(crate) const MIN_SPLIT_PARCELS: u32 = 64;

/// The calls a part of a burst of `burst` awaited calls holds when a
/// part's messages cost `ratio` times a call: the burst split into
/// `k = √(burst/ratio)` parts (to the nearest whole number) of
/// `⌈burst/k⌉` calls, the last one the rest, and at least
/// [`MIN_SPLIT_PARCELS`]. `u32::MAX` (the burst whole) below two parts
/// (an infinite ratio among them), and for a ratio not above 0 or not a
/// number (not known).
fn split_parcels(burst: u64, ratio: f64) -> u32 {
    if ratio.is_nan() || ratio <= 0.0 {
        return u32::MAX;
    }
    let burst = burst as f64;
    let parts = (burst / ratio).sqrt().round();
    if parts < 2.0 {
        return u32::MAX;
    }
    (burst / parts)
        .ceil()
        .max(f64::from(MIN_SPLIT_PARCELS))
        .min(f64::from(u32::MAX)) as u32
}

impl BufferSet {
    /// A set for `lanes` lanes and `destinations` destinations: a worker's
    /// (`owned`: its worker takes it cheaply), or the one shared by the
    /// threads that are not workers.
    pub(crate) fn new(lanes: usize, destinations: usize, owned: bool) -> Self {
        let buffers = Buffers {
            lanes: (0..lanes).map(|_| None).collect(),
            destinations,
            listed: Vec::new(),
            pushes: 0,
            poll: 0,
            in_poll: 0,
            earliest: u64::MAX,
        };
        BufferSet {
            timer: TimerSlot::default(),
            armed_ns: AtomicU64::new(0),
            checked_ns: AtomicU64::new(0),
            awaited: (0..lanes / RunKind::ALL.len())
                .map(|_| AtomicU64::new(0))
                .collect(),
            idle_mark: AtomicU64::new(0),
            last_burst: AtomicU64::new(0),
            burst_poll: AtomicU64::new(0),
            poll_mark: AtomicU64::new(0),
            departures: Arc::default(),
            inner: if owned {
                BiasedLock::new(buffers)
            } else {
                BiasedLock::unowned(buffers)
            },
        }
    }

    /// All of `awaited`: the set's awaited calls of every action, ever.
    pub(crate) fn awaited_total(&self) -> u64 {
        self.awaited.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Notes, on the set's worker, that the poll `poll` issued an awaited
    /// call, already counted in `awaited`: the first one of a poll marks
    /// where the poll's calls begin. A load and a compare a call; the
    /// sum of `awaited` once a poll.
    #[inline]
    pub(crate) fn note_awaited_poll(&self, poll: u64) {
        if self.burst_poll.load(Ordering::Relaxed) != poll {
            self.burst_poll.store(poll, Ordering::Relaxed);
            let before = self.awaited_total().saturating_sub(1);
            self.poll_mark.store(before, Ordering::Relaxed);
        }
    }

    /// The burst the set's worker has open: the awaited calls its current
    /// poll issued, if it has not run out of tasks since (see
    /// [`open_burst`]).
    pub(crate) fn open_burst(&self) -> u64 {
        open_burst(
            self.awaited_total(),
            self.idle_mark.load(Ordering::Relaxed),
            self.poll_mark.load(Ordering::Relaxed),
        )
    }

    /// The calls a part of the burst the set's worker issues holds, for a
    /// cost of a message `ratio` times a call's (see
    /// `Aggregator::split_parcels`): the burst is its last one or the one
    /// it has open, whichever is larger (every action's and destination's
    /// awaited calls together).
    pub(crate) fn split_parcels(&self, ratio: f64) -> u32 {
        let burst = self
            .last_burst
            .load(Ordering::Relaxed)
            .max(self.open_burst());
        split_parcels(burst, ratio)
    }

    /// Locks the set from any thread (cheap only for its worker).
    #[inline]
    pub(crate) fn lock(&self) -> Locked<'_> {
        self.inner.lock()
    }

    /// Locks the set as its worker.
    ///
    /// # Safety
    ///
    /// Only the set's worker calls it: worker `i` for set `i`.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn lock_as_worker(&self) -> Locked<'_> {
        // SAFETY: the caller is the set's worker, the only thread that
        // locks it as the owner.
        unsafe { self.inner.lock_as_owner() }
    }
}

impl Buffers {
    /// The buffer of `lane` for `dest`, made by `make` if there is none.
    #[inline]
    pub(crate) fn get_or_make(
        &mut self,
        lane: usize,
        dest: usize,
        make: impl FnOnce() -> Buffer,
    ) -> &mut Buffer {
        let destinations = self.destinations;
        let row = self.lanes[lane].get_or_insert_with(|| (0..destinations).map(|_| None).collect());
        row[dest].get_or_insert_with(|| Box::new(make()))
    }

    /// The buffer of `lane` for `dest`, if it was made.
    pub(crate) fn get_mut(&mut self, lane: usize, dest: usize) -> Option<&mut Buffer> {
        self.lanes
            .get_mut(lane)?
            .as_mut()?
            .get_mut(dest)?
            .as_deref_mut()
    }

    /// Every buffer made in `lane`, with its destination.
    pub(crate) fn lane_mut(&mut self, lane: usize) -> impl Iterator<Item = (usize, &mut Buffer)> {
        self.lanes[lane]
            .iter_mut()
            .flat_map(|row| row.iter_mut().enumerate())
            .filter_map(|(dest, b)| Some((dest, b.as_deref_mut()?)))
    }

    /// Puts a buffer that just took its first parcel on the list.
    pub(crate) fn list(&mut self, lane: usize, dest: usize) {
        let listed = (lane as u32, dest as u32);
        if let Some(buffer) = self.get_mut(lane, dest) {
            if !buffer.listed {
                buffer.listed = true;
                self.listed.push(listed);
            }
        }
    }

    /// Takes the list of buffers that may hold parcels (each leaves it).
    pub(crate) fn take_listed(&mut self) -> Vec<(u32, u32)> {
        let listed = std::mem::take(&mut self.listed);
        for &(lane, dest) in &listed {
            if let Some(buffer) = self.get_mut(lane as usize, dest as usize) {
                buffer.listed = false;
            }
        }
        self.earliest = u64::MAX;
        listed
    }

    /// Takes the listed buffers whose deadline is at or before `now`, as
    /// (lane, destination), and recomputes the earliest deadline of the
    /// others (those stay listed).
    pub(crate) fn take_due(&mut self, now: u64) -> Vec<(u32, u32)> {
        let listed = std::mem::take(&mut self.listed);
        let mut due = Vec::new();
        let mut earliest = u64::MAX;
        for (lane, dest) in listed {
            let Some(buffer) = self.get_mut(lane as usize, dest as usize) else {
                continue;
            };
            match buffer.armed {
                Some(deadline) if deadline <= now => {
                    buffer.listed = false;
                    due.push((lane, dest));
                }
                Some(deadline) => {
                    earliest = earliest.min(deadline);
                    self.listed.push((lane, dest));
                }
                // Flushed since it was listed: it leaves the list.
                None => buffer.listed = false,
            }
        }
        self.earliest = earliest;
        due
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn an_open_burst_is_the_current_polls_calls_since_the_last_idle_point() {
        // A batch: 40,000 calls issued by one poll, no idle point since.
        assert_eq!(open_burst(40_000, 0, 0), 40_000);
        // A worker kept busy by tasks that await a call each: 1,000
        // calls since its last idle point, one by the current poll.
        assert_eq!(open_burst(1_000, 0, 999), 1);
        // It ran out of tasks after the current poll: nothing open.
        assert_eq!(open_burst(500, 500, 0), 0);
        // Marks read after a total that moved meanwhile.
        assert_eq!(open_burst(10, 12, 11), 0);
    }

    /// Counts an awaited call of the set's worker issued in `poll`, as
    /// `Aggregator::push` does.
    fn call(set: &BufferSet, poll: u64) {
        set.awaited[0].fetch_add(1, Ordering::Relaxed);
        set.note_awaited_poll(poll);
    }

    #[test]
    fn the_first_awaited_call_of_a_poll_marks_where_its_burst_begins() {
        let set = BufferSet::new(RunKind::ALL.len(), 2, true);
        let call = |poll: u64| call(&set, poll);
        // Three polls of one call each, then one of five.
        for poll in 1..=3 {
            call(poll);
        }
        assert_eq!(set.open_burst(), 1);
        for _ in 0..5 {
            call(4);
        }
        assert_eq!(set.open_burst(), 5);
        // The worker ran out of tasks (`Aggregator::note_idle`).
        set.idle_mark.store(set.awaited_total(), Ordering::Relaxed);
        assert_eq!(set.open_burst(), 0);
    }

    #[test]
    fn a_burst_is_split_into_the_square_root_of_its_calls_over_the_ratio_parts() {
        // 500 calls at 2α/c = 100 (α = 5 µs): √5 ≈ 2 parts of 250; at
        // 50, √10 ≈ 3 of 167; at 30, 4 of 125.
        assert_eq!(split_parcels(500, 100.0), 250);
        assert_eq!(split_parcels(500, 50.0), 167);
        assert_eq!(split_parcels(500, 30.0), 125);
        // A batch of 400,000: 89 parts of 4,495.
        assert_eq!(split_parcels(400_000, 50.0), 4_495);
        // Below two parts, or without a ratio, the burst leaves whole.
        assert_eq!(split_parcels(100, 50.0), u32::MAX);
        assert_eq!(split_parcels(1, 50.0), u32::MAX);
        assert_eq!(split_parcels(500, 0.0), u32::MAX);
        assert_eq!(split_parcels(500, f64::NAN), u32::MAX);
        assert_eq!(split_parcels(500, -1.0), u32::MAX);
        assert_eq!(split_parcels(500, f64::INFINITY), u32::MAX);
        // A message cheaper than a call (in process): parts of the
        // fewest calls, whatever the ratio.
        assert_eq!(split_parcels(500, 0.6), MIN_SPLIT_PARCELS);
        assert_eq!(split_parcels(500, 1e-300), MIN_SPLIT_PARCELS);
        assert_eq!(split_parcels(u64::MAX, 1e-300), MIN_SPLIT_PARCELS);
    }

    #[test]
    fn the_parts_follow_the_last_burst_or_the_open_one_if_larger() {
        let set = BufferSet::new(RunKind::ALL.len(), 2, true);
        let call = |poll: u64| call(&set, poll);
        // No burst yet: the first calls leave whole.
        call(1);
        assert_eq!(set.split_parcels(50.0), u32::MAX);
        // A burst of 500 ended (`Aggregator::note_idle`): the next
        // burst's first call already knows its parts.
        set.last_burst.store(500, Ordering::Relaxed);
        set.idle_mark.store(set.awaited_total(), Ordering::Relaxed);
        call(2);
        assert_eq!(set.split_parcels(50.0), 167);
        // A batch after it: its parts grow with the calls it issued.
        for _ in 0..20_000 {
            call(2);
        }
        assert_eq!(set.split_parcels(50.0), 1_001);
    }
}
