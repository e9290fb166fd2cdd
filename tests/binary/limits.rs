//! Request limits over a real socket: a slow client gets 408, requests past
//! the concurrency limit are shed with 503 `overloaded`, the body limit is
//! configurable and holds on every route; the open-file limit is raised at
//! start, and a start whose caps exceed it says so.

use crate::support::server;

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use seqd::config::Settings;
use seqd::http::limits::Limits;
use seqd::store::memory::MemoryStore;
use server::{Process, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn start(limits: Limits, store: Arc<MemoryStore>) -> TestServer {
    let mut settings = Settings::for_database("memory");
    settings.limits = limits;
    settings.allocator.wait_timeout = Duration::from_secs(30);
    settings.snowflake.enabled = false; // no database behind the in-memory store

    TestServer::start_with_store(settings, store).await
}

/// [`start`] on an empty in-memory store, with the default limits but
/// `request_timeout`.
async fn start_with_request_timeout(request_timeout: Duration) -> TestServer {
    let limits = Limits {
        request_timeout,
        ..Limits::default()
    };
    start(limits, Arc::new(MemoryStore::new())).await
}

/// The default limits but `max_concurrency`.
fn concurrency(max_concurrency: usize) -> Limits {
    Limits {
        max_concurrency,
        ..Limits::default()
    }
}

/// [`start`] with `limits` on an in-memory store holding `s` (from 1 by 10)
/// whose every fetch hangs until the test opens its gate: the server and
/// the store.
async fn start_hanging(limits: Limits) -> (TestServer, Arc<MemoryStore>) {
    let store = Arc::new(MemoryStore::new());
    store.insert("s", 0, 10);
    store.close_gate();
    (start(limits, store.clone()).await, store)
}

#[tokio::test]
async fn a_client_that_sends_its_body_too_slowly_gets_408() {
    let s = start_with_request_timeout(Duration::from_millis(300)).await;
    let mut conn = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    conn.write_all(
        b"POST /v1/sequences HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"na",
    )
    .await
    .unwrap();
    // ...and nothing more. The server answers on its own.
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), async {
        let mut buf = [0u8; 1024];
        loop {
            let n = conn.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&buf[..n]);
            if answer.windows(4).any(|w| w == b"\r\n\r\n") && answer.ends_with(b"}") {
                break;
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server answered the slow client");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("\"code\":\"request_timeout\""), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_past_the_concurrency_limit_are_shed_with_503() {
    // Every fetch hangs: requests stay in flight.
    let (s, store) = start_hanging(concurrency(2)).await;
    let url = s.url("/v1/sequences/s/next");
    let in_flight: Vec<_> = (0..2)
        .map(|_| {
            let (http, url) = (s.http.clone(), url.clone());
            tokio::spawn(async move { http.get(url).send().await.unwrap().status() })
        })
        .collect();
    // Wait (bounded) until both hold a slot: the store sees their fetch.
    for _ in 0..500 {
        if store.reserves("s") >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut shed = None;
    for _ in 0..100 {
        // A probe that got a slot before the second request did hangs at the
        // gate: given up after a while (which frees its slot), and tried again.
        let probe = s
            .http
            .get(&url)
            .timeout(Duration::from_secs(1))
            .send()
            .await;
        if let Ok(resp) = probe {
            if resp.status() == 503 {
                shed = Some(resp);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let resp = shed.expect("a third request is shed");
    // The limit is per process, not per route: another route is shed too.
    let other = s.get("/v1/sequences/s/batch?count=2").await;
    assert_eq!(other.status(), 503, "the limit counts every route together");
    assert!(resp.headers().contains_key("retry-after"));
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "overloaded");
    store.open_gate();
    for t in in_flight {
        assert_eq!(t.await.unwrap(), 200, "the requests in flight complete");
    }
}

/// A body announced larger than the limit is refused at once with 413,
/// before any of it is awaited (not held until the request timeout, 408).
#[tokio::test]
async fn an_announced_oversized_body_gets_413_without_waiting_for_it() {
    let s = start_with_request_timeout(Duration::from_secs(3600)).await;
    for target in ["/v1/sequences", "/v1/sequences/order"] {
        let method = if target == "/v1/sequences" {
            "POST"
        } else {
            "PATCH"
        };
        let mut conn = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        let head = format!(
            "{method} {target} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
             content-length: 99999999999\r\n\r\n"
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        // No body follows; the answer comes anyway (the bound only keeps a
        // broken server from hanging the suite: the request timeout is 1 h).
        let mut answer = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(60), conn.read(&mut answer))
            .await
            .expect("an answer before the body")
            .unwrap();
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(
            answer.starts_with("HTTP/1.1 413"),
            "{method} {target}: {answer}"
        );
        assert!(answer.contains("payload_too_large"), "{answer}");
    }
}

#[tokio::test]
async fn the_body_limit_is_configurable() {
    let s = start(
        Limits {
            body_bytes: 1024,
            ..Limits::default()
        },
        Arc::new(MemoryStore::new()),
    )
    .await;
    let body = format!(
        "{{\"name\":\"x\",\"description\":\"{}\"}}",
        "d".repeat(2000)
    );
    // Both routes that read a body (the limit wraps only them).
    let http = reqwest::Client::new();
    for req in [
        http.post(s.url("/v1/sequences")),
        http.patch(s.url("/v1/sequences/x")),
    ] {
        let resp = req
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 413);
        let v: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["code"], "payload_too_large");
    }
}

/// Every route refuses a body over `--max-body` before it runs, those that
/// never read a body and draw IDs included: 413 `payload_too_large`,
/// whether the body is only announced (a `Content-Length` of 10 MB, nothing
/// sent) or sent; nothing is drawn, and the next draw gets the first ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_bound_is_refused_on_every_route_and_draws_nothing() {
    let store = Arc::new(MemoryStore::new());
    store.insert("u1", 0, 10);
    let s = start(
        Limits {
            body_bytes: 1024,
            ..Limits::default()
        },
        store.clone(),
    )
    .await;
    let routes = [
        "/v1/sequences/u1/next",
        "/v1/sequences/u1/batch?count=1",
        "/v1/sequences/u1/lease?size=1",
        "/v1/sequences/u1/lease/return",
        "/v1/sequences",
        "/tinyid/id/nextId?bizType=u1",
        "/api/segment/get/u1",
        "/healthz",
    ];
    for path in routes {
        // Announced only: answered at once, without waiting for the body.
        let mut conn = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        let head =
            format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10485760\r\n\r\n");
        conn.write_all(head.as_bytes()).await.unwrap();
        let mut answer = vec![0; 4096];
        let n = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut answer))
            .await
            .expect("an answer before the body")
            .unwrap();
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(answer.starts_with("HTTP/1.1 413 "), "{path}: {answer}");
        assert!(answer.contains("\"payload_too_large\""), "{path}: {answer}");
        // Sent (2 KB, which the socket takes whole before the answer
        // comes): the same.
        let resp = s
            .http
            .post(s.url(path))
            .body(vec![b'x'; 2048])
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 413, "{path}");
        let v: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["code"], "payload_too_large", "{path}");
    }
    assert_eq!(store.reserves("u1"), 0, "nothing drawn");
    assert_eq!(store.max_id("u1"), Some(0));
    assert_eq!(s.next("u1").await, 1);
}

