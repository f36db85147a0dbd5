//! The workers' own deques of tasks: bounded lock-free queues (`st3`),
//! which the owner pushes to and pops from in order (oldest first) and
//! the other workers steal half of at once.

use super::task::Runnable;
use crossbeam_deque::Steal;
use st3::StealError;

/// A worker's deque of spawned and woken tasks: bounded, so that it
/// never allocates (see [`TASK_DEQUE_CAPACITY`]); thieves steal half of
/// what it holds at once.
pub(super) type TaskDeque = st3::fifo::Worker<Runnable>;

/// The other end of a [`TaskDeque`], for the other workers.
pub(super) type TaskStealer = st3::fifo::Stealer<Runnable>;

/// Tasks a worker's own deque holds; the ones it queues beyond go to the
/// scheduler's shared queue, which every worker takes from (as tokio's
/// local queues overflow into its injection queue). An unbounded deque
/// (`crossbeam_deque`'s doubles its buffer when full and halves it when a
/// quarter full) grew and shrank four times each in every fan-out of
/// 1,024 spawns, a buffer allocated, copied and retired through an epoch
/// collector each time: a fifth of a queued spawn's instructions, and
/// the buffers of 1 KiB and more made glibc's `malloc` consolidate its
/// free lists, which slowed the tasks' own allocations (BENCHMARKS.md,
/// issue #16). 32 KiB per worker.
pub(super) const TASK_DEQUE_CAPACITY: usize = 4096;

/// Half the tasks of another worker's deque (rounded up): one to run,
/// the others into `mine`, where the next thief may find them.
pub(super) fn steal_tasks<T>(
    victim: &st3::fifo::Stealer<T>,
    mine: &st3::fifo::Worker<T>,
) -> Steal<T> {
    match victim.steal_and_pop(mine, |n| n - n / 2) {
        Ok((runnable, _)) => Steal::Success(runnable),
        Err(StealError::Empty) => Steal::Empty,
        Err(StealError::Busy) => Steal::Retry,
    }
}

/// Whether `victim`'s deque holds a task, asked from the worker owning
/// `mine` (a stealer cannot tell its length: an attempt to steal none is
/// shown the count, and takes nothing). A steal in progress counts as a
/// task.
pub(super) fn holds_tasks<T>(victim: &st3::fifo::Stealer<T>, mine: &st3::fifo::Worker<T>) -> bool {
    let mut seen = false;
    let attempt = victim.steal(mine, |available| {
        seen = available > 0;
        0
    });
    seen || matches!(attempt, Err(StealError::Busy))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deque_of(items: std::ops::Range<u32>) -> st3::fifo::Worker<u32> {
        let deque = st3::fifo::Worker::new(16);
        for item in items {
            deque.push(item).expect("room for it");
        }
        deque
    }

    #[test]
    fn a_thief_takes_half_rounded_up_oldest_first() {
        let victim = deque_of(0..5);
        let mine = deque_of(0..0);
        let Steal::Success(first) = steal_tasks(&victim.stealer(), &mine) else {
            panic!("five tasks to steal from");
        };
        // Three of five: one to run, two for the thief's own deque; the
        // victim keeps the two newest.
        let mut moved: Vec<u32> = std::iter::from_fn(|| mine.pop()).collect();
        moved.push(first);
        moved.sort_unstable();
        assert_eq!(moved, [0, 1, 2]);
        assert_eq!(
            std::iter::from_fn(|| victim.pop()).collect::<Vec<_>>(),
            [3, 4]
        );
        assert!(matches!(
            steal_tasks(&victim.stealer(), &mine),
            Steal::Empty
        ));
    }

    #[test]
    fn a_deque_holds_tasks_until_it_is_empty_and_looking_takes_none() {
        let victim = deque_of(0..2);
        let mine = deque_of(0..0);
        let stealer = victim.stealer();
        assert!(holds_tasks(&stealer, &mine));
        assert!(holds_tasks(&stealer, &mine), "looking took a task");
        assert!(mine.is_empty());
        assert_eq!(victim.pop(), Some(0));
        assert!(holds_tasks(&stealer, &mine));
        assert_eq!(victim.pop(), Some(1));
        assert!(!holds_tasks(&stealer, &mine));
    }

    #[test]
    fn a_full_deque_refuses_a_task_and_hands_it_back() {
        let deque = deque_of(0..16);
        assert_eq!(deque.push(16), Err(16));
    }
}
