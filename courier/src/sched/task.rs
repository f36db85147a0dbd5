//! A task: one block holding a future, then its output, with the state a
//! scheduler and a handle share. [`spawn`] makes one and returns its two
//! owners: the [`Runnable`] a scheduler queues and runs, and the [`Task`]
//! a [`JoinHandle`](super::JoinHandle) awaits.
//!
//! Why Courier's own and not `async_task`'s: a queued spawn + run + await
//! of an empty task took ~720 instructions, ~210 of them glibc's `malloc`
//! and `free` of the task's allocation (a fan-out of a thousand tasks alive
//! at once overflows its per-thread cache) and ~140 `async_task`'s state
//! changes. Here the block comes from the thread's pool (`pooled.rs`), and
//! a task that runs once to its end and whose handle takes its output
//! makes four atomic read-modify-writes: run, complete, and one reference
//! dropped by each of its two owners. With it an empty task's spawn + run +
//! await is ~480 instructions, 44 ns against 61 with glibc and 42 against
//! 48 with mimalloc (BENCHMARKS.md, issue #16, seventh part).
//!
//! # The state
//!
//! A word of flags (`state`) and a count of owners (`refs`), apart:
//!
//! - `SCHEDULED`: a [`Runnable`] exists and has not started its poll, or a
//!   wake came during the poll (the runner queues the task again after
//!   it). While a `Runnable` exists, `SCHEDULED` is set and `RUNNING` is
//!   not.
//! - `RUNNING`: a poll is under way.
//! - `COMPLETED`: the output (or the poll's panic) is in the block; the
//!   future is gone.
//! - `CLOSED`: the future was dropped unfinished: its `Runnable` was
//!   dropped unrun (its scheduler shut down).
//! - `AWAITER`: a handle's waker is in `awaiter`.
//! - `REGISTERING`: the handle is writing `awaiter`; whoever completes or
//!   closes the task meanwhile leaves the waker alone, and the handle,
//!   seeing the task finished once it is done writing, returns the output
//!   itself.
//!
//! - `DETACHED`: the handle is gone (or there never was one): whoever
//!   ends the task drops the output at once, not with the block (an
//!   output holding one of its task's wakers would otherwise keep the
//!   block alive for ever).
//!
//! - `CANCELLED`: the task was left unfinished by its last owner (no
//!   handle, no waker, no `Runnable`): it is scheduled once more, and its
//!   `Runnable` drops the future instead of polling it.
//!
//! `refs` counts the owners of the block: the `Runnable` (at most one), the
//! handle, and every [`Waker`]; the last to go gives the block back. If the
//! task had not ended, that owner was a waker, dropped wherever its holder
//! drops it (under the holder's lock, perhaps, which the future's own drop
//! may take to deregister): the future is not dropped there but by the
//! task, scheduled once more with `CANCELLED`, as `async_task` does. Wakes set `SCHEDULED` with one
//! `fetch_or`: the waker that finds none of `SCHEDULED`, `RUNNING`,
//! `COMPLETED`, `CLOSED` set makes the `Runnable` (from its own reference
//! when woken by value) and hands it to the task's schedule function.
//!
//! Panics in a poll are caught and kept as the output: awaiting the handle
//! resumes them, as `async_task`'s `propagate_panic` did.
//!
//! The protocol is model-checked under loom (the `loom_` tests below) and
//! the single-threaded tests run under miri (`cargo +nightly miri test -p
//! courier --lib task::`).

#![allow(unsafe_code)]

use std::future::Future;
use std::marker::PhantomData;
use std::mem::{self, ManuallyDrop};
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use super::pooled;
use crate::sync::UnsafeCell;
use crate::sync::atomic::{AtomicUsize, Ordering, fence};

const SCHEDULED: usize = 1 << 0;
const RUNNING: usize = 1 << 1;
const COMPLETED: usize = 1 << 2;
const CLOSED: usize = 1 << 3;
const AWAITER: usize = 1 << 4;
const REGISTERING: usize = 1 << 5;
const DETACHED: usize = 1 << 6;
const CANCELLED: usize = 1 << 7;

/// A task's output, or the payload of the panic that ended it.
type Output<T> = std::thread::Result<T>;

/// The part of a task's block every owner reads, whatever its future.
struct Header {
    state: AtomicUsize,
    refs: AtomicUsize,
    /// The waker of the handle awaiting the output (see `AWAITER`).
    awaiter: UnsafeCell<Option<Waker>>,
    vtable: &'static Vtable,
}

/// What depends on the future's and the schedule function's types.
struct Vtable {
    /// Hands a `Runnable` (one reference) to the schedule function.
    schedule: unsafe fn(NonNull<Header>),
    /// Polls the future once (the `Runnable`'s reference is consumed).
    run: unsafe fn(NonNull<Header>),
    /// Drops the future of a `Runnable` dropped unrun (its reference too).
    close: unsafe fn(NonNull<Header>),
    /// Moves the output into `*mut Option<Output<T>>`, if it is there.
    take_output: unsafe fn(NonNull<Header>, *mut ()),
    /// Drops what the block holds and gives the block back.
    destroy: unsafe fn(NonNull<Header>),
}

/// What the block holds after its header.
enum Stage<F: Future> {
    Pending(F),
    Done(Output<F::Output>),
    /// Dropped unrun, or the output was taken.
    Gone,
}

