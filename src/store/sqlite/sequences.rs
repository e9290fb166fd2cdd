//! [`Store`](crate::store::Store) on an embedded SQLite file.
//!
//! A segment is reserved by one `UPDATE ... RETURNING` statement (see
//! [`RESERVE`]; needs SQLite >= 3.35, sqlx bundles a newer one). SQLite
//! serialises writers on the whole database, so concurrent reservations from
//! this process or another one on the same file never overlap.
//!
//! The connection uses WAL journaling, `synchronous = FULL` (durable commits)
//! and a busy timeout from [`StoreOptions::lock_timeout`]. The file is created only if the URL says so (`?mode=rwc`, as in
//! the default `sqlite://seqd.db?mode=rwc`). `CURRENT_TIMESTAMP` is UTC text.

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};

use super::SqliteWorkerLeases;
use crate::domain::period_rows_range;
use crate::domain::{NamePrefix, NewSequence, SeqName};
use crate::store::database::{open_pool, Backend};
use crate::store::migrator::{Dialect, MigrateMode, Migrator, PoolRef};
use crate::store::pool::Held;
use crate::store::sql::ReserveOnce;
use crate::store::stripes::record::{self, StripeRecord};
use crate::store::{
    binary_page_sql, check_period_key, counter_names, fetch_page, initial_max_id, insert_failed,
    period_row, read_serial_flag, refused, reservation, serial_values, unavailable, PeriodRow,
    Reservation, SequencePage, SequencePatch, SequenceRow, StoreError, StoreOptions, COLUMNS,
    NOT_COUNTER,
};
use crate::store::{
    execute_bump, fetch_bump_rows, run_bump, schema_ready, BumpMode, BumpSql, Bumped,
};
use crate::store::{fetch_named, named_rows_sql};
use crate::store::{Catalog, Schema, StripeRecords};

/// Reserves `MAX(step, ?2)` IDs of the row named `?1` unless that would pass
/// `i64::MAX`, and returns the new `max_id`, the amount added and the row's
/// step. `step` is not modified by the statement, so the returned size is
/// exactly what this statement added. (`MAX` with two arguments is SQLite's
/// scalar maximum, its `GREATEST`.)
pub const RESERVE: &str = "UPDATE sequences \
     SET max_id = max_id + MAX(step, ?2), updated_at = CURRENT_TIMESTAMP \
     WHERE name = ?1 AND format IS NULL AND max_id <= 9223372036854775807 - MAX(step, ?2) \
     RETURNING max_id, MAX(step, ?2) AS size, step, ordering";

/// Reserves exactly `?2` IDs of the row named `?1` (a global sequence's
/// merged requests, a serial period's counter) unless that would pass `?3`
/// (`i64::MAX`, or the capacity of `{seq:0N}`); returns as [`RESERVE`].
/// `?3 - ?2` cannot overflow: `?3 <= i64::MAX` and `?2 >= 1`.
pub const RESERVE_EXACT: &str = "UPDATE sequences \
     SET max_id = max_id + ?2, updated_at = CURRENT_TIMESTAMP \
     WHERE name = ?1 AND format IS NULL AND max_id <= ?3 - ?2 \
     RETURNING max_id, ?2 AS size, step, ordering";

/// Reads `name, max_id` for a bump; `names_in` appends the names and their
/// counters' ranges, if any.
/// The bump's transaction is `BEGIN IMMEDIATE`, which holds the database's
/// write lock from the start, so the rows read cannot change before the update.
pub const BUMP_READ: &str = "SELECT name, max_id FROM sequences";

/// Adds `?` to `max_id`, sparing rows that would pass `i64::MAX`; `names_in`
/// appends the names and their counters' ranges, if any. Binds: by, by,
/// then `bump_binds`.
pub const BUMP: &str = "UPDATE sequences \
     SET max_id = max_id + ?, updated_at = CURRENT_TIMESTAMP \
     WHERE max_id <= 9223372036854775807 - ?";

/// Sets `max_id` to the first bind where the name (second) and `max_id`
/// (third) match: a compare-and-set, for [`Segments::compare_and_set_max_id`](crate::store::Segments::compare_and_set_max_id).
pub const SET_MAX_ID_IF: &str = "UPDATE sequences \
     SET max_id = ?1, updated_at = CURRENT_TIMESTAMP WHERE name = ?2 AND max_id = ?3";

/// Reads `max_id` of one row.
pub const READ_MAX_ID: &str = "SELECT max_id FROM sequences WHERE name = ?1";

/// After a reserving statement that updated nothing: 1 when the row issues
/// serial numbers, 0 when it is plain (and full); no row when it is missing.
pub const READ_SERIAL_FLAG: &str =
    "SELECT CASE WHEN format IS NULL THEN 0 ELSE 1 END FROM sequences WHERE name = ?1";

