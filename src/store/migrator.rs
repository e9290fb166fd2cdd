//! seqd's own migrator: its history in `seqd_migrations`, never in
//! `_sqlx_migrations` (which applications' sqlx migrators use), so seqd can
//! share a database with an application's migrations (docs/design.md,
//! "`seqd_migrations` and the migrator").
//!
//! The migrations are the files of `migrations/<dialect>/`, embedded by
//! `sqlx::migrate!` only to read them: versions, descriptions and SHA-384
//! checksums are exactly what sqlx's migrator recorded for them, so an older
//! installation's rows in `_sqlx_migrations` are recognised by version AND
//! checksum (an application may number its own migrations 1, 2, 3 too).
//!
//! `Migrator::apply` (the `auto` mode, `seqd migrate`):
//!
//! 1. takes a connection of its own out of the pool (detached, closed at the
//!    end) and lifts the pool's per-statement bounds to [`MIGRATION_BOUND`],
//!    so neither a DDL statement nor a wait behind another migrator is cut
//!    short by them;
//! 2. serialises with every other migrator of the database: PostgreSQL
//!    `pg_advisory_lock(`[`PG_LOCK_KEY`]`)`, MariaDB/MySQL
//!    `GET_LOCK(`[`MYSQL_LOCK_NAME`]`, timeout)` checked for 1, SQLite
//!    `BEGIN IMMEDIATE` around the whole check-and-apply;
//! 3. creates the schema (PostgreSQL `--schema`) and `seqd_migrations` if
//!    missing, then carries over seqd's rows from `_sqlx_migrations`: each
//!    row whose version and checksum are one of seqd's migrations is copied
//!    into `seqd_migrations` (as recorded: time, success, checksum) and
//!    deleted from `_sqlx_migrations`, in one transaction; nothing is re-run
//!    and the application's rows stay where they are;
//! 4. checks the history (no changed checksum, no failed migration) and
//!    applies what is missing, each with its history row.
//!
//! `Migrator::check` (the `check` mode) reads the history and refuses a
//! schema that lacks any of seqd's migrations; it needs only `SELECT`.

use std::time::{Duration, Instant};

use sqlx::migrate::Migration;

pub use super::dialect::Dialect;
use super::engine::{FromColumns, SqlDb, Statement};
use super::StoreError;
use crate::domain::MAX_BATCH;
use sqlx::pool::PoolConnection;
use sqlx::Pool;

/// seqd's history table.
pub const HISTORY_TABLE: &str = "seqd_migrations";
/// sqlx's history table, where seqd's rows were kept before it had its own.
pub const SQLX_TABLE: &str = "_sqlx_migrations";
/// The PostgreSQL advisory lock key every seqd migrator of a database takes.
pub const PG_LOCK_KEY: i64 = 0x7365_7164_5f6d_6967; // "seqd_mig"
/// The MariaDB/MySQL `GET_LOCK` name every seqd migrator of a database takes
/// (an SQL expression: lock names are server-wide, so it names the database).
pub const MYSQL_LOCK_NAME: &str = "CONCAT('seqd_migrations:', SHA1(DATABASE()))";
/// Bound of each statement and lock wait of a migration (instead of the
/// pool's, which sit under the allocator's fetch timeout).
pub const MIGRATION_BOUND: Duration = Duration::from_secs(600);

/// What seqd does with its schema at start (`--migrate`, `SEQD_MIGRATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigrateMode {
    /// Apply what is missing (the default).
    #[default]
    Auto,
    /// Refuse to start when any of seqd's migrations is missing.
    Check,
    /// No DDL and no check: the operator owns the schema.
    Off,
}

impl MigrateMode {
    /// The names accepted by [`str::parse`], in order.
    pub const NAMES: [&'static str; 3] = ["auto", "check", "off"];
}

impl std::str::FromStr for MigrateMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(MigrateMode::Auto),
            "check" => Ok(MigrateMode::Check),
            "off" => Ok(MigrateMode::Off),
            _ => Err(format!(
                "invalid migrate mode {s:?}: expected auto, check or off"
            )),
        }
    }
}

