//! [`WorkerLeases`] on PostgreSQL: each operation is one statement; see
//! [`crate::store::workers`] for their preconditions.

use async_trait::async_trait;
use sqlx::postgres::PgPool;

use super::prepare;
use crate::store::migrator::SchemaSetup;
use crate::store::pool::Held;
use crate::store::retry::retrying;
use crate::store::workers::{check_owner, worker_row, WorkerLeases, WorkerRow};
use crate::store::{insert_failed, StoreError, StoreOptions};

const LIST: &str = "SELECT worker_id::BIGINT, owner, lease_until, last_timestamp \
     FROM workers WHERE worker_id < $1 ORDER BY worker_id";
const INSERT: &str =
    "INSERT INTO workers (worker_id, owner, lease_until, last_timestamp) VALUES ($1, $2, $3, $4)";
/// Compare-and-set on the row as read, and only if its lease expired or is ours.
const CLAIM: &str = "UPDATE workers \
     SET owner = $1, lease_until = $2, last_timestamp = $3, updated_at = CURRENT_TIMESTAMP \
     WHERE worker_id = $4 AND owner = $5 AND lease_until = $6 AND last_timestamp = $7 \
       AND (lease_until < $8 OR owner = $1)";
const RENEW: &str = "UPDATE workers \
     SET lease_until = $1, last_timestamp = GREATEST(last_timestamp, $1), updated_at = CURRENT_TIMESTAMP \
     WHERE worker_id = $2 AND owner = $3";
const RELEASE: &str = "UPDATE workers \
     SET lease_until = 0, last_timestamp = $1, updated_at = CURRENT_TIMESTAMP \
     WHERE worker_id = $2 AND owner = $3";

/// Worker leases in a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PgWorkerLeases {
    pool: PgPool,
    setup: SchemaSetup,
}

impl PgWorkerLeases {
    /// The leases over `pool`, shared with the sequence store of the
    /// same database; [`WorkerLeases::migrate`] does what `options`'
    /// `migrate` says (in its `schema`).
    pub(crate) fn over(pool: PgPool, options: &StoreOptions) -> Self {
        PgWorkerLeases {
            pool,
            setup: SchemaSetup {
                mode: options.migrate,
                schema: options.schema.clone(),
            },
        }
    }

    /// Uses an existing pool (e.g. [`super::PostgresStore::pool`]).
    pub fn from_pool(pool: PgPool) -> Self {
        PgWorkerLeases {
            pool,
            setup: SchemaSetup::default(),
        }
    }
}

#[async_trait]
impl WorkerLeases for PgWorkerLeases {
    async fn migrate(&self) -> Result<(), StoreError> {
        prepare(&self.pool, self.setup.mode, self.setup.schema.as_deref()).await
    }

    async fn list(&self, below: u32) -> Result<Vec<WorkerRow>, StoreError> {
        let mut held = Held::acquire(&self.pool).await?;
        let rows: Result<Vec<(i64, String, i64, i64)>, _> = retrying!(
            "postgres",
            sqlx::query_as(LIST)
                .bind(below as i64)
                .fetch_all(held.conn())
                .await
        );
        held.finish(rows)?
            .into_iter()
            .map(|(w, o, l, t)| worker_row(w, o, l, t))
            .collect()
    }

    async fn insert(&self, row: &WorkerRow) -> Result<bool, StoreError> {
        check_owner(&row.owner)?;
        let mut held = Held::acquire(&self.pool).await?;
        let done = retrying!(
            "postgres",
            sqlx::query(INSERT)
                .bind(row.worker_id as i32)
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
            "postgres",
            sqlx::query(CLAIM)
                .bind(owner)
                .bind(lease_until)
                .bind(last_timestamp)
                .bind(seen.worker_id as i32)
                .bind(&seen.owner)
                .bind(seen.lease_until)
                .bind(seen.last_timestamp)
                .bind(now)
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
            "postgres",
            sqlx::query(RENEW)
                .bind(lease_until)
                .bind(worker_id as i32)
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
            "postgres",
            sqlx::query(RELEASE)
                .bind(last_timestamp)
                .bind(worker_id as i32)
                .bind(owner)
                .execute(held.conn())
                .await
        );
        Ok(held.finish(r)?.rows_affected() == 1)
    }

    fn backend(&self) -> &'static str {
        "postgres"
    }
}
