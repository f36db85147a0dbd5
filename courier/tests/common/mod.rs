//! Helpers shared by the integration tests.
//!
//! A multi-process test starts its other localities by running this same
//! test binary again, restricted to the one test (`--exact NAME`). In those
//! children `courier::launch` joins the job and never returns.

#![allow(dead_code, unreachable_pub)]

use courier::{Config, Transport};

/// A TCP job of `n` processes for the test function `name`.
pub fn tcp(name: &str, n: u32) -> Config {
    Config::new()
        .localities(n)
        .transport(Transport::Tcp)
        .child_args(["--exact", name, "--nocapture", "--test-threads=1"])
}

/// An in-process job of `n` localities.
pub fn inproc(n: u32) -> Config {
    Config::new().localities(n).transport(Transport::Inproc)
}

/// A small, seedable pseudo-random generator (xorshift64*), enough to pick
/// destinations and payloads.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// FNV-1a over `bytes`: a checksum the receiver sends back.
pub fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}