/// A task's block: the header first, so that a pointer to one is a
/// pointer to the other.
#[repr(C)]
struct Cell<F: Future, S> {
    header: Header,
    schedule: S,
    stage: UnsafeCell<Stage<F>>,
}

/// Makes a task of `future`, which `schedule` queues each time it is woken
/// (a `Copy` function: it is called on a copy, since the task it queues
/// may end and free its block before the call returns).
/// The task is scheduled already: the caller queues the `Runnable`
/// returned (or drops it, which drops the future); the [`Task`] is the
/// handle's side (dropping it detaches the task).
pub(crate) fn spawn<F, S>(future: F, schedule: S) -> (Runnable, Task<F::Output>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Fn(Runnable) + Copy + Send + Sync + 'static,
{
    let header = Cell::<F, S>::allocate(Stage::Pending(future), schedule, SCHEDULED, 2);
    (
        Runnable { header },
        Task {
            header,
            output: PhantomData,
        },
    )
}

/// [`spawn`] without a handle: the output is dropped when the task ends.
pub(crate) fn spawn_detached<F, S>(future: F, schedule: S) -> Runnable
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Fn(Runnable) + Copy + Send + Sync + 'static,
{
    Runnable {
        header: Cell::<F, S>::allocate(Stage::Pending(future), schedule, SCHEDULED | DETACHED, 1),
    }
}

/// The handle's side of a task that has already ended with `output` (a
/// child run inline that panicked: its handle resumes the panic where it
/// is awaited, as for a task's). Nothing runs or schedules it.
pub(crate) fn finished<T: Send + 'static>(output: Output<T>) -> Task<T> {
    let header = Cell::<std::future::Pending<T>, fn(Runnable)>::allocate(
        Stage::Done(output),
        drop,
        COMPLETED,
        1,
    );
    Task {
        header,
        output: PhantomData,
    }
}

impl<F, S> Cell<F, S>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Fn(Runnable) + Copy + Send + Sync + 'static,
{
    const VTABLE: Vtable = Vtable {
        schedule: Self::schedule,
        run: Self::run,
        close: Self::close,
        take_output: Self::take_output,
        destroy: Self::destroy,
    };

    /// A block from the thread's pool holding a task at `stage`, in `state`,
    /// with `refs` owners.
    fn allocate(stage: Stage<F>, schedule: S, state: usize, refs: usize) -> NonNull<Header> {
        let cell = pooled::alloc::<Self>();
        // SAFETY: a fresh block, large and aligned enough for a `Self`.
        unsafe {
            cell.as_ptr().write(Cell {
                header: Header {
                    state: AtomicUsize::new(state),
                    refs: AtomicUsize::new(refs),
                    awaiter: UnsafeCell::new(None),
                    vtable: &Self::VTABLE,
                },
                schedule,
                stage: UnsafeCell::new(stage),
            })
        };
        cell.cast()
    }

    /// # Safety (of every function of the vtable)
    ///
    /// `header` is the header of a live `Cell<F, S>` and the caller owns a
    /// reference to it, which the function consumes where its doc says so.
    unsafe fn from_header<'a>(header: NonNull<Header>) -> &'a Self {
        // SAFETY: the caller's word; a shared reference: every field
        // written after the block was made is atomic or in an `UnsafeCell`.
        unsafe { header.cast::<Self>().as_ref() }
    }

    /// Takes what the stage holds, leaving it `Gone`.
    ///
    /// # Safety
    ///
    /// The stage is the caller's alone: it runs the task (RUNNING), holds
    /// its `Runnable` unrun, is its only owner, or is its handle and read
    /// COMPLETED or CLOSED with `Acquire`.
    unsafe fn take_stage(&self) -> Stage<F> {
        self.stage.with_mut(|stage| {
            // SAFETY: the caller's word.
            unsafe { mem::replace(&mut *stage, Stage::Gone) }
        })
    }

    unsafe fn schedule(header: NonNull<Header>) {
        // SAFETY: the caller's word.
        let cell = unsafe { Self::from_header(header) };
        // A copy, called from here: the `Runnable` handed to it may run,
        // end and free the block before the call returns.
        let schedule = cell.schedule;
        schedule(Runnable { header });
    }

