//! The receiving side: [`Ledger`], what each origin has in this locality
//! and the credit owed back to it.

use crate::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use super::Budget;
use crate::ids::LocalityId;

/// A frame beyond its sender's window: the sender broke the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a frame costing {charge} bytes of credit arrived with {held} bytes unfinished, \
     beyond the window of {window} bytes (credit_window)"
)]
pub(crate) struct OverCredit {
    /// The frame's charge.
    pub(crate) charge: usize,
    /// What the sender had in this locality before it.
    pub(crate) held: usize,
    /// The window.
    pub(crate) window: usize,
}

/// Per origin: received work not finished, and credit not yet given back;
/// and the shared pool origins borrow from.
#[derive(Debug)]
pub(crate) struct Ledger {
    window: usize,
    /// What every origin may use beyond its window without asking.
    hint: usize,
    /// The shared pool's bytes not lent.
    pool_free: AtomicUsize,
    /// Bytes lent from the pool, ever.
    lent: AtomicU64,
    /// Credit owed to one origin that is given back at once.
    return_at: usize,
    origins: Box<[Account]>,
    /// Some credit is owed below `return_at`: [`Ledger::take_owed`] has work.
    owed: AtomicBool,
    /// Credit messages sent, ever.
    returns: AtomicU64,
    /// Received work not finished, over every origin.
    held: AtomicUsize,
}

#[derive(Debug, Default)]
struct Account {
    held: AtomicUsize,
    owed: AtomicUsize,
    /// Lent to this origin from the pool.
    lent: AtomicUsize,
}

impl Ledger {
    /// A ledger for `count` origins as `budget` says (a window of 0: flow
    /// control off, nothing is counted).
    pub(crate) fn new(count: u32, budget: &Budget) -> Ledger {
        let window = budget.window;
        Ledger {
            window,
            hint: budget.hint,
            pool_free: AtomicUsize::new(budget.pool),
            lent: AtomicU64::new(0),
            return_at: (window / 4).max(1),
            origins: (0..count).map(|_| Account::default()).collect(),
            owed: AtomicBool::new(false),
            returns: AtomicU64::new(0),
            held: AtomicUsize::new(0),
        }
    }