/// Creates the counter row `?2` of a period of the sequence `?1` from its
/// row (`max_id = counter_start - 1`, its step and ordering), unless it
/// exists: any number of connections may run it at once, one inserts. (The
/// `WHERE` also keeps SQLite from reading `ON CONFLICT` as a join.)
pub const CREATE_PERIOD: &str = "INSERT INTO sequences \
     (name, max_id, step, description, ordering, counter_start) \
     SELECT ?2, counter_start - 1, step, '', ordering, counter_start FROM sequences WHERE name = ?1 \
     ON CONFLICT (name) DO NOTHING";

/// The counter rows in the name range `[?1, ?2)`, in name order.
pub const LIST_PERIODS: &str = "SELECT name, max_id, created_at, updated_at FROM sequences \
     WHERE name >= ?1 AND name < ?2 ORDER BY name";

/// Gives the counter rows in the name range `[?3, ?4)` the step `?1` and the
/// ordering `?2` (each `NULL`: unchanged) of their sequence.
pub const UPDATE_PERIODS: &str = "UPDATE sequences \
     SET step = COALESCE(?1, step), ordering = COALESCE(?2, ordering), updated_at = CURRENT_TIMESTAMP \
     WHERE name >= ?3 AND name < ?4";

use crate::store::{naive_found_row as to_found_row, naive_row as to_row, NaiveRow as Row};

/// A [`Store`](crate::store::Store) on a SQLite database file.
///
/// Statements with `RETURNING` are read with `fetch_all`: SQLite commits an
/// autocommit statement only when it is stepped to completion, and sqlx's
/// `fetch_optional` stops after the first row and ignores an error of the
/// final reset, so a failed commit could go unnoticed and the same range be
/// handed out twice. Stepping to the end reports it.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Opens `url` (`sqlite://path?mode=rwc`, `sqlite:path`, `sqlite::memory:`)
    /// with the default [`StoreOptions`]. URL parameters are honoured; the
    /// file is created only with `mode=rwc`. Does not run the migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, &StoreOptions::default()).await
    }

    /// Opens `url` with `options`: at most 4 connections plus one for the
    /// worker leases (SQLite has one writer at a time), `busy_timeout` from
    /// the lock bound, WAL journaling and `synchronous = FULL` (every commit
    /// is on disk before it returns).
    pub async fn connect_with(url: &str, options: &StoreOptions) -> Result<Self, StoreError> {
        Ok(Self::from_pool(open_pool::<Self>(url, options).await?))
    }

    /// Wraps an existing pool.
    pub fn from_pool(pool: SqlitePool) -> Self {
        SqliteStore { pool }
    }

    /// The underlying pool.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Runs a reserving statement ([`RESERVE`], or [`RESERVE_EXACT`] with
    /// its cap) once; `None` if no row was updated.
    async fn run_reserve(
        &self,
        sql: &str,
        name: &SeqName,
        size: i64,
        cap: Option<i64>,
    ) -> Result<Option<Reservation>, StoreError> {
        // `fetch_all`, not `fetch_optional`: see [`SqliteStore`] on RETURNING.
        let mut held = Held::acquire(&self.pool).await?;
        let query = sqlx::query_as::<_, (i64, i64, i64, String)>(sql)
            .bind(name.as_str())
            .bind(size);
        let rows = match cap {
            Some(cap) => query.bind(cap),
            None => query,
        }
        .fetch_all(held.conn())
        .await;
        held.finish(rows)?
            .into_iter()
            .next()
            .map(|(max_id, size, step, ordering)| reservation(max_id, size, step, &ordering))
            .transpose()
    }
}

/// How SqliteStore's pool connects, and the worker leases over it, for
/// [`crate::store::connect`].
impl Backend for SqliteStore {
    type Db = sqlx::Sqlite;
    type Leases = SqliteWorkerLeases;

    fn connect_options(
        url: &str,
        options: &StoreOptions,
    ) -> Result<SqliteConnectOptions, StoreError> {
        super::connect_options(url, options)
    }

    fn pool_options(url: &str, options: &StoreOptions) -> SqlitePoolOptions {
        super::pool_options(url, options)
    }

    fn over_pool(pool: SqlitePool, _: &StoreOptions) -> Self {
        Self::from_pool(pool)
    }

    fn leases(pool: SqlitePool, options: &StoreOptions) -> SqliteWorkerLeases {
        SqliteWorkerLeases::over(pool, options)
    }
}

