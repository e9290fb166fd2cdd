//! [`Store`](crate::store::Store) on PostgreSQL.
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
use crate::domain::period_rows_range;
use crate::domain::{NamePrefix, NewSequence, SeqName};
use crate::store::database::{open_pool, Backend};
use crate::store::migrator::{Dialect, MigrateMode};
use crate::store::pool::Held;
use crate::store::retry::retrying;
use crate::store::sql::ReserveOnce;
use crate::store::stripes::record::{self, StripeRecord};
use crate::store::{
    check_period_key, counter_names, fetch_page, initial_max_id, insert_failed, period_row,
    read_serial_flag, refused, reservation, serial_values, unavailable, PeriodRow, Reservation,
    SequencePage, SequencePatch, SequenceRow, StoreError, StoreOptions, COLUMNS, NOT_COUNTER,
};
use crate::store::{
    execute_bump, fetch_bump_rows, fetch_named, run_bump, schema_ready, BumpMode, BumpSql, Bumped,
};
use crate::store::{Catalog, Schema, StripeRecords};

/// Reserves `GREATEST(step, $2)` IDs of the row named `$1` unless that would
/// pass `i64::MAX`, and returns the new `max_id`, the amount added and the
/// row's step. `step` is not modified by the statement, so the returned size is
/// exactly what this statement added.
pub const RESERVE: &str = "UPDATE sequences \
     SET max_id = max_id + GREATEST(step, $2), updated_at = CURRENT_TIMESTAMP \
     WHERE name = $1 AND format IS NULL AND max_id <= 9223372036854775807 - GREATEST(step, $2) \
     RETURNING max_id, GREATEST(step, $2) AS size, step, ordering";

/// Reserves exactly `$2` IDs of the row named `$1` (a global sequence's
/// merged requests, a serial period's counter) unless that would pass `$3`
/// (`i64::MAX`, or the capacity of `{seq:0N}`); returns as [`RESERVE`].
/// `$3 - $2` cannot overflow: `$3 <= i64::MAX` and `$2 >= 1`.
pub const RESERVE_EXACT: &str = "UPDATE sequences \
     SET max_id = max_id + $2, updated_at = CURRENT_TIMESTAMP \
     WHERE name = $1 AND format IS NULL AND max_id <= $3 - $2 \
     RETURNING max_id, $2 AS size, step, ordering";

/// Reads `name, max_id` for a bump; `names_in` appends the names and their
/// counters' ranges (`$1`, ...), if any.
pub const BUMP_READ: &str = "SELECT name, max_id FROM sequences";

/// Appended to a bump's read inside its transaction: locks the rows until
/// commit, taking the locks in name order.
pub const BUMP_LOCK: &str = " ORDER BY name COLLATE \"C\" FOR UPDATE";

/// Adds `$1` to `max_id`, sparing rows that would pass `i64::MAX` (the
/// caller checks the count); `names_in` appends the names and their
/// counters' ranges (`$3`, ...), if any. Binds: by, by, then `bump_binds`.
pub const BUMP: &str = "UPDATE sequences \
     SET max_id = max_id + $1, updated_at = CURRENT_TIMESTAMP \
     WHERE max_id <= 9223372036854775807 - $2";

/// Sets `max_id` to the first bind where the name (second) and `max_id`
/// (third) match: a compare-and-set, for [`Segments::compare_and_set_max_id`](crate::store::Segments::compare_and_set_max_id).
pub const SET_MAX_ID_IF: &str = "UPDATE sequences \
     SET max_id = $1, updated_at = CURRENT_TIMESTAMP WHERE name = $2 AND max_id = $3";

/// Reads `max_id` of one row.
pub const READ_MAX_ID: &str = "SELECT max_id FROM sequences WHERE name = $1";

/// After a reserving statement that updated nothing: 1 when the row issues
/// serial numbers, 0 when it is plain (and full); no row when it is missing.
pub const READ_SERIAL_FLAG: &str =
    "SELECT CASE WHEN format IS NULL THEN 0 ELSE 1 END::BIGINT FROM sequences WHERE name = $1";

/// Creates the counter row `$2` of period of the sequence `$1` from its row
/// (`max_id = counter_start - 1`, its step and ordering), unless it exists:
/// any number of instances may run it at once, one inserts.
pub const CREATE_PERIOD: &str = "INSERT INTO sequences \
     (name, max_id, step, description, ordering, counter_start) \
     SELECT $2, counter_start - 1, step, '', ordering, counter_start FROM sequences WHERE name = $1 \
     ON CONFLICT (name) DO NOTHING";

