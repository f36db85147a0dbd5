//! The TCP transport: one connection per pair of localities, non-blocking
//! sockets driven by the workers through a [`mio::Poll`].
//!
//! # Sending
//!
//! [`Transport::send`] writes the frame (its headroom filled with the `u32`
//! length) straight to the socket when nothing is queued for that peer, and
//! queues the rest; the queue drains on the socket's next writable event.
//! Senders never block and never take the poll lock.
//!
//! # Receiving
//!
//! Whoever holds the poll lock (one worker at a time; the others skip)
//! reads every readable socket until it would block, cuts the bytes into
//! frames and hands each to the [`Sink`]. A frame above `max_frame_bytes` or
//! one the sink rejects ends the connection: the peer is reported lost.
//!
//! # Connecting
//!
//! Locality `i` connects to every `j < i` and accepts every `j > i`; each
//! connection starts with a [`handshake::Hello`] carrying the job secret and
//! the action-registry fingerprint. The listener stays open afterwards only to
//! turn late connections away.
//!
//! # Handshakes
//!
//! The listener never waits for one connection: every connection it
//! accepts joins a set of pending handshakes ([`listener::Handshakes`]),
//! non-blocking, and its hello is read as its bytes arrive, so a silent or
//! slow stranger delays nobody. Each has [`HANDSHAKE_TIMEOUT`] (2 s) to
//! send its whole hello and is closed after; at most [`MAX_PENDING`] (64)
//! wait at once, beyond the localities still expected at start-up, and a
//! connection over the cap is closed at once. At start-up the accepting
//! locality polls the set between accepts; a locality whose hello was
//! closed without an answer (the acceptor was full, or it was too slow)
//! connects again until the start-up deadline. After start-up the pending
//! connections live in the transport's [`mio::Poll`], each under a token of
//! its own, and whichever worker drives the poll reads them: no thread per
//! connection, and no worker ever blocks on one. Every connection turned
//! away, at start-up or after, counts in `/network/count/rejected` and is
//! logged at most once a second (the next line says how many were not).

mod handshake;
mod listener;
mod secret;

pub(crate) use listener::{Greeted, HANDSHAKE_TIMEOUT, Handshakes, MAX_PENDING};
pub(crate) use secret::{BadSecret, NoRandomness, Secret};

/// How long localities wait for each other at start-up (the data
/// connections here, the rendezvous in the launch room).
pub(crate) const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use mio::{Events, Interest, Poll, Token, Waker};
use parking_lot::Mutex;

use super::{ProtocolError, SendError, Sink, Transport};
use crate::ids::LocalityId;
use crate::parcel::FrameTooLarge;

use crate::clock::clock;
use crate::sched::BlockOutcome;
use handshake::{Hello, Refusal};

const WAKER: Token = Token(usize::MAX);
const LISTENER: Token = Token(usize::MAX - 1);

/// What a read buffer grows by when it runs short of room.
const READ_CHUNK: usize = 64 * 1024;

/// Least free space a read buffer offers to `read`.
const READ_MIN: usize = 16 * 1024;

/// Frames up to this size (the coalesced frames of the default policies)
/// are copied out of the read buffer, which then stays unshared and is
/// reused in place; larger ones are split off without a copy and fill most
/// of the allocation they keep alive. Splitting every frame off would let
/// each small frame pin a whole read chunk until it has run.
const COPY_UP_TO: usize = 64 * 1024;

/// Bytes of the `u32` length prefix.
const PREFIX: usize = 4;

/// How long start-up's accepting loop sleeps when nothing happened (no
/// connection, no byte of a hello). A guess, tune me.
const STARTUP_POLL: Duration = Duration::from_millis(1);

/// What is queued for one peer.
#[derive(Default)]
struct Outgoing {
    buf: Vec<u8>,
    /// Bytes of `buf` already written.
    written: usize,
    /// Set when a write failed: the connection is dead.
    broken: Option<String>,
}

struct Peer {
    stream: mio::net::TcpStream,
    out: Mutex<Outgoing>,
    /// Whether the loss of this peer was reported to the sink.
    reported: AtomicBool,
}

/// Bytes read from one peer, not yet cut into frames: `buf[..end]`. The
/// rest of `buf` is initialised room for the next read, so reads need no
/// zeroing. Each complete frame is taken off the front and handed to the
/// sink: copied if small (see [`COPY_UP_TO`]), else as shared bytes.
#[derive(Default)]
struct Incoming {
    buf: BytesMut,
    end: usize,
}

