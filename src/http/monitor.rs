//! The monitor page (`GET /`), its assets (`GET /assets/{file}`), and
//! `GET /v1/info`, the server facts its header shows.
//!
//! The page is one HTML file, one stylesheet and one script, embedded in the
//! binary (`src/http/monitor/`): no CDN, no build step. The script polls one
//! page of `GET /v1/sequences` (100 or 1,000 sequences) and `GET /v1/info`
//! (its `totals`: the instance's chart) every 2 seconds and draws one table
//! row per sequence; next/previous move between pages and a search box
//! narrows them to a name prefix (`?prefix=`, debounced, kept in the page's
//! own query string). It never asks for the whole list, so it stays as quick
//! at a million sequences as at ten. A `Content-Security-Policy` keeps the
//! page to seqd's own origin.

use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::HeaderName;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::extract::PathParam;
use super::{AdminAuth, AppState};
use crate::service::ClientAuth;

const INDEX_HTML: &str = include_str!("monitor/index.html");
const MONITOR_CSS: &str = include_str!("monitor/monitor.css");
const MONITOR_JS: &str = include_str!("monitor/monitor.js");

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn page(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, content_type),
            (CACHE_CONTROL, "no-cache"),
            (HeaderName::from_static("content-security-policy"), CSP),
            (HeaderName::from_static("x-content-type-options"), "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// `GET /`: the monitor page.
#[utoipa::path(
    get,
    path = "/",
    operation_id = "monitor_page",
    tag = "operations",
    summary = "Monitor page",
    description = "An HTML page (no external resources) that polls one page of `GET /v1/sequences` \
                   (100 or 1,000 sequences, with next/previous controls and a search by name prefix) and \
                   `GET /v1/info`, and shows their buffers, rates and errors and the instance's rate. \
                   `?prefix=` opens it on the names starting with that.",
    responses((status = 200, description = "The page", body = String, content_type = "text/html; charset=utf-8")),
)]
pub async fn index() -> Response {
    page("text/html; charset=utf-8", INDEX_HTML)
}

/// `GET /assets/{file}`: the page's stylesheet and script.
#[utoipa::path(
    get,
    path = "/assets/{file}",
    operation_id = "monitor_asset",
    tag = "operations",
    summary = "The monitor page's stylesheet and script",
    params(("file" = String, Path, description = "`monitor.css` or `monitor.js`", example = "monitor.css")),
    responses(
        (status = 200, description = "The file", content(
            (String = "text/css; charset=utf-8"),
            (String = "text/javascript; charset=utf-8"),
        )),
        (status = 400, description = "`invalid_request`: the file name is not valid percent-encoded UTF-8", body = ErrorBody),
        (status = 404, description = "`not_found`: no such file", body = ErrorBody),
    ),
)]
pub async fn asset(PathParam(file): PathParam<String>) -> Result<Response, ApiError> {
    match file.as_str() {
        "monitor.css" => Ok(page("text/css; charset=utf-8", MONITOR_CSS)),
        "monitor.js" => Ok(page("text/javascript; charset=utf-8", MONITOR_JS)),
        _ => Err(ApiError::RouteNotFound),
    }
}

/// Body of `GET /v1/info`: what this instance is, how it is set up, and what
/// it did since it started.
#[derive(Debug, Serialize, ToSchema)]
pub struct Info {
    /// seqd's version.
    #[schema(value_type = String, example = "0.1.0")]
    pub version: &'static str,
    /// The storage backend: `postgres`, `mysql`, `sqlite` (or `memory`).
    #[schema(value_type = String, example = "postgres")]
    pub backend: &'static str,
    /// Admin authorization mode: `token`, `open_loopback` or `refused`.
    #[schema(value_type = String, example = "token")]
    pub admin_auth: &'static str,
    /// The same, in words.
    #[schema(value_type = String)]
    pub admin_auth_description: &'static str,
    /// `--client-auth`: `on` (drawing and reading need a client token) or `off`.
    #[schema(value_type = String, example = "on")]
    pub client_auth: &'static str,
    /// The RESP door's address (`--resp-listen`), `null` when off.
    #[schema(example = "127.0.0.1:6380")]
    pub resp_listen: Option<String>,
    /// When this process started serving.
    #[schema(example = "2026-12-07T09:30:00Z")]
    pub started_at: DateTime<Utc>,
    /// `--segment-target`, in seconds.
    #[schema(example = 600.0)]
    pub segment_target_secs: f64,
    /// `--max-step`.
    #[schema(example = 1_000_000)]
    pub max_step: i64,
    /// `--wait-timeout`, in seconds.
    #[schema(example = 3.0)]
    pub wait_timeout_secs: f64,
    /// What this instance did since it started, every sequence together.
    pub totals: InstanceTotals,
}

