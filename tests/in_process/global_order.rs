//! Global ordering over HTTP, three servers on one database, every backend:
//! a client alternating between them sees strictly increasing IDs; many
//! concurrent clients get no duplicate, and every request that started after
//! another's answer arrived got a larger ID (all pairs checked from recorded
//! send and receive times); switching a sequence from `instance` to
//! `global` and back by PATCH under load repeats no ID.

use crate::support::common;
use crate::support::proxy;
use crate::support::server;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestDb;
use seqd::config::Settings;
use serde_json::json;
use server::TestServer;

async fn three(db: &TestDb) -> Vec<TestServer> {
    let mut out = Vec::new();
    for _ in 0..3 {
        out.push(TestServer::start(Settings::for_database(db.url.clone())).await);
    }
    out
}

/// Creates `g` through `server` with `body`'s fields; the row as answered.
async fn create(server: &TestServer, body: serde_json::Value) -> serde_json::Value {
    let mut body = body;
    body["name"] = json!("g");
    let created = server.post_sequence(&body).await;
    assert_eq!(created.status(), 201);
    created.json().await.unwrap()
}

/// The next ID of `g` from the server at `base`, through `http`.
async fn next(http: &reqwest::Client, base: &str) -> i64 {
    server::next_at(http, base, "g").await
}

async fn a_client_alternating_between_three_instances_sees_increasing_ids(db: TestDb) {
    let servers = three(&db).await;
    let body = create(&servers[0], json!({"ordering": "global"})).await;
    assert_eq!(body["ordering"], "global");
    let http = reqwest::Client::new();
    let mut last = 0;
    for i in 0..90 {
        let id = next(&http, &servers[i % 3].url("")).await;
        assert!(id > last, "{id} after {last} (request {i})");
        last = id;
    }
    // What each instance shows of it: no segment, the 30 IDs it handed
    // out, its reservations and the last one's latency.
    for s in &servers {
        let got = s.get_json("/v1/sequences/g").await;
        let buffer = &got["buffer"];
        assert!(buffer["current"].is_null(), "{got}");
        assert_eq!(buffer["issued"], json!(30), "{got}");
        let fetches = buffer["fetches"].as_u64().unwrap();
        assert!((1..=30).contains(&fetches), "{got}");
        assert!(buffer["last_fetch_latency_ms"].is_number(), "{got}");
        assert!(buffer["last_error"].is_null(), "{got}");
    }
}

/// One request: when it was sent, when its answer came, the ID.
#[derive(Clone, Copy, Debug)]
struct Timed {
    sent: Instant,
    received: Instant,
    id: i64,
}

async fn concurrent_clients_on_three_instances_get_ids_in_real_time_order(db: TestDb) {
    let servers = three(&db).await;
    create(&servers[0], json!({"ordering": "global"})).await;
    let http = reqwest::Client::new();
    let bases: Arc<Vec<String>> = Arc::new(servers.iter().map(|s| s.url("")).collect());
    let mut clients = Vec::new();
    for c in 0..24 {
        let (http, bases) = (http.clone(), bases.clone());
        clients.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for i in 0..40 {
                let sent = Instant::now();
                let id = next(&http, &bases[(c + i) % 3]).await;
                got.push(Timed {
                    sent,
                    received: Instant::now(),
                    id,
                });
            }
            got
        }));
    }
    let mut all: Vec<Timed> = Vec::new();
    for c in clients {
        all.extend(c.await.unwrap());
    }
    let unique: HashSet<i64> = all.iter().map(|t| t.id).collect();
    assert_eq!(unique.len(), all.len(), "duplicates");
    // For every request B, every request A answered before B was sent has
    // a smaller ID: compare B with the largest ID answered before it.
    let mut by_received = all.clone();
    by_received.sort_by_key(|t| t.received);
    let mut prefix_max = Vec::with_capacity(by_received.len());
    let mut max = i64::MIN;
    for t in &by_received {
        max = max.max(t.id);
        prefix_max.push(max);
    }
    let mut checked_pairs = 0u64;
    for b in &all {
        let answered_before = by_received.partition_point(|a| a.received < b.sent);
        if answered_before > 0 {
            checked_pairs += answered_before as u64;
            let largest = prefix_max[answered_before - 1];
            assert!(
                b.id > largest,
                "ID {} was sent after ID {largest} was answered",
                b.id
            );
        }
    }
    assert!(checked_pairs > 10_000, "only {checked_pairs} ordered pairs");
}

