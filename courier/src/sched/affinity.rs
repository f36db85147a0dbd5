//! Which CPU each worker thread runs on, when the job binds them
//! ([`Bind`](crate::Bind)): a CPU of its own from the set this process
//! may use, one after another across the localities of a host.
//!
//! Left to itself, Linux puts a thread woken by another on the waker's
//! CPU when it can (wake-affine). Two localities of a host that answer
//! each other's messages and park between them thus end up on one CPU,
//! taking turns, while the other idles: bursts of 500 awaited calls over
//! loopback TCP on two cores came back in 180 µs unbound and in 110 µs
//! with each locality's worker on a CPU of its own, and a steady stream
//! of calls after such bursts ran its first 60 ms at half speed until
//! the load balancer split the workers again (BENCHMARKS.md, issue #15,
//! twenty-first part). HPX binds its worker threads by default
//! (`--hpx:bind`) for the same reason.

/// The CPUs this process may run on (its affinity mask), in increasing
/// order; empty where that cannot be read (and off Linux).
pub(crate) fn allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        use rustix::thread::{CpuSet, sched_getaffinity};
        match sched_getaffinity(None) {
            Ok(set) => (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
            Err(_) => Vec::new(),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        Vec::new()
    }
}

/// Keeps the calling thread on `cpu` from now on.
pub(crate) fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use rustix::thread::{CpuSet, sched_setaffinity};
        if cpu >= CpuSet::MAX_CPU {
            return Err(std::io::Error::other(format!(
                "CPU {cpu} is beyond the {} a CPU set holds",
                CpuSet::MAX_CPU
            )));
        }
        let mut set = CpuSet::new();
        set.set(cpu);
        sched_setaffinity(None, &set).map_err(std::io::Error::from)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpu;
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "binding threads to CPUs is only done on Linux",
        ))
    }
}

/// The CPU of each of `workers` workers whose first is the `first`-th
/// worker of the host: the `allowed` CPUs in turn from the `first`-th,
/// around again when they run out. Empty when `allowed` is.
pub(crate) fn placement(allowed: &[usize], first: usize, workers: usize) -> Vec<usize> {
    if allowed.is_empty() {
        return Vec::new();
    }
    (0..workers)
        .map(|w| allowed[(first + w) % allowed.len()])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_take_the_allowed_cpus_in_turn_across_localities() {
        let allowed = [0, 2, 4, 6];
        // Two localities of two workers: one CPU each.
        assert_eq!(placement(&allowed, 0, 2), vec![0, 2]);
        assert_eq!(placement(&allowed, 2, 2), vec![4, 6]);
        // More workers than CPUs: around again.
        assert_eq!(placement(&allowed, 3, 3), vec![6, 0, 2]);
        assert_eq!(placement(&[], 0, 2), Vec::<usize>::new());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_pinned_thread_runs_on_its_cpu_alone() {
        let allowed = allowed_cpus();
        assert!(!allowed.is_empty(), "the affinity mask could not be read");
        let cpu = *allowed.last().expect("not empty");
        let seen = std::thread::spawn(move || {
            pin_current_thread(cpu).expect("pin");
            (allowed_cpus(), rustix::thread::sched_getcpu())
        })
        .join()
        .expect("the pinned thread panicked");
        assert_eq!(seen, (vec![cpu], cpu));
        assert!(
            pin_current_thread(usize::MAX).is_err(),
            "a CPU beyond any set is refused"
        );
    }
}
