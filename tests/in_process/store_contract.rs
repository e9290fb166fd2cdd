//! The storage contract, rows: every `Store` backend (SQLite, PostgreSQL,
//! MariaDB) must pass this one suite, together with
//! `store_contract_reserve.rs` (reservations, migration, connections and
//! each backend's session settings). Each test runs once per backend on a
//! fresh database (see `common`); run one backend with e.g.
//! `cargo test --test in_process store_contract:: -- --skip sqlite --skip mysql`.
//!
//! Here: create, get, `settings_of`, list and its pages (with prefixes, and
//! their plans), update, and names.

use crate::support::common;

use common::{assert_recent, execute, name, new_seq, try_execute, Backend, TestDb};
use seqd::domain::{NamePrefix, NewSequence};
use seqd::store::{prelude::*, SequencePatch, StoreError, MAX_PAGE};

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
        description: Some(description.chars().rev().collect()),
        ..Default::default()
    };
    let updated = store.update(&name("wide"), &patch).await.unwrap();
    assert_eq!(
        updated.description,
        description.chars().rev().collect::<String>()
    );
}

async fn create_of_an_existing_name_fails_with_already_exists(db: TestDb) {
    let store = common::store_with(&db, "order", 1, 10).await;
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
        ordering: Some(seqd::domain::IdOrdering::Global),
        serial: Some(Some(common::serial_settings(
            "A{yyyy}{seq:04}",
            seqd::serial::Reset::Year,
            "Europe/Paris",
            seqd::serial::Overflow::Widen,
        ))),
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
    assert_eq!(rows[3].ordering, seqd::domain::IdOrdering::Global);
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
            let explain = format!("EXPLAIN QUERY PLAN {sql}");
            let rows = rows_of::<sqlx::SqliteConnection>(&db.url, &explain).await;
            rows.iter().map(|r| r.get::<String, _>("detail")).collect()
        }
        Backend::Mysql => {
            let rows = rows_of::<sqlx::MySqlConnection>(&db.url, &format!("EXPLAIN {sql}")).await;
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

/// The rows `statement` answers on a new connection of type `C` to `url`.
async fn rows_of<C>(url: &str, statement: &str) -> Vec<<C::Database as sqlx::Database>::Row>
where
    C: sqlx::Connection,
    for<'c> &'c mut C: sqlx::Executor<'c, Database = C::Database>,
    for<'q> <C::Database as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, C::Database>,
{
    let mut c = C::connect(url).await.unwrap();
    sqlx::query(statement).fetch_all(&mut c).await.unwrap()
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
    let store = common::store_with(&db, "good", 1, 10).await;
    let bad_name = "INSERT INTO sequences (name, max_id, step) VALUES ('bad name', 0, 10)";
    execute(&db, bad_name).await;
    let listed = common::names(&store).await;
    assert_eq!(listed, ["good"]);
}

async fn update_changes_step_and_description(db: TestDb) {
    let store = common::store(&db).await;
    let created = store.create(&new_seq("order", 1, 10)).await.unwrap();

    let patch = SequencePatch {
        step: Some(25),
        ..Default::default()
    };
    let row = store.update(&name("order"), &patch).await.unwrap();
    assert_eq!(
        (row.step, row.description.as_str(), row.max_id),
        (25, "", 0)
    );

    let patch = SequencePatch {
        description: Some("orders".into()),
        ..Default::default()
    };
    let row = store.update(&name("order"), &patch).await.unwrap();
    assert_eq!((row.step, row.description.as_str()), (25, "orders"));

    let patch = SequencePatch {
        step: Some(7),
        description: Some("both".into()),
        ..Default::default()
    };
    let row = store.update(&name("order"), &patch).await.unwrap();
    assert_eq!((row.step, row.description.as_str()), (7, "both"));
    assert_eq!(row.created_at, created.created_at);
    assert!(row.updated_at >= created.updated_at);
    assert_recent("updated_at", row.updated_at);
    assert_eq!(common::row(&store, "order").await, row);
}

async fn update_with_an_empty_patch_returns_the_unchanged_row(db: TestDb) {
    let store = common::store_with(&db, "order", 1, 10).await;
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
        ..Default::default()
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
        ..Default::default()
    };
    // Bad input, not an outage: never `Unavailable` (a 503 "retry later").
    match store.update(&name("order"), &patch).await {
        Err(StoreError::Invalid(_)) => {}
        other => panic!("expected the table to refuse step 0 as invalid, got {other:?}"),
    }
    assert_eq!(common::row(&store, "order").await.step, 10);
}

async fn names_are_case_sensitive(db: TestDb) {
    let store = common::store_with(&db, "Order", 1, 10).await;
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

per_backend!(
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
);
