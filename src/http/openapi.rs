//! `GET /openapi.json`: the OpenAPI 3.1 description of the API, generated
//! with `utoipa` from the `#[utoipa::path]` annotation on each handler; and
//! Swagger UI on it at `/docs/` ([`swagger_ui`], files embedded in the binary).
//!
//! The wire types that live outside `http/` (the store's row, the allocator's
//! buffer snapshot) or that handlers write by hand (the ID bodies) are
//! described here by documentation-only structs ([`SequenceDoc`],
//! [`BufferDoc`], [`NextIdDoc`] ...). The routes of [`super::metrics`] and
//! [`super::monitor`] are annotated here too, on documentation-only functions
//! (see [`other_routes`]), so that those modules stay free of OpenAPI code.
//!
//! `tests/openapi.rs` checks that the document lists exactly the routes the
//! router serves (every route registered under `src/`, every method of each)
//! and that real responses carry exactly the documented fields: a route added
//! without an annotation here fails that test.

use std::collections::HashMap;
use std::sync::OnceLock;

use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use axum::Router;
use chrono::{DateTime, Utc};
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};
use utoipa_swagger_ui::{Config, SwaggerUi};

use super::{health, ids, sequences, snowflake};

/// Name of the admin bearer-token security scheme in the document.
pub const ADMIN_SECURITY: &str = "admin_token";

/// The OpenAPI document of seqd's HTTP API.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "seqd",
        description = "Unique 64-bit IDs per named sequence, served from segments reserved in \
                       PostgreSQL, MySQL/MariaDB or SQLite (the Leaf/TDDL segment design).\n\n\
                       Every error body is `{\"error\": {\"code\": \"...\", \"message\": \"...\"}}`. \
                       Any route answers 404 `not_found` for an unknown path and 405 \
                       `method_not_allowed` for a wrong method."
    ),
    paths(
        ids::next,
        ids::batch,
        sequences::list,
        sequences::create,
        sequences::get,
        sequences::patch,
        ids::leaf_get,
        snowflake::next,
        snowflake::batch,
        snowflake::decode,
        snowflake::leaf_get,
        health::healthz,
        health::readyz,
        other_routes::metrics,
        other_routes::monitor_page,
        other_routes::monitor_asset,
        other_routes::info,
        openapi_json,
    ),
    components(schemas(
        ErrorBody,
        ErrorDetail,
        ErrorCode,
        NextIdDoc,
        BatchDoc,
        SequenceDoc,
        SequenceListDoc,
        BufferDoc,
        SegmentDoc,
        sequences::CreateBody,
        sequences::PatchBody,
        HealthDoc,
        ReadyDoc,
        ReadyChecksDoc,
        InfoDoc,
        snowflake::SnowflakeIdDoc,
        snowflake::SnowflakeBatchDoc,
        snowflake::SnowflakeDecodedDoc,
    )),
    modifiers(&AdminBearer, &UniqueOperationIds),
    tags(
        (name = "ids", description = "Issuing IDs (the hot path)"),
        (name = "sequences", description = "Creating, listing, reading and changing sequences"),
        (name = "snowflake", description = "Time-ordered snowflake IDs (no sequence, no database round trip per ID)"),
        (name = "operations", description = "Health, readiness, metrics, the monitor page and this document"),
    )
)]
pub struct ApiDoc;

/// Adds the admin bearer-token scheme that create and patch require.
struct AdminBearer;

impl Modify for AdminBearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            ADMIN_SECURITY,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "`Authorization: Bearer <SEQD_ADMIN_TOKEN>`. With no token configured, admin \
                         calls are open while the server listens on a loopback address, and refused \
                         otherwise.",
                    ))
                    .build(),
            ),
        );
    }
}

/// Makes operation ids unique, as OpenAPI requires: an operation served on
/// several methods (`method(get, post)`) gets one id per method, suffixed
/// with the method (`next_id_get`, `next_id_post`).
struct UniqueOperationIds;

