//! `GET /metrics`: Prometheus text that the real `promtool check metrics`
//! accepts, per-sequence numbers equal to the API's (IDs issued, fetches,
//! errors, waits, adapted step, IDs in memory), request counts by route
//! template, and no label for a name that is not a live sequence or for a
//! raw path. Per-sequence series follow the `--metrics-top` sequences (the
//! body's size at scale: tests/in_process/metrics_size.rs). The alerting rules
//! and the Grafana dashboard of `deploy/`: their own tests pass under
//! promtool, and every metric they name is one a running server exposes.
//!
//! The metrics registry (HTTP requests, fetch latency) is process-wide, so
//! each test uses sequence names of its own (the backend in the name) and
//! asserts request and fetch counts as lower bounds; the per-sequence
//! families and totals come from each server's own allocator.

use crate::support::common;
use crate::support::metrics_text;
use crate::support::server;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::TestDb;
use metrics_text::*;
use seqd::config::Settings;
use seqd::store::memory::MemoryStore;
use serde_json::Value;
use server::{create_at, fetch_text, next_at, Process, TestServer};

async fn get_ok(srv: &TestServer, path: &str) {
    let resp = srv.get(path).await;
    assert_eq!(resp.status(), 200, "GET {path}");
}

/// Every sequence (up to 1,000) once no fetch is in flight, by name.
async fn quiet_sequences(srv: &TestServer) -> BTreeMap<String, Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let v = srv.get_json("/v1/sequences?limit=1000").await;
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
    srv.create(&order, 1, 100).await;
    srv.create(&payment, 1, 50).await;
    srv.create(&idle, 1, 10).await;

    for _ in 0..7 {
        get_ok(&srv, &format!("/v1/sequences/{order}/batch?count=60")).await;
    }
    for _ in 0..5 {
        get_ok(&srv, &format!("/v1/sequences/{order}/next")).await;
    }
    for _ in 0..30 {
        get_ok(&srv, &format!("/v1/sequences/{payment}/next")).await;
    }
    let missing = srv.get(&format!("/v1/sequences/{ghost}/next")).await;
    assert_eq!(missing.status(), 404);
    let unrouted = srv.get(&format!("/{nowhere}/x")).await;
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
        assert_eq!(m("seqd_sequence_regressions_total"), 0.0);
        let ratio = m("seqd_sequence_space_used_ratio");
        let last = buf["next"]["last"]
            .as_f64()
            .or(buf["current"]["last"].as_f64())
            .unwrap();
        assert_eq!(
            ratio,
            last / i64::MAX as f64,
            "{name}: highest ID reserved / i64::MAX"
        );
    }

    // One latency histogram for every sequence (the registry is shared by the
    // tests of this process: at least this server's fetches).
    let fetches: f64 = expected_issued
        .iter()
        .map(|(name, _)| api[name.as_str()]["buffer"]["fetches"].as_f64().unwrap())
        .sum();
    let latencies = total(&samples, "seqd_segment_fetch_duration_seconds_count");
    assert!(
        latencies >= fetches,
        "{latencies} latency samples for {fetches} fetches"
    );
    assert_eq!(
        value(
            &samples,
            "seqd_segment_fetch_duration_seconds_bucket",
            &[("le", "+Inf")]
        ),
        Some(latencies)
    );
    assert!(total(&samples, "seqd_segment_fetch_duration_seconds_sum") >= 0.0);
    assert!(
        samples
            .iter()
            .filter(|s| s.name.starts_with("seqd_segment_fetch_duration_seconds"))
            .all(|s| !s.labels.contains_key("sequence")),
        "the fetch latency histogram has no sequence label:\n{text}"
    );

    // Totals over this server's live sequences.
    assert_eq!(
        total(&samples, "seqd_all_ids_issued_total"),
        (7 * 60 + 5 + 30) as f64
    );
    assert_eq!(total(&samples, "seqd_all_segment_fetches_total"), fetches);
    assert_eq!(total(&samples, "seqd_all_segment_fetch_errors_total"), 0.0);
    assert_eq!(total(&samples, "seqd_all_sequences_failing"), 0.0);
    assert_eq!(total(&samples, "seqd_all_sequences_regressed"), 0.0);
    assert_shown(&samples, &[&order, &payment], &text);

    // The instance's totals of `GET /v1/info` (the monitor's chart), kept as
    // things happen rather than summed over buffers: the same numbers.
    let totals = srv.get_json("/v1/info").await["totals"].clone();
    assert_eq!(totals["ids_drawn"], 7 * 60 + 5 + 30, "{totals}");
    assert_eq!(totals["live_names"], 2, "{totals}");
    assert_eq!(
        totals["segment_fetches"].as_f64(),
        Some(fetches),
        "{totals}"
    );
    // The tally also keeps the wait of the request for `ghost`, whose name
    // was looked up and not found: no live buffer holds it.
    assert_eq!(
        totals["fetch_waits"].as_f64(),
        Some(total(&samples, "seqd_all_segment_waits_total") + 1.0),
        "{totals}"
    );
    assert_eq!(totals["fetch_errors"], 0, "{totals}");
    assert!(totals["fetch_seconds"].as_f64().unwrap() > 0.0, "{totals}");

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
        ("seqd_sequence_regressions_total", "counter"),
        ("seqd_sequence_space_used_ratio", "gauge"),
        ("seqd_all_ids_issued_total", "counter"),
        ("seqd_all_segment_fetches_total", "counter"),
        ("seqd_all_segment_fetch_errors_total", "counter"),
        ("seqd_all_segment_waits_total", "counter"),
        ("seqd_all_sequence_regressions_total", "counter"),
        ("seqd_all_sequence_ids_available", "gauge"),
        ("seqd_all_sequence_max_space_used_ratio", "gauge"),
        ("seqd_all_sequences_failing", "gauge"),
        ("seqd_all_sequences_regressed", "gauge"),
        ("seqd_metrics_top_sequences", "gauge"),
        ("seqd_names_in_memory", "gauge"),
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

