//! The RESP door (docs/design.md, "The RESP door") through real Redis
//! clients, not one written here: `redis-cli` (Debian's redis-tools) as a
//! subprocess against the real binary, Python's `redis` package and the
//! Rust `redis` crate, each over RESP2 and RESP3. Each draws IDs with
//! `INCR` and `INCRBY` (the IDs checked exact, distinct and increasing,
//! `INCRBY n`'s run owned whole), pipelines 1,000 `INCR` and counts 1,000
//! distinct increasing replies, hears every refusal with its code (`GET`
//! unknown, `SELECT 1`, `NOSEQ`, bad counts; nothing issued by any of
//! them), authenticates with a client token under `--client-auth on`
//! (`NOAUTH` without one, `WRONGPASS` with a wrong one, `NOPERM` outside
//! its prefix), and reads a serial sequence's serials as bulk strings
//! (`INCR` on it: `WRONGTYPE`). The Rust crate's pipelines run on every
//! backend. (A client of bytes that sends what no library would is in
//! tests/resp.rs.)
//!
//! `redis-cli` and Python's `redis` are skipped with a line when missing,
//! and required under `SEQD_TEST_REQUIRE_ALL=1` (.ci/run installs both).

#[macro_use]
mod common;
mod server;

use std::time::Duration;

use common::{Backend, TestDb};
use redis::AsyncConnectionConfig;
use seqd::config::Settings;
use seqd::service::ClientAuth;
use serde_json::{json, Value};
use server::{Process, TestServer};

/// Longest a client call may take: a hang fails the test.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// How many commands each pipeline sends.
const PIPELINE: usize = 1000;

/// An in-process seqd on `db` with a RESP listener and `client_auth`; its
/// RESP address.
async fn resp_server(db: &TestDb, client_auth: ClientAuth) -> (TestServer, String) {
    let s = TestServer::start(Settings {
        resp_listen: Some(String::new()),
        client_auth,
        ..Settings::for_database(db.url.clone())
    })
    .await;
    let addr = s.resp.clone().expect("a RESP listener");
    (s, addr)
}