#[async_trait]
impl ReserveOnce for SqliteStore {
    async fn reserve_once(
        &self,
        name: &SeqName,
        min_size: i64,
    ) -> Result<Option<Reservation>, StoreError> {
        self.run_reserve(RESERVE, name, min_size, None).await
    }

    async fn reserve_within_once(
        &self,
        name: &SeqName,
        n: i64,
        cap: i64,
    ) -> Result<Option<Reservation>, StoreError> {
        self.run_reserve(RESERVE_EXACT, name, n, Some(cap)).await
    }

    async fn refusal(&self, name: &SeqName) -> Result<StoreError, StoreError> {
        Ok(refused(
            read_serial_flag(&self.pool, READ_SERIAL_FLAG, name).await?,
        ))
    }
}

crate::store::sql::sql_segments!(SqliteStore, sqlx::sqlite::SqliteQueryResult);

#[async_trait]
impl Catalog for SqliteStore {
    async fn create(&self, seq: &NewSequence) -> Result<SequenceRow, StoreError> {
        let sql = format!(
            "INSERT INTO sequences (name, max_id, step, description, ordering, counter_start, \
             format, reset, time_zone, overflow) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) RETURNING {COLUMNS}"
        );
        let (format, reset, time_zone, overflow) = serial_values(seq.serial.as_ref());
        let rows: Vec<Row> = sqlx::query_as(&sql)
            .bind(seq.name.as_str())
            .bind(initial_max_id(seq)?)
            .bind(seq.step)
            .bind(&seq.description)
            .bind(seq.ordering.as_str())
            .bind(seq.start)
            .bind(format.as_deref())
            .bind(reset)
            .bind(&time_zone)
            .bind(overflow)
            .fetch_all(&self.pool)
            .await
            .map_err(insert_failed)?;
        first_returned(rows)?
            .ok_or_else(|| StoreError::Unavailable("INSERT returned no row".into()))
    }

    async fn get(&self, name: &SeqName) -> Result<Option<SequenceRow>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM sequences WHERE name = ?1");
        let row: Option<Row> = sqlx::query_as(&sql)
            .bind(name.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?;
        row.map(to_found_row).transpose()
    }

    async fn settings_of(&self, names: &[SeqName]) -> Result<Vec<SequenceRow>, StoreError> {
        fetch_named(&self.pool, named_rows_sql, names, to_row).await
    }

    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        // SQLite's default BINARY collation: byte order.
        let sql = format!("SELECT {COLUMNS} FROM sequences WHERE {NOT_COUNTER} ORDER BY name");
        let rows: Vec<Row> = sqlx::query_as(&sql)
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(rows.into_iter().filter_map(to_row).collect())
    }

    async fn list_page(
        &self,
        prefix: Option<&NamePrefix>,
        after: Option<&SeqName>,
        limit: u32,
    ) -> Result<SequencePage, StoreError> {
        fetch_page(&self.pool, binary_page_sql, prefix, after, limit, to_row).await
    }

    async fn update(
        &self,
        name: &SeqName,
        patch: &SequencePatch,
    ) -> Result<SequenceRow, StoreError> {
        let sql = format!(
            "UPDATE sequences SET step = COALESCE(?2, step), description = COALESCE(?3, description), \
             ordering = COALESCE(?4, ordering), format = CASE WHEN ?5 THEN ?6 ELSE format END, \
             reset = CASE WHEN ?5 THEN ?7 ELSE reset END, time_zone = CASE WHEN ?5 THEN ?8 ELSE time_zone END, \
             overflow = CASE WHEN ?5 THEN ?9 ELSE overflow END, \
             updated_at = CURRENT_TIMESTAMP WHERE name = ?1 RETURNING {COLUMNS}"
        );
        let (format, reset, time_zone, overflow) =
            serial_values(patch.serial.as_ref().and_then(Option::as_ref));
        let (low, high) = period_rows_range(name);
        // The first statement writes, so the transaction takes the write
        // lock at once (no read lock to upgrade).
        let rows: Vec<Row> = async {
            let mut tx = self.pool.begin().await?;
            let rows: Vec<Row> = sqlx::query_as(&sql)
                .bind(name.as_str())
                .bind(patch.step)
                .bind(patch.description.as_deref())
                .bind(patch.ordering.map(|o| o.as_str()))
                .bind(patch.serial.is_some())
                .bind(format.as_deref())
                .bind(reset)
                .bind(&time_zone)
                .bind(overflow)
                .fetch_all(&mut *tx)
                .await?;
            if patch.step.is_some() || patch.ordering.is_some() {
                sqlx::query(UPDATE_PERIODS)
                    .bind(patch.step)
                    .bind(patch.ordering.map(|o| o.as_str()))
                    .bind(&low)
                    .bind(&high)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok::<_, sqlx::Error>(rows)
        }
        .await
        .map_err(unavailable)?;
        first_returned(rows)?.ok_or(StoreError::NotFound)
    }

    async fn create_period(&self, parent: &SeqName, key: &str) -> Result<bool, StoreError> {
        check_period_key(key)?;
        let counter = parent.period_counter(key);
        let done = sqlx::query(CREATE_PERIOD)
            .bind(parent.as_str())
            .bind(counter.as_str())
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
        if done.rows_affected() == 1 {
            return Ok(true);
        }
        match read_serial_flag(&self.pool, READ_SERIAL_FLAG, parent).await? {
            Some(_) => Ok(false),
            None => Err(StoreError::NotFound),
        }
    }

    async fn list_periods(&self, parent: &SeqName) -> Result<Vec<PeriodRow>, StoreError> {
        let (low, high) = period_rows_range(parent);
        let rows: Vec<(String, i64, chrono::NaiveDateTime, chrono::NaiveDateTime)> =
            sqlx::query_as(LIST_PERIODS)
                .bind(&low)
                .bind(&high)
                .fetch_all(&self.pool)
                .await
                .map_err(unavailable)?;
        Ok(rows
            .into_iter()
            .map(|(name, max_id, created_at, updated_at)| {
                period_row(
                    &low,
                    &name,
                    max_id,
                    created_at.and_utc(),
                    updated_at.and_utc(),
                )
            })
            .collect())
    }

    async fn delete_periods(&self, parent: &SeqName, keys: &[String]) -> Result<u64, StoreError> {
        let names = counter_names(parent, keys)?;
        async {
            let mut tx = self.pool.begin().await?;
            let mut deleted = 0;
            for name in &names {
                deleted += sqlx::query("DELETE FROM sequences WHERE name = ?1")
                    .bind(name)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            }
            tx.commit().await?;
            Ok::<_, sqlx::Error>(deleted)
        }
        .await
        .map_err(unavailable)
    }

    async fn bump(
        &self,
        names: Option<&[SeqName]>,
        by: i64,
        mode: BumpMode,
    ) -> Result<Vec<Bumped>, StoreError> {
        run_bump::<Self>(&self.pool, names, by, mode).await
    }
}

