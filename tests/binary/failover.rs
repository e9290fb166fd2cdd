//! Failover of the database with real replication (docs/high-availability.md,
//! "Failover of the database"): a primary and an asynchronous replica of the
//! tests' own (tests/support/replicas), the replica made to lag, instances drawing
//! through a proxy of the tests' own, the primary killed, the replica
//! promoted and the proxy repointed, as an automatic failover does, with no
//! operator. Every ID drawn (plain, global order, serial, leased, over RESP)
//! is kept, and none may come twice.
//!
//! The same failover with `--failover-fence off` hands IDs out twice: the
//! check that the scenario really loses reservations.

use crate::support::common;
use crate::support::proxy;
use crate::support::replicas;
use crate::support::server;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::Connection;

use proxy::Proxy;
use replicas::{Engine, Node};
use server::Process;

const ENGINES: [Engine; 2] = [Engine::Postgres, Engine::MariaDb];

/// Every ID handed out, by what it is (`order:17`, `ledger:3`,
/// `receipt:RC20261206-12`), with who drew it.
#[derive(Default)]
struct Drawn {
    by: HashMap<String, String>,
    twice: Vec<String>,
    /// The largest plain `order` ID drawn so far.
    top: i64,
}

impl Drawn {
    fn add(&mut self, key: String, who: &str) {
        if let Some(before) = self.by.insert(key.clone(), who.to_owned()) {
            self.twice.push(format!("{key} ({before}, then {who})"));
        }
    }

    fn order(&mut self, id: i64, who: &str) {
        self.top = self.top.max(id);
        self.add(format!("order:{id}"), who);
    }

    /// Fails, naming the first 20, if any ID was drawn twice.
    fn assert_none_twice(&self, engine: Engine) {
        assert!(
            self.twice.is_empty(),
            "{engine:?}: {:?}",
            &self.twice[..self.twice.len().min(20)]
        );
    }
}

/// The sequences every test draws from: plain with a small step, global
/// order, a daily serial that widens (its period rows are raised like any
/// row), and one that refuses past six digits (a fence closes its period).
async fn create_sequences(http: &reqwest::Client, base: &str) {
    for body in [
        json!({"name": "order", "start": 1, "step": 100}),
        json!({"name": "ledger", "ordering": "global", "step": 10}),
        json!({"name": "receipt", "step": 50, "format": "RC{yyyy}{MM}{dd}-{seq}",
               "reset": "day", "overflow": "widen"}),
        json!({"name": "slip", "step": 50, "format": "S{yyyy}{MM}{dd}-{seq:06}", "reset": "day"}),
    ] {
        server::create_with(http, base, &body).await;
    }
}

