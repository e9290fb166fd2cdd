//! Giving back at graceful shutdown, with real `seqd serve` processes on
//! every backend: a lone instance restarted continues at the next ID; an
//! instance that another reserved after gives nothing back and nothing is
//! reissued; a shutdown during a fetch (a row lock held by another
//! connection) gives nothing back and reissues nothing.

use crate::support::common;
use crate::support::server;

use std::time::Duration;

use common::{Backend, TestDb};
use server::Process;

/// Creates `name` with `step` through the API of `p`.
async fn create(p: &Process, name: &str, step: i64) {
    server::create_at(&reqwest::Client::new(), &p.base, name, 1, step).await;
}

/// `n` IDs of `name` from `p`, one request each.
async fn ids(p: &Process, name: &str, n: usize) -> Vec<i64> {
    let http = reqwest::Client::new();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(server::next_at(&http, &p.base, name).await);
    }
    out
}

/// Sends SIGTERM, waits for a clean exit, and returns the give-back's log
/// line (its counts).
async fn stop(mut p: Process) -> serde_json::Value {
    p.signal("TERM");
    let status = tokio::time::timeout(Duration::from_secs(30), p.wait())
        .await
        .expect("seqd stops within 30 s");
    assert!(status.success(), "{status:?}");
    p.log_line("gave back unused IDs")
        .await
        .expect("the give-back is logged")
}

async fn max_id(db: &TestDb, name: &str) -> i64 {
    common::row(&common::connect(db).await, name).await.max_id
}

async fn a_lone_instance_restarted_gracefully_continues_at_the_next_id(db: TestDb) {
    let p = Process::spawn(&db.url, &[]).await;
    create(&p, "orders", 1000).await;
    let before = ids(&p, "orders", 5).await;
    assert_eq!(before, vec![1, 2, 3, 4, 5]);
    let given = stop(p).await;
    assert_eq!(
        (given["ids"].as_u64(), given["sequences"].as_u64()),
        (Some(995), Some(1)),
        "{given}"
    );
    assert_eq!(max_id(&db, "orders").await, 5, "995 IDs given back");
    let p = Process::spawn(&db.url, &[]).await;
    assert_eq!(
        ids(&p, "orders", 1).await,
        vec![6],
        "no gap after a graceful restart"
    );
    let _ = stop(p).await;
}

async fn nothing_is_given_back_past_another_instances_reservation(db: TestDb) {
    let a = Process::spawn(&db.url, &[]).await;
    create(&a, "orders", 1000).await;
    let from_a = ids(&a, "orders", 3).await; // A holds 1..=1000
    let b = Process::spawn(&db.url, &[]).await;
    let from_b = ids(&b, "orders", 3).await; // B holds 1001..=2000
    assert_eq!(from_b, vec![1001, 1002, 1003]);
    // A stops first, then B: what each reports, and the row after it.
    for (p, field, reported, max, why) in [
        (
            a,
            "reserved_since",
            1,
            2000,
            "A's compare-and-set must fail",
        ),
        (b, "ids", 997, 1003, "B was the last to reserve"),
    ] {
        let given = stop(p).await;
        assert_eq!(given[field].as_u64(), Some(reported), "{given}");
        assert_eq!(max_id(&db, "orders").await, max, "{why}");
    }
    let c = Process::spawn(&db.url, &[]).await;
    let from_c = ids(&c, "orders", 3).await;
    assert_eq!(from_c, vec![1004, 1005, 1006]);
    for id in &from_c {
        assert!(!from_a.contains(id) && !from_b.contains(id));
    }
    let _ = stop(c).await;
}

/// A fetch stuck behind a row lock held by another connection when SIGTERM
/// comes: the sequence gives nothing back, and after a restart no ID is
/// handed out twice.
async fn a_shutdown_during_a_fetch_leaves_the_sequence_alone_and_reissues_nothing(db: TestDb) {
    use sqlx::Connection;
    let p = Process::spawn(&db.url, &[]).await;
    create(&p, "orders", 10).await;
    let mut before = ids(&p, "orders", 1).await; // holds 1..=10; mark at 1
    let lock_sql = "SELECT max_id FROM sequences WHERE name = 'orders' FOR UPDATE";
    // Another connection holds the row: the next fetch waits on it.
    let (tx_lock, rx_lock) = tokio::sync::oneshot::channel::<()>();
    let (tx_held, rx_held) = tokio::sync::oneshot::channel::<()>();
    let url = db.url.clone();
    let backend = db.backend;
    let holder = tokio::spawn(async move {
        // The same on either backend, on a connection of type `$conn`.
        macro_rules! hold_the_row {
            ($conn:ty) => {{
                let mut c = <$conn>::connect(&url).await.unwrap();
                let mut tx = c.begin().await.unwrap();
                sqlx::query(lock_sql).execute(&mut *tx).await.unwrap();
                tx_held.send(()).unwrap();
                let _ = rx_lock.await;
                tx.rollback().await.unwrap();
            }};
        }
        match backend {
            Backend::Postgres => hold_the_row!(sqlx::PgConnection),
            _ => hold_the_row!(sqlx::MySqlConnection),
        }
    });
    rx_held.await.unwrap();
    before.extend(ids(&p, "orders", 2).await); // past the mark: the prefetch blocks
    tokio::time::sleep(Duration::from_millis(300)).await;
    let given = stop(p).await;
    // The fetch was in flight: the sequence was left alone (not tried
    // against the locked row and failed).
    assert_eq!(
        (given["fetch_in_flight"].as_u64(), given["failed"].as_u64()),
        (Some(1), Some(0)),
        "{given}"
    );
    let after_stop = max_id(&db, "orders").await;
    tx_lock.send(()).unwrap();
    holder.await.unwrap();
    assert!(
        after_stop >= 10,
        "nothing below the reservation given back: {after_stop}"
    );
    let p = Process::spawn(&db.url, &[]).await;
    let after = ids(&p, "orders", 3).await;
    let top = *before.iter().max().unwrap();
    assert!(
        after.iter().all(|id| *id > top),
        "{before:?} then {after:?}"
    );
    let _ = stop(p).await;
}

per_backend!(
    a_lone_instance_restarted_gracefully_continues_at_the_next_id,
    nothing_is_given_back_past_another_instances_reservation,
);
network_backends!(a_shutdown_during_a_fetch_leaves_the_sequence_alone_and_reissues_nothing);