/// `INCR name` `n` times on the RESP listener at `addr`.
async fn incr_over_resp(addr: &str, name: &str, n: usize) {
    let client = redis::Client::open(format!("redis://{addr}")).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    for _ in 0..n {
        let id: i64 = redis::cmd("INCR")
            .arg(name)
            .query_async(&mut con)
            .await
            .unwrap();
        assert!(id > 0);
    }
}

/// Every family the server writes passes `promtool check metrics` with
/// every kind of traffic behind it: plain, global-order and serial
/// sequences drawn over HTTP and RESP on one database (the serial
/// families, `seqd_serial_period_*`, appear only then), and a stripe set
/// of two databases (the `seqd_stripe_*` families) drawn over both doors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_family_passes_promtool_with_serial_global_striped_and_resp_traffic() {
    let Some([one, a, b]) = common::test_dbs([
        common::Backend::Sqlite,
        common::Backend::Sqlite,
        common::Backend::Sqlite,
    ])
    .await
    else {
        return;
    };
    let mut settings = Settings::for_database(one.url.clone());
    settings.resp_listen = Some("127.0.0.1:0".into());
    let srv = TestServer::start(settings).await;
    srv.create("p-plain", 1, 10).await;
    srv.create_global_and_serial("p-global", "p-serial", "P{yyyy}-{seq:06}")
        .await;
    for name in ["p-plain", "p-global", "p-serial"] {
        get_ok(&srv, &format!("/v1/sequences/{name}/batch?count=25")).await;
    }
    incr_over_resp(srv.resp.as_ref().unwrap(), "p-plain", 5).await;
    incr_over_resp(srv.resp.as_ref().unwrap(), "p-global", 5).await;
    let text = scrape(&srv).await;
    for family in [
        "seqd_serial_period_reserved_max",
        "seqd_serial_period_capacity_used_ratio",
        "seqd_global_merged_requests",
    ] {
        assert!(
            text.contains(&format!("\n{family}")),
            "no {family}:\n{text}"
        );
    }
    promtool_check(&text);
    srv.stop().await;

    let striped = Process::spawn(
        &format!("{} {}", a.url, b.url),
        &["--resp-listen", "127.0.0.1:0"],
    )
    .await;
    let http = reqwest::Client::new();
    create_at(&http, &striped.base, "p-striped", 1, 10).await;
    next_at(&http, &striped.base, "p-striped").await;
    incr_over_resp(striped.resp.as_ref().unwrap(), "p-striped", 5).await;
    let text = fetch_text(http.get(format!("{}/metrics", striped.base))).await;
    assert!(
        text.contains("\nseqd_stripe_up{"),
        "no stripe families:\n{text}"
    );
    promtool_check(&text);
}

