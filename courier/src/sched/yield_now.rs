//! [`yield_now`]: let the other tasks (and the network) run.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Lets the worker run its other tasks before this one goes on; the worker
/// also makes network progress every few tasks. A long loop that neither
/// sends nor waits should yield now and then, or the locality's other
/// work waits for it. (A loop that sends does not need to: a worker
/// sending frames also makes network progress.)
///
/// # Examples
///
/// ```
/// # courier::launch(courier::Config::new().transport(courier::TransportKind::Inproc), |rt| async move {
/// let mut sum = 0u64;
/// for i in 0..10_000u64 {
///     sum += i;
///     if i % 1000 == 0 {
///         courier::yield_now().await;
///     }
/// }
/// # assert_eq!(sum, 49_995_000);
/// # Ok(())
/// # }).unwrap();
/// ```
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future of [`yield_now`].
#[derive(Debug)]
#[must_use = "yield_now does nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
