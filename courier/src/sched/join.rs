//! [`JoinHandle`]: the future of a spawned task's output.

use std::future::Future;
use std::panic;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use super::task::{self, Task};

/// An owned permission to await a spawned task's output.
///
/// Dropping a `JoinHandle` does *not* cancel the task: it keeps running
/// detached, as a thread spawned with `std::thread::spawn` would.
///
/// # Panics
///
/// Awaiting the handle of a task that panicked resumes the panic in the
/// awaiting task.
///
/// # Examples
///
/// ```
/// use courier::{Config, TransportKind};
///
/// let out = courier::launch(Config::new().localities(1).transport(TransportKind::Inproc), |rt| async move {
///     let child = rt.spawn(async { 6 * 7 });
///     Ok(child.await)
/// })
/// .unwrap();
/// assert_eq!(out, 42);
/// ```
#[must_use = "a dropped JoinHandle detaches its task; await it to get the output"]
#[derive(Debug)]
pub struct JoinHandle<T> {
    state: State<T>,
}

/// Where a [`JoinHandle`]'s output comes from.
#[derive(Debug)]
enum State<T> {
    /// A task: its output when it ends (or the panic of a child run
    /// inline by `spawn`, kept in a task's block that has ended: panics
    /// are rare, and the handle's drop stays small).
    Task(Task<T>),
    /// The output of a task that completed on its first poll, run inline
    /// by `spawn`.
    Done(Exclusive<T>),
    /// The output was taken.
    Taken,
}

/// A value reached only by taking it apart (with `&mut` or by value),
/// never through `&`: what keeps the handle `Sync` for any `Send` output,
/// as a task's handle is, without a lock (std's unstable `Exclusive`).
struct Exclusive<T>(T);

// SAFETY: no method gives access to the `T` from an `&Exclusive<T>` (it
// has none; `State` only moves it out by value), so sharing one between
// threads shares nothing of the `T`.
#[allow(unsafe_code)]
unsafe impl<T: Send> Sync for Exclusive<T> {}

impl<T> std::fmt::Debug for Exclusive<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Exclusive(..)")
    }
}

// Nothing of the handle is ever pinned: the output is moved out, never
// polled in place.
impl<T> Unpin for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    pub(crate) fn new(task: Task<T>) -> Self {
        JoinHandle {
            state: State::Task(task),
        }
    }

    /// The handle of a task that has ended with `result` (its output or
    /// its panic's payload).
    pub(crate) fn done(result: std::thread::Result<T>) -> Self
    where
        T: Send + 'static,
    {
        let state = match result {
            Ok(out) => State::Done(Exclusive(out)),
            Err(payload) => State::Task(task::finished(Err(payload))),
        };
        JoinHandle { state }
    }

    /// Whether the task has finished (its output may be taken without waiting).
    pub fn is_finished(&self) -> bool {
        match &self.state {
            State::Task(task) => task.is_finished(),
            State::Done(_) | State::Taken => true,
        }
    }
}

impl<T> JoinHandle<T> {
    /// The output of a task that completed when it was spawned; panics if
    /// it was taken.
    #[inline]
    fn take_done(&mut self) -> T {
        match std::mem::replace(&mut self.state, State::Taken) {
            State::Done(out) => out.0,
            _ => taken(),
        }
    }
}

/// A handle polled again after it gave its output.
#[cold]
#[inline(never)]
fn taken() -> ! {
    panic!("JoinHandle polled after it returned its output")
}

impl<T> Future for JoinHandle<T> {
    type Output = T;

    /// Always inlined where it is awaited (as `#[inline]` it was not, in
    /// the `spawn` bench: 2 ns of an inlined child's 11).
    #[inline(always)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        if let State::Task(task) = &mut self.state {
            ready!(task.poll_finished(cx));
            if let State::Task(task) = std::mem::replace(&mut self.state, State::Taken) {
                return Poll::Ready(task.into_output());
            }
        }
        Poll::Ready(self.take_done())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn send_and_sync<T: Send + Sync>() {}

    #[test]
    fn a_handle_is_send_sync_and_two_words_for_any_send_output() {
        // `Cell` is `Send` but not `Sync`: as for a task's handle.
        send_and_sync::<JoinHandle<Cell<u64>>>();
        assert_eq!(size_of::<JoinHandle<()>>(), 2 * size_of::<usize>());
    }

    #[test]
    fn a_done_handle_gives_its_output_or_resumes_its_panic() {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut done = JoinHandle::done(Ok(7));
        assert!(done.is_finished());
        assert_eq!(Pin::new(&mut done).poll(&mut cx), Poll::Ready(7));
        let mut panicked = JoinHandle::<u32>::done(Err(Box::new("child")));
        assert!(panicked.is_finished());
        let payload = panic::catch_unwind(panic::AssertUnwindSafe(|| {
            let _ = Pin::new(&mut panicked).poll(&mut cx);
        }))
        .unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"child"));
    }
}
