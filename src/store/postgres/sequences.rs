//! [`Store`](crate::store::Store) on PostgreSQL.
//!
//! A segment is reserved by one `UPDATE ... RETURNING` statement (see
//! [`RESERVE`]); the row lock PostgreSQL takes for the update serialises
//! concurrent reservations from any number of instances.
//!
//! `created_at`/`updated_at` are `TIMESTAMP` (without time zone). sqlx opens
//! every session with `TimeZone=UTC`, so `CURRENT_TIMESTAMP` is stored as UTC
//! and read back as a naive UTC time.
//!
//! The schema of seqd's tables and history is [`StoreOptions::schema`]
//! (`--schema`), set as `search_path` on every connection and created by the
//! migrator if missing. The URL may select one too, with libpq's `options`
//! parameter, e.g. `postgres://host/db?options=-csearch_path%3Dmy_schema`.

use sqlx::pool::PoolOptions;
use sqlx::postgres::{PgConnectOptions, PgQueryResult};

use std::sync::Arc;

use crate::store::database::Backend;
use crate::store::engine::Engine;
use crate::store::migrator::Dialect;
use crate::store::page_sql_in;
use crate::store::sequences::fence::{check_connection, Fence};
use crate::store::sequences::{Reserving, SqlStore};
use crate::store::{StoreError, StoreOptions};

/// Reserves `GREATEST(step, $2)` IDs of the row named `$1` unless that would
/// pass `i64::MAX`, and returns the new `max_id`, the amount added and the
/// row's step. `step` is not modified by the statement, so the returned size is
/// exactly what this statement added.
pub const RESERVE: &str = "UPDATE sequences \
     SET max_id = max_id + GREATEST(step, $2), updated_at = CURRENT_TIMESTAMP \
     WHERE name = $1 AND format IS NULL AND max_id <= 9223372036854775807 - GREATEST(step, $2) \
     RETURNING max_id, GREATEST(step, $2) AS size, step, ordering";

/// Reserves exactly `$2` IDs of the row named `$1` (a global sequence's
/// merged requests, a serial period's counter) unless that would pass `$3`
/// (`i64::MAX`, or the capacity of `{seq:0N}`); returns as [`RESERVE`].
/// `$3 - $2` cannot overflow: `$3 <= i64::MAX` and `$2 >= 1`.
pub const RESERVE_EXACT: &str = "UPDATE sequences \
     SET max_id = max_id + $2, updated_at = CURRENT_TIMESTAMP \
     WHERE name = $1 AND format IS NULL AND max_id <= $3 - $2 \
     RETURNING max_id, $2 AS size, step, ordering";

/// [`RESERVE_EXACT`] of a lease: a global row (served in order at request
/// time) is refused by the statement itself and changes nothing.
pub const RESERVE_LEASE: &str = "UPDATE sequences \
     SET max_id = max_id + $2, updated_at = CURRENT_TIMESTAMP \
     WHERE name = $1 AND format IS NULL AND ordering <> 'global' AND max_id <= $3 - $2 \
     RETURNING max_id, $2 AS size, step, ordering";

/// One page of rows: names compared with `lower_op` (`>` or `>=`) to `$1`
/// and below `$2`, at most `$3` rows, in byte order. Every comparison and
/// the order are on `name COLLATE "C"` (byte order, as on SQLite and MySQL,
/// whatever the database's collation), which the index of migration 0003
/// (`sequences_name_bytes`) serves: the primary key's index, in the
/// database's collation, cannot, and each page would sort the whole table.
pub fn page_sql(lower_op: &str) -> String {
    page_sql_in(Dialect::Postgres, lower_op)
}

impl Engine for sqlx::Postgres {
    const DIALECT: Dialect = Dialect::Postgres;
    type Name = String;
    type Bytes = Vec<u8>;
    type Time = chrono::NaiveDateTime;
    const RESERVING: Reserving = Reserving::Returning {
        reserve: RESERVE,
        exact: RESERVE_EXACT,
        lease: RESERVE_LEASE,
    };

    fn rows_affected(done: &PgQueryResult) -> u64 {
        done.rows_affected()
    }
}

/// The store on PostgreSQL.
pub type PostgresStore = SqlStore<sqlx::Postgres>;

impl Backend for PostgresStore {
    type Db = sqlx::Postgres;

    fn connect_options(url: &str, options: &StoreOptions) -> Result<PgConnectOptions, StoreError> {
        super::connect_options(url, options)
    }

    fn pool_options(
        _url: &str,
        options: &StoreOptions,
        fence: Arc<Fence>,
        connect: PgConnectOptions,
    ) -> PoolOptions<sqlx::Postgres> {
        options.pool().after_connect(move |conn, _| {
            let (fence, connect) = (fence.clone(), connect.clone());
            Box::pin(
                async move { check_connection::<sqlx::Postgres>(&fence, conn, || connect).await },
            )
        })
    }
}
