//! Connection pools that a stuck database cannot drain.
//!
//! Two things keep one locked row (an operator's `SELECT ... FOR UPDATE`, a
//! long `UPDATE`) or one silent network path from starving every sequence:
//!
//! - **Server-side bounds on every statement**, set per connection when it
//!   opens and kept below the allocator's fetch timeout ([`StoreOptions`]):
//!   PostgreSQL `lock_timeout` and `statement_timeout`; MariaDB
//!   `innodb_lock_wait_timeout` and `max_statement_time`; SQLite
//!   `busy_timeout`. A statement the database cannot finish in time fails
//!   there, and its connection is free again.
//! - **An abandoned operation closes its connection** (`Held`): when the
//!   allocator gives up on a fetch (its future is dropped), the connection it
//!   ran on is detached from the pool and closed, never handed back. A
//!   connection returned to the pool is pinged first, and on a path that went
//!   silent (packets dropped, no reset) that ping would hang and keep the pool
//!   slot forever.
//!
//! Idle connections are closed after [`StoreOptions::idle_timeout`], before
//! a load balancer or firewall on the path forgets them.

use std::time::Duration;

use sqlx::pool::{PoolConnection, PoolOptions};
use sqlx::{Database, Pool};

use super::migrator::{FenceOptions, MigrateMode, SchemaSetup};
use super::{unavailable, StoreError};

/// Connections a pool holds besides [`StoreOptions::max_connections`], for
/// the worker leases that share it (`crate::snowflake::lease`). They make one
/// call every few seconds, one at a time, and an abandoned call frees its
/// connection at once (`Held`), so they never hold more than this and
/// segment fetches keep `max_connections`.
pub const LEASE_CONNECTIONS: u32 = 1;

/// `--db-max-connections` by default.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 10;

/// Pool size and the bounds of every statement a store sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// Most connections for the sequence store; the pool holds
    /// [`LEASE_CONNECTIONS`] more, for the worker leases.
    pub max_connections: u32,
    /// Longest a statement may run on the server (PostgreSQL
    /// `statement_timeout`, MariaDB `max_statement_time`).
    pub statement_timeout: Duration,
    /// Longest a statement waits for a lock (PostgreSQL `lock_timeout`,
    /// MariaDB `innodb_lock_wait_timeout` in whole seconds, at least 1, SQLite
    /// `busy_timeout`).
    pub lock_timeout: Duration,
    /// Longest a caller waits for a pooled connection.
    pub acquire_timeout: Duration,
    /// An idle connection is closed after this.
    pub idle_timeout: Duration,
    /// A connection is replaced after this, idle or not.
    pub max_lifetime: Duration,
    /// PostgreSQL: the schema of seqd's tables and history (`--schema`),
    /// set as `search_path` on every connection; `None` leaves the URL's or
    /// the server's `search_path`. Checked by
    /// [`super::migrator::check_schema_name`]. Ignored by the other backends.
    pub schema: Option<String>,
    /// `--migrate`: what the worker leases' [`super::WorkerLeases::migrate`]
    /// does (the sequence store is prepared by
    /// [`super::Schema::prepare_schema`], which takes the mode).
    pub migrate: MigrateMode,
    /// `--failover-fence` and its margin (docs/high-availability.md).
    pub fence: FenceOptions,
}

/// The allocator's default fetch timeout, which the default bounds sit under.
const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(5);

impl Default for StoreOptions {
    /// Ten connections (and one for the worker leases), bounds under the
    /// default 5 s fetch timeout (3 s per statement, 2 s per lock wait).
    fn default() -> Self {
        StoreOptions::for_fetch_timeout(DEFAULT_FETCH_TIMEOUT)
    }
}

impl StoreOptions {
    /// Bounds under a fetch timeout: a statement may run 3/5 of it and wait
    /// for a lock 2/5 of it, so the database ends a stuck statement before
    /// the allocator abandons it.
    pub fn for_fetch_timeout(fetch_timeout: Duration) -> Self {
        StoreOptions {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            statement_timeout: fetch_timeout * 3 / 5,
            lock_timeout: fetch_timeout * 2 / 5,
            acquire_timeout: Duration::from_secs(3).min(fetch_timeout),
            idle_timeout: Duration::from_secs(60),
            max_lifetime: Duration::from_secs(30 * 60),
            schema: None,
            migrate: MigrateMode::Auto,
            fence: FenceOptions::default(),
        }
    }

