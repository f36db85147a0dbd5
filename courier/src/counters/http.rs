//! The HTTP server behind [`Runtime::serve_metrics`]: one thread running a
//! `mio` event loop that serves every client at once.
//!
//! A scrape is one request per connection (`Connection: close`). What a
//! client can cost the job is bounded:
//!
//! - Clients are served concurrently: a client that sends its request a
//!   byte at a time holds one slot of the event loop, not the loop.
//! - A request's head (request line and headers) may take at most
//!   [`MAX_REQUEST_BYTES`]; beyond it the client gets `400` (no complete
//!   request line) or `431` (headers too long) and the connection is
//!   closed, so memory never grows with what a client sends.
//! - Each connection has [`REQUEST_DEADLINE`] to send its request and
//!   [`RESPONSE_DEADLINE`] to read the response; at most
//!   [`MAX_CONNECTIONS`] are open at once (a new one closes the oldest).
//! - Dropping the [`MetricsServer`] wakes the loop, which closes every
//!   connection and returns: the job's exit never waits for a client. The
//!   loop blocks only in `poll` and while it waits for the counters of a
//!   complete request, and the drop ends both waits.
//!
//! The endpoint has no authentication: anyone who can reach the address
//! reads every counter. Binding a non-loopback address is reported with a
//! warning.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll as TaskPoll;
use std::thread;
use std::time::{Duration, Instant};

use futures::future::{self, Either};
use futures::task::AtomicWaker;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use super::prometheus::{PER_ACTION, SCRAPED, exposition};
use super::set::CounterSet;
use crate::runtime::{Runtime, report};
use crate::sched::spawn_unbound;

/// The most bytes of a request's head (request line and headers) the
/// server reads: a scrape's head is a few hundred bytes. A guess with
/// room to spare, tune me.
pub(crate) const MAX_REQUEST_BYTES: usize = 8 * 1024;

/// How long a client has from connecting to the end of its request's
/// head: a local scraper needs milliseconds. A guess, tune me.
pub(crate) const REQUEST_DEADLINE: Duration = Duration::from_secs(2);

/// How long a client has to read the whole response once it is ready.
/// A guess, tune me.
pub(crate) const RESPONSE_DEADLINE: Duration = Duration::from_secs(5);

/// The most connections open at once; a connection beyond it closes the
/// oldest. A guess, tune me.
pub(crate) const MAX_CONNECTIONS: usize = 64;

/// Bytes read from a client at a time: a scrape's head fits. A guess.
const READ_CHUNK: usize = 1024;

/// The listener's token.
const LISTENER: Token = Token(0);
/// The token of the waker that [`MetricsServer`]'s drop uses.
const STOP: Token = Token(1);
/// The first token of a connection.
const FIRST_CONNECTION: usize = 2;

/// An HTTP server of `/metrics`, started by [`Runtime::serve_metrics`].
/// Stops when dropped, promptly, whatever its clients are doing.
///
/// It serves clients concurrently and bounds each request's size and
/// time; it has no authentication, so bind it to a loopback address
/// unless the network is trusted.
#[derive(Debug)]
pub struct MetricsServer {
    /// Where it listens.
    addr: SocketAddr,
    /// Set by drop: the event loop returns when it sees it.
    stop: Arc<Stop>,
    /// Wakes the event loop out of `poll`.
    waker: Arc<Waker>,
    /// The event loop's thread.
    thread: Option<thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// The address it listens on (useful when started on port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server behind [`Runtime::serve_metrics`].
    pub(crate) fn start(rt: &Runtime, addr: SocketAddr) -> std::io::Result<MetricsServer> {
        let mut listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        if !addr.ip().is_loopback() {
            report!(
                warn,
                rt.here(),
                "the counters are served without authentication at http://{addr}/metrics, \
                 which is not a loopback address: anyone who can reach it can read them"
            );
        }
        let mut names: Vec<String> = SCRAPED.iter().map(|s| (*s).to_owned()).collect();
        for entry in crate::action::registry().entries() {
            names.extend(
                PER_ACTION
                    .iter()
                    .map(|pattern| format!("{pattern}@{}", entry.name())),
            );
        }
        let set = rt
            .counters(names)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), STOP)?);
        let stop = Arc::new(Stop::default());
        let server = Server {
            poll,
            listener,
            set,
            stop: Arc::clone(&stop),
            connections: HashMap::new(),
            next_token: FIRST_CONNECTION,
        };
        let thread = spawn_unbound(
            thread::Builder::new().name("courier-metrics".into()),
            move || server.run(),
        )?;
        Ok(MetricsServer {
            addr,
            stop,
            waker,
            thread: Some(thread),
        })
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        // The loop blocks only in `poll` (which `wake` ends) and while it
        // waits for a scrape's counters (which `stop` ends), never in a
        // client's read or write.
        self.stop.stop();
        let woken = self.waker.wake().is_ok();
        if let Some(thread) = self.thread.take() {
            if woken {
                let _ = thread.join();
            }
        }
    }
}

