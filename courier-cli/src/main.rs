//! `courier`: launch a Courier job, sweep an app over parameters, plot.
//!
//! ```text
//! courier run -n 4 -- ./target/release/toy --parcels 100000
//! courier sweep --param n=1,4,16 --runs 3 --out toy.csv -- ./target/release/toy --num-parcels {n}
//! courier plot heatmap toy.csv --x num_parcels --y interval_us --value seconds -o fig8.svg
//! ```

mod plot;
mod sweep;

use std::ffi::OsString;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// Launch Courier jobs, sweep them over parameters, plot the results.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run PROGRAM as N localities on this host; exits with locality 0's
    /// status, or 1 if another locality failed.
    Run {
        /// Number of localities (processes).
        #[arg(
            short = 'n',
            long = "localities",
            value_name = "N",
            default_value_t = 2
        )]
        localities: u32,
        /// Address for the rendezvous and data connections.
        #[arg(long, value_name = "IP", default_value = "127.0.0.1")]
        listen: IpAddr,
        /// The program to run and its arguments.
        #[arg(required = true, last = true, value_name = "PROGRAM [ARGS]")]
        program: Vec<OsString>,
    },
    /// Run PROGRAM at every point of a parameter grid, RUNS times each, and
    /// write its `phase N: key=value ...` lines to a CSV file. `{NAME}` in
    /// the program's arguments is replaced by parameter NAME's value.
    Sweep {
        /// A parameter and its values: NAME=V1,V2,... (repeatable; the
        /// grid is their product).
        #[arg(long = "param", value_name = "NAME=V1,V2,...", required = true)]
        params: Vec<sweep::Param>,
        /// Runs per grid point, round after round over the grid; each round
        /// starts the last parameter's values one later (the last is what a
        /// sweep compares: none of its values always runs first).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
        runs: u32,
        /// The CSV file to write (rewritten after every run).
        #[arg(long, short, default_value = "sweep.csv")]
        out: PathBuf,
        /// Seconds after which a run is killed and the sweep fails.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
        /// The program to run and its arguments.
        #[arg(required = true, last = true, value_name = "PROGRAM [ARGS]")]
        program: Vec<OsString>,
    },
    /// Draw a figure (SVG) from a sweep's CSV; repeated measurements of a
    /// point are reduced to their median.
    Plot {
        #[command(subcommand)]
        figure: Figure,
    },
}

/// The figures `courier plot` draws.
#[derive(Debug, Subcommand)]
enum Figure {
    /// A heat map of VALUE over (X, Y), as Wagle et al. 2018 Fig. 8.
    Heatmap {
        #[command(flatten)]
        common: PlotArgs,
        #[arg(long)]
        x: String,
        #[arg(long)]
        y: String,
        #[arg(long, default_value = "seconds")]
        value: String,
    },
    /// Y against X, one line per value of SERIES, as Wagle et al. 2018 Fig. 5.
    Lines {
        #[command(flatten)]
        common: PlotArgs,
        #[arg(long)]
        x: String,
        #[arg(long, default_value = "seconds")]
        y: String,
        #[arg(long, default_value = "phase")]
        series: String,
        /// A logarithmic X axis.
        #[arg(long)]
        log_x: bool,
    },
    /// Every row as a point (X, Y) with Pearson's coefficient, as Wagle et al. 2018
    /// Figs. 4 and 7 (and Spearman's); prints both.
    Scatter {
        #[command(flatten)]
        common: PlotArgs,
        #[arg(long, default_value = "n_oh")]
        x: String,
        #[arg(long, default_value = "seconds")]
        y: String,
    },
}

/// What every figure takes.
#[derive(Debug, clap::Args)]
struct PlotArgs {
    /// The sweep's CSV file.
    csv: PathBuf,
    /// The SVG file to write.
    #[arg(long, short)]
    out: PathBuf,
    /// Keep only rows where COLUMN equals VALUE (repeatable).
    #[arg(long, value_name = "COLUMN=VALUE")]
    filter: Vec<String>,
    /// The figure's title.
    #[arg(long, default_value = "")]
    title: String,
}

fn plot(figure: Figure) -> Result<(), String> {
    let common = match &figure {
        Figure::Heatmap { common, .. }
        | Figure::Lines { common, .. }
        | Figure::Scatter { common, .. } => common,
    };
    let table = plot::Table::read(&common.csv, &common.filter)?;
    let (title, out) = (common.title.as_str(), common.out.as_path());
    match &figure {
        Figure::Heatmap { x, y, value, .. } => plot::heatmap(&table, x, y, value, title, out)?,
        Figure::Lines {
            x,
            y,
            series,
            log_x,
            ..
        } => plot::lines(&table, x, y, series, *log_x, title, out)?,
        Figure::Scatter { x, y, .. } => {
            let (r, rho) = plot::scatter(&table, x, y, title, out)?;
            println!("pearson r({x}, {y}) = {r:.4}, spearman rho = {rho:.4}");
        }
    }
    eprintln!("courier plot: wrote {}", out.display());
    Ok(())
}

fn main() -> ExitCode {
    courier::report_to_stderr();
    match Cli::parse().command {
        Command::Run {
            localities,
            listen,
            program,
        } => run(localities, listen, &program),
        Command::Sweep {
            params,
            runs,
            out,
            timeout,
            program,
        } => {
            let sweep = sweep::Sweep {
                params,
                runs,
                out,
                timeout: Duration::from_secs(timeout),
                program,
            };
            match sweep.run() {
                Ok(rows) => {
                    eprintln!("courier sweep: {rows} rows in {}", sweep.out.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("courier sweep: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Plot { figure } => match plot(figure) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("courier plot: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn run(localities: u32, listen: IpAddr, program: &[OsString]) -> ExitCode {
    let (program, args) = program.split_first().expect("clap requires a program");
    let launcher = courier::launcher::Launcher::new(localities, program, args).listen(listen);
    match launcher.run() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => {
            eprintln!("courier run: locality#0 exited with {status}");
            ExitCode::from(u8::try_from(status.code().unwrap_or(1)).unwrap_or(1).max(1))
        }
        Err(e) => {
            eprintln!("courier run: {e}");
            ExitCode::FAILURE
        }
    }
}
