//! Hostile and slow clients over a real socket: heads sent by halves
//! (slowloris), idle keep-alives, more connections than the cap, clients that
//! stop reading a large answer, and raw bytes that are not UTF-8. Each test is
//! bounded in count and time; none measures speed.

use crate::support::common;
use crate::support::server;

use std::time::Duration;

use common::Backend;
use seqd::config::Settings;
use seqd::http::serve::ConnLimits;
use server::TestServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The longest any test here waits for the server to act.
const BOUND: Duration = Duration::from_secs(30);

/// A server on SQLite with sequence `s` and the given connection limits.
async fn server_with(limits: ConnLimits) -> (TestServer, common::TestDb) {
    let db = common::test_db(Backend::Sqlite).await.unwrap();
    let database = common::database(&db).await;
    let store = database.sequences();
    store.create(&common::new_seq("s", 1, 1000)).await.unwrap();
    let mut settings = Settings::for_database(db.url.clone());
    settings.connections = limits;
    (
        TestServer::start_with_database(settings, database).await,
        db,
    )
}

/// Reads until the server closes the connection (EOF or reset), at most
/// [`BOUND`]; returns the bytes read, or `None` if it stayed open.
async fn until_closed(sock: &mut TcpStream) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let read_all = async {
        let mut buf = [0u8; 64 * 1024];
        loop {
            match sock.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(BOUND, read_all).await.ok()?;
    Some(got)
}

/// One `GET` on a raw socket with keep-alive; returns the response head and body.
async fn get_keep_alive(sock: &mut TcpStream, path: &str) -> String {
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/plain\r\n\r\n");
    sock.write_all(req.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(BOUND, sock.read(&mut buf))
        .await
        .expect("an answer")
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// [`server_with`] a header-read timeout, an idle timeout and a connection cap.
async fn server_limited(
    header_read: Duration,
    idle: Duration,
    max: usize,
) -> (TestServer, common::TestDb) {
    server_with(ConnLimits {
        header_read_timeout: header_read,
        idle_timeout: idle,
        max_connections: max,
    })
    .await
}

/// A connection that sent half a request head and stopped.
async fn half_a_head(addr: std::net::SocketAddr) -> TcpStream {
    let mut sock = TcpStream::connect(addr).await.unwrap();
    sock.write_all(b"GET /v1/sequences/s/next HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .await
        .unwrap();
    sock
}

/// 100 connections send half a request head and stop: every one is closed
/// by the server, while a well-behaved client is answered meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_request_heads_are_cut_off() {
    let (s, _db) = server_limited(Duration::from_millis(500), Duration::from_secs(60), 1000).await;
    let mut slow = Vec::new();
    for _ in 0..100 {
        slow.push(half_a_head(s.addr).await);
    }
    assert_eq!(s.get("/v1/sequences/s/next").await.status(), 200);
    for (i, sock) in slow.iter_mut().enumerate() {
        let got = until_closed(sock).await;
        assert!(
            got.is_some(),
            "half a head, connection {i}: still open after {BOUND:?}"
        );
    }
    s.stop().await;
}

/// A keep-alive connection idle past the idle timeout is closed; one idle
/// longer than the header-read timeout but within the idle timeout is not
/// (the header deadline counts from a head's first byte).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alives_are_closed_only_after_the_idle_timeout() {
    let (s, _db) = server_limited(Duration::from_millis(300), Duration::from_secs(10), 1000).await;
    let mut sock = TcpStream::connect(s.addr).await.unwrap();
    let first = get_keep_alive(&mut sock, "/v1/sequences/s/next").await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    tokio::time::sleep(Duration::from_secs(1)).await; // > header-read, < idle
    let second = get_keep_alive(&mut sock, "/v1/sequences/s/next").await;
    assert!(
        second.starts_with("HTTP/1.1 200"),
        "idle 1 s, still open: {second}"
    );
    let rest = until_closed(&mut sock).await;
    assert_eq!(
        rest,
        Some(Vec::new()),
        "closed after the idle timeout, with nothing more sent"
    );
    s.stop().await;
}

/// With a cap of 4 connections, a 5th waits in the backlog: its request is
/// answered only once one of the 4 closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_wait_until_one_closes() {
    let (s, _db) = server_limited(Duration::from_secs(5), Duration::from_secs(60), 4).await;
    let mut open = Vec::new();
    for _ in 0..4 {
        let mut sock = TcpStream::connect(s.addr).await.unwrap();
        let answer = get_keep_alive(&mut sock, "/v1/sequences/s/next").await;
        assert!(answer.starts_with("HTTP/1.1 200"));
        open.push(sock);
    }
    let mut fifth = TcpStream::connect(s.addr).await.unwrap(); // the kernel's backlog
    fifth
        .write_all(b"GET /v1/sequences/s/next HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let early = tokio::time::timeout(Duration::from_millis(500), fifth.read(&mut buf)).await;
    assert!(
        early.is_err(),
        "the 5th connection was served while 4 were open"
    );
    drop(open.pop());
    let n = tokio::time::timeout(BOUND, fifth.read(&mut buf))
        .await
        .expect("served once a slot freed")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    s.stop().await;
}

/// A client pipelines 100 requests for 10,000 IDs each and reads nothing:
/// once the socket buffers are full the server makes no progress, and it
/// closes the connection after the idle timeout instead of holding it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_a_large_answer_is_cut_off() {
    let (s, _db) = server_limited(Duration::from_secs(5), Duration::from_millis(500), 1000).await;
    let mut sock = TcpStream::connect(s.addr).await.unwrap();
    let one = "GET /v1/sequences/s/batch?count=10000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let requests = 100;
    sock.write_all(one.repeat(requests).as_bytes())
        .await
        .unwrap();
    // Long past the idle timeout while the server's writes are stuck.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let got = until_closed(&mut sock).await.expect("closed by the server");
    let answers = String::from_utf8_lossy(&got)
        .matches("HTTP/1.1 200")
        .count();
    assert!(
        answers < requests,
        "all {answers} answers delivered: never stalled?"
    );
    s.stop().await;
}

/// Raw request lines with bytes that are not UTF-8 or not valid in a URI get
/// an HTTP error status, never a crash; the server keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_paths_with_invalid_bytes_get_an_error_status() {
    let (s, _db) = server_with(ConnLimits::default()).await;
    let paths: [&[u8]; 6] = [
        b"/v1/sequences/\xff\xfe/next",
        b"/v1/sequences/%ff%fe/next",
        b"/v1/snowflake/decode/\xc3\x28",
        b"/assets/%FF",
        b"/\x00",
        b"/v1/sequences/s/batch?count=\xff",
    ];
    for path in paths {
        let mut sock = TcpStream::connect(s.addr).await.unwrap();
        let mut req = b"GET ".to_vec();
        req.extend_from_slice(path);
        req.extend_from_slice(b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        sock.write_all(&req).await.unwrap();
        let got = until_closed(&mut sock).await.expect("answered and closed");
        let head = String::from_utf8_lossy(&got);
        let status: u16 = head
            .strip_prefix("HTTP/1.1 ")
            .and_then(|h| h.get(..3))
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| {
                panic!(
                    "{:?}: not an HTTP answer: {head:?}",
                    String::from_utf8_lossy(path)
                )
            });
        assert!(
            (400..500).contains(&status),
            "{:?}: {status}",
            String::from_utf8_lossy(path)
        );
    }
    assert_eq!(s.get("/v1/sequences/s/next").await.status(), 200);
    s.stop().await;
}
