//! Error codes both ways, against `GET /openapi.json` of a running server:
//! the document's code enum is exactly `ErrorCode::ALL`, every code the
//! server can send; and every documented code is answered by a real
//! request, each on a server set up for it ([`provoke`]: a tiny concurrency
//! limit, a short request timeout, a failing or misconfigured store, a
//! frozen snowflake clock...).

use crate::support::common;
use crate::support::openapi_doc;
use crate::support::server;

use std::collections::BTreeSet;

use std::sync::Arc;
use std::time::Duration;

use common::Backend;
use openapi_doc::*;
use reqwest::StatusCode;
use seqd::allocator::AllocatorConfig;
use seqd::config::Secret;
use seqd::config::Settings;
use seqd::http::error::ErrorCode;
use seqd::http::limits::Limits;
use seqd::http::{router, AdminAuth, AppState};
use seqd::service::Service;
use seqd::snowflake::{Layout, LeaseConfig, ManualWallClock, Snowflake, TickOutcome};
use seqd::store::forwarding::{Call, Forwarding, Hook};
use seqd::store::memory::MemoryStore;
use seqd::store::StoreError;
use serde_json::{json, Value};
use server::TestServer;

/// What a code is called on the wire.
fn wire_name(code: ErrorCode) -> String {
    serde_json::to_value(code)
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

/// Every error answer names an `ErrorCode`, so `ErrorCode::ALL` is every code
/// the server can send.
#[tokio::test]
async fn every_code_the_server_can_send_is_documented() {
    let (s, _db) = start().await;
    let doc = fetch_doc(&s).await;
    let sendable: BTreeSet<String> = ErrorCode::ALL.iter().map(|c| wire_name(*c)).collect();
    assert_eq!(
        sendable.len(),
        ErrorCode::ALL.len(),
        "two codes share a name"
    );
    assert_eq!(
        sendable,
        documented_codes(&doc),
        "codes the server can send (left) vs codes in /openapi.json (right)"
    );
    s.stop().await;
}

/// One error answer: the request and what came back.
#[derive(Debug)]
struct Sent {
    method: &'static str,
    path: String,
    /// The documented operation the request went to, if it names the status
    /// (`None` for the answers any route may give: 404/405 fallbacks, 408,
    /// shedding, 500).
    template: Option<&'static str>,
    status: u16,
    retry_after: bool,
    body: Value,
}

async fn send(
    s: &TestServer,
    method: &'static str,
    path: &str,
    template: Option<&'static str>,
    body: Option<Value>,
) -> Sent {
    let resp = request(s, method, path, body).await;
    let status = resp.status().as_u16();
    let retry_after = resp.headers().contains_key("retry-after");
    Sent {
        method,
        path: path.to_owned(),
        template,
        status,
        retry_after,
        body: resp.json().await.expect("a JSON body"),
    }
}

/// A server on an in-memory store (no snowflake IDs: there is no database
/// for their worker lease), with `limits` and a 50 ms wait for segments.
async fn memory_server(store: &Arc<MemoryStore>, limits: Limits) -> TestServer {
    memory_server_with(store, limits, |_| {}).await
}

async fn memory_server_with(
    store: &Arc<MemoryStore>,
    limits: Limits,
    adjust: impl FnOnce(&mut Settings),
) -> TestServer {
    let mut settings = Settings::for_database("memory");
    settings.limits = limits;
    settings.allocator.wait_timeout = Duration::from_millis(50);
    settings.snowflake.enabled = false;
    adjust(&mut settings);
    TestServer::start_with_store(settings, store.clone()).await
}

/// Fails every call of the store behind it as misconfigured.
struct Misconfigured;

impl Hook for Misconfigured {
    fn before(&self, _: Call) -> Result<(), StoreError> {
        Err(StoreError::Config("password=hunter2 rejected".into()))
    }

    fn backend(&self) -> Option<&'static str> {
        Some("misconfigured")
    }
}

/// The snowflake route most codes are provoked on.
const SNOWFLAKE_NEXT: &str = "/v1/snowflake/next";

/// A wall-clock time well after the default snowflake epoch.
const NOW_MS: i64 = 1_750_000_000_000;

