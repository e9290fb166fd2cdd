//! The snowflake routes over a real socket, on each backend: JSON with IDs as
//! numbers and strings, plain text, batches, decode, Leaf's route, the
//! lease row while serving and after a graceful stop, several servers on one
//! database, and start-up refusal of an unusable layout.

use crate::support::common;
use crate::support::server;

use std::collections::HashSet;
use std::time::Duration;

use common::{Backend, TestDb};
use reqwest::{Method, StatusCode};
use seqd::config::Settings;
use seqd::snowflake::{Layout, SystemWallClock, WallClock};
use serde_json::Value;
use server::TestServer;

/// Waits until the server has leased a worker ID (the lease is claimed in
/// the background right after start) and returns its first ID.
async fn first_id(s: &TestServer) -> i64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let resp = s.get("/v1/snowflake/next").await;
        if resp.status() == StatusCode::OK {
            let v: Value = resp.json().await.unwrap();
            return v["id"].as_i64().unwrap();
        }
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(resp.headers().contains_key("retry-after"));
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["code"], "worker_lease_lost", "{v}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "no worker ID leased within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn get_json(s: &TestServer, path: &str) -> (StatusCode, Value) {
    let resp = s.get(path).await;
    let status = resp.status();
    (status, resp.json().await.unwrap())
}

