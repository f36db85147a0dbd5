//! [`CounterSet`]: query counters by name, locally or on other localities,
//! with HPX's evaluate/reset semantics.

use std::collections::HashMap;

use serde::Serialize;

use super::name::{CounterName, Index};
use super::registry::{self, Sample, Sources};
use crate::{CallError, LocalityId, Runtime};

/// One value of one counter.
///
/// `name` is fully concrete (`/threads{locality#0/worker-thread#1}/time/average`);
/// `time` is seconds since the sampled locality started; `sequence` counts
/// the evaluations of the set this value came from, starting at 1.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CounterValue {
    /// The counter's full name.
    pub name: String,
    /// The value, in `unit`.
    pub value: f64,
    /// `ns`, `s`, `B`, or empty for plain numbers and ratios.
    pub unit: &'static str,
    /// When the locality took the sample: seconds since it started.
    pub time: f64,
    /// Which evaluation of the set produced the value (1, 2, …).
    pub sequence: u64,
    /// How the value behaves over time.
    pub kind: CounterKind,
}

/// How a counter's value behaves over time, and what a reset does to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CounterKind {
    /// A count or a time that only grows; after a reset, the growth since.
    Cumulative,
    /// A ratio of two growing sums (an average, a rate, an overhead); after
    /// a reset, the ratio of their growths.
    Ratio,
    /// A level that goes up and down (memory, uptime); resets do not apply.
    Level,
}

/// Why counters could not be queried.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CounterError {
    /// The name does not follow the grammar.
    #[error("bad counter name `{name}`: {reason}")]
    BadName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The name parses but names no counter (or no instance of one). The
    /// message suggests the closest existing names.
    #[error("counter `{name}`: {reason}")]
    NotFound {
        /// The name as given.
        name: String,
        /// Why, with suggestions.
        reason: String,
    },
    /// Asking a locality for its counters failed.
    #[error(transparent)]
    Call(#[from] CallError),
}

/// A set of counters to evaluate together, as HPX's
/// `performance_counter_set`: [`evaluate`](Self::evaluate) samples all of
/// them (fetching remote ones through the runtime's own actions) and
/// [`reset`](Self::reset) makes the next values start from zero.
///
/// Resets belong to the set: two sets over the same counters do not
/// disturb each other. After a reset, counts and times are differences
/// since the reset and averages are ratios of differences, so they are never
/// negative; levels such as `/runtime/uptime` are unaffected.
///
/// # Examples
///
/// ```
/// use courier::{Config, Transport};
///
/// #[courier::action]
/// fn noop() {}
///
/// courier::launch(Config::new().localities(2).transport(Transport::Inproc), |rt| async move {
///     let mut set = rt.counters(["/parcels{locality#0/total}/count/sent"])?;
///     set.reset().await?;
///     for _ in 0..10 {
///         rt.call(rt.locality(1), noop, ()).await?;
///     }
///     let values = set.evaluate(false).await?;
///     assert_eq!(values[0].value, 10.0);
///     Ok(())
/// })
/// .unwrap();
/// ```
#[derive(Debug)]
pub struct CounterSet {
    rt: Runtime,
    names: Vec<CounterName>,
    baselines: HashMap<String, registry::Raw>,
    sequence: u64,
}

impl Runtime {
    /// A set of the counters named by `names` (HPX grammar, wildcards
    /// allowed; see `COUNTERS.md`). Fails at once on a malformed name, an
    /// unknown counter type, or a locality the job does not have.
    pub fn counters<I, S>(&self, names: I) -> Result<CounterSet, CounterError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut parsed = Vec::new();
        for name in names {
            let name = name.as_ref();
            let counter = CounterName::parse(name).map_err(|e| CounterError::BadName {
                name: name.to_owned(),
                reason: e.0,
            })?;
            let not_found = |reason| CounterError::NotFound {
                name: name.to_owned(),
                reason,
            };
            if registry::matching(&counter.type_name()).is_empty() {
                return Err(not_found(registry::unknown_type_message(
                    &counter.type_name(),
                )));
            }
            if let Index::At(l) = counter.locality {
                if l >= self.num_localities() {
                    return Err(not_found(format!(
                        "locality#{l} does not exist: the job has {} localities",
                        self.num_localities()
                    )));
                }
            }
            parsed.push(counter);
        }
        Ok(CounterSet {
            rt: self.clone(),
            names: parsed,
            baselines: HashMap::new(),
            sequence: 0,
        })
    }
}

impl CounterSet {
    /// Samples every counter of the set, in the order of the names given
    /// (wildcards expanded in locality, then instance order). With `reset`,
    /// the next evaluation starts from these values.
    pub async fn evaluate(&mut self, reset: bool) -> Result<Vec<CounterValue>, CounterError> {
        let samples = self.sample().await?;
        self.sequence += 1;
        let values = samples
            .iter()
            .map(|s| CounterValue {
                name: s.name.clone(),
                value: s.raw.value_since(self.baselines.get(&s.name)),
                unit: registry::get(&s.type_name).map_or("", |t| t.unit),
                time: s.time,
                sequence: self.sequence,
                kind: match s.raw {
                    registry::Raw::Count(_) => CounterKind::Cumulative,
                    registry::Raw::Ratio { .. } => CounterKind::Ratio,
                    registry::Raw::Gauge(_) => CounterKind::Level,
                },
            })
            .collect();
        if reset {
            self.remember(samples);
        }
        Ok(values)
    }

    /// Makes the next evaluation start from the current values.
    pub async fn reset(&mut self) -> Result<(), CounterError> {
        let samples = self.sample().await?;
        self.remember(samples);
        Ok(())
    }

    fn remember(&mut self, samples: Vec<Sample>) {
        for s in samples {
            self.baselines.insert(s.name, s.raw);
        }
    }

    /// Asks every locality involved for its samples, all at once.
    async fn sample(&self) -> Result<Vec<Sample>, CounterError> {
        let mut per_locality: Vec<(LocalityId, Vec<String>)> = Vec::new();
        for name in &self.names {
            let localities: Vec<LocalityId> = match name.locality {
                Index::At(l) => vec![LocalityId::new(l)],
                Index::All => self.rt.localities().collect(),
            };
            for l in localities {
                let mut concrete = name.clone();
                concrete.locality = Index::At(l.get());
                match per_locality.iter_mut().find(|(x, _)| *x == l) {
                    Some((_, names)) => names.push(concrete.to_string()),
                    None => per_locality.push((l, vec![concrete.to_string()])),
                }
            }
        }
        per_locality.sort_by_key(|(l, _)| *l);
        let calls: Vec<_> = per_locality
            .into_iter()
            .map(|(l, names)| (names.clone(), self.rt.call(l, sample_counters, (names,))))
            .collect();
        let mut samples = Vec::new();
        for (names, call) in calls {
            for (name, result) in names.into_iter().zip(call.await?) {
                samples.extend(result.map_err(|reason| CounterError::NotFound { name, reason })?);
            }
        }
        Ok(samples)
    }
}

/// Samples counters of the locality it runs on: the remote half of
/// [`CounterSet::evaluate`]. One result per name, in order.
#[crate::action]
fn sample_counters(names: Vec<String>) -> Vec<Result<Vec<Sample>, String>> {
    let rt = crate::current();
    let sources = Sources::read(rt.inner());
    names
        .iter()
        .map(|name| {
            let name = CounterName::parse(name).map_err(|e| e.0)?;
            registry::sample(&sources, &name)
        })
        .collect()
}
