//! What a locality's tuning did: whether its loop runs, and the
//! decisions made for each action (`/adapt/count/decisions@ACTION`).

use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

/// The tuning of one locality: whether its loop runs, and the decisions
/// made for each action.
#[derive(Debug)]
pub(crate) struct Tuning {
    started: Once,
    decisions: Box<[AtomicU64]>,
    /// Whether decisions are reported at INFO (`Config::print_adapt`).
    print: bool,
}

impl Tuning {
    /// Tuning of `actions` actions; no loop yet. `print`: report each
    /// decision at INFO rather than DEBUG.
    pub(crate) fn new(actions: usize, print: bool) -> Self {
        Tuning {
            started: Once::new(),
            decisions: (0..actions).map(|_| AtomicU64::new(0)).collect(),
            print,
        }
    }

    /// Whether decisions are reported at INFO.
    pub(crate) fn print(&self) -> bool {
        self.print
    }

    /// Runs `start` the first time it is called.
    pub(crate) fn start_once(&self, start: impl FnOnce()) {
        self.started.call_once(start);
    }

    /// Counts a decision for the action in `slot`.
    pub(crate) fn count_decision(&self, slot: usize) {
        if let Some(d) = self.decisions.get(slot) {
            d.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Decisions made for the action in `slot`, or for all.
    pub(crate) fn decisions(&self, slot: Option<usize>) -> u64 {
        match slot {
            Some(slot) => self
                .decisions
                .get(slot)
                .map_or(0, |d| d.load(Ordering::Relaxed)),
            None => self
                .decisions
                .iter()
                .map(|d| d.load(Ordering::Relaxed))
                .sum(),
        }
    }
}