fn operations(item: &mut PathItem) -> [(&'static str, &mut Option<Operation>); 8] {
    [
        ("get", &mut item.get),
        ("put", &mut item.put),
        ("post", &mut item.post),
        ("delete", &mut item.delete),
        ("options", &mut item.options),
        ("head", &mut item.head),
        ("patch", &mut item.patch),
        ("trace", &mut item.trace),
    ]
}

impl Modify for UniqueOperationIds {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let mut uses: HashMap<String, usize> = HashMap::new();
        for item in openapi.paths.paths.values_mut() {
            for (_, op) in operations(item) {
                if let Some(id) = op.as_ref().and_then(|o| o.operation_id.clone()) {
                    *uses.entry(id).or_default() += 1;
                }
            }
        }
        for item in openapi.paths.paths.values_mut() {
            for (method, op) in operations(item) {
                if let Some(id) = op.as_mut().and_then(|o| o.operation_id.as_mut()) {
                    if uses.get(id.as_str()).copied().unwrap_or(0) > 1 {
                        id.push('_');
                        id.push_str(method);
                    }
                }
            }
        }
    }
}

/// The document as JSON, built once.
pub fn document() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc =
            serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serializes");
        // utoipa 5 emits `min_properties` as `maxProperties`; a patch must
        // name at least one field.
        if let Some(patch) = doc
            .pointer_mut("/components/schemas/PatchBody")
            .and_then(|v| v.as_object_mut())
        {
            patch.remove("maxProperties");
            patch.insert("minProperties".into(), 1.into());
        }
        serde_json::to_string_pretty(&doc).expect("the OpenAPI document serializes")
    })
}

/// Where the Swagger UI is served.
const SWAGGER_UI: &str = "/docs";

/// The routes [`swagger_ui`] adds (for the request metrics' labels).
pub const SWAGGER_UI_ROUTES: [&str; 3] = ["/docs", "/docs/", "/docs/{*rest}"];

/// Swagger UI at `/docs/` (and `/docs`, redirecting), showing `/openapi.json`.
/// Its pages are not API operations, so the document does not list them.
pub fn swagger_ui<S: Clone + Send + Sync + 'static>() -> Router<S> {
    SwaggerUi::new(SWAGGER_UI)
        .config(Config::new(["/openapi.json"]))
        .into()
}

/// `GET /openapi.json`.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "operations",
    summary = "This OpenAPI document",
    responses((status = 200, description = "This document (OpenAPI 3.1)", content_type = "application/json", body = Object)),
)]
pub async fn openapi_json() -> Response {
    let mut resp = document().into_response();
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// Every error: `{"error": {"code": "...", "message": "..."}}`.
#[derive(ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// The `error` object of an [`ErrorBody`].
#[derive(ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable code.
    pub code: ErrorCode,
    /// Human-readable explanation; never contains SQL or driver text.
    #[schema(example = "sequence 'order' not found; create it with POST /v1/sequences ...")]
    pub message: String,
}

/// The documented error codes.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: the name does not match `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`.
    InvalidName,
    /// 400: `count` missing, repeated, not an integer, or outside 1..=10000.
    InvalidCount,
    /// 400: malformed body or a bad field.
    InvalidRequest,
    /// 401: admin call without the right token.
    Unauthorized,
    /// 404: no such sequence.
    SequenceNotFound,
    /// 404: no such route.
    NotFound,
    /// 405: the route exists, not for this method.
    MethodNotAllowed,
    /// 409: create of an existing name.
    SequenceExists,
    /// 409: the sequence cannot go higher without passing `i64::MAX`.
    SequenceExhausted,
    /// 413: body over 64 KiB.
    PayloadTooLarge,
    /// 503: no IDs in memory and the database unreachable or too slow.
    StorageUnavailable,
    /// 404: snowflake IDs are turned off on this instance.
    SnowflakeDisabled,
    /// 409: the snowflake layout's timestamp field is full.
    SnowflakeExhausted,
    /// 503: no snowflake worker ID leased, or its lease not renewed in time.
    WorkerLeaseLost,
    /// 503: the clock is behind the last snowflake timestamp issued.
    ClockMovedBackwards,
    /// 503: the clock did not advance to a free snowflake timestamp in time.
    ClockStalled,
    /// 500: a bug or a misconfiguration (details only in the log).
    Internal,
}

