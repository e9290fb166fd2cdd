//! Stripes through the real binary on a PostgreSQL schema and a MariaDB
//! database, the MariaDB stripe behind a fault proxy: what an operator
//! meets around an outage of one stripe (docs/high-availability.md).

use crate::support::common;
use crate::support::proxy;
use crate::support::server;

use std::time::Duration;

use common::{Backend, TestDb};
use proxy::{upstream_of, Proxy};
use serde_json::{json, Value};
use server::{fetch_json, Process};

/// The block size of a stripe set created without `--block`.
const BLOCK: i64 = seqd::store::stripes::DEFAULT_BLOCK;

/// Whether the database of `db` holds the row of `name`.
async fn has_row(db: &TestDb, name: &str) -> bool {
    let store = common::connect(db).await;
    store.get(&common::name(name)).await.unwrap().is_some()
}

/// A fresh PostgreSQL schema (stripe 1) and MariaDB database (stripe 2,
/// reached through the proxy) and the URLs of both, space-separated.
async fn pg_and_proxied_mariadb() -> Option<(TestDb, TestDb, Proxy, String)> {
    let [pg, my] = common::test_dbs([Backend::Postgres, Backend::Mysql]).await?;
    let proxy = Proxy::start(upstream_of(&my.url)).await;
    let urls = format!("{} {}", pg.url, proxy.url_for(&my.url));
    Some((pg, my, proxy, urls))
}

/// `/readyz`'s `missing_rows` of each stripe.
async fn missing_rows(http: &reqwest::Client, base: &str) -> Vec<Value> {
    let ready = fetch_json(http.get(format!("{base}/readyz"))).await;
    (0..2)
        .map(|i| ready["checks"]["stripes"][i]["missing_rows"].clone())
        .collect()
}

/// A set recorded with both stripes answering (and the sequence `s`
/// made), then an instance started after `fault` was done to stripe 2's
/// proxy; both databases (dropping one drops its schema), the proxy, the
/// instance and a client.
async fn started_without_stripe_2(
    fault: impl FnOnce(&Proxy),
) -> Option<([TestDb; 2], Proxy, Process, reqwest::Client)> {
    let (pg, my, proxy, urls) = pg_and_proxied_mariadb().await?;
    let http = server::client(Duration::from_secs(20));
    let first = Process::spawn(&urls, &[]).await;
    server::create_with(&http, &first.base, &json!({"name": "s", "step": 10})).await;
    first.kill().await;
    fault(&proxy);
    let seqd = Process::spawn(&urls, &["--failover-after", "200ms"]).await;
    let id = server::next_at(&http, &seqd.base, "s").await;
    assert_eq!(id / BLOCK % 2, 0, "served by stripe 1: {id}");
    // The API says which stripe the segment came from (index 0: stripe 1).
    let got = fetch_json(http.get(format!("{}/v1/sequences/s", seqd.base))).await;
    assert_eq!(got["stripes"]["current"], 0, "{got}");
    let ready = fetch_json(http.get(format!("{}/readyz", seqd.base))).await;
    assert_eq!(ready["status"], "degraded", "{ready}");
    assert_eq!(ready["checks"]["stripes"][0]["up"], true, "{ready}");
    assert_eq!(ready["checks"]["stripes"][1]["up"], false, "{ready}");
    Some(([pg, my], proxy, seqd, http))
}