/// The real binary on `db` with a RESP listener and `extra` flags; its RESP
/// address.
async fn resp_process(db: &TestDb, extra: &[&str]) -> (Process, String) {
    let mut args = vec!["--resp-listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let p = Process::spawn(&db.url, &args).await;
    let addr = p.resp.clone().expect("no resp_listen in the start-up line");
    (p, addr)
}

/// Creates the plain sequence `name` from 1 by `step` over HTTP at `base`.
async fn create(base: &str, name: &str, step: i64) {
    let http = server::client(Duration::from_secs(30));
    server::create_at(&http, base, name, 1, step).await;
}

/// A fresh SQLite database (never skipped).
async fn sqlite() -> TestDb {
    common::test_db(Backend::Sqlite)
        .await
        .expect("an SQLite test database")
}

/// `host` and `port` of `addr` (`127.0.0.1:PORT`).
fn host_port(addr: &str) -> (&str, &str) {
    addr.rsplit_once(':')
        .unwrap_or_else(|| panic!("no port in {addr}"))
}

/// Asserts `ids` are `PIPELINE` distinct, strictly increasing integers;
/// with one instance and no fault they are consecutive too (a segment
/// switch leaves no gap): from `first`.
#[track_caller]
fn assert_run(what: &str, ids: &[i64], first: i64) {
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
async fn cli_with(addr: &str, args: &[&str], stdin: &[u8]) -> common::Printed {
    let (host, port) = host_port(addr);
    let mut all = vec!["-h", host, "-p", port];
    all.extend_from_slice(args);
    common::run("redis-cli", &all, stdin).await
}

/// `redis-cli -h HOST -p PORT args`: what it printed, trimmed.
async fn cli(addr: &str, args: &[&str]) -> String {
    cli_with(addr, args, b"").await.text()
}

/// `redis-cli ... args` answered an integer: it.
async fn cli_int(addr: &str, args: &[&str]) -> i64 {
    cli_with(addr, args, b"")
        .await
        .int(&format!("redis-cli {args:?}"))
}

/// Asserts `text` (what a client printed) starts with `prefix`.
#[track_caller]
fn assert_starts(what: &str, text: &str, prefix: &str) {
    assert!(
        text.starts_with(prefix),
        "{what}: {text:?} does not start with {prefix:?}"
    );
}

/// `redis-cli` draws exact IDs with `INCR` and `INCRBY`, speaks RESP3
/// after `-3`, and prints each refusal's code; no refusal issues an ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_cli_draws_ids_and_hears_every_refusal() {
    if !common::tool_available("redis-cli") {
        return;
    }
    let db = sqlite().await;
    let (p, addr) = resp_process(&db, &[]).await;
    create(&p.base, "order", 1000).await;

    // One instance, a fresh sequence, segments of 1,000: every ID in turn.
    let a = cli_int(&addr, &["INCR", "order"]).await;
    let b = cli_int(&addr, &["INCR", "order"]).await;
    assert_eq!((a, b), (1, 2), "INCR twice");
    let r = cli_int(&addr, &["INCRBY", "order", "100"]).await;
    assert_eq!(
        r,
        b + 100,
        "INCRBY order 100: the run [r-99, r] follows {b}"
    );
    assert_eq!(cli_int(&addr, &["INCR", "order"]).await, r + 1);
    assert_eq!(
        cli_int(&addr, &["incr", "order"]).await,
        r + 2,
        "lower case"
    );

    let get = cli(&addr, &["GET", "x"]).await;
    assert_starts("GET x", &get, "ERR unknown command 'GET'");
    assert!(get.contains("seqd serves IDs, not data"), "{get}");
    assert_starts(
        "SET x 1",
        &cli(&addr, &["SET", "x", "1"]).await,
        "ERR unknown command 'SET'",
    );
    assert_starts(
        "SELECT 1",
        &cli(&addr, &["SELECT", "1"]).await,
        "ERR seqd has one database",
    );
    assert_eq!(cli(&addr, &["SELECT", "0"]).await, "OK");
    assert_eq!(cli_int(&addr, &["-n", "0", "INCR", "order"]).await, r + 3);
    // `-n 1` sends SELECT 1 first: refused (redis-cli says so on stderr,
    // then runs the command all the same).
    let db1 = cli_with(&addr, &["-n", "1", "INCR", "order"], b"").await;
    assert!(
        db1.stderr
            .contains("SELECT 1 failed: ERR seqd has one database"),
        "{db1:?}"
    );
    assert_eq!(db1.stdout.trim(), (r + 4).to_string(), "{db1:?}");
    assert_starts(
        "INCR nope",
        &cli(&addr, &["INCR", "nope"]).await,
        "NOSEQ sequence 'nope' not found",
    );
    assert_eq!(
        cli(&addr, &["INCRBY", "order", "0"]).await,
        "ERR INCRBY takes a count from 1 to 10000, not 0"
    );
    assert_eq!(
        cli(&addr, &["INCRBY", "order", "10001"]).await,
        "ERR INCRBY takes a count from 1 to 10000, not 10001"
    );
    assert_eq!(
        cli(&addr, &["INCRBY", "order", "abc"]).await,
        "ERR value is not an integer or out of range"
    );
    assert_starts(
        "INCR (no name)",
        &cli(&addr, &["INCR"]).await,
        "ERR wrong number of arguments for 'incr' command",
    );
    assert_eq!(cli(&addr, &["PING"]).await, "PONG");
    assert_eq!(cli(&addr, &["ECHO", "hi there"]).await, "hi there");

    // RESP3: `-3` sends HELLO 3 first; HELLO's map then reads `proto 3`.
    let hello3 = cli(&addr, &["-3", "HELLO", "3"]).await;
    let lines: Vec<&str> = hello3.lines().map(str::trim).collect();
    assert!(lines.contains(&"proto 3"), "HELLO 3: {hello3}");
    assert!(lines.contains(&"server seqd"), "HELLO 3: {hello3}");
    // RESP2: the map is a flat array, `proto` then `2`.
    let hello2 = cli(&addr, &["HELLO", "2"]).await;
    let lines: Vec<&str> = hello2.lines().map(str::trim).collect();
    let at = lines.iter().position(|l| *l == "proto");
    assert_eq!(
        at.and_then(|i| lines.get(i + 1)),
        Some(&"2"),
        "HELLO 2: {hello2}"
    );
    assert_eq!(cli_int(&addr, &["-3", "INCR", "order"]).await, r + 5);
    assert_eq!(
        cli(&addr, &["-3", "SEQD.BATCH", "order", "3"]).await,
        format!("{}\n{}\n{}", r + 6, r + 7, r + 8)
    );
    // None of the refusals took an ID.
    assert_eq!(cli_int(&addr, &["SEQD.NEXT", "order"]).await, r + 9);
    assert_eq!(
        server::next_at(&server::client(Duration::from_secs(30)), &p.base, "order").await,
        r + 10,
        "HTTP follows RESP"
    );
}

/// `redis-cli --pipe` sends 1,000 `INCR` as RESP and counts 1,000 replies
/// and no error; 1,000 commands read from stdin then get 1,000 distinct
/// increasing IDs, the next ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_cli_pipes_a_thousand_incr() {
    if !common::tool_available("redis-cli") {
        return;
    }
    let db = sqlite().await;
    let (p, addr) = resp_process(&db, &[]).await;
    create(&p.base, "order", 1000).await;

    let frames = "*2\r\n$4\r\nINCR\r\n$5\r\norder\r\n".repeat(PIPELINE);
    let piped = cli_with(&addr, &["--pipe"], frames.as_bytes()).await;
    assert!(piped.status.success(), "{piped:?}");
    assert!(
        piped
            .stdout
            .contains(&format!("errors: 0, replies: {PIPELINE}")),
        "{piped:?}"
    );
    // The piped INCRs took 1..=1000 (and the segment switch at 1,000).
    assert_eq!(
        cli_int(&addr, &["INCR", "order"]).await,
        PIPELINE as i64 + 1
    );

    let lines = "INCR order\n".repeat(PIPELINE);
    let out = cli_with(&addr, &[], lines.as_bytes()).await;
    assert!(out.status.success(), "{out:?}");
    let ids: Vec<i64> = out
        .stdout
        .lines()
        .map(|l| {
            l.trim()
                .parse()
                .unwrap_or_else(|e| panic!("{l:?}: {e}: {out:?}"))
        })
        .collect();
    assert_run("1,000 INCR from stdin", &ids, PIPELINE as i64 + 2);

    // A pipeline whose middle commands fail: every reply, in order.
    let mixed = cli_with(&addr, &[], b"INCR order\nGET x\nINCR nope\nINCR order\n").await;
    let last = ids[PIPELINE - 1];
    let got: Vec<&str> = mixed.stdout.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(got.len(), 4, "{mixed:?}");
    assert_eq!(got[0], (last + 1).to_string(), "{mixed:?}");
    assert_starts("GET x", got[1], "ERR unknown command 'GET'");
    assert_starts("INCR nope", got[2], "NOSEQ");
    assert_eq!(got[3], (last + 2).to_string(), "{mixed:?}");
}