/// The counter rows in the name range `[$1, $2)`, in byte order (the index
/// `sequences_name_bytes` serves it).
pub const LIST_PERIODS: &str = "SELECT name, max_id, created_at, updated_at FROM sequences \
     WHERE name COLLATE \"C\" >= $1 AND name COLLATE \"C\" < $2 ORDER BY name COLLATE \"C\"";

/// Gives the counter rows in the name range `[$3, $4)` the step `$1` and the
/// ordering `$2` (each `NULL`: unchanged) of their sequence.
pub const UPDATE_PERIODS: &str = "UPDATE sequences \
     SET step = COALESCE($1, step), ordering = COALESCE($2, ordering), updated_at = CURRENT_TIMESTAMP \
     WHERE name COLLATE \"C\" >= $3 AND name COLLATE \"C\" < $4";

/// One page of rows: names compared with `lower_op` (`>` or `>=`) to `$1`
/// and below `$2`, at most `$3` rows, in byte order. Every comparison and
/// the order are on `name COLLATE "C"` (byte order, as on SQLite and MySQL,
/// whatever the database's collation), which the index of migration 0003
/// (`sequences_name_bytes`) serves: the primary key's index, in the
/// database's collation, cannot, and each page would sort the whole table.
pub fn page_sql(lower_op: &str) -> String {
    format!(
        "SELECT {COLUMNS} FROM sequences \
         WHERE name COLLATE \"C\" {lower_op} $1 AND name COLLATE \"C\" < $2 AND {NOT_COUNTER} \
         ORDER BY name COLLATE \"C\" LIMIT $3"
    )
}

/// The rows named by `n` binds (`$1` ... `$n`), for [`Catalog::settings_of`].
pub fn named_rows_sql(n: usize) -> String {
    let binds: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
    format!(
        "SELECT {COLUMNS} FROM sequences WHERE name IN ({})",
        binds.join(", ")
    )
}

use crate::store::{naive_found_row as to_found_row, naive_row as to_row, NaiveRow as Row};

