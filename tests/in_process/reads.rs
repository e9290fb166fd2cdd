//! Unauthenticated reads (`GET /v1/sequences...`, and `/readyz`, which
//! answers from the last background check) over a real
//! socket, on every backend: a flood of them never takes the connections
//! segment fetches need, and what they show of a failed fetch is seqd's own
//! words, never the driver's text (docs/design.md, "The read gate").

use crate::support::common;
use crate::support::proxy;
use crate::support::server;

use std::sync::Arc;
use std::time::Duration;

use common::{Backend, TestDb};
use proxy::Proxy;
use reqwest::StatusCode;
use seqd::config::Settings;
use serde_json::Value;
use server::TestServer;
use tokio::sync::watch;

/// Concurrent readers in the flood.
const READERS: usize = 64;
/// Most requests one reader sends.
const READS_PER_READER: usize = 400;
/// IDs requested while the flood runs (a fetch every 5).
const IDS: usize = 60;

/// A server on `url` with a store pool of `connections`.
async fn start_with_pool(settings: Settings, url: &str, connections: u32) -> TestServer {
    let options = settings.store_options().with_max_connections(connections);
    let database = seqd::open::open_database_with(url, &options)
        .await
        .expect("open database");
    TestServer::start_with_database(settings, database).await
}

/// A read answer the contract allows under a flood: 200, or 503
/// `overloaded` with `Retry-After`. Anything else is returned as a finding.
async fn judge_read(resp: reqwest::Response, path: &str) -> Option<String> {
    let status = resp.status();
    let retry_after = resp.headers().contains_key("retry-after");
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    match status {
        StatusCode::OK => None,
        StatusCode::SERVICE_UNAVAILABLE if body["error"]["code"] == "overloaded" && retry_after => {
            None
        }
        _ => Some(format!("{path}: {status} {body}")),
    }
}

/// One reader of the flood: cycles over the read routes until `stop` or
/// [`READS_PER_READER`] requests; counts every answer in `done`.
fn reader(
    s: &TestServer,
    i: usize,
    stop: watch::Receiver<bool>,
    done: Arc<watch::Sender<usize>>,
) -> tokio::task::JoinHandle<Vec<String>> {
    let http = s.http.clone();
    let paths = [
        "/v1/sequences/flooded",
        "/v1/sequences",
        "/v1/sequences/flooded",
        "/readyz",
    ];
    let urls: Vec<(String, &str)> = paths.iter().map(|p| (s.url(p), *p)).collect();
    tokio::spawn(async move {
        let mut findings = Vec::new();
        for n in 0..READS_PER_READER {
            if *stop.borrow() {
                break;
            }
            let (url, path) = &urls[(i + n) % urls.len()];
            let resp = http.get(url).send().await.expect("read request");
            findings.extend(judge_read(resp, path).await);
            done.send_modify(|d| *d += 1);
        }
        findings
    })
}

