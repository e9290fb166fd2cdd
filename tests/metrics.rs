//! `GET /metrics`: Prometheus text that the real `promtool check metrics`
//! accepts, per-sequence numbers equal to the API's (IDs issued, fetches,
//! errors, waits, adapted step, IDs in memory, fetch latency count), request
//! counts by route template, and no label for a name that is not a live
//! sequence or for a raw path.
//!
//! The metrics registry is process-wide, so each test uses sequence names of
//! its own (the backend in the name) and asserts request counts as lower bounds.

#[macro_use]
mod common;
mod server;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::TestDb;
use seqd::config::Settings;
use serde_json::{json, Value};
use server::TestServer;

/// One sample line: `name{labels} value`.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the sample lines of the text format (label values here never hold
/// `"` or `,`: names are validated and routes are templates).
fn parse(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad sample line {line:?}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|e| panic!("bad value in {line:?}: {e}"));
        let (name, labels) = match series.split_once('{') {
            None => (series.to_string(), BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .unwrap_or_else(|| panic!("bad labels in {line:?}"));
                let labels = body
                    .split("\",")
                    .filter(|p| !p.is_empty())
                    .map(|pair| {
                        let (k, v) = pair
                            .split_once("=\"")
                            .unwrap_or_else(|| panic!("bad label in {line:?}"));
                        (k.to_string(), v.trim_end_matches('"').to_string())
                    })
                    .collect();
                (name.to_string(), labels)
            }
        };
        out.push(Sample {
            name,
            labels,
            value,
        });
    }
    out
}

/// The value of the one sample named `name` whose labels include `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let found: Vec<_> = samples
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert!(
        found.len() <= 1,
        "{name} {labels:?} matches several samples: {found:?}"
    );
    found.first().map(|s| s.value)
}

