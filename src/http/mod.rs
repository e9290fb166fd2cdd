//! The HTTP API (DESIGN.md, HTTP API v1): `router(state) -> Router`.
//!
//! - [`ids`]: the ID routes (hot path).
//! - [`sequences`]: create, list, read, patch.
//! - [`health`]: liveness and readiness.
//! - [`snowflake`]: snowflake ID routes (next, batch, decode, Leaf's).
//! - [`metrics`]: `/metrics` (Prometheus) and the metric names.
//! - [`monitor`]: the monitor page at `/` and `/v1/info`.
//! - [`middleware`]: request ids, request spans, per-route request metrics.
//! - [`openapi`]: `/openapi.json`, generated from the handlers' annotations.
//! - [`extract`]: parsing of path, query, body and admin token.
//! - [`error`]: the only place that maps errors to status codes.

use axum::routing::get;
use axum::Router;

use crate::allocator::Allocator;
use crate::config::Secret;

pub mod error;
pub mod extract;
pub mod health;
pub mod ids;
pub mod limits;
pub mod metrics;
pub mod middleware;
pub mod monitor;
pub mod openapi;
pub mod sequences;
pub mod snowflake;

use error::ApiError;

/// Who may call the admin routes.
#[derive(Debug, Clone)]
pub enum AdminAuth {
    /// Callers must send `Authorization: Bearer <token>`.
    Token(Secret),
    /// No token set and a loopback listener: admin calls are open.
    OpenOnLoopback,
    /// No token set and a non-loopback listener: admin calls are refused.
    Refused,
}

impl AdminAuth {
    /// The mode for a token (if any) and whether the listener is loopback.
    pub fn decide(token: Option<Secret>, loopback: bool) -> Self {
        match (token, loopback) {
            (Some(t), _) => AdminAuth::Token(t),
            (None, true) => AdminAuth::OpenOnLoopback,
            (None, false) => AdminAuth::Refused,
        }
    }

    /// A short description for the start-up log and the monitor.
    pub fn describe(&self) -> &'static str {
        match self {
            AdminAuth::Token(_) => "bearer token required",
            AdminAuth::OpenOnLoopback => "open (no token set, loopback listener only)",
            AdminAuth::Refused => "disabled (no token set, non-loopback listener)",
        }
    }
}

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    /// The allocator (and through it, the store).
    pub allocator: Allocator,
    /// Admin authorization mode.
    pub admin: AdminAuth,
}

/// Builds the router with every route of the API and the default limits.
pub fn router(state: AppState) -> Router {
    router_with_limits(state, &limits::Limits::default())
}

/// Builds the router with every route of the API and the given limits.
pub fn router_with_limits(state: AppState, limits: &limits::Limits) -> Router {
    let routes = Router::new()
        .route("/v1/sequences/{name}/next", get(ids::next).post(ids::next))
        .route(
            "/v1/sequences/{name}/batch",
            get(ids::batch).post(ids::batch),
        )
        .route(
            "/v1/sequences",
            get(sequences::list).post(sequences::create),
        )
        .route(
            "/v1/sequences/{name}",
            get(sequences::get).patch(sequences::patch),
        )
        .route("/api/segment/get/{name}", get(ids::leaf_get))
        .route(
            "/v1/snowflake/next",
            get(snowflake::next).post(snowflake::next),
        )
        .route(
            "/v1/snowflake/batch",
            get(snowflake::batch).post(snowflake::batch),
        )
        .route("/v1/snowflake/decode/{id}", get(snowflake::decode))
        .route("/api/snowflake/get/{key}", get(snowflake::leaf_get))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(metrics::metrics))
        .route("/", get(monitor::index))
        .route("/assets/{file}", get(monitor::asset))
        .route("/v1/info", get(monitor::info))
        .route("/openapi.json", get(openapi::openapi_json))
        .merge(openapi::swagger_ui())
        .fallback(|| async { ApiError::RouteNotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed });
    limits::apply(routes, limits)
        .layer(middleware::layers())
        .with_state(state)
}
