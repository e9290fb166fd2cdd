//! [`Store`](crate::store::Store) on MySQL / MariaDB.
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
use crate::domain::period_rows_range;
use crate::domain::{NamePrefix, NewSequence, SeqName};
use crate::store::database::{open_pool, Backend};
use crate::store::migrator::{Dialect, MigrateMode, Migrator, PoolRef};
use crate::store::pool::Held;
use crate::store::retry::retrying;
use crate::store::sql::ReserveOnce;
use crate::store::stripes::record::{self, StripeRecord};
use crate::store::{
    binary_page_sql, check_period_key, counter_names, fetch_page, initial_max_id, insert_failed,
    period_row, read_serial_flag, refused, reservation, row_from_columns, serial_values,
    unavailable, PeriodRow, Reservation, SequencePage, SequencePatch, SequenceRow, SerialColumns,
    StoreError, StoreOptions, COLUMNS, NOT_COUNTER,
};
use crate::store::{
    execute_bump, fetch_bump_rows, run_bump, schema_ready, BumpMode, BumpSql, Bumped,
};
use crate::store::{fetch_named, named_rows_sql};
use crate::store::{Catalog, Schema, StripeRecords};

/// First statement of a reservation: adds `GREATEST(step, ?)` to the row named
/// `?` unless that would pass `i64::MAX`. Binds: min_size, name, min_size.
pub const RESERVE_UPDATE: &str = "UPDATE sequences \
     SET max_id = max_id + GREATEST(step, ?), updated_at = CURRENT_TIMESTAMP \
     WHERE name = ? AND format IS NULL AND max_id <= 9223372036854775807 - GREATEST(step, ?)";

/// Second statement of a reservation, on the same transaction: reads back the
/// new `max_id`, the amount the update added (`step` is unchanged and locked)
/// and the row's step. Binds: min_size, name.
pub const RESERVE_SELECT: &str =
    "SELECT max_id, GREATEST(step, ?) AS size, step, ordering FROM sequences WHERE name = ?";

/// [`RESERVE_UPDATE`] of exactly `?` IDs (a global sequence's merged
/// requests, a serial period's counter) unless that would pass a cap
/// (`i64::MAX`, or the capacity of `{seq:0N}`). Binds: n, name, cap - n
/// (computed by the caller: no overflow, the cap is at least 0 and n at
/// least 1).
pub const RESERVE_EXACT_UPDATE: &str = "UPDATE sequences \
     SET max_id = max_id + ?, updated_at = CURRENT_TIMESTAMP \
     WHERE name = ? AND format IS NULL AND max_id <= ?";

/// [`RESERVE_SELECT`] after [`RESERVE_EXACT_UPDATE`]. Binds: n, name.
pub const RESERVE_EXACT_SELECT: &str =
    "SELECT max_id, CAST(? AS SIGNED) AS size, step, ordering FROM sequences WHERE name = ?";

/// Reads `name, max_id` for a bump; `names_in` appends the names and their
/// counters' ranges, if any.
pub const BUMP_READ: &str = "SELECT name, max_id FROM sequences";

/// Appended to a bump's read inside its transaction: locks the rows (and,
/// for all rows, the gaps between them) until commit.
pub const BUMP_LOCK: &str = " FOR UPDATE";

/// Adds `?` to `max_id`, sparing rows that would pass `i64::MAX`; `names_in`
/// appends the names and their counters' ranges, if any. Binds: by, by,
/// then `bump_binds`.
pub const BUMP: &str = "UPDATE sequences \
     SET max_id = max_id + ?, updated_at = CURRENT_TIMESTAMP \
     WHERE max_id <= 9223372036854775807 - ?";

/// Sets `max_id` to the first bind where the name (second) and `max_id`
/// (third) match: a compare-and-set, for [`Segments::compare_and_set_max_id`](crate::store::Segments::compare_and_set_max_id).
pub const SET_MAX_ID_IF: &str = "UPDATE sequences \
     SET max_id = ?, updated_at = CURRENT_TIMESTAMP WHERE name = ? AND max_id = ?";

/// Reads `max_id` of one row.
pub const READ_MAX_ID: &str = "SELECT max_id FROM sequences WHERE name = ?";

/// After a reserving statement that updated nothing: 1 when the row issues
/// serial numbers, 0 when it is plain (and full); no row when it is missing.
pub const READ_SERIAL_FLAG: &str =
    "SELECT CASE WHEN format IS NULL THEN 0 ELSE 1 END FROM sequences WHERE name = ?";

/// Creates the counter row (first bind) of a period of the sequence (second
/// bind) from its row (`max_id = counter_start - 1`, its step and ordering),
/// unless it exists: any number of instances may run it at once, one
/// inserts. `IGNORE` skips only the duplicate here: every value comes from
/// a row that passed the table's checks, and the name fits (128 + 1 + 8).
/// (`ON DUPLICATE KEY UPDATE` would count a found row as inserted, as sqlx
/// connects with `CLIENT_FOUND_ROWS`.)
pub const CREATE_PERIOD: &str = "INSERT IGNORE INTO sequences \
     (name, max_id, step, description, ordering, counter_start) \
     SELECT ?, counter_start - 1, step, '', ordering, counter_start FROM sequences WHERE name = ?";

