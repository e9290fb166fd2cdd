//! One database, one pool: [`connect`] reads the URL's scheme once and hands
//! it to that backend (`postgres/`, `mysql/`, `sqlite/`), which opens one
//! pool and puts the sequence store and the worker leases over it.

use crate::store::migrator::Dialect;
use std::sync::Arc;

use sqlx::pool::PoolOptions;
use sqlx::{Connection, Pool};

use super::engine::SqlDb;
use super::sequences::fence::Fence;
use super::sequences::SqlStore;
use super::tls::connect_failed;
use super::workers::{SqlWorkerLeases, WorkerLeases};
use super::{mysql, postgres, sqlite, Store, StoreError, StoreOptions};

/// What each backend's sequence store tells [`connect`] (as bb8's
/// `ManageConnection` does for its backend crates): how its pool connects,
/// and the store and the worker leases over that pool.
pub(crate) trait Backend: Store + Sized {
    /// The sqlx database.
    type Db: SqlDb;

    /// The connect options of `url` with the statement bounds of `options`.
    fn connect_options(
        url: &str,
        options: &StoreOptions,
    ) -> Result<<<Self::Db as sqlx::Database>::Connection as Connection>::Options, StoreError>;

    /// The pool settings for `url` with `options` ([`StoreOptions::pool`]
    /// and what the backend adds): each new connection is checked by
    /// `fence` ([`check_connection`](crate::store::sequences::fence::check_connection), which fences over `connect`).
    fn pool_options(
        url: &str,
        options: &StoreOptions,
        fence: Arc<Fence>,
        connect: <<Self::Db as sqlx::Database>::Connection as Connection>::Options,
    ) -> PoolOptions<Self::Db>;
}

/// Connects a pool of backend `B` to `url` with `options`, and the failover
/// fence its connections are checked by (`options.fence`; off on SQLite).
/// Fails if the database cannot be reached, or its TLS handshake fails (a
/// configuration error, `tls.rs`).
pub(crate) async fn open_pool<B: Backend>(
    url: &str,
    options: &StoreOptions,
) -> Result<(Pool<B::Db>, Arc<Fence>), StoreError> {
    let connect = B::connect_options(url, options)?;
    let fence = match <B::Db as crate::store::engine::Engine>::DIALECT {
        Dialect::Sqlite => Fence::off(),
        Dialect::Postgres | Dialect::Mysql => Fence::new(options.fence),
    };
    let pool = B::pool_options(url, options, fence.clone(), connect.clone())
        .connect_with(connect)
        .await
        .map_err(connect_failed)?;
    Ok((pool, fence))
}

/// One pool of backend `B` on `url`, with both storages over it.
async fn open<B: Backend>(url: &str, options: &StoreOptions) -> Result<Database, StoreError> {
    let (pool, fence) = open_pool::<B>(url, options).await?;
    Ok(Database::new(
        SqlStore::<B::Db>::over(pool.clone(), options, fence),
        SqlWorkerLeases::<B::Db>::over(pool, options),
    ))
}

/// The storage of one database: its sequences and its snowflake worker
/// leases, over one pool. Cloning shares the pool.
#[derive(Clone)]
pub struct Database {
    sequences: Arc<dyn Store>,
    leases: Arc<dyn WorkerLeases>,
}

impl Database {
    /// The two storages of one backend, over the pool they share.
    pub(crate) fn new(sequences: impl Store, leases: impl WorkerLeases) -> Self {
        Database {
            sequences: Arc::new(sequences),
            leases: Arc::new(leases),
        }
    }

    /// The sequence store.
    pub fn sequences(&self) -> Arc<dyn Store> {
        self.sequences.clone()
    }

    /// The worker-lease storage.
    pub fn leases(&self) -> Arc<dyn WorkerLeases> {
        self.leases.clone()
    }

    /// A short name of the backend for logs ("postgres", ...).
    pub fn backend(&self) -> &'static str {
        self.sequences.backend()
    }
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

/// Opens the database named by `url`, choosing the backend by its scheme:
/// `postgres://` or `postgresql://`, `mysql://` or `mariadb://` (both served
/// by `mysql/`), `sqlite:` (e.g. `sqlite://seqd.db?mode=rwc`). One pool
/// of `options.max_connections` plus [`super::pool::LEASE_CONNECTIONS`]
/// serves the sequences and the worker leases.
///
/// It connects (so an unreachable database fails here) but does not run the
/// migrations: call [`Schema::migrate`](crate::store::Schema::migrate) or [`Schema::prepare_schema`](crate::store::Schema::prepare_schema) for that.
pub async fn connect(url: &str, options: &StoreOptions) -> Result<Database, StoreError> {
    match Dialect::of_url(url) {
        Ok((Dialect::Postgres, url)) => open::<postgres::PostgresStore>(&url, options).await,
        Ok((Dialect::Mysql, url)) => open::<mysql::MySqlStore>(&url, options).await,
        Ok((Dialect::Sqlite, url)) => open::<sqlite::SqliteStore>(&url, options).await,
        Err(scheme) => Err(StoreError::Config(format!(
            "unsupported database URL scheme {scheme:?}: \
             expected postgres://, mysql://, mariadb:// or sqlite:"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connect_rejects_unknown_schemes_without_echoing_the_url() {
        match connect("redis://user:secret@host/0", &StoreOptions::default()).await {
            Err(StoreError::Config(msg)) => {
                assert!(msg.contains("redis"), "{msg}");
                assert!(!msg.contains("secret"), "{msg}");
            }
            Err(other) => panic!("expected a Config error, got {other:?}"),
            Ok(_) => panic!("expected a Config error, got a database"),
        }
    }
}