/// Under `--client-auth on`: `redis-cli` without `-a` hears `NOAUTH`; with
/// `-a TOKEN` (RESP2 `AUTH token`), `--user U --pass TOKEN` (`AUTH U
/// token`) and `-3 -a TOKEN` (`HELLO 3 AUTH default token`) it draws; a
/// wrong token is `WRONGPASS`; a name outside the token's prefix
/// `NOPERM`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_cli_authenticates_with_a_client_token() {
    if !common::tool_available("redis-cli") {
        return;
    }
    let db = sqlite().await;
    let token = common::cli_token(&db, "--label cli --prefix order --can draw").await;
    let (p, addr) = resp_process(&db, &["--client-auth", "on"]).await;
    create(&p.base, "order", 1000).await;
    create(&p.base, "other", 1000).await;

    assert_starts(
        "INCR without a token",
        &cli(&addr, &["INCR", "order"]).await,
        "NOAUTH",
    );
    let t = token.as_str();
    let with = |extra: &'static [&'static str]| {
        let mut args = vec!["-a", t, "--no-auth-warning"];
        args.extend_from_slice(extra);
        args
    };
    assert_eq!(cli_int(&addr, &with(&["INCR", "order"])).await, 1);
    assert_eq!(cli_int(&addr, &with(&["INCRBY", "order", "10"])).await, 11);
    assert_eq!(cli_int(&addr, &with(&["-3", "INCR", "order"])).await, 12);
    assert_eq!(
        cli_int(
            &addr,
            &[
                "--user",
                "anyone",
                "--pass",
                t,
                "--no-auth-warning",
                "INCR",
                "order"
            ]
        )
        .await,
        13
    );
    assert_starts(
        "INCR other",
        &cli(&addr, &with(&["INCR", "other"])).await,
        "NOPERM this token may not draw from this sequence",
    );
    // A wrong token: AUTH refused (redis-cli says so on stderr and goes
    // on), then the command unauthenticated.
    let wrong = cli_with(
        &addr,
        &[
            "-a",
            "seqd_not_a_token",
            "--no-auth-warning",
            "INCR",
            "order",
        ],
        b"",
    )
    .await;
    assert!(wrong.stderr.contains("WRONGPASS"), "{wrong:?}");
    assert_starts("INCR after a wrong AUTH", wrong.stdout.trim(), "NOAUTH");
    // AUTH on the connection, then INCR: the token holds for what follows.
    let typed = cli_with(&addr, &[], format!("AUTH {t}\nINCR order\n").as_bytes()).await;
    assert_eq!(typed.stdout.trim(), "OK\n14", "{typed:?}");
    assert_eq!(cli_int(&addr, &with(&["INCR", "order"])).await, 15);
}

// ---------------------------------------------------------------- Python

/// The Python side: `python3 - HOST PORT MODE [TOKEN]` prints one JSON
/// object of what redis-py answered, per protocol; the test asserts it.
/// A failed command is `{"error": class, "message": text}`, bytes are
/// `{"bytes": text}`.
const PYTHON: &str = r#"
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
async fn python(addr: &str, mode: &str, token: Option<&str>) -> Value {
    let (host, port) = host_port(addr);
    let mut args = vec!["-", host, port, mode];
    args.extend(token);
    let out = common::run("python3", &args, PYTHON.as_bytes()).await;
    assert!(out.status.success(), "python {mode}: {out:?}");
    serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("python {mode}: {e}: {out:?}"))
}

