//! Schema ownership (docs/design.md, "Tables and migrations"): seqd's history
//! in `seqd_migrations` beside
//! an application's sqlx migrations, the carry-over of an old history from
//! `_sqlx_migrations`, `seqd schema` applied by the backend's own client and
//! served under a role with the documented runtime grants (row rights only;
//! tests/binary/grants.rs runs every feature under them), `--migrate check`, PostgreSQL
//! `--schema`, and concurrent migrators on a fresh database (in one process, and
//! as `seqd migrate` processes).

use crate::support::common;
use crate::support::roles;
use crate::support::server;

use std::path::Path;
use std::process::Output;

use common::{ok, Backend, TestDb};
use roles::{unique, RuntimeRole};
use seqd::store::workers::WorkerRow;
use seqd::store::{Dialect, MigrateMode, StoreOptions};
use server::Process;
use sqlx::migrate::Migrator;
use sqlx::{Connection, MySqlConnection, PgConnection, SqliteConnection};

/// Runs the `seqd` binary with `args` and a clean environment for its settings.
async fn seqd(args: &[&str]) -> Output {
    common::seqd_binary(args).await
}

fn dialect(backend: Backend) -> Dialect {
    match backend {
        Backend::Sqlite => Dialect::Sqlite,
        Backend::Postgres => Dialect::Postgres,
        Backend::Mysql => Dialect::Mysql,
    }
}

/// seqd's migrations as `(version, checksum)`.
fn seqds(backend: Backend) -> Vec<(i64, Vec<u8>)> {
    dialect(backend)
        .migrations()
        .iter()
        .map(|m| (m.version, m.checksum.to_vec()))
        .collect()
}

/// A directory of sqlx migration files `(file name, sql)`.
fn migration_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, sql) in files {
        std::fs::write(dir.path().join(name), sql).expect("write migration");
    }
    dir
}

/// An application's migration: creates table `app_<tag>` (valid on every backend).
fn app_migration(version: &str, tag: &str) -> (String, String) {
    (
        format!("{version}_app_{tag}.sql"),
        format!("CREATE TABLE app_{tag} (id INTEGER PRIMARY KEY);\n"),
    )
}

/// Runs sqlx's own migrator on `dir` against `db`, as an application (or
/// seqd before it had its own history) does.
async fn sqlx_migrate(db: &TestDb, dir: &Path, ignore_missing: bool) -> Result<(), String> {
    let mut migrator = Migrator::new(dir).await.map_err(|e| e.to_string())?;
    migrator.set_ignore_missing(ignore_missing);
    let err = |e: sqlx::Error| e.to_string();
    let done = match db.backend {
        Backend::Sqlite => {
            let mut c = SqliteConnection::connect(&db.url).await.map_err(err)?;
            migrator.run(&mut c).await
        }
        Backend::Postgres => {
            let mut c = PgConnection::connect(&db.url).await.map_err(err)?;
            migrator.run(&mut c).await
        }
        Backend::Mysql => {
            let mut c = MySqlConnection::connect(&db.url).await.map_err(err)?;
            migrator.run(&mut c).await
        }
    };
    done.map_err(|e| e.to_string())
}

/// An application's migrations `(file name, sql)` as a directory.
fn app_dir(migrations: &[(String, String)]) -> tempfile::TempDir {
    let files: Vec<(&str, &str)> = migrations
        .iter()
        .map(|(n, s)| (n.as_str(), s.as_str()))
        .collect();
    migration_dir(&files)
}

