//! Synchronisation Courier writes itself, and the shim that lets loom
//! replace what it is built from.
//!
//! Everything here goes through `crate::sync::{atomic, cell, Mutex}` so
//! that `RUSTFLAGS="--cfg loom"` model-checks it (tokio's `loom/` module is
//! the model). Under loom, capacities shrink and the asymmetric fences
//! become two ordinary `SeqCst` fences, which is what they guarantee.
//!
//! - `biased`: [`BiasedLock`], a lock its owner takes without an atomic
//!   read-modify-write (the per-worker coalescing buffers).
//! - `fence`: the asymmetric fences behind it (Linux `membarrier`).
//!
//! Loom models live beside what they check: `biased.rs` (the lock),
//! `sched/sleep.rs` (a wake racing a park), `sched/task.rs` (a wake racing
//! a task's poll and its handle's await; the last owner freeing it),
//! `parcel/pending.rs` (a call completed while its future is dropped).

mod biased;
mod fence;

pub(crate) use biased::{BiasedLock, Guard as BiasedGuard};

#[cfg(not(loom))]
pub(crate) mod atomic {
    pub(crate) use std::sync::atomic::{
        AtomicBool, AtomicU64, AtomicUsize, Ordering, compiler_fence, fence,
    };
}

#[cfg(loom)]
pub(crate) mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};

    /// Loom has no compiler fences; a full fence is stronger.
    pub(crate) fn compiler_fence(order: Ordering) {
        fence(order);
    }
}

/// An `UnsafeCell` whose accesses loom can check.
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(
    #[cfg(not(loom))] std::cell::UnsafeCell<T>,
    #[cfg(loom)] loom::cell::UnsafeCell<T>,
);

impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        #[cfg(not(loom))]
        return UnsafeCell(std::cell::UnsafeCell::new(value));
        #[cfg(loom)]
        return UnsafeCell(loom::cell::UnsafeCell::new(value));
    }

    /// Runs `f` with a mutable pointer to the value.
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(not(loom))]
        return f(self.0.get());
        #[cfg(loom)]
        return self.0.with_mut(f);
    }
}

/// A mutex: parking_lot's, or loom's under loom.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(
    #[cfg(not(loom))] parking_lot::Mutex<T>,
    #[cfg(loom)] loom::sync::Mutex<T>,
);

#[cfg(not(loom))]
pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
#[cfg(loom)]
pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        #[cfg(not(loom))]
        return Mutex(parking_lot::Mutex::new(value));
        #[cfg(loom)]
        return Mutex(loom::sync::Mutex::new(value));
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(not(loom))]
        return self.0.lock();
        #[cfg(loom)]
        return self.0.lock().unwrap_or_else(|e| e.into_inner());
    }

    /// Takes the lock if it is free now; `None` if another thread holds it.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        #[cfg(not(loom))]
        return self.0.try_lock();
        #[cfg(loom)]
        return match self.0.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
    }
}

/// A condition variable: parking_lot's, or loom's under loom. Waits take
/// the guard and give it back (loom's shape).
#[derive(Debug, Default)]
pub(crate) struct Condvar(
    #[cfg(not(loom))] parking_lot::Condvar,
    #[cfg(loom)] loom::sync::Condvar,
);

impl Condvar {
    /// Waits for a notification (or a spurious wake-up).
    pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        #[cfg(not(loom))]
        {
            let mut guard = guard;
            self.0.wait(&mut guard);
            guard
        }
        #[cfg(loom)]
        return self.0.wait(guard).unwrap_or_else(|e| e.into_inner());
    }

    /// Waits for a notification or `timeout`. Under loom it may return at
    /// once, as a timeout may: a model must not rely on the time.
    pub(crate) fn wait_for<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: std::time::Duration,
    ) -> MutexGuard<'a, T> {
        #[cfg(not(loom))]
        {
            let mut guard = guard;
            self.0.wait_for(&mut guard, timeout);
            guard
        }
        #[cfg(loom)]
        return match self.0.wait_timeout(guard, timeout) {
            Ok((guard, _)) => guard,
            Err(e) => e.into_inner().0,
        };
    }

    /// Wakes one waiter.
    pub(crate) fn notify_one(&self) {
        self.0.notify_one();
    }

    /// Wakes every waiter.
    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}

/// Waits a little, more each time: spins first, then yields the thread.
#[derive(Debug, Default)]
pub(crate) struct Backoff(#[cfg(not(loom))] crossbeam_utils::Backoff, #[cfg(loom)] ());

impl Backoff {
    pub(crate) fn snooze(&self) {
        #[cfg(not(loom))]
        self.0.snooze();
        #[cfg(loom)]
        loom::thread::yield_now();
    }
}
