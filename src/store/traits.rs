//! The storage traits, split by who needs what (docs/design.md, "The
//! storage traits"): [`Segments`] for the allocator (in the core crate,
//! `seqd_core::store`, with the [`Reservation`](super::Reservation) and
//! [`StoreError`] it answers), [`Catalog`] for the
//! service's admin calls, [`Schema`] and [`StripeRecords`] for start-up and
//! the operators' tools, [`Tokens`] for the client tokens, and [`Store`],
//! the five together.

use async_trait::async_trait;

use super::stripes::{self, StripeRecord};
use super::{
    BumpMode, Bumped, FenceStatus, MigrateMode, PeriodRow, SequencePage, SequencePatch,
    SequenceRow, StoreError, TokenRow,
};
use crate::domain::{NamePrefix, NewSequence, SeqName};
pub use seqd_core::store::Segments;

/// The sequences as rows: create, read, list, change, bump, and the period
/// counter rows of serial sequences. What the service's admin calls and the
/// operators' tools need.
#[async_trait]
pub trait Catalog: Send + Sync + 'static {
    /// Inserts a new row with `max_id = start - 1`.
    async fn create(&self, seq: &NewSequence) -> Result<SequenceRow, StoreError>;

    /// Creates the counter row of period `key` of serial sequence `parent`
    /// (`parent@key`) if it does not exist, in one statement that tolerates
    /// other instances doing the same at once: `max_id = counter_start - 1`,
    /// the parent's `step` and `ordering`. True when this call inserted it.
    /// [`StoreError::NotFound`] when `parent` has no row.
    async fn create_period(&self, parent: &SeqName, key: &str) -> Result<bool, StoreError> {
        let _ = (parent, key);
        Err(StoreError::Config(
            "serial numbers: not built for this store yet".into(),
        ))
    }

    /// The counter rows of serial sequence `parent`, ordered by key.
    async fn list_periods(&self, parent: &SeqName) -> Result<Vec<PeriodRow>, StoreError> {
        let _ = parent;
        Err(StoreError::Config(
            "serial numbers: not built for this store yet".into(),
        ))
    }

    /// Deletes the counter rows of `parent` with these keys; the number
    /// deleted.
    async fn delete_periods(&self, parent: &SeqName, keys: &[String]) -> Result<u64, StoreError> {
        let _ = (parent, keys);
        Err(StoreError::Config(
            "serial numbers: not built for this store yet".into(),
        ))
    }

    /// Reads one row.
    async fn get(&self, name: &SeqName) -> Result<Option<SequenceRow>, StoreError>;

    /// Reads the rows of `names` (those that exist, in no particular
    /// order; a row whose settings do not parse is left out): what each
    /// instance reads every few seconds to apply settings changed elsewhere
    /// (docs/design.md, "Settings changes reach every instance"). The
    /// backends read [`SETTINGS_CHUNK`](super::SETTINGS_CHUNK) names per statement; this default
    /// reads them one by one.
    async fn settings_of(&self, names: &[SeqName]) -> Result<Vec<SequenceRow>, StoreError> {
        let mut rows = Vec::with_capacity(names.len());
        for name in names {
            if let Some(row) = self.get(name).await? {
                rows.push(row);
            }
        }
        Ok(rows)
    }

    /// Reads every row, ordered by name.
    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError>;

    /// Reads one page: at most `limit` (1..=[`MAX_PAGE`](super::MAX_PAGE)) rows whose name
    /// starts with `prefix` (any name when `None`) and is above `after` (all
    /// such rows when `None`), ordered by name in byte order, as
    /// [`Catalog::list`] is; [`SequencePage::more`] says whether more rows
    /// with the prefix follow.
    ///
    /// The database reads only the page (plus one row), in time independent
    /// of the table's size: the prefix is the range `[prefix, prefix{)` of
    /// the names in byte order (see [`NamePrefix::upper_bound`]), which the
    /// index on the names serves (PostgreSQL: the one on
    /// `name COLLATE "C"`, `migrations/postgres/0003_*`).
    async fn list_page(
        &self,
        prefix: Option<&NamePrefix>,
        after: Option<&SeqName>,
        limit: u32,
    ) -> Result<SequencePage, StoreError>;

    /// Changes `step` and/or `description` of an existing row.
    async fn update(
        &self,
        name: &SeqName,
        patch: &SequencePatch,
    ) -> Result<SequenceRow, StoreError>;

    /// Raises `max_id` by `by` (1..=`i64::MAX`) on every row named in `names`
    /// (duplicates count once) and on every period counter row of each
    /// (`name@key`, the byte range
    /// [`period_rows_range`](crate::domain::period_rows_range), so `ord` never
    /// matches `order@...` nor does `o_d` match `ord@...`), or on every row
    /// when `names` is `None`, in one transaction: all rows or none. A serial
    /// sequence's own row hands out nothing; its counters are what a lagging
    /// replica lost, so they are fenced with it. Returns each row's `max_id`
    /// before and after, ordered by name.
    ///
    /// A name without a row, or a row (a counter included) that would pass
    /// `i64::MAX`, refuses the whole bump with [`StoreError::BumpRefused`]
    /// naming them all. The rows are read under their row locks (SQLite: the
    /// database's write lock) and changed by one set-based
    /// `max_id = max_id + by`, so reservations running meanwhile serialise
    /// with it: none is lost, and the values returned are exact. With
    /// [`BumpMode::DryRun`] the same checks run on a plain read and nothing
    /// is written.
    async fn bump(
        &self,
        names: Option<&[SeqName]>,
        by: i64,
        mode: BumpMode,
    ) -> Result<Vec<Bumped>, StoreError>;
}

