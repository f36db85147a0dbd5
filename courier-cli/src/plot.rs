//! `courier plot`: figures from a `courier sweep` CSV, drawn as SVG with
//! `plotters`: a heat map (Wagle et al. 2018 Fig. 8), lines per series (Fig. 5) and
//! a scatter plot with Pearson's coefficient (Figs. 4 and 7). Repeated
//! measurements of one point are reduced to their median.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::colors::colormaps::ViridisRGB;

/// The rows of a sweep CSV, each a map from column to value.
#[derive(Debug)]
pub(crate) struct Table {
    rows: Vec<BTreeMap<String, String>>,
}

impl Table {
    /// Reads `path`, keeping the rows whose columns match every `filter`
    /// (`column=value`).
    pub(crate) fn read(path: &Path, filters: &[String]) -> Result<Table, String> {
        let fail = |e: csv::Error| format!("{}: {e}", path.display());
        let mut reader = csv::Reader::from_path(path).map_err(fail)?;
        let headers = reader.headers().map_err(fail)?.clone();
        let mut filter_pairs = Vec::new();
        for f in filters {
            let (k, v) = f
                .split_once('=')
                .ok_or_else(|| format!("filter `{f}` is not COLUMN=VALUE"))?;
            if !headers.iter().any(|h| h == k) {
                return Err(format!("filter `{f}`: no column `{k}`"));
            }
            filter_pairs.push((k.to_owned(), v.to_owned()));
        }
        let mut rows = Vec::new();
        for record in reader.records() {
            let record = record.map_err(fail)?;
            let row: BTreeMap<String, String> = headers
                .iter()
                .zip(record.iter())
                .map(|(h, v)| (h.to_owned(), v.to_owned()))
                .collect();
            if filter_pairs.iter().all(|(k, v)| row.get(k) == Some(v)) {
                rows.push(row);
            }
        }
        if rows.is_empty() {
            return Err(format!("{}: no rows (after filters)", path.display()));
        }
        Ok(Table { rows })
    }

    /// The numeric value of `column` in every row.
    fn numbers(&self, column: &str) -> Result<Vec<f64>, String> {
        self.rows
            .iter()
            .map(|row| {
                let text = row
                    .get(column)
                    .ok_or_else(|| format!("no column `{column}`"))?;
                text.parse()
                    .map_err(|_| format!("column `{column}`: `{text}` is not a number"))
            })
            .collect()
    }

    /// Medians of `value` grouped by the numeric `keys` columns.
    fn medians(&self, keys: &[&str], value: &str) -> Result<BTreeMap<Vec<Key>, f64>, String> {
        let values = self.numbers(value)?;
        let keys: Vec<Vec<f64>> = keys
            .iter()
            .map(|k| self.numbers(k))
            .collect::<Result<_, _>>()?;
        let mut groups: BTreeMap<Vec<Key>, Vec<f64>> = BTreeMap::new();
        for (i, v) in values.into_iter().enumerate() {
            let key = keys.iter().map(|k| Key(k[i])).collect();
            groups.entry(key).or_default().push(v);
        }
        Ok(groups
            .into_iter()
            .map(|(k, mut vs)| (k, median(&mut vs)))
            .collect())
    }
}

/// A number usable as an ordered map key (the CSV holds no NaN we keep).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Key(f64);

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The median of `values` (the mean of the middle two for an even count).
pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Spearman's rank correlation: Pearson's coefficient of the ranks (ties
/// get their mean rank). It says how monotonic the relation is, where
/// Pearson's says how straight.
pub(crate) fn spearman(x: &[f64], y: &[f64]) -> f64 {
    fn ranks(v: &[f64]) -> Vec<f64> {
        let mut order: Vec<usize> = (0..v.len()).collect();
        order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
        let mut ranks = vec![0.0; v.len()];
        let mut i = 0;
        while i < order.len() {
            let mut j = i;
            while j + 1 < order.len() && v[order[j + 1]] == v[order[i]] {
                j += 1;
            }
            let rank = (i + j) as f64 / 2.0 + 1.0;
            for &k in &order[i..=j] {
                ranks[k] = rank;
            }
            i = j + 1;
        }
        ranks
    }
    pearson(&ranks(x), &ranks(y))
}

/// Pearson's correlation coefficient of the pairs (x, y).
pub(crate) fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    sxy / (sxx * syy).sqrt()
}

