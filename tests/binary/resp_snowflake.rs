//! `SEQD.SNOWFLAKE` on the RESP door, through the real binary and the
//! unmodified `redis-cli`. The snowflake generator is reached through the
//! service (docs/design.md, "One service under every door"), so the RESP
//! door draws from the same generator as the HTTP routes, under the same
//! token rule (a token with `draw` covering the name `snowflake`), counted
//! on the same `seqd_ids_drawn_total{token}`, with the same refusals.

use crate::support::common;
use crate::support::server;

use std::time::Duration;

use common::{Backend, TestDb};
use server::Process;

/// `redis-cli -h HOST -p PORT [-a TOKEN] args`: what it printed, trimmed.
async fn cli(addr: &str, token: Option<&str>, args: &[&str]) -> String {
    cli_with(addr, token, args, b"").await
}

/// [`cli`] with `stdin`: commands one per line, sent on one connection.
async fn cli_with(addr: &str, token: Option<&str>, args: &[&str], stdin: &[u8]) -> String {
    let (host, port) = addr.rsplit_once(':').expect("HOST:PORT");
    let mut all = vec!["-h", host, "-p", port];
    if let Some(t) = token {
        all.extend_from_slice(&["-a", t, "--no-auth-warning"]);
    }
    all.extend_from_slice(args);
    common::run("redis-cli", &all, stdin).await.text()
}

/// The integers `redis-cli` printed, one per line (an integer reply, or an
/// array of them).
#[track_caller]
fn integers(what: &str, printed: &str) -> Vec<i64> {
    printed
        .lines()
        .map(|l| {
            l.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{what}: {l:?} is not an integer in {printed:?}"))
        })
        .collect()
}

/// Asserts `text` starts with `prefix`.
#[track_caller]
fn assert_starts(what: &str, text: &str, prefix: &str) {
    assert!(
        text.starts_with(prefix),
        "{what}: {text:?} does not start with {prefix:?}"
    );
}

/// A fresh SQLite database (never skipped), when `redis-cli` is here to
/// talk to the door (required under `SEQD_TEST_REQUIRE_ALL=1`).
async fn sqlite_for_redis_cli() -> Option<TestDb> {
    if !common::tool_available("redis-cli") {
        return None;
    }
    Some(
        common::test_db(Backend::Sqlite)
            .await
            .expect("an SQLite test database"),
    )
}

