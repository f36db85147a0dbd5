//! [`RuntimeArgs`]: the runtime's command-line flags (feature `cli`, on
//! by default), mapped onto the same [`Config`] fields as the `COURIER_*`
//! variables.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use super::{Binding, Config, TransportKind};
use crate::aggregate::Coalescing;
use crate::counters::CounterFormat;

/// The runtime's command-line flags, to embed in a program's own
/// [`clap`] parser with `#[command(flatten)]`.
///
/// # Examples
///
/// ```
/// use clap::Parser;
///
/// #[derive(Parser)]
/// struct Cli {
///     #[command(flatten)]
///     runtime: courier::RuntimeArgs,
///     /// Something of the program's own.
///     #[arg(long, default_value_t = 10)]
///     iterations: u32,
/// }
///
/// let cli = Cli::parse_from(["prog", "--localities", "3", "--transport", "inproc"]);
/// let config = cli.runtime.config(2);
/// assert_eq!(config.num_localities(), 3);
/// ```
#[derive(Debug, Clone, clap::Args)]
#[non_exhaustive]
pub struct RuntimeArgs {
    /// Number of localities (processes) [default: the program's, or COURIER_LOCALITIES].
    #[arg(long, value_name = "N")]
    pub localities: Option<u32>,
    /// How localities talk [default: tcp, or COURIER_TRANSPORT].
    #[arg(long, value_enum)]
    pub transport: Option<TransportKind>,
    /// Worker threads per locality [default: cores ÷ localities on this host].
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Keep each worker thread on a CPU of its own [default: auto, or COURIER_BIND].
    #[arg(long, value_enum)]
    pub bind: Option<Binding>,
    /// IP address to listen on and advertise [default: 127.0.0.1].
    #[arg(long, value_name = "IP")]
    pub listen: Option<IpAddr>,
    /// Print this counter at the end (and every --print-counter-interval); repeatable.
    #[arg(long, value_name = "NAME")]
    pub print_counter: Vec<String>,
    /// Print this counter and reset it after each print; repeatable.
    #[arg(long, value_name = "NAME")]
    pub print_counter_reset: Vec<String>,
    /// Milliseconds between counter prints (0: only at the end).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub print_counter_interval: u64,
    /// Where printed counters go: a file, or - for standard output.
    #[arg(long, value_name = "FILE|-", default_value = "-")]
    pub print_counter_destination: PathBuf,
    /// Format of printed counters.
    #[arg(long, value_enum, default_value_t = CounterFormat::Text)]
    pub print_counter_format: CounterFormat,
    /// Coalescing of every action (but those marked `coalescing = false`):
    /// off, on, adaptive[:max_bytes=N,max_parcels=N,kappa=F,split=N],
    /// count[:num_parcels=N,interval_us=N,max_bytes=N] or
    /// bytes[:buffer_bytes=N,threshold=F,cutoff=F,timeout_us=N]
    /// [default: adaptive, or COURIER_COALESCING].
    #[arg(long, value_name = "SPEC")]
    pub coalescing: Option<Coalescing>,
    /// Coalescing of one action: ACTION=SPEC, ACTION its
    /// full path or a unique `::` suffix (repeatable).
    #[arg(long, value_name = "ACTION=SPEC", value_parser = parse_action_setting)]
    pub coalesce_action: Vec<(String, Coalescing)>,
    /// Flow control: bytes of unfinished calls one locality may have at
    /// another, or `off` [default: 4 MiB, or COURIER_CREDIT_WINDOW].
    #[arg(long, value_name = "BYTES|off", value_parser = super::config::parse_credit_window)]
    pub credit_window: Option<usize>,
    /// Flow control: bytes a locality lends to origins beyond their
    /// windows [default: 16 MiB, or COURIER_CREDIT_POOL].
    #[arg(long, value_name = "BYTES")]
    pub credit_pool: Option<usize>,
    /// Flow control: bytes every origin may use at every target beyond its
    /// window without asking [default: 0, or COURIER_CREDIT_HINT].
    #[arg(long, value_name = "BYTES")]
    pub credit_hint: Option<usize>,
    /// Failure detector: seconds of silence after which a peer is declared
    /// lost (`5`, `0.5`, `250ms`), or `off` for debugging
    /// [default: 5, or COURIER_PEER_TIMEOUT]. Parsed, `off` is zero.
    #[arg(long, value_name = "SECS|off", value_parser = parse_seconds_or_off_flag)]
    pub peer_timeout: Option<Duration>,
    /// Watchdog: seconds after which a running task is reported (`10`,
    /// `0.5`, `250ms`), or `off` [default: 10, or COURIER_WATCHDOG].
    /// Parsed, `off` is zero.
    #[arg(long, value_name = "SECS|off", value_parser = parse_seconds_or_off_flag)]
    pub watchdog: Option<Duration>,
    /// What a failed post does: `log` it, or `fail` the job
    /// [default: log, or COURIER_ON_POST_FAILURE].
    #[arg(long, value_enum)]
    pub on_post_failure: Option<crate::runtime::OnPostFailure>,
    /// Largest frame a locality accepts; a larger call or result fails
    /// [default: 64 MiB, or COURIER_MAX_FRAME_BYTES].
    #[arg(long, value_name = "BYTES")]
    pub max_frame_bytes: Option<usize>,
    /// List every counter type with its unit and help, then exit.
    #[arg(long)]
    pub list_counters: bool,
    /// Report every decision of adaptive coalescing (`--coalescing
    /// adaptive`) with its reason [or COURIER_PRINT_ADAPT=true].
    #[arg(long)]
    pub print_adapt: bool,
    /// Serve every counter at http://ADDR/metrics (Prometheus text format),
    /// bound by the root exactly at ADDR. No authentication: prefer a
    /// loopback address (a non-loopback one is served with a warning).
    #[arg(long, value_name = "ADDR")]
    pub counters_http: Option<SocketAddr>,
}