fn draw_error(e: impl std::fmt::Display) -> String {
    format!("drawing failed: {e}")
}

/// A number as an axis label: integers without decimals.
fn label(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Heat map of the median `value` per (`x`, `y`), cells in the order of the
/// distinct values (Wagle et al. 2018 Fig. 8).
pub(crate) fn heatmap(
    table: &Table,
    x: &str,
    y: &str,
    value: &str,
    title: &str,
    out: &Path,
) -> Result<(), String> {
    let cells = table.medians(&[x, y], value)?;
    let xs: Vec<Key> = dedup(cells.keys().map(|k| k[0]));
    let ys: Vec<Key> = dedup(cells.keys().map(|k| k[1]));
    let (lo, hi) = cells
        .values()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    let root = SVGBackend::new(out, (900, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..xs.len() as f64, 0f64..ys.len() as f64)
        .map_err(draw_error)?;
    let x_label = |v: &f64| {
        xs.get(v.floor() as usize)
            .filter(|_| v.fract() > 0.4)
            .map_or(String::new(), |k| label(k.0))
    };
    let y_label = |v: &f64| {
        ys.get(v.floor() as usize)
            .filter(|_| v.fract() > 0.4)
            .map_or(String::new(), |k| label(k.0))
    };
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(xs.len() * 2 + 1)
        .y_labels(ys.len() * 2 + 1)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .x_desc(x)
        .y_desc(y)
        .draw()
        .map_err(draw_error)?;
    let index = |keys: &[Key], k: Key| keys.iter().position(|&v| v == k).unwrap_or(0) as f64;
    chart
        .draw_series(cells.iter().map(|(k, &v)| {
            let (i, j) = (index(&xs, k[0]), index(&ys, k[1]));
            let color = ViridisRGB::get_color_normalized(v, lo, hi.max(lo + f64::EPSILON));
            Rectangle::new([(i, j), (i + 1.0, j + 1.0)], color.filled())
        }))
        .map_err(draw_error)?;
    chart
        .draw_series(cells.iter().map(|(k, &v)| {
            let (i, j) = (index(&xs, k[0]), index(&ys, k[1]));
            let light = (v - lo) / (hi - lo).max(f64::EPSILON) < 0.5;
            let color = if light { WHITE } else { BLACK };
            Text::new(
                format!("{v:.3}"),
                (i + 0.15, j + 0.6),
                ("sans-serif", 13).into_font().color(&color),
            )
        }))
        .map_err(draw_error)?;
    root.present().map_err(draw_error)
}

fn dedup(keys: impl Iterator<Item = Key>) -> Vec<Key> {
    let mut v: Vec<Key> = keys.collect();
    v.sort();
    v.dedup();
    v
}

/// One line per value of `series`: the median `y` at each `x` (Wagle et al. 2018
/// Fig. 5), with a logarithmic x axis when `log_x`.
pub(crate) fn lines(
    table: &Table,
    x: &str,
    y: &str,
    series: &str,
    log_x: bool,
    title: &str,
    out: &Path,
) -> Result<(), String> {
    let points = table.medians(&[series, x], y)?;
    let mut by_series: BTreeMap<Key, Vec<(f64, f64)>> = BTreeMap::new();
    for (k, v) in &points {
        by_series.entry(k[0]).or_default().push((k[1].0, *v));
    }
    let xs: Vec<f64> = points.keys().map(|k| k[1].0).collect();
    let (x_lo, x_hi) = span(&xs);
    let (_, y_hi) = span(&points.values().copied().collect::<Vec<_>>());
    let root = SVGBackend::new(out, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(70);
    if log_x {
        if x_lo <= 0.0 {
            return Err(format!("--log-x needs positive `{x}` values"));
        }
        let mut chart = builder
            .build_cartesian_2d((x_lo..x_hi).log_scale(), 0f64..y_hi * 1.1)
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .x_desc(x)
            .y_desc(y)
            .x_label_formatter(&|v| label(*v))
            .draw()
            .map_err(draw_error)?;
        draw_lines(&mut chart, &by_series, series)?;
    } else {
        let mut chart = builder
            .build_cartesian_2d(x_lo..x_hi, 0f64..y_hi * 1.1)
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .x_desc(x)
            .y_desc(y)
            .draw()
            .map_err(draw_error)?;
        draw_lines(&mut chart, &by_series, series)?;
    }
    root.present().map_err(draw_error)
}

/// Draws one line with markers per series, and a legend when there are several.
fn draw_lines<'a, X>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, RangedCoordf64>>,
    by_series: &BTreeMap<Key, Vec<(f64, f64)>>,
    series: &str,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    for (n, (name, pts)) in by_series.iter().enumerate() {
        let color = Palette99::pick(n).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(draw_error)?
            .label(format!("{series} {}", label(name.0)))
            .legend(move |(a, b)| PathElement::new([(a, b), (a + 20, b)], color));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(draw_error)?;
    }
    if by_series.len() > 1 {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(draw_error)?;
    }
    Ok(())
}

fn span(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        })
}

