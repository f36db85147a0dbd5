//! The end of a job: wait until it is idle everywhere, then stop it.
//!
//! The root runs *waves*: it asks every other locality for its
//! [`ActivityCounts`] and adds its own. The job is idle when, in two
//! consecutive waves, every locality reported the same counts, the parcels
//! sent equal the parcels received, and every spawned task has finished.
//! The counts only grow, so two identical balanced waves mean that nothing
//! happened in between and nothing is in flight (the four-counter method of
//! Mattern, 1987). Then the root sends `Shutdown` and waits for every
//! `ShutdownAck`.

use std::time::{Duration, Instant};

use super::LocalityId;
use super::locality::{Locality, report};
use crate::parcel::{ActivityCounts, Control};

/// How often the root says what it is waiting for while the job is not idle.
const WAIT_REPORT_INTERVAL: Duration = Duration::from_secs(5);

/// How long the root waits for the shutdown acknowledgements.
const ACK_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether the job described by `counts` (one entry per locality) is idle.
fn balanced(counts: &[ActivityCounts]) -> bool {
    let sent: u64 = counts.iter().map(|c| c.parcels_sent).sum();
    let received: u64 = counts.iter().map(|c| c.parcels_received).sum();
    sent == received && counts.iter().all(|c| c.tasks_spawned == c.tasks_finished)
}

/// Waits until the whole job is idle or a locality is lost. Run by the root
/// after its main function returned, on a thread that is not a worker.
pub(crate) fn wait_for_quiescence(root: &Locality) {
    let peers: Vec<LocalityId> = (1..root.count).map(LocalityId::new).collect();
    let mut previous: Option<Vec<ActivityCounts>> = None;
    let started = Instant::now();
    let mut next_report = started + WAIT_REPORT_INTERVAL;
    for wave in 1u64.. {
        for &peer in &peers {
            root.send_control(peer, &Control::QuiescenceQuery { wave });
        }
        let mut control = root.control.lock();
        loop {
            if !control.lost.is_empty() {
                return;
            }
            let answered = peers
                .iter()
                .all(|p| control.reports.get(p).is_some_and(|(w, _)| *w == wave));
            if answered {
                break;
            }
            if root
                .control_changed
                .wait_until(&mut control, next_report)
                .timed_out()
            {
                let missing: Vec<String> = peers
                    .iter()
                    .filter(|p| control.reports.get(p).is_none_or(|(w, _)| *w != wave))
                    .map(ToString::to_string)
                    .collect();
                report!(
                    root.here,
                    "still waiting for {} to answer the termination check after {:.0?}",
                    missing.join(", "),
                    started.elapsed()
                );
                next_report = Instant::now() + WAIT_REPORT_INTERVAL;
            }
        }
        let mut counts = vec![root.activity()];
        counts.extend(peers.iter().map(|p| control.reports[p].1));
        drop(control);
        if balanced(&counts) && previous.as_ref() == Some(&counts) {
            return;
        }
        if Instant::now() >= next_report {
            report!(
                root.here,
                "waiting for the job to become idle after main returned ({:.0?}): {:?}",
                started.elapsed(),
                counts
            );
            next_report = Instant::now() + WAIT_REPORT_INTERVAL;
        }
        previous = Some(counts);
        if wave > 2 {
            // Back off while the job is still busy.
            std::thread::sleep(Duration::from_millis(wave.min(20)));
        }
    }
}

/// Asks every locality still alive to stop and waits for their
/// acknowledgements. Returns the peers lost during the job.
pub(crate) fn shut_down_peers(root: &Locality) -> Vec<(LocalityId, String)> {
    let peers: Vec<LocalityId> = {
        let control = root.control.lock();
        (1..root.count)
            .map(LocalityId::new)
            .filter(|p| !control.lost.iter().any(|(l, _)| l == p))
            .collect()
    };
    for &peer in &peers {
        root.send_control(peer, &Control::Shutdown);
    }
    let deadline = Instant::now() + ACK_TIMEOUT;
    let mut control = root.control.lock();
    loop {
        let pending: Vec<LocalityId> = peers
            .iter()
            .copied()
            .filter(|p| !control.acked.contains(p) && !control.lost.iter().any(|(l, _)| l == p))
            .collect();
        if pending.is_empty() {
            break;
        }
        if root
            .control_changed
            .wait_until(&mut control, deadline)
            .timed_out()
        {
            for p in pending {
                control.lost.push((
                    p,
                    format!("did not acknowledge the shutdown within {ACK_TIMEOUT:?}"),
                ));
            }
            break;
        }
    }
    root.set_stopping();
    control.lost.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(sent: u64, received: u64, spawned: u64, finished: u64) -> ActivityCounts {
        ActivityCounts {
            parcels_sent: sent,
            parcels_received: received,
            tasks_spawned: spawned,
            tasks_finished: finished,
        }
    }

    #[test]
    fn balanced_needs_matching_parcels_and_finished_tasks() {
        assert!(balanced(&[counts(3, 1, 5, 5), counts(1, 3, 2, 2)]));
        assert!(
            !balanced(&[counts(3, 1, 5, 5), counts(1, 2, 2, 2)]),
            "a parcel in flight"
        );
        assert!(
            !balanced(&[counts(3, 1, 5, 4), counts(1, 3, 2, 2)]),
            "a task running"
        );
    }
}
