//! Where tasks start: spawning (onto the spawning worker's own deque, or
//! the injector from outside), running a new task's first poll inline
//! (what `inline.rs` decides), waking a worker for a new task, and
//! starting the worker threads. The `Scheduler` methods that need to know
//! which worker, if any, the calling thread is.

use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;
use std::thread;

use super::task::{self, Runnable};

use super::join::JoinHandle;
use super::pooled::{Pooled, Slotted};
use super::scheduler::{Scheduler, SchedulerId};
use super::worker::{self, Queue};

/// The schedule function of every task of scheduler `id`: onto the
/// calling worker's deque `queue` if the caller works for that scheduler,
/// else onto its injector; dropped if the scheduler is gone.
fn schedule(id: SchedulerId, runnable: Runnable, queue: Queue) {
    if let Some(runnable) = worker::push_mine(id, runnable, queue, false) {
        if let Some(sched) = Scheduler::find(id) {
            sched.inject(runnable);
        }
    }
}

impl Scheduler {
    /// Starts the worker threads and returns once each has run
    /// `on_start(index)`, which runs first on every worker thread
    /// (the runtime uses it to install its thread-local handle). Worker
    /// `i` is kept on CPU `cpus[i]` when `cpus` is given (`affinity.rs`);
    /// one that cannot be says so in a warning and runs where the OS puts
    /// it.
    pub(crate) fn start(
        self: &Arc<Self>,
        name: &str,
        cpus: Option<Vec<usize>>,
        on_start: Arc<dyn Fn(usize) + Send + Sync>,
    ) -> std::io::Result<()> {
        let locals: Vec<_> = self.locals.lock().iter_mut().map(Option::take).collect();
        let mut offers: Vec<_> = self
            .offer_locals
            .lock()
            .iter_mut()
            .map(Option::take)
            .collect();
        // Wait until every worker has run `on_start`, so that what it
        // records (the thread-local handle, the thread id) is there once
        // `start` returns.
        let started = Arc::new((Mutex::new(0usize), parking_lot::Condvar::new()));
        let mut threads = self.threads.lock();
        for (index, local) in locals.into_iter().enumerate() {
            let local = local.expect("scheduler started twice");
            let offers = offers[index].take().expect("scheduler started twice");
            let sched = Arc::clone(self);
            let on_start = Arc::clone(&on_start);
            let started = Arc::clone(&started);
            let cpu = cpus.as_ref().and_then(|cpus| cpus.get(index).copied());
            let thread_name = format!("{name}-worker-{index}");
            // Unbound first: started from a bound worker of another job,
            // a worker not bound itself would stay on that worker's CPU.
            let builder = thread::Builder::new().name(thread_name.clone());
            let handle = super::affinity::spawn_unbound(builder, move || {
                if let Some(cpu) = cpu
                    && let Err(e) = super::affinity::pin_current_thread(cpu)
                {
                    tracing::warn!("{thread_name} stays unbound: cannot keep it on CPU {cpu}: {e}");
                }
                on_start(index);
                // Before `start` returns: a counter of this worker's
                // events read at once finds its thread.
                sched.perf.register_current_thread(index);
                *started.0.lock() += 1;
                started.1.notify_all();
                worker::run(sched, index, local, offers);
            })?;
            threads.push(handle);
        }
        let count = threads.len();
        drop(threads);
        let mut running = started.0.lock();
        while *running < count {
            started.1.wait(&mut running);
        }
        Ok(())
    }

    /// Spawns a task. It starts on the current worker's deque when called from
    /// a worker of this scheduler, else on the injector.
    pub(crate) fn spawn<F>(self: &Arc<Self>, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let id = self.id;
        let future = worker::count_finish(future);
        let (runnable, task) =
            task::spawn(future, move |runnable| schedule(id, runnable, Queue::Tasks));
        self.queue_new(runnable, Queue::Tasks);
        JoinHandle::new(task)
    }

