//! The HTTP API over a real socket, on every backend: every route, every
//! documented error code.

use crate::support::common;
use crate::support::server;

use common::TestDb;
use reqwest::{Method, StatusCode};
use seqd::config::Secret;
use seqd::config::Settings;
use serde_json::{json, Value};
use server::{expect_error, fetch_json, listed_names, TestServer};

async fn json_of(resp: reqwest::Response) -> Value {
    resp.json().await.expect("JSON body")
}

async fn create_serves_ids_as_json_text_and_batches(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    let resp = s
        .post_sequence(
            &json!({"name": "order", "start": 1001, "step": 10, "description": "orders"}),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let row = json_of(resp).await;
    assert_eq!(
        (
            row["name"].clone(),
            row["max_id"].clone(),
            row["step"].clone()
        ),
        (json!("order"), json!(1000), json!(10))
    );
    assert_eq!(row["description"], "orders");

    let resp = s.get("/v1/sequences/order/next").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    assert_eq!(json_of(resp).await, json!({"name": "order", "id": 1001}));

    let resp = s.send_plain(Method::POST, "/v1/sequences/order/next").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    assert_eq!(resp.headers()["cache-control"], "no-store");
    assert_eq!(resp.text().await.unwrap(), "1002");

    let resp = s.get("/v1/sequences/order/batch?count=25").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    let body = json_of(resp).await;
    let ids = common::integers(&body, "ids");
    assert_eq!(
        ids,
        (1003..=1027).collect::<Vec<_>>(),
        "a batch spanning segments stays consecutive here"
    );

    let resp = s
        .send(Method::POST, "/v1/sequences/order/batch?count=1")
        .await;
    assert_eq!(json_of(resp).await["ids"], json!([1028]));

    let resp = s.get("/api/segment/get/order").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.text().await.unwrap(), "1029");
    s.stop().await;
}

async fn list_get_and_patch_show_rows_and_buffers(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    for n in ["b-seq", "a-seq"] {
        assert_eq!(
            s.post_sequence(&json!({"name": n, "step": 5}))
                .await
                .status(),
            StatusCode::CREATED
        );
    }
    s.get("/v1/sequences/a-seq/next").await;

    let list = s.get_json("/v1/sequences").await;
    assert_eq!(listed_names(&list), ["a-seq", "b-seq"]);
    assert!(
        list["sequences"][0]["buffer"]["current"].is_object(),
        "a-seq has a buffer: {list}"
    );
    assert!(
        list["sequences"][1]["buffer"].is_null(),
        "b-seq was never served"
    );

    let one = s.get_json("/v1/sequences/a-seq").await;
    assert_eq!(one["name"], "a-seq");
    assert_eq!(one["step"], 5);
    let buf = &one["buffer"];
    assert_eq!(buf["current"]["first"], 1);
    assert_eq!(buf["current"]["cursor"], 2);
    assert_eq!(buf["row_step"], 5);
    assert!(buf["current_step"].as_i64().unwrap() >= 5);

    let patched = s
        .patch_sequence("a-seq", &json!({"step": 50, "description": "bigger"}))
        .await;
    assert_eq!(patched.status(), StatusCode::OK);
    let patched = json_of(patched).await;
    assert_eq!(
        (patched["step"].clone(), patched["description"].clone()),
        (json!(50), json!("bigger"))
    );
    let again = s.get_json("/v1/sequences/a-seq").await;
    assert_eq!(again["step"], 50);
    s.stop().await;
}

async fn unknown_sequences_get_404_saying_how_to_create_them(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    let resp = s.patch_sequence("nope", &json!({"step": 3})).await;
    expect_error(resp, StatusCode::NOT_FOUND, "sequence_not_found").await;
    for path in [
        "/v1/sequences/nope/next",
        "/v1/sequences/nope/batch?count=3",
        "/v1/sequences/nope",
        "/api/segment/get/nope",
    ] {
        let msg = expect_error(
            s.get(path).await,
            StatusCode::NOT_FOUND,
            "sequence_not_found",
        )
        .await;
        assert!(
            msg.contains("POST /v1/sequences") && msg.contains("seqd sequences create nope"),
            "{path}: {msg}"
        );
    }
    s.stop().await;
}

