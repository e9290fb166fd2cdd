//! The API's errors and their one mapping to HTTP: status, code, message.
//!
//! This is the only place that knows status codes. Internal details (driver
//! text, SQL) are logged here and never sent.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::allocator::AllocError;
use crate::domain::{NameRef, ParseError, SeqName};
use crate::snowflake::SnowflakeError;
use crate::store::StoreError;

/// Seconds a client is told to wait after a 503.
pub const RETRY_AFTER_SECS: u64 = 1;

/// Everything an API call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The path's sequence name is not valid.
    #[error("{0}")]
    InvalidName(ParseError),
    /// The batch count is missing or out of range.
    #[error("{0}")]
    InvalidCount(String),
    /// A malformed body or a bad field.
    #[error("{0}")]
    InvalidRequest(String),
    /// The body is larger than the server accepts.
    #[error("request body too large")]
    PayloadTooLarge,
    /// An admin call without the right token.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// No such sequence.
    #[error("sequence '{0}' not found")]
    SequenceNotFound(SeqName),
    /// Create of an existing name.
    #[error("sequence '{0}' already exists")]
    SequenceExists(SeqName),
    /// The sequence cannot go higher.
    #[error("sequence '{0}' is exhausted")]
    SequenceExhausted(SeqName),
    /// No IDs in memory and the database unreachable or too slow.
    #[error("storage unavailable")]
    StorageUnavailable,
    /// The request took longer than the request timeout.
    #[error("request took longer than the server's request timeout")]
    RequestTimeout,
    /// Too many requests in flight; this one was shed.
    #[error("too many requests in flight; retry shortly")]
    Overloaded,
    /// No route matches the path.
    #[error("no such route")]
    RouteNotFound,
    /// The route exists but not for this method.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// A bug or a misconfiguration; details only in the log.
    #[error("internal error")]
    Internal,
    /// No snowflake ID could be issued.
    #[error("{0}")]
    Snowflake(SnowflakeError),
    /// Snowflake IDs are turned off on this instance.
    #[error("snowflake IDs are disabled on this instance (--snowflake false)")]
    SnowflakeDisabled,
}

impl ApiError {
    /// Maps an allocator error for `name`.
    pub fn from_alloc<'n>(name: impl Into<NameRef<'n>>, e: AllocError) -> Self {
        let name = name.into();
        match e {
            AllocError::NotFound => ApiError::SequenceNotFound(name.to_owned()),
            AllocError::Exhausted => ApiError::SequenceExhausted(name.to_owned()),
            AllocError::Unavailable { storage_failing } => {
                tracing::warn!(sequence = %name, storage_failing, "no segment available within the wait timeout");
                ApiError::StorageUnavailable
            }
        }
    }

    /// Maps a store error for `name`, logging what clients must not see.
    pub fn from_store(name: &SeqName, e: StoreError) -> Self {
        match e {
            StoreError::NotFound => ApiError::SequenceNotFound(name.clone()),
            StoreError::AlreadyExists => ApiError::SequenceExists(name.clone()),
            StoreError::Exhausted => ApiError::SequenceExhausted(name.clone()),
            other => Self::from(other),
        }
    }

    /// Maps a snowflake generator error, logging what operators need.
    pub fn from_snowflake(e: SnowflakeError) -> Self {
        match &e {
            SnowflakeError::ClockMovedBackwards { behind_ms } => {
                tracing::warn!(
                    behind_ms,
                    "snowflake: clock behind the last timestamp issued; refusing"
                )
            }
            SnowflakeError::ClockStalled { waited_ms } => {
                tracing::warn!(waited_ms, "snowflake: clock did not advance")
            }
            SnowflakeError::Exhausted => tracing::error!("snowflake: timestamps ran out"),
            _ => {}
        }
        ApiError::Snowflake(e)
    }

    fn parts(&self) -> (StatusCode, &'static str, String) {
        use ApiError::*;
        match self {
            Snowflake(e) => snowflake_parts(e),
            SnowflakeDisabled => (
                StatusCode::NOT_FOUND,
                "snowflake_disabled",
                self.to_string(),
            ),
            InvalidName(e) => (StatusCode::BAD_REQUEST, "invalid_name", e.to_string()),
            InvalidCount(m) => (StatusCode::BAD_REQUEST, "invalid_count", m.clone()),
            InvalidRequest(m) => (StatusCode::BAD_REQUEST, "invalid_request", m.clone()),
            PayloadTooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                self.to_string(),
            ),
            Unauthorized(m) => (StatusCode::UNAUTHORIZED, "unauthorized", m.to_string()),
            SequenceNotFound(n) => (
                StatusCode::NOT_FOUND,
                "sequence_not_found",
                format!(
                    "sequence '{n}' not found; create it with POST /v1/sequences \
                     {{\"name\":\"{n}\",\"start\":1,\"step\":1000}}, `seqd sequences create {n}`, \
                     or SQL: INSERT INTO sequences (name, max_id, step) VALUES ('{n}', 0, 1000)"
                ),
            ),
            SequenceExists(_) => (StatusCode::CONFLICT, "sequence_exists", self.to_string()),
            SequenceExhausted(_) => (StatusCode::CONFLICT, "sequence_exhausted", self.to_string()),
            StorageUnavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "storage_unavailable",
                "no IDs in memory and the database is unreachable or too slow; retry later".into(),
            ),
            RequestTimeout => (
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                self.to_string(),
            ),
            Overloaded => (
                StatusCode::SERVICE_UNAVAILABLE,
                "overloaded",
                self.to_string(),
            ),
            RouteNotFound => (StatusCode::NOT_FOUND, "not_found", self.to_string()),
            MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                self.to_string(),
            ),
            Internal => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                self.to_string(),
            ),
        }
    }
}

