//! The ACKed all-to-all synthetic benchmark of Narayanan's TRAM thesis
//! (Narayanan 2020 §5.2–5.3) on Courier: every locality sends `--messages`
//! messages of `--bytes` payload to every other locality, posting one
//! action per message; a receiver sends a sender a cumulative ACK for every
//! `--ack-every` messages it has from it, and a sender sends a batch of
//! `--ack-every` messages to each of the P − 1 others and goes on only once
//! every message of the batch is acknowledged. m·P·(P − 1) messages in all.
//!
//! ```text
//! cargo run --release -p courier-apps --bin alltoall -- --localities 2
//! alltoall --messages 1000000 --bytes 100 --runs 5
//! alltoall --bytes 1400 --ack-every 100 --coalescing bytes:buffer_bytes=10240
//! ```
//!
//! A sender waits for its ACKs in a future woken by the ACK action (its
//! worker runs other work meanwhile). The timed region runs from a barrier
//! to a barrier: once every locality has its last ACK, every message has
//! been received. Each run is verified: a payload is filled from its
//! (origin, sequence number) and checked on receipt, every sequence number
//! must come exactly once, and every receiver must count `--messages` from
//! each other locality. A message also carries its origin and sequence
//! number (a few bytes besides the payload). Prints one `run N: key=value
//! ...` line per run (seconds, messages and payload MB per second sent per
//! locality) and exits non-zero on any error.

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

use clap::Parser;
use courier::{BoxError, LocalityId, Runtime, RuntimeArgs};
use courier_apps::kernel::{median, timed};
use serde_bytes::ByteBuf;

/// The first word of the payload of message `seq` from `origin`; the next
/// words follow by adding the golden ratio.
fn payload_seed(origin: u32, seq: u64) -> u64 {
    let mut z = (u64::from(origin) << 40) ^ seq ^ 0x5851_F42D_4C95_7F2D;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The step between the payload words of one message.
const STEP: u64 = 0x9E37_79B9_7F4A_7C15;

/// The payload of message `seq` from `origin`: `bytes` bytes.
fn payload(origin: u32, seq: u64, bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes);
    let mut word = payload_seed(origin, seq);
    while out.len() < bytes {
        let take = (bytes - out.len()).min(8);
        out.extend_from_slice(&word.to_le_bytes()[..take]);
        word = word.wrapping_add(STEP);
    }
    out
}

/// Whether `got` is the payload of `bytes` bytes of message `seq` from
/// `origin`.
fn payload_ok(origin: u32, seq: u64, bytes: usize, got: &[u8]) -> bool {
    if got.len() != bytes {
        return false;
    }
    let mut word = payload_seed(origin, seq);
    for chunk in got.chunks(8) {
        if chunk != &word.to_le_bytes()[..chunk.len()] {
            return false;
        }
        word = word.wrapping_add(STEP);
    }
    true
}

/// What a sender knows of its ACKs, and the task waiting for them.
#[derive(Debug, Default)]
struct Acks {
    /// The highest cumulative count each locality acknowledged.
    acked: Vec<u64>,
    /// The count every other locality must acknowledge to wake `waiter`.
    target: u64,
    /// The sending task, while it waits.
    waiter: Option<Waker>,
}

/// One locality's side of the exchange, as receiver and as sender.
#[derive(Debug)]
struct Exchange {
    /// This locality's rank.
    here: u32,
    /// Messages per (origin, destination) pair.
    messages: u64,
    /// Messages per cumulative ACK (and per batch).
    ack_every: u64,
    /// Payload bytes per message.
    bytes: usize,
    /// Messages received from each origin.
    received: Vec<AtomicU64>,
    /// One bit per (origin, sequence number) received.
    seen: Vec<Vec<AtomicU64>>,
    /// Messages with a wrong origin, sequence number or payload, or seen
    /// before, and ACKs for more than was sent.
    errors: AtomicU64,
    /// The ACKs this locality has as a sender.
    acks: Mutex<Acks>,
}

impl Exchange {
    /// The exchange of locality `here` of `p`.
    fn new(here: u32, p: u32, messages: u64, ack_every: u64, bytes: usize) -> Self {
        let words = messages.div_ceil(64) as usize;
        Exchange {
            here,
            messages,
            ack_every,
            bytes,
            received: (0..p).map(|_| AtomicU64::new(0)).collect(),
            seen: (0..p)
                .map(|_| (0..words).map(|_| AtomicU64::new(0)).collect())
                .collect(),
            errors: AtomicU64::new(0),
            acks: Mutex::new(Acks {
                acked: vec![0; p as usize],
                ..Acks::default()
            }),
        }
    }

