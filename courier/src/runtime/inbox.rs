//! The inbox: received runs of calls waiting to run, oldest first. Any
//! worker runs them: a free worker as a task (one is spawned per run), and
//! a worker whose program waits for credit while it waits (`credit.rs`),
//! which is why flow control cannot deadlock (see the `flow` room).

use crossbeam_deque::{Injector, Steal};

/// A FIFO queue that any thread pushes to and pops from.
pub(crate) struct Inbox<T> {
    queue: Injector<T>,
}

impl<T> Default for Inbox<T> {
    fn default() -> Self {
        Inbox {
            queue: Injector::new(),
        }
    }
}

impl<T> std::fmt::Debug for Inbox<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox").field("len", &self.len()).finish()
    }
}

impl<T> Inbox<T> {
    /// Items waiting.
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Adds `item` at the back.
    pub(crate) fn push(&self, item: T) {
        self.queue.push(item);
    }

    /// Takes the oldest item, if any.
    pub(crate) fn pop(&self) -> Option<T> {
        loop {
            match self.queue.steal() {
                Steal::Success(item) => return Some(item),
                Steal::Empty => return None,
                Steal::Retry => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_come_out_once_in_order() {
        let inbox = Inbox::default();
        for i in 0..100 {
            inbox.push(i);
        }
        assert_eq!(inbox.len(), 100);
        let out: Vec<i32> = std::iter::from_fn(|| inbox.pop()).collect();
        assert_eq!(out, (0..100).collect::<Vec<_>>());
    }
}
