//! What [`par::join`](crate::par::join) knows of its call sites: the measured
//! duration of the second closure per call site and nesting depth, and
//! the nesting depth of the calling thread. `Runtime::spawn` keeps the
//! durations of its sites' first polls in the same tables (`inline.rs`).
//!
//! Why per depth: at one call site of a recursive code (fib, a merge
//! sort, a tree search) a child's duration depends on how deep it is,
//! not on the site alone. The mean over the site is the mean over its
//! leaves, which are most of the calls, and would inline everything. Per
//! depth, the durations measured separate the top of the tree (worth
//! tasks) from the bottom (worth inlining): the cutoff a programmer tunes
//! by hand is found by measurement. Depths beyond [`DEPTHS`] share the
//! last entry.
//!
//! A duration is measured on every fork, on the first call at a (site,
//! depth), and then on some inlined calls (a clock read costs as much as
//! an inlined call): all at the top depths, fewer deeper (see
//! [`sample_this_one`]; under the adaptive policy, a timed call whose
//! estimate is below the threshold lets the calls until the next sample
//! at its depth run inline without a look at the estimate,
//! [`Site::take_inline`], [`untimed_after_sample`]: fib(30) on two
//! workers went from 1.83–2.30 to 1.71–1.78 times the sequential
//! function). An estimate follows the longest recent durations
//! (see [`Site::record`]): inlining a child that has grown (the same sort
//! called on a larger array) costs parallelism, forking one that shrank
//! costs a task. The table of a site is made on
//! its first call on a worker thread and kept for the process (a few
//! hundred bytes per `join` call site of the program's source and worker
//! thread).
//!
//! Each worker thread has its own tables, written by it alone (a forked
//! closure's duration is recorded by its caller, wherever it ran): every
//! join reads an estimate, and a store by one worker would take the line
//! from the others' caches (shared tables cost two workers doing fib a
//! third of their time). A worker that has not run a site yet measures
//! it again.

use std::cell::{Cell, RefCell};
use std::panic::Location;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use rustc_hash::FxHashMap;

/// Depths measured apart; deeper calls share the last entry.
pub(crate) const DEPTHS: usize = 48;

/// Deep inlined calls are timed one in this many (per thread); a power of
/// two.
pub(crate) const SAMPLE_EVERY: u32 = 64;

/// Inlined calls a thread counts before adding them to the process's
/// count (`/par/count/inlined`): a shared atomic, so not on every call.
pub(crate) const COUNT_EVERY: u32 = 4096;

/// Inlined calls at depths below this are always timed (1 + 2 + 4 calls
/// of a binary tree; a `join` outside any other pays a clock read, about
/// 15 ns).
pub(crate) const ALWAYS_TIMED: u32 = 3;

/// Entries of each thread's cache of sites (a power of two).
const CACHE: usize = 16;

/// The measured durations of one call site.
#[derive(Debug)]
pub(crate) struct Site {
    /// Per depth, an average of the second closure's duration in ns (0:
    /// not measured yet).
    expected_ns: [AtomicU64; DEPTHS],
    /// Per depth, spawns left that may run inline without a look at the
    /// estimate ([`take_inline`](Self::take_inline)).
    inline_left: [AtomicU32; DEPTHS],
    /// Calls left before the next one to time ([`tick`](Self::tick)).
    until_timed: AtomicU32,
}

impl Site {
    /// The expected duration at `depth`, in ns (0: unknown).
    #[inline]
    pub(crate) fn expected_ns(&self, depth: u32) -> u64 {
        self.slot(depth).load(Ordering::Relaxed)
    }

    /// Adds a measured duration at `depth` to the estimate: one more
    /// than an eighth longer replaces it (a child that grew must stop
    /// being inlined at once: it may be a whole sequential computation),
    /// one less than half of it replaces it too; others leave it. So the
    /// estimate follows the longest recent durations, which is what the
    /// decision to fork is about, and is rarely written.
    pub(crate) fn record(&self, depth: u32, ns: u64) {
        let slot = self.slot(depth);
        let ns = ns.max(1);
        let old = slot.load(Ordering::Relaxed);
        if old == 0 || ns > old + old / 8 || ns < old / 2 {
            slot.store(ns, Ordering::Relaxed);
        }
    }

