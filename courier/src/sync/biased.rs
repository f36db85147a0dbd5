//! [`BiasedLock`]: a lock biased towards one thread, its owner, which
//! takes and releases it with plain stores (no atomic read-modify-write, no
//! fence); any other thread pays for both.
//!
//! Each worker's coalescing buffers sit behind one: the worker appends a
//! parcel under it for every parcel it sends, and another thread (the flush
//! timer, termination detection, a change of setting) takes it only to
//! flush, a few times a millisecond at most. An uncontended mutex would
//! cost the worker two atomic exchanges per parcel, each draining the store
//! buffer its encoding just filled.
//!
//! # Protocol
//!
//! Two flags: `owner_busy` (the owner is inside) and `other_wants` (another
//! thread is inside or about to be). Others are serialized among
//! themselves by a mutex.
//!
//! - Owner: store `owner_busy = true`; light fence; load `other_wants`. If
//!   false, it is inside. If true, it stores `owner_busy = false`, waits
//!   until `other_wants` is false, and tries again. Leaving: store
//!   `owner_busy = false` (release).
//! - Other: take the mutex; store `other_wants = true`; heavy fence; wait
//!   until `owner_busy` is false (acquire). Leaving: store
//!   `other_wants = false` (release), release the mutex.
//!
//! This is Dekker's mutual exclusion with asymmetric fences (`fence.rs`):
//! the light/heavy pair orders like two `SeqCst` fences, so the owner and
//! another thread cannot both read the other's flag as false after setting
//! their own. Either the owner's store is visible to the other, which then
//! waits for it to leave, or the other's store is visible to the owner,
//! which then steps back. The release stores on leaving and the acquire
//! loads on entering carry the protected data from one side to the other.
//!
//! The owner locks through [`BiasedLock::lock_as_owner`], whose contract
//! (one thread only) is what the exclusion rests on: it spares the owner
//! the look at thread-local storage that checking who calls would cost.
//! Through [`BiasedLock::lock`] any thread locks, the owner its own way.

use super::atomic::{AtomicBool, AtomicUsize, Ordering};
use super::{Backoff, Mutex, MutexGuard, UnsafeCell, fence};

/// A lock biased towards its owner thread: see the module docs.
#[derive(Debug)]
pub(crate) struct BiasedLock<T> {
    /// The owning thread's token ([`thread_token`]), 0 until it is claimed.
    owner: AtomicUsize,
    owner_busy: AtomicBool,
    other_wants: AtomicBool,
    /// Serializes the threads that are not the owner.
    others: Mutex<()>,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a `Guard`, and the protocol of
// the module docs gives one thread at a time a guard; moving a `T` between
// threads needs `T: Send`.
#[allow(unsafe_code)]
unsafe impl<T: Send> Sync for BiasedLock<T> {}

/// The owner token of a lock that never has an owner ([`BiasedLock::unowned`]).
const NO_OWNER_EVER: usize = usize::MAX;

/// A token unique to each running thread: the address of a thread-local.
fn thread_token() -> usize {
    #[cfg(not(loom))]
    {
        thread_local! {
            static TOKEN: u8 = const { 0 };
        }
        TOKEN.with(|t| std::ptr::from_ref(t) as usize)
    }
    #[cfg(loom)]
    {
        loom::thread_local! {
            static TOKEN: u8 = 0;
        }
        TOKEN.with(|t| std::ptr::from_ref(t) as usize)
    }
}

/// Access to the value of a [`BiasedLock`]; leaving releases the lock.
pub(crate) struct Guard<'a, T> {
    lock: &'a BiasedLock<T>,
    /// The others' mutex, held when this is not the owner's guard.
    other: Option<MutexGuard<'a, ()>>,
}

impl<T> BiasedLock<T> {
    /// A lock whose owner will be the first thread to lock it with
    /// [`lock_as_owner`](Self::lock_as_owner).
    pub(crate) fn new(value: T) -> Self {
        Self::with_owner(value, 0)
    }

    /// A lock no thread will own: a plain mutex (every thread takes the
    /// slow path, without its fence, since no owner can be inside).
    pub(crate) fn unowned(value: T) -> Self {
        Self::with_owner(value, NO_OWNER_EVER)
    }

    fn with_owner(value: T, owner: usize) -> Self {
        fence::prepare();
        BiasedLock {
            owner: AtomicUsize::new(owner),
            owner_busy: AtomicBool::new(false),
            other_wants: AtomicBool::new(false),
            others: Mutex::new(()),
            value: UnsafeCell::new(value),
        }
    }

