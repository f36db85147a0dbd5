//! sort: merge sort of random `u64`s (Inncabs `sort`, BOTS's cilksort,
//! "recursive balanced", variable/fine: 52 µs tasks in seed 003's Table V).
//!
//! Simplified from cilksort: the halves are sorted in parallel (one `join`
//! per split) down to [`INSERTION`] elements, but each merge is
//! sequential (cilksort also splits merges with a binary search), and
//! there is no sequential-quicksort cutoff (cilksort's `QUICKSIZE`): the
//! runtime is to decide what to inline.

use std::sync::Arc;

use crate::Benchmark;
use crate::fork::{Fork, mix, with_fork};

/// Below this many elements, insertion sort: an algorithmic base case,
/// the same in every variant (BOTS sort's `INSERTIONSIZE`).
const INSERTION: usize = 20;

fn insertion_sort(v: &mut [u64]) {
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] > x {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

/// Merges the sorted `a` and `b` into `out` (`a.len() + b.len()` long).
fn merge(a: &[u64], b: &[u64], out: &mut [u64]) {
    let (mut i, mut j) = (0, 0);
    for slot in out.iter_mut() {
        if j == b.len() || (i < a.len() && a[i] <= b[j]) {
            *slot = a[i];
            i += 1;
        } else {
            *slot = b[j];
            j += 1;
        }
    }
}

/// Sorts `v`, with `buf` (as long) as scratch.
pub(crate) fn merge_sort<F: Fork>(f: F, v: &mut [u64], buf: &mut [u64]) {
    if v.len() <= INSERTION {
        insertion_sort(v);
        return;
    }
    let mid = v.len() / 2;
    let (v_lo, v_hi) = v.split_at_mut(mid);
    let (b_lo, b_hi) = buf.split_at_mut(mid);
    f.join(|| merge_sort(f, v_lo, b_lo), || merge_sort(f, v_hi, b_hi));
    merge(v_lo, v_hi, buf);
    v.copy_from_slice(buf);
}

/// Sorting `len` random `u64`s, checked against `slice::sort_unstable` of
/// the same input (equal means sorted and the same multiset).
pub(crate) fn benchmark(len: usize) -> Benchmark {
    let input: Arc<Vec<u64>> = Arc::new((0..len as u64).map(|i| mix(0x5eed, i)).collect());
    let mut sorted = (*input).clone();
    sorted.sort_unstable();
    let sorted = Arc::new(sorted);
    Benchmark {
        name: "sort",
        input: format!("{len} random u64"),
        prepare: Box::new(move || {
            let mut v = (*input).clone();
            let sorted = Arc::clone(&sorted);
            Box::new(move |par| {
                let mut buf = vec![0; v.len()];
                with_fork!(par, |f| merge_sort(f, &mut v, &mut buf));
                Box::new(move || {
                    if v != *sorted {
                        let at = v.iter().zip(sorted.iter()).position(|(a, b)| a != b);
                        return Err(format!(
                            "the result differs from sort_unstable's, first at index {at:?}"
                        ));
                    }
                    Ok(v.iter().fold(0, |h, &x| mix(h, x)))
                })
            })
        }),
    }
}
