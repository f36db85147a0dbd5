//! The buffers of one worker: one per (action, run kind, destination),
//! made on first use, and the list of those holding parcels.
//!
//! Each worker fills only its own set, so two workers sending to the same
//! destination never touch the same buffer or cache line. The set's lock is
//! taken by its worker for every parcel and by another thread only to flush
//! (the flush timer, termination detection, a change of setting), so it is
//! almost never contended: an uncontended lock is one atomic exchange to
//! take and one to release, and it lets the timer flush the parcels a
//! worker left behind while it runs a long task.

use parking_lot::{Mutex, MutexGuard};

use super::buffer::Buffer;
use crate::parcel::RunKind;

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
    inner: Mutex<Buffers>,
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
}

impl BufferSet {
    /// A set for `lanes` lanes and `destinations` destinations.
    pub(crate) fn new(lanes: usize, destinations: usize) -> Self {
        BufferSet {
            inner: Mutex::new(Buffers {
                lanes: (0..lanes).map(|_| None).collect(),
                destinations,
                listed: Vec::new(),
            }),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Buffers> {
        self.inner.lock()
    }
}

impl Buffers {
    /// The buffer of `lane` for `dest`, made by `make` if there is none.
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
        listed
    }
}
