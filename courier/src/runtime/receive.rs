//! What a locality does with a received frame (its [`Sink`]): each run of
//! calls becomes one task that runs them all (see `action/execute.rs`),
//! responses complete their pending calls at once, routed calls are
//! forwarded into this locality's buffers for their destinations.
//!
//! A frame is checked as far as its run headers before anything runs; a
//! malformed parcel inside a run of calls is found by the task that runs
//! it, which then drops the sender as one that broke the protocol (the
//! calls before it have run; the reason counts the calls that did not).
//! A call that is well formed but fails (arguments that do not decode, a
//! panic, a result for a locality that does not exist) fails alone: the
//! other calls of its run still run.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::credit::HandlerScope;
use super::locality::{Delivery, Locality, report};
use super::trains::Train;
use super::watchdog::action_label;
use crate::action::{ActionEntry, CallSite, registry};
use crate::aggregate::{AnsweredRun, Answering, sent_when_done};
use crate::clock::{clock, timed};
use crate::ids::LocalityId;
use crate::parcel::{
    DecodeError, FRAME_HEADROOM, FrameBody, ParcelReader, RemoteError, Response, RunKind,
    decode_call, decode_frame,
};
use crate::sched::label_poll;
use crate::transport::{ProtocolError, Sink};

impl Sink for Locality {
    fn frame(&self, source: LocalityId, frame: Bytes) -> Result<(), ProtocolError> {
        let start = clock().raw();
        self.liveness.heard(source, start);
        let malformed = |error: DecodeError| ProtocolError::Malformed {
            from: source,
            error,
        };
        let (claimed, body) = decode_frame(&frame).map_err(malformed)?;
        if claimed != source {
            return Err(ProtocolError::ForgedSource {
                from: source,
                claimed,
            });
        }
        let mut runs = match body {
            FrameBody::Parcels(runs) => runs,
            FrameBody::Control(control) => {
                self.handle_control(source, control);
                return Ok(());
            }
        };
        let mut parcels = 0;
        let mut payload = 0;
        // The frame's charge, once a run that needs credit is found, and
        // the part of it the runs of calls hold until they finish.
        let mut charged = None;
        let mut held = 0;
        while let Some(run) = runs.next_run().map_err(malformed)? {
            parcels += u64::from(run.count);
            if run.kind != RunKind::Responses {
                self.charge_frame(source, frame.len(), &mut charged)?;
            }
            match run.kind {
                RunKind::Calls => {
                    payload += run.body.len() as u64;
                    // A run of calls holds its bytes until it has run; the
                    // first also holds the frame's charge beyond its length
                    // (the memory a queued run takes besides its bytes).
                    let credit = match charged {
                        Some(_) if held == 0 => run.body.len() + crate::flow::FRAME_CHARGE,
                        Some(_) => run.body.len(),
                        None => 0,
                    };
                    held += credit;
                    let body = frame.slice(run.body);
                    let patient = run.responses_wait;
                    self.spawn_calls(source, body, run.action, run.count, credit, patient);
                }
                RunKind::Responses => {
                    let count = u64::from(run.count);
                    let at = self.aggregator.ns_at(start);
                    self.traffic.responses_at.lock().add(count, at);
                    let mut responses = ParcelReader::new(&frame[run.body], run.count, source);
                    let mut completer = self.pending.completer(Some(source));
                    while let Some(response) = responses.next_response().map_err(malformed)? {
                        let completion = match &response.result {
                            Ok(output) => Response::Output(&frame, output),
                            Err(error) => {
                                Response::Failed(crate::parcel::Failure::Remote(error.clone()))
                            }
                        };
                        // An unknown request is a response to a call that
                        // already failed (its path lost a locality).
                        completer.complete(response.request, response.part, completion);
                    }
                    drop(completer);
                    responses.finish().map_err(malformed)?;
                    payload += responses.payload_bytes();
                }
                RunKind::Routed => {
                    let mut routed = ParcelReader::new(&frame[run.body], run.count, source);
                    while let Some(call) = routed.next_routed().map_err(malformed)? {
                        self.forward(source, call.dest, run.action, call.call)
                            .map_err(malformed)?;
                    }
                    routed.finish().map_err(malformed)?;
                    payload += routed.payload_bytes();
                }
            }
        }
        if let Some(charge) = charged {
            // Responses and routed calls were dealt with as read.
            self.finish_credit(source, charge - held);
        }
        if source == self.here {
            // This locality's own parcels are not traffic.
            return Ok(());
        }
        // Counted after the calls became a task (or completed, or were
        // forwarded): termination detection never sees a parcel received
        // whose work is not yet visible.
        let received = &self.traffic.received;
        received.parcels.fetch_add(parcels, Ordering::SeqCst);
        let wire = (frame.len() + FRAME_HEADROOM) as u64;
        received.add_message(payload, wire, clock().delta_as_nanos(start, clock().raw()));
        Ok(())
    }