/// The counter rows in the name range `[?, ?)`, in name order.
pub const LIST_PERIODS: &str = "SELECT name, max_id, created_at, updated_at FROM sequences \
     WHERE name >= ? AND name < ? ORDER BY name";

/// Gives the counter rows in the name range `[?3, ?4)` the step (first
/// bind) and the ordering (second) of their sequence (each `NULL`: unchanged).
pub const UPDATE_PERIODS: &str = "UPDATE sequences \
     SET step = COALESCE(?, step), ordering = COALESCE(?, ordering), updated_at = CURRENT_TIMESTAMP \
     WHERE name >= ? AND name < ?";

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
    i64,
    Option<String>,
    String,
    String,
    String,
);

/// Converts a fetched row (`None` for an invalid stored name).
fn to_row(
    (
        name,
        max_id,
        step,
        description,
        created_at,
        updated_at,
        ordering,
        counter_start,
        format,
        reset,
        time_zone,
        overflow,
    ): Row,
) -> Option<SequenceRow> {
    row_from_columns(
        utf8_name(name),
        max_id,
        step,
        description,
        created_at,
        updated_at,
        &ordering,
        SerialColumns {
            counter_start,
            format,
            reset,
            time_zone,
            overflow,
        },
    )
}

/// A stored name as text: invalid UTF-8 gets replacement characters, which
/// no valid name contains.
fn utf8_name(name: Vec<u8>) -> String {
    String::from_utf8(name).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Like [`to_row`] for a row looked up by a valid name, which must convert.
fn to_found_row(row: Row) -> Result<SequenceRow, StoreError> {
    to_row(row).ok_or_else(|| StoreError::Unavailable("row with an invalid name returned".into()))
}

/// A [`Store`](crate::store::Store) on a MySQL or MariaDB database.
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
    /// statement bounds from them (see [`crate::store::pool`] and `super::MySql`).
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

    /// Runs a reservation transaction ([`RESERVE_UPDATE`] and
    /// [`RESERVE_SELECT`], or the exact pair) once, `guard` the update's
    /// last bind; `None` if no row was updated.
    async fn run_reserve(
        &self,
        sql: (&str, &str),
        name: &SeqName,
        size: i64,
        guard: i64,
    ) -> Result<Option<Reservation>, StoreError> {
        let mut held = Held::acquire(&self.pool).await?;
        let read = retrying!(
            Dialect::Mysql.name(),
            Self::reserve_on(held.conn(), sql, name, size, guard).await
        );
        held.finish(read)?
            .map(|(max_id, size, step, ordering)| reservation(max_id, size, step, &ordering))
            .transpose()
    }

    /// One reservation transaction on `conn`: [`RESERVE_UPDATE`], then
    /// [`RESERVE_SELECT`], then `COMMIT`; `None` (rolled back) if no row was
    /// updated. `guard` is the update's last bind.
    async fn reserve_on(
        conn: &mut MySqlConnection,
        (update, select): (&str, &str),
        name: &SeqName,
        min_size: i64,
        guard: i64,
    ) -> Result<Option<(i64, i64, i64, String)>, sqlx::Error> {
        let mut tx = conn.begin().await?;
        let updated = sqlx::query(update)
            .bind(min_size)
            .bind(name.as_str())
            .bind(guard)
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
impl ReserveOnce for MySqlStore {
    async fn reserve_once(
        &self,
        name: &SeqName,
        min_size: i64,
    ) -> Result<Option<Reservation>, StoreError> {
        self.run_reserve((RESERVE_UPDATE, RESERVE_SELECT), name, min_size, min_size)
            .await
    }

    async fn reserve_within_once(
        &self,
        name: &SeqName,
        n: i64,
        cap: i64,
    ) -> Result<Option<Reservation>, StoreError> {
        let exact = (RESERVE_EXACT_UPDATE, RESERVE_EXACT_SELECT);
        let Some(guard) = cap.checked_sub(n) else {
            return Err(StoreError::Exhausted);
        };
        self.run_reserve(exact, name, n, guard).await
    }

    async fn refusal(&self, name: &SeqName) -> Result<StoreError, StoreError> {
        Ok(refused(
            read_serial_flag(&self.pool, READ_SERIAL_FLAG, name).await?,
        ))
    }
}

crate::store::sql::sql_segments!(MySqlStore, sqlx::mysql::MySqlQueryResult);

#[async_trait]
impl Catalog for MySqlStore {
    async fn create(&self, seq: &NewSequence) -> Result<SequenceRow, StoreError> {
        let max_id = initial_max_id(seq)?;
        let insert = "INSERT INTO sequences (name, max_id, step, description, ordering, \
             counter_start, format, reset, time_zone, overflow) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
        let (format, reset, time_zone, overflow) = serial_values(seq.serial.as_ref());
        let row = retrying!(
            Dialect::Mysql.name(),
            async {
                let mut tx = self.pool.begin().await?;
                sqlx::query(insert)
                    .bind(seq.name.as_str())
                    .bind(max_id)
                    .bind(seq.step)
                    .bind(&seq.description)
                    .bind(seq.ordering.as_str())
                    .bind(seq.start)
                    .bind(format.as_deref())
                    .bind(reset)
                    .bind(&time_zone)
                    .bind(overflow)
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
        retrying!(
            Dialect::Mysql.name(),
            Self::fetch_row(&self.pool, name).await
        )
        .map_err(unavailable)?
        .map(to_found_row)
        .transpose()
    }

    async fn settings_of(&self, names: &[SeqName]) -> Result<Vec<SequenceRow>, StoreError> {
        fetch_named(&self.pool, named_rows_sql, names, to_row).await
    }

    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        // `name` is utf8mb4_bin: byte order, as on SQLite and PostgreSQL (COLLATE "C").
        let sql = format!("SELECT {COLUMNS} FROM sequences WHERE {NOT_COUNTER} ORDER BY name");
        let rows: Vec<Row> = retrying!(
            Dialect::Mysql.name(),
            sqlx::query_as(&sql).fetch_all(&self.pool).await
        )
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
             ordering = COALESCE(?, ordering), format = CASE WHEN ? THEN ? ELSE format END, \
             reset = CASE WHEN ? THEN ? ELSE reset END, time_zone = CASE WHEN ? THEN ? ELSE time_zone END, \
             overflow = CASE WHEN ? THEN ? ELSE overflow END, \
             updated_at = CURRENT_TIMESTAMP WHERE name = ?";
        let (format, reset, time_zone, overflow) =
            serial_values(patch.serial.as_ref().and_then(Option::as_ref));
        let set = patch.serial.is_some();
        let (low, high) = period_rows_range(name);
        let row = retrying!(
            Dialect::Mysql.name(),
            async {
                let mut tx = self.pool.begin().await?;
                sqlx::query(update)
                    .bind(patch.step)
                    .bind(patch.description.as_deref())
                    .bind(patch.ordering.map(|o| o.as_str()))
                    .bind(set)
                    .bind(format.as_deref())
                    .bind(set)
                    .bind(reset)
                    .bind(set)
                    .bind(&time_zone)
                    .bind(set)
                    .bind(overflow)
                    .bind(name.as_str())
                    .execute(&mut *tx)
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

    async fn create_period(&self, parent: &SeqName, key: &str) -> Result<bool, StoreError> {
        check_period_key(key)?;
        let counter = parent.period_counter(key);
        let done = retrying!(
            Dialect::Mysql.name(),
            sqlx::query(CREATE_PERIOD)
                .bind(counter.as_str())
                .bind(parent.as_str())
                .execute(&self.pool)
                .await
        )
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
        let rows: Vec<(Vec<u8>, i64, DateTime<Utc>, DateTime<Utc>)> = retrying!(
            Dialect::Mysql.name(),
            sqlx::query_as(LIST_PERIODS)
                .bind(&low)
                .bind(&high)
                .fetch_all(&self.pool)
                .await
        )
        .map_err(unavailable)?;
        Ok(rows
            .into_iter()
            .map(|(name, max_id, created_at, updated_at)| {
                period_row(&low, &utf8_name(name), max_id, created_at, updated_at)
            })
            .collect())
    }

    async fn delete_periods(&self, parent: &SeqName, keys: &[String]) -> Result<u64, StoreError> {
        let names = counter_names(parent, keys)?;
        retrying!(
            Dialect::Mysql.name(),
            async {
                let mut tx = self.pool.begin().await?;
                let mut deleted = 0;
                for name in &names {
                    deleted += sqlx::query("DELETE FROM sequences WHERE name = ?")
                        .bind(name)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                }
                tx.commit().await?;
                Ok(deleted)
            }
            .await
        )
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
impl Schema for MySqlStore {
    async fn migrate(&self) -> Result<(), StoreError> {
        Migrator::prepare(PoolRef::Mysql(&self.pool), MigrateMode::Auto, None).await
    }

    async fn check_schema(&self) -> Result<(), StoreError> {
        Migrator::prepare(PoolRef::Mysql(&self.pool), MigrateMode::Check, None).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        schema_ready(&self.pool, Dialect::Mysql, self.check_schema()).await
    }

    fn backend(&self) -> &'static str {
        Dialect::Mysql.name()
    }
}

#[async_trait]
impl StripeRecords for MySqlStore {
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
            fetch_bump_rows::<Self::Db, _>(conn, Dialect::Mysql, BUMP_READ, lock, names).await?;
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
        let done = execute_bump::<Self::Db>(conn, Dialect::Mysql, BUMP, names, by).await?;
        Ok(done.rows_affected())
    }
}

crate::store::tokens::sql_tokens!(MySqlStore, sqlx::MySql);
