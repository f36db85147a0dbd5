//! sparselu: LU factorization of a sparse matrix of dense blocks (Inncabs
//! `sparselu` from BOTS, "loop like", coarse: 980 µs tasks in seed 003's
//! Table V), with BOTS's sparsity pattern, its `f32` values and its four
//! block kernels `lu0`, `fwd`, `bdiv` and `bmod`.
//!
//! As in BOTS, step `kk` factors the diagonal block, then updates row `kk`
//! (`fwd`) and column `kk` (`bdiv`) in parallel, then every block of the
//! trailing matrix that both touch (`bmod`, allocating a fill-in block
//! where there was none) in parallel. Simplified: each parallel phase forks
//! its blocks with [`split`] (BOTS spawns one task per block in a loop),
//! and `fwd` and `bdiv` share one phase (BOTS spawns both before one
//! `taskwait` too). Every block is computed by one task in a fixed order,
//! so every variant gives the same bits. BOTS's matrix, factored without
//! pivoting, overflows `f32` from 10 × 10 blocks of 32 × 32 on (its own
//! check, a relative error, lets the NaNs through); made diagonally
//! dominant by adding `nb × bs` to the diagonal, it stays finite, which
//! the check here demands.

use crate::Benchmark;
use crate::fork::{Fork, mix, split, with_fork};

/// A dense `bs × bs` block, row-major.
type Block = Vec<f32>;

/// `nb × nb` blocks, row-major; `None` where the matrix is zero.
type Matrix = Vec<Option<Block>>;

/// BOTS `genmat`: which blocks are present, and their values from one
/// linear congruential sequence over the blocks in order; then, unlike
/// BOTS, `nb × bs` added to every diagonal element.
fn genmat(nb: usize, bs: usize) -> Matrix {
    let mut init_val: u32 = 1325;
    let mut m: Matrix = Vec::with_capacity(nb * nb);
    for ii in 0..nb {
        for jj in 0..nb {
            let mut null =
                (ii < jj && ii % 3 != 0) || (ii > jj && jj % 3 != 0) || ii % 2 == 1 || jj % 2 == 1;
            if ii == jj || ii + 1 == jj || jj + 1 == ii {
                null = false;
            }
            m.push((!null).then(|| {
                (0..bs * bs)
                    .map(|_| {
                        init_val = (3125 * init_val) % 65536;
                        (init_val as f32 - 32768.0) / 16384.0
                    })
                    .collect()
            }));
        }
    }
    for d in 0..nb {
        if let Some(block) = &mut m[d * nb + d] {
            for i in 0..bs {
                block[i * bs + i] += (nb * bs) as f32;
            }
        }
    }
    m
}

/// Factors the diagonal block in place.
fn lu0(diag: &mut [f32], bs: usize) {
    for k in 0..bs {
        for i in k + 1..bs {
            diag[i * bs + k] /= diag[k * bs + k];
            for j in k + 1..bs {
                diag[i * bs + j] -= diag[i * bs + k] * diag[k * bs + j];
            }
        }
    }
}

/// Updates a block of the diagonal's row.
fn fwd(diag: &[f32], col: &mut [f32], bs: usize) {
    for k in 0..bs {
        for i in k + 1..bs {
            for j in 0..bs {
                col[i * bs + j] -= diag[i * bs + k] * col[k * bs + j];
            }
        }
    }
}

/// Updates a block of the diagonal's column.
fn bdiv(diag: &[f32], row: &mut [f32], bs: usize) {
    for i in 0..bs {
        for k in 0..bs {
            row[i * bs + k] /= diag[k * bs + k];
            for j in k + 1..bs {
                row[i * bs + j] -= row[i * bs + k] * diag[k * bs + j];
            }
        }
    }
}

/// `inner -= row · col`.
fn bmod(row: &[f32], col: &[f32], inner: &mut [f32], bs: usize) {
    for i in 0..bs {
        for j in 0..bs {
            let mut acc = inner[i * bs + j];
            for k in 0..bs {
                acc -= row[i * bs + k] * col[k * bs + j];
            }
            inner[i * bs + j] = acc;
        }
    }
}

/// A block taken out of the matrix for one task: where it goes back.
struct Work {
    index: usize,
    block: Block,
}

/// Factors `m` in place.
pub(crate) fn sparselu<F: Fork>(f: F, m: &mut Matrix, nb: usize, bs: usize) {
    for kk in 0..nb {
        let mut diag = m[kk * nb + kk]
            .take()
            .expect("BOTS keeps every diagonal block");
        lu0(&mut diag, bs);
        let row = (kk + 1..nb).map(|jj| kk * nb + jj);
        let column = (kk + 1..nb).map(|ii| ii * nb + kk);
        let mut edges: Vec<Work> = row
            .chain(column)
            .filter_map(|index| m[index].take().map(|block| Work { index, block }))
            .collect();
        split(
            f,
            &mut edges,
            &|w: &mut Work| {
                if w.index / nb == kk {
                    fwd(&diag, &mut w.block, bs);
                } else {
                    bdiv(&diag, &mut w.block, bs);
                }
            },
            &|(), ()| (),
        );
        m[kk * nb + kk] = Some(diag);
        for w in edges {
            m[w.index] = Some(w.block);
        }
        let mut inner: Vec<Work> = Vec::new();
        for ii in kk + 1..nb {
            if m[ii * nb + kk].is_none() {
                continue;
            }
            for jj in kk + 1..nb {
                if m[kk * nb + jj].is_some() {
                    let index = ii * nb + jj;
                    let block = m[index].take().unwrap_or_else(|| vec![0.0; bs * bs]);
                    inner.push(Work { index, block });
                }
            }
        }
        let shared: &Matrix = m;
        split(
            f,
            &mut inner,
            &|w: &mut Work| {
                let (ii, jj) = (w.index / nb, w.index % nb);
                let (Some(row), Some(col)) = (&shared[ii * nb + kk], &shared[kk * nb + jj]) else {
                    unreachable!("only blocks whose row and column blocks exist were taken");
                };
                bmod(row, col, &mut w.block, bs);
            },
            &|(), ()| (),
        );
        for w in inner {
            m[w.index] = Some(w.block);
        }
    }
}

/// A digest of every block's presence and bits, in order.
fn digest(m: &Matrix) -> u64 {
    m.iter().fold(0, |h, block| match block {
        None => mix(h, 0),
        Some(b) => b
            .iter()
            .fold(mix(h, 1), |h, v| mix(h, u64::from(v.to_bits()))),
    })
}

/// sparselu of `nb × nb` blocks of `bs × bs`, checked by its digest
/// (against the sequential variant's, by the harness).
pub(crate) fn benchmark(nb: usize, bs: usize) -> Benchmark {
    Benchmark {
        name: "sparselu",
        input: format!("{nb}×{nb} blocks of {bs}×{bs} f32"),
        prepare: Box::new(move || {
            let mut m = genmat(nb, bs);
            Box::new(move |par| {
                with_fork!(par, |f| sparselu(f, &mut m, nb, bs));
                Box::new(move || {
                    if m.iter().flatten().flatten().any(|v| !v.is_finite()) {
                        return Err("a value is not finite".to_owned());
                    }
                    Ok(digest(&m))
                })
            })
        }),
    }
}
