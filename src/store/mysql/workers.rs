//! [`WorkerLeases`](crate::store::WorkerLeases) on MySQL / MariaDB: the statements
//! of `store/workers/sql.rs` with MySQL / MariaDB's column types.

use sqlx::mysql::MySql;

use crate::store::workers::SqlWorkerLeases;

/// Worker leases in a MySQL or MariaDB database.
pub type MySqlWorkerLeases = SqlWorkerLeases<MySql>;

// `owner` has a binary collation: sqlx reads it as bytes. sqlx asks the
// server for found rows, so `rows_affected` counts matched rows, changed or
// not.
