//! uts: Unbalanced Tree Search, counting the nodes of an implicit random
//! tree (Inncabs `uts`, "recursive unbalanced", very fine: 1.37 µs tasks
//! in seed 003's Table V).
//!
//! The tree is UTS's T1 (Olivier et al., LCPC 2006; the `sample_trees.sh`
//! of UTS 2.1): geometric, fixed shape (`-t 1 -a 3 -d 10 -b 4 -r 19`):
//! every node above depth 10 has a geometrically distributed number of
//! children with mean 4, drawn from its SHA-1 state, and the published
//! size is 4,130,071 nodes. Node states follow UTS's SHA-1 generator
//! (`rng/brg_sha1.c`): the root's is SHA-1 of 16 zero bytes and the
//! big-endian root id, a child's is SHA-1 of its parent's 20 bytes and
//! its big-endian index. Inncabs runs BOTS's binomial trees instead, whose
//! inputs are files not used here. With another `--uts-depth` the tree is
//! T1's shape cut at that depth, with no published size: it is checked
//! against the sequential count only. The children of a node are forked
//! with [`split`] (UTS spawns them in a loop).

use crate::Benchmark;
use crate::fork::{Fork, split, with_fork};

/// T1's depth limit (`-d 10`).
pub(crate) const T1_DEPTH: u32 = 10;
/// T1's mean branching factor (`-b 4`).
const T1_BRANCHING: f64 = 4.0;
/// T1's root id (`-r 19`).
const T1_ROOT: u32 = 19;
/// T1's published size (UTS `sample_trees.sh`).
const T1_NODES: u64 = 4_130_071;
/// UTS's cap on children of a node (`MAXNUMCHILDREN`).
const MAX_CHILDREN: i32 = 100;

/// SHA-1 of a message shorter than 56 bytes (one block).
fn sha1(message: &[u8]) -> [u8; 20] {
    assert!(message.len() < 56);
    let mut block = [0u8; 64];
    block[..message.len()].copy_from_slice(message);
    block[message.len()] = 0x80;
    block[56..].copy_from_slice(&(message.len() as u64 * 8).to_be_bytes());
    let mut w = [0u32; 80];
    for (i, word) in block.chunks_exact(4).enumerate() {
        w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
    }
    for i in 16..80 {
        w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
    }
    let h0: [u32; 5] = [
        0x6745_2301,
        0xefcd_ab89,
        0x98ba_dcfe,
        0x1032_5476,
        0xc3d2_e1f0,
    ];
    let [mut a, mut b, mut c, mut d, mut e] = h0;
    for (i, &wi) in w.iter().enumerate() {
        let (f, k) = match i {
            0..20 => ((b & c) | (!b & d), 0x5a82_7999),
            20..40 => (b ^ c ^ d, 0x6ed9_eba1),
            40..60 => ((b & c) | (b & d) | (c & d), 0x8f1b_bcdc),
            _ => (b ^ c ^ d, 0xca62_c1d6),
        };
        let t = a
            .rotate_left(5)
            .wrapping_add(f)
            .wrapping_add(e)
            .wrapping_add(k)
            .wrapping_add(wi);
        (e, d, c, b, a) = (d, c, b.rotate_left(30), a, t);
    }
    let mut out = [0u8; 20];
    for (i, (h, x)) in h0.iter().zip([a, b, c, d, e]).enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&h.wrapping_add(x).to_be_bytes());
    }
    out
}

/// A node: its SHA-1 state and depth.
#[derive(Debug, Clone, Copy)]
struct Node {
    state: [u8; 20],
    height: u32,
}

impl Node {
    fn root(id: u32) -> Node {
        let mut seed = [0u8; 20];
        seed[16..].copy_from_slice(&id.to_be_bytes());
        Node {
            state: sha1(&seed),
            height: 0,
        }
    }

    fn child(&self, index: u32) -> Node {
        let mut message = [0u8; 24];
        message[..20].copy_from_slice(&self.state);
        message[20..].copy_from_slice(&index.to_be_bytes());
        Node {
            state: sha1(&message),
            height: self.height + 1,
        }
    }

    /// UTS `uts_numChildren_geo` with the fixed shape: geometric with mean
    /// `T1_BRANCHING` above `depth`, none at it.
    fn children(&self, depth: u32) -> u32 {
        let b = if self.height < depth {
            T1_BRANCHING
        } else {
            0.0
        };
        let p = 1.0 / (1.0 + b);
        let r = u32::from_be_bytes([
            self.state[16],
            self.state[17],
            self.state[18],
            self.state[19],
        ]) & 0x7fff_ffff;
        let u = f64::from(r) / 2_147_483_648.0;
        let n = ((1.0 - u).ln() / (1.0 - p).ln()).floor() as i32;
        n.clamp(0, MAX_CHILDREN) as u32
    }
}

/// Nodes of the subtree of `node`.
fn count<F: Fork>(f: F, node: &Node, depth: u32) -> u64 {
    let mut children: Vec<Node> = (0..node.children(depth)).map(|i| node.child(i)).collect();
    1 + split(
        f,
        &mut children,
        &|c: &mut Node| count(f, c, depth),
        &|a, b| a + b,
    )
    .unwrap_or(0)
}

/// Counting T1 (cut at `depth`), checked against T1's published size at
/// depth 10.
pub(crate) fn benchmark(depth: u32) -> Benchmark {
    let published = (depth == T1_DEPTH).then_some(T1_NODES);
    Benchmark {
        name: "uts",
        input: match published {
            Some(n) => format!("T1 (geometric, d {depth}): {n} nodes"),
            None => format!("T1 shape cut at d {depth}"),
        },
        prepare: Box::new(move || {
            Box::new(move |par| {
                let nodes = with_fork!(par, |f| count(f, &Node::root(T1_ROOT), depth));
                Box::new(move || match published {
                    Some(n) if n != nodes => Err(format!("{nodes} nodes, T1 has {n}")),
                    _ => Ok(nodes),
                })
            })
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_of_abc_is_the_fips_180_example() {
        let digest = sha1(b"abc");
        assert_eq!(
            digest[..4],
            [0xa9, 0x99, 0x3e, 0x36],
            "FIPS 180-2 appendix A: a9993e36 4706816a ba3e2571 7850c26c 9cd0d89d"
        );
        assert_eq!(digest[16..], [0x9c, 0xd0, 0xd8, 0x9d]);
    }
}
