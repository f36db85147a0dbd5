//! `courier sweep`: runs a program over a grid of parameters, several runs
//! per point (round after round over the grid, so that the machine's drift
//! spreads over every point, each round starting the last parameter's
//! values one later), and writes every phase line it prints to one CSV
//! file.
//!
//! The program's arguments may hold `{NAME}` placeholders, replaced by the
//! value of parameter `NAME` at each grid point. A phase line is what the
//! Courier apps print: `phase N: key=value key=value ...`; each becomes a
//! CSV row of the grid values, the run, the phase and its keys.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// One swept parameter and its values.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Param {
    pub(crate) name: String,
    pub(crate) values: Vec<String>,
}

impl std::str::FromStr for Param {
    type Err = String;

    /// `NAME=V1,V2,...`
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, values) = s
            .split_once('=')
            .ok_or_else(|| format!("`{s}` is not NAME=V1,V2,..."))?;
        let values: Vec<String> = values
            .split(',')
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect();
        if name.is_empty() || values.is_empty() {
            return Err(format!("`{s}` needs a name and at least one value"));
        }
        Ok(Param {
            name: name.trim().to_owned(),
            values,
        })
    }
}

/// What `courier sweep` was asked to do.
#[derive(Debug)]
pub(crate) struct Sweep {
    pub(crate) params: Vec<Param>,
    pub(crate) runs: u32,
    pub(crate) out: PathBuf,
    pub(crate) timeout: Duration,
    pub(crate) program: Vec<OsString>,
}

/// One phase line of one run: (column, value) pairs.
type Row = Vec<(String, String)>;

/// Every point of the grid, the first parameter varying slowest.
fn grid(params: &[Param]) -> Vec<Vec<(String, String)>> {
    let mut points = vec![Vec::new()];
    for param in params {
        points = points
            .into_iter()
            .flat_map(|point| {
                param.values.iter().map(move |v| {
                    let mut p = point.clone();
                    p.push((param.name.clone(), v.clone()));
                    p
                })
            })
            .collect();
    }
    points
}

/// Replaces `{NAME}` with the point's values.
fn substitute(arg: &OsString, point: &[(String, String)]) -> OsString {
    let Some(text) = arg.to_str() else {
        return arg.clone();
    };
    let mut text = text.to_owned();
    for (name, value) in point {
        text = text.replace(&format!("{{{name}}}"), value);
    }
    OsString::from(text)
}

/// The phase lines of a program's output.
pub(crate) fn parse_phases(stdout: &str) -> Vec<Row> {
    stdout
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("phase ")?;
            let (phase, rest) = rest.split_once(':')?;
            let phase: u32 = phase.trim().parse().ok()?;
            let mut row = vec![("phase".to_owned(), phase.to_string())];
            row.extend(rest.split_whitespace().filter_map(|token| {
                let (k, v) = token.split_once('=')?;
                Some((k.to_owned(), v.to_owned()))
            }));
            Some(row)
        })
        .collect()
}

/// Runs `program` to completion within `timeout`; returns its stdout.
fn run_once(program: &[OsString], timeout: Duration) -> Result<String, String> {
    let (exe, args) = program.split_first().ok_or("no program to run")?;
    let mut child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.to_string_lossy()))?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("timed out after {timeout:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if !status.success() {
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!("exited with {status}: {}", tail.join(" | ")));
    }
    Ok(out)
}

/// Writes `rows` as CSV with the columns in order of first appearance.
pub(crate) fn write_csv(path: &Path, rows: &[Row]) -> Result<(), String> {
    let mut columns: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    for (k, _) in rows.iter().flatten() {
        if seen.insert(k.clone()) {
            columns.push(k.clone());
        }
    }
    let mut writer =
        csv::Writer::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let fail = |e: csv::Error| format!("{}: {e}", path.display());
    writer.write_record(&columns).map_err(fail)?;
    for row in rows {
        let record = columns.iter().map(|c| {
            row.iter()
                .find(|(k, _)| k == c)
                .map_or("", |(_, v)| v.as_str())
        });
        writer.write_record(record).map_err(fail)?;
    }
    writer
        .flush()
        .map_err(|e| format!("{}: {e}", path.display()))
}

impl Sweep {
    /// Runs the sweep, writing the CSV as it goes (so that a failed run
    /// keeps what came before it); returns the number of rows.
    pub(crate) fn run(&self) -> Result<usize, String> {
        let points = grid(&self.params);
        let total = points.len() as u64 * u64::from(self.runs);
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} runs, eta {eta} {msg}")
                .expect("a valid template"),
        );
        let mut rows: Vec<Row> = Vec::new();
        // Round after round over the whole grid, so that the machine's
        // drift spreads over every point instead of biasing some; each
        // round starts the last parameter one value later, so that no
        // value always runs first or after the same neighbour.
        let last = self.params.last().map_or(1, |p| p.values.len());
        for run in 1..=self.runs {
            for index in round_order(points.len(), last, run) {
                let point = &points[index];
                let label: Vec<String> = point.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let label = label.join(" ");
                let program: Vec<OsString> =
                    self.program.iter().map(|a| substitute(a, point)).collect();
                bar.set_message(format!("{label} run {run}"));
                let started = Instant::now();
                let stdout = run_once(&program, self.timeout)
                    .map_err(|e| format!("{label} run {run}: {e}"))?;
                let phases = parse_phases(&stdout);
                if phases.is_empty() {
                    return Err(format!(
                        "{label} run {run}: the program printed no `phase N: key=value` line"
                    ));
                }
                for phase in phases {
                    let mut row = point.clone();
                    row.push(("run".to_owned(), run.to_string()));
                    row.extend(phase);
                    rows.push(row);
                }
                write_csv(&self.out, &rows)?;
                if bar.is_hidden() {
                    eprintln!(
                        "sweep: {}/{total} {label} run {run}: {:.2} s",
                        bar.position() + 1,
                        started.elapsed().as_secs_f64()
                    );
                }
                bar.inc(1);
            }
        }
        bar.finish_with_message(format!("done: {}", self.out.display()));
        Ok(rows.len())
    }
}