/// The server's stop signal: set once, by [`MetricsServer`]'s drop.
#[derive(Debug, Default)]
struct Stop {
    /// Whether the server was dropped.
    set: AtomicBool,
    /// The scrape waiting in [`Stop::wait`], if one is.
    waker: AtomicWaker,
}

impl Stop {
    /// Sets the signal and wakes a waiting scrape.
    fn stop(&self) {
        self.set.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Whether the signal is set.
    fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// Resolves once the signal is set.
    fn wait(&self) -> impl Future<Output = ()> + '_ {
        future::poll_fn(move |cx| {
            self.waker.register(cx.waker());
            match self.is_set() {
                true => TaskPoll::Ready(()),
                false => TaskPoll::Pending,
            }
        })
    }
}

/// The event loop's state.
struct Server {
    /// Readiness of the listener, the connections and the waker.
    poll: Poll,
    /// Accepts clients.
    listener: TcpListener,
    /// The counters a scrape evaluates.
    set: CounterSet,
    /// Set when the [`MetricsServer`] is dropped.
    stop: Arc<Stop>,
    /// The open connections, by token.
    connections: HashMap<Token, Connection>,
    /// The token the next connection gets.
    next_token: usize,
}

/// One client's connection.
struct Connection {
    /// The socket.
    stream: TcpStream,
    /// When it was accepted.
    opened: Instant,
    /// When it is closed whatever its state.
    deadline: Instant,
    /// What it waits for.
    state: State,
}

/// Where a connection is in its one request.
enum State {
    /// Reading the request's head: the bytes so far.
    Reading(Vec<u8>),
    /// Writing the response: the whole response and how much is written.
    Writing(Vec<u8>, usize),
}

/// What to do with a connection after it made progress.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// Keep it; it waits for readiness.
    Keep,
    /// Close it.
    Close,
}

