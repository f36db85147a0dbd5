//! The hello every TCP connection between localities starts with.
//!
//! ```text
//! hello = magic "COURIER\0" version(u32) secret[16] count(u32) rank(u32) fingerprint(u64)
//! ack   = status(u8: 0 accepted, 1 refused) len(u32) reason[len]
//! ```
//!
//! The acceptor answers a hello with a wrong secret by closing the
//! connection without a word; every other refusal is explained in the ack.

use std::io::{Read, Write};
use std::net::TcpStream;

use super::Secret;
use crate::ids::LocalityId;
use crate::parcel::WIRE_VERSION;

const MAGIC: &[u8; 8] = b"COURIER\0";
/// Bytes of an encoded hello.
pub(crate) const HELLO_LEN: usize = 8 + 4 + 16 + 4 + 4 + 8;

/// What a locality says about itself when it connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hello {
    pub(crate) version: u32,
    pub(crate) secret: [u8; 16],
    pub(crate) count: u32,
    pub(crate) rank: u32,
    pub(crate) fingerprint: u64,
}

impl Hello {
    /// The hello of this process.
    pub(crate) fn new(secret: &Secret, count: u32, rank: u32, fingerprint: u64) -> Self {
        Hello {
            version: u32::from(WIRE_VERSION),
            secret: *secret.as_bytes(),
            count,
            rank,
            fingerprint,
        }
    }

    pub(crate) fn encode(&self) -> [u8; HELLO_LEN] {
        let mut out = [0u8; HELLO_LEN];
        out[..8].copy_from_slice(MAGIC);
        out[8..12].copy_from_slice(&self.version.to_le_bytes());
        out[12..28].copy_from_slice(&self.secret);
        out[28..32].copy_from_slice(&self.count.to_le_bytes());
        out[32..36].copy_from_slice(&self.rank.to_le_bytes());
        out[36..44].copy_from_slice(&self.fingerprint.to_le_bytes());
        out
    }

    pub(crate) fn read(stream: &mut impl Read) -> std::io::Result<Result<Hello, String>> {
        let mut b = [0u8; HELLO_LEN];
        stream.read_exact(&mut b)?;
        if &b[..8] != MAGIC {
            return Ok(Err("not a Courier locality (bad magic)".into()));
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Ok(Ok(Hello {
            version: u32_at(8),
            secret: b[12..28].try_into().expect("16 bytes"),
            count: u32_at(28),
            rank: u32_at(32),
            fingerprint: u64::from_le_bytes(b[36..44].try_into().expect("8 bytes")),
        }))
    }
}

/// Why an incoming hello was turned down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Wrong secret, bad magic: not a member of this job. Closed silently.
    Stranger(String),
    /// A member of the job that cannot be accepted; told why.
    Explained(String),
}

/// Checks `theirs` against `ours` for a connection expected from a rank in
/// `expected`.
pub(crate) fn check(
    ours: &Hello,
    theirs: &Hello,
    expected: impl Fn(u32) -> bool,
) -> Result<LocalityId, Refusal> {
    let secret = Secret::from_bytes(ours.secret);
    if !secret.matches(&theirs.secret) {
        return Err(Refusal::Stranger("wrong job secret".into()));
    }
    if theirs.version != ours.version {
        return Err(Refusal::Explained(format!(
            "wire version {} differs from version {}",
            theirs.version, ours.version
        )));
    }
    if theirs.fingerprint != ours.fingerprint {
        return Err(Refusal::Explained(format!(
            "locality#{} runs a different binary than locality#{} (action registry fingerprint \
             {:#018x} vs {:#018x}): build once and run the same executable on every locality",
            theirs.rank, ours.rank, theirs.fingerprint, ours.fingerprint
        )));
    }
    if theirs.count != ours.count {
        return Err(Refusal::Explained(format!(
            "the job has {} localities, the peer thinks {}",
            ours.count, theirs.count
        )));
    }
    if !expected(theirs.rank) {
        return Err(Refusal::Explained(format!(
            "no connection from locality#{} expected",
            theirs.rank
        )));
    }
    Ok(LocalityId::new(theirs.rank))
}

/// Answers a hello.
pub(crate) fn write_ack(stream: &mut TcpStream, refusal: Option<&str>) -> std::io::Result<()> {
    let reason = refusal.unwrap_or("").as_bytes();
    let mut out = Vec::with_capacity(5 + reason.len());
    out.push(u8::from(refusal.is_some()));
    out.extend_from_slice(&u32::try_from(reason.len()).unwrap_or(0).to_le_bytes());
    out.extend_from_slice(reason);
    stream.write_all(&out)
}

/// Reads the answer to our hello: `Ok(())` or the peer's reason for refusing.
pub(crate) fn read_ack(stream: &mut TcpStream) -> std::io::Result<Result<(), String>> {
    let mut head = [0u8; 5];
    stream.read_exact(&mut head)?;
    let len = u32::from_le_bytes(head[1..5].try_into().expect("4 bytes")) as usize;
    let mut reason = vec![0u8; len.min(64 * 1024)];
    stream.read_exact(&mut reason)?;
    Ok(match head[0] {
        0 => Ok(()),
        _ => Err(String::from_utf8_lossy(&reason).into_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(secret: &Secret, rank: u32, fingerprint: u64) -> Hello {
        Hello::new(secret, 3, rank, fingerprint)
    }

    #[test]
    fn hello_round_trips() {
        let secret = Secret::random().unwrap();
        let h = hello(&secret, 2, 77);
        let back = Hello::read(&mut &h.encode()[..]).unwrap().unwrap();
        assert_eq!(back, h);
        let mut bad = h.encode();
        bad[0] = b'X';
        assert!(Hello::read(&mut &bad[..]).unwrap().is_err());
    }

    #[test]
    fn check_refuses_strangers_and_other_binaries() {
        let secret = Secret::random().unwrap();
        let ours = hello(&secret, 0, 77);
        let any = |_| true;
        assert_eq!(
            check(&ours, &hello(&secret, 1, 77), any),
            Ok(LocalityId::new(1))
        );
        let stranger = hello(&Secret::random().unwrap(), 1, 77);
        assert!(matches!(
            check(&ours, &stranger, any),
            Err(Refusal::Stranger(_))
        ));
        let Err(Refusal::Explained(why)) = check(&ours, &hello(&secret, 1, 78), any) else {
            panic!("a different fingerprint was accepted");
        };
        assert!(why.contains("different binary"), "{why}");
        assert!(matches!(
            check(&ours, &hello(&secret, 1, 77), |r| r == 2),
            Err(Refusal::Explained(_))
        ));
    }
}
