//! [`join`]: run two closures, in parallel when the second is worth a
//! task, inline otherwise (dynamic inlining).

use std::panic::Location;

use crate::clock::timed;
use crate::sched::{
    AtDepth, Inlining, count_fork, count_inlined, from_code, join_depth, sample_this_one, site,
    untimed_after_sample,
};

/// Runs `a` and `b` and returns both results, `b` possibly on another
/// worker of this locality.
///
/// `b` either runs *inline* (right after `a`, in the caller: a few ns)
/// or is *forked*: offered as a task that an idle worker may take while
/// the caller runs `a`; if none did by then, the caller runs `b` itself,
/// else it runs other tasks until `b` has finished. Under
/// [`Inlining::Adaptive`] (the default) `join` forks when `b`'s expected
/// duration at this call site and nesting depth of `join`s is at least
/// [`LAMBDA_MIN`](super::LAMBDA_MIN) times the measured task overhead
/// (`/par/time/task-overhead`), or not measured yet, and inlines
/// otherwise; durations are measured as the program runs (see
/// `sched/sites.rs`), so a recursive code forks near the top of its tree and
/// inlines the rest without a cutoff in its source. Either way both
/// closures have run when `join` returns, so they may borrow from the
/// caller's stack, as with `rayon::join`; a panic in either resumes in
/// the caller once both are settled.
///
/// Called outside the workers of a locality (a thread of the program's
/// own), `join` runs `a` and then `b`.
///
/// # Examples
///
/// ```
/// use courier::{Config, TransportKind, par};
///
/// fn fib(n: u64) -> u64 {
///     if n < 2 {
///         return n;
///     }
///     let (a, b) = par::join(|| fib(n - 1), || fib(n - 2));
///     a + b
/// }
///
/// let out = courier::launch(Config::new().transport(TransportKind::Inproc), |_rt| async move {
///     Ok(fib(20))
/// })
/// .unwrap();
/// assert_eq!(out, 6765);
/// ```
#[track_caller]
#[inline]
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    join_at(Location::caller(), a, b)
}

/// [`join`], learning at the call site `location` (the program's, for
/// the joins of the slice loops).
#[inline]
pub(super) fn join_at<A, B, RA, RB>(location: &'static Location<'static>, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let Some(policy) = crate::sched::join_policy() else {
        // No worker to fork to, nor tables to learn in.
        let ra = a();
        return (ra, b());
    };
    let site = site(location);
    let depth = join_depth();
    let _inside = AtDepth::enter(depth + 1);
    let inlining = from_code(policy);
    let adaptive = inlining == Inlining::Adaptive;
    // Adaptive: one of the calls the site's last timed one let run
    // inline untimed.
    if adaptive && site.take_inline(depth) {
        count_inlined();
        let ra = a();
        return (ra, b());
    }
    let expected = site.expected_ns(depth);
    let threshold = crate::sched::task_threshold_ns();
    let fork = match inlining {
        Inlining::Adaptive => expected == 0 || expected >= threshold,
        Inlining::Never => true,
        Inlining::Depth(cutoff) => depth < cutoff,
    };
    // After a timed call, the next ones until the next sample run inline
    // without a look, if the estimate is below the threshold.
    let learned = |ns| {
        site.record(depth, ns);
        if adaptive && site.expected_ns(depth) < threshold {
            site.allow_inline(depth, untimed_after_sample(depth));
        }
    };
    if fork {
        count_fork();
        let (ra, (rb, ns)) = crate::sched::fork_join(a, move || {
            // Where `b` runs, it is one level below the caller.
            let _at = AtDepth::enter(depth + 1);
            timed(b)
        });
        // Learnt in the caller's tables, wherever `b` ran: each thread
        // writes its own.
        learned(ns);
        return (ra, rb);
    }
    let ra = a();
    // Adaptive, a call that finds no untimed one left is the sample.
    let sample = match adaptive {
        true => {
            count_inlined();
            true
        }
        false => sample_this_one(depth),
    };
    if expected == 0 || sample {
        let (rb, ns) = timed(b);
        learned(ns);
        return (ra, rb);
    }
    (ra, b())
}
