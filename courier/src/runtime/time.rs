//! [`sleep`]: wait for a while without blocking a worker; and
//! [`CallFuture::timeout`]: give up on a call after a while.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use serde::de::DeserializeOwned;

use super::Runtime;
use super::locality::Locality;
use crate::parcel::{CallError, CallFuture};

/// Waits until `duration` has passed, without blocking the worker (other
/// tasks run meanwhile). A sleep of up to 50 µs (counted from the first
/// poll, on a worker) is woken by a worker of the locality, which spins
/// for it once it runs out of tasks; should no worker get to it (all busy
/// with long tasks), the timer thread wakes it 50 µs late (10 ms where
/// the locality has one worker, which alone can run it and wakes it
/// itself once free), plus its own wake-up. A longer sleep is woken by
/// the timer thread, about as late as it flushes buffers
/// (`/coalescing/time/timer-lateness`), or by a worker that finds it due
/// first.
///
/// # Panics
///
/// Outside a Courier worker thread; use [`Runtime::sleep`] there.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// # courier::launch(courier::Config::new().transport(courier::TransportKind::Inproc), |rt| async move {
/// let start = Instant::now();
/// courier::sleep(Duration::from_millis(5)).await;
/// assert!(start.elapsed() >= Duration::from_millis(5));
/// # Ok(())
/// # }).unwrap();
/// ```
pub fn sleep(duration: Duration) -> Sleep {
    super::current().sleep(duration)
}

impl Runtime {
    /// Waits until `duration` has passed, without blocking a worker; see
    /// [`sleep`].
    pub fn sleep(&self, duration: Duration) -> Sleep {
        let locality = Arc::clone(self.inner());
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        let deadline = locality.aggregator.now_ns().saturating_add(nanos);
        Sleep {
            locality,
            deadline,
            registered: None,
        }
    }
}

/// The future of [`sleep`].
#[must_use = "a sleep does nothing unless awaited"]
pub struct Sleep {
    locality: Arc<Locality>,
    /// When to wake, in ns on the locality's timer clock.
    deadline: u64,
    /// The id of the timer's wake-up, once registered.
    registered: Option<u64>,
}

impl std::fmt::Debug for Sleep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline_ns", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let aggregator = &this.locality.aggregator;
        if aggregator.now_ns() >= this.deadline {
            if let Some(id) = this.registered.take() {
                aggregator.cancel_wake(this.deadline, id);
            }
            return Poll::Ready(());
        }
        // A new waker each poll keeps the wake-up pointed at the task
        // that polls now.
        let id = aggregator.wake_at(this.deadline, cx.waker().clone());
        if let Some(old) = this.registered.replace(id) {
            aggregator.cancel_wake(this.deadline, old);
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(id) = self.registered.take() {
            self.locality.aggregator.cancel_wake(self.deadline, id);
        }
    }
}

impl<T> CallFuture<T> {
    /// Gives the call a deadline: the returned future resolves to the
    /// call's result if it comes within `limit`, and otherwise to a
    /// [`CallError`] for which [`is_timed_out`](CallError::is_timed_out)
    /// holds. The time counts from this method when it is called on a
    /// thread of the runtime (a task, an action), else from the first poll.
    /// The call is not cancelled: it may still run on its locality, and
    /// its result, when it comes, is dropped. The timer is the locality's
    /// flush timer, so the deadline is met about as precisely as a
    /// [`sleep`].
    ///
    /// # Panics
    ///
    /// When polled on a thread that is neither a worker of the runtime nor
    /// given its handle (no deadline can be kept there).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use courier::{Config, TransportKind};
    ///
    /// #[courier::action]
    /// async fn slow() -> u32 {
    ///     courier::sleep(Duration::from_millis(200)).await;
    ///     7
    /// }
    ///
    /// courier::launch(Config::new().localities(2).transport(TransportKind::Inproc), |rt| async move {
    ///     let late = rt.call(rt.locality(1), slow, ()).timeout(Duration::from_millis(20)).await;
    ///     assert!(late.unwrap_err().is_timed_out());
    ///     let on_time = rt.call(rt.locality(1), slow, ()).timeout(Duration::from_secs(10)).await;
    ///     assert_eq!(on_time?, 7);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn timeout(self, limit: Duration) -> Timeout<T> {
        Timeout {
            sleep: super::try_current().map(|rt| rt.sleep(limit)),
            call: self,
            limit,
        }
    }
}

/// A call with a deadline: the future of [`CallFuture::timeout`].
#[must_use = "a call's result is lost unless its future is awaited"]
pub struct Timeout<T> {
    call: CallFuture<T>,
    limit: Duration,
    /// The deadline, once its clock started.
    sleep: Option<Sleep>,
}

impl<T> std::fmt::Debug for Timeout<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timeout")
            .field("call", &self.call)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<T> Unpin for Timeout<T> {}

impl<T: DeserializeOwned + 'static> Future for Timeout<T> {
    type Output = Result<T, CallError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Poll::Ready(result) = Pin::new(&mut this.call).poll(cx) {
            return Poll::Ready(result);
        }
        let limit = this.limit;
        let sleep = this.sleep.get_or_insert_with(|| {
            super::try_current()
                .expect("a call with a deadline is polled outside the runtime (no timer there)")
                .sleep(limit)
        });
        match Pin::new(sleep).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(this.call.timed_out(limit))),
            Poll::Pending => Poll::Pending,
        }
    }
}