async fn scrape(srv: &TestServer) -> String {
    let resp = srv.http.get(srv.url("/metrics")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(
        ct.starts_with("text/plain; version=0.0.4"),
        "content-type {ct}"
    );
    resp.text().await.unwrap()
}

/// Runs `promtool check metrics` on `text` and asserts it passes. Skips (or,
/// under `SEQD_TEST_REQUIRE_ALL=1`, fails) when promtool is not installed.
fn promtool_check(text: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("promtool"))
                .find(|p| p.is_file())
        })
        .unwrap_or_default();
    let Some(promtool) = found else {
        if common::require_all() {
            panic!("promtool not found and SEQD_TEST_REQUIRE_ALL=1 (apt-get install prometheus)");
        }
        eprintln!("skipped: promtool not found; install the Debian package `prometheus` to check the exposition");
        return;
    };
    let mut child = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics failed ({}):\n{}{}\n--- exposition ---\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn create(srv: &TestServer, name: &str, step: i64) {
    let resp = srv
        .http
        .post(srv.url("/v1/sequences"))
        .json(&json!({ "name": name, "step": step }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201, "create {name}");
}

async fn get_ok(srv: &TestServer, path: &str) {
    let resp = srv.http.get(srv.url(path)).send().await.unwrap();
    assert_eq!(resp.status(), 200, "GET {path}");
}

/// Every sequence once no fetch is in flight, by name.
async fn quiet_sequences(srv: &TestServer) -> BTreeMap<String, Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let v = srv.get_json("/v1/sequences").await;
        let seqs = v["sequences"].as_array().unwrap();
        if seqs
            .iter()
            .all(|s| s["buffer"].is_null() || s["buffer"]["loading"] == false)
        {
            return seqs
                .iter()
                .map(|s| (s["name"].as_str().unwrap().to_string(), s.clone()))
                .collect();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "fetches still in flight: {v}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn metrics_match_the_api_and_pass_promtool(db: TestDb) {
    let srv = TestServer::start(Settings::for_database(db.url.clone())).await;
    let tag = db.backend.store_name();
    let (order, payment, idle) = (
        format!("m-{tag}-order"),
        format!("m-{tag}-payment"),
        format!("m-{tag}-idle"),
    );
    let (ghost, nowhere) = (format!("m-{tag}-ghost"), format!("m-{tag}-nowhere"));
    create(&srv, &order, 100).await;
    create(&srv, &payment, 50).await;
    create(&srv, &idle, 10).await;

    for _ in 0..7 {
        get_ok(&srv, &format!("/v1/sequences/{order}/batch?count=60")).await;
    }
    for _ in 0..5 {
        get_ok(&srv, &format!("/v1/sequences/{order}/next")).await;
    }
    for _ in 0..30 {
        get_ok(&srv, &format!("/v1/sequences/{payment}/next")).await;
    }
    let missing = srv
        .http
        .get(srv.url(&format!("/v1/sequences/{ghost}/next")))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let unrouted = srv
        .http
        .get(srv.url(&format!("/{nowhere}/x")))
        .send()
        .await
        .unwrap();
    assert_eq!(unrouted.status(), 404);

    let api = quiet_sequences(&srv).await;
    let text = scrape(&srv).await;
    let samples = parse(&text);

    let expected_issued = [(&order, 7 * 60 + 5), (&payment, 30)];
    for (name, issued) in expected_issued {
        let buf = &api[name.as_str()]["buffer"];
        let seq = [("sequence", name.as_str())];
        let m = |metric: &str| {
            value(&samples, metric, &seq)
                .unwrap_or_else(|| panic!("{metric} {name} missing:\n{text}"))
        };
        assert_eq!(m("seqd_ids_issued_total"), issued as f64, "{name}");
        assert_eq!(buf["issued"], issued, "{name}");
        let fetches = buf["fetches"].as_f64().unwrap();
        assert!(fetches >= 1.0);
        assert_eq!(m("seqd_segment_fetches_total"), fetches, "{name}");
        assert_eq!(
            m("seqd_segment_fetch_duration_seconds_count"),
            fetches,
            "{name}: one latency sample per fetch"
        );
        assert!(m("seqd_segment_fetch_duration_seconds_sum") >= 0.0);
        assert_eq!(
            value(
                &samples,
                "seqd_segment_fetch_duration_seconds_bucket",
                &[("sequence", name.as_str()), ("le", "+Inf")]
            ),
            Some(fetches)
        );
        assert_eq!(
            m("seqd_segment_fetch_errors_total"),
            buf["fetch_errors"].as_f64().unwrap()
        );
        assert_eq!(m("seqd_segment_fetch_errors_total"), 0.0);
        assert_eq!(
            m("seqd_segment_waits_total"),
            buf["waits"].as_f64().unwrap()
        );
        assert!(
            m("seqd_segment_waits_total") >= 1.0,
            "{name}: the first request waits for the first segment"
        );
        assert_eq!(
            m("seqd_sequence_step"),
            buf["current_step"].as_f64().unwrap()
        );
        let remaining = |seg: &Value| seg.get("remaining").and_then(Value::as_f64).unwrap_or(0.0);
        assert_eq!(
            m("seqd_sequence_ids_available"),
            remaining(&buf["current"]) + remaining(&buf["next"])
        );
        assert!(m("seqd_sequence_ids_available") > 0.0);
    }

    // Labels only for live sequences and route templates.
    for never in [&idle, &ghost, &nowhere] {
        assert!(
            !text.contains(never.as_str()),
            "{never} leaked into a label:\n{text}"
        );
    }
    let requests = |route: &str, method: &str, status: &str| {
        value(
            &samples,
            "seqd_http_requests_total",
            &[("route", route), ("method", method), ("status", status)],
        )
        .unwrap_or(0.0)
    };
    assert!(requests("/v1/sequences/{name}/batch", "GET", "200") >= 7.0);
    assert!(requests("/v1/sequences/{name}/next", "GET", "200") >= 35.0);
    assert!(requests("/v1/sequences/{name}/next", "GET", "404") >= 1.0);
    assert!(requests("/v1/sequences", "POST", "201") >= 3.0);
    assert!(requests("unmatched", "GET", "404") >= 1.0);
    let batch_latency = value(
        &samples,
        "seqd_http_request_duration_seconds_count",
        &[
            ("route", "/v1/sequences/{name}/batch"),
            ("method", "GET"),
            ("status", "200"),
        ],
    );
    assert!(batch_latency.unwrap_or(0.0) >= 7.0);

    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        value(&samples, "seqd_build_info", &[("version", version)]),
        Some(1.0)
    );
    let started =
        value(&samples, "process_start_time_seconds", &[]).expect("process_start_time_seconds");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        started <= now && started > now - 3600.0,
        "start time {started}, now {now}"
    );

    for (metric, kind) in [
        ("seqd_ids_issued_total", "counter"),
        ("seqd_segment_fetches_total", "counter"),
        ("seqd_segment_fetch_errors_total", "counter"),
        ("seqd_segment_waits_total", "counter"),
        ("seqd_segment_fetch_duration_seconds", "histogram"),
        ("seqd_sequence_step", "gauge"),
        ("seqd_sequence_ids_available", "gauge"),
        ("seqd_http_requests_total", "counter"),
        ("seqd_http_request_duration_seconds", "histogram"),
        ("process_start_time_seconds", "gauge"),
        ("seqd_build_info", "gauge"),
    ] {
        assert!(
            text.contains(&format!("# TYPE {metric} {kind}\n")),
            "no {kind} {metric}:\n{text}"
        );
        assert!(
            text.contains(&format!("# HELP {metric} ")),
            "no HELP for {metric}"
        );
    }

    promtool_check(&text);
    srv.stop().await;
}

per_backend!(metrics_match_the_api_and_pass_promtool);

/// Counters read from snapshots at scrape time keep counting across scrapes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issued_counter_follows_the_allocator_between_scrapes() {
    let db = common::test_db(common::Backend::Sqlite).await.unwrap();
    let srv = TestServer::start(Settings::for_database(db.url.clone())).await;
    let name = "m-rescrape";
    create(&srv, name, 10).await;
    let issued = |text: &str| value(&parse(text), "seqd_ids_issued_total", &[("sequence", name)]);
    assert_eq!(
        issued(&scrape(&srv).await),
        None,
        "not live before its first request"
    );
    get_ok(&srv, &format!("/v1/sequences/{name}/batch?count=25")).await;
    assert_eq!(issued(&scrape(&srv).await), Some(25.0));
    get_ok(&srv, &format!("/api/segment/get/{name}")).await;
    get_ok(&srv, &format!("/v1/sequences/{name}/next")).await;
    let text = scrape(&srv).await;
    assert_eq!(issued(&text), Some(27.0));
    promtool_check(&text);
    srv.stop().await;
}
