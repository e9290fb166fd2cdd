//! Test harness shared by the integration tests: a fresh database per test on
//! each of the three backends (docs/design.md, "Guarantees and the tests
//! that prove them").
//!
//! # Usage
//!
//! ```ignore
//! #[macro_use]
//! mod common;
//!
//! use common::TestDb;
//!
//! async fn reserve_is_atomic(db: TestDb) {
//!     let store = common::store(&db).await; // connected and migrated
//!     // ... assertions ...
//! }
//! per_backend!(reserve_is_atomic); // several names may be listed: per_backend!(a, b, c);
//! ```
//!
//! `per_backend!(f)` generates `mod f { async fn sqlite(), postgres(), mysql() }`,
//! each a `#[tokio::test(flavor = "multi_thread", worker_threads = 4)]` that
//! gets a fresh [`TestDb`] for its backend and calls `super::f(db).await`
//! (so run one backend with e.g. `cargo test f::postgres`).
//!
//! - SQLite: a new file in a temporary directory.
//! - PostgreSQL: a new schema `seqd_t_<unixsecs>_<random>` in the database of
//!   `SEQD_TEST_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`),
//!   selected by `?options=-csearch_path%3D<schema>` in [`TestDb::url`].
//! - MariaDB/MySQL: a new database `seqd_t_<unixsecs>_<random>` on the server of
//!   `SEQD_TEST_MYSQL_URL` (default `mysql://root@127.0.0.1:3306/test`).
//!
//! If a server is unreachable the test prints `skipped: ...` and passes,
//! unless `SEQD_TEST_REQUIRE_ALL=1`, under which it panics. A test's schema or
//! database is dropped when its [`TestDb`] is dropped (kept if the test
//! panicked, for inspection); leftovers older than two hours are dropped by
//! later runs.

#![allow(dead_code)]

pub mod lock;

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use seqd::domain::{NewSequence, SeqName};
use seqd::store::{Database, SequenceRow, Store, StoreOptions};
use sqlx::{Connection, MySqlConnection, PgConnection, SqliteConnection};

/// Default base URL of the PostgreSQL test server.
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// Default base URL of the MariaDB test server.
pub const DEFAULT_MYSQL_URL: &str = "mysql://root@127.0.0.1:3306/test";
/// Prefix of the schemas/databases the harness creates.
const PREFIX: &str = "seqd_t_";
/// Leftover schemas/databases older than this are dropped.
const MAX_AGE: Duration = Duration::from_secs(2 * 60 * 60);
/// How long to wait for a server before calling it unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A storage backend under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// An SQLite file.
    Sqlite,
    /// PostgreSQL.
    Postgres,
    /// MariaDB / MySQL.
    Mysql,
}

impl Backend {
    /// All backends.
    pub const ALL: [Backend; 3] = [Backend::Sqlite, Backend::Postgres, Backend::Mysql];

    /// The name [`Schema::backend`] reports for this backend.
    pub fn store_name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
            Backend::Mysql => "mysql",
        }
    }
}

/// What to drop when a [`TestDb`] goes away.
#[derive(Debug, Clone)]
enum Owned {
    /// A PostgreSQL schema in the database of `base_url`.
    PgSchema { base_url: String, name: String },
    /// A MySQL database on the server of `base_url`.
    MySqlDatabase { base_url: String, name: String },
}

/// A fresh, empty database for one test. The URL is ready for
/// `seqd::store::connect` (and for raw sqlx connections).
#[derive(Debug)]
pub struct TestDb {
    /// Which backend this is.
    pub backend: Backend,
    /// The URL of the fresh database (no migrations applied yet).
    pub url: String,
    owned: Option<Owned>,
    dir: Option<tempfile::TempDir>,
}

impl TestDb {
    /// For SQLite, the directory holding the database file.
    pub fn dir(&self) -> Option<&std::path::Path> {
        self.dir.as_ref().map(|d| d.path())
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some(owned) = self.owned.take() else {
            return;
        };
        if std::thread::panicking() {
            // Keep the data of a failed test; the age-based cleanup removes it later.
            return;
        }
        cleanup(async move { drop_owned(&owned).await });
    }
}

