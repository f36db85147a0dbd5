//! The Prometheus text exposition format of the counters, as served by
//! the `http` module (`--counters-http ADDR`, then scrape
//! `http://ADDR/metrics`).
//!
//! Every counter of every locality is served: `total` instances and, for
//! per-worker counters, every `worker-thread#K`. A counter name maps to a
//! metric name the Prometheus way:
//!
//! ```text
//! /threads{locality#0/worker-thread#1}/time/cumulative
//!   -> courier_threads_time_cumulative_seconds_total{locality="0",instance="worker-thread#1"}
//! ```
//!
//! `-` and `/` become `_`; times are converted from ns to seconds (suffix
//! `_seconds`), bytes get `_bytes`, cumulative counters are of type
//! `counter` with suffix `_total`, all others are `gauge`s.

use std::fmt::Write as _;

use super::name::{CounterName, Index, Instance};
use super::registry;
use super::value::{CounterKind, CounterValue, Histogram};

/// The counters every scrape evaluates.
pub(super) const SCRAPED: [&str; 2] =
    ["/*{locality#*/total}/*", "/*{locality#*/worker-thread#*}/*"];

/// The counters scraped once per action, with an `action` label.
pub(super) const PER_ACTION: [&str; 6] = [
    "/parcels{locality#*/total}/count/*",
    "/data{locality#*/total}/count/*",
    "/coalescing{locality#*/total}/count/*",
    "/coalescing{locality#*/total}/time/average-parcel-arrival",
    "/coalescing{locality#*/total}/time/parcel-arrival-histogram",
    "/coalescing{locality#*/total}/parameter/*",
];

/// The metric-name suffix of a counter unit, and the factor from the
/// counter's unit to the metric's (Prometheus wants seconds, not ns).
fn unit_suffix_and_scale(unit: &str) -> (&'static str, f64) {
    match unit {
        "ns" => ("_seconds", 1e-9),
        "us" => ("_seconds", 1e-6),
        "s" => ("_seconds", 1.0),
        "B" => ("_bytes", 1.0),
        _ => ("", 1.0),
    }
}

/// The metric name, the label set, and the value in the metric's unit.
fn metric(value: &CounterValue) -> Option<(String, String, f64)> {
    let name = CounterName::parse(&value.name).ok()?;
    let mut metric = format!("courier_{}_{}", name.object, name.counter).replace(['/', '-'], "_");
    if value.kind == CounterKind::Histogram {
        // Prometheus names say the type in `# TYPE`, not in the name.
        if let Some(stem) = metric.strip_suffix("_histogram") {
            metric.truncate(stem.len());
        }
    }
    let (suffix, scale) = unit_suffix_and_scale(value.unit);
    metric.push_str(suffix);
    if value.kind == CounterKind::Cumulative {
        metric.push_str("_total");
    }
    let v = value.value * scale;
    let Index::At(locality) = name.locality else {
        return None;
    };
    let instance = match name.instance {
        Instance::Total => "total".to_owned(),
        other => other.to_string(),
    };
    let mut labels = format!("locality=\"{locality}\",instance=\"{instance}\"");
    if let Some(action) = name.parameters.as_deref().filter(|p| !p.contains(',')) {
        let _ = write!(
            labels,
            ",action=\"{}\"",
            action.replace('\\', "\\\\").replace('"', "\\\"")
        );
    }
    Some((metric, labels, v))
}

/// Renders values in the text exposition format, one family per metric
/// with its HELP and TYPE lines.
pub(crate) fn exposition(values: &[CounterValue]) -> String {
    let mut rows: Vec<(String, String, f64, &CounterValue)> = values
        .iter()
        .filter_map(|v| metric(v).map(|(m, l, x)| (m, l, x, v)))
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let mut out = String::new();
    let mut family = "";
    for (metric, labels, value, original) in &rows {
        if metric != family {
            let help = CounterName::parse(&original.name)
                .ok()
                .and_then(|n| registry::get(&n.type_name()))
                .map_or("", |t| t.help);
            let kind = match original.kind {
                CounterKind::Cumulative => "counter",
                CounterKind::Histogram => "histogram",
                _ => "gauge",
            };
            let _ = writeln!(out, "# HELP {metric} {}", help.replace('\\', "\\\\"));
            let _ = writeln!(out, "# TYPE {metric} {kind}");
            family = metric;
        }
        match &original.histogram {
            Some(h) => {
                let (_, scale) = unit_suffix_and_scale(original.unit);
                write_histogram(&mut out, metric, labels, h, scale);
            }
            None => {
                let _ = writeln!(out, "{metric}{{{labels}}} {value}");
            }
        }
    }
    out
}

/// The `_bucket`, `_sum` and `_count` lines of one histogram; `scale`
/// converts the counter's unit to the metric's.
fn write_histogram(out: &mut String, metric: &str, labels: &str, h: &Histogram, scale: f64) {
    let buckets = h.counts.len() - 2;
    let width = (h.max - h.min) / buckets as f64;
    let mut cumulative = 0.0;
    for (i, count) in h.counts[..=buckets].iter().enumerate() {
        cumulative += count;
        let edge = (h.min + i as f64 * width) * scale;
        let _ = writeln!(
            out,
            "{metric}_bucket{{{labels},le=\"{edge}\"}} {cumulative}"
        );
    }
    let total: f64 = h.counts.iter().sum();
    let _ = writeln!(out, "{metric}_bucket{{{labels},le=\"+Inf\"}} {total}");
    let _ = writeln!(out, "{metric}_sum{{{labels}}} {}", h.sum * scale);
    let _ = writeln!(out, "{metric}_count{{{labels}}} {total}");
}
