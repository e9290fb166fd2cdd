//! Tinyid's routes (docs/api.md, "Tinyid's routes") on every backend, as
//! Tinyid's clients call them: the answers of its documented protocol
//! (`nextId` as `{"data":[2],"code":200,"message":""}`, `nextIdSimple` as
//! `3` or `4,5,6`, a segment as `currentId,loadingId,maxId,delta,remainder`
//! with `(currentId, maxId]` the caller's), checked against what `/next`
//! hands out on the same sequence; GET and POST, query and form; bad input
//! refused with nothing issued; client tokens as the `token` parameter.

use crate::support::common;
use crate::support::server;

use std::collections::HashSet;

use common::TestDb;
use reqwest::{Method, StatusCode};
use seqd::config::{Secret, Settings};
use seqd::service::ClientAuth;
use serde_json::{json, Value};
use server::TestServer;

/// What a Tinyid route answered.
struct Answer {
    status: StatusCode,
    content_type: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {:?}", self.body))
    }
}

/// How a request carries its parameters.
#[derive(Clone, Copy, Debug)]
enum Carry {
    Get,
    PostQuery,
    PostForm,
}

const EVERY_CARRY: [Carry; 3] = [Carry::Get, Carry::PostQuery, Carry::PostForm];

async fn tinyid_at(s: &TestServer, path: &str, params: &str, carry: Carry) -> Answer {
    let req = match carry {
        Carry::Get => s.http.get(s.url(&format!("{path}?{params}"))),
        Carry::PostQuery => s.http.post(s.url(&format!("{path}?{params}"))),
        Carry::PostForm => s
            .http
            .post(s.url(path))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(params.to_owned()),
    };
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let content_type = resp
        .headers()
        .get("content-type")
        .map_or(String::new(), |v| v.to_str().unwrap().to_owned());
    Answer {
        status,
        content_type,
        body: resp.text().await.unwrap(),
    }
}

/// `route` under the default prefix.
async fn tinyid(s: &TestServer, route: &str, params: &str, carry: Carry) -> Answer {
    tinyid_at(s, &format!("/tinyid/id/{route}"), params, carry).await
}

/// `(currentId, loadingId, maxId, delta, remainder)` of a Simple segment.
fn segment_simple(a: &Answer) -> [i64; 5] {
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert!(
        a.content_type.starts_with("text/plain"),
        "{}",
        a.content_type
    );
    let numbers: Vec<i64> = a.body.split(',').map(|n| n.parse().unwrap()).collect();
    numbers
        .try_into()
        .unwrap_or_else(|_| panic!("five numbers: {:?}", a.body))
}

/// The same five of a JSON segment, checked for Tinyid's shape.
fn segment_json(a: &Answer) -> [i64; 5] {
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert!(a.content_type.starts_with("application/json"));
    let v = a.json();
    assert_eq!(v["code"], 200, "{v}");
    assert_eq!(v["message"], "", "{v}");
    let d = &v["data"];
    ["currentId", "loadingId", "maxId", "delta", "remainder"].map(|k| d[k].as_i64().unwrap())
}

/// The IDs of a Simple answer: one number, or numbers joined by commas.
fn ids_simple(a: &Answer) -> Vec<i64> {
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert!(a.content_type.starts_with("text/plain"));
    a.body.split(',').map(|n| n.parse().unwrap()).collect()
}

/// The IDs of a JSON answer, checked for Tinyid's shape.
fn ids_json(a: &Answer) -> Vec<i64> {
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let v = a.json();
    assert_eq!(v["code"], 200, "{v}");
    assert_eq!(v["message"], "", "{v}");
    common::integers(&v, "data")
}

/// The IDs a Tinyid client hands out of a segment: `(currentId, maxId]`.
fn segment_ids([current, _, max, delta, remainder]: [i64; 5]) -> Vec<i64> {
    assert_eq!((delta, remainder), (1, 0));
    ((current + 1)..=max).collect()
}

async fn max_id(db: &TestDb, name: &str) -> i64 {
    common::row(&common::store(db).await, name).await.max_id
}

