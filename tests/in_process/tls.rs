//! TLS on the doors under the edge rules, over real sockets with a real TLS
//! client (rustls) and certificates the tests make (tests/support/pki): a handshake
//! that stalls is cut at the header-read deadline (HTTP) or the frame
//! deadline (RESP) and holds its place under the cap meanwhile; a flood of
//! connections that send nothing or garbage leaves the accept loop serving;
//! plain bytes sent to a TLS port, and TLS sent to a plain port, are refused
//! without harm. Each test is bounded in count and time. (The real tools,
//! curl, openssl, redis-cli and redis-py, and SIGHUP: tests/binary/tls_clients.rs.)

use crate::support::common;
use crate::support::pki;
use crate::support::server;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Backend;
use pki::Pki;
use seqd::config::Settings;
use seqd::http::serve::ConnLimits;
use seqd::resp::RespLimits;
use seqd::tls::TlsFiles;
use server::TestServer;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::ClientConfig;

/// The longest any test here waits for the server to act.
const BOUND: Duration = Duration::from_secs(30);

/// A server on SQLite with sequence `s`, a RESP listener and the given
/// limits, speaking TLS with `tls` when given.
async fn server(
    tls: Option<TlsFiles>,
    limits: ConnLimits,
    resp: RespLimits,
) -> (TestServer, common::TestDb) {
    let db = common::test_db(Backend::Sqlite).await.unwrap();
    let database = common::database(&db).await;
    database
        .sequences()
        .create(&common::new_seq("s", 1, 1000))
        .await
        .unwrap();
    let mut settings = Settings::for_database(db.url.clone());
    settings.connections = limits;
    settings.resp = resp;
    settings.resp_listen = Some(String::new());
    settings.tls = tls;
    (
        TestServer::start_with_database(settings, database).await,
        db,
    )
}

/// [`server`] over TLS with a certificate of a new CA; the client
/// configuration that trusts the CA.
async fn tls_server(
    limits: ConnLimits,
    resp: RespLimits,
) -> (TestServer, common::TestDb, Arc<ClientConfig>, Pki) {
    let pki = Pki::new("seqd test CA");
    let pair = pki.server("server", 1);
    let files = TlsFiles {
        cert: pair.cert,
        key: pair.key,
        client_ca: None,
    };
    let (s, db) = server(Some(files), limits, resp).await;
    let config = pki::client_config(&pki.ca, None);
    (s, db, config, pki)
}

/// The RESP listener's address.
fn resp_addr(s: &TestServer) -> SocketAddr {
    s.resp.as_ref().expect("a RESP listener").parse().unwrap()
}

/// RESP limits with `frame_timeout` and a cap of `max`.
fn resp_limits(frame_timeout: Duration, max: usize) -> RespLimits {
    RespLimits {
        frame_timeout,
        max_connections: max,
        ..RespLimits::default()
    }
}

/// HTTP limits: `header_read`, a long idle timeout, a cap of `max`.
fn http_limits(header_read: Duration, max: usize) -> ConnLimits {
    ConnLimits {
        header_read_timeout: header_read,
        idle_timeout: Duration::from_secs(60),
        max_connections: max,
    }
}

/// `INCR s` over `stream`: the ID.
async fn incr<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S) -> std::io::Result<i64> {
    let reply = pki::resp_call(stream, &["INCR", "s"]).await?;
    reply
        .strip_prefix(':')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an integer reply: {reply:?}")))
}

/// The first bytes of a TLS ClientHello record that announces 512 bytes and
/// never sends them.
const HALF_A_HELLO: &[u8] = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";

/// Asserts that `sock` is closed by the server between `at_least` and
/// [`BOUND`] after `since`.
async fn closed_by_deadline(what: &str, sock: &mut TcpStream, since: Instant, at_least: Duration) {
    assert!(
        pki::closed_within(sock, BOUND).await,
        "{what}: still open after {BOUND:?}"
    );
    let after = since.elapsed();
    assert!(
        after >= at_least,
        "{what}: closed after {after:?}, before the deadline"
    );
}

