//! [`CounterSet`]: query counters by name, locally or on other localities,
//! with HPX's evaluate/reset semantics.

use std::collections::HashMap;

use super::derived::{self, Derived, Op, Statistics};
use super::name::{CounterName, Index, ParseError};
use super::registry::{self, HistogramSpec, Sample, Sources};
use super::value::{CounterKind, CounterValue, Histogram};
use crate::ids::LocalityId;
use crate::parcel::CallError;
use crate::runtime::Runtime;

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
/// use courier::{Config, TransportKind};
///
/// #[courier::action]
/// fn noop() {}
///
/// courier::launch(Config::new().localities(2).transport(TransportKind::Inproc), |rt| async move {
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
    items: Vec<Item>,
    baselines: HashMap<String, registry::Raw>,
    sequence: u64,
}

/// One name given to [`Runtime::counters`].
#[derive(Debug)]
enum Item {
    /// A counter (wildcards allowed).
    Plain(CounterName),
    /// A fold over other counters' values.
    Arithmetic {
        name: String,
        op: Op,
        operands: Vec<CounterName>,
    },
    /// A summary of another counter's values over time.
    Statistics(Statistics),
}

impl CounterSet {
    /// The set behind [`Runtime::counters`].
    pub(crate) fn open<I, S>(rt: &Runtime, names: I) -> Result<CounterSet, CounterError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut items = Vec::new();
        for name in names {
            let name = name.as_ref();
            let bad_name = |e: ParseError| CounterError::BadName {
                name: name.to_owned(),
                reason: e.0,
            };
            let item = match derived::parse(name).map_err(bad_name)? {
                None => Item::Plain(check(
                    rt,
                    name,
                    CounterName::parse(name).map_err(bad_name)?,
                )?),
                Some(Derived::Arithmetic { op, operands }) => Item::Arithmetic {
                    name: name.trim().to_owned(),
                    op,
                    operands: operands
                        .into_iter()
                        .map(|o| check(rt, name, o))
                        .collect::<Result<_, _>>()?,
                },
                Some(Derived::Statistics {
                    stat,
                    base,
                    interval,
                    window,
                }) => {
                    let base = check(rt, name, base)?;
                    let mut base_set = CounterSet::new(rt, vec![Item::Plain(base)]);
                    Item::Statistics(Statistics::start(
                        name.trim().to_owned(),
                        stat,
                        move || futures::executor::block_on(base_set.evaluate(false)).ok(),
                        interval,
                        window,
                    ))
                }
            };
            items.push(item);
        }
        Ok(CounterSet::new(rt, items))
    }
}

/// Checks that `counter` (from the name `name`) exists in `rt`'s job.
fn check(rt: &Runtime, name: &str, counter: CounterName) -> Result<CounterName, CounterError> {
    let not_found = |reason| CounterError::NotFound {
        name: name.to_owned(),
        reason,
    };
    if registry::matching(&counter.type_name()).is_empty() {
        return Err(not_found(registry::unknown_type_message(
            &counter.type_name(),
        )));
    }
    if let Some(t) = registry::get(&counter.type_name()) {
        let histogram = matches!(
            t.parameters,
            registry::Parameters::Histogram | registry::Parameters::ActionHistogram
        );
        if histogram {
            t.histogram_spec(counter.parameters.as_deref())
                .map_err(|reason| CounterError::BadName {
                    name: name.to_owned(),
                    reason,
                })?;
        }
        if let (registry::Parameters::Locality, Some(params)) =
            (t.parameters, counter.parameters.as_deref())
        {
            let peer = registry::parse_peer(params).map_err(|reason| CounterError::BadName {
                name: name.to_owned(),
                reason,
            })?;
            if peer.get() >= rt.num_localities() {
                return Err(not_found(format!(
                    "{peer} does not exist: the job has {} localities",
                    rt.num_localities()
                )));
            }
        }
    }
    if let Index::At(l) = counter.locality {
        if l >= rt.num_localities() {
            return Err(not_found(format!(
                "locality#{l} does not exist: the job has {} localities",
                rt.num_localities()
            )));
        }
    }
    Ok(counter)
}

fn kind_of(raw: &registry::Raw) -> CounterKind {
    match raw {
        registry::Raw::Count(_) => CounterKind::Cumulative,
        registry::Raw::Ratio { .. } => CounterKind::Ratio,
        registry::Raw::Gauge(_) => CounterKind::Level,
        registry::Raw::Histogram { .. } => CounterKind::Histogram,
    }
}

impl CounterSet {
    fn new(rt: &Runtime, items: Vec<Item>) -> Self {
        CounterSet {
            rt: rt.clone(),
            items,
            baselines: HashMap::new(),
            sequence: 0,
        }
    }

