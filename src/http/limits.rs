//! Request limits: body size, time per request, requests in flight.
//!
//! Beyond the concurrency limit, requests are shed at once (503 `overloaded`
//! with `Retry-After`) rather than queued, so a flood cannot pile up memory or
//! latency. A request that runs past the timeout (a slow client sending its
//! body, a wait that cannot end) answers 408 `request_timeout`. Both are
//! enforced by [`super::middleware::Front`]; the body limit (413
//! `payload_too_large`) by the routes that read a body (`super::router_with_limits`).

use std::time::Duration;

/// The limits in force. See `seqd serve --help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body, in bytes.
    pub body_bytes: usize,
    /// Longest a request may take, reading its body included.
    pub request_timeout: Duration,
    /// Most requests handled at once; more are shed with 503.
    pub max_concurrency: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            body_bytes: 64 * 1024,
            request_timeout: Duration::from_secs(10),
            max_concurrency: 10_000,
        }
    }
}

/// Whether `headers` announce a body (`Content-Length`) of more than
/// `limit` bytes: such a request is refused at once (413
/// `payload_too_large`) on every route by the edge (`Front`), before any
/// of its body is awaited and before anything is drawn; a client that
/// announces gigabytes and sends nothing would otherwise hold the request
/// until the request timeout (408). The routes that read a body also bound
/// what they read (`DefaultBodyLimit`), for bodies sent without a length.
pub fn announces_more_than(headers: &axum::http::HeaderMap, limit: usize) -> bool {
    headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|n| n > limit as u64)
}