/// A draw that waits on the store past the request timeout gets the
/// timeout's answer whichever door took it (the edge's own answer for
/// `/next` and Leaf's route, the router for a percent-encoded name), and
/// gives its slot in the concurrency limit back: with one slot, each next
/// request is answered, none shed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draw_waiting_past_the_request_timeout_is_answered_and_frees_its_slot() {
    let limits = Limits {
        request_timeout: Duration::from_millis(300),
        ..concurrency(1)
    };
    let (s, store) = start_hanging(limits).await; // every fetch hangs
    for path in [
        "/v1/sequences/s/next",
        "/v1/sequences/%73/next",
        "/api/segment/get/s",
        "/api/segment/get/%73",
    ] {
        let timeout = StatusCode::REQUEST_TIMEOUT;
        server::expect_error(s.get(path).await, timeout, "request_timeout").await;
    }
    store.open_gate();
    // Answered (200, not shed): the fetch abandoned by the timeout may
    // leave a gap (docs/guarantees.md), never a reuse.
    assert!(s.next("s").await >= 1);
}

/// A client that goes away while its `/next` waits on the store (the
/// edge's own answer, boxed): its slot in the concurrency limit is given
/// back at once, while the store still hangs: with one slot, the next
/// request is let in to wait (not shed with 503).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_while_its_draw_waits_frees_its_slot() {
    // Every fetch hangs, until the end.
    let (s, store) = start_hanging(concurrency(1)).await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let url = s.url("/v1/sequences/s/next");
    let gone = impatient.get(&url).send().await;
    assert!(gone.is_err_and(|e| e.is_timeout()), "the client gave up");
    // Bounded: the server notices the closed connection on its next poll.
    let mut let_in = false;
    for _ in 0..50 {
        match impatient.get(&url).send().await {
            Err(e) if e.is_timeout() => {
                let_in = true; // waiting at the store: it had the slot
                break;
            }
            Ok(resp) => assert_eq!(resp.status(), 503, "only shed while the slot is held"),
            Err(e) => panic!("{e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        let_in,
        "the slot of the client that went away was never given back"
    );
    store.open_gate();
}

/// The soft limit on open files of process `pid` (`/proc/PID/limits`).
fn soft_open_files(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

const LIMIT_LOW: &str = "the open-file limit is below what the doors' connection caps and the database pools may use: the caps are lowered to fit, each door keeping its share; raise the hard limit (ulimit -Hn, LimitNOFILE=) to serve more connections";

/// seqd with a RESP door under `prlimit --nofile=SOFT:HARD`, with caps
/// that need more than HARD descriptors: the soft limit is raised to HARD,
/// one line at start says so, and the caps are lowered to share what the
/// pools and the rest leave. The process and that share.
async fn under_limit(url: &str, soft: u64, hard: u64) -> (Process, usize) {
    let nofile = format!("--nofile={soft}:{hard}");
    let prlimit = ["prlimit", nofile.as_str()];
    let flags = ["--resp-listen", "127.0.0.1:0", "--snowflake", "false"];
    let p = Process::spawn_under(&prlimit, url, &flags, &[]).await;
    assert_eq!(soft_open_files(p.pid), hard);
    let warned = p.log_lines(LIMIT_LOW);
    assert_eq!(warned.len(), 1, "{:?}", p.all_logs());
    let warned = &warned[0];
    assert_eq!(warned["limit"], hard, "{warned}");
    assert_eq!(warned["needed"], 10_000 + 10_000 + 10 + 2 + 64, "{warned}");
    let share = (hard as usize - (10 + 2 + 64)) / 2;
    assert_eq!(warned["max_connections"], share, "{warned}");
    assert_eq!(warned["resp_max_connections"], share, "{warned}");
    (p, share)
}

/// The status of `GET /healthz` on a new connection (it fails the test when
/// the door does not accept within 10 s).
async fn healthz(base: &str) -> StatusCode {
    let http = server::client(Duration::from_secs(10));
    http.get(format!("{base}/healthz"))
        .send()
        .await
        .expect("the HTTP door accepts")
        .status()
}

/// `n` RESP connections to `addr`, each having sent `PING`; the first
/// `served` of them answer `+PONG`.
async fn flood(addr: &str, n: usize, served: usize) -> Vec<tokio::net::TcpStream> {
    let mut held = Vec::new();
    for _ in 0..n {
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"PING\r\n").await.unwrap();
        held.push(c);
    }
    for c in held.iter_mut().take(served) {
        let mut pong = [0u8; 7];
        tokio::time::timeout(Duration::from_secs(30), c.read_exact(&mut pong))
            .await
            .expect("a served RESP connection answers")
            .unwrap();
        assert_eq!(&pong, b"+PONG\r\n");
    }
    held
}

/// Started with a soft limit of 256 open files under a hard one of 4096 (as
/// a shell or a service manager leaves it), seqd raises the soft limit to
/// the hard one: 300 RESP connections, past the old limit, are all served
/// and leave the HTTP door answering. With caps that need more than 4096
/// descriptors it says so in one line at start; with caps that fit, it says
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_file_limit_is_raised_and_caps_past_it_are_named_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("f.db").display());
    let (p, _) = under_limit(&url, 256, 4096).await;
    let held = flood(p.resp.as_deref().unwrap(), 300, 300).await;
    assert_eq!(healthz(&p.base).await, 200);
    drop(held);
    drop(p);

    let prlimit = ["prlimit", "--nofile=256:4096"];
    let fits = ["--max-connections", "1000", "--snowflake", "false"];
    let p = Process::spawn_under(&prlimit, &url, &fits, &[]).await;
    assert_eq!(soft_open_files(p.pid), 4096);
    assert!(p.log_lines(LIMIT_LOW).is_empty(), "{:?}", p.all_logs());
}

