//! Leases (docs/api.md, "Leases") on every backend: a range reserved for
//! one caller never meets another lease or what any instance serves; bad
//! sizes, global and serial sequences are refused with nothing reserved;
//! the unused rest goes back only while it is the top of the row and only
//! on the instance that issued it.

use crate::support::common;
use crate::support::server;

use std::collections::HashSet;
use std::sync::Arc;

use common::TestDb;
use reqwest::{Method, StatusCode};
use seqd::config::Settings;
use serde_json::{json, Value};
use server::TestServer;

/// `POST /v1/sequences/{name}/lease` with `query`: status and body.
async fn lease(s: &TestServer, name: &str, query: &str) -> (StatusCode, Value) {
    let path = format!("/v1/sequences/{name}/lease{query}");
    let resp = s.send(Method::POST, &path).await;
    (resp.status(), resp.json().await.unwrap())
}

/// A lease that must succeed: `(start, end)`.
async fn leased(s: &TestServer, name: &str, query: &str) -> (i64, i64) {
    let (start, end, _) = leased_with_key(s, name, query).await;
    (start, end)
}

/// A lease that must succeed: `(start, end, key)`.
async fn leased_with_key(s: &TestServer, name: &str, query: &str) -> (i64, i64, String) {
    let (status, body) = lease(s, name, query).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["name"], name);
    let key = body["key"].as_str().unwrap().to_owned();
    assert_eq!(key.len(), 32, "{body}");
    let id = |field: &str| body[field].as_i64().unwrap();
    (id("start"), id("end"), key)
}

/// Gives back `[next, end)` of the lease `[start, end)`: status and body.
async fn give_back(s: &TestServer, name: &str, body: Value) -> (StatusCode, Value) {
    let path = format!("/v1/sequences/{name}/lease/return");
    let resp = s.send_json(Method::POST, &path, &body).await;
    (resp.status(), resp.json().await.unwrap())
}

/// The row's `max_id`, read from the database.
async fn max_id(db: &TestDb, name: &str) -> i64 {
    common::row(&common::store(db).await, name).await.max_id
}

/// Leases of every size, by the default size, beside `/next` and `/batch`
/// on two instances: the ranges have the size asked (the step by default)
/// and no ID is handed out twice.
async fn leases_never_meet_each_other_or_the_instances(db: TestDb) {
    let a = Arc::new(TestServer::on(&db.url).await);
    let b = Arc::new(TestServer::on(&db.url).await);
    a.create("ls", 1, 100).await;
    let (start, end) = leased(&a, "ls", "").await;
    assert_eq!(end - start, 100, "the step by default");
    for size in [1, 5, 99, 100, 101, 5000] {
        let (start, end) = leased(&a, "ls", &format!("?size={size}")).await;
        assert_eq!(end - start, size);
    }
    let mut tasks = Vec::new();
    for t in 0..16 {
        let s = if t % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in 0..40 {
                match (t + i) % 3 {
                    0 => {
                        let (start, end) = leased(&s, "ls", &format!("?size={}", 1 + i * 7)).await;
                        ids.extend(start..end);
                    }
                    1 => ids.push(s.next("ls").await),
                    _ => {
                        let body = s.get_json("/v1/sequences/ls/batch?count=7").await;
                        ids.extend(common::integers(&body, "ids"));
                    }
                }
            }
            ids
        }));
    }
    let mut seen = HashSet::new();
    for t in tasks {
        for id in t.await.unwrap() {
            assert!(seen.insert(id), "ID {id} handed out twice");
        }
    }
    assert!(seen.len() > 16 * 40);
}

/// Bad sizes are refused 400 `invalid_request` and reserve nothing.
async fn bad_sizes_reserve_nothing(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    s.create("lb", 1, 100).await;
    let before = max_id(&db, "lb").await;
    for query in [
        "?size=0",
        "?size=-1",
        "?size=1000001",
        "?size=abc",
        "?size=1.5",
        "?size=1e3",
        "?size=",
        "?size=9223372036854775808",
        "?size=2&size=3",
        "?size=+5",
        "?size=%205",
        "?size=5%20",
        "?size=-",
        "?SIZE=5",
        "?size=5&sise=6",
    ] {
        let (status, body) = lease(&s, "lb", query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body["error"]["code"], "invalid_request", "{query}: {body}");
    }
    let (status, body) = lease(&s, "nope", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], "sequence_not_found");
    let rest = json!({"start": 1, "end": 10, "next": 5, "key": "0".repeat(32)});
    let (status, body) = give_back(&s, "nope", rest).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a return to a missing sequence: {body}"
    );
    assert_eq!(body["error"]["code"], "sequence_not_found");
    assert_eq!(
        max_id(&db, "lb").await,
        before,
        "a refused lease reserved IDs"
    );
    s.stop().await;
}

