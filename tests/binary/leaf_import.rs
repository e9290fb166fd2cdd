//! `seqd import-leaf`: Leaf's real `leaf_alloc` table, created in the test's
//! fresh PostgreSQL schema or MariaDB database, moved into seqd's `sequences`
//! (the same database, and an SQLite file too). What is proved: seqd serves
//! first exactly the ID Leaf would have issued next; invalid tags and existing
//! names are skipped and reported; `--raise` lifts a sequence behind Leaf; a
//! Leaf tag naming a serial sequence refuses the whole import before any
//! write; a dry run writes nothing; the binary's exit codes and output.

use crate::support::common;

use std::process::Output;

use common::{Backend, TestDb};
use seqd::allocator::{Allocator, AllocatorConfig};
use seqd::leaf::{self, Action, ImportOptions};
use seqd::service::{AdminCalls, Presented, Service};
use seqd::store::Store;

/// Runs `async fn NAME(db: TestDb)` on the backends Leaf runs on: PostgreSQL
/// and MariaDB (Leaf has no SQLite). Skips like `per_backend!`.
macro_rules! per_leaf_backend {
    ($($test:ident),+ $(,)?) => {
        $(
            mod $test {
                #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn postgres() {
                    if let Some(db) = crate::support::common::test_db(crate::support::common::Backend::Postgres).await {
                        super::$test(db).await;
                    }
                }

                #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn mysql() {
                    if let Some(db) = crate::support::common::test_db(crate::support::common::Backend::Mysql).await {
                        super::$test(db).await;
                    }
                }
            }
        )+
    };
}

const OPTS: ImportOptions = ImportOptions {
    dry_run: false,
    raise: false,
    max_step: 1_000_000,
};

/// The admin calls of a service over `store`, as `seqd import-leaf` makes them.
fn admin(store: &std::sync::Arc<dyn Store>) -> AdminCalls {
    Service::new(store.clone(), AllocatorConfig::default())
        .admin(Presented::LOCAL)
        .expect("open to this machine")
}

/// Imports `rows` into `store` with `opts` (panics if the import fails).
async fn import_into(
    store: &std::sync::Arc<dyn Store>,
    rows: &[leaf::LeafRow],
    opts: ImportOptions,
) -> leaf::Report {
    leaf::import(rows, Some(&admin(store)), opts)
        .await
        .unwrap_or_else(|e| panic!("import ({opts:?}): {e:?}"))
}

/// Creates Leaf's table with Leaf's own DDL for the backend, as docs/import-leaf.md
/// gives it.
async fn create_leaf_table(db: &TestDb) {
    let dialect = match db.backend {
        Backend::Mysql => "mysql",
        Backend::Postgres => "postgres",
        Backend::Sqlite => panic!("Leaf does not run on SQLite"),
    };
    common::execute(db, &doc_sql(&format!("leaf_alloc: {dialect}"))).await;
}

/// Adds a Leaf row as Leaf's docs do (`max_id` 1), then runs Leaf's segment
/// fetch `fetches` times; returns Leaf's `max_id`, the next ID Leaf would
/// issue (its last segment was `[max_id - step, max_id)`).
async fn leaf_sequence(
    db: &TestDb,
    tag: &str,
    step: i64,
    description: Option<&str>,
    fetches: u32,
) -> i64 {
    let description = description.map_or("NULL".to_string(), |d| format!("'{d}'"));
    common::execute(
        db,
        &format!("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ('{tag}', 1, {step}, {description})"),
    )
    .await;
    for _ in 0..fetches {
        // Leaf's SegmentIDGenImpl: updateMaxIdAndGetLeafAlloc.
        common::execute(
            db,
            &format!("UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = '{tag}'"),
        )
        .await;
    }
    1 + step * i64::from(fetches)
}