/// Under a hard limit of 256 open files, a flood of 300 RESP connections
/// (the RESP door's cap is 10,000) used to take every descriptor: the HTTP
/// door stopped accepting and /healthz went with it. The caps are lowered at
/// start to share what is left, so the flood meets the RESP door's lowered
/// cap (past it, refused as Redis refuses) and the HTTP door keeps its
/// share: /healthz answers, and IDs are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_on_one_door_leaves_the_other_its_share_of_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("f.db").display());
    let (p, share) = under_limit(&url, 256, 256).await;
    let held = flood(p.resp.as_deref().unwrap(), 300, share).await;
    for _ in 0..20 {
        assert_eq!(healthz(&p.base).await, 200);
    }
    let http = server::client(Duration::from_secs(10));
    server::create_at(&http, &p.base, "flood", 1, 10).await;
    assert_eq!(server::next_at(&http, &p.base, "flood").await, 1);
    drop(held);
}

/// The health listener's few connections (64) are counted apart in the
/// open-file budget: under a hard limit of 256 with `--health-listen`, the
/// doors share what the pools, the health listener and the rest leave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_listener_has_its_own_descriptors_in_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("f.db").display());
    let prlimit = ["prlimit", "--nofile=256:256"];
    let flags = [
        "--resp-listen",
        "127.0.0.1:0",
        "--health-listen",
        "127.0.0.1:0",
        "--snowflake",
        "false",
    ];
    let p = Process::spawn_under(&prlimit, &url, &flags, &[]).await;
    let warned = p.log_lines(LIMIT_LOW);
    assert_eq!(warned.len(), 1, "{:?}", p.all_logs());
    let share = (256 - (10 + 2 + 64 + 64)) / 2;
    assert_eq!(warned[0]["max_connections"], share, "{}", warned[0]);
    assert_eq!(warned[0]["resp_max_connections"], share, "{}", warned[0]);
    assert_eq!(healthz(p.health.as_deref().unwrap()).await, 200);
}
