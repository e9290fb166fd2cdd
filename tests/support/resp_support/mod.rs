//! What tests/binary/resp_clients.rs shares among its clients: a seqd with a RESP
//! listener (in-process or the real binary), `redis-cli` run as a
//! subprocess, the Python script that drives redis-py and reads back what
//! it answered, and the Rust `redis` crate's connection and commands, each
//! with a bounded wait so that a hang fails the test.

use std::time::Duration;

use crate::support::common::{self, Backend, TestDb};
use crate::support::server::{self, Process, TestServer};
use redis::AsyncConnectionConfig;
use seqd::config::Settings;
use seqd::service::ClientAuth;
use serde_json::Value;

/// Longest a client call may take: a hang fails the test.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// How many commands each pipeline sends.
pub const PIPELINE: usize = 1000;

/// An in-process seqd on `db` with a RESP listener and `client_auth`; its
/// RESP address.
pub async fn resp_server(db: &TestDb, client_auth: ClientAuth) -> (TestServer, String) {
    let s = TestServer::start(Settings {
        resp_listen: Some(String::new()),
        client_auth,
        ..Settings::for_database(db.url.clone())
    })
    .await;
    let addr = s.resp.clone().expect("a RESP listener");
    (s, addr)
}

/// The real binary on `db` with a RESP listener and `extra` flags, the
/// plain sequences `names` created on it from 1 by 1,000; its RESP address.
pub async fn resp_process(db: &TestDb, extra: &[&str], names: &[&str]) -> (Process, String) {
    let mut args = vec!["--resp-listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let p = Process::spawn(&db.url, &args).await;
    let addr = p.resp.clone().expect("no resp_listen in the start-up line");
    let http = server::client(Duration::from_secs(30));
    for name in names {
        server::create_at(&http, &p.base, name, 1, 1000).await;
    }
    (p, addr)
}

/// A fresh SQLite database (never skipped).
pub async fn sqlite() -> TestDb {
    common::test_db(Backend::Sqlite)
        .await
        .expect("an SQLite test database")
}

/// A fresh SQLite database when the client a test needs is `available`;
/// `None` (the test is skipped) when not.
pub async fn sqlite_when(available: bool) -> Option<TestDb> {
    if available {
        Some(sqlite().await)
    } else {
        None
    }
}

/// `host` and `port` of `addr` (`127.0.0.1:PORT`).
pub fn host_port(addr: &str) -> (&str, &str) {
    addr.rsplit_once(':')
        .unwrap_or_else(|| panic!("no port in {addr}"))
}

/// Asserts `ids` are `PIPELINE` distinct, strictly increasing integers;
/// with one instance and no fault they are consecutive too (a segment
/// switch leaves no gap): from `first`.
#[track_caller]
pub fn assert_run(what: &str, ids: &[i64], first: i64) {
    assert_eq!(ids.len(), PIPELINE, "{what}: {} replies", ids.len());
    let distinct: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(distinct.len(), PIPELINE, "{what}: repeated IDs");
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "{what}: not increasing: {ids:?}"
    );
    let expected: Vec<i64> = (first..first + PIPELINE as i64).collect();
    assert_eq!(ids, expected.as_slice(), "{what}: not {first}..");
}

// ---------------------------------------------------------------- redis-cli

/// `redis-cli -h HOST -p PORT args` with `stdin`.
pub async fn cli_with(addr: &str, args: &[&str], stdin: &[u8]) -> common::Printed {
    let (host, port) = host_port(addr);
    let mut all = vec!["-h", host, "-p", port];
    all.extend_from_slice(args);
    common::run("redis-cli", &all, stdin).await
}

/// `redis-cli -h HOST -p PORT args`: what it printed, trimmed.
pub async fn cli(addr: &str, args: &[&str]) -> String {
    cli_with(addr, args, b"").await.text()
}

/// `redis-cli ... args` answered an integer: it.
pub async fn cli_int(addr: &str, args: &[&str]) -> i64 {
    cli_with(addr, args, b"")
        .await
        .int(&format!("redis-cli {args:?}"))
}