    /// Counts a call at this site; whether it is one to time, for
    /// sampling per site (`inline.rs`): the first call, then the one
    /// `next` calls after each timed one, unless a
    /// [`rearm`](Self::rearm) sets another. Only the thread whose table
    /// this is calls it: no read-modify-write; a load, a test and a store.
    #[inline]
    pub(crate) fn tick(&self, next: u32) -> bool {
        let left = self.until_timed.load(Ordering::Relaxed);
        let timed = left == 0;
        let left = if timed { next } else { left - 1 };
        self.until_timed.store(left, Ordering::Relaxed);
        timed
    }

    /// Takes one of the spawns at `depth` that may run inline without a
    /// look at the estimate, if one is left ([`allow_inline`]): a load, a
    /// test and a store, where the estimate, the threshold and the
    /// countdown to the next timed call took three loads more and a
    /// comparison.
    ///
    /// [`allow_inline`]: Self::allow_inline
    #[inline]
    pub(crate) fn take_inline(&self, depth: u32) -> bool {
        let left = &self.inline_left[(depth as usize).min(DEPTHS - 1)];
        let n = left.load(Ordering::Relaxed);
        if n == 0 {
            return false;
        }
        left.store(n - 1, Ordering::Relaxed);
        true
    }

    /// Lets the next `n` spawns at `depth` run inline without a look at
    /// the estimate ([`take_inline`](Self::take_inline)); 0: none.
    pub(crate) fn allow_inline(&self, depth: u32, n: u32) {
        self.inline_left[(depth as usize).min(DEPTHS - 1)].store(n, Ordering::Relaxed);
    }

    /// Makes the `n + 1`-th [`tick`](Self::tick) from now the next one to
    /// time.
    pub(crate) fn rearm(&self, n: u32) {
        self.until_timed.store(n, Ordering::Relaxed);
    }

    #[inline]
    fn slot(&self, depth: u32) -> &AtomicU64 {
        &self.expected_ns[(depth as usize).min(DEPTHS - 1)]
    }
}

/// Forked `join`s of this process.
static FORKS: AtomicU64 = AtomicU64::new(0);

/// Inlined `join`s of this process, as far as threads have added theirs
/// (each adds its count every [`COUNT_EVERY`] inlined calls).
static INLINED: AtomicU64 = AtomicU64::new(0);

/// Counts a forked `join`.
pub(crate) fn count_fork() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// (forked, inlined) `join`s of this process so far (`/par/count/forks`,
/// `/par/count/inlined`).
pub(crate) fn joins() -> (u64, u64) {
    (
        FORKS.load(Ordering::Relaxed),
        INLINED.load(Ordering::Relaxed),
    )
}

thread_local! {
    /// This thread's tables of the sites it ran, by the address of their
    /// location.
    static TABLES: RefCell<FxHashMap<usize, &'static Site>> = RefCell::new(FxHashMap::default());
    /// This thread's nesting depth of `join`s.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Inlined calls on this thread, to pick those that are timed.
    static TICK: Cell<u32> = const { Cell::new(0) };
    /// Recently used sites, by the address of their location.
    static RECENT: [Cell<(usize, Option<&'static Site>)>; CACHE] =
        const { [const { Cell::new((0, None)) }; CACHE] };
}

/// The calling thread's table of the call site `location`.
#[inline]
pub(crate) fn site(location: &'static Location<'static>) -> &'static Site {
    let key = std::ptr::from_ref(location) as usize;
    let index = (key >> 4) % CACHE;
    RECENT.with(|recent| match recent[index].get() {
        (k, Some(site)) if k == key => site,
        _ => {
            let site = lookup(key);
            recent[index].set((key, Some(site)));
            site
        }
    })
}

#[cold]
fn lookup(key: usize) -> &'static Site {
    TABLES.with(|tables| {
        *tables.borrow_mut().entry(key).or_insert_with(|| {
            Box::leak(Box::new(Site {
                expected_ns: [const { AtomicU64::new(0) }; DEPTHS],
                inline_left: [const { AtomicU32::new(0) }; DEPTHS],
                until_timed: AtomicU32::new(0),
            }))
        })
    })
}

/// The calling thread's nesting depth of `join`s.
#[inline]
pub(crate) fn depth() -> u32 {
    DEPTH.get()
}

