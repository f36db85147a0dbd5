//! The receiving side: [`Ledger`], what each origin has in this locality
//! and the credit owed back to it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

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

/// Per origin: received work not finished, and credit not yet given back.
#[derive(Debug)]
pub(crate) struct Ledger {
    window: usize,
    /// Credit owed to one origin that is given back at once.
    return_at: usize,
    origins: Box<[Account]>,
    /// Some credit is owed below `return_at`: [`Ledger::take_owed`] has work.
    owed: AtomicBool,
    /// Credit messages sent, ever.
    returns: AtomicU64,
}

#[derive(Debug, Default)]
struct Account {
    held: AtomicUsize,
    owed: AtomicUsize,
}

impl Ledger {
    /// A ledger for `count` origins granting each `window` bytes of charge
    /// (0: flow control off, nothing is counted).
    pub(crate) fn new(count: u32, window: usize) -> Ledger {
        Ledger {
            window,
            return_at: (window / 4).max(1),
            origins: (0..count).map(|_| Account::default()).collect(),
            owed: AtomicBool::new(false),
            returns: AtomicU64::new(0),
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
        if !super::SendWindows::fits(self.window, held, charge) {
            account.held.fetch_sub(charge, Ordering::AcqRel);
            return Err(OverCredit {
                charge,
                held,
                window: self.window,
            });
        }
        Ok(())
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
        self.origins
            .iter()
            .map(|a| a.held.load(Ordering::Relaxed))
            .sum()
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
        let ledger = Ledger::new(2, 100);
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
        let ledger = Ledger::new(2, 100);
        ledger.receive(l(1), 1000).unwrap();
        assert!(ledger.receive(l(1), 1).is_err());
        assert_eq!(ledger.finish(l(1), 1000), Some(1000));
        ledger.receive(l(1), 1).unwrap();
    }

    #[test]
    fn credit_goes_back_by_quarter_windows_and_the_rest_on_demand() {
        let ledger = Ledger::new(3, 100);
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
    fn off_counts_nothing_and_unknown_origins_are_ignored() {
        let ledger = Ledger::new(2, 0);
        for _ in 0..10 {
            ledger.receive(l(1), 1 << 30).unwrap();
        }
        assert_eq!(ledger.finish(l(1), 1 << 30), None);
        let on = Ledger::new(2, 100);
        on.receive(l(7), 1 << 30).unwrap();
        assert_eq!(on.finish(l(7), 1), None);
    }
}
