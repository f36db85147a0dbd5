//! What a counter query gives: [`CounterValue`], its [`CounterKind`], and
//! [`Histogram`] values.

use serde::Serialize;

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
    /// For histogram counters, the buckets; `value` is then the count.
    pub histogram: Option<Histogram>,
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
    /// A histogram: see [`CounterValue::histogram`]; after a reset, the
    /// counts since.
    Histogram,
}

/// The buckets of a histogram counter (`@min,max,buckets`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Histogram {
    /// Lower edge of the first bucket, in the counter's unit.
    pub min: f64,
    /// Upper edge of the last bucket.
    pub max: f64,
    /// `buckets + 2` counts: below `min`, each bucket, at or above `max`.
    /// Workers bin in powers of two and a count is spread evenly over its
    /// power-of-two range, so counts can be fractional.
    pub counts: Vec<f64>,
    /// Sum of the recorded values, in the counter's unit.
    pub sum: f64,
}

impl Histogram {
    /// The value below which a fraction `q` (0 to 1) of the samples lie,
    /// interpolated linearly inside a bucket; `min` or `max` when it falls
    /// in the bucket below or above the range, NaN without samples.
    ///
    /// ```
    /// # use courier::counters::Histogram;
    /// # fn check(h: &Histogram) {
    /// let median = h.quantile(0.5);
    /// # }
    /// ```
    pub fn quantile(&self, q: f64) -> f64 {
        let total: f64 = self.counts.iter().sum();
        if total <= 0.0 || self.counts.len() < 2 {
            return f64::NAN;
        }
        let inner = self.counts.len() - 2;
        let width = (self.max - self.min) / inner as f64;
        let target = q.clamp(0.0, 1.0) * total;
        let mut seen = 0.0;
        for (i, &count) in self.counts.iter().enumerate() {
            if count > 0.0 && seen + count >= target {
                return match i {
                    0 => self.min,
                    i if i == inner + 1 => self.max,
                    i => {
                        let lo = self.min + (i - 1) as f64 * width;
                        lo + width * ((target - seen) / count).clamp(0.0, 1.0)
                    }
                };
            }
            seen += count;
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::Histogram;

    #[test]
    fn quantiles_interpolate_inside_buckets() {
        // 0..10 in 10 buckets: one sample below, ten spread evenly, one above.
        let mut counts = vec![1.0];
        counts.extend([1.0; 10]);
        counts.push(1.0);
        let h = Histogram {
            min: 0.0,
            max: 10.0,
            counts,
            sum: 0.0,
        };
        assert_eq!(h.quantile(0.5), 5.0);
        assert_eq!(h.quantile(0.0), 0.0);
        assert_eq!(h.quantile(1.0), 10.0);
        assert!((h.quantile(0.25) - 2.0).abs() < 1e-9);
        let empty = Histogram {
            counts: vec![0.0; 12],
            ..h
        };
        assert!(empty.quantile(0.5).is_nan());
    }
}