impl Server {
    /// Serves until the [`MetricsServer`] is dropped.
    fn run(mut self) {
        let mut events = Events::with_capacity(64);
        loop {
            if self.stop.is_set() {
                return;
            }
            let timeout = self
                .connections
                .values()
                .map(|c| c.deadline)
                .min()
                .map(|d| d.saturating_duration_since(Instant::now()));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                tracing::warn!("metrics server: poll failed, stopping: {e}");
                return;
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(),
                    STOP => {}
                    token => self.progress(token),
                }
            }
            if self.stop.is_set() {
                return;
            }
            self.expire();
        }
    }

    /// Accepts every waiting client.
    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    if self.connections.len() >= MAX_CONNECTIONS {
                        self.evict_oldest();
                    }
                    let token = Token(self.next_token);
                    self.next_token = self.next_token.wrapping_add(1).max(FIRST_CONNECTION);
                    if self
                        .poll
                        .registry()
                        .register(&mut stream, token, Interest::READABLE)
                        .is_err()
                    {
                        continue;
                    }
                    self.connections.insert(
                        token,
                        Connection {
                            stream,
                            opened: Instant::now(),
                            deadline: Instant::now() + REQUEST_DEADLINE,
                            state: State::Reading(Vec::new()),
                        },
                    );
                    // Data may have arrived with the connection.
                    self.progress(token);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // A client that reset before it was accepted, or no file
                // descriptors left: try again on the next readiness.
                Err(_) => return,
            }
        }
    }

    /// Reads or writes what connection `token` is ready for.
    fn progress(&mut self, token: Token) {
        let Some(mut connection) = self.connections.remove(&token) else {
            return;
        };
        let next = match connection.state {
            State::Reading(_) => self.read(&mut connection),
            State::Writing(..) => Next::Keep,
        };
        let next = match (next, &connection.state) {
            (Next::Keep, State::Writing(..)) => write(&mut connection),
            (next, _) => next,
        };
        if next == Next::Keep {
            let interest = match connection.state {
                State::Reading(_) => Interest::READABLE,
                State::Writing(..) => Interest::WRITABLE,
            };
            if self
                .poll
                .registry()
                .reregister(&mut connection.stream, token, interest)
                .is_ok()
            {
                self.connections.insert(token, connection);
            }
        }
    }

    /// Reads what the client sent; once the request's head is complete (or
    /// too long), makes the response.
    fn read(&mut self, connection: &mut Connection) -> Next {
        let State::Reading(buffer) = &mut connection.state else {
            return Next::Keep;
        };
        let mut chunk = [0u8; READ_CHUNK];
        let head = loop {
            let room = MAX_REQUEST_BYTES - buffer.len();
            match connection.stream.read(&mut chunk[..room.min(READ_CHUNK)]) {
                Ok(0) => return Next::Close,
                Ok(n) => {
                    buffer.extend_from_slice(&chunk[..n]);
                    match parse(buffer) {
                        Head::Incomplete if buffer.len() < MAX_REQUEST_BYTES => {}
                        head => break head,
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Next::Keep,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        };
        let (status, content_type, body) = match head {
            Head::Complete {
                get: true,
                path: "/metrics",
            } => {
                // The counters of other localities come as calls: a busy
                // or stopped locality can take long to answer, so the wait
                // ends when the server is dropped.
                let evaluate = std::pin::pin!(self.set.evaluate(false));
                let stopped = std::pin::pin!(self.stop.wait());
                match futures::executor::block_on(future::select(evaluate, stopped)) {
                    Either::Left((Ok(values), _)) => (
                        "200 OK",
                        "text/plain; version=0.0.4; charset=utf-8",
                        exposition(&values),
                    ),
                    Either::Left((Err(e), _)) => {
                        ("500 Internal Server Error", "text/plain", format!("{e}\n"))
                    }
                    Either::Right(((), _)) => return Next::Close,
                }
            }
            Head::Complete { .. } => (
                "404 Not Found",
                "text/plain",
                "only GET /metrics is served here\n".to_owned(),
            ),
            Head::Incomplete if buffer.contains(&b'\n') => (
                "431 Request Header Fields Too Large",
                "text/plain",
                format!("a request's head may have at most {MAX_REQUEST_BYTES} bytes\n"),
            ),
            Head::Incomplete => (
                "400 Bad Request",
                "text/plain",
                format!("a request line may have at most {MAX_REQUEST_BYTES} bytes\n"),
            ),
        };
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        connection.state = State::Writing(response.into_bytes(), 0);
        connection.deadline = Instant::now() + RESPONSE_DEADLINE;
        Next::Keep
    }

    /// Closes the connection accepted first, to make room for a new one:
    /// clients that hold connections open cannot keep a scraper out, as
    /// a scrape takes milliseconds once accepted.
    fn evict_oldest(&mut self) {
        let oldest = self
            .connections
            .iter()
            .min_by_key(|(_, c)| c.opened)
            .map(|(token, _)| *token);
        if let Some(token) = oldest {
            self.connections.remove(&token);
        }
    }

    /// Closes the connections past their deadline.
    fn expire(&mut self) {
        let now = Instant::now();
        self.connections.retain(|_, c| c.deadline > now);
    }
}

/// Writes what the socket takes of the response; closes the connection
/// when all is written.
fn write(connection: &mut Connection) -> Next {
    let State::Writing(response, written) = &mut connection.state else {
        return Next::Keep;
    };
    while *written < response.len() {
        match connection.stream.write(&response[*written..]) {
            Ok(0) => return Next::Close,
            Ok(n) => *written += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Next::Keep,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Next::Close,
        }
    }
    let _ = connection.stream.shutdown(Shutdown::Write);
    Next::Close
}

/// What a request's head says, as far as the server cares.
#[derive(Debug, PartialEq, Eq)]
enum Head<'a> {
    /// The blank line that ends the head has not arrived.
    Incomplete,
    /// The head is complete.
    Complete {
        /// The method is `GET`.
        get: bool,
        /// The request target.
        path: &'a str,
    },
}

/// Parses the bytes of a request received so far.
fn parse(bytes: &[u8]) -> Head<'_> {
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .or_else(|| bytes.windows(2).position(|w| w == b"\n\n"));
    if end.is_none() {
        return Head::Incomplete;
    }
    let line_end = bytes
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(bytes.len());
    let line = std::str::from_utf8(&bytes[..line_end]).unwrap_or("");
    let mut words = line.split_whitespace();
    let get = words.next() == Some("GET");
    let path = words.next().unwrap_or("");
    Head::Complete { get, path }
}

#[cfg(test)]
mod tests {
    use super::{Head, parse};

    #[test]
    fn a_head_is_complete_at_its_blank_line() {
        assert_eq!(
            parse(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"),
            Head::Incomplete
        );
        assert_eq!(
            parse(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Head::Complete {
                get: true,
                path: "/metrics"
            }
        );
        assert_eq!(
            parse(b"POST /x HTTP/1.0\n\n"),
            Head::Complete {
                get: false,
                path: "/x"
            }
        );
        assert_eq!(
            parse(b"\xff\xfe\r\n\r\n"),
            Head::Complete {
                get: false,
                path: ""
            }
        );
    }
}
