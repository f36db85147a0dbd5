//! Fork-join on the workers: [`fork_join`] runs one closure in the calling
//! task and offers the other as a task that any worker may take, then
//! takes it back if nobody did.
//!
//! The offered closure stays on the caller's stack (it may borrow from
//! it, as `rayon::join`'s closures do). The task only holds an [`Offer`]:
//! a claim state and a type-erased pointer to the closure. Whoever wins
//! the claim runs the closure: the task (`Open → Running → Done`) or the
//! caller taking it back (`Open → Withdrawn`). The caller does not
//! return, nor unwind past its frame, before the closure has run or was
//! withdrawn, so the pointer is only followed while the frame lives; a
//! task that runs after a withdrawal sees the state and touches nothing
//! else. While the task runs elsewhere, the caller helps: it runs other
//! tasks of its scheduler instead of idling.
//!
//! One of the two modules of the scheduler with `unsafe` code (with
//! `pooled.rs`): the pointer to the caller's job. Its protocol is
//! model-checked by loom below.

#![allow(unsafe_code)]

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use crate::sync::atomic::{AtomicUsize, Ordering};
use crate::sync::{Backoff, UnsafeCell};

/// Nobody has claimed the closure yet.
const OPEN: usize = 0;
/// A task claimed it and is running it.
const RUNNING: usize = 1;
/// The task ran it; its result is in the job.
const DONE: usize = 2;
/// The caller took it back (it runs it itself, or drops it).
const WITHDRAWN: usize = 3;

/// A closure and the place for its result, on the forking caller's stack.
struct StackJob<B, R> {
    closure: UnsafeCell<Option<B>>,
    result: UnsafeCell<Option<std::thread::Result<R>>>,
}

impl<B: FnOnce() -> R, R> StackJob<B, R> {
    /// Runs the closure of the job at `data` (a `StackJob<B, R>`) and
    /// stores its result or its panic.
    ///
    /// # Safety
    ///
    /// `data` points to a live `StackJob<B, R>` whose closure nobody else
    /// is taking or running now (the caller won the claim).
    unsafe fn execute(data: *const ()) {
        // SAFETY: `data` is a live `StackJob<B, R>` (the contract).
        let job = unsafe { &*data.cast::<StackJob<B, R>>() };
        // SAFETY: the claim gives this thread the closure and the result.
        let closure = job.closure.with_mut(|c| unsafe { (*c).take() });
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            (closure.expect("a forked closure runs once"))()
        }));
        // SAFETY: as above.
        job.result.with_mut(|r| unsafe { *r = Some(result) });
    }
}

/// What the offering task holds: the claim, and the job as a pointer and
/// the function that runs it.
pub(super) struct Offer {
    state: AtomicUsize,
    data: *const (),
    execute: unsafe fn(*const ()),
}

// SAFETY: `data` is followed only by the claim's winner, while the
// forking caller waits for it (see the module docs); the job's closure and
// result are `Send`, which `fork_join`'s bounds require.
unsafe impl Send for Offer {}
// SAFETY: as for `Send`: shared access is only to the atomic state.
unsafe impl Sync for Offer {}

impl Offer {
    /// Runs the job if nobody claimed it: what the offered task does.
    pub(super) fn run_if_open(&self) {
        if self
            .state
            .compare_exchange(OPEN, RUNNING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: the claim was won, so the job is live (its caller
            // waits for `DONE`) and nobody else runs it.
            unsafe { (self.execute)(self.data) };
            self.state.store(DONE, Ordering::Release);
        }
    }

    /// Takes the job back if nobody claimed it.
    fn withdraw(&self) -> bool {
        self.state
            .compare_exchange(OPEN, WITHDRAWN, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) == DONE
    }
}

/// The caller's side of a fork: makes sure, even when the caller's own
/// closure panics, that the offered job has finished or was withdrawn
/// before the frame that holds it goes away.
struct Forked<'a, B, R> {
    offer: &'a Offer,
    job: &'a StackJob<B, R>,
    settled: bool,
    /// Runs other tasks while the job runs elsewhere; false when there
    /// was none.
    help: &'a dyn Fn() -> bool,
}

impl<B: FnOnce() -> R, R> Forked<'_, B, R> {
    /// Takes the job back and runs it here, or waits until the task that
    /// claimed it has finished; returns its result (resuming its panic).
    fn join(mut self) -> R {
        let result = if self.offer.withdraw() {
            self.settled = true;
            let closure = self.job.closure.with_mut(|c| {
                // SAFETY: withdrawn: nobody else touches the job.
                unsafe { (*c).take() }
            });
            Ok((closure.expect("a withdrawn closure has not run"))())
        } else {
            // Settled only once the job is done: should anything unwind
            // out of the wait, the guard still waits for the job.
            self.wait();
            self.settled = true;
            let result = self.job.result.with_mut(|r| {
                // SAFETY: `DONE` was read with `Acquire`: the task wrote
                // the result before and touches the job no more.
                unsafe { (*r).take() }
            });
            result.expect("a finished job has a result")
        };
        result.unwrap_or_else(|payload: Box<dyn Any + Send>| panic::resume_unwind(payload))
    }
}

impl<B, R> Forked<'_, B, R> {
    /// Waits until the task that claimed the job has finished, running
    /// other tasks meanwhile.
    fn wait(&self) {
        let backoff = Backoff::default();
        while !self.offer.is_done() {
            if !(self.help)() {
                backoff.snooze();
            }
        }
    }
}

