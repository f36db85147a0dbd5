//! Derived counters, computed by the querying side from other counters:
//!
//! ```text
//! /arithmetics/add@NAME,NAME...        sum of the operands' values
//! /arithmetics/subtract@NAME,NAME...   first minus the others
//! /arithmetics/multiply@NAME,NAME...   product
//! /arithmetics/divide@NAME,NAME...     first divided by the others
//! /statistics{NAME}/STAT@INTERVAL_MS[,WINDOW]
//!     STAT: average, min, max, stddev, rolling_average
//! ```
//!
//! An operand with wildcards contributes every counter it matches, so
//! `/arithmetics/add@/parcels{locality#*/total}/count/sent` is the job's
//! total. A statistics counter samples `NAME` every `INTERVAL_MS` on a
//! thread of its own and summarises the values collected since the set was
//! created or reset; `WINDOW` keeps only the last that many values (for
//! `rolling_average` it defaults to 10).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use parking_lot::Mutex;

use super::name::{CounterName, ParseError};
use super::value::{CounterKind, CounterValue};
use crate::sched::spawn_unbound;

/// An arithmetic operation over counter values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Subtract,
    Multiply,
    Divide,
}

impl Op {
    /// Folds the operands' values (at least one).
    pub(crate) fn apply(self, values: &[f64]) -> f64 {
        let Some((&first, rest)) = values.split_first() else {
            return 0.0;
        };
        rest.iter().fold(first, |acc, &v| match self {
            Op::Add => acc + v,
            Op::Subtract => acc - v,
            Op::Multiply => acc * v,
            Op::Divide if v == 0.0 => 0.0,
            Op::Divide => acc / v,
        })
    }
}

/// A summary of a series of values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stat {
    Average,
    Min,
    Max,
    Stddev,
    RollingAverage,
}

impl Stat {
    fn of(self, values: &VecDeque<f64>) -> f64 {
        if values.is_empty() {
            return 0.0;
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        match self {
            Stat::Average | Stat::RollingAverage => mean,
            Stat::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
            Stat::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            Stat::Stddev => {
                (values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n).sqrt()
            }
        }
    }
}

/// A derived counter request, parsed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Derived {
    Arithmetic {
        op: Op,
        operands: Vec<CounterName>,
    },
    Statistics {
        stat: Stat,
        base: CounterName,
        interval: Duration,
        window: Option<usize>,
    },
}

/// Splits `text` at commas that are not inside braces.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// Parses a derived counter name; `Ok(None)` if `name` is not one.
pub(crate) fn parse(name: &str) -> Result<Option<Derived>, ParseError> {
    let name = name.trim();
    if let Some(rest) = name.strip_prefix("/arithmetics/") {
        let (op, operands) = rest
            .split_once('@')
            .ok_or_else(|| ParseError("arithmetics counters need operands: `@NAME,NAME`".into()))?;
        let op = match op {
            "add" => Op::Add,
            "subtract" => Op::Subtract,
            "multiply" => Op::Multiply,
            "divide" => Op::Divide,
            other => {
                return Err(ParseError(format!(
                    "`{other}` is not add, subtract, multiply or divide"
                )));
            }
        };
        let operands = split_top_level(operands)
            .into_iter()
            .map(CounterName::parse)
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Some(Derived::Arithmetic { op, operands }));
    }
    let Some(rest) = name.strip_prefix("/statistics{") else {
        return Ok(None);
    };
    let mut depth = 1;
    let close = rest
        .char_indices()
        .find(|&(_, c)| {
            depth += match c {
                '{' => 1,
                '}' => -1,
                _ => 0,
            };
            depth == 0
        })
        .map(|(i, _)| i)
        .ok_or_else(|| ParseError("`/statistics{` without its closing `}`".into()))?;
    let base = CounterName::parse(&rest[..close])?;
    let tail = rest[close + 1..]
        .strip_prefix('/')
        .ok_or_else(|| ParseError("expected `/STAT@INTERVAL_MS` after the counter".into()))?;
    let (stat, params) = tail
        .split_once('@')
        .ok_or_else(|| ParseError("statistics counters need `@INTERVAL_MS[,WINDOW]`".into()))?;
    let stat = match stat {
        "average" => Stat::Average,
        "min" => Stat::Min,
        "max" => Stat::Max,
        "stddev" => Stat::Stddev,
        "rolling_average" => Stat::RollingAverage,
        other => {
            return Err(ParseError(format!(
                "`{other}` is not average, min, max, stddev or rolling_average"
            )));
        }
    };
    let mut params = params.split(',');
    let interval: u64 = params
        .next()
        .and_then(|p| p.trim().parse().ok())
        .filter(|&ms| ms > 0)
        .ok_or_else(|| {
            ParseError("the sampling interval must be a positive number of ms".into())
        })?;
    let window = match params.next() {
        Some(w) => Some(
            w.trim()
                .parse::<usize>()
                .ok()
                .filter(|&w| w > 0)
                .ok_or_else(|| ParseError(format!("`{w}` is not a positive window length")))?,
        ),
        None if stat == Stat::RollingAverage => Some(10),
        None => None,
    };
    Ok(Some(Derived::Statistics {
        stat,
        base,
        interval: Duration::from_millis(interval),
        window,
    }))
}

