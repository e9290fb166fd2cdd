//! Hostile input at the edge, over a real socket (issue 13): control
//! characters in descriptions, integers that JSON numbers cannot carry
//! exactly, malformed percent-encoding on every route, and forged `Host`
//! headers on a token-less loopback listener (DNS rebinding).

use crate::support::common;
use crate::support::server;

use std::net::SocketAddr;

use common::TestDb;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use server::{expect_error, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends `body` as it is written (numbers untouched by any JSON library).
async fn send_raw(s: &TestServer, method: Method, path: &str, body: &str) -> reqwest::Response {
    s.http
        .request(method, s.url(path))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

/// One bodiless HTTP/1.1 request, `head` written byte for byte
/// (`Connection: close` is added); returns the status, the `content-type`
/// and the body.
async fn raw_request(addr: SocketAddr, head: &str) -> (u16, String, String) {
    exchange(
        addr,
        &format!("{head}Connection: close\r\nContent-Length: 0\r\n\r\n"),
    )
    .await
}

/// Writes `request` (which asks for `Connection: close`) as is; returns the
/// status, the `content-type` and the body.
async fn exchange(addr: SocketAddr, request: &str) -> (u16, String, String) {
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"));
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    (status, content_type, body.to_string())
}

/// Descriptions with control characters are refused with 400 on create and
/// patch, on every backend (PostgreSQL used to answer 503 for a NUL), and
/// nothing is written.
async fn descriptions_with_control_characters_get_400_on_create_and_patch(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    let resp = s
        .post_sequence(&json!({"name": "kept", "description": "fine"}))
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    for (i, bad) in [
        "a\u{0}b",
        "\u{1b}[31mred",
        "tab\there",
        "line\n",
        "del\u{7f}",
        "c1\u{9b}2J",
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("ctl{i}");
        let body = json!({"name": name, "description": bad});
        let resp = s.post_sequence(&body).await;
        let msg = expect_error(resp, StatusCode::BAD_REQUEST, "invalid_request").await;
        assert!(msg.contains("control character"), "{bad:?}: {msg}");
        let resp = s.get(&format!("/v1/sequences/{name}")).await;
        expect_error(resp, StatusCode::NOT_FOUND, "sequence_not_found").await;

        let body = json!({"description": bad});
        let resp = s.patch_sequence("kept", &body).await;
        let msg = expect_error(resp, StatusCode::BAD_REQUEST, "invalid_request").await;
        assert!(msg.contains("control character"), "{bad:?}: {msg}");
    }
    let row = s.get_json("/v1/sequences/kept").await;
    assert_eq!(row["description"], "fine");
    let resp = s
        .patch_sequence("kept", &json!({"description": "ünïcode ok ✓"}))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    s.stop().await;
}

per_backend!(descriptions_with_control_characters_get_400_on_create_and_patch);

/// An integer field holds exactly the number written, or the request is
/// refused naming the field: never a nearby double.
#[tokio::test]
async fn integer_fields_take_exact_values_or_400_naming_the_field() {
    let db = common::test_db(common::Backend::Sqlite).await.unwrap();
    let s = TestServer::on(&db.url).await;
    let refused = [
        (r#"{"name":"f1","start":9007199254740993.0}"#, "start"),
        (r#"{"name":"f1","start":9007199254740992.0}"#, "start"),
        (r#"{"name":"f1","start":9223372036854775808}"#, "start"),
        (r#"{"name":"f1","start":9223372036854775807.0}"#, "start"),
        (r#"{"name":"f1","start":1e19}"#, "start"),
        (r#"{"name":"f1","start":1e999999999999}"#, "start"),
        (r#"{"name":"f1","start":10.5}"#, "start"),
        (r#"{"name":"f1","start":1.5e-1}"#, "start"),
        (r#"{"name":"f1","step":2.5}"#, "step"),
        (r#"{"name":"f1","step":null}"#, "step"),
        (r#"{"name":"f1","step":"10"}"#, "step"),
    ];
    for (body, field) in refused {
        let resp = send_raw(&s, Method::POST, "/v1/sequences", body).await;
        let msg = expect_error(resp, StatusCode::BAD_REQUEST, "invalid_request").await;
        assert!(msg.contains(field), "{body}: {msg}");
    }
    expect_error(
        s.get("/v1/sequences/f1").await,
        StatusCode::NOT_FOUND,
        "sequence_not_found",
    )
    .await;

    let accepted = [
        (r#"{"name":"e1","start":1000.0,"step":10.000}"#, 999, 10),
        (r#"{"name":"e2","start":1e3,"step":2E1}"#, 999, 20),
        (r#"{"name":"e3","start":1.5e3,"step":1000e-2}"#, 1499, 10),
        (
            r#"{"name":"e4","start":9007199254740991.0}"#,
            9007199254740990,
            1000,
        ),
        (
            r#"{"name":"e5","start":9007199254740993}"#,
            9007199254740992,
            1000,
        ),
        (
            r#"{"name":"e6","start":9223372036854775807}"#,
            i64::MAX - 1,
            1000,
        ),
    ];
    for (body, max_id, step) in accepted {
        let resp = send_raw(&s, Method::POST, "/v1/sequences", body).await;
        assert_eq!(resp.status(), StatusCode::CREATED, "{body}");
        let row: Value = resp.json().await.unwrap();
        assert_eq!(
            (row["max_id"].as_i64(), row["step"].as_i64()),
            (Some(max_id), Some(step)),
            "{body}"
        );
    }

    let resp = send_raw(
        &s,
        Method::PATCH,
        "/v1/sequences/e1",
        r#"{"step":9007199254740993.0}"#,
    )
    .await;
    let msg = expect_error(resp, StatusCode::BAD_REQUEST, "invalid_request").await;
    assert!(msg.contains("step"), "{msg}");
    let resp = send_raw(&s, Method::PATCH, "/v1/sequences/e1", r#"{"step":4e1}"#).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(s.get_json("/v1/sequences/e1").await["step"], 40);
    s.stop().await;
}

/// Writes `request` and reads what comes back while still writing (the
/// server answers a head it refuses before the client is done, then
/// closes): every byte of the answers.
async fn refused_while_sending(addr: SocketAddr, request: Vec<u8>) -> String {
    let conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = conn.into_split();
    // The write fails once the server closes: what it answered is read.
    let writer = tokio::spawn(async move {
        let _ = write.write_all(&request).await;
        write
    });
    let mut answer = Vec::new();
    let _ = read.read_to_end(&mut answer).await;
    drop(writer.await);
    String::from_utf8_lossy(&answer).into_owned()
}

/// Heads refused before any route sees them (hyper refuses them itself):
/// too many headers, a 1 MB header, a 100 KB name in the path, two
/// `Content-Length`s, a bad request line, and a malformed head pipelined
/// after a good request. Each answers the JSON error body with its
/// documented code (431 `request_head_too_large`, 400 `invalid_request`),
/// not an empty body, and nothing is drawn.
#[tokio::test]
async fn heads_refused_before_any_route_answer_the_json_error_body() {
    let db = common::test_db(common::Backend::Sqlite).await.unwrap();
    let s = TestServer::on(&db.url).await;
    s.create("u1", 1, 10).await;
    let addr: SocketAddr = s.base.trim_start_matches("http://").parse().unwrap();
    let next = "POST /v1/sequences/u1/next HTTP/1.1\r\nHost: x\r\n";
    let extra: String = (0..100).map(|i| format!("X-Extra-{i}: 1\r\n")).collect();
    let cases: [(&str, String, u16, &str); 6] = [
        ("100 extra headers", format!("{next}{extra}\r\n"), 431, "request_head_too_large"),
        (
            "a 1 MB header",
            format!("{next}X-Big: {}\r\n\r\n", "a".repeat(1 << 20)),
            431,
            "request_head_too_large",
        ),
        (
            "a 100 KB name",
            format!("POST /v1/sequences/{}/next HTTP/1.1\r\nHost: x\r\n\r\n", "n".repeat(100 << 10)),
            431,
            "request_head_too_large",
        ),
        (
            "two Content-Lengths",
            format!("{next}Content-Length: 0\r\nContent-Length: 1\r\n\r\n"),
            400,
            "invalid_request",
        ),
        ("a bad request line", "POST\x01 /v1/sequences/u1/next HTTP/1.1\r\n\r\n".to_owned(), 400, "invalid_request"),
        (
            "a bad header pipelined after a good request",
            "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nPOST /v1/sequences/u1/next HTTP/1.1\r\nBad Header: 1\r\n\r\n".to_owned(),
            400,
            "invalid_request",
        ),
    ];
    for (what, request, status, code) in cases {
        let answers = refused_while_sending(addr, request.into_bytes()).await;
        // A pipelined good request is answered first, unchanged; the
        // refusal is the last answer.
        let last = answers.rfind("HTTP/1.1 ").expect("an answer");
        if what.contains("pipelined") {
            assert!(
                answers.starts_with("HTTP/1.1 200 OK"),
                "{what}: {answers:?}"
            );
            assert!(last > 0, "{what}: {answers:?}");
        }
        let (head, body) = answers[last..]
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("{what}: {answers:?}"));
        assert!(
            head.starts_with(&format!("HTTP/1.1 {status} ")),
            "{what}: {head}"
        );
        assert!(
            head.contains("content-type: application/json"),
            "{what}: {head}"
        );
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{what}: {head}"
        );
        let v: Value =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{what}: {e}: {body:?}"));
        assert_eq!(v["error"]["code"], code, "{what}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("nothing was done"), "{what}: {v}");
    }
    // Nothing was drawn by any of them.
    assert_eq!(s.next("u1").await, 1);
    s.stop().await;
}

/// Bad percent-encoding and invalid UTF-8 in the path or the query of every
/// route answers the documented JSON error body, never axum's plain text.
#[tokio::test]
async fn malformed_paths_and_queries_answer_the_json_error_body_on_every_route() {
    let db = common::test_db(common::Backend::Sqlite).await.unwrap();
    let s = TestServer::on(&db.url).await;
    // Each request ("METHOD target"), grouped by the status and error code
    // it answers.
    let table: [(u16, &str, &[&str]); 4] = [
        (
            400,
            "invalid_name",
            &[
                "GET /v1/sequences/%FF/next",
                "POST /v1/sequences/%C0%80/next",
                "GET /v1/sequences/%E2%82/batch?count=1",
                "GET /v1/sequences/%FF",
                "PATCH /v1/sequences/%FF%FE",
                "GET /api/segment/get/%FF",
            ],
        ),
        (
            400,
            "invalid_count",
            &[
                "GET /v1/sequences/ok/batch?count=%FF",
                "GET /v1/sequences/ok/batch?count=%zz",
                "GET /v1/snowflake/batch?count=%FF",
            ],
        ),
        (
            400,
            "invalid_request",
            &[
                "GET /v1/snowflake/decode/%FF",
                "GET /v1/snowflake/decode/%C3%28",
                "GET /v1/snowflake/decode/%",
                "GET /assets/%FF",
                "GET /assets/%ED%A0%80",
                "GET /docs/%FF",
            ],
        ),
        (
            404,
            "not_found",
            &[
                "GET /assets/nothing.js",
                "GET /docs/no-such-file.js",
                "GET /%FF",
            ],
        ),
    ];
    for (status, code, requests) in table {
        for request in requests {
            let (method, target) = request.split_once(' ').unwrap();
            let head = format!("{method} {target} HTTP/1.1\r\nHost: {}\r\n", s.addr);
            let (got, content_type, body) = raw_request(s.addr, &head).await;
            assert_eq!(got, status, "{request}: {body}");
            assert!(
                content_type.starts_with("application/json"),
                "{request}: {content_type:?} {body}"
            );
            let v: Value =
                serde_json::from_str(&body).unwrap_or_else(|e| panic!("{request}: {e}: {body}"));
            assert_eq!(v["error"]["code"], code, "{request}: {v}");
            assert!(v["error"]["message"].is_string(), "{request}: {v}");
        }
    }
    s.stop().await;
}

/// Without an admin token, admin calls are open only to requests whose
/// `Host` names the loopback interface: a page reaching the port through
/// DNS rebinding sends its own host name, and is refused.
#[tokio::test]
async fn tokenless_admin_calls_need_a_loopback_host_header() {
    let db = common::test_db(common::Backend::Sqlite).await.unwrap();
    let s = TestServer::on(&db.url).await;
    let create = |host: Option<&str>, name: &str| {
        let host = host.map(|h| format!("Host: {h}\r\n")).unwrap_or_default();
        let body = format!(r#"{{"name":"{name}"}}"#);
        format!(
            "POST /v1/sequences HTTP/1.1\r\n{host}Connection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let allowed = [
        "localhost:8080",
        "LocalHost",
        "[::1]:1",
        "[::1]",
        "127.0.0.1",
        "127.9.8.7:80",
        "localhost.",
    ];
    for (i, host) in allowed.into_iter().enumerate() {
        let (status, _, body) = exchange(s.addr, &create(Some(host), &format!("ok{i}"))).await;
        assert_eq!(status, 201, "Host: {host}: {body}");
    }
    let refused = [
        Some("evil.example"),
        Some("127.0.0.1.evil.example"),
        Some("localhost.evil.example"),
        Some("evil.example:8080"),
        Some("0.0.0.0"),
        Some("[::2]:80"),
        Some("128.0.0.1"),
        Some(""),
        None,
    ];
    for (i, host) in refused.into_iter().enumerate() {
        let (status, _, body) = exchange(s.addr, &create(host, &format!("no{i}"))).await;
        assert_eq!(status, 401, "Host: {host:?}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["error"]["code"], "unauthorized", "{v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("Host") && msg.contains("SEQD_ADMIN_TOKEN"),
            "{msg}"
        );
    }
    let twice = "POST /v1/sequences HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\
                 Connection: close\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"name\":\"t2\"}";
    assert_eq!(exchange(s.addr, twice).await.0, 401, "two Host headers");
    let names: Vec<String> = common::names(&s.store).await;
    assert_eq!(names, ["ok0", "ok1", "ok2", "ok3", "ok4", "ok5", "ok6"]);
    // Reads stay open whatever the Host.
    let (status, _, _) = raw_request(
        s.addr,
        "GET /v1/sequences/ok0/next HTTP/1.1\r\nHost: evil.example\r\n",
    )
    .await;
    assert_eq!(status, 200);
    s.stop().await;
}
