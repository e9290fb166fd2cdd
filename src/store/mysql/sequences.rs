//! [`Store`] on MySQL / MariaDB.
//!
//! MariaDB 10.11 has no `UPDATE ... RETURNING`, so a segment is reserved in
//! one transaction: the guarded [`RESERVE_UPDATE`] (which takes the InnoDB
//! row lock and keeps it until commit), then [`RESERVE_SELECT`] on the same
//! transaction (which sees this transaction's own update, and nobody else's
//! since the row is locked), then `COMMIT`. No other instance can change the
//! row in between, so the range read back is exactly the one this update added.
//!
//! `name` has a binary collation (see the migration), so names are
//! case-sensitive. `created_at`/`updated_at` are `TIMESTAMP`, stored as UTC
//! and converted to the session time zone, which sqlx sets to `+00:00`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlPool, MySqlPoolOptions};
use sqlx::Connection;

use super::MySqlWorkerLeases;
use crate::domain::{NamePrefix, NewSequence, SeqName};
use crate::store::database::{open_pool, Backend};
use crate::store::migrator::{Dialect, MigrateMode, Migrator, PoolRef};
use crate::store::pool::Held;
use crate::store::retry::retrying;
use crate::store::stripes::record::{self, StripeRecord};
use crate::store::{
    binary_page_sql, compare_and_set, fetch_page, initial_max_id, insert_failed, reservation,
    row_from_columns, unavailable, Reservation, SequencePage, SequencePatch, SequenceRow, Store,
    StoreError, StoreOptions,
};
use crate::store::{execute_bump, fetch_bump_rows, run_bump, BumpMode, BumpSql, Bumped};

/// First statement of a reservation: adds `GREATEST(step, ?)` to the row named
/// `?` unless that would pass `i64::MAX`. Binds: min_size, name, min_size.
pub const RESERVE_UPDATE: &str = "UPDATE sequences \
     SET max_id = max_id + GREATEST(step, ?), updated_at = CURRENT_TIMESTAMP \
     WHERE name = ? AND max_id <= 9223372036854775807 - GREATEST(step, ?)";

/// Second statement of a reservation, on the same transaction: reads back the
/// new `max_id`, the amount the update added (`step` is unchanged and locked)
/// and the row's step. Binds: min_size, name.
pub const RESERVE_SELECT: &str =
    "SELECT max_id, GREATEST(step, ?) AS size, step, ordering FROM sequences WHERE name = ?";

/// [`RESERVE_UPDATE`] of exactly `?` IDs (a global sequence's merged
/// requests). Binds: n, name, n.
pub const RESERVE_EXACT_UPDATE: &str = "UPDATE sequences \
     SET max_id = max_id + ?, updated_at = CURRENT_TIMESTAMP \
     WHERE name = ? AND max_id <= 9223372036854775807 - ?";

/// [`RESERVE_SELECT`] after [`RESERVE_EXACT_UPDATE`]. Binds: n, name.
pub const RESERVE_EXACT_SELECT: &str =
    "SELECT max_id, CAST(? AS SIGNED) AS size, step, ordering FROM sequences WHERE name = ?";

/// Reads `name, max_id` for a bump; `names_in` appends the names, if any.
pub const BUMP_READ: &str = "SELECT name, max_id FROM sequences";

/// Appended to a bump's read inside its transaction: locks the rows (and,
/// for all rows, the gaps between them) until commit.
pub const BUMP_LOCK: &str = " FOR UPDATE";

/// Adds `?` to `max_id`, sparing rows that would pass `i64::MAX`; [`names_in`]
/// appends the names, if any. Binds: by, by, names...
pub const BUMP: &str = "UPDATE sequences \
     SET max_id = max_id + ?, updated_at = CURRENT_TIMESTAMP \
     WHERE max_id <= 9223372036854775807 - ?";

/// Sets `max_id` to the first bind where the name (second) and `max_id`
/// (third) match: a compare-and-set, for [`Store::compare_and_set_max_id`].
pub const SET_MAX_ID_IF: &str = "UPDATE sequences \
     SET max_id = ?, updated_at = CURRENT_TIMESTAMP WHERE name = ? AND max_id = ?";

/// Reads `max_id` of one row.
pub const READ_MAX_ID: &str = "SELECT max_id FROM sequences WHERE name = ?";

/// The columns of a [`SequenceRow`], in the order [`Row`] expects.
const COLUMNS: &str = "name, max_id, step, description, created_at, updated_at, ordering";

/// One row as MySQL returns it. `name` comes as bytes: sqlx reports a column
/// with a binary collation (`utf8mb4_bin`) as `VARBINARY` and refuses to
/// decode it as a `String`.
type Row = (
    Vec<u8>,
    i64,
    i64,
    String,
    DateTime<Utc>,
    DateTime<Utc>,
    String,
);