/// A server whose snowflake IDs come from `layout` on `clock` (frozen:
/// it moves only when the test says), leasing worker IDs in a fresh SQLite
/// database; with a worker ID claimed when `claim`.
async fn snowflake_server(
    layout: Layout,
    clock: &ManualWallClock,
    claim: bool,
) -> (TestServer, common::TestDb) {
    let db = common::test_db(Backend::Sqlite)
        .await
        .expect("SQLite is always available");
    let leases = common::connect_database(&db).await.leases();
    leases.migrate().await.expect("migrate");
    let sf = Snowflake::new(
        layout,
        Duration::from_millis(5),
        Arc::new(clock.clone()),
        leases,
        LeaseConfig::new(Duration::from_secs(30)),
    );
    if claim {
        let outcome = sf.tick().await;
        assert!(matches!(outcome, TickOutcome::Claimed(_)), "{outcome:?}");
    }
    let store = Arc::new(MemoryStore::new());
    let app = router(AppState::new(
        Service::new(store.clone(), AllocatorConfig::default()).with_snowflake(Some(sf)),
        AdminAuth::OpenOnLoopback,
    ));
    (TestServer::serve_app(app, store).await, db)
}

/// Sets up the condition under which the server answers `code`, and sends
/// the request that gets it. The match is exhaustive: a new code does not
/// compile until it has its request here.
async fn provoke(code: ErrorCode) -> Sent {
    use ErrorCode::*;
    let store = Arc::new(MemoryStore::new());
    let plain = || memory_server(&store, Limits::default());
    let next = Some("/v1/sequences/{name}/next");
    let create = Some("/v1/sequences");
    match code {
        InvalidName => {
            send(
                &plain().await,
                "GET",
                "/v1/sequences/a%20b/next",
                next,
                None,
            )
            .await
        }
        InvalidCount => {
            let path = "/v1/sequences/order/batch?count=0";
            send(
                &plain().await,
                "GET",
                path,
                Some("/v1/sequences/{name}/batch"),
                None,
            )
            .await
        }
        InvalidRequest => {
            let body = json!({"name": "x", "bogus": 1});
            send(&plain().await, "POST", "/v1/sequences", create, Some(body)).await
        }
        Unauthorized => {
            let s = memory_server_with(&store, Limits::default(), |settings| {
                settings.admin_token = Some(Secret::new("the-token"));
            })
            .await;
            send(
                &s,
                "POST",
                "/v1/sequences",
                create,
                Some(json!({"name": "x"})),
            )
            .await
        }
        SequenceNotFound => {
            send(&plain().await, "GET", "/v1/sequences/nope/next", next, None).await
        }
        Forbidden => {
            // A token that covers `a` only, drawing from `order`.
            let s = memory_server_with(&store, Limits::default(), |settings| {
                settings.client_auth = seqd::service::ClientAuth::On;
            })
            .await;
            let body = json!({"label": "a-only", "prefixes": ["a"], "rights": ["draw"]});
            let made = send(&s, "POST", "/v1/tokens", Some("/v1/tokens"), Some(body)).await;
            assert_eq!(made.status, 201, "{made:?}");
            let path = "/v1/sequences/order/next";
            let token = made.body["token"].as_str().unwrap();
            let resp = s.send_as(token, reqwest::Method::GET, path, None).await;
            Sent {
                method: "GET",
                path: path.into(),
                template: next,
                status: resp.status().as_u16(),
                retry_after: resp.headers().contains_key("retry-after"),
                body: resp.json().await.unwrap(),
            }
        }
        NotLeasable => {
            store.insert("glob", 0, 10);
            store.set_ordering("glob", seqd::domain::IdOrdering::Global);
            let template = Some("/v1/sequences/{name}/lease");
            send(
                &plain().await,
                "POST",
                "/v1/sequences/glob/lease",
                template,
                None,
            )
            .await
        }
        TokenExists => {
            let s = plain().await;
            let body = json!({"label": "twice", "prefixes": ["*"], "rights": ["read"]});
            let tokens = Some("/v1/tokens");
            let first = send(&s, "POST", "/v1/tokens", tokens, Some(body.clone())).await;
            assert_eq!(first.status, 201, "{first:?}");
            send(&s, "POST", "/v1/tokens", tokens, Some(body)).await
        }
        TokenNotFound => {
            let template = Some("/v1/tokens/{label}");
            send(
                &plain().await,
                "DELETE",
                "/v1/tokens/nobody",
                template,
                None,
            )
            .await
        }
        NotFound => send(&plain().await, "GET", "/no/such/route", None, None).await,
        MethodNotAllowed => send(&plain().await, "DELETE", "/v1/sequences", None, None).await,
        RequestTimeout => {
            // The segment fetch hangs longer than the request may take.
            store.insert("slow", 0, 10);
            store.close_gate();
            let limits = Limits {
                request_timeout: Duration::from_millis(200),
                ..Limits::default()
            };
            let s = memory_server_with(&store, limits, |settings| {
                settings.allocator.wait_timeout = Duration::from_secs(60);
            })
            .await;
            let sent = send(&s, "GET", "/v1/sequences/slow/next", None, None).await;
            store.open_gate();
            sent
        }
        SequenceExists => {
            let s = plain().await;
            let body = json!({"name": "order"});
            let first = send(&s, "POST", "/v1/sequences", create, Some(body.clone())).await;
            assert_eq!(first.status, 201, "{first:?}");
            send(&s, "POST", "/v1/sequences", create, Some(body)).await
        }
        SequenceExhausted => {
            store.insert("top", i64::MAX, 10);
            send(&plain().await, "GET", "/v1/sequences/top/next", next, None).await
        }
        SerialExhausted => {
            let s = plain().await;
            // A start past {seq:01} is refused at create: the one counter
            // the format holds is served, then the period is full.
            let body = json!({"name": "tiny", "format": "T{seq:01}", "start": 9});
            let created = send(&s, "POST", "/v1/sequences", create, Some(body)).await;
            assert_eq!(created.status, 201, "{created:?}");
            let last = send(&s, "GET", "/v1/sequences/tiny/next", next, None).await;
            assert_eq!(last.status, 200, "{last:?}");
            send(&s, "GET", "/v1/sequences/tiny/next", next, None).await
        }
        SequenceMisconfigured => {
            store.insert("broken", 0, 10);
            store.set_problem(
                "broken",
                seqd::store::RowProblem {
                    field: "format",
                    message: "the format has no counter token".into(),
                },
            );
            send(
                &plain().await,
                "GET",
                "/v1/sequences/broken/next",
                next,
                None,
            )
            .await
        }
        PayloadTooLarge => {
            let body = json!({"name": "x", "description": "d".repeat(128 * 1024)});
            send(&plain().await, "POST", "/v1/sequences", create, Some(body)).await
        }
        RequestHeadTooLarge => {
            // hyper refuses the head before any route; the answer has the body.
            let s = plain().await;
            let mut req = s.http.get(s.url("/healthz"));
            for i in 0..120 {
                req = req.header(format!("x-extra-{i}"), "1");
            }
            let resp = req.send().await.unwrap();
            Sent {
                method: "GET",
                path: "/healthz with 120 headers".into(),
                template: None,
                status: resp.status().as_u16(),
                retry_after: resp.headers().contains_key("retry-after"),
                body: resp.json().await.expect("a JSON body"),
            }
        }
        StorageUnavailable => {
            store.insert("down", 0, 10);
            store.set_failing("down", true);
            send(&plain().await, "GET", "/v1/sequences/down/next", next, None).await
        }
        Overloaded => overloaded(&store).await,
        SnowflakeDisabled => {
            send(
                &plain().await,
                "GET",
                SNOWFLAKE_NEXT,
                Some(SNOWFLAKE_NEXT),
                None,
            )
            .await
        }
        SnowflakeExhausted => {
            // Claimed in the last time unit of the layout; then the clock passes it.
            let runs_out = Layout::default().runs_out_at_ms();
            let clock = ManualWallClock::frozen(runs_out - 1);
            let (s, _db) = snowflake_server(Layout::default(), &clock, true).await;
            clock.set(runs_out);
            send(&s, "GET", SNOWFLAKE_NEXT, Some(SNOWFLAKE_NEXT), None).await
        }
        WorkerLeaseLost => {
            let clock = ManualWallClock::frozen(NOW_MS);
            let (s, _db) = snowflake_server(Layout::default(), &clock, false).await;
            send(&s, "GET", SNOWFLAKE_NEXT, Some(SNOWFLAKE_NEXT), None).await
        }
        ClockMovedBackwards => {
            let clock = ManualWallClock::frozen(NOW_MS);
            let (s, _db) = snowflake_server(Layout::default(), &clock, true).await;
            assert_eq!(s.get(SNOWFLAKE_NEXT).await.status(), StatusCode::OK);
            clock.set(NOW_MS - 1000);
            send(&s, "GET", SNOWFLAKE_NEXT, Some(SNOWFLAKE_NEXT), None).await
        }
        ClockStalled => {
            // More IDs than one time unit holds, and a clock that never moves.
            let clock = ManualWallClock::frozen(NOW_MS);
            let (s, _db) = snowflake_server(Layout::default(), &clock, true).await;
            let path = "/v1/snowflake/batch?count=10000";
            send(&s, "GET", path, Some("/v1/snowflake/batch"), None).await
        }
        Internal => {
            let mut settings = Settings::for_database("memory");
            settings.snowflake.enabled = false;
            let s = TestServer::start_with_store(
                settings,
                Forwarding::new(Arc::new(MemoryStore::new()), Misconfigured),
            )
            .await;
            let sent = send(&s, "GET", "/v1/sequences", None, None).await;
            let message = sent.body["error"]["message"].as_str().unwrap_or_default();
            assert!(!message.contains("hunter2"), "detail leaked: {message}");
            sent
        }
    }
}

