//! Responses that leave with the run of calls they answer.
//!
//! Under adaptive coalescing, a responder has no traffic of its own of
//! an action to tune the responses from (its tuner sees the calls it
//! sends), so the responses follow the coalescing the caller chose for
//! the calls: while a task handles a received run of calls whole, the
//! responses it makes for the run's caller wait in the worker's buffer
//! without arming the flush timer (which costs the timer thread a
//! wake-up and the arm a system call on a sparse stream), and the task
//! sends them in one message when the run is done
//! ([`Aggregator::flush_responses`](super::Aggregator::flush_responses)).
//! A run of one call gets its response at once, past the buffer, as with
//! coalescing off (counted as a bypass where the setting would have held
//! it), unless other runs of its caller waited in the inbox with it (a
//! train, `runtime/trains.rs`: calls sent a message each while the
//! responder was busy), whose responses leave together when the last of
//! them is done (on a locality of one worker, which runs that last run
//! itself, without arming the flush timer either);
//! a run of a thousand gets one message, also where the tuner turned the
//! action's coalescing off (for calls awaited one at a time): its caller
//! sent the calls together. The sparse bypass does not send the first
//! response of a run of many alone, however long ago the last response
//! left (nor that of a piece of many calls, whose responses wait for the
//! count, the timer or the idle worker).
//!
//! A caller that awaits its calls a thousand or more together (its
//! tuner's κ, `Tuner::responses_wait`) says so in their frames (the
//! run's `RESPONSES_WAIT` bit, `parcel/wire.rs`): it needs the last
//! response of many, so the responses of its runs are *patient*. They
//! wait for company across runs, under a count policy of their own
//! ([`AdaptivePolicy::patient`](super::AdaptivePolicy)): as many as the
//! bounds allow, for about [`PATIENT_WAIT_US`] or the interval of the
//! setting in force towards the caller, whichever is longer (the flush
//! timer's, which a worker still pushing parcels may defer), or until
//! the worker runs out of tasks. Routed calls (a 2D grid) do not carry the word: a
//! locality that forwards them says its own. Sent a run at a time, parquet's responses took a
//! message for each run of 64 rows: half its messages (BENCHMARKS.md,
//! issue #15, eighteenth part).

use std::cell::Cell;

use crate::ids::LocalityId;

/// How long a patient response waits for company (see the module docs),
/// in microseconds: a tenth of the longest wait of posts. A responder
/// that stays busy (so that its idle flush does not send them) delays
/// the end of a caller's batch by about this. A guess, tune me.
pub(crate) const PATIENT_WAIT_US: u64 = 1_000;

/// The run of calls a thread is handling: what an [`Answering`] scope
/// is opened with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AnsweredRun {
    /// The action's slot.
    pub(crate) slot: usize,
    /// The locality whose calls these are.
    pub(crate) caller: LocalityId,
    /// Whether the run holds more than one call, or came with other
    /// runs of its caller's (a train of runs that waited together:
    /// `runtime/trains.rs`).
    pub(crate) many: bool,
    /// Whether it came whole: not a piece of a run split between tasks
    /// or of a train (whose responses are not the run's: [`answering`]
    /// says no, but [`answering_many`] may say yes).
    pub(crate) whole: bool,
    /// Whether its caller lets the responses wait (see the module docs).
    pub(crate) patient: bool,
    /// Whether it is a run of a train other than its last: its responses
    /// leave with those of the train's last run, which sends them
    /// (`runtime/receive.rs`).
    pub(crate) in_train: bool,
}

thread_local! {
    /// The run of calls this thread is handling in an [`Answering`]
    /// scope, if any.
    static ANSWERING: Cell<Option<AnsweredRun>> = const { Cell::new(None) };
}

/// While alive, the responses of the action in `slot` to `caller` made on
/// this thread are the run's (see the module docs); ends the scope when
/// dropped, also when unwinding.
#[derive(Debug)]
pub(crate) struct Answering(Option<AnsweredRun>);

impl Answering {
    /// Opens the scope of `run` on this thread.
    pub(crate) fn enter(run: AnsweredRun) -> Answering {
        Answering(ANSWERING.replace(Some(run)))
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        ANSWERING.set(self.0);
    }
}

/// Whether the responses to a run of calls (`whole`, or a piece of one
/// split between tasks) leave when it is done: a whole run's that are not
/// `patient`. A piece's responses join those of the other pieces in the
/// buffer; patient ones wait for company there.
#[inline]
pub(crate) fn sent_when_done(whole: bool, patient: bool) -> bool {
    whole && !patient
}

/// The run this thread is answering, if it is of the action in `slot`
/// from `dest`.
#[inline]
fn run_for(slot: usize, dest: LocalityId) -> Option<AnsweredRun> {
    ANSWERING
        .get()
        .filter(|run| (run.slot, run.caller) == (slot, dest))
}

