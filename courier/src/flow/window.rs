//! The sending side: [`SendWindows`], one credit window per destination
//! and the frames waiting for credit.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::Budget;
use crate::ids::LocalityId;

/// What [`SendWindows::offer`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offer {
    /// It went to the transport.
    Sent,
    /// It waits for credit (it leaves, in order, as credit comes back);
    /// with `Some(bytes)`, ask the destination to lend that much from its
    /// pool.
    Queued(Option<usize>),
}

/// What the sender must tell a destination after credit or a loan came
/// back ([`SendWindows::credit`], [`SendWindows::lent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Refill {
    /// Frames sent from the queue.
    pub(crate) sent: usize,
    /// Ask to borrow this much from its pool.
    pub(crate) borrow: Option<usize>,
    /// Give back this much borrowed credit, no longer needed.
    pub(crate) give_back: Option<usize>,
}

/// The credit windows of one locality towards every destination.
#[derive(Debug)]
pub(crate) struct SendWindows {
    /// Bytes of charge a destination accepts unfinished; 0: no flow control.
    window: usize,
    /// What may be used beyond the window at every destination without asking.
    hint: usize,
    /// Whether destinations have a pool to borrow from.
    pool: bool,
    /// Bytes of charge queued for one destination beyond which the
    /// program's sends to it wait.
    queue_limit: usize,
    dests: Box<[Dest]>,
    /// Threads outside the runtime waiting for a queue to shrink.
    sleepers: AtomicUsize,
    sleep_lock: Mutex<()>,
    shrunk: Condvar,
    /// Frames that had to wait for credit, ever.
    frames_queued: AtomicU64,
    /// Requests to borrow from a pool, ever.
    borrow_requests: AtomicU64,
    /// Bytes borrowed, ever.
    borrowed: AtomicU64,
    /// Credit messages received.
    credits_received: AtomicU64,
}

#[derive(Debug, Default)]
struct Dest {
    state: Mutex<State>,
    /// Charge of the frames in `state.queue`, readable without the lock.
    queued: AtomicUsize,
    /// Charge sent and not yet given back, readable without the lock.
    outstanding: AtomicUsize,
}

#[derive(Debug, Default)]
struct State {
    outstanding: usize,
    queue: VecDeque<(Vec<u8>, usize)>,
    /// Borrowed from the destination's pool.
    loan: usize,
    /// A request to borrow is unanswered.
    borrowing: bool,
    /// The destination is lost: nothing more is sent or queued.
    lost: bool,
}

impl SendWindows {
    /// Windows towards `count` localities as `budget` says; the program
    /// waits when more than its queue limit waits for one of them. A
    /// window of 0 turns flow control off (every frame is sent at once).
    pub(crate) fn new(count: u32, budget: &Budget) -> SendWindows {
        SendWindows {
            window: budget.window,
            hint: budget.hint,
            pool: budget.pool > 0,
            queue_limit: budget.queue,
            dests: (0..count).map(|_| Dest::default()).collect(),
            sleepers: AtomicUsize::new(0),
            sleep_lock: Mutex::new(()),
            shrunk: Condvar::new(),
            frames_queued: AtomicU64::new(0),
            borrow_requests: AtomicU64::new(0),
            borrowed: AtomicU64::new(0),
            credits_received: AtomicU64::new(0),
        }
    }