/// A smaller `--max-lease` bounds the size asked and the default size.
async fn max_lease_bounds_every_lease(db: TestDb) {
    let s = TestServer::start(Settings {
        max_lease: 50,
        ..Settings::for_database(db.url.clone())
    })
    .await;
    s.create("lm", 1, 100).await;
    let (status, body) = lease(&s, "lm", "?size=51").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--max-lease"));
    let (start, end) = leased(&s, "lm", "").await;
    assert_eq!(end - start, 50, "a step of 100 leased as 50");
    // The step's other 50 went back: the next lease follows at once.
    assert_eq!(leased(&s, "lm", "?size=50").await, (end, end + 50));
    s.stop().await;
}

/// Global and serial sequences are refused 409 `not_leasable`, and the
/// rows are as they were.
async fn global_and_serial_sequences_are_not_leasable(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    s.create_global_and_serial("lg", "lsr", "L{yyyy}{seq:06}")
        .await;
    for (name, kind) in [("lg", "global"), ("lsr", "serial")] {
        let before = max_id(&db, name).await;
        let (status, body) = lease(&s, name, "?size=5").await;
        assert_eq!(status, StatusCode::CONFLICT, "{name}: {body}");
        assert_eq!(body["error"]["code"], "not_leasable", "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(kind),
            "{body}"
        );
        assert_eq!(max_id(&db, name).await, before, "{name}: the row moved");
    }
    s.stop().await;
}