/// `--failover-fence` and its margin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FenceOptions {
    /// Whether server identities are checked and changes fenced.
    pub enabled: bool,
    /// How much every row is raised by a fence.
    pub margin: i64,
    /// `seqd migrate --new-database`: the operator says the database is
    /// new, so seqd's tables are created even on a server that was promoted
    /// from a replica, where `--migrate auto` refuses to (they may have been
    /// lost with a failover).
    pub new_database: bool,
}

/// The default floor of the margin (`--failover-margin`): one billion IDs.
pub const DEFAULT_MARGIN: i64 = 1_000_000_000;

/// How many reservations of the largest size the margin covers at least
/// (docs/high-availability.md, "The margin").
pub const MARGIN_RESERVATIONS: i64 = 1_000;

impl Default for FenceOptions {
    fn default() -> Self {
        FenceOptions {
            enabled: true,
            margin: DEFAULT_MARGIN,
            new_database: false,
        }
    }
}

impl FenceOptions {
    /// The margin for a floor and the largest reservation one request can
    /// make from one row (the dynamic step's bound, a lease, a batch): the
    /// floor, or [`MARGIN_RESERVATIONS`] such reservations, whichever is
    /// larger.
    pub fn margin_for(floor: i64, largest_reservation: i64) -> i64 {
        floor.max(largest_reservation.saturating_mul(MARGIN_RESERVATIONS))
    }
}

/// What seqd does with its schema at start, and where it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchemaSetup {
    /// `--migrate`.
    pub mode: MigrateMode,
    /// PostgreSQL `--schema` (see [`super::StoreOptions::schema`]).
    pub schema: Option<String>,
    /// `--failover-fence` and its margin.
    pub fence: FenceOptions,
}

impl SchemaSetup {
    /// The same setup with a fence margin that covers reservations of
    /// `largest` IDs as well ([`FenceOptions::margin_for`]; a batch of
    /// [`MAX_BATCH`] always counts).
    pub fn with_reservation(mut self, largest: i64) -> Self {
        let largest = largest.max(i64::from(MAX_BATCH));
        self.fence.margin = FenceOptions::margin_for(self.fence.margin, largest);
        self
    }
}

