//! seqd where the database aborts conflicting work and expects the client to
//! run it again (docs/operations.md, "Distributed SQL"): every statement and transaction
//! of the PostgreSQL and MariaDB stores is retried on SQLSTATE 40001
//! (serialization failure; MariaDB deadlock) and 40P01 (PostgreSQL deadlock),
//! counted in `seqd_store_retries_total`.
//!
//! - PostgreSQL with `default_transaction_isolation = serializable`, the
//!   isolation CockroachDB and YugabyteDB run by default: eight instances
//!   (each its own pool) reserve from ONE row at once, back to back. Under SERIALIZABLE an
//!   `UPDATE` of a row that a concurrent transaction changed and committed
//!   fails with 40001, so without the retry most reservations would fail.
//! - A real deadlock between an operator's transaction and a bump, on
//!   PostgreSQL (40P01) and MariaDB (40001): the bump is the victim and is run
//!   again from its `BEGIN`.
//!
//! The retries are read from seqd's own Prometheus registry, so these tests
//! fail if the retry is removed.

use crate::support::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Backend, TestDb};
use seqd::store::postgres::PostgresStore;
use seqd::store::{prelude::*, BumpMode, StoreOptions};
use sqlx::{Connection, MySqlConnection, PgConnection};

/// Instances (stores, each with its own pool) reserving from one row.
const INSTANCES: usize = 8;
/// Tasks per instance reserving back to back: eight reservers at once, as
/// many as eight allocator instances put on one sequence (one fetch per
/// sequence per instance). Sixteen such closed-loop reservers saturate the
/// row, and then the bounded retry gives up on some reservations (1 to 3 of
/// 16 tasks per run on this 2-core machine under load, about 0.3% of the
/// reservations): an overload, not what this test is about.
const TASKS: usize = 1;
/// Reservations per task.
const RESERVATIONS: usize = 40;
/// The row's step: the size of each reservation.
const STEP: i64 = 3;

/// The sum of `seqd_store_retries_total{backend, sqlstate}` in seqd's
/// registry (installed by this call if it is not yet).
fn retries(backend: &str, sqlstate: &str) -> u64 {
    let text = seqd::http::metrics::handle().render();
    let (b, s) = (
        format!("backend=\"{backend}\""),
        format!("sqlstate=\"{sqlstate}\""),
    );
    text.lines()
        .filter(|l| l.starts_with("seqd_store_retries_total{") && l.contains(&b) && l.contains(&s))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// `url` with every session's transactions SERIALIZABLE by default (libpq
/// `options`, appended to the search path the harness set).
fn serializable(url: &str) -> String {
    format!("{url}&options=-cdefault_transaction_isolation%3Dserializable")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reservations_on_one_row_all_succeed_and_tile_under_serializable_contention() {
    let Some(db) = common::test_db(Backend::Postgres).await else {
        return;
    };
    let before = retries("postgres", "40001");
    let setup = common::store(&db).await;
    common::create_seq(&setup, "hot", 1, STEP).await;

    let url = serializable(&db.url);
    let options = StoreOptions::default().with_max_connections(TASKS as u32);
    let mut stores = Vec::new();
    for _ in 0..INSTANCES {
        stores.push(Arc::new(
            PostgresStore::connect_with(&url, &options).await.unwrap(),
        ));
    }
    let isolation: String = sqlx::query_scalar("SHOW transaction_isolation")
        .fetch_one(stores[0].pool())
        .await
        .unwrap();
    assert_eq!(isolation, "serializable", "the stores' sessions");

    let started = Instant::now();
    let mut tasks = Vec::new();
    for store in &stores {
        for _ in 0..TASKS {
            let store = Arc::clone(store);
            tasks.push(tokio::spawn(async move {
                let name = common::name("hot");
                let mut got = Vec::new();
                for _ in 0..RESERVATIONS {
                    match store.reserve(&name, 1).await {
                        Ok(r) => got.push((r.first(), r.max_id)),
                        Err(e) => return Err(format!("a reservation failed: {e}")),
                    }
                }
                Ok(got)
            }));
        }
    }
    let mut ranges = Vec::new();
    let mut failures = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(got) => ranges.extend(got),
            Err(e) => failures.push(e),
        }
    }
    let elapsed = started.elapsed();
    let retried = retries("postgres", "40001") - before;
    eprintln!(
        "{} reservations by {} tasks in {elapsed:?}; {retried} retries after 40001; {} tasks failed",
        ranges.len(),
        INSTANCES * TASKS,
        failures.len()
    );
    assert!(failures.is_empty(), "failures: {failures:?}");
    assert_eq!(ranges.len(), INSTANCES * TASKS * RESERVATIONS);

    // Every range exactly STEP long, the ranges tiling 1..=max_id: no ID
    // twice, none lost.
    ranges.sort_unstable();
    let mut next = 1;
    for &(first, last) in &ranges {
        assert_eq!(first, next, "a gap or an overlap at {first}..={last}");
        assert_eq!(last - first + 1, STEP);
        next = last + 1;
    }
    assert_eq!(common::row(&setup, "hot").await.max_id, next - 1);
    assert!(
        retried > 0,
        "the contention must have produced serialization failures, retried"
    );
}

