//! [`Store`](crate::store::Store) on an embedded SQLite file.
//!
//! A segment is reserved by one `UPDATE ... RETURNING` statement (see
//! [`RESERVE`]; needs SQLite >= 3.35, sqlx bundles a newer one). SQLite
//! serialises writers on the whole database, so concurrent reservations from
//! this process or another one on the same file never overlap.
//!
//! The connection uses WAL journaling, `synchronous = FULL` (durable commits)
//! and a busy timeout from [`StoreOptions::lock_timeout`]. The file is created only if the URL says so (`?mode=rwc`, as in
//! the default `sqlite://seqd.db?mode=rwc`). `CURRENT_TIMESTAMP` is UTC text.

use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};

use std::sync::Arc;

use super::SqliteWorkerLeases;
use crate::store::database::{open_pool, Backend};
use crate::store::sequences::fence::Fence;
use crate::store::sequences::{sql_sequences, Reserving, SequenceDb};
use crate::store::{StoreError, StoreOptions};

/// Reserves `MAX(step, ?2)` IDs of the row named `?1` unless that would pass
/// `i64::MAX`, and returns the new `max_id`, the amount added and the row's
/// step. `step` is not modified by the statement, so the returned size is
/// exactly what this statement added. (`MAX` with two arguments is SQLite's
/// scalar maximum, its `GREATEST`.)
pub const RESERVE: &str = "UPDATE sequences \
     SET max_id = max_id + MAX(step, ?2), updated_at = CURRENT_TIMESTAMP \
     WHERE name = ?1 AND format IS NULL AND max_id <= 9223372036854775807 - MAX(step, ?2) \
     RETURNING max_id, MAX(step, ?2) AS size, step, ordering";

/// Reserves exactly `?2` IDs of the row named `?1` (a global sequence's
/// merged requests, a serial period's counter) unless that would pass `?3`
/// (`i64::MAX`, or the capacity of `{seq:0N}`); returns as [`RESERVE`].
/// `?3 - ?2` cannot overflow: `?3 <= i64::MAX` and `?2 >= 1`.
pub const RESERVE_EXACT: &str = "UPDATE sequences \
     SET max_id = max_id + ?2, updated_at = CURRENT_TIMESTAMP \
     WHERE name = ?1 AND format IS NULL AND max_id <= ?3 - ?2 \
     RETURNING max_id, ?2 AS size, step, ordering";

/// [`RESERVE_EXACT`] of a lease: a global row (served in order at request
/// time) is refused by the statement itself and changes nothing.
pub const RESERVE_LEASE: &str = "UPDATE sequences \
     SET max_id = max_id + ?2, updated_at = CURRENT_TIMESTAMP \
     WHERE name = ?1 AND format IS NULL AND ordering <> 'global' AND max_id <= ?3 - ?2 \
     RETURNING max_id, ?2 AS size, step, ordering";

/// Names are text and timestamps `TIMESTAMP` text (in UTC); a segment is
/// reserved by one statement with `RETURNING`.
impl SequenceDb for sqlx::Sqlite {
    type Name = String;
    type Time = chrono::NaiveDateTime;
    const RESERVING: Reserving = Reserving::Returning {
        reserve: RESERVE,
        exact: RESERVE_EXACT,
        lease: RESERVE_LEASE,
    };
}

/// A [`Store`](crate::store::Store) on a SQLite database file, at a URL
/// `sqlite://path?mode=rwc`, `sqlite:path` or `sqlite::memory:` (its
/// parameters honoured; the file is created only with `mode=rwc`).
///
/// Statements with `RETURNING` are read with `fetch_all`, stepped to the end
/// (see `store/sequences/mod.rs`).
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// Always off: a file has no replica to be promoted.
    fence: Arc<Fence>,
}

impl SqliteStore {
    /// Opens `url` with `options`: at most 4 connections plus one for the
    /// worker leases (SQLite has one writer at a time), `busy_timeout` from
    /// the lock bound, WAL journaling and `synchronous = FULL` (every commit
    /// is on disk before it returns).
    pub async fn connect_with(url: &str, options: &StoreOptions) -> Result<Self, StoreError> {
        Ok(Self::from_pool(open_pool::<Self>(url, options).await?.0))
    }
}

/// How SqliteStore's pool connects, and the worker leases over it, for
/// [`crate::store::connect`].
impl Backend for SqliteStore {
    type Db = sqlx::Sqlite;
    type Leases = SqliteWorkerLeases;

    fn connect_options(
        url: &str,
        options: &StoreOptions,
    ) -> Result<SqliteConnectOptions, StoreError> {
        super::connect_options(url, options)
    }

    fn pool_options(
        url: &str,
        options: &StoreOptions,
        _: Arc<Fence>,
        _: SqliteConnectOptions,
    ) -> SqlitePoolOptions {
        super::pool_options(url, options)
    }

    /// A file has no replica to be promoted: the fence is off.
    fn over_pool(pool: SqlitePool, _: &StoreOptions, _: Arc<Fence>) -> Self {
        SqliteStore {
            pool,
            fence: Fence::off(),
        }
    }

    fn leases(pool: SqlitePool, options: &StoreOptions) -> SqliteWorkerLeases {
        SqliteWorkerLeases::over(pool, options)
    }
}

sql_sequences!(SqliteStore, sqlx::Sqlite);

crate::store::tokens::sql_tokens!(SqliteStore, sqlx::Sqlite);