/// Counters read from snapshots at scrape time keep counting across scrapes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issued_counter_follows_the_allocator_between_scrapes() {
    let db = common::test_db(common::Backend::Sqlite).await.unwrap();
    let srv = TestServer::start(Settings::for_database(db.url.clone())).await;
    let name = "m-rescrape";
    srv.create(name, 1, 10).await;
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

/// Over HTTP, on a server with `metrics_top = 5`: a sequence whose fetches
/// fail and whose memory ran dry is shown ahead of the busiest; once busier
/// sequences come and the failing one recovers, the next scrape shows the
/// new top and nothing of the sequences that left it; the totals equal the
/// sums of what the API reports for every sequence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_sequence_series_follow_the_top_and_leave_nothing_behind() {
    let store = Arc::new(MemoryStore::new());
    for i in 0..200 {
        store.insert(&format!("bg-{i}"), 0, 1000);
    }
    for k in 1..=4 {
        store.insert(&format!("hot-{k}"), 0, 1000);
    }
    store.insert("broken", 0, 1);
    let mut settings = Settings::for_database("memory");
    settings.metrics_top = 5;
    settings.allocator.wait_timeout = Duration::from_millis(200);
    settings.snowflake.enabled = false;
    let srv = TestServer::start_with_store(settings, store.clone()).await;

    for i in 0..200 {
        get_ok(&srv, &format!("/v1/sequences/bg-{i}/next")).await;
    }
    for k in 1..=4 {
        get_ok(
            &srv,
            &format!("/v1/sequences/hot-{k}/batch?count={}", 100 * k),
        )
        .await;
    }
    // "broken" serves one-ID segments; then its fetches fail until requests
    // find it dry.
    get_ok(&srv, "/v1/sequences/broken/next").await;
    store.set_failing("broken", true);
    let mut refused = false;
    for _ in 0..20 {
        let status = srv.get("/v1/sequences/broken/next").await.status();
        assert!(status == 200 || status == 503, "{status}");
        if status == 503 {
            refused = true;
            break;
        }
    }
    assert!(refused, "broken never ran dry");
    let (_, samples) = scrape_top(&srv, &["broken", "hot-4", "hot-3", "hot-2", "hot-1"]).await;
    assert_eq!(total(&samples, "seqd_all_sequences_failing"), 1.0);
    assert!(
        value(
            &samples,
            "seqd_segment_fetch_errors_total",
            &[("sequence", "broken")]
        )
        .unwrap()
            >= 1.0
    );
    assert_eq!(
        value(
            &samples,
            "seqd_sequence_ids_available",
            &[("sequence", "broken")]
        ),
        Some(0.0)
    );

    // The database is back for "broken" (its next retry may be up to 2 s
    // away); two quiet sequences become the busiest.
    store.set_failing("broken", false);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while srv.get("/v1/sequences/broken/next").await.status() != 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "broken never recovered"
        );
    }
    get_ok(&srv, "/v1/sequences/bg-7/batch?count=1000").await;
    get_ok(&srv, "/v1/sequences/bg-8/batch?count=900").await;
    let api = quiet_sequences(&srv).await;
    let (text, samples) = scrape_top(&srv, &["bg-7", "bg-8", "hot-4", "hot-3", "hot-2"]).await;
    for gone in ["broken", "hot-1"] {
        assert!(
            !text.contains(&format!("\"{gone}\"")),
            "{gone} left the top but a series stayed:\n{text}"
        );
    }
    let buffers: Vec<&Value> = api
        .values()
        .map(|s| &s["buffer"])
        .filter(|b| !b.is_null())
        .collect();
    assert_eq!(buffers.len(), 205, "every sequence is live");
    let sum = |field: &str| {
        buffers
            .iter()
            .map(|b| b[field].as_f64().unwrap())
            .sum::<f64>()
    };
    let remaining = |seg: &Value| seg.get("remaining").and_then(Value::as_f64).unwrap_or(0.0);
    assert_eq!(total(&samples, "seqd_all_ids_issued_total"), sum("issued"));
    assert_eq!(
        sum("issued"),
        (200 + 1000 + 1900 + api["broken"]["buffer"]["issued"].as_u64().unwrap()) as f64
    );
    assert_eq!(
        total(&samples, "seqd_all_segment_fetches_total"),
        sum("fetches")
    );
    assert_eq!(
        total(&samples, "seqd_all_segment_fetch_errors_total"),
        sum("fetch_errors")
    );
    assert!(sum("fetch_errors") >= 1.0);
    assert_eq!(
        total(&samples, "seqd_all_segment_waits_total"),
        sum("waits")
    );
    assert_eq!(
        total(&samples, "seqd_all_sequence_ids_available"),
        buffers
            .iter()
            .map(|b| remaining(&b["current"]) + remaining(&b["next"]))
            .sum::<f64>()
    );
    assert_eq!(total(&samples, "seqd_all_sequences_failing"), 0.0);
    assert_eq!(total(&samples, "seqd_all_sequence_regressions_total"), 0.0);
    srv.stop().await;
}

