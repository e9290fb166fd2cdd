//! Faults: the database going away mid-load, a slow database, kill -9 of a
//! seqd process, many processes under connection chaos, and SIGTERM under
//! load. Zero duplicates everywhere; gaps are expected.
//!
//! The chaos run issues `SEQD_CHAOS_IDS` IDs (200,000 by default, to bound the
//! CI run); the full run is
//! `SEQD_CHAOS_IDS=1000000 cargo test --release --test binary faults::many_instances_under_connection_chaos -- --nocapture`.

use crate::support::common;
use crate::support::proxy;
use crate::support::server;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::TestDb;
use proxy::{upstream_of, Proxy};
use seqd::allocator::AllocatorConfig;
use seqd::config::Settings;
use seqd::domain::{NewSequence, SeqName};
use server::{Process, TestServer};

fn name(s: &str) -> SeqName {
    SeqName::parse(s).unwrap()
}

async fn create(db: &TestDb, seq: &str, step: i64) {
    let store = common::store(db).await;
    store
        .create(&NewSequence::new(name(seq), 1, step, String::new(), step).unwrap())
        .await
        .unwrap();
}

/// What one request produced.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Ids(Vec<i64>),
    Unavailable,
}

/// GET `url`, expecting 200 with IDs or 503 `storage_unavailable` with
/// `Retry-After`; anything else fails the test.
async fn fetch_ids(http: &reqwest::Client, url: &str) -> Outcome {
    let resp = http
        .get(url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = resp.status();
    let retry_after = resp.headers().contains_key("retry-after");
    let body: serde_json::Value = resp
        .json()
        .await
        .unwrap_or_else(|e| panic!("{url}: truncated body: {e}"));
    match status.as_u16() {
        200 => {
            if let Some(id) = body["id"].as_i64() {
                Outcome::Ids(vec![id])
            } else {
                Outcome::Ids(common::integers(&body, "ids"))
            }
        }
        503 => {
            assert!(retry_after, "503 without Retry-After");
            assert_eq!(body["error"]["code"], "storage_unavailable", "{body}");
            Outcome::Unavailable
        }
        other => panic!("{url}: unexpected status {other}: {body}"),
    }
}

fn fast_failing() -> AllocatorConfig {
    AllocatorConfig {
        max_step: 50,
        wait_timeout: Duration::from_millis(500),
        fetch_timeout: Duration::from_secs(1),
        ..AllocatorConfig::default()
    }
}

/// The binary on `db` through a fault proxy, with a health listener, no
/// snowflake IDs and `extra` flags: the proxy, the process and its probe URL
/// (`/readyz` on the health listener).
async fn with_health_listener(db: &TestDb, extra: &[&str]) -> (Proxy, Process, String) {
    let proxy = Proxy::start(upstream_of(&db.url)).await;
    let mut flags = vec!["--health-listen", "127.0.0.1:0", "--snowflake", "false"];
    flags.extend_from_slice(extra);
    let p = Process::spawn(&proxy.url_for(&db.url), &flags).await;
    let probe = format!("{}/readyz", p.health.as_deref().expect("a health listener"));
    (proxy, p, probe)
}

/// Reads `probe` until `done(status, body)` holds, within 30 s (else fails
/// saying `what`); that body.
async fn probe_until(
    http: &reqwest::Client,
    probe: &str,
    what: &str,
    mut done: impl FnMut(u16, &serde_json::Value) -> bool,
) -> serde_json::Value {
    let polled = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Ok(resp) = http.get(probe).send().await {
                let status = resp.status().as_u16();
                let body = resp.json().await.unwrap();
                if done(status, &body) {
                    return body;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    polled.unwrap_or_else(|_| panic!("{what}"))
}

/// Waits until `name`'s next segment is in memory on the server at `base`:
/// a database cut while its fetch is in flight (a slow machine) could leave
/// both segments empty at once.
async fn until_next_in_memory(http: &reqwest::Client, base: &str, name: &str) {
    let info = format!("{base}/v1/sequences/{name}");
    let next_in_memory = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let v: serde_json::Value = http.get(&info).send().await.unwrap().json().await.unwrap();
            if v["buffer"]["next"].is_object() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(next_in_memory.is_ok(), "the next segment was never fetched");
}

async fn database_gone_mid_load_then_back(db: TestDb) {
    create(&db, "gone", 50).await;
    let proxy = Proxy::start(upstream_of(&db.url)).await;
    let via = proxy.url_for(&db.url);
    let mut settings = Settings::for_database(via);
    settings.allocator = fast_failing();
    let s = TestServer::start(settings).await;
    let url = s.url("/v1/sequences/gone/next");
    let mut ids = Vec::new();
    for _ in 0..300 {
        match fetch_ids(&s.http, &url).await {
            Outcome::Ids(v) => ids.extend(v),
            Outcome::Unavailable => panic!("503 while the database is up"),
        }
    }
    until_next_in_memory(&s.http, &s.base, "gone").await;
    proxy.cut();
    // Memory first, then 503s.
    let mut served_after_cut = 0;
    let mut unavailable = 0;
    for _ in 0..2_000 {
        match fetch_ids(&s.http, &url).await {
            Outcome::Ids(v) => {
                assert_eq!(unavailable, 0, "IDs again after a 503 while still cut");
                served_after_cut += v.len();
                ids.extend(v);
            }
            Outcome::Unavailable => {
                unavailable += 1;
                if unavailable == 5 {
                    break;
                }
            }
        }
    }
    assert_eq!(unavailable, 5, "the buffers ran out and requests got 503");
    assert!(
        served_after_cut > 0,
        "what was in memory was served after the cut"
    );
    let ready = s.get("/readyz").await;
    assert_eq!(ready.status(), 503, "not ready while the database is gone");

    proxy.heal();
    let mut recovered = false;
    for _ in 0..200 {
        match fetch_ids(&s.http, &url).await {
            Outcome::Ids(v) => {
                ids.extend(v);
                recovered = true;
                break;
            }
            Outcome::Unavailable => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    assert!(
        recovered,
        "seqd recovered by itself when the database came back"
    );
    for _ in 0..200 {
        match fetch_ids(&s.http, &url).await {
            Outcome::Ids(v) => ids.extend(v),
            Outcome::Unavailable => panic!("503 after recovery"),
        }
    }
    let unique: HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "duplicates");
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "one client, one instance: increasing"
    );
    eprintln!(
        "{:?}: {} IDs, {served_after_cut} served from memory during the outage",
        db.backend,
        ids.len()
    );
    s.stop().await;
}

async fn a_slow_database_does_not_make_steady_traffic_wait(db: TestDb) {
    create(&db, "slow", 100).await;
    let proxy = Proxy::start(upstream_of(&db.url)).await;
    let database = seqd::open::open_database_with(&proxy.url_for(&db.url), &Default::default())
        .await
        .unwrap();
    proxy.set_latency(Duration::from_millis(200));
    let settings = Settings::for_database(proxy.url_for(&db.url));
    let s = TestServer::start_with_database(settings, database).await;
    let url = s.url("/v1/sequences/slow/next");
    let waits = || async {
        let v = s.get_json("/v1/sequences/slow").await;
        v["buffer"]["waits"].as_u64().unwrap()
    };
    // Warm-up: the first load waits for the database, and the rate estimate
    // settles over the first segments.
    let mut ids = Vec::new();
    let mut latencies = Vec::new();
    let run = |n: usize| {
        let http = s.http.clone();
        let url = url.clone();
        async move {
            let mut ids = Vec::new();
            let mut lat = Vec::new();
            for _ in 0..n {
                let t = std::time::Instant::now();
                match fetch_ids(&http, &url).await {
                    Outcome::Ids(v) => ids.extend(v),
                    Outcome::Unavailable => panic!("503 on a slow but reachable database"),
                }
                lat.push(t.elapsed());
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (ids, lat)
        }
    };
    let (warm, _) = run(400).await;
    ids.extend(warm);
    let before = waits().await;
    let (steady, lat) = run(1_500).await;
    ids.extend(steady);
    latencies.extend(lat);
    let after = waits().await;
    assert_eq!(
        after, before,
        "no request waited for the slow database in steady state"
    );
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    let unique: HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len());
    eprintln!(
        "{:?}: 200 ms per database round trip; steady-state p99 {p99:?}, waits {before} -> {after}",
        db.backend
    );
    s.stop().await;
}

/// The probe the Kubernetes Deployment names (`/readyz` on the health
/// listener) keeps the ride-through: with the database cut under load, it
/// answers 200 (`degraded`, the sequences holding IDs counted) while `/next`
/// still answers from memory, and 503 once a draw would fail; it is `ready`
/// again once the database is back. The real binary, through a proxy that
/// cuts the database.
async fn readiness_rides_through_an_outage_until_a_draw_would_fail(db: TestDb) {
    let (proxy, p, probe) =
        with_health_listener(&db, &["--max-step", "50", "--wait-timeout", "500ms"]).await;
    let http = server::client(Duration::from_secs(10));
    let readyz = || async {
        let resp = http.get(&probe).send().await.expect("the probe answers");
        let status = resp.status().as_u16();
        (status, resp.json::<serde_json::Value>().await.unwrap())
    };
    server::create_at(&http, &p.base, "ride", 1, 50).await;
    let url = format!("{}/v1/sequences/ride/next", p.base);
    let mut ids = Vec::new();
    for _ in 0..300 {
        match fetch_ids(&http, &url).await {
            Outcome::Ids(v) => ids.extend(v),
            Outcome::Unavailable => panic!("503 while the database is up"),
        }
    }
    assert_eq!(readyz().await.0, 200);
    until_next_in_memory(&http, &p.base, "ride").await;
    proxy.cut();
    // The background check notices the cut; the probe stays 200 meanwhile.
    let noticed = probe_until(
        &http,
        &probe,
        "the database check notices the cut",
        |status, body| {
            assert_eq!(status, 200, "out of rotation with IDs in memory: {body}");
            body["checks"]["database"] == "failed"
        },
    )
    .await;
    assert_eq!(noticed["status"], "degraded", "{noticed}");
    assert!(noticed["checks"]["memory"]["sequences_holding_ids"].as_u64() >= Some(1));
    // Draw until a draw fails: every probe read while draws succeed is 200;
    // once one fails, the probe is 503.
    let mut served = 0;
    let failed = loop {
        let (before, body) = readyz().await;
        match fetch_ids(&http, &url).await {
            Outcome::Ids(v) => {
                assert_eq!(before, 200, "the probe failed while /next served: {body}");
                served += v.len();
                ids.extend(v);
                assert!(served <= 200, "more than two segments served from memory");
            }
            Outcome::Unavailable => break readyz().await,
        }
    };
    assert!(served > 0, "IDs were served from memory after the cut");
    assert_eq!(
        failed.0, 503,
        "a draw failed and the probe still passes: {}",
        failed.1
    );
    assert_eq!(failed.1["checks"]["database"], "failed", "{}", failed.1);

    proxy.heal();
    probe_until(
        &http,
        &probe,
        "ready again once the database is back",
        |status, body| status == 200 && body["status"] == "ready",
    )
    .await;
    let unique: HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "duplicates");
}

/// Once shutdown began, the health listener's `/readyz` answers 503
/// `draining` while the doors finish what is in flight (here a draw that
/// waits on a cut database), so a probe takes the instance out of rotation
/// before it stops.
async fn readiness_says_draining_once_shutdown_began(db: TestDb) {
    let (proxy, p, probe) =
        with_health_listener(&db, &["--wait-timeout", "20s", "--shutdown-timeout", "20s"]).await;
    let http = server::client(Duration::from_secs(30));
    server::create_at(&http, &p.base, "drain", 1, 10).await;
    proxy.cut();
    // A draw with no segment in memory waits on the cut database.
    let waiting = tokio::spawn({
        let (http, url) = (http.clone(), format!("{}/v1/sequences/drain/next", p.base));
        async move { http.get(url).send().await.map(|r| r.status().as_u16()) }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    p.signal("TERM");
    let what = "the probe says draining while the draw is in flight";
    let draining = probe_until(&http, &probe, what, |_, body| {
        body["checks"]["instance"] == "draining"
    })
    .await;
    assert_eq!(draining["status"], "unavailable", "{draining}");
    assert!(!waiting.is_finished(), "the draw was still in flight");
    proxy.heal();
    drop(waiting.await);
}

network_backends!(
    readiness_says_draining_once_shutdown_began,
    database_gone_mid_load_then_back,
    a_slow_database_does_not_make_steady_traffic_wait,
    readiness_rides_through_an_outage_until_a_draw_would_fail
);

/// Runs `clients` HTTP clients against `bases[c % bases.len()]` until `stop`,
/// each alternating /next and /batch?count=N; returns each client's outcomes.
/// Once `signalled` is set (a graceful shutdown began), a request may only
/// fail to connect (refused): any other error (a connection reset or closed
/// before the answer) fails the test. Without it, send errors are retried
/// (an instance killed on purpose).
fn spawn_clients(
    bases: Vec<String>,
    seq: &str,
    clients: usize,
    stop: Arc<AtomicBool>,
    issued: Arc<AtomicU64>,
    signalled: Option<Arc<AtomicBool>>,
) -> Vec<tokio::task::JoinHandle<(usize, Vec<i64>, u64)>> {
    (0..clients)
        .map(|c| {
            let base = bases[c % bases.len()].clone();
            let next = format!("{base}/v1/sequences/{seq}/next");
            let batch = format!("{base}/v1/sequences/{seq}/batch?count=100");
            let (stop, issued, signalled) = (stop.clone(), issued.clone(), signalled.clone());
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let mut ids = Vec::new();
                let mut unavailable = 0;
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let url = if i.is_multiple_of(2) { &next } else { &batch };
                    i += 1;
                    let resp = match http.get(url).send().await {
                        Ok(r) => r,
                        Err(e) => {
                            let graceful = signalled
                                .as_ref()
                                .is_some_and(|s| s.load(Ordering::SeqCst));
                            assert!(
                                !graceful || e.is_connect(),
                                "a request failed during a graceful shutdown without being refused: {e:?}"
                            );
                            // The instance is down (killed, or gone after its
                            // shutdown); try again shortly.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            continue;
                        }
                    };
                    let status = resp.status().as_u16();
                    let body: serde_json::Value = match resp.json().await {
                        Ok(b) => b,
                        Err(e) => panic!("truncated answer: {e}"),
                    };
                    match status {
                        200 => {
                            let got: Vec<i64> = match body["id"].as_i64() {
                                Some(id) => vec![id],
                                None => common::integers(&body, "ids"),
                            };
                            issued.fetch_add(got.len() as u64, Ordering::Relaxed);
                            ids.extend(got);
                        }
                        503 => {
                            assert_eq!(body["error"]["code"], "storage_unavailable");
                            unavailable += 1;
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        other => panic!("unexpected status {other}: {body}"),
                    }
                }
                (c, ids, unavailable)
            })
        })
        .collect()
}

/// Waits (bounded) until `issued` reaches `n`.
async fn until_issued(issued: &AtomicU64, n: u64, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while issued.load(Ordering::Relaxed) < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of {n} IDs in {limit:?}",
            issued.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// 4 clients drawing from `crash` on `p` (see [`spawn_clients`]), once they
/// have 5,000 IDs: the flag that stops them, and their tasks.
async fn crash_clients_past_5000(
    p: &Process,
) -> (
    Arc<AtomicBool>,
    Vec<tokio::task::JoinHandle<(usize, Vec<i64>, u64)>>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let issued = Arc::new(AtomicU64::new(0));
    let clients = spawn_clients(
        vec![p.base.clone()],
        "crash",
        4,
        stop.clone(),
        issued.clone(),
        None,
    );
    until_issued(&issued, 5_000, Duration::from_secs(120)).await;
    (stop, clients)
}

async fn kill_9_during_load_then_restart_issues_no_duplicate(db: TestDb) {
    create(&db, "crash", 20).await;
    let flags = ["--max-step", "20"];
    let first = Process::spawn(&db.url, &flags).await;
    let (stop, before) = crash_clients_past_5000(&first).await;
    first.signal("KILL");
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in before {
        all.push(t.await.unwrap().1);
    }
    first.kill().await;
    let second = Process::spawn(&db.url, &flags).await;
    let (stop, after) = crash_clients_past_5000(&second).await;
    stop.store(true, Ordering::Relaxed);
    for t in after {
        all.push(t.await.unwrap().1);
    }
    second.kill().await;
    let mut seen = HashSet::new();
    let mut total = 0;
    for ids in &all {
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        for id in ids {
            assert!(seen.insert(*id), "ID {id} issued twice across the crash");
            total += 1;
        }
    }
    eprintln!(
        "{:?}: {total} IDs across a kill -9 and a restart, no duplicate",
        db.backend
    );
}

per_backend!(kill_9_during_load_then_restart_issues_no_duplicate);

async fn many_instances_under_connection_chaos_never_duplicate(db: TestDb) {
    let target: u64 = std::env::var("SEQD_CHAOS_IDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    create(&db, "chaos", 50).await;
    let mut proxies = Vec::new();
    let mut procs = Vec::new();
    for _ in 0..3 {
        let p = Proxy::start(upstream_of(&db.url)).await;
        procs.push(
            Process::spawn(
                &p.url_for(&db.url),
                &["--max-step", "100", "--wait-timeout", "300ms"],
            )
            .await,
        );
        proxies.push(p);
    }
    let proxies = Arc::new(proxies);
    let stop = Arc::new(AtomicBool::new(false));
    let issued = Arc::new(AtomicU64::new(0));
    let bases: Vec<String> = procs.iter().map(|p| p.base.clone()).collect();
    let clients = spawn_clients(bases, "chaos", 9, stop.clone(), issued.clone(), None);
    let chaos = {
        let (proxies, stop) = (proxies.clone(), stop.clone());
        tokio::spawn(async move {
            let mut rng: u64 = 0x9E37_79B9_7F4A_7C15;
            let mut next = || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            while !stop.load(Ordering::Relaxed) {
                let victim = &proxies[(next() % 3) as usize];
                victim.cut();
                tokio::time::sleep(Duration::from_millis(20 + next() % 300)).await;
                victim.heal();
                tokio::time::sleep(Duration::from_millis(20 + next() % 150)).await;
            }
        })
    };
    until_issued(&issued, target, Duration::from_secs(600)).await;
    // However fast the IDs came, let the chaos bite a few dozen times.
    for _ in 0..600 {
        if proxies.iter().map(|p| p.cuts()).sum::<u64>() >= 30 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    chaos.await.unwrap();
    let mut seen = HashSet::with_capacity(target as usize * 2);
    let mut unavailable = 0;
    for t in clients {
        let (_instance, ids, u) = t.await.unwrap();
        unavailable += u;
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "a client's IDs from one instance must increase"
        );
        for id in ids {
            assert!(seen.insert(id), "ID {id} issued twice");
        }
    }
    let cuts: u64 = proxies.iter().map(|p| p.cuts()).sum();
    eprintln!(
        "{:?}: chaos run: {} IDs from 3 seqd processes, 9 clients, {cuts} connection cuts, {unavailable} answers 503, 0 duplicates",
        db.backend,
        seen.len()
    );
    assert!(seen.len() as u64 >= target);
    assert!(cuts >= 30, "{cuts} cuts");
    for p in procs {
        p.kill().await;
    }
}

network_backends!(many_instances_under_connection_chaos_never_duplicate);

async fn sigterm_under_load_finishes_in_flight_requests(db: TestDb) {
    create(&db, "term", 1000).await;
    let mut proc = Process::spawn(&db.url, &["--shutdown-timeout", "10s"]).await;
    let stop = Arc::new(AtomicBool::new(false));
    let issued = Arc::new(AtomicU64::new(0));
    // Clients panic on a truncated answer, and, once the signal is sent, on
    // any error but a refused connection: a request that reached seqd is
    // answered in full (with `Connection: close` once shutdown began).
    let signalled = Arc::new(AtomicBool::new(false));
    let clients = spawn_clients(
        vec![proc.base.clone()],
        "term",
        8,
        stop.clone(),
        issued.clone(),
        Some(signalled.clone()),
    );
    until_issued(&issued, 2_000, Duration::from_secs(120)).await;
    signalled.store(true, Ordering::SeqCst);
    proc.signal("TERM");
    let status = tokio::time::timeout(Duration::from_secs(30), proc.wait())
        .await
        .expect("exited within the bound");
    assert!(status.success(), "clean exit: {status:?}");
    stop.store(true, Ordering::Relaxed);
    let mut seen = HashSet::new();
    for t in clients {
        let (_, ids, _) = t.await.expect("no client saw a truncated answer");
        for id in ids {
            assert!(seen.insert(id));
        }
    }
    assert!(seen.len() >= 2_000);
}

per_backend!(sigterm_under_load_finishes_in_flight_requests);