    /// Locks as the owner, in a few plain stores and loads.
    ///
    /// # Safety
    ///
    /// One thread only, the same every time, calls it on this lock (the
    /// owner); other threads lock with [`lock`](Self::lock). Two threads
    /// taking the owner's way at once would both get a guard.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn lock_as_owner(&self) -> Guard<'_, T> {
        if self.owner.load(Ordering::Relaxed) == 0 {
            // The first time: remember the owner, so that its other locks
            // (through `lock`) take the owner's way too.
            self.owner.store(thread_token(), Ordering::Relaxed);
        }
        debug_assert_eq!(
            self.owner.load(Ordering::Relaxed),
            thread_token(),
            "a BiasedLock locked as owner by two threads"
        );
        self.lock_owner()
    }

    /// Locks from any thread: the owner's way for the owner, the slow way
    /// for the others.
    #[inline]
    pub(crate) fn lock(&self) -> Guard<'_, T> {
        if self.owner.load(Ordering::Relaxed) == thread_token() {
            self.lock_owner()
        } else {
            self.lock_other()
        }
    }

    #[inline]
    fn lock_owner(&self) -> Guard<'_, T> {
        loop {
            self.owner_busy.store(true, Ordering::Relaxed);
            fence::light();
            if !self.other_wants.load(Ordering::Acquire) {
                return Guard {
                    lock: self,
                    other: None,
                };
            }
            self.owner_busy.store(false, Ordering::Release);
            let backoff = Backoff::default();
            while self.other_wants.load(Ordering::Acquire) {
                backoff.snooze();
            }
        }
    }

    #[cold]
    fn lock_other(&self) -> Guard<'_, T> {
        let other = self.others.lock();
        if self.owner.load(Ordering::Relaxed) == NO_OWNER_EVER {
            // No owner can ever be inside: the mutex is all it takes.
            return Guard {
                lock: self,
                other: Some(other),
            };
        }
        self.other_wants.store(true, Ordering::Relaxed);
        fence::heavy();
        let backoff = Backoff::default();
        while self.owner_busy.load(Ordering::Acquire) {
            backoff.snooze();
        }
        Guard {
            lock: self,
            other: Some(other),
        }
    }
}

impl<T> std::ops::Deref for Guard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        self.lock.value.with_mut(|value| {
            // SAFETY: this guard exists only while the protocol of the
            // module docs excludes every other guard of the lock; the
            // shared borrow of the guard keeps its mutable uses out for
            // the lifetime of the reference.
            #[allow(unsafe_code)]
            unsafe {
                &*value
            }
        })
    }
}

impl<T> std::ops::DerefMut for Guard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        self.lock.value.with_mut(|value| {
            // SAFETY: this guard exists only while the protocol of the
            // module docs excludes every other guard of the lock, and the
            // mutable borrow of the guard lasts as long as the reference.
            #[allow(unsafe_code)]
            unsafe {
                &mut *value
            }
        })
    }
}

impl<T> Drop for Guard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        match self.other.take() {
            None => self.lock.owner_busy.store(false, Ordering::Release),
            Some(other) => {
                self.lock.other_wants.store(false, Ordering::Release);
                drop(other);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// The owner appends 1..=N while other threads keep taking what it
    /// appended: every value is taken exactly once, none is torn.
    #[test]
    fn owner_and_others_exclude_each_other() {
        const N: u64 = 200_000;
        let lock = Arc::new(BiasedLock::new(Vec::<u64>::new()));
        let done = Arc::new(AtomicBool::new(false));
        let takers: Vec<_> = (0..2)
            .map(|_| {
                let lock = Arc::clone(&lock);
                let done = Arc::clone(&done);
                std::thread::spawn(move || {
                    let mut sum = 0u64;
                    let mut count = 0u64;
                    loop {
                        let finished = done.load(Ordering::Acquire);
                        for v in std::mem::take(&mut *lock.lock()) {
                            sum += v;
                            count += 1;
                        }
                        if finished {
                            return (sum, count);
                        }
                        std::thread::yield_now();
                    }
                })
            })
            .collect();
        let owner = {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || {
                for v in 1..=N {
                    // SAFETY: only this thread locks as the owner.
                    #[allow(unsafe_code)]
                    let mut guard = unsafe { lock.lock_as_owner() };
                    // Two writes a taker must never see apart.
                    guard.push(v);
                    guard.push(0);
                    let last = guard.pop();
                    assert_eq!(last, Some(0));
                }
            })
        };
        owner.join().unwrap();
        done.store(true, Ordering::Release);
        let (sum, count) = takers
            .into_iter()
            .map(|t| t.join().unwrap())
            .fold((0, 0), |(s, c), (s2, c2)| (s + s2, c + c2));
        let rest: u64 = lock.lock().iter().sum();
        let rest_count = lock.lock().len() as u64;
        assert_eq!(count + rest_count, N, "every value taken once");
        assert_eq!(sum + rest, N * (N + 1) / 2);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use loom::sync::Arc;

    use super::*;

    /// The owner appends twice while another thread takes: loom explores
    /// the interleavings; its cell checks that no two accesses overlap.
    #[test]
    fn biased_lock_excludes() {
        loom::model(|| {
            let lock = Arc::new(BiasedLock::new(Vec::<u8>::new()));
            let other = {
                let lock = Arc::clone(&lock);
                loom::thread::spawn(move || std::mem::take(&mut *lock.lock()).len())
            };
            for v in 0..2 {
                // SAFETY: only this thread locks as the owner.
                #[allow(unsafe_code)]
                unsafe { lock.lock_as_owner() }.push(v);
            }
            let taken = other.join().unwrap();
            assert_eq!(taken + lock.lock().len(), 2);
        });
    }
}
