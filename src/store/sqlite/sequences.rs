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

use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions, SqliteQueryResult};

use std::sync::Arc;

use crate::store::database::Backend;
use crate::store::engine::Engine;
use crate::store::migrator::Dialect;
use crate::store::sequences::fence::Fence;
use crate::store::sequences::{Reserving, SqlStore};
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

impl Engine for sqlx::Sqlite {
    const DIALECT: Dialect = Dialect::Sqlite;
    type Name = String;
    type Bytes = Vec<u8>;
    type Time = chrono::NaiveDateTime;
    const RESERVING: Reserving = Reserving::Returning {
        reserve: RESERVE,
        exact: RESERVE_EXACT,
        lease: RESERVE_LEASE,
    };

    fn rows_affected(done: &SqliteQueryResult) -> u64 {
        done.rows_affected()
    }
}

/// The store on an embedded SQLite file (no failover fence: a file has no
/// replica to fail over to).
pub type SqliteStore = SqlStore<sqlx::Sqlite>;

impl Backend for SqliteStore {
    type Db = sqlx::Sqlite;

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
}
