//! `Catalog::bump`, the failover fence, on every backend and the in-memory
//! store: it loses no update while instances reserve segments of the same
//! rows, `--all` over 100,000 rows is one all-or-nothing change, and a bump
//! of a serial sequence raises its period counter rows (and no lookalike's),
//! so serials issued before a failover to a lagging replica never come again.

use crate::support::common;
use crate::support::server;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{clear_of_midnight, Backend, TestDb};
use reqwest::Method;
use seqd::config::Settings;
use seqd::domain::SeqName;
use seqd::store::memory::MemoryStore;
use seqd::store::{BumpMode, Bumped, Store, StoreError};
use serde_json::json;
use server::TestServer;
use tokio::sync::{watch, Barrier};

/// Tasks reserving while the bumps run.
const RESERVERS: usize = 8;
/// Reservations each task makes before the bumps start.
const BEFORE: usize = 5;
/// Reservations each task makes after both bumps returned.
const AFTER: usize = 5;
/// What the bump of every row adds.
const BY_ALL: i64 = 1_000_000;
/// What the bump of the named rows adds.
const BY_NAMED: i64 = 333;

/// An inclusive range of IDs: a reservation's, or the gap a bump opened.
type Span = (i64, i64);

/// The spans each sequence received, by name.
type Spans = BTreeMap<String, Vec<Span>>;

/// Reserves on `name` until it has made [`BEFORE`] reservations, meets the
/// others at `start`, then goes on until `done` is set and it has made
/// [`AFTER`] more. Returns the ranges it received.
async fn reserve_around_the_bumps(
    store: Arc<dyn Store>,
    name: SeqName,
    start: Arc<Barrier>,
    mut done: watch::Receiver<bool>,
) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut after = 0;
    while after < AFTER {
        // Sizes vary: 7 (the row's step), 7, 11, 16.
        let min_size = 1 + (spans.len() as i64 % 4) * 5;
        let r = store.reserve(&name, min_size).await.expect("reserve");
        spans.push((r.first(), r.max_id));
        if spans.len() == BEFORE {
            start.wait().await;
        }
        if *done.borrow_and_update() {
            after += 1;
        }
    }
    spans
}

/// Runs one bump once every reserver is under way; returns what it changed.
async fn bump_when_started(
    store: Arc<dyn Store>,
    names: Option<Vec<SeqName>>,
    by: i64,
    start: Arc<Barrier>,
) -> Vec<Bumped> {
    start.wait().await;
    store
        .bump(names.as_deref(), by, BumpMode::Apply)
        .await
        .expect("bump")
}

/// Asserts that `spans` tile `(initial, last]` exactly (no overlap, no hole)
/// and that `last` is the row's `max_id`.
fn assert_tiles(name: &str, mut spans: Vec<Span>, initial: i64, last: i64) {
    spans.sort();
    let mut next = initial + 1;
    for (first, end) in &spans {
        assert_eq!(*first, next, "{name}: overlap or hole at {first}..={end}");
        next = end + 1;
    }
    assert_eq!(next - 1, last, "{name}: the spans end below max_id");
}

