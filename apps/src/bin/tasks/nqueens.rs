//! nqueens: count the placements of n queens on an n×n board (Inncabs
//! `nqueens` from BOTS, "recursive unbalanced", fine: 28 µs tasks in seed
//! 003's Table V). Each node tries every column of its row and forks one
//! child per legal column, each with its own copy of the board, as BOTS
//! does; the children are split in halves (BOTS spawns them in a loop).

use crate::Benchmark;
use crate::fork::{Fork, split, with_fork};

/// Largest board: the board is a fixed array copied into each child.
pub(crate) const MAX_N: usize = 20;

/// Solutions for n = 0, 1, ... 16 (OEIS A000170): the check.
const SOLUTIONS: [u64; 17] = [
    1, 1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596, 2279184, 14772512,
];

/// Column of the queen of each row placed so far.
type Board = [u8; MAX_N];

/// Whether a queen at (`row`, `col`) is safe from the rows above.
fn safe(board: &Board, row: usize, col: u8) -> bool {
    board[..row]
        .iter()
        .enumerate()
        .all(|(r, &c)| c != col && usize::from(c.abs_diff(col)) != row - r)
}

/// Solutions that complete `board`, whose rows `0..row` are placed.
fn solve<F: Fork>(f: F, n: usize, row: usize, board: &Board) -> u64 {
    if row == n {
        return 1;
    }
    let mut children: Vec<Board> = (0..n as u8)
        .filter(|&col| safe(board, row, col))
        .map(|col| {
            let mut child = *board;
            child[row] = col;
            child
        })
        .collect();
    split(
        f,
        &mut children,
        &|child| solve(f, n, row + 1, child),
        &|a, b| a + b,
    )
    .unwrap_or(0)
}

/// nqueens(`n`), checked against the known count when there is one.
pub(crate) fn benchmark(n: usize) -> Benchmark {
    assert!(n <= MAX_N, "nqueens: n is at most {MAX_N}");
    Benchmark {
        name: "nqueens",
        input: format!("{n}×{n} board"),
        prepare: Box::new(move || {
            Box::new(move |par| {
                let count = with_fork!(par, |f| solve(f, n, 0, &[0; MAX_N]));
                Box::new(move || match SOLUTIONS.get(n) {
                    Some(&known) if known != count => {
                        Err(format!("{count} solutions, expected {known}"))
                    }
                    _ => Ok(count),
                })
            })
        }),
    }
}
