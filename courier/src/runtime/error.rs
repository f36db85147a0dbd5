//! [`Error`]: why a job failed.

use crate::ids::LocalityId;
use crate::transport::tcp::{BadSecret, ConnectError, NoRandomness};

/// The error type of a job's main function: any error, boxed. `?` converts
/// every `std::error::Error` (a [`CallError`](crate::CallError) included).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why [`launch`](crate::launch) failed.
///
/// Every variant's message names the locality and the cause, so printing it
/// is enough for the user to act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value (builder, flag or `COURIER_*` variable) is invalid.
    #[error("bad configuration: {0}")]
    Config(String),
    /// The localities could not be started or could not connect to each other.
    #[error("could not start the job: {0}")]
    Startup(String),
    /// One or more localities failed while the job ran.
    #[error("{}", lost_message(.0))]
    LocalitiesLost(Vec<(LocalityId, String)>),
    /// The main function returned an error.
    #[error("the main function failed: {0}")]
    Main(#[source] BoxError),
    /// The main function panicked.
    #[error("the main function panicked: {0}")]
    MainPanicked(String),
    /// A post failed where it ran and
    /// [`Config::on_post_failure`](crate::Config::on_post_failure) is
    /// [`OnPostFailure::Fail`](crate::OnPostFailure::Fail): the first such
    /// failure.
    #[error("a post of {origin} failed: {message}")]
    PostFailed {
        /// The locality that posted.
        origin: LocalityId,
        /// Which action, where, and why.
        message: String,
    },
    /// The main function of another locality of an SPMD job
    /// ([`launch_spmd`](crate::launch_spmd)) failed.
    #[error("the main function of {locality} failed: {message}")]
    RemoteMain {
        /// The locality whose main failed.
        locality: LocalityId,
        /// Its error or panic message.
        message: String,
    },
}

fn lost_message(lost: &[(LocalityId, String)]) -> String {
    let parts: Vec<String> = lost
        .iter()
        .map(|(l, why)| format!("{l} failed: {why}"))
        .collect();
    parts.join("; ")
}

impl Error {
    pub(crate) fn startup(message: impl Into<String>) -> Self {
        Error::Startup(message.into())
    }
}

impl From<NoRandomness> for Error {
    fn from(e: NoRandomness) -> Self {
        Error::startup(e.to_string())
    }
}

impl From<BadSecret> for Error {
    fn from(e: BadSecret) -> Self {
        Error::Config(e.to_string())
    }
}

impl From<ConnectError> for Error {
    fn from(e: ConnectError) -> Self {
        Error::startup(e.to_string())
    }
}
