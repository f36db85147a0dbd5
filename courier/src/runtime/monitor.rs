//! The monitor: one thread per locality that watches what its workers
//! cannot, because they may all be busy: its peers (`liveness.rs`: the
//! failure detector) and its own long tasks (`watchdog.rs`).
//!
//! Each round it drives the transport once, so that what arrives is read
//! even when every worker is stuck in a long handler (a locality whose only
//! worker spins still hears its root die and answers the termination
//! check), then runs both checks, then sleeps until the next round or until
//! the locality stops. It holds the locality weakly between rounds and ends
//! with it.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::credit::HandlerScope;
use super::liveness;
use super::locality::{Locality, report};
use super::watchdog::{self, Reported};
use crate::clock::clock;

/// Starts the monitor of `locality`, if it has something to watch.
pub(crate) fn start(locality: &Arc<Locality>) -> std::io::Result<()> {
    if round_interval(locality).is_none() {
        return Ok(());
    }
    let weak = Arc::downgrade(locality);
    std::thread::Builder::new()
        .name(format!("courier-{}-monitor", locality.here.get()))
        .spawn(move || watch(&weak))?;
    Ok(())
}

/// The time between two rounds: the shorter of the heartbeat interval and
/// the watchdog's; `None` when there is nothing to watch.
fn round_interval(l: &Locality) -> Option<Duration> {
    let peers = (l.liveness.enabled() && l.count > 1).then(|| l.liveness.interval());
    match (peers, l.watchdog.interval()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn watch(weak: &Weak<Locality>) {
    let mut orphaned_at = None;
    let mut reported = Reported::default();
    loop {
        let Some(l) = weak.upgrade() else {
            return;
        };
        if l.liveness.is_released() || l.sched.is_shut_down() {
            return;
        }
        {
            // What it reads runs no program code here, and sends it makes
            // must not wait for credit: the monitor never blocks on peers.
            let _scope = HandlerScope::enter();
            l.transport.poll(&*l);
        }
        let now = clock().raw();
        watchdog::check(&l, now, &mut reported);
        if l.count > 1 {
            if let Some(why) = liveness::check(&l, now, &mut orphaned_at) {
                report!(error, l.here, "{why}");
                std::process::exit(1);
            }
        }
        let pause = round_interval(&l).unwrap_or(Duration::from_secs(1));
        l.liveness.pause(pause);
    }
}

/// The time from `then` to `now` (raw clock ticks); zero if another thread
/// stamped `then` after `now` was read.
pub(super) fn elapsed(then: u64, now: u64) -> Duration {
    if then >= now {
        return Duration::ZERO;
    }
    Duration::from_nanos(clock().delta_as_nanos(then, now))
}