/// The first ID a fresh allocator on `store` serves for `name`.
async fn first_id(store: &std::sync::Arc<dyn Store>, name: &str) -> i64 {
    let alloc = Allocator::new(store.clone(), AllocatorConfig::default());
    alloc
        .next(&common::name(name))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

async fn import_continues_each_leaf_sequence_at_leafs_next_id(db: TestDb) {
    create_leaf_table(&db).await;
    let order_next = leaf_sequence(&db, "order", 2000, Some("orders"), 2).await;
    let user_next = leaf_sequence(&db, "user", 1000, None, 0).await;
    let pay_next = leaf_sequence(&db, "biz:pay.v1-x", 7, None, 5).await;
    assert_eq!((order_next, user_next, pay_next), (4001, 1, 36));

    let rows = leaf::read_leaf_alloc(&db.url)
        .await
        .expect("read leaf_alloc");
    assert_eq!(rows.len(), 3);
    let store = common::store(&db).await;
    let report = import_into(&store, &rows, OPTS).await;
    assert_eq!(
        (
            report.imported(),
            report.skipped(),
            report.invalid(),
            report.failed()
        ),
        (3, 0, 0, 0)
    );

    let order = common::row(&store, "order").await;
    assert_eq!(
        (order.max_id, order.step, order.description.as_str()),
        (4000, 2000, "orders")
    );
    let user = common::row(&store, "user").await;
    assert_eq!(
        (user.max_id, user.step, user.description.as_str()),
        (0, 1000, "")
    );

    // Leaf issued up to order_next - 1; seqd starts exactly at the next one.
    assert_eq!(first_id(&store, "order").await, order_next);
    assert_eq!(first_id(&store, "user").await, user_next);
    assert_eq!(first_id(&store, "biz:pay.v1-x").await, pay_next);
}

async fn invalid_tags_are_reported_and_skipped(db: TestDb) {
    create_leaf_table(&db).await;
    leaf_sequence(&db, "good", 100, None, 1).await;
    leaf_sequence(&db, "bad tag", 100, None, 1).await;
    leaf_sequence(&db, "-leading-dash", 100, None, 0).await;
    leaf_sequence(&db, "zero-step", 0, None, 0).await;

    let rows = leaf::read_leaf_alloc(&db.url)
        .await
        .expect("read leaf_alloc");
    let store = common::store(&db).await;
    let report = import_into(&store, &rows, OPTS).await;
    assert_eq!((report.imported(), report.invalid()), (1, 3), "{report:?}");
    let mut invalid: Vec<&str> = report
        .entries
        .iter()
        .filter(|e| matches!(e.action, Action::Invalid(_)))
        .map(|e| e.biz_tag.as_str())
        .collect();
    invalid.sort_unstable(); // Leaf's ORDER BY follows the database's collation
    assert_eq!(invalid, vec!["-leading-dash", "bad tag", "zero-step"]);
    assert_eq!(common::names(&store).await, vec!["good"]);
    assert_eq!(first_id(&store, "good").await, 101);
}

async fn existing_names_are_skipped_and_raise_lifts_those_behind(db: TestDb) {
    create_leaf_table(&db).await;
    let ahead_next = leaf_sequence(&db, "ahead", 100, None, 3).await; // 301
    let behind_next = leaf_sequence(&db, "behind", 1000, None, 5).await; // 5001
    let store = common::store(&db).await;
    common::create_seq(&store, "ahead", 10_000, 10).await;
    common::create_seq(&store, "behind", 1, 10).await;
    let rows = leaf::read_leaf_alloc(&db.url)
        .await
        .expect("read leaf_alloc");

    // By default both are left alone; the one behind Leaf is flagged.
    let report = import_into(&store, &rows, OPTS).await;
    assert_eq!(
        (
            report.imported(),
            report.skipped(),
            report.behind(),
            report.raised()
        ),
        (0, 2, 1, 0)
    );
    assert_eq!(
        report.entries[0].action,
        Action::Exists {
            seqd_max_id: 9_999,
            leaf_max_id: ahead_next
        }
    );
    assert_eq!(
        report.entries[1].action,
        Action::Exists {
            seqd_max_id: 0,
            leaf_max_id: behind_next
        }
    );
    assert_eq!(common::row(&store, "behind").await.max_id, 0);

    // --raise lifts only the one behind, to exactly Leaf's max_id - 1 (the gap exceeds its step).
    let raise = ImportOptions {
        raise: true,
        ..OPTS
    };
    let report = import_into(&store, &rows, raise).await;
    assert_eq!(
        (report.skipped(), report.behind(), report.raised()),
        (2, 0, 1)
    );
    assert_eq!(
        report.entries[1].action,
        Action::Raised {
            from: 0,
            to: behind_next - 1
        }
    );
    assert_eq!(first_id(&store, "behind").await, behind_next);
    assert_eq!(common::row(&store, "ahead").await.max_id, 9_999);
}

async fn dry_run_writes_nothing(db: TestDb) {
    create_leaf_table(&db).await;
    leaf_sequence(&db, "order", 100, None, 1).await;
    leaf_sequence(&db, "behind", 100, None, 4).await;
    let store = common::store(&db).await;
    common::create_seq(&store, "behind", 1, 10).await;
    let before = store.list().await.unwrap();
    let rows = leaf::read_leaf_alloc(&db.url)
        .await
        .expect("read leaf_alloc");

    let dry = ImportOptions {
        dry_run: true,
        raise: true,
        ..OPTS
    };
    let report = import_into(&store, &rows, dry).await;
    assert!(report.dry_run);
    assert_eq!((report.imported(), report.raised()), (1, 1), "{report:?}");
    assert_eq!(
        store.list().await.unwrap(),
        before,
        "a dry run must not write"
    );
}

per_leaf_backend!(
    import_continues_each_leaf_sequence_at_leafs_next_id,
    invalid_tags_are_reported_and_skipped,
    existing_names_are_skipped_and_raise_lifts_those_behind,
    dry_run_writes_nothing,
);

/// Runs the `seqd` binary with `args`.
/// Runs `seqd import-leaf --from <from> <flags>` into `to`.
async fn import_leaf(from: &str, to: &TestDb, flags: &[&str]) -> Output {
    let mut args = vec!["import-leaf", "--from", from];
    args.extend(flags);
    common::seqd_on(to, &args).await
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn binary_prints_the_plan_and_exits_nonzero_on_invalid_tags(db: TestDb) {
    create_leaf_table(&db).await;
    let order_next = leaf_sequence(&db, "order", 500, None, 2).await;
    leaf_sequence(&db, "user", 10, Some("users"), 1).await;
    leaf_sequence(&db, "bad/tag", 10, None, 1).await;
    let url = db.url.as_str();

    // Dry run on a target not migrated yet: the plan, nothing written.
    let out = import_leaf(url, &db, &["--dry-run", "--skip-invalid"]).await;
    let stdout = common::ok(&out);
    assert!(
        stdout.contains("dry run, nothing written: 2 to import, 0 skipped"),
        "{stdout}"
    );
    assert!(stdout.contains("\"bad/tag\""), "{stdout}");
    assert!(stdout.contains("next ID 1001"), "{stdout}");
    let store = common::store(&db).await;
    assert!(store.list().await.unwrap().is_empty(), "the dry run wrote");

    // The import: valid rows land, the invalid one is reported, exit code 1.
    let out = import_leaf(url, &db, &[]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("2 imported, 0 skipped (already in seqd, 0 of them raised), 1 invalid"),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("invalid") && l.contains("\"bad/tag\"")),
        "{stdout}"
    );
    assert!(
        stderr.starts_with("error: 1 row(s) of leaf_alloc are not valid"),
        "{stderr}"
    );
    assert!(stderr.contains("--skip-invalid"), "{stderr}");
    assert!(!stderr.contains("backtrace"), "{stderr}");
    assert_eq!(first_id(&store, "order").await, order_next);

    // Again with --skip-invalid: everything is already there, exit 0.
    let out = import_leaf(url, &db, &["--skip-invalid"]).await;
    let stdout = common::ok(&out);
    assert!(
        stdout.contains("0 imported, 2 skipped (already in seqd, 0 of them raised), 1 invalid"),
        "{stdout}"
    );
}

async fn binary_flags_a_sequence_behind_leaf_until_raised(db: TestDb) {
    create_leaf_table(&db).await;
    let next = leaf_sequence(&db, "order", 100, None, 3).await;
    let store = common::store(&db).await;
    common::create_seq(&store, "order", 1, 10).await;
    let url = db.url.as_str();

    let out = import_leaf(url, &db, &[]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("BEHIND Leaf"), "{stdout}");
    assert!(stderr.contains("--raise"), "{stderr}");

    let out = import_leaf(url, &db, &["--raise"]).await;
    let stdout = common::ok(&out);
    assert!(
        stdout.contains(&format!("max_id 0 -> {}", next - 1)),
        "{stdout}"
    );
    assert_eq!(first_id(&store, "order").await, next);
}

async fn binary_reports_an_unreadable_leaf_database(db: TestDb) {
    // No leaf_alloc table in this database.
    let out = import_leaf(&db.url, &db, &[]).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("error: reading leaf_alloc from"),
        "{stderr}"
    );
    assert!(stderr.contains("leaf_alloc"), "{stderr}");

    let out = import_leaf("redis://h/0", &db, &[]).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("unsupported Leaf database URL scheme"),
        "{stderr}"
    );
}