/// `(version, checksum)` of every row of history table `table`, by version.
async fn history(db: &TestDb, table: &str) -> Vec<(i64, Vec<u8>)> {
    let sql = format!("SELECT version, checksum FROM {table} ORDER BY version");
    let rows = match db.backend {
        Backend::Sqlite => {
            let mut c = SqliteConnection::connect(&db.url).await.unwrap();
            sqlx::query_as(&sql).fetch_all(&mut c).await
        }
        Backend::Postgres => {
            let mut c = PgConnection::connect(&db.url).await.unwrap();
            sqlx::query_as(&sql).fetch_all(&mut c).await
        }
        Backend::Mysql => {
            let mut c = MySqlConnection::connect(&db.url).await.unwrap();
            sqlx::query_as(&sql).fetch_all(&mut c).await
        }
    };
    rows.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn versions(rows: &[(i64, Vec<u8>)]) -> Vec<i64> {
    rows.iter().map(|(v, _)| *v).collect()
}

/// Applies seqd's migrations through the library (`seqd migrate`'s path).
async fn seqd_migrate(db: &TestDb) {
    common::store(db).await;
}

/// Migrates `db`, then undoes migration 2 (create workers) by SQL.
async fn one_migration_behind(db: &TestDb) {
    seqd_migrate(db).await;
    common::execute(db, "DROP TABLE workers").await;
    common::execute(db, "DELETE FROM seqd_migrations WHERE version = 2").await;
}

async fn an_application_numbering_1_2_3_migrates_before_and_after_seqd(db: TestDb) {
    let first = [app_migration("1", "one"), app_migration("2", "two")];
    sqlx_migrate(&db, app_dir(&first).path(), false)
        .await
        .expect("the application's migrations on an empty database");
    seqd_migrate(&db).await;
    let all = [
        first[0].clone(),
        first[1].clone(),
        app_migration("3", "three"),
    ];
    sqlx_migrate(&db, app_dir(&all).path(), false)
        .await
        .expect("the application's migrator after seqd's");
    seqd_migrate(&db).await;

    assert_eq!(versions(&history(&db, "_sqlx_migrations").await), [1, 2, 3]);
    assert_eq!(history(&db, "seqd_migrations").await, seqds(db.backend));
    common::execute(&db, "INSERT INTO app_three (id) VALUES (1)").await;
    common::store(&db)
        .await
        .ping()
        .await
        .expect("seqd's tables");
}

async fn an_application_migrates_after_seqd_and_seqd_again_after_it(db: TestDb) {
    seqd_migrate(&db).await;
    let first = [app_migration("20240101000000", "first")];
    sqlx_migrate(&db, app_dir(&first).path(), false)
        .await
        .expect("the application's migrator after seqd's");
    seqd_migrate(&db).await;
    let all = [first[0].clone(), app_migration("20240102000000", "second")];
    sqlx_migrate(&db, app_dir(&all).path(), false)
        .await
        .expect("the application's next migration");
    seqd_migrate(&db).await;

    assert_eq!(
        versions(&history(&db, "_sqlx_migrations").await),
        [20240101000000, 20240102000000]
    );
    assert_eq!(history(&db, "seqd_migrations").await, seqds(db.backend));
}

per_backend!(
    an_application_numbering_1_2_3_migrates_before_and_after_seqd,
    an_application_migrates_after_seqd_and_seqd_again_after_it
);

async fn an_old_installation_is_carried_over_without_rerunning_anything(db: TestDb) {
    // The old seqd: sqlx's migrator on seqd's folder, history in _sqlx_migrations.
    let folder = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(dialect(db.backend).name());
    sqlx_migrate(&db, &folder, false)
        .await
        .expect("the old seqd's migrations");
    // An application sharing that history table, and a sequence in use.
    let app = [app_migration("20240101000000", "orders")];
    sqlx_migrate(&db, app_dir(&app).path(), true)
        .await
        .expect("the application's migration in the shared history");
    common::execute(
        &db,
        "INSERT INTO sequences (name, max_id, step) VALUES ('kept', 41, 10)",
    )
    .await;
    let old = history(&db, "_sqlx_migrations").await;
    let mut expected = versions(&seqds(db.backend));
    expected.push(20240101000000);
    assert_eq!(versions(&old), expected);

    seqd_migrate(&db).await;

    assert_eq!(history(&db, "seqd_migrations").await, seqds(db.backend));
    assert_eq!(
        history(&db, "_sqlx_migrations").await,
        [old.last().unwrap().clone()],
        "only the application's row stays in _sqlx_migrations"
    );
    let store = common::store(&db).await;
    assert_eq!(common::row(&store, "kept").await.max_id, 41, "data kept");
    sqlx_migrate(&db, app_dir(&app).path(), false)
        .await
        .expect("the application's migrator no longer sees seqd's rows");
}

per_backend!(an_old_installation_is_carried_over_without_rerunning_anything);

async fn four_concurrent_migrators_on_a_fresh_database_all_succeed(db: TestDb) {
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(common::connect(&db).await);
    }
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(stores.len()));
    let tasks: Vec<_> = stores
        .into_iter()
        .map(|store| {
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                store.migrate().await
            })
        })
        .collect();
    for task in tasks {
        task.await
            .expect("migrator task")
            .expect("every concurrent migrator succeeds");
    }
    assert_eq!(history(&db, "seqd_migrations").await, seqds(db.backend));
}

