//! The storage contract, reservations and connections: every `Store`
//! backend (SQLite, PostgreSQL, MariaDB) must pass this one suite, together
//! with `store_contract.rs` (rows). Each test runs once per backend on a
//! fresh database (see `common`); run one backend with e.g.
//! `cargo test --test in_process store_contract_reserve:: -- --skip sqlite --skip mysql`.
//!
//! Here: reserve (sizes, `i64::MAX`, concurrency, two instances),
//! compare-and-set of `max_id`, migrate, ping, connect, and each backend's
//! session settings.

use crate::support::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::{assert_recent, execute, name, new_seq, Backend, TestDb};
use seqd::store::{prelude::*, Reservation, SequencePatch, Store, StoreError, StoreOptions};

/// A reservation up to `max_id` of `size` IDs, on a row of step `row_step`
/// ordered per instance.
fn reservation(max_id: i64, size: i64, row_step: i64) -> Reservation {
    Reservation {
        max_id,
        size,
        row_step,
        ordering: seqd::domain::IdOrdering::Instance,
        regressed: false,
    }
}

/// Spawns a task per store of `stores`, each reserving `n` times from `seq`
/// (asking for at least 1 ID); [`all_reserved`] collects them. A reservation
/// refused as `Unavailable` (SQLite's writers waited past the busy timeout on
/// a loaded machine) is asked again, as the allocator's fetch loop asks
/// again: it wrote nothing, and a refusal that had written would leave a hole
/// the tiling check finds.
fn spawn_reservers(
    stores: impl IntoIterator<Item = Arc<dyn Store>>,
    seq: &'static str,
    n: usize,
) -> Vec<tokio::task::JoinHandle<Vec<Reservation>>> {
    stores
        .into_iter()
        .map(|store| {
            tokio::spawn(async move {
                let mut got = Vec::new();
                for _ in 0..n {
                    let mut tries = 0;
                    let reserved = loop {
                        match store.reserve(&name(seq), 1).await {
                            Err(StoreError::Unavailable(_)) if tries < 20 => tries += 1,
                            other => break other.unwrap(),
                        }
                    };
                    got.push(reserved);
                }
                got
            })
        })
        .collect()
}