/// `{"name":"order","id":1001}`.
#[derive(ToSchema)]
#[schema(as = NextId)]
pub struct NextIdDoc {
    /// The sequence.
    #[schema(example = "order")]
    pub name: String,
    /// The ID.
    #[schema(example = 1001)]
    pub id: i64,
}

/// `{"name":"order","ids":[1001,1002,...]}`.
#[derive(ToSchema)]
#[schema(as = Batch)]
pub struct BatchDoc {
    /// The sequence.
    #[schema(example = "order")]
    pub name: String,
    /// The IDs, strictly increasing.
    #[schema(example = json!([1001, 1002, 1003]))]
    pub ids: Vec<i64>,
}

/// A sequence: its database row and this instance's buffer.
#[derive(ToSchema)]
#[schema(as = Sequence)]
pub struct SequenceDoc {
    /// The sequence's name.
    #[schema(example = "order")]
    pub name: String,
    /// The highest ID reserved so far; the next segment starts at `max_id + 1`.
    pub max_id: i64,
    /// The base segment size (the floor of the adapted step).
    pub step: i64,
    /// Free text for operators.
    pub description: String,
    /// When the row was created (UTC).
    pub created_at: DateTime<Utc>,
    /// When the row was last changed, by a reservation or an update (UTC).
    pub updated_at: DateTime<Utc>,
    /// This instance's buffer; `null` until this instance served the sequence.
    pub buffer: Option<BufferDoc>,
}

/// `{"sequences":[...]}`.
#[derive(ToSchema)]
#[schema(as = SequenceList)]
pub struct SequenceListDoc {
    /// Every sequence, ordered by name.
    pub sequences: Vec<SequenceDoc>,
}

/// One sequence's double buffer in this instance.
#[derive(ToSchema)]
#[schema(as = Buffer)]
pub struct BufferDoc {
    /// The sequence.
    pub name: String,
    /// The segment being served, unless none was loaded yet.
    pub current: Option<SegmentDoc>,
    /// The segment fetched ahead, if ready.
    pub next: Option<SegmentDoc>,
    /// True while a fetch is in flight.
    pub loading: bool,
    /// Size of the most recent segment fetched (the adapted step).
    pub current_step: i64,
    /// The row's step as the last fetch saw it.
    pub row_step: i64,
    /// Smoothed consumption rate, IDs per second.
    pub rate_per_sec: f64,
    /// IDs handed out by this instance.
    pub issued: u64,
    /// Successful segment fetches.
    pub fetches: u64,
    /// Failed segment fetches.
    pub fetch_errors: u64,
    /// Requests that found both segments empty and had to wait.
    pub waits: u64,
    /// Milliseconds since the last successful fetch started.
    pub last_fetch_ago_ms: Option<u64>,
    /// How long the last successful fetch took, in milliseconds.
    pub last_fetch_latency_ms: Option<f64>,
    /// The last fetch error, if the last fetch failed.
    pub last_error: Option<String>,
}

/// One reserved segment.
#[derive(ToSchema)]
#[schema(as = Segment)]
pub struct SegmentDoc {
    /// First ID of the segment.
    pub first: i64,
    /// Last ID of the segment.
    pub last: i64,
    /// The next ID this segment would hand out (`null` when used up).
    pub cursor: Option<i64>,
    /// IDs still available in it.
    pub remaining: u64,
}

/// `{"status":"ok"}`.
#[derive(ToSchema)]
#[schema(as = Health)]
pub struct HealthDoc {
    /// Always `ok`.
    #[schema(example = "ok")]
    pub status: String,
}

