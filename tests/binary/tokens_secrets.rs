//! No token in any log line, error answer or metric (docs/api.md, "Client
//! tokens"), through the real binary at debug level; and a flood of random
//! tokens costs no database reads beyond the refresh's own, while good
//! tokens keep being served.

use crate::support::common;
use crate::support::metrics_text;
use crate::support::server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Backend, TestDb};
use reqwest::{Method, StatusCode};
use seqd::config::{Secret, Settings};
use seqd::service::access::{NUDGE_EVERY, REFRESH_EVERY};
use seqd::service::ClientAuth;
use seqd::store::forwarding::{Call, Counting, Forwarding};
use serde_json::json;
use server::{fetch_text, send_as_to, Process, TestServer};

const ADMIN: &str = "admin-token-that-must-not-leak";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_token_in_logs_errors_or_metrics() {
    let db = common::test_db(Backend::Sqlite).await.expect("SQLite");
    let url = db.url.as_str();
    let good = common::cli_token(&db, "--label leaky --prefix pay- --can draw,read").await;
    let p = Process::spawn_with_env(
        url,
        &["--client-auth", "on", "--admin-token", ADMIN],
        &[("RUST_LOG", "debug")],
    )
    .await;
    let http = reqwest::Client::new();
    let at = |path: &str| format!("{}{path}", p.base);
    let body = json!({"name": "pay-order", "start": 1, "step": 10});
    let created = send_as_to(&http, at("/v1/sequences"), ADMIN, Method::POST, Some(&body)).await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let bogus = format!("seqd_{}", "ab".repeat(32));
    let mut answers = String::new();
    let mut statuses = Vec::new();
    let requests: Vec<(String, Option<&str>)> = vec![
        ("/v1/sequences/pay-order/next".into(), Some(good.as_str())),
        (
            "/v1/sequences/pay-order/batch?count=5".into(),
            Some(good.as_str()),
        ),
        ("/v1/sequences/pay-order/next".into(), Some(bogus.as_str())),
        ("/v1/sequences/other/next".into(), Some(good.as_str())),
        (format!("/v1/sequences/pay-order/next?token={good}"), None),
        (
            format!("/v1/sequences/pay-order/batch?count=x&token={bogus}"),
            Some(good.as_str()),
        ),
        ("/v1/sequences".into(), Some(bogus.as_str())),
        ("/v1/tokens".into(), Some(good.as_str())),
    ];
    for (path, token) in &requests {
        let mut req = http.get(format!("{}{path}", p.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.unwrap();
        statuses.push(resp.status().as_u16());
        answers.push_str(&format!("{:?}", resp.headers()));
        answers.push_str(&resp.text().await.unwrap());
    }
    assert_eq!(
        statuses,
        [200, 200, 401, 403, 401, 400, 401, 401],
        "{answers}"
    );
    // A token made and revoked over the admin API.
    let body = json!({"label": "brief", "prefixes": ["pay-"], "rights": ["draw"]});
    let resp = send_as_to(&http, at("/v1/tokens"), ADMIN, Method::POST, Some(&body)).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let brief = resp.json::<serde_json::Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let next = at("/v1/sequences/pay-order/next");
    let used = send_as_to(&http, next.clone(), &brief, Method::GET, None).await;
    assert_eq!(used.status(), StatusCode::OK);
    let revoked = send_as_to(&http, at("/v1/tokens/brief"), ADMIN, Method::DELETE, None).await;
    assert_eq!(revoked.status(), StatusCode::OK);
    let refused = send_as_to(&http, next, &brief, Method::GET, None).await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    answers.push_str(&refused.text().await.unwrap());

    let metrics = fetch_text(http.get(at("/metrics"))).await;
    let samples = metrics_text::parse(&metrics);
    // 1 + 5 by the CLI's token, 1 by the brief one.
    assert_eq!(
        metrics_text::value(&samples, "seqd_ids_drawn_total", &[("token", "leaky")]),
        Some(6.0),
        "{metrics}"
    );
    assert_eq!(
        metrics_text::value(&samples, "seqd_ids_drawn_total", &[("token", "brief")]),
        Some(1.0)
    );
    // The debug log has seen every request: let the last lines arrive.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let logs = p.all_logs().join("\n");
    assert!(logs.lines().count() > 10, "the debug log is there: {logs}");
    for secret in [good.as_str(), bogus.as_str(), brief.as_str(), ADMIN] {
        let hash = seqd::domain::token::TokenHash::of(secret).to_hex();
        for (what, text) in [
            ("a log line", &logs),
            ("an answer", &answers),
            ("/metrics", &metrics),
        ] {
            assert!(!text.contains(secret), "{what} holds a token");
            assert!(!text.contains(&hash), "{what} holds a token's hash");
        }
    }
    p.kill().await;
}

/// 100,000 requests with random tokens on an instance over each database,
/// whose token reads are counted: no more reads than the refresh's own
/// (one per [`REFRESH_EVERY`]) and the early ones unknown tokens may ask
/// for (one per [`NUDGE_EVERY`]) over the time taken, every answer 401, and
/// a good token served all along.
async fn a_flood_of_random_tokens_costs_no_database_reads(db: TestDb) {
    let store = Forwarding::new(common::store(&db).await, Counting::of(Call::Tokens));
    let mut settings = Settings::for_database(db.url.clone());
    settings.snowflake.enabled = false;
    settings.admin_token = Some(Secret::new(ADMIN));
    settings.client_auth = ClientAuth::On;
    let s = Arc::new(TestServer::start_with_store(settings, store.clone()).await);
    let seq = json!({"name": "flood", "step": 1000});
    let made = s
        .send_as(ADMIN, Method::POST, "/v1/sequences", Some(&seq))
        .await;
    assert_eq!(made.status(), StatusCode::CREATED);
    let body = json!({"label": "good", "prefixes": ["flood"], "rights": ["draw"]});
    let made = s
        .send_as(ADMIN, Method::POST, "/v1/tokens", Some(&body))
        .await;
    assert_eq!(made.status(), StatusCode::CREATED);
    let good: Arc<str> = made.json::<serde_json::Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .into();
    let token_reads = || store.hook().count();

    const TASKS: usize = 32;
    const PER_TASK: usize = 100_000 / TASKS + 1;
    let reads_before = token_reads();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let s = s.clone();
        let good = good.clone();
        tasks.push(tokio::spawn(async move {
            let (mut refused, mut served) = (0usize, 0usize);
            for i in 0..PER_TASK {
                let random = format!("seqd_{:016x}{:048x}", rand_u64(t, i), i);
                let resp = s
                    .send_as(&random, Method::GET, "/v1/sequences/flood/next", None)
                    .await;
                assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
                refused += 1;
                if i % 100 == 0 {
                    let ok = s
                        .send_as(&good, Method::GET, "/v1/sequences/flood/next", None)
                        .await;
                    assert_eq!(
                        ok.status(),
                        StatusCode::OK,
                        "a good token refused during the flood"
                    );
                    served += 1;
                }
            }
            (refused, served)
        }));
    }
    let (mut refused, mut served) = (0, 0);
    for t in tasks {
        let (r, s) = t.await.unwrap();
        refused += r;
        served += s;
    }
    let elapsed = started.elapsed();
    let reads = token_reads() - reads_before;
    assert!(refused >= 100_000);
    assert_eq!(served, TASKS * PER_TASK.div_ceil(100));
    let bound = elapsed.as_secs_f64() / REFRESH_EVERY.as_secs_f64()
        + elapsed.as_secs_f64() / NUDGE_EVERY.as_secs_f64()
        + 2.0;
    println!("{refused} random tokens in {elapsed:?}: {reads} token reads (bound {bound:.0})");
    assert!(
        (reads as f64) <= bound,
        "{reads} token reads for {refused} random tokens in {elapsed:?} (at most {bound:.0})"
    );
}

/// A cheap, well-spread number per (task, request) for random tokens.
fn rand_u64(t: usize, i: usize) -> u64 {
    let mut x = (t as u64) << 32 ^ i as u64 ^ 0x9E37_79B9_7F4A_7C15;
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

per_backend!(a_flood_of_random_tokens_costs_no_database_reads);
