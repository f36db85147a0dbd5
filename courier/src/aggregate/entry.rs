//! [`TimerSlot`]: the flush timer's hold on one buffer set.
//!
//! A set has at most one entry in the flush timer, whose deadline the slot
//! keeps (`entry`, 0 for none), and a flag saying whether the set may hold
//! parcels (`holding`). The set's pusher, under the set's lock, marks it
//! holding and *then* looks for an entry ([`hold`](TimerSlot::hold), then
//! [`claim`](TimerSlot::claim)); the timer thread, without the lock, takes
//! the entry away and *then* looks at the flag ([`fire`](TimerSlot::fire)).
//! Each side's write is followed by a SeqCst fence before its read (a
//! store-buffering pattern), so the two cannot both miss: either the
//! pusher finds no entry and makes one, or the timer finds the set holding
//! and flushes it. A set that holds parcels therefore always has an entry
//! or is being flushed (`loom_tests` below checks every interleaving).
//!
//! The flag may be set while the set is empty (a flush by its worker
//! clears it under the lock with [`release`](TimerSlot::release)); a
//! fired entry that finds it clear ends without taking the set, which is
//! what keeps the timer from costing a busy worker its cheap lock.

use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

/// The flush timer's hold on one buffer set.
#[derive(Debug, Default)]
pub(crate) struct TimerSlot {
    /// The deadline of the set's live entry (ns on the coalescing clock;
    /// 0: none).
    entry: AtomicU64,
    /// Whether the set may hold parcels.
    holding: AtomicBool,
}

/// What a fired timer entry found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fired {
    /// The set has another entry: this one was replaced.
    Stale,
    /// The set holds nothing: the entry ends (its next parcel makes one).
    Idle,
    /// The set may hold parcels: the timer must look at it.
    Holding,
}

impl TimerSlot {
    /// Marks the set as holding parcels. Called under the set's lock when a
    /// buffer gets its first parcel, before [`claim`](Self::claim).
    pub(crate) fn hold(&self) {
        self.holding.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Takes the set's entry for deadline `at` (nonzero) if it has none;
    /// returns whether it did, and the caller must then put the entry in
    /// the timer.
    pub(crate) fn claim(&self, at: u64) -> bool {
        debug_assert!(at != 0, "0 means no entry");
        self.entry.load(Ordering::SeqCst) == 0
            && self
                .entry
                .compare_exchange(0, at, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
    }

    /// Says that the set holds nothing any more. Called under the set's
    /// lock by whoever emptied it.
    pub(crate) fn release(&self) {
        self.holding.store(false, Ordering::Relaxed);
    }

    /// The entry at `deadline` fired: removes it if it is still the set's.
    pub(crate) fn fire(&self, deadline: u64) -> Fired {
        if self
            .entry
            .compare_exchange(deadline, 0, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            return Fired::Stale;
        }
        fence(Ordering::SeqCst);
        if self.holding.load(Ordering::SeqCst) {
            Fired::Holding
        } else {
            Fired::Idle
        }
    }

    /// Whether the set has a live entry.
    #[cfg(test)]
    fn has_entry(&self) -> bool {
        self.entry.load(Ordering::SeqCst) != 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn one_entry_at_a_time_and_stale_entries_end_alone() {
        let slot = TimerSlot::default();
        assert!(slot.claim(10));
        assert!(!slot.claim(20), "a second entry");
        assert_eq!(slot.fire(20), Fired::Stale);
        assert_eq!(slot.fire(10), Fired::Idle);
        assert!(!slot.has_entry());
        slot.hold();
        assert!(slot.claim(30));
        assert_eq!(slot.fire(30), Fired::Holding);
        slot.release();
        assert!(slot.claim(40));
        assert_eq!(slot.fire(40), Fired::Idle);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use loom::sync::Arc;

    use super::*;
    use crate::sync::Mutex;

    /// A set with a live entry at deadline 1 and nothing in it. Its owner
    /// pushes a first parcel (marking it holding and claiming an entry at
    /// 2) while the timer fires entry 1 (flushing the set if it finds it
    /// holding). In every interleaving, a parcel left in the set has an
    /// entry to flush it.
    #[test]
    fn loom_a_pushed_parcel_is_never_left_without_a_timer_entry() {
        loom::model(|| {
            let set = Arc::new((Mutex::new(0u32), TimerSlot::default()));
            assert!(set.1.claim(1));
            let owner = {
                let set = Arc::clone(&set);
                loom::thread::spawn(move || {
                    let mut parcels = set.0.lock();
                    *parcels += 1;
                    set.1.hold();
                    set.1.claim(2);
                })
            };
            let timer = {
                let set = Arc::clone(&set);
                loom::thread::spawn(move || {
                    if set.1.fire(1) == Fired::Holding {
                        let mut parcels = set.0.lock();
                        *parcels = 0;
                        set.1.release();
                    }
                })
            };
            owner.join().unwrap();
            timer.join().unwrap();
            let parcels = *set.0.lock();
            assert!(
                parcels == 0 || set.1.has_entry(),
                "a parcel without a timer entry"
            );
        });
    }
}
