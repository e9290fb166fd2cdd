//! [`WorkerLeases`] on MySQL / MariaDB: each operation is one statement; see
//! [`super::workers`] for their preconditions.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};

use super::workers::{check_owner, worker_row, WorkerLeases, WorkerRow};
use super::{insert_failed, migrate_failed, unavailable, StoreError};

const LIST: &str = "SELECT CAST(worker_id AS SIGNED), owner, lease_until, last_timestamp \
     FROM workers WHERE worker_id < ? ORDER BY worker_id";
const INSERT: &str =
    "INSERT INTO workers (worker_id, owner, lease_until, last_timestamp) VALUES (?, ?, ?, ?)";
/// Compare-and-set on the row as read, and only if its lease expired or is
/// ours. Binds: owner, lease_until, last_timestamp, worker_id, seen owner,
/// seen lease_until, seen last_timestamp, now, owner. (sqlx asks the server
/// for found rows, so `rows_affected` counts matched rows, changed or not.)
const CLAIM: &str = "UPDATE workers \
     SET owner = ?, lease_until = ?, last_timestamp = ?, updated_at = CURRENT_TIMESTAMP \
     WHERE worker_id = ? AND owner = ? AND lease_until = ? AND last_timestamp = ? \
       AND (lease_until < ? OR owner = ?)";
/// Binds: lease_until, lease_until, worker_id, owner.
const RENEW: &str = "UPDATE workers \
     SET lease_until = ?, last_timestamp = GREATEST(last_timestamp, ?), updated_at = CURRENT_TIMESTAMP \
     WHERE worker_id = ? AND owner = ?";
/// Binds: last_timestamp, worker_id, owner.
const RELEASE: &str = "UPDATE workers \
     SET lease_until = 0, last_timestamp = ?, updated_at = CURRENT_TIMESTAMP \
     WHERE worker_id = ? AND owner = ?";

/// Worker leases in a MySQL or MariaDB database.
#[derive(Debug, Clone)]
pub struct MySqlWorkerLeases {
    pool: MySqlPool,
}

impl MySqlWorkerLeases {
    /// A pool of at most 2 connections to `url`, opened on first use.
    pub fn connect_lazy(url: &str) -> Result<Self, StoreError> {
        let options = MySqlConnectOptions::from_str(url).map_err(unavailable)?;
        let pool = MySqlPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(3))
            .connect_lazy_with(options);
        Ok(Self::from_pool(pool))
    }

    /// Uses an existing pool (e.g. [`super::mysql::MySqlStore::pool`]).
    pub fn from_pool(pool: MySqlPool) -> Self {
        MySqlWorkerLeases { pool }
    }
}

#[async_trait]
impl WorkerLeases for MySqlWorkerLeases {
    async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/mysql")
            .run(&self.pool)
            .await
            .map_err(migrate_failed)
    }

    async fn list(&self, below: u32) -> Result<Vec<WorkerRow>, StoreError> {
        // `owner` has a binary collation: sqlx reads it as bytes.
        let rows: Vec<(i64, Vec<u8>, i64, i64)> = sqlx::query_as(LIST)
            .bind(below as i64)
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        rows.into_iter()
            .map(|(w, o, l, t)| worker_row(w, String::from_utf8_lossy(&o).into_owned(), l, t))
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
            .bind(owner)
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
        "mysql"
    }
}