    /// Whether frames are counted.
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        self.window != 0
    }

    /// A frame costing `charge` arrived from `origin`; an error if it is
    /// beyond the window (the same rule `SendWindows::fits` applies).
    pub(crate) fn receive(&self, origin: LocalityId, charge: usize) -> Result<(), OverCredit> {
        let Some(account) = self.origins.get(origin.index()) else {
            return Ok(());
        };
        if !self.enabled() {
            return Ok(());
        }
        let held = account.held.fetch_add(charge, Ordering::AcqRel);
        let limit = self
            .window
            .saturating_add(self.hint)
            .saturating_add(account.lent.load(Ordering::Acquire));
        if !super::SendWindows::fits(limit, held, charge) {
            account.held.fetch_sub(charge, Ordering::AcqRel);
            return Err(OverCredit {
                charge,
                held,
                window: limit,
            });
        }
        self.held.fetch_add(charge, Ordering::Relaxed);
        Ok(())
    }

    /// `origin` asks to borrow `bytes` from the shared pool (seed 002's
    /// reservation of user buffers): lends what the pool has, up to that,
    /// and returns it (perhaps 0).
    pub(crate) fn lend(&self, origin: LocalityId, bytes: usize) -> usize {
        let Some(account) = self.origins.get(origin.index()) else {
            return 0;
        };
        let mut free = self.pool_free.load(Ordering::Acquire);
        loop {
            let lent = bytes.min(free);
            match self.pool_free.compare_exchange_weak(
                free,
                free - lent,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    account.lent.fetch_add(lent, Ordering::AcqRel);
                    self.lent.fetch_add(lent as u64, Ordering::Relaxed);
                    return lent;
                }
                Err(now) => free = now,
            }
        }
    }

    /// `origin` gives back `bytes` it borrowed (more than it has borrowed
    /// is a broken peer's word and gives back only what it has).
    pub(crate) fn take_back(&self, origin: LocalityId, bytes: usize) {
        let Some(account) = self.origins.get(origin.index()) else {
            return;
        };
        let mut lent = account.lent.load(Ordering::Acquire);
        loop {
            let back = bytes.min(lent);
            match account.lent.compare_exchange_weak(
                lent,
                lent - back,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.pool_free.fetch_add(back, Ordering::AcqRel);
                    return;
                }
                Err(now) => lent = now,
            }
        }
    }

    /// The shared pool's bytes not lent now.
    pub(crate) fn pool_free(&self) -> usize {
        self.pool_free.load(Ordering::Relaxed)
    }

    /// Bytes lent from the pool, ever.
    pub(crate) fn lent_total(&self) -> u64 {
        self.lent.load(Ordering::Relaxed)
    }

    /// Work costing `charge` from `origin` is finished. Returns the credit
    /// to give back to it now, if a quarter window or more is owed;
    /// smaller amounts wait for [`take_owed`](Self::take_owed).
    pub(crate) fn finish(&self, origin: LocalityId, charge: usize) -> Option<usize> {
        let account = self.origins.get(origin.index())?;
        if !self.enabled() || charge == 0 {
            return None;
        }
        account.held.fetch_sub(charge, Ordering::AcqRel);
        self.held.fetch_sub(charge, Ordering::Relaxed);
        let owed = account.owed.fetch_add(charge, Ordering::AcqRel) + charge;
        if owed >= self.return_at {
            let owed = account.owed.swap(0, Ordering::AcqRel);
            if owed > 0 {
                self.returns.fetch_add(1, Ordering::Relaxed);
                return Some(owed);
            }
            return None;
        }
        self.owed.store(true, Ordering::Release);
        None
    }

    /// Every credit owed, to give back now (a worker about to go idle, or
    /// waiting itself): small amounts must not wait for ever.
    pub(crate) fn take_owed(&self, mut give: impl FnMut(LocalityId, usize)) -> bool {
        if !self.owed.swap(false, Ordering::AcqRel) {
            return false;
        }
        let mut gave = false;
        for (i, account) in self.origins.iter().enumerate() {
            let owed = account.owed.swap(0, Ordering::AcqRel);
            if owed > 0 {
                self.returns.fetch_add(1, Ordering::Relaxed);
                give(LocalityId::new(i as u32), owed);
                gave = true;
            }
        }
        gave
    }

    /// Received work not yet finished, over every origin.
    pub(crate) fn held_bytes(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Whether some origin may soon wait for its credit: origins have a
    /// quarter window or more of unfinished work here.
    #[inline]
    pub(crate) fn pressed(&self) -> bool {
        self.held.load(Ordering::Relaxed) >= self.window / 4
    }

    /// Credit messages sent, ever.
    pub(crate) fn returns(&self) -> u64 {
        self.returns.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(i: u32) -> LocalityId {
        LocalityId::new(i)
    }

    #[test]
    fn a_frame_beyond_the_window_is_refused_and_not_counted() {
        let ledger = Ledger::new(2, &Budget::window(100));
        ledger.receive(l(1), 60).unwrap();
        let err = ledger.receive(l(1), 60).unwrap_err();
        assert_eq!(
            err,
            OverCredit {
                charge: 60,
                held: 60,
                window: 100
            }
        );
        assert!(err.to_string().contains("credit_window"), "{err}");
        assert_eq!(ledger.held_bytes(), 60);
        ledger.receive(l(1), 40).unwrap();
        // Other origins have their own window.
        ledger.receive(l(0), 100).unwrap();
    }

    #[test]
    fn a_frame_larger_than_the_window_is_accepted_alone() {
        let ledger = Ledger::new(2, &Budget::window(100));
        ledger.receive(l(1), 1000).unwrap();
        assert!(ledger.receive(l(1), 1).is_err());
        assert_eq!(ledger.finish(l(1), 1000), Some(1000));
        ledger.receive(l(1), 1).unwrap();
    }

    #[test]
    fn credit_goes_back_by_quarter_windows_and_the_rest_on_demand() {
        let ledger = Ledger::new(3, &Budget::window(100));
        for _ in 0..4 {
            ledger.receive(l(1), 10).unwrap();
        }
        ledger.receive(l(2), 10).unwrap();
        assert_eq!(ledger.finish(l(1), 10), None);
        assert_eq!(ledger.finish(l(1), 10), None);
        assert_eq!(ledger.finish(l(1), 10), Some(30), "a quarter window");
        assert_eq!(ledger.finish(l(1), 10), None);
        assert_eq!(ledger.finish(l(2), 10), None);
        let mut given = Vec::new();
        assert!(ledger.take_owed(|origin, bytes| given.push((origin, bytes))));
        given.sort();
        assert_eq!(given, [(l(1), 10), (l(2), 10)]);
        assert!(!ledger.take_owed(|_, _| panic!("nothing owed")));
        assert_eq!(ledger.held_bytes(), 0);
        assert_eq!(ledger.returns(), 3);
    }

    #[test]
    fn the_pool_lends_what_it_has_and_a_loan_widens_the_window() {
        let budget = Budget {
            pool: 150,
            ..Budget::window(100)
        };
        let ledger = Ledger::new(3, &budget);
        assert_eq!(ledger.lend(l(1), 100), 100);
        assert_eq!(ledger.lend(l(2), 100), 50, "what is left");
        assert_eq!(ledger.lend(l(2), 100), 0);
        assert_eq!(ledger.pool_free(), 0);
        ledger.receive(l(1), 150).unwrap();
        ledger.receive(l(1), 50).unwrap();
        assert!(ledger.receive(l(1), 1).is_err(), "window 100 + loan 100");
        ledger.take_back(l(2), 1000);
        assert_eq!(ledger.pool_free(), 50, "only what was lent comes back");
        ledger.take_back(l(1), 100);
        assert_eq!(ledger.pool_free(), 150);
        assert_eq!(ledger.lent_total(), 150);
    }

    #[test]
    fn a_quarter_window_of_unfinished_work_presses() {
        let ledger = Ledger::new(3, &Budget::window(100));
        ledger.receive(l(1), 20).unwrap();
        assert!(!ledger.pressed());
        ledger.receive(l(2), 5).unwrap();
        assert!(ledger.pressed(), "25 of others' work held");
        ledger.finish(l(2), 5);
        assert!(!ledger.pressed());
        assert!(ledger.receive(l(1), 100).is_err());
        assert!(!ledger.pressed(), "a refused frame is not held");
    }

    #[test]
    fn a_hint_widens_every_window_without_asking() {
        let budget = Budget {
            hint: 50,
            ..Budget::window(100)
        };
        let ledger = Ledger::new(2, &budget);
        ledger.receive(l(1), 100).unwrap();
        ledger.receive(l(1), 50).unwrap();
        assert!(ledger.receive(l(1), 1).is_err());
    }

    #[test]
    fn off_counts_nothing_and_unknown_origins_are_ignored() {
        let ledger = Ledger::new(2, &Budget::window(0));
        for _ in 0..10 {
            ledger.receive(l(1), 1 << 30).unwrap();
        }
        assert_eq!(ledger.finish(l(1), 1 << 30), None);
        let on = Ledger::new(2, &Budget::window(100));
        on.receive(l(7), 1 << 30).unwrap();
        assert_eq!(on.finish(l(7), 1), None);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use loom::sync::Arc;

    use super::*;

    /// Two origins borrow from one pool while one gives its loan back and
    /// frames arrive and finish: in every interleaving, what the pool has
    /// plus what is lent is the pool, and a loan is usable as soon as it
    /// is lent.
    #[test]
    fn loom_the_pool_is_conserved_and_a_loan_widens_the_window() {
        loom::model(|| {
            let budget = Budget {
                window: 10,
                hint: 0,
                pool: 100,
                queue: 0,
            };
            let ledger = Arc::new(Ledger::new(2, &budget));
            let first = {
                let ledger = Arc::clone(&ledger);
                loom::thread::spawn(move || {
                    let lent = ledger.lend(LocalityId::new(0), 70);
                    if lent > 10 {
                        // The loan is in force: 10 + lent fits.
                        ledger.receive(LocalityId::new(0), 5).unwrap();
                        ledger.receive(LocalityId::new(0), 5 + lent - 10).unwrap();
                        ledger.finish(LocalityId::new(0), 5);
                        ledger.finish(LocalityId::new(0), 5 + lent - 10);
                    }
                    ledger.take_back(LocalityId::new(0), lent);
                })
            };
            let second = {
                let ledger = Arc::clone(&ledger);
                loom::thread::spawn(move || ledger.lend(LocalityId::new(1), 70))
            };
            first.join().unwrap();
            let lent = second.join().unwrap();
            assert!(lent == 30 || lent == 70, "lent {lent}");
            assert_eq!(ledger.pool_free() + lent, 100);
            assert_eq!(ledger.held_bytes(), 0);
        });
    }
}
