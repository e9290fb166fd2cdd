//! [`WorkerLeases`] on MySQL / MariaDB: each operation is one statement; see
//! [`crate::store::workers`] for their preconditions.

use async_trait::async_trait;
use sqlx::mysql::MySqlPool;

use crate::store::migrator::{Migrator, PoolRef, SchemaSetup};
use crate::store::pool::Held;
use crate::store::retry::retrying;
use crate::store::workers::{check_owner, worker_row, WorkerLeases, WorkerRow};
use crate::store::{insert_failed, StoreError, StoreOptions};

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
    setup: SchemaSetup,
}

impl MySqlWorkerLeases {
    /// The leases over `pool`, shared with the sequence store of the
    /// same database; [`WorkerLeases::migrate`] does what `options`'
    /// `migrate` says.
    pub(crate) fn over(pool: MySqlPool, options: &StoreOptions) -> Self {
        MySqlWorkerLeases {
            pool,
            setup: SchemaSetup {
                mode: options.migrate,
                schema: options.schema.clone(),
            },
        }
    }

    /// Uses an existing pool (e.g. [`super::MySqlStore::pool`]).
    pub fn from_pool(pool: MySqlPool) -> Self {
        MySqlWorkerLeases {
            pool,
            setup: SchemaSetup::default(),
        }
    }
}

#[async_trait]
impl WorkerLeases for MySqlWorkerLeases {
    async fn migrate(&self) -> Result<(), StoreError> {
        Migrator::prepare(PoolRef::Mysql(&self.pool), self.setup.mode, None).await
    }

    async fn list(&self, below: u32) -> Result<Vec<WorkerRow>, StoreError> {
        // `owner` has a binary collation: sqlx reads it as bytes.
        let mut held = Held::acquire(&self.pool).await?;
        let rows: Result<Vec<(i64, Vec<u8>, i64, i64)>, _> = retrying!(
            "mysql",
            sqlx::query_as(LIST)
                .bind(below as i64)
                .fetch_all(held.conn())
                .await
        );
        held.finish(rows)?
            .into_iter()
            .map(|(w, o, l, t)| worker_row(w, String::from_utf8_lossy(&o).into_owned(), l, t))
            .collect()
    }

    async fn insert(&self, row: &WorkerRow) -> Result<bool, StoreError> {
        check_owner(&row.owner)?;
        let mut held = Held::acquire(&self.pool).await?;
        let done = retrying!(
            "mysql",
            sqlx::query(INSERT)
                .bind(row.worker_id as i64)
                .bind(&row.owner)
                .bind(row.lease_until)
                .bind(row.last_timestamp)
                .execute(held.conn())
                .await
        );
        match held.finish_with(done, insert_failed) {
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
        let mut held = Held::acquire(&self.pool).await?;
        let r = retrying!(
            "mysql",
            sqlx::query(CLAIM)
                .bind(owner)
                .bind(lease_until)
                .bind(last_timestamp)
                .bind(seen.worker_id as i64)
                .bind(&seen.owner)
                .bind(seen.lease_until)
                .bind(seen.last_timestamp)
                .bind(now)
                .bind(owner)
                .execute(held.conn())
                .await
        );
        Ok(held.finish(r)?.rows_affected() == 1)
    }

    async fn renew(
        &self,
        worker_id: u32,
        owner: &str,
        lease_until: i64,
    ) -> Result<bool, StoreError> {
        let mut held = Held::acquire(&self.pool).await?;
        let r = retrying!(
            "mysql",
            sqlx::query(RENEW)
                .bind(lease_until)
                .bind(lease_until)
                .bind(worker_id as i64)
                .bind(owner)
                .execute(held.conn())
                .await
        );
        Ok(held.finish(r)?.rows_affected() == 1)
    }

    async fn release(
        &self,
        worker_id: u32,
        owner: &str,
        last_timestamp: i64,
    ) -> Result<bool, StoreError> {
        let mut held = Held::acquire(&self.pool).await?;
        let r = retrying!(
            "mysql",
            sqlx::query(RELEASE)
                .bind(last_timestamp)
                .bind(worker_id as i64)
                .bind(owner)
                .execute(held.conn())
                .await
        );
        Ok(held.finish(r)?.rows_affected() == 1)
    }

    fn backend(&self) -> &'static str {
        "mysql"
    }
}
