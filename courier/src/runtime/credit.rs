//! How a locality uses flow control (the `flow` room): frames of calls
//! leave against credit, the program waits when a destination's queue is
//! long, and credit goes back as received calls finish.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam_utils::Backoff;

use super::locality::Locality;
use crate::clock::clock;
use crate::flow::{Offer, Refill, charge};
use crate::ids::LocalityId;
use crate::parcel::{Control, FRAME_HEADROOM, RunKind};
use crate::sched::on_worker;
use crate::transport::SendError;

thread_local! {
    /// How many received runs of calls this thread is inside.
    static IN_HANDLER: Cell<u32> = const { Cell::new(0) };
}

/// Marks the calling thread as running received calls while it lives:
/// sends made there never wait for credit (see the `flow` room).
pub(super) struct HandlerScope(());

impl HandlerScope {
    pub(super) fn enter() -> HandlerScope {
        IN_HANDLER.with(|depth| depth.set(depth.get() + 1));
        HandlerScope(())
    }

    pub(super) fn active() -> bool {
        IN_HANDLER.with(Cell::get) > 0
    }
}

impl Drop for HandlerScope {
    fn drop(&mut self) {
        IN_HANDLER.with(|depth| depth.set(depth.get() - 1));
    }
}

/// Received runs a sending worker runs, at most, each time it sends a
/// frame: a frame of calls out, a few in, as bale's exstack alternates
/// pushes and pops.
const RUNS_PER_FRAME_SENT: usize = 4;

/// How long a waiting worker blocks on its transport when nothing else
/// is to be done, before it looks at its inbox again.
const WAIT_BLOCK: Duration = Duration::from_micros(200);

/// Where [`Locality::offer_frame`] put a frame.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Handed {
    /// To the transport, now.
    Now,
    /// Into the queue of frames waiting for credit: it leaves later.
    Later,
}

impl Locality {
    /// Hands a frame of `kind` to the transport, through the credit window
    /// of `dest` if its kind needs credit (calls and routed calls); says
    /// whether it went now or waits for credit.
    pub(super) fn offer_frame(
        &self,
        dest: LocalityId,
        kind: RunKind,
        frame: Vec<u8>,
    ) -> Result<Handed, SendError> {
        if kind == RunKind::Responses || !self.windows.enabled() {
            return self.transmit(dest, frame).map(|()| Handed::Now);
        }
        let charge = charge(frame.len() - FRAME_HEADROOM);
        let offer = self
            .windows
            .offer(dest, frame, charge, |frame| self.transmit(dest, frame))?;
        if let Offer::Queued(borrow) = offer {
            if let Some(bytes) = borrow {
                self.send_control(
                    dest,
                    &Control::Borrow {
                        bytes: bytes as u64,
                    },
                );
            }
            // The program's next send to `dest` may wait; if this thread
            // is a worker of this locality, the credit arrives by its own
            // polling or another worker's.
            self.transport.wake();
            return Ok(Handed::Later);
        }
        Ok(Handed::Now)
    }

    /// `source` gave back `bytes` of credit: what waited for it leaves.
    pub(super) fn credit_returned(&self, source: LocalityId, bytes: u64) {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        let refill = self
            .windows
            .credit(source, bytes, |frame| self.transmit(source, frame));
        self.after_refill(source, refill);
    }

    /// `origin` asks to borrow `bytes` from this locality's pool.
    pub(super) fn lend(&self, origin: LocalityId, bytes: u64) {
        let lent = self
            .ledger
            .lend(origin, usize::try_from(bytes).unwrap_or(usize::MAX));
        self.send_control(origin, &Control::Lent { bytes: lent as u64 });
    }

    /// `source` lent `bytes` from its pool: what waited for it leaves.
    pub(super) fn borrowed(&self, source: LocalityId, bytes: u64) {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        let refill = self
            .windows
            .lent(source, bytes, |frame| self.transmit(source, frame));
        self.after_refill(source, refill);
    }

    /// Asks `dest` for a loan, or gives one back, as a refill says.
    fn after_refill(&self, dest: LocalityId, refill: Refill) {
        if let Some(bytes) = refill.borrow {
            self.send_control(
                dest,
                &Control::Borrow {
                    bytes: bytes as u64,
                },
            );
        }
        if let Some(bytes) = refill.give_back {
            self.send_control(
                dest,
                &Control::GiveBack {
                    bytes: bytes as u64,
                },
            );
        }
    }

    /// Received work from `origin` costing `credit` is finished: give
    /// its credit back, now if enough is owed.
    pub(super) fn finish_credit(&self, origin: LocalityId, credit: usize) {
        if let Some(bytes) = self.ledger.finish(origin, credit) {
            self.send_control(
                origin,
                &Control::Credit {
                    bytes: bytes as u64,
                },
            );
        }
    }

    /// Gives back every credit owed, however small; returns whether there
    /// was any. Called by a worker about to go idle and by a waiting one.
    pub(crate) fn give_owed_credit(&self) -> bool {
        self.ledger.take_owed(|origin, bytes| {
            self.send_control(
                origin,
                &Control::Credit {
                    bytes: bytes as u64,
                },
            );
        })
    }

    /// What the program does before a send to `dest` (a hop): nothing
    /// while its queue of frames waiting for credit is within the limit,
    /// wait otherwise. Received calls never wait; a worker waits by driving
    /// the transport and running received calls; another thread blocks.
    #[inline]
    pub(super) fn before_send(&self, dest: LocalityId) {
        if self.windows.congested(dest) {
            self.wait_for_credit(dest);
        }
    }

    /// A worker sent a frame: read what arrived and, outside a handler and
    /// while others' unfinished work here is a quarter window or more, run
    /// a few received runs, so that a sender that never yields still runs
    /// what it is sent and its peers' credit comes back.
    pub(super) fn progress_while_sending(&self) {
        self.transport.poll(self);
        if !self.windows.enabled() || !self.ledger.pressed() || HandlerScope::active() {
            return;
        }
        let me = self.shared();
        for _ in 0..RUNS_PER_FRAME_SENT {
            if !me.run_delivery() {
                break;
            }
        }
    }

    #[cold]
    fn wait_for_credit(&self, dest: LocalityId) {
        if HandlerScope::active() {
            return;
        }
        let start = clock().raw();
        if on_worker(&self.sched) {
            let me = self.shared();
            let backoff = Backoff::new();
            while self.windows.congested(dest) && !self.is_stopping() {
                let mut did = self.transport.poll(self);
                did |= me.run_delivery();
                did |= self.give_owed_credit();
                if did {
                    backoff.reset();
                } else if backoff.is_completed() {
                    let _ = self.transport.block(self, WAIT_BLOCK);
                } else {
                    backoff.snooze();
                }
            }
        } else {
            self.windows
                .wait_blocking(dest, || self.is_stopping() || self.sched.is_shut_down());
        }
        let ns = clock().delta_as_nanos(start, clock().raw());
        self.traffic
            .credit_waits
            .count
            .fetch_add(1, Ordering::Relaxed);
        self.traffic
            .credit_waits
            .ns
            .fetch_add(ns, Ordering::Relaxed);
    }
}