#[async_trait]
impl Schema for SqliteStore {
    async fn migrate(&self) -> Result<(), StoreError> {
        Migrator::prepare(PoolRef::Sqlite(&self.pool), MigrateMode::Auto, None).await
    }

    async fn check_schema(&self) -> Result<(), StoreError> {
        Migrator::prepare(PoolRef::Sqlite(&self.pool), MigrateMode::Check, None).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        schema_ready(&self.pool, Dialect::Sqlite, self.check_schema()).await
    }

    fn backend(&self) -> &'static str {
        Dialect::Sqlite.name()
    }
}

#[async_trait]
impl StripeRecords for SqliteStore {
    async fn stripe_record(&self) -> Result<Option<StripeRecord>, StoreError> {
        record::read_record(&self.pool, Dialect::Sqlite).await
    }

    async fn put_stripe_record(
        &self,
        record: &StripeRecord,
        replace: bool,
    ) -> Result<StripeRecord, StoreError> {
        record::put_record(&self.pool, Dialect::Sqlite, record, replace).await
    }
}

/// The first row a `RETURNING` statement read (with `fetch_all`: see
/// [`SqliteStore`]), converted; `None` if it returned none.
fn first_returned(rows: Vec<Row>) -> Result<Option<SequenceRow>, StoreError> {
    rows.into_iter().next().map(to_found_row).transpose()
}

#[async_trait]
impl BumpSql for SqliteStore {
    type Db = sqlx::Sqlite;
    const BEGIN: &'static str = "BEGIN IMMEDIATE";

    async fn read_bump(
        conn: &mut sqlx::SqliteConnection,
        names: Option<&[SeqName]>,
        _lock: bool,
    ) -> Result<Vec<(String, i64)>, sqlx::Error> {
        // No row locks in SQLite: the bump's `BEGIN IMMEDIATE` already holds
        // the database's write lock, a plan's read needs none.
        fetch_bump_rows::<Self::Db, _>(conn, Dialect::Sqlite, BUMP_READ, "", names).await
    }

    async fn add_bump(
        conn: &mut sqlx::SqliteConnection,
        names: Option<&[SeqName]>,
        by: i64,
    ) -> Result<u64, sqlx::Error> {
        let done = execute_bump::<Self::Db>(conn, Dialect::Sqlite, BUMP, names, by).await?;
        Ok(done.rows_affected())
    }
}

crate::store::tokens::sql_tokens!(SqliteStore, sqlx::Sqlite);