/// The order in which round `run` (from 1) visits a grid of `points`
/// points whose last parameter has `last` values (it varies fastest, see
/// [`grid`]): block after block of the other parameters' values, and in
/// each block the last parameter's values from its `run - 1`-th (modulo
/// `last`), wrapping around. The last parameter is what a sweep compares
/// (the settings of `bench/adapt-matrix.sh`): over `last` rounds, each of
/// its values runs once in each place of a block, so that one that runs
/// first (on a machine just woken) or after a heavy neighbour does so in
/// one round only.
fn round_order(points: usize, last: usize, run: u32) -> impl Iterator<Item = usize> {
    let last = last.clamp(1, points.max(1));
    let start = run.saturating_sub(1) as usize % last;
    (0..points).map(move |i| {
        let block = i - i % last;
        block + (start + i % last) % last
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_varies_the_last_parameter_fastest() {
        let params: Vec<Param> = ["a=1,2", "b=x,y,z"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let points = grid(&params);
        assert_eq!(points.len(), 6);
        assert_eq!(
            points[1],
            vec![("a".into(), "1".into()), ("b".into(), "y".into())]
        );
        assert!("a".parse::<Param>().is_err());
        assert!("a=".parse::<Param>().is_err());
    }

    #[test]
    fn each_round_starts_the_last_parameter_one_value_later() {
        // Two values of the first parameter, three of the last.
        let order = |run| round_order(6, 3, run).collect::<Vec<_>>();
        assert_eq!(order(1), [0, 1, 2, 3, 4, 5]);
        assert_eq!(order(2), [1, 2, 0, 4, 5, 3]);
        assert_eq!(order(3), [2, 0, 1, 5, 3, 4]);
        assert_eq!(order(4), order(1));
        // Over three rounds, each value of the last runs once in each place.
        for place in 0..6 {
            let mut at: Vec<usize> = (1..=3).map(|run| order(run)[place] % 3).collect();
            at.sort_unstable();
            assert_eq!(at, [0, 1, 2], "place {place}");
        }
        assert_eq!(round_order(0, 0, 5).count(), 0);
        assert_eq!(round_order(2, 1, 2).collect::<Vec<_>>(), [0, 1]);
    }

    #[test]
    fn placeholders_are_replaced_and_phase_lines_parsed() {
        let point = vec![("n".to_owned(), "4".to_owned())];
        assert_eq!(
            substitute(&OsString::from("--num-parcels={n}"), &point),
            "--num-parcels=4"
        );
        let rows = parse_phases(
            "toy: hello\nphase 2: seconds=0.5 n_oh=0.1 coalescing=bytes:a=1,b=2\nphase x: no\n",
        );
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0][0], ("phase".into(), "2".into()));
        assert_eq!(rows[0][3], ("coalescing".into(), "bytes:a=1,b=2".into()));
    }

    #[test]
    fn a_sweep_of_a_real_program_writes_its_rows() {
        let dir = std::env::temp_dir().join(format!("courier-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("out.csv");
        let sweep = Sweep {
            params: vec!["v=1,2".parse().unwrap()],
            runs: 2,
            out: out.clone(),
            timeout: Duration::from_secs(30),
            program: ["sh", "-c", "echo 'phase 1: seconds={v} x=\"a,b\"'"]
                .iter()
                .map(OsString::from)
                .collect(),
        };
        assert_eq!(sweep.run().unwrap(), 4);
        let text = std::fs::read_to_string(&out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "v,run,phase,seconds,x");
        assert_eq!(lines[1], "1,1,1,1,\"\"\"a,b\"\"\"");
        assert_eq!(lines[2], "2,1,1,2,\"\"\"a,b\"\"\"");
        // The second round starts at the second point.
        assert_eq!(lines[3], "2,2,1,2,\"\"\"a,b\"\"\"");
        assert_eq!(lines[4], "1,2,1,1,\"\"\"a,b\"\"\"");
        let failing = Sweep {
            program: ["sh", "-c", "echo oops >&2; exit 3"]
                .iter()
                .map(OsString::from)
                .collect(),
            ..sweep
        };
        let err = failing.run().unwrap_err();
        assert!(err.contains("v=1 run 1") && err.contains("oops"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