/// With one request slot held by a request whose segment fetch hangs,
/// another request is shed.
async fn overloaded(store: &Arc<MemoryStore>) -> Sent {
    store.insert("held", 0, 10);
    store.close_gate();
    let limits = Limits {
        max_concurrency: 1,
        ..Limits::default()
    };
    let s = memory_server_with(store, limits, |settings| {
        settings.allocator.wait_timeout = Duration::from_secs(60);
    })
    .await;
    let held = tokio::spawn({
        let (http, url) = (s.http.clone(), s.url("/v1/sequences/held/next"));
        async move { http.get(url).send().await.unwrap().status() }
    });
    // The held request has its slot once the store sees its fetch.
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        while store.reserves("held") == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(seen.is_ok(), "the held request never reached the store");
    let sent = send(&s, "GET", "/healthz", None, None).await;
    store.open_gate();
    assert_eq!(
        held.await.unwrap(),
        StatusCode::OK,
        "the held request completes"
    );
    sent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_code_is_sent_by_some_request() {
    let (s, _db) = start().await;
    let doc = fetch_doc(&s).await;
    s.stop().await;
    let error_body = json!({"$ref": "#/components/schemas/ErrorBody"});
    for name in documented_codes(&doc) {
        let code = *ErrorCode::ALL
            .iter()
            .find(|c| wire_name(**c) == name)
            .unwrap_or_else(|| panic!("{name} is documented but no ErrorCode"));
        let sent = provoke(code).await;
        let what = format!("{name}: {} {}", sent.method, sent.path);
        assert_eq!(sent.body["error"]["code"], name, "{what}: {sent:?}");
        assert_eq!(sent.status, code.status().as_u16(), "{what}: {sent:?}");
        assert_eq!(
            sent.retry_after,
            sent.status == 503,
            "{what}: Retry-After on every 503 only"
        );
        if let Err(e) = conforms(&doc, &error_body, &sent.body, &what) {
            panic!("{e}\nbody: {}", sent.body);
        }
        if let Some(template) = sent.template {
            let op = &doc["paths"][template][sent.method.to_ascii_lowercase()];
            let documented = &op["responses"][sent.status.to_string()];
            assert!(
                documented.is_object(),
                "{what}: status {} not documented",
                sent.status
            );
        }
    }
}