/// Leaf rows in `leaf_db` and seqd rows in `target`: five new tags, one
/// seqd sequence behind Leaf, and last (Leaf's order is `biz_tag`'s) a tag
/// that is a serial sequence in seqd. `import-leaf --raise` writes nothing,
/// names the serial row as a conflict and the others as planned, exits 1;
/// the same with `--dry-run`.
async fn raise_with_a_serial_target_writes_nothing_and_reports_every_row(
    leaf_db: &TestDb,
    target: &TestDb,
) {
    create_leaf_table(leaf_db).await;
    for tag in ["a1", "a2", "a3", "a4", "a5"] {
        leaf_sequence(leaf_db, tag, 10, None, 1).await;
    }
    let behind_next = leaf_sequence(leaf_db, "behind", 100, None, 3).await;
    leaf_sequence(leaf_db, "zz-serial", 10, None, 2).await;
    let store = common::store(target).await;
    common::create_seq(&store, "behind", 1, 10).await;
    common::create_daily_serial(&store, "zz-serial", 10, "Z{yyyy}{MM}{dd}{seq:04}").await;
    let before = store.list().await.unwrap();

    for extra in [None, Some("--dry-run")] {
        let mut flags = vec!["--raise"];
        flags.extend(extra);
        let out = import_leaf(&leaf_db.url, target, &flags).await;
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{extra:?}\n{stdout}\n{stderr}");
        assert!(
            stdout.lines().any(|l| l.starts_with("CONFLICT")
                && l.contains("zz-serial")
                && l.contains("serial sequence")),
            "{stdout}"
        );
        for tag in ["a1", "a2", "a3", "a4", "a5"] {
            assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with("import?") && l.contains(tag)),
                "{tag}: {stdout}"
            );
        }
        assert!(
            stdout.contains("raise?   behind")
                && stdout.contains(&format!("-> at least {}", behind_next - 1)),
            "{stdout}"
        );
        assert!(stdout.contains("nothing written"), "{stdout}");
        assert!(stdout.contains("5 to import"), "{stdout}");
        assert!(stdout.contains("1 in conflict"), "{stdout}");
        assert!(stderr.starts_with("error: nothing "), "{stderr}");
        assert!(stderr.contains("serial sequence"), "{stderr}");
        assert_eq!(
            store.list().await.unwrap(),
            before,
            "{extra:?}: nothing written"
        );
    }
}

