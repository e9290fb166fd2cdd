//! The storage contract: every `Store` backend (SQLite, PostgreSQL, MariaDB)
//! must pass this one suite. Each test runs once per backend on a fresh
//! database (see `common`); run one backend with e.g.
//! `cargo test --test store_contract postgres`.

#[macro_use]
mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::Utc;
use common::{execute, name, new_seq, try_execute, Backend, TestDb};
use seqd::domain::{NamePrefix, NewSequence};
use seqd::store::{Reservation, SequencePatch, Store, StoreError, StoreOptions, MAX_PAGE};

/// Asserts that a timestamp read from the database is "now" in UTC (so the
/// column was written and decoded as UTC, not as some local time).
fn assert_recent(what: &str, t: chrono::DateTime<Utc>) {
    let delta = (Utc::now() - t).num_seconds().abs();
    assert!(delta <= 60, "{what} = {t} is {delta}s away from now (UTC)");
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
// create / get / list / update

async fn create_then_get_returns_the_row_with_max_id_start_minus_one(db: TestDb) {
    let store = common::store(&db).await;
    let created = store.create(&new_seq("order", 1001, 100)).await.unwrap();
    assert_eq!(created.name.as_str(), "order");
    assert_eq!(created.max_id, 1000);
    assert_eq!(created.step, 100);
    assert_eq!(created.description, "");
    assert_recent("created_at", created.created_at);
    assert_recent("updated_at", created.updated_at);

    let got = common::row(&store, "order").await;
    assert_eq!(got, created);
}

async fn create_keeps_the_description(db: TestDb) {
    let store = common::store(&db).await;
    let seq = NewSequence::new(name("payment"), 1, 10, "payments, v2".into(), 1_000_000).unwrap();
    assert_eq!(
        store.create(&seq).await.unwrap().description,
        "payments, v2"
    );
    assert_eq!(
        common::row(&store, "payment").await.description,
        "payments, v2"
    );
}

async fn create_with_start_one_has_max_id_zero(db: TestDb) {
    let store = common::store(&db).await;
    assert_eq!(store.create(&new_seq("s", 1, 5)).await.unwrap().max_id, 0);
    assert_eq!(common::row(&store, "s").await.max_id, 0, "as stored");
}

async fn description_of_256_multibyte_characters_round_trips(db: TestDb) {
    let store = common::store(&db).await;
    let description = "é😀".repeat(128);
    assert_eq!(description.chars().count(), 256);
    let seq = NewSequence::new(name("wide"), 1, 10, description.clone(), 1_000_000).unwrap();
    store.create(&seq).await.unwrap();
    assert_eq!(common::row(&store, "wide").await.description, description);
    let patch = SequencePatch {
        step: None,
        description: Some(description.chars().rev().collect()),
        ordering: None,
        serial: None,
    };
    let updated = store.update(&name("wide"), &patch).await.unwrap();
    assert_eq!(
        updated.description,
        description.chars().rev().collect::<String>()
    );
}

async fn create_of_an_existing_name_fails_with_already_exists(db: TestDb) {
    let store = common::store(&db).await;
    store.create(&new_seq("order", 1, 10)).await.unwrap();
    match store.create(&new_seq("order", 500, 20)).await {
        Err(StoreError::AlreadyExists) => {}
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    // The first row is untouched.
    let row = common::row(&store, "order").await;
    assert_eq!((row.max_id, row.step), (0, 10));
}

async fn get_of_a_missing_name_returns_none(db: TestDb) {
    let store = common::store(&db).await;
    assert_eq!(store.get(&name("nope")).await.unwrap(), None);
}

/// `settings_of` reads the rows of the names asked for, past one
/// statement's worth of names (`SETTINGS_CHUNK`), as `get` reads them, and
/// leaves out names without a row.
async fn settings_of_reads_the_rows_of_the_names_asked_for_in_chunks(db: TestDb) {
    let store = common::store(&db).await;
    let count = seqd::store::SETTINGS_CHUNK * 2 + 100;
    let values: Vec<String> = (0..count)
        .map(|i| format!("('s{i:05}', {i}, {})", i % 7 + 1))
        .collect();
    let sql = format!(
        "INSERT INTO sequences (name, max_id, step) VALUES {}",
        values.join(", ")
    );
    execute(&db, &sql).await;
    let serial = SequencePatch {
        ordering: Some(seqd::domain::Ordering::Global),
        serial: Some(Some(
            seqd::domain::SerialSettings::new(
                "A{yyyy}{seq:04}",
                seqd::serial::Reset::Year,
                "Europe/Paris",
                seqd::serial::Overflow::Widen,
            )
            .unwrap(),
        )),
        ..Default::default()
    };
    store.update(&name("s00003"), &serial).await.unwrap();
    // Backwards, with names that have no row among them.
    let mut asked: Vec<_> = (0..count)
        .rev()
        .map(|i| name(&format!("s{i:05}")))
        .collect();
    asked.insert(10, name("missing-1"));
    asked.push(name("missing-2"));
    let mut rows = store.settings_of(&asked).await.unwrap();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(rows.len(), count);
    for row in [&rows[0], &rows[3], &rows[count - 1]] {
        assert_eq!(Some(row), store.get(&row.name).await.unwrap().as_ref());
    }
    assert_eq!(rows[3].ordering, seqd::domain::Ordering::Global);
    assert!(rows[3].serial.is_some());
    assert_eq!(rows[6].step, 7);
    assert!(store.settings_of(&[]).await.unwrap().is_empty());
}

async fn list_returns_every_row_in_byte_order_of_name(db: TestDb) {
    let store = common::store(&db).await;
    assert!(store.list().await.unwrap().is_empty());
    let names = ["b", "a", "C", "a.b", "a-b", "a0", "B", "a_b", "a:b"];
    for n in names {
        store.create(&new_seq(n, 1, 10)).await.unwrap();
    }
    let listed = common::names(&store).await;
    let mut expected: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    expected.sort(); // byte order, as `SeqName`'s `Ord`
    assert_eq!(listed, expected);
}

/// Every page of `limit` rows with `prefix`, from the first on: (names,
/// more) per page.
async fn pages_with(
    store: &std::sync::Arc<dyn Store>,
    prefix: Option<&NamePrefix>,
    limit: u32,
) -> Vec<(Vec<String>, bool)> {
    let mut out = Vec::new();
    let mut after = None;
    for _ in 0..100 {
        let page = store
            .list_page(prefix, after.as_ref(), limit)
            .await
            .unwrap();
        let names: Vec<String> = page.rows.iter().map(|r| r.name.to_string()).collect();
        after = page.rows.last().map(|r| r.name.clone());
        out.push((names, page.more));
        if !page.more {
            return out;
        }
    }
    panic!("more than 100 pages");
}

/// Every page of `limit` rows, from the first on: (names, more) per page.
async fn pages(store: &std::sync::Arc<dyn Store>, limit: u32) -> Vec<(Vec<String>, bool)> {
    pages_with(store, None, limit).await
}

/// Asserts that `pages` tile `expected` exactly: every page but the last
/// full (`limit` rows) with `more`, the last without `more`.
fn assert_pages_tile(pages: &[(Vec<String>, bool)], expected: &[String], limit: u32, what: &str) {
    let walked: Vec<String> = pages.iter().flat_map(|(n, _)| n.clone()).collect();
    assert_eq!(
        walked, expected,
        "{what}, limit {limit}: pages tile the list exactly"
    );
    let (last, full) = pages.split_last().unwrap();
    assert!(
        !last.1,
        "{what}, limit {limit}: the last page says no more: {pages:?}"
    );
    assert!(
        !last.0.is_empty() || expected.is_empty(),
        "{what}, limit {limit}: an empty last page after a full one: {pages:?}"
    );
    for (names, more) in full {
        assert!(
            *more && names.len() == limit as usize,
            "{what}, limit {limit}: {pages:?}"
        );
    }
}

async fn list_pages_tile_the_table_in_the_byte_order_of_list(db: TestDb) {
    let store = common::store(&db).await;
    let names = [
        "b", "a", "C", "a.b", "a-b", "a0", "B", "a_b", "a:b", "Z", "z", "0", "9.x", "A-",
    ];
    for n in names {
        store.create(&new_seq(n, 1, 10)).await.unwrap();
    }
    let listed = common::names(&store).await;
    for limit in [1, 3, 5, 14, 1000] {
        assert_pages_tile(&pages(&store, limit).await, &listed, limit, "no prefix");
    }
}

async fn list_page_of_an_empty_table_or_after_the_end_is_empty_and_last(db: TestDb) {
    let store = common::store(&db).await;
    let empty = store.list_page(None, None, 10).await.unwrap();
    assert!(empty.rows.is_empty() && !empty.more, "{empty:?}");
    store.create(&new_seq("m", 1, 10)).await.unwrap();
    for after in ["m", "n", "zzz"] {
        let page = store.list_page(None, Some(&name(after)), 10).await.unwrap();
        assert!(
            page.rows.is_empty() && !page.more,
            "after {after}: {page:?}"
        );
    }
    let page = store.list_page(None, Some(&name("M")), 10).await.unwrap();
    assert_eq!(page.rows.len(), 1, "after need not exist and is exclusive");
    assert!(!page.more);
}

fn prefix(p: &str) -> NamePrefix {
    NamePrefix::parse(p).unwrap_or_else(|e| panic!("{p:?}: {e}"))
}

/// One page with `prefix` after `after`: its names and whether more follow.
async fn read_page(
    store: &std::sync::Arc<dyn Store>,
    prefix_: Option<&str>,
    after: Option<&str>,
    limit: u32,
) -> (Vec<String>, bool) {
    let (prefix_, after) = (prefix_.map(prefix), after.map(name));
    let page = store
        .list_page(prefix_.as_ref(), after.as_ref(), limit)
        .await
        .unwrap_or_else(|e| panic!("page of {prefix_:?} after {after:?}: {e}"));
    let names = page.rows.iter().map(|r| r.name.to_string()).collect();
    (names, page.more)
}

/// `names` as owned strings.
fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Names that share a start with punctuation after it, and their
/// neighbours in byte order ('-' < '.' < '0'-'9' < ':' < 'A'-'Z' < '_' <
/// 'a'-'z').
const PUNCTUATED: [&str; 17] = [
    "a", "a.b", "a-b", "a:b", "a_b", "ab", "b", "A", "B", "a0", "ba", "0", "a.b.c", "a.bc", "aZ",
    "az", "z",
];

async fn list_pages_with_a_prefix_read_exactly_the_names_starting_with_it(db: TestDb) {
    let store = common::store(&db).await;
    for n in PUNCTUATED {
        store.create(&new_seq(n, 1, 10)).await.unwrap();
    }
    let listed = common::names(&store).await;
    for p in [
        "a", "a.", "a-", "a:", "a_", "ab", "b", "A", "0", "a.b", "a.b.", "aZ", "az", "z", "c",
        "a.bz", "Z", "a0", "a.b.c.d",
    ] {
        let expected: Vec<String> = listed
            .iter()
            .filter(|n| n.starts_with(p))
            .cloned()
            .collect();
        for limit in [1, 2, 3, 7, 1000] {
            let pages = pages_with(&store, Some(&prefix(p)), limit).await;
            assert_pages_tile(&pages, &expected, limit, &format!("prefix {p:?}"));
        }
    }
    // The neighbours of the range are not in it.
    let all_a = [
        "a", "a-b", "a.b", "a.b.c", "a.bc", "a0", "a:b", "aZ", "a_b", "ab", "az",
    ];
    assert_eq!(
        read_page(&store, Some("a"), None, 1000).await,
        (strings(&all_a), false)
    );
}

async fn list_page_with_a_prefix_starts_after_after_and_ends_with_the_prefix(db: TestDb) {
    let store = common::store(&db).await;
    for n in PUNCTUATED {
        store.create(&new_seq(n, 1, 10)).await.unwrap();
    }
    let read = |after: &'static str, limit: u32| read_page(&store, Some("a"), Some(after), limit);
    // `after` below the prefix's names: the page starts at the prefix itself.
    for below in ["0", "A", "B", "Zzz"] {
        assert_eq!(
            read(below, 2).await,
            (strings(&["a", "a-b"]), true),
            "after {below}"
        );
    }
    // `after` is exclusive, also when it is the prefix.
    assert_eq!(read("a", 2).await, (strings(&["a-b", "a.b"]), true));
    // Within the range, a name or not.
    assert_eq!(
        read("a.b", 3).await,
        (strings(&["a.b.c", "a.bc", "a0"]), true)
    );
    assert_eq!(
        read("a.b.d", 10).await,
        (
            strings(&["a.bc", "a0", "a:b", "aZ", "a_b", "ab", "az"]),
            false
        )
    );
    // The last page of the prefix ends there, even though other rows follow.
    assert_eq!(
        read("ab", 1).await,
        (strings(&["az"]), false),
        "exactly full"
    );
    assert_eq!(read("ab", 2).await, (strings(&["az"]), false));
    // `after` at the end of or beyond the prefix's names: an empty last page.
    for beyond in ["az", "aza", "az_", "b", "z", "zzz"] {
        assert_eq!(read(beyond, 10).await, (vec![], false), "after {beyond}");
    }
}

async fn list_page_with_a_prefix_of_a_full_page_and_one_more(db: TestDb) {
    let store = common::store(&db).await;
    // 1001 names with the prefix `p:` and neighbours on both sides, by SQL.
    let mut values: Vec<String> = (0..=1000).map(|i| format!("('p:{i:04}', 0, 1)")).collect();
    for n in ["p", "p.9", "p9", "pa", "p:", "o:1", "q:0"] {
        values.push(format!("('{n}', 0, 1)"));
    }
    execute(
        &db,
        &format!(
            "INSERT INTO sequences (name, max_id, step) VALUES {}",
            values.join(", ")
        ),
    )
    .await;
    let (first, more) = read_page(&store, Some("p:"), None, MAX_PAGE).await;
    assert_eq!(first.len(), 1000);
    assert_eq!(
        (&*first[0], &*first[1], &*first[999]),
        ("p:", "p:0000", "p:0998")
    );
    assert!(more);
    assert_eq!(
        read_page(&store, Some("p:"), Some(&first[999]), MAX_PAGE).await,
        (strings(&["p:0999", "p:1000"]), false)
    );
    assert_eq!(
        read_page(&store, Some("p:1"), None, 1).await,
        (strings(&["p:1000"]), false),
        "one name, limit 1"
    );
}

/// The plan of `sql` on `db`, one line per row of the backend's `EXPLAIN`:
/// PostgreSQL's text plan (sequential and bitmap scans disabled, so that a
/// small table shows the plan a large one gets: a bitmap scan's rows come
/// unordered, and sorting a handful is cheaper than walking an index there), SQLite's `EXPLAIN QUERY PLAN` details,
/// MariaDB's `EXPLAIN` rows as `type key Extra`.
async fn plan(db: &TestDb, sql: &str) -> Vec<String> {
    use sqlx::{Connection, Row};
    match db.backend {
        Backend::Postgres => {
            let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
            for off in ["enable_seqscan", "enable_bitmapscan"] {
                sqlx::query(&format!("SET {off} = off"))
                    .execute(&mut c)
                    .await
                    .unwrap();
            }
            sqlx::query_scalar(&format!("EXPLAIN {sql}"))
                .fetch_all(&mut c)
                .await
                .unwrap()
        }
        Backend::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
            let rows = sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
                .fetch_all(&mut c)
                .await
                .unwrap();
            rows.iter().map(|r| r.get::<String, _>("detail")).collect()
        }
        Backend::Mysql => {
            let mut c = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
            let rows = sqlx::query(&format!("EXPLAIN {sql}"))
                .fetch_all(&mut c)
                .await
                .unwrap();
            let text = |r: &sqlx::mysql::MySqlRow, col: &str| {
                r.try_get::<Option<String>, _>(col)
                    .ok()
                    .flatten()
                    .or_else(|| {
                        r.try_get::<Option<Vec<u8>>, _>(col)
                            .ok()
                            .flatten()
                            .map(|b| String::from_utf8_lossy(&b).into_owned())
                    })
                    .unwrap_or_default()
            };
            rows.iter()
                .map(|r| {
                    format!(
                        "{} {} {}",
                        text(r, "type"),
                        text(r, "key"),
                        text(r, "Extra")
                    )
                })
                .collect()
        }
    }
}

/// The statement `list_page` runs on `db`'s backend, its lower bound
/// compared with `lower_op`, with the binds written in.
fn page_statement(db: &TestDb, lower_op: &str, lower: &str, upper: &str) -> String {
    let binds = [format!("'{lower}'"), format!("'{upper}'"), "101".into()];
    match db.backend {
        Backend::Postgres => {
            let mut sql = seqd::store::postgres::sequences::page_sql(lower_op);
            for (i, b) in binds.iter().enumerate() {
                sql = sql.replace(&format!("${}", i + 1), b);
            }
            sql
        }
        _ => binds
            .iter()
            .fold(seqd::store::binary_page_sql(lower_op), |sql, b| {
                sql.replacen('?', b, 1)
            }),
    }
}

async fn a_page_is_an_index_range_read_in_order_without_sorting_the_table(db: TestDb) {
    let store = common::store(&db).await;
    let values: Vec<String> = (0..2000)
        .map(|i| format!("('t{}:m-{i:05}', 0, 1)", i % 10))
        .collect();
    let insert = format!(
        "INSERT INTO sequences (name, max_id, step) VALUES {}",
        values.join(", ")
    );
    execute(&db, &insert).await;
    execute(
        &db,
        match db.backend {
            Backend::Mysql => "ANALYZE TABLE sequences",
            _ => "ANALYZE",
        },
    )
    .await;
    // A first page, a later page, a prefix's first and later page.
    for (op, lower, upper) in [
        (">", "", "{"),
        (">", "t5:m-00995", "{"),
        (">=", "t3:m-01", "t3:m-01{"),
        (">", "t3:m-01003", "t3:m-01{"),
    ] {
        let sql = page_statement(&db, op, lower, upper);
        let plan = plan(&db, &sql).await;
        let text = plan.join("\n");
        match db.backend {
            Backend::Postgres => assert!(
                text.contains("Index Scan using sequences_name_bytes")
                    && text.contains("Index Cond")
                    && !text.contains("Sort"),
                "{sql}:\n{text}"
            ),
            Backend::Sqlite => assert!(
                plan.len() == 1
                    && text.contains("INDEX sqlite_autoindex_sequences_1 (name>? AND name<?)")
                    && !text.contains("TEMP B-TREE"),
                "{sql}:\n{text}"
            ),
            Backend::Mysql => assert!(
                plan.len() == 1
                    && (text.starts_with("range PRIMARY") || text.starts_with("index PRIMARY"))
                    && !text.contains("filesort"),
                "{sql}:\n{text}"
            ),
        }
    }
    // And the store reads what the statements select.
    let later = [
        "t3:m-01013",
        "t3:m-01023",
        "t3:m-01033",
        "t3:m-01043",
        "t3:m-01053",
    ];
    assert_eq!(
        read_page(&store, Some("t3:m-01"), Some("t3:m-01003"), 5).await,
        (strings(&later), true)
    );
}

async fn list_ignores_rows_whose_name_is_not_a_valid_sequence_name(db: TestDb) {
    let store = common::store(&db).await;
    store.create(&new_seq("good", 1, 10)).await.unwrap();
    execute(
        &db,
        "INSERT INTO sequences (name, max_id, step) VALUES ('bad name', 0, 10)",
    )
    .await;
    let listed = common::names(&store).await;
    assert_eq!(listed, ["good"]);
}

async fn update_changes_step_and_description(db: TestDb) {
    let store = common::store(&db).await;
    let created = store.create(&new_seq("order", 1, 10)).await.unwrap();

    let patch = SequencePatch {
        step: Some(25),
        description: None,
        ordering: None,
        serial: None,
    };
    let row = store.update(&name("order"), &patch).await.unwrap();
    assert_eq!(
        (row.step, row.description.as_str(), row.max_id),
        (25, "", 0)
    );

    let patch = SequencePatch {
        step: None,
        description: Some("orders".into()),
        ordering: None,
        serial: None,
    };
    let row = store.update(&name("order"), &patch).await.unwrap();
    assert_eq!((row.step, row.description.as_str()), (25, "orders"));

    let patch = SequencePatch {
        step: Some(7),
        description: Some("both".into()),
        ordering: None,
        serial: None,
    };
    let row = store.update(&name("order"), &patch).await.unwrap();
    assert_eq!((row.step, row.description.as_str()), (7, "both"));
    assert_eq!(row.created_at, created.created_at);
    assert!(row.updated_at >= created.updated_at);
    assert_recent("updated_at", row.updated_at);
    assert_eq!(common::row(&store, "order").await, row);
}

async fn update_with_an_empty_patch_returns_the_unchanged_row(db: TestDb) {
    let store = common::store(&db).await;
    store.create(&new_seq("order", 1, 10)).await.unwrap();
    // Twice in a row, so that on MySQL nothing at all changes the second time
    // (same updated_at second): must still be found, not NotFound.
    for _ in 0..2 {
        let row = store
            .update(&name("order"), &SequencePatch::default())
            .await
            .unwrap();
        assert_eq!(
            (row.step, row.max_id, row.description.as_str()),
            (10, 0, "")
        );
    }
}

async fn update_of_a_missing_name_fails_with_not_found(db: TestDb) {
    let store = common::store(&db).await;
    let patch = SequencePatch {
        step: Some(5),
        description: None,
        ordering: None,
        serial: None,
    };
    match store.update(&name("nope"), &patch).await {
        Err(StoreError::NotFound) => {}
        other => panic!("expected NotFound, got {other:?}"),
    }
}

async fn step_below_one_is_rejected_by_the_table(db: TestDb) {
    let store = common::store(&db).await;
    let sql = "INSERT INTO sequences (name, max_id, step) VALUES ('zero', 0, 0)";
    assert!(
        try_execute(&db, sql).await.is_err(),
        "CHECK (step >= 1) must reject step 0"
    );
    store.create(&new_seq("order", 1, 10)).await.unwrap();
    let patch = SequencePatch {
        step: Some(0),
        description: None,
        ordering: None,
        serial: None,
    };
    // Bad input, not an outage: never `Unavailable` (a 503 "retry later").
    match store.update(&name("order"), &patch).await {
        Err(StoreError::Invalid(_)) => {}
        other => panic!("expected the table to refuse step 0 as invalid, got {other:?}"),
    }
    assert_eq!(common::row(&store, "order").await.step, 10);
}

async fn names_are_case_sensitive(db: TestDb) {
    let store = common::store(&db).await;
    store.create(&new_seq("Order", 1, 10)).await.unwrap();
    store.create(&new_seq("order", 1001, 100)).await.unwrap();
    assert_eq!(common::row(&store, "Order").await.max_id, 0);
    assert_eq!(common::row(&store, "order").await.max_id, 1000);
    assert_eq!(store.get(&name("ORDER")).await.unwrap(), None);

    let r = store.reserve(&name("Order"), 1).await.unwrap();
    assert_eq!((r.first(), r.max_id), (1, 10));
    assert_eq!(
        common::row(&store, "order").await.max_id,
        1000,
        "'order' must not move"
    );
    let r = store.reserve(&name("order"), 1).await.unwrap();
    assert_eq!((r.first(), r.max_id), (1001, 1100));
    assert!(matches!(
        store.reserve(&name("ORDER"), 1).await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(store.list().await.unwrap().len(), 2);
}

// ---------------------------------------------------------------------------
// reserve

async fn reserve_returns_consecutive_ranges_of_the_row_step(db: TestDb) {
    let store = common::store(&db).await;
    store.create(&new_seq("order", 1001, 100)).await.unwrap();
    let before = common::row(&store, "order").await;
    let mut expected_first = 1001;
    for _ in 0..5 {
        let r = store.reserve(&name("order"), 1).await.unwrap();
        assert_eq!(
            r,
            Reservation {
                max_id: expected_first + 99,
                size: 100,
                row_step: 100,
                ordering: seqd::domain::Ordering::Instance
            }
        );
        assert_eq!(r.first(), expected_first);
        expected_first += 100;
    }
    let after = common::row(&store, "order").await;
    assert_eq!(after.max_id, 1500);
    assert!(after.updated_at >= before.updated_at);
}

async fn reserve_with_min_size_above_the_step_reserves_min_size(db: TestDb) {
    let store = common::store(&db).await;
    store.create(&new_seq("order", 1, 10)).await.unwrap();
    let r = store.reserve(&name("order"), 250).await.unwrap();
    assert_eq!(
        r,
        Reservation {
            max_id: 250,
            size: 250,
            row_step: 10,
            ordering: seqd::domain::Ordering::Instance
        }
    );
    let r = store.reserve(&name("order"), 1).await.unwrap();
    assert_eq!(
        r,
        Reservation {
            max_id: 260,
            size: 10,
            row_step: 10,
            ordering: seqd::domain::Ordering::Instance
        }
    );
    assert_eq!(
        common::row(&store, "order").await.step,
        10,
        "reserve must not change the row's step"
    );
}

async fn reserve_with_min_size_below_the_step_reserves_the_step(db: TestDb) {
    let store = common::store(&db).await;
    store.create(&new_seq("order", 1, 100)).await.unwrap();
    for min_size in [0, 1, 99, 100] {
        let r = store.reserve(&name("order"), min_size).await.unwrap();
        assert_eq!((r.size, r.row_step), (100, 100), "min_size {min_size}");
    }
    assert_eq!(common::row(&store, "order").await.max_id, 400);
}

async fn step_changed_by_update_is_used_by_the_next_reserve(db: TestDb) {
    let store = common::store(&db).await;
    store.create(&new_seq("order", 1, 10)).await.unwrap();
    assert_eq!(store.reserve(&name("order"), 1).await.unwrap().max_id, 10);
    let patch = SequencePatch {
        step: Some(1000),
        description: None,
        ordering: None,
        serial: None,
    };
    store.update(&name("order"), &patch).await.unwrap();
    let r = store.reserve(&name("order"), 1).await.unwrap();
    assert_eq!(
        r,
        Reservation {
            max_id: 1010,
            size: 1000,
            row_step: 1000,
            ordering: seqd::domain::Ordering::Instance
        }
    );
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

async fn reserve_that_would_pass_i64_max_fails_with_exhausted(db: TestDb) {
    let store = common::store(&db).await;
    store
        .create(&new_seq("full", i64::MAX - 5, 10))
        .await
        .unwrap();
    for min_size in [1, 10, 1000, i64::MAX] {
        match store.reserve(&name("full"), min_size).await {
            Err(StoreError::Exhausted) => {}
            other => panic!("expected Exhausted (min_size {min_size}), got {other:?}"),
        }
    }
    assert_eq!(
        common::row(&store, "full").await.max_id,
        i64::MAX - 6,
        "an exhausted row must not move"
    );
}

async fn reserve_ending_exactly_at_i64_max_succeeds_then_exhausted(db: TestDb) {
    let store = common::store(&db).await;
    store
        .create(&new_seq("edge", i64::MAX - 9, 10))
        .await
        .unwrap();
    let r = store.reserve(&name("edge"), 1).await.unwrap();
    assert_eq!(
        r,
        Reservation {
            max_id: i64::MAX,
            size: 10,
            row_step: 10,
            ordering: seqd::domain::Ordering::Instance
        }
    );
    assert_eq!(r.first(), i64::MAX - 9);
    assert!(matches!(
        store.reserve(&name("edge"), 1).await,
        Err(StoreError::Exhausted)
    ));

    // The very last ID on its own.
    store.create(&new_seq("last", i64::MAX, 1)).await.unwrap();
    let r = store.reserve(&name("last"), 1).await.unwrap();
    assert_eq!((r.first(), r.max_id), (i64::MAX, i64::MAX));
    assert!(matches!(
        store.reserve(&name("last"), 1).await,
        Err(StoreError::Exhausted)
    ));
    assert_eq!(common::row(&store, "last").await.max_id, i64::MAX);
}

async fn reserve_with_a_large_min_size_near_i64_max_falls_back_to_the_row_step(db: TestDb) {
    let store = common::store(&db).await;
    // max_id = i64::MAX - 100, step 10.
    store
        .create(&new_seq("near", i64::MAX - 99, 10))
        .await
        .unwrap();
    // A min_size that still fits is honoured.
    let r = store.reserve(&name("near"), 60).await.unwrap();
    assert_eq!(
        r,
        Reservation {
            max_id: i64::MAX - 40,
            size: 60,
            row_step: 10,
            ordering: seqd::domain::Ordering::Instance
        }
    );
    // One that does not fit falls back to the row's step, until the end.
    for expected_max in [i64::MAX - 30, i64::MAX - 20, i64::MAX - 10, i64::MAX] {
        let r = store.reserve(&name("near"), 1000).await.unwrap();
        assert_eq!(
            r,
            Reservation {
                max_id: expected_max,
                size: 10,
                row_step: 10,
                ordering: seqd::domain::Ordering::Instance
            }
        );
    }
    assert!(matches!(
        store.reserve(&name("near"), 1000).await,
        Err(StoreError::Exhausted)
    ));
    assert_eq!(common::row(&store, "near").await.max_id, i64::MAX);
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
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    assert_eq!(all.len(), 32 * 50);
    let end = common::row(&store, "hot").await.max_id;
    assert_eq!(end, start - 1 + 16 * 50 * 7 + 16 * 50 * 11);
    assert_tiles(all, start, end);
}

/// Reservations racing with step changes: each reservation's size is the
/// step its own statement saw, so the ranges still tile exactly.
async fn reservations_racing_step_updates_still_tile_exactly(db: TestDb) {
    let store = common::store(&db).await;
    store.create(&new_seq("moving", 1, 5)).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..40 {
                got.push(store.reserve(&name("moving"), 1).await.unwrap());
            }
            got
        }));
    }
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
                            description: None,
                            ordering: None,
                            serial: None,
                        },
                    )
                    .await
                    .unwrap();
                tokio::task::yield_now().await;
            }
        })
    };
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
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
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..25 {
                got.push(store.reserve(&name("shared"), 1).await.unwrap());
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
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
    let store = common::store(&db).await;
    store.create(&new_seq("cas", 1, 10)).await.unwrap();
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

per_backend!(
    compare_and_set_max_id_sets_only_the_expected_value_of_that_row,
    create_then_get_returns_the_row_with_max_id_start_minus_one,
    create_keeps_the_description,
    create_with_start_one_has_max_id_zero,
    description_of_256_multibyte_characters_round_trips,
    create_of_an_existing_name_fails_with_already_exists,
    get_of_a_missing_name_returns_none,
    settings_of_reads_the_rows_of_the_names_asked_for_in_chunks,
    list_returns_every_row_in_byte_order_of_name,
    list_ignores_rows_whose_name_is_not_a_valid_sequence_name,
    list_pages_tile_the_table_in_the_byte_order_of_list,
    list_page_of_an_empty_table_or_after_the_end_is_empty_and_last,
    list_pages_with_a_prefix_read_exactly_the_names_starting_with_it,
    list_page_with_a_prefix_starts_after_after_and_ends_with_the_prefix,
    list_page_with_a_prefix_of_a_full_page_and_one_more,
    a_page_is_an_index_range_read_in_order_without_sorting_the_table,
    update_changes_step_and_description,
    update_with_an_empty_patch_returns_the_unchanged_row,
    update_of_a_missing_name_fails_with_not_found,
    step_below_one_is_rejected_by_the_table,
    names_are_case_sensitive,
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
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..20 {
                got.push(store.reserve(&name("mem"), 1).await.unwrap());
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
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

/// Every MariaDB session of the store's pool carries `innodb_lock_wait_timeout`
/// (whole seconds, at least 1) and `max_statement_time` under the fetch timeout.
#[tokio::test]
async fn mysql_sessions_bound_lock_waits_and_statements() {
    let Some(db) = common::test_db(Backend::Mysql).await else {
        return;
    };
    let store = seqd::store::mysql::MySqlStore::connect(&db.url)
        .await
        .unwrap();
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
    let Some(db) = common::test_db(Backend::Mysql).await else {
        return;
    };
    let store = seqd::store::mysql::MySqlStore::connect(&db.url)
        .await
        .unwrap();
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
