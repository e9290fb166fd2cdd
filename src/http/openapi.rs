//! `GET /openapi.json`: the OpenAPI 3.1 description of the API, generated
//! with `utoipa` from the `#[utoipa::path]` annotation on each handler; and
//! Swagger UI on it at `/docs/` ([`swagger_ui`], files embedded in the binary).
//!
//! This module only lists the paths and the components. Each handler
//! carries its own annotation, and the documentation-only structs that
//! describe wire types living outside `http/` (the store's row, the
//! allocator's buffer snapshot) or written by hand (the ID bodies) sit next
//! to their handlers (`ids::NextIdDoc`, `sequences::SequenceDoc`, ...); the
//! error schema is [`super::error`]'s own types. So the handlers never import
//! this module.
//!
//! `tests/in_process/openapi.rs` checks that the document lists exactly the routes the
//! router serves (every route registered under `src/`, every method of each)
//! and that real responses carry exactly the documented fields: a route added
//! without an annotation here fails that test.

use std::collections::HashMap;
use std::sync::OnceLock;

use axum::extract::{FromRequestParts, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_swagger_ui::{Config, SwaggerUi};

use super::error::{ApiError, ErrorBody, ErrorCode, ErrorDetail};
use super::extract::PathParam;
use super::{health, ids, leases, metrics, monitor, sequences, snowflake, tinyid, tokens};

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
        leases::lease,
        leases::lease_return,
        snowflake::next,
        snowflake::batch,
        snowflake::decode,
        snowflake::leaf_get,
        health::healthz,
        health::readyz,
        metrics::metrics,
        monitor::index,
        monitor::asset,
        monitor::info,
        openapi_json,
        tokens::list,
        tokens::create,
        tokens::revoke,
        tinyid::next_segment_id_simple,
        tinyid::next_segment_id,
        tinyid::next_id_simple,
        tinyid::next_id,
    ),
    components(schemas(
        ErrorBody,
        ErrorDetail,
        ErrorCode,
        super::extract::IdDoc,
        super::extract::IdsAsDoc,
        ids::NextIdDoc,
        ids::BatchDoc,
        leases::LeaseBody,
        leases::ReturnBody,
        leases::ReturnedBody,
        tinyid::TinyidErrorDoc,
        tinyid::TinyidSegmentDoc,
        tinyid::TinyidSegmentAnswerDoc,
        tinyid::TinyidIdsAnswerDoc,
        sequences::SequenceDoc,
        sequences::SequenceListDoc,
        sequences::BufferDoc,
        sequences::SerialDoc,
        sequences::ProblemDoc,
        sequences::PeriodView,
        sequences::StripesView,
        sequences::FetchFailureDoc,
        sequences::FetchFailureKindDoc,
        sequences::SegmentDoc,
        sequences::CreateBody,
        sequences::PatchBody,
        health::HealthDoc,
        health::ReadyDoc,
        health::ReadyChecksDoc,
        health::MemoryDoc,
        health::StripeDoc,
        health::FenceDoc,
        monitor::Info,
        monitor::InstanceTotals,
        snowflake::SnowflakeIdDoc,
        snowflake::SnowflakeBatchDoc,
        snowflake::SnowflakeDecodedDoc,
        tokens::TokenList,
        tokens::MadeTokenBody,
        tokens::RevokedBody,
        crate::service::tokens::NewToken,
        crate::service::tokens::PrefixDoc,
        crate::service::tokens::RightDoc,
        crate::service::tokens::TokenView,
    )),
    modifiers(&AdminBearer, &ClientTokens, &UniqueOperationIds),
    tags(
        (name = "ids", description = "Issuing IDs (the hot path)"),
        (name = "sequences", description = "Creating, listing, reading and changing sequences"),
        (name = "snowflake", description = "Time-ordered snowflake IDs (no sequence, no database round trip per ID)"),
        (name = "tinyid", description = "Tinyid's routes, answered as Tinyid's server answers them (under `--tinyid-prefix`)"),
        (name = "tokens", description = "Client tokens: who may draw IDs from which sequences (admin)"),
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

/// Name of the client-token security scheme in the document.
pub const CLIENT_SECURITY: &str = "client_token";

/// The routes that draw IDs or read sequences: under `--client-auth on`
/// they need a client token (or the admin token), and answer 401 and 403.
pub const CLIENT_ROUTES: [&str; 10] = [
    "/v1/sequences/{name}/next",
    "/v1/sequences/{name}/batch",
    "/v1/sequences/{name}/lease",
    "/v1/sequences/{name}/lease/return",
    "/v1/sequences",
    "/v1/sequences/{name}",
    "/api/segment/get/{key}",
    "/v1/snowflake/next",
    "/v1/snowflake/batch",
    "/api/snowflake/get/{key}",
];

/// Adds the client-token scheme, and to every drawing and reading
/// operation (GET on `/v1/sequences` and `/v1/sequences/{name}`; every
/// method of the ID routes) its security (a client token, the admin token,
/// or none under `--client-auth off`) and its 401 and 403 answers.
struct ClientTokens;

impl Modify for ClientTokens {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::SecurityRequirement;
        use utoipa::openapi::{Ref, ResponseBuilder};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            CLIENT_SECURITY,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "`Authorization: Bearer seqd_...`, a client token (`seqd tokens create`).                          Needed under `--client-auth on` only: `draw` covering the name for the ID                          routes (the name `snowflake` for snowflake IDs), `read` for reading and                          listing sequences. The admin token may do everything.",
                    ))
                    .build(),
            ),
        );
        let answer = |text: &str| {
            ResponseBuilder::new()
                .description(text)
                .content(
                    "application/json",
                    utoipa::openapi::ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("ErrorBody")))
                        .build(),
                )
                .build()
        };
        for (path, item) in openapi.paths.paths.iter_mut() {
            if !CLIENT_ROUTES.contains(&path.as_str()) {
                continue;
            }
            for (method, op) in operations(item) {
                let Some(op) = op.as_mut() else { continue };
                let reading = matches!(path.as_str(), "/v1/sequences" | "/v1/sequences/{name}");
                if reading && method != "get" {
                    continue;
                }
                op.security = Some(vec![
                    SecurityRequirement::new(CLIENT_SECURITY, Vec::<String>::new()),
                    SecurityRequirement::new(ADMIN_SECURITY, Vec::<String>::new()),
                    SecurityRequirement::default(),
                ]);
                op.responses.responses.insert(
                    "401".into(),
                    answer("`unauthorized` (`--client-auth on`): no token, or one unknown, expired or revoked").into(),
                );
                op.responses.responses.insert(
                    "403".into(),
                    answer("`forbidden` (`--client-auth on`): the token lacks the right or does not cover the name (the same whether or not the sequence exists)").into(),
                );
            }
        }
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
/// Its errors are seqd's JSON errors too (see `swagger_errors`).
pub fn swagger_ui<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let ui: Router<S> = SwaggerUi::new(SWAGGER_UI)
        .config(Config::new(["/openapi.json"]))
        .into();
    ui.layer(axum::middleware::from_fn(swagger_errors))
}

/// Swagger UI's handler answers a bad path with axum's plain-text 400 and
/// an unknown file with an empty 404: check the path first, and answer its
/// errors with [`ApiError`]'s body.
async fn swagger_errors(req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    if let Err(e) = PathParam::<Vec<(String, String)>>::from_request_parts(&mut parts, &()).await {
        return e.into_response();
    }
    let resp = next.run(Request::from_parts(parts, body)).await;
    match resp.status() {
        StatusCode::NOT_FOUND => ApiError::RouteNotFound.into_response(),
        s if s.is_server_error() => ApiError::Internal.into_response(),
        _ => resp,
    }
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
