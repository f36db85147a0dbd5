//! [`report_to_stderr`]: printing what Courier reports.
//!
//! Courier reports through [`tracing`] and prints nothing itself: lost
//! peers, rejected connections, posts whose handler failed, a shutdown
//! that could not flush (WARN and ERROR), and what termination detection
//! is waiting for (INFO). A program sees them by installing a subscriber,
//! its own or this one.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::registry::LookupSpan;

/// Prints Courier's reports (and any other `tracing` event at INFO or
/// above) on standard error as `courier: ...` lines, by installing a
/// global `tracing` subscriber. Courier's apps and `courier run` call it
/// first thing; a program with a subscriber of its own does not need it.
///
/// Does nothing if the program already installed a global subscriber.
///
/// # Examples
///
/// ```
/// courier::report_to_stderr();
/// ```
pub fn report_to_stderr() {
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(Level::INFO)
        .with_writer(std::io::stderr)
        .event_format(Plain)
        .finish();
    // An error only says that a subscriber is already installed.
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// `courier: MESSAGE`, or `TARGET: MESSAGE` for events of other crates.
struct Plain;

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let target = event.metadata().target();
        let crate_name = target.split("::").next().unwrap_or(target);
        write!(writer, "{crate_name}: ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
