//! Pending handshakes: connections accepted but not yet introduced.
//!
//! A listener (a locality's data port, or the rendezvous) accepts every
//! connection at once and keeps it here, non-blocking, until its greeting
//! (a [`Hello`](super::handshake::Hello), or a rendezvous message) has
//! arrived whole. The bytes are read as they come, so many connections are
//! introduced concurrently on one thread, none of them waits behind
//! another, and no connection gets a thread of its own.
//!
//! Two bounds keep a stranger from holding the listener:
//!
//! - a *deadline* per connection ([`HANDSHAKE_TIMEOUT`] from its accept):
//!   one that has not greeted by then is closed;
//! - a *cap* on pending connections: one accepted when the set is full is
//!   closed at once. Start-up raises the cap by the number of localities
//!   expected, so that they fit even if they all arrive together.
//!
//! Every connection turned away (over the cap, past its deadline, a bad
//! greeting, or refused by the caller with [`Handshakes::reject`]) is
//! counted, and logged at most once per [`LOG_INTERVAL`]; the next line
//! says how many were not logged. The owner either reads every pending
//! connection in turn ([`Handshakes::read_all`], at start-up, polling), or
//! registers each with a [`mio::Registry`] under a token of its own and
//! reads the one whose token fired ([`Handshakes::read`], the transport's
//! event loop after start-up).

use std::io::{ErrorKind, Read};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

/// How long an accepted connection may take to send its whole greeting.
/// A real locality sends it right after connecting, in one write of a few
/// dozen bytes; two seconds leave room for a loaded host.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);

/// The most connections waiting to greet at once, beyond the localities
/// expected at start-up. Each costs a socket and a few dozen bytes; a
/// guess, tune me.
pub(crate) const MAX_PENDING: usize = 64;

/// The least time between two log lines about turned-away connections.
pub(crate) const LOG_INTERVAL: Duration = Duration::from_secs(1);

/// How many bytes a greeting needs, judged from its first `bytes`: the
/// whole length so far known (at least `bytes.len()` once complete), or
/// why the bytes are no greeting.
pub(crate) type Framing = fn(&[u8]) -> Result<usize, String>;

/// A connection that has sent its whole greeting.
#[derive(Debug)]
pub(crate) struct Greeted {
    /// The connection, still non-blocking.
    pub(crate) stream: TcpStream,
    /// Who connected.
    pub(crate) from: SocketAddr,
    /// The greeting's bytes, exactly as long as the framing said.
    pub(crate) greeting: Vec<u8>,
}

/// One connection waiting to greet.
#[derive(Debug)]
struct Pending {
    stream: TcpStream,
    from: SocketAddr,
    deadline: Instant,
    /// What it sent so far.
    bytes: Vec<u8>,
}

/// What reading a pending connection came to.
enum Progress {
    /// Its greeting is not whole yet.
    Waiting,
    /// Its greeting is whole.
    Done,
    /// It closed, failed, or sent no greeting: why.
    Failed(String),
}

/// Log lines about turned-away connections, at most one per
/// [`LOG_INTERVAL`].
#[derive(Debug)]
struct RejectLog {
    /// Who is turning them away, to begin each line (`locality#0`, `rendezvous`).
    who: String,
    /// When the last line was written.
    last: Option<Instant>,
    /// Rejections since then that were not logged.
    suppressed: u64,
}

impl RejectLog {
    /// Logs that the connection from `from` was turned away for `why`,
    /// unless a line was written less than [`LOG_INTERVAL`] ago.
    fn note(&mut self, now: Instant, from: SocketAddr, why: &str) {
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < LOG_INTERVAL)
        {
            self.suppressed += 1;
            return;
        }
        let who = &self.who;
        match std::mem::take(&mut self.suppressed) {
            0 => tracing::warn!("{who}: rejected a connection from {from}: {why}"),
            n => tracing::warn!(
                "{who}: rejected a connection from {from}: {why} \
                 ({n} more rejected since the last such line, not logged)"
            ),
        }
        self.last = Some(now);
    }

    /// Logs how many rejections were not logged, if any: when the
    /// listener stops turning connections away.
    fn flush(&mut self) {
        let n = std::mem::take(&mut self.suppressed);
        if n > 0 {
            let who = &self.who;
            tracing::warn!("{who}: rejected {n} more connections, not logged");
        }
    }
}

/// The connections of one listener that have not greeted yet (see the
/// module docs).
#[derive(Debug)]
pub(crate) struct Handshakes {
    /// Indexed by slot; a registered connection's token is `base + slot`.
    slots: Vec<Option<Pending>>,
    /// Slots in use.
    live: usize,
    framing: Framing,
    timeout: Duration,
    /// Connections turned away, ever.
    rejected: u64,
    log: RejectLog,
}