/// Two sequences; [`RESERVERS`] tasks reserve on them while a bump of every
/// row and a bump of both by name run. Afterwards each row's `max_id` is its
/// initial value plus every reserved size plus both bumps, and the reserved
/// ranges and the bumps' gaps (`old_max_id`, `new_max_id`] tile the row's IDs
/// exactly: no reservation was lost, none overlaps another or a bump's gap.
async fn bump_racing_reservations_loses_no_update(store: Arc<dyn Store>) {
    let names = ["race-a", "race-b"];
    for (name, start) in names.iter().zip([1, 1001]) {
        store
            .create(&common::new_seq(name, start, 7))
            .await
            .expect("create");
    }
    let initial = [0, 1000];
    let start = Arc::new(Barrier::new(RESERVERS + 2));
    let (done_tx, done_rx) = watch::channel(false);

    let reservers: Vec<_> = (0..RESERVERS)
        .map(|i| {
            let name = common::name(names[i % names.len()]);
            tokio::spawn(reserve_around_the_bumps(
                store.clone(),
                name,
                start.clone(),
                done_rx.clone(),
            ))
        })
        .collect();
    let named: Vec<SeqName> = names.iter().map(|n| common::name(n)).collect();
    let bump_all = tokio::spawn(bump_when_started(
        store.clone(),
        None,
        BY_ALL,
        start.clone(),
    ));
    let bump_named = tokio::spawn(bump_when_started(
        store.clone(),
        Some(named),
        BY_NAMED,
        start.clone(),
    ));
    let bumps = [bump_all.await.unwrap(), bump_named.await.unwrap()];
    done_tx.send_replace(true);

    let mut spans = Spans::new();
    for (i, task) in reservers.into_iter().enumerate() {
        spans
            .entry(names[i % names.len()].to_string())
            .or_default()
            .extend(task.await.unwrap());
    }
    let reserved: BTreeMap<String, i64> = spans
        .iter()
        .map(|(name, s)| (name.clone(), s.iter().map(|(a, b)| b - a + 1).sum()))
        .collect();
    for (bump, by) in bumps.iter().zip([BY_ALL, BY_NAMED]) {
        assert_eq!(bump.len(), names.len(), "{bump:?}");
        for b in bump {
            assert_eq!(b.new_max_id - b.old_max_id, by, "{b:?}");
            let gap = (b.old_max_id + 1, b.new_max_id);
            spans.get_mut(&b.name).expect("a bumped name").push(gap);
        }
    }

    for (name, initial) in names.iter().zip(initial) {
        let max_id = common::row(&store, name).await.max_id;
        assert_eq!(max_id, initial + reserved[*name] + BY_ALL + BY_NAMED);
        assert_tiles(name, spans.remove(*name).unwrap(), initial, max_id);
    }
}

