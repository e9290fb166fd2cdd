//! SQLite: one pool (this file: connect options, statement bounds,
//! [`connect`](crate::store::connect)) with the sequence store over it ([`SqliteStore`],
//! `sequences.rs`) and the worker leases ([`SqliteWorkerLeases`], `workers.rs`).

pub mod sequences;
pub mod workers;

pub use sequences::SqliteStore;
pub use workers::SqliteWorkerLeases;

use std::str::FromStr;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::store::{unavailable, StoreError, StoreOptions};

/// The connect options of `url`: WAL, `synchronous = FULL`, and a busy
/// timeout of `options.lock_timeout`.
///
/// FULL, not NORMAL: in WAL mode NORMAL does not sync the log at commit, so a
/// power loss or host crash could roll `max_id` back past ranges already
/// handed out, and a restarted instance would issue them again. FULL costs
/// one `fsync` per segment fetch.
fn connect_options(url: &str, options: &StoreOptions) -> Result<SqliteConnectOptions, StoreError> {
    Ok(SqliteConnectOptions::from_str(url)
        .map_err(unavailable)?
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(options.lock_timeout))
}

/// Pool settings for `url`: at most 4 connections (plus
/// [`crate::store::LEASE_CONNECTIONS`] for the worker leases); an in-memory
/// database keeps one connection open for the life of the pool (it lives
/// only as long as one of its connections).
fn pool_options(url: &str, options: &StoreOptions) -> SqlitePoolOptions {
    let pool = options
        .clone()
        .with_max_connections(options.max_connections.min(4))
        .pool();
    if is_in_memory(url) {
        pool.min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
    } else {
        pool
    }
}

/// Whether a SQLite URL names an in-memory database.
fn is_in_memory(url: &str) -> bool {
    url.contains(":memory:") || url.contains("mode=memory")
}
