//! The HTTP API (docs/design.md, "The edge"): `router(state) -> App`.
//!
//! - [`ids`]: the ID routes (hot path).
//! - [`sequences`]: create, list, read, patch.
//! - [`health`]: liveness and readiness.
//! - [`snowflake`]: snowflake ID routes (next, batch, decode, Leaf's).
//! - [`metrics`]: `/metrics` (Prometheus) and the metric names.
//! - [`monitor`]: the monitor page at `/` and `/v1/info`.
//! - [`middleware`]: what wraps every request: limits, request ids, spans,
//!   per-route request metrics.
//! - [`reads`]: the bound on the database reads of unauthenticated routes.
//! - [`openapi`]: `/openapi.json`, generated from the handlers' annotations.
//! - [`extract`]: parsing of path, query, body and admin token.
//! - [`error`]: the only place that maps errors to status codes.
//! - [`log_throttle`]: failing requests log once per interval per (error,
//!   sequence), with the count left out since.
//! - [`serve`]: the accept loop and connection limits (header-read and idle
//!   deadlines, a cap on open connections).

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, MethodRouter};
use axum::Router;

use crate::allocator::Allocator;
use crate::config::Secret;

pub mod error;
pub mod extract;
pub mod health;
pub mod ids;
pub mod limits;
pub mod log_throttle;
pub mod metrics;
pub mod middleware;
pub mod monitor;
pub mod openapi;
pub mod reads;
pub mod sequences;
pub mod serve;
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

/// What every handler can reach. Cloned once per request by the handlers'
/// `State` extractor: every field is a shared handle, so that costs no allocation.
#[derive(Clone)]
pub struct AppState {
    /// The allocator (and through it, the store).
    pub allocator: Allocator,
    /// Admin authorization mode.
    pub admin: AdminAuth,
    /// The snowflake service, when this instance serves snowflake IDs.
    pub snowflake: Option<crate::snowflake::Snowflake>,
    /// The bound on the database reads of unauthenticated routes.
    pub reads: reads::ReadGate,
    /// How many sequences get per-sequence series on `/metrics`
    /// (`--metrics-top`).
    pub metrics_top: usize,
    /// Serial numbers, over the same allocator.
    pub serials: crate::serial::Serials,
}

impl AppState {
    /// The state of an instance serving `allocator`'s sequences on the real
    /// clock, without snowflake IDs, with the default limits.
    pub fn new(allocator: Allocator, admin: AdminAuth) -> Self {
        AppState {
            serials: crate::serial::Serials::new(
                allocator.clone(),
                std::sync::Arc::new(crate::serial::SystemWallClock),
            ),
            allocator,
            admin,
            snowflake: None,
            reads: reads::ReadGate::default(),
            metrics_top: metrics::DEFAULT_TOP,
        }
    }
}

/// The whole HTTP application: the router inside [`middleware::Front`].
pub type App = middleware::Front<Router>;

/// Builds the application with every route of the API and the default limits.
pub fn router(state: AppState) -> App {
    router_with_limits(state, &limits::Limits::default())
}

/// Builds the application with every route of the API and the given limits.
pub fn router_with_limits(state: AppState, limits: &limits::Limits) -> App {
    let routes = routes(limits);
    let labels = middleware::RouteLabels::new(
        routes
            .iter()
            .map(|(path, _)| *path)
            .chain(openapi::SWAGGER_UI_ROUTES),
    );
    let router = routes
        .into_iter()
        .fold(Router::new(), |r, (path, handlers)| r.route(path, handlers))
        .merge(openapi::swagger_ui())
        .fallback(|| async { ApiError::RouteNotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .with_state(state);
    middleware::Front::new(router, labels, limits)
}

/// The template of every API route (Swagger UI's pages aside), from the table
/// the router is built from.
pub fn route_templates() -> Vec<&'static str> {
    routes(&limits::Limits::default())
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

/// Every API route: its template and handlers. The router and the request
/// metrics' `route` labels are both built from this table, so a route goes
/// here and nowhere else.
fn routes(limits: &limits::Limits) -> Vec<(&'static str, MethodRouter<AppState>)> {
    // Only these routes read a body; the others never buffer one.
    let body_limit = DefaultBodyLimit::max(limits.body_bytes);
    let announced = axum::middleware::from_fn_with_state(
        limits.body_bytes,
        limits::refuse_announced_overflow,
    );
    vec![
        // The routes that draw IDs answer HEAD 405 (`ids::head_*`) instead
        // of running their GET handler, which would draw.
        (
            "/v1/sequences/{name}/next",
            get(ids::next).post(ids::next).head(ids::head_get_post),
        ),
        (
            "/v1/sequences/{name}/batch",
            get(ids::batch).post(ids::batch).head(ids::head_get_post),
        ),
        (
            "/v1/sequences",
            get(sequences::list)
                .post(sequences::create)
                .layer(body_limit)
                .layer(announced.clone()),
        ),
        (
            "/v1/sequences/{name}",
            get(sequences::get)
                .patch(sequences::patch)
                .layer(body_limit)
                .layer(announced),
        ),
        (
            "/api/segment/get/{name}",
            get(ids::leaf_get).head(ids::head_get),
        ),
        (
            "/v1/snowflake/next",
            get(snowflake::next)
                .post(snowflake::next)
                .head(ids::head_get_post),
        ),
        (
            "/v1/snowflake/batch",
            get(snowflake::batch)
                .post(snowflake::batch)
                .head(ids::head_get_post),
        ),
        ("/v1/snowflake/decode/{id}", get(snowflake::decode)),
        (
            "/api/snowflake/get/{key}",
            get(snowflake::leaf_get).head(ids::head_get),
        ),
        ("/healthz", get(health::healthz)),
        ("/readyz", get(health::readyz)),
        ("/metrics", get(metrics::metrics)),
        ("/", get(monitor::index)),
        ("/assets/{file}", get(monitor::asset)),
        ("/v1/info", get(monitor::info)),
        ("/openapi.json", get(openapi::openapi_json)),
    ]
}