/// What an instance did since it started, every sequence together: counters
/// kept as things happen, so reading them costs the same at a million
/// sequences as at one. The monitor's instance chart draws their changes.
#[derive(Debug, Serialize, ToSchema)]
pub struct InstanceTotals {
    /// IDs drawn by every caller, on every door (HTTP, Leaf's and Tinyid's
    /// routes, leases, RESP, snowflake): `seqd_ids_drawn_total` summed over
    /// its labels.
    #[schema(example = 1_250_000)]
    pub ids_drawn: u64,
    /// Names live in this instance's memory, as `seqd_names_in_memory{state="live"}`
    /// counts them: a serial sequence's current period counter is a name of
    /// its own beside its settings.
    #[schema(example = 42)]
    pub live_names: usize,
    /// Segments fetched from the database (a serial sequence's period
    /// counter included). A global sequence's reservations fetch no segment:
    /// they count in `global_reservations`.
    #[schema(example = 310)]
    pub segment_fetches: u64,
    /// The latencies of those fetches added up, in seconds: with
    /// `segment_fetches`, the mean latency of the fetches between two reads.
    #[schema(example = 1.24)]
    pub fetch_seconds: f64,
    /// Reservations made for global sequences: each reserves, at request
    /// time, the IDs of the requests that were waiting together.
    #[schema(example = 0)]
    pub global_reservations: u64,
    /// Requests that waited for a fetch: a name's first use (found or
    /// not), or a burst that emptied a buffer.
    #[schema(example = 3)]
    pub fetch_waits: u64,
    /// Fetches that failed (each attempt).
    #[schema(example = 0)]
    pub fetch_errors: u64,
}

/// `GET /v1/info`.
#[utoipa::path(
    get,
    path = "/v1/info",
    tag = "operations",
    summary = "This instance: version, backend, admin mode, settings, totals since start",
    responses((status = 200, description = "Server facts", body = Info)),
)]
pub async fn info(State(st): State<AppState>) -> Json<Info> {
    let allocator = st.service.allocator();
    let config = allocator.config();
    let totals = allocator.totals();
    Json(Info {
        version: env!("CARGO_PKG_VERSION"),
        backend: st.service.backend(),
        admin_auth: match st.service.access().admin() {
            AdminAuth::Token(_) => "token",
            AdminAuth::OpenOnLoopback => "open_loopback",
            AdminAuth::Refused => "refused",
        },
        admin_auth_description: st.service.access().admin().describe(),
        client_auth: match st.service.access().client_auth() {
            ClientAuth::On => "on",
            ClientAuth::Off => "off",
        },
        resp_listen: st.resp_listen.clone(),
        started_at: super::metrics::started_at().into(),
        segment_target_secs: config.segment_target.as_secs_f64(),
        max_step: config.max_step,
        wait_timeout_secs: config.wait_timeout.as_secs_f64(),
        totals: InstanceTotals {
            ids_drawn: st.service.access().ids_drawn(),
            live_names: allocator.names_in_memory().live,
            segment_fetches: totals.fetches,
            fetch_seconds: totals.fetch_seconds,
            global_reservations: totals.global_reservations,
            fetch_waits: totals.waits,
            fetch_errors: totals.fetch_errors,
        },
    })
}