    /// Samples every counter of the set, in the order of the names given;
    /// a wildcard expands in locality order, then instance order. With
    /// `reset`, the next evaluation starts from these values.
    pub async fn evaluate(&mut self, reset: bool) -> Result<Vec<CounterValue>, CounterError> {
        let sampled = self.sample().await?;
        self.sequence += 1;
        let mut values = Vec::new();
        let mut next = sampled.iter();
        for item in &self.items {
            match item {
                Item::Plain(_) => {
                    let samples = next.next().expect("one sample list per plain counter");
                    values.extend(samples.iter().map(|s| self.value(s)));
                }
                Item::Arithmetic { name, op, operands } => {
                    let samples: Vec<&Sample> = operands
                        .iter()
                        .flat_map(|_| next.next().expect("one sample list per operand"))
                        .collect();
                    let operand_values: Vec<CounterValue> =
                        samples.iter().map(|s| self.value(s)).collect();
                    let first = operand_values.first();
                    values.push(CounterValue {
                        name: name.clone(),
                        value: op
                            .apply(&operand_values.iter().map(|v| v.value).collect::<Vec<_>>()),
                        unit: match op {
                            Op::Add | Op::Subtract => first.map_or("", |v| v.unit),
                            Op::Multiply | Op::Divide => "",
                        },
                        time: operand_values.iter().map(|v| v.time).fold(0.0, f64::max),
                        sequence: self.sequence,
                        kind: first.map_or(CounterKind::Level, |v| v.kind),
                        histogram: None,
                    });
                }
                Item::Statistics(stats) => values.extend(stats.values(self.sequence)),
            }
        }
        if reset {
            self.remember(sampled.into_iter().flatten());
        }
        Ok(values)
    }

    /// Makes the next evaluation start from the current values.
    pub async fn reset(&mut self) -> Result<(), CounterError> {
        let sampled = self.sample().await?;
        self.remember(sampled.into_iter().flatten());
        Ok(())
    }

    fn value(&self, s: &Sample) -> CounterValue {
        let base = self.baselines.get(&s.name);
        // A histogram's differences are taken once, for its buckets and
        // for its value (the number of samples).
        let (value, histogram) = match s.raw.histogram_since(base) {
            None => (s.raw.value_since(base), None),
            Some((counts, sum_ns)) => {
                // Checked when the set was made; a wildcard type gets the default.
                let params = s.name.split_once('@').map(|(_, p)| p);
                let spec = registry::get(&s.type_name)
                    .and_then(|t| t.histogram_spec(params).ok())
                    .unwrap_or(HistogramSpec::DEFAULT);
                let histogram = Histogram {
                    min: spec.min,
                    max: spec.max,
                    counts: spec.rebin(&counts),
                    sum: sum_ns as f64,
                };
                (counts.iter().sum::<u64>() as f64, Some(histogram))
            }
        };
        CounterValue {
            name: s.name.clone(),
            value,
            unit: registry::get(&s.type_name).map_or("", |t| t.unit),
            time: s.time,
            sequence: self.sequence,
            kind: kind_of(&s.raw),
            histogram,
        }
    }

    fn remember(&mut self, samples: impl Iterator<Item = Sample>) {
        for s in samples {
            self.baselines.insert(s.name, s.raw);
        }
        for item in &self.items {
            if let Item::Statistics(stats) = item {
                stats.reset();
            }
        }
    }

    /// The counter names the localities must sample, in item order.
    fn sampled_names(&self) -> Vec<&CounterName> {
        let mut names = Vec::new();
        for item in &self.items {
            match item {
                Item::Plain(name) => names.push(name),
                Item::Arithmetic { operands, .. } => names.extend(operands),
                Item::Statistics(_) => {}
            }
        }
        names
    }

    /// Asks every locality involved for its samples, all at once. Returns
    /// one list per name of [`sampled_names`](Self::sampled_names), each in
    /// locality order.
    async fn sample(&self) -> Result<Vec<Vec<Sample>>, CounterError> {
        let names = self.sampled_names();
        // (locality, [(index of the name, concrete name)])
        let mut per_locality: Vec<(LocalityId, Vec<(usize, String)>)> = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let localities: Vec<LocalityId> = match name.locality {
                Index::At(l) => vec![LocalityId::new(l)],
                Index::All => self.rt.localities().collect(),
            };
            for l in localities {
                let mut concrete = (*name).clone();
                concrete.locality = Index::At(l.get());
                match per_locality.iter_mut().find(|(x, _)| *x == l) {
                    Some((_, list)) => list.push((i, concrete.to_string())),
                    None => per_locality.push((l, vec![(i, concrete.to_string())])),
                }
            }
        }
        per_locality.sort_by_key(|(l, _)| *l);
        let calls: Vec<_> = per_locality
            .into_iter()
            .map(|(l, list)| {
                let strings = list.iter().map(|(_, n)| n.clone()).collect();
                (list, self.rt.call(l, sample_counters, (strings,)))
            })
            .collect();
        let mut out: Vec<Vec<Sample>> = names.iter().map(|_| Vec::new()).collect();
        for (list, call) in calls {
            for ((i, name), result) in list.into_iter().zip(call.await?) {
                out[i].extend(result.map_err(|reason| CounterError::NotFound { name, reason })?);
            }
        }
        Ok(out)
    }
}

/// Samples counters of the locality it runs on: the remote half of
/// [`CounterSet::evaluate`]. One result per name, in order.
#[crate::action]
fn sample_counters(names: Vec<String>) -> Vec<Result<Vec<Sample>, String>> {
    let rt = crate::runtime::current();
    let sources = Sources::read(rt.metrics());
    names
        .iter()
        .map(|name| {
            let name = CounterName::parse(name).map_err(|e| e.0)?;
            registry::sample(&sources, &name)
        })
        .collect()
}
