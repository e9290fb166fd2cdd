//! `GET /metrics`: Prometheus text that the real `promtool check metrics`
//! accepts, per-sequence numbers equal to the API's (IDs issued, fetches,
//! errors, waits, adapted step, IDs in memory), request counts by route
//! template, and no label for a name that is not a live sequence or for a
//! raw path. Per-sequence series only for the `--metrics-top` sequences
//! (those in trouble first, then the busiest), exact totals over all, and a
//! body under 1 MB at 100,000 and 1,000,000 sequences. The alerting rules
//! and the Grafana dashboard of `deploy/`: their own tests pass under
//! promtool, and every metric they name is one a running server exposes.
//!
//! The metrics registry (HTTP requests, fetch latency) is process-wide, so
//! each test uses sequence names of its own (the backend in the name) and
//! asserts request and fetch counts as lower bounds; the per-sequence
//! families and totals come from each server's own allocator.

#[macro_use]
mod common;
mod server;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::TestDb;
use seqd::allocator::SeqStats;
use seqd::config::Settings;
use seqd::domain::SeqName;
use seqd::http::metrics::{render, render_from, DEFAULT_TOP};
use seqd::store::memory::MemoryStore;
use serde_json::{json, Value};
use server::{Process, TestServer};

/// The bound on the size of a `/metrics` body, whatever the number of sequences.
const MAX_BODY: usize = 1 << 20;
/// The per-sequence families, each with a `sequence` label.
const PER_SEQUENCE: [&str; 8] = [
    "seqd_ids_issued_total",
    "seqd_segment_fetches_total",
    "seqd_segment_fetch_errors_total",
    "seqd_segment_waits_total",
    "seqd_sequence_step",
    "seqd_sequence_ids_available",
    "seqd_sequence_regressions_total",
    "seqd_sequence_space_used_ratio",
];

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

/// Runs `promtool ARGS` in the repository root, with `stdin` as its input.
/// `None` (after a line saying it is skipped) when promtool is not
/// installed; a failure instead under `SEQD_TEST_REQUIRE_ALL=1` (the Debian
/// package `prometheus` has it).
fn promtool(args: &[&str], stdin: &str) -> Option<Output> {
    if !common::tool_available("promtool") {
        return None;
    }
    let mut child = Command::new("promtool")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    Some(child.wait_with_output().unwrap())
}