/// A connection that sends nothing and one that sends half a ClientHello
/// are closed at the header-read deadline (1 s, not the 60 s idle
/// timeout); with a cap of 2 they hold both places until then, and a TLS
/// client is answered only once they are cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_http_handshake_is_cut_at_the_header_read_deadline_and_holds_its_place() {
    let header_read = Duration::from_secs(1);
    let (s, _db, config, _pki) =
        tls_server(http_limits(header_read, 2), RespLimits::default()).await;
    let since = Instant::now();
    let mut silent = TcpStream::connect(s.addr).await.unwrap();
    let mut half = TcpStream::connect(s.addr).await.unwrap();
    half.write_all(HALF_A_HELLO).await.unwrap();
    let addr = s.addr;
    let third = tokio::spawn(async move {
        let mut tls = pki::connect(addr, &config).await?;
        let answer = pki::get(&mut tls, "/v1/sequences/s/next").await?;
        Ok::<_, std::io::Error>((answer, since.elapsed()))
    });
    let deadline = header_read - Duration::from_millis(200); // within a tick
    closed_by_deadline("silent", &mut silent, since, deadline).await;
    closed_by_deadline("half a ClientHello", &mut half, since, deadline).await;
    let ((status, body), served_after) = tokio::time::timeout(BOUND, third)
        .await
        .expect("the third client answered")
        .unwrap()
        .expect("the third client served over TLS");
    assert_eq!((status, body.trim()), (200, "1"));
    assert!(
        served_after >= deadline,
        "the third client was served after {served_after:?}, while two handshakes held the cap of 2"
    );
    s.stop().await;
}

/// On RESP, a connection that sends nothing and one that sends half a
/// ClientHello are closed at the frame deadline; meanwhile they hold the
/// cap of 2 and one more connection is closed at once, with no handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_resp_handshake_is_cut_at_the_frame_deadline_and_holds_its_place() {
    let frame = Duration::from_secs(1);
    let (s, _db, config, _pki) = tls_server(ConnLimits::default(), resp_limits(frame, 2)).await;
    let addr = resp_addr(&s);
    let since = Instant::now();
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let mut half = TcpStream::connect(addr).await.unwrap();
    half.write_all(HALF_A_HELLO).await.unwrap();
    // Both taken by the accept loop: the next one is past the cap.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut refused = TcpStream::connect(addr).await.unwrap();
    refused.write_all(HALF_A_HELLO).await.unwrap();
    let mut got = Vec::new();
    let read = tokio::time::timeout(frame / 2, refused.read_to_end(&mut got)).await;
    assert!(
        read.is_ok() && got.is_empty(),
        "past the cap: {read:?}, {:?} (closed at once without a word?)",
        String::from_utf8_lossy(&got)
    );
    let deadline = frame - Duration::from_millis(100);
    closed_by_deadline("silent", &mut silent, since, deadline).await;
    closed_by_deadline("half a ClientHello", &mut half, since, deadline).await;
    let mut tls = pki::connect(addr, &config).await.expect("a place again");
    assert_eq!(incr(&mut tls).await.unwrap(), 1);
    s.stop().await;
}

/// 100 connections that send nothing and 100 that send a ClientHello's
/// first bytes and stop, on each door: a TLS client is still answered at
/// once (long before the 5 s deadline that frees them), on both doors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_flood_does_not_starve_the_accept_loop() {
    let deadline = Duration::from_secs(5);
    let (s, _db, config, _pki) =
        tls_server(http_limits(deadline, 1000), resp_limits(deadline, 1000)).await;
    let doors = [s.addr, resp_addr(&s)];
    let mut flood = Vec::new();
    for addr in doors {
        for i in 0..200 {
            let mut sock = TcpStream::connect(addr).await.unwrap();
            if i % 2 == 1 {
                sock.write_all(HALF_A_HELLO).await.unwrap();
            }
            flood.push(sock);
        }
    }
    let since = Instant::now();
    let mut http = pki::connect(s.addr, &config).await.unwrap();
    let (status, _) = pki::get(&mut http, "/v1/sequences/s/next").await.unwrap();
    assert_eq!(status, 200);
    let mut resp = pki::connect(resp_addr(&s), &config).await.unwrap();
    incr(&mut resp).await.unwrap();
    let took = since.elapsed();
    assert!(
        took < deadline - Duration::from_secs(1),
        "answered after {took:?} behind a flood of stalled handshakes (freed at {deadline:?})"
    );
    drop(flood);
    s.stop().await;
}

