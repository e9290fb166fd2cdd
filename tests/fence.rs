//! The failover fence on the machine's PostgreSQL and MariaDB, through the
//! binary: the record a first start writes, a record naming another server
//! (what a promoted replica looks like to an instance that starts on it)
//! fenced once by instances starting together, the margin flag, and
//! `--failover-fence off`. Real replication and running instances are in
//! tests/failover.rs.

mod common;
mod server;

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