/// Runs `work` to its end (at most 15 s), for a `Drop`: drops run on a
/// thread of the test's runtime, where no other runtime may be started, so
/// it runs on a thread of its own with a small runtime, waited for.
pub fn cleanup(work: impl std::future::Future<Output = ()> + Send + 'static) {
    let thread = std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async move {
            let _ = tokio::time::timeout(Duration::from_secs(15), work).await;
        });
    });
    let _ = thread.join();
}

/// Drops a schema or database, best effort.
async fn drop_owned(owned: &Owned) {
    match owned {
        Owned::PgSchema { base_url, name } => {
            if let Ok(mut conn) = PgConnection::connect(base_url).await {
                PG_SCHEMAS.drop(&mut conn, name).await;
                let _ = conn.close().await;
            }
        }
        Owned::MySqlDatabase { base_url, name } => {
            if let Ok(mut conn) = MySqlConnection::connect(base_url).await {
                MYSQL_DATABASES.drop(&mut conn, name).await;
                let _ = conn.close().await;
            }
        }
    }
}

/// How a fresh test database is made on a database server, and dropped:
/// a schema on PostgreSQL, a database on MariaDB.
struct Namespaces {
    /// Lists the names `LIKE` its one bind.
    list: &'static str,
    /// Bounds the session's lock waits (a drop waits on no one for long).
    lock_bound: &'static str,
    create: fn(&str) -> String,
    drop: fn(&str) -> String,
}

const PG_SCHEMAS: Namespaces = Namespaces {
    list: "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE $1",
    lock_bound: "SET lock_timeout = '5s'",
    create: |name| format!("CREATE SCHEMA \"{name}\""),
    drop: |name| format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"),
};

const MYSQL_DATABASES: Namespaces = Namespaces {
    list:
        "SELECT CAST(SCHEMA_NAME AS CHAR) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?",
    lock_bound: "SET SESSION lock_wait_timeout = 5",
    create: |name| {
        format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    },
    drop: |name| format!("DROP DATABASE IF EXISTS `{name}`"),
};

impl Namespaces {
    /// Drops `name`, best effort.
    async fn drop<C: Connection>(&self, conn: &mut C, name: &str)
    where
        for<'c> &'c mut C: sqlx::Executor<'c, Database = C::Database>,
    {
        let _ = sqlx::Executor::execute(&mut *conn, self.lock_bound).await;
        let _ = sqlx::Executor::execute(&mut *conn, (self.drop)(name).as_str()).await;
    }

    /// Connects to `base_url` within [`CONNECT_TIMEOUT`], drops what earlier
    /// runs left (never young ones: other tests run in parallel) and creates
    /// a fresh namespace: its name.
    async fn fresh<C>(&self, base_url: &str) -> Result<String, String>
    where
        C: Connection,
        for<'c> &'c mut C: sqlx::Executor<'c, Database = C::Database>,
        for<'q> <C::Database as sqlx::Database>::Arguments<'q>:
            sqlx::IntoArguments<'q, C::Database>,
        for<'q> String: sqlx::Encode<'q, C::Database> + sqlx::Type<C::Database>,
        (String,): for<'r> sqlx::FromRow<'r, <C::Database as sqlx::Database>::Row>,
    {
        let shown = seqd::store::redact_url(base_url);
        let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, C::connect(base_url))
            .await
            .map_err(|_| format!("{shown}: connect timed out"))?
            .map_err(|e| format!("{shown}: {e}"))?;
        let pattern = format!("{}%", PREFIX.replace('_', "\\_"));
        let old: Vec<(String,)> = sqlx::query_as(self.list)
            .bind(pattern)
            .fetch_all(&mut conn)
            .await
            .unwrap_or_default();
        for (stale,) in old.into_iter().filter(|(n,)| is_stale(n)) {
            self.drop(&mut conn, &stale).await;
        }
        let name = fresh_name();
        sqlx::Executor::execute(&mut conn, (self.create)(&name).as_str())
            .await
            .map_err(|e| format!("{shown}: creating {name}: {e}"))?;
        let _ = conn.close().await;
        Ok(name)
    }
}