async fn a_row_inserted_by_sql_is_served_without_restart(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    common::execute(
        &db,
        "INSERT INTO sequences (name, max_id, step) VALUES ('by-sql', 41, 3)",
    )
    .await;
    assert_eq!(s.next("by-sql").await, 42);
    s.stop().await;
}

async fn bad_names_and_counts_get_400(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    s.post_sequence(&json!({"name": "ok"})).await;
    let long = "a".repeat(129);
    for bad in [
        "-x",
        "%C3%A9",
        "a%20b",
        "%00",
        "...",
        ".x",
        "%2E%2E%2Fetc",
        "a%27%3B%20DROP%20TABLE%20sequences",
        long.as_str(),
    ] {
        for path in [
            format!("/v1/sequences/{bad}/next"),
            format!("/v1/sequences/{bad}/batch?count=2"),
            format!("/api/segment/get/{bad}"),
        ] {
            let resp = s.get(&path).await;
            expect_error(resp, StatusCode::BAD_REQUEST, "invalid_name").await;
        }
    }
    for q in common::BAD_COUNT_QUERIES {
        let resp = s.get(&format!("/v1/sequences/ok/batch{q}")).await;
        expect_error(resp, StatusCode::BAD_REQUEST, "invalid_count").await;
    }
    let resp = s.get("/v1/sequences/ok/batch?count=10000").await;
    assert_eq!(json_of(resp).await["ids"].as_array().unwrap().len(), 10000);
    s.stop().await;
}

