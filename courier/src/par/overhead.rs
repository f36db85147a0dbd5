//! What a chunk costs the loop that spawns it: spawning a task, running
//! it and joining it, measured once per process by the first
//! [`Chunking::Auto`](super::Chunking::Auto) loop, as the `spawn` criterion
//! bench measures it (80 ns there and here on one worker, 160 on two, with
//! `async_task`'s tasks; 41–44 ns in the bench and 32–52 here on two
//! workers since Courier's own task cell), and served as the counter
//! `/par/time/task-overhead`.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::clock;
use crate::runtime::Runtime;

/// Empty tasks a round of the measurement spawns and joins, after as
/// many to warm up (the first tasks of a process pay for allocator growth
/// and cold caches, which a loop's thousands of chunks do not).
const SAMPLE: u32 = 1024;

/// Rounds measured; the overhead is their median. One round read ~50 ns
/// in most processes and ~280 in one in three (the other worker woken, or
/// not, while the round ran: `tasks --bench fib --runs 1`, eight
/// processes of each build), which moved the threshold of `join` five
/// times over from one process to the next.
const ROUNDS: usize = 5;

/// The measured overhead in ns, as `f64` bits (0: not measured yet).
static MEASURED: AtomicU64 = AtomicU64::new(0);

/// The overhead measured so far, in ns.
pub(crate) fn measured_ns() -> Option<f64> {
    match MEASURED.load(Ordering::Relaxed) {
        0 => None,
        bits => Some(f64::from_bits(bits)),
    }
}

/// The overhead of a task as a loop pays it, in ns: measured now (on
/// `rt`'s workers, by spawning and joining [`SAMPLE`] empty tasks, as the
/// `spawn` criterion bench does) the first time, remembered after.
pub(crate) async fn task_overhead_ns(rt: &Runtime) -> f64 {
    if let Some(ns) = measured_ns() {
        return ns;
    }
    let round = || async {
        // Tasks always (`spawn_task`): `spawn` would run these inline.
        let handles: Vec<_> = (0..SAMPLE).map(|_| rt.spawn_task(async {})).collect();
        for handle in handles {
            handle.await;
        }
    };
    round().await;
    let clock = clock();
    let mut rounds = [0.0; ROUNDS];
    for ns in &mut rounds {
        let start = clock.raw();
        round().await;
        *ns = (clock.delta_as_nanos(start, clock.raw()) as f64 / f64::from(SAMPLE)).max(1.0);
    }
    rounds.sort_by(f64::total_cmp);
    let ns = rounds[ROUNDS / 2];
    MEASURED.store(ns.to_bits(), Ordering::Relaxed);
    ns
}