/// `ACTION=SPEC` of `--coalesce-action`.
fn parse_action_setting(s: &str) -> Result<(String, Coalescing), String> {
    let (name, spec) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not ACTION=SPEC"))?;
    Ok((name.trim().to_owned(), spec.parse()?))
}

/// `--peer-timeout` and `--watchdog`: `off` becomes zero (clap gives `Option<Option<_>>`
/// a meaning of its own).
fn parse_seconds_or_off_flag(s: &str) -> Result<Duration, String> {
    Ok(super::config::parse_seconds_or_off(s)?.unwrap_or(Duration::ZERO))
}

impl RuntimeArgs {
    /// The configuration: defaults, then environment, then these flags.
    /// `default_localities` applies when neither a flag nor
    /// `COURIER_LOCALITIES` gives the number.
    pub fn config(&self, default_localities: u32) -> Config {
        let mut config = Config::new();
        if std::env::var_os("COURIER_LOCALITIES").is_none() {
            config.localities = default_localities;
        }
        if let Some(n) = self.localities {
            config = config.localities(n);
        }
        if let Some(t) = self.transport {
            config = config.transport(t);
        }
        if let Some(w) = self.workers {
            config = config.workers(w);
        }
        if let Some(b) = self.bind {
            config = config.bind(b);
        }
        if let Some(ip) = self.listen {
            config = config.listen(ip);
        }
        if let Some(w) = self.credit_window {
            config = config.credit_window(w);
        }
        if let Some(p) = self.credit_pool {
            config = config.credit_pool(p);
        }
        if let Some(h) = self.credit_hint {
            config = config.credit_hint(h);
        }
        if let Some(timeout) = self.peer_timeout {
            config = config.peer_timeout((!timeout.is_zero()).then_some(timeout));
        }
        if let Some(threshold) = self.watchdog {
            config = config.watchdog((!threshold.is_zero()).then_some(threshold));
        }
        if let Some(policy) = self.on_post_failure {
            config = config.on_post_failure(policy);
        }
        if let Some(b) = self.max_frame_bytes {
            config = config.max_frame_bytes(b);
        }
        if let Some(c) = self.coalescing {
            config = config.coalescing(c);
        }
        for (name, setting) in &self.coalesce_action {
            config = config.coalesce_action(name.clone(), *setting);
        }
        for name in &self.print_counter {
            config = config.print_counter(name.clone());
        }
        for name in &self.print_counter_reset {
            config = config.print_counter_reset(name.clone());
        }
        config = config
            .print_counter_interval(Duration::from_millis(self.print_counter_interval))
            .print_counter_destination(self.print_counter_destination.clone())
            .print_counter_format(self.print_counter_format)
            .list_counters(self.list_counters);
        if self.print_adapt {
            config = config.print_adapt(true);
        }
        if let Some(addr) = self.counters_http {
            config = config.counters_http(addr);
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        runtime: RuntimeArgs,
    }

    #[test]
    fn the_max_frame_flag_sets_the_limit() {
        let config = Cli::parse_from(["prog", "--max-frame-bytes", "2048"])
            .runtime
            .config(1);
        assert_eq!(config.max_frame_bytes, 2048);
        let config = Cli::parse_from(["prog"]).runtime.config(1);
        if std::env::var_os("COURIER_MAX_FRAME_BYTES").is_none() {
            assert_eq!(
                config.max_frame_bytes,
                super::super::DEFAULT_MAX_FRAME_BYTES
            );
        }
    }
}