/// Every reservation of `tasks`, once all have finished.
async fn all_reserved(tasks: Vec<tokio::task::JoinHandle<Vec<Reservation>>>) -> Vec<Reservation> {
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

/// Asserts that `reservations` tile `(start - 1, end]` exactly: no overlap,
/// no hole, and that each one's size is consistent.
fn assert_tiles(mut reservations: Vec<Reservation>, start: i64, end: i64) {
    reservations.sort_by_key(|r| r.first());
    let mut next = start;
    for r in &reservations {
        assert!(r.size >= 1 && r.size >= r.row_step, "bad size in {r:?}");
        assert_eq!(
            r.first(),
            next,
            "overlap or hole at {r:?} (expected first {next})"
        );
        next = r.max_id + 1;
    }
    assert_eq!(
        next - 1,
        end,
        "ranges end at {} but the row's max_id is {end}",
        next - 1
    );
}

// ---------------------------------------------------------------------------
// reserve

async fn reserve_returns_consecutive_ranges_of_the_row_step(db: TestDb) {
    let store = common::store_with(&db, "order", 1001, 100).await;
    let before = common::row(&store, "order").await;
    let mut expected_first = 1001;
    for _ in 0..5 {
        let r = store.reserve(&name("order"), 1).await.unwrap();
        assert_eq!(r, reservation(expected_first + 99, 100, 100));
        assert_eq!(r.first(), expected_first);
        expected_first += 100;
    }
    let after = common::row(&store, "order").await;
    assert_eq!(after.max_id, 1500);
    assert!(after.updated_at >= before.updated_at);
}

async fn reserve_with_min_size_above_the_step_reserves_min_size(db: TestDb) {
    let store = common::store_with(&db, "order", 1, 10).await;
    let r = store.reserve(&name("order"), 250).await.unwrap();
    assert_eq!(r, reservation(250, 250, 10));
    let r = store.reserve(&name("order"), 1).await.unwrap();
    assert_eq!(r, reservation(260, 10, 10));
    assert_eq!(
        common::row(&store, "order").await.step,
        10,
        "reserve must not change the row's step"
    );
}

async fn reserve_with_min_size_below_the_step_reserves_the_step(db: TestDb) {
    let store = common::store_with(&db, "order", 1, 100).await;
    for min_size in [0, 1, 99, 100] {
        let r = store.reserve(&name("order"), min_size).await.unwrap();
        assert_eq!((r.size, r.row_step), (100, 100), "min_size {min_size}");
    }
    assert_eq!(common::row(&store, "order").await.max_id, 400);
}

async fn step_changed_by_update_is_used_by_the_next_reserve(db: TestDb) {
    let store = common::store_with(&db, "order", 1, 10).await;
    assert_eq!(store.reserve(&name("order"), 1).await.unwrap().max_id, 10);
    let patch = SequencePatch {
        step: Some(1000),
        ..Default::default()
    };
    store.update(&name("order"), &patch).await.unwrap();
    let r = store.reserve(&name("order"), 1).await.unwrap();
    assert_eq!(r, reservation(1010, 1000, 1000));
    assert_eq!(r.first(), 11);
}

async fn reserve_of_a_missing_name_fails_with_not_found(db: TestDb) {
    let store = common::store(&db).await;
    for min_size in [1, 1000] {
        match store.reserve(&name("nope"), min_size).await {
            Err(StoreError::NotFound) => {}
            other => panic!("expected NotFound, got {other:?}"),
        }
    }
}

/// Asserts that reserving at least `min_size` IDs of `seq` fails with
/// `Exhausted` and leaves its row at `max_id`.
async fn assert_exhausted(store: &Arc<dyn Store>, seq: &str, min_size: i64, max_id: i64) {
    match store.reserve(&name(seq), min_size).await {
        Err(StoreError::Exhausted) => {}
        other => panic!("{seq}: expected Exhausted (min_size {min_size}), got {other:?}"),
    }
    assert_eq!(
        common::row(store, seq).await.max_id,
        max_id,
        "an exhausted row must not move"
    );
}

async fn reserve_that_would_pass_i64_max_fails_with_exhausted(db: TestDb) {
    let store = common::store(&db).await;
    common::create_seq(&store, "full", i64::MAX - 5, 10).await;
    for min_size in [1, 10, 1000, i64::MAX] {
        assert_exhausted(&store, "full", min_size, i64::MAX - 6).await;
    }
}

async fn reserve_ending_exactly_at_i64_max_succeeds_then_exhausted(db: TestDb) {
    let store = common::store(&db).await;
    common::create_seq(&store, "edge", i64::MAX - 9, 10).await;
    let r = store.reserve(&name("edge"), 1).await.unwrap();
    assert_eq!(r, reservation(i64::MAX, 10, 10));
    assert_eq!(r.first(), i64::MAX - 9);
    assert_exhausted(&store, "edge", 1, i64::MAX).await;

    // The very last ID on its own.
    store.create(&new_seq("last", i64::MAX, 1)).await.unwrap();
    let r = store.reserve(&name("last"), 1).await.unwrap();
    assert_eq!((r.first(), r.max_id), (i64::MAX, i64::MAX));
    assert_exhausted(&store, "last", 1, i64::MAX).await;
}

async fn reserve_with_a_large_min_size_near_i64_max_falls_back_to_the_row_step(db: TestDb) {
    let store = common::store(&db).await;
    // max_id = i64::MAX - 100, step 10.
    common::create_seq(&store, "near", i64::MAX - 99, 10).await;
    // A min_size that still fits is honoured.
    let r = store.reserve(&name("near"), 60).await.unwrap();
    assert_eq!(r, reservation(i64::MAX - 40, 60, 10));
    // One that does not fit falls back to the row's step, until the end.
    for expected_max in [i64::MAX - 30, i64::MAX - 20, i64::MAX - 10, i64::MAX] {
        let r = store.reserve(&name("near"), 1000).await.unwrap();
        assert_eq!(r, reservation(expected_max, 10, 10));
    }
    assert_exhausted(&store, "near", 1000, i64::MAX).await;
}

async fn row_inserted_with_plain_sql_gets_defaults_and_is_reservable(db: TestDb) {
    let store = common::store(&db).await;
    let n = execute(
        &db,
        "INSERT INTO sequences (name, max_id, step) VALUES ('plain', 0, 1000)",
    )
    .await;
    assert_eq!(n, 1);
    let row = common::row(&store, "plain").await;
    assert_eq!(
        (row.max_id, row.step, row.description.as_str()),
        (0, 1000, "")
    );
    assert_recent("created_at", row.created_at);
    assert_recent("updated_at", row.updated_at);
    let r = store.reserve(&name("plain"), 1).await.unwrap();
    assert_eq!((r.first(), r.max_id, r.size), (1, 1000, 1000));
    assert_eq!(store.list().await.unwrap().len(), 1);
}

/// 32 tasks × 50 reservations on one sequence (step 7; half the tasks ask for
/// min_size 11): the ranges never overlap and tile (start - 1, max_id] exactly.
async fn concurrent_reservations_never_overlap_and_leave_no_holes(db: TestDb) {
    let store = common::store(&db).await;
    let start = 1_000_001;
    store.create(&new_seq("hot", start, 7)).await.unwrap();
    let mut tasks = Vec::new();
    for t in 0..32 {
        let store = store.clone();
        let min_size = if t % 2 == 0 { 1 } else { 11 };
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::with_capacity(50);
            for _ in 0..50 {
                let r = store.reserve(&name("hot"), min_size).await.unwrap();
                assert_eq!(r.row_step, 7);
                assert_eq!(
                    r.size,
                    min_size.max(7),
                    "size must be what this reservation added"
                );
                got.push(r);
            }
            got
        }));
    }
    let all = all_reserved(tasks).await;
    assert_eq!(all.len(), 32 * 50);
    let end = common::row(&store, "hot").await.max_id;
    assert_eq!(end, start - 1 + 16 * 50 * 7 + 16 * 50 * 11);
    assert_tiles(all, start, end);
}