async fn raise_with_a_serial_target_writes_nothing(db: TestDb) {
    raise_with_a_serial_target_writes_nothing_and_reports_every_row(&db, &db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn raise_with_a_serial_target_in_sqlite_writes_nothing() {
    let Some([leaf_db, sqlite]) = common::test_dbs([Backend::Postgres, Backend::Sqlite]).await
    else {
        return;
    };
    raise_with_a_serial_target_writes_nothing_and_reports_every_row(&leaf_db, &sqlite).await;
}

per_leaf_backend!(
    raise_with_a_serial_target_writes_nothing,
    binary_prints_the_plan_and_exits_nonzero_on_invalid_tags,
    binary_flags_a_sequence_behind_leaf_until_raised,
    binary_reports_an_unreadable_leaf_database,
);

/// Leaf on `source`, seqd on a fresh SQLite file.
async fn import_into_sqlite_from(source: Backend) {
    let Some(leaf_db) = common::test_db(source).await else {
        return;
    };
    let Some(sqlite) = common::test_db(Backend::Sqlite).await else {
        return;
    };
    create_leaf_table(&leaf_db).await;
    let next = leaf_sequence(&leaf_db, "order", 250, Some("orders"), 4).await;

    let out = import_leaf(&leaf_db.url, &sqlite, &[]).await;
    let stdout = common::ok(&out);
    assert!(stdout.contains("1 imported"), "{stdout}");
    let store = common::store(&sqlite).await;
    assert_eq!(common::row(&store, "order").await.description, "orders");
    assert_eq!(first_id(&store, "order").await, next);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_target_from_postgres_leaf() {
    import_into_sqlite_from(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_target_from_mysql_leaf() {
    import_into_sqlite_from(Backend::Mysql).await;
}

/// The SQL block of docs/import-leaf.md whose first line is `-- {label}`.
fn doc_sql(label: &str) -> String {
    common::doc_sql("import-leaf.md", label)
}

/// `(name, max_id, step, description)` of every row of `sequences`.
async fn rows_of(store: &std::sync::Arc<dyn Store>) -> Vec<(String, i64, i64, String)> {
    let rows = store.list().await.expect("list");
    rows.into_iter()
        .map(|r| (r.name.to_string(), r.max_id, r.step, r.description))
        .collect()
}

/// The same Leaf table and seqd rows, in `db`: valid, invalid and existing names.
async fn mixed_fixture(db: &TestDb) -> std::sync::Arc<dyn Store> {
    create_leaf_table(db).await;
    leaf_sequence(db, "order", 2000, Some("orders"), 2).await;
    leaf_sequence(db, "user", 1000, None, 0).await;
    leaf_sequence(db, "bad tag", 10, None, 1).await;
    leaf_sequence(db, "trailing-newline\n", 10, None, 1).await;
    leaf_sequence(db, "zero-step", 0, None, 0).await;
    leaf_sequence(db, "huge-step", 2_000_000, None, 0).await;
    leaf_sequence(db, "behind", 1000, None, 5).await;
    leaf_sequence(db, "ahead", 10, None, 1).await;
    let store = common::store(db).await;
    common::create_seq(&store, "behind", 1, 10).await;
    common::create_seq(&store, "ahead", 500, 10).await;
    store
}

async fn documented_sql_matches_the_command(db: TestDb) {
    let Some(other) = common::test_db(db.backend).await else {
        return;
    };
    let dialect = match db.backend {
        Backend::Postgres => "postgres",
        _ => "mysql",
    };

    // The command, on `other`.
    let by_command = mixed_fixture(&other).await;
    let rows = leaf::read_leaf_alloc(&other.url)
        .await
        .expect("read leaf_alloc");
    let report = leaf::import(
        &rows,
        Some(&admin(&by_command)),
        ImportOptions {
            raise: true,
            ..OPTS
        },
    )
    .await
    .expect("import");
    assert_eq!(
        (
            report.imported(),
            report.skipped(),
            report.raised(),
            report.invalid()
        ),
        (2, 2, 1, 4),
        "{report:?}"
    );

    // The documented SQL, on `db`.
    let by_sql = mixed_fixture(&db).await;
    assert_eq!(
        common::execute(&db, &doc_sql(&format!("import: {dialect}"))).await,
        2
    );
    assert_eq!(
        common::execute(&db, &doc_sql(&format!("raise: {dialect}"))).await,
        1
    );
    // Idempotent, like the command.
    assert_eq!(
        common::execute(&db, &doc_sql(&format!("import: {dialect}"))).await,
        0
    );

    // The report query runs (it lists the four invalid tags).
    common::execute(&db, &doc_sql("not imported: any")).await;

    assert_eq!(rows_of(&by_sql).await, rows_of(&by_command).await);
    assert_eq!(first_id(&by_sql, "order").await, 4001);
    assert_eq!(first_id(&by_sql, "behind").await, 5001);
}

per_leaf_backend!(documented_sql_matches_the_command);
