//! [`LocalityId`]: which process of the job.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The rank of a locality (one process of the job) in `0..num_localities`.
///
/// Locality 0 is the *root*: it runs the program's main function. Get ids
/// from [`Runtime::locality`](crate::Runtime::locality),
/// [`Runtime::here`](crate::Runtime::here) or
/// [`Runtime::localities`](crate::Runtime::localities).
///
/// # Examples
///
/// ```
/// use courier::LocalityId;
///
/// let root = LocalityId::new(0);
/// assert_eq!(root.get(), 0);
/// assert_eq!(root.to_string(), "locality#0");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LocalityId(u32);

impl LocalityId {
    /// The root locality, which runs the main function.
    pub const ROOT: LocalityId = LocalityId(0);

    /// The locality of rank `rank`. Whether it exists in the running job is
    /// checked when it is used.
    pub const fn new(rank: u32) -> Self {
        LocalityId(rank)
    }

    /// The rank.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The rank as an index.
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for LocalityId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "locality#{}", self.0)
    }
}

impl fmt::Debug for LocalityId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