/// Asserts `text` (what a client printed) starts with `prefix`.
#[track_caller]
pub fn assert_starts(what: &str, text: &str, prefix: &str) {
    assert!(
        text.starts_with(prefix),
        "{what}: {text:?} does not start with {prefix:?}"
    );
}

// ---------------------------------------------------------------- Python

/// The Python side: `python3 - HOST PORT MODE [TOKEN]` prints one JSON
/// object of what redis-py answered, per protocol; the test asserts it.
/// A failed command is `{"error": class, "message": text}`, bytes are
/// `{"bytes": text}`.
pub const PYTHON: &str = r#"
import json, sys
import redis

host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
token = sys.argv[4] if len(sys.argv) > 4 else None

def plain(v):
    if isinstance(v, bytes):
        return {"bytes": v.decode()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, Exception):
        return {"error": type(v).__name__, "message": str(v)}
    return v

def attempt(f):
    try:
        return {"ok": plain(f())}
    except redis.RedisError as e:
        return plain(e)

def client(proto, **kw):
    return redis.Redis(host=host, port=port, protocol=proto, socket_timeout=30, **kw)

result = {}
for proto in (2, 3):
    out = {}
    if mode == "draw":
        name = "p%d" % proto
        # A RESP3 client checks HELLO 3's `proto` and refuses to go on
        # without 3: drawing at all proves it.
        r = client(proto)
        out["incr"] = [r.execute_command("INCR", name), r.incr(name)]
        out["incrby"] = r.incrby(name, 100)
        out["after"] = r.execute_command("INCR", name)
        p = r.pipeline(transaction=False)
        for _ in range(1000):
            p.execute_command("INCR", name)
        out["pipeline"] = p.execute()
        out["batch"] = r.execute_command("SEQD.BATCH", name, 5)
        p = r.pipeline(transaction=False)
        p.execute_command("INCR", name)
        p.get("x")
        p.execute_command("INCR", "nope")
        p.execute_command("INCR", name)
        out["mixed"] = plain(p.execute(raise_on_error=False))
        out["get"] = attempt(lambda: r.get("x"))
        out["set"] = attempt(lambda: r.set("x", 1))
        out["select"] = attempt(lambda: r.execute_command("SELECT", 1))
        out["select0"] = attempt(lambda: r.execute_command("SELECT", 0))
        out["noseq"] = attempt(lambda: r.incr("nope"))
        out["zero"] = attempt(lambda: r.incrby(name, 0))
        out["db1"] = attempt(lambda: client(proto, db=1).incr(name))
        out["ping"] = r.ping()
        out["named"] = plain(client(proto, client_name="py").client_getname())
        out["last"] = r.incr(name)
    elif mode == "auth":
        good = client(proto, password=token)
        out["token"] = good.execute_command("INCR", "order")
        out["user"] = client(proto, username="anyone", password=token).incr("order")
        url = "redis://:%s@%s:%d/0" % (token, host, port)
        out["url"] = redis.Redis.from_url(url, protocol=proto, socket_timeout=30).incr("order")
        out["wrong"] = attempt(lambda: client(proto, password="seqd_not_a_token").incr("order"))
        out["none"] = attempt(lambda: client(proto).incr("order"))
        out["other"] = attempt(lambda: good.incr("other"))
    elif mode == "multi":
        name = "m%d" % proto
        r = client(proto)
        p = r.pipeline()
        for _ in range(101):
            p.incr(name)
        out["ids"] = p.execute()
        out["after"] = r.incr(name)
        p = r.pipeline()
        p.incr(name)
        p.get("x")
        p.incr(name)
        out["aborted"] = attempt(p.execute)
        out["next"] = r.incr(name)
    elif mode == "serial":
        r = client(proto)
        out["next"] = plain(r.execute_command("SEQD.NEXT", "inv"))
        out["batch"] = plain(r.execute_command("SEQD.BATCH", "inv", 2))
        out["incr"] = attempt(lambda: r.incr("inv"))
    result[str(proto)] = out
print(json.dumps(result))
"#;

