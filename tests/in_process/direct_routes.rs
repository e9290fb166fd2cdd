//! `/next` and Leaf's `get` are answered by the edge itself, without axum's
//! router, unless the name in the path is percent-encoded: then the
//! router's handlers answer (docs/design.md, "The edge"). Over a real
//! socket on every backend, each request is sent both ways (`order` and
//! `%6Frder` are one name) and the two answers must be the same answer:
//! status, content type, body, error code, the `x-request-id` header, the
//! request metrics, the tokens' refusals. The IDs drawn both ways are one
//! run with no gap, so no refused request drew one.

use crate::support::common;
use crate::support::server;

use common::TestDb;
use reqwest::{Method, StatusCode};
use seqd::config::{Secret, Settings};
use seqd::service::ClientAuth;
use serde_json::{json, Value};
use server::TestServer;

/// `name` with its first byte percent-encoded: the same name, which the
/// edge leaves to the router.
fn routed(name: &str) -> String {
    format!("%{:02X}{}", name.as_bytes()[0], &name[1..])
}

fn next_path(name: &str) -> String {
    format!("/v1/sequences/{name}/next")
}

fn leaf_path(name: &str) -> String {
    format!("/api/segment/get/{name}")
}

#[derive(Debug, PartialEq)]
struct Answer {
    status: StatusCode,
    content_type: Option<String>,
    body: String,
}

/// One request: its answer, after checking it carries a request id.
async fn ask(
    s: &TestServer,
    method: &Method,
    path: &str,
    accept: Option<&str>,
    token: Option<&str>,
) -> Answer {
    let mut req = s.http.request(method.clone(), s.url(path));
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    let id = resp
        .headers()
        .get("x-request-id")
        .map(|v| v.to_str().unwrap().to_owned());
    assert!(
        id.is_some_and(|id| !id.is_empty()),
        "{method} {path}: no x-request-id"
    );
    Answer {
        status: resp.status(),
        content_type: resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned()),
        body: resp.text().await.unwrap(),
    }
}

/// The same request with `name` as it is (the edge answers) and
/// percent-encoded (the router answers): both answers.
async fn both(
    s: &TestServer,
    method: Method,
    path: fn(&str) -> String,
    name: &str,
    accept: Option<&str>,
    token: Option<&str>,
) -> [Answer; 2] {
    [
        ask(s, &method, &path(name), accept, token).await,
        ask(s, &method, &path(&routed(name)), accept, token).await,
    ]
}

/// The two answers of a refused request: the same status, content type
/// and body (the error's code and message), and `status`.
fn same_refusal([direct, router]: [Answer; 2], status: StatusCode, code: &str, what: &str) {
    assert_eq!(direct, router, "{what}");
    assert_eq!(direct.status, status, "{what}: {direct:?}");
    if status != StatusCode::METHOD_NOT_ALLOWED || !direct.body.is_empty() {
        let body: Value = serde_json::from_str(&direct.body).unwrap();
        assert_eq!(body["error"]["code"], code, "{what}: {body}");
    }
}

/// The ID in a successful answer: its integer and, for a serial
/// sequence, its serial.
fn drawn(answer: &Answer, what: &str) -> (i64, Option<String>) {
    assert_eq!(answer.status, StatusCode::OK, "{what}: {answer:?}");
    match answer.content_type.as_deref() {
        Some(t) if t.starts_with("application/json") => {
            let v: Value = serde_json::from_str(&answer.body).unwrap();
            let id = v["id"].as_i64().unwrap_or_else(|| panic!("{what}: {v}"));
            (id, v["serial"].as_str().map(str::to_owned))
        }
        Some(t) if t.starts_with("text/plain") => match answer.body.parse() {
            Ok(id) => (id, None),
            Err(_) => (-1, Some(answer.body.clone())),
        },
        other => panic!("{what}: content type {other:?}"),
    }
}