    unsafe fn run(header: NonNull<Header>) {
        // SAFETY: the caller's word: the `Runnable`'s reference.
        let cell = unsafe { Self::from_header(header) };
        // SCHEDULED was set and RUNNING not (a `Runnable` existed).
        let prior = cell
            .header
            .state
            .fetch_xor(SCHEDULED | RUNNING, Ordering::Acquire);
        if prior & CANCELLED != 0 {
            // SAFETY: the `Runnable`'s reference, the task's only owner
            // (see `drop_ref`).
            unsafe { Self::cancel(header) };
            return;
        }
        // A waker that does not own a reference: the `Runnable`'s keeps the
        // block alive while the poll runs; a clone takes its own.
        let waker = ManuallyDrop::new(
            // SAFETY: the vtable's contract holds for a task's header.
            unsafe { Waker::from_raw(RawWaker::new(header.as_ptr().cast(), &WAKER_VTABLE)) },
        );
        let mut cx = Context::from_waker(&waker);
        let polled = cell.stage.with_mut(|stage| {
            panic::catch_unwind(AssertUnwindSafe(|| {
                // SAFETY: RUNNING: only this thread touches the stage; the
                // future is pinned in the block, which does not move.
                let Stage::Pending(future) = (unsafe { &mut *stage }) else {
                    unreachable!("a task run after it ended")
                };
                // SAFETY: as said: the block does not move.
                unsafe { Pin::new_unchecked(future) }.poll(&mut cx)
            }))
        });
        let output = match polled {
            Ok(Poll::Pending) => {
                let prior = cell.header.state.fetch_and(!RUNNING, Ordering::AcqRel);
                if prior & SCHEDULED != 0 {
                    // Woken during the poll: queued again, with this
                    // `Runnable`'s reference.
                    // SAFETY: the reference is handed on.
                    unsafe { Self::schedule(header) };
                } else {
                    // SAFETY: the `Runnable`'s reference, given up.
                    unsafe { drop_ref(header) };
                }
                return;
            }
            Ok(Poll::Ready(output)) => Ok(output),
            Err(payload) => Err(payload),
        };
        // The future ends here, as it would in a task of its own; a panic
        // in its drop becomes the task's if its poll had not panicked.
        // SAFETY: still RUNNING: the stage is this thread's.
        let future = unsafe { cell.take_stage() };
        let dropped = panic::catch_unwind(AssertUnwindSafe(|| drop(future)));
        let output = match (output, dropped) {
            (output, Ok(())) => output,
            (Ok(output), Err(payload)) => {
                drop_quietly(output);
                Err(payload)
            }
            (Err(payload), Err(second)) => {
                drop_quietly(second);
                Err(payload)
            }
        };
        cell.stage.with_mut(|stage| {
            // SAFETY: as above; `Gone` needs no drop.
            unsafe { stage.write(Stage::Done(output)) }
        });
        // RUNNING was set and COMPLETED not.
        let prior = cell
            .header
            .state
            .fetch_xor(RUNNING | COMPLETED, Ordering::AcqRel);
        if prior & DETACHED != 0 {
            // Nobody will take the output: drop it now. The handle, gone,
            // no longer touches the stage.
            // SAFETY: as said.
            drop_quietly(unsafe { cell.take_stage() });
        }
        // SAFETY: this thread still owns the `Runnable`'s reference.
        unsafe { end(header, prior) };
    }

    /// Drops the future of a task its last owner left unfinished.
    ///
    /// # Safety
    ///
    /// The caller owns the only reference (a `Runnable` of a `CANCELLED`
    /// task), and gives it up.
    unsafe fn cancel(header: NonNull<Header>) {
        // SAFETY: the caller's word.
        let cell = unsafe { Self::from_header(header) };
        // SAFETY: the only owner.
        drop_quietly(unsafe { cell.take_stage() });
        cell.header
            .state
            .store(CLOSED | DETACHED, Ordering::Relaxed);
        // SAFETY: the only reference: the block goes.
        unsafe { drop_ref(header) };
    }

    unsafe fn close(header: NonNull<Header>) {
        // SAFETY: the caller's word: the `Runnable`'s reference.
        let cell = unsafe { Self::from_header(header) };
        // SCHEDULED and not RUNNING: nobody else touches the stage. A
        // panic in a future dropped at shutdown has nowhere to go.
        // SAFETY: as said.
        drop_quietly(unsafe { cell.take_stage() });
        let prior = cell
            .header
            .state
            .fetch_xor(SCHEDULED | CLOSED, Ordering::AcqRel);
        // SAFETY: this thread still owns the `Runnable`'s reference.
        unsafe { end(header, prior) };
    }

    unsafe fn take_output(header: NonNull<Header>, out: *mut ()) {
        // SAFETY: the caller's word (the handle's reference); COMPLETED or
        // CLOSED was read with `Acquire`: nobody else touches the stage.
        let cell = unsafe { Self::from_header(header) };
        // SAFETY: as said.
        if let Stage::Done(output) = unsafe { cell.take_stage() } {
            // SAFETY: the caller passes an `Option<Output<F::Output>>`.
            unsafe { *out.cast::<Option<Output<F::Output>>>() = Some(output) };
        }
    }

    unsafe fn destroy(header: NonNull<Header>) {
        let cell = header.cast::<Self>();
        // SAFETY: the last reference is gone: nothing else can reach the
        // block. What it holds is dropped once, here; a panic in the drop of
        // a future nobody could wake, or of an output nobody took, has
        // nowhere to go.
        let _ = panic::catch_unwind(AssertUnwindSafe(|| unsafe {
            ptr::drop_in_place(cell.as_ptr())
        }));
        // SAFETY: allocated by `pooled::alloc`; what it held is gone.
        unsafe { pooled::free(cell) };
    }
}

/// After the change from `prior` that ended the task (COMPLETED or
/// CLOSED): gives up the caller's reference, then wakes the handle's
/// waker if one was registered (taken out first: a panic in its wake
/// leaks nothing, and the waker needs no block).
///
/// # Safety
///
/// The caller made that change and owns a reference, which it gives up.
unsafe fn end(header: NonNull<Header>, prior: usize) {
    // SAFETY: the caller's word.
    let awaiter = unsafe { take_awaiter(header, prior) };
    // SAFETY: the caller's reference, given up.
    unsafe { drop_ref(header) };
    if let Some(awaiter) = awaiter {
        awaiter.wake();
    }
}

/// Drops `value` where a panic in its drop has nowhere to go (the task
/// has its outcome already, or nobody will take it): the panic is caught
/// and dropped.
fn drop_quietly<T>(value: T) {
    let _ = panic::catch_unwind(AssertUnwindSafe(|| drop(value)));
}