/// Reservations racing with step changes: each reservation's size is the
/// step its own statement saw, so the ranges still tile exactly.
async fn reservations_racing_step_updates_still_tile_exactly(db: TestDb) {
    let store = common::store_with(&db, "moving", 1, 5).await;
    let tasks = spawn_reservers(vec![store.clone(); 8], "moving", 40);
    let updater = {
        let store = store.clone();
        tokio::spawn(async move {
            for i in 0..40 {
                let step = if i % 2 == 0 { 3 } else { 50 };
                store
                    .update(
                        &name("moving"),
                        &SequencePatch {
                            step: Some(step),
                            ..Default::default()
                        },
                    )
                    .await
                    .unwrap();
                tokio::task::yield_now().await;
            }
        })
    };
    let all = all_reserved(tasks).await;
    updater.await.unwrap();
    let steps: BTreeSet<i64> = all.iter().map(|r| r.row_step).collect();
    assert!(steps.is_subset(&BTreeSet::from([3, 5, 50])), "{steps:?}");
    for r in &all {
        assert_eq!(r.size, r.row_step, "{r:?}");
    }
    let end = common::row(&store, "moving").await.max_id;
    assert_tiles(all, 1, end);
}

/// Two instances (two independent pools on one database) reserving at once.
async fn two_instances_on_one_database_never_overlap(db: TestDb) {
    let a = common::store(&db).await;
    let b = common::connect(&db).await;
    a.create(&new_seq("shared", 1, 13)).await.unwrap();
    let stores = (0..16).map(|i| [&a, &b][i % 2].clone());
    let all = all_reserved(spawn_reservers(stores, "shared", 25)).await;
    let end = common::row(&b, "shared").await.max_id;
    assert_eq!(end, 16 * 25 * 13);
    assert_tiles(all, 1, end);
}

// ---------------------------------------------------------------------------
// migrate / ping / connect

async fn migrate_is_idempotent_and_keeps_data(db: TestDb) {
    let store = common::store(&db).await; // migrated once
    store.create(&new_seq("kept", 1, 10)).await.unwrap();
    store.migrate().await.unwrap();
    store.migrate().await.unwrap();
    // A second instance migrating the same database is a no-op too.
    common::store(&db).await;
    assert_eq!(common::row(&store, "kept").await.max_id, 0);
}