impl<B, R> Drop for Forked<'_, B, R> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        // The caller is unwinding: the job must not outlive the frame.
        // Its result (or panic) is dropped with it. No other task runs
        // meanwhile (a panic in one now would abort): the job is claimed,
        // and runs to its end on the thread that claimed it.
        if !self.offer.withdraw() {
            let backoff = Backoff::default();
            while !self.offer.is_done() {
                backoff.snooze();
            }
        }
    }
}

/// Runs `a` in the calling thread and `b` in a task that `offer_task`
/// hands to the scheduler (any worker may take it), returning both
/// results. If no worker took `b` by the time `a` has finished, `b` runs
/// here. `help` runs another task of the scheduler, if there is one,
/// while `b` runs elsewhere. A panic of either closure resumes here once
/// both are settled.
pub(super) fn fork_join_with<A, B, RA, RB>(
    a: A,
    b: B,
    offer_task: impl FnOnce(Arc<Offer>),
    help: &dyn Fn() -> bool,
) -> (RA, RB)
where
    A: FnOnce() -> RA,
    B: FnOnce() -> RB + Send,
    RB: Send,
{
    let job = StackJob {
        closure: UnsafeCell::new(Some(b)),
        result: UnsafeCell::new(None),
    };
    let offer = Arc::new(Offer {
        state: AtomicUsize::new(OPEN),
        data: std::ptr::from_ref(&job).cast(),
        execute: StackJob::<B, RB>::execute,
    });
    let forked = Forked {
        offer: &offer,
        job: &job,
        settled: false,
        help,
    };
    offer_task(Arc::clone(&offer));
    let ra = a();
    let rb = forked.join();
    (ra, rb)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::AtomicU32;

    use super::*;

    #[test]
    fn a_job_nobody_claimed_runs_in_the_caller() {
        let held = std::cell::RefCell::new(None);
        let (a, b) = fork_join_with(
            || 1,
            || 2,
            |offer| *held.borrow_mut() = Some(offer),
            &|| false,
        );
        assert_eq!((a, b), (1, 2));
        let offer = held.borrow_mut().take().unwrap();
        assert_eq!(offer.state.load(Ordering::Relaxed), WITHDRAWN);
        // The task that runs later finds the job withdrawn and leaves it.
        offer.run_if_open();
        assert_eq!(offer.state.load(Ordering::Relaxed), WITHDRAWN);
    }

    #[test]
    fn a_claimed_job_runs_once_in_the_task_and_its_result_comes_back() {
        let ran = AtomicU32::new(0);
        let (a, b) = fork_join_with(
            || 1,
            || {
                ran.fetch_add(1, Ordering::Relaxed);
                String::from("b")
            },
            |offer| {
                std::thread::scope(|s| {
                    s.spawn(move || offer.run_if_open());
                });
            },
            &|| false,
        );
        assert_eq!((a, b.as_str()), (1, "b"));
        assert_eq!(ran.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_panic_in_the_task_resumes_in_the_caller() {
        let out = panic::catch_unwind(|| {
            fork_join_with(
                || 1,
                || -> u32 { panic!("b failed") },
                |offer| {
                    std::thread::scope(|s| {
                        s.spawn(move || offer.run_if_open());
                    });
                },
                &|| false,
            )
        });
        let payload = out.unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"b failed"));
    }

    #[test]
    fn a_panic_in_the_caller_waits_for_the_claimed_job() {
        let ran = AtomicU32::new(0);
        let out = panic::catch_unwind(AssertUnwindSafe(|| {
            std::thread::scope(|s| {
                fork_join_with(
                    || -> u32 { panic!("a failed") },
                    || {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        ran.fetch_add(1, Ordering::Relaxed)
                    },
                    |offer| {
                        // Claimed before `a` runs, finished after it panicked.
                        assert!(
                            offer
                                .state
                                .compare_exchange(
                                    OPEN,
                                    RUNNING,
                                    Ordering::Acquire,
                                    Ordering::Relaxed
                                )
                                .is_ok()
                        );
                        s.spawn(move || {
                            // SAFETY: claimed above; the caller waits for DONE.
                            unsafe { (offer.execute)(offer.data) };
                            offer.state.store(DONE, Ordering::Release);
                        });
                    },
                    &|| false,
                )
            })
        }));
        assert!(out.is_err());
        assert_eq!(
            ran.load(Ordering::Relaxed),
            1,
            "the job finished before the frame went"
        );
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use loom::sync::Arc as LoomArc;

    use super::*;

    /// The task claims the job while the caller, having run its own
    /// closure, takes it back: in every interleaving the job runs exactly
    /// once and the caller gets its result.
    #[test]
    fn loom_a_forked_job_runs_once_and_its_result_reaches_the_caller() {
        loom::model(|| {
            let runs = LoomArc::new(loom::sync::atomic::AtomicUsize::new(0));
            let counted = LoomArc::clone(&runs);
            let mut thief = None;
            let (a, b) = fork_join_with(
                || 1,
                move || counted.fetch_add(1, Ordering::Relaxed) + 10,
                |offer| {
                    thief = Some(loom::thread::spawn(move || offer.run_if_open()));
                },
                &|| false,
            );
            assert_eq!((a, b), (1, 10));
            thief.unwrap().join().unwrap();
            assert_eq!(runs.load(Ordering::Relaxed), 1);
        });
    }
}
