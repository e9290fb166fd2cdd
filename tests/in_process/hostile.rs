//! Hostile input never gets a 5xx, a panic, or a body that is not the
//! documented error shape: a property-based fuzz of the router (no socket,
//! in-memory store) over names, query strings, methods and bodies.

use crate::support::common;
use crate::support::server;

use std::sync::Arc;
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::http::{Method, Request};
use proptest::prelude::*;
use seqd::allocator::AllocatorConfig;
use seqd::http::{router, AdminAuth, AppState};
use seqd::service::Service;
use seqd::store::memory::MemoryStore;
use tower::ServiceExt;

const CODES: &[&str] = &[
    "invalid_name",
    "invalid_count",
    "invalid_request",
    "unauthorized",
    "sequence_not_found",
    "sequence_exists",
    "sequence_exhausted",
    "payload_too_large",
    "not_found",
    "method_not_allowed",
];

fn app(store: Arc<MemoryStore>) -> seqd::http::App {
    let cfg = AllocatorConfig {
        wait_timeout: Duration::from_millis(50),
        ..AllocatorConfig::default()
    };
    router(AppState::new(
        Service::new(store, cfg),
        AdminAuth::OpenOnLoopback,
    ))
}

/// One of `fixed`, each as likely as a string of `pattern`.
fn fixed_or(fixed: &[&str], pattern: &'static str) -> impl Strategy<Value = String> {
    let fixed: Vec<String> = fixed.iter().map(|s| s.to_string()).collect();
    prop_oneof![
        fixed.len() as u32 => proptest::sample::select(fixed),
        1 => pattern,
    ]
}

/// Path segments an attacker would try, raw (already percent-encoded where needed).
fn name_segment() -> impl Strategy<Value = String> {
    fixed_or(
        &[
            "",
            &"a".repeat(129),
            &"a".repeat(128),
            "%C3%A9t%C3%A9",
            "..%2F..%2Fetc%2Fpasswd",
            "%00",
            "a%20b",
            "x'%3B%20DROP%20TABLE%20sequences%3B--",
            "%FF%FE",
            "ok",
        ],
        "[A-Za-z0-9._:%-]{0,140}",
    )
}

fn query() -> impl Strategy<Value = String> {
    let more = ["?count=99999999999999999999999", "?count=%00", "?count=5"];
    fixed_or(
        &[&common::BAD_COUNT_QUERIES[..], &more].concat(),
        "\\?[a-z=&%0-9]{0,30}",
    )
}

fn body() -> impl Strategy<Value = (Option<&'static str>, Vec<u8>)> {
    let ct = prop_oneof![
        Just(None),
        Just(Some("application/json")),
        Just(Some("text/plain"))
    ];
    let payload = prop_oneof![
        Just(b"{not json".to_vec()),
        Just(br#"{"name":"x","step":"ten"}"#.to_vec()),
        Just(br#"{"name":"x","unknown":1}"#.to_vec()),
        Just(br#"{"name":"x","start":-5}"#.to_vec()),
        Just(br#"{"name":"x","step":9223372036854775807}"#.to_vec()),
        Just(br#"{"name":"okname","step":5}"#.to_vec()),
        Just(br#"{"step":5}"#.to_vec()),
        Just(br#"[]"#.to_vec()),
        Just(vec![0xff, 0xfe, 0x00]),
        proptest::collection::vec(any::<u8>(), 0..64),
    ];
    (ct, payload)
}

fn method() -> impl Strategy<Value = Method> {
    prop_oneof![
        Just(Method::GET),
        Just(Method::POST),
        Just(Method::PATCH),
        Just(Method::DELETE),
        Just(Method::PUT)
    ]
}

fn route() -> impl Strategy<Value = String> {
    (name_segment(), query(), 0..5usize).prop_map(|(n, q, r)| match r {
        0 => format!("/v1/sequences/{n}/next{q}"),
        1 => format!("/v1/sequences/{n}/batch{q}"),
        2 => format!("/v1/sequences/{n}{q}"),
        3 => format!("/api/segment/get/{n}{q}"),
        _ => format!("/v1/sequences{q}"),
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn no_input_gets_a_5xx_or_an_undocumented_error(path in route(), m in method(), (ct, payload) in body()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            // Its requests count in the process's request metrics.
            let _requests = server::requests_shared().await;
            let store = Arc::new(MemoryStore::new());
            store.insert("ok", 0, 10);
            // A loopback Host, as a local client sends: admin calls are open to it.
            let mut req = Request::builder().method(m.clone()).uri(&path).header("host", "localhost");
            if let Some(ct) = ct {
                req = req.header("content-type", ct);
            }
            let Ok(req) = req.body(Body::from(payload)) else {
                return Ok(()); // not even a valid HTTP request line: the server never sees it
            };
            let resp = app(store).oneshot(req).await.unwrap();
            let status = resp.status();
            let bytes = to_bytes(resp.into_body(), 1 << 20).await.unwrap();
            prop_assert!(status.as_u16() < 500, "{m} {path}: {status}");
            if !status.is_success() {
                let v: serde_json::Value = serde_json::from_slice(&bytes)
                    .map_err(|e| TestCaseError::fail(format!("{m} {path}: {status} body not JSON: {e}")))?;
                let code = v["error"]["code"].as_str().unwrap_or("");
                prop_assert!(CODES.contains(&code), "{m} {path}: undocumented code {code:?}");
                prop_assert!(v["error"]["message"].is_string());
            }
            Ok(())
        })?;
    }
}

#[tokio::test]
async fn a_ten_megabyte_body_is_refused_with_413() {
    // Its request counts in the process's request metrics.
    let _requests = server::requests_shared().await;
    let store = Arc::new(MemoryStore::new());
    let req = Request::post("/v1/sequences")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Body::from(vec![b' '; 10 * 1024 * 1024]))
        .unwrap();
    let resp = app(store.clone()).oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 413);
    let v: serde_json::Value =
        serde_json::from_slice(&to_bytes(resp.into_body(), 1 << 20).await.unwrap()).unwrap();
    assert_eq!(v["error"]["code"], "payload_too_large");
}
