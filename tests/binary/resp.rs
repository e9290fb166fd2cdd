//! The RESP door (docs/design.md, "The RESP door") through the real binary,
//! with a client of bytes written here so that a test can send what no
//! library would: random bytes, truncated frames, a 1 GB bulk length,
//! 1,000,000 arguments, a slowloris of frames, more connections than the
//! cap. Each time the server answers an error or closes that connection,
//! and keeps serving the others. Then the guarantees: `INCRBY order 100`
//! from 32 connections on two instances over PostgreSQL and MariaDB gives
//! disjoint runs of 100, and `INCR` after a `kill -9` and a restart never
//! repeats an ID. (Real clients, `redis-cli`, Python's `redis` and the
//! Rust `redis` crate, are in tests/binary/resp_clients.rs.)

use crate::support::common;
use crate::support::proxy;
use crate::support::server;

use std::collections::HashSet;
use std::time::Duration;

use common::TestDb;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use server::Process;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A reply as read off the socket.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

impl Reply {
    #[track_caller]
    fn int(&self) -> i64 {
        match self {
            Reply::Int(n) => *n,
            other => panic!("expected an integer, got {other:?}"),
        }
    }

    #[track_caller]
    fn error(&self) -> &str {
        match self {
            Reply::Error(e) => e,
            other => panic!("expected an error, got {other:?}"),
        }
    }
}

/// Parses one reply at the start of `buf`: it and its length, or `None`
/// when incomplete.
fn parse_reply(buf: &[u8]) -> Option<(Reply, usize)> {
    let nl = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&buf[1..nl]).unwrap().to_owned();
    let at = nl + 2;
    match buf[0] {
        b'+' => Some((Reply::Simple(line), at)),
        b'-' => Some((Reply::Error(line), at)),
        b':' => Some((Reply::Int(line.parse().unwrap()), at)),
        b'_' => Some((Reply::Bulk(None), at)),
        b'$' => {
            let len: i64 = line.parse().unwrap();
            if len < 0 {
                return Some((Reply::Bulk(None), at));
            }
            let end = at + len as usize;
            (buf.len() >= end + 2).then(|| (Reply::Bulk(Some(buf[at..end].to_vec())), end + 2))
        }
        b'*' | b'%' => {
            let n: usize = line.parse().unwrap();
            let n = if buf[0] == b'%' { 2 * n } else { n };
            let mut items = Vec::with_capacity(n);
            let mut at = at;
            for _ in 0..n {
                let (item, used) = parse_reply(&buf[at..])?;
                items.push(item);
                at += used;
            }
            Some((Reply::Array(items), at))
        }
        other => panic!(
            "unexpected reply type {:?} in {:?}",
            other as char,
            String::from_utf8_lossy(buf)
        ),
    }
}

/// A connection to the RESP door.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

/// Longest a test waits for a reply or a close: only so that a hang fails
/// instead of blocking the suite, never a measure of speed.
const PATIENCE: Duration = Duration::from_secs(30);

impl Conn {
    async fn open(addr: &str) -> Conn {
        Conn {
            stream: TcpStream::connect(addr).await.expect("connect RESP"),
            buf: Vec::new(),
        }
    }

    /// Sends `args` as an array of bulk strings.
    async fn send(&mut self, args: &[&str]) {
        self.stream.write_all(&frame(args)).await.unwrap();
    }

    /// Sends `bytes` as they are; the reply.
    async fn raw(&mut self, bytes: &[u8]) -> Reply {
        self.stream.write_all(bytes).await.unwrap();
        self.reply().await
    }

    async fn call(&mut self, args: &[&str]) -> Reply {
        self.send(args).await;
        self.reply().await
    }

    /// Sends `args`; asserts the reply is an error starting with `prefix`.
    async fn refused(&mut self, args: &[&str], prefix: &str) {
        let reply = self.call(args).await;
        assert!(reply.error().starts_with(prefix), "{args:?}: {reply:?}");
    }

    async fn reply(&mut self) -> Reply {
        tokio::time::timeout(PATIENCE, async {
            loop {
                if let Some((r, used)) = parse_reply(&self.buf) {
                    self.buf.drain(..used);
                    return r;
                }
                let mut chunk = vec![0u8; 65536];
                let n = self.stream.read(&mut chunk).await.expect("read");
                assert!(
                    n > 0,
                    "closed before a reply; have {:?}",
                    String::from_utf8_lossy(&self.buf)
                );
                self.buf.extend_from_slice(&chunk[..n]);
            }
        })
        .await
        .expect("no reply in time")
    }