/// Every route by every carry, beside `/next` on the same sequence: the
/// answers have Tinyid's shape, a segment's numbers mean what Tinyid's
/// client reads in them (its IDs `(currentId, maxId]`, the step long,
/// loading at 20%), and no ID is handed out twice across all of them.
async fn the_four_routes_answer_as_tinyid_and_never_repeat_an_id(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    s.create("tz", 1, 1000).await;
    let mut seen = HashSet::new();
    let mut take = |ids: Vec<i64>, what: &str| {
        for id in ids {
            assert!(seen.insert(id), "{id} handed out twice ({what})");
        }
    };
    take(vec![s.next("tz").await], "/next");
    for carry in EVERY_CARRY {
        let simple = segment_simple(&tinyid(&s, "nextSegmentIdSimple", "bizType=tz", carry).await);
        let json = segment_json(&tinyid(&s, "nextSegmentId", "bizType=tz", carry).await);
        for seg in [simple, json] {
            let [current, loading, max, ..] = seg;
            assert_eq!(max - current, 1000, "{seg:?}: the step");
            assert_eq!(loading, current + 200, "{seg:?}: 20% in");
            take(segment_ids(seg), "a segment");
        }
        let one = ids_simple(&tinyid(&s, "nextIdSimple", "bizType=tz", carry).await);
        assert_eq!(one.len(), 1);
        let ten = ids_simple(&tinyid(&s, "nextIdSimple", "bizType=tz&batchSize=10", carry).await);
        let json = ids_json(&tinyid(&s, "nextId", "bizType=tz&batchSize=3", carry).await);
        let json_one = ids_json(&tinyid(&s, "nextId", "bizType=tz", carry).await);
        assert_eq!((ten.len(), json.len(), json_one.len()), (10, 3, 1));
        for run in [&ten, &json] {
            assert!(run.windows(2).all(|w| w[0] < w[1]), "{run:?}");
        }
        for ids in [one, ten, json, json_one] {
            take(ids, "nextId");
        }
        take(vec![s.next("tz").await], "/next");
    }
    // A segment is the caller's alone, committed: the row is above it.
    let seg = segment_simple(&tinyid(&s, "nextSegmentIdSimple", "bizType=tz", Carry::Get).await);
    assert!(max_id(&db, "tz").await >= seg[2]);
    take(segment_ids(seg), "a segment");
    // Above the largest batch of `/batch`, in parts, still one run.
    let many = ids_simple(
        &tinyid(
            &s,
            "nextIdSimple",
            "bizType=tz&batchSize=100000",
            Carry::Get,
        )
        .await,
    );
    assert_eq!(many.len(), 100_000);
    assert!(many.windows(2).all(|w| w[0] < w[1]));
    take(many, "100,000");
    take(vec![s.next("tz").await], "/next");
    s.stop().await;
}

