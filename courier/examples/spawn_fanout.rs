//! Spawns N empty tasks from one task in fan-outs of 1,024, awaiting
//! each fan-out before the next (as the `spawn` bench does), on one
//! worker of one locality, and prints the time per spawn. Made to be
//! counted by callgrind (`bench/callgrind-spawn.sh`): one process, no
//! criterion around it.
//!
//! ```sh
//! cargo run --release -p courier --example spawn_fanout -- 1000000 never
//! ```

use std::time::Instant;

use courier::par::Inlining;
use courier::{Config, TransportKind};

/// Tasks spawned before the spawner awaits them.
const FAN_OUT: u64 = 1024;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .expect("usage: spawn_fanout N [never|adaptive]");
    let inlining = match args.next().as_deref() {
        None | Some("adaptive") => Inlining::Adaptive,
        Some("never") => Inlining::Never,
        Some(other) => panic!("never or adaptive, not {other}"),
    };
    let config = Config::new()
        .localities(1)
        .workers(1)
        .transport(TransportKind::Inproc)
        .inlining(inlining);
    let ns = courier::launch(config, move |rt| async move {
        let mut handles = Vec::with_capacity(FAN_OUT as usize);
        let start = Instant::now();
        let mut left = n;
        while left > 0 {
            let fan_out = left.min(FAN_OUT);
            handles.extend((0..fan_out).map(|_| rt.spawn(async {})));
            for handle in handles.drain(..) {
                handle.await;
            }
            left -= fan_out;
        }
        Ok(start.elapsed().as_nanos() as f64 / n as f64)
    })
    .expect("the job runs");
    println!("{ns:.1} ns per spawn ({n} spawns, inlining {inlining:?})");
}