/// Whether a response of the action in `slot` to `dest` belongs to the
/// run this thread is answering, whole and not patient: it is sent when
/// the run is done.
#[inline]
pub(crate) fn answering(slot: usize, dest: LocalityId) -> bool {
    run_for(slot, dest).is_some_and(|run| sent_when_done(run.whole, run.patient))
}

/// Whether a response of the action in `slot` to `dest` answers a whole
/// run of one call this thread is handling, not patient: it leaves at
/// once, alone, as with coalescing off.
#[inline]
pub(crate) fn answering_alone(slot: usize, dest: LocalityId) -> bool {
    run_for(slot, dest).is_some_and(|run| run.whole && !run.many && !run.patient)
}

/// Whether a response of the action in `slot` to `dest` answers a run
/// (whole or a piece) of more than one call this thread is handling: its
/// caller sent the calls together, and their responses may leave
/// together even where the action's coalescing is off
/// (`Aggregator::escape_off`).
#[inline]
pub(crate) fn answering_many(slot: usize, dest: LocalityId) -> bool {
    run_for(slot, dest).is_some_and(|run| run.many)
}

/// Whether a response of the action in `slot` to `dest` answers a run of
/// a train this thread is handling, not its last: the train's last run
/// sends it.
#[inline]
pub(crate) fn in_train(slot: usize, dest: LocalityId) -> bool {
    run_for(slot, dest).is_some_and(|run| run.in_train)
}

/// Whether a response of the action in `slot` to `dest` answers a run
/// this thread is handling whose caller lets the responses wait: it waits
/// for company under the patient policy (see the module docs).
#[inline]
pub(crate) fn patient(slot: usize, dest: LocalityId) -> bool {
    run_for(slot, dest).is_some_and(|run| run.patient)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whole, impatient run of many calls of action 3 from locality 1.
    fn many_calls() -> AnsweredRun {
        AnsweredRun {
            slot: 3,
            caller: LocalityId::new(1),
            many: true,
            whole: true,
            patient: false,
            in_train: false,
        }
    }

    #[test]
    fn only_a_whole_run_is_answered_together_but_a_piece_of_many_calls_answers_them_together() {
        let (slot, caller, other) = (3, LocalityId::new(1), LocalityId::new(2));
        assert!(!answering(slot, caller) && !answering_many(slot, caller));
        {
            let _whole = Answering::enter(many_calls());
            assert!(answering(slot, caller) && answering_many(slot, caller));
            assert!(!answering_alone(slot, caller), "a run of many");
            assert!(!answering(slot, other) && !answering_many(slot + 1, caller));
            {
                // A piece of a run split between tasks, nested (a task
                // handling it inline): its responses are not the run's.
                let _piece = Answering::enter(AnsweredRun {
                    whole: false,
                    ..many_calls()
                });
                assert!(!answering(slot, caller) && answering_many(slot, caller));
            }
            assert!(answering(slot, caller), "the outer scope is back");
        }
        let one_call = AnsweredRun {
            many: false,
            ..many_calls()
        };
        let alone = Answering::enter(one_call);
        assert!(answering(slot, caller) && !answering_many(slot, caller));
        assert!(answering_alone(slot, caller) && !answering_alone(slot, other));
        drop(alone);
        // A run of one in a train: its response waits for the others'.
        let of_train = Answering::enter(AnsweredRun {
            whole: false,
            in_train: true,
            ..many_calls()
        });
        assert!(!answering(slot, caller) && answering_many(slot, caller));
        assert!(!answering_alone(slot, caller), "one of a train");
        assert!(in_train(slot, caller) && !in_train(slot, other));
        drop(of_train);
        let last_of_train = Answering::enter(many_calls());
        assert!(answering(slot, caller) && !answering_alone(slot, caller));
        assert!(
            !in_train(slot, caller),
            "the last run of a train sends them"
        );
        drop(last_of_train);
        let piece_of_one = Answering::enter(AnsweredRun {
            whole: false,
            ..one_call
        });
        assert!(!answering(slot, caller) && !answering_many(slot, caller));
        assert!(!answering_alone(slot, caller), "a piece of a run");
        assert!(!patient(slot, caller));
        drop(piece_of_one);
    }

    #[test]
    fn a_patient_run_is_not_answered_when_it_is_done_nor_alone() {
        let (slot, caller) = (3, LocalityId::new(1));
        let patient_many = AnsweredRun {
            patient: true,
            ..many_calls()
        };
        {
            let _many = Answering::enter(patient_many);
            assert!(patient(slot, caller) && answering_many(slot, caller));
            assert!(!answering(slot, caller), "not sent when the run is done");
            assert!(!patient(slot + 1, caller) && !patient(slot, LocalityId::new(2)));
        }
        let _one = Answering::enter(AnsweredRun {
            many: false,
            ..patient_many
        });
        assert!(patient(slot, caller) && !answering_alone(slot, caller));
        assert!(!answering(slot, caller));
    }
}