async fn switching_to_global_and_back_by_patch_under_load_repeats_no_id(db: TestDb) {
    let servers = three(&db).await;
    create(&servers[0], json!({"step": 50})).await;
    let http = reqwest::Client::new();
    let bases: Arc<Vec<String>> = Arc::new(servers.iter().map(|s| s.url("")).collect());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut clients = Vec::new();
    for c in 0..6 {
        let (http, bases, stop) = (http.clone(), bases.clone(), stop.clone());
        clients.push(tokio::spawn(async move {
            let mut got = Vec::new();
            let mut last = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let id = next(&http, &bases[c % 3]).await;
                assert!(id > last, "client {c}: {id} after {last}");
                last = id;
                got.push(id);
            }
            got
        }));
    }
    for ordering in ["global", "instance", "global", "instance"] {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let r = servers[1]
            .patch_sequence("g", &json!({ "ordering": ordering }))
            .await;
        assert_eq!(r.status(), 200);
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["ordering"], ordering);
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut seen = HashSet::new();
    let mut total = 0;
    for c in clients {
        for id in c.await.unwrap() {
            total += 1;
            assert!(seen.insert(id), "ID {id} handed out twice");
        }
    }
    assert!(total > 100, "only {total} requests");
}

async fn an_unknown_ordering_is_refused_with_400(db: TestDb) {
    let s = TestServer::start(Settings::for_database(db.url.clone())).await;
    for body in [
        json!({"name": "g", "ordering": "sometimes"}),
        json!({"name": "g", "ordering": 1}),
    ] {
        let r = s.post_sequence(&body).await;
        assert_eq!(r.status(), 400, "{body}");
        let e: serde_json::Value = r.json().await.unwrap();
        assert_eq!(e["error"]["code"], "invalid_request", "{e}");
    }
    create(&s, json!({})).await;
    let r = s.patch_sequence("g", &json!({"ordering": "total"})).await;
    assert_eq!(r.status(), 400);
    let row: serde_json::Value = s.get_json("/v1/sequences/g").await;
    assert_eq!(row["ordering"], "instance");
}

/// The regressions counted for `name` on `s`'s `/metrics` (0 when absent).
async fn regressions(s: &TestServer, name: &str) -> u64 {
    let series = format!("seqd_sequence_regressions_total{{sequence=\"{name}\"}}");
    s.metric(&series).await.unwrap_or(0.0) as u64
}

