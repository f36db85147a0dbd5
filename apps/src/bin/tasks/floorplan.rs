//! floorplan: branch-and-bound search for the smallest bounding box that
//! holds a chain of cells, each of several shapes (Inncabs `floorplan`
//! from BOTS, "recursive unbalanced" with atomic pruning, very fine:
//! 4.6 µs tasks in seed 003's Table V).
//!
//! Simplified from BOTS, which reads its cells from an input file and
//! places each next to a neighbour that the file names: here the cells
//! are generated (areas 2 to 9 from a fixed sequence, every `w × h`
//! factorization of the area with sides up to [`MAX_SIDE`] a shape), cell
//! 0 sits at the origin, and each next cell touches the previous one's
//! right or bottom side. As in BOTS, every (shape, position) of the next
//! cell that fits on the board without overlap is a child, copying the
//! board, and a branch is cut when its bounding box is no smaller than
//! the best complete placement found so far (a shared atomic minimum).
//! The optimum does not depend on the order of the search, so every
//! variant must find the sequential one; how many nodes each visits does.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::Benchmark;
use crate::fork::{Fork, mix, split, with_fork};

/// Side of the square board, in units (a board row is one `u32`).
const BOARD: u32 = 32;

/// Longest side of a shape.
const MAX_SIDE: u32 = 9;

/// A placed rectangle.
#[derive(Debug, Clone, Copy)]
struct Rect {
    x: u32,
    y: u32,
    w: u32,
    h: u32,
}

/// A node of the search: the board so far, its bounding box and the last
/// cell placed.
#[derive(Debug, Clone, Copy)]
struct Node {
    rows: [u32; BOARD as usize],
    width: u32,
    height: u32,
    last: Rect,
}

impl Node {
    fn fits(&self, r: Rect) -> bool {
        if r.x + r.w > BOARD || r.y + r.h > BOARD {
            return false;
        }
        let mask = ((1u64 << r.w) - 1) as u32;
        self.rows[r.y as usize..(r.y + r.h) as usize]
            .iter()
            .all(|row| row & (mask << r.x) == 0)
    }

    fn place(mut self, r: Rect) -> Node {
        let mask = ((1u64 << r.w) - 1) as u32;
        for row in &mut self.rows[r.y as usize..(r.y + r.h) as usize] {
            *row |= mask << r.x;
        }
        self.width = self.width.max(r.x + r.w);
        self.height = self.height.max(r.y + r.h);
        self.last = r;
        self
    }

    fn area(&self) -> u32 {
        self.width * self.height
    }
}

/// Every shape of every cell.
fn cells(n: usize) -> Vec<Vec<(u32, u32)>> {
    (0..n as u64)
        .map(|i| {
            let area = 2 + (mix(0xf100, i) % 8) as u32;
            (1..=MAX_SIDE)
                .filter(|w| area % w == 0 && area / w <= MAX_SIDE)
                .map(|w| (w, area / w))
                .collect()
        })
        .collect()
}

/// Places cells `k..` after `node`, lowering `best` to every smaller
/// complete bounding box found.
fn search<F: Fork>(f: F, cells: &[Vec<(u32, u32)>], k: usize, node: &Node, best: &AtomicU32) {
    if k == cells.len() {
        best.fetch_min(node.area(), Ordering::Relaxed);
        return;
    }
    let p = node.last;
    let mut children = Vec::new();
    for &(w, h) in &cells[k] {
        let right = (p.y.saturating_sub(h - 1)..p.y + p.h).map(|y| Rect {
            x: p.x + p.w,
            y,
            w,
            h,
        });
        let below = (p.x.saturating_sub(w - 1)..p.x + p.w).map(|x| Rect {
            x,
            y: p.y + p.h,
            w,
            h,
        });
        for r in right.chain(below) {
            if node.fits(r) {
                let child = node.place(r);
                if child.area() < best.load(Ordering::Relaxed) {
                    children.push(child);
                }
            }
        }
    }
    split(
        f,
        &mut children,
        &|child: &mut Node| {
            // The bound may have dropped since the child was made.
            if child.area() < best.load(Ordering::Relaxed) {
                search(f, cells, k + 1, child, best);
            }
        },
        &|(), ()| (),
    );
}

/// The smallest bounding box area of `cells`.
fn floorplan<F: Fork>(f: F, cells: &[Vec<(u32, u32)>]) -> u32 {
    let best = AtomicU32::new(u32::MAX);
    let empty = Node {
        rows: [0; BOARD as usize],
        width: 0,
        height: 0,
        last: Rect {
            x: 0,
            y: 0,
            w: 0,
            h: 0,
        },
    };
    let mut firsts: Vec<Node> = cells[0]
        .iter()
        .map(|&(w, h)| empty.place(Rect { x: 0, y: 0, w, h }))
        .collect();
    split(
        f,
        &mut firsts,
        &|node: &mut Node| search(f, cells, 1, node, &best),
        &|(), ()| (),
    );
    best.into_inner()
}

/// floorplan of `n` cells, checked by its optimal area (against the
/// sequential variant's, by the harness).
pub(crate) fn benchmark(n: usize) -> Benchmark {
    assert!(n >= 1, "floorplan: at least one cell");
    let cells = cells(n);
    let shapes: usize = cells.iter().map(Vec::len).sum();
    Benchmark {
        name: "floorplan",
        input: format!("{n} cells, {shapes} shapes"),
        prepare: Box::new(move || {
            let cells = cells.clone();
            Box::new(move |par| {
                let area = with_fork!(par, |f| floorplan(f, &cells));
                Box::new(move || {
                    let least: u32 = cells
                        .iter()
                        .map(|shapes| shapes.first().map_or(0, |(w, h)| w * h))
                        .sum();
                    if area == u32::MAX || area < least {
                        return Err(format!("area {area}, below the cells' own {least}"));
                    }
                    Ok(u64::from(area))
                })
            })
        }),
    }
}
