//! Virtual topologies (Narayanan 2020 §2.1): which locality a call goes to first.
//!
//! In the 2D grid, locality `r` of `n` sits at row `r / c`, column `r % c`,
//! with `c = ⌈√n⌉` columns (the last row may be short). A call from `s` to
//! `d` in another row and column goes first to the locality in `s`'s row
//! and `d`'s column, which forwards it to `d`; if that place is past the
//! short last row, it goes through `d`'s row and `s`'s column instead.
//! Either way each locality sends only to its row and its column.

use crate::ids::LocalityId;

/// The columns of the 2D grid of `count` localities.
fn columns(count: u32) -> u32 {
    let mut c = (f64::from(count)).sqrt() as u32;
    while c * c < count {
        c += 1;
    }
    c.max(1)
}

/// The first hop of a call from `here` to `dest` among `count` localities
/// in a grid of `dimensions` (1: `dest` itself).
pub(crate) fn first_hop(
    here: LocalityId,
    dest: LocalityId,
    count: u32,
    dimensions: u8,
) -> LocalityId {
    if dimensions < 2 || here == dest {
        return dest;
    }
    let c = columns(count);
    let (s, d) = (here.get(), dest.get());
    let (s_row, s_col, d_row, d_col) = (s / c, s % c, d / c, d % c);
    if s_row == d_row || s_col == d_col {
        return dest;
    }
    let via_row = s_row * c + d_col;
    if via_row < count {
        LocalityId::new(via_row)
    } else {
        LocalityId::new(d_row * c + s_col)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_takes_at_most_two_hops_along_rows_and_columns() {
        for count in 1..=30u32 {
            let c = columns(count);
            let neighbours = |a: u32, b: u32| a / c == b / c || a % c == b % c;
            for s in 0..count {
                for d in 0..count {
                    let hop = first_hop(LocalityId::new(s), LocalityId::new(d), count, 2).get();
                    assert!(hop < count, "{count}: {s}->{d} via {hop}");
                    assert!(neighbours(s, hop), "{count}: {s}->{d} via {hop}");
                    assert!(neighbours(hop, d), "{count}: {s}->{d} via {hop}");
                    let direct = first_hop(LocalityId::new(s), LocalityId::new(d), count, 1);
                    assert_eq!(direct.get(), d);
                }
            }
        }
        // 3x3: 0 -> 8 goes through 2 (row 0, column 2).
        assert_eq!(
            first_hop(LocalityId::new(0), LocalityId::new(8), 9, 2).get(),
            2
        );
        // 7 localities, 3 columns: 5 (row 1, col 2) -> 6 (row 2, col 0): 3 is in row 1, col 0.
        assert_eq!(
            first_hop(LocalityId::new(5), LocalityId::new(6), 7, 2).get(),
            3
        );
        // 6 (row 2, col 0) -> 5: (2, 2) = 8 does not exist; via (1, 0) = 3.
        assert_eq!(
            first_hop(LocalityId::new(6), LocalityId::new(5), 7, 2).get(),
            3
        );
    }
}
