//! [`SqlStore`]: the store of a SQL backend, one plain type per backend
//! over its pool (`PostgresStore`, `MySqlStore`, `SqliteStore`), and the
//! traits it implements once for every [`SqlDb`] here ([`Segments`],
//! [`Schema`], [`StripeRecords`]); [`Catalog`](crate::store::Catalog) and
//! the reserving statements are in [`super`], [`Tokens`] in
//! [`crate::store::tokens`].

use std::sync::Arc;

use async_trait::async_trait;
use sqlx::Pool;

use super::fence::{refuse_tables_on_promoted, verify, Fence};
use crate::domain::SeqName;
use crate::store::database::Backend;
use crate::store::engine::{Engine, SqlDb};
use crate::store::migrator::{create_schema_sql, Migrator};
use crate::store::sql::{
    reserve_exact_flow, reserve_flow, reserve_group_flow, Reserve, GROUP_LIMIT,
};
use crate::store::stripes::record::{
    delete_record, join_set, put_record, read_record, StripeRecord,
};
use crate::store::{
    schema_ready, FenceStatus, MigrateMode, Reservation, Reserved, Schema, Segments, StoreError,
    StoreOptions, StripeRecords,
};

#[allow(unused_imports)] // for the links of the documentation
use crate::store::Tokens;

/// Whether a compare-and-set took.
type Set = Result<bool, StoreError>;

/// The store of a SQL backend over its pool: the sequence table, its
/// failover fence and, on PostgreSQL, the schema (`--schema`) that
/// [`Schema::migrate`] creates if missing.
pub struct SqlStore<DB: sqlx::Database> {
    pub(crate) pool: Pool<DB>,
    pub(crate) fence: Arc<Fence>,
    pub(crate) schema: Option<String>,
}

impl<DB: sqlx::Database> Clone for SqlStore<DB> {
    fn clone(&self) -> Self {
        SqlStore {
            pool: self.pool.clone(),
            fence: self.fence.clone(),
            schema: self.schema.clone(),
        }
    }
}

impl<DB: sqlx::Database> std::fmt::Debug for SqlStore<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlStore")
            .field("backend", &DB::NAME)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

// The bounds name the crate's own traits: every backend is one of this
// crate's three, none is for a user to add.
#[allow(private_bounds)]
impl<DB: SqlDb> SqlStore<DB>
where
    Self: Backend<Db = DB>,
{
    /// Connects to `url` with the default [`StoreOptions`]. Fails if the
    /// database cannot be reached. Does not run the migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, &StoreOptions::default()).await
    }

    /// Connects to `url` with `options`: one pool, with the failover fence
    /// where `options` turn it on (PostgreSQL, MariaDB). Does not run the
    /// migrations.
    pub async fn connect_with(url: &str, options: &StoreOptions) -> Result<Self, StoreError> {
        let (pool, fence) = crate::store::database::open_pool::<Self>(url, options).await?;
        Ok(Self::over(pool, options, fence))
    }

    /// Wraps an existing pool, without the failover fence (on PostgreSQL,
    /// the pool's `search_path` as it is).
    pub fn from_pool(pool: Pool<DB>) -> Self {
        Self::over(pool, &StoreOptions::default(), Fence::off())
    }
}

#[allow(private_bounds)] // as above
impl<DB: Engine> SqlStore<DB> {
    /// The store over `pool` with `fence` (`open_pool` makes it off on
    /// SQLite, which has no replica to fail over to).
    pub(crate) fn over(pool: Pool<DB>, options: &StoreOptions, fence: Arc<Fence>) -> Self {
        SqlStore {
            pool,
            fence,
            schema: options.schema.clone(),
        }
    }

    /// The underlying pool.
    pub fn pool(&self) -> &Pool<DB> {
        &self.pool
    }
}

#[async_trait]
impl<DB: SqlDb> Segments for SqlStore<DB> {
    async fn reserve(&self, name: &SeqName, min_size: i64) -> Result<Reservation, StoreError> {
        reserve_flow(self, name, min_size).await
    }

    fn group_limit(&self) -> usize {
        GROUP_LIMIT
    }

    async fn reserve_group(&self, asks: &[(SeqName, i64)]) -> Vec<Reserved> {
        reserve_group_flow(self, asks).await
    }

    async fn reserve_within(&self, name: &SeqName, n: i64, cap: i64) -> Reserved {
        reserve_exact_flow(self, name, n, Reserve::Exact(cap)).await
    }

    async fn reserve_lease(&self, name: &SeqName, n: i64, cap: i64) -> Reserved {
        reserve_exact_flow(self, name, n, Reserve::Lease(cap)).await
    }

    async fn compare_and_set_max_id(&self, name: &SeqName, from: i64, to: i64) -> Set {
        self.compare_and_set(name, from, to).await
    }
}

#[async_trait]
impl<DB: SqlDb> Schema for SqlStore<DB> {
    async fn migrate(&self) -> Result<(), StoreError> {
        let schema = match DB::DIALECT {
            crate::store::Dialect::Postgres => self.schema.as_deref(),
            crate::store::Dialect::Mysql | crate::store::Dialect::Sqlite => None,
        };
        let pool = &self.pool;
        Migrator::prepare(pool, MigrateMode::Auto, create_schema_sql(schema)).await
    }

    async fn check_schema(&self) -> Result<(), StoreError> {
        Migrator::prepare(&self.pool, MigrateMode::Check, None).await
    }

    async fn prepare_schema(&self, mode: MigrateMode) -> Result<(), StoreError> {
        match mode {
            MigrateMode::Auto => {
                refuse_tables_on_promoted::<DB>(&self.fence, &self.pool).await?;
                self.migrate().await?
            }
            MigrateMode::Check => self.check_schema().await?,
            MigrateMode::Off => {}
        }
        verify::<DB>(&self.fence, &self.pool).await
    }

    fn fence_status(&self) -> Option<FenceStatus> {
        self.fence.enabled().then(|| self.fence.status())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        schema_ready(&self.pool, self.check_schema()).await
    }

    fn backend(&self) -> &'static str {
        DB::DIALECT.name()
    }
}

#[async_trait]
impl<DB: SqlDb> StripeRecords for SqlStore<DB> {
    async fn stripe_record(&self) -> Result<Option<StripeRecord>, StoreError> {
        read_record(&self.pool).await
    }

    async fn put_stripe_record(
        &self,
        record: &StripeRecord,
        replace: bool,
    ) -> Result<StripeRecord, StoreError> {
        put_record(&self.pool, record, replace).await
    }

    async fn drop_stripe_record(&self, database_id: &str) -> Result<bool, StoreError> {
        delete_record(&self.pool, database_id).await
    }

    async fn join_stripe_set(&self, set_id: &str) -> Result<Option<StripeRecord>, StoreError> {
        join_set(&self.pool, set_id).await
    }
}