/// Converts a fetched row (`None` for an invalid stored name).
fn to_row(
    (name, max_id, step, description, created_at, updated_at, ordering): Row,
) -> Option<SequenceRow> {
    // Invalid UTF-8 gets replacement characters, which no valid name contains.
    let name = String::from_utf8(name)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    row_from_columns(
        name,
        max_id,
        step,
        description,
        created_at,
        updated_at,
        &ordering,
    )
}

/// Like [`to_row`] for a row looked up by a valid name, which must convert.
fn to_found_row(row: Row) -> Result<SequenceRow, StoreError> {
    to_row(row).ok_or_else(|| StoreError::Unavailable("row with an invalid name returned".into()))
}

/// A [`Store`] on a MySQL or MariaDB database.
#[derive(Debug, Clone)]
pub struct MySqlStore {
    pool: MySqlPool,
}

impl MySqlStore {
    /// Connects to `url` (`mysql://`) with the default [`StoreOptions`].
    /// Fails if the database cannot be reached. Does not run the migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, &StoreOptions::default()).await
    }

    /// Connects to `url` with `options`: every session gets the lock-wait and
    /// statement bounds from them (see [`crate::store::pool`] and [`super::MySql`]).
    pub async fn connect_with(url: &str, options: &StoreOptions) -> Result<Self, StoreError> {
        Ok(Self::from_pool(open_pool::<Self>(url, options).await?))
    }

    /// Wraps an existing pool.
    pub fn from_pool(pool: MySqlPool) -> Self {
        MySqlStore { pool }
    }

    /// The underlying pool.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// Runs one reservation transaction; `None` if no row was updated
    /// (missing or full).
    async fn try_reserve(
        &self,
        name: &SeqName,
        min_size: i64,
    ) -> Result<Option<Reservation>, StoreError> {
        self.run_reserve((RESERVE_UPDATE, RESERVE_SELECT), name, min_size)
            .await
    }

    /// Runs a reservation transaction ([`RESERVE_UPDATE`] and
    /// [`RESERVE_SELECT`], or the exact pair) once; `None` if no row was
    /// updated.
    async fn run_reserve(
        &self,
        sql: (&str, &str),
        name: &SeqName,
        size: i64,
    ) -> Result<Option<Reservation>, StoreError> {
        let mut held = Held::acquire(&self.pool).await?;
        let read = retrying!(
            "mysql",
            Self::reserve_on(held.conn(), sql, name, size).await
        );
        held.finish(read)?
            .map(|(max_id, size, step, ordering)| reservation(max_id, size, step, &ordering))
            .transpose()
    }

    /// One reservation transaction on `conn`: [`RESERVE_UPDATE`], then
    /// [`RESERVE_SELECT`], then `COMMIT`; `None` (rolled back) if no row was
    /// updated.
    async fn reserve_on(
        conn: &mut MySqlConnection,
        (update, select): (&str, &str),
        name: &SeqName,
        min_size: i64,
    ) -> Result<Option<(i64, i64, i64, String)>, sqlx::Error> {
        let mut tx = conn.begin().await?;
        let updated = sqlx::query(update)
            .bind(min_size)
            .bind(name.as_str())
            .bind(min_size)
            .execute(&mut *tx)
            .await?;
        if updated.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        let read = sqlx::query_as(select)
            .bind(min_size)
            .bind(name.as_str())
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(read))
    }

    /// Whether a row named `name` exists.
    async fn exists(&self, name: &SeqName) -> Result<bool, StoreError> {
        let mut held = Held::acquire(&self.pool).await?;
        let row = retrying!(
            "mysql",
            sqlx::query_as::<_, (i64,)>("SELECT 1 FROM sequences WHERE name = ?")
                .bind(name.as_str())
                .fetch_optional(held.conn())
                .await
        );
        Ok(held.finish(row)?.is_some())
    }

    /// Reads one row on `conn` (a transaction or a pooled connection).
    async fn fetch_row<'c, E>(conn: E, name: &SeqName) -> Result<Option<Row>, sqlx::Error>
    where
        E: sqlx::Executor<'c, Database = sqlx::MySql>,
    {
        let sql = format!("SELECT {COLUMNS} FROM sequences WHERE name = ?");
        sqlx::query_as(&sql)
            .bind(name.as_str())
            .fetch_optional(conn)
            .await
    }
}

/// How MySqlStore's pool connects, and the worker leases over it, for
/// [`crate::store::connect`].
impl Backend for MySqlStore {
    type Db = sqlx::MySql;
    type Leases = MySqlWorkerLeases;

    fn connect_options(url: &str, _: &StoreOptions) -> Result<MySqlConnectOptions, StoreError> {
        super::connect_options(url)
    }

    fn pool_options(_url: &str, options: &StoreOptions) -> MySqlPoolOptions {
        super::bounded_pool(options)
    }

    fn over_pool(pool: MySqlPool, _: &StoreOptions) -> Self {
        Self::from_pool(pool)
    }

    fn leases(pool: MySqlPool, options: &StoreOptions) -> MySqlWorkerLeases {
        MySqlWorkerLeases::over(pool, options)
    }
}