    /// Reads until the server closes the connection; what it sent meanwhile.
    async fn until_closed(&mut self) -> Vec<u8> {
        tokio::time::timeout(PATIENCE, async {
            let mut chunk = vec![0u8; 65536];
            loop {
                match self.stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return std::mem::take(&mut self.buf),
                    Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                }
            }
        })
        .await
        .expect("the server did not close the connection")
    }
}

fn frame(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

async fn spawn(db: &TestDb, extra: &[&str]) -> Process {
    let mut args = vec!["--resp-listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let p = Process::spawn(&db.url, &args).await;
    assert!(p.resp.is_some(), "no resp_listen in the start-up line");
    p
}

fn resp(p: &Process) -> String {
    p.resp.clone().unwrap()
}

async fn create(p: &Process, name: &str, step: i64) {
    let http = server::client(Duration::from_secs(30));
    server::create_at(&http, &p.base, name, 1, step).await;
}

/// A client that keeps drawing on its own connection while the others
/// attack: every answer an ID, each above the last.
async fn steady(addr: String, stop: tokio::sync::watch::Receiver<bool>) -> usize {
    let mut c = Conn::open(&addr).await;
    let (mut last, mut n) = (0, 0);
    while !*stop.borrow() {
        let id = c.call(&["INCR", "order"]).await.int();
        assert!(id > last, "{id} after {last}");
        last = id;
        n += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    n
}

/// Errors of commands leave the connection serving; a pipeline of 1,000
/// is answered in order; caps and malformed frames close only the
/// connection that broke them.
async fn hostile_input_closes_only_its_connection(db: TestDb) {
    let p = spawn(
        &db,
        &["--header-read-timeout", "1s", "--resp-idle-timeout", "2s"],
    )
    .await;
    create(&p, "order", 1000).await;
    let addr = resp(&p);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let good = tokio::spawn(steady(addr.clone(), stop_rx));

    // Command errors: answered, and the connection goes on.
    let mut c = Conn::open(&addr).await;
    for (args, prefix) in [
        (&["INCR"][..], "ERR wrong number of arguments"),
        (
            &["INCRBY", "order", "0"],
            "ERR INCRBY takes a count from 1 to 10000",
        ),
        (&["INCRBY", "order", "10001"], "ERR INCRBY takes a count"),
        (&["INCRBY", "order", "x"], "ERR value is not an integer"),
        (&["GET", "order"], "ERR unknown command 'GET'"),
        (&["SET", "order", "1"], "ERR unknown command 'SET'"),
        (&["SELECT", "1"], "ERR seqd has one database"),
        (&["INCR", "nope"], "NOSEQ "),
        (&["INCR", "bad name"], "ERR invalid sequence name"),
        (&["HELLO", "4"], "NOPROTO "),
    ] {
        c.refused(args, prefix).await;
    }
    assert_eq!(c.call(&["SELECT", "0"]).await, Reply::Simple("OK".into()));
    let first = c.call(&["INCR", "order"]).await.int();

    // A pipeline of 1,000 in one write: 1,000 answers, in order.
    let mut batch = Vec::new();
    for _ in 0..1000 {
        batch.extend_from_slice(&frame(&["INCR", "order"]));
    }
    c.stream.write_all(&batch).await.unwrap();
    let mut last = first;
    for _ in 0..1000 {
        let id = c.reply().await.int();
        assert!(id > last);
        last = id;
    }
    // INCRBY's run is the caller's: the next INCR is above it.
    let r = c.call(&["INCRBY", "order", "100"]).await.int();
    assert!(r - 99 > last);
    assert!(c.call(&["INCR", "order"]).await.int() > r);

    // A 1 GB bulk length and 1,000,000 arguments: refused on the header.
    for head in [&b"*2\r\n$4\r\nINCR\r\n$1073741824\r\n"[..], b"*1000000\r\n"] {
        let mut c = Conn::open(&addr).await;
        c.stream.write_all(head).await.unwrap();
        let got = String::from_utf8(c.until_closed().await).unwrap();
        assert!(got.starts_with("-ERR Protocol error"), "{got:?}");
    }
    // 1,000,000 arguments actually sent: refused, closed, no memory held.
    let mut c = Conn::open(&addr).await;
    let mut huge = b"*1000000\r\n".to_vec();
    for _ in 0..1_000_000 {
        huge.extend_from_slice(b"$1\r\na\r\n");
    }
    let _ = c.stream.write_all(&huge).await;
    let got = c.until_closed().await;
    assert!(got.starts_with(b"-ERR Protocol error: too many arguments"));

    // A frame that stops halfway: closed by the frame deadline.
    let mut c = Conn::open(&addr).await;
    c.stream
        .write_all(b"*2\r\n$4\r\nINCR\r\n$5\r\nord")
        .await
        .unwrap();
    assert!(c.until_closed().await.is_empty());
    // A slowloris: one byte at a time, each well within the idle
    // deadline, the frame never done within the frame deadline.
    let mut c = Conn::open(&addr).await;
    let slow = tokio::spawn(async move {
        for b in b"*2\r\n$4\r\nINCR\r\n$5\r\norder\r\n"
            .iter()
            .cycle()
            .take(1000)
        {
            if c.stream.write_all(&[*b]).await.is_err() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        false
    });
    assert!(tokio::time::timeout(PATIENCE, slow)
        .await
        .expect("slowloris not closed")
        .unwrap());
    // Idle: closed after the idle deadline.
    let mut c = Conn::open(&addr).await;
    assert!(c.until_closed().await.is_empty());

    // Random bytes, many connections: each answered or closed, never a
    // crash. Each chunk is sent, then QUIT as an inline command.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let bytes = proptest::collection::vec(any::<u8>(), 1..400);
    for _ in 0..200 {
        let chunk = bytes.new_tree(&mut runner).unwrap().current();
        let mut c = Conn::open(&addr).await;
        let _ = c.stream.write_all(&chunk).await;
        let _ = c.stream.write_all(b"\r\nQUIT\r\n").await;
        let _ = c.stream.shutdown().await;
        let _ = c.until_closed().await;
    }

    stop_tx.send(true).unwrap();
    let served = good.await.unwrap();
    assert!(served > 0);
    // Still serving, and the metrics count what happened.
    let mut c = Conn::open(&addr).await;
    c.call(&["INCR", "order"]).await.int();
    let http = server::client(Duration::from_secs(30));
    // The monitor's facts name the listener.
    let info = server::fetch_json(http.get(format!("{}/v1/info", p.base))).await;
    assert_eq!(info["resp_listen"], addr.as_str());
    let page = server::fetch_text(http.get(format!("{}/", p.base))).await;
    assert!(page.contains(r#"id="resp""#));
    assert_series(
        &p,
        &[
            ("incr", "ok"),
            ("incrby", "err"),
            ("incr", "noseq"),
            ("other", "err"),
        ],
        &[
            r#"seqd_resp_closed_total{reason="protocol"}"#,
            r#"seqd_resp_closed_total{reason="slow_frame"}"#,
            r#"seqd_resp_closed_total{reason="idle"}"#,
            "seqd_resp_connections",
        ],
    )
    .await;
}

/// Asserts `/metrics` of `p` holds `seqd_resp_commands_total` of each
/// `(command, outcome)` of `commands`, and each of `series`.
async fn assert_series(p: &Process, commands: &[(&str, &str)], series: &[&str]) {
    let http = server::client(Duration::from_secs(30));
    let text = server::fetch_text(http.get(format!("{}/metrics", p.base))).await;
    let commands = commands.iter().map(|(command, outcome)| {
        format!(r#"seqd_resp_commands_total{{command="{command}",outcome="{outcome}"}}"#)
    });
    for series in commands.chain(series.iter().map(|s| s.to_string())) {
        assert!(text.contains(&series), "{series} missing from /metrics");
    }
}

/// Past `--resp-max-connections`, one more is told so and closed; a
/// connection closing frees its place.
async fn the_connection_cap_refuses_one_more(db: TestDb) {
    let p = spawn(&db, &["--resp-max-connections", "4"]).await;
    create(&p, "order", 1000).await;
    let addr = resp(&p);
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut c = Conn::open(&addr).await;
        c.call(&["PING"]).await;
        held.push(c);
    }
    let mut extra = Conn::open(&addr).await;
    let got = String::from_utf8(extra.until_closed().await).unwrap();
    assert_eq!(got, "-ERR max number of clients reached\r\n");
    let mut quitting = held.pop().unwrap();
    assert_eq!(quitting.call(&["QUIT"]).await, Reply::Simple("OK".into()));
    quitting.until_closed().await;
    // The place is free once the server saw the close.
    let mut again = None;
    for _ in 0..100 {
        let mut c = Conn::open(&addr).await;
        c.send(&["INCR", "order"]).await;
        let mut chunk = [0u8; 256];
        let n = tokio::time::timeout(PATIENCE, c.stream.read(&mut chunk))
            .await
            .unwrap()
            .unwrap_or(0);
        if chunk[..n].starts_with(b":") {
            again = Some(n);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        again.is_some(),
        "a freed place was never given to a new connection"
    );
}

/// With `--client-auth on`: no token NOAUTH, a wrong one WRONGPASS, one
/// outside its prefixes NOPERM (whether or not the name exists), a good one
/// draws; RESET forgets it.
async fn tokens_decide_as_on_http(db: TestDb) {
    let p = spawn(&db, &["--client-auth", "on"]).await;
    create(&p, "order", 1000).await;
    create(&p, "user", 1000).await;
    let token = common::cli_token(&db, "--label resp --prefix order --can draw").await;
    // The new token reaches the instance within its refresh.
    let addr = resp(&p);
    let mut c = Conn::open(&addr).await;
    c.refused(&["INCR", "order"], "NOAUTH ").await;
    c.refused(&["AUTH", "seqd_wrong"], "WRONGPASS ").await;
    let mut authed = false;
    for _ in 0..100 {
        if c.call(&["AUTH", "default", &token]).await == Reply::Simple("OK".into()) {
            authed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(authed, "the token never reached the instance");
    let id = c.call(&["INCR", "order"]).await.int();
    assert!(c.call(&["INCRBY", "order", "10"]).await.int() > id);
    c.refused(&["INCR", "user"], "NOPERM ").await;
    c.refused(&["INCR", "usernope"], "NOPERM ").await;
    assert_eq!(c.call(&["RESET"]).await, Reply::Simple("RESET".into()));
    c.refused(&["INCR", "order"], "NOAUTH ").await;
    // HELLO 3 with AUTH, and the RESP3 map.
    match c.call(&["HELLO", "3", "AUTH", "default", &token]).await {
        Reply::Array(kv) => {
            let proto = kv
                .iter()
                .position(|r| *r == Reply::Bulk(Some(b"proto".to_vec())))
                .unwrap();
            assert_eq!(kv[proto + 1], Reply::Int(3));
        }
        other => panic!("HELLO answered {other:?}"),
    }
    assert!(c.call(&["INCR", "order"]).await.int() > id);
    // Revoked by the CLI (as from another instance) while this connection
    // holds it: its next draws are refused within the refresh, not served
    // on the strength of the earlier AUTH.
    common::ok(&common::seqd_on(&db, &["tokens", "revoke", "resp"]).await);
    let mut refused = false;
    for _ in 0..100 {
        match c.call(&["INCR", "order"]).await {
            Reply::Int(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            other => {
                assert!(other.error().starts_with("NOAUTH "), "{other:?}");
                refused = true;
                break;
            }
        }
    }
    assert!(refused, "a revoked token kept drawing over RESP");
    c.refused(&["AUTH", &token], "WRONGPASS ").await;
    // No token in the log.
    assert!(!p.all_logs().iter().any(|l| l.contains(&token)));
}

/// A client that pipelines large answers and never reads them is closed
/// once the idle deadline passes with its replies unread; its answers are
/// written as they grow, not held whole, and others are served meanwhile.
async fn a_client_that_never_reads_is_closed(db: TestDb) {
    let p = spawn(&db, &["--resp-idle-timeout", "2s"]).await;
    create(&p, "order", 1_000_000).await;
    let addr = resp(&p);
    let mut hog = Conn::open(&addr).await;
    let mut pipeline = Vec::new();
    for _ in 0..2000 {
        pipeline.extend_from_slice(&frame(&["SEQD.BATCH", "order", "10000"]));
    }
    // The server stops reading once its replies back up; the write may
    // then block here, so it runs on its own.
    let writer = tokio::spawn(async move {
        let _ = hog.stream.write_all(&pipeline).await;
        hog
    });
    let http = server::client(Duration::from_secs(30));
    let mut closed = false;
    for _ in 0..300 {
        let text = server::fetch_text(http.get(format!("{}/metrics", p.base))).await;
        if text.contains(r#"seqd_resp_closed_total{reason="slow_reader"}"#) {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(closed, "a client that never read was never closed");
    let mut c = Conn::open(&addr).await;
    c.call(&["INCR", "order"]).await.int();
    writer.abort();
}

/// SIGTERM: open connections are closed after answering, and the process
/// exits cleanly.
async fn sigterm_closes_resp_connections(db: TestDb) {
    let mut p = spawn(&db, &[]).await;
    create(&p, "order", 1000).await;
    let mut c = Conn::open(&resp(&p)).await;
    assert_eq!(c.call(&["INCR", "order"]).await.int(), 1);
    p.signal("TERM");
    assert!(c.until_closed().await.is_empty());
    let status = tokio::time::timeout(PATIENCE, p.wait())
        .await
        .expect("seqd did not exit");
    assert!(status.success(), "{status:?}");
}

/// The database cut (the fault proxy drops every connection): a name with
/// IDs in memory is served on; one with none answers UNAVAILABLE after the
/// wait timeout, on a connection that keeps serving; once the database is
/// back the same connection draws again, above what it had.
async fn a_database_cut_answers_unavailable_and_the_connection_recovers(db: TestDb) {
    let proxy = proxy::Proxy::start(proxy::upstream_of(&db.url)).await;
    let p = Process::spawn(
        &proxy.url_for(&db.url),
        &["--resp-listen", "127.0.0.1:0", "--wait-timeout", "1s"],
    )
    .await;
    create(&p, "warm", 1000).await;
    create(&p, "cold", 1000).await;
    let mut c = Conn::open(&resp(&p)).await;
    let warm = c.call(&["INCR", "warm"]).await.int();
    proxy.cut();
    assert!(c.call(&["INCR", "warm"]).await.int() > warm);
    c.refused(&["INCRBY", "cold", "10"], "UNAVAILABLE ").await;
    c.refused(&["INCR", "cold"], "UNAVAILABLE ").await;
    assert_eq!(c.call(&["PING"]).await, Reply::Simple("PONG".into()));
    proxy.heal();
    let mut id = None;
    for _ in 0..100 {
        match c.call(&["INCR", "cold"]).await {
            Reply::Int(n) => {
                id = Some(n);
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    assert!(id.expect("INCR never served again after the database came back") >= 1);
}

per_backend!(
    hostile_input_closes_only_its_connection,
    a_refused_incrby_takes_nothing,
    a_transaction_draws_only_at_exec
);
tests_on_backends!(a_transaction_past_its_caps_is_aborted: sqlite => Sqlite);
tests_on_backends!(the_connection_cap_refuses_one_more: sqlite => Sqlite);
tests_on_backends!(tokens_decide_as_on_http: sqlite => Sqlite);
tests_on_backends!(a_client_that_never_reads_is_closed: sqlite => Sqlite);
tests_on_backends!(sigterm_closes_resp_connections: sqlite => Sqlite);
tests_on_backends!(the_parser_reads_what_redis_reads: sqlite => Sqlite);

/// The row's `max_id` as `GET /v1/sequences/{name}` reads it.
async fn max_id(p: &Process, name: &str) -> i64 {
    let http = server::client(Duration::from_secs(30));
    let row = server::fetch_json(http.get(format!("{}/v1/sequences/{name}", p.base))).await;
    row["max_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no max_id in {row}"))
}

/// A refused `INCRBY` takes nothing: not the rest of the segment (the next
/// `INCR` follows the last), not a reservation beyond the one segment a
/// name's first use loads (whose IDs the next `INCR` gets).
async fn a_refused_incrby_takes_nothing(db: TestDb) {
    let p = spawn(&db, &[]).await;
    create(&p, "order", 1000).await;
    create(&p, "cold", 1000).await;
    let mut c = Conn::open(&resp(&p)).await;
    for expected in 1..=4 {
        assert_eq!(c.call(&["INCR", "order"]).await.int(), expected);
    }
    // Its segments are of 1,000 and more, as the measured rate asks.
    c.refused(
        &["INCRBY", "order", "5000"],
        "ERR sequence 'order' is served in segments of ",
    )
    .await;
    assert_eq!(c.call(&["INCR", "order"]).await.int(), 5);

    c.refused(&["INCRBY", "cold", "5000"], "ERR sequence 'cold'")
        .await;
    assert_eq!(max_id(&p, "cold").await, 1000, "one segment reserved");
    assert_eq!(c.call(&["INCR", "cold"]).await.int(), 1);
    assert_eq!(c.call(&["INCRBY", "cold", "10"]).await.int(), 11);
    assert_eq!(max_id(&p, "cold").await, 1000);
}

/// `MULTI`/`EXEC`/`DISCARD` answer as redis-server 7.0 answers them (its
/// replies' words, tried against it), and nothing is drawn before `EXEC`:
/// a queued command is checked whole (an unknown command, a wrong arity, a
/// bad name or count is refused and aborts the transaction), `EXEC` runs
/// the queue in order and answers the array of the replies, errors in
/// their place; `DISCARD`, `RESET`, `QUIT` and an aborted `EXEC` draw
/// nothing; `WATCH` is refused.
async fn a_transaction_draws_only_at_exec(db: TestDb) {
    let p = spawn(&db, &[]).await;
    create(&p, "order", 1000).await;
    let addr = resp(&p);
    let mut c = Conn::open(&addr).await;
    let mut other = Conn::open(&addr).await;
    let simple = |s: &str| Reply::Simple(s.into());
    let error = |s: &str| Reply::Error(s.into());

    assert_eq!(c.call(&["MULTI"]).await, simple("OK"));
    for cmd in [
        &["INCR", "order"][..],
        &["INCRBY", "order", "10"],
        &["PING"],
        &["INCR", "nope"],
        &["SEQD.BATCH", "order", "2"],
    ] {
        assert_eq!(c.call(cmd).await, simple("QUEUED"), "{cmd:?}");
    }
    assert_eq!(other.call(&["INCR", "order"]).await.int(), 1, "drawn early");
    let Reply::Array(replies) = c.call(&["EXEC"]).await else {
        panic!("EXEC answered no array");
    };
    assert_eq!(replies.len(), 5, "{replies:?}");
    assert_eq!(replies[0], Reply::Int(2));
    assert_eq!(replies[1], Reply::Int(12));
    assert_eq!(replies[2], simple("PONG"));
    assert!(replies[3].error().starts_with("NOSEQ "), "{replies:?}");
    assert_eq!(
        replies[4],
        Reply::Array(vec![Reply::Int(13), Reply::Int(14)])
    );
    assert_eq!(other.call(&["INCR", "order"]).await.int(), 15);

    // An error while queuing: answered, and EXEC discards the transaction.
    assert_eq!(c.call(&["MULTI"]).await, simple("OK"));
    assert_eq!(c.call(&["INCR", "order"]).await, simple("QUEUED"));
    c.refused(&["GET", "x"], "ERR unknown command 'GET'").await;
    c.refused(&["INCRBY", "order", "0"], "ERR INCRBY takes a count")
        .await;
    c.refused(&["INCR"], "ERR wrong number of arguments").await;
    assert_eq!(c.call(&["INCR", "order"]).await, simple("QUEUED"));
    assert_eq!(
        c.call(&["EXEC"]).await,
        error("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(c.call(&["INCR", "order"]).await.int(), 16);

    // DISCARD drops the queue.
    assert_eq!(c.call(&["MULTI"]).await, simple("OK"));
    assert_eq!(c.call(&["INCRBY", "order", "100"]).await, simple("QUEUED"));
    assert_eq!(c.call(&["DISCARD"]).await, simple("OK"));
    assert_eq!(c.call(&["INCR", "order"]).await.int(), 17);

    // Nested MULTI and WATCH inside: refused, the transaction goes on.
    assert_eq!(c.call(&["MULTI"]).await, simple("OK"));
    assert_eq!(
        c.call(&["MULTI"]).await,
        error("ERR MULTI calls can not be nested")
    );
    assert_eq!(
        c.call(&["WATCH", "order"]).await,
        error("ERR WATCH inside MULTI is not allowed")
    );
    assert_eq!(c.call(&["INCR", "order"]).await, simple("QUEUED"));
    assert_eq!(c.call(&["EXEC"]).await, Reply::Array(vec![Reply::Int(18)]));
    assert_eq!(c.call(&["MULTI"]).await, simple("OK"));
    assert_eq!(c.call(&["EXEC"]).await, Reply::Array(vec![]));

    // Outside a transaction.
    assert_eq!(c.call(&["EXEC"]).await, error("ERR EXEC without MULTI"));
    assert_eq!(
        c.call(&["DISCARD"]).await,
        error("ERR DISCARD without MULTI")
    );
    c.refused(&["WATCH", "order"], "ERR WATCH is not supported")
        .await;

    // EXEC with an argument ends the transaction; RESET discards it.
    assert_eq!(c.call(&["MULTI"]).await, simple("OK"));
    assert_eq!(c.call(&["INCR", "order"]).await, simple("QUEUED"));
    assert_eq!(
        c.call(&["EXEC", "now"]).await,
        error(
            "EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' \
             command"
        )
    );
    assert_eq!(c.call(&["EXEC"]).await, error("ERR EXEC without MULTI"));
    assert_eq!(c.call(&["MULTI"]).await, simple("OK"));
    assert_eq!(c.call(&["INCR", "order"]).await, simple("QUEUED"));
    assert_eq!(c.call(&["RESET"]).await, simple("RESET"));
    assert_eq!(c.call(&["EXEC"]).await, error("ERR EXEC without MULTI"));
    assert_eq!(c.call(&["INCR", "order"]).await.int(), 19);

    // MULTI, 101 INCR and EXEC in one write: 101 consecutive IDs.
    let mut pipeline = frame(&["MULTI"]);
    for _ in 0..101 {
        pipeline.extend_from_slice(&frame(&["INCR", "order"]));
    }
    pipeline.extend_from_slice(&frame(&["EXEC"]));
    assert_eq!(c.raw(&pipeline).await, simple("OK"));
    for _ in 0..101 {
        assert_eq!(c.reply().await, simple("QUEUED"));
    }
    let Reply::Array(ids) = c.reply().await else {
        panic!("EXEC answered no array");
    };
    let ids: Vec<i64> = ids.iter().map(Reply::int).collect();
    assert_eq!(ids, (20..121).collect::<Vec<_>>());

    // QUIT inside a transaction closes the connection, nothing drawn.
    assert_eq!(c.call(&["MULTI"]).await, simple("OK"));
    assert_eq!(c.call(&["INCR", "order"]).await, simple("QUEUED"));
    assert_eq!(c.call(&["QUIT"]).await, simple("OK"));
    assert!(c.until_closed().await.is_empty());
    assert_eq!(other.call(&["INCR", "order"]).await.int(), 121);

    assert_series(
        &p,
        &[
            ("multi", "ok"),
            ("incr", "queued"),
            ("exec", "ok"),
            ("exec", "execabort"),
            ("discard", "ok"),
            ("watch", "err"),
        ],
        &[],
    )
    .await;
}

/// A transaction may queue at most 10,000 commands and 1 MiB of arguments:
/// the command past either is refused and the transaction aborted (its
/// queue dropped at once, EXEC answers EXECABORT), so a client cannot grow
/// the server's memory by never sending EXEC; nothing was drawn.
async fn a_transaction_past_its_caps_is_aborted(db: TestDb) {
    let p = spawn(&db, &[]).await;
    create(&p, "order", 1000).await;
    let mut c = Conn::open(&resp(&p)).await;
    let too_many = "ERR a transaction holds at most 10000 commands and 1048576 bytes of arguments";

    let mut pipeline = frame(&["MULTI"]);
    for _ in 0..10_001 {
        pipeline.extend_from_slice(&frame(&["INCR", "order"]));
    }
    assert_eq!(c.raw(&pipeline).await, Reply::Simple("OK".into()));
    for _ in 0..10_000 {
        assert_eq!(c.reply().await, Reply::Simple("QUEUED".into()));
    }
    let e = c.reply().await;
    assert!(e.error().starts_with(too_many), "{e:?}");
    c.refused(&["EXEC"], "EXECABORT ").await;

    let big = "x".repeat(60_000);
    assert_eq!(c.call(&["MULTI"]).await, Reply::Simple("OK".into()));
    for _ in 0..17 {
        assert_eq!(
            c.call(&["ECHO", &big]).await,
            Reply::Simple("QUEUED".into())
        );
    }
    c.refused(&["ECHO", &big], too_many).await;
    c.refused(&["EXEC"], "EXECABORT ").await;
    assert_eq!(c.call(&["INCR", "order"]).await.int(), 1);
}

/// Bytes read as redis-server 7.0 reads them (networking.c's
/// processMultibulkBuffer, string2ll and sdssplitargs; each case tried
/// against it): lengths and counts with a sign, a leading zero or a space
/// are refused, inline commands take Redis's quotes and escapes. Each case
/// gets the same kind of reply as from Redis: the value, the same error,
/// or a protocol error and the connection closed.
async fn the_parser_reads_what_redis_reads(db: TestDb) {
    let p = spawn(&db, &[]).await;
    create(&p, "order", 1000).await;
    let addr = resp(&p);
    let (multibulk, bulk) = ("invalid multibulk length", "invalid bulk length");
    let quotes = "unbalanced quotes in request";
    for (bytes, closed_with) in [
        (&b"*+1\r\n$4\r\nPING\r\n"[..], multibulk),
        (b"*01\r\n$4\r\nPING\r\n", multibulk),
        (b"*-0\r\n", multibulk),
        (b"* 1\r\n$4\r\nPING\r\n", multibulk),
        (b"*1\r\n$+4\r\nPING\r\n", bulk),
        (b"*1\r\n$04\r\nPING\r\n", bulk),
        (b"*1\r\n$-0\r\nPING\r\n", bulk),
        (b"ECHO \"ab\"cd\r\n", quotes),
        (b"ECHO 'ab'cd\r\n", quotes),
        (b"ECHO \"a\"\"b\"\r\n", quotes),
        (b"ECHO a\"b\r\n", quotes),
        (b"ECHO 'a\\\\'\r\n", quotes),
    ] {
        let mut c = Conn::open(&addr).await;
        c.stream.write_all(bytes).await.unwrap();
        let got = String::from_utf8(c.until_closed().await).unwrap();
        let shown = String::from_utf8_lossy(bytes);
        assert_eq!(
            got,
            format!("-ERR Protocol error: {closed_with}\r\n"),
            "{shown:?}"
        );
    }
    let mut c = Conn::open(&addr).await;
    for (bytes, answer) in [
        (&b"*-1\r\n*1\r\n$4\r\nPING\r\n"[..], &b"PONG"[..]),
        (
            b"ECHO \"a\\x41\\x4a\\n\\r\\t\\b\\a\\z\\\\\\\"\"\r\n",
            b"aAJ\n\r\t\x08\x07z\\\"",
        ),
        (b"ECHO \"\\xZZ\\x4\"\r\n", b"xZZx4"),
        (b"ECHO 'a\\'b\\n'\r\n", b"a'b\\n"),
        (b"ECHO ab\"c d\"\r\n", b"abc d"),
        (b"ECHO a'b'\r\n", b"ab"),
        (b"ECHO \"\"\r\n", b""),
        (b"ECHO \"a\"\x0b\r\n", b"a"),
        (b"ECHO a\x0bb\r\n", b"a\x0bb"),
        (b"\x0bECHO\t\x0c x\r\r\n", b"x"),
    ] {
        let shown = String::from_utf8_lossy(bytes).into_owned();
        let got = c.raw(bytes).await;
        let expected = if answer == b"PONG" {
            Reply::Simple("PONG".into())
        } else {
            Reply::Bulk(Some(answer.to_vec()))
        };
        assert_eq!(got, expected, "{shown:?}");
    }
    // A count with a sign, a leading zero or a space: inline, and as a
    // frame (`*3 $6 INCRBY $5 order $2 +5`).
    let not_an_integer = Reply::Error("ERR value is not an integer or out of range".into());
    for line in [
        "INCRBY order +5",
        "INCRBY order 05",
        "INCRBY order -0",
        "INCRBY order \" 5\"",
        "INCRBY order \"5 \"",
        "SEQD.BATCH order +2",
    ] {
        let got = c.raw(format!("{line}\r\n").as_bytes()).await;
        assert_eq!(got, not_an_integer, "{line:?}");
    }
    let got = c.raw(&frame(&["INCRBY", "order", "+5"])).await;
    assert_eq!(got, not_an_integer, "INCRBY order +5 as a frame");
    assert_eq!(
        c.raw(b"INCR order\r\n").await,
        Reply::Int(1),
        "nothing drawn"
    );
}

const CONNECTIONS: usize = 32;
const RUNS_PER_CONNECTION: usize = 60;

/// `INCRBY order 100` from 32 connections over two instances, segments of
/// 250 so that runs straddle them: every run is the caller's alone.
async fn incrby_runs_are_disjoint_across_instances(db: TestDb) {
    let flags = ["--max-step", "250"];
    let a = spawn(&db, &flags).await;
    let b = spawn(&db, &flags).await;
    create(&a, "order", 250).await;
    let mut tasks = Vec::new();
    for i in 0..CONNECTIONS {
        let addr = resp(if i % 2 == 0 { &a } else { &b });
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::open(&addr).await;
            let mut runs = Vec::new();
            for _ in 0..RUNS_PER_CONNECTION {
                let r = c.call(&["INCRBY", "order", "100"]).await.int();
                runs.push((r - 99, r));
            }
            runs
        }));
    }
    let mut runs = Vec::new();
    for t in tasks {
        let mine = t.await.unwrap();
        // Each connection's runs increase.
        assert!(mine.windows(2).all(|w| w[0].1 < w[1].0), "{mine:?}");
        runs.extend(mine);
    }
    runs.sort();
    assert_eq!(runs.len(), CONNECTIONS * RUNS_PER_CONNECTION);
    for w in runs.windows(2) {
        assert!(w[0].1 < w[1].0, "runs {:?} and {:?} overlap", w[0], w[1]);
    }
    assert!(runs[0].0 >= 1);
}

/// `INCR` through an instance killed with SIGKILL and started again never
/// answers an ID it (or the other instance) answered before.
async fn incr_after_kill_never_repeats(db: TestDb) {
    let a = spawn(&db, &[]).await;
    let b = spawn(&db, &[]).await;
    create(&a, "order", 1000).await;
    let mut seen = HashSet::new();
    for p in [&a, &b] {
        let mut c = Conn::open(&resp(p)).await;
        for _ in 0..500 {
            assert!(seen.insert(c.call(&["INCR", "order"]).await.int()));
        }
    }
    a.signal("KILL");
    drop(a);
    let a = spawn(&db, &[]).await;
    for p in [&a, &b] {
        let mut c = Conn::open(&resp(p)).await;
        for _ in 0..500 {
            let id = c.call(&["INCR", "order"]).await.int();
            assert!(seen.insert(id), "{id} answered twice");
        }
    }
}

network_backends!(
    incrby_runs_are_disjoint_across_instances,
    incr_after_kill_never_repeats,
    a_database_cut_answers_unavailable_and_the_connection_recovers
);
