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

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};

use super::{
    initial_max_id, insert_failed, migrate_failed, reservation, row_from_columns, unavailable,
    Reservation, SequencePatch, SequenceRow, Store, StoreError,
};
use crate::domain::{NewSequence, SeqName};

/// First statement of a reservation: adds `GREATEST(step, ?)` to the row named
/// `?` unless that would pass `i64::MAX`. Binds: min_size, name, min_size.
pub const RESERVE_UPDATE: &str = "UPDATE sequences \
     SET max_id = max_id + GREATEST(step, ?), updated_at = CURRENT_TIMESTAMP \
     WHERE name = ? AND max_id <= 9223372036854775807 - GREATEST(step, ?)";

/// Second statement of a reservation, on the same transaction: reads back the
/// new `max_id`, the amount the update added (`step` is unchanged and locked)
/// and the row's step. Binds: min_size, name.
pub const RESERVE_SELECT: &str =
    "SELECT max_id, GREATEST(step, ?) AS size, step FROM sequences WHERE name = ?";

/// The columns of a [`SequenceRow`], in the order [`Row`] expects.
const COLUMNS: &str = "name, max_id, step, description, created_at, updated_at";

/// One row as MySQL returns it. `name` comes as bytes: sqlx reports a column
/// with a binary collation (`utf8mb4_bin`) as `VARBINARY` and refuses to
/// decode it as a `String`.
type Row = (Vec<u8>, i64, i64, String, DateTime<Utc>, DateTime<Utc>);

/// Converts a fetched row (`None` for an invalid stored name).
fn to_row((name, max_id, step, description, created_at, updated_at): Row) -> Option<SequenceRow> {
    // Invalid UTF-8 gets replacement characters, which no valid name contains.
    let name = String::from_utf8(name)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    row_from_columns(name, max_id, step, description, created_at, updated_at)
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
    /// Connects to `url` (`mysql://`) with a pool of at most 10 connections
    /// and a 3 s acquire timeout. Fails if the database cannot be reached.
    /// Does not run the migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let options = MySqlConnectOptions::from_str(url).map_err(unavailable)?;
        let pool = MySqlPoolOptions::new()
            .max_connections(10)
            .acquire_timeout(Duration::from_secs(3))
            .connect_with(options)
            .await
            .map_err(unavailable)?;
        Ok(Self::from_pool(pool))
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
        let mut tx = self.pool.begin().await.map_err(unavailable)?;
        let updated = sqlx::query(RESERVE_UPDATE)
            .bind(min_size)
            .bind(name.as_str())
            .bind(min_size)
            .execute(&mut *tx)
            .await
            .map_err(unavailable)?;
        if updated.rows_affected() == 0 {
            tx.rollback().await.map_err(unavailable)?;
            return Ok(None);
        }
        let (max_id, size, step): (i64, i64, i64) = sqlx::query_as(RESERVE_SELECT)
            .bind(min_size)
            .bind(name.as_str())
            .fetch_one(&mut *tx)
            .await
            .map_err(unavailable)?;
        let r = reservation(max_id, size, step)?;
        tx.commit().await.map_err(unavailable)?;
        Ok(Some(r))
    }

    /// Whether a row named `name` exists.
    async fn exists(&self, name: &SeqName) -> Result<bool, StoreError> {
        let row: Option<(i64,)> = sqlx::query_as("SELECT 1 FROM sequences WHERE name = ?")
            .bind(name.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(row.is_some())
    }

    /// Reads one row on `conn` (a transaction or a pooled connection).
    async fn fetch_row<'c, E>(conn: E, name: &SeqName) -> Result<Option<Row>, StoreError>
    where
        E: sqlx::Executor<'c, Database = sqlx::MySql>,
    {
        let sql = format!("SELECT {COLUMNS} FROM sequences WHERE name = ?");
        sqlx::query_as(&sql)
            .bind(name.as_str())
            .fetch_optional(conn)
            .await
            .map_err(unavailable)
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

    async fn create(&self, seq: &NewSequence) -> Result<SequenceRow, StoreError> {
        let max_id = initial_max_id(seq)?;
        let mut tx = self.pool.begin().await.map_err(unavailable)?;
        sqlx::query("INSERT INTO sequences (name, max_id, step, description) VALUES (?, ?, ?, ?)")
            .bind(seq.name.as_str())
            .bind(max_id)
            .bind(seq.step)
            .bind(&seq.description)
            .execute(&mut *tx)
            .await
            .map_err(insert_failed)?;
        let row = Self::fetch_row(&mut *tx, &seq.name).await?;
        tx.commit().await.map_err(unavailable)?;
        row.map(to_found_row)
            .transpose()?
            .ok_or_else(|| StoreError::Unavailable("inserted row not found".into()))
    }

    async fn get(&self, name: &SeqName) -> Result<Option<SequenceRow>, StoreError> {
        Self::fetch_row(&self.pool, name)
            .await?
            .map(to_found_row)
            .transpose()
    }

    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        // `name` is utf8mb4_bin: byte order, as on SQLite and PostgreSQL (COLLATE "C").
        let sql = format!("SELECT {COLUMNS} FROM sequences ORDER BY name");
        let rows: Vec<Row> = sqlx::query_as(&sql)
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(rows.into_iter().filter_map(to_row).collect())
    }

    async fn update(
        &self,
        name: &SeqName,
        patch: &SequencePatch,
    ) -> Result<SequenceRow, StoreError> {
        let mut tx = self.pool.begin().await.map_err(unavailable)?;
        sqlx::query(
            "UPDATE sequences SET step = COALESCE(?, step), description = COALESCE(?, description), \
             updated_at = CURRENT_TIMESTAMP WHERE name = ?",
        )
        .bind(patch.step)
        .bind(patch.description.as_deref())
        .bind(name.as_str())
        .execute(&mut *tx)
        .await
        .map_err(unavailable)?;
        // Decide on the row read back rather than on the affected-rows count,
        // which depends on the server's "found rows" vs "changed rows" flag.
        let row = Self::fetch_row(&mut *tx, name).await?;
        tx.commit().await.map_err(unavailable)?;
        row.map(to_found_row)
            .transpose()?
            .ok_or(StoreError::NotFound)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/mysql")
            .run(&self.pool)
            .await
            .map_err(migrate_failed)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1 FROM sequences LIMIT 1")
            .fetch_optional(&self.pool)
            .await
            .map(|_| ())
            .map_err(unavailable)
    }

    fn backend(&self) -> &'static str {
        "mysql"
    }
}
