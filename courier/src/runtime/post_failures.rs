//! Failed posts: a post whose handler panicked, whose arguments did not
//! decode or whose action the destination does not have is reported to
//! the locality that posted it, counted there per action
//! (`/parcels/count/failed@ACTION`) and, under
//! [`OnPostFailure::Fail`], fails the posting locality's later sends and
//! the job. This file keeps the record ([`PostFailures`]); the reports
//! travel in `respond.rs`, with the other ends of a call's way.
//!
//! The destination gathers the failures of each run of calls per origin
//! and action and sends one [`Control::PostsFailed`] for them when the run
//! ends (a flood of failing posts costs a message per run, not per post);
//! a failure outside a run (an `async` action's task) is sent at once. The
//! origin logs the first failure of each action and then each time the
//! count doubles, so that a million failures print about twenty lines.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use crate::action::registry;
use crate::ids::LocalityId;
use crate::parcel::Failure;

/// What a locality does when it learns that one of its posts failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[non_exhaustive]
pub enum OnPostFailure {
    /// Count it (`/parcels/count/failed@ACTION`) and log it; the job goes on.
    #[default]
    Log,
    /// Also fail the job: the posting locality's (and the root's) later
    /// `post`s and `call`s fail
    /// with a [`CallError`](crate::CallError) for which
    /// [`is_post_failure`](crate::CallError::is_post_failure) holds, and
    /// [`launch`](crate::launch) returns [`Error::PostFailed`](crate::Error::PostFailed).
    Fail,
}

impl std::str::FromStr for OnPostFailure {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "log" => Ok(OnPostFailure::Log),
            "fail" => Ok(OnPostFailure::Fail),
            other => Err(format!("`{other}` is not `log` or `fail`")),
        }
    }
}

/// Failures gathered at a destination, not yet reported: (origin, action
/// id bits) → (count, the first one's message).
pub(super) type Unreported = FxHashMap<(LocalityId, u64), (u64, String)>;

/// The failed posts of one locality, in both roles.
#[derive(Debug)]
pub(crate) struct PostFailures {
    policy: OnPostFailure,
    /// As a destination: failures of others' posts to report.
    unreported: Mutex<Unreported>,
    /// As an origin: its posts that failed, by action slot.
    failed: Box<[AtomicU64]>,
    /// Under [`OnPostFailure::Fail`]: set once a post of this locality (or,
    /// at the root, of any locality) failed.
    tripped: AtomicBool,
    /// The first failure that tripped it: (origin, message).
    first: Mutex<Option<(LocalityId, String)>>,
}

impl PostFailures {
    pub(crate) fn new(policy: OnPostFailure) -> PostFailures {
        PostFailures {
            policy,
            unreported: Mutex::default(),
            failed: (0..registry().entries().len())
                .map(|_| AtomicU64::new(0))
                .collect(),
            tripped: AtomicBool::new(false),
            first: Mutex::new(None),
        }
    }

    /// Posts of the action in registry slot `slot` (all, with `None`) this
    /// locality made that failed.
    pub(crate) fn failed(&self, slot: Option<usize>) -> u64 {
        match slot {
            Some(slot) => self
                .failed
                .get(slot)
                .map_or(0, |c| c.load(Ordering::Relaxed)),
            None => self.failed.iter().map(|c| c.load(Ordering::Relaxed)).sum(),
        }
    }

    /// The failure later sends fail with, once a failed post tripped
    /// [`OnPostFailure::Fail`].
    #[inline]
    pub(crate) fn check(&self) -> Result<(), Failure> {
        if !self.tripped.load(Ordering::Relaxed) {
            return Ok(());
        }
        Err(self.tripped_failure())
    }

    #[cold]
    fn tripped_failure(&self) -> Failure {
        let first = self.first.lock();
        let (origin, message) = first
            .as_ref()
            .map_or((LocalityId::ROOT, ""), |(l, m)| (*l, m));
        Failure::PostFailed(format!("a post of {origin} failed earlier: {message}"))
    }

    /// Whether a failed post fails the job.
    pub(super) fn fails_the_job(&self) -> bool {
        self.policy == OnPostFailure::Fail
    }

    /// A post of action `action` (id bits) from `origin` failed here with
    /// `message`: kept until [`take_unreported`](Self::take_unreported).
    pub(super) fn gather(&self, origin: LocalityId, action: u64, message: String) {
        let mut unreported = self.unreported.lock();
        let (count, _) = unreported.entry((origin, action)).or_insert((0, message));
        *count += 1;
    }

    /// The failures gathered since the last call: (origin, action id bits)
    /// → (count, the first one's message).
    pub(super) fn take_unreported(&self) -> Unreported {
        let mut unreported = self.unreported.lock();
        if unreported.is_empty() {
            return Unreported::default();
        }
        std::mem::take(&mut *unreported)
    }

    /// Counts `count` failed posts of this locality of the action in
    /// registry slot `slot`; returns the total so far.
    pub(super) fn count(&self, slot: Option<usize>, count: u64) -> u64 {
        match slot.and_then(|slot| self.failed.get(slot)) {
            Some(counter) => counter.fetch_add(count, Ordering::Relaxed) + count,
            None => count,
        }
    }

    /// Trips [`OnPostFailure::Fail`] with the failure `message` of a post
    /// of `origin`, unless an earlier one did.
    pub(super) fn trip(&self, origin: LocalityId, message: String) {
        let mut first = self.first.lock();
        if first.is_none() {
            *first = Some((origin, message));
        }
        self.tripped.store(true, Ordering::Relaxed);
    }

    /// The first failure that tripped [`OnPostFailure::Fail`], if one did.
    pub(crate) fn first(&self) -> Option<(LocalityId, String)> {
        self.first.lock().clone()
    }
}
