//! The failover fence on the machine's PostgreSQL and MariaDB, through the
//! binary: the record a first start writes, a record naming another server
//! (what a promoted replica looks like to an instance that starts on it)
//! fenced once by instances starting together, the margin flag, and
//! `--failover-fence off`. Real replication and running instances are in
//! tests/binary/failover.rs.

use crate::support::common;
use crate::support::roles;
use crate::support::server;

use common::{Backend, TestDb};
use serde_json::{json, Value};
use server::Process;

/// The fence record of `db`: `(server, epoch)`.
async fn record(db: &TestDb) -> (String, i64) {
    use sqlx::Connection;
    let sql = "SELECT server, epoch FROM seqd_fence WHERE id = 1";
    match db.backend {
        Backend::Postgres => {
            let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
            sqlx::query_as(sql).fetch_one(&mut c).await.unwrap()
        }
        Backend::Mysql => {
            let mut c = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
            sqlx::query_as(sql).fetch_one(&mut c).await.unwrap()
        }
        Backend::Sqlite => unreachable!("no fence on SQLite"),
    }
}

async fn readyz(p: &Process) -> Value {
    let http = server::client(std::time::Duration::from_secs(30));
    server::fetch_json(http.get(format!("{}/readyz", p.base))).await
}

async fn fences_counted(p: &Process) -> u64 {
    let http = server::client(std::time::Duration::from_secs(30));
    let text = server::fetch_text(http.get(format!("{}/metrics", p.base))).await;
    text.lines()
        .find_map(|l| l.strip_prefix("seqd_failover_fences_total "))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap() as u64)
}