async fn ping_fails_without_the_schema_and_succeeds_after_migrate(db: TestDb) {
    let store = common::connect(&db).await;
    match store.ping().await {
        Err(StoreError::Unavailable(_)) => {}
        other => panic!("ping must fail before the migrations, got {other:?}"),
    }
    store.migrate().await.unwrap();
    store.ping().await.unwrap();
    store.create(&new_seq("x", 1, 1)).await.unwrap();
    store.ping().await.unwrap();
}

/// Each backend's other URL form reaches the same database: a row created
/// through one store is read through the other.
async fn backend_name_matches_and_url_aliases_connect(db: TestDb) {
    let store = common::store(&db).await;
    assert_eq!(store.backend(), db.backend.store_name());
    let alias = match db.backend {
        Backend::Postgres => db.url.replacen("postgres://", "postgresql://", 1),
        Backend::Mysql => db.url.replacen("mysql://", "mariadb://", 1),
        // `sqlite://PATH` and `sqlite:PATH` name the same file.
        Backend::Sqlite => db.url.replacen("sqlite://", "sqlite:", 1),
    };
    assert_ne!(alias, db.url, "the alias is another spelling");
    store.create(&new_seq("aliased", 7, 3)).await.unwrap();
    let again = seqd::store::connect(&alias, &StoreOptions::default())
        .await
        .unwrap()
        .sequences();
    assert_eq!(again.backend(), db.backend.store_name());
    let row = again.get(&name("aliased")).await.unwrap();
    assert_eq!(
        row.map(|r| r.max_id),
        Some(6),
        "the same database through {alias}"
    );
}

/// Each test gets its own database (on PostgreSQL: a schema chosen through
/// the URL's `options=-csearch_path=...`, so this also proves it is honoured).
async fn each_test_database_is_isolated(db: TestDb) {
    let other = common::test_db(db.backend)
        .await
        .expect("a second test database");
    let a = common::store(&db).await;
    let b = common::store(&other).await;
    a.create(&new_seq("mine", 1, 10)).await.unwrap();
    assert_eq!(b.get(&name("mine")).await.unwrap(), None);
    assert!(b.list().await.unwrap().is_empty());
    b.create(&new_seq("mine", 500, 1)).await.unwrap();
    assert_eq!(common::row(&a, "mine").await.max_id, 0);
    assert_eq!(common::row(&b, "mine").await.max_id, 499);
}

/// Unreachable databases fail with `Unavailable`, not a panic or a hang.
async fn connect_to_an_unreachable_server_fails_with_unavailable(db: TestDb) {
    let url = match db.backend {
        Backend::Postgres => "postgres://postgres@127.0.0.1:1/test".to_string(),
        Backend::Mysql => "mysql://root@127.0.0.1:1/test".to_string(),
        // Without mode=rwc a missing file is not created.
        Backend::Sqlite => format!("sqlite://{}/missing.db", db.dir().unwrap().display()),
    };
    match seqd::store::connect(&url, &StoreOptions::default()).await {
        Err(StoreError::Unavailable(_)) => {}
        Err(other) => panic!("expected Unavailable, got {other:?}"),
        Ok(_) => panic!("expected Unavailable, got a database"),
    }
    if db.backend == Backend::Sqlite {
        assert!(
            !db.dir().unwrap().join("missing.db").exists(),
            "the file must not be created"
        );
    }
}

async fn compare_and_set_max_id_sets_only_the_expected_value_of_that_row(db: TestDb) {
    let store = common::store_with(&db, "cas", 1, 10).await;
    store.create(&new_seq("other", 1, 10)).await.unwrap();
    // the expected value: set
    assert!(store
        .compare_and_set_max_id(&name("cas"), 0, 500)
        .await
        .unwrap());
    assert_eq!(common::row(&store, "cas").await.max_id, 500);
    // a stale expected value: not set, nothing changes
    assert!(!store
        .compare_and_set_max_id(&name("cas"), 0, 900)
        .await
        .unwrap());
    assert_eq!(common::row(&store, "cas").await.max_id, 500);
    // lowering works too (and no other row moves)
    assert!(store
        .compare_and_set_max_id(&name("cas"), 500, 7)
        .await
        .unwrap());
    assert_eq!(common::row(&store, "cas").await.max_id, 7);
    assert_eq!(common::row(&store, "other").await.max_id, 0);
    // setting the value it holds: true only when it holds it
    assert!(store
        .compare_and_set_max_id(&name("cas"), 7, 7)
        .await
        .unwrap());
    assert!(!store
        .compare_and_set_max_id(&name("cas"), 8, 8)
        .await
        .unwrap());
    // and the next reservation starts above the value set
    let r = store.reserve(&name("cas"), 1).await.unwrap();
    assert_eq!((r.first(), r.max_id), (8, 17));
    assert!(matches!(
        store.compare_and_set_max_id(&name("nope"), 0, 1).await,
        Err(StoreError::NotFound)
    ));
}

