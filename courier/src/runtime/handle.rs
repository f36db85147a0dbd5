//! [`Runtime`]: the handle through which a program calls actions and spawns tasks.

use std::cell::RefCell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;

use super::locality::{Locality, report};
use super::{LocalityId, panic_message};
use crate::action::Action;
use crate::parcel::{CallError, CallFuture, Caller, Failure, RemoteError, ReplyTo};
use crate::sched::JoinHandle;

/// A handle to the running locality: call actions, spawn tasks, ask where
/// you are. Cheap to clone.
///
/// The main function receives one from [`launch`](crate::launch); code
/// running inside an action or task gets one from [`current`].
///
/// # Examples
///
/// ```
/// use courier::{Config, Transport};
///
/// #[courier::action]
/// fn square(x: u64) -> u64 {
///     x * x
/// }
///
/// let sum = courier::launch(Config::new().localities(3).transport(Transport::Inproc), |rt| async move {
///     let mut sum = 0;
///     for l in rt.localities() {
///         sum += rt.call(l, square, (u64::from(l.get()) + 1,)).await?;
///     }
///     Ok(sum)
/// })
/// .unwrap();
/// assert_eq!(sum, 1 + 4 + 9);
/// ```
#[derive(Clone)]
pub struct Runtime {
    locality: Arc<Locality>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("here", &self.here())
            .field("localities", &self.num_localities())
            .finish()
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Runtime>> = const { RefCell::new(None) };
}

pub(super) fn set_current(runtime: Runtime) {
    CURRENT.with(|c| *c.borrow_mut() = Some(runtime));
}

/// The runtime of the locality this thread works for.
///
/// # Panics
///
/// Panics when called outside a Courier worker thread (outside actions and
/// tasks); use [`try_current`] to check.
///
/// # Examples
///
/// ```
/// # use courier::{Config, Transport};
/// #[courier::action]
/// fn where_am_i() -> u32 {
///     courier::current().here().get()
/// }
/// # courier::launch(Config::new().localities(2).transport(Transport::Inproc), |rt| async move {
/// #     assert_eq!(rt.call(rt.locality(1), where_am_i, ()).await?, 1);
/// #     Ok(())
/// # }).unwrap();
/// ```
pub fn current() -> Runtime {
    try_current().expect("courier::current() called outside a Courier worker thread")
}

/// The runtime of the locality this thread works for, if it is a worker thread.
pub fn try_current() -> Option<Runtime> {
    CURRENT.with(|c| c.borrow().clone())
}

impl Runtime {
    pub(crate) fn new(locality: Arc<Locality>) -> Self {
        Runtime { locality }
    }

    pub(crate) fn inner(&self) -> &Arc<Locality> {
        &self.locality
    }

    /// The locality this code runs on.
    pub fn here(&self) -> LocalityId {
        self.locality.here
    }

    /// The number of localities in the job.
    pub fn num_localities(&self) -> u32 {
        self.locality.count
    }

    /// The locality of rank `rank`.
    ///
    /// # Panics
    ///
    /// Panics if the job has no such locality.
    pub fn locality(&self, rank: u32) -> LocalityId {
        assert!(
            rank < self.locality.count,
            "locality#{rank} does not exist: the job has {} localities",
            self.locality.count
        );
        LocalityId::new(rank)
    }

    /// Every locality of the job, in rank order.
    pub fn localities(&self) -> impl Iterator<Item = LocalityId> + use<> {
        (0..self.locality.count).map(LocalityId::new)
    }

