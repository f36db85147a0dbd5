//! The three ways a kernel forks: [`Seq`] (plain calls), [`Rayon`]
//! (`rayon::join`) and [`Courier`] (`courier::par::join`), behind one
//! [`Fork`] trait so that every variant runs the same kernel code; and
//! [`split`], the one helper that forks over more than two children.

/// Runs two closures, possibly in parallel, and returns both results: the
/// shape of `rayon::join` and `courier::par::join`.
pub(crate) trait Fork: Copy + Send + Sync {
    /// Runs `a` and `b`; both have run when it returns.
    fn join<A, B, RA, RB>(self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send;
}

/// Plain sequential calls: `a`, then `b`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seq;

impl Fork for Seq {
    #[inline(always)]
    fn join<A, B, RA, RB>(self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        let ra = a();
        (ra, b())
    }
}

/// `rayon::join`, in the pool the caller installed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rayon;

impl Fork for Rayon {
    #[inline]
    fn join<A, B, RA, RB>(self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        rayon::join(a, b)
    }
}

/// `courier::par::join`, from inside a Courier task.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Courier;

impl Fork for Courier {
    /// `#[track_caller]` so that `courier::par::join` sees the kernel's
    /// call site, not this line: its adaptive policy learns per call site.
    #[inline]
    #[track_caller]
    fn join<A, B, RA, RB>(self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        courier::par::join(a, b)
    }
}

/// Which [`Fork`] a kernel runs with (chosen at run time, dispatched once
/// per run by [`with_fork!`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Par {
    /// [`Seq`].
    Seq,
    /// [`Rayon`].
    Rayon,
    /// [`Courier`].
    Courier,
}

/// Binds `$f` to the [`Fork`] of `$par` and evaluates `$body` with it:
/// one monomorphized copy of the kernel per variant.
macro_rules! with_fork {
    ($par:expr, |$f:ident| $body:expr) => {
        match $par {
            $crate::fork::Par::Seq => {
                let $f = $crate::fork::Seq;
                $body
            }
            $crate::fork::Par::Rayon => {
                let $f = $crate::fork::Rayon;
                $body
            }
            $crate::fork::Par::Courier => {
                let $f = $crate::fork::Courier;
                $body
            }
        }
    };
}
pub(crate) use with_fork;

/// Runs `body` on every item of `items`, splitting the slice in halves
/// with [`Fork::join`] down to single items, and combines the results left
/// to right; `None` for no items. This is how a node with more than two
/// children forks (no cutoff: whether a half runs inline is the fork's
/// decision). Every split of every kernel is the one `join` call site
/// below, told apart only by nesting depth.
pub(crate) fn split<F, T, R>(
    fork: F,
    items: &mut [T],
    body: &(impl Fn(&mut T) -> R + Sync),
    combine: &(impl Fn(R, R) -> R + Sync),
) -> Option<R>
where
    F: Fork,
    T: Send,
    R: Send,
{
    match items.len() {
        0 => None,
        1 => Some(body(&mut items[0])),
        n => {
            let (lo, hi) = items.split_at_mut(n / 2);
            let (a, b) = fork.join(
                || split(fork, lo, body, combine),
                || split(fork, hi, body, combine),
            );
            match (a, b) {
                (Some(a), Some(b)) => Some(combine(a, b)),
                (a, b) => a.or(b),
            }
        }
    }
}

/// A 64-bit digest step (splitmix64's finalizer over `h ^ x`): the
/// kernels fold their results into one `u64` with it.
pub(crate) fn mix(h: u64, x: u64) -> u64 {
    let mut z = (h ^ x).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