#[async_trait]
impl Store for MySqlStore {
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
        let exact = (RESERVE_EXACT_UPDATE, RESERVE_EXACT_SELECT);
        match self.run_reserve(exact, name, n).await? {
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
            sqlx::mysql::MySqlQueryResult::rows_affected,
            name,
            expected,
            new,
        )
        .await
    }

    async fn create(&self, seq: &NewSequence) -> Result<SequenceRow, StoreError> {
        let max_id = initial_max_id(seq)?;
        let insert = "INSERT INTO sequences (name, max_id, step, description, ordering) VALUES (?, ?, ?, ?, ?)";
        let row = retrying!(
            "mysql",
            async {
                let mut tx = self.pool.begin().await?;
                sqlx::query(insert)
                    .bind(seq.name.as_str())
                    .bind(max_id)
                    .bind(seq.step)
                    .bind(&seq.description)
                    .bind(seq.ordering.as_str())
                    .execute(&mut *tx)
                    .await?;
                let row = Self::fetch_row(&mut *tx, &seq.name).await?;
                tx.commit().await?;
                Ok(row)
            }
            .await
        )
        .map_err(insert_failed)?;
        row.map(to_found_row)
            .transpose()?
            .ok_or_else(|| StoreError::Unavailable("inserted row not found".into()))
    }

    async fn get(&self, name: &SeqName) -> Result<Option<SequenceRow>, StoreError> {
        retrying!("mysql", Self::fetch_row(&self.pool, name).await)
            .map_err(unavailable)?
            .map(to_found_row)
            .transpose()
    }

    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        // `name` is utf8mb4_bin: byte order, as on SQLite and PostgreSQL (COLLATE "C").
        let sql = format!("SELECT {COLUMNS} FROM sequences ORDER BY name");
        let rows: Vec<Row> = retrying!("mysql", sqlx::query_as(&sql).fetch_all(&self.pool).await)
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
        let update = "UPDATE sequences SET step = COALESCE(?, step), description = COALESCE(?, description), \
             ordering = COALESCE(?, ordering), updated_at = CURRENT_TIMESTAMP WHERE name = ?";
        let row = retrying!(
            "mysql",
            async {
                let mut tx = self.pool.begin().await?;
                sqlx::query(update)
                    .bind(patch.step)
                    .bind(patch.description.as_deref())
                    .bind(patch.ordering.map(|o| o.as_str()))
                    .bind(name.as_str())
                    .execute(&mut *tx)
                    .await?;
                // Decide on the row read back rather than on the affected-rows count,
                // which depends on the server's "found rows" vs "changed rows" flag.
                let row = Self::fetch_row(&mut *tx, name).await?;
                tx.commit().await?;
                Ok(row)
            }
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
        Migrator::prepare(PoolRef::Mysql(&self.pool), MigrateMode::Auto, None).await
    }

    async fn check_schema(&self) -> Result<(), StoreError> {
        Migrator::prepare(PoolRef::Mysql(&self.pool), MigrateMode::Check, None).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        retrying!(
            "mysql",
            sqlx::query("SELECT 1 FROM sequences LIMIT 1")
                .fetch_optional(&self.pool)
                .await
        )
        .map(|_| ())
        .map_err(unavailable)
    }

    fn backend(&self) -> &'static str {
        "mysql"
    }

    async fn stripe_record(&self) -> Result<Option<StripeRecord>, StoreError> {
        record::read_record(&self.pool, Dialect::Mysql).await
    }

    async fn put_stripe_record(
        &self,
        record: &StripeRecord,
        replace: bool,
    ) -> Result<StripeRecord, StoreError> {
        record::put_record(&self.pool, Dialect::Mysql, record, replace).await
    }
}

/// A name read as bytes (see [`Row`]) as text; invalid UTF-8 gets replacement
/// characters, which no valid name contains.
fn name_text(name: Vec<u8>) -> String {
    String::from_utf8(name).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[async_trait]
impl BumpSql for MySqlStore {
    type Db = sqlx::MySql;

    async fn read_bump(
        conn: &mut sqlx::MySqlConnection,
        names: Option<&[SeqName]>,
        lock: bool,
    ) -> Result<Vec<(String, i64)>, sqlx::Error> {
        let lock = if lock { BUMP_LOCK } else { "" };
        let rows: Vec<(Vec<u8>, i64)> =
            fetch_bump_rows::<Self::Db, _>(conn, BUMP_READ, lock, names).await?;
        Ok(rows
            .into_iter()
            .map(|(name, max_id)| (name_text(name), max_id))
            .collect())
    }

    async fn add_bump(
        conn: &mut sqlx::MySqlConnection,
        names: Option<&[SeqName]>,
        by: i64,
    ) -> Result<u64, sqlx::Error> {
        let done = execute_bump::<Self::Db>(conn, BUMP, names, by).await?;
        Ok(done.rows_affected())
    }
}