    fn peer_lost(&self, peer: LocalityId, reason: String) {
        let mut control = self.control.lock();
        if self.is_stopping()
            || control.acked.contains(&peer)
            || control.lost.iter().any(|(l, _)| *l == peer)
        {
            return;
        }
        report!(warn, self.here, "lost {peer}: {reason}");
        self.windows.abandon(peer);
        self.pending.fail_peer(peer, &reason);
        self.collectives.fail(&format!("{peer} was lost: {reason}"));
        control.lost.push((peer, reason));
        drop(control);
        self.control_changed.notify_all();
    }
}

impl Locality {
    /// Takes the credit of a frame of `len` bytes from `source`'s window,
    /// once per frame (`charged` holds its charge afterwards); a frame
    /// beyond the window breaks the protocol.
    fn charge_frame(
        &self,
        source: LocalityId,
        len: usize,
        charged: &mut Option<usize>,
    ) -> Result<(), ProtocolError> {
        if charged.is_some() || source == self.here || !self.ledger.enabled() {
            return Ok(());
        }
        let charge = crate::flow::charge(len);
        self.ledger
            .receive(source, charge)
            .map_err(|error| ProtocolError::OverCredit {
                from: source,
                error,
            })?;
        *charged = Some(charge);
        Ok(())
    }

    /// Runs a run of `count` calls of `action` (encoded in `body`) as one
    /// task, through the inbox; `credit` goes back when it has run. Its
    /// responses are `patient` if its caller lets them wait.
    fn spawn_calls(
        &self,
        source: LocalityId,
        body: Bytes,
        action: crate::ids::ActionId,
        count: u32,
        credit: usize,
        patient: bool,
    ) {
        self.deliver(Delivery {
            source,
            body,
            action,
            count,
            whole: true,
            patient,
            credit,
            work: self.start_work(),
        });
    }

    /// Queues a received run of calls and spawns the task that runs it
    /// (unless a worker waiting for credit runs it first).
    fn deliver(&self, delivery: Delivery) {
        if delivery.source != self.here {
            self.trains.queued(delivery.source);
        }
        self.inbox.push(delivery);
        let locality = self.shared();
        drop(self.sched.spawn(async move {
            locality.run_delivery();
        }));
    }

    /// Runs the oldest received run of calls, if there is one, and gives
    /// its credit back; returns whether there was one. A run longer than
    /// a task's worth first offers its rest as a run of its own (see
    /// `run_sizes.rs`).
    pub(super) fn run_delivery(self: &Arc<Self>) -> bool {
        let Some(mut delivery) = self.inbox.pop() else {
            return false;
        };
        let found = registry().lookup(delivery.action);
        // A whole, impatient run of one call of an adaptive action answers
        // alone, or holds its response for a train; other runs answer as
        // they are (a run of many when it is done: the parts of a burst),
        // but may end a train.
        let alone = found.map(|(slot, _)| slot).filter(|&slot| {
            delivery.count == 1
                && delivery.whole
                && !delivery.patient
                && self.aggregator.adaptive(slot).is_some()
        });
        let train = if delivery.source == self.here {
            Train::Alone
        } else {
            self.trains.start(delivery.source, alone)
        };
        let in_train = if alone.is_some() { train } else { Train::Alone };
        if let Some((slot, _)) = found {
            self.offer_rest(&mut delivery, slot);
        }
        let Delivery {
            source,
            body,
            action,
            count,
            whole,
            patient,
            credit,
            work,
        } = delivery;
        let answered_slot;
        {
            let _handler = HandlerScope::enter();
            // Sends the run's responses when dropped, at the block's end.
            let answers = match found {
                Some((slot, _)) => self.answer_run(slot, source, count, whole, patient, in_train),
                None => None,
            };
            // The slot whose responses that guard sends: a train that ends
            // here need not look at it again.
            answered_slot = answers.as_ref().filter(|a| a.flush).map(|a| a.slot);
            let outer = label_poll(&self.sched, action_label(action));
            let ((), ns) = timed(|| self.run_calls(source, &body, action, found, count));
            if let Some((slot, _)) = found {
                self.run_sizes.record(slot, count, ns);
            }
            label_poll(&self.sched, outer);
        }
        if let Train::Last { slot } = train
            && answered_slot != Some(slot)
        {
            // The train's held responses, whatever action this run called
            // (those of its own action left with its own responses).
            self.aggregator.flush_responses(&**self, slot, source);
        }
        self.report_post_failures();
        drop(body);
        self.finish_credit(source, credit);
        drop(work);
        true
    }

