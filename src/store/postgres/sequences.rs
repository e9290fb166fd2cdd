//! [`Store`] on PostgreSQL.
//!
//! A segment is reserved by one `UPDATE ... RETURNING` statement (see
//! [`RESERVE`]); the row lock PostgreSQL takes for the update serialises
//! concurrent reservations from any number of instances.
//!
//! `created_at`/`updated_at` are `TIMESTAMP` (without time zone). sqlx opens
//! every session with `TimeZone=UTC`, so `CURRENT_TIMESTAMP` is stored as UTC
//! and read back as a naive UTC time.
//!
//! The schema of seqd's tables and history is [`StoreOptions::schema`]
//! (`--schema`), set as `search_path` on every connection and created by the
//! migrator if missing. The URL may select one too, with libpq's `options`
//! parameter, e.g. `postgres://host/db?options=-csearch_path%3Dmy_schema`.

use async_trait::async_trait;
use sqlx::pool::PoolOptions;
use sqlx::postgres::{PgConnectOptions, PgPool};

use super::{prepare, PgWorkerLeases};
use crate::domain::{NamePrefix, NewSequence, SeqName};
use crate::store::database::{open_pool, Backend};
use crate::store::migrator::{Dialect, MigrateMode};
use crate::store::pool::Held;
use crate::store::retry::retrying;
use crate::store::stripes::record::{self, StripeRecord};
use crate::store::{
    compare_and_set, fetch_page, initial_max_id, insert_failed, reservation, unavailable,
    Reservation, SequencePage, SequencePatch, SequenceRow, Store, StoreError, StoreOptions,
};
use crate::store::{run_bump, BumpMode, BumpSql, Bumped};

/// Reserves `GREATEST(step, $2)` IDs of the row named `$1` unless that would
/// pass `i64::MAX`, and returns the new `max_id`, the amount added and the
/// row's step. `step` is not modified by the statement, so the returned size is
/// exactly what this statement added.
pub const RESERVE: &str = "UPDATE sequences \
     SET max_id = max_id + GREATEST(step, $2), updated_at = CURRENT_TIMESTAMP \
     WHERE name = $1 AND max_id <= 9223372036854775807 - GREATEST(step, $2) \
     RETURNING max_id, GREATEST(step, $2) AS size, step, ordering";

/// Reserves exactly `$2` IDs of the row named `$1` (a global sequence's
/// merged requests) unless that would pass `i64::MAX`; returns as [`RESERVE`].
pub const RESERVE_EXACT: &str = "UPDATE sequences \
     SET max_id = max_id + $2, updated_at = CURRENT_TIMESTAMP \
     WHERE name = $1 AND max_id <= 9223372036854775807 - $2 \
     RETURNING max_id, $2 AS size, step, ordering";

/// Reads `name, max_id` of the rows named in the text array `$1`, for a bump.
pub const BUMP_READ_NAMED: &str = "SELECT name, max_id FROM sequences WHERE name = ANY($1)";

/// Reads `name, max_id` of every row, for a bump of all sequences.
pub const BUMP_READ_ALL: &str = "SELECT name, max_id FROM sequences";

/// Appended to a bump's read inside its transaction: locks the rows until
/// commit, taking the locks in name order.
pub const BUMP_LOCK: &str = " ORDER BY name COLLATE \"C\" FOR UPDATE";

/// Adds `$2` to `max_id` of the rows named in the text array `$1`, sparing
/// any that would pass `i64::MAX` (the caller checks the count).
pub const BUMP_NAMED: &str = "UPDATE sequences \
     SET max_id = max_id + $2, updated_at = CURRENT_TIMESTAMP \
     WHERE name = ANY($1) AND max_id <= 9223372036854775807 - $2";

/// Adds `$1` to `max_id` of every row, sparing any that would pass `i64::MAX`.
pub const BUMP_ALL: &str = "UPDATE sequences \
     SET max_id = max_id + $1, updated_at = CURRENT_TIMESTAMP \
     WHERE max_id <= 9223372036854775807 - $1";

/// Sets `max_id` to the first bind where the name (second) and `max_id`
/// (third) match: a compare-and-set, for [`Store::compare_and_set_max_id`].
pub const SET_MAX_ID_IF: &str = "UPDATE sequences \
     SET max_id = $1, updated_at = CURRENT_TIMESTAMP WHERE name = $2 AND max_id = $3";

/// Reads `max_id` of one row.
pub const READ_MAX_ID: &str = "SELECT max_id FROM sequences WHERE name = $1";

/// The columns of a [`SequenceRow`], in the order [`Row`] expects.
const COLUMNS: &str = "name, max_id, step, description, created_at, updated_at, ordering";

/// One page of rows: names compared with `lower_op` (`>` or `>=`) to `$1`
/// and below `$2`, at most `$3` rows, in byte order. Every comparison and
/// the order are on `name COLLATE "C"` (byte order, as on SQLite and MySQL,
/// whatever the database's collation), which the index of migration 0003
/// (`sequences_name_bytes`) serves: the primary key's index, in the
/// database's collation, cannot, and each page would sort the whole table.
pub fn page_sql(lower_op: &str) -> String {
    format!(
        "SELECT {COLUMNS} FROM sequences \
         WHERE name COLLATE \"C\" {lower_op} $1 AND name COLLATE \"C\" < $2 \
         ORDER BY name COLLATE \"C\" LIMIT $3"
    )
}

