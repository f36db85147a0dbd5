//! Courier's applications and benchmarks live in `src/bin/`; this library
//! holds what they share ([`phases`], [`kernel`]) and compiles the README's example as a
//! doctest, so that it stays true.
#![doc = include_str!("../../README.md")]

pub mod kernel;
pub mod phases;