async fn snowflake_routes_answer_ids_as_numbers_and_strings(db: TestDb) {
    let s = TestServer::start(Settings::for_database(db.url.clone())).await;
    let mut last = first_id(&s).await;

    // JSON: the number and the same number as a string.
    let resp = s.send(Method::POST, "/v1/snowflake/next").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let v: Value = resp.json().await.unwrap();
    let id = v["id"].as_i64().unwrap();
    assert_eq!(v["id_str"].as_str().unwrap(), id.to_string());
    assert_eq!(v.as_object().unwrap().len(), 2, "{v}");
    assert!(id > last);
    last = id;

    // Plain text.
    let resp = s.send_plain(Method::GET, "/v1/snowflake/next").await;
    assert_eq!(resp.status(), StatusCode::OK);
    let id: i64 = resp.text().await.unwrap().parse().unwrap();
    assert!(id > last);
    last = id;

    // Batches: increasing, after the previous IDs, strings in step.
    let (status, v) = get_json(&s, "/v1/snowflake/batch?count=5000").await;
    assert_eq!(status, StatusCode::OK);
    let ids = common::integers(&v, "ids");
    let strs: Vec<String> = common::strings(&v, "ids_str");
    assert_eq!(ids.len(), 5000);
    assert!(ids[0] > last);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(strs, ids.iter().map(i64::to_string).collect::<Vec<_>>());
    last = *ids.last().unwrap();
    for bad in ["count=0", "count=10001", "count=x", "", "count=1&count=2"] {
        let (status, v) = get_json(&s, &format!("/v1/snowflake/batch?{bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(v["error"]["code"], "invalid_count", "{bad}: {v}");
    }

    // Decode: the parts, in this instance's layout.
    let (status, d) = get_json(&s, &format!("/v1/snowflake/decode/{last}")).await;
    assert_eq!(status, StatusCode::OK);
    let parts = Layout::default().decode(last).unwrap();
    assert_eq!(d["id"].as_i64(), Some(last));
    assert_eq!(d["id_str"].as_str().unwrap(), last.to_string());
    assert_eq!(d["timestamp"].as_i64(), Some(parts.timestamp));
    assert_eq!(d["worker"].as_u64(), Some(parts.worker as u64));
    assert_eq!(d["sequence"].as_u64(), Some(parts.sequence));
    let ms = d["timestamp_ms"].as_i64().unwrap();
    assert!((SystemWallClock.now_ms() - ms).abs() < 60_000, "{d}");
    let time = chrono::DateTime::parse_from_rfc3339(d["time"].as_str().unwrap()).unwrap();
    assert_eq!(time.timestamp_millis(), ms);
    for bad in ["abc", "-5", "99999999999999999999", "1.5"] {
        let (status, v) = get_json(&s, &format!("/v1/snowflake/decode/{bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(v["error"]["code"], "invalid_request", "{bad}: {v}");
    }

    // Leaf's route: plain text; the key is ignored.
    let resp = s.get("/api/snowflake/get/whatever").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    let id: i64 = resp.text().await.unwrap().parse().unwrap();
    assert!(id > last);
    last = id;

    // The lease row while serving, and after a graceful stop: released, with
    // the exact last millisecond used.
    let leases = common::connect_database(&db).await.leases();
    let rows = leases.list(1024).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].worker_id, parts.worker);
    assert!(rows[0].lease_until > SystemWallClock.now_ms());
    s.stop().await;
    let rows = leases.list(1024).await.unwrap();
    assert_eq!(rows[0].lease_until, 0, "{rows:?}");
    let l = Layout::default();
    assert!(
        rows[0].last_timestamp >= l.unit_start_ms(l.decode(last).unwrap().timestamp),
        "{rows:?}"
    );
}

async fn servers_on_one_database_lease_distinct_worker_ids(db: TestDb) {
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(TestServer::start(Settings::for_database(db.url.clone())).await);
    }
    let mut all = HashSet::new();
    let mut workers = HashSet::new();
    for s in &servers {
        all.insert(first_id(s).await);
    }
    let batches = futures::future::join_all(servers.iter().flat_map(|s| {
        (0..4).map(move |_| async move {
            let (status, v) = get_json(s, "/v1/snowflake/batch?count=2000").await;
            assert_eq!(status, StatusCode::OK, "{v}");
            common::integers(&v, "ids")
        })
    }))
    .await;
    for ids in batches {
        for id in ids {
            assert!(all.insert(id), "duplicate {id}");
        }
    }
    for id in &all {
        workers.insert(Layout::default().decode(*id).unwrap().worker);
    }
    assert_eq!(all.len(), 3 + 3 * 4 * 2000);
    assert_eq!(workers.len(), 3, "{workers:?}");
    for s in servers {
        s.stop().await;
    }
}

per_backend!(
    snowflake_routes_answer_ids_as_numbers_and_strings,
    servers_on_one_database_lease_distinct_worker_ids
);

#[tokio::test]
async fn disabled_snowflake_routes_answer_404_snowflake_disabled() {
    let db = common::test_db(Backend::Sqlite).await.unwrap();
    let mut settings = Settings::for_database(db.url.clone());
    settings.snowflake.enabled = false;
    let s = TestServer::start(settings).await;
    for path in [
        "/v1/snowflake/next",
        "/v1/snowflake/batch?count=2",
        "/v1/snowflake/decode/1",
        "/api/snowflake/get/x",
    ] {
        let (status, v) = get_json(&s, path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(v["error"]["code"], "snowflake_disabled", "{path}: {v}");
    }
    // Segments are unaffected.
    let (status, _) = get_json(&s, "/healthz").await;
    assert_eq!(status, StatusCode::OK);
    s.stop().await;
}

#[tokio::test]
async fn an_unusable_layout_is_a_start_up_error() {
    let db = common::test_db(Backend::Sqlite).await.unwrap();
    let database = seqd::open::open_database_with(&db.url, &Default::default())
        .await
        .unwrap();
    let mut settings = Settings::for_database(db.url.clone());
    settings.snowflake.epoch_ms = SystemWallClock.now_ms() + 86_400_000;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let run = seqd::startup::run(
        listener,
        database.sequences(),
        Some(database.leases()),
        &settings,
        std::future::pending(),
    );
    let err = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("fails at once")
        .unwrap_err();
    assert!(err.to_string().contains("must be in the past"), "{err:#}");
}

#[tokio::test]
async fn a_seconds_layout_serves_ids_from_the_command_line() {
    let db = common::test_db(Backend::Sqlite).await.unwrap();
    common::store(&db).await;
    let p = server::Process::spawn(
        &db.url,
        &[
            "--snowflake-bits",
            "36/5/22",
            "--snowflake-time-unit",
            "1s",
            "--snowflake-lease",
            "10s",
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let v: Value = loop {
        let resp = http
            .get(format!("{}/v1/snowflake/batch?count=3", p.base))
            .send()
            .await
            .unwrap();
        if resp.status() == StatusCode::OK {
            break resp.json().await.unwrap();
        }
        assert!(tokio::time::Instant::now() < deadline, "no IDs within 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let id = v["ids"][0].as_i64().unwrap();
    let (status, d) = {
        let resp = http
            .get(format!("{}/v1/snowflake/decode/{id}", p.base))
            .send()
            .await
            .unwrap();
        (resp.status(), resp.json::<Value>().await.unwrap())
    };
    assert_eq!(status, StatusCode::OK);
    // 22 sequence bits, 5 worker bits: the timestamp is seconds since 2024.
    assert_eq!(d["timestamp"].as_i64(), Some(id >> 27));
    assert_eq!(d["timestamp_ms"].as_i64().unwrap() % 1000, 0);
    assert!(
        (SystemWallClock.now_ms() - d["timestamp_ms"].as_i64().unwrap()).abs() < 60_000,
        "{d}"
    );
    p.kill().await;
}