/// A new global sequence answers its `start` first (the segment its first
/// request fetched before the instance knew the ordering is given back),
/// and its row going back under an instance (a restore, a hand edit, a
/// lagging replica) never makes that instance hand out an ID at or below
/// one it handed out: the low reservation is reported as a regression and
/// skipped in one more, as the plain path does. On a second instance,
/// where the sequence is new, the same holds from its first ID on.
async fn a_global_row_that_goes_back_is_skipped_and_reported(db: TestDb) {
    // One name per backend: the metrics registry is shared by the process.
    let name = format!("glob-{}", db.backend.store_name());
    let s = TestServer::start(Settings::for_database(db.url.clone())).await;
    let created = s
        .post_sequence(&json!({"name": name, "start": 1, "step": 100, "ordering": "global"}))
        .await;
    assert_eq!(created.status(), 201);
    let batch = |n: u32| {
        let path = format!("/v1/sequences/{name}/batch?count={n}");
        let s = &s;
        async move { common::integers(&s.get_json(&path).await, "ids") }
    };
    assert_eq!(batch(3).await, vec![1, 2, 3]);
    let mut served = batch(100).await;
    assert_eq!(served.first(), Some(&4));
    assert_eq!(regressions(&s, &name).await, 0);

    common::execute(
        &db,
        &format!("UPDATE sequences SET max_id = max_id - 50 WHERE name = '{name}'"),
    )
    .await;
    let after = batch(3).await;
    assert_eq!(after, vec![104, 105, 106], "after {served:?}");
    assert_eq!(regressions(&s, &name).await, 1);
    served.extend(after);
    for _ in 0..5 {
        let id = s.next(&name).await;
        assert!(id > *served.last().unwrap(), "{id} after {served:?}");
        served.push(id);
    }
    assert_eq!(regressions(&s, &name).await, 1, "reported once");

    // Lowered again, below everything: the instance still goes on above.
    common::execute(
        &db,
        &format!("UPDATE sequences SET max_id = 0 WHERE name = '{name}'"),
    )
    .await;
    let id = s.next(&name).await;
    assert!(id > *served.last().unwrap(), "{id} after {served:?}");
    assert_eq!(regressions(&s, &name).await, 2);
    s.stop().await;
}

/// The database cut off (through the proxy): a global sequence answers 503
/// at once, while an instance sequence on the same server rides through
/// from memory; both serve again, increasing, once it is back.
///
/// "At once": the wait, fetch and request timeouts are an hour, so an
/// answer that waited for a reservation to time out, or for one to succeed,
/// would not come within the client's 30 s timeout (the request would fail
/// to send); the 503 that comes is the failed reservation's own answer.
async fn a_global_sequence_fails_while_the_database_is_cut_and_recovers(db: TestDb) {
    let proxy = proxy::Proxy::start(proxy::upstream_of(&db.url)).await;
    let mut settings = Settings::for_database(proxy.url_for(&db.url));
    let hour = Duration::from_secs(3600);
    settings.allocator.wait_timeout = hour;
    settings.allocator.fetch_timeout = hour;
    settings.limits.request_timeout = hour;
    let s = TestServer::start(settings).await;
    create(&s, json!({"ordering": "global"})).await;
    s.create("plain", 1, 1000).await;
    let http = reqwest::Client::new();
    let before = next(&http, &s.url("")).await;
    let plain_url = s.url("/v1/sequences/plain/next");
    assert_eq!(http.get(&plain_url).send().await.unwrap().status(), 200);
    proxy.cut();
    let r = s
        .http
        .get(s.url("/v1/sequences/g/next"))
        .send()
        .await
        .expect("an answer within the client's timeout, shorter than any of the server's");
    assert_eq!(r.status(), 503);
    let e: serde_json::Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "storage_unavailable", "{e}");
    // the instance sequence still has its segment
    assert_eq!(http.get(&plain_url).send().await.unwrap().status(), 200);
    proxy.heal();
    let mut after = None;
    for _ in 0..100 {
        let r = http
            .get(s.url("/v1/sequences/g/next"))
            .header("accept", "text/plain")
            .send()
            .await
            .unwrap();
        if r.status() == 200 {
            after = Some(r.text().await.unwrap().trim().parse::<i64>().unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = after.expect("serves again once the database is back");
    assert!(after > before, "{after} after {before}");
}

network_backends!(a_global_sequence_fails_while_the_database_is_cut_and_recovers);

per_backend!(
    an_unknown_ordering_is_refused_with_400,
    a_global_row_that_goes_back_is_skipped_and_reported,
    a_client_alternating_between_three_instances_sees_increasing_ids,
    concurrent_clients_on_three_instances_get_ids_in_real_time_order,
    switching_to_global_and_back_by_patch_under_load_repeats_no_id,
);