/// A [`Store`](crate::store::Store) on a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// `--schema`, created by [`Schema::migrate`] if missing.
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
    /// [`Schema::migrate`] creates if missing).
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

    /// Runs a reserving statement ([`RESERVE`], or [`RESERVE_EXACT`] with
    /// its cap) once; `None` if no row was updated.
    async fn run_reserve(
        &self,
        sql: &str,
        name: &SeqName,
        size: i64,
        cap: Option<i64>,
    ) -> Result<Option<Reservation>, StoreError> {
        let mut held = Held::acquire(&self.pool).await?;
        let row = retrying!(Dialect::Postgres.name(), {
            let query = sqlx::query_as::<_, (i64, i64, i64, String)>(sql)
                .bind(name.as_str())
                .bind(size);
            match cap {
                Some(cap) => query.bind(cap),
                None => query,
            }
            .fetch_optional(held.conn())
            .await
        });
        held.finish(row)?
            .map(|(max_id, size, step, ordering)| reservation(max_id, size, step, &ordering))
            .transpose()
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
impl ReserveOnce for PostgresStore {
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

crate::store::sql::sql_segments!(PostgresStore, sqlx::postgres::PgQueryResult);

#[async_trait]
impl Catalog for PostgresStore {
    async fn create(&self, seq: &NewSequence) -> Result<SequenceRow, StoreError> {
        let sql = format!(
            "INSERT INTO sequences (name, max_id, step, description, ordering, counter_start, \
             format, reset, time_zone, overflow) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING {COLUMNS}"
        );
        let max_id = initial_max_id(seq)?;
        let (format, reset, time_zone, overflow) = serial_values(seq.serial.as_ref());
        let row: Row = retrying!(
            Dialect::Postgres.name(),
            sqlx::query_as(&sql)
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
                .fetch_one(&self.pool)
                .await
        )
        .map_err(insert_failed)?;
        to_found_row(row)
    }

    async fn get(&self, name: &SeqName) -> Result<Option<SequenceRow>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM sequences WHERE name = $1");
        let row: Option<Row> = retrying!(
            Dialect::Postgres.name(),
            sqlx::query_as(&sql)
                .bind(name.as_str())
                .fetch_optional(&self.pool)
                .await
        )
        .map_err(unavailable)?;
        row.map(to_found_row).transpose()
    }

    async fn settings_of(&self, names: &[SeqName]) -> Result<Vec<SequenceRow>, StoreError> {
        fetch_named(&self.pool, named_rows_sql, names, to_row).await
    }

    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        // COLLATE "C": byte order, as on SQLite and MySQL (utf8mb4_bin), whatever
        // the database's collation.
        let sql = format!(
            "SELECT {COLUMNS} FROM sequences WHERE {NOT_COUNTER} ORDER BY name COLLATE \"C\""
        );
        let rows: Vec<Row> = retrying!(
            Dialect::Postgres.name(),
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
        fetch_page(&self.pool, page_sql, prefix, after, limit, to_row).await
    }

    async fn update(
        &self,
        name: &SeqName,
        patch: &SequencePatch,
    ) -> Result<SequenceRow, StoreError> {
        let sql = format!(
            "UPDATE sequences SET step = COALESCE($2, step), description = COALESCE($3, description), \
             ordering = COALESCE($4, ordering), format = CASE WHEN $5 THEN $6 ELSE format END, \
             reset = CASE WHEN $5 THEN $7 ELSE reset END, time_zone = CASE WHEN $5 THEN $8 ELSE time_zone END, \
             overflow = CASE WHEN $5 THEN $9 ELSE overflow END, \
             updated_at = CURRENT_TIMESTAMP WHERE name = $1 RETURNING {COLUMNS}"
        );
        let (format, reset, time_zone, overflow) =
            serial_values(patch.serial.as_ref().and_then(Option::as_ref));
        let (low, high) = period_rows_range(name);
        let row: Option<Row> = retrying!(
            Dialect::Postgres.name(),
            async {
                let mut tx = self.pool.begin().await?;
                let row: Option<Row> = sqlx::query_as(&sql)
                    .bind(name.as_str())
                    .bind(patch.step)
                    .bind(patch.description.as_deref())
                    .bind(patch.ordering.map(|o| o.as_str()))
                    .bind(patch.serial.is_some())
                    .bind(format.as_deref())
                    .bind(reset)
                    .bind(&time_zone)
                    .bind(overflow)
                    .fetch_optional(&mut *tx)
                    .await?;
                if row.is_some() && (patch.step.is_some() || patch.ordering.is_some()) {
                    sqlx::query(UPDATE_PERIODS)
                        .bind(patch.step)
                        .bind(patch.ordering.map(|o| o.as_str()))
                        .bind(&low)
                        .bind(&high)
                        .execute(&mut *tx)
                        .await?;
                }
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
            Dialect::Postgres.name(),
            sqlx::query(CREATE_PERIOD)
                .bind(parent.as_str())
                .bind(counter.as_str())
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
        let rows: Vec<(String, i64, chrono::NaiveDateTime, chrono::NaiveDateTime)> = retrying!(
            Dialect::Postgres.name(),
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
        let done = retrying!(
            Dialect::Postgres.name(),
            sqlx::query("DELETE FROM sequences WHERE name = ANY($1)")
                .bind(&names)
                .execute(&self.pool)
                .await
        )
        .map_err(unavailable)?;
        Ok(done.rows_affected())
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
impl Schema for PostgresStore {
    async fn migrate(&self) -> Result<(), StoreError> {
        prepare(&self.pool, MigrateMode::Auto, self.schema.as_deref()).await
    }

    async fn check_schema(&self) -> Result<(), StoreError> {
        prepare(&self.pool, MigrateMode::Check, None).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        schema_ready(&self.pool, Dialect::Postgres, self.check_schema()).await
    }

    fn backend(&self) -> &'static str {
        Dialect::Postgres.name()
    }
}

#[async_trait]
impl StripeRecords for PostgresStore {
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

#[async_trait]
impl BumpSql for PostgresStore {
    type Db = sqlx::Postgres;

    async fn widen_bound(conn: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
        // `SET LOCAL`: until the transaction ends, then the pool's bound again.
        let sql = format!(
            "SET LOCAL statement_timeout = {}",
            crate::store::BUMP_STATEMENT_BOUND.as_millis()
        );
        sqlx::query(&sql).execute(conn).await.map(|_| ())
    }

    async fn read_bump(
        conn: &mut sqlx::PgConnection,
        names: Option<&[SeqName]>,
        lock: bool,
    ) -> Result<Vec<(String, i64)>, sqlx::Error> {
        let lock = if lock { BUMP_LOCK } else { "" };
        fetch_bump_rows::<Self::Db, _>(conn, Dialect::Postgres, BUMP_READ, lock, names).await
    }

    async fn add_bump(
        conn: &mut sqlx::PgConnection,
        names: Option<&[SeqName]>,
        by: i64,
    ) -> Result<u64, sqlx::Error> {
        let done = execute_bump::<Self::Db>(conn, Dialect::Postgres, BUMP, names, by).await?;
        Ok(done.rows_affected())
    }
}

crate::store::tokens::sql_tokens!(PostgresStore, sqlx::Postgres);