/// Takes the handle's waker, if one is registered and not being written,
/// after a change from `prior` that set COMPLETED or CLOSED: the caller
/// wakes it.
///
/// # Safety
///
/// The caller set COMPLETED or CLOSED with the change that returned
/// `prior`, and owns a reference.
unsafe fn take_awaiter(header: NonNull<Header>, prior: usize) -> Option<Waker> {
    if prior & (AWAITER | REGISTERING) != AWAITER {
        return None;
    }
    // SAFETY: the caller's reference keeps the block; the handle wrote the
    // waker before it set AWAITER (read here with `Acquire`), and cannot
    // write it again: it registers only while neither flag is set.
    let header = unsafe { header.as_ref() };
    header.awaiter.with_mut(|awaiter| {
        // SAFETY: as said.
        unsafe { (*awaiter).take() }
    })
}

/// Drops a reference; the last one destroys the task.
///
/// # Safety
///
/// The caller owns a reference to a live task, and gives it up.
unsafe fn drop_ref(header: NonNull<Header>) {
    // SAFETY: the caller's reference keeps the block until this decrement.
    let (refs, state, vtable) = unsafe {
        let h = header.as_ref();
        (&h.refs, &h.state, h.vtable)
    };
    if refs.fetch_sub(1, Ordering::Release) != 1 {
        return;
    }
    // The other owners' last accesses happen before what follows (as in
    // `Arc`'s drop).
    fence(Ordering::Acquire);
    if state.load(Ordering::Relaxed) & (COMPLETED | CLOSED) == 0 {
        // Unfinished, with no owner left: nothing else can reach the task,
        // so it is this thread's; scheduled once more to drop its future
        // (see `CANCELLED`), as a `Runnable` that owns it.
        refs.store(1, Ordering::Relaxed);
        state.store(SCHEDULED | DETACHED | CANCELLED, Ordering::Relaxed);
        // SAFETY: the `Runnable`'s reference, handed on.
        unsafe { (vtable.schedule)(header) };
        return;
    }
    // SAFETY: the last reference.
    unsafe { (vtable.destroy)(header) };
}

/// Takes one more reference, as `Arc::clone` does (aborting far before
/// the count could wrap).
///
/// # Safety
///
/// The caller owns a reference to a live task.
unsafe fn add_ref(header: NonNull<Header>) {
    // SAFETY: the caller's word.
    let refs = unsafe { &header.as_ref().refs };
    if refs.fetch_add(1, Ordering::Relaxed) > isize::MAX as usize {
        std::process::abort();
    }
}

/// Marks the task woken: whether the caller is the one who must make its
/// `Runnable` and schedule it (nothing had it queued, running or ended).
///
/// # Safety
///
/// The caller owns a reference to a live task.
unsafe fn mark_woken(header: NonNull<Header>) -> bool {
    // SAFETY: the caller's word.
    let state = unsafe { &header.as_ref().state };
    // Release: what the waker did before the wake is seen by the poll it
    // causes (the runner's `Acquire` on the same word).
    let prior = state.fetch_or(SCHEDULED, Ordering::AcqRel);
    prior & (SCHEDULED | RUNNING | COMPLETED | CLOSED) == 0
}

/// The wakers of every task: a pointer to its header, owning a reference.
static WAKER_VTABLE: RawWakerVTable =
    RawWakerVTable::new(waker_clone, waker_wake, waker_wake_by_ref, waker_drop);

unsafe fn waker_clone(data: *const ()) -> RawWaker {
    // SAFETY: `data` is the header of a live task whose reference the
    // waker being cloned owns (or the running `Runnable`, for the poll's).
    unsafe { add_ref(NonNull::new_unchecked(data.cast_mut().cast())) };
    RawWaker::new(data, &WAKER_VTABLE)
}

unsafe fn waker_wake(data: *const ()) {
    // SAFETY: the waker's reference, consumed here: handed to the new
    // `Runnable`, or dropped.
    unsafe {
        let header = NonNull::new_unchecked(data.cast_mut().cast::<Header>());
        if mark_woken(header) {
            (header.as_ref().vtable.schedule)(header);
        } else {
            drop_ref(header);
        }
    }
}

unsafe fn waker_wake_by_ref(data: *const ()) {
    // SAFETY: the waker keeps its reference; a new `Runnable` gets one of
    // its own.
    unsafe {
        let header = NonNull::new_unchecked(data.cast_mut().cast::<Header>());
        if mark_woken(header) {
            add_ref(header);
            (header.as_ref().vtable.schedule)(header);
        }
    }
}

unsafe fn waker_drop(data: *const ()) {
    // SAFETY: the waker's reference, given up.
    unsafe { drop_ref(NonNull::new_unchecked(data.cast_mut().cast())) };
}

/// A task to poll: what a scheduler queues. Running it polls the future
/// once; dropping it unrun drops the future (the handle's await then
/// panics: the task never finished).
pub(crate) struct Runnable {
    header: NonNull<Header>,
}

// SAFETY: a task's future and schedule function are `Send` (and the
// function `Sync`: wakers call it from any thread), as `spawn` requires.
unsafe impl Send for Runnable {}