/// The values a statistics counter collected, per concrete base counter.
#[derive(Debug, Default)]
struct Series {
    /// (name, unit, values, time of the last sample)
    by_name: Vec<(String, &'static str, VecDeque<f64>, f64)>,
}

/// A running statistics counter: a thread sampling its base counter.
#[derive(Debug)]
pub(crate) struct Statistics {
    name: String,
    stat: Stat,
    series: Arc<Mutex<Series>>,
    /// Tells the sampling thread to end. It is never joined: a set may be
    /// dropped on the very worker the thread's current sample needs.
    stop: Arc<AtomicBool>,
}

impl Statistics {
    /// Starts sampling every `interval` into a window of `window`:
    /// `sample` evaluates the base counters (`None` ends the sampling).
    pub(crate) fn start(
        name: String,
        stat: Stat,
        mut sample: impl FnMut() -> Option<Vec<CounterValue>> + Send + 'static,
        interval: Duration,
        window: Option<usize>,
    ) -> Self {
        let series = Arc::new(Mutex::new(Series::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (series2, stop2) = (Arc::clone(&series), Arc::clone(&stop));
        let thread = thread::Builder::new().name("courier-statistics".into());
        let spawned = spawn_unbound(thread, move || {
            while !stop2.load(Ordering::Acquire) {
                let Some(values) = sample() else {
                    return;
                };
                if stop2.load(Ordering::Acquire) {
                    return;
                }
                record(&mut series2.lock(), &values, window);
                thread::sleep(interval);
            }
        });
        if let Err(e) = spawned {
            // The counter then stays at its first value of 0.
            tracing::error!("counters: cannot start the sampler of {name}: {e}");
        }
        Statistics {
            name,
            stat,
            series,
            stop,
        }
    }

    /// The summary of each base counter, named after this counter.
    /// Before the first sample arrives, one value of 0.
    pub(crate) fn values(&self, sequence: u64) -> Vec<CounterValue> {
        let series = self.series.lock();
        if series.by_name.is_empty() {
            return vec![CounterValue {
                name: self.name.clone(),
                value: 0.0,
                unit: "",
                time: 0.0,
                sequence,
                kind: CounterKind::Level,
                histogram: None,
            }];
        }
        series
            .by_name
            .iter()
            .map(|(base, unit, values, time)| CounterValue {
                name: if series.by_name.len() == 1 {
                    self.name.clone()
                } else {
                    format!("{}[{base}]", self.name)
                },
                value: self.stat.of(values),
                unit,
                time: *time,
                sequence,
                kind: CounterKind::Level,
                histogram: None,
            })
            .collect()
    }

    /// Forgets the values collected so far.
    pub(crate) fn reset(&self) {
        for (_, _, values, _) in &mut self.series.lock().by_name {
            values.clear();
        }
    }
}

fn record(series: &mut Series, values: &[CounterValue], window: Option<usize>) {
    for v in values {
        let entry = match series.by_name.iter_mut().position(|(n, ..)| *n == v.name) {
            Some(i) => &mut series.by_name[i],
            None => {
                series
                    .by_name
                    .push((v.name.clone(), v.unit, VecDeque::new(), v.time));
                series.by_name.last_mut().expect("just pushed")
            }
        };
        entry.2.push_back(v.value);
        entry.3 = v.time;
        if let Some(w) = window {
            while entry.2.len() > w {
                entry.2.pop_front();
            }
        }
    }
}

impl Drop for Statistics {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_operands_may_hold_braces_and_commas() {
        let Some(Derived::Arithmetic { op, operands }) = parse(
            "/arithmetics/divide@/threads{locality#0/total}/time/cumulative,/threads{locality#0/total}/count/cumulative",
        )
        .unwrap() else {
            panic!("not arithmetic");
        };
        assert_eq!(op, Op::Divide);
        assert_eq!(operands.len(), 2);
        assert_eq!(operands[1].type_name(), "/threads/count/cumulative");
        assert!(
            parse("/arithmetics/pow@/a/b")
                .unwrap_err()
                .0
                .contains("pow")
        );
        assert!(parse("/threads/count/cumulative").unwrap().is_none());
    }

    #[test]
    fn statistics_names_nest_a_counter_name() {
        let Some(Derived::Statistics {
            stat,
            base,
            interval,
            window,
        }) = parse("/statistics{/threads{locality#1/total}/idle-rate}/rolling_average@50").unwrap()
        else {
            panic!("not statistics");
        };
        assert_eq!(
            (stat, interval, window),
            (Stat::RollingAverage, Duration::from_millis(50), Some(10))
        );
        assert_eq!(base.to_string(), "/threads{locality#1/total}/idle-rate");
        assert!(
            parse("/statistics{/a/b}/median@10")
                .unwrap_err()
                .0
                .contains("median")
        );
        assert!(
            parse("/statistics{/a/b}/max@0")
                .unwrap_err()
                .0
                .contains("interval")
        );
        assert!(parse("/statistics{/a/b/max@10").is_err());
    }

    #[test]
    fn folds_and_summaries() {
        assert_eq!(Op::Add.apply(&[1.0, 2.0, 3.0]), 6.0);
        assert_eq!(Op::Subtract.apply(&[10.0, 2.0, 3.0]), 5.0);
        assert_eq!(Op::Multiply.apply(&[2.0, 3.0]), 6.0);
        assert_eq!(Op::Divide.apply(&[6.0, 3.0]), 2.0);
        assert_eq!(Op::Divide.apply(&[6.0, 0.0]), 0.0);
        let values: VecDeque<f64> = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0].into();
        assert_eq!(Stat::Average.of(&values), 5.0);
        assert_eq!(Stat::Stddev.of(&values), 2.0);
        assert_eq!(Stat::Min.of(&values), 2.0);
        assert_eq!(Stat::Max.of(&values), 9.0);
        assert_eq!(Stat::Max.of(&VecDeque::new()), 0.0);
    }
}
