//! The per-job secret every TCP connection of a job presents (the data
//! connections' handshake and the start-up rendezvous).

use serde::{Deserialize, Serialize};

/// The per-job secret every connection must present.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Secret([u8; 16]);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// A fresh random secret from the operating system.
    pub(crate) fn random() -> Result<Self, NoRandomness> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(NoRandomness)?;
        Ok(Secret(bytes))
    }

    /// The secret as 32 hex digits, for `COURIER_SECRET`.
    pub(crate) fn to_hex(self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses 32 hex digits.
    pub(crate) fn from_hex(hex: &str) -> Result<Self, BadSecret> {
        let bad = || BadSecret;
        if hex.len() != 32 || !hex.is_ascii() {
            return Err(bad());
        }
        let mut bytes = [0u8; 16];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Secret(bytes))
    }

    pub(crate) fn from_bytes(bytes: [u8; 16]) -> Self {
        Secret(bytes)
    }

    pub(crate) fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// Compares in time independent of where the secrets differ.
    pub(crate) fn matches(&self, other: &[u8; 16]) -> bool {
        self.0
            .iter()
            .zip(other)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

/// The operating system gave no randomness for a job secret.
#[derive(Debug, thiserror::Error)]
#[error("no randomness for the job secret: {0}")]
pub(crate) struct NoRandomness(getrandom::Error);

/// A `COURIER_SECRET` that is not 32 hex digits.
#[derive(Debug, thiserror::Error)]
#[error("COURIER_SECRET must be 32 hex digits")]
pub(crate) struct BadSecret;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_hex_round_trips_and_rejects_garbage() {
        let secret = Secret::random().unwrap();
        assert_eq!(Secret::from_hex(&secret.to_hex()).unwrap(), secret);
        assert!(Secret::from_hex("xyz").is_err());
        assert!(Secret::from_hex(&"g".repeat(32)).is_err());
        assert!(secret.matches(secret.as_bytes()));
        let mut other = *secret.as_bytes();
        other[15] ^= 1;
        assert!(!secret.matches(&other));
    }
}
