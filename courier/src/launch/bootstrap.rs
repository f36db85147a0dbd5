//! The rendezvous where the localities of a TCP job learn each other's
//! addresses, and the job secret.
//!
//! One party *serves* the rendezvous at `COURIER_ROOT`: locality 0 when the
//! program launched itself (or was started by hand on several hosts), or the
//! `courier run` launcher. Every other locality connects, presents the
//! secret and its data address, and receives the table of all addresses
//! once everyone has registered. Messages are postcard-encoded and prefixed
//! with their `u32` length.
//!
//! The server never waits for one connection: it accepts every connection
//! at once into a set of pending handshakes (the TCP transport's
//! `Handshakes`, the same as a data port's), non-blocking, and reads each
//! registration as its bytes arrive, polling every 2 ms. A connection has
//! [`HANDSHAKE_TIMEOUT`] (2 s) to register whole and is closed after; at
//! most [`MAX_PENDING`] (64) strangers wait at once beyond the localities
//! still expected, and a connection over that cap is closed at once. So
//! silent or slow connections neither delay nor abort the start-up; they
//! are logged at most once a second. A stranger (wrong secret, no
//! registration) is closed without an answer; a member that cannot join
//! (another job size, a rank out of range or taken) is told why, and the
//! start-up fails. The registered connections then wait, blocking, for the
//! table, as do the clients.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::ids::LocalityId;
use crate::runtime::Error;
use crate::transport::tcp::{
    Greeted, HANDSHAKE_TIMEOUT, Handshakes, MAX_PENDING, STARTUP_TIMEOUT, Secret,
};

#[derive(Debug, Serialize, Deserialize)]
enum Message {
    Register {
        secret: Secret,
        rank: u32,
        count: u32,
        data_addr: SocketAddr,
        pid: u32,
    },
    Table {
        addrs: Vec<SocketAddr>,
    },
    Refused {
        reason: String,
    },
}

fn write_message(stream: &mut TcpStream, message: &Message) -> std::io::Result<()> {
    let body = postcard::to_allocvec(message).map_err(std::io::Error::other)?;
    let len = u32::try_from(body.len()).map_err(std::io::Error::other)?;
    stream.write_all(&len.to_le_bytes())?;
    stream.write_all(&body)?;
    stream.flush()
}

/// Largest rendezvous message accepted: an address table of many localities.
const MAX_MESSAGE: usize = 16 << 20;

/// Largest registration the server reads: a `Register` takes under 64
/// bytes (a secret, three numbers and an address).
const MAX_REGISTRATION: usize = 1024;

/// How long the server sleeps when nothing happened (no connection, no
/// byte of a registration). A guess, tune me.
const IDLE_POLL: Duration = Duration::from_millis(2);

/// The framing of a registration: a `u32` length, then that many bytes.
fn registration_framing(bytes: &[u8]) -> Result<usize, String> {
    let Some(&[a, b, c, d]) = bytes.get(..4) else {
        return Ok(4);
    };
    let len = u32::from_le_bytes([a, b, c, d]) as usize;
    if len > MAX_REGISTRATION {
        return Err(format!("a registration of {len} bytes"));
    }
    Ok(4 + len)
}

fn read_message(stream: &mut TcpStream) -> std::io::Result<Message> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_MESSAGE {
        return Err(std::io::Error::other(format!(
            "rendezvous message of {len} bytes"
        )));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    postcard::from_bytes(&body).map_err(std::io::Error::other)
}

/// Something to check while the rendezvous waits, such as the child
/// processes that should register: an `Err` aborts the start-up.
pub(crate) type Watch<'a> = &'a mut dyn FnMut() -> Result<(), String>;