/// Waits (bounded) until `/readyz` reports stripe `i` (from 0) up.
async fn wait_until_up(http: &reqwest::Client, base: &str, i: usize) {
    for _ in 0..300 {
        let ready = fetch_json(http.get(format!("{base}/readyz"))).await;
        if ready["checks"]["stripes"][i]["up"] == true {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("stripe {} is not used 30 s after it answers", i + 1);
}

/// A create cut short by an outage of stripe 2: 503 (saying the database
/// is unreachable, not that IDs ran out), the row on stripe 1, the
/// sequence served from it, `/readyz` reporting the row missing on stripe
/// 2. Once the stripe is back, the same POST, retried by the client, is
/// answered 201 and writes the missing row, although this instance has
/// served the name meanwhile; `/readyz` forgets it; one more POST is 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_cut_short_by_a_stripe_is_finished_by_the_same_post_retried() {
    let Some((_pg, my, proxy, urls)) = pg_and_proxied_mariadb().await else {
        return;
    };
    let seqd = Process::spawn(&urls, &["--failover-after", "200ms"]).await;
    let http = server::client(Duration::from_secs(20));
    let post = || {
        http.post(format!("{}/v1/sequences", seqd.base))
            .json(&json!({"name": "hc4", "step": 100}))
            .send()
    };
    proxy.cut();
    let refused = post().await.unwrap();
    assert_eq!(refused.status(), 503);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "storage_unavailable", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(!message.contains("IDs in memory"), "{message}");

    let id = server::next_at(&http, &seqd.base, "hc4").await;
    assert_eq!(id / BLOCK % 2, 0, "served by stripe 1: {id}");
    // The API says which stripe the segment came from (index 0: stripe 1).
    let got = fetch_json(http.get(format!("{}/v1/sequences/hc4", seqd.base))).await;
    assert_eq!(got["stripes"]["current"], 0, "{got}");
    assert_eq!(
        missing_rows(&http, &seqd.base).await,
        [json!([]), json!(["hc4"])]
    );

    proxy.heal();
    let mut status = 0;
    for _ in 0..150 {
        status = post().await.unwrap().status().as_u16();
        if status != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(status, 201, "the retried create finishes the sequence");
    assert!(has_row(&my, "hc4").await, "stripe 2 has the row");
    // `/readyz` answers from the last background check (one a second),
    // which reads the missing rows again.
    let mut missing = missing_rows(&http, &seqd.base).await;
    for _ in 0..50 {
        if missing == [json!([]), json!([])] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        missing = missing_rows(&http, &seqd.base).await;
    }
    assert_eq!(missing, [json!([]), json!([])]);
    assert_eq!(post().await.unwrap().status(), 409);
    seqd.kill().await;
}

/// `UPDATE sequences SET ordering = 'global'` on the PostgreSQL stripe
/// (the API refuses `global` on stripes): the instance keeps serving the
/// sequence from its segments and the stripes, as `instance`, through
/// several settings refreshes, where it used to answer 503 after the first;
/// set back, it serves on without a pause. `/readyz` stays ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_row_written_by_sql_on_a_stripe_is_served_as_instance() {
    let Some((pg, _my, _proxy, urls)) = pg_and_proxied_mariadb().await else {
        return;
    };
    let seqd = Process::spawn(&urls, &["--settings-refresh", "100ms", "--max-step", "5"]).await;
    let http = server::client(Duration::from_secs(20));
    server::create_with(&http, &seqd.base, &json!({"name": "g", "step": 5})).await;
    let draw = || async {
        let resp = http
            .get(format!("{}/v1/sequences/g/next", seqd.base))
            .header("accept", "text/plain")
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert_eq!(status, 200, "{text}");
        text.parse::<i64>().unwrap()
    };
    let mut last = draw().await;
    for sql in [
        "UPDATE sequences SET ordering = 'global' WHERE name = 'g'",
        "UPDATE sequences SET ordering = 'instance' WHERE name = 'g'",
    ] {
        common::execute(&pg, sql).await;
        // Many refreshes and many fetches (segments of at most 5 IDs).
        for _ in 0..60 {
            let id = draw().await;
            assert!(id > last, "{id} after {last}");
            last = id;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let ready = fetch_json(http.get(format!("{}/readyz", seqd.base))).await;
        assert_eq!(ready["status"], "ready", "{ready}");
        let row = fetch_json(http.get(format!("{}/v1/sequences/g", seqd.base))).await;
        assert_eq!(row["ordering"], "instance", "{row}");
    }
    seqd.kill().await;
}

/// An instance started while stripe 2 refuses connections (cut at the
/// proxy): it starts, where it used to exit with status 1; it serves IDs
/// from stripe 1, `/readyz` is degraded naming stripe 2, and admin writes
/// answer 503. Once the stripe answers, the instance connects it, checks
/// its record (stripe 2 of this set) and uses it: `/readyz` is ready again
/// and a create reaches both stripes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_starts_while_a_stripe_is_down_and_takes_it_when_it_answers() {
    let Some(([_pg, my], proxy, seqd, http)) = started_without_stripe_2(Proxy::cut).await else {
        return;
    };
    let post = || {
        http.post(format!("{}/v1/sequences", seqd.base))
            .json(&json!({"name": "t", "step": 10}))
            .send()
    };
    assert_eq!(post().await.unwrap().status(), 503);

    proxy.heal();
    wait_until_up(&http, &seqd.base, 1).await;
    assert_eq!(post().await.unwrap().status(), 201);
    assert!(has_row(&my, "t").await, "the create reached stripe 2");
    seqd.kill().await;
}

/// The same with stripe 2 hanging instead of refusing: every connection
/// to it is accepted and then holds back whatever the client sends. The
/// instance starts once the connection attempt gives up (the pool's
/// connect timeout) and takes the stripe when it answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_starts_while_a_stripe_hangs() {
    let hang = |proxy: &Proxy| proxy.freeze_next(u64::MAX);
    let Some((_dbs, proxy, seqd, http)) = started_without_stripe_2(hang).await else {
        return;
    };
    assert!(proxy.frozen() >= 1, "the start met the hanging stripe");
    proxy.freeze_next(0);
    wait_until_up(&http, &seqd.base, 1).await;
    seqd.kill().await;
}

/// Stripe 2 comes back as another database than the one the set was
/// recorded with (its stripe record deleted by SQL while it was cut, as a
/// restored or replaced database would be): the instance never uses it,
/// `/readyz` keeps it down with the reason, admin writes stay refused, and
/// the sequence is served from stripe 1 all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stripe_that_comes_back_as_another_database_is_not_used() {
    let Some(([_pg, my], proxy, seqd, http)) = started_without_stripe_2(Proxy::cut).await else {
        return;
    };
    common::execute(&my, "DELETE FROM seqd_stripe").await;
    proxy.heal();
    let mut ready = Value::Null;
    for _ in 0..300 {
        ready = fetch_json(http.get(format!("{}/readyz", seqd.base))).await;
        let why = ready["checks"]["stripes"][1]["last_error"]
            .as_str()
            .unwrap_or("");
        if why.contains("is not this stripe of the set") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stripe = &ready["checks"]["stripes"][1];
    assert!(
        stripe["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("is not this stripe of the set")),
        "{ready}"
    );
    // Pings and probes run meanwhile; the stripe stays out, with its reason.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ready = fetch_json(http.get(format!("{}/readyz", seqd.base))).await;
    let stripe = &ready["checks"]["stripes"][1];
    assert_eq!(stripe["up"], false, "{ready}");
    assert!(
        stripe["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("is not this stripe of the set")),
        "{ready}"
    );
    let created = http
        .post(format!("{}/v1/sequences", seqd.base))
        .json(&json!({"name": "t", "step": 10}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 503);
    for _ in 0..20 {
        let id = server::next_at(&http, &seqd.base, "s").await;
        assert_eq!(id / BLOCK % 2, 0, "served by stripe 1 only: {id}");
    }
    seqd.kill().await;
}