async fn a_flood_of_reads_never_starves_segment_fetches(db: TestDb) {
    // A slow database (network backends: 100 ms per round trip through the
    // proxy) and a small pool: reads hold connections long enough to matter.
    let proxy = match db.backend {
        Backend::Sqlite => None,
        _ => Some(Proxy::start(proxy::upstream_of(&db.url)).await),
    };
    let url = proxy
        .as_ref()
        .map_or_else(|| db.url.clone(), |p| p.url_for(&db.url));
    let mut settings = Settings::for_database(url.clone());
    settings.allocator.max_step = 5;
    // The default 3 s wait: with the gate a fetch waits only for the one
    // connection reads cannot take (a few 100 ms round trips, slower on a
    // loaded machine); without it, behind 64 readers on 3 connections.
    settings.allocator.wait_timeout = Duration::from_secs(3);
    let s = start_with_pool(settings, &url, 3).await;
    s.create("flooded", 1, 5).await;
    for i in 0..20 {
        s.create(&format!("other-{i:02}"), 1, 5).await;
    }
    assert_eq!(s.get("/v1/sequences/flooded/next").await.status(), 200);
    if let Some(p) = &proxy {
        p.set_latency(Duration::from_millis(100));
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    let done = Arc::new(watch::Sender::new(0usize));
    let mut started = done.subscribe();
    let readers: Vec<_> = (0..READERS)
        .map(|i| reader(&s, i, stop_rx.clone(), done.clone()))
        .collect();
    // The flood is on once every reader had an answer's worth of time.
    started.wait_for(|n| *n >= READERS).await.unwrap();

    let mut id_failures = Vec::new();
    for _ in 0..IDS {
        let resp = s.get("/v1/sequences/flooded/next").await;
        if resp.status() != StatusCode::OK {
            let status = resp.status();
            id_failures.push(format!("{status} {}", resp.text().await.unwrap()));
        }
    }
    stop_tx.send_replace(true);
    let mut read_findings = Vec::new();
    for r in readers {
        read_findings.extend(r.await.unwrap());
    }
    assert!(
        id_failures.is_empty(),
        "{} of {IDS} ID requests failed during the read flood (reads answered: {}); first: {:?}",
        id_failures.len(),
        *done.borrow(),
        id_failures.first()
    );
    assert!(
        read_findings.is_empty(),
        "{} read answers neither 200 nor 503 overloaded; first: {:?}",
        read_findings.len(),
        read_findings.first()
    );
    s.stop().await;
}

/// Text only the failing trigger puts in the driver's error.
const DRIVER_TEXT: &str = "trigger-refused-x7q";

/// Makes every `UPDATE` of `sequences` fail with [`DRIVER_TEXT`].
async fn refuse_updates(db: &TestDb) {
    let statements: Vec<String> = match db.backend {
        Backend::Sqlite => vec![format!(
            "CREATE TRIGGER refuse_updates BEFORE UPDATE ON sequences \
             BEGIN SELECT RAISE(ABORT, '{DRIVER_TEXT}'); END"
        )],
        Backend::Postgres => vec![
            format!(
                "CREATE FUNCTION refuse_updates() RETURNS trigger LANGUAGE plpgsql \
                 AS $$ BEGIN RAISE EXCEPTION '{DRIVER_TEXT}'; END $$"
            ),
            "CREATE TRIGGER refuse_updates BEFORE UPDATE ON sequences \
             FOR EACH ROW EXECUTE FUNCTION refuse_updates()"
                .into(),
        ],
        Backend::Mysql => vec![format!(
            "CREATE TRIGGER refuse_updates BEFORE UPDATE ON sequences FOR EACH ROW \
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{DRIVER_TEXT}'"
        )],
    };
    for sql in statements {
        common::execute(db, &sql).await;
    }
}

async fn last_error_shows_seqds_words_never_the_drivers_text(db: TestDb) {
    let mut settings = Settings::for_database(db.url.clone());
    settings.allocator.max_step = 5;
    settings.allocator.wait_timeout = Duration::from_millis(200);
    let s = TestServer::start(settings).await;
    s.create("refused", 1, 5).await;
    assert_eq!(s.get("/v1/sequences/refused/next").await.status(), 200);
    refuse_updates(&db).await;

    // Use the buffer up until a fetch has failed.
    let mut failed = false;
    for _ in 0..200 {
        s.get("/v1/sequences/refused/next").await;
        let one = s.get_json("/v1/sequences/refused").await;
        if !one["buffer"]["last_error"].is_null() {
            failed = true;
            break;
        }
    }
    assert!(failed, "no fetch failed after 200 requests");

    for path in [
        "/v1/sequences/refused",
        "/v1/sequences",
        "/v1/sequences?limit=5",
    ] {
        let resp = s.get(path).await;
        assert_eq!(resp.status(), 200, "{path}");
        let text = resp.text().await.unwrap();
        for leak in [DRIVER_TEXT, "error returned from database", "trigger"] {
            assert!(
                !text.contains(leak),
                "{path} shows driver text {leak:?}: {text}"
            );
        }
        let body: Value = serde_json::from_str(&text).unwrap();
        let seq = if body["sequences"].is_array() {
            body["sequences"]
                .as_array()
                .unwrap()
                .iter()
                .find(|q| q["name"] == "refused")
                .cloned()
                .expect("refused is listed")
        } else {
            body
        };
        let last = &seq["buffer"]["last_error"];
        assert_eq!(last["kind"], "unavailable", "{path}: {last}");
        assert!(
            last["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{path}: {last}"
        );
    }
    s.stop().await;
}

per_backend!(
    a_flood_of_reads_never_starves_segment_fetches,
    last_error_shows_seqds_words_never_the_drivers_text
);