/// Runs `promtool check metrics` on `text` and asserts it passes without a
/// word (lint warnings included).
fn promtool_check(text: &str) {
    let Some(out) = promtool(&["check", "metrics"], text) else {
        return;
    };
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics failed ({}):\n{}{}\n--- exposition ---\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs promtool on a file of `deploy/` and asserts it succeeds.
fn promtool_ok(args: &[&str]) {
    let Some(out) = promtool(args, "") else {
        return;
    };
    assert!(
        out.status.success(),
        "promtool {args:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The sequences that have a series of `family`, in output order.
fn shown(samples: &[Sample], family: &str) -> Vec<String> {
    samples
        .iter()
        .filter(|s| s.name == family)
        .map(|s| s.labels["sequence"].clone())
        .collect()
}

/// Asserts that every per-sequence family has a series for exactly the
/// sequences of `expected` (in any order), and returns them in output order.
#[track_caller]
fn assert_shown<S: AsRef<str>>(samples: &[Sample], expected: &[S], text: &str) -> Vec<String> {
    let want: BTreeSet<&str> = expected.iter().map(AsRef::as_ref).collect();
    let first = shown(samples, PER_SEQUENCE[0]);
    for family in PER_SEQUENCE {
        let got = shown(samples, family);
        assert_eq!(
            got, first,
            "{family} shows other sequences than {}",
            PER_SEQUENCE[0]
        );
        let got: BTreeSet<&str> = got.iter().map(String::as_str).collect();
        assert_eq!(got, want, "{family}:\n{text}");
    }
    assert_eq!(
        value(samples, "seqd_metrics_top_sequences", &[]),
        Some(expected.len() as f64)
    );
    first
}

/// Like [`assert_shown`], and the series come in the order of `expected`:
/// trouble first, then the most IDs issued.
#[track_caller]
fn assert_top<S: AsRef<str>>(samples: &[Sample], expected: &[S], text: &str) {
    let order = assert_shown(samples, expected, text);
    let expected: Vec<&str> = expected.iter().map(AsRef::as_ref).collect();
    assert_eq!(order, expected, "not in rank order:\n{text}");
}

/// Scrapes `srv`, asserts [`assert_top`] with `expected` and that promtool
/// accepts the body; the body and its samples.
async fn scrape_top(srv: &TestServer, expected: &[&str]) -> (String, Vec<Sample>) {
    let text = scrape(srv).await;
    let samples = parse(&text);
    assert_top(&samples, expected, &text);
    promtool_check(&text);
    (text, samples)
}

/// The unlabelled sample `name` (panics if missing).
#[track_caller]
fn total(samples: &[Sample], name: &str) -> f64 {
    value(samples, name, &[]).unwrap_or_else(|| panic!("no {name}"))
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

/// `n` sequences as a scrape would read them, in no particular order: the
/// one with index `i` has issued `(i * 7919) % n` IDs (each count once),
/// and names padded to `name_len` characters. Indexes 10, 20 and 30 are in
/// trouble with few IDs issued: a regression, no ID left after failed
/// fetches, the ID space nearly used.
fn synthetic(n: usize, name_len: usize) -> Vec<(SeqName, SeqStats)> {
    (0..n)
        .map(|i| {
            let mut name = format!("seq-{i:07}-");
            while name.len() < name_len {
                name.push('x');
            }
            let issued = (i as u64 * 7919) % n as u64;
            let mut stats = SeqStats {
                issued,
                fetches: 1 + issued / 1000,
                fetch_errors: 0,
                waits: 1,
                regressions: 0,
                step: 1000,
                ids_available: 1000 - issued % 1000,
                high_water: Some((issued + 1000 - issued % 1000) as i64),
            };
            match i {
                10 => stats.regressions = 1,
                20 => (stats.fetch_errors, stats.ids_available) = (7, 0),
                30 => stats.high_water = Some(i64::MAX / 100 * 95),
                _ => {}
            }
            (common::name(&name), stats)
        })
        .collect()
}

/// The `top` sequences of [`synthetic`] that must be shown: the three in
/// trouble, then the most IDs issued.
fn expected_top(all: &[(SeqName, SeqStats)], top: usize) -> Vec<String> {
    let mut ranked: Vec<_> = all.iter().collect();
    let trouble = |i: usize| matches!(i, 10 | 20 | 30);
    let mut troubled: Vec<_> = [10, 20, 30].iter().map(|&i| &all[i]).collect();
    troubled.sort_by_key(|(_, s)| std::cmp::Reverse(s.issued));
    ranked.retain(|(n, _)| {
        let i: usize = n.as_str()[4..11].parse().unwrap();
        !trouble(i)
    });
    ranked.sort_by_key(|(_, s)| std::cmp::Reverse(s.issued));
    troubled
        .into_iter()
        .chain(ranked)
        .take(top)
        .map(|(n, _)| n.to_string())
        .collect()
}

fn render_synthetic(all: &[(SeqName, SeqStats)], top: usize) -> String {
    render_from(top, |f| all.iter().for_each(|(n, s)| f(n, s)))
}

/// The body for `all` with the default top, asserted under [`MAX_BODY`]
/// (its size printed), and its samples.
#[track_caller]
fn body_under_a_megabyte(all: &[(SeqName, SeqStats)], what: &str) -> (String, Vec<Sample>) {
    let text = render_synthetic(all, DEFAULT_TOP);
    eprintln!(
        "/metrics at {what}, top {DEFAULT_TOP}: {} bytes",
        text.len()
    );
    assert!(text.len() < MAX_BODY, "{what}: {} bytes", text.len());
    let samples = parse(&text);
    (text, samples)
}

/// At 100,000 live sequences with the longest names allowed, `/metrics`
/// stays under 1 MB, passes promtool, shows exactly the top sequences
/// (trouble first, then the most IDs issued, in that order) and totals equal
/// to the sums over all of them.
#[test]
fn a_hundred_thousand_sequences_fit_in_a_megabyte_with_exact_totals() {
    let all = synthetic(100_000, 128);
    let (text, samples) =
        body_under_a_megabyte(&all, "100,000 sequences (names of 128 characters)");
    let expected = expected_top(&all, DEFAULT_TOP);
    assert_top(&samples, &expected, "");
    let chosen: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
    for (name, stats) in all.iter().filter(|(n, _)| chosen.contains(n.as_str())) {
        let seq = [("sequence", name.as_str())];
        let m = |family: &str| value(&samples, family, &seq).unwrap();
        assert_eq!(m("seqd_ids_issued_total"), stats.issued as f64);
        assert_eq!(m("seqd_segment_fetches_total"), stats.fetches as f64);
        assert_eq!(
            m("seqd_segment_fetch_errors_total"),
            stats.fetch_errors as f64
        );
        assert_eq!(m("seqd_segment_waits_total"), stats.waits as f64);
        assert_eq!(m("seqd_sequence_step"), stats.step as f64);
        assert_eq!(m("seqd_sequence_ids_available"), stats.ids_available as f64);
        assert_eq!(
            m("seqd_sequence_regressions_total"),
            stats.regressions as f64
        );
        assert_eq!(
            m("seqd_sequence_space_used_ratio"),
            stats.high_water.unwrap() as f64 / i64::MAX as f64
        );
    }
    let sum = |f: fn(&SeqStats) -> u64| all.iter().map(|(_, s)| f(s)).sum::<u64>() as f64;
    assert_eq!(
        total(&samples, "seqd_all_ids_issued_total"),
        sum(|s| s.issued)
    );
    assert_eq!(
        total(&samples, "seqd_all_segment_fetches_total"),
        sum(|s| s.fetches)
    );
    assert_eq!(total(&samples, "seqd_all_segment_fetch_errors_total"), 7.0);
    assert_eq!(total(&samples, "seqd_all_segment_waits_total"), 100_000.0);
    assert_eq!(total(&samples, "seqd_all_sequence_regressions_total"), 1.0);
    assert_eq!(
        total(&samples, "seqd_all_sequence_ids_available"),
        sum(|s| s.ids_available)
    );
    assert_eq!(
        total(&samples, "seqd_all_sequence_max_space_used_ratio"),
        (i64::MAX / 100 * 95) as f64 / i64::MAX as f64
    );
    assert_eq!(total(&samples, "seqd_all_sequences_failing"), 1.0);
    assert_eq!(total(&samples, "seqd_all_sequences_regressed"), 1.0);
    promtool_check(&text);

    // Another top: the same rule, as many as asked.
    let text = render_synthetic(&all, 7);
    assert_top(&parse(&text), &expected_top(&all, 7), &text);
}

/// 100,000 sequences made live through the allocator itself (one first use
/// each, on the in-memory store), then a real scrape: every one is live, the
/// body is under 1 MB and passes promtool, exactly the top get series, and
/// the totals count every sequence's ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_live_sequences_scrape_under_a_megabyte() {
    use futures::StreamExt;
    use seqd::allocator::{Allocator, AllocatorConfig};
    const N: usize = 100_000;
    let store = Arc::new(MemoryStore::new());
    let names: Vec<SeqName> = (0..N)
        .map(|i| common::name(&format!("tenant-{i:06}")))
        .collect();
    for n in &names {
        store.insert(n.as_str(), 0, 10);
    }
    let alloc = Allocator::new(store, AllocatorConfig::default());
    let ids: Vec<i64> = futures::stream::iter(&names)
        .map(|n| {
            let alloc = alloc.clone();
            async move { alloc.next(n).await.unwrap() }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    assert!(ids.iter().all(|&id| id == 1), "each name's first ID is 1");
    assert_eq!(alloc.names_in_memory().live, N);
    let text = {
        let alloc = alloc.clone();
        let serials =
            seqd::serial::Serials::new(alloc.clone(), Arc::new(seqd::serial::SystemWallClock));
        tokio::task::spawn_blocking(move || render(&alloc, &serials, DEFAULT_TOP))
            .await
            .unwrap()
    };
    eprintln!("/metrics at {N} live sequences: {} bytes", text.len());
    assert!(text.len() < MAX_BODY, "{} bytes", text.len());
    let samples = parse(&text);
    assert_eq!(shown(&samples, "seqd_ids_issued_total").len(), DEFAULT_TOP);
    assert_eq!(total(&samples, "seqd_all_ids_issued_total"), N as f64);
    promtool_check(&text);
}

/// At a million live sequences the body is still under 1 MB.
#[test]
fn a_million_sequences_fit_in_a_megabyte() {
    let all = synthetic(1_000_000, 24);
    let (_, samples) = body_under_a_megabyte(&all, "1,000,000 sequences");
    assert_eq!(shown(&samples, "seqd_ids_issued_total").len(), DEFAULT_TOP);
    let issued: u64 = all.iter().map(|(_, s)| s.issued).sum();
    assert_eq!(total(&samples, "seqd_all_ids_issued_total"), issued as f64);
}

/// `--metrics-top 0`: no per-sequence series at all, the totals still.
#[test]
fn top_zero_shows_no_sequence_and_every_total() {
    let all = synthetic(1_000, 16);
    let text = render_synthetic(&all, 0);
    assert!(!text.contains("sequence=\""), "{text}");
    let samples = parse(&text);
    assert_shown::<&str>(&samples, &[], &text);
    let issued: u64 = all.iter().map(|(_, s)| s.issued).sum();
    assert_eq!(total(&samples, "seqd_all_ids_issued_total"), issued as f64);
    assert_eq!(total(&samples, "seqd_all_sequences_failing"), 1.0);
    promtool_check(&text);
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
        let resp = http
            .post(format!("{}/v1/sequences", by_flag.base))
            .json(&json!({ "name": name, "step": 10 }))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201, "create {name}");
        for p in [&by_flag, &by_env] {
            for _ in 0..ids {
                let resp = http
                    .get(format!("{}/v1/sequences/{name}/next", p.base))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status(), 200);
            }
        }
    }
    for (p, expected) in [(&by_flag, &["flag-a"][..]), (&by_env, &[][..])] {
        let text = http
            .get(format!("{}/metrics", p.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
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
    create(&srv, "dash-order", 10).await;
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