async fn bad_bodies_get_400_and_duplicates_409(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    assert_eq!(
        s.post_sequence(&json!({"name": "dup"})).await.status(),
        StatusCode::CREATED
    );
    expect_error(
        s.post_sequence(&json!({"name": "dup"})).await,
        StatusCode::CONFLICT,
        "sequence_exists",
    )
    .await;
    // Still a plain duplicate once this instance has served the sequence.
    assert_eq!(
        s.get("/v1/sequences/dup/next").await.status(),
        StatusCode::OK,
        "served"
    );
    expect_error(
        s.post_sequence(&json!({"name": "dup"})).await,
        StatusCode::CONFLICT,
        "sequence_exists",
    )
    .await;
    expect_error(
        s.post_sequence(&json!({"name": "bad name"})).await,
        StatusCode::BAD_REQUEST,
        "invalid_name",
    )
    .await;
    for body in [
        json!({"name": "x", "step": 0}),
        json!({"name": "x", "step": 1_000_001}),
        json!({"name": "x", "start": 0}),
        json!({"name": "x", "start": "1"}),
        json!({"name": "x", "stpe": 10}),
        json!({"step": 10}),
        json!({"name": "x", "description": "d".repeat(257)}),
    ] {
        expect_error(
            s.post_sequence(&body).await,
            StatusCode::BAD_REQUEST,
            "invalid_request",
        )
        .await;
    }
    let resp = s
        .http
        .post(s.url("/v1/sequences"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    expect_error(resp, StatusCode::BAD_REQUEST, "invalid_request").await;
    let resp = s
        .http
        .post(s.url("/v1/sequences"))
        .header("content-type", "text/plain")
        .body(r#"{"name":"y"}"#)
        .send()
        .await
        .unwrap();
    expect_error(resp, StatusCode::BAD_REQUEST, "invalid_request").await;
    for body in [
        json!({}),
        json!({"step": -1}),
        json!({"step": "x"}),
        json!({"name": "renamed"}),
    ] {
        let resp = s.patch_sequence("dup", &body).await;
        expect_error(resp, StatusCode::BAD_REQUEST, "invalid_request").await;
    }
    let big = "x".repeat(200 * 1024);
    // A client of its own: the server closes that connection without reading
    // the body, which must not disturb the pooled connections used below.
    let resp = reqwest::Client::new()
        .post(s.url("/v1/sequences"))
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    expect_error(resp, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large").await;
    // Nothing above changed the row.
    let row = s.get_json("/v1/sequences/dup").await;
    assert_eq!(row["step"], json!(1000), "no bad request changed the row");
    s.stop().await;
}

async fn exhausted_sequences_get_409(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    let start = i64::MAX - 2;
    assert_eq!(
        s.post_sequence(&json!({"name": "top", "start": start, "step": 10}))
            .await
            .status(),
        StatusCode::CREATED
    );
    let resp = s.get("/v1/sequences/top/next").await;
    expect_error(resp, StatusCode::CONFLICT, "sequence_exhausted").await;
    s.stop().await;
}

async fn health_readiness_and_unknown_routes(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    let resp = s.get("/healthz").await;
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = s.get("/readyz").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(json_of(resp).await["checks"]["database"], "ok");
    expect_error(
        s.get("/v2/nothing").await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    expect_error(
        s.http
            .delete(s.url("/v1/sequences/x"))
            .send()
            .await
            .unwrap(),
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    )
    .await;
    s.stop().await;
}

async fn admin_token_is_required_when_set(db: TestDb) {
    let mut settings = Settings::for_database(db.url.clone());
    settings.admin_token = Some(Secret::new("s3cret"));
    let s = TestServer::start(settings).await;
    let body = json!({"name": "guarded"});
    let resp = s.post_sequence(&body.clone()).await;
    expect_error(resp, StatusCode::UNAUTHORIZED, "unauthorized").await;
    let resp = s
        .send_as("wrong", Method::POST, "/v1/sequences", Some(&body))
        .await;
    expect_error(resp, StatusCode::UNAUTHORIZED, "unauthorized").await;
    let resp = s
        .send_as("s3cret", Method::POST, "/v1/sequences", Some(&body))
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let resp = s.patch_sequence("guarded", &json!({"step": 2})).await;
    expect_error(resp, StatusCode::UNAUTHORIZED, "unauthorized").await;
    // Reads of IDs need no token.
    let resp = s.get("/v1/sequences/guarded/next").await;
    assert_eq!(resp.status(), StatusCode::OK);
    // The scheme's name is case-insensitive (RFC 9110); the token is not.
    for (value, status) in [
        ("bearer s3cret", StatusCode::OK),
        ("BEARER s3cret", StatusCode::OK),
        ("bearer S3CRET", StatusCode::UNAUTHORIZED),
    ] {
        let resp = s
            .http
            .patch(s.url("/v1/sequences/guarded"))
            .header("authorization", value)
            .json(&json!({"step": 3}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), status, "{value}");
    }
    s.stop().await;
}

/// HEAD is safe: monitors and proxies send it freely. On every route that
/// draws IDs it answers 405 with `Allow` and draws nothing (axum would run
/// the GET handler and drop the body).
async fn head_on_drawing_routes_draws_nothing(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    s.create("peek", 1, 10).await;
    for (path, allow) in [
        ("/v1/sequences/peek/next", "GET, POST"),
        ("/v1/sequences/peek/batch?count=10000", "GET, POST"),
        ("/api/segment/get/peek", "GET"),
        ("/v1/snowflake/next", "GET, POST"),
        ("/v1/snowflake/batch?count=10", "GET, POST"),
        ("/api/snowflake/get/peek", "GET"),
    ] {
        let resp = s.http.head(s.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED, "HEAD {path}");
        assert_eq!(resp.headers()["allow"], allow, "HEAD {path}");
    }
    assert_eq!(s.next("peek").await, 1, "HEAD drew IDs");
    // Reads keep answering HEAD.
    let resp = s.send(Method::HEAD, "/v1/sequences/peek").await;
    assert_eq!(resp.status(), StatusCode::OK);
    s.stop().await;
}

async fn concurrent_clients_over_http_get_unique_increasing_ids(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    s.create("hot", 1, 10).await;
    let mut tasks = Vec::new();
    for c in 0..8 {
        let http = s.http.clone();
        let url_next = s.url("/v1/sequences/hot/next");
        let url_batch = s.url("/v1/sequences/hot/batch?count=7");
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for i in 0..100 {
                if (c + i) % 4 == 0 {
                    let v = fetch_json(http.get(&url_batch)).await;
                    mine.extend(common::integers(&v, "ids"));
                } else {
                    let v = fetch_json(http.get(&url_next)).await;
                    mine.push(v["id"].as_i64().unwrap());
                }
            }
            mine
        }));
    }
    let all = common::unique_increasing("8 clients", tasks).await;
    assert_eq!(all.len(), 8 * (75 + 25 * 7));
    s.stop().await;
}

/// `count` sequences named with mixed case and punctuation, inserted in one
/// statement; returns their names in byte order.
async fn insert_sequences(db: &TestDb, count: usize) -> Vec<String> {
    let prefixes = ["A", "a", "B.", "b-", "Z:", "z_", "0", "9."];
    let mut names: Vec<String> = (0..count)
        .map(|i| format!("{}{i:03}", prefixes[i % prefixes.len()]))
        .collect();
    let values: Vec<String> = names.iter().map(|n| format!("('{n}', 0, 1)")).collect();
    let sql = format!(
        "INSERT INTO sequences (name, max_id, step) VALUES {}",
        values.join(", ")
    );
    common::execute(db, &sql).await;
    names.sort();
    names
}

/// The names of a page and its `next`.
fn page_of(body: &Value) -> (Vec<String>, Value) {
    (listed_names(body), body["next"].clone())
}

/// The names of every page of `GET /v1/sequences?{query}` walked from the
/// first by `next` (`query` holds `limit` and possibly `prefix`), checking
/// each page's size and `next`.
async fn walk(s: &TestServer, query: &str, limit: usize) -> Vec<String> {
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..1000 {
        let path = match &after {
            Some(a) => format!("/v1/sequences?{query}&after={a}"),
            None => format!("/v1/sequences?{query}"),
        };
        let (names, next) = page_of(&s.get_json(&path).await);
        assert!(names.len() <= limit, "{path}: {} rows", names.len());
        seen.extend(names.iter().cloned());
        match next.as_str() {
            Some(n) => {
                assert_eq!(names.len(), limit, "{path}: a page before the last is full");
                assert_eq!(Some(n), names.last().map(String::as_str), "{path}: next");
                after = Some(n.to_string());
            }
            None => return seen,
        }
    }
    panic!("{query}: more than 1000 pages");
}

async fn walking_every_page_lists_each_sequence_exactly_once_in_byte_order(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    let all = insert_sequences(&db, 250).await;
    let seen = walk(&s, "limit=100", 100).await;
    assert_eq!(seen, all, "the pages tile the table in byte order");
    s.stop().await;
}

async fn walking_the_pages_of_a_prefix_lists_each_matching_sequence_exactly_once(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    let all = insert_sequences(&db, 250).await;
    for prefix in [
        "a", "A", "a0", "B.", "b-", "Z:", "z_", "9.", "9.1", "0", "a00", "c", "a249",
    ] {
        let matching: Vec<String> = all
            .iter()
            .filter(|n| n.starts_with(prefix))
            .cloned()
            .collect();
        for limit in [7, 31, 1000] {
            let seen = walk(&s, &format!("limit={limit}&prefix={prefix}"), limit).await;
            assert_eq!(seen, matching, "prefix {prefix}, limit {limit}");
        }
    }
    // A prefix with `after` below, inside and past its names; `next` is null
    // on the prefix's last page though other sequences follow it.
    let a: Vec<&String> = all.iter().filter(|n| n.starts_with('a')).collect();
    let (first, next) = page_of(&s.get_json("/v1/sequences?prefix=a&after=A&limit=2").await);
    assert_eq!(
        (first, next),
        (vec![a[0].clone(), a[1].clone()], json!(a[1]))
    );
    let last = a[a.len() - 1];
    let query = format!("/v1/sequences?prefix=a&after={}&limit=5", a[a.len() - 3]);
    let (tail, next) = page_of(&s.get_json(&query).await);
    assert_eq!(
        (tail, next),
        (vec![a[a.len() - 2].clone(), last.clone()], Value::Null)
    );
    // `after` the prefix's last name, or beyond its names.
    for after in [last.as_str(), "b"] {
        let query = format!("/v1/sequences?prefix=a&after={after}");
        let (none, next) = page_of(&s.get_json(&query).await);
        assert_eq!((none.len(), next), (0, Value::Null), "{query}");
    }
    s.stop().await;
}

async fn sequence_pages_reject_a_bad_prefix(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    let too_long = format!("prefix={}", "a".repeat(129));
    for q in [
        "prefix=",
        "prefix=-a",
        "prefix=.",
        "prefix=_a",
        "prefix=a%20b",
        "prefix=a%7B",
        "prefix=a%25",
        "prefix=%C3%A9",
        "prefix=a*",
        &too_long,
    ] {
        let resp = s.get(&format!("/v1/sequences?{q}")).await;
        let message = expect_error(resp, StatusCode::BAD_REQUEST, "invalid_name").await;
        assert!(message.starts_with("invalid prefix"), "{q}: {message}");
    }
    let resp = s.get("/v1/sequences?prefix=a&limit=0").await;
    expect_error(resp, StatusCode::BAD_REQUEST, "invalid_request").await;
    let resp = s.get("/v1/sequences?prefix=a&prefix=b").await;
    let message = expect_error(resp, StatusCode::BAD_REQUEST, "invalid_request").await;
    assert!(message.contains("prefix given more than once"), "{message}");
    let longest = "a".repeat(128);
    let (names, next) = page_of(&s.get_json(&format!("/v1/sequences?prefix={longest}")).await);
    assert_eq!(
        (names.len(), next),
        (0, Value::Null),
        "128 characters are a prefix"
    );
    s.stop().await;
}

async fn sequence_pages_default_to_100_and_end_with_next_null(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    let all = insert_sequences(&db, 150).await;
    let (first, next) = page_of(&s.get_json("/v1/sequences").await);
    assert_eq!(first, all[..100], "default limit 100");
    assert_eq!(next, json!(all[99]));
    let (rest, next) = page_of(
        &s.get_json(&format!("/v1/sequences?after={}", all[99]))
            .await,
    );
    assert_eq!(rest, all[100..]);
    assert_eq!(next, Value::Null, "last page");
    let (whole, next) = page_of(&s.get_json("/v1/sequences?limit=1000").await);
    assert_eq!((whole, next), (all.clone(), Value::Null));
    let (exact, next) = page_of(&s.get_json("/v1/sequences?limit=150").await);
    assert_eq!(
        (exact, next),
        (all.clone(), Value::Null),
        "a full last page"
    );
    let above_a = all.iter().find(|n| n.as_str() > "A").unwrap();
    let (one, next) = page_of(&s.get_json("/v1/sequences?limit=1&after=A").await);
    assert_eq!(
        (one, next),
        (vec![above_a.clone()], json!(above_a)),
        "after is exclusive and need not exist"
    );
    let (past, next) = page_of(&s.get_json("/v1/sequences?after=zzz").await);
    assert_eq!((past.len(), next), (0, Value::Null), "after past the end");
    s.stop().await;
}

async fn sequence_pages_reject_bad_limit_and_after(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    for q in [
        "limit=0",
        "limit=1001",
        "limit=-1",
        "limit=abc",
        "limit=",
        "limit=1.5",
        "limit=1&limit=2",
        "after=a&after=b",
    ] {
        let resp = s.get(&format!("/v1/sequences?{q}")).await;
        expect_error(resp, StatusCode::BAD_REQUEST, "invalid_request").await;
    }
    for q in [
        "after=",
        "after=-x",
        "after=a%20b",
        &format!("after={}", "a".repeat(129)),
    ] {
        let resp = s.get(&format!("/v1/sequences?{q}")).await;
        expect_error(resp, StatusCode::BAD_REQUEST, "invalid_name").await;
    }
    s.stop().await;
}

per_backend!(
    create_serves_ids_as_json_text_and_batches,
    list_get_and_patch_show_rows_and_buffers,
    unknown_sequences_get_404_saying_how_to_create_them,
    a_row_inserted_by_sql_is_served_without_restart,
    bad_names_and_counts_get_400,
    bad_bodies_get_400_and_duplicates_409,
    exhausted_sequences_get_409,
    health_readiness_and_unknown_routes,
    admin_token_is_required_when_set,
    head_on_drawing_routes_draws_nothing,
    concurrent_clients_over_http_get_unique_increasing_ids,
    walking_every_page_lists_each_sequence_exactly_once_in_byte_order,
    walking_the_pages_of_a_prefix_lists_each_matching_sequence_exactly_once,
    sequence_pages_reject_a_bad_prefix,
    sequence_pages_default_to_100_and_end_with_next_null,
    sequence_pages_reject_bad_limit_and_after
);
