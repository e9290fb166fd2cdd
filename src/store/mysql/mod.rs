//! MySQL / MariaDB: one pool (this file: connect options, statement bounds,
//! [`connect`](crate::store::connect)) with the sequence store over it ([`MySqlStore`],
//! `sequences.rs`) and the worker leases ([`MySqlWorkerLeases`], `workers.rs`).

pub mod sequences;
pub mod workers;

pub use sequences::MySqlStore;
pub use workers::MySqlWorkerLeases;

use std::str::FromStr;
use std::sync::Arc;

use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlPoolOptions};
use sqlx::{ConnectOptions, Executor};

use crate::store::sequences::fence::{check_connection, Fence};
use crate::store::tls::{check_files, connect_failed};
use crate::store::{unavailable, StoreError, StoreOptions};

/// The names of the parameters that name a certificate or key file.
const TLS_FILES: [&str; 6] = [
    "ssl-ca", "sslca", "ssl-cert", "sslcert", "ssl-key", "sslkey",
];

/// The connect options of `url` (the bounds are set by [`set_bounds`] as
/// each session opens), as the driver reads them; files the URL names must
/// be readable ([`check_files`]).
fn connect_options(url: &str) -> Result<MySqlConnectOptions, StoreError> {
    check_files(url, &TLS_FILES)?;
    MySqlConnectOptions::from_str(url).map_err(unavailable)
}

/// One connection to `url` with its own settings, for reading another
/// system's tables (the imports).
pub(crate) async fn connection(url: &str) -> Result<MySqlConnection, StoreError> {
    connect_options(url)?
        .connect()
        .await
        .map_err(connect_failed)
}

/// Pool settings of `options`, with [`set_bounds`] run on every new
/// connection, then `fence`'s check of its server (which fences over
/// `connect`).
fn bounded_pool(
    options: &StoreOptions,
    fence: Arc<Fence>,
    connect: MySqlConnectOptions,
) -> MySqlPoolOptions {
    let (mariadb, mysql) = bounds_sql(options);
    options.pool().after_connect(move |conn, _| {
        let (mariadb, mysql) = (mariadb.clone(), mysql.clone());
        let (fence, connect) = (fence.clone(), connect.clone());
        Box::pin(async move {
            set_bounds(conn, &mariadb, &mysql).await?;
            check_connection::<sqlx::MySql>(&fence, conn, || connect).await
        })
    })
}

/// The `SET SESSION` statements of the bounds: MariaDB's, and MySQL's
/// (which has `max_execution_time`, in ms and for `SELECT` only, instead of
/// `max_statement_time`). `innodb_lock_wait_timeout` takes whole seconds,
/// at least 1: below that, the statement bound ends the wait.
fn bounds_sql(options: &StoreOptions) -> (String, String) {
    let lock_secs = options.lock_timeout.as_secs_f64().ceil().max(1.0) as u64;
    let statement = options.statement_timeout;
    (
        format!(
            "SET SESSION innodb_lock_wait_timeout = {lock_secs}, max_statement_time = {:.3}",
            statement.as_secs_f64()
        ),
        format!(
            "SET SESSION innodb_lock_wait_timeout = {lock_secs}, max_execution_time = {}",
            statement.as_millis().max(1)
        ),
    )
}

/// Bounds every statement of a new session: MariaDB's form first, MySQL's
/// if the server does not know `max_statement_time`.
async fn set_bounds(
    conn: &mut MySqlConnection,
    mariadb: &str,
    mysql: &str,
) -> Result<(), sqlx::Error> {
    match conn.execute(mariadb).await {
        Ok(_) => Ok(()),
        Err(_) => conn.execute(mysql).await.map(|_| ()),
    }
}