/// Asserts the failed call `v` raised `class` with a message starting
/// with `prefix`.
#[track_caller]
fn assert_raised(what: &str, v: &Value, class: &str, prefix: &str) {
    assert_eq!(v["error"], class, "{what}: {v}");
    let message = v["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(prefix),
        "{what}: {message:?} does not start with {prefix:?}"
    );
}

/// The integers of the JSON array `v` (panics otherwise).
#[track_caller]
fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|i| {
            i.as_i64()
                .unwrap_or_else(|| panic!("{i} is not an integer"))
        })
        .collect()
}

/// redis-py over RESP2 and RESP3: `INCR`, `INCRBY`, a pipeline of 1,000
/// `INCR` (1,000 distinct increasing IDs), `SEQD.BATCH`, a pipeline with
/// failures in the middle (each answered in its place), each refusal as
/// `ResponseError` with seqd's text (`GET`, `SET`, `SELECT 1`, `db=1`,
/// `NOSEQ`, `INCRBY 0`), none of them taking an ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_redis_draws_over_resp2_and_resp3() {
    if !common::python_redis_available() {
        return;
    }
    let db = sqlite().await;
    let (s, addr) = resp_server(&db, ClientAuth::Off).await;
    s.create("p2", 1, 1000).await;
    s.create("p3", 1, 1000).await;
    let all = python(&addr, "draw", None).await;
    for proto in ["2", "3"] {
        let out = &all[proto];
        let what = |w: &str| format!("RESP{proto} {w}");
        assert_eq!(out["incr"], json!([1, 2]), "{}", what("INCR, INCRBY 1"));
        assert_eq!(out["incrby"], 102, "{}", what("INCRBY 100"));
        assert_eq!(out["after"], 103, "{}", what("INCR after INCRBY"));
        let ids = ints(&out["pipeline"]);
        assert_run(&what("pipeline of 1,000 INCR"), &ids, 104);
        assert_eq!(ints(&out["batch"]), (1104..1109).collect::<Vec<_>>());
        let mixed = out["mixed"].as_array().unwrap();
        assert_eq!(mixed.len(), 4, "{}", what("mixed pipeline"));
        assert_eq!(mixed[0], 1109, "{}", what("mixed pipeline"));
        assert_raised(
            &what("GET in a pipeline"),
            &mixed[1],
            "ResponseError",
            "unknown command 'GET'",
        );
        assert_raised(
            &what("INCR nope in a pipeline"),
            &mixed[2],
            "ResponseError",
            "NOSEQ sequence 'nope' not found",
        );
        assert_eq!(mixed[3], 1110, "{}", what("mixed pipeline"));
        assert_raised(
            &what("get"),
            &out["get"],
            "ResponseError",
            "unknown command 'GET': seqd serves IDs, not data",
        );
        assert_raised(
            &what("set"),
            &out["set"],
            "ResponseError",
            "unknown command 'SET'",
        );
        assert_raised(
            &what("SELECT 1"),
            &out["select"],
            "ResponseError",
            "seqd has one database",
        );
        assert_eq!(out["select0"], json!({"ok": true}), "{}", what("SELECT 0"));
        assert_raised(&what("incr nope"), &out["noseq"], "ResponseError", "NOSEQ");
        assert_raised(
            &what("incrby 0"),
            &out["zero"],
            "ResponseError",
            "INCRBY takes a count from 1 to 10000, not 0",
        );
        assert_raised(
            &what("Redis(db=1)"),
            &out["db1"],
            "ResponseError",
            "seqd has one database",
        );
        assert_eq!(out["ping"], true, "{}", what("ping"));
        // RESP2 replies are decoded by redis-py's callback, RESP3 not.
        assert!(
            out["named"] == "py" || out["named"] == json!({"bytes": "py"}),
            "{}: {}",
            what("CLIENT GETNAME"),
            out["named"]
        );
        assert_eq!(out["last"], 1111, "{}: refusals took nothing", what("INCR"));
    }
    assert_eq!(s.next("p2").await, 1112, "HTTP follows RESP");
    s.stop().await;
}