per_backend!(four_concurrent_migrators_on_a_fresh_database_all_succeed);

/// Several `seqd migrate` processes (the binary, as the init containers of
/// new pods run it together in a rollout) started at once on a fresh
/// database: every one exits 0, and the history holds one row per migration.
async fn concurrent_seqd_migrate_processes_apply_each_migration_once(db: TestDb) {
    let env = [("SEQD_DATABASE_URL", db.url.as_str())];
    let runs = (0..4).map(|_| common::seqd_binary_with_env(&["migrate"], &env));
    for out in futures::future::join_all(runs).await {
        ok(&out);
    }
    assert_eq!(history(&db, "seqd_migrations").await, seqds(db.backend));
}

per_backend!(concurrent_seqd_migrate_processes_apply_each_migration_once);

async fn check_refuses_a_database_one_migration_behind(db: TestDb) {
    one_migration_behind(&db).await;

    let out = common::seqd_on(
        &db,
        &["serve", "--migrate", "check", "--listen", "127.0.0.1:0"],
    )
    .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("2 (create workers)"),
        "names what is missing: {err}"
    );
    assert!(!err.contains("storage unavailable"), "{err}");
    // `auto` (here through `seqd migrate`) brings it back.
    ok(&common::seqd_on(&db, &["migrate"]).await);
    assert_eq!(history(&db, "seqd_migrations").await, seqds(db.backend));
}

per_backend!(check_refuses_a_database_one_migration_behind);

/// Readiness means "can serve": with `--migrate off` on a schema one
/// migration behind, the start says so loudly and `/readyz` answers 503
/// `schema_behind` until the migration is applied; then 200 (within a
/// check or two), no restart.
async fn readiness_fails_while_the_schema_is_behind(db: TestDb) {
    one_migration_behind(&db).await;

    let process = Process::spawn(&db.url, &["--migrate", "off"]).await;
    let warned = process
        .log_lines("--migrate off: the schema is older than this seqd needs; requests will fail and /readyz answers 503 until `seqd migrate` (or the DDL of `seqd schema`) is applied");
    assert_eq!(warned.len(), 1, "the start names what is missing");
    assert!(
        warned[0]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("2 (create workers)"),
        "{}",
        warned[0]
    );
    let http = reqwest::Client::new();
    let readyz = format!("{}/readyz", process.base);
    let ready = http.get(&readyz).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(body["checks"]["database"], "schema_behind", "{body}");
    assert_eq!(body["error"]["code"], "storage_unavailable", "{body}");

    ok(&common::seqd_on(&db, &["migrate"]).await);
    // `/readyz` answers from the last background check (one a second).
    let mut ready = http.get(&readyz).send().await.unwrap();
    for _ in 0..50 {
        if ready.status() == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        ready = http.get(&readyz).send().await.unwrap();
    }
    assert_eq!(ready.status(), 200, "{:?}", ready.text().await);
    process.kill().await;
}

per_backend!(readiness_fails_while_the_schema_is_behind);

/// `--schema` names a schema seqd may own: empty and PostgreSQL's own
/// schemas are refused as usage errors (exit 2), before any connection.
#[tokio::test]
async fn schema_flag_refuses_empty_and_postgres_own_schemas() {
    for bad in ["", "information_schema", "pg_catalog"] {
        let out = seqd(&[
            "migrate",
            "--database-url",
            "postgres://postgres@127.0.0.1:5432/test",
            "--schema",
            bad,
        ])
        .await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--schema {bad:?}: {err}");
        assert!(err.contains("invalid --schema"), "--schema {bad:?}: {err}");
    }
}

/// The command-line client of `backend`.
fn client_of(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => "psql",
        Backend::Mysql => "mariadb",
        Backend::Sqlite => "sqlite3",
    }
}

