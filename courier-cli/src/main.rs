//! `courier`: launch a Courier job.
//!
//! ```text
//! courier run -n 4 -- ./target/release/toy --parcels 100000
//! ```

use std::ffi::OsString;
use std::net::IpAddr;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Launch Courier jobs.
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
}

fn main() -> ExitCode {
    let Command::Run {
        localities,
        listen,
        program,
    } = Cli::parse().command;
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
