//! The API's errors and their one mapping to HTTP: status, code, message.
//!
//! This is the only place that knows status codes. Internal details (driver
//! text, SQL) are logged where they are narrowed and never sent; through [`crate::log_throttle`],
//! so that a flood of failing requests writes a bounded number of lines.
//!
//! [`ErrorCode`] is the one list of the codes an error body can carry: every
//! answer with an error body names one of its variants, and the OpenAPI
//! document's error schema takes its enum from it.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::ParseError;
use crate::service::ServiceError;
use crate::snowflake::SnowflakeError;

/// Defines [`ErrorCode`] and its [`ErrorCode::ALL`] and [`ErrorCode::status`]
/// from one table, so that no code can be left out of either.
macro_rules! error_codes {
    ($($(#[doc = $doc:literal])* $code:ident => $status:ident,)+) => {
        /// The stable, machine-readable code of an error body, serialised in
        /// snake_case (`invalid_name`, ...).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum ErrorCode {
            $($(#[doc = $doc])* $code,)+
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$code,)+];

            /// The status of every answer that carries this code.
            pub fn status(self) -> StatusCode {
                match self {
                    $(ErrorCode::$code => StatusCode::$status,)+
                }
            }
        }
    };
}

error_codes! {
    /// 400: the name does not match `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`.
    InvalidName => BAD_REQUEST,
    /// 400: `count` missing, repeated, not an integer, or outside 1..=10000.
    InvalidCount => BAD_REQUEST,
    /// 400: malformed body or a bad field.
    InvalidRequest => BAD_REQUEST,
    /// 401: no token, or one that is unknown, expired or revoked (an admin
    /// call without the admin token; under `--client-auth on`, a drawing or
    /// reading call without a client token).
    Unauthorized => UNAUTHORIZED,
    /// 403: a client token without the right, or not covering the name
    /// (the same answer whether or not the sequence exists).
    Forbidden => FORBIDDEN,
    /// 404: no such sequence.
    SequenceNotFound => NOT_FOUND,
    /// 404: no such route.
    NotFound => NOT_FOUND,
    /// 405: the route exists, not for this method.
    MethodNotAllowed => METHOD_NOT_ALLOWED,
    /// 408: the request took longer than the request timeout.
    RequestTimeout => REQUEST_TIMEOUT,
    /// 409: a token create with a label already taken.
    TokenExists => CONFLICT,
    /// 404: no token has this label.
    TokenNotFound => NOT_FOUND,
    /// 409: create of an existing name.
    SequenceExists => CONFLICT,
    /// 409: the sequence cannot go higher without passing `i64::MAX`.
    SequenceExhausted => CONFLICT,
    /// 409: the period's counter outgrew `{seq:0N}` and the sequence's
    /// overflow rule is `refuse`.
    SerialExhausted => CONFLICT,
    /// 409: a lease of a global or serial sequence (only plain sequences
    /// can be leased).
    NotLeasable => CONFLICT,
    /// 413: body over the body limit (64 KiB by default).
    PayloadTooLarge => PAYLOAD_TOO_LARGE,
    /// 431: a request head over 16 KiB or with more than 100 headers,
    /// refused before any route sees it (its connection is closed).
    RequestHeadTooLarge => REQUEST_HEADER_FIELDS_TOO_LARGE,
    /// 503: no IDs in memory and the database unreachable or too slow.
    StorageUnavailable => SERVICE_UNAVAILABLE,
    /// 503: too many requests (or database reads) in flight.
    Overloaded => SERVICE_UNAVAILABLE,
    /// 404: snowflake IDs are turned off on this instance.
    SnowflakeDisabled => NOT_FOUND,
    /// 409: the snowflake layout's timestamp field is full.
    SnowflakeExhausted => CONFLICT,
    /// 503: no snowflake worker ID leased, or its lease not renewed in time.
    WorkerLeaseLost => SERVICE_UNAVAILABLE,
    /// 503: the clock is behind the last snowflake timestamp issued.
    ClockMovedBackwards => SERVICE_UNAVAILABLE,
    /// 503: the clock did not advance to a free snowflake timestamp in time.
    ClockStalled => SERVICE_UNAVAILABLE,
    /// 500: the sequence's row holds settings seqd cannot use (written by
    /// SQL); the message names the row and the field. Repair it with PATCH
    /// or SQL.
    SequenceMisconfigured => INTERNAL_SERVER_ERROR,
    /// 500: a bug or a misconfiguration (details only in the log).
    Internal => INTERNAL_SERVER_ERROR,
}

/// Every error: `{"error": {"code": "...", "message": "..."}}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// The `error` object of an [`ErrorBody`].
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable code.
    pub code: ErrorCode,
    /// Human-readable explanation; never contains SQL or driver text.
    #[schema(example = "sequence 'order' not found; create it with POST /v1/sequences ...")]
    pub message: String,
}

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
    /// What the service refused or failed (sequences, storage).
    #[error(transparent)]
    Service(ServiceError),
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
}