async fn get(p: &Process, path: &str) -> (u16, Value) {
    let http = server::client(std::time::Duration::from_secs(30));
    let resp = http.get(format!("{}{path}", p.base)).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

async fn the_first_start_records_the_server_and_raises_nothing(db: TestDb) {
    let a = Process::spawn(&db.url, &[]).await;
    let (server, epoch) = record(&db).await;
    let prefix = match db.backend {
        Backend::Postgres => "postgres system_identifier=",
        _ => "mysql ",
    };
    assert!(server.starts_with(prefix), "{server}");
    assert!(
        server.contains(if db.backend == Backend::Postgres {
            "timeline="
        } else {
            "server_id="
        }),
        "{server}"
    );
    assert_eq!(epoch, 1);
    let ready = readyz(&a).await;
    assert_eq!(ready["checks"]["fence"]["state"], "ok", "{ready}");
    assert_eq!(
        ready["checks"]["fence"]["server"],
        server.as_str(),
        "{ready}"
    );
    assert_eq!(ready["checks"]["fence"]["fences"], 0, "{ready}");
    let http = server::client(std::time::Duration::from_secs(30));
    server::create_at(&http, &a.base, "order", 1, 100).await;
    assert_eq!(get(&a, "/v1/sequences/order/next").await.1["id"], 1);
    // The same server again: nothing fenced.
    drop(a);
    let b = Process::spawn(&db.url, &[]).await;
    assert_eq!(record(&db).await, (server, 1));
    assert_eq!(fences_counted(&b).await, 0);
}

async fn a_record_naming_another_server_is_fenced_once_by_instances_starting_together(db: TestDb) {
    common::clear_of_midnight().await;
    let a = Process::spawn(&db.url, &[]).await;
    let http = server::client(std::time::Duration::from_secs(30));
    for body in [
        json!({"name": "order", "step": 100}),
        json!({"name": "receipt", "step": 10, "format": "R{yyyy}{MM}{dd}-{seq}", "reset": "day",
               "overflow": "widen"}),
        json!({"name": "slip", "step": 10, "format": "S{yyyy}{MM}{dd}-{seq:04}", "reset": "day"}),
    ] {
        server::create_with(&http, &a.base, &body).await;
    }
    let last = get(&a, "/v1/sequences/order/next").await.1["id"]
        .as_i64()
        .unwrap();
    assert_eq!(get(&a, "/v1/sequences/slip/next").await.0, 200);
    a.kill().await;
    // The record names another server: this one was promoted.
    let other = match db.backend {
        Backend::Postgres => "postgres system_identifier=1 timeline=1",
        _ => "mysql gtid_domain_id=0 server_id=99999",
    };
    common::execute(
        &db,
        &format!("UPDATE seqd_fence SET server = '{other}', epoch = 7 WHERE id = 1"),
    )
    .await;

    let margin = "5000000000";
    let flags = ["--failover-margin", margin];
    let (b, c, d) = tokio::join!(
        Process::spawn(&db.url, &flags),
        Process::spawn(&db.url, &flags),
        Process::spawn(&db.url, &flags)
    );
    let (server, epoch) = record(&db).await;
    assert_ne!(server, other);
    assert_eq!(epoch, 8, "fenced once");
    let counted = fences_counted(&b).await + fences_counted(&c).await + fences_counted(&d).await;
    assert_eq!(counted, 1, "exactly one instance fenced");
    for p in [&b, &c, &d] {
        let ready = readyz(p).await;
        assert_eq!(ready["checks"]["fence"]["epoch"], 8, "{ready}");
        assert_eq!(ready["checks"]["fence"]["state"], "ok", "{ready}");
    }
    let next = get(&b, "/v1/sequences/order/next").await.1["id"]
        .as_i64()
        .unwrap();
    assert!(
        next > last + 5_000_000_000,
        "{next} after {last}: raised by the margin"
    );
    // A widening serial goes on, wider; a refusing one's period is closed.
    let (s, body) = get(&c, "/v1/sequences/receipt/next").await;
    assert_eq!(s, 200, "{body}");
    assert!(body["id"].as_i64().unwrap() > 5_000_000_000, "{body}");
    let (s, body) = get(&d, "/v1/sequences/slip/next").await;
    assert_eq!(s, 409, "{body}");
    assert_eq!(body["error"]["code"], "serial_exhausted", "{body}");
    let fenced = b
        .log_line("the database is fenced: every sequence raised; reserving from it again")
        .await
        .or(c
            .log_line("the database is fenced: every sequence raised; reserving from it again")
            .await)
        .or(d
            .log_line("the database is fenced: every sequence raised; reserving from it again")
            .await)
        .expect("the fence is logged");
    assert_eq!(fenced["margin"], 5_000_000_000i64, "{fenced}");
}

async fn with_the_fence_off_nothing_is_recorded_or_checked(db: TestDb) {
    let a = Process::spawn(&db.url, &["--failover-fence", "off"]).await;
    assert_eq!(record(&db).await, (String::new(), 0));
    let ready = readyz(&a).await;
    assert!(ready["checks"].get("fence").is_none(), "{ready}");
    common::execute(
        &db,
        "UPDATE seqd_fence SET server = 'postgres system_identifier=1 timeline=1', epoch = 3",
    )
    .await;
    let b = Process::spawn_with_env(&db.url, &[], &[("SEQD_FAILOVER_FENCE", "off")]).await;
    let http = server::client(std::time::Duration::from_secs(30));
    server::create_at(&http, &a.base, "order", 1, 100).await;
    // Not raised: nothing compared the server with the record.
    assert_eq!(get(&b, "/v1/sequences/order/next").await.1["id"], 1);
    assert_eq!(record(&db).await.1, 3);
}

network_backends!(
    the_first_start_records_the_server_and_raises_nothing,
    a_record_naming_another_server_is_fenced_once_by_instances_starting_together,
    with_the_fence_off_nothing_is_recorded_or_checked,
);

#[tokio::test]
async fn a_bad_fence_flag_is_refused_with_its_words() {
    let out = common::seqd_binary(&["serve", "--failover-fence", "maybe"]).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--failover-fence"), "{stderr}");
    let out = common::seqd_binary(&["serve", "--failover-margin", "0"]).await;
    assert_eq!(out.status.code(), Some(2));
}

/// `max_id` of `name` on `db`.
async fn max_id(db: &TestDb, name: &str) -> i64 {
    use sqlx::Connection;
    let sql = format!("SELECT max_id FROM sequences WHERE name = '{name}'");
    let (v,): (i64,) = match db.backend {
        Backend::Postgres => {
            let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
            sqlx::query_as(&sql).fetch_one(&mut c).await.unwrap()
        }
        _ => {
            let mut c = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
            sqlx::query_as(&sql).fetch_one(&mut c).await.unwrap()
        }
    };
    v
}

/// Each stripe is fenced on its own: a record naming another server on the
/// MariaDB stripe raises that stripe's rows by `stripes × (margin + block)`
/// (a reservation there may skip the other stripe's blocks), and leaves the
/// PostgreSQL stripe alone; `/readyz` shows each stripe's fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_stripe_is_fenced_on_its_own() {
    let Some([pg, my]) = common::test_dbs([Backend::Postgres, Backend::Mysql]).await else {
        return;
    };
    let urls = format!("{} {}", pg.url, my.url);
    let a = Process::spawn(&urls, &[]).await;
    let http = server::client(std::time::Duration::from_secs(30));
    server::create_at(&http, &a.base, "order", 1, 100).await;
    assert_eq!(get(&a, "/v1/sequences/order/next").await.0, 200);
    a.kill().await;
    let (pg_before, my_before) = (max_id(&pg, "order").await, max_id(&my, "order").await);
    common::execute(
        &my,
        "UPDATE seqd_fence SET server = 'mysql gtid_domain_id=0 server_id=99999' WHERE id = 1",
    )
    .await;

    let b = Process::spawn(&urls, &[]).await;
    let ready = readyz(&b).await;
    let stripes = ready["checks"]["stripes"].as_array().unwrap();
    assert_eq!(stripes[0]["fence"]["epoch"], 1, "{ready}");
    assert_eq!(stripes[1]["fence"]["epoch"], 2, "{ready}");
    assert_eq!(stripes[1]["fence"]["state"], "ok", "{ready}");
    assert_eq!(fences_counted(&b).await, 1);
    assert_eq!(max_id(&pg, "order").await, pg_before);
    let block = 1_000_000_000i64;
    assert_eq!(
        max_id(&my, "order").await,
        my_before + 2 * (1_000_000_000 + block),
        "the MariaDB stripe raised by 2 × (margin + block)"
    );
}

/// A role without its grant on `seqd_fence` (PostgreSQL names tables one by
/// one; MariaDB's documented grant is the whole database): the start is
/// refused with words that say what to grant, never skipped.
#[tokio::test]
async fn a_role_without_the_fence_grant_is_refused_at_start_in_words() {
    let Some(db) = common::test_db(Backend::Postgres).await else {
        return;
    };
    common::ok(&common::seqd_on(&db, &["migrate"]).await);
    let role = roles::RuntimeRole::grant(&db).await;
    let fence = role
        .tables
        .iter()
        .find(|t| t.ends_with("seqd_fence"))
        .expect("seqd_fence among the granted tables");
    let user = url::Url::parse(&role.url).unwrap().username().to_owned();
    common::execute(&db, &format!("REVOKE ALL ON {fence} FROM {user}")).await;
    let out = common::seqd_binary_with_env(
        &["serve", "--listen", "127.0.0.1:0", "--migrate", "check"],
        &[("SEQD_DATABASE_URL", role.url.as_str())],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("seqd_fence") && stderr.contains("docs/operations.md"),
        "{stderr}"
    );
    assert!(
        !stderr.contains(role.url.as_str()),
        "no password printed: {stderr}"
    );
}
