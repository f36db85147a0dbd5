//! The end of a call's way: its output, or why it failed, goes back to
//! the caller (or on to a continuation), through the responder's
//! coalescing buffer of the action. What the `action` room's executor
//! calls, through [`CallSite`].

use std::future::Future;
use std::pin::Pin;

use super::locality::{Locality, report};
use crate::action::{CallSite, EncodeOutput, registry};
use crate::ids::LocalityId;
use crate::parcel::{Failure, RemoteError, ReplyTo, RunKind};

impl CallSite for Locality {
    fn send_output(&self, slot: usize, reply: ReplyTo, encode: &mut EncodeOutput<'_>) {
        let entries = registry().entries();
        let sent = match reply {
            ReplyTo::Nobody => Ok(()),
            // A locality index from the wire: a peer may name any.
            ReplyTo::Caller(caller) if !self.exists(caller.locality) => {
                return self.report_bad_reply(entries[slot].name(), caller.locality);
            }
            ReplyTo::Continue { locality, .. } if !self.exists(locality) => {
                Err(Failure::NoSuchLocality { count: self.count })
            }
            ReplyTo::Caller(caller) => {
                let id = entries[slot].id();
                let to = caller.locality;
                self.aggregator
                    .push(self, RunKind::Responses, slot, id, to, encode)
            }
            ReplyTo::Continue {
                locality, action, ..
            } => match registry().slot(action) {
                Some(next) => {
                    self.aggregator
                        .push(self, RunKind::Calls, next, action, locality, encode)
                }
                None => self.send_alone(locality, RunKind::Calls, action, encode),
            },
        };
        let Err(failure) = sent else {
            return;
        };
        let error = match (reply, failure) {
            (_, Failure::EncodeArgs(e)) => RemoteError::BadOutput(e),
            (_, Failure::FrameTooLarge(e)) => RemoteError::BadOutput(e.to_string()),
            (ReplyTo::Continue { locality, .. }, failure) => RemoteError::Forward {
                locality: locality.get(),
                reason: format!("{failure:?}"),
            },
            // The caller is lost: nobody to tell.
            _ => return,
        };
        self.send_failure(entries[slot].name(), reply, error);
    }

    fn send_failure(&self, action: &'static str, reply: ReplyTo, error: RemoteError) {
        let caller = match reply {
            ReplyTo::Caller(caller)
            | ReplyTo::Continue {
                caller: Some(caller),
                ..
            } => caller,
            ReplyTo::Nobody | ReplyTo::Continue { caller: None, .. } => {
                return self.report_failure(action, &error);
            }
        };
        if !self.exists(caller.locality) {
            return self.report_bad_reply(action, caller.locality);
        }
        let id = crate::ids::ActionId::of_name(action);
        let sent = self.send_alone(caller.locality, RunKind::Responses, id, |frame| {
            frame.push_failure(caller, &error);
            Ok(())
        });
        // A failure to send means the caller is lost: nobody to tell.
        drop(sent);
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        let work = self.start_work();
        drop(self.sched.spawn(async move {
            let _work = work;
            future.await;
        }));
    }
}

impl Locality {
    /// A call named a locality that does not exist for its result.
    fn report_bad_reply(&self, action: &str, to: LocalityId) {
        report!(
            warn,
            self.here,
            "a call of `{action}` named {to}, which is not a locality of this job, for its result: dropped"
        );
    }

    /// Reports a failed call that nobody waits for.
    fn report_failure(&self, action: &str, error: &RemoteError) {
        report!(
            error,
            self.here,
            "a posted call of `{action}` failed: {error:?}"
        );
    }
}