impl Runnable {
    /// Polls the task once, here. If it waits, a wake queues it again (a
    /// wake during this poll queues it once the poll returns).
    #[inline]
    pub(crate) fn run(self) {
        let header = ManuallyDrop::new(self).header;
        // SAFETY: this `Runnable`'s reference, handed to `run`.
        unsafe { (header.as_ref().vtable.run)(header) }
    }
}

impl Drop for Runnable {
    fn drop(&mut self) {
        // SAFETY: this `Runnable`'s reference, handed to `close`.
        unsafe { (self.header.as_ref().vtable.close)(self.header) }
    }
}

impl std::fmt::Debug for Runnable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runnable").finish_non_exhaustive()
    }
}

/// The handle's side of a task: wait for it to finish, then take its
/// output. Dropping it detaches the task (its output, if any, is dropped).
pub(crate) struct Task<T> {
    header: NonNull<Header>,
    output: PhantomData<T>,
}

// SAFETY: a `Task<T>` moves a `T` to the thread that takes it (`T: Send`);
// `&Task<T>` only reads the state word.
unsafe impl<T: Send> Send for Task<T> {}
// SAFETY: as said.
unsafe impl<T: Send> Sync for Task<T> {}

impl<T> Task<T> {
    fn header(&self) -> &Header {
        // SAFETY: the handle's reference keeps the block.
        unsafe { self.header.as_ref() }
    }

    /// Whether the task has ended (completed, panicked or was dropped
    /// unfinished): [`into_output`](Self::into_output) will not wait.
    pub(crate) fn is_finished(&self) -> bool {
        self.header().state.load(Ordering::Acquire) & (COMPLETED | CLOSED) != 0
    }

    /// Ready once the task has ended; until then the waker of `cx` is
    /// woken when it does.
    pub(crate) fn poll_finished(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let header = self.header();
        let mut state = header.state.load(Ordering::Acquire);
        loop {
            if state & (COMPLETED | CLOSED) != 0 {
                return Poll::Ready(());
            }
            match header.state.compare_exchange_weak(
                state,
                state | REGISTERING,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => state = now,
            }
        }
        header.awaiter.with_mut(|awaiter| {
            // SAFETY: REGISTERING: the awaiter is this thread's (a runner
            // completing the task meanwhile leaves it alone).
            let awaiter = unsafe { &mut *awaiter };
            if !awaiter.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *awaiter = Some(cx.waker().clone());
            }
        });
        // Release: the waker written above is seen by the runner that reads
        // AWAITER.
        let prior = header
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                Some((s | AWAITER) & !REGISTERING)
            })
            .unwrap_or_else(|s| s);
        if prior & (COMPLETED | CLOSED) != 0 {
            // Ended while the waker was written: no one will wake it (it
            // is dropped with the block).
            return Poll::Ready(());
        }
        Poll::Pending
    }

    /// The output of a finished task; resumes its panic if it panicked.
    ///
    /// # Panics
    ///
    /// If the task is not finished ([`poll_finished`](Self::poll_finished)
    /// returns `Ready` once it is), or it never finished: its runnable was
    /// dropped unrun, which its scheduler does when it shuts down.
    pub(crate) fn into_output(self) -> T {
        assert!(self.is_finished(), "the output of a task still running");
        let this = ManuallyDrop::new(self);
        let mut output: Option<Output<T>> = None;
        // SAFETY: finished (read with `Acquire`); a `T`'s task; then the
        // handle's reference, given up.
        unsafe {
            (this.header().vtable.take_output)(this.header, (&raw mut output).cast());
            drop_ref(this.header);
        }
        match output {
            Some(Ok(output)) => output,
            Some(Err(payload)) => panic::resume_unwind(payload),
            None => panic!("awaited a task that was dropped unfinished: its runtime shut down"),
        }
    }
}

impl<T> Drop for Task<T> {
    #[inline]
    fn drop(&mut self) {
        self.detach();
    }
}

impl<T> Task<T> {
    /// What dropping the handle does, out of line (the drop of every
    /// `JoinHandle`, most of them holding no task, stays small).
    #[inline(never)]
    fn detach(&mut self) {
        // From now on whoever ends the task drops its output; if it has
        // ended, this handle does.
        let prior = self.header().state.fetch_or(DETACHED, Ordering::AcqRel);
        let mut output: Option<Output<T>> = None;
        if prior & COMPLETED != 0 {
            // SAFETY: completed (read with `Acquire`), a `T`'s task.
            unsafe { (self.header().vtable.take_output)(self.header, (&raw mut output).cast()) };
        }
        // SAFETY: the handle's reference, given up before the output is
        // dropped (its drop may panic).
        unsafe { drop_ref(self.header) };
        drop(output);
    }
}

