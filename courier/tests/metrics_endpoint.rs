//! The metrics endpoint against unfriendly clients (issue #14): a client
//! that sends its request a byte at a time blocks neither other scrapes
//! nor the job's exit, and a request line without end is cut off.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How long a scrape or a drop may take with a dripping client connected
/// (a scrape of an idle two-locality job takes milliseconds).
const PROMPT: Duration = Duration::from_secs(1);

/// How long the dripping client drips at most, so that a server that
/// waits for it still ends the test.
const DRIP_FOR: Duration = Duration::from_secs(8);

/// A client that connects to `addr` and sends a request line a byte
/// every 100 ms, never finishing it, until `stop` is set, [`DRIP_FOR`]
/// has passed or the server closes the connection.
fn drip(addr: SocketAddr, stop: Arc<AtomicBool>) -> thread::JoinHandle<()> {
    let mut stream = TcpStream::connect(addr).unwrap();
    thread::spawn(move || {
        let started = Instant::now();
        while !stop.load(Ordering::Relaxed) && started.elapsed() < DRIP_FOR {
            if stream.write_all(b"G").is_err() {
                return;
            }
            thread::sleep(Duration::from_millis(100));
        }
    })
}

/// Sends `GET /metrics` and returns the status line.
fn scrape(addr: SocketAddr) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: courier\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response.lines().next().unwrap_or("").to_owned())
}

/// [`scrape`] from a thread of its own (the caller may be a worker the
/// server needs): its status line and how long it took.
fn timed_scrape(addr: SocketAddr) -> (std::io::Result<String>, Duration) {
    thread::spawn(move || {
        let started = Instant::now();
        (scrape(addr), started.elapsed())
    })
    .join()
    .unwrap()
}

/// This process's resident set size in KiB (Linux), for the record.
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn a_dripping_client_does_not_block_a_scrape() {
    courier::launch(common::inproc(2).workers(2), |rt| async move {
        let server = rt.serve_metrics("127.0.0.1:0".parse()?)?;
        let addr = server.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let dripper = drip(addr, Arc::clone(&stop));
        thread::sleep(Duration::from_millis(200));
        let (status, took) = timed_scrape(addr);
        stop.store(true, Ordering::Relaxed);
        dripper.join().unwrap();
        eprintln!("scrape beside a dripping client took {took:?}");
        let status = status?;
        assert!(status.contains("200"), "{status}");
        assert!(took < PROMPT, "the scrape took {took:?}");
        Ok(())
    })
    .unwrap();
}

#[test]
fn silent_connections_do_not_keep_a_scrape_out() {
    /// More than the server keeps open at once (64).
    const SILENT: usize = 100;
    courier::launch(common::inproc(2).workers(2), |rt| async move {
        let server = rt.serve_metrics("127.0.0.1:0".parse()?)?;
        let addr = server.local_addr();
        let silent: Vec<TcpStream> = (0..SILENT)
            .map(|_| TcpStream::connect(addr))
            .collect::<Result<_, _>>()?;
        thread::sleep(Duration::from_millis(200));
        let (status, took) = timed_scrape(addr);
        drop(silent);
        eprintln!("scrape beside {SILENT} silent connections took {took:?}");
        let status = status?;
        assert!(status.contains("200"), "{status:?}");
        assert!(took < PROMPT, "the scrape took {took:?}");
        Ok(())
    })
    .unwrap();
}

#[test]
fn dropping_the_server_does_not_wait_for_a_dripping_client() {
    courier::launch(common::inproc(2).workers(2), |rt| async move {
        let server = rt.serve_metrics("127.0.0.1:0".parse()?)?;
        let stop = Arc::new(AtomicBool::new(false));
        let dripper = drip(server.local_addr(), Arc::clone(&stop));
        thread::sleep(Duration::from_millis(300));
        let started = Instant::now();
        drop(server);
        let took = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        dripper.join().unwrap();
        eprintln!("dropping the server beside a dripping client took {took:?}");
        assert!(took < PROMPT, "dropping the server took {took:?}");
        Ok(())
    })
    .unwrap();
}