fn snowflake_parts(e: &SnowflakeError) -> (StatusCode, &'static str, String) {
    const UNAVAILABLE: StatusCode = StatusCode::SERVICE_UNAVAILABLE;
    match e {
        SnowflakeError::NoWorker => (
            UNAVAILABLE,
            "worker_lease_lost",
            "no snowflake worker ID is leased (not yet, the database is unreachable, or every worker ID is \
             held by another instance); retry later"
                .into(),
        ),
        SnowflakeError::LeaseExpiring => (
            UNAVAILABLE,
            "worker_lease_lost",
            "the snowflake worker ID lease could not be renewed in time; IDs resume once it is".into(),
        ),
        SnowflakeError::Closed => (UNAVAILABLE, "worker_lease_lost", "shutting down".into()),
        SnowflakeError::ClockMovedBackwards { behind_ms } => (
            UNAVAILABLE,
            "clock_moved_backwards",
            format!("the clock is {behind_ms} ms behind the last timestamp issued; IDs resume when it catches up"),
        ),
        SnowflakeError::ClockStalled { waited_ms } => (
            UNAVAILABLE,
            "clock_stalled",
            format!("the clock did not advance to a free timestamp within {waited_ms} ms; retry later"),
        ),
        SnowflakeError::Exhausted => (
            StatusCode::CONFLICT,
            "snowflake_exhausted",
            "the timestamp field of the snowflake layout is full; no more IDs with this epoch and bits".into(),
        ),
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(detail) => {
                tracing::warn!(error = %detail, "storage unavailable");
                ApiError::StorageUnavailable
            }
            StoreError::Config(detail) => {
                tracing::error!(error = %detail, "storage misconfigured");
                ApiError::Internal
            }
            other => {
                tracing::error!(error = %other, "unexpected storage error without a sequence context");
                ApiError::Internal
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, message) = self.parts();
        let body = Json(json!({ "error": { "code": code, "message": message } }));
        let mut resp = (status, body).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        }
        if let ApiError::Snowflake(SnowflakeError::ClockMovedBackwards { behind_ms }) = &self {
            // Seconds until the clock is back where it was.
            let secs = (*behind_ms).max(1).unsigned_abs().div_ceil(1000);
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}