/// Counts an inlined call (`/par/count/inlined`).
#[inline]
pub(crate) fn count_inlined() -> u32 {
    let tick = TICK.get().wrapping_add(1);
    TICK.set(tick);
    if tick % COUNT_EVERY == 0 {
        INLINED.fetch_add(u64::from(COUNT_EVERY), Ordering::Relaxed);
    }
    tick
}

/// Of the inlined calls at `depth` after a timed one, those that are not
/// timed: none at the first [`ALWAYS_TIMED`] depths, `2^depth - 1` (at
/// most [`SAMPLE_EVERY`] `- 1`) deeper, as [`sample_this_one`] picks them.
#[inline]
pub(crate) fn untimed_after_sample(depth: u32) -> u32 {
    match depth < ALWAYS_TIMED {
        true => 0,
        false => (1u32 << depth.min(SAMPLE_EVERY.trailing_zeros())) - 1,
    }
}

/// Counts an inlined call at `depth`; returns whether it is one to time:
/// every call at the first [`ALWAYS_TIMED`] depths, one in `2^depth` (at
/// most [`SAMPLE_EVERY`]) deeper, so that a tree of joins has about as
/// many timed calls at every depth and a site whose children grew is
/// noticed in one call near the top.
#[inline]
pub(crate) fn sample_this_one(depth: u32) -> bool {
    let tick = count_inlined();
    let every = 1u32 << depth.min(SAMPLE_EVERY.trailing_zeros());
    depth < ALWAYS_TIMED || tick % every == 0
}

/// Sets the calling thread's depth to `depth` until dropped (also when
/// unwinding), then puts back what it was.
#[derive(Debug)]
pub(crate) struct AtDepth(u32);

impl AtDepth {
    #[inline]
    pub(crate) fn enter(depth: u32) -> AtDepth {
        AtDepth(DEPTH.replace(depth))
    }
}

impl Drop for AtDepth {
    #[inline]
    fn drop(&mut self) {
        DEPTH.set(self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_times_one_call_in_so_many_or_the_one_it_is_rearmed_for() {
        let site = site(Location::caller());
        let ticks = |n| (0..n).map(|_| site.tick(2)).collect::<Vec<_>>();
        assert_eq!(ticks(7), [true, false, false, true, false, false, true]);
        site.rearm(4);
        assert_eq!(ticks(6), [false, false, false, false, true, false]);
        site.rearm(0);
        assert_eq!(ticks(2), [true, false]);
    }

    #[test]
    fn a_site_lets_so_many_spawns_inline_per_depth() {
        let site = site(Location::caller());
        assert!(!site.take_inline(2), "none allowed yet");
        site.allow_inline(2, 2);
        assert!(!site.take_inline(3), "per depth");
        assert_eq!([site.take_inline(2), site.take_inline(2)], [true, true]);
        assert!(!site.take_inline(2), "two taken");
        site.allow_inline(DEPTHS as u32 + 3, 1);
        assert!(
            site.take_inline(DEPTHS as u32 - 1),
            "deeper ones share the last"
        );
        site.allow_inline(5, 4);
        site.allow_inline(5, 0);
        assert!(!site.take_inline(5), "withdrawn");
    }

    #[test]
    fn a_site_keeps_its_durations_per_depth_and_shares_the_last() {
        let here = Location::caller();
        let site = site(here);
        assert!(std::ptr::eq(site, super::site(here)), "one table per site");
        assert_eq!(site.expected_ns(3), 0);
        site.record(3, 100);
        assert_eq!(site.expected_ns(3), 100);
        site.record(3, 60);
        assert_eq!(site.expected_ns(3), 100, "within half of it: kept");
        site.record(3, 110);
        assert_eq!(site.expected_ns(3), 100, "within an eighth more: kept");
        site.record(3, 500);
        assert_eq!(site.expected_ns(3), 500, "a longer one replaces it");
        site.record(3, 200);
        assert_eq!(site.expected_ns(3), 200, "less than half: replaces it");
        assert_eq!(site.expected_ns(4), 0);
        site.record(DEPTHS as u32 + 5, 7);
        assert_eq!(site.expected_ns(DEPTHS as u32 - 1), 7);
    }

    #[test]
    fn the_depth_is_put_back_after_a_panic() {
        let before = depth();
        let out = std::panic::catch_unwind(|| {
            let _at = AtDepth::enter(before + 9);
            assert_eq!(depth(), before + 9);
            panic!("inside");
        });
        assert!(out.is_err());
        assert_eq!(depth(), before);
    }
}
