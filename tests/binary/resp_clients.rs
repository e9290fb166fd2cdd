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
//! tests/binary/resp.rs.)
//!
//! `redis-cli` and Python's `redis` are skipped with a line when missing,
//! and required under `SEQD_TEST_REQUIRE_ALL=1` (.ci/run installs both).
//! How each client is run and its answers read: tests/support/resp_support/.

use crate::support::common;
use crate::support::resp_support;
use crate::support::server;

use std::time::Duration;

use common::TestDb;
use resp_support::*;
use seqd::service::ClientAuth;
use serde_json::json;

/// `redis-cli` draws exact IDs with `INCR` and `INCRBY`, speaks RESP3
/// after `-3`, and prints each refusal's code; no refusal issues an ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_cli_draws_ids_and_hears_every_refusal() {
    let Some(db) = sqlite_when(common::tool_available("redis-cli")).await else {
        return;
    };
    let (p, addr) = resp_process(&db, &[], &["order"]).await;

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
    let Some(db) = sqlite_when(common::tool_available("redis-cli")).await else {
        return;
    };
    let (_p, addr) = resp_process(&db, &[], &["order"]).await;

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
    let Some(db) = sqlite_when(common::tool_available("redis-cli")).await else {
        return;
    };
    let token = common::cli_token(&db, "--label cli --prefix order --can draw").await;
    let (_p, addr) = resp_process(&db, &["--client-auth", "on"], &["order", "other"]).await;

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

/// redis-py over RESP2 and RESP3: `INCR`, `INCRBY`, a pipeline of 1,000
/// `INCR` (1,000 distinct increasing IDs), `SEQD.BATCH`, a pipeline with
/// failures in the middle (each answered in its place), each refusal as
/// `ResponseError` with seqd's text (`GET`, `SET`, `SELECT 1`, `db=1`,
/// `NOSEQ`, `INCRBY 0`), none of them taking an ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_redis_draws_over_resp2_and_resp3() {
    let Some(db) = sqlite_when(common::python_redis_available()).await else {
        return;
    };
    let (s, all) = python_on(&db, ClientAuth::Off, &["p2", "p3"], "draw", None).await;
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
    let (s, all) = python_on(&db, ClientAuth::Off, &["m2", "m3"], "multi", None).await;
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
    let Some(db) = sqlite_when(common::python_redis_available()).await else {
        return;
    };
    let token = common::cli_token(&db, "--label py --prefix order --can draw").await;
    let names = ["order", "other"];
    let (s, all) = python_on(&db, ClientAuth::On, &names, "auth", Some(&token)).await;
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

/// The Rust `redis` crate, RESP2 and RESP3, on every backend: `INCR`, a
/// `redis::pipe()` of 1,000 `INCR` (1,000 distinct increasing IDs),
/// `INCRBY` (its run follows), `SEQD.BATCH`, and 8 tasks sharing one
/// multiplexed connection, 100 `INCR` each: 800 distinct IDs.
async fn rust_redis_pipelines_a_thousand_incr(db: TestDb) {
    let (s, addr) = resp_server(&db, ClientAuth::Off).await;
    for (query_string, name) in [("", "r2"), ("?protocol=resp3", "r3")] {
        let (url, mut con) = rust_conn_on(&s, &addr, query_string, name).await;
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
        let all = common::unique_increasing(&url, tasks).await;
        assert_eq!(all.len(), 800, "{url}: 8 tasks of 100");
        let (lowest, highest) = (all.iter().min().unwrap(), all.iter().max().unwrap());
        assert!(*lowest > r + 4, "{url}: {lowest} after {}", r + 4);
        let after = rust_int(&mut con, &["INCR", name]).await;
        assert!(after > *highest, "{url}: {after} after {highest}");
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
        let (url, mut con) = rust_conn_on(&s, &addr, query_string, name).await;
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
        let refusals: [(&[&str], &str, &str); 5] = [
            (
                &["GET", "x"],
                "ERR",
                "unknown command 'GET': seqd serves IDs, not data",
            ),
            (&["DEL", "x"], "ERR", "unknown command 'DEL'"),
            (&["SELECT", "1"], "ERR", "seqd has one database"),
            (&["INCR", "nope"], "NOSEQ", "sequence 'nope' not found"),
            (
                &["INCRBY", "order", "x"],
                "ERR",
                "value is not an integer or out of range",
            ),
        ];
        for (args, code, prefix) in refusals {
            let e = rust_refused(&mut con, args).await;
            assert_code(&what(&args.join(" ")), &e, code, prefix);
        }
        for (command, count) in [("INCRBY", "0"), ("INCRBY", "-5"), ("SEQD.BATCH", "10001")] {
            let e = rust_refused(&mut con, &[command, "order", count]).await;
            let prefix = format!("{command} takes a count from 1 to 10000, not {count}");
            assert_code(&what(&format!("{command} {count}")), &e, "ERR", &prefix);
        }
        let ok: redis::Value = query(&mut con, &["SELECT", "0"]).await.unwrap();
        assert_eq!(ok, redis::Value::Okay, "{}", what("SELECT 0"));
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