/// Plain HTTP and plain RESP sent to the TLS doors are refused (closed,
/// never answered as a request), and TLS sent to plain doors fails its
/// handshake; every server keeps serving, and RESP counts the refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_bytes_to_tls_doors_and_tls_to_plain_doors_are_refused_without_harm() {
    let (tls, _db, config, _pki) = tls_server(ConnLimits::default(), RespLimits::default()).await;
    let plain_http = b"GET /v1/sequences/s/next HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let plain_resp = b"*2\r\n$4\r\nINCR\r\n$1\r\ns\r\n";
    for (addr, bytes) in [
        (tls.addr, &plain_http[..]),
        (resp_addr(&tls), &plain_resp[..]),
    ] {
        let mut sock = TcpStream::connect(addr).await.unwrap();
        sock.write_all(bytes).await.unwrap();
        let mut got = Vec::new();
        let read = tokio::time::timeout(BOUND, sock.read_to_end(&mut got)).await;
        assert!(read.is_ok(), "{addr}: plain bytes left the connection open");
        let text = String::from_utf8_lossy(&got);
        assert!(
            !text.contains("HTTP/1.1") && !text.starts_with(':'),
            "{addr}: answered in plain: {text:?}"
        );
    }
    let mut http = pki::connect(tls.addr, &config).await.unwrap();
    let (status, body) = pki::get(&mut http, "/v1/sequences/s/next").await.unwrap();
    assert_eq!(
        (status, body.trim()),
        (200, "1"),
        "nothing was issued to plain bytes"
    );
    let (_, metrics) = pki::get(&mut http, "/metrics").await.unwrap();
    assert!(
        metrics.contains(r#"seqd_resp_closed_total{reason="tls"}"#),
        "a failed RESP handshake is counted"
    );
    let mut resp = pki::connect(resp_addr(&tls), &config).await.unwrap();
    assert_eq!(incr(&mut resp).await.unwrap(), 2);

    let (plain, _db2) = server(None, ConnLimits::default(), RespLimits::default()).await;
    for addr in [plain.addr, resp_addr(&plain)] {
        assert!(
            pki::connect(addr, &config).await.is_err(),
            "{addr}: a TLS handshake with a plain door succeeded"
        );
    }
    assert_eq!(plain.get("/v1/sequences/s/next").await.status(), 200);
    let mut sock = TcpStream::connect(resp_addr(&plain)).await.unwrap();
    assert_eq!(incr(&mut sock).await.unwrap(), 2);
    plain.stop().await;
    tls.stop().await;
}

/// The HTTP door agrees on `http/1.1` with a client that offers `h2` too,
/// and refuses one that offers only `h2` (it serves HTTP/1.1 only); the
/// RESP door agrees on no application protocol.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_door_negotiates_http_1_1_and_resp_no_protocol() {
    let (s, _db, _, pki) = tls_server(ConnLimits::default(), RespLimits::default()).await;
    let offering = |protocols: &[&[u8]]| {
        let mut config = (*pki::client_config(&pki.ca, None)).clone();
        config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    };
    let both = offering(&[b"h2", b"http/1.1"]);
    let mut http = pki::connect(s.addr, &both).await.unwrap();
    assert_eq!(http.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(
        pki::get(&mut http, "/v1/sequences/s/next").await.unwrap().0,
        200
    );
    assert!(pki::connect(s.addr, &offering(&[b"h2"])).await.is_err());
    let mut resp = pki::connect(resp_addr(&s), &both).await.unwrap();
    assert_eq!(resp.get_ref().1.alpn_protocol(), None);
    assert_eq!(incr(&mut resp).await.unwrap(), 2);
    s.stop().await;
}
