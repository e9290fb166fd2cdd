//! [`sql_sequences!`]: the storage traits of a SQL backend's store, each
//! method passed on to [`Sequences`](super::Sequences) over the store's
//! pool, the stripe record's statements ([`crate::store::stripes::record`])
//! and the migrator. One line per backend, in its `sequences.rs`.

#[allow(unused_imports)] // for the links of the documentation
use super::{SequenceDb, Sequences};
#[allow(unused_imports)] // for the links of the documentation
use crate::store::{BumpSql, Catalog, Schema, Segments, StripeRecords};

/// Writes `impl $trait for $store` (under `async_trait`) for
/// [`sql_sequences!`]: each method listed as `fn name(args) -> T;` passes
/// its arguments on to the same method of [`Sequences`] over the store's
/// pool; what follows the list is written into the impl as it is.
macro_rules! on_sequences {
    (
        $store:ty => $trait:path {
            $(fn $name:ident($($arg:ident: $ty:ty),*) -> $t:ty;)*
        }
        $($rest:tt)*
    ) => {
        #[::async_trait::async_trait]
        impl $trait for $store {
            $(
                async fn $name(&self, $($arg: $ty),*) -> Result<$t, $crate::store::StoreError> {
                    self.sequences().$name($($arg),*).await
                }
            )*
            $($rest)*
        }
    };
}
pub(crate) use on_sequences;