/// redis-py's default `pipeline()` is a transaction (`MULTI`, the
/// commands, `EXEC`), RESP2 and RESP3, on every backend: 101 `INCR` answer
/// 101 consecutive IDs and the next `INCR` follows them; one with a command
/// seqd refuses (`GET`) raises that error and draws nothing.
async fn python_redis_transactions_answer_every_id(db: TestDb) {
    if !common::python_redis_available() {
        return;
    }
    let (s, addr) = resp_server(&db, ClientAuth::Off).await;
    s.create("m2", 1, 1000).await;
    s.create("m3", 1, 1000).await;
    let all = python(&addr, "multi", None).await;
    for proto in ["2", "3"] {
        let out = &all[proto];
        let what = |w: &str| format!("RESP{proto} {w}");
        assert_eq!(
            ints(&out["ids"]),
            (1..=101).collect::<Vec<_>>(),
            "{}",
            what("pipeline() of 101 INCR")
        );
        assert_eq!(out["after"], 102, "{}", what("INCR after it"));
        assert_raised(
            &what("a transaction with GET"),
            &out["aborted"],
            "ResponseError",
            "Command # 2 (GET x) of pipeline caused error: unknown command 'GET'",
        );
        assert_eq!(out["next"], 103, "{}", what("the aborted one drew nothing"));
    }
    s.stop().await;
}
per_backend!(python_redis_transactions_answer_every_id);

/// redis-py under `--client-auth on`, RESP2 and RESP3: `password=token`
/// (with or without a user name, or in the URL) draws; a wrong token
/// raises `AuthenticationError` (`WRONGPASS`), none too (`NOAUTH`); a name
/// outside the prefix `NoPermissionError` (`NOPERM`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_redis_authenticates_with_a_client_token() {
    if !common::python_redis_available() {
        return;
    }
    let db = sqlite().await;
    let token = common::cli_token(&db, "--label py --prefix order --can draw").await;
    let (s, addr) = resp_server(&db, ClientAuth::On).await;
    s.create("order", 1, 1000).await;
    s.create("other", 1, 1000).await;
    let all = python(&addr, "auth", Some(&token)).await;
    for (proto, first) in [("2", 1), ("3", 4)] {
        let out = &all[proto];
        let what = |w: &str| format!("RESP{proto} {w}");
        assert_eq!(out["token"], first, "{}", what("password=token"));
        assert_eq!(out["user"], first + 1, "{}", what("username, password"));
        assert_eq!(out["url"], first + 2, "{}", what("redis://:token@"));
        assert_raised(
            &what("a wrong token"),
            &out["wrong"],
            "AuthenticationError",
            "invalid token: unknown, expired or revoked",
        );
        assert_raised(
            &what("no token"),
            &out["none"],
            "AuthenticationError",
            "this command needs a client token",
        );
        assert_raised(
            &what("outside the prefix"),
            &out["other"],
            "NoPermissionError",
            "this token may not draw from this sequence",
        );
    }
    s.stop().await;
}

// ---------------------------------------------------------------- Rust crate

/// A multiplexed connection of the `redis` crate to `url`, with timeouts
/// long enough for a loaded CI host (the crate's response timeout is
/// 500 ms by default, shorter than a first segment fetch may take there).
async fn rust_connect(url: &str) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(10)))
        .set_response_timeout(Some(Duration::from_secs(30)));
    redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// [`rust_connect`], asserted to succeed.
async fn rust_conn(url: &str) -> redis::aio::MultiplexedConnection {
    rust_connect(url)
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"))
}

