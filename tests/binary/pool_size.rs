//! `--db-max-connections`: the pool to each database holds at most that
//! many connections (and one for the worker leases), whatever the load.

use crate::support::common;
use crate::support::server;

use common::{Backend, TestDb};
use server::Process;

/// Sessions of the seqd under test: those connected to the test's
/// database with the application name its URL sets ([`under_test`]; other
/// tests connect to the same database meanwhile, their own schemas in it),
/// but the one asking.
const OTHERS: &str = "SELECT count(*) FROM pg_stat_activity \
                      WHERE datname = current_database() AND pid <> pg_backend_pid() \
                      AND application_name = 'seqd-pool-size'";

/// `db`'s URL for the seqd under test: its sessions named, for [`OTHERS`].
fn under_test(db: &TestDb) -> String {
    format!("{}&application_name=seqd-pool-size", db.url)
}

/// Connections open to `db`'s database from other sessions than the one
/// asking, the most seen while `work` runs.
async fn most_connections_during(db: &TestDb, work: impl std::future::Future<Output = ()>) -> i64 {
    use sqlx::Connection;
    let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let mut most = 0i64;
    tokio::pin!(work);
    loop {
        tokio::select! {
            () = &mut work => break,
            () = tokio::time::sleep(std::time::Duration::from_millis(20)) => {
                let (n,): (i64,) = sqlx::query_as(OTHERS).fetch_one(&mut c).await.unwrap();
                most = most.max(n);
            }
        }
    }
    most
}

/// Waits (up to 10 s) until at most `n` other sessions are connected to
/// `db`'s database.
async fn settle(db: &TestDb, n: i64) {
    use sqlx::Connection;
    let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
    for _ in 0..200 {
        let (now,): (i64,) = sqlx::query_as(OTHERS).fetch_one(&mut c).await.unwrap();
        if now <= n {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("more than {n} sessions stayed connected before the burst");
}

/// Every name drawn once at once (first uses, reserved in groups of names),
/// then a batch of five segments of every name at once: each name's own
/// reservations, all needing a connection.
async fn cold_burst(p: &Process, names: usize) {
    let http = server::client(std::time::Duration::from_secs(60));
    for route in ["next", "batch?count=50"] {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..names {
            let (http, base) = (http.clone(), p.base.clone());
            tasks.spawn(async move {
                let resp = http
                    .get(format!("{base}/v1/sequences/t{i}/{route}"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
            });
        }
        while let Some(r) = tasks.join_next().await {
            r.unwrap();
        }
    }
}

#[tokio::test]
async fn the_pool_holds_at_most_db_max_connections() {
    let Some(db) = common::test_db(Backend::Postgres).await else {
        return;
    };
    common::ok(&common::seqd_on(&db, &["migrate"]).await);
    let names = 200;
    let rows: Vec<String> = (0..names).map(|i| format!("('t{i}', 0, 10)")).collect();
    common::execute(
        &db,
        &format!(
            "INSERT INTO sequences (name, max_id, step) VALUES {}",
            rows.join(", ")
        ),
    )
    .await;
    for (flag, most_allowed) in [("2", 3), ("30", 31)] {
        let p = Process::spawn(&under_test(&db), &["--db-max-connections", flag]).await;
        // The start's own connections (the fence's check, the migration
        // command's, the test's inserts) end before the burst.
        settle(&db, most_allowed).await;
        let most = most_connections_during(&db, cold_burst(&p, names)).await;
        assert!(
            most <= most_allowed,
            "--db-max-connections {flag}: {most} connections seen"
        );
        if flag == "30" {
            // The larger pool is used: more than the small one's limit.
            assert!(
                most > 3,
                "--db-max-connections {flag}: only {most} connections"
            );
        }
        p.kill().await;
    }
}

#[tokio::test]
async fn a_pool_size_out_of_range_is_refused() {
    for bad in ["0", "-1", "many"] {
        let flag = format!("--db-max-connections={bad}");
        let out = common::seqd_binary(&["serve", &flag]).await;
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--db-max-connections"), "{stderr}");
    }
}