/// A lease reserves exactly its size whatever the step, never past its cap
/// (`Exhausted`, nothing moved), and never on a global row: the statement
/// itself refuses it (`Global`) and the row does not move, so no other
/// instance's draw can meet a range taken and given back.
async fn reserve_lease_is_exact_capped_and_never_of_a_global_row(db: TestDb) {
    let store = common::store_with(&db, "lease", 1, 100).await;
    let r = store.reserve_lease(&name("lease"), 7, i64::MAX - 1).await;
    assert_eq!(r.unwrap(), reservation(7, 7, 100));
    let r = store.reserve_lease(&name("lease"), 250, i64::MAX - 1).await;
    assert_eq!(r.unwrap(), reservation(257, 250, 100));
    let patch = SequencePatch {
        ordering: Some(seqd::domain::IdOrdering::Global),
        ..Default::default()
    };
    store.update(&name("lease"), &patch).await.unwrap();
    for n in [1, 100, 1_000_000] {
        match store.reserve_lease(&name("lease"), n, i64::MAX - 1).await {
            Err(StoreError::Global) => {}
            other => panic!("a lease of {n} of a global row: {other:?}"),
        }
    }
    assert_eq!(common::row(&store, "lease").await.max_id, 257);
    // The global row still serves its merged requests.
    let r = store.reserve_exact(&name("lease"), 3).await.unwrap();
    assert_eq!((r.first(), r.max_id), (258, 260));

    // At the top: a lease whose last ID would be `i64::MAX` does not fit a
    // cap of `i64::MAX - 1`; one ID fewer does.
    common::create_seq(&store, "top", i64::MAX - 99, 100).await;
    for n in [100, 1000] {
        match store.reserve_lease(&name("top"), n, i64::MAX - 1).await {
            Err(StoreError::Exhausted) => {}
            other => panic!("a lease of {n} at the top: {other:?}"),
        }
    }
    assert_eq!(common::row(&store, "top").await.max_id, i64::MAX - 100);
    let r = store.reserve_lease(&name("top"), 99, i64::MAX - 1).await;
    assert_eq!(r.unwrap(), reservation(i64::MAX - 1, 99, 100));
    assert!(matches!(
        store.reserve_lease(&name("nope"), 1, i64::MAX - 1).await,
        Err(StoreError::NotFound)
    ));
}

per_backend!(
    reserve_lease_is_exact_capped_and_never_of_a_global_row,
    compare_and_set_max_id_sets_only_the_expected_value_of_that_row,
    reserve_returns_consecutive_ranges_of_the_row_step,
    reserve_with_min_size_above_the_step_reserves_min_size,
    reserve_with_min_size_below_the_step_reserves_the_step,
    step_changed_by_update_is_used_by_the_next_reserve,
    reserve_of_a_missing_name_fails_with_not_found,
    reserve_that_would_pass_i64_max_fails_with_exhausted,
    reserve_ending_exactly_at_i64_max_succeeds_then_exhausted,
    reserve_with_a_large_min_size_near_i64_max_falls_back_to_the_row_step,
    row_inserted_with_plain_sql_gets_defaults_and_is_reservable,
    concurrent_reservations_never_overlap_and_leave_no_holes,
    reservations_racing_step_updates_still_tile_exactly,
    two_instances_on_one_database_never_overlap,
    migrate_is_idempotent_and_keeps_data,
    ping_fails_without_the_schema_and_succeeds_after_migrate,
    backend_name_matches_and_url_aliases_connect,
    each_test_database_is_isolated,
    connect_to_an_unreachable_server_fails_with_unavailable,
);

// ---------------------------------------------------------------------------
// backend-specific settings

