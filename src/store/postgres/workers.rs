//! [`WorkerLeases`](crate::store::WorkerLeases) on PostgreSQL: the statements
//! of `store/workers/sql.rs` with PostgreSQL's column types.

use sqlx::postgres::Postgres;

use crate::store::workers::{lease_db, SqlWorkerLeases};

/// Worker leases in a PostgreSQL database.
pub type PgWorkerLeases = SqlWorkerLeases<Postgres>;

// `worker_id` is an `INTEGER`.
lease_db!(Postgres: Postgres, worker_id as i32, owner as String);