/// Refused leases of a global sequence (by `/lease` and Tinyid's segment
/// routes) while another instance draws from it: the refusal reserves
/// nothing, so the IDs drawn are exactly those up to `max_id`, no gap.
async fn a_refused_lease_of_a_global_sequence_consumes_nothing(db: TestDb) {
    let a = TestServer::on(&db.url).await;
    let b = Arc::new(TestServer::on(&db.url).await);
    let created = a
        .post_sequence(&json!({"name": "lgg", "step": 10, "ordering": "global"}))
        .await
        .status();
    assert_eq!(created, StatusCode::CREATED);
    // The first draw learns the ordering (its segment is dropped, a gap
    // before the first ID); from there on, no gap.
    let first = b.next("lgg").await;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drawers: Vec<_> = (0..4)
        .map(|_| {
            let (b, done) = (b.clone(), done.clone());
            tokio::spawn(async move {
                let mut ids = Vec::new();
                // Bounded: at most 5,000 draws a task.
                while !done.load(std::sync::atomic::Ordering::Relaxed) && ids.len() < 5000 {
                    ids.push(b.next("lgg").await);
                }
                ids
            })
        })
        .collect();
    for i in 0..40 {
        let (status, body) = lease(&a, "lgg", "?size=100000").await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert_eq!(body["error"]["code"], "not_leasable", "{body}");
        let path = match i % 2 {
            0 => "/tinyid/id/nextSegmentIdSimple?bizType=lgg",
            _ => "/tinyid/id/nextSegmentId?bizType=lgg",
        };
        let status = a.get(path).await.status();
        assert_eq!(status, StatusCode::CONFLICT, "{path}");
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut ids = Vec::new();
    for d in drawers {
        ids.extend(d.await.unwrap());
    }
    ids.push(first);
    ids.sort_unstable();
    let top = max_id(&db, "lgg").await;
    assert_eq!(
        ids,
        (first..=top).collect::<Vec<_>>(),
        "IDs of the global sequence went missing beside {} drawn",
        ids.len()
    );
    a.stop().await;
}

/// A lease at the top of the 64-bit range never wraps: one whose last ID
/// would be `i64::MAX` (its `end` one past it) is refused 409
/// `sequence_exhausted` and reserves nothing; one ID fewer ends at
/// `i64::MAX`; Tinyid's segment at the top answers `maxId` below it.
async fn a_lease_at_the_top_of_the_range_never_wraps(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    s.create("ltop", 9_223_372_036_854_775_708, 100).await;
    for query in ["", "?size=100", "?size=1000"] {
        let (status, body) = lease(&s, "ltop", query).await;
        assert_eq!(status, StatusCode::CONFLICT, "{query}: {body}");
        assert_eq!(body["error"]["code"], "sequence_exhausted", "{body}");
    }
    assert_eq!(max_id(&db, "ltop").await, 9_223_372_036_854_775_707);
    let (start, end) = leased(&s, "ltop", "?size=99").await;
    assert_eq!((start, end), (9_223_372_036_854_775_708, i64::MAX));

    s.create("ttop", i64::MAX - 100, 100).await;
    let text = s
        .get("/tinyid/id/nextSegmentIdSimple?bizType=ttop")
        .await
        .text()
        .await
        .unwrap();
    let max = i64::MAX - 1;
    let current = i64::MAX - 101;
    assert_eq!(text, format!("{current},{},{max},1,0", current + 20));
    let status = s
        .get("/tinyid/id/nextSegmentIdSimple?bizType=ttop")
        .await
        .status();
    assert_eq!(status, StatusCode::CONFLICT, "exhausted");
    s.stop().await;
}

/// The unused rest goes back while the lease is the top of the row, once,
/// only on the instance that issued it and only with its key; a range
/// nobody leased, or another caller's without its key, never lowers the row.
async fn the_rest_goes_back_only_from_the_top_and_only_to_its_holder(db: TestDb) {
    let a = TestServer::on(&db.url).await;
    let b = TestServer::on(&db.url).await;
    a.create("lr", 1, 100).await;
    let (start, end, key) = leased_with_key(&a, "lr", "?size=100").await;
    let rest = json!({"start": start, "end": end, "next": start + 10, "key": key});
    // On another instance: not issued there.
    assert_eq!(give_back(&b, "lr", rest.clone()).await.1["returned"], false);
    // Without its key (another caller who guessed the range).
    let guessed = json!({"start": start, "end": end, "next": start, "key": "0".repeat(32)});
    assert_eq!(give_back(&a, "lr", guessed).await.1["returned"], false);
    assert_eq!(max_id(&db, "lr").await, end - 1);
    assert_eq!(give_back(&a, "lr", rest.clone()).await.1["returned"], true);
    assert_eq!(max_id(&db, "lr").await, start + 9);
    // Once only.
    assert_eq!(give_back(&a, "lr", rest).await.1["returned"], false);
    assert_eq!(max_id(&db, "lr").await, start + 9);

    // The next lease follows the given-back IDs.
    let (s1, e1, k1) = leased_with_key(&a, "lr", "?size=10").await;
    assert_eq!(s1, start + 10);
    // A range nobody leased, whose top is the row's: refused.
    let forged = json!({"start": s1 + 1, "end": e1, "next": s1 + 1, "key": k1});
    assert_eq!(give_back(&a, "lr", forged).await.1["returned"], false);
    // A lease that is no longer the top: refused, the later one untouched.
    let (s2, e2, k2) = leased_with_key(&a, "lr", "?size=10").await;
    let old = json!({"start": s1, "end": e1, "next": s1, "key": k1});
    assert_eq!(give_back(&a, "lr", old).await.1["returned"], false);
    assert_eq!(max_id(&db, "lr").await, e2 - 1);
    // Nothing left to give back.
    let used = json!({"start": s2, "end": e2, "next": e2, "key": k2});
    assert_eq!(give_back(&a, "lr", used).await.1["returned"], false);
    assert_eq!(max_id(&db, "lr").await, e2 - 1);
    a.stop().await;
    b.stop().await;
}

/// Return bodies that are not JSON of the documented shape are refused 400
/// `invalid_request`; well-formed ones that are not the rest of a lease
/// (next outside it, an empty or inverted range) answer `false`; the row
/// never moves.
async fn bad_returns_are_refused(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    s.create("lx", 1, 100).await;
    let (start, end, key) = leased_with_key(&s, "lx", "").await;
    for body in [
        json!({"start": start, "end": end, "key": key}),
        json!({"start": start, "end": end, "next": start}),
        json!({"start": start, "end": end, "next": "5x", "key": key}),
        json!({"start": start, "end": end, "next": "-5", "key": key}),
        json!({"start": start, "end": end, "next": "", "key": key}),
        json!({"start": null, "end": end, "next": start, "key": key}),
        json!({"start": 0, "end": end, "next": 1, "key": key}),
        json!({"start": start, "end": 1, "next": start, "key": key}),
        json!({"start": start, "end": end, "next": -3, "key": key}),
        json!({"start": start, "end": end, "next": start, "key": key, "extra": 1}),
        json!({"start": start, "end": end, "next": start, "key": 5}),
    ] {
        let (status, answer) = give_back(&s, "lx", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(
            answer["error"]["code"], "invalid_request",
            "{body}: {answer}"
        );
    }
    for body in [
        json!({"start": start, "end": end, "next": end + 1, "key": key}),
        json!({"start": start + 1, "end": end, "next": start, "key": key}),
        json!({"start": end, "end": start + 1, "next": end, "key": key}),
        json!({"start": end, "end": end, "next": end, "key": key}),
        json!({"start": i64::MAX - 1, "end": end, "next": start, "key": key}),
    ] {
        let (status, answer) = give_back(&s, "lx", body.clone()).await;
        assert_eq!(status, StatusCode::OK, "{body}: {answer}");
        assert_eq!(answer["returned"], false, "{body}: {answer}");
    }
    assert_eq!(max_id(&db, "lx").await, end - 1);
    s.stop().await;
}

per_backend!(
    a_refused_lease_of_a_global_sequence_consumes_nothing,
    a_lease_at_the_top_of_the_range_never_wraps,
    leases_never_meet_each_other_or_the_instances,
    bad_sizes_reserve_nothing,
    max_lease_bounds_every_lease,
    global_and_serial_sequences_are_not_leasable,
    the_rest_goes_back_only_from_the_top_and_only_to_its_holder,
    bad_returns_are_refused,
);
