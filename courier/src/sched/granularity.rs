//! The task granularity threshold: the duration of work from which it is
//! worth a task of its own, `λ_min` times the measured task overhead.
//! `par` measures the overhead and sets it; `par::join` forks and a
//! received run of calls splits into tasks from it.

use std::sync::atomic::{AtomicU64, Ordering};

/// The threshold before it is measured, in ns: `λ_min` (1,000) times
/// twice the one-worker overhead of the `spawn` bench when it was set (80
/// ns, with `async_task`'s tasks; ~42 since Courier's own): erring
/// towards inlining until the first launch measures it.
const DEFAULT_THRESHOLD_NS: u64 = 160_000;

static THRESHOLD_NS: AtomicU64 = AtomicU64::new(DEFAULT_THRESHOLD_NS);

/// The duration, in ns, from which work is worth a task of its own.
#[inline]
pub(crate) fn task_threshold_ns() -> u64 {
    THRESHOLD_NS.load(Ordering::Relaxed)
}

/// Sets the threshold (at least 1 ns), once the overhead is measured.
pub(crate) fn set_task_threshold_ns(ns: u64) {
    THRESHOLD_NS.store(ns.max(1), Ordering::Relaxed);
}
