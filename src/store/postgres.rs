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
//! The URL may select a schema with libpq's `options` parameter, e.g.
//! `postgres://host/db?options=-csearch_path%3Dmy_schema`; the table and the
//! migrations' bookkeeping table then live in that schema.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::{
    initial_max_id, insert_failed, migrate_failed, reservation, unavailable, Reservation,
    SequencePatch, SequenceRow, Store, StoreError,
};
use crate::domain::{NewSequence, SeqName};

/// Reserves `GREATEST(step, $2)` IDs of the row named `$1` unless that would
/// pass `i64::MAX`, and returns the new `max_id`, the amount added and the
/// row's step. `step` is not modified by the statement, so the returned size is
/// exactly what this statement added.
pub const RESERVE: &str = "UPDATE sequences \
     SET max_id = max_id + GREATEST(step, $2), updated_at = CURRENT_TIMESTAMP \
     WHERE name = $1 AND max_id <= 9223372036854775807 - GREATEST(step, $2) \
     RETURNING max_id, GREATEST(step, $2) AS size, step";

/// The columns of a [`SequenceRow`], in the order [`Row`] expects.
const COLUMNS: &str = "name, max_id, step, description, created_at, updated_at";

use super::{naive_found_row as to_found_row, naive_row as to_row, NaiveRow as Row};

/// A [`Store`] on a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://` or `postgresql://`) with a pool of at
    /// most 10 connections and a 3 s acquire timeout. Fails if the database
    /// cannot be reached. Does not run the migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url).map_err(unavailable)?;
        let pool = PgPoolOptions::new()
            .max_connections(10)
            .acquire_timeout(Duration::from_secs(3))
            .connect_with(options)
            .await
            .map_err(unavailable)?;
        Ok(Self::from_pool(pool))
    }

    /// Wraps an existing pool.
    pub fn from_pool(pool: PgPool) -> Self {
        PostgresStore { pool }
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
        let row: Option<(i64, i64, i64)> = sqlx::query_as(RESERVE)
            .bind(name.as_str())
            .bind(min_size)
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?;
        row.map(|(max_id, size, step)| reservation(max_id, size, step))
            .transpose()
    }

    /// Whether a row named `name` exists.
    async fn exists(&self, name: &SeqName) -> Result<bool, StoreError> {
        let row: Option<(i32,)> = sqlx::query_as("SELECT 1 FROM sequences WHERE name = $1")
            .bind(name.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(row.is_some())
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

    async fn create(&self, seq: &NewSequence) -> Result<SequenceRow, StoreError> {
        let sql = format!(
            "INSERT INTO sequences (name, max_id, step, description) VALUES ($1, $2, $3, $4) RETURNING {COLUMNS}"
        );
        let row: Row = sqlx::query_as(&sql)
            .bind(seq.name.as_str())
            .bind(initial_max_id(seq)?)
            .bind(seq.step)
            .bind(&seq.description)
            .fetch_one(&self.pool)
            .await
            .map_err(insert_failed)?;
        to_found_row(row)
    }

    async fn get(&self, name: &SeqName) -> Result<Option<SequenceRow>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM sequences WHERE name = $1");
        let row: Option<Row> = sqlx::query_as(&sql)
            .bind(name.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?;
        row.map(to_found_row).transpose()
    }

    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        // COLLATE "C": byte order, as on SQLite and MySQL (utf8mb4_bin), whatever
        // the database's collation.
        let sql = format!("SELECT {COLUMNS} FROM sequences ORDER BY name COLLATE \"C\"");
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
        let sql = format!(
            "UPDATE sequences SET step = COALESCE($2, step), description = COALESCE($3, description), \
             updated_at = CURRENT_TIMESTAMP WHERE name = $1 RETURNING {COLUMNS}"
        );
        let row: Option<Row> = sqlx::query_as(&sql)
            .bind(name.as_str())
            .bind(patch.step)
            .bind(patch.description.as_deref())
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?;
        row.map(to_found_row)
            .transpose()?
            .ok_or(StoreError::NotFound)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/postgres")
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
        "postgres"
    }
}
