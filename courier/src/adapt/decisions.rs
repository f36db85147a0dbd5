//! What a locality's tuning did: the decisions made for each action
//! (`/adapt/count/decisions@ACTION`), the model's inputs it last measured
//! (`/adapt/model/*@ACTION`) and how long the locality's awaited calls
//! took to come back (`/adapt/time/call-latency`). Its loop is the
//! runtime's (`runtime/tuning.rs`).

use std::sync::atomic::{AtomicU64, Ordering};

use super::model::Traffic;

/// The model's inputs last measured for one action, as `f64` bits.
#[derive(Debug, Default)]
struct Inputs {
    parcels_per_s: AtomicU64,
    bytes_per_parcel: AtomicU64,
    kappa: AtomicU64,
}

/// What the tuning of one locality did: the decisions made for each
/// action and the model's inputs.
#[derive(Debug)]
pub(crate) struct Tuning {
    decisions: Box<[AtomicU64]>,
    inputs: Box<[Inputs]>,
    /// The mean time from an awaited call leaving to its response, in ns
    /// (`f64` bits), in the last epoch that measured it.
    latency_ns: AtomicU64,
    /// Whether decisions are reported at INFO (`Config::print_adapt`).
    print: bool,
}

impl Tuning {
    /// Tuning of `actions` actions. `print`: report each decision at INFO
    /// rather than DEBUG.
    pub(crate) fn new(actions: usize, print: bool) -> Self {
        Tuning {
            decisions: (0..actions).map(|_| AtomicU64::new(0)).collect(),
            inputs: (0..actions).map(|_| Inputs::default()).collect(),
            latency_ns: AtomicU64::new(0),
            print,
        }
    }

    /// Whether decisions are reported at INFO.
    pub(crate) fn print(&self) -> bool {
        self.print
    }

    /// Counts a decision for the action in `slot`.
    pub(crate) fn count_decision(&self, slot: usize) {
        if let Some(d) = self.decisions.get(slot) {
            d.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Decisions made for the action in `slot`, or for all.
    pub(crate) fn decisions(&self, slot: Option<usize>) -> u64 {
        match slot {
            Some(slot) => self
                .decisions
                .get(slot)
                .map_or(0, |d| d.load(Ordering::Relaxed)),
            None => self
                .decisions
                .iter()
                .map(|d| d.load(Ordering::Relaxed))
                .sum(),
        }
    }

    /// Records the traffic of the action in `slot` measured in the last
    /// epoch, and the κ the model takes for it.
    pub(crate) fn record_inputs(&self, slot: usize, traffic: &Traffic, kappa: f64) {
        if let Some(i) = self.inputs.get(slot) {
            let store = |a: &AtomicU64, v: f64| a.store(v.to_bits(), Ordering::Relaxed);
            store(&i.parcels_per_s, traffic.parcels_per_s);
            store(&i.bytes_per_parcel, traffic.bytes_per_parcel);
            store(&i.kappa, kappa);
        }
    }

    /// Records how long the locality's awaited calls took to come back
    /// in the last epoch, in ns.
    pub(crate) fn record_latency(&self, ns: f64) {
        self.latency_ns.store(ns.to_bits(), Ordering::Relaxed);
    }

    /// How long the locality's awaited calls took to come back in the
    /// last epoch that measured it, in ns; 0 before.
    pub(crate) fn latency_ns(&self) -> f64 {
        f64::from_bits(self.latency_ns.load(Ordering::Relaxed))
    }

    /// The model's inputs last measured for the action in `slot`: Q
    /// (parcels a second), S (bytes a parcel) and κ; zeros before the
    /// first epoch of an adaptive setting.
    pub(crate) fn inputs(&self, slot: usize) -> (f64, f64, f64) {
        self.inputs.get(slot).map_or((0.0, 0.0, 0.0), |i| {
            let load = |a: &AtomicU64| f64::from_bits(a.load(Ordering::Relaxed));
            (
                load(&i.parcels_per_s),
                load(&i.bytes_per_parcel),
                load(&i.kappa),
            )
        })
    }
}
