//! The MPI thread of a process: it initializes MPI, answers the start-up
//! questions (rank, size, its place among the ranks of its node, every
//! rank's build fingerprint),
//! finalizes MPI at the end, and, when MPI grants only
//! `MPI_THREAD_FUNNELED` (or when asked to), makes every MPI call of the
//! locality: the workers then hand it frames to send and take the frames it
//! received ([`Funnel`]).

use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;

use mpi::Threading;
use mpi::collective::CommunicatorCollectives;
use mpi::topology::{Communicator, SimpleCommunicator};

use super::funnel::Funnel;
use super::state::State;
use crate::sched::{HostPlace, allowed_cpus, mask_key, spawn_unbound};

/// How the locality's MPI calls are made.
#[derive(Debug)]
pub(crate) enum Progress {
    /// Workers call MPI under a lock (MPI granted SERIALIZED or MULTIPLE).
    Workers(SendWorld),
    /// The MPI thread calls MPI; workers exchange frames with it.
    Funneled(Arc<Funnel>),
}

/// `MPI_COMM_WORLD`, handed to the workers.
pub(crate) struct SendWorld(pub(crate) SimpleCommunicator);

impl std::fmt::Debug for SendWorld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SendWorld(MPI_COMM_WORLD)")
    }
}

// SAFETY: sent only when MPI granted `MPI_THREAD_SERIALIZED` or more, which
// lets any thread make MPI calls; the workers then use the communicator
// under one lock (see `State`).
#[allow(unsafe_code)]
unsafe impl Send for SendWorld {}

/// What the MPI thread learned at start-up.
#[derive(Debug)]
pub(crate) struct Startup {
    pub(crate) rank: u32,
    pub(crate) size: u32,
    /// The CPUs this rank may use once MPI is initialized (a library may
    /// bind the rank within `MPI_Init`), read on the MPI thread.
    pub(crate) cpus: Vec<usize>,
    /// This rank among the ranks of its node (`MPI_COMM_TYPE_SHARED`)
    /// that may use the same CPUs: all of them unless the launcher gave
    /// ranks masks of their own.
    pub(crate) place: HostPlace,
    /// The build fingerprint of every rank, by rank.
    pub(crate) fingerprints: Vec<u64>,
    pub(crate) progress: Progress,
}

/// The MPI thread; finalizes MPI when finished.
#[derive(Debug)]
pub(crate) struct MpiProcess {
    finalize: mpsc::Sender<()>,
    funnel: Option<Arc<Funnel>>,
    thread: Option<JoinHandle<()>>,
}

impl MpiProcess {
    /// Starts the MPI thread, which initializes MPI, exchanges
    /// `fingerprint` with every rank and the CPUs it may use with the
    /// ranks of its node. `funneled` forces funneled progress.
    pub(crate) fn start(fingerprint: u64, funneled: bool) -> Result<(MpiProcess, Startup), String> {
        let (report, startup) = mpsc::channel();
        let (finalize, finalize_rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new().name("courier-mpi".into());
        let thread = spawn_unbound(thread, move || {
            run(fingerprint, funneled, &report, &finalize_rx)
        })
        .map_err(|e| format!("cannot start the MPI thread: {e}"))?;
        let startup = startup
            .recv()
            .map_err(|_| "the MPI thread ended during start-up".to_owned())??;
        let funnel = match &startup.progress {
            Progress::Funneled(funnel) => Some(Arc::clone(funnel)),
            Progress::Workers(_) => None,
        };
        let process = MpiProcess {
            finalize,
            funnel,
            thread: Some(thread),
        };
        Ok((process, startup))
    }

    /// Stops funneled progress, finalizes MPI and waits for the thread.
    /// Call after every worker stopped.
    pub(crate) fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(funnel) = &self.funnel {
            funnel.stop();
        }
        let _ = self.finalize.send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for MpiProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The body of the MPI thread.
fn run(
    fingerprint: u64,
    funneled: bool,
    report: &mpsc::Sender<Result<Startup, String>>,
    finalize: &mpsc::Receiver<()>,
) {
    let Some((universe, threading)) = mpi::initialize_with_threading(Threading::Multiple) else {
        let _ = report.send(Err(
            "MPI is already initialized in this process: under MPI, launch runs once per process"
                .to_owned(),
        ));
        return;
    };
    if threading < Threading::Funneled {
        let _ = report.send(Err(format!(
            "MPI granted only {threading:?} thread support; Courier needs at least \
             MPI_THREAD_FUNNELED (use an MPI library built with thread support)"
        )));
        return;
    }
    let world = universe.world();
    let (rank, size) = (world.rank() as u32, world.size() as u32);
    let mut fingerprints = vec![0u64; size as usize];
    world.all_gather_into(&fingerprint, &mut fingerprints[..]);
    let node = world.split_shared(rank as i32);
    let rank_on_node = node.rank() as usize;
    let cpus = allowed_cpus();
    let mut mask_keys = vec![0u64; node.size() as usize];
    node.all_gather_into(&mask_key(&cpus), &mut mask_keys[..]);
    drop(node);
    let place = place_among(&mask_keys, rank_on_node);
    let funneled = funneled || threading < Threading::Serialized;
    let startup = |progress| Startup {
        rank,
        size,
        cpus: cpus.clone(),
        place,
        fingerprints: fingerprints.clone(),
        progress,
    };
    if funneled {
        let funnel = Arc::new(Funnel::default());
        let _ = report.send(Ok(startup(Progress::Funneled(Arc::clone(&funnel)))));
        let mut state = State::new(world);
        funnel.run(&mut state);
        drop(state);
    } else {
        let _ = report.send(Ok(startup(Progress::Workers(SendWorld(world)))));
    }
    // Finalize once the locality is done with MPI.
    let _ = finalize.recv();
    drop(universe);
}

/// The place of the rank at `rank` among the ranks of a node whose masks
/// have the keys `mask_keys` (`sched::mask_key`), among those whose mask
/// is its own.
fn place_among(mask_keys: &[u64], rank: usize) -> HostPlace {
    let own = mask_keys[rank];
    let same = |key: &&u64| **key == own;
    let count = mask_keys.iter().filter(same).count();
    HostPlace {
        index: mask_keys[..rank].iter().filter(same).count() as u32,
        count: count as u32,
        whole_host: count == mask_keys.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_is_placed_among_the_ranks_with_its_mask() {
        // Two packages, ranks alternating between them.
        let mask_keys = [7, 9, 7, 9];
        let place = |rank| place_among(&mask_keys, rank);
        assert_eq!((place(2).index, place(2).count), (1, 2));
        assert_eq!((place(1).index, place(1).count), (0, 2));
        assert_eq!((place(3).index, place(3).count), (1, 2));
        assert!(!place(0).whole_host);
        let shared = place_among(&[5, 5, 5], 2);
        assert_eq!(
            shared,
            HostPlace {
                index: 2,
                count: 3,
                whole_host: true
            }
        );
    }
}