impl Incoming {
    /// Ensures at least `want` bytes of room after `end`.
    fn make_room(&mut self, want: usize) {
        if self.buf.len() - self.end >= want {
            return;
        }
        // Only the bytes read are kept: an unshared buffer moves them to
        // its front and reuses its memory; the room is zeroed once per move.
        self.buf.truncate(self.end);
        self.buf.reserve(want.max(READ_CHUNK));
        let capacity = self.buf.capacity();
        self.buf.resize(capacity, 0);
    }

    /// The next complete frame, if one has been read; else makes room for
    /// more of the frame begun, so that it ends up in one piece. The room
    /// grows with what has arrived, never with what the length prefix
    /// announces alone: at most as much as the buffer holds (at least a
    /// [`READ_CHUNK`]) and no more than the rest of the frame, so the
    /// buffer doubles as the frame comes in and a peer that announces
    /// 1 GiB and sends 4 bytes costs a chunk, not a gigabyte. A frame
    /// above `max_bytes` is an error: its length.
    fn next_frame(&mut self, max_bytes: usize) -> Result<Option<Bytes>, usize> {
        let available = &self.buf[..self.end];
        let Some(&[a, b, c, d]) = available.get(..PREFIX) else {
            return Ok(None);
        };
        let len = u32::from_le_bytes([a, b, c, d]) as usize;
        if len > max_bytes {
            return Err(len);
        }
        let (have, total) = (available.len(), PREFIX + len);
        if have < total {
            self.make_room((total - have).min(have.max(READ_CHUNK)));
            return Ok(None);
        }
        Ok(Some(self.take_frame(total)))
    }

    /// Takes the first `total` bytes (a length prefix and its frame) off
    /// the front and returns the frame.
    fn take_frame(&mut self, total: usize) -> Bytes {
        self.end -= total;
        if total <= COPY_UP_TO {
            let frame = Bytes::copy_from_slice(&self.buf[PREFIX..total]);
            self.buf.advance(total);
            frame
        } else {
            self.buf.split_to(total).freeze().slice(PREFIX..)
        }
    }
}

/// Everything only the thread driving the poll touches.
struct Driver {
    poll: Poll,
    events: Events,
    incoming: Vec<Incoming>,
    listener: mio::net::TcpListener,
    /// Connections that came after start-up, to be turned away once they
    /// said who they are; registered under tokens from
    /// [`Tcp::handshake_base`] on.
    handshakes: Handshakes,
}

/// The TCP transport of one locality.
pub(crate) struct Tcp {
    here: LocalityId,
    peers: Vec<Option<Peer>>,
    driver: Mutex<Driver>,
    waker: Waker,
    wake_pending: AtomicBool,
    max_frame_bytes: usize,
    hello: Hello,
    /// Connections turned away at start-up.
    rejected_at_start: u64,
    /// Connections turned away, at start-up and after (published by the
    /// driver after each poll).
    rejected: AtomicU64,
}

impl std::fmt::Debug for Tcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tcp")
            .field("here", &self.here)
            .finish_non_exhaustive()
    }
}

/// Why locality `here` could not connect to the others at start-up.
#[derive(Debug, thiserror::Error)]
#[error("{here}: {cause}")]
pub(crate) struct ConnectError {
    here: LocalityId,
    cause: String,
}

fn startup_error(here: LocalityId, what: impl std::fmt::Display) -> ConnectError {
    ConnectError {
        here,
        cause: what.to_string(),
    }
}