async fn bump_racing_reservations_loses_no_update_on(db: TestDb) {
    bump_racing_reservations_loses_no_update(common::store(&db).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bump_racing_reservations_loses_no_update_in_memory() {
    bump_racing_reservations_loses_no_update(Arc::new(MemoryStore::new())).await;
}

/// How many rows the large bump changes.
const MANY: i64 = 100_000;

/// Inserts rows `s1..=s<MANY>` with `max_id` equal to their number, in one
/// statement (a cross join of five tables of digits).
async fn insert_many(db: &TestDb) {
    let digit = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 \
                 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 \
                 UNION ALL SELECT 8 UNION ALL SELECT 9)";
    let n = "(a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d + 1)";
    let name = match db.backend {
        Backend::Mysql => format!("CONCAT('s', {n})"),
        Backend::Postgres | Backend::Sqlite => format!("'s' || {n}"),
    };
    let sql = format!(
        "INSERT INTO sequences (name, max_id, step) SELECT {name}, {n}, 10 \
         FROM {digit} a, {digit} b, {digit} c, {digit} e, {digit} f"
    );
    assert_eq!(common::execute(db, &sql).await, MANY as u64);
}

/// `bump(None)` over 100,000 rows: first refused as a whole because one row
/// would pass `i64::MAX` (nothing changes), then, with that row gone, every
/// row is raised by exactly N.
async fn bump_of_every_row_covers_a_hundred_thousand_rows_all_or_nothing(db: TestDb) {
    let store = common::store(&db).await;
    insert_many(&db).await;
    store
        .create(&common::new_seq("full", i64::MAX - 10, 1))
        .await
        .expect("create");

    let refused = store.bump(None, 1000, BumpMode::Apply).await;
    match refused {
        Err(StoreError::BumpRefused(r)) => assert_eq!(r.overflow, ["full"], "{r:?}"),
        other => panic!("expected a refusal, got {:?}", other.map(|p| p.len())),
    }
    assert_eq!(common::row(&store, "s1").await.max_id, 1, "nothing changed");

    common::execute(&db, "DELETE FROM sequences WHERE name = 'full'").await;
    let plan = store.bump(None, 1000, BumpMode::Apply).await.expect("bump");
    assert_eq!(plan.len() as i64, MANY);
    let rows = store.list().await.expect("list");
    assert_eq!(rows.len() as i64, MANY);
    for row in rows {
        let n: i64 = row.name.as_str()[1..].parse().expect("s<n>");
        assert_eq!(row.max_id, n + 1000, "{}", row.name);
    }
}

/// Creates the daily serial sequence `name_` (counters from 1, step 10)
/// with a counter row for each of `keys`, each reserved once (`max_id` 10).
async fn serial_with_counters(store: &Arc<dyn Store>, name_: &str, keys: &[&str]) {
    common::create_daily_serial(store, name_, 10, "S{yyyy}{MM}{dd}{seq:06}").await;
    let parent = common::name(name_);
    for key in keys {
        assert!(store
            .create_period(&parent, key)
            .await
            .expect("create period"));
        let r = store
            .reserve(&parent.period_counter(key), 1)
            .await
            .expect("reserve a counter");
        assert_eq!(r.max_id, 10);
    }
}

/// `max_id` of each row of `names` (a sequence, or a counter `name@key`
/// read from the list of its sequence's periods), in that order.
async fn max_ids(store: &Arc<dyn Store>, names: &[&str]) -> Vec<i64> {
    let mut out = Vec::new();
    for name in names {
        let max_id = match name.split_once('@') {
            None => common::row(store, name).await.max_id,
            Some((parent, key)) => {
                let periods = store.list_periods(&common::name(parent)).await.unwrap();
                periods
                    .into_iter()
                    .find(|p| p.key == key)
                    .unwrap_or_else(|| panic!("no counter row {name}"))
                    .max_id
            }
        };
        out.push(max_id);
    }
    out
}

/// The names a bump planned, in its order.
fn planned(plan: &[Bumped]) -> Vec<&str> {
    plan.iter().map(|b| b.name.as_str()).collect()
}

/// A bump of serial sequence `ord` raises `ord` and its counter rows
/// `ord@KEY`, in a dry run and for real, and nothing else: not the counters
/// of `order`, `ord.x` or `o_d` (whose `_` is a `LIKE` wildcard: `o_d@%`
/// would match `ord@...`). A counter that would pass `i64::MAX` refuses the
/// whole bump.
async fn a_bump_of_a_serial_sequence_raises_its_counters_and_no_lookalikes(db: TestDb) {
    let store = common::store(&db).await;
    serial_with_counters(&store, "ord", &["20261130", "20261201"]).await;
    for lookalike in ["order", "ord.x", "o_d"] {
        serial_with_counters(&store, lookalike, &["20261130"]).await;
    }
    let counters = [
        "ord@20261130",
        "ord@20261201",
        "order@20261130",
        "ord.x@20261130",
        "o_d@20261130",
    ];

    let plan = store
        .bump(Some(&[common::name("o_d")]), 5, BumpMode::Apply)
        .await
        .expect("bump o_d");
    assert_eq!(planned(&plan), ["o_d", "o_d@20261130"]);
    assert_eq!(max_ids(&store, &counters).await, [10, 10, 10, 10, 15]);

    let ord = [common::name("ord")];
    let dry = store
        .bump(Some(&ord), 1000, BumpMode::DryRun)
        .await
        .expect("dry run");
    assert_eq!(planned(&dry), ["ord", "ord@20261130", "ord@20261201"]);
    assert_eq!(max_ids(&store, &counters).await, [10, 10, 10, 10, 15]);

    let plan = store
        .bump(Some(&ord), 1000, BumpMode::Apply)
        .await
        .expect("bump ord");
    assert_eq!(plan, dry, "the dry run showed what the bump did");
    assert_eq!((plan[1].old_max_id, plan[1].new_max_id), (10, 1010));
    assert_eq!(max_ids(&store, &counters).await, [1010, 1010, 10, 10, 15]);
    assert_eq!(max_ids(&store, &["ord", "order"]).await, [1000, 0]);

    // A counter near i64::MAX refuses the bump of its sequence, all of it.
    common::execute(
        &db,
        "UPDATE sequences SET max_id = 9223372036854775000 WHERE name = 'ord@20261201'",
    )
    .await;
    match store.bump(Some(&ord), 1000, BumpMode::Apply).await {
        Err(StoreError::BumpRefused(r)) => assert_eq!(r.overflow, ["ord@20261201"], "{r:?}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        max_ids(&store, &["ord", "ord@20261130"]).await,
        [1000, 1010]
    );
}

/// [`a_bump_of_a_serial_sequence_raises_its_counters_and_no_lookalikes`]'s
/// first case on the in-memory store.
#[tokio::test]
async fn a_bump_of_a_serial_sequence_in_memory_raises_its_counters_only() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    serial_with_counters(&store, "ord", &["20261130"]).await;
    serial_with_counters(&store, "order", &["20261130"]).await;
    let plan = store
        .bump(Some(&[common::name("ord")]), 7, BumpMode::Apply)
        .await
        .expect("bump");
    assert_eq!(planned(&plan), ["ord", "ord@20261130"]);
    assert_eq!(
        max_ids(&store, &["ord@20261130", "order@20261130"]).await,
        [17, 10]
    );
}

/// A server on `db` (clear of midnight) that created the daily serial
/// sequence `ord` and issued its first three serials.
async fn primary_with_three_serials(db: &TestDb) -> (TestServer, Vec<String>) {
    clear_of_midnight().await;
    let primary = TestServer::start(Settings::for_database(db.url.clone())).await;
    let made = primary
        .send_json(
            Method::POST,
            "/v1/sequences",
            &json!({"name": "ord", "format": "ORD{yyyy}{MM}{dd}{seq:09}", "reset": "day"}),
        )
        .await;
    assert_eq!(made.status(), 201);
    let issued = serials(&primary, 3).await;
    (primary, issued)
}

/// `n` serials of `ord` from `s`'s `/next`.
async fn serials(s: &TestServer, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        let body = s.get_json("/v1/sequences/ord/next").await;
        out.push(body["serial"].as_str().expect("a serial").to_string());
    }
    out
}

