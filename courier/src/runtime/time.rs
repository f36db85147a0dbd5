//! [`sleep`]: wait for a while without blocking a worker.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::Runtime;
use super::locality::Locality;

/// Waits until `duration` has passed, without blocking the worker (other
/// tasks run meanwhile). The locality's timer thread wakes the task, about
/// as late as it flushes buffers (`/coalescing/time/timer-lateness`).
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