/// Keeps a worker of the locality that runs it busy for `ms`.
#[courier::action]
fn hold(ms: u64) {
    thread::sleep(Duration::from_millis(ms));
}

#[test]
fn dropping_the_server_does_not_wait_for_a_slow_scrape() {
    /// How long locality#1 cannot answer the scrape's counter query.
    const BUSY_MS: u64 = 3000;
    courier::launch(common::inproc(2).workers(2), |rt| async move {
        // Both workers of locality#1 busy: its counters cannot be read.
        for _ in 0..2 {
            rt.post(rt.locality(1), hold, (BUSY_MS,))?;
        }
        thread::sleep(Duration::from_millis(100));
        let server = rt.serve_metrics("127.0.0.1:0".parse()?)?;
        let addr = server.local_addr();
        let scraper = thread::spawn(move || scrape(addr));
        thread::sleep(Duration::from_millis(300));
        let started = Instant::now();
        drop(server);
        let took = started.elapsed();
        let answered = scraper.join().unwrap();
        eprintln!("dropping the server during a scrape took {took:?} (the scrape: {answered:?})");
        assert!(took < PROMPT, "dropping the server took {took:?}");
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_request_line_without_end_is_cut_off() {
    /// What the client tries to send: far more than any kernel buffers.
    const LINE_BYTES: usize = 64 << 20;
    /// What the kernel may buffer on loopback before the server closes
    /// (the send buffer grows to a few MiB), with room to spare.
    const BUFFERED_AT_MOST: usize = 16 << 20;
    courier::launch(common::inproc(2).workers(2), |rt| async move {
        let server = rt.serve_metrics("127.0.0.1:0".parse()?)?;
        let addr = server.local_addr();
        let before = rss_kib();
        let (sent, response, took) = thread::spawn(move || {
            let mut stream = TcpStream::connect(addr).unwrap();
            stream
                .set_write_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let chunk = vec![b'a'; 64 << 10];
            let started = Instant::now();
            let mut sent = 0;
            while sent < LINE_BYTES {
                match stream.write(&chunk) {
                    Ok(n) => sent += n,
                    Err(_) => break,
                }
            }
            let took = started.elapsed();
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut response = Vec::new();
            // A reset may arrive instead of the 400: either way the
            // connection is closed.
            let _ = stream.read_to_end(&mut response);
            (sent, String::from_utf8_lossy(&response).into_owned(), took)
        })
        .join()
        .unwrap();
        let after = rss_kib();
        eprintln!(
            "the server took {sent} bytes of an endless request line in {took:?} \
             (RSS {before:?} -> {after:?} KiB); response: {:?}",
            response.lines().next()
        );
        assert!(
            sent < BUFFERED_AT_MOST,
            "the server read {sent} bytes of one request line"
        );
        assert!(
            response.is_empty() || response.starts_with("HTTP/1.1 400"),
            "{response}"
        );
        // The server still serves.
        let status = thread::spawn(move || scrape(addr)).join().unwrap()?;
        assert!(status.contains("200"), "{status}");
        Ok(())
    })
    .unwrap();
}

/// Log lines written to a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn serving_beyond_loopback_is_a_warning() {
    courier::launch(common::inproc(1), |rt| async move {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber: Arc<dyn tracing::Subscriber + Send + Sync> = Arc::new(
            tracing_subscriber::fmt()
                .with_writer(move || writer.clone())
                .finish(),
        );
        let local = tracing::subscriber::with_default(Arc::clone(&subscriber), || {
            rt.serve_metrics("127.0.0.1:0".parse().unwrap())
        })?;
        drop(local);
        assert!(captured.0.lock().unwrap().is_empty());
        let open = tracing::subscriber::with_default(subscriber, || {
            rt.serve_metrics("0.0.0.0:0".parse().unwrap())
        })?;
        drop(open);
        let log = String::from_utf8(captured.0.lock().unwrap().clone())?;
        assert!(
            log.contains("WARN") && log.contains("without authentication"),
            "{log}"
        );
        Ok(())
    })
    .unwrap();
}