use crate::store::{naive_found_row as to_found_row, naive_row as to_row, NaiveRow as Row};

/// A [`Store`] on a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// `--schema`, created by [`Store::migrate`] if missing.
    schema: Option<String>,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://` or `postgresql://`) with the default
    /// [`StoreOptions`]. Fails if the database cannot be reached. Does not run
    /// the migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, &StoreOptions::default()).await
    }

    /// Connects to `url` with `options`: every session gets `lock_timeout`
    /// and `statement_timeout` from them (see [`crate::store::pool`]).
    pub async fn connect_with(url: &str, options: &StoreOptions) -> Result<Self, StoreError> {
        Ok(Self::over(open_pool::<Self>(url, options).await?, options))
    }

    /// The store over `pool`, opened with `options` (whose `--schema`
    /// [`Store::migrate`] creates if missing).
    pub(crate) fn over(pool: PgPool, options: &StoreOptions) -> Self {
        PostgresStore {
            pool,
            schema: options.schema.clone(),
        }
    }

    /// Wraps an existing pool (its `search_path` as it is).
    pub fn from_pool(pool: PgPool) -> Self {
        PostgresStore { pool, schema: None }
    }

    /// The underlying pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Runs [`RESERVE`] once; `None` if no row was updated (missing or full).
    async fn try_reserve(
        &self,
        name: &SeqName,
        min_size: i64,
    ) -> Result<Option<Reservation>, StoreError> {
        self.run_reserve(RESERVE, name, min_size).await
    }

    /// Runs a reserving statement ([`RESERVE`] or [`RESERVE_EXACT`]) once;
    /// `None` if no row was updated.
    async fn run_reserve(
        &self,
        sql: &str,
        name: &SeqName,
        size: i64,
    ) -> Result<Option<Reservation>, StoreError> {
        let mut held = Held::acquire(&self.pool).await?;
        let row = retrying!(
            "postgres",
            sqlx::query_as::<_, (i64, i64, i64, String)>(sql)
                .bind(name.as_str())
                .bind(size)
                .fetch_optional(held.conn())
                .await
        );
        held.finish(row)?
            .map(|(max_id, size, step, ordering)| reservation(max_id, size, step, &ordering))
            .transpose()
    }

    /// Whether a row named `name` exists.
    async fn exists(&self, name: &SeqName) -> Result<bool, StoreError> {
        let mut held = Held::acquire(&self.pool).await?;
        let row = retrying!(
            "postgres",
            sqlx::query_as::<_, (i32,)>("SELECT 1 FROM sequences WHERE name = $1")
                .bind(name.as_str())
                .fetch_optional(held.conn())
                .await
        );
        Ok(held.finish(row)?.is_some())
    }
}

/// How PostgresStore's pool connects, and the worker leases over it, for
/// [`crate::store::connect`].
impl Backend for PostgresStore {
    type Db = sqlx::Postgres;
    type Leases = PgWorkerLeases;

    fn connect_options(url: &str, options: &StoreOptions) -> Result<PgConnectOptions, StoreError> {
        super::connect_options(url, options)
    }

    fn pool_options(_url: &str, options: &StoreOptions) -> PoolOptions<sqlx::Postgres> {
        options.pool()
    }

    fn over_pool(pool: PgPool, options: &StoreOptions) -> Self {
        Self::over(pool, options)
    }