/// `cmd args` on `con`: its reply as `T`.
async fn query<T: redis::FromRedisValue>(
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
async fn rust_int(con: &mut redis::aio::MultiplexedConnection, args: &[&str]) -> i64 {
    query(con, args)
        .await
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// `cmd args` on `con`, refused: the error.
async fn rust_refused(
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
fn assert_code(what: &str, e: &redis::RedisError, code: &str, prefix: &str) {
    assert_eq!(e.code(), Some(code), "{what}: {e}");
    let detail = e.detail().unwrap_or_default();
    assert!(
        detail.starts_with(prefix),
        "{what}: {detail:?} does not start with {prefix:?}"
    );
}

/// The Rust `redis` crate, RESP2 and RESP3, on every backend: `INCR`, a
/// `redis::pipe()` of 1,000 `INCR` (1,000 distinct increasing IDs),
/// `INCRBY` (its run follows), `SEQD.BATCH`, and 8 tasks sharing one
/// multiplexed connection, 100 `INCR` each: 800 distinct IDs.
async fn rust_redis_pipelines_a_thousand_incr(db: TestDb) {
    let (s, addr) = resp_server(&db, ClientAuth::Off).await;
    for (query_string, name) in [("", "r2"), ("?protocol=resp3", "r3")] {
        s.create(name, 1, 1000).await;
        let url = format!("redis://{addr}/{query_string}");
        let mut con = rust_conn(&url).await;
        assert_eq!(rust_int(&mut con, &["INCR", name]).await, 1, "{url}");
        let mut pipe = redis::pipe();
        for _ in 0..PIPELINE {
            pipe.cmd("INCR").arg(name);
        }
        let ids: Vec<i64> = tokio::time::timeout(CLIENT_TIMEOUT, pipe.query_async(&mut con))
            .await
            .expect("the pipeline answered in time")
            .unwrap_or_else(|e| panic!("{url}: pipeline: {e}"));
        assert_run(&format!("{url}: pipe of 1,000 INCR"), &ids, 2);
        let r = rust_int(&mut con, &["INCRBY", name, "100"]).await;
        assert_eq!(r, 1101, "{url}: INCRBY 100 after 1,001");
        assert_eq!(rust_int(&mut con, &["INCR", name]).await, r + 1, "{url}");
        let batch: Vec<i64> = query(&mut con, &["SEQD.BATCH", name, "3"]).await.unwrap();
        assert_eq!(batch, vec![r + 2, r + 3, r + 4], "{url}: SEQD.BATCH");

        // Concurrent commands on clones of one connection: interleaved on
        // the wire, each answer to its own caller.
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let mut con = con.clone();
                let name = name.to_owned();
                tokio::spawn(async move {
                    let mut ids = Vec::with_capacity(100);
                    for _ in 0..100 {
                        ids.push(rust_int(&mut con, &["INCR", &name]).await);
                    }
                    ids
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            let ids = t.await.unwrap();
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "{url}: {ids:?}");
            all.extend(ids);
        }
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 800, "{url}: repeated IDs among 8 tasks");
        assert!(all[0] > r + 4, "{url}: {} after {}", all[0], r + 4);
        let after = rust_int(&mut con, &["INCR", name]).await;
        assert!(after > all[799], "{url}: {after} after {}", all[799]);
        assert!(s.next(name).await > after, "{url}: HTTP follows RESP");
    }
    s.stop().await;
}
per_backend!(rust_redis_pipelines_a_thousand_incr);

/// The Rust crate's atomic pipeline (`redis::pipe().atomic()`: `MULTI`,
/// the commands, `EXEC`), RESP2 and RESP3, on every backend: 101 `INCR`
/// answer 101 consecutive IDs and the next `INCR` follows them; one with a
/// command seqd refuses fails whole and draws nothing.
async fn rust_redis_atomic_pipelines_answer_every_id(db: TestDb) {
    let (s, addr) = resp_server(&db, ClientAuth::Off).await;
    for (query_string, name) in [("", "a2"), ("?protocol=resp3", "a3")] {
        s.create(name, 1, 1000).await;
        let url = format!("redis://{addr}/{query_string}");
        let mut con = rust_conn(&url).await;
        let mut pipe = redis::pipe();
        pipe.atomic();
        for _ in 0..101 {
            pipe.cmd("INCR").arg(name);
        }
        let ids: Vec<i64> = tokio::time::timeout(CLIENT_TIMEOUT, pipe.query_async(&mut con))
            .await
            .expect("the transaction answered in time")
            .unwrap_or_else(|e| panic!("{url}: atomic pipeline: {e}"));
        assert_eq!(ids, (1..=101).collect::<Vec<_>>(), "{url}");
        assert_eq!(rust_int(&mut con, &["INCR", name]).await, 102, "{url}");

        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("INCR")
            .arg(name)
            .cmd("GET")
            .arg("x")
            .cmd("INCR")
            .arg(name);
        let e = pipe
            .query_async::<Vec<i64>>(&mut con)
            .await
            .expect_err("a transaction with GET is refused");
        assert!(
            matches!(e.code(), Some("ERR" | "EXECABORT")),
            "{url}: {e} ({:?})",
            e.code()
        );
        assert_eq!(
            rust_int(&mut con, &["INCR", name]).await,
            103,
            "{url}: the aborted transaction drew nothing"
        );
    }
    s.stop().await;
}
per_backend!(rust_redis_atomic_pipelines_answer_every_id);

/// The Rust crate hears each refusal with its code and seqd's text, RESP2
/// and RESP3: `GET`, `SELECT 1` (as a command and as `redis://…/1`, which
/// fails the connection), `NOSEQ`, bad counts, errors inside a pipeline
/// (`ignore_errors`: each in its place); the connection serves on and no
/// refusal took an ID. A plain sequence's `SEQD.NEXT` is an integer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rust_redis_hears_every_refusal() {
    let db = sqlite().await;
    let (s, addr) = resp_server(&db, ClientAuth::Off).await;
    s.create("order", 1, 1000).await;
    let mut next = 1;
    for query_string in ["", "?protocol=resp3"] {
        let url = format!("redis://{addr}/{query_string}");
        let mut con = rust_conn(&url).await;
        let what = |w: &str| format!("{url}: {w}");
        assert_code(
            &what("GET x"),
            &rust_refused(&mut con, &["GET", "x"]).await,
            "ERR",
            "unknown command 'GET': seqd serves IDs, not data",
        );
        assert_code(
            &what("DEL x"),
            &rust_refused(&mut con, &["DEL", "x"]).await,
            "ERR",
            "unknown command 'DEL'",
        );
        assert_code(
            &what("SELECT 1"),
            &rust_refused(&mut con, &["SELECT", "1"]).await,
            "ERR",
            "seqd has one database",
        );
        let ok: redis::Value = query(&mut con, &["SELECT", "0"]).await.unwrap();
        assert_eq!(ok, redis::Value::Okay, "{}", what("SELECT 0"));
        assert_code(
            &what("INCR nope"),
            &rust_refused(&mut con, &["INCR", "nope"]).await,
            "NOSEQ",
            "sequence 'nope' not found",
        );
        assert_code(
            &what("INCRBY 0"),
            &rust_refused(&mut con, &["INCRBY", "order", "0"]).await,
            "ERR",
            "INCRBY takes a count from 1 to 10000, not 0",
        );
        assert_code(
            &what("INCRBY -5"),
            &rust_refused(&mut con, &["INCRBY", "order", "-5"]).await,
            "ERR",
            "INCRBY takes a count from 1 to 10000, not -5",
        );
        assert_code(
            &what("SEQD.BATCH 10001"),
            &rust_refused(&mut con, &["SEQD.BATCH", "order", "10001"]).await,
            "ERR",
            "SEQD.BATCH takes a count from 1 to 10000, not 10001",
        );
        assert_code(
            &what("INCRBY x"),
            &rust_refused(&mut con, &["INCRBY", "order", "x"]).await,
            "ERR",
            "value is not an integer or out of range",
        );
        // A plain sequence's SEQD.NEXT: an integer reply.
        let v: redis::Value = query(&mut con, &["SEQD.NEXT", "order"]).await.unwrap();
        assert_eq!(v, redis::Value::Int(next), "{}", what("SEQD.NEXT"));
        next += 1;
        // Errors inside a pipeline: each in its place.
        let mut pipe = redis::pipe();
        pipe.cmd("INCR")
            .arg("order")
            .cmd("GET")
            .arg("x")
            .cmd("INCR")
            .arg("nope")
            .cmd("INCR")
            .arg("order")
            .ignore_errors();
        let got: Vec<redis::RedisResult<i64>> = pipe.query_async(&mut con).await.unwrap();
        assert_eq!(got.len(), 4, "{}", what("pipeline"));
        assert_eq!(got[0].as_ref().ok(), Some(&next), "{}", what("pipeline"));
        let e = got[1].as_ref().unwrap_err();
        assert_code(
            &what("GET in a pipeline"),
            e,
            "ERR",
            "unknown command 'GET'",
        );
        let e = got[2].as_ref().unwrap_err();
        assert_code(&what("INCR nope in a pipeline"), e, "NOSEQ", "sequence");
        assert_eq!(
            got[3].as_ref().ok(),
            Some(&(next + 1)),
            "{}",
            what("pipeline")
        );
        next += 2;
        // Without ignore_errors the pipeline fails whole, its INCRs still
        // served (the next ID is past them).
        let mut pipe = redis::pipe();
        pipe.cmd("INCR").arg("order").cmd("GET").arg("x");
        assert!(
            pipe.query_async::<Vec<i64>>(&mut con).await.is_err(),
            "{url}"
        );
        next += 1;
        assert_eq!(rust_int(&mut con, &["INCR", "order"]).await, next, "{url}");
        next += 1;

        // redis://…/1 sends SELECT 1 while connecting: refused, no connection.
        let db1 = format!("redis://{addr}/1{query_string}");
        let e = rust_connect(&db1).await.expect_err("SELECT 1 refused");
        assert!(
            e.to_string().contains("seqd has one database"),
            "{db1}: {e}"
        );
        let mut db0 = rust_conn(&format!("redis://{addr}/0{query_string}")).await;
        assert_eq!(rust_int(&mut db0, &["INCR", "order"]).await, next, "/0");
        next += 1;
    }
    assert_eq!(s.next("order").await, next, "HTTP follows RESP");
    s.stop().await;
}

/// The Rust crate under `--client-auth on`: `redis://:TOKEN@…/` (RESP2
/// `AUTH token`), with a user name (`AUTH user token`) and with
/// `?protocol=resp3` (`HELLO 3 AUTH`) draws; without a token `NOAUTH`
/// until an `AUTH` command; a wrong token fails the connection
/// (`WRONGPASS`); outside the prefix `NOPERM`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rust_redis_authenticates_with_a_client_token() {
    let db = sqlite().await;
    let token = common::cli_token(&db, "--label rs --prefix order --can draw").await;
    let (s, addr) = resp_server(&db, ClientAuth::On).await;
    s.create("order", 1, 1000).await;
    s.create("other", 1, 1000).await;

    let mut expected = 1;
    for url in [
        format!("redis://:{token}@{addr}/"),
        format!("redis://anyone:{token}@{addr}/"),
        format!("redis://:{token}@{addr}/?protocol=resp3"),
        format!("redis://anyone:{token}@{addr}/?protocol=resp3"),
    ] {
        let shown = url.replace(&token, "TOKEN");
        let mut con = rust_conn(&url).await;
        assert_eq!(
            rust_int(&mut con, &["INCR", "order"]).await,
            expected,
            "{shown}"
        );
        expected += 1;
        assert_code(
            &format!("{shown}: INCR other"),
            &rust_refused(&mut con, &["INCR", "other"]).await,
            "NOPERM",
            "this token may not draw from this sequence",
        );
    }
    for query_string in ["", "?protocol=resp3"] {
        // No token: connected, each draw refused until AUTH.
        let mut con = rust_conn(&format!("redis://{addr}/{query_string}")).await;
        assert_code(
            "INCR without a token",
            &rust_refused(&mut con, &["INCR", "order"]).await,
            "NOAUTH",
            "this command needs a client token",
        );
        assert_code(
            "AUTH with a wrong token",
            &rust_refused(&mut con, &["AUTH", "seqd_not_a_token"]).await,
            "WRONGPASS",
            "invalid token",
        );
        let ok: redis::Value = query(&mut con, &["AUTH", &token]).await.unwrap();
        assert_eq!(ok, redis::Value::Okay, "AUTH token");
        assert_eq!(rust_int(&mut con, &["INCR", "order"]).await, expected);
        expected += 1;
        // A wrong token in the URL: the connection fails.
        let url = format!("redis://:seqd_not_a_token@{addr}/{query_string}");
        let e = rust_connect(&url).await.expect_err("a wrong token refused");
        assert!(
            e.kind() == redis::ErrorKind::AuthenticationFailed || e.code() == Some("WRONGPASS"),
            "{url}: {e} ({:?}, {:?})",
            e.kind(),
            e.code()
        );
    }
    s.stop().await;
}

