//! Which CPU each worker thread runs on, when the job binds them
//! ([`Binding`](crate::Binding)): a CPU of its own from the set this
//! process may use, one after another across the localities of a host.
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
//!
//! A thread inherits the mask of the thread that starts it, so a thread
//! started from a bound worker would run on that worker's CPU alone.
//! Courier's own helper threads (timers, the quiescence waves, counter
//! output) start through [`spawn_unbound`], which gives them back the
//! mask their starting thread had before it was bound. Each thread keeps
//! its own: two jobs of one process, launched from threads with
//! different masks, each keep to theirs.

use std::thread::{Builder, JoinHandle};

/// Where a locality stands among the localities of its host that share
/// its CPUs (its affinity mask).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HostPlace {
    /// Its index among them, from 0.
    pub(crate) index: u32,
    /// How many they are.
    pub(crate) count: u32,
    /// Whether they are all the host's localities: false where a
    /// launcher gave groups of them CPUs of their own (an MPI launcher's
    /// binding), whose placement is then the launcher's.
    pub(crate) whole_host: bool,
}

impl HostPlace {
    /// Whether the host's workers fill `cpus` CPUs: `count` localities of
    /// `workers` workers each have one CPU each, and fewer than one
    /// locality's workers would be left over (as with the default number
    /// of workers). With CPUs to spare, other jobs may be running beside
    /// this one, and the OS is left to spread them all.
    pub(crate) fn fills(self, workers: usize, cpus: usize) -> bool {
        let used = (self.count as usize).saturating_mul(workers);
        used <= cpus && cpus - used < workers
    }
}

/// The CPUs the calling thread was given, in increasing order: its
/// affinity mask, or the mask it had before [`pin_current_thread`] kept
/// it on one CPU. Empty where that cannot be read (and off Linux). Read
/// from the thread that launches a job, this is that thread's mask,
/// which its workers are placed in.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        use rustix::thread::CpuSet;
        match MASK_BEFORE_PIN.get().map_or_else(current_mask, Ok) {
            Ok(set) => (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
            Err(_) => Vec::new(),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        Vec::new()
    }
}

/// The CPU of each of the `workers` workers of the locality at `index`
/// among its host's: the `allowed` CPUs in turn from the
/// `index × workers`-th, around again when they run out. Empty when
/// `allowed` is.
pub(crate) fn placement(allowed: &[usize], index: u32, workers: usize) -> Vec<usize> {
    let len = allowed.len();
    if len == 0 {
        return Vec::new();
    }
    let first = first_cpu(index, workers, len);
    (0..workers)
        .map(|w| allowed[(first + w % len) % len])
        .collect()
}

/// `index × workers` modulo `len` (not 0), without overflow: where the
/// locality at `index` starts among `len` CPUs.
fn first_cpu(index: u32, workers: usize, len: usize) -> usize {
    (index as usize % len) * (workers % len) % len
}

/// A key of a set of CPUs: equal keys, equal sets (up to a 64-bit
/// hash's collisions).
#[cfg(feature = "mpi")]
pub(crate) fn mask_key(cpus: &[usize]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    cpus.hash(&mut hasher);
    hasher.finish()
}

#[cfg(target_os = "linux")]
thread_local! {
    /// The mask this thread had before [`pin_current_thread`] first kept
    /// it on one CPU; `None` while it never was.
    static MASK_BEFORE_PIN: std::cell::Cell<Option<rustix::thread::CpuSet>> =
        const { std::cell::Cell::new(None) };
}

/// The calling thread's affinity mask as the kernel has it now.
#[cfg(target_os = "linux")]
fn current_mask() -> std::io::Result<rustix::thread::CpuSet> {
    rustix::thread::sched_getaffinity(None).map_err(std::io::Error::from)
}