    /// Whether frames need credit.
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        self.window != 0
    }

    /// The window, in bytes of charge (0: off).
    pub(crate) fn window(&self) -> usize {
        self.window
    }

    /// Whether a frame of `charge` may go with `outstanding` unreturned:
    /// it fits the window, or nothing is outstanding (a frame larger than
    /// the window goes alone).
    #[inline]
    pub(crate) fn fits(window: usize, outstanding: usize, charge: usize) -> bool {
        outstanding == 0 || outstanding.saturating_add(charge) <= window
    }

    /// Sends `frame` (costing `charge`) to `dest` through `send` if its
    /// window has room and nothing waits before it; queues it otherwise.
    /// An error from `send` is returned (the frame is dropped, its credit
    /// not taken).
    pub(crate) fn offer<E>(
        &self,
        dest: LocalityId,
        frame: Vec<u8>,
        charge: usize,
        send: impl FnOnce(Vec<u8>) -> Result<(), E>,
    ) -> Result<Offer, E> {
        let Some(d) = self.dests.get(dest.index()) else {
            return send(frame).map(|()| Offer::Sent);
        };
        if !self.enabled() {
            return send(frame).map(|()| Offer::Sent);
        }
        let mut state = d.state.lock();
        if state.lost {
            // The loss is reported elsewhere; `send` says so.
            drop(state);
            return send(frame).map(|()| Offer::Sent);
        }
        if state.queue.is_empty() && Self::fits(self.limit(&state), state.outstanding, charge) {
            // Sent under the lock: frames to one destination leave in order.
            send(frame)?;
            state.outstanding += charge;
            d.outstanding.store(state.outstanding, Ordering::Relaxed);
            return Ok(Offer::Sent);
        }
        state.queue.push_back((frame, charge));
        d.queued.fetch_add(charge, Ordering::Relaxed);
        self.frames_queued.fetch_add(1, Ordering::Relaxed);
        Ok(Offer::Queued(self.borrow(&mut state)))
    }

    /// What may be outstanding towards a destination now.
    fn limit(&self, state: &State) -> usize {
        self.window
            .saturating_add(self.hint)
            .saturating_add(state.loan)
    }

    /// Whether to ask the destination's pool for what waits (once at a
    /// time): the charge queued.
    fn borrow(&self, state: &mut State) -> Option<usize> {
        if !self.pool || state.borrowing || state.queue.is_empty() {
            return None;
        }
        state.borrowing = true;
        self.borrow_requests.fetch_add(1, Ordering::Relaxed);
        Some(state.queue.iter().map(|(_, charge)| charge).sum())
    }

    /// `dest` gave back `bytes` of credit: sends the queued frames that now
    /// fit, in order. A failing `send` (the destination is lost) drops what
    /// is queued for it.
    pub(crate) fn credit<E>(
        &self,
        dest: LocalityId,
        bytes: usize,
        send: impl FnMut(Vec<u8>) -> Result<(), E>,
    ) -> Refill {
        self.credits_received.fetch_add(1, Ordering::Relaxed);
        self.refill(dest, send, true, |state| {
            // More than was outstanding is a broken peer's word: it only
            // lets this locality send it more.
            state.outstanding = state.outstanding.saturating_sub(bytes);
        })
    }

    /// `dest` lent `bytes` from its pool (perhaps 0): sends what now fits.
    pub(crate) fn lent<E>(
        &self,
        dest: LocalityId,
        bytes: usize,
        send: impl FnMut(Vec<u8>) -> Result<(), E>,
    ) -> Refill {
        self.borrowed.fetch_add(bytes as u64, Ordering::Relaxed);
        // A refusal is not asked again at once (the pool is empty): the
        // next credit that comes back asks again.
        self.refill(dest, send, bytes > 0, |state| {
            state.borrowing = false;
            // A loan nobody asked for, or a huge one, is a broken peer's
            // word: it only lets this locality send it more.
            state.loan = state.loan.saturating_add(bytes);
        })
    }

    /// Changes `dest`'s state by `change`, then sends the queued frames
    /// that fit; says whether to borrow more (if `may_borrow`) or give a
    /// loan back.
    fn refill<E>(
        &self,
        dest: LocalityId,
        mut send: impl FnMut(Vec<u8>) -> Result<(), E>,
        may_borrow: bool,
        change: impl FnOnce(&mut State),
    ) -> Refill {
        let Some(d) = self.dests.get(dest.index()) else {
            return Refill::default();
        };
        let mut state = d.state.lock();
        change(&mut state);
        let mut refill = Refill::default();
        while let Some(&(_, charge)) = state.queue.front() {
            if state.lost || !Self::fits(self.limit(&state), state.outstanding, charge) {
                break;
            }
            let Some((frame, charge)) = state.queue.pop_front() else {
                break;
            };
            d.queued.fetch_sub(charge, Ordering::Relaxed);
            if send(frame).is_err() {
                Self::drop_queue(d, &mut state);
                break;
            }
            state.outstanding += charge;
            refill.sent += 1;
        }
        if !state.lost {
            // The loan goes back once nothing uses it: an empty queue and no
            // more outstanding than the window and hint allow.
            if state.queue.is_empty()
                && state.loan > 0
                && !state.borrowing
                && state.outstanding <= self.window.saturating_add(self.hint)
            {
                refill.give_back = Some(std::mem::take(&mut state.loan));
            }
            if may_borrow {
                refill.borrow = self.borrow(&mut state);
            }
        }
        d.outstanding.store(state.outstanding, Ordering::Relaxed);
        drop(state);
        self.wake_sleepers();
        refill
    }

    /// `dest` is lost: drops its queue; nothing is queued for it again.
    pub(crate) fn abandon(&self, dest: LocalityId) {
        if let Some(d) = self.dests.get(dest.index()) {
            let mut state = d.state.lock();
            Self::drop_queue(d, &mut state);
            drop(state);
            self.wake_sleepers();
        }
    }

    fn drop_queue(d: &Dest, state: &mut State) {
        state.lost = true;
        state.queue.clear();
        d.queued.store(0, Ordering::Relaxed);
    }

    /// Whether the program's sends to `dest` should wait: more than the
    /// queue limit waits for credit towards it.
    #[inline]
    pub(crate) fn congested(&self, dest: LocalityId) -> bool {
        self.dests
            .get(dest.index())
            .is_some_and(|d| d.queued.load(Ordering::Relaxed) > self.queue_limit)
    }

    /// Blocks the calling thread (one outside the runtime) until `dest` is
    /// not congested or `give_up` says so; polls `give_up` every millisecond.
    pub(crate) fn wait_blocking(&self, dest: LocalityId, give_up: impl Fn() -> bool) {
        let mut guard = self.sleep_lock.lock();
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while self.congested(dest) && !give_up() {
            self.shrunk.wait_for(&mut guard, Duration::from_millis(1));
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    fn wake_sleepers(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _guard = self.sleep_lock.lock();
            self.shrunk.notify_all();
        }
    }

    /// Charge queued for credit, over every destination.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.dests
            .iter()
            .map(|d| d.queued.load(Ordering::Relaxed))
            .sum()
    }

    /// Charge sent and not yet given back, over every destination.
    pub(crate) fn outstanding_bytes(&self) -> usize {
        self.dests
            .iter()
            .map(|d| d.outstanding.load(Ordering::Relaxed))
            .sum()
    }

    /// Frames that waited for credit, ever.
    pub(crate) fn frames_queued(&self) -> u64 {
        self.frames_queued.load(Ordering::Relaxed)
    }

    /// Requests to borrow from a destination's pool, ever.
    pub(crate) fn borrow_requests(&self) -> u64 {
        self.borrow_requests.load(Ordering::Relaxed)
    }

    /// Bytes borrowed from destinations' pools, ever.
    pub(crate) fn borrowed(&self) -> u64 {
        self.borrowed.load(Ordering::Relaxed)
    }

    /// Credit messages received, ever.
    pub(crate) fn credits_received(&self) -> u64 {
        self.credits_received.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(i: u32) -> LocalityId {
        LocalityId::new(i)
    }

    fn frame(tag: u8) -> Vec<u8> {
        vec![tag]
    }

    fn budget(window: usize, queue: usize) -> Budget {
        Budget {
            queue,
            ..Budget::window(window)
        }
    }

    #[test]
    fn a_sender_borrows_what_waits_uses_the_loan_and_gives_it_back() {
        let w = SendWindows::new(
            2,
            &Budget {
                pool: 1000,
                ..budget(100, 0)
            },
        );
        let ok = |_f: Vec<u8>| Ok::<(), ()>(());
        assert_eq!(w.offer(l(1), frame(0), 100, ok), Ok(Offer::Sent));
        assert_eq!(w.offer(l(1), frame(1), 60, ok), Ok(Offer::Queued(Some(60))));
        assert_eq!(
            w.offer(l(1), frame(2), 40, ok),
            Ok(Offer::Queued(None)),
            "one request at a time"
        );
        let refill = w.lent(l(1), 100, ok);
        assert_eq!(
            (refill.sent, refill.borrow, refill.give_back),
            (2, None, None)
        );
        assert_eq!(w.outstanding_bytes(), 200);
        // Credit back: the loan is unused once outstanding is within the window.
        let refill = w.credit(l(1), 150, ok);
        assert_eq!(refill.give_back, Some(100));
        assert_eq!(w.borrow_requests(), 1);
        assert_eq!(w.borrowed(), 100);
        // A refused loan (0) is asked again when credit comes back.
        assert_eq!(w.offer(l(1), frame(3), 60, ok), Ok(Offer::Queued(Some(60))));
        assert_eq!(
            w.lent(l(1), 0, ok),
            Refill::default(),
            "not asked again at once"
        );
        let refill = w.credit(l(1), 5, ok);
        assert_eq!((refill.sent, refill.borrow), (0, Some(60)), "asked again");
        assert_eq!(w.credit(l(1), 45, ok).sent, 1);
    }

    #[test]
    fn a_huge_loan_from_a_broken_peer_does_not_overflow() {
        let w = SendWindows::new(
            2,
            &Budget {
                pool: 1,
                hint: usize::MAX,
                ..budget(100, 0)
            },
        );
        let ok = |_f: Vec<u8>| Ok::<(), ()>(());
        w.lent(l(1), usize::MAX, ok);
        w.lent(l(1), usize::MAX, ok);
        assert_eq!(w.offer(l(1), frame(0), usize::MAX / 2, ok), Ok(Offer::Sent));
        w.credit(l(1), usize::MAX, ok);
    }

    #[test]
    fn a_hint_widens_the_window_and_no_pool_means_no_borrowing() {
        let w = SendWindows::new(
            2,
            &Budget {
                hint: 50,
                ..budget(100, 0)
            },
        );
        let ok = |_f: Vec<u8>| Ok::<(), ()>(());
        assert_eq!(w.offer(l(1), frame(0), 150, ok), Ok(Offer::Sent));
        assert_eq!(w.offer(l(1), frame(1), 1, ok), Ok(Offer::Queued(None)));
    }

    #[test]
    fn frames_beyond_the_window_wait_and_leave_in_order() {
        let w = SendWindows::new(2, &budget(100, 50));
        let mut wire = Vec::new();
        for tag in 0..5 {
            let offer = w.offer(l(1), frame(tag), 40, |f| {
                wire.push(f[0]);
                Ok::<(), ()>(())
            });
            let expected = if tag < 2 {
                Offer::Sent
            } else {
                Offer::Queued(None)
            };
            assert_eq!(offer, Ok(expected), "frame {tag}");
        }
        assert_eq!(wire, [0, 1]);
        assert_eq!(w.queued_bytes(), 120);
        assert!(w.congested(l(1)) && !w.congested(l(0)));
        // 40 back: one more fits (80 outstanding).
        let sent = w
            .credit(l(1), 40, |f| {
                wire.push(f[0]);
                Ok::<(), ()>(())
            })
            .sent;
        assert_eq!(sent, 1);
        assert_eq!(wire, [0, 1, 2]);
        assert!(w.congested(l(1)), "80 still queued");
        let sent = w
            .credit(l(1), 80, |f| {
                wire.push(f[0]);
                Ok::<(), ()>(())
            })
            .sent;
        assert_eq!(sent, 2);
        assert_eq!(wire, [0, 1, 2, 3, 4]);
        assert_eq!(w.queued_bytes(), 0);
        assert_eq!(w.outstanding_bytes(), 80);
        assert_eq!(w.frames_queued(), 3);
    }

    #[test]
    fn a_frame_larger_than_the_window_goes_alone() {
        let w = SendWindows::new(2, &budget(100, 0));
        let ok = |_f: Vec<u8>| Ok::<(), ()>(());
        assert_eq!(w.offer(l(1), frame(0), 10, ok), Ok(Offer::Sent));
        assert_eq!(w.offer(l(1), frame(1), 500, ok), Ok(Offer::Queued(None)));
        assert_eq!(
            w.credit(l(1), 10, ok).sent,
            1,
            "sent once nothing is outstanding"
        );
        assert_eq!(w.outstanding_bytes(), 500);
    }

    #[test]
    fn a_failed_send_takes_no_credit_and_a_lost_destination_queues_nothing() {
        let w = SendWindows::new(2, &budget(100, 0));
        assert_eq!(w.offer(l(1), frame(0), 10, |_| Err("lost")), Err("lost"));
        assert_eq!(w.outstanding_bytes(), 0);
        let ok = |_f: Vec<u8>| Ok::<(), &str>(());
        assert_eq!(w.offer(l(1), frame(1), 90, ok), Ok(Offer::Sent));
        assert_eq!(w.offer(l(1), frame(2), 90, ok), Ok(Offer::Queued(None)));
        w.abandon(l(1));
        assert_eq!(w.queued_bytes(), 0);
        assert!(!w.congested(l(1)));
        assert_eq!(w.offer(l(1), frame(3), 90, |_| Err("lost")), Err("lost"));
    }

    #[test]
    fn bogus_credit_cannot_underflow() {
        let w = SendWindows::new(2, &budget(100, 0));
        let ok = |_f: Vec<u8>| Ok::<(), ()>(());
        assert_eq!(w.offer(l(1), frame(0), 60, ok), Ok(Offer::Sent));
        w.credit(l(1), 1_000_000, ok);
        assert_eq!(w.outstanding_bytes(), 0);
    }

    #[test]
    fn off_sends_everything_at_once() {
        let w = SendWindows::new(2, &budget(0, 0));
        let ok = |_f: Vec<u8>| Ok::<(), ()>(());
        for _ in 0..100 {
            assert_eq!(w.offer(l(1), frame(0), 1 << 30, ok), Ok(Offer::Sent));
        }
        assert!(!w.congested(l(1)));
    }

    #[test]
    fn a_blocked_thread_wakes_when_credit_comes_back() {
        let w = std::sync::Arc::new(SendWindows::new(2, &budget(100, 0)));
        let ok = |_f: Vec<u8>| Ok::<(), ()>(());
        w.offer(l(1), frame(0), 100, ok).unwrap();
        w.offer(l(1), frame(1), 100, ok).unwrap();
        assert!(w.congested(l(1)));
        let waiter = {
            let w = std::sync::Arc::clone(&w);
            std::thread::spawn(move || w.wait_blocking(l(1), || false))
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "waits while congested");
        w.credit(l(1), 100, ok);
        waiter.join().unwrap();
    }
}
