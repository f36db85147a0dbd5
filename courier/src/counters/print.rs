//! The `--print-counter` family of options: sample counters periodically
//! and at the end of the job, and write them as text, CSV or JSON lines;
//! and `--list-counters`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use super::registry::TYPES;
use super::set::{CounterError, CounterSet};
use super::value::{CounterValue, Histogram};
use crate::runtime::Runtime;
use crate::sched::spawn_unbound;

/// How printed counter values look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[non_exhaustive]
pub enum CounterFormat {
    /// HPX's lines: `name,sequence,time,[s],value[,[unit]]`, and for
    /// histograms `,histogram=MIN:MAX:c0;c1;...` after them.
    #[default]
    Text,
    /// A header line, then `name,sequence,time_s,value,unit,histogram` per
    /// value (`histogram` is `MIN:MAX:c0;c1;...` or empty).
    Csv,
    /// One JSON object per value and line.
    Json,
}

/// What to print, where, and how often. Built by [`Config`](crate::Config)'s
/// `print_counter*` methods and the matching flags of
/// [`RuntimeArgs`](crate::RuntimeArgs).
#[derive(Debug, Clone, Default)]
pub(crate) struct PrintOptions {
    /// Counters printed as they are.
    pub(crate) names: Vec<String>,
    /// Counters printed and then reset, so each line covers one interval.
    pub(crate) reset_names: Vec<String>,
    /// Time between two prints; `None` prints only at the end.
    pub(crate) interval: Option<Duration>,
    /// A file, or standard output when `None`.
    pub(crate) destination: Option<PathBuf>,
    pub(crate) format: CounterFormat,
}

impl PrintOptions {
    pub(crate) fn is_active(&self) -> bool {
        !self.names.is_empty() || !self.reset_names.is_empty()
    }
}

/// Writes counter values in one format.
struct Writer {
    out: Box<dyn Write + Send>,
    format: CounterFormat,
    header_written: bool,
}

impl Writer {
    fn write(&mut self, values: &[CounterValue]) -> std::io::Result<()> {
        if self.format == CounterFormat::Csv && !self.header_written {
            writeln!(self.out, "name,sequence,time_s,value,unit,histogram")?;
            self.header_written = true;
        }
        for v in values {
            match self.format {
                CounterFormat::Text => {
                    write!(
                        self.out,
                        "{},{},{:.6},[s],{}",
                        v.name, v.sequence, v.time, v.value
                    )?;
                    if !v.unit.is_empty() {
                        write!(self.out, ",[{}]", v.unit)?;
                    }
                    if let Some(h) = &v.histogram {
                        write!(self.out, ",histogram={}", histogram_text(h))?;
                    }
                    writeln!(self.out)?;
                }
                CounterFormat::Csv => writeln!(
                    self.out,
                    "\"{}\",{},{:.6},{},{},{}",
                    v.name,
                    v.sequence,
                    v.time,
                    v.value,
                    v.unit,
                    v.histogram.as_ref().map(histogram_text).unwrap_or_default()
                )?,
                CounterFormat::Json => {
                    let line = serde_json::to_string(v).map_err(std::io::Error::other)?;
                    writeln!(self.out, "{line}")?;
                }
            }
        }
        self.out.flush()
    }
}

/// `MIN:MAX:c0;c1;...`: a histogram in one comma-free field.
fn histogram_text(h: &Histogram) -> String {
    let counts: Vec<String> = h.counts.iter().map(ToString::to_string).collect();
    format!("{}:{}:{}", h.min, h.max, counts.join(";"))
}

/// Prints counters while the job runs and once more at its end.
#[derive(Debug)]
pub(crate) struct Printer {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
    state: std::sync::Arc<parking_lot::Mutex<PrinterState>>,
}

struct PrinterState {
    /// One set per name, so that a counter that cannot be read (a hardware
    /// event this machine lacks) leaves the others printing.
    sets: Vec<Watched>,
    writer: Writer,
}

/// One printed counter name.
struct Watched {
    name: String,
    set: CounterSet,
    reset: bool,
    /// Whether its failure was reported already (once is enough).
    failed: bool,
}

impl std::fmt::Debug for PrinterState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrinterState").finish_non_exhaustive()
    }
}

impl PrinterState {
    /// Prints every counter that can be read; reports each one that cannot,
    /// once. Fails only when the output cannot be written.
    fn print(&mut self) -> Result<(), String> {
        let mut values = Vec::new();
        for watched in &mut self.sets {
            match futures::executor::block_on(watched.set.evaluate(watched.reset)) {
                Ok(v) => values.extend(v),
                Err(e) if !watched.failed => {
                    watched.failed = true;
                    tracing::warn!("counters: {} is not printed: {e}", watched.name);
                }
                Err(_) => {}
            }
        }
        self.writer
            .write(&values)
            .map_err(|e| format!("writing counters: {e}"))
    }
}

impl Printer {
    /// Checks the names and opens the destination; starts the periodic
    /// thread if an interval is set.
    pub(crate) fn start(rt: &Runtime, options: &PrintOptions) -> Result<Printer, CounterError> {
        let mut sets = Vec::new();
        let names = options.names.iter().map(|n| (n, false));
        for (name, reset) in names.chain(options.reset_names.iter().map(|n| (n, true))) {
            let mut set = rt.counters([name])?;
            if name.trim_start().starts_with("/perf") {
                // Perf events count from their first read: read them now,
                // so that a print at the end covers the whole run.
                let _ = futures::executor::block_on(set.evaluate(false));
            }
            sets.push(Watched {
                name: name.clone(),
                set,
                reset,
                failed: false,
            });
        }
        let out: Box<dyn Write + Send> = match &options.destination {
            Some(path) => {
                Box::new(
                    std::fs::File::create(path).map_err(|e| CounterError::NotFound {
                        name: path.display().to_string(),
                        reason: format!("cannot create the counter output file: {e}"),
                    })?,
                )
            }
            None => Box::new(std::io::stdout()),
        };
        let state = std::sync::Arc::new(parking_lot::Mutex::new(PrinterState {
            sets,
            writer: Writer {
                out,
                format: options.format,
                header_written: false,
            },
        }));
        let mut printer = Printer {
            stop: None,
            thread: None,
            state: std::sync::Arc::clone(&state),
        };
        if let Some(interval) = options.interval {
            let (stop, stopped) = mpsc::channel();
            printer.stop = Some(stop);
            let thread = thread::Builder::new().name("courier-counters".into());
            printer.thread = spawn_unbound(thread, move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                    if let Err(e) = state.lock().print() {
                        tracing::error!("counters: {e}");
                        return;
                    }
                }
            })
            .ok();
        }
        Ok(printer)
    }

    /// Stops the periodic prints. Call when main returns: their queries
    /// are traffic, which would keep the job from ever looking idle.
    pub(crate) fn stop_periodic(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    /// Prints the final values (after the job went idle).
    pub(crate) fn finish(mut self) {
        self.stop_periodic();
        if let Err(e) = self.state.lock().print() {
            tracing::error!("counters: {e}");
        }
    }
}

/// Writes every counter type with its unit and help text.
pub(crate) fn list_counters(out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "Courier counter types (instances: total, or worker-thread#K where marked):"
    )?;
    for t in TYPES {
        let unit = if t.unit.is_empty() { "-" } else { t.unit };
        let workers = if t.instances == super::registry::Instances::PerWorker {
            " [per worker]"
        } else {
            ""
        };
        writeln!(out, "  {:<40} [{unit}]{workers}\n      {}", t.name, t.help)?;
    }
    Ok(())
}