/// Serves the rendezvous of a job of `count` localities on `listener`. If
/// `own` is given, the server is locality 0 with that data address and
/// waits for ranks `1..count`; otherwise (a launcher) it waits for all.
pub(crate) fn serve(
    listener: &TcpListener,
    count: u32,
    secret: &Secret,
    own: Option<SocketAddr>,
    watch: Watch<'_>,
) -> Result<Vec<SocketAddr>, Error> {
    let io = |what: &str, e: std::io::Error| Error::startup(format!("rendezvous: {what}: {e}"));
    listener
        .set_nonblocking(true)
        .map_err(|e| io("set_nonblocking", e))?;
    let mut addrs: Vec<Option<SocketAddr>> = vec![None; count as usize];
    let mut streams = Vec::new();
    if let Some(own) = own {
        addrs[0] = Some(own);
    }
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    let expected = addrs.iter().filter(|a| a.is_none()).count();
    let mut handshakes = Handshakes::new(
        "rendezvous".into(),
        MAX_PENDING + expected,
        HANDSHAKE_TIMEOUT,
        registration_framing,
    );
    while addrs.iter().any(Option::is_none) {
        watch().map_err(Error::Startup)?;
        if Instant::now() > deadline {
            let missing: Vec<String> = (0..count)
                .filter(|r| addrs[*r as usize].is_none())
                .map(|r| LocalityId::new(r).to_string())
                .collect();
            return Err(Error::startup(format!(
                "{} did not join within {STARTUP_TIMEOUT:?}",
                missing.join(", ")
            )));
        }
        let mut idle = !handshakes
            .accept_all(listener)
            .map_err(|e| io("accept", e))?;
        for greeted in handshakes.read_all() {
            idle = false;
            if let Some((rank, data_addr, stream)) =
                admit(&mut handshakes, greeted, count, secret, &addrs)?
            {
                addrs[rank as usize] = Some(data_addr);
                streams.push(stream);
            }
        }
        handshakes.expire(Instant::now());
        if idle {
            std::thread::sleep(IDLE_POLL);
        }
    }
    handshakes.reject_all("every locality has joined already");
    let addrs: Vec<SocketAddr> = addrs.into_iter().flatten().collect();
    for mut stream in streams {
        write_message(
            &mut stream,
            &Message::Table {
                addrs: addrs.clone(),
            },
        )
        .map_err(|e| io("sending the address table", e))?;
    }
    Ok(addrs)
}

/// Checks a registration: the locality's rank, data address and
/// connection (blocking again) if it joins; `None` if it was a stranger
/// (turned away in `handshakes`); an error, after telling the locality,
/// if it is a member that cannot join.
fn admit(
    handshakes: &mut Handshakes,
    greeted: Greeted,
    count: u32,
    secret: &Secret,
    addrs: &[Option<SocketAddr>],
) -> Result<Option<(u32, SocketAddr, TcpStream)>, Error> {
    let Greeted {
        stream,
        from,
        greeting,
    } = greeted;
    let Ok(Message::Register {
        secret: theirs,
        rank,
        count: their_count,
        data_addr,
        pid,
    }) = postcard::from_bytes(greeting.get(4..).unwrap_or_default())
    else {
        handshakes.reject(stream, from, "it did not register");
        return Ok(None);
    };
    if !secret.matches(theirs.as_bytes()) {
        handshakes.reject(stream, from, "wrong job secret");
        return Ok(None);
    }
    let mut stream = TcpStream::from(stream);
    let blocking = stream.set_nonblocking(false);
    let refusal = if their_count != count {
        Some(format!("the job has {count} localities, not {their_count}"))
    } else if rank >= count {
        Some(format!(
            "rank {rank} is out of range (the job has {count} localities)"
        ))
    } else if addrs[rank as usize].is_some() {
        Some(format!("rank {rank} registered twice"))
    } else {
        None
    };
    if let Some(reason) = refusal {
        let _ = stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT));
        let _ = write_message(
            &mut stream,
            &Message::Refused {
                reason: reason.clone(),
            },
        );
        return Err(Error::startup(format!(
            "process {pid} at {from} could not join: {reason}"
        )));
    }
    blocking.map_err(|e| Error::startup(format!("rendezvous: the connection of {from}: {e}")))?;
    Ok(Some((rank, data_addr, stream)))
}