/// Readiness: `{"status":"ready","checks":{"database":"ok"}}`, or on 503
/// `{"status":"unavailable","checks":{"database":"failed"},"error":{...}}`.
#[derive(ToSchema)]
#[schema(as = Ready)]
pub struct ReadyDoc {
    /// `ready` or `unavailable`.
    #[schema(example = "ready")]
    pub status: String,
    /// Each check and its result.
    pub checks: ReadyChecksDoc,
    /// Present on 503 only (code `storage_unavailable`).
    #[schema(nullable = false)]
    pub error: Option<ErrorDetail>,
}

/// The checks of `/readyz`.
#[derive(ToSchema)]
#[schema(as = ReadyChecks)]
pub struct ReadyChecksDoc {
    /// `ok` or `failed`: the database answers and the schema is in place.
    #[schema(example = "ok")]
    pub database: String,
}

/// `GET /v1/info`: what this instance is and how it is set up.
#[derive(ToSchema)]
#[schema(as = Info)]
pub struct InfoDoc {
    /// seqd's version.
    #[schema(example = "0.1.0")]
    pub version: String,
    /// The storage backend: `postgres`, `mysql`, `sqlite` (or `memory`).
    #[schema(example = "postgres")]
    pub backend: String,
    /// Admin authorization mode: `token`, `open_loopback` or `refused`.
    #[schema(example = "token")]
    pub admin_auth: String,
    /// The same, in words.
    pub admin_auth_description: String,
    /// When this process started serving.
    pub started_at: DateTime<Utc>,
    /// `--segment-target`, in seconds.
    pub segment_target_secs: f64,
    /// `--max-step`.
    pub max_step: i64,
    /// `--wait-timeout`, in seconds.
    pub wait_timeout_secs: f64,
}

/// Documentation-only functions for the routes served by [`super::metrics`]
/// and [`super::monitor`]: each carries the `#[utoipa::path]` of one route and
/// is never called. Keep them in step with those handlers.
pub mod other_routes {
    #![allow(dead_code)]

    use super::{ErrorBody, InfoDoc};

    /// `GET /metrics`.
    #[utoipa::path(
        get,
        path = "/metrics",
        tag = "operations",
        summary = "Prometheus metrics",
        description = "Per-sequence IDs issued, fetches, fetch errors and latency, waits, adapted step and IDs \
                       in memory; HTTP requests and latency per route; build info and start time.",
        responses((status = 200, description = "Prometheus text exposition format 0.0.4", body = String,
            content_type = "text/plain; version=0.0.4; charset=utf-8")),
    )]
    pub async fn metrics() {}

    /// `GET /`.
    #[utoipa::path(
        get,
        path = "/",
        tag = "operations",
        summary = "Monitor page",
        description = "An HTML page (no external resources) that polls `GET /v1/sequences` and shows every \
                       sequence's buffers, rates and errors.",
        responses((status = 200, description = "The page", body = String, content_type = "text/html; charset=utf-8")),
    )]
    pub async fn monitor_page() {}

    /// `GET /assets/{file}`.
    #[utoipa::path(
        get,
        path = "/assets/{file}",
        tag = "operations",
        summary = "The monitor page's stylesheet and script",
        params(("file" = String, Path, description = "`monitor.css` or `monitor.js`", example = "monitor.css")),
        responses(
            (status = 200, description = "The file", content(
                (String = "text/css; charset=utf-8"),
                (String = "text/javascript; charset=utf-8"),
            )),
            (status = 404, description = "`not_found`: no such file", body = ErrorBody),
        ),
    )]
    pub async fn monitor_asset() {}

    /// `GET /v1/info`.
    #[utoipa::path(
        get,
        path = "/v1/info",
        tag = "operations",
        summary = "This instance: version, backend, admin mode, settings",
        responses((status = 200, description = "Server facts", body = InfoDoc)),
    )]
    pub async fn info() {}
}