impl Tcp {
    /// Connects locality `here` to every other locality of `table` (their
    /// data addresses), accepting on `listener`.
    pub(crate) fn connect(
        here: LocalityId,
        table: &[SocketAddr],
        listener: TcpListener,
        secret: &Secret,
        fingerprint: u64,
        max_frame_bytes: usize,
    ) -> Result<Tcp, ConnectError> {
        let count = u32::try_from(table.len()).expect("table sized by a u32 count");
        let hello = Hello::new(secret, count, here.get(), fingerprint);
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let mut streams: Vec<Option<TcpStream>> = (0..count).map(|_| None).collect();
        for rank in 0..here.get() {
            let stream = connect_to(
                &hello,
                LocalityId::new(rank),
                table[rank as usize],
                deadline,
            )
            .map_err(|e| startup_error(here, e))?;
            streams[rank as usize] = Some(stream);
        }
        let rejected_at_start = accept_from(&hello, &listener, &mut streams, deadline)
            .map_err(|e| startup_error(here, e))?;

        let poll = Poll::new().map_err(|e| startup_error(here, e))?;
        let waker = Waker::new(poll.registry(), WAKER).map_err(|e| startup_error(here, e))?;
        let mut peers = Vec::with_capacity(streams.len());
        for (rank, stream) in streams.into_iter().enumerate() {
            let Some(stream) = stream else {
                peers.push(None);
                continue;
            };
            let setup = stream
                .set_nonblocking(true)
                .and_then(|()| stream.set_nodelay(true));
            setup.map_err(|e| startup_error(here, e))?;
            let mut stream = mio::net::TcpStream::from_std(stream);
            poll.registry()
                .register(
                    &mut stream,
                    Token(rank),
                    Interest::READABLE | Interest::WRITABLE,
                )
                .map_err(|e| startup_error(here, e))?;
            peers.push(Some(Peer {
                stream,
                out: Mutex::new(Outgoing::default()),
                reported: AtomicBool::new(false),
            }));
        }
        listener
            .set_nonblocking(true)
            .map_err(|e| startup_error(here, e))?;
        let mut listener = mio::net::TcpListener::from_std(listener);
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)
            .map_err(|e| startup_error(here, e))?;
        Ok(Tcp {
            here,
            driver: Mutex::new(Driver {
                poll,
                events: Events::with_capacity(256),
                incoming: (0..count).map(|_| Incoming::default()).collect(),
                listener,
                handshakes: Handshakes::new(
                    here.to_string(),
                    MAX_PENDING,
                    HANDSHAKE_TIMEOUT,
                    hello_framing,
                ),
            }),
            peers,
            waker,
            wake_pending: AtomicBool::new(false),
            max_frame_bytes,
            hello,
            rejected_at_start,
            rejected: AtomicU64::new(rejected_at_start),
        })
    }

    /// The first token of a pending handshake: the tokens below are the
    /// peers' ranks.
    fn handshake_base(&self) -> usize {
        self.peers.len()
    }

    fn peer(&self, rank: LocalityId) -> &Peer {
        self.peers[rank.index()]
            .as_ref()
            .unwrap_or_else(|| unreachable!("{} has no connection to itself", self.here))
    }

    /// Writes what is queued for `peer` until the socket would block.
    /// Returns whether anything was written.
    fn flush_peer(&self, peer: &Peer) -> bool {
        let mut out = peer.out.lock();
        let before = out.written;
        write_queued(&peer.stream, &mut out);
        out.written != before
    }

    /// Reports `rank` lost (once) and closes its connection.
    fn lose(&self, rank: LocalityId, reason: String, sink: &dyn Sink) {
        let peer = self.peer(rank);
        peer.out.lock().broken.get_or_insert_with(|| reason.clone());
        let _ = peer.stream.shutdown(Shutdown::Both);
        if !peer.reported.swap(true, Ordering::AcqRel) {
            sink.peer_lost(rank, reason);
        }
    }

    /// Runs one poll with `timeout` under the driver lock. Returns whether
    /// anything was done, and the nanoseconds spent doing it (after the
    /// wait).
    fn drive(
        &self,
        driver: &mut Driver,
        sink: &dyn Sink,
        timeout: Option<Duration>,
    ) -> (bool, u64) {
        let Driver {
            poll,
            events,
            incoming,
            listener,
            handshakes,
        } = driver;
        // A pending handshake's deadline ends the wait too.
        let timeout = match (timeout, handshakes.next_deadline()) {
            (timeout, None) => timeout,
            (None, Some(at)) => Some(at.saturating_duration_since(Instant::now())),
            (Some(t), Some(at)) => Some(t.min(at.saturating_duration_since(Instant::now()))),
        };
        if let Err(e) = poll.poll(events, timeout) {
            if e.kind() != ErrorKind::Interrupted {
                tracing::warn!("{}: polling the network failed: {e}", self.here);
            }
            return (false, 0);
        }
        let start = clock().raw();
        let mut did = false;
        let base = self.handshake_base();
        for event in events.iter() {
            match event.token() {
                WAKER => self.wake_pending.store(false, Ordering::Release),
                LISTENER => self.accept_late(listener, handshakes, poll.registry()),
                Token(token) if token >= base => {
                    if let Some(greeted) = handshakes.read(token - base) {
                        self.turn_away(handshakes, greeted);
                    }
                }
                Token(rank) => {
                    let rank = LocalityId::new(rank as u32);
                    let peer = self.peer(rank);
                    if event.is_writable() {
                        did |= self.flush_peer(peer);
                    }
                    if event.is_readable() || event.is_read_closed() || event.is_error() {
                        did |= self.read_peer(rank, &mut incoming[rank.index()], sink);
                    }
                }
            }
        }
        if !handshakes.is_empty() {
            handshakes.expire(Instant::now());
        }
        let rejected = self.rejected_at_start + handshakes.rejected();
        if self.rejected.load(Ordering::Relaxed) != rejected {
            self.rejected.store(rejected, Ordering::Relaxed);
        }
        // A write may have failed in a sender, outside the driver.
        for (rank, peer) in self.peers.iter().enumerate() {
            if let Some(peer) = peer {
                if !peer.reported.load(Ordering::Acquire) {
                    let broken = peer.out.lock().broken.clone();
                    if let Some(reason) = broken {
                        self.lose(LocalityId::new(rank as u32), reason, sink);
                    }
                }
            }
        }
        (did, clock().delta_as_nanos(start, clock().raw()))
    }

    /// Reads everything `rank` sent and delivers the complete frames.
    fn read_peer(&self, rank: LocalityId, incoming: &mut Incoming, sink: &dyn Sink) -> bool {
        let peer = self.peer(rank);
        if peer.reported.load(Ordering::Acquire) {
            return false;
        }
        let mut did = false;
        loop {
            incoming.make_room(READ_MIN);
            let got = match (&peer.stream).read(&mut incoming.buf[incoming.end..]) {
                Ok(0) => {
                    self.lose(
                        rank,
                        "the connection was closed (the process ended?)".into(),
                        sink,
                    );
                    return did;
                }
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return did,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.lose(
                        rank,
                        format!("reading from the connection failed: {e}"),
                        sink,
                    );
                    return did;
                }
            };
            incoming.end += got;
            did = true;
            if let Err(error) = self.deliver_frames(rank, incoming, sink) {
                self.lose(rank, error.to_string(), sink);
                return did;
            }
        }
    }

    /// Cuts complete frames off the front of `incoming` and delivers them.
    fn deliver_frames(
        &self,
        rank: LocalityId,
        incoming: &mut Incoming,
        sink: &dyn Sink,
    ) -> Result<(), ProtocolError> {
        while let Some(frame) =
            incoming
                .next_frame(self.max_frame_bytes)
                .map_err(|len| ProtocolError::TooLarge {
                    from: rank,
                    error: FrameTooLarge {
                        len,
                        limit: self.max_frame_bytes,
                    },
                })?
        {
            sink.frame(rank, frame)?;
        }
        Ok(())
    }

    /// Accepts connections that come after start-up into the pending
    /// handshakes, each watched by the poll under a token of its own.
    fn accept_late(
        &self,
        listener: &mio::net::TcpListener,
        handshakes: &mut Handshakes,
        registry: &mio::Registry,
    ) {
        let base = self.handshake_base();
        loop {
            match listener.accept() {
                Ok((stream, from)) => {
                    // Whatever it sent before it was watched.
                    if let Some(slot) = handshakes.admit(stream, from, Some((registry, base))) {
                        if let Some(greeted) = handshakes.read(slot) {
                            self.turn_away(handshakes, greeted);
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // WouldBlock: all taken. Anything else (out of file
                // descriptors): the next readable event tries again.
                Err(_) => return,
            }
        }
    }

    /// Turns away a connection that said who it is after start-up, with
    /// the reason in the (rate-limited) log.
    fn turn_away(&self, handshakes: &mut Handshakes, greeted: Greeted) {
        let why = match Hello::read(&mut &greeted.greeting[..]) {
            Ok(Ok(theirs)) => match handshake::check(&self.hello, &theirs, |_| false) {
                Err(Refusal::Stranger(why)) => why,
                _ => "every locality is connected already".into(),
            },
            Ok(Err(why)) => why,
            Err(e) => format!("no hello: {e}"),
        };
        handshakes.reject(greeted.stream, greeted.from, &why);
    }
}

/// The framing of a hello: a fixed length.
fn hello_framing(_: &[u8]) -> Result<usize, String> {
    Ok(handshake::HELLO_LEN)
}

/// Writes `out`'s queued bytes until done or the socket would block.
fn write_queued(stream: &mio::net::TcpStream, out: &mut Outgoing) {
    while out.broken.is_none() && out.written < out.buf.len() {
        match (&*stream).write(&out.buf[out.written..]) {
            Ok(0) => out.broken = Some("the connection accepts no more data".into()),
            Ok(n) => out.written += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => out.broken = Some(format!("writing to the connection failed: {e}")),
        }
    }
    if out.written == out.buf.len() {
        out.buf.clear();
        out.written = 0;
        if out.buf.capacity() > 4 * READ_CHUNK {
            out.buf.shrink_to(READ_CHUNK);
        }
    }
}

impl Transport for Tcp {
    fn send(&self, dest: LocalityId, mut frame: Vec<u8>) -> Result<(), SendError> {
        let len = u32::try_from(frame.len() - PREFIX).map_err(|_| FrameTooLarge {
            len: frame.len() - PREFIX,
            limit: u32::MAX as usize,
        })?;
        frame[..PREFIX].copy_from_slice(&len.to_le_bytes());
        let Some(Some(peer)) = self.peers.get(dest.index()) else {
            // Out of range, or this locality itself (which sends to itself
            // without a transport).
            return Err(SendError::NoSuchPeer(dest));
        };
        let mut out = peer.out.lock();
        if let Some(reason) = &out.broken {
            return Err(SendError::PeerLost(reason.clone()));
        }
        if out.buf.is_empty() {
            out.buf = frame;
        } else {
            out.buf.extend_from_slice(&frame);
        }
        write_queued(&peer.stream, &mut out);
        if out.broken.is_some() {
            // Let the driver report the loss to the sink.
            drop(out);
            self.wake();
        }
        Ok(())
    }

    fn poll(&self, sink: &dyn Sink) -> bool {
        match self.driver.try_lock() {
            Some(mut driver) => self.drive(&mut driver, sink, Some(Duration::ZERO)).0,
            None => false,
        }
    }

    fn block(&self, sink: &dyn Sink, timeout: Duration) -> BlockOutcome {
        match self.driver.try_lock() {
            Some(mut driver) => {
                let (_, work_ns) = self.drive(&mut driver, sink, Some(timeout));
                BlockOutcome::Blocked { work_ns }
            }
            None => BlockOutcome::Busy,
        }
    }

    fn wake(&self) {
        if !self.wake_pending.swap(true, Ordering::AcqRel) {
            if let Err(e) = self.waker.wake() {
                tracing::warn!("{}: waking the network driver failed: {e}", self.here);
            }
        }
    }

    fn flush(&self, sink: &dyn Sink, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let queued = self.peers.iter().flatten().any(|p| {
                let out = p.out.lock();
                out.broken.is_none() && !out.buf.is_empty()
            });
            if !queued {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            let mut driver = self.driver.lock();
            self.drive(&mut driver, sink, Some(Duration::from_millis(10)));
        }
    }

    fn drop_peer(&self, peer: LocalityId, reason: &str) {
        let Some(Some(connection)) = self.peers.get(peer.index()) else {
            return;
        };
        // The driver reports nothing more: the caller reports the loss.
        connection.reported.store(true, Ordering::Release);
        connection
            .out
            .lock()
            .broken
            .get_or_insert_with(|| reason.to_owned());
        let _ = connection.stream.shutdown(Shutdown::Both);
    }

    fn rejected_connections(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    fn close(&self) {
        for peer in self.peers.iter().flatten() {
            peer.reported.store(true, Ordering::Release);
            let _ = peer.stream.shutdown(Shutdown::Both);
        }
    }
}

/// Connects to locality `rank` at `addr` and introduces ourselves. A
/// connection closed without an answer (the acceptor had too many pending
/// handshakes, or ours was too slow) is tried again until `deadline`; a
/// refusal with a reason is final.
fn connect_to(
    hello: &Hello,
    rank: LocalityId,
    addr: SocketAddr,
    deadline: Instant,
) -> Result<TcpStream, String> {
    loop {
        let mut stream = loop {
            match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
                Ok(stream) => break stream,
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("cannot connect to {rank} at {addr}: {e}"));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let timeout = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1));
        let ack = stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.write_all(&hello.encode()))
            .and_then(|()| handshake::read_ack(&mut stream));
        match ack {
            Ok(Ok(())) => return Ok(stream),
            Ok(Err(reason)) => return Err(format!("{rank} refused the connection: {reason}")),
            Err(e) if Instant::now() > deadline => {
                return Err(format!(
                    "{rank} at {addr} did not accept the connection: {e}"
                ));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Accepts the connections of every rank above ours; returns how many
/// other connections were turned away meanwhile. Polls the listener and
/// the pending handshakes (see the module docs) every millisecond.
fn accept_from(
    hello: &Hello,
    listener: &TcpListener,
    streams: &mut [Option<TcpStream>],
    deadline: Instant,
) -> Result<u64, String> {
    let here = hello.rank;
    let missing = |streams: &[Option<TcpStream>]| -> Vec<u32> {
        (here + 1..hello.count)
            .filter(|r| streams[*r as usize].is_none())
            .collect()
    };
    let expected = missing(streams).len();
    let mut handshakes = Handshakes::new(
        LocalityId::new(here).to_string(),
        MAX_PENDING + expected,
        HANDSHAKE_TIMEOUT,
        hello_framing,
    );
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    loop {
        let waiting = missing(streams);
        if waiting.is_empty() {
            handshakes.reject_all("every locality is connected already");
            return Ok(handshakes.rejected());
        }
        if Instant::now() > deadline {
            let names: Vec<String> = waiting
                .into_iter()
                .map(|r| LocalityId::new(r).to_string())
                .collect();
            return Err(format!(
                "{} did not connect within {STARTUP_TIMEOUT:?}",
                names.join(", ")
            ));
        }
        let mut idle = !handshakes
            .accept_all(listener)
            .map_err(|e| format!("accepting connections failed: {e}"))?;
        for greeted in handshakes.read_all() {
            idle = false;
            let Greeted {
                stream,
                from,
                greeting,
            } = greeted;
            let theirs = match Hello::read(&mut &greeting[..]) {
                Ok(Ok(theirs)) => theirs,
                Ok(Err(why)) => {
                    handshakes.reject(stream, from, &why);
                    continue;
                }
                Err(e) => {
                    handshakes.reject(stream, from, &format!("no hello: {e}"));
                    continue;
                }
            };
            match handshake::check(hello, &theirs, |r| {
                r > here && (r as usize) < streams.len() && streams[r as usize].is_none()
            }) {
                Ok(rank) => {
                    let mut stream = TcpStream::from(stream);
                    stream
                        .set_nonblocking(false)
                        .and_then(|()| stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT)))
                        .and_then(|()| handshake::write_ack(&mut stream, None))
                        .and_then(|()| stream.set_write_timeout(None))
                        .map_err(|e| format!("answering {rank}: {e}"))?;
                    streams[rank.index()] = Some(stream);
                }
                Err(Refusal::Stranger(why)) => handshakes.reject(stream, from, &why),
                Err(Refusal::Explained(why)) => {
                    let mut stream = TcpStream::from(stream);
                    let _ = stream
                        .set_nonblocking(false)
                        .and_then(|()| stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT)))
                        .and_then(|()| handshake::write_ack(&mut stream, Some(&why)));
                    return Err(why);
                }
            }
        }
        handshakes.expire(Instant::now());
        if idle {
            std::thread::sleep(STARTUP_POLL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Connects a mesh of `n` localities in threads, as start-up does.
    fn mesh(n: u32, fingerprints: impl Fn(u32) -> u64) -> Vec<Result<Tcp, ConnectError>> {
        let listeners: Vec<TcpListener> = (0..n)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        mesh_on(listeners, fingerprints, 1 << 20)
    }

    /// Connects a mesh of localities on `listeners` in threads, with a
    /// frame limit of `max_frame_bytes`.
    fn mesh_on(
        listeners: Vec<TcpListener>,
        fingerprints: impl Fn(u32) -> u64,
        max_frame_bytes: usize,
    ) -> Vec<Result<Tcp, ConnectError>> {
        let secret = Secret::random().unwrap();
        let table: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        let threads: Vec<_> = listeners
            .into_iter()
            .enumerate()
            .map(|(rank, listener)| {
                let table = table.clone();
                let fingerprint = fingerprints(rank as u32);
                std::thread::spawn(move || {
                    Tcp::connect(
                        LocalityId::new(rank as u32),
                        &table,
                        listener,
                        &secret,
                        fingerprint,
                        max_frame_bytes,
                    )
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    }

    /// Frames of `sizes` as they travel: each behind its length prefix,
    /// filled with a pattern of its index.
    fn stream_of(sizes: &[usize]) -> (Vec<u8>, Vec<Vec<u8>>) {
        let frames: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 31 + j) as u8).collect())
            .collect();
        let mut stream = Vec::new();
        for f in &frames {
            stream.extend_from_slice(&(f.len() as u32).to_le_bytes());
            stream.extend_from_slice(f);
        }
        (stream, frames)
    }

    proptest::proptest! {
        /// However the bytes are cut into reads, every frame comes out whole,
        /// once, in order; small frames are copies that keep no read buffer
        /// alive (a split-off 4 KiB frame would pin a 64 KiB chunk).
        #[test]
        fn frames_arrive_whole_in_order_from_any_reads(
            sizes in proptest::collection::vec(
                proptest::prop_oneof![0usize..64, 1000usize..5000, COPY_UP_TO - 8..COPY_UP_TO + 8, 100_000usize..300_000],
                1..40,
            ),
            reads in proptest::collection::vec(1usize..100_000, 1..64),
        ) {
            let (stream, frames) = stream_of(&sizes);
            let mut incoming = Incoming::default();
            let mut got = Vec::new();
            let (mut at, mut turn) = (0, 0);
            while at < stream.len() {
                incoming.make_room(READ_MIN);
                let room = &mut incoming.buf[incoming.end..];
                let n = reads[turn % reads.len()].min(room.len()).min(stream.len() - at);
                turn += 1;
                room[..n].copy_from_slice(&stream[at..at + n]);
                incoming.end += n;
                at += n;
                while let Some(frame) = incoming.next_frame(1 << 20).unwrap() {
                    got.push(frame);
                }
            }
            proptest::prop_assert_eq!(incoming.end, 0);
            proptest::prop_assert_eq!(got.len(), frames.len());
            for (g, f) in got.iter_mut().zip(&frames) {
                proptest::prop_assert_eq!(&g[..], &f[..]);
                if !f.is_empty() && PREFIX + f.len() <= COPY_UP_TO {
                    proptest::prop_assert!(g.is_unique(), "a small frame shares its read buffer");
                }
            }
        }
    }

    #[test]
    fn a_frame_above_the_limit_is_refused_with_its_length() {
        let (stream, _) = stream_of(&[10, 2000]);
        let mut incoming = Incoming::default();
        incoming.make_room(READ_MIN);
        incoming.buf[..stream.len()].copy_from_slice(&stream);
        incoming.end = stream.len();
        assert_eq!(
            incoming.next_frame(1000).unwrap().as_deref(),
            Some(&[0u8, 1, 2, 3, 4, 5, 6, 7, 8, 9][..])
        );
        assert_eq!(incoming.next_frame(1000), Err(2000));
    }

    #[test]
    fn localities_built_from_different_binaries_refuse_to_talk() {
        let results = mesh(2, |rank| 100 + u64::from(rank));
        let errors: Vec<String> = results
            .into_iter()
            .filter_map(Result::err)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.iter().any(|e| e.contains("different binary")),
            "no clear error: {errors:?}"
        );
    }

    #[test]
    fn a_stranger_with_the_wrong_secret_is_turned_away_at_start_up() {
        let secret = Secret::random().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let table = vec![addr, "127.0.0.1:9".parse().unwrap()];
        let stranger = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            let wrong = Hello::new(&Secret::random().unwrap(), 2, 1, 5);
            s.write_all(&wrong.encode()).unwrap();
            let mut byte = [0u8; 1];
            // Closed without an answer.
            assert_eq!(s.read(&mut byte).unwrap_or(0), 0);
            // The real locality#1 connects next.
            let real = Hello::new(&secret, 2, 1, 5);
            connect_to(
                &real,
                LocalityId::new(0),
                addr,
                Instant::now() + Duration::from_secs(10),
            )
        });
        let tcp = Tcp::connect(LocalityId::new(0), &table, listener, &secret, 5, 1 << 20);
        assert!(tcp.is_ok(), "{:?}", tcp.err());
        assert!(stranger.join().unwrap().is_ok());
    }

    /// A 1 GiB length prefix followed by a few bytes.
    fn huge_prefix() -> Vec<u8> {
        let mut bytes = (1u32 << 30).to_le_bytes().to_vec();
        bytes.extend_from_slice(&[7; 16]);
        bytes
    }

    #[test]
    fn a_length_prefix_alone_does_not_grow_the_read_buffer() {
        let mut incoming = Incoming::default();
        incoming.make_room(READ_MIN);
        let start = huge_prefix();
        incoming.buf[..start.len()].copy_from_slice(&start);
        incoming.end = start.len();
        assert_eq!(incoming.next_frame(u32::MAX as usize), Ok(None));
        let capacity = incoming.buf.capacity();
        assert!(
            capacity <= 4 * READ_CHUNK,
            "a 1 GiB prefix and 16 bytes took a buffer of {capacity} bytes"
        );
        // It grows with what arrives: 1 MiB of the frame, 16 KiB at a time.
        while incoming.end < 1 << 20 {
            incoming.make_room(READ_MIN);
            let room = &mut incoming.buf[incoming.end..];
            let n = room.len().min(16 << 10);
            room[..n].fill(1);
            incoming.end += n;
            assert_eq!(incoming.next_frame(u32::MAX as usize), Ok(None));
            let capacity = incoming.buf.capacity();
            assert!(
                capacity <= 4 * incoming.end.max(READ_CHUNK),
                "{} bytes arrived, the buffer holds {capacity}",
                incoming.end
            );
        }
    }

    /// What a transport under test delivered and reported.
    #[derive(Default)]
    struct Recorder {
        frames: Mutex<Vec<Bytes>>,
        lost: Mutex<Vec<(LocalityId, String)>>,
    }

    impl Sink for Recorder {
        fn frame(&self, _source: LocalityId, frame: Bytes) -> Result<(), ProtocolError> {
            self.frames.lock().push(frame);
            Ok(())
        }

        fn peer_lost(&self, peer: LocalityId, reason: String) {
            self.lost.lock().push((peer, reason));
        }
    }

    /// Locality 1 of a connected pair writes `bytes` raw to locality 0,
    /// which then reads for `time`.
    fn raw_to_zero(max_frame_bytes: usize, bytes: &[u8], time: Duration) -> (Tcp, Recorder) {
        let listeners = (0..2)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let mut pair = mesh_on(listeners, |_| 5, max_frame_bytes).into_iter();
        let (zero, one) = (pair.next().unwrap().unwrap(), pair.next().unwrap().unwrap());
        let stream = &one.peer(LocalityId::new(0)).stream;
        (&*stream).write_all(bytes).unwrap();
        let sink = Recorder::default();
        let end = Instant::now() + time;
        while Instant::now() < end {
            let _ = zero.block(&sink, Duration::from_millis(10));
        }
        drop(one);
        (zero, sink)
    }

    #[test]
    fn a_peer_announcing_a_huge_frame_costs_only_what_it_sent() {
        let (zero, sink) = raw_to_zero(
            u32::MAX as usize,
            &huge_prefix(),
            Duration::from_millis(200),
        );
        assert!(sink.lost.lock().is_empty() && sink.frames.lock().is_empty());
        let capacity = zero.driver.lock().incoming[1].buf.capacity();
        assert!(
            capacity <= 4 * READ_CHUNK,
            "a 1 GiB prefix and 16 bytes took a buffer of {capacity} bytes"
        );
    }

    #[test]
    fn a_frame_above_the_limit_drops_its_sender_with_the_reason() {
        let (_zero, sink) = raw_to_zero(1 << 20, &huge_prefix(), Duration::from_millis(200));
        let lost = sink.lost.lock();
        let [(peer, reason)] = &lost[..] else {
            panic!("not one loss: {lost:?}");
        };
        assert_eq!(*peer, LocalityId::new(1));
        assert!(
            reason.contains("1073741824 bytes") && reason.contains("max_frame_bytes"),
            "{reason}"
        );
    }

    /// This process's thread count (Linux).
    fn threads() -> usize {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap()
    }

    #[test]
    fn silent_and_dripping_clients_after_start_up_take_no_thread_and_are_counted() {
        const CLIENTS: usize = 200;
        let listeners: Vec<TcpListener> = (0..2)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let addr = listeners[0].local_addr().unwrap();
        let mut pair = mesh_on(listeners, |_| 5, 1 << 20).into_iter();
        let (zero, _one) = (pair.next().unwrap().unwrap(), pair.next().unwrap().unwrap());
        let sink = Recorder::default();
        zero.poll(&sink);
        let before = threads();
        // One thread opens every client and drips a byte a client every
        // 100 ms: 30 bytes in 3 s, never a whole hello.
        let drip = std::thread::spawn(move || {
            let mut clients: Vec<TcpStream> = (0..CLIENTS)
                .map(|_| TcpStream::connect(addr).unwrap())
                .collect();
            for _ in 0..30 {
                for c in &mut clients {
                    let _ = c.write(b"C");
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let mut peak = before;
        let end = Instant::now() + Duration::from_secs(4);
        while Instant::now() < end && zero.rejected_connections() < CLIENTS as u64 {
            let _ = zero.block(&sink, Duration::from_millis(10));
            peak = peak.max(threads());
        }
        drip.join().unwrap();
        assert!(
            peak < before + 20,
            "{CLIENTS} clients grew the threads from {before} to {peak}"
        );
        assert_eq!(zero.rejected_connections(), CLIENTS as u64);
        assert!(sink.lost.lock().is_empty(), "{:?}", sink.lost.lock());
    }

    #[test]
    fn silent_connections_neither_delay_nor_abort_start_up() {
        let listeners: Vec<TcpListener> = (0..2)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let addr = listeners[0].local_addr().unwrap();
        // Connected (and in the backlog) before locality#1.
        let silent: Vec<TcpStream> = (0..7).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let start = Instant::now();
        let mut pair = mesh_on(listeners, |_| 5, 1 << 20).into_iter();
        let (zero, one) = (pair.next().unwrap(), pair.next().unwrap());
        let took = start.elapsed();
        let zero = zero.unwrap();
        assert!(one.is_ok(), "{:?}", one.err());
        assert!(took < HANDSHAKE_TIMEOUT, "start-up took {took:?}");
        assert_eq!(zero.rejected_connections(), 7);
        drop(silent);
    }
}
