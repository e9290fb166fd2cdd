//! [`Store`](crate::store::Store) on MySQL / MariaDB.
//!
//! MariaDB 10.11 has no `UPDATE ... RETURNING`, so a segment is reserved in
//! one transaction: the guarded [`RESERVE_UPDATE`] (which takes the InnoDB
//! row lock and keeps it until commit), then [`RESERVE_SELECT`] on the same
//! transaction (which sees this transaction's own update, and nobody else's
//! since the row is locked), then `COMMIT`. No other instance can change the
//! row in between, so the range read back is exactly the one this update added.
//!
//! `name` has a binary collation (see the migration), so names are
//! case-sensitive. `created_at`/`updated_at` are `TIMESTAMP`, stored as UTC
//! and converted to the session time zone, which sqlx sets to `+00:00`.

use chrono::{DateTime, Utc};
use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions, MySqlQueryResult};

use std::sync::Arc;

use crate::store::database::Backend;
use crate::store::engine::Engine;
use crate::store::migrator::Dialect;
use crate::store::sequences::fence::Fence;
use crate::store::sequences::{Reserving, SqlStore};
use crate::store::{StoreError, StoreOptions};

/// First statement of a reservation: adds `GREATEST(step, ?)` to the row named
/// `?` unless that would pass `i64::MAX`. Binds: min_size, name, min_size.
pub const RESERVE_UPDATE: &str = "UPDATE sequences \
     SET max_id = max_id + GREATEST(step, ?), updated_at = CURRENT_TIMESTAMP \
     WHERE name = ? AND format IS NULL AND max_id <= 9223372036854775807 - GREATEST(step, ?)";

/// Second statement of a reservation, on the same transaction: reads back the
/// new `max_id`, the amount the update added (`step` is unchanged and locked)
/// and the row's step. Binds: min_size, name.
pub const RESERVE_SELECT: &str =
    "SELECT max_id, GREATEST(step, ?) AS size, step, ordering FROM sequences WHERE name = ?";

/// [`RESERVE_UPDATE`] of exactly `?` IDs (a global sequence's merged
/// requests, a serial period's counter) unless that would pass a cap
/// (`i64::MAX`, or the capacity of `{seq:0N}`). Binds: n, name, cap - n
/// (computed by the caller: no overflow, the cap is at least 0 and n at
/// least 1).
pub const RESERVE_EXACT_UPDATE: &str = "UPDATE sequences \
     SET max_id = max_id + ?, updated_at = CURRENT_TIMESTAMP \
     WHERE name = ? AND format IS NULL AND max_id <= ?";

/// [`RESERVE_SELECT`] after [`RESERVE_EXACT_UPDATE`]. Binds: n, name.
pub const RESERVE_EXACT_SELECT: &str =
    "SELECT max_id, CAST(? AS SIGNED) AS size, step, ordering FROM sequences WHERE name = ?";

/// [`RESERVE_EXACT_UPDATE`] of a lease: a global row (served in order at
/// request time) is refused by the statement itself and changes nothing.
/// Binds as [`RESERVE_EXACT_UPDATE`]; read back by [`RESERVE_EXACT_SELECT`].
pub const RESERVE_LEASE_UPDATE: &str = "UPDATE sequences \
     SET max_id = max_id + ?, updated_at = CURRENT_TIMESTAMP \
     WHERE name = ? AND format IS NULL AND ordering <> 'global' AND max_id <= ?";

impl Engine for sqlx::MySql {
    const DIALECT: Dialect = Dialect::Mysql;
    type Name = Vec<u8>;
    type Bytes = Vec<u8>;
    type Time = DateTime<Utc>;
    const RESERVING: Reserving = Reserving::UpdateThenSelect {
        reserve: (RESERVE_UPDATE, RESERVE_SELECT),
        exact: (RESERVE_EXACT_UPDATE, RESERVE_EXACT_SELECT),
        lease: (RESERVE_LEASE_UPDATE, RESERVE_EXACT_SELECT),
    };

    fn rows_affected(done: &MySqlQueryResult) -> u64 {
        done.rows_affected()
    }
}

/// The store on MariaDB / MySQL.
pub type MySqlStore = SqlStore<sqlx::MySql>;

impl Backend for MySqlStore {
    type Db = sqlx::MySql;

    fn connect_options(url: &str, _: &StoreOptions) -> Result<MySqlConnectOptions, StoreError> {
        super::connect_options(url)
    }

    fn pool_options(
        _url: &str,
        options: &StoreOptions,
        fence: Arc<Fence>,
        connect: MySqlConnectOptions,
    ) -> MySqlPoolOptions {
        super::bounded_pool(options, fence, connect)
    }
}
