//! The HTTP door (docs/design.md, "The edge"): `router(state) -> App`.
//! Handlers translate requests into calls of [`crate::service::Service`]
//! and its answers and errors back (`error.rs`, the one table of status
//! codes); the edge (limits, request ids, metrics, the accept loop) wraps
//! them. What each file holds: docs/code-tour.md.

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, MethodRouter};
use axum::Router;

use crate::service::Service;

pub mod error;
pub mod extract;
pub mod head_refusal;
pub mod health;
pub mod ids;
pub mod leases;
pub mod limits;

pub mod metrics;
pub mod middleware;
pub mod monitor;
pub mod openapi;
pub mod reads;
pub mod sequences;
pub mod serve;
pub mod snowflake;
pub mod tinyid;
pub mod tokens;

use error::ApiError;

pub use crate::service::AdminAuth;

/// What every handler can reach. Cloned once per request by the handlers'
/// `State` extractor: every field is a shared handle, so that costs no allocation.
#[derive(Clone)]
pub struct AppState {
    /// The service every route calls: issuing, administering, and who may
    /// do what.
    pub service: Service,
    /// The bound on the database reads of unauthenticated routes.
    pub reads: reads::ReadGate,
    /// How many sequences get per-sequence series on `/metrics`
    /// (`--metrics-top`).
    pub metrics_top: usize,
    /// The RESP door's address, when it listens (`--resp-listen`).
    pub resp_listen: Option<String>,
}

impl AppState {
    /// The state of an instance serving `service`'s sequences, with admin
    /// calls as `admin` says (and `service`'s `--client-auth`), with the
    /// default limits.
    pub fn new(service: Service, admin: AdminAuth) -> Self {
        let access = crate::service::Access::new(service.access().client_auth(), admin);
        Self::serving(service.with_access(access))
    }

    /// The state of an instance serving `service`, with its access rules,
    /// with the default limits.
    pub fn serving(service: Service) -> Self {
        AppState {
            service,
            reads: reads::ReadGate::default(),
            metrics_top: metrics::DEFAULT_TOP,
            resp_listen: None,
        }
    }
}

/// The whole HTTP application: the router inside [`middleware::Front`].
pub type App = middleware::Front<Router>;

/// Builds the application with every route of the API and the default limits.
pub fn router(state: AppState) -> App {
    router_with_limits(state, &limits::Limits::default())
}

/// Builds the application with every route of the API and the given limits,
/// Tinyid's routes under [`tinyid::DEFAULT_PREFIX`].
pub fn router_with_limits(state: AppState, limits: &limits::Limits) -> App {
    router_with(state, limits, tinyid::DEFAULT_PREFIX)
}

/// Builds the application with every route of the API, the given limits
/// and Tinyid's routes under `tinyid_prefix` (checked by
/// [`tinyid::parse_prefix`]).
pub fn router_with(state: AppState, limits: &limits::Limits, tinyid_prefix: &str) -> App {
    let routes = routes(limits, tinyid_prefix);
    let labels = middleware::RouteLabels::new(
        routes
            .iter()
            .map(|(path, _)| *path)
            .chain(openapi::SWAGGER_UI_ROUTES),
    );
    let router = routes
        .into_iter()
        .fold(Router::new(), |r, (path, handlers)| r.route(path, handlers))
        .merge(openapi::swagger_ui());
    finish(router, labels, limits, state)
}

/// The routes of the health listener (`--health-listen`): no ID, no
/// sequence, nothing but what probes and scrapers read.
pub const HEALTH_ROUTES: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

/// The application of the health listener: [`HEALTH_ROUTES`] only, from
/// the same table and state as the API (any other path answers 404).
pub fn health_router(state: AppState, limits: &limits::Limits) -> App {
    let routes: Vec<_> = routes(limits, tinyid::DEFAULT_PREFIX)
        .into_iter()
        .filter(|(path, _)| HEALTH_ROUTES.contains(path))
        .collect();
    let labels = middleware::RouteLabels::new(routes.iter().map(|(path, _)| *path));
    let router = routes
        .into_iter()
        .fold(Router::new(), |r, (path, handlers)| r.route(path, handlers));
    finish(router, labels, limits, state)
}

/// `router` with the JSON fallbacks and its state, inside [`middleware::Front`].
fn finish(
    router: Router<AppState>,
    labels: middleware::RouteLabels,
    limits: &limits::Limits,
    state: AppState,
) -> App {
    let router = router
        .fallback(|| async { ApiError::RouteNotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .with_state(state.clone());
    middleware::Front::new(router, labels, limits, state)
}

/// The template of every API route (Swagger UI's pages aside), from the table
/// the router is built from.
pub fn route_templates() -> Vec<&'static str> {
    routes(&limits::Limits::default(), tinyid::DEFAULT_PREFIX)
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

/// Every API route: its template and handlers. The router and the request
/// metrics' `route` labels are both built from this table, so a route goes
/// here and nowhere else.
fn routes(
    limits: &limits::Limits,
    tinyid_prefix: &str,
) -> Vec<(&'static str, MethodRouter<AppState>)> {
    // Only these routes read a body; the others never buffer one. A body
    // announced over the bound is refused on every route by `Front`.
    let body_limit = DefaultBodyLimit::max(limits.body_bytes);
    vec![
        // The routes that draw IDs answer HEAD 405 (`ids::head_*`) instead
        // of running their GET handler, which would draw.
        (
            ids::NEXT,
            get(ids::next).post(ids::next).head(ids::head_get_post),
        ),
        (
            "/v1/sequences/{name}/batch",
            get(ids::batch).post(ids::batch).head(ids::head_get_post),
        ),
        (
            "/v1/sequences/{name}/lease",
            axum::routing::post(leases::lease),
        ),
        (
            "/v1/sequences/{name}/lease/return",
            axum::routing::post(leases::lease_return).layer(body_limit),
        ),
        (
            "/v1/sequences",
            get(sequences::list)
                .post(sequences::create)
                .layer(body_limit),
        ),
        (
            "/v1/sequences/{name}",
            get(sequences::get)
                .patch(sequences::patch)
                .layer(body_limit),
        ),
        (ids::LEAF_GET, get(ids::leaf_get).head(ids::head_get)),
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
            "/v1/tokens",
            get(tokens::list).post(tokens::create).layer(body_limit),
        ),
        ("/v1/tokens/{label}", axum::routing::delete(tokens::revoke)),
        (
            "/api/snowflake/get/{key}",
            get(snowflake::leaf_get).head(ids::head_get),
        ),
    ]
    .into_iter()
    // Tinyid's routes (their bodies are forms: bounded as the others).
    .chain(tinyid::Route::ALL.map(|route| {
        (
            tinyid::template(tinyid_prefix, route),
            tinyid::handler(route).layer(body_limit),
        )
    }))
    .chain([
        ("/healthz", get(health::healthz)),
        ("/readyz", get(health::readyz)),
        ("/metrics", get(metrics::metrics)),
        ("/", get(monitor::index)),
        ("/assets/{file}", get(monitor::asset)),
        ("/v1/info", get(monitor::info)),
        ("/openapi.json", get(openapi::openapi_json)),
    ])
    .collect()
}