impl Dialect {
    /// seqd's migrations for this dialect, in version order.
    pub fn migrations(self) -> &'static [Migration] {
        static POSTGRES: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");
        static MYSQL: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/mysql");
        static SQLITE: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
        match self {
            Dialect::Postgres => &POSTGRES.migrations,
            Dialect::Mysql => &MYSQL.migrations,
            Dialect::Sqlite => &SQLITE.migrations,
        }
    }

    /// Readiness' one query: how many of this binary's migrations
    /// `seqd_migrations` records as applied (all of them, when the schema is
    /// as current as this seqd needs). Built once per dialect.
    pub(crate) fn applied_count_sql(self) -> &'static str {
        static SQL: [std::sync::OnceLock<String>; 3] = [const { std::sync::OnceLock::new() }; 3];
        SQL[self as usize].get_or_init(|| {
            let versions: Vec<String> = self
                .migrations()
                .iter()
                .map(|m| m.version.to_string())
                .collect();
            format!(
                "SELECT COUNT(*) FROM {HISTORY_TABLE} WHERE success AND version IN ({})",
                versions.join(", ")
            )
        })
    }

    /// `CREATE TABLE IF NOT EXISTS seqd_migrations`, shaped as sqlx's table.
    pub fn history_ddl(self) -> &'static str {
        match self {
            Dialect::Postgres => {
                "CREATE TABLE IF NOT EXISTS seqd_migrations (\n    version        BIGINT PRIMARY KEY,\n    description    TEXT NOT NULL,\n    installed_on   TIMESTAMPTZ NOT NULL DEFAULT now(),\n    success        BOOLEAN NOT NULL,\n    checksum       BYTEA NOT NULL,\n    execution_time BIGINT NOT NULL\n);"
            }
            Dialect::Mysql => {
                "CREATE TABLE IF NOT EXISTS seqd_migrations (\n    version        BIGINT PRIMARY KEY,\n    description    TEXT NOT NULL,\n    installed_on   TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,\n    success        BOOLEAN NOT NULL,\n    checksum       BLOB NOT NULL,\n    execution_time BIGINT NOT NULL\n) ENGINE = InnoDB;"
            }
            Dialect::Sqlite => {
                "CREATE TABLE IF NOT EXISTS seqd_migrations (\n    version        BIGINT PRIMARY KEY,\n    description    TEXT NOT NULL,\n    installed_on   TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,\n    success        BOOLEAN NOT NULL,\n    checksum       BLOB NOT NULL,\n    execution_time BIGINT NOT NULL\n);"
            }
        }
    }

    /// A query with one bind (a table name) answering one row, one
    /// `BIGINT` column: how many tables of that name seqd's connection sees.
    fn table_exists(self) -> &'static str {
        match self {
            Dialect::Postgres => {
                "SELECT COUNT(*) FROM (SELECT to_regclass($1) AS t) r WHERE t IS NOT NULL"
            }
            Dialect::Mysql => {
                "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?"
            }
            Dialect::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        }
    }

    /// Lifts the session's statement bounds to [`MIGRATION_BOUND`]: the
    /// statement, and one to try if the server refuses it (MySQL, which has
    /// `max_execution_time` where MariaDB has `max_statement_time`).
    fn bound_session(self) -> (String, Option<String>) {
        let secs = MIGRATION_BOUND.as_secs();
        match self {
            Dialect::Postgres => (
                format!("SET statement_timeout = '{secs}s'; SET lock_timeout = '{secs}s'"),
                None,
            ),
            Dialect::Mysql => (
                format!(
                    "SET SESSION innodb_lock_wait_timeout = {secs}, max_statement_time = {secs}"
                ),
                Some(format!(
                    "SET SESSION innodb_lock_wait_timeout = {secs}, max_execution_time = {}",
                    secs * 1000
                )),
            ),
            Dialect::Sqlite => (format!("PRAGMA busy_timeout = {}", secs * 1000), None),
        }
    }

    /// Statements with `$n` placeholders in this dialect's form.
    fn placeholders(self, sql: &str) -> String {
        match self {
            Dialect::Postgres => sql.to_string(),
            Dialect::Sqlite => sql.replace('$', "?"),
            Dialect::Mysql => {
                let mut out = String::with_capacity(sql.len());
                let mut chars = sql.chars().peekable();
                while let Some(c) = chars.next() {
                    if c == '$' {
                        out.push('?');
                        while chars.peek().is_some_and(char::is_ascii_digit) {
                            chars.next();
                        }
                    } else {
                        out.push(c);
                    }
                }
                out
            }
        }
    }

    /// An SQL literal of `bytes`.
    fn bytes_literal(self, bytes: &[u8]) -> String {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        match self {
            Dialect::Postgres => format!("decode('{hex}', 'hex')"),
            Dialect::Mysql | Dialect::Sqlite => format!("X'{hex}'"),
        }
    }
}

/// The complete DDL of `dialect` for operators' own migration tools: the
/// history table, then every migration in order, each marked with its
/// version and followed by its history row, so a database set up from it
/// passes `--migrate check`.
pub fn schema_sql(dialect: Dialect) -> String {
    let mut out = format!(
        "-- seqd {} schema, {} dialect: its tables and their migration history.\n\
         -- Apply as one migration of your own tool; then run seqd with --migrate check or off.\n\n\
         -- seqd's migration history (not _sqlx_migrations: that is the application's).\n{}\n",
        env!("CARGO_PKG_VERSION"),
        dialect.name(),
        dialect.history_ddl()
    );
    for m in dialect.migrations() {
        out.push_str(&format!(
            "\n-- seqd migration {}: {}\n{}\n",
            m.version,
            m.description,
            m.sql.trim_end()
        ));
        out.push_str(&format!(
            "INSERT INTO seqd_migrations (version, description, success, checksum, execution_time) \
             VALUES ({}, '{}', TRUE, {}, 0);\n",
            m.version,
            m.description.replace('\'', "''"),
            dialect.bytes_literal(&m.checksum)
        ));
    }
    out
}