    /// The same options with seqd's tables in PostgreSQL schema `schema`.
    pub fn with_schema(mut self, schema: Option<String>) -> Self {
        self.schema = schema;
        self
    }

    /// The same options with the worker leases' migrations done as `mode` says.
    pub fn with_migrate(mut self, mode: MigrateMode) -> Self {
        self.migrate = mode;
        self
    }

    /// The same options with the failover fence `fence`.
    pub fn with_fence(mut self, fence: FenceOptions) -> Self {
        self.fence = fence;
        self
    }

    /// The same options with `setup`'s `--schema`, `--migrate` and failover
    /// fence.
    pub fn with_setup(self, setup: &SchemaSetup) -> Self {
        self.with_schema(setup.schema.clone())
            .with_migrate(setup.mode)
            .with_fence(setup.fence)
    }

    /// The same options with `n` connections at most.
    pub fn with_max_connections(mut self, n: u32) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// The pool settings these options give (size, with
    /// [`LEASE_CONNECTIONS`] added; acquire, idle and lifetime bounds); the
    /// statement bounds are set by each backend.
    pub(crate) fn pool<DB: Database>(&self) -> PoolOptions<DB> {
        PoolOptions::new()
            .max_connections(self.max_connections + LEASE_CONNECTIONS)
            .acquire_timeout(self.acquire_timeout)
            .idle_timeout(self.idle_timeout)
            .max_lifetime(self.max_lifetime)
    }
}

/// A pooled connection held for one operation. [`Held::finish`] hands it
/// back to the pool when the database answered; dropped any other way (a
/// broken connection, or a future dropped half-way, as a fetch the allocator
/// gave up on is), it is detached from the pool and closed, so the pool slot
/// is free at once and a statement still running on it can never hold one.
pub(crate) struct Held<DB: Database>(Option<PoolConnection<DB>>);

impl<DB: Database> Held<DB> {
    /// Takes a connection from `pool`.
    pub(crate) async fn acquire(pool: &Pool<DB>) -> Result<Self, StoreError> {
        pool.acquire()
            .await
            .map(|c| Held(Some(c)))
            .map_err(unavailable)
    }

    /// The connection, to run statements on.
    pub(crate) fn conn(&mut self) -> &mut DB::Connection {
        self.0
            .as_deref_mut()
            .expect("a held connection is there until released")
    }

    /// Settles the operation's `outcome`: the connection goes back to the
    /// pool when the database answered (a result, or an error it reported,
    /// such as a lock timeout); on any other error (I/O, protocol) it is
    /// closed. The error is narrowed to [`StoreError`].
    pub(crate) fn finish<T>(self, outcome: Result<T, sqlx::Error>) -> Result<T, StoreError> {
        self.finish_with(outcome, unavailable)
    }

    /// Like [`Held::finish`], with the error narrowed by `narrow` (e.g.
    /// `insert_failed`, which tells a taken key from an outage).
    pub(crate) fn finish_with<T>(
        mut self,
        outcome: Result<T, sqlx::Error>,
        narrow: fn(sqlx::Error) -> StoreError,
    ) -> Result<T, StoreError> {
        if matches!(&outcome, Ok(_) | Err(sqlx::Error::Database(_))) {
            drop(self.0.take());
        }
        outcome.map_err(narrow)
    }
}

impl<DB: Database> Drop for Held<DB> {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            // Detaching gives the pool slot back now; dropping the raw
            // connection closes its socket without waiting for the server.
            drop(conn.detach());
            tracing::debug!(
                "a database operation was abandoned or failed; its connection is closed"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_sit_under_the_fetch_timeout() {
        let o = StoreOptions::default();
        assert_eq!(o.statement_timeout, Duration::from_secs(3));
        assert_eq!(o.lock_timeout, Duration::from_secs(2));
        let o = StoreOptions::for_fetch_timeout(Duration::from_secs(1));
        assert!(o.lock_timeout < o.statement_timeout);
        assert!(o.statement_timeout < Duration::from_secs(1));
        assert_eq!(o.with_max_connections(0).max_connections, 1);
    }
}