/// Registers locality `rank` with the rendezvous at `root` and returns the
/// address table once every locality has registered.
pub(crate) fn register(
    root: SocketAddr,
    secret: &Secret,
    rank: u32,
    count: u32,
    data_addr: SocketAddr,
) -> Result<Vec<SocketAddr>, Error> {
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    let fail = |what: String| {
        Error::startup(format!(
            "{}: rendezvous at {root}: {what}",
            LocalityId::new(rank)
        ))
    };
    let mut stream = loop {
        match TcpStream::connect_timeout(&root, Duration::from_secs(5)) {
            Ok(stream) => break stream,
            Err(e) if Instant::now() > deadline => {
                return Err(fail(format!("cannot connect: {e}")));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let register = Message::Register {
        secret: *secret,
        rank,
        count,
        data_addr,
        pid: std::process::id(),
    };
    write_message(&mut stream, &register).map_err(|e| fail(format!("cannot register: {e}")))?;
    stream
        .set_read_timeout(Some(
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_secs(1)),
        ))
        .map_err(|e| fail(e.to_string()))?;
    match read_message(&mut stream) {
        Ok(Message::Table { addrs }) if addrs.len() == count as usize => Ok(addrs),
        Ok(Message::Refused { reason }) => Err(fail(format!("refused: {reason}"))),
        Ok(other) => Err(fail(format!("unexpected answer {other:?}"))),
        Err(e) => Err(fail(format!(
            "no address table (did another locality fail?): {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendezvous_gives_everyone_the_same_table() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = listener.local_addr().unwrap();
        let secret = Secret::random().unwrap();
        let own: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        let clients: Vec<_> = (1..4u32)
            .map(|rank| {
                std::thread::spawn(move || {
                    let addr = SocketAddr::from(([127, 0, 0, 1], 1000 + rank as u16));
                    register(root, &secret, rank, 4, addr).unwrap()
                })
            })
            .collect();
        // A stranger with the wrong secret is turned away without harm.
        let mut stranger = TcpStream::connect(root).unwrap();
        let wrong = Message::Register {
            secret: Secret::random().unwrap(),
            rank: 1,
            count: 4,
            data_addr: own,
            pid: 0,
        };
        write_message(&mut stranger, &wrong).unwrap();
        let table = serve(&listener, 4, &secret, Some(own), &mut || Ok(())).unwrap();
        let expected: Vec<SocketAddr> = (0..4u16)
            .map(|r| SocketAddr::from(([127, 0, 0, 1], 1000 + r)))
            .collect();
        assert_eq!(table, expected);
        for client in clients {
            assert_eq!(client.join().unwrap(), expected);
        }
        assert!(
            read_message(&mut stranger).is_err(),
            "the stranger got an answer"
        );
    }

    #[test]
    fn rendezvous_stops_when_the_watch_fails() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let secret = Secret::random().unwrap();
        let err = serve(&listener, 2, &secret, None, &mut || {
            Err("locality#1 exited with status 3".into())
        })
        .unwrap_err();
        assert!(err.to_string().contains("exited with status 3"), "{err}");
    }

    #[test]
    fn silent_and_slow_connections_neither_delay_nor_abort_the_rendezvous() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = listener.local_addr().unwrap();
        let secret = Secret::random().unwrap();
        // Seven silent connections and one that drips a byte at a time,
        // all in the backlog before the localities.
        let silent: Vec<TcpStream> = (0..7).map(|_| TcpStream::connect(root).unwrap()).collect();
        let dripping = std::thread::spawn(move || {
            let mut s = TcpStream::connect(root).unwrap();
            for _ in 0..40 {
                if s.write_all(&[1]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let clients: Vec<_> = (0..3u32)
            .map(|rank| {
                std::thread::spawn(move || {
                    let addr = SocketAddr::from(([127, 0, 0, 1], 2000 + rank as u16));
                    register(root, &secret, rank, 3, addr)
                })
            })
            .collect();
        let start = Instant::now();
        let table = serve(&listener, 3, &secret, None, &mut || Ok(()));
        let took = start.elapsed();
        assert!(table.is_ok(), "{:?}", table.err());
        assert!(took < HANDSHAKE_TIMEOUT, "the rendezvous took {took:?}");
        for client in clients {
            assert!(client.join().unwrap().is_ok());
        }
        drop(silent);
        dripping.join().unwrap();
    }
}