// ---------------------------------------------------------------- serials

/// A serial sequence through every client: `SEQD.NEXT` answers a bulk
/// string (`INV00001`, then the next), `SEQD.BATCH` an array of them,
/// `INCR` and `INCRBY` `WRONGTYPE`; the serials come in turn whichever
/// client draws.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serial_sequences_answer_bulk_strings_and_refuse_incr() {
    let db = sqlite().await;
    let (s, addr) = resp_server(&db, ClientAuth::Off).await;
    let resp = s
        .post_sequence(&json!({"name": "inv", "start": 1, "step": 10, "format": "INV{seq:05}"}))
        .await;
    assert_eq!(resp.status(), 201, "{}", resp.text().await.unwrap());
    let mut n = 0;
    let mut serial = || {
        n += 1;
        format!("INV{n:05}")
    };

    for query_string in ["", "?protocol=resp3"] {
        let url = format!("redis://{addr}/{query_string}");
        let mut con = rust_conn(&url).await;
        let v: redis::Value = query(&mut con, &["SEQD.NEXT", "inv"]).await.unwrap();
        assert_eq!(v, redis::Value::BulkString(serial().into_bytes()), "{url}");
        let v: redis::Value = query(&mut con, &["SEQD.BATCH", "inv", "3"]).await.unwrap();
        let expected: Vec<_> = (0..3)
            .map(|_| redis::Value::BulkString(serial().into_bytes()))
            .collect();
        assert_eq!(v, redis::Value::Array(expected), "{url}: SEQD.BATCH");
        assert_code(
            &format!("{url}: INCR inv"),
            &rust_refused(&mut con, &["INCR", "inv"]).await,
            "WRONGTYPE",
            "sequence 'inv' is serial",
        );
        assert_code(
            &format!("{url}: INCRBY inv 2"),
            &rust_refused(&mut con, &["INCRBY", "inv", "2"]).await,
            "WRONGTYPE",
            "sequence 'inv' is serial",
        );
    }

    if common::tool_available("redis-cli") {
        assert_eq!(cli(&addr, &["SEQD.NEXT", "inv"]).await, serial());
        assert_eq!(
            cli(&addr, &["SEQD.BATCH", "inv", "2"]).await,
            format!("{}\n{}", serial(), serial())
        );
        assert_starts(
            "redis-cli INCR inv",
            &cli(&addr, &["INCR", "inv"]).await,
            "WRONGTYPE sequence 'inv' is serial",
        );
    }

    if common::python_redis_available() {
        let all = python(&addr, "serial", None).await;
        for proto in ["2", "3"] {
            let out = &all[proto];
            assert_eq!(out["next"], json!({"bytes": serial()}), "RESP{proto}");
            assert_eq!(
                out["batch"],
                json!([{"bytes": serial()}, {"bytes": serial()}]),
                "RESP{proto}"
            );
            assert_raised(
                &format!("RESP{proto} incr inv"),
                &out["incr"],
                "ResponseError",
                "WRONGTYPE sequence 'inv' is serial",
            );
        }
    }
    // HTTP hands out the next serial: the refusals took none.
    assert_eq!(
        s.get_json("/v1/sequences/inv/next").await["serial"],
        serial()
    );
    s.stop().await;
}