/// `--metrics-top` and `SEQD_METRICS_TOP` reach `/metrics` of a real `seqd
/// serve` process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flag_and_its_variable_set_how_many_sequences_are_shown() {
    let db = common::test_db(common::Backend::Sqlite).await.unwrap();
    let by_flag = Process::spawn(&db.url, &["--metrics-top", "1"]).await;
    let by_env = Process::spawn_with_env(&db.url, &[], &[("SEQD_METRICS_TOP", "0")]).await;
    let http = reqwest::Client::new();
    for (name, ids) in [("flag-a", 2), ("flag-b", 1)] {
        create_at(&http, &by_flag.base, name, 1, 10).await;
        for p in [&by_flag, &by_env] {
            for _ in 0..ids {
                next_at(&http, &p.base, name).await;
            }
        }
    }
    for (p, expected) in [(&by_flag, &["flag-a"][..]), (&by_env, &[][..])] {
        let text = fetch_text(http.get(format!("{}/metrics", p.base))).await;
        let samples = parse(&text);
        assert_shown(&samples, expected, &text);
        assert_eq!(total(&samples, "seqd_all_ids_issued_total"), 3.0);
    }
    by_flag.kill().await;
    by_env.kill().await;
}

/// The tokens of `text` that are metric names of seqd: identifiers starting
/// with `seqd_` (alert names are `Seqd...`, the job label value is `"seqd"`).
fn seqd_names(text: &str, into: &mut BTreeSet<String>) {
    let mut word = String::new();
    for c in text.chars().chain([' ']) {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            if word.starts_with("seqd_") {
                into.insert(std::mem::take(&mut word));
            }
            word.clear();
        }
    }
}

/// Every query of a Grafana dashboard: the `expr` of each target and the
/// `query` (string, or object with one) of each template variable, at any
/// depth.
fn queries<'a>(v: &'a Value, into: &mut Vec<&'a str>) {
    match v {
        Value::Array(a) => a.iter().for_each(|x| queries(x, into)),
        Value::Object(o) => {
            for (key, x) in o {
                match (key.as_str(), x) {
                    ("expr" | "query", Value::String(s)) => into.push(s),
                    _ => queries(x, into),
                }
            }
        }
        _ => {}
    }
}