/// Query strings of a batch whose count is missing or invalid (a count is
/// one whole number from 1 to 10,000).
pub const BAD_COUNT_QUERIES: [&str; 7] = [
    "",
    "?count=0",
    "?count=-1",
    "?count=10001",
    "?count=1e9",
    "?count=abc",
    "?count=1&count=2",
];

/// Whether unreachable backends must fail the tests (`SEQD_TEST_REQUIRE_ALL=1`).
pub fn require_all() -> bool {
    std::env::var("SEQD_TEST_REQUIRE_ALL").is_ok_and(|v| v == "1")
}

/// A fresh database for `backend`, or `None` (after printing `skipped: ...`)
/// if its server is unreachable and `SEQD_TEST_REQUIRE_ALL` is not `1`.
pub async fn test_db(backend: Backend) -> Option<TestDb> {
    let result = match backend {
        Backend::Sqlite => sqlite_db(),
        Backend::Postgres => postgres_db().await,
        Backend::Mysql => mysql_db().await,
    };
    match result {
        Ok(db) => Some(db),
        Err(e) if require_all() => {
            panic!("{backend:?} test database unavailable and SEQD_TEST_REQUIRE_ALL=1: {e}")
        }
        Err(e) => {
            eprintln!("skipped: {backend:?} test database unavailable: {e}");
            None
        }
    }
}

/// Fresh databases for each of `backends`, or `None` if any is skipped (see
/// [`test_db`]).
#[allow(dead_code)] // not every test binary needs several backends at once
pub async fn test_dbs<const N: usize>(backends: [Backend; N]) -> Option<[TestDb; N]> {
    let mut dbs = Vec::with_capacity(N);
    for backend in backends {
        dbs.push(test_db(backend).await?);
    }
    dbs.try_into().ok()
}

/// [`store`] on `db` with the sequence `name_` created from `start` by `step`.
#[allow(dead_code)] // not every test binary starts this way
pub async fn store_with(db: &TestDb, name_: &str, start: i64, step: i64) -> Arc<dyn Store> {
    let store = store(db).await;
    create_seq(&store, name_, start, step).await;
    store
}

/// Connects to `db` through `seqd::store::connect` and applies the
/// migrations; the sequence store.
pub async fn store(db: &TestDb) -> Arc<dyn Store> {
    database(db).await.sequences()
}

/// Connects to `db` through `seqd::store::connect` and applies the
/// migrations; the sequences and the worker leases over one pool.
pub async fn database(db: &TestDb) -> Database {
    let database = connect_database(db).await;
    database
        .sequences()
        .migrate()
        .await
        .unwrap_or_else(|e| panic!("migrating the {:?} test database: {e}", db.backend));
    database
}

/// Connects to `db` through `seqd::store::connect` without migrating; the
/// sequence store.
pub async fn connect(db: &TestDb) -> Arc<dyn Store> {
    connect_database(db).await.sequences()
}

/// Connects to `db` through `seqd::store::connect` (default options)
/// without migrating.
pub async fn connect_database(db: &TestDb) -> Database {
    seqd::store::connect(&db.url, &StoreOptions::default())
        .await
        .unwrap_or_else(|e| panic!("connecting to the {:?} test database: {e}", db.backend))
}

/// Runs one SQL statement on `db` over a raw sqlx connection (as an operator
/// would with a SQL client) and returns the number of affected rows, or the
/// driver's error text.
pub async fn try_execute(db: &TestDb, sql: &str) -> Result<u64, String> {
    try_execute_at(db.backend, &db.url, sql).await
}

/// [`try_execute`] on the database at `url` of `backend` (as another user,
/// say).
pub async fn try_execute_at(backend: Backend, url: &str, sql: &str) -> Result<u64, String> {
    /// One statement on a fresh connection of type `$conn`.
    macro_rules! on_a_connection {
        ($conn:ty) => {{
            let err = |e: sqlx::Error| e.to_string();
            let mut c = <$conn>::connect(url).await.map_err(err)?;
            let n = sqlx::query(sql)
                .execute(&mut c)
                .await
                .map_err(err)?
                .rows_affected();
            c.close().await.map_err(err)?;
            Ok(n)
        }};
    }
    match backend {
        Backend::Sqlite => on_a_connection!(SqliteConnection),
        Backend::Postgres => on_a_connection!(PgConnection),
        Backend::Mysql => on_a_connection!(MySqlConnection),
    }
}

