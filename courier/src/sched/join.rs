//! [`JoinHandle`]: the future of a spawned task's output.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// An owned permission to await a spawned task's output.
///
/// Unlike [`async_task::Task`], dropping a `JoinHandle` does *not* cancel the
/// task: it keeps running detached, as a task spawned with
/// `std::thread::spawn` would.
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
    task: Option<async_task::Task<T>>,
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(task: async_task::Task<T>) -> Self {
        JoinHandle { task: Some(task) }
    }

    /// Whether the task has finished (its output may be taken without waiting).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(async_task::Task::is_finished)
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let task = self
            .task
            .as_mut()
            .expect("JoinHandle polled after it returned its output");
        let out = Pin::new(task).poll(cx);
        if out.is_ready() {
            self.task = None;
        }
        out
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.detach();
        }
    }
}