    /// Forgets the last run. Call only while no message or ACK is in
    /// flight.
    fn reset(&self) {
        for c in &self.received {
            c.store(0, Ordering::Relaxed);
        }
        for w in self.seen.iter().flatten() {
            w.store(0, Ordering::Relaxed);
        }
        self.errors.store(0, Ordering::Relaxed);
        let mut acks = self.acks.lock().unwrap_or_else(|e| e.into_inner());
        acks.acked.fill(0);
        acks.target = 0;
        acks.waiter = None;
    }

    /// Counts one error.
    fn error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Checks and counts message `seq` from `origin`; returns the
    /// cumulative count to acknowledge, if this message completes a group
    /// of `ack_every` (or the last).
    fn receive(&self, origin: u32, seq: u64, payload: &[u8]) -> Option<u64> {
        let Some(received) = self.received.get(origin as usize) else {
            self.error();
            return None;
        };
        if origin == self.here || seq >= self.messages {
            self.error();
            return None;
        }
        if !payload_ok(origin, seq, self.bytes, payload) {
            self.error();
        }
        let bit = 1u64 << (seq % 64);
        if self.seen[origin as usize][(seq / 64) as usize].fetch_or(bit, Ordering::Relaxed) & bit
            != 0
        {
            self.error();
        }
        let count = received.fetch_add(1, Ordering::Relaxed) + 1;
        (count % self.ack_every == 0 || count == self.messages).then_some(count)
    }

    /// `from` acknowledged `count` messages in all.
    fn acknowledged(&self, from: u32, count: u64) {
        let mut acks = self.acks.lock().unwrap_or_else(|e| e.into_inner());
        let Some(acked) = acks.acked.get_mut(from as usize) else {
            self.error();
            return;
        };
        *acked = (*acked).max(count);
        if count > acks.target {
            // More than was sent so far.
            self.error();
        }
        if self.all_acked(&acks) {
            if let Some(waker) = acks.waiter.take() {
                waker.wake();
            }
        }
    }

    /// Whether every other locality acknowledged `acks.target` messages.
    fn all_acked(&self, acks: &Acks) -> bool {
        acks.acked
            .iter()
            .enumerate()
            .all(|(rank, &n)| rank == self.here as usize || n >= acks.target)
    }

    /// Says that `target` messages to each other locality are sent (or
    /// about to be): ACKs up to `target` are expected.
    fn expect(&self, target: u64) {
        self.acks.lock().unwrap_or_else(|e| e.into_inner()).target = target;
    }

    /// Waits until every other locality acknowledged the expected count.
    fn all_expected(&self) -> AckWait<'_> {
        AckWait { exchange: self }
    }
}

/// The future of [`Exchange::all_expected`]: woken by the ACK that completes it.
#[derive(Debug)]
struct AckWait<'a> {
    /// Whose ACKs.
    exchange: &'a Exchange,
}

impl Future for AckWait<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let exchange = self.exchange;
        let mut acks = exchange.acks.lock().unwrap_or_else(|e| e.into_inner());
        if exchange.all_acked(&acks) {
            acks.waiter = None;
            return Poll::Ready(());
        }
        match &mut acks.waiter {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            waiter => *waiter = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

/// A message: sequence number `seq` of `origin`'s messages to this
/// locality. Acknowledges every `--ack-every`-th (and the last).
#[courier::action]
fn a2a_message(origin: u32, seq: u64, payload: ByteBuf) {
    if let Some(count) = courier::with_state(|x: &Exchange| x.receive(origin, seq, &payload)) {
        let rt = courier::current();
        // The origin is a locality of the job (receive checked it): a post
        // to it fails only if it is lost, which fails the job.
        let _ = rt.post(rt.locality(origin), a2a_ack, (rt.here().get(), count));
    }
}

/// A cumulative ACK: `from` has received `count` of this locality's
/// messages to it.
#[courier::action]
fn a2a_ack(from: u32, count: u64) {
    courier::with_state(|x: &Exchange| x.acknowledged(from, count));
}

/// The ACKed all-to-all synthetic benchmark over Courier.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// Messages from each locality to each other locality per run (m).
    #[arg(long, default_value_t = 100_000)]
    messages: u64,
    /// Payload bytes per message.
    #[arg(long, default_value_t = 100)]
    bytes: usize,
    /// Messages per cumulative ACK, and per batch to each destination.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    ack_every: u64,
    /// Timed runs (each verified).
    #[arg(long, default_value_t = 3)]
    runs: u32,
}

/// This locality's sending: batch after batch to every other locality,
/// each acknowledged before the next.
async fn send_all(rt: &Runtime, exchange: &Exchange) -> Result<(), BoxError> {
    let here = rt.here().get();
    let others: Vec<LocalityId> = rt.localities().filter(|&l| l != rt.here()).collect();
    let mut start = 0;
    while start < exchange.messages {
        let end = (start + exchange.ack_every).min(exchange.messages);
        // Before the batch: a full buffer may leave, and be acknowledged,
        // while the batch is being sent.
        exchange.expect(end);
        for &dest in &others {
            for seq in start..end {
                let bytes = ByteBuf::from(payload(here, seq, exchange.bytes));
                rt.post(dest, a2a_message, (here, seq, bytes))?;
            }
        }
        exchange.all_expected().await;
        start = end;
    }
    Ok(())
}

