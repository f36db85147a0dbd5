//! Stress tests of the scheduler through the public API: exact task counts,
//! no lost wake-ups, tasks that spawn tasks.

mod common;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};

/// Every task of a fan-out tree runs exactly once, on several workers.
#[test]
fn spawned_tree_runs_every_task_once() {
    fn tree(
        rt: courier::Runtime,
        depth: u32,
        count: Arc<AtomicU64>,
    ) -> futures::future::BoxFuture<'static, u64> {
        Box::pin(async move {
            count.fetch_add(1, Ordering::Relaxed);
            if depth == 0 {
                return 1;
            }
            let children: Vec<_> = (0..4)
                .map(|_| rt.spawn(tree(rt.clone(), depth - 1, Arc::clone(&count))))
                .collect();
            let mut leaves = 0;
            for c in children {
                leaves += c.await;
            }
            leaves
        })
    }
    for workers in [1, 2, 4] {
        let count = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&count);
        let leaves = courier::launch(common::inproc(1).workers(workers), move |rt| async move {
            Ok(tree(rt.clone(), 7, counted).await)
        })
        .unwrap();
        assert_eq!(leaves, 4u64.pow(7));
        assert_eq!(
            count.load(Ordering::Relaxed),
            (0..=7).map(|d| 4u64.pow(d)).sum::<u64>()
        );
    }
}

/// A fan-out larger than a worker's own deque (4,096 tasks): the tasks
/// beyond it go to the shared queue, and every task still runs exactly
/// once, on one worker or several.
#[test]
fn a_fan_out_beyond_a_workers_deque_runs_every_task_once() {
    common::with_deadline("the fan-out", HANG, fan_out_beyond_a_workers_deque);
}

fn fan_out_beyond_a_workers_deque() {
    const TASKS: usize = 20_000;
    for workers in [1, 2, 4] {
        let config = common::inproc(1)
            .workers(workers)
            .inlining(courier::par::Inlining::Never);
        let runs = courier::launch(config, |rt| async move {
            let runs: Arc<Vec<AtomicU64>> =
                Arc::new((0..TASKS).map(|_| AtomicU64::new(0)).collect());
            let handles: Vec<_> = (0..TASKS)
                .map(|i| {
                    let runs = Arc::clone(&runs);
                    rt.spawn(async move {
                        runs[i].fetch_add(1, Ordering::Relaxed);
                        i
                    })
                })
                .collect();
            for (i, handle) in handles.into_iter().enumerate() {
                assert_eq!(handle.await, i);
            }
            Ok(runs)
        })
        .unwrap();
        let wrong: Vec<_> = (0..TASKS)
            .filter(|&i| runs[i].load(Ordering::Relaxed) != 1)
            .collect();
        assert!(
            wrong.is_empty(),
            "{workers} workers: tasks not run once: {wrong:?}"
        );
    }
}

/// A lost wake-up shows as a hang: these tests fail after this long
/// instead (they take well under a second).
const HANG: Duration = Duration::from_secs(60);

/// Tasks that wait on each other in a ring pass a token many times: a lost
/// wake-up would hang, which fails the test after [`HANG`].
#[test]
fn ring_of_tasks_never_loses_a_wakeup() {
    common::with_deadline("the ring of tasks", HANG, ring_of_tasks);
}

fn ring_of_tasks() {
    const TASKS: usize = 8;
    const LAPS: u64 = 2_000;
    for workers in [1, 3] {
        let laps = courier::launch(common::inproc(1).workers(workers), |rt| async move {
            let (senders, receivers): (Vec<_>, Vec<_>) =
                (0..TASKS).map(|_| mpsc::channel::<u64>(1)).unzip();
            let mut handles = Vec::new();
            for (i, mut rx) in receivers.into_iter().enumerate() {
                let mut next = senders[(i + 1) % TASKS].clone();
                handles.push(rt.spawn(async move {
                    while let Some(token) = rx.next().await {
                        if token == LAPS * TASKS as u64 {
                            return token;
                        }
                        if next.send(token + 1).await.is_err() {
                            return token;
                        }
                    }
                    0
                }));
            }
            senders[0].clone().send(0).await?;
            drop(senders);
            let mut last = 0;
            for h in handles {
                last = last.max(h.await);
            }
            Ok(last)
        })
        .unwrap();
        assert_eq!(laps, LAPS * TASKS as u64);
    }
}

/// Work injected from outside the workers (the launch thread) is picked up
/// even when every worker sleeps (a lost wake-up fails after [`HANG`]).
#[test]
fn tasks_spawned_from_outside_wake_sleeping_workers() {
    common::with_deadline("tasks spawned from outside", HANG, spawned_from_outside);
}

fn spawned_from_outside() {
    let total = courier::launch(common::inproc(1).workers(2), |rt| async move {
        let rt2 = rt.clone();
        let outside = std::thread::spawn(move || {
            let mut sum = 0;
            for i in 0..500u64 {
                std::thread::sleep(std::time::Duration::from_micros(50));
                sum += futures::executor::block_on(rt2.spawn(async move { i }));
            }
            sum
        });
        let sum = rt.spawn(async move { outside.join().unwrap() }).await;
        Ok(sum)
    })
    .unwrap();
    assert_eq!(total, (0..500).sum::<u64>());
}