/// Like [`try_execute`], panicking on error.
pub async fn execute(db: &TestDb, sql: &str) -> u64 {
    try_execute(db, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The SQL block of `docs/{page}` whose first line is `-- {label}` (without that line):
/// statements a page shows, run by the tests as written there.
pub fn doc_sql(page: &str, label: &str) -> String {
    let path = format!("{}/docs/{page}", env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let marker = format!("```sql\n-- {label}\n");
    let start = doc
        .find(&marker)
        .unwrap_or_else(|| panic!("no `{marker}` block in docs/{page}"))
        + marker.len();
    let len = doc[start..].find("```").expect("unterminated SQL block");
    doc[start..start + len].to_owned()
}

/// libfaketime's preload library, where Debian and a local build put it.
/// The clock tests preload it themselves rather than run the `faketime`
/// wrapper: the wrapper makes a named semaphore from its own pid with
/// O_EXCL and cannot remove it when it is killed (the tests kill whole
/// process groups), so a later wrapper given the same pid refused to start
/// ("sem_open: File exists").
pub fn libfaketime() -> Option<std::path::PathBuf> {
    let mut dirs = vec![
        std::path::PathBuf::from("/usr/local/lib/faketime"),
        std::path::PathBuf::from("/usr/lib/faketime"),
    ];
    if let Ok(entries) = std::fs::read_dir("/usr/lib") {
        dirs.extend(entries.flatten().map(|e| e.path().join("faketime")));
    }
    let found = dirs
        .into_iter()
        .map(|d| d.join("libfaketime.so.1"))
        .find(|lib| lib.is_file());
    if found.is_none() {
        assert!(
            !require_all(),
            "libfaketime is required (SEQD_TEST_REQUIRE_ALL=1)"
        );
        eprintln!("skipped: libfaketime not found");
    }
    found
}

/// Whether the command-line tool `program` is on the `PATH`. When it is
/// not, the test that needs it is skipped (with a line saying so), or fails
/// under `SEQD_TEST_REQUIRE_ALL=1` (`.ci/run` installs every tool).
pub fn tool_available(program: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()));
    if !found {
        assert!(
            !require_all(),
            "{program} is required (SEQD_TEST_REQUIRE_ALL=1)"
        );
        eprintln!("skipped: {program} not found");
    }
    found
}

/// What a program run by a test printed.
pub struct Printed {
    /// Its exit status.
    pub status: std::process::ExitStatus,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Printed {
    /// Stdout, trimmed, as an integer; panics naming `what` and all it
    /// printed when it is not one.
    #[track_caller]
    pub fn int(&self, what: &str) -> i64 {
        self.stdout
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{what}: {e}: {self:?}"))
    }

    /// Stdout then stderr, trimmed: `redis-cli` without a TTY prints a
    /// reply's error text to stdout, its own failures (`AUTH failed`) to
    /// stderr.
    pub fn text(&self) -> String {
        format!("{}\n{}", self.stdout.trim(), self.stderr.trim())
            .trim()
            .to_owned()
    }
}

impl std::fmt::Debug for Printed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\nstdout: {}\nstderr: {}",
            self.status.code(),
            self.stdout,
            self.stderr
        )
    }
}