/// One run: returns the seconds of the timed region and the number of
/// errors over every locality.
async fn run(rt: &Runtime) -> Result<(f64, u64), BoxError> {
    let exchange = rt.state::<Exchange>();
    exchange.reset();
    let seconds = timed(rt, || send_all(rt, exchange)).await?;
    // Nothing should be left in flight; make sure before counting (and
    // before the next run resets the counts).
    rt.quiesce().await?;
    rt.barrier().await?;
    let mut errors = exchange.errors.load(Ordering::Relaxed);
    for (origin, count) in exchange.received.iter().enumerate() {
        let expected = if origin == exchange.here as usize {
            0
        } else {
            exchange.messages
        };
        errors += count.load(Ordering::Relaxed).abs_diff(expected);
    }
    Ok((seconds, rt.all_reduce(errors, |a, b| a + b).await?))
}

fn main() -> ExitCode {
    courier::report_to_stderr();
    let cli = Cli::parse();
    let (messages, ack_every, bytes) = (cli.messages, cli.ack_every, cli.bytes);
    let config = cli
        .runtime
        .config(2)
        .state(move |here, p| Exchange::new(here.get(), p, messages, ack_every, bytes));
    let transport = config.transport_kind();
    let result = courier::launch_spmd(config, |rt| {
        let cli = Cli::parse();
        async move {
            let p = u64::from(rt.num_localities());
            let root = rt.here().get() == 0;
            if root {
                println!(
                    "alltoall: {p} localities over {transport:?}, {} messages of {} bytes from each locality to each other ({} in all), an ACK every {}, {} runs",
                    cli.messages,
                    cli.bytes,
                    cli.messages * p * p.saturating_sub(1),
                    cli.ack_every,
                    cli.runs
                );
            }
            let sent = (cli.messages * p.saturating_sub(1)) as f64;
            let mut rates = Vec::new();
            let mut errors_total = 0;
            for r in 1..=cli.runs {
                let (seconds, errors) = run(&rt).await?;
                let rate = sent / seconds / 1e6;
                let mb = sent * cli.bytes as f64 / seconds / 1e6;
                rates.push(rate);
                errors_total += errors;
                if root {
                    println!(
                        "run {r}: seconds={seconds:.4} mmsgs_per_locality={rate:.3} mb_per_s_per_locality={mb:.1} errors={errors}"
                    );
                }
            }
            if root {
                println!(
                    "alltoall: median mmsgs_per_locality={:.3} over {} runs, {errors_total} errors",
                    median(&rates),
                    cli.runs
                );
            }
            Ok(errors_total)
        }
    });
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(errors) => {
            eprintln!("alltoall: {errors} messages or ACKs were wrong, missing or repeated");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("alltoall: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_check() {
        for bytes in [0, 1, 7, 8, 9, 100, 1400] {
            let p = payload(3, 77, bytes);
            assert_eq!(p.len(), bytes);
            assert!(payload_ok(3, 77, bytes, &p));
            assert!(!payload_ok(3, 77, bytes + 1, &p));
            if bytes > 0 {
                assert!(!payload_ok(3, 78, bytes, &p));
                assert!(!payload_ok(2, 77, bytes, &p));
                let mut q = p.clone();
                q[bytes - 1] ^= 1;
                assert!(!payload_ok(3, 77, bytes, &q));
            }
        }
    }

    #[test]
    fn acks_every_group_and_the_last() {
        let x = Exchange::new(0, 2, 250, 100, 4);
        let acks: Vec<u64> = (0..250)
            .filter_map(|seq| x.receive(1, seq, &payload(1, seq, 4)))
            .collect();
        assert_eq!(acks, [100, 200, 250]);
        assert_eq!(x.errors.load(Ordering::Relaxed), 0);
        // A repeat, a message from here, one out of range, one from nowhere.
        x.receive(1, 5, &payload(1, 5, 4));
        x.receive(0, 1, &payload(0, 1, 4));
        x.receive(1, 250, &payload(1, 250, 4));
        x.receive(2, 1, &payload(2, 1, 4));
        assert_eq!(x.errors.load(Ordering::Relaxed), 4);
        // A wrong payload is counted, and acknowledged.
        let y = Exchange::new(0, 2, 1, 100, 4);
        assert_eq!(y.receive(1, 0, &payload(1, 1, 4)), Some(1));
        assert_eq!(y.errors.load(Ordering::Relaxed), 1);
    }
}
