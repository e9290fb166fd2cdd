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

/// Refuses at once (413 `payload_too_large`) a request whose
/// `Content-Length` announces more than `limit` bytes, before any of its
/// body is awaited: a client that announces gigabytes and sends nothing
/// would otherwise hold the request until the request timeout (408).
/// Layered on the routes that read a body, beside their body limit.
pub async fn refuse_announced_overflow(
    axum::extract::State(limit): axum::extract::State<usize>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let announced = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > limit as u64) {
        return super::error::ApiError::PayloadTooLarge.into_response();
    }
    next.run(req).await
}
