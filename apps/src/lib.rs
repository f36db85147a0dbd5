//! Courier's applications and benchmarks live in `src/bin/`; this library
//! only compiles the README's example as a doctest, so that it stays true.
#![doc = include_str!("../../README.md")]
