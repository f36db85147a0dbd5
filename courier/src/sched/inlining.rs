//! [`Inlining`]: how [`join`](crate::par::join) decides between running its
//! second closure inline and making it a task, and
//! [`Runtime::spawn`](crate::Runtime::spawn) between running a child's
//! first poll inline and queuing it.

/// How [`join`](crate::par::join) decides whether its second closure runs
/// inline (in the caller, right after the first) or as a task another
/// worker may take, and how [`Runtime::spawn`](crate::Runtime::spawn)
/// decides whether a child's first poll runs inline (before `spawn`
/// returns) or the child is queued as a task. Set for a job with
/// [`Config::inlining`](crate::Config::inlining).
///
/// # Examples
///
/// ```
/// use courier::{Config, par::Inlining};
///
/// let config = Config::new().inlining(Inlining::Depth(12));
/// # let _ = config;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Inlining {
    /// From measurements: inline when the closure's (the child's first
    /// poll's) expected duration at this call site and nesting depth is
    /// below `λ_min` times the measured task overhead (for `spawn`, also
    /// only while the worker has a task queued for the others).
    #[default]
    Adaptive,
    /// Never inline: every `join` forks and every `spawn` is queued
    /// (inlining off).
    Never,
    /// A fixed cutoff, as hand-tuned task codes have: fork above this
    /// nesting depth of `join`s, inline at it and below; run inline the
    /// children spawned at this depth of spawns and below.
    Depth(u32),
}

impl std::fmt::Display for Inlining {
    /// As [`FromStr`](std::str::FromStr) reads it: `adaptive`, `never`,
    /// `depth:N`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Inlining::Adaptive => f.write_str("adaptive"),
            Inlining::Never => f.write_str("never"),
            Inlining::Depth(depth) => write!(f, "depth:{depth}"),
        }
    }
}

impl std::str::FromStr for Inlining {
    type Err = String;

    /// `adaptive`, `never` or `depth:N`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "adaptive" => Ok(Inlining::Adaptive),
            "never" => Ok(Inlining::Never),
            other => match other.strip_prefix("depth:").map(str::parse) {
                Some(Ok(depth)) => Ok(Inlining::Depth(depth)),
                _ => Err(format!(
                    "`{other}` is not `adaptive`, `never` or `depth:N` (N a depth of nested joins)"
                )),
            },
        }
    }
}

/// `inlining` as the opaque code a scheduler keeps for its workers
/// (`sched::join_policy`): 0 adaptive, 1 never, 2 + N depth N.
pub(crate) const fn policy_code(inlining: Inlining) -> u64 {
    match inlining {
        Inlining::Adaptive => 0,
        Inlining::Never => 1,
        Inlining::Depth(depth) => 2 + depth as u64,
    }
}

/// The inlining of a code from [`policy_code`].
#[inline]
pub(crate) fn from_code(code: u64) -> Inlining {
    match code {
        0 => Inlining::Adaptive,
        1 => Inlining::Never,
        code => Inlining::Depth(u32::try_from(code - 2).unwrap_or(u32::MAX)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_back_what_they_print_and_bad_ones_are_named() {
        for inlining in [
            Inlining::Adaptive,
            Inlining::Never,
            Inlining::Depth(0),
            Inlining::Depth(12),
        ] {
            assert_eq!(inlining.to_string().parse::<Inlining>(), Ok(inlining));
            assert_eq!(from_code(policy_code(inlining)), inlining);
        }
        let error = "depth:x".parse::<Inlining>().unwrap_err();
        assert!(
            error.contains("`depth:x`") && error.contains("depth:N"),
            "{error}"
        );
    }
}