/// The value of the Prometheus sample `series` (its name and labels as
/// written) in `text`, 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Under `--client-auth on`: `SEQD.SNOWFLAKE` without a token is
/// `NOAUTH`, with a token not covering `snowflake` `NOPERM`, with one that
/// does an ID; with a count, that many. IDs drawn by RESP and by HTTP come
/// from one generator (strictly increasing across the two doors, one
/// worker ID), each draw counted once for the token. A bad count is
/// refused before anything is drawn.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seqd_snowflake_draws_from_the_one_generator_under_the_token_rule() {
    let Some(db) = sqlite_for_redis_cli().await else {
        return;
    };
    let sf = common::cli_token(&db, "--label sf --prefix snowflake --can draw").await;
    let order = common::cli_token(&db, "--label ord --prefix order --can draw").await;
    let p = Process::spawn(
        &db.url,
        &["--resp-listen", "127.0.0.1:0", "--client-auth", "on"],
    )
    .await;
    let addr = p.resp.clone().expect("a RESP listener");

    assert_starts(
        "without a token",
        &cli(&addr, None, &["SEQD.SNOWFLAKE"]).await,
        "NOAUTH",
    );
    assert_starts(
        "a token for `order` only",
        &cli(&addr, Some(&order), &["SEQD.SNOWFLAKE"]).await,
        "NOPERM",
    );
    assert_starts(
        "a count of 0",
        &cli(&addr, Some(&sf), &["SEQD.SNOWFLAKE", "0"]).await,
        "ERR SEQD.SNOWFLAKE takes a count from 1 to 10000, not 0",
    );
    assert_starts(
        "two arguments",
        &cli(&addr, Some(&sf), &["SEQD.SNOWFLAKE", "1", "2"]).await,
        "ERR wrong number of arguments for 'seqd.snowflake' command",
    );

    let one = integers("one", &cli(&addr, Some(&sf), &["SEQD.SNOWFLAKE"]).await);
    assert_eq!(one.len(), 1, "{one:?}");
    let five = integers(
        "five",
        &cli(&addr, Some(&sf), &["SEQD.SNOWFLAKE", "5"]).await,
    );
    assert_eq!(five.len(), 5, "{five:?}");
    let http = server::client(Duration::from_secs(30));
    let from_http: i64 = server::fetch_text(
        http.get(format!("{}/v1/snowflake/next", p.base))
            .header("Accept", "text/plain")
            .bearer_auth(&sf),
    )
    .await
    .parse()
    .expect("an ID");
    let all: Vec<i64> = one
        .iter()
        .chain(&five)
        .copied()
        .chain([from_http])
        .collect();
    assert!(
        all.windows(2).all(|w| w[0] < w[1]),
        "RESP then HTTP not strictly increasing: {all:?}"
    );
    let workers: std::collections::BTreeSet<i64> = {
        let mut w = std::collections::BTreeSet::new();
        for id in &all {
            let d =
                server::fetch_json(http.get(format!("{}/v1/snowflake/decode/{id}", p.base))).await;
            w.insert(d["worker"].as_i64().expect("a worker"));
        }
        w
    };
    assert_eq!(workers.len(), 1, "one generator, one worker: {workers:?}");

    // In a transaction: queued, then drawn at `EXEC`, after the IDs above.
    let tx = cli_with(
        &addr,
        Some(&sf),
        &[],
        b"MULTI\nSEQD.SNOWFLAKE\nSEQD.SNOWFLAKE 2\nEXEC\n",
    )
    .await;
    let mut lines = tx.lines();
    assert_eq!(
        [lines.next(), lines.next(), lines.next()],
        [Some("OK"), Some("QUEUED"), Some("QUEUED")],
        "{tx}"
    );
    let in_tx = integers("EXEC", &lines.collect::<Vec<_>>().join("\n"));
    assert_eq!(in_tx.len(), 3, "{tx}");
    assert!(
        std::iter::once(&from_http)
            .chain(&in_tx)
            .collect::<Vec<_>>()
            .windows(2)
            .all(|w| w[0] < w[1]),
        "EXEC's IDs follow the others: {from_http} then {in_tx:?}"
    );

    let metrics = server::fetch_text(http.get(format!("{}/metrics", p.base))).await;
    assert_eq!(
        sample(&metrics, "seqd_ids_drawn_total{token=\"sf\"}"),
        10.0,
        "1 + 5 + 3 (a transaction) by RESP, 1 by HTTP:\n{metrics}"
    );
    assert_eq!(
        sample(&metrics, "seqd_ids_drawn_total{token=\"ord\"}"),
        0.0,
        "a refused draw is not counted"
    );
    assert_eq!(
        sample(
            &metrics,
            "seqd_resp_commands_total{command=\"seqd.snowflake\",outcome=\"ok\"}"
        ),
        4.0,
        "two alone, two run by EXEC: {metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "seqd_resp_commands_total{command=\"seqd.snowflake\",outcome=\"noperm\"}"
        ),
        1.0,
        "{metrics}"
    );
    // Every door's draws in the instance's total the monitor charts.
    let info = server::fetch_json(http.get(format!("{}/v1/info", p.base))).await;
    assert_eq!(info["totals"]["ids_drawn"], 10, "{info}");
    p.kill().await;
}

/// With `--snowflake false` the command answers the same refusal as the
/// HTTP routes' 404 `snowflake_disabled`, and `INCR` still serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seqd_snowflake_is_refused_where_snowflake_ids_are_off() {
    let Some(db) = sqlite_for_redis_cli().await else {
        return;
    };
    let p = Process::spawn(
        &db.url,
        &["--resp-listen", "127.0.0.1:0", "--snowflake", "false"],
    )
    .await;
    let addr = p.resp.clone().expect("a RESP listener");
    assert_eq!(
        cli(&addr, None, &["SEQD.SNOWFLAKE"]).await,
        "ERR snowflake IDs are disabled on this instance (--snowflake false)"
    );
    let http = server::client(Duration::from_secs(30));
    server::create_at(&http, &p.base, "order", 1, 10).await;
    assert_eq!(cli(&addr, None, &["INCR", "order"]).await, "1");
    let resp = http
        .get(format!("{}/v1/snowflake/next", p.base))
        .send()
        .await
        .expect("a response");
    assert_eq!(resp.status(), 404);
    p.kill().await;
}