/// Sends the request `make` builds until it answers something but 503 (a
/// fence in progress, a pool reconnecting), for up to 60 s; the status and
/// body.
async fn answered(make: impl Fn() -> reqwest::RequestBuilder, what: &str) -> (u16, Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = match make().send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                (status, resp.json::<Value>().await.unwrap_or(Value::Null))
            }
            Err(e) => (0, json!(e.to_string())),
        };
        if status != 503 && status != 0 {
            return (status, body);
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still unavailable: {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One round of draws from `p` (named `who`): a batch of plain IDs, a lease,
/// global and serial batches, and `INCR`s on the RESP door.
async fn draw_round(p: &Process, who: &str, drawn: &mut Drawn) {
    let http = server::client(Duration::from_secs(30));
    let base = &p.base;
    let ok = |method: reqwest::Method, path: &'static str| {
        let (http, url) = (http.clone(), format!("{base}{path}"));
        async move {
            let (s, body) = answered(|| http.request(method.clone(), &url), path).await;
            assert_eq!(s, 200, "{who}: {path}: {body}");
            body
        }
    };
    let body = ok(reqwest::Method::GET, "/v1/sequences/order/batch?count=150").await;
    for id in common::integers(&body, "ids") {
        drawn.order(id, who);
    }
    let body = ok(reqwest::Method::POST, "/v1/sequences/order/lease?size=120").await;
    for id in body["start"].as_i64().unwrap()..body["end"].as_i64().unwrap() {
        drawn.order(id, who);
    }
    let body = ok(reqwest::Method::GET, "/v1/sequences/ledger/batch?count=7").await;
    for id in common::integers(&body, "ids") {
        drawn.add(format!("ledger:{id}"), who);
    }
    let body = ok(reqwest::Method::GET, "/v1/sequences/receipt/batch?count=60").await;
    for serial in common::strings::<Vec<String>>(&body, "serials") {
        drawn.add(format!("receipt:{serial}"), who);
    }
    let resp = p.resp.as_ref().expect("a RESP listener");
    let client = redis::Client::open(format!("redis://{resp}")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let mut got = 0;
    while got < 30 {
        match redis::cmd("INCR")
            .arg("order")
            .query_async::<i64>(&mut con)
            .await
        {
            Ok(id) => {
                drawn.order(id, who);
                got += 1;
            }
            Err(e) if Instant::now() < deadline => {
                eprintln!("{who}: INCR: {e}; again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("{who}: INCR: {e}"),
        }
    }
}

/// The serials of `slip` (six digits, refusing) `p` answers: its status.
async fn slip_status(p: &Process) -> (u16, Value) {
    let http = server::client(Duration::from_secs(30));
    let base = &p.base;
    answered(
        || http.get(format!("{base}/v1/sequences/slip/next")),
        "slip",
    )
    .await
}

/// `GET /readyz` of `p`.
async fn ready(p: &Process) -> (u16, Value) {
    let http = server::client(Duration::from_secs(30));
    let resp = http.get(format!("{}/readyz", p.base)).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// Waits until `p`'s `/readyz` satisfies `pred`, for up to 90 s; its body.
/// A 200 may still be `degraded` (IDs served from memory while the database
/// check fails): a caller waiting for the database asks for `ready`.
async fn ready_until(p: &Process, what: &str, pred: impl Fn(u16, &Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let (s, body) = ready(p).await;
        if pred(s, &body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: /readyz still {s} {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `GET url` must answer 503 (nothing drawn).
async fn refused_503(http: &reqwest::Client, url: &str) {
    let resp = http.get(url).send().await.unwrap();
    assert_eq!(resp.status(), 503, "{}", resp.text().await.unwrap());
}

/// The counter `name` on `p`'s `/metrics` (0 when absent).
async fn counted(p: &Process, name: &str) -> u64 {
    let http = server::client(Duration::from_secs(30));
    let text = server::fetch_text(http.get(format!("{}/metrics", p.base))).await;
    let prefix = format!("{name} ");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap() as u64)
}

/// `seqd_failover_fences_total` on `p`'s `/metrics` (0 when absent).
async fn fences_counted(p: &Process) -> u64 {
    counted(p, "seqd_failover_fences_total").await
}

/// A transaction on `node` that holds the fence record's row lock (another
/// instance's fence, or an operator's session), until released.
enum Held {
    Pg(sqlx::PgConnection),
    My(sqlx::MySqlConnection),
}

impl Held {
    async fn take(node: &Node) -> Held {
        let sql = "SELECT server FROM seqd_fence WHERE id = 1 FOR UPDATE";
        match node.engine() {
            Engine::Postgres => {
                let mut c = sqlx::PgConnection::connect(&node.url()).await.unwrap();
                sqlx::query("BEGIN").execute(&mut c).await.unwrap();
                sqlx::query(sql).execute(&mut c).await.unwrap();
                Held::Pg(c)
            }
            Engine::MariaDb => {
                let mut c = sqlx::MySqlConnection::connect(&node.url()).await.unwrap();
                sqlx::query("BEGIN").execute(&mut c).await.unwrap();
                sqlx::query(sql).execute(&mut c).await.unwrap();
                Held::My(c)
            }
        }
    }

    async fn release(self) {
        match self {
            Held::Pg(mut c) => {
                sqlx::query("ROLLBACK").execute(&mut c).await.unwrap();
                c.close().await.unwrap();
            }
            Held::My(mut c) => {
                sqlx::query("ROLLBACK").execute(&mut c).await.unwrap();
                c.close().await.unwrap();
            }
        }
    }
}

/// The fence record on `node`: `(server, epoch)`.
fn record(node: &Node) -> (String, i64) {
    let out = node
        .sql("SELECT server, epoch FROM seqd_fence WHERE id = 1")
        .unwrap();
    let line = out.trim();
    let (server, epoch) = line
        .rsplit_once(['|', '\t'])
        .unwrap_or_else(|| panic!("a record: {line:?}"));
    (server.trim().to_owned(), epoch.trim().parse().unwrap())
}

async fn spawn(url: &str, extra: &[&str]) -> Process {
    let mut flags = vec!["--resp-listen", "127.0.0.1:0"];
    flags.extend_from_slice(extra);
    Process::spawn(url, &flags).await
}

/// A primary of `engine` and its replica, a proxy in front of the primary
/// and seqd's URL through it (`None`: skipped, see [`replicas::primary`]).
async fn proxied_pair(engine: Engine) -> Option<(Node, Node, Proxy, String)> {
    let primary = replicas::primary(engine)?;
    let replica = primary.replica();
    let proxy = Proxy::start(primary.addr()).await;
    let url = proxy.url_for(&primary.url());
    Some((primary, replica, proxy, url))
}

/// An instance `a` on `url`, the sequences of [`create_sequences`] made
/// and one round drawn from it.
async fn first_instance(url: &str) -> (Process, Drawn) {
    let http = server::client(Duration::from_secs(30));
    let a = spawn(url, &[]).await;
    create_sequences(&http, &a.base).await;
    let mut drawn = Drawn::default();
    draw_round(&a, "a", &mut drawn).await;
    (a, drawn)
}

/// A primary with a lagging replica, two instances drawing, the primary
/// killed with one of them, the replica promoted and the address repointed;
/// then a running instance, a restarted one and a new one draw. With the
/// fence, a new instance starts while another session holds the record's
/// lock (as a fence in progress does) and waits for it.
async fn lossy_failover(engine: Engine, fence: &[&str]) -> Option<Drawn> {
    common::clear_of_midnight().await;
    let (mut primary, replica, proxy, url) = proxied_pair(engine).await?;
    let http = server::client(Duration::from_secs(30));

    let a = spawn(&url, fence).await;
    let b = spawn(&url, fence).await;
    create_sequences(&http, &a.base).await;
    let mut drawn = Drawn::default();
    for p in [(&a, "a"), (&b, "b")] {
        draw_round(p.0, p.1, &mut drawn).await;
    }
    assert_eq!(slip_status(&a).await.0, 200);
    let fenced = !fence.contains(&"off");
    if fenced {
        let (_, body) = ready(&a).await;
        assert_eq!(body["checks"]["fence"]["state"], "ok", "{body}");
        assert_eq!(body["checks"]["fence"]["epoch"], 1, "{body}");
    } else {
        let (_, body) = ready(&a).await;
        assert!(body["checks"].get("fence").is_none(), "{body}");
    }

    // The replica stops receiving; what is reserved from now on is lost.
    primary.wait_caught_up(&replica);
    replica.pause_replication();
    for _ in 0..3 {
        draw_round(&a, "a", &mut drawn).await;
        draw_round(&b, "b", &mut drawn).await;
    }
    let lost_top = drawn.top;

    primary.kill();
    b.kill().await;
    replica.promote();
    let held = if fenced {
        Some(Held::take(&replica).await)
    } else {
        None
    };
    proxy.repoint(replica.addr());

    if let Some(held) = held {
        // The running instance sees the new server and fences, waiting for
        // the lock: not ready meanwhile, and says why.
        let body = ready_until(&a, "fencing", |s, b| {
            s == 503 && b["checks"]["database"] == "fencing"
        })
        .await;
        assert_eq!(body["checks"]["fence"]["state"], "fencing", "{body}");
        assert_eq!(body["error"]["code"], "storage_unavailable", "{body}");
        // A new instance starting now waits for the fence too.
        let starting = tokio::spawn({
            let url = url.clone();
            let fence: Vec<String> = fence.iter().map(|s| s.to_string()).collect();
            async move {
                let fence: Vec<&str> = fence.iter().map(String::as_str).collect();
                spawn(&url, &fence).await
            }
        });
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(
            !starting.is_finished(),
            "an instance started while the fence record was locked"
        );
        held.release().await;
        let c = starting.await.unwrap();
        let body = ready_until(&a, "fenced", |s, b| s == 200 && b["status"] == "ready").await;
        assert_eq!(body["checks"]["fence"]["state"], "ok", "{body}");
        assert_eq!(body["checks"]["fence"]["epoch"], 2, "{body}");
        let (server, epoch) = record(&replica);
        assert_eq!(epoch, 2);
        assert_eq!(body["checks"]["fence"]["server"], server.as_str(), "{body}");
        let (_, body_c) = ready(&c).await;
        assert_eq!(body_c["checks"]["fence"]["epoch"], 2, "{body_c}");
        // One of the two fenced; the other took its record.
        assert_eq!(fences_counted(&a).await + fences_counted(&c).await, 1);
        after_failover(&a, &c, &url, fence, lost_top, &mut drawn).await;
    } else {
        let c = spawn(&url, fence).await;
        after_failover(&a, &c, &url, fence, lost_top, &mut drawn).await;
    }
    Some(drawn)
}

/// Draws from the running `a`, the new `c` and a restarted `b`.
async fn after_failover(
    a: &Process,
    c: &Process,
    url: &str,
    fence: &[&str],
    lost_top: i64,
    drawn: &mut Drawn,
) {
    let b = spawn(url, fence).await;
    let before = drawn.by.len();
    for _ in 0..2 {
        for (p, who) in [(a, "a after"), (&b, "b restarted"), (c, "c new")] {
            draw_round(p, who, drawn).await;
        }
    }
    assert!(drawn.by.len() > before);
    if !fence.contains(&"off") {
        // Every plain ID reserved on the promoted server is past the margin
        // above everything the lost window reserved.
        let fresh = drawn
            .by
            .iter()
            .filter(|(k, who)| {
                who.as_str() != "a" && who.as_str() != "b" && k.starts_with("order:")
            })
            .map(|(k, _)| k[6..].parse::<i64>().unwrap())
            .filter(|&id| id > lost_top)
            .min()
            .expect("IDs from the promoted server");
        assert!(
            fresh >= lost_top + 1_000_000_000 - 1_000_000,
            "the first ID past the lost window is {fresh}, the window reached {lost_top}"
        );
        // A serial period that cannot absorb the margin is closed.
        let (s, body) = slip_status(&b).await;
        assert_eq!(s, 409, "{body}");
        assert_eq!(body["error"]["code"], "serial_exhausted", "{body}");
    }
}

#[tokio::test]
async fn a_lossy_failover_hands_out_no_id_twice() {
    for engine in ENGINES {
        let Some(drawn) = lossy_failover(engine, &[]).await else {
            continue;
        };
        drawn.assert_none_twice(engine);
        assert!(drawn.by.len() > 5_000, "{engine:?}: {}", drawn.by.len());
    }
}

#[tokio::test]
async fn without_the_fence_the_same_failover_hands_ids_out_twice() {
    for engine in ENGINES {
        let Some(drawn) = lossy_failover(engine, &["--failover-fence", "off"]).await else {
            continue;
        };
        assert!(
            !drawn.twice.is_empty(),
            "{engine:?}: the scenario lost no reservation, so it proves nothing"
        );
    }
}

/// Two failovers in a row: back to the old primary, rebuilt as a replica of
/// the promoted one, lossy again; then a planned switchover that loses
/// nothing, which fences too and only leaves a gap.
#[tokio::test]
async fn two_failovers_back_to_the_old_primary_and_a_planned_switchover() {
    for engine in ENGINES {
        common::clear_of_midnight().await;
        let Some((mut first, mut second, proxy, url)) = proxied_pair(engine).await else {
            continue;
        };
        let (a, mut drawn) = first_instance(&url).await;

        // First failover: the replica lagged, the primary dies.
        first.wait_caught_up(&second);
        second.pause_replication();
        draw_round(&a, "a", &mut drawn).await;
        first.kill();
        second.promote();
        proxy.repoint(second.addr());
        draw_round(&a, "a", &mut drawn).await;
        let new = spawn(&url, &[]).await;
        draw_round(&new, "new 1", &mut drawn).await;
        assert_eq!(record(&second).1, 2);

        // Back to the old primary: rebuilt as a replica of the new one, it
        // lags, the new one dies.
        first.rebuild_as_replica_of(&second);
        second.wait_caught_up(&first);
        first.pause_replication();
        draw_round(&a, "a", &mut drawn).await;
        draw_round(&new, "new 1", &mut drawn).await;
        second.kill();
        first.promote();
        proxy.repoint(first.addr());
        draw_round(&a, "a", &mut drawn).await;
        draw_round(&new, "new 1", &mut drawn).await;
        let newer = spawn(&url, &[]).await;
        draw_round(&newer, "new 2", &mut drawn).await;
        assert_eq!(record(&first).1, 3);

        // A planned switchover: the replica has everything, nothing is lost;
        // it is fenced all the same, a gap.
        second.rebuild_as_replica_of(&first);
        draw_round(&a, "a", &mut drawn).await;
        first.wait_caught_up(&second);
        let top = drawn.top;
        first.kill();
        second.promote();
        proxy.repoint(second.addr());
        draw_round(&a, "a", &mut drawn).await;
        draw_round(&newer, "new 2", &mut drawn).await;
        assert_eq!(record(&second).1, 4);
        let body = ready_until(&a, "fenced", |s, b| s == 200 && b["status"] == "ready").await;
        assert_eq!(body["checks"]["fence"]["epoch"], 4, "{body}");
        assert!(
            drawn.top > top + 900_000_000,
            "{engine:?}: {} after {top}",
            drawn.top
        );

        drawn.assert_none_twice(engine);
    }
}

/// After a lossy failover the old primary comes back with its own data and
/// the address leads to it again: the running instance, which verified
/// the promoted server's fence (epoch 2), refuses the old one (epoch 1)
/// instead of fencing it into the range the promoted server already
/// handed out. It says so on `/readyz` (`stale`), in the log and in
/// `seqd_failover_stale_refusals_total`, reserves nothing from it and
/// leaves its rows alone; once the address leads to the promoted server
/// again it serves on, and no ID was handed out twice.
#[tokio::test]
async fn an_old_primary_that_comes_back_is_refused_not_fenced_into_the_new_range() {
    for engine in ENGINES {
        common::clear_of_midnight().await;
        let Some((mut old, promoted, proxy, url)) = proxied_pair(engine).await else {
            continue;
        };
        let (a, mut drawn) = first_instance(&url).await;
        let http = server::client(Duration::from_secs(30));
        old.wait_caught_up(&promoted);
        promoted.pause_replication();
        for _ in 0..2 {
            draw_round(&a, "a on the old primary", &mut drawn).await;
        }
        old.kill();
        promoted.promote();
        proxy.repoint(promoted.addr());
        draw_round(&a, "a on the promoted server", &mut drawn).await;
        let body = ready_until(&a, "fenced", |s, b| s == 200 && b["status"] == "ready").await;
        assert_eq!(body["checks"]["fence"]["epoch"], 2, "{body}");

        // The old primary is back, and the address leads to it.
        old.restart();
        let old_record = record(&old);
        assert_eq!(old_record.1, 1, "{engine:?}");
        let old_top = old
            .sql("SELECT max_id FROM sequences WHERE name = 'order'")
            .unwrap();
        proxy.repoint(old.addr());
        let body = ready_until(&a, "stale", |s, b| {
            s == 503 && b["checks"]["fence"]["state"] == "stale"
        })
        .await;
        assert_eq!(body["checks"]["database"], "fencing", "{body}");
        assert_eq!(body["checks"]["fence"]["epoch"], 2, "{body}");
        let why = body["checks"]["fence"]["last_error"].as_str().unwrap();
        assert!(why.contains("older than epoch 2"), "{why}");
        assert!(
            a.log_line(
                "refusing a database server older than the one verified (an old primary back?)"
            )
            .await
            .is_some(),
            "{:?}",
            a.all_logs()
        );
        assert!(counted(&a, "seqd_failover_stale_refusals_total").await >= 1);
        // Nothing is reserved from it: a global sequence answers 503, and
        // the old primary's record and rows are as they were.
        for _ in 0..5 {
            refused_503(&http, &format!("{}/v1/sequences/ledger/next", a.base)).await;
        }
        assert_eq!(
            record(&old),
            old_record,
            "{engine:?}: the old primary was fenced"
        );
        assert_eq!(
            old.sql("SELECT max_id FROM sequences WHERE name = 'order'")
                .unwrap(),
            old_top,
            "{engine:?}: the old primary's rows were raised"
        );

        // Back to the promoted server: served again, without a fence.
        proxy.repoint(promoted.addr());
        let body = ready_until(&a, "back", |s, b| s == 200 && b["status"] == "ready").await;
        assert_eq!(body["checks"]["fence"]["state"], "ok", "{body}");
        assert_eq!(body["checks"]["fence"]["epoch"], 2, "{body}");
        draw_round(&a, "a back on the promoted server", &mut drawn).await;
        let b = spawn(&url, &[]).await;
        draw_round(&b, "b new", &mut drawn).await;
        assert_eq!(record(&promoted).1, 2, "{engine:?}: fenced again");
        assert_eq!(fences_counted(&a).await, 1, "{engine:?}");
        drawn.assert_none_twice(engine);
    }
}

/// A new, empty database made on a server that was promoted (PostgreSQL on
/// timeline 2, MariaDB with a replication position): `seqd migrate` and
/// `seqd serve` refuse it as a promoted server without seqd's tables, and
/// name the command that sets it up, `seqd migrate --new-database`; after
/// that the instances serve it from its start with the fence on.
#[tokio::test]
async fn a_new_database_on_a_promoted_server_is_set_up_by_the_command_its_refusal_names() {
    for engine in ENGINES {
        let Some(mut primary) = replicas::primary(engine) else {
            continue;
        };
        let replica = primary.replica();
        primary.wait_caught_up(&replica);
        primary.kill();
        replica.promote();
        replica.sql("CREATE DATABASE fresh").unwrap();
        let url = replica.url().replacen("/seqd", "/fresh", 1);
        let env = [("SEQD_DATABASE_URL", url.as_str())];

        let out = common::seqd_binary_with_env(&["migrate"], &env).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{engine:?}: {stderr}");
        assert!(stderr.contains("promoted"), "{stderr}");
        assert!(stderr.contains("`seqd migrate --new-database`"), "{stderr}");
        let out = tokio::time::timeout(
            Duration::from_secs(120),
            common::seqd_binary_with_env(&["serve", "--listen", "127.0.0.1:0"], &env),
        )
        .await
        .expect("refuses to start, not serves");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{engine:?}: {stderr}");
        assert!(stderr.contains("`seqd migrate --new-database`"), "{stderr}");

        let out = common::seqd_binary_with_env(&["migrate", "--new-database"], &env).await;
        assert!(out.status.success(), "{engine:?}: {out:?}");
        // Again: idempotent, the tables are there now.
        let out = common::seqd_binary_with_env(&["migrate"], &env).await;
        assert!(out.status.success(), "{engine:?}: {out:?}");

        let p = spawn(&url, &[]).await;
        let http = server::client(Duration::from_secs(30));
        server::create_at(&http, &p.base, "order", 1, 100).await;
        assert_eq!(server::next_at(&http, &p.base, "order").await, 1);
        assert_eq!(fences_counted(&p).await, 0);
        let (s, body) = ready(&p).await;
        assert_eq!(s, 200, "{body}");
        assert_eq!(body["checks"]["fence"]["state"], "ok", "{body}");
        assert_eq!(body["checks"]["fence"]["epoch"], 1, "{body}");
    }
}

/// `/readyz` answers at once while a fence runs: a lossy failover under a
/// table of 200,000 sequences, whose fence takes seconds, polled with
/// Kubernetes' default probe timeout (1 s). Every probe gets an answer in
/// time, some of them 503 `fencing`, then 200 at epoch 2.
#[tokio::test]
async fn readyz_answers_at_once_while_a_long_fence_runs() {
    for engine in ENGINES {
        let Some((mut primary, replica, proxy, url)) = proxied_pair(engine).await else {
            continue;
        };
        let http = server::client(Duration::from_secs(30));
        let a = spawn(&url, &[]).await;
        server::create_at(&http, &a.base, "order", 1, 100).await;
        primary
            .sql(match engine {
                Engine::Postgres => {
                    "INSERT INTO sequences (name, max_id, step) \
                     SELECT 'r' || g, 0, 10 FROM generate_series(1, 200000) g"
                }
                Engine::MariaDb => {
                    "INSERT INTO sequences (name, max_id, step) \
                     SELECT CONCAT('r', seq), 0, 10 FROM seq_1_to_200000"
                }
            })
            .unwrap();
        server::next_at(&http, &a.base, "order").await;
        primary.wait_caught_up(&replica);
        primary.kill();
        replica.promote();
        proxy.repoint(replica.addr());

        let probe = server::client(Duration::from_secs(1));
        let started = Instant::now();
        let mut fencing = 0;
        loop {
            let sent = Instant::now();
            let resp = probe
                .get(format!("{}/readyz", a.base))
                .send()
                .await
                .unwrap_or_else(|e| {
                    panic!("{engine:?}: /readyz gave no answer within 1 s ({e:?}) after {:?} of the fence", started.elapsed())
                });
            let status = resp.status().as_u16();
            let body: Value = resp.json().await.unwrap();
            assert!(
                sent.elapsed() < Duration::from_secs(1),
                "{engine:?}: {body}"
            );
            if status == 200 && body["checks"]["fence"]["epoch"] == 2 {
                break;
            }
            if status == 503 && body["checks"]["database"] == "fencing" {
                fencing += 1;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "{engine:?}: still {status} {body}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            fencing > 0,
            "{engine:?}: the fence was never seen from outside"
        );
        assert_eq!(fences_counted(&a).await, 1);
    }
}

/// A promoted server whose seqd tables are absent (they were created after
/// the replica stopped receiving): a running instance refuses to reserve
/// from it, and says so on `/readyz`; a new instance refuses to start
/// rather than create the tables again.
#[tokio::test]
async fn a_promoted_server_without_seqd_tables_is_refused_never_set_up_again() {
    for engine in ENGINES {
        let Some((mut primary, replica, proxy, url)) = proxied_pair(engine).await else {
            continue;
        };
        primary.wait_caught_up(&replica);
        replica.pause_replication();
        let http = server::client(Duration::from_secs(30));
        let a = spawn(&url, &[]).await;
        server::create_at(&http, &a.base, "order", 1, 100).await;
        let first = server::next_at(&http, &a.base, "order").await;

        primary.kill();
        replica.promote();
        proxy.repoint(replica.addr());
        let body = ready_until(&a, "refused", |s, b| {
            s == 503 && b["checks"]["fence"]["state"] == "refused"
        })
        .await;
        let why = body["checks"]["fence"]["last_error"].as_str().unwrap();
        assert!(why.contains("absent"), "{why}");
        // What it holds in memory was reserved on the old server: still served.
        assert_eq!(server::next_at(&http, &a.base, "order").await, first + 1);
        // Past its segment, the running instance hands out nothing.
        refused_503(
            &http,
            &format!("{}/v1/sequences/order/batch?count=200", a.base),
        )
        .await;

        let out = tokio::time::timeout(
            Duration::from_secs(120),
            common::seqd_binary_with_env(
                &["serve", "--listen", "127.0.0.1:0"],
                &[("SEQD_DATABASE_URL", url.as_str())],
            ),
        )
        .await
        .expect("a new instance on the promoted server refuses to start, not serves");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{engine:?}: {stderr}");
        assert!(stderr.contains("promoted"), "{stderr}");
        let tables = replica
            .sql(match engine {
                Engine::Postgres => "SELECT count(*) FROM pg_tables WHERE tablename = 'sequences'",
                Engine::MariaDb => {
                    "SELECT count(*) FROM information_schema.tables \
                     WHERE table_schema = 'seqd' AND table_name = 'sequences'"
                }
            })
            .unwrap();
        assert_eq!(tables.trim(), "0", "{engine:?}: the tables were made again");
    }
}
