//! Request limits: body size, time per request, requests in flight.
//!
//! Beyond the concurrency limit, requests are shed at once (503 `overloaded`
//! with `Retry-After`) rather than queued, so a flood cannot pile up memory or
//! latency. A request that runs past the timeout (a slow client sending its
//! body, a wait that cannot end) answers 408 `request_timeout`.

use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::DefaultBodyLimit;
use axum::Router;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::{BoxError, ServiceBuilder};

use super::error::ApiError;

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

/// Wraps `router` in the limits.
pub fn apply<S: Clone + Send + Sync + 'static>(router: Router<S>, limits: &Limits) -> Router<S> {
    router
        .layer(DefaultBodyLimit::max(limits.body_bytes))
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(
                    |e: BoxError| async move { classify(e) },
                ))
                .load_shed()
                // Global: `Router::layer` wraps each route on its own, and a plain
                // concurrency limit would then count per route, not per process.
                .layer(GlobalConcurrencyLimitLayer::new(limits.max_concurrency))
                .timeout(limits.request_timeout),
        )
}

fn classify(e: BoxError) -> ApiError {
    if e.is::<tower::timeout::error::Elapsed>() {
        ApiError::RequestTimeout
    } else if e.is::<tower::load_shed::error::Overloaded>() {
        ApiError::Overloaded
    } else {
        tracing::error!(error = %e, "request failed in a middleware");
        ApiError::Internal
    }
}