/// Longest a program run by [`run`] may take: a hang fails the test.
pub const PROGRAM_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `program args` with `stdin` as its input, within
/// [`PROGRAM_TIMEOUT`] (killed and failed past it).
pub async fn run(program: &str, args: &[&str], stdin: &[u8]) -> Printed {
    use std::process::Stdio;
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = tokio::spawn(async move {
        let _ = input.write_all(&data).await;
    });
    let out = tokio::time::timeout(PROGRAM_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{program} {args:?} did not finish within {PROGRAM_TIMEOUT:?}"))
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let _ = writer.await;
    Printed {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Whether `python3` can `import redis`; when not, the test is skipped
/// with a line saying so, or fails under `SEQD_TEST_REQUIRE_ALL=1`.
pub fn python_redis_available() -> bool {
    let found = std::process::Command::new("python3")
        .args(["-c", "import redis"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            !require_all(),
            "python3 with the redis package is required (SEQD_TEST_REQUIRE_ALL=1; \
             python3 -m pip install redis)"
        );
        eprintln!("skipped: python3 -c 'import redis' failed");
    }
    found
}

/// Runs the `seqd` binary with `args` and a clean environment for its
/// settings (none of seqd's variables inherited from the test's). Killed if
/// the future is dropped before it ends (a test that bounds it in time).
pub async fn seqd_binary(args: &[&str]) -> std::process::Output {
    seqd_binary_with_env(args, &[]).await
}

/// [`seqd_binary`] with the environment variables `env` set.
pub async fn seqd_binary_with_env(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_seqd"));
    cmd.args(args).env("RUST_LOG", "warn").kill_on_drop(true);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("SEQD_") || key == "DATABASE_URL" {
            cmd.env_remove(key);
        }
    }
    cmd.envs(env.iter().copied());
    cmd.output().await.expect("run seqd")
}

/// The items of the JSON array `v[key]`, each read by `item` as a `what`
/// (panics, showing `v`, if it is not an array or `item` reads `None`).
fn array_of<T, C: FromIterator<T>>(
    v: &serde_json::Value,
    key: &str,
    what: &str,
    item: impl Fn(&serde_json::Value) -> Option<T>,
) -> C {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("no array {key} in {v}"))
        .iter()
        .map(|i| item(i).unwrap_or_else(|| panic!("{i} in {key} is not {what}: {v}")))
        .collect()
}

/// The strings of the JSON array `v[key]` (panics, showing `v`, if it is not
/// an array of strings).
pub fn strings<C: FromIterator<String>>(v: &serde_json::Value, key: &str) -> C {
    array_of(v, key, "a string", |s| s.as_str().map(str::to_owned))
}

/// The integers of the JSON array `v[key]` (panics, showing `v`, if it is
/// not an array of integers).
pub fn integers(v: &serde_json::Value, key: &str) -> Vec<i64> {
    array_of(v, key, "an integer", serde_json::Value::as_i64)
}

/// Runs `command` with `stdin` as its input; its output (stdout and stderr
/// captured). Panics if it cannot be started.
pub fn run_with_stdin(command: &mut std::process::Command, stdin: &str) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{:?}: {e}", command.get_program()));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Runs `seqd <args> --database-url <db>` (as [`seqd_binary`]).
pub async fn seqd_on(db: &TestDb, args: &[&str]) -> std::process::Output {
    let mut all = args.to_vec();
    all.extend(["--database-url", db.url.as_str()]);
    seqd_binary(&all).await
}

/// `seqd tokens create <args>` (split at whitespace) on `db`, asserted to
/// succeed; the token it printed.
pub async fn cli_token(db: &TestDb, args: &str) -> String {
    let mut all = vec!["tokens", "create"];
    all.extend(args.split_whitespace());
    ok(&seqd_on(db, &all).await).trim().to_owned()
}

/// Asserts that a finished command (such as [`seqd_binary`]'s) succeeded;
/// its stdout. The failure shows the exit code, stdout and stderr.
#[track_caller]
pub fn ok(out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {stdout}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Waits out the last 30 s of a UTC day, so that a test whose serials (or
/// expected dates) name today does not straddle midnight (CI may run then).
pub async fn clear_of_midnight() {
    let left = 86_400 - jiff::Timestamp::now().as_second().rem_euclid(86_400);
    if left <= 30 {
        tokio::time::sleep(std::time::Duration::from_secs(left as u64 + 2)).await;
    }
}

/// Today's date in UTC as serials print it: `YYYYMMDD`.
pub fn today() -> String {
    let d = jiff::tz::TimeZone::UTC
        .to_datetime(jiff::Timestamp::now())
        .date();
    format!("{:04}{:02}{:02}", d.year(), d.month(), d.day())
}

/// A valid sequence name (panics on an invalid one).
#[track_caller]
pub fn name(s: &str) -> SeqName {
    SeqName::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

/// A sequence to create, with an empty description.
#[track_caller]
pub fn new_seq(name_: &str, start: i64, step: i64) -> NewSequence {
    NewSequence::new(name(name_), start, step, String::new(), i64::MAX)
        .unwrap_or_else(|e| panic!("new sequence {name_:?}: {e}"))
}

/// An in-memory store holding the row `name_` at `max_id`, by `step`.
pub fn memory_with(name_: &str, max_id: i64, step: i64) -> Arc<seqd::store::memory::MemoryStore> {
    let store = Arc::new(seqd::store::memory::MemoryStore::new());
    store.insert(name_, max_id, step);
    store
}

/// An allocator on `store` that always fetches the row's step, on a manual
/// clock.
pub fn fixed_step_allocator<S: seqd::store::Segments>(
    store: &Arc<S>,
    config: seqd::allocator::AllocatorConfig,
) -> seqd::allocator::Allocator {
    seqd::allocator::Allocator::with_parts(
        store.clone(),
        config,
        Arc::new(seqd::allocator::ManualClock::new()),
        Arc::new(seqd::allocator::FixedStep),
    )
}

/// An allocator on `store` with the default configuration and the
/// rate-based step (as in production), on the manual clock `clock`.
pub fn rate_step_allocator(
    store: Arc<dyn seqd::store::Segments>,
    clock: &seqd::allocator::ManualClock,
) -> seqd::allocator::Allocator {
    let config = seqd::allocator::AllocatorConfig::default();
    let policy = seqd::allocator::RateStep {
        target: config.segment_target,
        max_step: config.max_step,
    };
    seqd::allocator::Allocator::with_parts(store, config, Arc::new(clock.clone()), Arc::new(policy))
}

/// Creates the sequence `name_` from `start` by `step` in `store`
/// (panics on failure).
pub async fn create_seq(store: &Arc<dyn Store>, name_: &str, start: i64, step: i64) {
    store.create(&new_seq(name_, start, step)).await.unwrap();
}

/// Creates on `store` the serial sequence `name_` (counters from 1, by
/// `step`) printing `format`, reset daily in UTC, refusing past its width.
pub async fn create_daily_serial(store: &Arc<dyn Store>, name_: &str, step: i64, format: &str) {
    let mut seq = new_seq(name_, 1, step);
    seq.serial = Some(serial_settings(
        format,
        seqd::serial::Reset::Day,
        "UTC",
        seqd::serial::Overflow::Refuse,
    ));
    store.create(&seq).await.expect("create a serial sequence");
}

/// Serial settings of `format`, reset every `reset` in `zone`, with
/// `overflow` (panics if they are not valid).
#[track_caller]
pub fn serial_settings(
    format: &str,
    reset: seqd::serial::Reset,
    zone: &str,
    overflow: seqd::serial::Overflow,
) -> seqd::domain::SerialSettings {
    seqd::domain::SerialSettings::new(format, reset, zone, overflow)
        .unwrap_or_else(|e| panic!("serial settings {format:?}: {e}"))
}

/// The row of `name_` in `store` (panics if reading fails or the row is missing).
pub async fn row(store: &Arc<dyn Store>, name_: &str) -> SequenceRow {
    store
        .get(&name(name_))
        .await
        .unwrap_or_else(|e| panic!("reading row {name_:?}: {e:?}"))
        .unwrap_or_else(|| panic!("row {name_:?} missing"))
}

/// The names of the rows `store` lists, in its order (panics if listing fails).
pub async fn names(store: &Arc<dyn Store>) -> Vec<String> {
    store
        .list()
        .await
        .unwrap_or_else(|e| panic!("listing the rows: {e:?}"))
        .into_iter()
        .map(|r| r.name.to_string())
        .collect()
}

/// Asserts that a timestamp read from the database is "now" in UTC (so the
/// column was written and decoded as UTC, not as some local time).
#[track_caller]
pub fn assert_recent(what: &str, t: chrono::DateTime<chrono::Utc>) {
    let delta = (chrono::Utc::now() - t).num_seconds().abs();
    assert!(delta <= 60, "{what} = {t} is {delta}s away from now (UTC)");
}

/// Waits for `tasks`, each answering the IDs it drew in the order it drew
/// them; asserts each task's IDs increase and that no ID came twice, across
/// all of them (panics saying `what`): every ID drawn.
pub async fn unique_increasing(
    what: &str,
    tasks: Vec<tokio::task::JoinHandle<Vec<i64>>>,
) -> std::collections::HashSet<i64> {
    let mut all = std::collections::HashSet::new();
    for t in tasks {
        let ids = t.await.unwrap();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "{what}: per-task order: {ids:?}"
        );
        for id in ids {
            assert!(all.insert(id), "{what}: {id} twice");
        }
    }
    all
}

/// A fresh `seqd_t_<unixsecs>_<random>` name.
fn fresh_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    h.write_u128(now.as_nanos());
    format!("{PREFIX}{}_{:016x}", now.as_secs(), h.finish())
}

/// Whether a harness-made name is older than [`MAX_AGE`].
fn is_stale(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(PREFIX) else {
        return false;
    };
    let Some(secs) = rest.split('_').next().and_then(|s| s.parse::<u64>().ok()) else {
        return false;
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    now.saturating_sub(secs) > MAX_AGE.as_secs()
}

fn sqlite_db() -> Result<TestDb, String> {
    let dir = tempfile::Builder::new()
        .prefix("seqd-test-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let path = dir.path().join("seqd.db");
    let url = format!("sqlite://{}?mode=rwc", path.display());
    Ok(TestDb {
        backend: Backend::Sqlite,
        url,
        owned: None,
        dir: Some(dir),
    })
}

async fn postgres_db() -> Result<TestDb, String> {
    let base_url = std::env::var("SEQD_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_string());
    let name = PG_SCHEMAS.fresh::<PgConnection>(&base_url).await?;
    let sep = if base_url.contains('?') { '&' } else { '?' };
    let url = format!("{base_url}{sep}options=-csearch_path%3D{name}");
    Ok(TestDb {
        backend: Backend::Postgres,
        url,
        owned: Some(Owned::PgSchema { base_url, name }),
        dir: None,
    })
}

async fn mysql_db() -> Result<TestDb, String> {
    let base_url =
        std::env::var("SEQD_TEST_MYSQL_URL").unwrap_or_else(|_| DEFAULT_MYSQL_URL.to_string());
    let name = MYSQL_DATABASES.fresh::<MySqlConnection>(&base_url).await?;
    let shown = seqd::store::redact_url(&base_url);
    let mut url = url::Url::parse(&base_url).map_err(|e| format!("{shown}: {e}"))?;
    url.set_path(&format!("/{name}"));
    Ok(TestDb {
        backend: Backend::Mysql,
        url: url.to_string(),
        owned: Some(Owned::MySqlDatabase { base_url, name }),
        dir: None,
    })
}

/// One test module `$test` with a `#[tokio::test]` per listed backend, each
/// calling `super::$test(db)` on a fresh database of that backend (skipped,
/// or failed under `SEQD_TEST_REQUIRE_ALL=1`, when its server is down). The
/// body of [`per_backend!`] and [`network_backends!`].
#[macro_export]
macro_rules! tests_on_backends {
    ($test:ident: $($backend:ident => $variant:ident),+) => {
        mod $test {
            $(
                #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $backend() {
                    if let Some(db) = $crate::support::common::test_db($crate::support::common::Backend::$variant).await {
                        super::$test(db).await;
                    }
                }
            )+
        }
    };
}

/// Instantiates `async fn NAME(db: TestDb)` once per backend; see the module
/// docs. Accepts several names: `per_backend!(a, b, c);`.
#[macro_export]
macro_rules! per_backend {
    ($($test:ident),+ $(,)?) => {
        $(
            $crate::tests_on_backends!($test: sqlite => Sqlite, postgres => Postgres, mysql => Mysql);
        )+
    };
}

/// Like [`per_backend!`], for the backends reached over a network (a fault
/// proxy can sit on that path) and with row locks: PostgreSQL and MariaDB.
#[macro_export]
macro_rules! network_backends {
    ($($test:ident),+ $(,)?) => {
        $(
            $crate::tests_on_backends!($test: postgres => Postgres, mysql => Mysql);
        )+
    };
}