    fn leases(pool: PgPool, options: &StoreOptions) -> PgWorkerLeases {
        PgWorkerLeases::over(pool, options)
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn reserve(&self, name: &SeqName, min_size: i64) -> Result<Reservation, StoreError> {
        if let Some(r) = self.try_reserve(name, min_size).await? {
            return Ok(r);
        }
        // Near i64::MAX a large request may not fit while the row's own step does.
        if min_size > 1 {
            if let Some(r) = self.try_reserve(name, 1).await? {
                return Ok(r);
            }
        }
        if self.exists(name).await? {
            Err(StoreError::Exhausted)
        } else {
            Err(StoreError::NotFound)
        }
    }

    async fn reserve_exact(&self, name: &SeqName, n: i64) -> Result<Reservation, StoreError> {
        match self.run_reserve(RESERVE_EXACT, name, n).await? {
            Some(r) => Ok(r),
            None if self.exists(name).await? => Err(StoreError::Exhausted),
            None => Err(StoreError::NotFound),
        }
    }

    async fn compare_and_set_max_id(
        &self,
        name: &SeqName,
        expected: i64,
        new: i64,
    ) -> Result<bool, StoreError> {
        compare_and_set(
            &self.pool,
            SET_MAX_ID_IF,
            READ_MAX_ID,
            sqlx::postgres::PgQueryResult::rows_affected,
            name,
            expected,
            new,
        )
        .await
    }

    async fn create(&self, seq: &NewSequence) -> Result<SequenceRow, StoreError> {
        let sql = format!(
            "INSERT INTO sequences (name, max_id, step, description, ordering) VALUES ($1, $2, $3, $4, $5) RETURNING {COLUMNS}"
        );
        let max_id = initial_max_id(seq)?;
        let row: Row = retrying!(
            "postgres",
            sqlx::query_as(&sql)
                .bind(seq.name.as_str())
                .bind(max_id)
                .bind(seq.step)
                .bind(&seq.description)
                .bind(seq.ordering.as_str())
                .fetch_one(&self.pool)
                .await
        )
        .map_err(insert_failed)?;
        to_found_row(row)
    }

    async fn get(&self, name: &SeqName) -> Result<Option<SequenceRow>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM sequences WHERE name = $1");
        let row: Option<Row> = retrying!(
            "postgres",
            sqlx::query_as(&sql)
                .bind(name.as_str())
                .fetch_optional(&self.pool)
                .await
        )
        .map_err(unavailable)?;
        row.map(to_found_row).transpose()
    }

    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        // COLLATE "C": byte order, as on SQLite and MySQL (utf8mb4_bin), whatever
        // the database's collation.
        let sql = format!("SELECT {COLUMNS} FROM sequences ORDER BY name COLLATE \"C\"");
        let rows: Vec<Row> =
            retrying!("postgres", sqlx::query_as(&sql).fetch_all(&self.pool).await)
                .map_err(unavailable)?;
        Ok(rows.into_iter().filter_map(to_row).collect())
    }

    async fn list_page(
        &self,
        prefix: Option<&NamePrefix>,
        after: Option<&SeqName>,
        limit: u32,
    ) -> Result<SequencePage, StoreError> {
        fetch_page(&self.pool, page_sql, prefix, after, limit, to_row).await
    }

    async fn update(
        &self,
        name: &SeqName,
        patch: &SequencePatch,
    ) -> Result<SequenceRow, StoreError> {
        let sql = format!(
            "UPDATE sequences SET step = COALESCE($2, step), description = COALESCE($3, description), \
             ordering = COALESCE($4, ordering), updated_at = CURRENT_TIMESTAMP WHERE name = $1 RETURNING {COLUMNS}"
        );
        let row: Option<Row> = retrying!(
            "postgres",
            sqlx::query_as(&sql)
                .bind(name.as_str())
                .bind(patch.step)
                .bind(patch.description.as_deref())
                .bind(patch.ordering.map(|o| o.as_str()))
                .fetch_optional(&self.pool)
                .await
        )
        .map_err(unavailable)?;
        row.map(to_found_row)
            .transpose()?
            .ok_or(StoreError::NotFound)
    }

    async fn bump(
        &self,
        names: Option<&[SeqName]>,
        by: i64,
        mode: BumpMode,
    ) -> Result<Vec<Bumped>, StoreError> {
        run_bump::<Self>(&self.pool, names, by, mode).await
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        prepare(&self.pool, MigrateMode::Auto, self.schema.as_deref()).await
    }

    async fn check_schema(&self) -> Result<(), StoreError> {
        prepare(&self.pool, MigrateMode::Check, None).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        retrying!(
            "postgres",
            sqlx::query("SELECT 1 FROM sequences LIMIT 1")
                .fetch_optional(&self.pool)
                .await
        )
        .map(|_| ())
        .map_err(unavailable)
    }

    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn stripe_record(&self) -> Result<Option<StripeRecord>, StoreError> {
        record::read_record(&self.pool, Dialect::Postgres).await
    }

    async fn put_stripe_record(
        &self,
        record: &StripeRecord,
        replace: bool,
    ) -> Result<StripeRecord, StoreError> {
        record::put_record(&self.pool, Dialect::Postgres, record, replace).await
    }
}

/// The names as the text array that `name = ANY($1)` binds.
fn name_array(names: &[SeqName]) -> Vec<&str> {
    names.iter().map(SeqName::as_str).collect()
}

#[async_trait]
impl BumpSql for PostgresStore {
    type Db = sqlx::Postgres;

    async fn read_bump(
        conn: &mut sqlx::PgConnection,
        names: Option<&[SeqName]>,
        lock: bool,
    ) -> Result<Vec<(String, i64)>, sqlx::Error> {
        let read = if names.is_some() {
            BUMP_READ_NAMED
        } else {
            BUMP_READ_ALL
        };
        let sql = if lock {
            format!("{read}{BUMP_LOCK}")
        } else {
            read.to_string()
        };
        let mut query = sqlx::query_as(&sql);
        if let Some(names) = names {
            query = query.bind(name_array(names));
        }
        query.fetch_all(conn).await
    }

    async fn add_bump(
        conn: &mut sqlx::PgConnection,
        names: Option<&[SeqName]>,
        by: i64,
    ) -> Result<u64, sqlx::Error> {
        let query = match names {
            Some(names) => sqlx::query(BUMP_NAMED).bind(name_array(names)).bind(by),
            None => sqlx::query(BUMP_ALL).bind(by),
        };
        let done = query.execute(conn).await?;
        Ok(done.rows_affected())
    }
}
