//! Time as every layer reads it: the process's calibrated clock, precise
//! short sleeps, and the log2 buckets of duration histograms. A leaf room:
//! it imports nothing from the crate.

use std::sync::OnceLock;

/// The clock of the time accounting: the CPU's time-stamp counter where it
/// is reliable, calibrated once per process (see [`quanta`]). Reading it
/// costs a few nanoseconds where `Instant::now` costs about 30 on a VM, and
/// a worker reads it twice per task.
pub(crate) fn clock() -> &'static quanta::Clock {
    static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new)
}

/// Runs `f`; returns its output and how long it took, in ns by
/// [`clock`].
#[inline]
pub(crate) fn timed<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let clock = clock();
    let start = clock.raw();
    let out = f();
    (out, clock.delta_as_nanos(start, clock.raw()))
}

/// Asks Linux for a timer slack of 1 ns on the calling thread (once per
/// thread), so that its short timed waits (the flush timer, a polling MPI
/// driver) are not stretched by the default 50 µs slack.
pub(crate) fn precise_sleeps() {
    thread_local! {
        static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if !DONE.replace(true) {
        #[cfg(target_os = "linux")]
        let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
    }
}

/// Buckets of the duration histograms (task polls, timer lateness): bucket `k` counts polls of
/// `2^(k-1)` to `2^k - 1` ns (bucket 0: 0 ns); the last bucket also takes
/// everything longer.
pub(crate) const POLL_BUCKETS: usize = 40;

/// The bucket of a poll of `ns` nanoseconds.
pub(crate) fn poll_bucket(ns: u64) -> usize {
    ((u64::BITS - ns.leading_zeros()) as usize).min(POLL_BUCKETS - 1)
}
