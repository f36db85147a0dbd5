//! The `spawn` benches with mimalloc as the program's allocator: a task
//! is an allocation, and glibc's `malloc` and `free` take a quarter of an
//! empty task's cost (perf, BENCHMARKS.md).
//!
//! `cargo bench -p courier --bench spawn_mimalloc`
#![allow(missing_docs)]

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "spawn.rs"]
#[allow(dead_code)]
mod spawn;

criterion::criterion_main!(spawn::benches);
