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
use super::liveness::{ORPHAN_GRACE, elapsed};
use super::locality::{Locality, report};
use super::watchdog::{Reported, describe};
use crate::clock::clock;
use crate::ids::LocalityId;
use crate::parcel::Control;

/// Starts the monitor of `locality`, if it has something to watch.
pub(crate) fn start(locality: &Arc<Locality>) -> std::io::Result<()> {
    if round_interval(locality).is_none() {
        return Ok(());
    }
    let weak = Arc::downgrade(locality);
    let thread =
        std::thread::Builder::new().name(format!("courier-{}-monitor", locality.here.get()));
    crate::sched::spawn_unbound(thread, move || watch(&weak))?;
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
        check_tasks(&l, now, &mut reported);
        if l.count > 1 {
            if let Some(why) = check_peers(&l, now, &mut orphaned_at) {
                report!(error, l.here, "{why}");
                std::process::exit(1);
            }
        }
        let pause = round_interval(&l).unwrap_or(Duration::from_secs(1));
        l.liveness.pause(pause);
    }
}

/// One round of the failure detector (`liveness.rs`) at `now` (raw clock ticks), after the
/// transport was driven. Returns why the process must end, if it must;
/// `orphaned_at` keeps when the root was found lost.
fn check_peers(l: &Locality, now: u64, orphaned_at: &mut Option<u64>) -> Option<String> {
    let liveness = &l.liveness;
    if !liveness.enabled() {
        return None;
    }
    let lost: Vec<LocalityId> = l.control.lock().lost.iter().map(|(p, _)| *p).collect();
    for peer in (0..l.count).map(LocalityId::new) {
        if peer == l.here || lost.contains(&peer) || l.is_stopping() {
            continue;
        }
        if liveness.heartbeat_due(peer, now) {
            l.send_control(peer, &Control::Heartbeat);
        }
        let Some(timeout) = liveness.timeout() else {
            continue;
        };
        let silence = liveness.silence(peer, now);
        if silence >= timeout {
            let reason = format!(
                "it sent nothing for {:.1} s, not even a heartbeat (the peer timeout is \
                 {:.1} s, --peer-timeout): it is stopped, hung outside Courier, or unreachable",
                silence.as_secs_f64(),
                timeout.as_secs_f64(),
            );
            l.transport.drop_peer(peer, &reason);
            crate::transport::Sink::peer_lost(l, peer, reason);
        }
    }
    if !liveness.exits_when_orphaned() {
        return None;
    }
    let root_lost = l
        .control
        .lock()
        .lost
        .iter()
        .find(|(p, _)| *p == LocalityId::ROOT)
        .map(|(_, why)| why.clone());
    let why = root_lost?;
    let since_orphaned = elapsed(*orphaned_at.get_or_insert(now), now);
    (since_orphaned >= ORPHAN_GRACE).then(|| {
        let snapshot = l.sched.snapshot();
        format!(
            "exiting: lost the root locality ({why}) and the program did not leave the \
             job within {ORPHAN_GRACE:?} ({} of its tasks are still running)",
            snapshot.spawned.saturating_sub(snapshot.finished())
        )
    })
}

/// One round of the watchdog (`watchdog.rs`) of `l` at `now` (raw clock ticks).
fn check_tasks(l: &Locality, now: u64, reported: &mut Reported) {
    let Some(threshold) = l.watchdog.threshold() else {
        return;
    };
    for (worker, since, label) in l.sched.running_polls() {
        if reported.0.len() <= worker {
            reported.0.resize(worker + 1, 0);
        }
        let running = elapsed(since, now);
        if running < threshold || reported.0[worker] == since {
            continue;
        }
        reported.0[worker] = since;
        l.watchdog.count_long_running();
        report!(
            warn,
            l.here,
            "worker {worker} has been running one task for {:.1} s (the watchdog \
             threshold is {:.1} s): {}",
            running.as_secs_f64(),
            threshold.as_secs_f64(),
            describe(label)
        );
    }
}