/// The migrator runs on a connection of its own; on `sqlite::memory:` the
/// tables it makes must outlive that connection (50 fresh stores in a row:
/// the database went away with it in some of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_in_memory_tables_outlive_the_migration_connection() {
    for round in 0..50 {
        let store = seqd::store::connect("sqlite::memory:", &StoreOptions::default())
            .await
            .unwrap()
            .sequences();
        store.migrate().await.unwrap();
        let created = store.create(&new_seq("mem", 1, 3)).await;
        assert!(created.is_ok(), "round {round}: {created:?}");
    }
}

/// `sqlite::memory:` is one database shared by all of the pool's connections
/// (and kept alive by the pool), so concurrent reservations still tile.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_in_memory_url_is_one_database_across_the_pool() {
    let store = seqd::store::connect("sqlite::memory:", &StoreOptions::default())
        .await
        .unwrap()
        .sequences();
    store.migrate().await.unwrap();
    store.create(&new_seq("mem", 1, 3)).await.unwrap();
    let all = all_reserved(spawn_reservers(vec![store.clone(); 8], "mem", 20)).await;
    assert_eq!(common::row(&store, "mem").await.max_id, 8 * 20 * 3);
    assert_tiles(all, 1, 8 * 20 * 3);
}

/// The SQLite connections use WAL, `synchronous = FULL` (a commit is on disk
/// before it returns: a power loss cannot roll `max_id` back) and the lock
/// bound of the store options as busy timeout.
#[tokio::test]
async fn sqlite_connections_use_wal_full_sync_and_a_bounded_busy_timeout() {
    let db = common::test_db(Backend::Sqlite).await.unwrap();
    let store = seqd::store::sqlite::SqliteStore::connect(&db.url)
        .await
        .unwrap();
    let pool = store.pool();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    let sync: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(sync, 2, "FULL");
    let busy: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(
        busy, 2000,
        "the default lock bound, under the 5 s fetch timeout"
    );
}

/// Every PostgreSQL session of the store's pool carries `lock_timeout` and
/// `statement_timeout` under the fetch timeout.
#[tokio::test]
async fn postgres_sessions_bound_lock_waits_and_statements() {
    let Some(db) = common::test_db(Backend::Postgres).await else {
        return;
    };
    let options = StoreOptions::for_fetch_timeout(Duration::from_secs(1));
    let store = seqd::store::postgres::PostgresStore::connect_with(&db.url, &options)
        .await
        .unwrap();
    for _ in 0..3 {
        let (lock, statement): (String, String) = sqlx::query_as(
            "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        assert_eq!((lock.as_str(), statement.as_str()), ("400ms", "600ms"));
    }
}

/// A MariaDB store on a fresh database (which lives as long as the returned
/// `TestDb`), or `None` when the test is skipped.
async fn mysql_store() -> Option<(TestDb, seqd::store::mysql::MySqlStore)> {
    let db = common::test_db(Backend::Mysql).await?;
    let store = seqd::store::mysql::MySqlStore::connect(&db.url)
        .await
        .unwrap();
    Some((db, store))
}

/// Every MariaDB session of the store's pool carries `innodb_lock_wait_timeout`
/// (whole seconds, at least 1) and `max_statement_time` under the fetch timeout.
#[tokio::test]
async fn mysql_sessions_bound_lock_waits_and_statements() {
    let Some((_db, store)) = mysql_store().await else {
        return;
    };
    let (lock, statement): (i64, f64) = sqlx::query_as(
        "SELECT CAST(@@SESSION.innodb_lock_wait_timeout AS SIGNED), CAST(@@SESSION.max_statement_time AS DOUBLE)",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!((lock, statement), (2, 3.0));
}

/// On MariaDB the table is InnoDB (row locks and transactions, which the
/// reservation relies on) and `name` compares bytes (utf8mb4_bin).
#[tokio::test]
async fn mysql_table_is_innodb_with_a_binary_name_collation() {
    let Some((_db, store)) = mysql_store().await else {
        return;
    };
    store.migrate().await.unwrap();
    let (engine,): (String,) = sqlx::query_as(
        "SELECT CAST(ENGINE AS CHAR) FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sequences'",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(engine, "InnoDB");
    let (collation,): (String,) = sqlx::query_as(
        "SELECT CAST(COLLATION_NAME AS CHAR) FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sequences' AND COLUMN_NAME = 'name'",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(collation, "utf8mb4_bin");
}
