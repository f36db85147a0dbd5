//! Stable action ids.

use std::fmt;

/// The id of an action: the 64-bit FNV-1a hash of its full path.
///
/// Stable across processes of the same binary; collisions are detected when
/// the registry is built.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActionId(u64);

/// FNV-1a 64-bit offset basis and prime (Fowler, Noll, Vo).
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

pub(crate) const fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(FNV_PRIME);
        i += 1;
    }
    hash
}

impl ActionId {
    /// The id of the action with this full path.
    pub const fn of_name(name: &str) -> ActionId {
        ActionId(fnv1a(FNV_OFFSET, name.as_bytes()))
    }

    /// The id as sent on the wire.
    pub const fn to_bits(self) -> u64 {
        self.0
    }

    /// The id read from the wire.
    pub const fn from_bits(bits: u64) -> ActionId {
        ActionId(bits)
    }
}

impl fmt::Debug for ActionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ActionId({:#018x})", self.0)
    }
}

impl fmt::Display for ActionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#018x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_reference_vectors() {
        // Reference values from the FNV specification's test suite.
        assert_eq!(ActionId::of_name("").to_bits(), 0xcbf2_9ce4_8422_2325);
        assert_eq!(ActionId::of_name("a").to_bits(), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(ActionId::of_name("foobar").to_bits(), 0x8594_4171_f739_67e8);
    }
}