/// One row of a history table.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Applied {
    version: i64,
    checksum: Vec<u8>,
    success: bool,
}

/// Which of `known` are missing from `applied`, or why the history is not
/// one seqd can build on: a migration whose checksum changed since it was
/// applied, or one that failed half-way. Versions seqd does not know (a
/// newer seqd's, during a rolling upgrade) are accepted.
fn pending<'m>(known: &'m [Migration], applied: &[Applied]) -> Result<Vec<&'m Migration>, String> {
    let mut missing = Vec::new();
    for m in known {
        match applied.iter().find(|a| a.version == m.version) {
            None => missing.push(m),
            Some(a) if a.checksum != *m.checksum => {
                return Err(format!(
                    "seqd migration {} ({}) in {HISTORY_TABLE} has another checksum than this \
                     seqd's: the migration was changed or is not seqd's",
                    m.version, m.description
                ))
            }
            Some(a) if !a.success => {
                return Err(format!(
                    "seqd migration {} ({}) failed half-way (success = false in {HISTORY_TABLE}): \
                     repair the schema by hand, then delete that row and start again",
                    m.version, m.description
                ))
            }
            Some(_) => {}
        }
    }
    Ok(missing)
}

/// Names the migrations in `missing`: `2 (create workers), 3 (...)`.
fn describe(missing: &[&Migration]) -> String {
    missing
        .iter()
        .map(|m| format!("{} ({})", m.version, m.description))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The rows of `sqlx_rows` that are seqd's: version and checksum of one of
/// `known`.
fn seqds_rows(known: &[Migration], sqlx_rows: Vec<Applied>) -> Vec<Applied> {
    sqlx_rows
        .into_iter()
        .filter(|a| {
            known
                .iter()
                .any(|m| m.version == a.version && *m.checksum == a.checksum)
        })
        .collect()
}

/// A migration problem as seqd reports it: a configuration error. A
/// conflict the database asks the client to retry (SQLSTATE 40001 or 40P01,
/// [`super::retry::conflict`]) is not retried here, where statements run
/// under the migration lock on one connection, but named as such, so that
/// an operator knows that running the migration again is the remedy.
fn failed(what: &str, e: sqlx::Error) -> StoreError {
    match super::retry::conflict(&e) {
        Some(sqlstate) => StoreError::Migration(format!(
            "{what}: {e} (SQLSTATE {sqlstate}: the database aborted the statement for a conflict \
             with a concurrent transaction; run the migration again, e.g. `seqd migrate`)"
        )),
        None => StoreError::Migration(format!("{what}: {e}")),
    }
}

/// seqd's migrator on one connection of its own (see the module docs).
pub(crate) struct Migrator<DB: SqlDb> {
    conn: DB::Connection,
    dialect: Dialect,
    /// SQLite: a connection of the pool held while the migration runs. An
    /// in-memory database lives only while one of its connections is open;
    /// without this, closing the detached connection could take the
    /// database, and the tables just made, with it.
    _keep_alive: Option<PoolConnection<DB>>,
}

impl<DB: SqlDb> Migrator<DB> {
    /// Prepares the schema of `pool` as `mode` says ([`Self::apply`] with
    /// `create_schema`, [`Self::check`], or nothing).
    pub(crate) async fn prepare(
        pool: &Pool<DB>,
        mode: MigrateMode,
        create_schema: Option<String>,
    ) -> Result<(), StoreError> {
        match mode {
            MigrateMode::Auto => Self::detach(pool).await?.apply(create_schema).await,
            MigrateMode::Check => Self::detach(pool).await?.check().await,
            MigrateMode::Off => Ok(()),
        }
    }

    /// A connection taken out of `pool` for good (the pool opens another).
    async fn detach(pool: &Pool<DB>) -> Result<Self, StoreError> {
        let what = "connecting for the migration";
        let conn = pool.acquire().await.map_err(|e| failed(what, e))?;
        let conn = conn.detach();
        // Taken after the detach, which gave its slot back.
        let keep = match DB::DIALECT {
            Dialect::Sqlite => Some(pool.acquire().await.map_err(|e| failed(what, e))?),
            Dialect::Postgres | Dialect::Mysql => None,
        };
        Ok(Migrator {
            conn,
            dialect: DB::DIALECT,
            _keep_alive: keep,
        })
    }

    /// Checks that every one of seqd's migrations is applied (reading
    /// `seqd_migrations` and, for an installation not carried over yet,
    /// seqd's rows in `_sqlx_migrations`); runs no DDL.
    pub(crate) async fn check(mut self) -> Result<(), StoreError> {
        let known = self.dialect.migrations();
        let mut applied = self.history(HISTORY_TABLE).await?;
        if !pending(known, &applied)
            .map_err(StoreError::Migration)?
            .is_empty()
        {
            applied.extend(seqds_rows(known, self.history(SQLX_TABLE).await?));
        }
        let missing = pending(known, &applied).map_err(StoreError::Migration)?;
        let _ = self.close().await;
        if missing.is_empty() {
            return Ok(());
        }
        Err(StoreError::Migration(format!(
            "--migrate check: seqd's schema is behind: migration(s) {} not applied \
             (apply them with `seqd migrate`, or with the DDL of `seqd schema` in your own tool)",
            describe(&missing)
        )))
    }

    /// Brings the schema up to date under the migration lock; `create_schema`
    /// is run first (PostgreSQL `CREATE SCHEMA IF NOT EXISTS`).
    pub(crate) async fn apply(mut self, create_schema: Option<String>) -> Result<(), StoreError> {
        self.bound_session().await?;
        self.lock().await?;
        if let Some(sql) = create_schema {
            self.exec(&sql, "creating the schema").await?;
        }
        self.exec(self.dialect.history_ddl(), "creating seqd_migrations")
            .await?;
        self.carry_over().await?;
        let known = self.dialect.migrations();
        let applied = self.history(HISTORY_TABLE).await?;
        for m in pending(known, &applied).map_err(StoreError::Migration)? {
            self.run_one(m).await?;
        }
        self.unlock().await?;
        let _ = self.close().await;
        Ok(())
    }

    /// Lifts the pool's statement bounds on this connection.
    async fn bound_session(&mut self) -> Result<(), StoreError> {
        let (first, fallback) = self.dialect.bound_session();
        let what = "bounding the migration session";
        match (self.exec(&first, what).await, fallback) {
            (Err(_), Some(fallback)) => self.exec(&fallback, what).await,
            (outcome, _) => outcome,
        }
    }

    /// Takes the migration lock of the database (held until [`Self::unlock`]
    /// or until the connection closes).
    async fn lock(&mut self) -> Result<(), StoreError> {
        match self.dialect {
            Dialect::Postgres => {
                let sql = format!("SELECT pg_advisory_lock({PG_LOCK_KEY})");
                self.exec(&sql, "waiting for the migration lock").await
            }
            Dialect::Mysql => {
                let sql = format!(
                    "SELECT GET_LOCK({MYSQL_LOCK_NAME}, {})",
                    MIGRATION_BOUND.as_secs()
                );
                match self.named_lock(&sql).await? {
                    Some(1) => Ok(()),
                    other => Err(StoreError::Migration(format!(
                        "the migration lock was not granted (GET_LOCK answered {other:?}): \
                         another seqd migrator held it for {MIGRATION_BOUND:?}, or no database \
                         is selected in the URL"
                    ))),
                }
            }
            Dialect::Sqlite => {
                self.exec("BEGIN IMMEDIATE", "waiting for the database's write lock")
                    .await
            }
        }
    }

    /// Runs MariaDB/MySQL's `GET_LOCK` statement `sql`, answering its result.
    async fn named_lock(&mut self, sql: &str) -> Result<Option<i64>, StoreError> {
        let what = "waiting for the migration lock";
        let rows: Vec<(Option<i64>,)> = self.fetch(Statement::new(sql), what).await?;
        Ok(rows.into_iter().next().and_then(|(granted,)| granted))
    }

    /// Releases the migration lock (SQLite: commits everything).
    async fn unlock(&mut self) -> Result<(), StoreError> {
        let sql = match self.dialect {
            Dialect::Postgres => format!("SELECT pg_advisory_unlock({PG_LOCK_KEY})"),
            Dialect::Mysql => format!("SELECT RELEASE_LOCK({MYSQL_LOCK_NAME})"),
            Dialect::Sqlite => "COMMIT".to_string(),
        };
        self.exec(&sql, "releasing the migration lock").await
    }

    /// Moves seqd's rows (version and checksum) from `_sqlx_migrations` to
    /// `seqd_migrations`, in one transaction (SQLite: the migration's).
    async fn carry_over(&mut self) -> Result<(), StoreError> {
        let known = self.dialect.migrations();
        let ours = seqds_rows(known, self.history(SQLX_TABLE).await?);
        if ours.is_empty() {
            return Ok(());
        }
        let already = self.history(HISTORY_TABLE).await?;
        let transaction = self.dialect != Dialect::Sqlite;
        if transaction {
            self.exec("BEGIN", "carrying over the history").await?;
        }
        for row in &ours {
            if !already.iter().any(|a| a.version == row.version) {
                self.move_row(row, "INSERT INTO seqd_migrations (version, description, installed_on, success, checksum, execution_time) \
                     SELECT version, description, installed_on, success, checksum, execution_time \
                     FROM _sqlx_migrations WHERE version = $1 AND checksum = $2")
                    .await?;
            }
            self.move_row(
                row,
                "DELETE FROM _sqlx_migrations WHERE version = $1 AND checksum = $2",
            )
            .await?;
        }
        if transaction {
            self.exec("COMMIT", "carrying over the history").await?;
        }
        tracing::info!(
            versions = ?ours.iter().map(|r| r.version).collect::<Vec<_>>(),
            "seqd's migration history moved from _sqlx_migrations to seqd_migrations"
        );
        Ok(())
    }

    /// Runs one statement of the carry-over, bound to `row`'s version and checksum.
    async fn move_row(&mut self, row: &Applied, sql: &str) -> Result<(), StoreError> {
        let checksum = self.dialect.bytes_literal(&row.checksum);
        let sql = self.dialect.placeholders(&sql.replace("$2", &checksum));
        let what = "carrying over the history from _sqlx_migrations";
        self.execute(Statement::new(&sql).bind(row.version), what)
            .await
            .map(drop)
    }

    /// Applies `m` with its history row: `success = FALSE` first, so a
    /// migration cut off half-way (MariaDB commits each DDL statement) is
    /// seen as such; on PostgreSQL the three statements are one transaction.
    async fn run_one(&mut self, m: &Migration) -> Result<(), StoreError> {
        let what = format!("applying seqd migration {} ({})", m.version, m.description);
        let transaction = self.dialect == Dialect::Postgres;
        if transaction {
            self.exec("BEGIN", &what).await?;
        }
        let start = Instant::now();
        let insert = self.dialect.placeholders(&format!(
            "INSERT INTO seqd_migrations (version, description, success, checksum, execution_time) \
             VALUES ($1, $2, FALSE, {}, -1)",
            self.dialect.bytes_literal(&m.checksum)
        ));
        let statement = Statement::new(&insert)
            .bind(m.version)
            .bind(&*m.description);
        self.execute(statement, &what).await?;
        self.exec(&m.sql, &what).await?;
        let done = self.dialect.placeholders(
            "UPDATE seqd_migrations SET success = TRUE, execution_time = $1 WHERE version = $2",
        );
        let nanos = start.elapsed().as_nanos().min(i64::MAX as u128) as i64;
        let statement = Statement::new(&done).bind(nanos).bind(m.version);
        self.execute(statement, &what).await?;
        if transaction {
            self.exec("COMMIT", &what).await?;
        }
        tracing::info!(version = m.version, description = %m.description, "seqd migration applied");
        Ok(())
    }

    /// Whether the connection sees a table named `table`.
    async fn table_exists(&mut self, table: &str, what: &str) -> Result<bool, StoreError> {
        let exists = Statement::new(self.dialect.table_exists()).bind(table);
        let rows: Vec<(i64,)> = self.fetch(exists, what).await?;
        Ok(rows.first().is_some_and(|&(count,)| count > 0))
    }

    /// Runs `statement` on the migrator's connection: how many rows it
    /// changed. A failure is [`failed`] with `what`.
    async fn execute(&mut self, statement: Statement<'_>, what: &str) -> Result<u64, StoreError> {
        statement
            .execute::<DB>(&mut self.conn)
            .await
            .map_err(|e| failed(what, e))
    }

    /// Runs `statement` on the migrator's connection and reads every row
    /// as `T`. A failure is [`failed`] with `what`.
    async fn fetch<T: FromColumns>(
        &mut self,
        statement: Statement<'_>,
        what: &str,
    ) -> Result<Vec<T>, StoreError> {
        statement
            .fetch_all::<DB, T>(&mut self.conn)
            .await
            .map_err(|e| failed(what, e))
    }

    /// The rows of the history table `table`; none if it does not exist.
    async fn history(&mut self, table: &str) -> Result<Vec<Applied>, StoreError> {
        let what = format!("reading {table}");
        if !self.table_exists(table, &what).await? {
            return Ok(Vec::new());
        }
        let sql = format!("SELECT version, checksum, success FROM {table} ORDER BY version");
        let rows: Vec<(i64, Vec<u8>, bool)> = self.fetch(Statement::new(&sql), &what).await?;
        Ok(rows
            .into_iter()
            .map(|(version, checksum, success)| Applied {
                version,
                checksum,
                success,
            })
            .collect())
    }

    /// Runs `sql` (one or more statements, no binds).
    async fn exec(&mut self, sql: &str, what: &str) -> Result<(), StoreError> {
        self.execute(Statement::simple(sql), what).await.map(drop)
    }

    /// Closes the connection (its locks go with it).
    async fn close(self) -> Result<(), StoreError> {
        use sqlx::Connection;
        let _ = self.conn.close().await;
        Ok(())
    }
}

/// `CREATE SCHEMA IF NOT EXISTS` for a PostgreSQL `--schema`.
pub(crate) fn create_schema_sql(schema: Option<&str>) -> Option<String> {
    schema.map(|s| format!("CREATE SCHEMA IF NOT EXISTS \"{s}\""))
}

/// Checks a PostgreSQL `--schema` name: lower-case letters, digits and `_`,
/// not starting with a digit, at most 63 characters (so it needs no quoting
/// in `search_path` and means the same quoted or not), and none of
/// PostgreSQL's own schemas (`information_schema`, `pg_*`), where seqd's
/// tables must never go.
pub fn check_schema_name(name: &str) -> Result<(), StoreError> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    if !(first_ok
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
    {
        return Err(StoreError::Config(format!(
            "invalid --schema {name:?}: lower-case letters, digits and _, not starting with a \
             digit, at most 63 characters"
        )));
    }
    if name == "information_schema" || name.starts_with("pg_") {
        return Err(StoreError::Config(format!(
            "invalid --schema {name:?}: a schema of PostgreSQL itself (information_schema, \
             pg_*) cannot hold seqd's tables"
        )));
    }
    Ok(())
}

/// A migration `m` of `sql`, for the tests.
#[cfg(test)]
fn migration(version: i64, sql: &'static str) -> Migration {
    use std::borrow::Cow;
    Migration::new(
        version,
        Cow::Borrowed("m"),
        sqlx::migrate::MigrationType::Simple,
        Cow::Borrowed(sql),
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_parser_of_url_schemes_names_each_backend() {
        for (url, dialect, driver_url) in [
            ("postgres://h/db", Dialect::Postgres, "postgres://h/db"),
            ("PostgreSQL://h/db", Dialect::Postgres, "PostgreSQL://h/db"),
            ("mysql://h/db", Dialect::Mysql, "mysql://h/db"),
            ("MariaDB://u:p@h/db", Dialect::Mysql, "mysql://u:p@h/db"),
            (
                "sqlite://seqd.db?mode=rwc",
                Dialect::Sqlite,
                "sqlite://seqd.db?mode=rwc",
            ),
            ("sqlite:seqd.db", Dialect::Sqlite, "sqlite:seqd.db"),
        ] {
            let (d, u) = Dialect::of_url(url).unwrap();
            assert_eq!((d, u.as_ref()), (dialect, driver_url), "{url}");
        }
        assert_eq!(Dialect::of_url("redis://h").unwrap_err(), "redis");
        assert_eq!(Dialect::of_url("no-scheme").unwrap_err(), "");
        let names: Vec<&str> = [Dialect::Postgres, Dialect::Mysql, Dialect::Sqlite]
            .into_iter()
            .map(Dialect::name)
            .collect();
        assert_eq!(names, Dialect::NAMES);
    }

    fn applied(m: &Migration, success: bool) -> Applied {
        Applied {
            version: m.version,
            checksum: m.checksum.to_vec(),
            success,
        }
    }

    #[test]
    fn pending_lists_the_missing_migrations_and_accepts_newer_versions() {
        let known = [migration(1, "a"), migration(2, "b")];
        let newer = Applied {
            version: 3,
            checksum: vec![1],
            success: true,
        };
        let got = pending(&known, &[applied(&known[0], true), newer]).unwrap();
        assert_eq!(got.iter().map(|m| m.version).collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn pending_refuses_a_changed_checksum_and_a_failed_migration() {
        let known = [migration(1, "a")];
        let other = migration(1, "changed");
        let err = pending(&known, &[applied(&other, true)]).unwrap_err();
        assert!(err.contains("another checksum"), "{err}");
        let err = pending(&known, &[applied(&known[0], false)]).unwrap_err();
        assert!(err.contains("failed half-way"), "{err}");
    }

    #[test]
    fn only_rows_with_seqds_version_and_checksum_are_seqds() {
        let known = [migration(1, "a"), migration(2, "b")];
        let app_one = applied(&migration(1, "the application's"), true);
        let ours = applied(&known[1], true);
        let got = seqds_rows(&known, vec![app_one, ours.clone()]);
        assert_eq!(got, [ours]);
    }

    #[test]
    fn placeholders_follow_the_dialect() {
        let sql = "WHERE version = $1 AND checksum = $2";
        assert_eq!(Dialect::Postgres.placeholders(sql), sql);
        assert_eq!(
            Dialect::Mysql.placeholders(sql),
            "WHERE version = ? AND checksum = ?"
        );
        assert_eq!(
            Dialect::Sqlite.placeholders(sql),
            "WHERE version = ?1 AND checksum = ?2"
        );
    }

    #[test]
    fn schema_sql_has_the_history_table_and_every_migration_with_its_row() {
        for dialect in [Dialect::Postgres, Dialect::Mysql, Dialect::Sqlite] {
            let sql = schema_sql(dialect);
            assert!(sql.contains("CREATE TABLE IF NOT EXISTS seqd_migrations"));
            let mut at = 0;
            for m in dialect.migrations() {
                let mark = format!("-- seqd migration {}: {}", m.version, m.description);
                let pos = sql[at..].find(&mark).expect("each migration, in order") + at;
                assert!(sql[pos..].contains(&format!("VALUES ({}, ", m.version)));
                at = pos;
            }
            assert!(sql.contains("CREATE TABLE sequences") && sql.contains("CREATE TABLE workers"));
        }
    }

    #[test]
    fn schema_names_need_no_quoting() {
        assert!(check_schema_name("seqd_a1").is_ok());
        for reserved in ["information_schema", "pg_catalog", "pg_toast", "pg_temp_1"] {
            assert!(check_schema_name(reserved).is_err(), "{reserved:?}");
        }
        for bad in ["", "1a", "Seqd", "a-b", "a\"b", &"a".repeat(64)] {
            assert!(check_schema_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn mode_and_dialect_parse_their_names() {
        for name in MigrateMode::NAMES {
            assert!(name.parse::<MigrateMode>().is_ok());
        }
        for name in Dialect::NAMES {
            assert!(name.parse::<Dialect>().is_ok());
        }
        assert!("sometimes".parse::<MigrateMode>().is_err());
        assert!("oracle".parse::<Dialect>().is_err());
    }
}
