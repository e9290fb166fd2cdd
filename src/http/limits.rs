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
