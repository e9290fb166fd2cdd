//! [`WorkerLeases`](crate::store::WorkerLeases) on SQLite: the statements
//! of `store/workers/sql.rs` with SQLite's column types.

use sqlx::sqlite::Sqlite;

use crate::store::workers::SqlWorkerLeases;

/// Worker leases in an SQLite database.
pub type SqliteWorkerLeases = SqlWorkerLeases<Sqlite>;