    /// Under adaptive coalescing, makes the responses to the run of
    /// `calls` calls of the action in `slot` from `source` that is about
    /// to run leave together when it is done, if it came `whole` (see
    /// `aggregate/answer.rs`): what the returned guard does when dropped.
    /// A piece of a run split between tasks keeps the buffer's setting
    /// (its responses join those of the other pieces), but where that is
    /// off, a piece of many calls still answers them together. A run that
    /// would answer alone (`run_delivery` says which; `Train::Alone` for
    /// others) in a `train` of its caller's runs that waited together
    /// (`trains.rs`) is answered as a piece of many calls, and the train's
    /// last as a whole run of many (whatever that last run is, the
    /// train's responses leave after it: `run_delivery`). The responses
    /// of a `patient` run (or piece) wait for company under a policy of
    /// their own. `None` for an action with a static setting, and for
    /// calls of this locality's own.
    fn answer_run(
        &self,
        slot: usize,
        source: LocalityId,
        calls: u32,
        whole: bool,
        patient: bool,
        train: Train,
    ) -> Option<Answers<'_>> {
        let whole = whole && train != Train::Inner;
        (source != self.here && self.aggregator.adaptive(slot).is_some()).then(|| Answers {
            locality: self,
            slot,
            source,
            flush: sent_when_done(whole, patient),
            _scope: Answering::enter(AnsweredRun {
                slot,
                caller: source,
                many: calls > 1 || train.with_others(),
                whole,
                patient,
                in_train: train == Train::Inner,
            }),
        })
    }

    /// Keeps in `delivery` the calls one task should run (measured for
    /// action `slot`) and delivers the rest as a run of its own, with the
    /// credit of its bytes. A malformed call among those kept leaves
    /// the run whole: running it finds the call.
    fn offer_rest(&self, delivery: &mut Delivery, slot: usize) {
        let keep =
            self.run_sizes
                .calls_per_task(slot, delivery.count, crate::sched::task_threshold_ns());
        if keep >= delivery.count {
            return;
        }
        let mut calls = ParcelReader::new(&delivery.body, keep, delivery.source);
        for _ in 0..keep {
            if !matches!(calls.next_call(), Ok(Some(_))) {
                return;
            }
        }
        let at = calls.offset();
        // Each piece holds the credit of its own bytes until it has run,
        // as the runs of one frame do; the first keeps the frame's charge.
        let rest_credit = delivery.credit.min(delivery.body.len() - at);
        let rest = Delivery {
            source: delivery.source,
            body: delivery.body.slice(at..),
            action: delivery.action,
            count: delivery.count - keep,
            whole: false,
            patient: delivery.patient,
            credit: rest_credit,
            work: self.start_work(),
        };
        delivery.credit -= rest_credit;
        delivery.body.truncate(at);
        delivery.count = keep;
        delivery.whole = false;
        self.deliver(rest);
    }

    /// Runs the calls of one run of `action` (`found`: its registry slot
    /// and entry, if this binary has it); a malformed one ends the run and
    /// drops `source`, saying how many calls were not run.
    fn run_calls(
        self: &Arc<Self>,
        source: LocalityId,
        body: &[u8],
        action: crate::ids::ActionId,
        found: Option<(usize, &'static ActionEntry)>,
        count: u32,
    ) {
        let mut calls = ParcelReader::new(body, count, source);
        let result = match found {
            Some((slot, entry)) => {
                let site: Arc<dyn CallSite> = Arc::clone(self) as Arc<dyn CallSite>;
                let traffic = (source != self.here).then_some(&self.traffic.received);
                // The calls count as received before they run (a counter
                // sampled by one of them includes it), their bytes as read.
                if let Some(traffic) = traffic {
                    traffic.add_calls(slot, u64::from(count), 0);
                }
                let ran = entry.run_calls(&site, slot, &mut calls);
                if let Some(traffic) = traffic {
                    traffic.add_calls(slot, 0, calls.payload_bytes());
                }
                ran
            }
            None => self.refuse_calls(action, &mut calls),
        };
        // A malformed call: where the calls after it start cannot be
        // known, so they cannot run. The reason says how many calls did
        // not run, and dropping the sender tells it (its calls here fail
        // as lost, naming the reason).
        let (error, not_run) = match result {
            Err(e) => (e, calls.left().saturating_add(1)),
            Ok(()) => match calls.finish() {
                Err(e) => (e, 0),
                Ok(()) => return,
            },
        };
        let mut reason = format!("malformed frame from {source}: {error}");
        if not_run > 0 {
            let name = found.map_or("an unknown action", |(_, entry)| entry.name());
            reason.push_str(&format!(
                "; {not_run} of its {count} calls of `{name}` were not run \
                 (the malformed one and those after it)"
            ));
        }
        self.transport.drop_peer(source, &reason);
        self.peer_lost(source, reason);
    }

    /// Answers every call of an action this binary does not have.
    fn refuse_calls(
        &self,
        action: crate::ids::ActionId,
        calls: &mut ParcelReader<'_>,
    ) -> Result<(), DecodeError> {
        while let Some(call) = calls.next_call()? {
            let error = RemoteError::UnknownAction {
                id: action.to_bits(),
            };
            self.send_failure("an unknown action", call.reply, error);
        }
        Ok(())
    }

    /// Forwards a call for `dest` that came through this locality, without
    /// decoding its arguments. A call for this locality is run here.
    fn forward(
        &self,
        source: LocalityId,
        dest: LocalityId,
        action: crate::ids::ActionId,
        call: &[u8],
    ) -> Result<(), DecodeError> {
        if !self.exists(dest) {
            // Nowhere to forward it: answer its caller, if it has one.
            let parsed = decode_call(call, source)?;
            self.send_failure(
                "a routed call",
                parsed.reply,
                RemoteError::Forward {
                    locality: dest.get(),
                    reason: "not a locality of this job".into(),
                },
            );
            return Ok(());
        }
        // The call must decode: a malformed one is the sender's fault.
        decode_call(call, source)?;
        let Some(slot) = registry().slot(action) else {
            let parsed = decode_call(call, source)?;
            let error = RemoteError::UnknownAction {
                id: action.to_bits(),
            };
            self.send_failure("an unknown action", parsed.reply, error);
            return Ok(());
        };
        self.aggregator.count_forwarded(slot);
        // A failure means `dest` is lost; its caller learns it from that loss.
        let _ = self
            .aggregator
            .push(self, RunKind::Calls, slot, action, dest, false, |frame| {
                frame.push_forwarded(call);
                Ok(())
            });
        Ok(())
    }
}

/// The scope of a run of calls whose responses follow the caller's
/// coalescing: sent together when the run is done (also when unwinding:
/// none is left in a buffer without a timer), unless they are a piece's
/// or patient.
struct Answers<'a> {
    locality: &'a Locality,
    slot: usize,
    source: LocalityId,
    /// Whether they are sent when the run is done: it came whole, and
    /// they are not patient (a piece's responses and patient ones stay
    /// buffered).
    flush: bool,
    _scope: Answering,
}

impl Drop for Answers<'_> {
    fn drop(&mut self) {
        if !self.flush {
            return;
        }
        let locality = self.locality;
        locality
            .aggregator
            .flush_responses(locality, self.slot, self.source);
    }
}