/// Waits until `waiting` answers at least 1 (the bump waits for a row
/// lock), polling every 150 ms on one connection (MariaDB refreshes what
/// `information_schema.INNODB_TRX` shows only when it was not read for
/// 100 ms); panics with the bump's outcome if it ended first.
async fn until_waiting<F, T>(mut waiting: F, bump: &mut tokio::task::JoinHandle<T>)
where
    F: AsyncFnMut() -> i64,
    T: std::fmt::Debug,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while waiting().await < 1 {
        if bump.is_finished() {
            panic!(
                "the bump ended without waiting for the lock: {:?}",
                bump.await
            );
        }
        assert!(
            Instant::now() < deadline,
            "the bump never waited for the lock"
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

/// An operator's transaction holds row `b` (and, to be the heavier one that
/// MariaDB keeps, 200 more); a bump of `a` and `b` locks `a` and waits for
/// `b`; the operator's transaction then updates `a`: a deadlock. The bump is
/// the one aborted (PostgreSQL: its own deadlock check runs first, having
/// waited longer; MariaDB: it changed fewer rows), and it is run again from
/// its `BEGIN` once the operator commits: one bump of each row, and a retry
/// counted.
async fn a_deadlocked_bump_is_run_again_from_its_start(db: TestDb) {
    let (backend, sqlstate) = match db.backend {
        Backend::Postgres => ("postgres", "40P01"),
        _ => ("mysql", "40001"),
    };
    let before = retries(backend, sqlstate);
    // Lock waits bounded at 8 s rather than 2 s: room for a slow machine.
    let database = seqd::store::connect(
        &db.url,
        &StoreOptions::for_fetch_timeout(Duration::from_secs(20)),
    )
    .await
    .unwrap();
    let store = database.sequences();
    store.migrate().await.unwrap();
    for n in ["a", "b"] {
        store.create(&common::new_seq(n, 1, 10)).await.unwrap();
    }
    for i in 0..200 {
        store
            .create(&common::new_seq(&format!("f{i:03}"), 1, 10))
            .await
            .unwrap();
    }

    // Row `b` and every later one: a range that does not reach `a`.
    let hold = "UPDATE sequences SET description = 'held' WHERE name >= 'b'";
    let close = "UPDATE sequences SET description = 'closed' WHERE name = 'a'";
    let names = [common::name("a"), common::name("b")];
    // The operator's transaction on a connection of type `$conn`, the bump
    // beside it, `$count` counting the bump's lock waits.
    macro_rules! deadlock {
        ($conn:ty, $op:ident => { $($setup:tt)* }, $count:expr) => {{
            let mut $op = <$conn>::connect(&db.url).await.unwrap();
            $($setup)*
            let mut tx = $op.begin().await.unwrap();
            sqlx::query(hold).execute(&mut *tx).await.unwrap();
            let mut bump = {
                let store = Arc::clone(&store);
                tokio::spawn(async move { store.bump(Some(&names), 100, BumpMode::Apply).await })
            };
            let mut probe = <$conn>::connect(&db.url).await.unwrap();
            let probe = &mut probe;
            until_waiting(
                async || {
                    sqlx::query_scalar($count)
                        .fetch_one(&mut *probe)
                        .await
                        .unwrap()
                },
                &mut bump,
            )
            .await;
            sqlx::query(close).execute(&mut *tx).await.unwrap();
            tx.commit().await.unwrap();
            bump.await.unwrap()
        }};
    }
    let bumped = match db.backend {
        // PostgreSQL aborts the session whose deadlock check finds the cycle,
        // each waiter checking once, `deadlock_timeout` (1 s) after it began to
        // wait: the operator's check is delayed so that the bump's comes first
        // (a superuser setting: best effort).
        Backend::Postgres => deadlock!(
            PgConnection,
            op => {
                let _ = sqlx::query("SET deadlock_timeout = '10s'")
                    .execute(&mut op)
                    .await;
            },
            "SELECT COUNT(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE NOT l.granted AND a.datname = current_database() \
             AND a.query LIKE 'SELECT name, max_id FROM sequences%'"
        ),
        _ => deadlock!(
            MySqlConnection,
            op => {},
            "SELECT COUNT(*) FROM information_schema.INNODB_TRX \
             WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE 'SELECT name, max_id FROM sequences%'"
        ),
    };

    let bumped = bumped.expect("the bump succeeds after the deadlock");
    assert_eq!(bumped.len(), 2);
    for n in ["a", "b"] {
        let row = common::row(&store, n).await;
        assert_eq!(row.max_id, 100, "{n} bumped exactly once");
    }
    assert_eq!(common::row(&store, "a").await.description, "closed");
    let retried = retries(backend, sqlstate) - before;
    eprintln!("{backend}: {retried} retries after {sqlstate}");
    assert!(retried >= 1, "the deadlock victim was run again");
}

network_backends!(a_deadlocked_bump_is_run_again_from_its_start);
