//! Everything a call of the client can fail with.
//!
//! No variant ever holds the token: requests carry it in a header marked
//! sensitive, and the texts below are built from the server's error body
//! (which never echoes it) or from the transport's error without its URL.

use std::fmt;

use seqd_core::domain::{name_problem, SeqName};

/// Why a call of the client failed. `Clone`, so that every caller waiting
/// for the same lease fetch gets the same error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server has no sequence of that name (404 `sequence_not_found`).
    #[error("sequence '{name}' not found on the seqd server")]
    SequenceNotFound {
        /// The sequence asked for.
        name: String,
    },
    /// No token, or one the server does not know, or expired or revoked
    /// (401 `unauthorized`).
    #[error("unauthorized for sequence '{name}': {message}")]
    Unauthorized {
        /// The sequence asked for.
        name: String,
        /// The server's explanation.
        message: String,
    },
    /// A valid token without `draw` on this name (403 `forbidden`).
    #[error("forbidden for sequence '{name}': {message}")]
    Forbidden {
        /// The sequence asked for.
        name: String,
        /// The server's explanation.
        message: String,
    },
    /// A global or serial sequence: only plain sequences can be leased
    /// (409 `not_leasable`); draw its IDs with `/next` or `/batch`.
    #[error("sequence '{name}' cannot be leased: {message}")]
    NotLeasable {
        /// The sequence asked for.
        name: String,
        /// The server's explanation (names the kind of sequence).
        message: String,
    },
    /// The sequence cannot go higher without passing `i64::MAX`
    /// (409 `sequence_exhausted`).
    #[error("sequence '{name}' is exhausted: no IDs left below i64::MAX")]
    Exhausted {
        /// The sequence asked for.
        name: String,
    },
    /// A name the server would refuse: it must match
    /// `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`. Checked before any request.
    #[error("invalid sequence name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A batch larger than the client's `max_batch`.
    #[error("a batch of {requested} IDs is more than this client's max_batch ({max})")]
    InvalidCount {
        /// How many IDs were asked for.
        requested: usize,
        /// The client's limit ([`crate::ClientBuilder::max_batch`]).
        max: usize,
    },
    /// The server refused the request as malformed (a 400 other than the
    /// above; for instance a lease size above its `--max-lease`).
    #[error("the seqd server refused the request for sequence '{name}' ({code}): {message}")]
    Rejected {
        /// The sequence asked for.
        name: String,
        /// The server's error code (`invalid_request`, ...).
        code: String,
        /// The server's explanation.
        message: String,
    },
    /// Every server was tried and none answered with a lease: connection
    /// errors, timeouts, 5xx (503 `storage_unavailable`, ...) or answers that
    /// are not seqd's.
    #[error("no seqd server could lease IDs of sequence '{name}': {}", Attempts(.attempts))]
    Unavailable {
        /// The sequence asked for.
        name: String,
        /// What each server answered, in the order they were tried.
        attempts: Vec<Attempt>,
    },
    /// The client was closed ([`crate::Client::close`]): it hands out no
    /// more IDs.
    #[error("the seqd client is closed")]
    Closed,
    /// The builder's settings cannot make a client.
    #[error("invalid seqd client configuration: {0}")]
    Config(String),
}

/// One server's failure within an [`Error::Unavailable`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The server's base URL, as configured.
    pub server: String,
    /// What went wrong there.
    pub reason: String,
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.server, self.reason)
    }
}

/// The attempts of an [`Error::Unavailable`], separated by `; `.
struct Attempts<'a>(&'a [Attempt]);

impl fmt::Display for Attempts<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("no server tried");
        }
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

/// `name` checked against seqd's name rule (the core's [`SeqName::parse`],
/// explained by [`name_problem`]), so that a name is never put into a
/// URL it could change the meaning of.
pub(crate) fn seq_name(name: &str) -> Result<SeqName, Error> {
    SeqName::parse(name).map_err(|_| Error::InvalidName {
        name: name.chars().take(200).collect(),
        reason: name_problem(name).unwrap_or("not a sequence name"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_server_rule() {
        for ok in ["a", "order", "shop-42:order.v2_x", &"a".repeat(128)] {
            assert_eq!(seq_name(ok).map(|n| n.to_string()), Ok(ok.to_string()));
        }
        for bad in ["", "-a", ".a", "a/b", "a b", "a?x", "é", &"a".repeat(129)] {
            assert!(
                matches!(seq_name(bad), Err(Error::InvalidName { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn unavailable_lists_every_attempt() {
        let e = Error::Unavailable {
            name: "order".into(),
            attempts: vec![
                Attempt {
                    server: "http://a".into(),
                    reason: "connection failed".into(),
                },
                Attempt {
                    server: "http://b".into(),
                    reason: "503 storage_unavailable".into(),
                },
            ],
        };
        assert_eq!(
            e.to_string(),
            "no seqd server could lease IDs of sequence 'order': http://a: connection failed; \
             http://b: 503 storage_unavailable"
        );
    }
}
