//! The failure detector: every locality of a multi-process job hears from
//! every other at least once per heartbeat interval, and a peer silent for
//! longer than the peer timeout is declared lost.
//!
//! A crashed process closes its connections and the transport reports it at
//! once; a *stopped* one (`kill -STOP`, a debugger, a machine that froze) or
//! an unreachable one says nothing, and without this file its peers would
//! wait for ever. The locality's monitor thread (`monitor.rs`), which
//! drives the transport each round whatever the workers do, runs [`check`]
//! every [`heartbeat interval`](Liveness::interval), which:
//!
//! 1. sends a [`Control::Heartbeat`] to every peer it has sent nothing to
//!    for an interval: traffic is the heartbeat when there is some;
//! 2. declares lost every peer it has heard nothing from for the timeout,
//!    with a reason that names the silence;
//! 3. on a locality other than the root, exits the process when the root
//!    was lost and the program has not left the job within
//!    [`ORPHAN_GRACE`]: a stuck handler must not leave an orphan behind.
//!
//! Heartbeats are sent whatever the local timeout, even `off`, so that
//! peers with a timeout still hear from a locality being debugged. The
//! interval is a fifth of the timeout, at most [`MAX_INTERVAL`]: a peer
//! with a longer timeout than ours still sends often enough for ours.
//!
//! The in-process transport has no detector: its localities cannot stop
//! one at a time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::clock::clock;
use crate::ids::LocalityId;

/// The longest interval between two heartbeats.
pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(1);

/// How long a non-root locality that lost its root waits for the program
/// to leave the job before it ends the process itself.
pub(crate) const ORPHAN_GRACE: Duration = Duration::from_secs(2);

/// The default peer timeout: long enough for a loaded machine's
/// scheduling hiccups, short enough that a stopped job is noticed.
pub const DEFAULT_PEER_TIMEOUT: Duration = Duration::from_secs(5);

/// How a locality watches its peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LivenessSettings {
    /// Whether to run the detector at all (not for the in-process transport).
    pub(crate) enabled: bool,
    /// Silence after which a peer is lost; `None`: never (debugging).
    pub(crate) timeout: Option<Duration>,
    /// Whether this process ends itself when it lost the root and the
    /// program does not leave the job (non-root localities of a
    /// multi-process job).
    pub(crate) exit_when_orphaned: bool,
}

impl LivenessSettings {
    /// No detector.
    pub(crate) const OFF: LivenessSettings = LivenessSettings {
        enabled: false,
        timeout: None,
        exit_when_orphaned: false,
    };
}

/// When each peer was last heard from and last sent to, and the detector's
/// stop signal.
#[derive(Debug)]
pub(crate) struct Liveness {
    settings: LivenessSettings,
    /// When a frame last came from each locality (raw clock ticks).
    heard: Box<[AtomicU64]>,
    /// When a frame last went to each locality (raw clock ticks).
    sent: Box<[AtomicU64]>,
    /// Set when the program has left the job (the locality stopped, or
    /// its main thread took its result back): the detector ends.
    released: AtomicBool,
    wake: (Mutex<()>, Condvar),
}

impl Liveness {
    /// The detector state of a job of `count` localities.
    pub(crate) fn new(count: u32, settings: LivenessSettings) -> Liveness {
        let now = clock().raw();
        let stamps = || (0..count).map(|_| AtomicU64::new(now)).collect();
        Liveness {
            settings,
            heard: stamps(),
            sent: stamps(),
            released: AtomicBool::new(false),
            wake: (Mutex::new(()), Condvar::new()),
        }
    }

    /// Whether this locality watches its peers.
    pub(super) fn enabled(&self) -> bool {
        self.settings.enabled
    }

    /// The peer timeout, if peers are declared lost at all.
    pub(super) fn timeout(&self) -> Option<Duration> {
        self.settings.timeout
    }

    /// Whether this process ends itself when orphaned.
    pub(super) fn exits_when_orphaned(&self) -> bool {
        self.settings.exit_when_orphaned
    }

    /// Whether `peer` is due a heartbeat at `now`: nothing went to it for
    /// an interval.
    pub(super) fn heartbeat_due(&self, peer: LocalityId, now: u64) -> bool {
        let sent = self.sent[peer.index()].load(Ordering::Relaxed);
        elapsed(sent, now) >= self.interval()
    }

    /// How long nothing came from `peer`, at `now`.
    pub(super) fn silence(&self, peer: LocalityId, now: u64) -> Duration {
        elapsed(self.heard[peer.index()].load(Ordering::Relaxed), now)
    }

    /// The heartbeat interval: a fifth of the timeout, at most
    /// [`MAX_INTERVAL`], at least a millisecond.
    pub(crate) fn interval(&self) -> Duration {
        self.settings
            .timeout
            .map_or(MAX_INTERVAL, |t| (t / 5).min(MAX_INTERVAL))
            .max(Duration::from_millis(1))
    }

    /// A frame came from `peer` at `now` (raw clock ticks).
    #[inline]
    pub(crate) fn heard(&self, peer: LocalityId, now: u64) {
        if let Some(stamp) = self.heard.get(peer.index()) {
            stamp.store(now, Ordering::Relaxed);
        }
    }

    /// A frame is going to `peer`.
    #[inline]
    pub(crate) fn sent(&self, peer: LocalityId) {
        if self.settings.enabled {
            if let Some(stamp) = self.sent.get(peer.index()) {
                stamp.store(clock().raw(), Ordering::Relaxed);
            }
        }
    }

    /// The program has left the job: the monitor stops.
    pub(crate) fn release(&self) {
        self.released.store(true, Ordering::Release);
        let _guard = self.wake.0.lock();
        self.wake.1.notify_all();
    }

    /// Whether the program has left the job.
    pub(super) fn is_released(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }

    /// Sleeps for `pause` or until released.
    pub(super) fn pause(&self, pause: Duration) {
        let mut guard = self.wake.0.lock();
        if !self.is_released() {
            self.wake.1.wait_for(&mut guard, pause);
        }
    }
}

/// The time from `then` to `now` (raw clock ticks); zero if another thread
/// stamped `then` after `now` was read.
pub(super) fn elapsed(then: u64, now: u64) -> Duration {
    if then >= now {
        return Duration::ZERO;
    }
    Duration::from_nanos(clock().delta_as_nanos(then, now))
}