/// A failover: `primary` (which issued `issued`) stops, and `lag` (SQL on
/// the one counter row of `ord`) makes the promoted database `db` lag
/// behind it; the operator runs `seqd sequences bump ord --by 1000000`
/// (asserted to succeed; its stdout), and an instance on `db` issues 3
/// serials, none of them among `issued` and the first one above the bump.
async fn fail_over_and_bump(
    db: &TestDb,
    primary: TestServer,
    lag: &str,
    issued: &[String],
) -> String {
    primary.stop().await;
    assert_eq!(common::execute(db, lag).await, 1, "{lag}");
    let out = common::seqd_on(db, &["sequences", "bump", "ord", "--by", "1000000"]).await;
    let stdout = common::ok(&out);
    let replica = TestServer::start(Settings::for_database(db.url.clone())).await;
    let after = serials(&replica, 3).await;
    for serial in &after {
        assert!(
            !issued.contains(serial),
            "{serial} issued twice: {issued:?} then {after:?}"
        );
    }
    assert!(after[0].ends_with("001000001"), "{after:?}");
    replica.stop().await;
    stdout
}

/// The failover the fence is for: an instance issues serials, the database
/// fails over to a replica whose counter row lags (simulated by lowering the
/// row by SQL), the operator runs `seqd sequences bump ord --by N` (which
/// lists the counter row it raised), and an instance on the promoted
/// database issues serials none of which the first instance issued.
async fn serials_after_a_bump_never_repeat_those_a_lagging_replica_lost(db: TestDb) {
    let (primary, issued) = primary_with_three_serials(&db).await;
    assert!(issued[0].ends_with("000000001"), "{issued:?}");
    // The replica never saw the reservations: its counter rows start over.
    let lag = "UPDATE sequences SET max_id = 0 WHERE name >= 'ord@' AND name < 'ord@:'";
    let stdout = fail_over_and_bump(&db, primary, lag, &issued).await;

    // The operator saw the counter row fenced.
    let counter_line = stdout
        .lines()
        .find(|l| l.starts_with("ord@"))
        .unwrap_or_else(|| panic!("no counter row listed: {stdout}"));
    let fields: Vec<&str> = counter_line.split_whitespace().collect();
    assert_eq!(fields[1..4], ["0", "->", "1000000"], "{counter_line}");
    assert!(counter_line.contains("counter of period"), "{counter_line}");
    assert!(
        stdout.contains("bumped 1 sequences by 1000000, with 1 period counter rows"),
        "{stdout}"
    );
}

/// A replica that never received the current period's counter row: the bump
/// of the sequence makes that row first, so it is fenced too, and the next
/// serials start above the bump instead of at `start` again.
async fn a_bump_fences_a_period_row_the_replica_never_received(db: TestDb) {
    let (primary, issued) = primary_with_three_serials(&db).await;
    let lag = "DELETE FROM sequences WHERE name >= 'ord@' AND name < 'ord@:'";
    fail_over_and_bump(&db, primary, lag, &issued).await;
}

per_backend!(
    a_bump_fences_a_period_row_the_replica_never_received,
    bump_racing_reservations_loses_no_update_on,
    bump_of_every_row_covers_a_hundred_thousand_rows_all_or_nothing,
    a_bump_of_a_serial_sequence_raises_its_counters_and_no_lookalikes,
    serials_after_a_bump_never_repeat_those_a_lagging_replica_lost,
);