/// Runs a command-line client with `stdin` fed in; panics unless it succeeds.
fn client(program: &str, args: &[&str], stdin: &str) {
    let mut command = std::process::Command::new(program);
    command.args(args);
    let out = common::run_with_stdin(&mut command, stdin);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The MariaDB database name of a test URL.
fn mysql_database(db: &TestDb) -> String {
    url::Url::parse(&db.url)
        .unwrap()
        .path()
        .trim_start_matches('/')
        .to_string()
}

/// Applies `sql` with the backend's own command-line client.
fn apply_with_client(db: &TestDb, sql: &str) {
    match db.backend {
        Backend::Postgres => client("psql", &["-v", "ON_ERROR_STOP=1", "-q", &db.url], sql),
        Backend::Mysql => client(
            "mariadb",
            &[
                "-h",
                "127.0.0.1",
                "-P",
                "3306",
                "-u",
                "root",
                &mysql_database(db),
            ],
            sql,
        ),
        Backend::Sqlite => {
            let path = db.dir().unwrap().join("seqd.db");
            client("sqlite3", &[path.to_str().unwrap()], sql)
        }
    }
}

/// Creates `name` over the API of `process` and takes IDs from it.
async fn serves_and_creates(process: &Process, name: &str) -> i64 {
    let http = reqwest::Client::new();
    server::create_at(&http, &process.base, name, 1, 10).await;
    server::next_at(&http, &process.base, name).await
}

async fn schema_output_applied_by_the_client_serves_under_a_dml_only_role(db: TestDb) {
    if !common::tool_available(client_of(db.backend)) {
        return;
    }
    let sql = ok(&seqd(&["schema", "--dialect", dialect(db.backend).name()]).await);
    apply_with_client(&db, &sql);
    assert_eq!(history(&db, "seqd_migrations").await, seqds(db.backend));

    let (role, url) = match db.backend {
        Backend::Sqlite => (None, db.url.clone()),
        _ => {
            let role = RuntimeRole::grant(&db).await;
            let url = role.url.clone();
            (Some(role), url)
        }
    };
    for (mode, name) in [("off", "off_seq"), ("check", "check_seq")] {
        let process = Process::spawn(&url, &["--migrate", mode]).await;
        assert_eq!(
            serves_and_creates(&process, name).await,
            1,
            "--migrate {mode}"
        );
        process.kill().await;
    }
    drop(role);
}

per_backend!(schema_output_applied_by_the_client_serves_under_a_dml_only_role);

/// Drops PostgreSQL schemas when dropped.
struct PgSchemas(Vec<String>);

impl Drop for PgSchemas {
    fn drop(&mut self) {
        let drops: String = self
            .0
            .iter()
            .map(|s| format!("DROP SCHEMA IF EXISTS {s} CASCADE;"))
            .collect();
        client(
            "psql",
            &["-q", "postgres://postgres@127.0.0.1:5432/test"],
            &drops,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_schema_keeps_two_installations_apart_in_one_database() {
    let Some(db) = common::test_db(Backend::Postgres).await else {
        return;
    };
    if !common::tool_available("psql") {
        return;
    }
    let base = db.url.split('?').next().unwrap().to_string();
    let schemas = PgSchemas(vec![unique("seqd_a"), unique("seqd_b")]);
    for (schema, start) in schemas.0.iter().zip(["1", "1000"]) {
        let args = ["--database-url", &base, "--schema", schema];
        let mut create = vec!["sequences", "create", "order", "--start", start];
        create.extend(args);
        ok(&seqd(&create).await);
    }
    for (schema, max_id) in schemas.0.iter().zip(["0", "999"]) {
        let list = ok(&seqd(&[
            "sequences",
            "list",
            "--database-url",
            &base,
            "--schema",
            schema,
        ])
        .await);
        let row: Vec<&str> = list.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(&row[..2], ["order", max_id], "{schema}: {list}");
    }
    // The worker leases work in its schema too.
    let options = StoreOptions::default()
        .with_schema(Some(schemas.0[0].clone()))
        .with_migrate(MigrateMode::Auto);
    let leases = seqd::store::connect(&base, &options)
        .await
        .unwrap()
        .leases();
    leases.migrate().await.unwrap();
    let row = WorkerRow {
        worker_id: 7,
        owner: "a".into(),
        lease_until: 1,
        last_timestamp: 1,
    };
    assert!(leases.insert(&row).await.unwrap());
    let mut conn = PgConnection::connect(&base).await.unwrap();
    for (schema, expected) in schemas.0.iter().zip([1i64, 0]) {
        let (n,): (i64,) = sqlx::query_as(&format!("SELECT COUNT(*) FROM {schema}.workers"))
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(n, expected, "{schema}.workers");
    }
    // A server on schema B serves B's sequence.
    let process = Process::spawn(&base, &["--schema", &schemas.0[1]]).await;
    let next: serde_json::Value = reqwest::get(format!("{}/v1/sequences/order/next", process.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(next["id"], 1000);
    process.kill().await;
}

/// A connection that holds the migration lock of `db` until dropped or released.
enum LockHolder {
    Postgres(PgConnection),
    Mysql(MySqlConnection),
    Sqlite(SqliteConnection),
}

impl LockHolder {
    /// Takes the lock every seqd migrator of `db` takes.
    async fn take(db: &TestDb) -> LockHolder {
        use seqd::store::migrator::{MYSQL_LOCK_NAME, PG_LOCK_KEY};
        match db.backend {
            Backend::Postgres => {
                let mut c = PgConnection::connect(&db.url).await.unwrap();
                sqlx::query(&format!("SELECT pg_advisory_lock({PG_LOCK_KEY})"))
                    .execute(&mut c)
                    .await
                    .unwrap();
                LockHolder::Postgres(c)
            }
            Backend::Mysql => {
                let mut c = MySqlConnection::connect(&db.url).await.unwrap();
                let got: Option<i64> =
                    sqlx::query_scalar(&format!("SELECT GET_LOCK({MYSQL_LOCK_NAME}, 10)"))
                        .fetch_one(&mut c)
                        .await
                        .unwrap();
                assert_eq!(got, Some(1), "the test holds the migration lock");
                LockHolder::Mysql(c)
            }
            Backend::Sqlite => {
                let mut c = SqliteConnection::connect(&db.url).await.unwrap();
                sqlx::raw_sql("BEGIN IMMEDIATE")
                    .execute(&mut c)
                    .await
                    .unwrap();
                LockHolder::Sqlite(c)
            }
        }
    }

    /// Whether a migrator waits for the lock (PostgreSQL, MariaDB); SQLite
    /// waits inside the driver, where nothing shows it: `None`.
    async fn has_waiter(&mut self) -> Option<bool> {
        let n: i64 = match self {
            LockHolder::Postgres(c) => sqlx::query_scalar(
                "SELECT COUNT(*) FROM pg_stat_activity \
                 WHERE wait_event_type = 'Lock' AND query LIKE 'SELECT pg_advisory_lock%'",
            )
            .fetch_one(c)
            .await
            .unwrap(),
            LockHolder::Mysql(c) => sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                 WHERE INFO LIKE 'SELECT GET_LOCK(CONCAT(''seqd_migrations:''%'",
            )
            .fetch_one(c)
            .await
            .unwrap(),
            LockHolder::Sqlite(_) => return None,
        };
        Some(n > 0)
    }

    /// Releases the lock.
    async fn release(self) {
        match self {
            LockHolder::Postgres(c) => c.close().await.unwrap(),
            LockHolder::Mysql(c) => c.close().await.unwrap(),
            LockHolder::Sqlite(mut c) => {
                sqlx::raw_sql("ROLLBACK").execute(&mut c).await.unwrap();
                c.close().await.unwrap();
            }
        }
    }
}

async fn a_migrator_waiting_behind_another_outlasts_the_pools_statement_bounds(db: TestDb) {
    // Pool bounds of 150 ms per statement, 100 ms per lock wait (1 s on MariaDB).
    let options =
        seqd::store::StoreOptions::for_fetch_timeout(std::time::Duration::from_millis(250));
    // The pool's acquire bound is as short as the fetch timeout: on a
    // loaded machine opening it may take longer, which is not what this
    // tests, so opening is tried again.
    let mut opened = seqd::store::connect(&db.url, &options).await;
    for _ in 0..20 {
        if !matches!(opened, Err(seqd::store::StoreError::Unavailable(_))) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        opened = seqd::store::connect(&db.url, &options).await;
    }
    let store = opened.unwrap().sequences();
    let mut holder = LockHolder::take(&db).await;
    let migrating = tokio::spawn(async move { store.migrate().await });
    // Wait until the migrator is queued behind the lock (where it shows).
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while holder.has_waiter().await == Some(false) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the migrator never waited for the lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // What is tested is a bound NOT firing: only time passing past it shows
    // that, so this waits (well past every pool bound, MariaDB's 1 s lock
    // wait included) instead of waiting for a signal.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert!(!migrating.is_finished(), "the migrator waits for the lock");
    holder.release().await;
    migrating
        .await
        .unwrap()
        .expect("the migration completes once the lock is free");
    assert_eq!(history(&db, "seqd_migrations").await, seqds(db.backend));
}

per_backend!(a_migrator_waiting_behind_another_outlasts_the_pools_statement_bounds);
