//! [`ServiceError`]: the one list of what a call of the service can fail
//! with, whatever door it came through. Each door maps it to its protocol
//! in one place (HTTP: `http/error.rs`). Internal details (driver text,
//! SQL) are logged here, where they are narrowed, and never carried on.

use crate::allocator::AllocError;
use crate::domain::{ParseError, SeqName, SeqNameRef};
use crate::log_throttle::throttled;
use crate::serial::{Exhausted, IssueError};
use crate::store::{BumpRefusal, RowProblem, StoreError};

/// Why the service refused or failed a call.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A sequence name (or a prefix of one) that is not valid.
    #[error("{0}")]
    InvalidName(ParseError),
    /// A bad field or a combination of fields that cannot go together.
    #[error("{0}")]
    InvalidRequest(String),
    /// No such sequence.
    #[error("sequence '{0}' not found")]
    NotFound(SeqName),
    /// A create of a name that exists.
    #[error("sequence '{0}' already exists")]
    Exists(SeqName),
    /// The sequence cannot go higher without passing `i64::MAX`.
    #[error("sequence '{0}' is exhausted")]
    Exhausted(SeqName),
    /// The period's counter outgrew `{seq:0N}`.
    #[error(
        "sequence '{0}': {1}; serials resume in the next period, or change its format to \
         \"overflow\":\"widen\" or a wider {{seq:0N}}"
    )]
    SerialExhausted(SeqName, Exhausted),
    /// A lease of a sequence that is not plain (`global` or `serial`).
    #[error(
        "sequence '{0}' is {1}: only plain sequences can be leased (a {1} sequence is served by \
         seqd at request time); draw its IDs one at a time or in batches"
    )]
    NotLeasable(SeqName, &'static str),
    /// The sequence's row holds settings seqd cannot use.
    #[error(
        "sequence '{0}' cannot be used: its row in `sequences` has an invalid {1}; repair it by \
         changing the sequence's settings or by SQL"
    )]
    Misconfigured(SeqName, RowProblem),
    /// A bump refused as a whole (nothing written).
    #[error("nothing bumped: {0}")]
    BumpRefused(BumpRefusal),
    /// No credentials, or ones that are unknown, expired or revoked.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// A valid token without the right, or not covering the name (the
    /// same answer whether or not the sequence exists).
    #[error("this token may not do that with this sequence")]
    Forbidden,
    /// A token create with a label (or a text) already taken.
    #[error("a token labelled '{0}' already exists (labels stay taken after a revoke)")]
    TokenExists(String),
    /// No token has this label.
    #[error("no token is labelled '{0}'")]
    TokenNotFound(String),
    /// A draw found no IDs in memory and the database unreachable or too
    /// slow.
    #[error("storage unavailable")]
    Unavailable,
    /// A request that needs the database (an admin write, a read, a token)
    /// found it unreachable or too slow.
    #[error("storage unreachable")]
    Unreachable,
    /// No snowflake ID could be issued.
    #[error("{0}")]
    Snowflake(crate::snowflake::SnowflakeError),
    /// Snowflake IDs are turned off on this instance.
    #[error("snowflake IDs are disabled on this instance (--snowflake false)")]
    SnowflakeDisabled,
    /// A bug or a misconfiguration; the details are in the log.
    #[error("internal error")]
    Internal,
}

impl ServiceError {
    /// Narrows an allocator error of `name`, logging what operators need.
    pub fn from_alloc<'n>(name: impl Into<SeqNameRef<'n>>, e: AllocError) -> Self {
        let name = name.into();
        match e {
            AllocError::NotFound => ServiceError::NotFound(name.to_owned()),
            AllocError::Exhausted => ServiceError::Exhausted(name.to_owned()),
            AllocError::Serial => {
                throttled!(
                    error,
                    "a serial sequence reached a path that serves plain IDs only",
                    Some(name.as_str()),
                    sequence = %name
                );
                ServiceError::Internal
            }
            AllocError::RunTooLong { segment } => ServiceError::InvalidRequest(format!(
                "sequence '{name}' is served in segments of {segment} IDs, too short for a run of \
                 that many consecutive IDs; give it a larger step"
            )),
            AllocError::Unavailable { storage_failing } => {
                throttled!(
                    warn,
                    "no segment available within the wait timeout",
                    Some(name.as_str()),
                    sequence = %name,
                    storage_failing
                );
                ServiceError::Unavailable
            }
        }
    }

    /// Narrows a serial-number error of `name`.
    pub fn from_issue<'n>(name: impl Into<SeqNameRef<'n>>, e: IssueError) -> Self {
        let name = name.into();
        match e {
            IssueError::NotFound => ServiceError::NotFound(name.to_owned()),
            IssueError::SerialExhausted(x) => ServiceError::SerialExhausted(name.to_owned(), x),
            IssueError::Alloc(e) => Self::from_alloc(name, e),
            IssueError::Unusable(problem) => {
                throttled!(
                    error,
                    "a sequence's row holds settings seqd cannot use",
                    Some(name.as_str()),
                    sequence = %name,
                    %problem
                );
                ServiceError::Misconfigured(name.to_owned(), problem)
            }
            IssueError::Plain => {
                throttled!(
                    error,
                    "a sequence switched between plain and serial twice within one request",
                    Some(name.as_str()),
                    sequence = %name
                );
                ServiceError::Unavailable
            }
        }
    }

    /// Narrows a store error about `name`.
    pub fn from_store(name: &SeqName, e: StoreError) -> Self {
        match e {
            StoreError::NotFound => ServiceError::NotFound(name.clone()),
            StoreError::AlreadyExists => ServiceError::Exists(name.clone()),
            StoreError::Exhausted => ServiceError::Exhausted(name.clone()),
            other => Self::from(other),
        }
    }
}

impl From<StoreError> for ServiceError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(detail) => {
                throttled!(warn, "storage unavailable", None, error = %detail);
                ServiceError::Unreachable
            }
            StoreError::Config(detail) => {
                throttled!(error, "storage misconfigured", None, error = %detail);
                ServiceError::Internal
            }
            StoreError::Invalid(detail) => {
                tracing::info!(error = %detail, "a value was refused by a constraint of the table");
                ServiceError::InvalidRequest(
                    "a value was refused by a constraint of the sequences table".into(),
                )
            }
            StoreError::BumpRefused(refusal) => ServiceError::BumpRefused(refusal),
            other => {
                throttled!(
                    error,
                    "unexpected storage error without a sequence context",
                    None,
                    error = %other
                );
                ServiceError::Internal
            }
        }
    }
}

impl From<ParseError> for ServiceError {
    fn from(e: ParseError) -> Self {
        ServiceError::InvalidRequest(e.to_string())
    }
}