/// The schema and the database behind a store: migrations, the schema
/// check, reachability and the backend's name.
#[async_trait]
pub trait Schema: Send + Sync + 'static {
    /// Applies the embedded migrations of this backend (idempotent), with
    /// seqd's own migrator (see [`migrator`](super::migrator)); fails with
    /// [`StoreError::Migration`].
    async fn migrate(&self) -> Result<(), StoreError>;

    /// Checks that every migration of this backend is applied, running no
    /// DDL; fails with [`StoreError::Migration`] naming what is missing.
    /// A store without a schema (in memory) has nothing to check.
    async fn check_schema(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Prepares the schema as `mode` says: [`Schema::migrate`],
    /// [`Schema::check_schema`], or nothing; then, on a database with the
    /// failover fence, checks the server against its record and fences it
    /// when it changed (docs/high-availability.md), before anything is
    /// reserved.
    async fn prepare_schema(&self, mode: MigrateMode) -> Result<(), StoreError> {
        match mode {
            MigrateMode::Auto => self.migrate().await,
            MigrateMode::Check => self.check_schema().await,
            MigrateMode::Off => Ok(()),
        }
    }

    /// The failover fence of this database (`None`: off, or a store that
    /// has none).
    fn fence_status(&self) -> Option<FenceStatus> {
        None
    }

    /// Checks that the database answers and the schema is in place.
    async fn ping(&self) -> Result<(), StoreError>;

    /// A short name of the backend for logs and the monitor ("postgres", ...).
    fn backend(&self) -> &'static str;
}

/// The stripe record of a database (`seqd_stripe`) and the state of the
/// stripes of a store over several databases.
#[async_trait]
pub trait StripeRecords: Send + Sync + 'static {
    /// The state of each stripe of a store over several databases; empty for
    /// a single database.
    fn stripe_status(&self) -> Vec<stripes::StripeStatus> {
        Vec::new()
    }

    /// The stripe whose blocks hold `id` (a store over several databases);
    /// `None` for a single database.
    fn stripe_of(&self, id: i64) -> Option<u32> {
        let _ = id;
        None
    }

    /// This database's stripe record (`seqd_stripe`), `None` when it has no
    /// row. A missing table is [`StoreError::Migration`] (the schema is
    /// behind); [`stripes::bind_stripes`] decides what that means
    /// (under `--migrate off`, with one database: no record).
    async fn stripe_record(&self) -> Result<Option<StripeRecord>, StoreError>;

    /// Writes this database's stripe record and returns the row in force
    /// afterwards. `replace = false`: inserts `record` only if there is no
    /// row (race-free: of two writers one inserts, the other gets its row);
    /// `replace = true`: inserts it or overwrites index, count and block,
    /// keeping the row's `database_id`. A record no layout can have
    /// (index not below count, block below 1) is [`StoreError::Invalid`].
    async fn put_stripe_record(
        &self,
        record: &StripeRecord,
        replace: bool,
    ) -> Result<StripeRecord, StoreError>;

    /// Deletes this database's stripe record if its `database_id` is
    /// `database_id` (a claim this process wrote, undone when the start
    /// that wrote it is refused); whether a row was deleted.
    async fn drop_stripe_record(&self, database_id: &str) -> Result<bool, StoreError>;

    /// Records `set_id` as the identity of this database's stripe set if
    /// its record has none (a record written before seqd kept it), and
    /// returns the record in force (`None`: no record).
    async fn join_stripe_set(&self, set_id: &str) -> Result<Option<StripeRecord>, StoreError>;
}

/// The client tokens (`seqd_tokens`, docs/api.md, "Client tokens"): rows
/// as stored; the service checks them ([`TokenRow::record`]) and holds the
/// set in memory. On a stripe set they live on the first stripe. A store
/// that keeps no tokens (a test's wrapper) takes the defaults, which
/// answer [`StoreError::Config`].
#[async_trait]
pub trait Tokens: Send + Sync + 'static {
    /// Every row, revoked and expired ones too, by label.
    async fn token_rows(&self) -> Result<Vec<TokenRow>, StoreError> {
        Err(no_tokens())
    }

    /// Inserts a token; [`StoreError::AlreadyExists`] when its label (or
    /// its hash) is taken.
    async fn insert_token(&self, _row: &TokenRow) -> Result<(), StoreError> {
        Err(no_tokens())
    }

    /// Marks token `label` revoked at `at` (milliseconds since the epoch):
    /// `true` when this call revoked it, `false` when it was already;
    /// [`StoreError::NotFound`] when there is no such token.
    async fn revoke_token(&self, _label: &str, _at: i64) -> Result<bool, StoreError> {
        Err(no_tokens())
    }
}

fn no_tokens() -> StoreError {
    StoreError::Config("this store keeps no client tokens".into())
}

/// Everything a store is: [`Segments`], [`Catalog`], [`Schema`],
/// [`StripeRecords`] and [`Tokens`]. Each backend implements the five; code
/// that needs only one part (the allocator: [`Segments`]) takes only that part.
pub trait Store: Segments + Catalog + Schema + StripeRecords + Tokens {}

impl<T: Segments + Catalog + Schema + StripeRecords + Tokens + ?Sized> Store for T {}
