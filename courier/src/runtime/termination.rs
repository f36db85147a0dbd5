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

use super::locality::{Locality, report};
use crate::ids::LocalityId;
use crate::parcel::{ActivityCounts, Control};

/// How often the root says what it is waiting for while the job is not idle.
const WAIT_REPORT_INTERVAL: Duration = Duration::from_secs(5);

/// The first and the longest pause between two waves of a job that is not
/// yet quiet: a wave costs every locality a control message and a flush of
/// its buffers; a pause of the order of a network round trip keeps the
/// answer to `quiesce` prompt. Guesses, tune me.
const WAVE_PAUSE_MIN: Duration = Duration::from_micros(20);
const WAVE_PAUSE_MAX: Duration = Duration::from_millis(5);

/// How long the root waits for the shutdown acknowledgements.
const ACK_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether the job described by `counts` (one entry per locality) is idle:
/// every parcel sent was received and every task spawned has finished.
fn tasks_idle(counts: &[ActivityCounts]) -> bool {
    let sent: u64 = counts.iter().map(|c| c.parcels_sent).sum();
    let received: u64 = counts.iter().map(|c| c.parcels_received).sum();
    sent == received && counts.iter().all(|c| c.tasks_spawned == c.tasks_finished)
}

/// What keeps the job described by `counts` (one entry per locality, in
/// rank order) from being idle, in words: the localities with tasks
/// running or received calls unfinished, and the parcels in flight.
fn describe_activity(counts: &[ActivityCounts]) -> String {
    let mut busy = Vec::new();
    for (rank, c) in counts.iter().enumerate() {
        let tasks = c.tasks_spawned.saturating_sub(c.tasks_finished);
        let runs = c.parcel_work_started.saturating_sub(c.parcel_work_finished);
        if tasks > 0 || runs > 0 {
            busy.push(format!(
                "{} has {tasks} unfinished task(s), {runs} unfinished run(s) of received calls",
                LocalityId::new(rank as u32),
            ));
        }
    }
    let sent: u64 = counts.iter().map(|c| c.parcels_sent).sum();
    let received: u64 = counts.iter().map(|c| c.parcels_received).sum();
    if sent != received {
        busy.push(format!(
            "{} parcels in flight ({sent} sent, {received} received)",
            sent.abs_diff(received)
        ));
    }
    if busy.is_empty() {
        return "it was idle in this wave; waiting for a second identical wave".into();
    }
    busy.push("see the watchdog's reports (--watchdog) for tasks that run long".into());
    busy.join("; ")
}

/// Whether the job described by `counts` is quiet: every parcel sent was
/// received and every piece of parcel work started has finished (tasks the
/// program runs for itself may go on).
pub(crate) fn parcels_quiet(counts: &[ActivityCounts]) -> bool {
    let sent: u64 = counts.iter().map(|c| c.parcels_sent).sum();
    let received: u64 = counts.iter().map(|c| c.parcels_received).sum();
    sent == received
        && counts
            .iter()
            .all(|c| c.parcel_work_started == c.parcel_work_finished)
}

/// Waits until the whole job is idle or a locality is lost. Run by the root
/// after its main function returned, on a thread that is not a worker.
pub(crate) fn wait_for_quiescence(root: &Locality) {
    run_waves(root, tasks_idle);
}