impl<T> std::fmt::Debug for Task<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::rc::Rc;
    use std::sync::atomic::AtomicUsize as StdAtomicUsize;
    use std::sync::{Arc, Mutex};

    use super::*;

    thread_local! {
        /// The runnables scheduled on this thread (each test runs on a
        /// thread of its own).
        static QUEUED: std::cell::RefCell<VecDeque<Runnable>> =
            const { std::cell::RefCell::new(VecDeque::new()) };
    }

    /// The calling thread's queue of runnables: the schedule function
    /// pushes, the test runs.
    #[derive(Clone, Copy, Default)]
    struct Queue;

    impl Queue {
        fn schedule(&self) -> fn(Runnable) {
            |runnable| QUEUED.with(|q| q.borrow_mut().push_back(runnable))
        }

        fn pop(&self) -> Option<Runnable> {
            QUEUED.with(|q| q.borrow_mut().pop_front())
        }

        fn len(&self) -> usize {
            QUEUED.with(|q| q.borrow().len())
        }
    }

    /// Counts its drops.
    struct Counted(Arc<StdAtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether a gate is open, and the waker of the task waiting at it.
    type Latch = Arc<Mutex<(bool, Option<Waker>)>>;

    /// A future that waits until `open`, keeping the last waker it got.
    struct Gate {
        open: Latch,
    }

    impl Future for Gate {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            let mut state = self.open.lock().unwrap();
            if state.0 {
                return Poll::Ready(());
            }
            state.1 = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    fn gate() -> (Gate, Latch) {
        let open = Arc::new(Mutex::new((false, None)));
        (
            Gate {
                open: Arc::clone(&open),
            },
            open,
        )
    }

    fn open(gate: &Mutex<(bool, Option<Waker>)>) {
        let waker = {
            let mut state = gate.lock().unwrap();
            state.0 = true;
            state.1.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Polls `task` once with a waker that counts its wakes.
    fn poll_counting<T>(task: &mut Task<T>, wakes: &Arc<StdAtomicUsize>) -> Poll<()> {
        struct Counting(Arc<StdAtomicUsize>);
        impl std::task::Wake for Counting {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let waker = Waker::from(Arc::new(Counting(Arc::clone(wakes))));
        task.poll_finished(&mut Context::from_waker(&waker))
    }

    #[test]
    fn a_task_runs_once_and_its_handle_takes_the_output() {
        let queue = Queue;
        let (runnable, task) = spawn(async { 6 * 7 }, queue.schedule());
        assert!(!task.is_finished());
        runnable.run();
        assert!(task.is_finished());
        assert_eq!(task.into_output(), 42);
        assert_eq!(queue.len(), 0, "nothing woke it");
    }

    #[test]
    fn a_waiting_task_is_queued_once_per_wake_and_wakes_its_awaiter() {
        let queue = Queue;
        let (future, gate) = gate();
        let (runnable, mut task) = spawn(
            async move {
                future.await;
                "done"
            },
            queue.schedule(),
        );
        let wakes = Arc::new(StdAtomicUsize::new(0));
        assert_eq!(poll_counting(&mut task, &wakes), Poll::Pending);
        runnable.run();
        assert_eq!(queue.len(), 0, "waiting, not queued");
        assert_eq!(poll_counting(&mut task, &wakes), Poll::Pending);
        open(&gate);
        assert_eq!(queue.len(), 1, "the wake queued it");
        assert_eq!(wakes.load(Ordering::Relaxed), 0);
        queue.pop().unwrap().run();
        assert_eq!(
            wakes.load(Ordering::Relaxed),
            1,
            "the awaiter was woken once"
        );
        assert_eq!(poll_counting(&mut task, &wakes), Poll::Ready(()));
        assert_eq!(task.into_output(), "done");
    }

    #[test]
    fn a_wake_during_the_poll_queues_the_task_after_it() {
        let queue = Queue;
        let mut polls = 0;
        let (runnable, task) = spawn(
            std::future::poll_fn(move |cx| {
                polls += 1;
                if polls < 3 {
                    cx.waker().wake_by_ref();
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Poll::Ready(polls)
            }),
            queue.schedule(),
        );
        runnable.run();
        assert_eq!(queue.len(), 1, "two wakes in a poll queue it once");
        queue.pop().unwrap().run();
        assert_eq!(queue.len(), 1);
        queue.pop().unwrap().run();
        assert_eq!(queue.len(), 0);
        assert_eq!(task.into_output(), 3);
    }

    #[test]
    fn a_panic_is_kept_and_resumed_where_the_output_is_taken() {
        let queue = Queue;
        let (runnable, task) = spawn(async { panic!("the child") }, queue.schedule());
        runnable.run();
        let payload = panic::catch_unwind(AssertUnwindSafe(|| task.into_output())).unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"the child"));
    }

    #[test]
    fn a_runnable_dropped_unrun_drops_the_future_and_the_handle_says_so() {
        let queue = Queue;
        let drops = Arc::new(StdAtomicUsize::new(0));
        let held = Counted(Arc::clone(&drops));
        let (runnable, mut task) = spawn(async move { drop(held) }, queue.schedule());
        let wakes = Arc::new(StdAtomicUsize::new(0));
        assert_eq!(poll_counting(&mut task, &wakes), Poll::Pending);
        drop(runnable);
        assert_eq!(drops.load(Ordering::Relaxed), 1, "the future was dropped");
        assert_eq!(wakes.load(Ordering::Relaxed), 1, "the awaiter was woken");
        assert!(task.is_finished());
        let payload = panic::catch_unwind(AssertUnwindSafe(|| task.into_output())).unwrap_err();
        let message = payload.downcast_ref::<&str>().unwrap();
        assert!(message.contains("dropped unfinished"), "{message}");
    }

    #[test]
    fn a_detached_tasks_output_is_dropped_once() {
        let queue = Queue;
        let drops = Arc::new(StdAtomicUsize::new(0));
        let out = Counted(Arc::clone(&drops));
        let (runnable, task) = spawn(async move { out }, queue.schedule());
        drop(task);
        runnable.run();
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        // Finished first, then detached.
        let out = Counted(Arc::clone(&drops));
        let (runnable, task) = spawn(async move { out }, queue.schedule());
        runnable.run();
        assert_eq!(drops.load(Ordering::Relaxed), 1, "kept for the handle");
        drop(task);
        assert_eq!(drops.load(Ordering::Relaxed), 2);
        // Without a handle from the start.
        let out = Counted(Arc::clone(&drops));
        spawn_detached(async move { out }, queue.schedule()).run();
        assert_eq!(drops.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn a_waiting_task_nobody_can_wake_is_dropped_with_its_last_waker() {
        let queue = Queue;
        let drops = Arc::new(StdAtomicUsize::new(0));
        let held = Counted(Arc::clone(&drops));
        let (future, gate) = gate();
        let (runnable, task) = spawn(
            async move {
                let _held = held;
                future.await
            },
            queue.schedule(),
        );
        drop(task);
        runnable.run();
        assert_eq!(
            drops.load(Ordering::Relaxed),
            0,
            "its waker may still wake it"
        );
        let waker = gate.lock().unwrap().1.take().unwrap();
        let clone = waker.clone();
        drop(waker);
        assert_eq!(drops.load(Ordering::Relaxed), 0);
        drop(clone);
        // Not in the waker's drop (its holder may hold a lock the future's
        // drop takes), but by the task, scheduled once more.
        assert_eq!(drops.load(Ordering::Relaxed), 0);
        assert_eq!(queue.len(), 1);
        queue.pop().unwrap().run();
        assert_eq!(drops.load(Ordering::Relaxed), 1, "gone with its last owner");
        assert_eq!(queue.len(), 0);
    }

    #[test]
    fn a_future_is_not_dropped_under_the_lock_of_the_last_wakers_holder() {
        let queue = Queue;
        /// Takes the lock of the slot its waker is in, to deregister.
        struct Deregister(Latch, Arc<StdAtomicUsize>);
        impl Drop for Deregister {
            fn drop(&mut self) {
                match self.0.try_lock() {
                    Ok(_) => self.1.fetch_add(1, Ordering::Relaxed),
                    Err(_) => panic!("dropped under the slot's lock"),
                };
            }
        }
        let (future, slot) = gate();
        let dropped = Arc::new(StdAtomicUsize::new(0));
        let deregister = Deregister(Arc::clone(&slot), Arc::clone(&dropped));
        let (runnable, task) = spawn(
            async move {
                let _deregister = deregister;
                future.await
            },
            queue.schedule(),
        );
        drop(task);
        runnable.run();
        // Another waiter's waker replaces the task's under the lock.
        slot.lock().unwrap().1 = Some(Waker::noop().clone());
        assert_eq!(dropped.load(Ordering::Relaxed), 0);
        queue.pop().expect("scheduled to drop its future").run();
        assert_eq!(dropped.load(Ordering::Relaxed), 1);
    }

    /// Panics when dropped (unless already unwinding).
    #[derive(Debug)]
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                panic!("dropped");
            }
        }
    }

    #[test]
    fn an_output_and_a_future_whose_drops_panic_still_end_the_task() {
        let queue = Queue;
        let held = PanicsOnDrop;
        let (runnable, task) = spawn(
            async move {
                let _held = &held;
                PanicsOnDrop
            },
            queue.schedule(),
        );
        runnable.run();
        assert!(task.is_finished());
        let payload = panic::catch_unwind(AssertUnwindSafe(|| task.into_output())).unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"dropped"));
    }

    /// Miri finds the block leaked if a panic skips a reference's drop.
    #[test]
    fn panics_in_the_awaiters_wake_and_in_the_outputs_drop_leak_nothing() {
        let queue = Queue;
        struct Panics;
        impl std::task::Wake for Panics {
            fn wake(self: Arc<Self>) {
                panic!("wake");
            }
        }
        let (runnable, mut task) = spawn(async { 1 }, queue.schedule());
        let waker = Waker::from(Arc::new(Panics));
        assert!(
            task.poll_finished(&mut Context::from_waker(&waker))
                .is_pending()
        );
        assert!(panic::catch_unwind(AssertUnwindSafe(|| runnable.run())).is_err());
        assert_eq!(task.into_output(), 1);
        let (runnable, task) = spawn(async { PanicsOnDrop }, queue.schedule());
        runnable.run();
        assert!(panic::catch_unwind(AssertUnwindSafe(|| drop(task))).is_err());
    }

    #[test]
    fn wakes_after_the_end_do_nothing() {
        let queue = Queue;
        let kept = Rc::new(RefCell::new(None::<Waker>));
        let (future, gate) = gate();
        let (runnable, task) = spawn(future, queue.schedule());
        runnable.run();
        *kept.borrow_mut() = gate.lock().unwrap().1.clone();
        open(&gate);
        queue.pop().unwrap().run();
        let waker = kept.borrow_mut().take().unwrap();
        waker.wake_by_ref();
        waker.wake();
        assert_eq!(queue.len(), 0);
        task.into_output();
    }

    #[test]
    fn large_and_over_aligned_futures_work_too() {
        let queue = Queue;
        let big = [3u8; 4096];
        let (runnable, task) = spawn(
            async move { big.iter().map(|&b| u32::from(b)).sum::<u32>() },
            queue.schedule(),
        );
        runnable.run();
        assert_eq!(task.into_output(), 3 * 4096);
        #[repr(align(64))]
        struct Wide(u8);
        let wide = Wide(9);
        let (runnable, task) = spawn(async move { wide.0 }, queue.schedule());
        runnable.run();
        assert_eq!(task.into_output(), 9);
    }

    #[test]
    fn a_task_woken_on_another_thread_runs_there_and_its_output_comes_back() {
        let queue = Queue;
        let (future, gate) = gate();
        let (runnable, mut task) = spawn(
            async move {
                future.await;
                7u64
            },
            queue.schedule(),
        );
        runnable.run();
        let wakes = Arc::new(StdAtomicUsize::new(0));
        assert_eq!(poll_counting(&mut task, &wakes), Poll::Pending);
        let worker = queue;
        std::thread::spawn(move || {
            open(&gate);
            worker.pop().unwrap().run();
        })
        .join()
        .unwrap();
        assert_eq!(wakes.load(Ordering::Relaxed), 1);
        assert_eq!(task.into_output(), 7);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use loom::sync::{Arc, Mutex};

    use super::*;

    type Shared = Arc<Mutex<(bool, Option<Waker>)>>;

    /// Waits until the shared flag is set, keeping its waker there.
    struct Gate(Shared);

    impl Future for Gate {
        type Output = u32;
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
            let mut state = self.0.lock().unwrap();
            if state.0 {
                return Poll::Ready(5);
            }
            state.1 = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    /// Runs a woken task at once, on the waking thread.
    fn run_now(runnable: Runnable) {
        runnable.run();
    }

    /// A wake on one thread races the task's poll on another and the
    /// handle's await on a third: the task runs to its end, the output
    /// reaches the handle exactly once, and the handle is never left
    /// waiting after the end (its waker woken or the end seen).
    #[test]
    fn loom_a_wake_racing_the_poll_and_the_await_loses_nothing() {
        loom::model(|| {
            let shared: Shared = Arc::new(Mutex::new((false, None)));
            let (runnable, mut task) = spawn(Gate(Arc::clone(&shared)), run_now);
            let waker_side = Arc::clone(&shared);
            let waker = loom::thread::spawn(move || {
                let waker = {
                    let mut state = waker_side.lock().unwrap();
                    state.0 = true;
                    state.1.take()
                };
                if let Some(waker) = waker {
                    waker.wake();
                }
            });
            let runner = loom::thread::spawn(move || runnable.run());
            let woken = Arc::new(loom::sync::atomic::AtomicBool::new(false));
            struct Flag(Arc<loom::sync::atomic::AtomicBool>);
            impl std::task::Wake for Flag {
                fn wake(self: std::sync::Arc<Self>) {
                    self.0.store(true, Ordering::Release);
                }
            }
            let flag = Waker::from(std::sync::Arc::new(Flag(Arc::clone(&woken))));
            let first = task.poll_finished(&mut Context::from_waker(&flag));
            waker.join().unwrap();
            runner.join().unwrap();
            if first.is_pending() {
                assert!(woken.load(Ordering::Acquire), "the awaiter was not woken");
            }
            assert!(task.is_finished());
            assert_eq!(task.into_output(), 5);
            shared.lock().unwrap().1.take();
        });
    }

    /// The handle is dropped while the task ends on another thread, and a
    /// waker clone is dropped on a third: the output is dropped once and
    /// the block freed once (loom checks the cells' accesses).
    #[test]
    fn loom_the_last_owner_frees_the_task_once() {
        loom::model(|| {
            let drops = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
            struct Counted(Arc<loom::sync::atomic::AtomicUsize>);
            impl Drop for Counted {
                fn drop(&mut self) {
                    self.0.fetch_add(1, Ordering::Relaxed);
                }
            }
            let out = Counted(Arc::clone(&drops));
            let (runnable, task) = spawn(
                std::future::poll_fn({
                    let mut out = Some(out);
                    move |cx| {
                        // Keep a clone of the waker past the task's end.
                        let waker = cx.waker().clone();
                        let out = out.take().expect("polled once");
                        Poll::Ready((out, waker))
                    }
                }),
                run_now,
            );
            let runner = loom::thread::spawn(move || runnable.run());
            let dropper = loom::thread::spawn(move || drop(task));
            runner.join().unwrap();
            dropper.join().unwrap();
            assert_eq!(drops.load(Ordering::Relaxed), 1);
        });
    }

    /// The last waker of a waiting task is dropped on one thread while its
    /// handle is dropped on another: whichever is last schedules the task
    /// once more, and the future is dropped exactly once, by the task.
    #[test]
    fn loom_a_task_left_by_its_last_owners_drops_its_future_once() {
        loom::model(|| {
            let shared: Shared = Arc::new(Mutex::new((false, None)));
            let drops = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
            struct Counted(Arc<loom::sync::atomic::AtomicUsize>);
            impl Drop for Counted {
                fn drop(&mut self) {
                    self.0.fetch_add(1, Ordering::Relaxed);
                }
            }
            let held = Counted(Arc::clone(&drops));
            let gate = Gate(Arc::clone(&shared));
            let (runnable, task) = spawn(
                async move {
                    let _held = held;
                    gate.await
                },
                run_now,
            );
            runnable.run();
            let waker = shared.lock().unwrap().1.take().expect("it waits");
            let dropper = loom::thread::spawn(move || drop(waker));
            drop(task);
            dropper.join().unwrap();
            assert_eq!(drops.load(Ordering::Relaxed), 1);
        });
    }
}