/// A task that keeps yielding on the only worker used to starve the tasks
/// other threads spawn (they wait in the shared queue, which the worker
/// looked at only when its own was empty): the monitor thread's deliveries
/// and the timer's wake-ups among them.
#[test]
fn a_yielding_task_does_not_starve_tasks_spawned_from_other_threads() {
    common::with_deadline("a yield loop", std::time::Duration::from_secs(30), || {
        courier::launch(common::inproc(1).workers(1), |rt| async move {
            let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let (outside, flag) = (rt.clone(), std::sync::Arc::clone(&done));
            std::thread::spawn(move || {
                drop(outside.spawn(async move {
                    flag.store(true, std::sync::atomic::Ordering::Release);
                }));
            });
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                courier::yield_now().await;
            }
            Ok(())
        })
        .unwrap();
    });
}

/// Tasks that wait for a wake from plain threads (racing their polls and
/// their handles' awaits), half of them awaited by other tasks and half
/// detached: every awaited output arrives exactly once, and every output,
/// awaited or not, is dropped exactly once.
#[test]
fn tasks_woken_from_threads_give_and_drop_each_output_once() {
    common::with_deadline("tasks woken from threads", HANG, woken_from_threads);
}

fn woken_from_threads() {
    use futures::channel::oneshot;

    const TASKS: u64 = 20_000;
    /// An output that counts its drops.
    struct Out(u64, Arc<AtomicU64>);
    impl Drop for Out {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }
    let dropped = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&dropped);
    let sum = courier::launch(common::inproc(1).workers(3), move |rt| async move {
        let (tx, rx) = std::sync::mpsc::channel::<oneshot::Sender<()>>();
        let rx = Arc::new(std::sync::Mutex::new(rx));
        let firing: Vec<_> = (0..2)
            .map(|_| {
                let rx = Arc::clone(&rx);
                std::thread::spawn(move || {
                    while let Ok(fire) = rx.lock().unwrap().recv() {
                        let _ = fire.send(());
                    }
                })
            })
            .collect();
        let mut awaiters = Vec::new();
        for i in 0..TASKS {
            let (fire, fired) = oneshot::channel();
            tx.send(fire).expect("the firing threads run");
            let counted = Arc::clone(&counted);
            let task = rt.spawn(async move {
                fired.await.expect("fired");
                Out(i, counted)
            });
            if i % 2 == 0 {
                drop(task);
            } else {
                awaiters.push(rt.spawn(async move { task.await.0 }));
            }
            if i % 64 == 0 {
                courier::yield_now().await;
            }
        }
        drop(tx);
        let mut sum = 0;
        for awaiter in awaiters {
            sum += awaiter.await;
        }
        for thread in firing {
            thread.join().expect("a firing thread");
        }
        // The detached tasks end once their wake is run.
        while counted.load(Ordering::Relaxed) < TASKS {
            courier::yield_now().await;
        }
        Ok(sum)
    })
    .unwrap();
    assert_eq!(sum, (0..TASKS).filter(|i| i % 2 == 1).sum::<u64>());
    assert_eq!(
        dropped.load(Ordering::Relaxed),
        TASKS,
        "each output dropped once"
    );
}

/// A short sleep is woken by a worker, which spins for it when it runs
/// out of tasks, rather than by the locality's timer thread (issue #15:
/// on two cores, a timer thread spinning for a paced stream's sleeps
/// beside two localities' workers made each call 2–5× slower); and no
/// sleep ends early.
#[test]
fn short_sleeps_are_woken_by_a_worker() {
    /// Wakes a task, counting the wakes made on a worker's thread.
    struct Recording {
        task: std::task::Waker,
        by_worker: Arc<AtomicU64>,
    }
    impl std::task::Wake for Recording {
        fn wake(self: Arc<Self>) {
            let name = std::thread::current().name().map(str::to_owned);
            if name.is_some_and(|n| n.contains("worker")) {
                self.by_worker.fetch_add(1, Ordering::Relaxed);
            }
            self.task.wake_by_ref();
        }
    }
    let (by_worker, sleeps) = courier::launch(common::inproc(1).workers(1), |_rt| async move {
        let by_worker = Arc::new(AtomicU64::new(0));
        let sleeps = 50;
        for _ in 0..sleeps {
            let start = std::time::Instant::now();
            let mut sleep = std::pin::pin!(courier::sleep(Duration::from_micros(20)));
            std::future::poll_fn(|cx| {
                let recording = Arc::new(Recording {
                    task: cx.waker().clone(),
                    by_worker: Arc::clone(&by_worker),
                });
                let waker = std::task::Waker::from(recording);
                sleep
                    .as_mut()
                    .poll(&mut std::task::Context::from_waker(&waker))
            })
            .await;
            // The sleep's clock (the TSC) and `Instant`'s may differ by a
            // little: 1 µs of slack.
            assert!(
                start.elapsed() >= Duration::from_micros(19),
                "a sleep ended early"
            );
        }
        Ok((by_worker.load(Ordering::Relaxed), sleeps))
    })
    .unwrap();
    // Each sleep is the worker's unless it lost its core for longer than
    // the timer thread's grace: 49 of 50 on an idle 2-core machine, 12 to
    // 21 with two busy loops beside the test, with a grace of 50 µs (a
    // locality of one worker now has 1 ms: `aggregate/wakes.rs`).
    assert!(
        by_worker >= sleeps / 10,
        "only {by_worker} of {sleeps} sleeps of 20 µs were woken by the worker"
    );
}
