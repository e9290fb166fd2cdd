//! HTTP baseline for `scripts/bench-http.sh`: the ceiling of any HTTP ID
//! service on this machine.
//!
//! A minimal axum server with the same runtime settings as `seqd`
//! (`#[tokio::main]`, multi-thread runtime with its defaults, `axum::serve` on
//! a `TcpListener`) whose "allocator" is one `AtomicU64::fetch_add`: no
//! database, no segments, no middleware, no name validation, no metrics.
//! It answers the same routes with the same bodies and the same
//! `Content-Type` / `Cache-Control` headers as `seqd`, so the bytes on the wire
//! differ only by `seqd`'s `x-request-id` header.
//!
//! - `GET|POST /v1/sequences/{name}/next`: the next number as plain text, or
//!   `{"name":"..","id":N}` when the request's `Accept` mentions
//!   `application/json`. (`seqd`'s default is the other way round: JSON
//!   unless `Accept` asks for `text/plain`. The benchmark always sends an
//!   explicit `Accept`, `text/plain` or `application/json`, so both serve the
//!   same format.)
//! - `GET|POST /v1/sequences/{name}/batch?count=N` (1..=10000): N consecutive
//!   numbers from one `fetch_add`, as `{"name":"..","ids":[...]}`.
//! - `GET /healthz`: `ok`.
//!
//! One counter serves every name (the name is only echoed).
//!
//! ```text
//! cargo run --release --example baseline -- 127.0.0.1:0
//! ```
//!
//! Prints `listening on http://ADDR` once bound (port 0 picks a free port).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

const JSON: HeaderValue = HeaderValue::from_static("application/json");
const TEXT: HeaderValue = HeaderValue::from_static("text/plain; charset=utf-8");
const NO_STORE: HeaderValue = HeaderValue::from_static("no-store");

#[derive(Clone)]
struct Counter(Arc<AtomicU64>);

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("BASELINE_LISTEN").ok())
        .unwrap_or_else(|| "127.0.0.1:8090".to_owned());
    let counter = Counter(Arc::new(AtomicU64::new(1)));
    let app = Router::new()
        .route("/v1/sequences/{name}/next", get(next).post(next))
        .route("/v1/sequences/{name}/batch", get(batch).post(batch))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(counter);
    let listener = TcpListener::bind(&addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
}

async fn next(State(c): State<Counter>, Path(name): Path<String>, headers: HeaderMap) -> Response {
    let id = c.0.fetch_add(1, Ordering::Relaxed);
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(id);
    if !wants_json(&headers) {
        respond(TEXT, digits.to_owned())
    } else {
        let mut body = String::with_capacity(name.len() + digits.len() + 20);
        body.push_str("{\"name\":\"");
        body.push_str(&name);
        body.push_str("\",\"id\":");
        body.push_str(digits);
        body.push('}');
        respond(JSON, body)
    }
}

async fn batch(
    State(c): State<Counter>,
    Path(name): Path<String>,
    RawQuery(q): RawQuery,
) -> Response {
    let count = q
        .as_deref()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("count=")))
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|n| (1..=10_000).contains(n));
    let Some(count) = count else {
        return (
            StatusCode::BAD_REQUEST,
            "count must be an integer from 1 to 10000",
        )
            .into_response();
    };
    let first = c.0.fetch_add(count, Ordering::Relaxed);
    let mut body = String::with_capacity(name.len() + 20 + count as usize * 20);
    body.push_str("{\"name\":\"");
    body.push_str(&name);
    body.push_str("\",\"ids\":[");
    let mut buf = itoa::Buffer::new();
    for id in first..first + count {
        if id > first {
            body.push(',');
        }
        body.push_str(buf.format(id));
    }
    body.push_str("]}");
    respond(JSON, body)
}

/// JSON when `Accept` mentions `application/json` (one header lookup and a
/// substring search, as in `seqd`'s `wants_text`).
fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json"))
}

fn respond(content_type: HeaderValue, body: String) -> Response {
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, content_type);
    h.insert(CACHE_CONTROL, NO_STORE);
    resp
}
