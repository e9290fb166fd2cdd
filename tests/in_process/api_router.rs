//! The router without a socket or a database (tower `oneshot` on an in-memory
//! store): the 503 mapping with `Retry-After`, and admin refusal on a
//! non-loopback listener without a token.

use crate::support::server;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::http::{Request, StatusCode};
use seqd::allocator::AllocatorConfig;
use seqd::http::{router, AdminAuth, AppState};
use seqd::service::Service;
use seqd::store::memory::MemoryStore;
use serde_json::Value;
use tower::ServiceExt;

fn app(store: Arc<MemoryStore>, admin: AdminAuth) -> seqd::http::App {
    let cfg = AllocatorConfig {
        wait_timeout: Duration::from_millis(200),
        ..AllocatorConfig::default()
    };
    router(AppState::new(Service::new(store, cfg), admin))
}

async fn call(
    app: seqd::http::App,
    req: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Value) {
    // Its request counts in the process's request metrics.
    let _requests = server::requests_shared().await;
    let resp = app.oneshot(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = to_bytes(body, 1 << 20).await.unwrap();
    (
        parts.status,
        parts.headers,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn storage_down_with_empty_buffers_answers_503_with_retry_after() {
    let store = Arc::new(MemoryStore::new());
    store.insert("s", 0, 10);
    store.set_failing("s", true);
    let req = Request::get("/v1/sequences/s/next")
        .body(Body::empty())
        .unwrap();
    let (status, headers, body) = call(app(store, AdminAuth::OpenOnLoopback), req).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(body["error"]["code"], "storage_unavailable");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(!msg.contains("injected"), "internal detail leaked: {msg}");
}

#[tokio::test]
async fn storage_down_on_a_batch_answers_503_too() {
    let store = Arc::new(MemoryStore::new());
    store.insert("s", 0, 10);
    store.close_gate();
    let req = Request::post("/v1/sequences/s/batch?count=5")
        .body(Body::empty())
        .unwrap();
    let (status, headers, body) = call(app(store, AdminAuth::OpenOnLoopback), req).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(headers.contains_key("retry-after"));
    assert_eq!(body["error"]["code"], "storage_unavailable");
}

#[tokio::test]
async fn admin_calls_are_refused_on_a_public_listener_without_token() {
    assert!(matches!(AdminAuth::decide(None, false), AdminAuth::Refused));
    assert!(matches!(
        AdminAuth::decide(None, true),
        AdminAuth::OpenOnLoopback
    ));
    let store = Arc::new(MemoryStore::new());
    let req = Request::post("/v1/sequences")
        .header("content-type", "application/json")
        .body(Body::from(r#"{"name":"x"}"#))
        .unwrap();
    let (status, _, body) = call(app(store.clone(), AdminAuth::Refused), req).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"]["code"], "unauthorized");
    assert!(store.max_id("x").is_none(), "nothing was created");
}