/// Runs waves from the root until two consecutive waves report the same
/// counts and `done` holds for them. Returns false if a locality was lost
/// (then there is nothing to wait for). Runs on a thread that is not a
/// worker: it blocks.
pub(crate) fn run_waves(root: &Locality, done: fn(&[ActivityCounts]) -> bool) -> bool {
    let peers: Vec<LocalityId> = (1..root.count).map(LocalityId::new).collect();
    let mut previous: Option<Vec<ActivityCounts>> = None;
    let started = Instant::now();
    let mut next_report = started + WAIT_REPORT_INTERVAL;
    for round in 1u64.. {
        let wave = {
            let mut control = root.control.lock();
            control.next_wave += 1;
            control.next_wave
        };
        for &peer in &peers {
            root.send_control(peer, &Control::QuiescenceQuery { wave });
        }
        let mut control = root.control.lock();
        loop {
            if !control.lost.is_empty() {
                return false;
            }
            let answered = peers
                .iter()
                .all(|p| control.reports.contains_key(&(wave, *p)));
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
                    .filter(|p| !control.reports.contains_key(&(wave, **p)))
                    .map(ToString::to_string)
                    .collect();
                report!(
                    info,
                    root.here,
                    "still waiting for {} to answer the termination check after {:.0?}",
                    missing.join(", "),
                    started.elapsed()
                );
                next_report = Instant::now() + WAIT_REPORT_INTERVAL;
            }
        }
        let mut counts = Vec::with_capacity(root.count as usize);
        for p in &peers {
            counts.extend(control.reports.remove(&(wave, *p)));
        }
        drop(control);
        counts.insert(0, root.activity());
        if done(&counts) && previous.as_ref() == Some(&counts) {
            return true;
        }
        if Instant::now() >= next_report {
            report!(
                info,
                root.here,
                "waiting for the job to become idle ({:.0?}): {}",
                started.elapsed(),
                describe_activity(&counts)
            );
            next_report = Instant::now() + WAIT_REPORT_INTERVAL;
        }
        previous = Some(counts);
        if round > 2 {
            // Back off while the job is still busy: from a few tens of
            // microseconds (a job that is about to be quiet answers the
            // next waves at once) to a few milliseconds.
            let pause = WAVE_PAUSE_MIN.saturating_mul(1 << (round - 3).min(16));
            std::thread::sleep(pause.min(WAVE_PAUSE_MAX));
        }
    }
    unreachable!("the waves end by returning")
}

/// Asks every locality still alive to stop and waits for their
/// acknowledgements. Returns the peers lost during the job.
pub(crate) fn shut_down_peers(root: &Locality) -> Vec<(LocalityId, String)> {
    let peers: Vec<LocalityId> = {
        let mut control = root.control.lock();
        control.shutdown_sent = true;
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
            parcel_work_started: spawned,
            parcel_work_finished: finished,
        }
    }

    #[test]
    fn idle_needs_matching_parcels_and_finished_tasks() {
        assert!(tasks_idle(&[counts(3, 1, 5, 5), counts(1, 3, 2, 2)]));
        assert!(
            !tasks_idle(&[counts(3, 1, 5, 5), counts(1, 2, 2, 2)]),
            "a parcel in flight"
        );
        assert!(
            !tasks_idle(&[counts(3, 1, 5, 4), counts(1, 3, 2, 2)]),
            "a task running"
        );
    }

    #[test]
    fn the_waiting_message_names_busy_localities_and_parcels_in_flight() {
        let message = describe_activity(&[counts(5, 3, 4, 4), counts(3, 4, 7, 6)]);
        assert!(
            message.contains("locality#1 has 1 unfinished task(s), 1 unfinished run(s)"),
            "{message}"
        );
        assert!(!message.contains("locality#0 has"), "{message}");
        assert!(
            message.contains("1 parcels in flight (8 sent, 7 received)"),
            "{message}"
        );
        let idle = describe_activity(&[counts(1, 1, 2, 2), counts(1, 1, 0, 0)]);
        assert!(idle.contains("idle in this wave"), "{idle}");
    }

    #[test]
    fn quiet_ignores_the_programs_own_tasks() {
        let mut waiting = counts(3, 1, 5, 5);
        waiting.tasks_spawned += 1;
        assert!(parcels_quiet(&[waiting, counts(1, 3, 2, 2)]));
        assert!(!tasks_idle(&[waiting, counts(1, 3, 2, 2)]));
        let mut running = counts(3, 1, 5, 5);
        running.parcel_work_started += 1;
        assert!(!parcels_quiet(&[running, counts(1, 3, 2, 2)]));
        assert!(!parcels_quiet(&[counts(3, 1, 5, 5), counts(1, 2, 2, 2)]));
    }
}
