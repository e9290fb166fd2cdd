//! [`WorkerLeases`](crate::store::WorkerLeases) on PostgreSQL: the statements
//! of `store/workers/sql.rs` with PostgreSQL's column types.

use sqlx::postgres::Postgres;

use crate::store::workers::SqlWorkerLeases;

/// Worker leases in a PostgreSQL database.
pub type PgWorkerLeases = SqlWorkerLeases<Postgres>;

// `worker_id` is an `INTEGER`.