/// Every row as a point (`x`, `y`); returns Pearson's and Spearman's
/// coefficients, which the title also shows (Wagle et al. 2018 Figs. 4 and 7).
pub(crate) fn scatter(
    table: &Table,
    x: &str,
    y: &str,
    title: &str,
    out: &Path,
) -> Result<(f64, f64), String> {
    let xs = table.numbers(x)?;
    let ys = table.numbers(y)?;
    let r = pearson(&xs, &ys);
    let rho = spearman(&xs, &ys);
    let (x_lo, x_hi) = span(&xs);
    let (y_lo, y_hi) = span(&ys);
    let pad = |lo: f64, hi: f64| ((hi - lo) * 0.05).max(1e-9);
    let root = SVGBackend::new(out, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{title} (Pearson r = {r:.3}, Spearman ρ = {rho:.3}, n = {})",
                xs.len()
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (x_lo - pad(x_lo, x_hi))..(x_hi + pad(x_lo, x_hi)),
            (y_lo - pad(y_lo, y_hi)).max(0.0)..(y_hi + pad(y_lo, y_hi)),
        )
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc(x)
        .y_desc(y)
        .draw()
        .map_err(draw_error)?;
    chart
        .draw_series(
            xs.iter()
                .zip(&ys)
                .map(|(&a, &b)| Circle::new((a, b), 4, BLUE.mix(0.6).filled())),
        )
        .map_err(draw_error)?;
    root.present().map_err(draw_error)?;
    Ok((r, rho))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_pearson() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!((pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]) - 1.0).abs() < 1e-12);
        assert!((pearson(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        assert!(pearson(&[1.0, 2.0, 3.0, 4.0], &[1.0, 3.0, 2.0, 1.0]).abs() < 0.5);
        // Monotonic but curved: Spearman 1, Pearson below 1.
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let y = [1.0, 2.0, 4.0, 8.0, 100.0];
        assert!((spearman(&x, &y) - 1.0).abs() < 1e-12);
        assert!(pearson(&x, &y) < 0.9);
        assert!((spearman(&[1.0, 1.0, 2.0], &[5.0, 5.0, 9.0]) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn figures_are_drawn_from_a_csv() {
        let dir = std::env::temp_dir().join(format!("courier-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("in.csv");
        let mut text = String::from("n,i,run,phase,seconds,n_oh\n");
        for n in [1, 2, 4] {
            for i in [10, 100] {
                for run in 1..=2 {
                    let s = 1.0 / f64::from(n) + f64::from(i) / 1000.0 + f64::from(run) * 0.01;
                    text.push_str(&format!("{n},{i},{run},1,{s},{}\n", s / 2.0));
                }
            }
        }
        std::fs::write(&csv, text).unwrap();
        let table = Table::read(&csv, &["phase=1".into()]).unwrap();
        heatmap(&table, "n", "i", "seconds", "t", &dir.join("h.svg")).unwrap();
        lines(&table, "n", "seconds", "i", true, "t", &dir.join("l.svg")).unwrap();
        let (r, rho) = scatter(&table, "n_oh", "seconds", "t", &dir.join("s.svg")).unwrap();
        assert!((r - 1.0).abs() < 1e-9 && (rho - 1.0).abs() < 1e-9);
        for f in ["h.svg", "l.svg", "s.svg"] {
            let svg = std::fs::read_to_string(dir.join(f)).unwrap();
            assert!(svg.starts_with("<svg") && svg.len() > 1000, "{f}");
        }
        assert!(Table::read(&csv, &["phase=9".into()]).is_err());
        assert!(
            Table::read(&csv, &["nope=1".into()])
                .unwrap_err()
                .contains("no column")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
