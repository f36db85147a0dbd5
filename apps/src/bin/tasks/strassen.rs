//! strassen: Strassen's matrix multiplication of two random n×n `f64`
//! matrices (Inncabs `strassen` from BOTS, "recursive balanced", fine:
//! 107 µs tasks in seed 003's Table V).
//!
//! Simplified from BOTS: quadrants are copied into fresh matrices at every
//! level instead of being addressed in place, and below [`NAIVE`] the
//! product is the plain triple loop (BOTS switches to a divide-and-conquer
//! multiply at 64 and to the naive one at 16). The seven products of a
//! level are forked with [`split`].

use std::sync::Arc;

use crate::Benchmark;
use crate::fork::{Fork, mix, split, with_fork};

/// At or below this order, the naive product: an algorithmic base case,
/// the same in every variant (BOTS's `SizeAtWhichDivideAndConquerIsMoreEfficient`).
const NAIVE: usize = 64;

/// A square matrix, row-major, with its order.
type Matrix = Vec<f64>;

/// The naive product of `a` and `b` (n×n).
fn naive(a: &[f64], b: &[f64], n: usize) -> Matrix {
    let mut c = vec![0.0; n * n];
    for i in 0..n {
        for k in 0..n {
            let aik = a[i * n + k];
            let (row, b_row) = (&mut c[i * n..(i + 1) * n], &b[k * n..(k + 1) * n]);
            for (cij, bkj) in row.iter_mut().zip(b_row) {
                *cij += aik * bkj;
            }
        }
    }
    c
}

/// Quadrant (`r`, `c`) of the n×n matrix `m` (each 0 or 1).
fn quadrant(m: &[f64], n: usize, r: usize, c: usize) -> Matrix {
    let h = n / 2;
    (0..h)
        .flat_map(|i| m[(r * h + i) * n + c * h..][..h].iter().copied())
        .collect()
}

fn add(a: &[f64], b: &[f64]) -> Matrix {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

fn sub(a: &[f64], b: &[f64]) -> Matrix {
    a.iter().zip(b).map(|(x, y)| x - y).collect()
}

/// One of the seven products of a level: its operands and its result.
struct Product {
    lhs: Matrix,
    rhs: Matrix,
    out: Matrix,
}

/// `a · b` (n×n, n a power of two) by Strassen's recursion.
pub(crate) fn strassen<F: Fork>(f: F, a: &[f64], b: &[f64], n: usize) -> Matrix {
    if n <= NAIVE {
        return naive(a, b, n);
    }
    let h = n / 2;
    let [a11, a12, a21, a22] = [(0, 0), (0, 1), (1, 0), (1, 1)].map(|(r, c)| quadrant(a, n, r, c));
    let [b11, b12, b21, b22] = [(0, 0), (0, 1), (1, 0), (1, 1)].map(|(r, c)| quadrant(b, n, r, c));
    let product = |lhs, rhs| Product {
        lhs,
        rhs,
        out: Vec::new(),
    };
    let mut m = [
        product(add(&a11, &a22), add(&b11, &b22)),
        product(add(&a21, &a22), b11.clone()),
        product(a11.clone(), sub(&b12, &b22)),
        product(a22.clone(), sub(&b21, &b11)),
        product(add(&a11, &a12), b22.clone()),
        product(sub(&a21, &a11), add(&b11, &b12)),
        product(sub(&a12, &a22), add(&b21, &b22)),
    ];
    split(
        f,
        &mut m,
        &|p: &mut Product| p.out = strassen(f, &p.lhs, &p.rhs, h),
        &|(), ()| (),
    );
    let [m1, m2, m3, m4, m5, m6, m7] = m.map(|p| p.out);
    let mut c = vec![0.0; n * n];
    for i in 0..h {
        for j in 0..h {
            let k = i * h + j;
            c[i * n + j] = m1[k] + m4[k] - m5[k] + m7[k];
            c[i * n + h + j] = m3[k] + m5[k];
            c[(h + i) * n + j] = m2[k] + m4[k];
            c[(h + i) * n + h + j] = m1[k] - m2[k] + m3[k] + m6[k];
        }
    }
    c
}

/// `m · x` for the n×n matrix `m`.
fn times_vector(m: &[f64], x: &[f64]) -> Vec<f64> {
    m.chunks(x.len())
        .map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum())
        .collect()
}

/// A random n×n matrix with entries in [−1, 1).
fn random_matrix(n: usize, seed: u64) -> Matrix {
    (0..(n * n) as u64).map(|i| unit(mix(seed, i))).collect()
}

/// A number in [−1, 1) from 53 random bits.
fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

/// `A · B` for random n×n matrices, checked with Freivalds' test against
/// `A (B x)` computed naively for a random `x`.
pub(crate) fn benchmark(n: usize) -> Benchmark {
    assert!(n.is_power_of_two(), "strassen: n must be a power of two");
    let a = Arc::new(random_matrix(n, 1));
    let b = Arc::new(random_matrix(n, 2));
    let x: Vec<f64> = (0..n as u64).map(|i| unit(mix(3, i))).collect();
    let abx = Arc::new(times_vector(&a, &times_vector(&b, &x)));
    let x = Arc::new(x);
    Benchmark {
        name: "strassen",
        input: format!("{n}×{n} f64, naive at {NAIVE}"),
        prepare: Box::new(move || {
            let (a, b, x, abx) = (a.clone(), b.clone(), x.clone(), abx.clone());
            Box::new(move |par| {
                let c = with_fork!(par, |f| strassen(f, &a, &b, n));
                Box::new(move || {
                    let cx = times_vector(&c, &x);
                    // Entries of A·B·x are sums of n² products of numbers below 1:
                    // a wrong block is off by O(1), rounding by far less.
                    let tolerance = 1e-9 * (n * n) as f64;
                    if let Some(i) = (0..n).find(|&i| (cx[i] - abx[i]).abs() > tolerance) {
                        return Err(format!(
                            "Freivalds: (A·B)x[{i}] = {} but A(Bx)[{i}] = {}",
                            cx[i], abx[i]
                        ));
                    }
                    Ok(c.iter().fold(0, |h, v| mix(h, v.to_bits())))
                })
            })
        }),
    }
}
