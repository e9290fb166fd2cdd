//! [`WorkerLeases`] on SQLite: each operation is one statement; see
//! [`super::workers`] for their preconditions.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::workers::{check_owner, worker_row, WorkerLeases, WorkerRow};
use super::{insert_failed, migrate_failed, unavailable, StoreError};

const LIST: &str = "SELECT worker_id, owner, lease_until, last_timestamp \
     FROM workers WHERE worker_id < ?1 ORDER BY worker_id";
const INSERT: &str =
    "INSERT INTO workers (worker_id, owner, lease_until, last_timestamp) VALUES (?1, ?2, ?3, ?4)";
/// Compare-and-set on the row as read, and only if its lease expired or is ours.
const CLAIM: &str = "UPDATE workers \
     SET owner = ?1, lease_until = ?2, last_timestamp = ?3, updated_at = CURRENT_TIMESTAMP \
     WHERE worker_id = ?4 AND owner = ?5 AND lease_until = ?6 AND last_timestamp = ?7 \
       AND (lease_until < ?8 OR owner = ?1)";
const RENEW: &str = "UPDATE workers \
     SET lease_until = ?1, last_timestamp = MAX(last_timestamp, ?1), updated_at = CURRENT_TIMESTAMP \
     WHERE worker_id = ?2 AND owner = ?3";
const RELEASE: &str = "UPDATE workers \
     SET lease_until = 0, last_timestamp = ?1, updated_at = CURRENT_TIMESTAMP \
     WHERE worker_id = ?2 AND owner = ?3";

/// Worker leases in an SQLite database.
#[derive(Debug, Clone)]
pub struct SqliteWorkerLeases {
    pool: SqlitePool,
}

impl SqliteWorkerLeases {
    /// A pool of at most 2 connections to `url`, opened on first use, with
    /// the options of [`super::sqlite::SqliteStore`] (WAL, 5 s busy timeout).
    /// An in-memory URL gets a database of its own, kept by one connection.
    pub fn connect_lazy(url: &str) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(unavailable)?
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5));
        let mut pool = SqlitePoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(5));
        if url.contains(":memory:") || url.contains("mode=memory") {
            pool = pool
                .max_connections(1)
                .idle_timeout(None)
                .max_lifetime(None);
        }
        Ok(Self::from_pool(pool.connect_lazy_with(options)))
    }

    /// Uses an existing pool (e.g. [`super::sqlite::SqliteStore::pool`]).
    pub fn from_pool(pool: SqlitePool) -> Self {
        SqliteWorkerLeases { pool }
    }
}

#[async_trait]
impl WorkerLeases for SqliteWorkerLeases {
    async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/sqlite")
            .run(&self.pool)
            .await
            .map_err(migrate_failed)
    }

    async fn list(&self, below: u32) -> Result<Vec<WorkerRow>, StoreError> {
        let rows: Vec<(i64, String, i64, i64)> = sqlx::query_as(LIST)
            .bind(below as i64)
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        rows.into_iter()
            .map(|(w, o, l, t)| worker_row(w, o, l, t))
            .collect()
    }

    async fn insert(&self, row: &WorkerRow) -> Result<bool, StoreError> {
        check_owner(&row.owner)?;
        let done = sqlx::query(INSERT)
            .bind(row.worker_id as i64)
            .bind(&row.owner)
            .bind(row.lease_until)
            .bind(row.last_timestamp)
            .execute(&self.pool)
            .await;
        match done.map_err(insert_failed) {
            Ok(r) => Ok(r.rows_affected() == 1),
            Err(StoreError::AlreadyExists) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn claim(
        &self,
        seen: &WorkerRow,
        owner: &str,
        lease_until: i64,
        last_timestamp: i64,
        now: i64,
    ) -> Result<bool, StoreError> {
        check_owner(owner)?;
        let r = sqlx::query(CLAIM)
            .bind(owner)
            .bind(lease_until)
            .bind(last_timestamp)
            .bind(seen.worker_id as i64)
            .bind(&seen.owner)
            .bind(seen.lease_until)
            .bind(seen.last_timestamp)
            .bind(now)
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(r.rows_affected() == 1)
    }

    async fn renew(
        &self,
        worker_id: u32,
        owner: &str,
        lease_until: i64,
    ) -> Result<bool, StoreError> {
        let r = sqlx::query(RENEW)
            .bind(lease_until)
            .bind(worker_id as i64)
            .bind(owner)
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(r.rows_affected() == 1)
    }

    async fn release(
        &self,
        worker_id: u32,
        owner: &str,
        last_timestamp: i64,
    ) -> Result<bool, StoreError> {
        let r = sqlx::query(RELEASE)
            .bind(last_timestamp)
            .bind(worker_id as i64)
            .bind(owner)
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(r.rows_affected() == 1)
    }

    fn backend(&self) -> &'static str {
        "sqlite"
    }
}
