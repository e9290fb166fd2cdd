//! [`Store`] on an embedded SQLite file.
//!
//! A segment is reserved by one `UPDATE ... RETURNING` statement (see
//! [`RESERVE`]; needs SQLite >= 3.35, sqlx bundles a newer one). SQLite
//! serialises writers on the whole database, so concurrent reservations from
//! this process or another one on the same file never overlap.
//!
//! The connection uses WAL journaling, `synchronous = NORMAL` and a 5 s busy
//! timeout. The file is created only if the URL says so (`?mode=rwc`, as in
//! the default `sqlite://seqd.db?mode=rwc`). `CURRENT_TIMESTAMP` is UTC text.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::{
    initial_max_id, insert_failed, migrate_failed, reservation, unavailable, Reservation,
    SequencePatch, SequenceRow, Store, StoreError,
};
use crate::domain::{NewSequence, SeqName};

/// Reserves `MAX(step, ?2)` IDs of the row named `?1` unless that would pass
/// `i64::MAX`, and returns the new `max_id`, the amount added and the row's
/// step. `step` is not modified by the statement, so the returned size is
/// exactly what this statement added. (`MAX` with two arguments is SQLite's
/// scalar maximum, its `GREATEST`.)
pub const RESERVE: &str = "UPDATE sequences \
     SET max_id = max_id + MAX(step, ?2), updated_at = CURRENT_TIMESTAMP \
     WHERE name = ?1 AND max_id <= 9223372036854775807 - MAX(step, ?2) \
     RETURNING max_id, MAX(step, ?2) AS size, step";

/// The columns of a [`SequenceRow`], in the order [`Row`] expects.
const COLUMNS: &str = "name, max_id, step, description, created_at, updated_at";

use super::{naive_found_row as to_found_row, naive_row as to_row, NaiveRow as Row};

/// A [`Store`] on a SQLite database file.
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
    /// with a pool of at most 4 connections. URL parameters are honoured; the
    /// file is created only with `mode=rwc`. Does not run the migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(unavailable)?
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5));
        let mut pool = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(5));
        if is_in_memory(url) {
            // An in-memory database lives only as long as one of its
            // connections: keep one open for the life of the pool.
            pool = pool
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None);
        }
        let pool = pool.connect_with(options).await.map_err(unavailable)?;
        Ok(Self::from_pool(pool))
    }

    /// Wraps an existing pool.
    pub fn from_pool(pool: SqlitePool) -> Self {
        SqliteStore { pool }
    }

    /// The underlying pool.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Runs [`RESERVE`] once; `None` if no row was updated (missing or full).
    async fn try_reserve(
        &self,
        name: &SeqName,
        min_size: i64,
    ) -> Result<Option<Reservation>, StoreError> {
        // `fetch_all`, not `fetch_optional`: see [`SqliteStore`] on RETURNING.
        let rows: Vec<(i64, i64, i64)> = sqlx::query_as(RESERVE)
            .bind(name.as_str())
            .bind(min_size)
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        rows.into_iter()
            .next()
            .map(|(max_id, size, step)| reservation(max_id, size, step))
            .transpose()
    }

    /// Whether a row named `name` exists.
    async fn exists(&self, name: &SeqName) -> Result<bool, StoreError> {
        let row: Option<(i64,)> = sqlx::query_as("SELECT 1 FROM sequences WHERE name = ?1")
            .bind(name.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(row.is_some())
    }
}

/// Whether a SQLite URL names an in-memory database.
fn is_in_memory(url: &str) -> bool {
    url.contains(":memory:") || url.contains("mode=memory")
}

#[async_trait]
impl Store for SqliteStore {
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
            "INSERT INTO sequences (name, max_id, step, description) VALUES (?1, ?2, ?3, ?4) RETURNING {COLUMNS}"
        );
        let rows: Vec<Row> = sqlx::query_as(&sql)
            .bind(seq.name.as_str())
            .bind(initial_max_id(seq)?)
            .bind(seq.step)
            .bind(&seq.description)
            .fetch_all(&self.pool)
            .await
            .map_err(insert_failed)?;
        rows.into_iter()
            .next()
            .map(to_found_row)
            .transpose()?
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

    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        // SQLite's default BINARY collation: byte order.
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
        let sql = format!(
            "UPDATE sequences SET step = COALESCE(?2, step), description = COALESCE(?3, description), \
             updated_at = CURRENT_TIMESTAMP WHERE name = ?1 RETURNING {COLUMNS}"
        );
        let rows: Vec<Row> = sqlx::query_as(&sql)
            .bind(name.as_str())
            .bind(patch.step)
            .bind(patch.description.as_deref())
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        rows.into_iter()
            .next()
            .map(to_found_row)
            .transpose()?
            .ok_or(StoreError::NotFound)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/sqlite")
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
        "sqlite"
    }
}