    /// Runs the first poll of a new task here, on the calling thread, a
    /// worker of this scheduler, before any task is made for it. If the
    /// future completes (or panics) in that poll, returns its handle, done,
    /// and counts it as a task spawned and finished by this worker; no
    /// task was allocated or queued. Otherwise hands the future back,
    /// pinned where it was polled, for the caller to [`spawn`](Self::spawn):
    /// that task polls it again, which is where it registers its waker.
    ///
    /// The first poll gets a waker that does nothing: a wake during it
    /// is not needed, since the task polls the future again at once. As
    /// for a queued task, a panic is caught and resumed where the handle
    /// is awaited. The future is boxed first, so that it need not move
    /// after it was polled, should it wait: in the block the thread keeps
    /// for inline runs at `level` of nesting (`pooled.rs`), which it keeps
    /// there when the future is done, against a task's allocation and its
    /// atomic state changes.
    ///
    /// Always inlined where `spawn` is called, its rare paths (a wait, a
    /// panic, a block from elsewhere) out of line: as `#[inline]` the
    /// `spawn` bench's loop called it, and an inlined child took ~27 %
    /// longer (10.5 against 8.3 ns).
    #[inline(always)]
    pub(crate) fn poll_inline<F>(
        &self,
        future: F,
        level: u32,
    ) -> Result<JoinHandle<F::Output>, Pin<Pooled<F>>>
    where
        F: Future,
        F::Output: Send + 'static,
    {
        // The context first: its stores made after the future's would
        // stand between the future's and the poll's first load of its
        // state, which the compiler then reads back from the block (a
        // load and a jump through a table, where the state it was just
        // given is known: ~0.6 ns of the `spawn` bench's inlined child).
        let mut cx = Context::from_waker(Waker::noop());
        let mut future = Slotted::new(future, level).pinned();
        let polled = panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
        let out = match polled {
            Ok(Poll::Pending) => return Err(waited(future)),
            // Dropped as a task drops its future when it ends: a panic in
            // the drop is the task's.
            Ok(Poll::Ready(out)) => {
                panic::catch_unwind(AssertUnwindSafe(|| drop(future))).map(|()| out)
            }
            Err(payload) => return Ok(panicked(future, payload)),
        };
        worker::count_inlined(true);
        Ok(JoinHandle::done(out))
    }

    /// Spawns the task of a forked closure onto the calling worker's deque
    /// of offers (see `fork.rs`), which only idle workers and workers
    /// waiting for a forked closure take from. Call from a worker of this
    /// scheduler.
    pub(super) fn spawn_offer<F>(self: &Arc<Self>, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let id = self.id;
        let future = worker::count_finish(future);
        // Its schedule function runs once: the future is done in one poll.
        let runnable = task::spawn_detached(future, move |runnable| {
            schedule(id, runnable, Queue::Offers)
        });
        self.queue_new(runnable, Queue::Offers);
    }

    /// Queues a new task and counts it as spawned: by the calling worker
    /// (onto its deque `queue`) if it is one of this scheduler's, else onto
    /// the injector. One look at the thread's state, where a wake (the
    /// task's schedule function) takes one more for the count.
    fn queue_new(&self, runnable: Runnable, queue: Queue) {
        if let Some(runnable) = worker::push_mine(self.id, runnable, queue, true) {
            self.spawned.fetch_add(1, Ordering::Relaxed);
            self.inject(runnable);
        }
    }

    /// Puts a runnable task woken off this scheduler's workers on the
    /// injector and wakes a worker for it.
    fn inject(&self, runnable: Runnable) {
        self.injector.push(runnable);
        self.sleep.notify_one(self.background());
    }

    /// Wakes a worker for a task the calling worker queued, unless it is
    /// the only worker (then it is awake and finds the task itself).
    pub(super) fn notify_for_queued(&self) {
        if self.stealers.len() > 1 {
            self.sleep.notify_one(self.background());
        }
    }

    /// The index of the calling thread among this scheduler's workers, if
    /// it is one of them.
    #[inline]
    pub(crate) fn current_worker(&self) -> Option<usize> {
        worker::current_index(self)
    }
}

/// A future run inline whose first poll waited, out of its slot to go on
/// as a task. Out of line, as the rare path of `poll_inline`.
#[cold]
#[inline(never)]
fn waited<F>(future: Pin<Slotted<F>>) -> Pin<Pooled<F>> {
    worker::count_inlined(false);
    Slotted::into_pooled(future)
}

/// The handle of a future run inline whose first poll panicked with
/// `payload`. Out of line, as the rare path of `poll_inline`.
#[cold]
#[inline(never)]
fn panicked<F: Future>(
    future: Pin<Slotted<F>>,
    payload: Box<dyn std::any::Any + Send>,
) -> JoinHandle<F::Output>
where
    F::Output: Send + 'static,
{
    drop(future);
    worker::count_inlined(true);
    JoinHandle::done(Err(payload))
}