/// `seqd_http_requests_total` of `route`, `method`, `status`.
async fn requests(s: &TestServer, route: &str, method: &str, status: &str) -> f64 {
    let text = s.get("/metrics").await.text().await.unwrap();
    let labels = [
        format!("route=\"{route}\""),
        format!("method=\"{method}\""),
        format!("status=\"{status}\""),
    ];
    text.lines()
        .filter(|l| l.starts_with("seqd_http_requests_total{"))
        .filter(|l| labels.iter().all(|label| l.contains(label.as_str())))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

const NEXT: &str = "/v1/sequences/{name}/next";
const LEAF: &str = "/api/segment/get/{name}";

/// Every way of drawing one ID, both ways, on a plain sequence (the first
/// request finds it not served yet, the rest in memory): the same answers,
/// and IDs in one run without a gap. Then every refusal (unknown name,
/// invalid name, HEAD and other methods) both ways: the same answers, and
/// the next ID is the next of the run. The request metrics count each
/// request under its route, whichever door answered it.
async fn direct_and_routed_answers_agree(db: TestDb) {
    // The request metrics are one recorder per process: counted alone.
    let alone = server::requests_alone().await;
    let s = TestServer::start_counted(Settings::for_database(db.url.clone()), &alone).await;
    s.create("order", 1, 1000).await;
    let counted = [
        (NEXT, "GET", "200"),
        (NEXT, "POST", "200"),
        (LEAF, "GET", "200"),
        (NEXT, "GET", "404"),
        (NEXT, "GET", "400"),
        (NEXT, "HEAD", "405"),
        (LEAF, "PUT", "405"),
    ];
    let mut before = Vec::new();
    for (route, method, status) in counted {
        before.push(requests(&s, route, method, status).await);
    }

    let draws: [Draw; 6] = [
        (Method::GET, next_path, None, "application/json"),
        (Method::POST, next_path, None, "application/json"),
        (Method::GET, next_path, Some("text/plain"), "text/plain"),
        (
            Method::GET,
            next_path,
            Some("text/plain, application/json"),
            "application/json",
        ),
        (Method::GET, leaf_path, None, "text/plain"),
        (
            Method::GET,
            leaf_path,
            Some("application/json"),
            "text/plain",
        ),
    ];
    let mut ids = Vec::new();
    for (method, path, accept, content_type) in draws.iter().cloned() {
        let what = format!("{method} {} {accept:?}", path("order"));
        let answers = both(&s, method, path, "order", accept, None).await;
        for a in &answers {
            assert!(
                a.content_type
                    .as_deref()
                    .is_some_and(|t| t.starts_with(content_type)),
                "{what}: {a:?}"
            );
            ids.push(drawn(a, &what).0);
        }
        assert_eq!(answers[0].content_type, answers[1].content_type, "{what}");
    }
    assert_eq!(ids, (1..=12).collect::<Vec<i64>>(), "one run, both doors");

    same_refusal(
        both(&s, Method::GET, next_path, "nowhere", None, None).await,
        StatusCode::NOT_FOUND,
        "sequence_not_found",
        "unknown name",
    );
    same_refusal(
        both(&s, Method::GET, leaf_path, "nowhere", None, None).await,
        StatusCode::NOT_FOUND,
        "sequence_not_found",
        "unknown name on Leaf's route",
    );
    let too_long = "o".repeat(200);
    same_refusal(
        both(&s, Method::GET, next_path, &too_long, None, None).await,
        StatusCode::BAD_REQUEST,
        "invalid_name",
        "a name too long",
    );
    same_refusal(
        both(&s, Method::GET, leaf_path, "o!", None, None).await,
        StatusCode::BAD_REQUEST,
        "invalid_name",
        "a character names do not have",
    );
    for (method, path) in [
        (Method::HEAD, next_path as fn(&str) -> String),
        (Method::PUT, next_path),
        (Method::DELETE, next_path),
        (Method::HEAD, leaf_path),
        (Method::POST, leaf_path),
        (Method::PUT, leaf_path),
    ] {
        let what = format!("{method} {}", path("order"));
        same_refusal(
            both(&s, method, path, "order", None, None).await,
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            &what,
        );
    }
    assert_eq!(s.next("order").await, 13, "no refused request drew an ID");

    // Each request above once under its route, method and status.
    let made = [7.0, 2.0, 4.0, 2.0, 2.0, 2.0, 2.0];
    for (((route, method, status), was), n) in counted.into_iter().zip(before).zip(made) {
        assert_eq!(
            requests(&s, route, method, status).await - was,
            n,
            "{method} {route} {status}"
        );
    }
    s.stop().await;
}

/// A serial sequence both ways (its IDs are never taken from memory
/// without the serials, so the edge's own answer waits as the handler
/// does): the same serials in one run.
async fn serial_answers_agree(db: TestDb) {
    // The request metrics are one recorder per process: counted alone.
    let alone = server::requests_alone().await;
    let s = TestServer::start_counted(Settings::for_database(db.url.clone()), &alone).await;
    let body = json!({"name": "ser", "step": 10, "format": "S{seq:04}"});
    assert_eq!(s.post_sequence(&body).await.status(), StatusCode::CREATED);
    let mut serials = Vec::new();
    let mut counters = Vec::new();
    for (path, accept) in [
        (next_path as fn(&str) -> String, None),
        (next_path, Some("text/plain")),
        (leaf_path, None),
    ] {
        let answers = both(&s, Method::GET, path, "ser", accept, None).await;
        assert_eq!(answers[0].content_type, answers[1].content_type);
        for a in &answers {
            let (id, serial) = drawn(a, &path("ser"));
            serials.push(serial.expect("a serial"));
            if id > 0 {
                counters.push(id);
            }
        }
    }
    let expected: Vec<String> = (1..=6).map(|i| format!("S{i:04}")).collect();
    assert_eq!(serials, expected);
    assert_eq!(counters, [1, 2], "JSON carries the counter");
    s.stop().await;
}

/// Under `--client-auth on`, the edge refuses as the router does: no
/// token, an unknown token, a token for other names, a token without the
/// right to draw; and a token that covers the name, and the admin token,
/// draw both ways.
async fn token_refusals_agree(db: TestDb) {
    const ADMIN: &str = "admin-secret-for-direct-routes";
    let alone = server::requests_alone().await;
    let s = TestServer::start_counted(
        Settings {
            admin_token: Some(Secret::new(ADMIN)),
            client_auth: ClientAuth::On,
            ..Settings::for_database(db.url.clone())
        },
        &alone,
    )
    .await;
    let created = s
        .send_as(
            ADMIN,
            Method::POST,
            "/v1/sequences",
            Some(&json!({"name": "shop1-order", "step": 100})),
        )
        .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let drawer = s.token(ADMIN, "drawer", "shop1-", "draw").await;
    let elsewhere = s.token(ADMIN, "elsewhere", "shop2-", "draw").await;
    let reader = s.token(ADMIN, "reader", "shop1-", "read").await;
    for path in [next_path as fn(&str) -> String, leaf_path] {
        let what = path("shop1-order");
        for (token, status, code) in [
            (None, StatusCode::UNAUTHORIZED, "unauthorized"),
            (
                Some("seqd_not-a-token"),
                StatusCode::UNAUTHORIZED,
                "unauthorized",
            ),
            (Some(elsewhere.as_str()), StatusCode::FORBIDDEN, "forbidden"),
            (Some(reader.as_str()), StatusCode::FORBIDDEN, "forbidden"),
        ] {
            let answers = both(&s, Method::GET, path, "shop1-order", None, token).await;
            same_refusal(answers, status, code, &format!("{what} with {token:?}"));
        }
        for token in [drawer.as_str(), ADMIN] {
            let [direct, router] =
                both(&s, Method::GET, path, "shop1-order", None, Some(token)).await;
            let (a, b) = (drawn(&direct, &what).0, drawn(&router, &what).0);
            assert_eq!(b, a + 1, "{what}");
        }
    }
    s.stop().await;
}

per_backend!(
    direct_and_routed_answers_agree,
    serial_answers_agree,
    token_refusals_agree
);

/// A draw of the direct-route test: the method, the path of a name, the
/// `Accept` header sent and the content type expected.
type Draw = (
    Method,
    fn(&str) -> String,
    Option<&'static str>,
    &'static str,
);
