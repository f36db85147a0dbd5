//! The end of a call's way: its output, or why it failed, goes back to
//! the caller (or on to a continuation), through the responder's
//! coalescing buffer of the action; why a post failed goes back to the
//! locality that posted it (see `post_failures.rs`). What the `action`
//! room's executor calls, through [`CallSite`].

use std::future::Future;
use std::pin::Pin;

use super::credit::HandlerScope;
use super::locality::{Locality, report};
use crate::action::{CallSite, EncodeOutput, registry};
use crate::ids::{ActionId, LocalityId};
use crate::parcel::{Control, Failure, RemoteError, ReplyTo, RunKind};

impl CallSite for Locality {
    fn send_output(&self, slot: usize, reply: ReplyTo, encode: &mut EncodeOutput<'_>) {
        let entries = registry().entries();
        let sent = match reply {
            ReplyTo::Post { .. } => Ok(()),
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
                    .push(self, RunKind::Responses, slot, id, to, false, encode)
            }
            ReplyTo::Continue {
                locality, action, ..
            } => match registry().slot(action) {
                Some(next) => self.aggregator.push(
                    self,
                    RunKind::Calls,
                    next,
                    action,
                    locality,
                    false,
                    encode,
                ),
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
            ReplyTo::Post { origin } => {
                return self.post_failed(origin, action, error.to_string());
            }
            ReplyTo::Continue { caller: None, .. } => {
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

    fn here(&self) -> LocalityId {
        self.here
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

impl Locality {
    /// A post of `action` from `origin` failed here with `message`.
    pub(crate) fn post_failed(&self, origin: LocalityId, action: &str, message: String) {
        let id = ActionId::of_name(action).to_bits();
        self.post_failures.gather(origin, id, message);
        if !HandlerScope::active() {
            self.report_post_failures();
        }
    }

    /// Sends every gathered failure to the locality that posted it: at the
    /// end of a run of calls, or at once outside one.
    pub(crate) fn report_post_failures(&self) {
        let gathered = self.post_failures.take_unreported();
        let fail = self.post_failures.fails_the_job();
        for ((origin, action), (count, error)) in gathered {
            if !self.exists(origin) {
                continue;
            }
            let failed = Control::PostsFailed {
                origin: origin.get(),
                at: self.here.get(),
                action,
                count,
                error: error.clone(),
            };
            // To the origin; under `Fail`, to the root as well, which
            // decides the job's result (sent before this run counts as
            // finished, so the root knows before the job can look idle).
            for to in [
                Some(origin),
                (fail && origin != LocalityId::ROOT).then_some(LocalityId::ROOT),
            ]
            .into_iter()
            .flatten()
            {
                if to == self.here {
                    self.posts_failed(self.here, origin, action, count, error.clone());
                } else {
                    self.send_control(to, &failed);
                }
            }
        }
    }

    /// A [`Control::PostsFailed`] from `source`: accepted from the locality
    /// the posts failed on, by their origin and by the root. Anything else
    /// is dropped.
    pub(crate) fn handle_posts_failed(
        &self,
        source: LocalityId,
        origin: u32,
        at: u32,
        action: u64,
        count: u64,
        error: String,
    ) {
        let (origin, at) = (LocalityId::new(origin), LocalityId::new(at));
        let mine = origin == self.here || self.here == LocalityId::ROOT;
        if at == source && mine && self.exists(origin) {
            self.posts_failed(at, origin, action, count, error);
        } else {
            report!(
                warn,
                self.here,
                "ignored a report of failed posts from {source} that was not its to make"
            );
        }
    }

    /// `count` posts of `action` from `origin` failed on `at` with `error`.
    fn posts_failed(
        &self,
        at: LocalityId,
        origin: LocalityId,
        action: u64,
        count: u64,
        error: String,
    ) {
        let failures = &self.post_failures;
        let entry = registry().lookup(ActionId::from_bits(action));
        let name = entry.map_or("an unknown action", |(_, e)| e.name());
        if origin == self.here {
            let total = failures.count(entry.map(|(slot, _)| slot), count);
            // The first failure, then each time the count doubles.
            if (total - count).checked_ilog2() != total.checked_ilog2() {
                report!(
                    warn,
                    self.here,
                    "{count} post(s) of `{name}` failed on {at} ({total} so far): {error}"
                );
            }
        }
        if failures.fails_the_job() {
            failures.trip(origin, format!("`{name}` on {at}: {error}"));
        }
    }
}