/// The metric names a running server exposes after some traffic: every
/// family of its `/metrics`, with the `_bucket`, `_sum` and `_count` series
/// of its histograms.
async fn exposed_names() -> BTreeSet<String> {
    let db = common::test_db(common::Backend::Sqlite).await.unwrap();
    let srv = TestServer::start(Settings::for_database(db.url.clone())).await;
    srv.create("dash-order", 1, 10).await;
    for _ in 0..30 {
        get_ok(&srv, "/v1/sequences/dash-order/next").await;
    }
    let text = scrape(&srv).await;
    srv.stop().await;
    let mut names = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            if kind == "histogram" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            } else {
                names.insert(name.to_string());
            }
        }
    }
    for s in parse(&text) {
        names.insert(s.name);
    }
    names
}

fn deploy_file(path: &str) -> String {
    let full = format!("{}/deploy/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// The alerting rules pass `promtool check rules` and their unit tests;
/// every alert has a test case where it fires and one where it does not.
#[test]
fn alert_rules_pass_promtool_and_every_alert_is_tested_both_ways() {
    let rules = deploy_file("prometheus/seqd-alerts.yml");
    let tests = deploy_file("prometheus/seqd-alerts.test.yml");
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(alerts.len() >= 5, "{alerts:?}");
    let lines: Vec<&str> = tests.lines().map(str::trim).collect();
    for alert in &alerts {
        let cases: Vec<&str> = lines
            .windows(2)
            .filter(|w| w[0] == format!("alertname: {alert}"))
            .map(|w| w[1])
            .collect();
        assert!(
            cases.contains(&"exp_alerts: []"),
            "{alert}: no case where it does not fire"
        );
        assert!(
            cases.contains(&"exp_alerts:"),
            "{alert}: no case where it fires"
        );
    }
    promtool_ok(&["check", "rules", "deploy/prometheus/seqd-alerts.yml"]);
    promtool_ok(&["test", "rules", "deploy/prometheus/seqd-alerts.test.yml"]);
}

/// The Grafana dashboard is a dashboard (panels with PromQL targets), and
/// every seqd metric it or the alerting rules name is one a running server
/// exposes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_and_rules_name_only_metrics_the_server_exposes() {
    let dashboard: Value = serde_json::from_str(&deploy_file("grafana/seqd-dashboard.json"))
        .expect("the dashboard is JSON");
    assert!(dashboard["title"].is_string() && dashboard["uid"].is_string());
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut queried = 0;
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        let title = panel["title"].as_str().expect("a panel title");
        let targets = panel["targets"]
            .as_array()
            .unwrap_or_else(|| panic!("{title}: no targets"));
        assert!(!targets.is_empty(), "{title}: no targets");
        for t in targets {
            let expr = t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("{title}: a target without expr"));
            assert!(expr.contains("seqd_"), "{title}: {expr}");
            queried += 1;
        }
    }
    assert!(queried >= 10, "{queried} queries");

    let mut in_dashboard = BTreeSet::new();
    let mut texts = Vec::new();
    queries(&dashboard, &mut texts);
    texts.iter().for_each(|t| seqd_names(t, &mut in_dashboard));
    let mut in_rules = BTreeSet::new();
    seqd_names(&deploy_file("prometheus/seqd-alerts.yml"), &mut in_rules);
    for (names, what) in [
        (&in_dashboard, "the dashboard"),
        (&in_rules, "the alert rules"),
    ] {
        assert!(names.len() >= 5, "{what} name {names:?}");
    }
    for wanted in [
        "seqd_ids_issued_total",
        "seqd_segment_fetch_duration_seconds_bucket",
        "seqd_all_segment_fetch_errors_total",
        "seqd_all_segment_waits_total",
        "seqd_names_in_memory",
        "seqd_http_requests_total",
        "seqd_http_request_duration_seconds_bucket",
    ] {
        assert!(
            in_dashboard.contains(wanted),
            "the dashboard does not show {wanted}"
        );
    }

    let exposed = exposed_names().await;
    for (names, what) in [
        (&in_dashboard, "the dashboard"),
        (&in_rules, "the alert rules"),
    ] {
        let unknown: Vec<_> = names.difference(&exposed).collect();
        assert!(
            unknown.is_empty(),
            "{what} name metrics the server does not expose: {unknown:?}\nexposed: {exposed:?}"
        );
    }
}
