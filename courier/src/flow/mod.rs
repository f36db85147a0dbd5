//! Flow control: credit per (origin, target), so that no locality holds
//! more received work than it granted, whatever the load.
//!
//! After seed 002 (Zhao, Balaji, Gropp, Thakur), each target gives every
//! origin an exclusive receive budget, the *window* (its "system buffer"
//! for that origin). An origin sends a frame of calls only against credit:
//! [`SendWindows`] keeps, per destination, the bytes sent and not yet
//! given back, and queues a frame that does not fit. The target's
//! [`Ledger`] counts what each origin has in it, refuses a frame beyond
//! the window as a protocol violation (a hostile or broken peer cannot
//! make it read more), and gives credit back in blocks of a quarter window
//! as it *finishes* the work frames carried — not when it reads them, so
//! the bound covers the queue of received work, not only the socket.
//!
//! A frame's cost, its *charge*, is its length plus [`FRAME_CHARGE`], so
//! that a flood of one-parcel frames is bounded by the memory it really
//! takes at the target (a task and a queue entry each), not by its few
//! wire bytes.
//!
//! # Borrowing and hints
//!
//! Beyond its window, an origin may borrow from the target's shared
//! *pool* (seed 002's user buffers, reserved by a handshake): when frames
//! queue for lack of credit it asks for what waits (`Control::Borrow`),
//! the target lends what its pool has (`Control::Lent`, perhaps 0), and
//! the origin gives the loan back (`Control::GiveBack`) once its queue is
//! empty and its window alone covers what is outstanding. A *hint*
//! (`Config::credit_hint`, seed 002's `am_user_buf` hint) declares space
//! every origin may use at every target beyond its window without asking:
//! no handshake. A target never holds more than
//! `(window + hint) × (localities − 1) + pool` of received calls.
//!
//! # What needs credit
//!
//! Frames of calls and of routed calls. Responses and control messages
//! need none: the target consumes them as it reads them (a response
//! completes its call at once), so they never queue there and can never be
//! starved by requests. Frames a locality sends itself need none either.
//!
//! # Why it cannot deadlock
//!
//! Credit comes back when the target finishes received work, so the
//! question is whether every target always finishes it. Received calls wait
//! in the locality's inbox (`runtime/inbox.rs`) and any worker runs them:
//! a free worker as a task, and a worker whose program is waiting for
//! credit (below) *while it waits*. Running a received call never waits
//! for credit: a send made by an action's handler (its response, a `post`
//! it makes) joins the queue of its destination without waiting. So a
//! received call always runs to its end, its credit always goes back, and
//! every queued frame eventually leaves — two localities flooding each
//! other, or a handler calling back its caller, included.
//!
//! # Backpressure to the program
//!
//! A sending worker also runs calls it received as it goes, while its
//! locality holds a quarter window or more of unfinished work from others
//! (someone may soon wait for that credit): each time it sends a frame it
//! reads what arrived and runs a few received runs (`Locality`'s
//! `Outbox::progress`). Without it, two localities flooding each other
//! from loops that never yield would each run the other's calls only when
//! out of credit, taking turns at being idle (histo lost 30 % to this
//! with a 4 MiB window). Doing it always cost ig 8 % more instructions
//! per read: interleaving responses with requests made frames smaller.
//!
//! When a destination's queue of frames waiting for credit is longer than
//! the queue limit, the program's next `post` or `call` to it waits until
//! the queue is below the limit again. A worker thread waits by making
//! progress: it drives the transport and runs received calls (the reason
//! above); a thread outside the runtime blocks. A handler of a received
//! call does not wait (see above): what it sends is bounded by what it
//! was sent.
//!
//! # What it does not bound
//!
//! - The tasks of `async` actions: a run of calls gives its credit back
//!   once it has started them, and each task then holds its decoded
//!   arguments until it ends, like any task the program spawns.
//! - What handlers send: it queues at their locality without waiting (the
//!   price of deadlock freedom), so a handler that sends more than it was
//!   sent, call after call, grows its locality's queue.
//! - Results: responses need no credit, so a program with 10^7 `call`s
//!   outstanding holds their pending entries and results; bound it by
//!   awaiting as it goes, or with `call_batch` (one entry per batch).
//! - The argument above assumes handlers end and that the program does
//!   not block every worker outside Courier (on a lock or a channel).

mod ledger;
mod window;

pub(crate) use ledger::{Ledger, OverCredit};
pub(crate) use window::{Offer, Refill, SendWindows};

/// What one locality grants and may use: see `Config::credit_window`,
/// `credit_pool`, `credit_hint` and `credit_queue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Every origin's exclusive window at a target (0: flow control off).
    pub(crate) window: usize,
    /// What every origin may use beyond its window at every target without
    /// asking (seed 002's hint of exclusive user buffer space).
    pub(crate) hint: usize,
    /// A target's shared pool, lent to origins that ask (seed 002's user
    /// buffers reserved by a handshake).
    pub(crate) pool: usize,
    /// Charge queued for one destination beyond which the program waits.
    pub(crate) queue: usize,
}

impl Budget {
    /// A window alone: no hint, no pool, a queue limit of a quarter window.
    #[cfg(test)]
    pub(crate) fn window(window: usize) -> Budget {
        Budget {
            window,
            hint: 0,
            pool: 0,
            queue: window / 4,
        }
    }
}

/// What each received frame costs its sender in credit beyond its length:
/// the memory a frame takes at the target besides its bytes (a queue entry
/// and a task, about 200 bytes, rounded up).
pub(crate) const FRAME_CHARGE: usize = 256;

/// The credit a frame of `len` bytes (without the transport's headroom)
/// takes from its sender's window.
#[inline]
pub(crate) fn charge(len: usize) -> usize {
    len.saturating_add(FRAME_CHARGE)
}

/// The default window: the bytes of received, unfinished calls one origin
/// may have at a target.
pub const DEFAULT_CREDIT_WINDOW: usize = 4 << 20;

/// The default shared pool: the bytes of received calls a locality lends
/// to origins beyond their windows.
pub const DEFAULT_CREDIT_POOL: usize = 16 << 20;