/// Keeps the calling thread on `cpu` from now on; the first call on a
/// thread keeps the mask it had, for [`allowed_cpus`] and for the
/// threads it starts through [`spawn_unbound`].
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
        if MASK_BEFORE_PIN.get().is_none() {
            MASK_BEFORE_PIN.set(Some(current_mask()?));
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

/// Starts a thread that is not pinned to a CPU: started from a pinned
/// thread (a bound worker), it runs on the CPUs that thread had before
/// it was pinned; otherwise it inherits the caller's mask, as any thread
/// does. Courier's own threads (timers, the quiescence waves, counter
/// output, the workers themselves before they pin) start this way.
pub(crate) fn spawn_unbound<F, T>(builder: Builder, body: F) -> std::io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    #[cfg(target_os = "linux")]
    let before_pin = MASK_BEFORE_PIN.get();
    builder.spawn(move || {
        #[cfg(target_os = "linux")]
        if let Some(mask) = before_pin {
            // A thread left on one CPU still runs; nothing to report.
            let _ = rustix::thread::sched_setaffinity(None, &mask);
        }
        body()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_take_the_allowed_cpus_in_turn_across_localities() {
        let allowed = [0, 2, 4, 6];
        // Two localities of two workers: one CPU each.
        assert_eq!(placement(&allowed, 0, 2), vec![0, 2]);
        assert_eq!(placement(&allowed, 1, 2), vec![4, 6]);
        // More workers than CPUs: around again.
        assert_eq!(placement(&allowed, 1, 3), vec![6, 0, 2]);
        assert_eq!(placement(&[], 0, 2), Vec::<usize>::new());
    }

    #[test]
    fn the_first_cpu_wraps_around_without_overflow() {
        assert_eq!(first_cpu(3, 2, 4), 2);
        assert_eq!(first_cpu(1, 3, 4), 3);
        // (2³² − 1)·(2⁶⁴ − 1) mod 7: the factors are ≡ 3 and ≡ 1.
        assert_eq!(first_cpu(u32::MAX, usize::MAX, 7), 3);
    }

    #[test]
    fn the_hosts_workers_fill_the_cpus_with_less_than_a_locality_left() {
        let two_of = |count| HostPlace {
            index: 0,
            count,
            whole_host: true,
        };
        assert!(two_of(2).fills(2, 4));
        assert!(
            two_of(3).fills(2, 7),
            "one CPU left is less than a locality"
        );
        assert!(!two_of(3).fills(2, 4), "more workers than CPUs");
        assert!(!two_of(2).fills(1, 4), "two CPUs left for another job");
        assert!(!two_of(1).fills(1, 0), "no CPUs known");
        assert!(!two_of(u32::MAX).fills(usize::MAX, 4), "no overflow");
    }

    proptest::proptest! {
        /// The localities of a host that fill its CPUs never share one.
        #[test]
        fn localities_that_fill_the_cpus_take_disjoint_slices(
            count in 1u32..16,
            workers in 1usize..16,
            spare in 0usize..16,
        ) {
            // Fewer spare CPUs than a locality's workers: they fill them.
            let cpus = count as usize * workers + spare % workers;
            let allowed: Vec<usize> = (0..cpus).map(|c| c * 2 + 1).collect();
            let place = HostPlace { index: 0, count, whole_host: true };
            proptest::prop_assert!(place.fills(workers, cpus));
            let mut taken: Vec<usize> = (0..count)
                .flat_map(|index| placement(&allowed, index, workers))
                .collect();
            let all = taken.len();
            taken.sort_unstable();
            taken.dedup();
            proptest::prop_assert_eq!(taken.len(), all);
            proptest::prop_assert!(taken.iter().all(|c| allowed.contains(c)));
        }
    }

    /// The calling thread's mask as the kernel has it.
    #[cfg(target_os = "linux")]
    fn kernel_mask() -> Vec<usize> {
        let set = current_mask().expect("sched_getaffinity");
        (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_pinned_thread_runs_on_its_cpu_alone_and_its_helpers_do_not() {
        let allowed = allowed_cpus();
        assert!(
            allowed.len() >= 2,
            "this test needs at least 2 CPUs in its mask, not {allowed:?}"
        );
        let cpu = *allowed.last().expect("not empty");
        let (pinned, given, helper) = std::thread::spawn(move || {
            pin_current_thread(cpu).expect("pin");
            let pinned = (kernel_mask(), rustix::thread::sched_getcpu());
            let helper = spawn_unbound(Builder::new(), kernel_mask)
                .expect("spawn")
                .join()
                .expect("the helper panicked");
            (pinned, allowed_cpus(), helper)
        })
        .join()
        .expect("the pinned thread panicked");
        assert_eq!(pinned, (vec![cpu], cpu));
        assert_eq!(given, allowed, "a pinned thread was given its old mask");
        assert_eq!(helper, allowed, "a helper runs on the CPUs before the pin");
        assert!(
            pin_current_thread(usize::MAX).is_err(),
            "a CPU beyond any set is refused"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_that_was_never_pinned_starts_helpers_in_its_own_mask() {
        let allowed = allowed_cpus();
        assert!(allowed.len() >= 2, "needs 2 CPUs, not {allowed:?}");
        let (first, last) = (allowed[0], *allowed.last().expect("not empty"));
        // Another thread pins itself first: its old mask is its own.
        std::thread::spawn(move || pin_current_thread(first).expect("pin"))
            .join()
            .expect("the pinned thread panicked");
        let helper = std::thread::spawn(move || {
            // Narrowed as `taskset` or a launcher would, not pinned.
            let mut set = rustix::thread::CpuSet::new();
            set.set(last);
            rustix::thread::sched_setaffinity(None, &set).expect("narrow");
            spawn_unbound(Builder::new(), kernel_mask)
                .expect("spawn")
                .join()
                .expect("the helper panicked")
        })
        .join()
        .expect("the narrowed thread panicked");
        assert_eq!(helper, vec![last], "the helper keeps its starter's mask");
    }
}
