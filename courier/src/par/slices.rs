//! Parallel loops over slices, by [`join`](super::join): the slice is
//! halved until a piece is a leaf, and whether a half runs inline or as a
//! task is `join`'s decision. Unlike the range loops these borrow: the
//! body may use the caller's data, and the elements are the caller's.
//!
//! A leaf is [`Chunking::Static`]'s size, or under [`Chunking::Auto`]
//! enough elements to last [`AUTO_LEAF_NS`] by the time of the first
//! elements (measured in the calling thread, doubling from one until
//! they took that long), so that the few ns a halving costs are lost in
//! the work.

use super::chunk::{Chunking, measure_first};
use std::panic::Location;
use std::time::Duration;

use super::join::join_at;

/// What a leaf of [`Chunking::Auto`] aims to last, in ns: thousands of
/// inlined joins' worth, and far below the fork threshold, so that the
/// halves still balance. (1 µs leaves were 10–25 % slower than 64 Ki
/// element ones on a 2 ns body over 2·10^7 elements, 10 µs within noise.)
pub const AUTO_LEAF_NS: u64 = 10_000;

/// Runs `body` on every element of `items`, on this locality's workers.
///
/// Call it from a task or an action (elsewhere it runs in the calling
/// thread). Every element is visited exactly once.
///
/// # Examples
///
/// ```
/// use courier::{Config, TransportKind, par};
///
/// let doubled = courier::launch(Config::new().transport(TransportKind::Inproc), |_rt| async move {
///     let mut v: Vec<u64> = (0..10_000).collect();
///     par::for_each_mut(&mut v, par::Chunking::Auto, |x| *x *= 2);
///     Ok(v)
/// })
/// .unwrap();
/// assert!(doubled.iter().enumerate().all(|(i, x)| *x == 2 * i as u64));
/// ```
#[track_caller]
pub fn for_each_mut<T, F>(items: &mut [T], chunking: Chunking, body: F)
where
    T: Send,
    F: Fn(&mut T) + Sync,
{
    let (done, rest) = match chunking {
        Chunking::Static(n) => (0, n.max(1)),
        Chunking::Auto => measure(items.len(), |i| body(&mut items[i])),
    };
    halve_mut(Location::caller(), &mut items[done..], rest, &body);
}

/// Maps every element of `items` with `map` and combines the results
/// with `reduce` in the order of the slice (`reduce` must be
/// associative; `identity` is the result of an empty slice and must be
/// neutral), on this locality's workers.
///
/// # Examples
///
/// ```
/// use courier::{Config, TransportKind, par};
///
/// let sum = courier::launch(Config::new().transport(TransportKind::Inproc), |_rt| async move {
///     let v: Vec<u64> = (1..=1000).collect();
///     Ok(par::map_reduce_slice(&v, par::Chunking::Auto, 0, |x| x * x, |a, b| a + b))
/// })
/// .unwrap();
/// assert_eq!(sum, (1..=1000u64).map(|x| x * x).sum::<u64>());
/// ```
#[track_caller]
pub fn map_reduce_slice<T, U, M, R>(
    items: &[T],
    chunking: Chunking,
    identity: U,
    map: M,
    reduce: R,
) -> U
where
    T: Sync,
    U: Clone + Send + Sync,
    M: Fn(&T) -> U + Sync,
    R: Fn(U, U) -> U + Sync,
{
    let mut first = identity.clone();
    let (done, leaf) = match chunking {
        Chunking::Static(n) => (0, n.max(1)),
        Chunking::Auto => measure(items.len(), |i| {
            let acc = std::mem::replace(&mut first, identity.clone());
            first = reduce(acc, map(&items[i]));
        }),
    };
    let rest = halve(
        Location::caller(),
        &items[done..],
        leaf,
        &identity,
        &map,
        &reduce,
    );
    reduce(first, rest)
}

/// Runs `step` on the first indices of `0..len` until they took
/// [`AUTO_LEAF_NS`] (see [`measure_first`]); returns how many ran and the
/// leaf size that lasts about [`AUTO_LEAF_NS`].
fn measure(len: usize, step: impl FnMut(usize)) -> (usize, usize) {
    let (ran, item_ns) = measure_first(0..len, Duration::from_nanos(AUTO_LEAF_NS), step);
    let leaf = (AUTO_LEAF_NS as f64 / item_ns.max(f64::MIN_POSITIVE)).ceil();
    (ran, leaf.clamp(1.0, usize::MAX as f64) as usize)
}

/// Halves `items` down to leaves with joins learning at the program's
/// call site `at`, and runs `body` on the leaves' elements.
fn halve_mut<T: Send>(
    at: &'static Location<'static>,
    items: &mut [T],
    leaf: usize,
    body: &(impl Fn(&mut T) + Sync),
) {
    if items.len() <= leaf {
        items.iter_mut().for_each(body);
        return;
    }
    let (lo, hi) = items.split_at_mut(items.len() / 2);
    join_at(
        at,
        || halve_mut(at, lo, leaf, body),
        || halve_mut(at, hi, leaf, body),
    );
}

/// [`halve_mut`]'s shape for a map and an ordered reduce.
fn halve<T: Sync, U: Clone + Send + Sync>(
    at: &'static Location<'static>,
    items: &[T],
    leaf: usize,
    identity: &U,
    map: &(impl Fn(&T) -> U + Sync),
    reduce: &(impl Fn(U, U) -> U + Sync),
) -> U {
    if items.len() <= leaf {
        return items
            .iter()
            .fold(identity.clone(), |acc, item| reduce(acc, map(item)));
    }
    let (lo, hi) = items.split_at(items.len() / 2);
    let (a, b) = join_at(
        at,
        || halve(at, lo, leaf, identity, map, reduce),
        || halve(at, hi, leaf, identity, map, reduce),
    );
    reduce(a, b)
}
