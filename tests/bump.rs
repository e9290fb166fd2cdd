//! `Store::bump`, the failover fence, on every backend and the in-memory
//! store: it loses no update while instances reserve segments of the same
//! rows, and `--all` over 100,000 rows is one all-or-nothing change.

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{Backend, TestDb};
use seqd::domain::SeqName;
use seqd::store::memory::MemoryStore;
use seqd::store::{BumpMode, Bumped, Store, StoreError};
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

per_backend!(
    bump_racing_reservations_loses_no_update_on,
    bump_of_every_row_covers_a_hundred_thousand_rows_all_or_nothing,
);