impl Handshakes {
    /// An empty set of at most `cap` connections, each with `timeout` to
    /// send a greeting framed by `framing`; `who` begins the log lines.
    pub(crate) fn new(who: String, cap: usize, timeout: Duration, framing: Framing) -> Self {
        Handshakes {
            slots: (0..cap).map(|_| None).collect(),
            live: 0,
            framing,
            timeout,
            rejected: 0,
            log: RejectLog {
                who,
                last: None,
                suppressed: 0,
            },
        }
    }

    /// How many connections were turned away so far.
    pub(crate) fn rejected(&self) -> u64 {
        self.rejected
    }

    /// Whether no connection is pending.
    pub(crate) fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The earliest deadline of a pending connection.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        if self.live == 0 {
            return None;
        }
        self.slots.iter().flatten().map(|p| p.deadline).min()
    }

    /// Counts and logs a connection turned away, and closes it (by
    /// dropping `stream`).
    pub(crate) fn reject(&mut self, stream: TcpStream, from: SocketAddr, why: &str) {
        drop(stream);
        self.rejected += 1;
        self.log.note(Instant::now(), from, why);
    }

    /// Takes in a connection just accepted, non-blocking, with
    /// [`HANDSHAKE_TIMEOUT`] (or the set's timeout) from now to greet;
    /// registers it with `registry` under token `base + slot` if given.
    /// Returns its slot, or `None` if it was turned away (the set was
    /// full, or the registry refused it). Nothing is read yet: what it
    /// already sent waits for [`read`](Self::read) or
    /// [`read_all`](Self::read_all).
    pub(crate) fn admit(
        &mut self,
        mut stream: TcpStream,
        from: SocketAddr,
        registry: Option<(&Registry, usize)>,
    ) -> Option<usize> {
        let Some(slot) = self.slots.iter().position(Option::is_none) else {
            self.reject(
                stream,
                from,
                &format!(
                    "{} connections are waiting to greet already",
                    self.slots.len()
                ),
            );
            return None;
        };
        if let Some((registry, base)) = registry {
            if let Err(e) = registry.register(&mut stream, Token(base + slot), Interest::READABLE) {
                self.reject(stream, from, &format!("cannot watch the connection: {e}"));
                return None;
            }
        }
        self.slots[slot] = Some(Pending {
            stream,
            from,
            deadline: Instant::now() + self.timeout,
            bytes: Vec::new(),
        });
        self.live += 1;
        Some(slot)
    }

    /// Admits every connection waiting on `listener` (a std listener in
    /// non-blocking mode, as at start-up), each made non-blocking first;
    /// one that cannot be is turned away. Returns whether any came; an
    /// error other than "none left" is the listener's own.
    pub(crate) fn accept_all(&mut self, listener: &std::net::TcpListener) -> std::io::Result<bool> {
        let mut any = false;
        loop {
            match listener.accept() {
                Ok((stream, from)) => {
                    any = true;
                    let nonblocking = stream.set_nonblocking(true);
                    let stream = TcpStream::from_std(stream);
                    match nonblocking {
                        Ok(()) => {
                            self.admit(stream, from, None);
                        }
                        Err(e) => {
                            self.reject(stream, from, &format!("cannot make it non-blocking: {e}"));
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(any),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads what the connection in `slot` sent; returns it once its
    /// greeting is whole. A connection that closed, failed or sent no
    /// greeting is turned away. An empty or unknown slot gives `None`.
    pub(crate) fn read(&mut self, slot: usize) -> Option<Greeted> {
        let framing = self.framing;
        let pending = self.slots.get_mut(slot)?.as_mut()?;
        match read_greeting(pending, framing) {
            Progress::Waiting => None,
            Progress::Done => {
                let pending = self.take(slot)?;
                Some(Greeted {
                    stream: pending.stream,
                    from: pending.from,
                    greeting: pending.bytes,
                })
            }
            Progress::Failed(why) => {
                let pending = self.take(slot)?;
                self.reject(pending.stream, pending.from, &why);
                None
            }
        }
    }

    /// Reads every pending connection ([`read`](Self::read)); returns those
    /// whose greeting is whole.
    pub(crate) fn read_all(&mut self) -> Vec<Greeted> {
        if self.live == 0 {
            return Vec::new();
        }
        (0..self.slots.len())
            .filter_map(|slot| self.read(slot))
            .collect()
    }

    /// Turns away every connection whose deadline is past `now`.
    pub(crate) fn expire(&mut self, now: Instant) {
        if self.live == 0 {
            return;
        }
        for slot in 0..self.slots.len() {
            if self.slots[slot].as_ref().is_some_and(|p| p.deadline <= now) {
                if let Some(pending) = self.take(slot) {
                    let why = format!(
                        "no greeting within {:?} ({} bytes of it came)",
                        self.timeout,
                        pending.bytes.len()
                    );
                    self.reject(pending.stream, pending.from, &why);
                }
            }
        }
    }

    /// Turns away every pending connection, saying `why`, and logs how
    /// many rejections were not logged: the listener's last word.
    pub(crate) fn reject_all(&mut self, why: &str) {
        for slot in 0..self.slots.len() {
            if let Some(pending) = self.take(slot) {
                self.reject(pending.stream, pending.from, why);
            }
        }
        self.log.flush();
    }

    /// Empties `slot`, returning what it held.
    fn take(&mut self, slot: usize) -> Option<Pending> {
        let pending = self.slots.get_mut(slot)?.take()?;
        self.live -= 1;
        Some(pending)
    }
}

/// Reads from `pending` until its greeting is whole or the socket would
/// block. Reads no byte past the greeting: what follows belongs to the
/// connection's next user.
fn read_greeting(pending: &mut Pending, framing: Framing) -> Progress {
    loop {
        let want = match framing(&pending.bytes) {
            Ok(want) => want,
            Err(why) => return Progress::Failed(why),
        };
        let have = pending.bytes.len();
        if have >= want {
            return Progress::Done;
        }
        pending.bytes.resize(want, 0);
        match (&pending.stream).read(&mut pending.bytes[have..]) {
            Ok(0) => {
                pending.bytes.truncate(have);
                return Progress::Failed(format!(
                    "closed after {have} bytes, before its greeting was whole"
                ));
            }
            Ok(n) => pending.bytes.truncate(have + n),
            Err(e) => {
                pending.bytes.truncate(have);
                match e.kind() {
                    ErrorKind::WouldBlock => return Progress::Waiting,
                    ErrorKind::Interrupted => {}
                    _ => return Progress::Failed(format!("reading its greeting failed: {e}")),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A greeting of exactly 8 bytes.
    fn eight(_: &[u8]) -> Result<usize, String> {
        Ok(8)
    }

    /// A connected pair: a client, and the accepted end, non-blocking.
    fn pair(listener: &std::net::TcpListener) -> (std::net::TcpStream, TcpStream, SocketAddr) {
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, from) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        (client, TcpStream::from_std(server), from)
    }

    #[test]
    fn greetings_arrive_in_pieces_and_the_rest_stays_unread() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut set = Handshakes::new("test".into(), 4, HANDSHAKE_TIMEOUT, eight);
        let (mut slow, server, from) = pair(&listener);
        let slot = set.admit(server, from, None).unwrap();
        slow.write_all(b"abc").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert!(set.read(slot).is_none());
        slow.write_all(b"defghXYZ").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let greeted = set.read(slot).expect("whole now");
        assert_eq!(greeted.greeting, b"abcdefgh");
        let mut rest = [0u8; 3];
        let mut stream = std::net::TcpStream::from(greeted.stream);
        stream.set_nonblocking(false).unwrap();
        stream.read_exact(&mut rest).unwrap();
        assert_eq!(&rest, b"XYZ");
        assert_eq!(set.rejected(), 0);
    }

    #[test]
    fn the_cap_and_the_deadline_turn_connections_away() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let timeout = Duration::from_millis(100);
        let mut set = Handshakes::new("test".into(), 2, timeout, eight);
        let mut clients = Vec::new();
        for _ in 0..3 {
            let (client, server, from) = pair(&listener);
            clients.push(client);
            set.admit(server, from, None);
        }
        assert_eq!(set.rejected(), 1, "the third is over the cap");
        assert!(set.next_deadline().is_some());
        set.expire(Instant::now() + timeout);
        assert_eq!(set.rejected(), 3, "the silent ones expired");
        assert!(set.next_deadline().is_none());
        for mut client in clients {
            let mut byte = [0u8; 1];
            assert_eq!(client.read(&mut byte).unwrap_or(0), 0, "left open");
        }
    }

    #[test]
    fn a_bad_greeting_or_an_early_close_is_turned_away() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut set = Handshakes::new("test".into(), 4, HANDSHAKE_TIMEOUT, |b: &[u8]| {
            match b.first() {
                Some(b'!') => Err("bang".into()),
                _ => Ok(8),
            }
        });
        let (mut bad, server, from) = pair(&listener);
        let bad_slot = set.admit(server, from, None).unwrap();
        let (gone, server, from) = pair(&listener);
        let gone_slot = set.admit(server, from, None).unwrap();
        bad.write_all(b"!").unwrap();
        drop(gone);
        std::thread::sleep(Duration::from_millis(20));
        assert!(set.read(bad_slot).is_none());
        assert!(set.read(gone_slot).is_none());
        assert_eq!(set.rejected(), 2);
        assert!(set.read_all().is_empty());
    }
}
