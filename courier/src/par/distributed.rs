//! [`for_each_locality`]: a loop over every locality of the job, each
//! taking one contiguous block of the range.

use std::ops::Range;

use crate::action::Action;
use crate::parcel::CallError;
use crate::runtime::Runtime;

/// Runs `action(start, end)` once on every locality of the job, locality
/// `i` of `n` getting the `i`-th of `n` contiguous blocks of `range`
/// (their lengths differ by at most one), and returns the outputs in the
/// order of the localities.
///
/// The action usually runs a parallel loop over its block with this
/// locality's workers ([`for_each`](super::for_each),
/// [`map_reduce`](super::map_reduce), [`join`](super::join)), on the data
/// that locality owns: the block is where its part of a block-distributed
/// array lives. The calls go out as one batch; an empty block still gets
/// its call (`start == end`), so every locality takes part.
///
/// # Errors
///
/// The first failure of a call (a lost locality, a panic in the action).
///
/// # Examples
///
/// ```
/// use courier::{Config, TransportKind, par};
///
/// /// The sum of the squares of this locality's block, by a local loop.
/// #[courier::action]
/// async fn squares(start: usize, end: usize) -> u64 {
///     let (_, sum) = par::map_reduce(start..end, par::Chunking::Auto, 0u64, |i| (i * i) as u64, |a, b| a + b).await;
///     sum
/// }
///
/// let config = Config::new().localities(3).transport(TransportKind::Inproc);
/// let parts = courier::launch(config, |rt| async move {
///     Ok(par::for_each_locality(&rt, 0..1000, squares).await?)
/// })
/// .unwrap();
/// assert_eq!(parts.len(), 3);
/// assert_eq!(parts.iter().sum::<u64>(), (0..1000u64).map(|i| i * i).sum::<u64>());
/// ```
pub async fn for_each_locality<A>(
    rt: &Runtime,
    range: Range<usize>,
    action: A,
) -> Result<Vec<A::Output>, CallError>
where
    A: Action<Args = (usize, usize)>,
{
    let n = rt.num_localities();
    let blocks = (0..n).map(|rank| {
        let (start, end) = block(&range, rank, n);
        (rt.locality(rank), (start, end))
    });
    rt.call_batch(action, blocks).await
}

/// Block `rank` of `n` of `range` (an empty or reversed range gives empty
/// blocks at its start).
fn block(range: &Range<usize>, rank: u32, n: u32) -> (usize, usize) {
    let len = range.end.saturating_sub(range.start) as u128;
    let at = |k: u32| range.start + (len * u128::from(k) / u128::from(n)) as usize;
    (at(rank), at(rank + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::reversed_empty_ranges)] // on purpose: a reversed range
    fn blocks_cover_the_range_once_and_differ_by_at_most_one() {
        for (range, n) in [
            (0..10, 3),
            (5..6, 4),
            (7..7, 2),
            (0..1_000_003, 7),
            (9..3, 2),
        ] {
            let blocks: Vec<_> = (0..n).map(|r| block(&range, r, n)).collect();
            assert_eq!(blocks[0].0, range.start);
            assert_eq!(blocks[n as usize - 1].1, range.end.max(range.start));
            for pair in blocks.windows(2) {
                assert_eq!(pair[0].1, pair[1].0, "{range:?} / {n}: contiguous");
            }
            let lens: Vec<_> = blocks.iter().map(|(s, e)| e - s).collect();
            let (min, max) = (lens.iter().min().unwrap(), lens.iter().max().unwrap());
            assert!(max - min <= 1, "{range:?} / {n}: {lens:?}");
        }
        assert_eq!(block(&(0..usize::MAX), 1, 2), (usize::MAX / 2, usize::MAX));
    }
}