    /// Spawns a task on this locality's scheduler.
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.locality.sched.spawn(future)
    }

    /// Calls `action(args)` on `dest` and returns the future of its result.
    ///
    /// A call to [`here`](Self::here) runs as a local task without encoding.
    /// The future resolves to a [`CallError`] if the action panics, the
    /// locality is lost, or the arguments or result do not encode.
    pub fn call<A: Action>(
        &self,
        dest: LocalityId,
        action: A,
        args: A::Args,
    ) -> CallFuture<A::Output> {
        let l = &self.locality;
        if let Err(failure) = l.check_dest(dest) {
            return CallFuture::failed(A::NAME, dest, failure);
        }
        if dest == l.here {
            return CallFuture::local(A::NAME, dest, self.spawn(invoke_caught(action, args)));
        }
        let hop = l.first_hop(A::ID, dest);
        let (request, pending) = l.pending.register([dest, dest, hop]);
        let reply = ReplyTo::Caller(Caller {
            locality: l.here,
            request,
        });
        self.send_pending_call::<A>(dest, hop, reply, &args, request);
        CallFuture::remote(A::NAME, dest, pending)
    }

    /// Calls `action(args)` on `dest` without waiting for a result (fire and
    /// forget). Returns an error only for failures known at once (no such
    /// locality, arguments that do not encode, a lost locality); a failure
    /// of the action itself is reported on the standard error of `dest`.
    pub fn post<A: Action>(
        &self,
        dest: LocalityId,
        action: A,
        args: A::Args,
    ) -> Result<(), CallError> {
        let l = &self.locality;
        let error = |failure| CallError::new(A::NAME, dest, failure);
        l.check_dest(dest).map_err(error)?;
        if dest == l.here {
            let here = l.here;
            drop(self.spawn(async move {
                if let Err(failure) = invoke_caught(action, args).await {
                    report!(here, "a posted call of `{}` failed: {failure:?}", A::NAME);
                }
            }));
            return Ok(());
        }
        let hop = l.first_hop(A::ID, dest);
        self.send_call::<A>(dest, hop, ReplyTo::Nobody, &args)
            .map_err(error)
    }

    /// Calls `action(args)` on `dest` and passes its result, as the only
    /// argument, to `then` on `then_dest`; returns the future of `then`'s
    /// result. The intermediate result goes straight from `dest` to
    /// `then_dest`, never through the caller.
    ///
    /// # Examples
    ///
    /// ```
    /// use courier::{Config, Transport};
    ///
    /// #[courier::action]
    /// fn produce(n: u32) -> Vec<u32> {
    ///     (0..n).collect()
    /// }
    ///
    /// #[courier::action]
    /// fn total(v: Vec<u32>) -> u32 {
    ///     v.iter().sum()
    /// }
    ///
    /// courier::launch(Config::new().localities(3).transport(Transport::Inproc), |rt| async move {
    ///     let sum = rt.call_then(rt.locality(1), produce, (5,), rt.locality(2), total).await?;
    ///     assert_eq!(sum, 10);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn call_then<A, C>(
        &self,
        dest: LocalityId,
        action: A,
        args: A::Args,
        then_dest: LocalityId,
        then: C,
    ) -> CallFuture<C::Output>
    where
        A: Action,
        C: Action<Args = (A::Output,)>,
    {
        let _ = (action, then);
        let l = &self.locality;
        if let Err(failure) = l.check_dest(dest).and_then(|()| l.check_dest(then_dest)) {
            return CallFuture::failed(C::NAME, then_dest, failure);
        }
        let hop = l.first_hop(A::ID, dest);
        let (request, pending) = l.pending.register([dest, then_dest, hop]);
        let reply = ReplyTo::Continue {
            locality: then_dest,
            action: C::ID,
            caller: Some(Caller {
                locality: l.here,
                request,
            }),
        };
        self.send_pending_call::<A>(dest, hop, reply, &args, request);
        CallFuture::remote(C::NAME, then_dest, pending)
    }

    /// Encodes a call of `A` and sends it to `dest` through `hop` (its first
    /// hop, see [`Locality::first_hop`]), or runs it here.
    fn send_call<A: Action>(
        &self,
        dest: LocalityId,
        hop: LocalityId,
        reply: ReplyTo,
        args: &A::Args,
    ) -> Result<(), Failure> {
        let l = &self.locality;
        let encode_error = |e: postcard::Error| Failure::EncodeArgs(e.to_string());
        if dest == l.here {
            let args = postcard::to_allocvec(args).map_err(encode_error)?;
            l.run_call(A::ID, reply, args);
            return Ok(());
        }
        let mut payload = 0;
        l.send_parcel(hop, A::ID, |frame| {
            let before = frame.payload_bytes();
            if hop == dest {
                frame.push_call(A::ID, reply, args)
            } else {
                frame.push_routed_call(dest, A::ID, reply, args)
            }
            .map_err(encode_error)?;
            payload = frame.payload_bytes() - before;
            Ok(())
        })?;
        l.traffic.sent.add_call(A::ID, payload);
        Ok(())
    }

    /// Sends a call whose result completes the pending `request`; a failure
    /// to send completes it at once.
    fn send_pending_call<A: Action>(
        &self,
        dest: LocalityId,
        hop: LocalityId,
        reply: ReplyTo,
        args: &A::Args,
        request: u64,
    ) {
        if let Err(failure) = self.send_call::<A>(dest, hop, reply, args) {
            self.locality.pending.complete(request, Err(failure));
        }
    }
}

/// Runs `action(args)` here, turning a panic into a failure.
async fn invoke_caught<A: Action>(action: A, args: A::Args) -> Result<A::Output, Failure> {
    AssertUnwindSafe(async move { action.invoke(args).await })
        .catch_unwind()
        .await
        .map_err(|panic| Failure::Remote(RemoteError::Panicked(panic_message(&*panic))))
}