/// Bad `batchSize` (0, which crashes Tinyid's own server, 100,001, signed,
/// not a number), a missing or invalid `bizType` and an unknown one: a
/// real status, an empty body on the Simple routes and Tinyid's error JSON
/// (code 6) on the others, and nothing issued.
async fn bad_input_gets_a_clear_error_and_issues_nothing(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    s.create("tb", 1, 100).await;
    let before = s.next("tb").await;
    let row = max_id(&db, "tb").await;
    let cases = [
        ("bizType=tb&batchSize=0", StatusCode::BAD_REQUEST),
        ("bizType=tb&batchSize=100001", StatusCode::BAD_REQUEST),
        ("bizType=tb&batchSize=-1", StatusCode::BAD_REQUEST),
        ("bizType=tb&batchSize=ten", StatusCode::BAD_REQUEST),
        ("bizType=tb&batchSize=", StatusCode::BAD_REQUEST),
        ("batchSize=2", StatusCode::BAD_REQUEST),
        ("bizType=bad%20name", StatusCode::BAD_REQUEST),
        ("bizType=nope", StatusCode::NOT_FOUND),
    ];
    for (params, status) in cases {
        for carry in EVERY_CARRY {
            let simple = tinyid(&s, "nextIdSimple", params, carry).await;
            assert_eq!(simple.status, status, "{params} {carry:?}: {}", simple.body);
            assert_eq!(
                simple.body, "",
                "{params}: the Simple routes answer no body"
            );
            let json = tinyid(&s, "nextId", params, carry).await;
            assert_eq!(json.status, status, "{params} {carry:?}");
            let v = json.json();
            assert_eq!(v["code"], 6, "{v}");
            assert_eq!(v["data"], Value::Null, "{v}");
            assert!(!v["message"].as_str().unwrap().is_empty(), "{v}");
        }
    }
    let segment_cases = [
        "",
        "bizType=nope",
        "bizType=bad%20name",
        "bizType=tb&batchSize=0",
        "bizType=tb&batchSize=100001",
        "bizType=tb&batchSize=ten",
    ];
    for params in segment_cases {
        for route in ["nextSegmentIdSimple", "nextSegmentId"] {
            let a = tinyid(&s, route, params, Carry::Get).await;
            assert!(a.status.is_client_error(), "{route}?{params}: {}", a.status);
        }
    }
    // An empty POST is accepted as a request (and refused for its missing
    // bizType, not for its empty body).
    let empty = s
        .http
        .post(s.url("/tinyid/id/nextId"))
        .send()
        .await
        .unwrap();
    assert_eq!(empty.status(), StatusCode::BAD_REQUEST);
    let v: Value = empty.json().await.unwrap();
    assert!(v["message"].as_str().unwrap().contains("bizType"), "{v}");
    // HEAD would draw: refused.
    let head = s
        .send(Method::HEAD, "/tinyid/id/nextIdSimple?bizType=tb")
        .await;
    assert_eq!(head.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(s.next("tb").await, before + 1, "nothing was issued");
    assert_eq!(max_id(&db, "tb").await, row, "nothing was reserved");
    s.stop().await;
}

/// A global sequence serves `nextId` in order but no segment; a serial one
/// neither (its IDs are serial numbers): 409, nothing reserved.
async fn global_and_serial_sequences(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    s.create_global_and_serial("tg", "ts", "T{yyyy}{seq:06}")
        .await;
    let ids = ids_simple(&tinyid(&s, "nextIdSimple", "bizType=tg&batchSize=3", Carry::Get).await);
    assert_eq!(ids.len(), 3);
    let next = s.next("tg").await;
    assert!(
        ids.iter().all(|&i| i < next),
        "global order: {ids:?} then {next}"
    );
    for name in ["tg", "ts"] {
        let before = max_id(&db, name).await;
        for route in ["nextSegmentIdSimple", "nextSegmentId"] {
            let a = tinyid(&s, route, &format!("bizType={name}"), Carry::Get).await;
            assert_eq!(a.status, StatusCode::CONFLICT, "{route} {name}: {}", a.body);
        }
        assert_eq!(max_id(&db, name).await, before, "{name}: the row moved");
    }
    let serial = tinyid(&s, "nextId", "bizType=ts", Carry::Get).await;
    assert_eq!(serial.status, StatusCode::CONFLICT, "{}", serial.body);
    assert_eq!(serial.json()["code"], 6);
    // No serial number was used up by the refusal.
    let first: Value = s.get_json("/v1/sequences/ts/next").await;
    assert!(
        first["serial"].as_str().unwrap().ends_with("000001"),
        "{first}"
    );
    s.stop().await;
}

const ADMIN: &str = "admin-secret-for-tinyid-tests";

/// Under `--client-auth on` the `token` parameter is a client token (or a
/// Bearer header): one covering the name draws, one that does not is
/// refused 403, an unknown one and none 401; Tinyid's code 5 on the JSON
/// routes, an empty body on the Simple ones; nothing issued when refused.
async fn tokens_are_client_tokens(db: TestDb) {
    let s = TestServer::start(Settings {
        admin_token: Some(Secret::new(ADMIN)),
        client_auth: ClientAuth::On,
        ..Settings::for_database(db.url.clone())
    })
    .await;
    let body = json!({"name": "shop1-tk", "start": 1, "step": 100});
    let created = s
        .send_as(ADMIN, Method::POST, "/v1/sequences", Some(&body))
        .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let good = s.token(ADMIN, "tinyid-shop1", "shop1-", "draw").await;
    let other = s.token(ADMIN, "tinyid-shop2", "shop2-", "draw").await;
    let row = max_id(&db, "shop1-tk").await;
    for (token, status) in [
        (Some(other.as_str()), StatusCode::FORBIDDEN),
        (Some("seqd_not-a-token"), StatusCode::UNAUTHORIZED),
        (None, StatusCode::UNAUTHORIZED),
    ] {
        // The same answer for a name that exists and one that does not.
        for name in ["shop1-tk", "shop1-none"] {
            let params = match token {
                Some(t) => format!("bizType={name}&token={t}"),
                None => format!("bizType={name}"),
            };
            for carry in EVERY_CARRY {
                let simple = tinyid(&s, "nextSegmentIdSimple", &params, carry).await;
                assert_eq!(
                    (simple.status, simple.body.as_str()),
                    (status, ""),
                    "{params}"
                );
                let json = tinyid(&s, "nextId", &params, carry).await;
                assert_eq!(json.status, status, "{params}");
                assert_eq!(json.json()["code"], 5, "{}", json.body);
                assert!(!json.body.contains(&good) && !json.body.contains(&other));
            }
        }
    }
    assert_eq!(
        max_id(&db, "shop1-tk").await,
        row,
        "nothing reserved when refused"
    );
    let params = format!("bizType=shop1-tk&token={good}");
    for carry in EVERY_CARRY {
        segment_simple(&tinyid(&s, "nextSegmentIdSimple", &params, carry).await);
        ids_json(&tinyid(&s, "nextId", &params, carry).await);
    }
    let bearer = s
        .send_as(
            &good,
            Method::GET,
            "/tinyid/id/nextIdSimple?bizType=shop1-tk",
            None,
        )
        .await;
    assert_eq!(bearer.status(), StatusCode::OK);
    s.stop().await;
}

/// `--tinyid-prefix` moves the routes: served under the new prefix, not
/// under the default one.
async fn the_prefix_moves_the_routes(db: TestDb) {
    let s = TestServer::start(Settings {
        tinyid_prefix: "/ids/tiny".into(),
        ..Settings::for_database(db.url.clone())
    })
    .await;
    s.create("tp", 1, 10).await;
    let moved = tinyid_at(&s, "/ids/tiny/id/nextIdSimple", "bizType=tp", Carry::Get).await;
    assert_eq!(ids_simple(&moved).len(), 1);
    let old = tinyid(&s, "nextIdSimple", "bizType=tp", Carry::Get).await;
    assert_eq!(old.status, StatusCode::NOT_FOUND);
    s.stop().await;
}

per_backend!(
    the_four_routes_answer_as_tinyid_and_never_repeat_an_id,
    bad_input_gets_a_clear_error_and_issues_nothing,
    global_and_serial_sequences,
    tokens_are_client_tokens,
    the_prefix_moves_the_routes,
);