impl ApiError {
    /// The code this error answers with.
    pub fn code(&self) -> ErrorCode {
        use ApiError::*;
        match self {
            InvalidName(_) => ErrorCode::InvalidName,
            InvalidCount(_) => ErrorCode::InvalidCount,
            InvalidRequest(_) => ErrorCode::InvalidRequest,
            PayloadTooLarge => ErrorCode::PayloadTooLarge,
            Service(e) => service_code(e),
            RequestTimeout => ErrorCode::RequestTimeout,
            Overloaded => ErrorCode::Overloaded,
            RouteNotFound => ErrorCode::NotFound,
            MethodNotAllowed => ErrorCode::MethodNotAllowed,
            Internal => ErrorCode::Internal,
        }
    }

    /// The message clients see: seqd's own words, never driver text.
    pub fn public_message(&self) -> String {
        use ApiError::*;
        match self {
            Service(ServiceError::NotFound(n)) => format!(
                "sequence '{n}' not found; create it with POST /v1/sequences \
                 {{\"name\":\"{n}\",\"start\":1,\"step\":1000}}, `seqd sequences create {n}`, \
                 or SQL: INSERT INTO sequences (name, max_id, step) VALUES ('{n}', 0, 1000)"
            ),
            Service(ServiceError::Unavailable) => {
                "no IDs in memory and the database is unreachable or too slow; retry later".into()
            }
            Service(ServiceError::Unreachable) => {
                "the database is unreachable or too slow; retry later".into()
            }
            Service(ServiceError::BumpRefused(_)) => Internal.to_string(),
            _ => self.to_string(),
        }
    }
}

fn snowflake_code(e: &SnowflakeError) -> ErrorCode {
    match e {
        SnowflakeError::NoWorker | SnowflakeError::LeaseExpiring | SnowflakeError::Closed => {
            ErrorCode::WorkerLeaseLost
        }
        SnowflakeError::ClockMovedBackwards { .. } => ErrorCode::ClockMovedBackwards,
        SnowflakeError::ClockStalled { .. } => ErrorCode::ClockStalled,
        SnowflakeError::Exhausted => ErrorCode::SnowflakeExhausted,
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        ApiError::Service(e)
    }
}

/// The code of each service error: the HTTP door's one table of them.
fn service_code(e: &ServiceError) -> ErrorCode {
    match e {
        ServiceError::InvalidName(_) => ErrorCode::InvalidName,
        ServiceError::InvalidRequest(_) => ErrorCode::InvalidRequest,
        ServiceError::NotFound(_) => ErrorCode::SequenceNotFound,
        ServiceError::Exists(_) => ErrorCode::SequenceExists,
        ServiceError::Exhausted(_) => ErrorCode::SequenceExhausted,
        ServiceError::SerialExhausted(..) => ErrorCode::SerialExhausted,
        ServiceError::Misconfigured(..) => ErrorCode::SequenceMisconfigured,
        ServiceError::Unavailable | ServiceError::Unreachable => ErrorCode::StorageUnavailable,
        ServiceError::Unauthorized(_) => ErrorCode::Unauthorized,
        ServiceError::Forbidden => ErrorCode::Forbidden,
        ServiceError::TokenExists(_) => ErrorCode::TokenExists,
        ServiceError::TokenNotFound(_) => ErrorCode::TokenNotFound,
        ServiceError::NotLeasable(..) => ErrorCode::NotLeasable,
        ServiceError::Snowflake(e) => snowflake_code(e),
        ServiceError::SnowflakeDisabled => ErrorCode::SnowflakeDisabled,
        ServiceError::BumpRefused(_) | ServiceError::Internal => ErrorCode::Internal,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = self.code();
        let status = code.status();
        let body = ErrorBody {
            error: ErrorDetail {
                code,
                message: self.public_message(),
            },
        };
        let mut resp = (status, Json(body)).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        }
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let ApiError::Service(ServiceError::Snowflake(SnowflakeError::ClockMovedBackwards {
            behind_ms,
        })) = &self
        {
            // Seconds until the clock is back where it was.
            let secs = (*behind_ms).max(1).unsigned_abs().div_ceil(1000);
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}
