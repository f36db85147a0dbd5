//! Running a run of received calls of one action: decode each call's
//! arguments in place, call the function, and hand its output to where the
//! call's reply says, encoded straight into the next frame.
//!
//! [`run_calls`] is monomorphized per action (the registry keeps a pointer
//! to each instance), so a synchronous action costs a decode, a direct call
//! and an encode per call: no task, no boxed future, no allocation. An
//! `async` action's future is boxed and polled once in place; only one
//! that waits becomes a task of its own.
//!
//! A panicking call fails its own caller and the loop goes on with the next
//! call of the run.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use futures::FutureExt;
use serde::Serialize;

use super::Action;
use crate::parcel::{
    Checkpoint, DecodeError, EncodeError, FrameBuilder, ParcelReader, RemoteError, ReplyTo, decode,
    panic_message,
};

/// Encodes a call's output into the frame the locality picked for it: a
/// response for `ReplyTo::Caller`, a call of the continuation for
/// `ReplyTo::Continue`.
pub(crate) type EncodeOutput<'a> = dyn FnMut(&mut FrameBuilder) -> Result<(), EncodeError> + 'a;

/// What running calls needs from the locality they run on.
pub(crate) trait CallSite: Send + Sync + 'static {
    /// Sends the output of a call of the action in registry slot `slot`
    /// where `reply` says (never `ReplyTo::Post`); `encode` writes it
    /// into the frame.
    fn send_output(&self, slot: usize, reply: ReplyTo, encode: &mut EncodeOutput<'_>);

    /// A call of `action` with `reply` failed with `error`: tells its
    /// caller, or reports it when nobody waits for it.
    fn send_failure(&self, action: &'static str, reply: ReplyTo, error: RemoteError);

    /// The locality the calls run on.
    fn here(&self) -> crate::ids::LocalityId;

    /// Runs `future` as a task of its own (a call that waits).
    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>);
}

/// Runs every call of a run of action `A`, from registry slot `slot`.
/// A malformed call ends the run with an error: the frame broke the
/// protocol.
pub(crate) fn run_calls<A: Action>(
    site: &Arc<dyn CallSite>,
    slot: usize,
    calls: &mut ParcelReader<'_>,
) -> Result<(), DecodeError> {
    loop {
        // Where the call being run starts: its reply is read again from
        // there if it panics (copying every call's reply aside would cost
        // more than the rare panic).
        let mut current = calls.checkpoint();
        let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
            run_some::<A>(site, slot, calls, &mut current)
        }));
        match run {
            Ok(result) => return result,
            // The call that panicked fails alone; the others still run.
            Err(panic) => {
                let reply = calls.rewound(current).next_call().ok().flatten().map_or(
                    ReplyTo::Post {
                        origin: calls.source(),
                    },
                    |call| call.reply,
                );
                site.send_failure(
                    A::NAME,
                    reply,
                    RemoteError::Panicked(panic_message(&*panic)),
                );
            }
        }
    }
}

fn run_some<A: Action>(
    site: &Arc<dyn CallSite>,
    slot: usize,
    calls: &mut ParcelReader<'_>,
    current: &mut Checkpoint,
) -> Result<(), DecodeError> {
    loop {
        *current = calls.checkpoint();
        let Some(call) = calls.next_call()? else {
            return Ok(());
        };
        let args = match decode::<A::Args>(call.args) {
            Ok(args) => args,
            Err(e) => {
                let error = RemoteError::BadArguments(e.to_string());
                site.send_failure(A::NAME, call.reply, error);
                continue;
            }
        };
        match A::SYNC {
            Some(function) => {
                let output = function(args);
                send_output::<A>(site.as_ref(), slot, call.reply, &output);
            }
            None => run_async::<A>(site, slot, call.reply, args),
        }
    }
}

/// Starts an `async` action: polls it once here, and gives it a task of
/// its own only if it waits.
fn run_async<A: Action>(site: &Arc<dyn CallSite>, slot: usize, reply: ReplyTo, args: A::Args) {
    let mut future = Box::pin(A::default().invoke(args));
    let mut cx = Context::from_waker(Waker::noop());
    if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
        return send_output::<A>(site.as_ref(), slot, reply, &output);
    }
    let owned = Arc::clone(site);
    site.spawn(Box::pin(async move {
        match AssertUnwindSafe(future).catch_unwind().await {
            Ok(output) => send_output::<A>(owned.as_ref(), slot, reply, &output),
            Err(panic) => owned.send_failure(
                A::NAME,
                reply,
                RemoteError::Panicked(panic_message(&*panic)),
            ),
        }
    }));
}

/// Hands `output` to where `reply` says.
fn send_output<A: Action>(site: &dyn CallSite, slot: usize, reply: ReplyTo, output: &A::Output) {
    match reply {
        ReplyTo::Post { .. } => {}
        ReplyTo::Caller(caller) => {
            site.send_output(slot, reply, &mut |frame| {
                frame.push_response(caller, output)
            });
        }
        ReplyTo::Continue { caller, .. } => {
            // The continuation's argument tuple `(A::Output,)` encodes as
            // `A::Output` alone.
            let then = caller.map_or(
                ReplyTo::Post {
                    origin: site.here(),
                },
                ReplyTo::Caller,
            );
            site.send_output(slot, reply, &mut |frame| {
                frame.push_call(then, &(Encoded(output),))
            });
        }
    }
}

/// A borrowed value that serializes as itself (for the one-tuple of a
/// continuation's arguments without cloning the output).
struct Encoded<'a, T>(&'a T);

impl<T: Serialize> Serialize for Encoded<'_, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}
