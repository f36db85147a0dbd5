//! Counter names, in HPX's grammar:
//!
//! ```text
//! /object{locality#N/instance}/counter@parameters
//! ```
//!
//! - `object` and `counter` are `/`-separated segments of lowercase letters,
//!   digits, `-` and `_`; together they are the counter's *type*, e.g.
//!   `/threads/count/cumulative`. A `*` in a segment matches any text.
//! - `locality#N` picks a locality, `locality#*` every one.
//! - `instance` is `total` (the whole locality) or `worker-thread#K`
//!   (`worker-thread#*` for every worker).
//! - The braces may be left out: the name then means `{locality#*/total}`.
//!   `{locality#N}` alone means `{locality#N/total}`.
//! - `@parameters` is passed to the counter (most take none).

use std::fmt;

/// A locality or worker index, or `*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Index {
    At(u32),
    All,
}

impl fmt::Display for Index {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Index::At(i) => write!(f, "{i}"),
            Index::All => f.write_str("*"),
        }
    }
}

/// Which part of a locality a counter describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Instance {
    /// The whole locality.
    Total,
    /// One worker thread (or all of them).
    Worker(Index),
}

impl fmt::Display for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Instance::Total => f.write_str("total"),
            Instance::Worker(i) => write!(f, "worker-thread#{i}"),
        }
    }
}

/// A parsed counter name, possibly with wildcards.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct CounterName {
    /// `threads` in `/threads/count/cumulative`.
    pub(crate) object: String,
    pub(crate) locality: Index,
    pub(crate) instance: Instance,
    /// `count/cumulative` in `/threads/count/cumulative`.
    pub(crate) counter: String,
    pub(crate) parameters: Option<String>,
}

impl fmt::Display for CounterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "/{}{{locality#{}/{}}}/{}",
            self.object, self.locality, self.instance, self.counter
        )?;
        if let Some(p) = &self.parameters {
            write!(f, "@{p}")?;
        }
        Ok(())
    }
}

/// Why a counter name did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError(pub(crate) String);

fn valid_segment(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '*'))
}

pub(super) fn parse_index(text: &str, prefix: &str, what: &str) -> Result<Index, ParseError> {
    let Some(rest) = text.strip_prefix(prefix) else {
        return Err(ParseError(format!(
            "expected `{prefix}N` or `{prefix}*`, found `{text}`"
        )));
    };
    if rest == "*" {
        return Ok(Index::All);
    }
    rest.parse()
        .map(Index::At)
        .map_err(|_| ParseError(format!("`{rest}` is not a {what} number")))
}

impl CounterName {
    /// The type of the counter: `/object/counter`.
    pub(crate) fn type_name(&self) -> String {
        format!("/{}/{}", self.object, self.counter)
    }

    /// Parses a name; see the module docs for the grammar.
    pub(crate) fn parse(name: &str) -> Result<CounterName, ParseError> {
        let name = name.trim();
        let (body, parameters) = match name.split_once('@') {
            Some((body, p)) => (body, Some(p.to_owned())),
            None => (name, None),
        };
        let Some(body) = body.strip_prefix('/') else {
            return Err(ParseError("a counter name starts with `/`".into()));
        };
        let (object, instance, counter) = match body.find('{') {
            Some(open) => {
                let close = body
                    .find('}')
                    .ok_or_else(|| ParseError("`{` without a closing `}`".into()))?;
                if close < open {
                    return Err(ParseError("`}` before `{`".into()));
                }
                let counter = body[close + 1..]
                    .strip_prefix('/')
                    .ok_or_else(|| ParseError("expected `/counter` after `}`".into()))?;
                (&body[..open], Some(&body[open + 1..close]), counter)
            }
            None => match body.split_once('/') {
                Some((object, counter)) => (object, None, counter),
                None => return Err(ParseError("expected `/object/counter`".into())),
            },
        };
        if !valid_segment(object) {
            return Err(ParseError(format!("`{object}` is not a valid object name")));
        }
        if counter.split('/').any(|s| !valid_segment(s)) {
            return Err(ParseError(format!(
                "`{counter}` is not a valid counter path"
            )));
        }
        let (locality, instance) = match instance {
            None => (Index::All, Instance::Total),
            Some(text) => {
                let (loc, inst) = match text.split_once('/') {
                    Some((loc, inst)) => (loc, Some(inst)),
                    None => (text, None),
                };
                let locality = parse_index(loc, "locality#", "locality")?;
                let instance = match inst {
                    None | Some("total") => Instance::Total,
                    Some(inst) => Instance::Worker(parse_index(inst, "worker-thread#", "worker")?),
                };
                (locality, instance)
            }
        };
        Ok(CounterName {
            object: object.to_owned(),
            locality,
            instance,
            counter: counter.to_owned(),
            parameters,
        })
    }
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_names_round_trip() {
        for name in [
            "/threads{locality#0/total}/count/cumulative",
            "/threads{locality#3/worker-thread#1}/time/average",
            "/threads{locality#*/worker-thread#*}/idle-rate",
            "/parcels{locality#1/total}/count/sent@get_cplx",
        ] {
            assert_eq!(CounterName::parse(name).unwrap().to_string(), name);
        }
    }

    #[test]
    fn short_forms_expand() {
        let n = CounterName::parse("/threads/count/cumulative").unwrap();
        assert_eq!(n.to_string(), "/threads{locality#*/total}/count/cumulative");
        assert_eq!(n.type_name(), "/threads/count/cumulative");
        assert_eq!((n.locality, n.instance), (Index::All, Instance::Total));
        let n = CounterName::parse("/runtime{locality#2}/uptime").unwrap();
        assert_eq!(n.to_string(), "/runtime{locality#2/total}/uptime");
    }

    #[test]
    fn malformed_names_say_why() {
        for (name, why) in [
            ("threads/count", "starts with `/`"),
            ("/threads", "/object/counter"),
            ("/threads{locality#0/total/count", "closing"),
            ("/threads{locality#x/total}/count", "not a locality number"),
            ("/threads{node#0/total}/count", "locality#"),
            ("/threads{locality#0/worker#1}/count", "worker-thread#"),
            ("/Threads/count", "valid object"),
            ("/threads//count", "valid counter path"),
        ] {
            let err = CounterName::parse(name).unwrap_err();
            assert!(err.0.contains(why), "{name}: {}", err.0);
        }
    }

    #[test]
    fn globs_match_like_shells() {
        assert!(glob_match("/threads/*", "/threads/count/cumulative"));
        assert!(glob_match("/threads/time/*", "/threads/time/average"));
        assert!(glob_match("*average*", "/threads/time/average-overhead"));
        assert!(!glob_match("/threads/time/*", "/parcels/count/sent"));
        assert!(glob_match("/a/b", "/a/b") && !glob_match("/a/b", "/a/bc"));
    }
}