/// Implements `connect`, `from_pool` and `pool` of a SQL backend's store,
/// [`Segments`], its reserving statements
/// ([`ReserveOnce`](crate::store::sql::ReserveOnce)) and [`Catalog`] for a
/// SQL backend's store `$store` (with a `pool` field of the sqlx database
/// `$db`, a [`SequenceDb`]) over [`Sequences`], its bump's statements
/// ([`BumpSql`]), [`Schema`] and [`StripeRecords`]. `schema $field` names
/// the field holding `--schema` (PostgreSQL), which [`Schema::migrate`]
/// creates if missing.
macro_rules! sql_sequences {
    ($store:ty, $db:ty $(, schema $schema:ident)?) => {
        impl $store {
            /// Connects to `url` with the default
            /// [`StoreOptions`]($crate::store::StoreOptions). Fails if the
            /// database cannot be reached. Does not run the migrations.
            pub async fn connect(url: &str) -> Result<Self, $crate::store::StoreError> {
                Self::connect_with(url, &$crate::store::StoreOptions::default()).await
            }

            /// Wraps an existing pool, without the failover fence (on
            /// PostgreSQL, the pool's `search_path` as it is).
            pub fn from_pool(pool: ::sqlx::Pool<$db>) -> Self {
                let options = $crate::store::StoreOptions::default();
                let fence = $crate::store::sequences::fence::Fence::off();
                <Self as $crate::store::database::Backend>::over_pool(pool, &options, fence)
            }

            /// The underlying pool.
            pub fn pool(&self) -> &::sqlx::Pool<$db> {
                &self.pool
            }

            /// The sequence store over the pool.
            fn sequences(&self) -> $crate::store::sequences::Sequences<'_, $db> {
                $crate::store::sequences::Sequences(&self.pool)
            }
        }

        #[::async_trait::async_trait]
        impl $crate::store::sql::ReserveOnce for $store {
            async fn reserve_once(
                &self,
                name: &$crate::domain::SeqName,
                size: i64,
                how: $crate::store::sql::Reserve,
            ) -> Result<Option<$crate::store::Reservation>, $crate::store::StoreError> {
                self.sequences().reserve(name, size, how).await
            }

            async fn refusal(
                &self,
                name: &$crate::domain::SeqName,
                how: $crate::store::sql::Reserve,
            ) -> Result<$crate::store::StoreError, $crate::store::StoreError> {
                self.sequences().refusal(name, how).await
            }

            async fn reserve_group_once(
                &self,
                names: &[&str],
                size: i64,
            ) -> Result<Vec<(String, $crate::store::Reservation)>, $crate::store::StoreError> {
                self.sequences().reserve_group(names, size).await
            }
        }

        #[::async_trait::async_trait]
        impl $crate::store::Segments for $store {
            async fn reserve(
                &self,
                name: &$crate::domain::SeqName,
                min_size: i64,
            ) -> Result<$crate::store::Reservation, $crate::store::StoreError> {
                $crate::store::sql::reserve_flow(self, name, min_size).await
            }

            fn group_limit(&self) -> usize {
                $crate::store::sql::GROUP_LIMIT
            }

            async fn reserve_group(
                &self,
                asks: &[($crate::domain::SeqName, i64)],
            ) -> Vec<$crate::store::Reserved> {
                $crate::store::sql::reserve_group_flow(self, asks).await
            }

            async fn reserve_within(&self, name: &$crate::domain::SeqName, n: i64, cap: i64) -> $crate::store::Reserved {
                let how = $crate::store::sql::Reserve::Exact(cap);
                $crate::store::sql::reserve_exact_flow(self, name, n, how).await
            }

            async fn reserve_lease(&self, name: &$crate::domain::SeqName, n: i64, cap: i64) -> $crate::store::Reserved {
                let how = $crate::store::sql::Reserve::Lease(cap);
                $crate::store::sql::reserve_exact_flow(self, name, n, how).await
            }

            async fn compare_and_set_max_id(
                &self,
                name: &$crate::domain::SeqName,
                expected: i64,
                new: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                self.sequences().compare_and_set(name, expected, new).await
            }
        }

        $crate::store::sequences::on_sequences! {
            $store => $crate::store::Catalog {
                fn create(seq: &$crate::domain::NewSequence) -> $crate::store::SequenceRow;
                fn get(name: &$crate::domain::SeqName) -> Option<$crate::store::SequenceRow>;
                fn settings_of(names: &[$crate::domain::SeqName])
                    -> Vec<$crate::store::SequenceRow>;
                fn list() -> Vec<$crate::store::SequenceRow>;
                fn list_page(
                    prefix: Option<&$crate::domain::NamePrefix>,
                    after: Option<&$crate::domain::SeqName>,
                    limit: u32
                ) -> $crate::store::SequencePage;
                fn update(name: &$crate::domain::SeqName, patch: &$crate::store::SequencePatch)
                    -> $crate::store::SequenceRow;
                fn create_period(parent: &$crate::domain::SeqName, key: &str) -> bool;
                fn list_periods(parent: &$crate::domain::SeqName)
                    -> Vec<$crate::store::PeriodRow>;
                fn delete_periods(parent: &$crate::domain::SeqName, keys: &[String]) -> u64;
            }

            async fn bump(
                &self,
                names: Option<&[$crate::domain::SeqName]>,
                by: i64,
                mode: $crate::store::BumpMode,
            ) -> Result<Vec<$crate::store::Bumped>, $crate::store::StoreError> {
                $crate::store::run_bump::<Self>(&self.pool, names, by, mode).await
            }
        }

        #[::async_trait::async_trait]
        impl $crate::store::BumpSql for $store {
            type Db = $db;
            const BEGIN: &'static str = $crate::store::sequences::begin_bump(
                <$db as $crate::store::workers::LeaseDb>::DIALECT,
            );

            async fn widen_bound(
                conn: &mut <$db as ::sqlx::Database>::Connection,
            ) -> Result<(), ::sqlx::Error> {
                $crate::store::sequences::Sequences::<$db>::widen_bound(conn).await
            }

            async fn read_bump(
                conn: &mut <$db as ::sqlx::Database>::Connection,
                names: Option<&[$crate::domain::SeqName]>,
                lock: bool,
            ) -> Result<Vec<(String, i64)>, ::sqlx::Error> {
                $crate::store::sequences::Sequences::<$db>::read_bump(conn, names, lock).await
            }

            async fn add_bump(
                conn: &mut <$db as ::sqlx::Database>::Connection,
                names: Option<&[$crate::domain::SeqName]>,
                by: i64,
            ) -> Result<u64, ::sqlx::Error> {
                $crate::store::sequences::Sequences::<$db>::add_bump(conn, names, by).await
            }
        }

        #[::async_trait::async_trait]
        impl $crate::store::Schema for $store {
            async fn migrate(&self) -> Result<(), $crate::store::StoreError> {
                let schema: Option<&str> = None $(.or(self.$schema.as_deref()))?;
                $crate::store::migrator::Migrator::prepare(
                    <$db as $crate::store::workers::LeaseDb>::pool_ref(&self.pool),
                    $crate::store::MigrateMode::Auto,
                    $crate::store::migrator::create_schema_sql(schema),
                )
                .await
            }

            async fn check_schema(&self) -> Result<(), $crate::store::StoreError> {
                $crate::store::migrator::Migrator::prepare(
                    <$db as $crate::store::workers::LeaseDb>::pool_ref(&self.pool),
                    $crate::store::MigrateMode::Check,
                    None,
                )
                .await
            }

            async fn prepare_schema(
                &self,
                mode: $crate::store::MigrateMode,
            ) -> Result<(), $crate::store::StoreError> {
                match mode {
                    $crate::store::MigrateMode::Auto => {
                        $crate::store::sequences::fence::refuse_tables_on_promoted::<$db>(&self.fence, &self.pool)
                            .await?;
                        self.migrate().await?
                    }
                    $crate::store::MigrateMode::Check => self.check_schema().await?,
                    $crate::store::MigrateMode::Off => {}
                }
                $crate::store::sequences::fence::verify::<$db>(&self.fence, &self.pool).await
            }

            fn fence_status(&self) -> Option<$crate::store::FenceStatus> {
                self.fence.enabled().then(|| self.fence.status())
            }

            async fn ping(&self) -> Result<(), $crate::store::StoreError> {
                let dialect = <$db as $crate::store::workers::LeaseDb>::DIALECT;
                $crate::store::schema_ready(&self.pool, dialect, self.check_schema()).await
            }

            fn backend(&self) -> &'static str {
                <$db as $crate::store::workers::LeaseDb>::DIALECT.name()
            }
        }

        #[::async_trait::async_trait]
        impl $crate::store::StripeRecords for $store {
            async fn stripe_record(
                &self,
            ) -> Result<
                Option<$crate::store::stripes::record::StripeRecord>,
                $crate::store::StoreError,
            > {
                let dialect = <$db as $crate::store::workers::LeaseDb>::DIALECT;
                $crate::store::stripes::record::read_record(&self.pool, dialect).await
            }

            async fn put_stripe_record(
                &self,
                record: &$crate::store::stripes::record::StripeRecord,
                replace: bool,
            ) -> Result<$crate::store::stripes::record::StripeRecord, $crate::store::StoreError>
            {
                let dialect = <$db as $crate::store::workers::LeaseDb>::DIALECT;
                $crate::store::stripes::record::put_record(&self.pool, dialect, record, replace)
                    .await
            }

            async fn drop_stripe_record(
                &self,
                database_id: &str,
            ) -> Result<bool, $crate::store::StoreError> {
                let dialect = <$db as $crate::store::workers::LeaseDb>::DIALECT;
                $crate::store::stripes::record::delete_record(&self.pool, dialect, database_id)
                    .await
            }

            async fn join_stripe_set(
                &self,
                set_id: &str,
            ) -> Result<
                Option<$crate::store::stripes::record::StripeRecord>,
                $crate::store::StoreError,
            > {
                let dialect = <$db as $crate::store::workers::LeaseDb>::DIALECT;
                $crate::store::stripes::record::join_set(&self.pool, dialect, set_id).await
            }
        }
    };
}
pub(crate) use sql_sequences;