/// Runs [`PYTHON`] in `mode` against `addr` (with `token`): its JSON.
/// Panics showing Python's stderr if it fails.
pub async fn python(addr: &str, mode: &str, token: Option<&str>) -> Value {
    let (host, port) = host_port(addr);
    let mut args = vec!["-", host, port, mode];
    args.extend(token);
    let out = common::run("python3", &args, PYTHON.as_bytes()).await;
    assert!(out.status.success(), "python {mode}: {out:?}");
    serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("python {mode}: {e}: {out:?}"))
}

/// An in-process seqd on `db` with `client_auth`, the plain sequences
/// `names` created from 1 by 1,000, and [`PYTHON`] run in `mode` against
/// its RESP listener (with `token`): the server and what Python printed.
pub async fn python_on(
    db: &TestDb,
    client_auth: ClientAuth,
    names: &[&str],
    mode: &str,
    token: Option<&str>,
) -> (TestServer, Value) {
    let (s, addr) = resp_server(db, client_auth).await;
    for name in names {
        s.create(name, 1, 1000).await;
    }
    let all = python(&addr, mode, token).await;
    (s, all)
}

/// Asserts the failed call `v` raised `class` with a message starting
/// with `prefix`.
#[track_caller]
pub fn assert_raised(what: &str, v: &Value, class: &str, prefix: &str) {
    assert_eq!(v["error"], class, "{what}: {v}");
    let message = v["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(prefix),
        "{what}: {message:?} does not start with {prefix:?}"
    );
}

/// The integers of the JSON array `v` (panics otherwise).
#[track_caller]
pub fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|i| {
            i.as_i64()
                .unwrap_or_else(|| panic!("{i} is not an integer"))
        })
        .collect()
}
// ---------------------------------------------------------------- Rust crate

/// A multiplexed connection of the `redis` crate to `url`, with timeouts
/// long enough for a loaded CI host (the crate's response timeout is
/// 500 ms by default, shorter than a first segment fetch may take there).
pub async fn rust_connect(url: &str) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(10)))
        .set_response_timeout(Some(Duration::from_secs(30)));
    redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// [`rust_connect`], asserted to succeed.
pub async fn rust_conn(url: &str) -> redis::aio::MultiplexedConnection {
    rust_connect(url)
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"))
}

/// Creates the plain sequence `name` on `s` (from 1 by 1,000) and connects
/// to `redis://{addr}/{query_string}` ([`rust_conn`]): the URL and the
/// connection.
pub async fn rust_conn_on(
    s: &TestServer,
    addr: &str,
    query_string: &str,
    name: &str,
) -> (String, redis::aio::MultiplexedConnection) {
    s.create(name, 1, 1000).await;
    let url = format!("redis://{addr}/{query_string}");
    let con = rust_conn(&url).await;
    (url, con)
}

/// `cmd args` on `con`: its reply as `T`.
pub async fn query<T: redis::FromRedisValue>(
    con: &mut redis::aio::MultiplexedConnection,
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    tokio::time::timeout(CLIENT_TIMEOUT, cmd.query_async(con))
        .await
        .unwrap_or_else(|_| panic!("{args:?} not answered within {CLIENT_TIMEOUT:?}"))
}

/// `cmd args` on `con`, answered an integer.
pub async fn rust_int(con: &mut redis::aio::MultiplexedConnection, args: &[&str]) -> i64 {
    query(con, args)
        .await
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// `cmd args` on `con`, refused: the error.
pub async fn rust_refused(
    con: &mut redis::aio::MultiplexedConnection,
    args: &[&str],
) -> redis::RedisError {
    match query::<redis::Value>(con, args).await {
        Ok(v) => panic!("{args:?} answered {v:?}, not an error"),
        Err(e) => e,
    }
}

/// Asserts the server refused with `code` and a text starting `prefix`.
#[track_caller]
pub fn assert_code(what: &str, e: &redis::RedisError, code: &str, prefix: &str) {
    assert_eq!(e.code(), Some(code), "{what}: {e}");
    let detail = e.detail().unwrap_or_default();
    assert!(
        detail.starts_with(prefix),
        "{what}: {detail:?} does not start with {prefix:?}"
    );
}
