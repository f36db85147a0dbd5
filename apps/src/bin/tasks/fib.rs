//! fib: the naive doubly recursive Fibonacci (Inncabs `fib`, "recursive
//! balanced", very fine: 1.37 µs tasks in seed 003's Table V).

use crate::Benchmark;
use crate::fork::{Fork, with_fork};

/// `fib(n)` with one `join` per call and no cutoff, as Inncabs writes it.
pub(crate) fn fib<F: Fork>(f: F, n: u32) -> u64 {
    if n < 2 {
        return u64::from(n);
    }
    let (a, b) = f.join(|| fib(f, n - 1), || fib(f, n - 2));
    a + b
}

/// `fib(n)` by iteration: the check.
fn fib_iterative(n: u32) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    a
}

/// fib(`n`), checked against the iterative value.
pub(crate) fn benchmark(n: u32) -> Benchmark {
    Benchmark {
        name: "fib",
        input: format!("fib({n})"),
        prepare: Box::new(move || {
            Box::new(move |par| {
                let value = with_fork!(par, |f| fib(f, n));
                Box::new(move || {
                    let expected = fib_iterative(n);
                    if value == expected {
                        Ok(value)
                    } else {
                        Err(format!("fib({n}) = {value}, expected {expected}"))
                    }
                })
            })
        }),
    }
}
