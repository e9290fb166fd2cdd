//! Storage: the traits the allocator, the snowflake leases and the operators'
//! tools need ([`Store`], [`WorkerLeases`]), and one folder per backend.
//!
//! Every backend keeps the `sequences` table (docs/design.md, "Tables and
//! migrations"; "Reserving a segment" for the statements). Reserving a segment
//! is a single atomic step in the database (`UPDATE ... RETURNING` on
//! PostgreSQL and SQLite, `UPDATE` + `SELECT` inside one transaction holding
//! the row lock on MySQL/MariaDB), so two instances can never receive
//! overlapping ranges. `sqlx::Error` never leaves this module: every backend
//! narrows it to [`StoreError`].
//!
//! `postgres/`, `mysql/` and `sqlite/` each hold that backend's pool
//! (`mod.rs`), its sequence store (`sequences.rs`) and its worker leases
//! (`workers.rs`); [`connect`] opens one pool and returns both over it as a
//! [`Database`]. The traits never name their implementations. `memory.rs` is
//! an in-memory [`Store`] for tests and benchmarks.

use std::borrow::Cow;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::{NamePrefix, NewSequence, Ordering, SeqName};
use retry::retrying;

pub use database::{connect, Database};
pub use migrator::{Dialect, MigrateMode};
pub use pool::{StoreOptions, LEASE_CONNECTIONS};
pub use stripes::record::StripeRecord;
pub use workers::WorkerLeases;

pub(crate) mod database;
pub mod memory;
pub mod migrator;
pub mod mysql;
pub mod pool;
pub mod postgres;
pub(crate) mod retry;
pub mod sqlite;
pub mod stripes;
pub mod workers;

/// One row of the `sequences` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SequenceRow {
    /// The sequence's name.
    pub name: SeqName,
    /// The highest ID reserved so far; the next segment starts at `max_id + 1`.
    pub max_id: i64,
    /// The base segment size (the floor of the adapted step).
    pub step: i64,
    /// Free text for operators.
    pub description: String,
    /// When the row was created.
    pub created_at: DateTime<Utc>,
    /// When the row was last changed (by a reservation or an update).
    pub updated_at: DateTime<Utc>,
    /// How the sequence orders its IDs.
    pub ordering: Ordering,
    /// Where each period's counter starts: the `start` given at create (1
    /// for rows made before serial numbers).
    pub counter_start: i64,
    /// Its serial-number settings (`format` not NULL), if it issues serial
    /// numbers.
    pub serial: Option<crate::domain::SerialSettings>,
    /// Why seqd cannot use this row, when it cannot (settings written by SQL
    /// that do not parse): the row is still read, listed and repairable, and
    /// its requests are refused naming the field (docs/design.md, "Rows seqd
    /// cannot use"). `serial` is `None` then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<RowProblem>,
}

/// What is wrong with a row seqd cannot use: the column and seqd's words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RowProblem {
    /// The column at fault (`format`, `reset`, `time_zone`, `overflow`).
    pub field: &'static str,
    /// Why its value is refused.
    pub message: String,
}

impl std::fmt::Display for RowProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "field `{}`: {}", self.field, self.message)
    }
}

/// One counter row of a serial sequence: `name@key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeriodRow {
    /// The period's key: `20261130`, `202611`, `2026`, or empty for a
    /// counter that never resets.
    pub key: String,
    /// The highest counter reserved in the period.
    pub max_id: i64,
    /// When the row was created (the period's first use).
    pub created_at: DateTime<Utc>,
    /// When the row was last changed.
    pub updated_at: DateTime<Utc>,
}

/// A range of IDs reserved by one atomic update: `(max_id - size, max_id]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// The row's `max_id` after the update: the last ID of the range.
    pub max_id: i64,
    /// How much the update added to `max_id`: the range's length.
    pub size: i64,
    /// The row's `step` as the update saw it (the floor of the adapted step).
    pub row_step: i64,
    /// The row's `ordering` as the update saw it.
    pub ordering: Ordering,
}

impl Reservation {
    /// The first ID of the range.
    pub fn first(&self) -> i64 {
        self.max_id - self.size + 1
    }
}

/// Most rows one [`Store::list_page`] may return.
pub const MAX_PAGE: u32 = 1000;

/// One page of rows, ordered by name in byte order (see [`Store::list_page`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequencePage {
    /// The rows of the page (rows whose stored name is not a valid
    /// [`SeqName`] are left out).
    pub rows: Vec<SequenceRow>,
    /// True when rows follow the page.
    pub more: bool,
}

impl SequencePage {
    /// A page from up to `limit + 1` rows read in name order: the first
    /// `limit` are the page, one more means more follow. `convert` drops a
    /// row by answering `None`.
    fn from_read<R>(
        mut read: Vec<R>,
        limit: u32,
        convert: impl Fn(R) -> Option<SequenceRow>,
    ) -> Self {
        let more = read.len() > limit as usize;
        read.truncate(limit as usize);
        SequencePage {
            rows: read.into_iter().filter_map(convert).collect(),
            more,
        }
    }
}

/// The names one page read covers, in byte order: those above `lower` (or
/// at it, when `inclusive`) and below `upper`, at most `read` rows (one more
/// than the page's limit, to learn whether more follow).
///
/// A lower and an upper bound on the name are a range an index on the names
/// serves, whatever the backend; there is only ever ONE lower bound, so no
/// planner can seek on the weaker of two and filter the rest (SQLite would).
#[derive(Debug, Clone, PartialEq, Eq)]
struct PageRange<'a> {
    lower: &'a str,
    inclusive: bool,
    upper: Cow<'a, str>,
    read: i64,
}

impl PageRange<'_> {
    /// The comparison of the lower bound: `>` or `>=`.
    fn lower_op(&self) -> &'static str {
        if self.inclusive {
            ">="
        } else {
            ">"
        }
    }

    /// Whether the range is empty for certain: its lower bound at or past
    /// its upper one (`after` beyond the prefix's names).
    fn is_empty(&self) -> bool {
        self.lower >= &*self.upper
    }
}

/// The range of [`Store::list_page`]`(prefix, after, limit)`.
///
/// - The upper bound is `prefix + "{"` ([`NamePrefix::upper_bound`]: exactly
///   the names starting with `prefix` lie in `[prefix, prefix{)`), or `"{"`
///   without a prefix, above every valid name (names begin with a letter or
///   a digit; rows inserted by SQL with other names are not listed anyway).
/// - The lower bound is the higher of `after` (exclusive) and `prefix`
///   (inclusive): when `after >= prefix`, `name > after` implies
///   `name >= prefix`; otherwise `name >= prefix` implies `name > after`.
///   Without either, `> ""`: every name.
fn page_range<'a>(
    prefix: Option<&'a NamePrefix>,
    after: Option<&'a SeqName>,
    limit: u32,
) -> PageRange<'a> {
    let upper = prefix.map_or(Cow::Borrowed(NAMES_END), |p| Cow::Owned(p.upper_bound()));
    let (lower, inclusive) = match (prefix, after) {
        (Some(p), Some(a)) if a.as_str() < p.as_str() => (p.as_str(), true),
        (Some(p), None) => (p.as_str(), true),
        (_, Some(a)) => (a.as_str(), false),
        (None, None) => ("", false),
    };
    PageRange {
        lower,
        inclusive,
        upper,
        read: i64::from(limit.min(MAX_PAGE)) + 1,
    }
}

/// The statement of [`Store::list_page`] on the backends whose `name`
/// compares in byte order by itself, MySQL/MariaDB (`utf8mb4_bin`) and
/// SQLite (the default `BINARY` collation): names compared with `lower_op`
/// (`>` or `>=`) to the first `?` and below the second, at most the third
/// `?` of rows, in name order. The primary key's index serves the range and
/// the order.
pub fn binary_page_sql(lower_op: &str) -> String {
    format!(
        "SELECT {COLUMNS} FROM sequences \
         WHERE name {lower_op} ? AND name < ? AND {NOT_COUNTER} ORDER BY name LIMIT ?"
    )
}

/// The columns of a [`SequenceRow`], in the order [`NaiveRow`] (and
/// MySQL's row) expects.
pub const COLUMNS: &str = "name, max_id, step, description, created_at, updated_at, ordering, \
     counter_start, format, reset, time_zone, overflow";

/// Leaves out the period counters of serial sequences (`name@key`, see
/// [`crate::domain::is_period_counter`]) from lists: they are rows of the
/// table, not sequences.
pub const NOT_COUNTER: &str = "name NOT LIKE '%@%'";

/// `"{"`: above every valid name in byte order (see
/// [`crate::domain::ABOVE_NAME_CHARS`]).
const NAMES_END: &str = "{";

/// [`Store::list_page`] on a backend's pool: runs the statement
/// `sql(lower_op)` (rows of the table's columns whose name compares with
/// `lower_op` (`>` or `>=`) to the first bind and is below the second, in
/// name order, at most the third bind) and converts the rows read with
/// `convert`.
async fn fetch_page<DB, R>(
    pool: &sqlx::Pool<DB>,
    sql: fn(&str) -> String,
    prefix: Option<&NamePrefix>,
    after: Option<&SeqName>,
    limit: u32,
    convert: fn(R) -> Option<SequenceRow>,
) -> Result<SequencePage, StoreError>
where
    DB: sqlx::Database,
    for<'c> &'c sqlx::Pool<DB>: sqlx::Executor<'c, Database = DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    R: for<'r> sqlx::FromRow<'r, DB::Row> + Send + Unpin,
{
    let range = page_range(prefix, after, limit);
    if range.is_empty() {
        return Ok(SequencePage::from_read(Vec::<R>::new(), limit, convert));
    }
    let sql = sql(range.lower_op());
    let rows: Vec<R> = retrying!(
        backend_of::<DB>(),
        sqlx::query_as::<DB, R>(&sql)
            .bind(range.lower)
            .bind(&*range.upper)
            .bind(range.read)
            .fetch_all(pool)
            .await
    )
    .map_err(unavailable)?;
    Ok(SequencePage::from_read(rows, limit, convert))
}

/// Most names one statement of [`Store::settings_of`] asks for: every
/// backend takes this many binds in one statement (SQLite's historic limit
/// is 999), and an `IN` list of this size is one index probe per name.
pub const SETTINGS_CHUNK: usize = 500;

/// `SELECT` of the rows named by `n` placeholders, as MySQL/MariaDB and
/// SQLite write them (`?`).
pub fn named_rows_sql(n: usize) -> String {
    format!(
        "SELECT {COLUMNS} FROM sequences WHERE name IN ({})",
        vec!["?"; n].join(", ")
    )
}

/// [`Store::settings_of`] on a backend's pool: runs `sql(n)` (the rows of
/// the table's columns whose name is one of `n` binds) once per
/// [`SETTINGS_CHUNK`] names and converts the rows read with `convert`
/// (a row that does not convert is left out).
async fn fetch_named<DB, R>(
    pool: &sqlx::Pool<DB>,
    sql: fn(usize) -> String,
    names: &[SeqName],
    convert: fn(R) -> Option<SequenceRow>,
) -> Result<Vec<SequenceRow>, StoreError>
where
    DB: sqlx::Database,
    for<'c> &'c sqlx::Pool<DB>: sqlx::Executor<'c, Database = DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    R: for<'r> sqlx::FromRow<'r, DB::Row> + Send + Unpin,
{
    let mut rows = Vec::with_capacity(names.len());
    for chunk in names.chunks(SETTINGS_CHUNK) {
        let sql = sql(chunk.len());
        let read: Vec<R> = retrying!(backend_of::<DB>(), {
            let mut query = sqlx::query_as::<DB, R>(&sql);
            for name in chunk {
                query = query.bind(name.as_str());
            }
            query.fetch_all(pool).await
        })
        .map_err(unavailable)?;
        rows.extend(read.into_iter().filter_map(convert));
    }
    Ok(rows)
}

/// [`Store::compare_and_set_max_id`] on a backend's pool: runs `update`
/// (binds, in this order: new, name, expected; `max_id = new` where the
/// name and the expected value match), then, if it changed no row, `exists` (bind: name)
/// to tell a moved row (false) from a missing one ([`StoreError::NotFound`]);
/// `affected` reads the backend's count of changed rows.
/// `new == expected` only reads: a database may count an update that
/// changes nothing as no row.
async fn compare_and_set<DB>(
    pool: &sqlx::Pool<DB>,
    update: &str,
    exists: &str,
    affected: fn(&DB::QueryResult) -> u64,
    name: &SeqName,
    expected: i64,
    new: i64,
) -> Result<bool, StoreError>
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    let mut held = pool::Held::acquire(pool).await?;
    if new != expected {
        let done = retrying!(
            backend_of::<DB>(),
            sqlx::query::<DB>(update)
                .bind(new)
                .bind(name.as_str())
                .bind(expected)
                .execute(held.conn())
                .await
        )
        .map(|r| affected(&r));
        held = match done {
            Ok(1) => {
                held.finish(Ok(()))?;
                return Ok(true);
            }
            Ok(_) => held,
            Err(e) => return held.finish(Err(e)),
        };
    }
    let row = retrying!(
        backend_of::<DB>(),
        sqlx::query_as::<DB, (i64,)>(exists)
            .bind(name.as_str())
            .fetch_optional(held.conn())
            .await
    );
    match held.finish(row)? {
        Some((max_id,)) => Ok(new == expected && max_id == expected),
        None => Err(StoreError::NotFound),
    }
}

/// What a field update (operator change) asks for; `None` leaves a field alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SequencePatch {
    /// New base step, already validated.
    pub step: Option<i64>,
    /// New description, already validated.
    pub description: Option<String>,
    /// New ordering.
    pub ordering: Option<Ordering>,
    /// New serial-number settings: `Some(None)` makes the sequence plain.
    pub serial: Option<Option<crate::domain::SerialSettings>>,
}

/// Whether [`Store::bump`] writes or only plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BumpMode {
    /// Change the rows, in one transaction.
    Apply,
    /// Read the rows and check the bump; write nothing.
    DryRun,
}

/// One row a bump changed (or, in a dry run, would change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bumped {
    /// The row's name as stored (under `--all`, possibly one an operator
    /// inserted by hand that is not a valid [`SeqName`]).
    pub name: String,
    /// `max_id` before the bump.
    pub old_max_id: i64,
    /// `max_id` after the bump: `old_max_id + by`.
    pub new_max_id: i64,
}

/// Why a bump was refused: every offending sequence, by name, in name order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BumpRefusal {
    /// Names asked for that have no row.
    pub missing: Vec<String>,
    /// Rows whose `max_id + by` would pass `i64::MAX`.
    pub overflow: Vec<String>,
}

/// At most this many names are shown per list in a [`BumpRefusal`]'s message.
const SHOWN_NAMES: usize = 20;

impl std::fmt::Display for BumpRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if !self.missing.is_empty() {
            parts.push(format!("not found: {}", shown(&self.missing)));
        }
        if !self.overflow.is_empty() {
            parts.push(format!(
                "max_id would pass {}: {}",
                i64::MAX,
                shown(&self.overflow)
            ));
        }
        f.write_str(&parts.join("; "))
    }
}

/// `'a', 'b', ... and N more`: the first [`SHOWN_NAMES`] names, quoted.
fn shown(names: &[String]) -> String {
    let mut out: Vec<String> = names
        .iter()
        .take(SHOWN_NAMES)
        .map(|n| format!("'{n}'"))
        .collect();
    if names.len() > SHOWN_NAMES {
        out.push(format!("... and {} more", names.len() - SHOWN_NAMES));
    }
    out.join(", ")
}

/// Storage failures, narrowed from the driver's errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No row has this name.
    #[error("sequence not found")]
    NotFound,
    /// A row with this name already exists.
    #[error("sequence already exists")]
    AlreadyExists,
    /// Reserving another segment would pass `i64::MAX`.
    #[error("sequence exhausted")]
    Exhausted,
    /// The database is unreachable, timed out, or failed; the detail is for logs.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The database URL or configuration is unusable (unknown scheme, bad options).
    #[error("invalid storage configuration: {0}")]
    Config(String),
    /// seqd's schema cannot be brought to or is not at this version (a
    /// missing migration under `--migrate check`, a changed or failed one, a
    /// DDL statement the database refused): a configuration problem, not an
    /// outage.
    #[error("migration: {0}")]
    Migration(String),
    /// The database refused a value as invalid (a `CHECK` constraint of the
    /// table, such as `step >= 1`): bad input, not an outage; the detail is
    /// for logs.
    #[error("value refused by the table: {0}")]
    Invalid(String),
    /// A bump was refused as a whole and changed nothing (see [`Store::bump`]).
    #[error("bump refused: {0}")]
    BumpRefused(BumpRefusal),
    /// The sequence issues serial numbers: its own row hands out no range
    /// (its counters are the rows of its periods).
    #[error("sequence issues serial numbers")]
    Serial,
}

/// The storage the allocator and the operators' tools need.
///
/// Implementations must make [`Store::reserve`] atomic: two concurrent callers
/// (in one process or in many) never receive overlapping ranges.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Reserves the next range of `name`: adds `max(row.step, min_size)` to
    /// `max_id` in one atomic operation and returns the range that operation
    /// added. Fails with [`StoreError::Exhausted`] when the addition would pass
    /// `i64::MAX` even at the row's own step, [`StoreError::NotFound`] when
    /// no row has this name, and [`StoreError::Serial`] (changing nothing)
    /// when the row issues serial numbers (`format` is not NULL). The same
    /// holds for [`Store::reserve_above`] and [`Store::reserve_exact`].
    async fn reserve(&self, name: &SeqName, min_size: i64) -> Result<Reservation, StoreError>;

    /// [`Store::reserve`] for a caller that already holds IDs of `name` up
    /// to `floor` (its high-water mark, 0 if none). A store over several
    /// databases (stripes) lifts a database that lags below `floor` past it
    /// in the reserving statement, so the caller's IDs keep increasing when
    /// it moves between databases. A single database ignores `floor`: its
    /// row below the mark is a regression, which the allocator detects,
    /// reports and skips.
    async fn reserve_above(
        &self,
        name: &SeqName,
        min_size: i64,
        floor: i64,
    ) -> Result<Reservation, StoreError> {
        let _ = floor;
        self.reserve(name, min_size).await
    }

    /// Sets `max_id` of the row `name` to `new` if it is still `expected`,
    /// in one statement (a compare-and-set); true when it was set, false
    /// when the row holds another value. [`StoreError::NotFound`] when no
    /// row has this name.
    async fn compare_and_set_max_id(
        &self,
        name: &SeqName,
        expected: i64,
        new: i64,
    ) -> Result<bool, StoreError>;

    /// Reserves exactly `n` IDs (1..) of `name` in one atomic operation,
    /// whatever its step: a global sequence's merged requests.
    /// [`StoreError::Exhausted`] when that would pass `i64::MAX`,
    /// [`StoreError::NotFound`] when no row has this name.
    async fn reserve_exact(&self, name: &SeqName, n: i64) -> Result<Reservation, StoreError> {
        self.reserve_within(name, n, i64::MAX).await
    }

    /// [`Store::reserve_exact`] that never moves `max_id` past `cap`: adds
    /// exactly `n` (1..) in one statement when `max_id + n <= cap`, and
    /// otherwise changes nothing and answers [`StoreError::Exhausted`]. A
    /// serial period's counter under `{seq:0N}` (`cap` its capacity), so
    /// that no number of instances reserving at once can pass it, and a
    /// request that does not fit consumes nothing (docs/design.md, "Serial
    /// numbers").
    async fn reserve_within(
        &self,
        name: &SeqName,
        n: i64,
        cap: i64,
    ) -> Result<Reservation, StoreError> {
        let _ = (name, n, cap);
        Err(StoreError::Config(
            "this store cannot reserve a bounded exact count (serial capacity, global ordering)"
                .into(),
        ))
    }

    /// Gives back unused IDs at the top of a reservation: lowers `max_id`
    /// of `name` from `top` (the last ID of the caller's last reservation)
    /// to `keep`, only if it is still `top` (nobody reserved since); true
    /// when it did. One compare-and-set; a store over several databases
    /// sends it to the one `top` came from.
    async fn give_back(&self, name: &SeqName, top: i64, keep: i64) -> Result<bool, StoreError> {
        self.compare_and_set_max_id(name, top, keep).await
    }

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
    /// backends read [`SETTINGS_CHUNK`] names per statement; this default
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

    /// Reads one page: at most `limit` (1..=[`MAX_PAGE`]) rows whose name
    /// starts with `prefix` (any name when `None`) and is above `after` (all
    /// such rows when `None`), ordered by name in byte order, as
    /// [`Store::list`] is; [`SequencePage::more`] says whether more rows
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

    /// Applies the embedded migrations of this backend (idempotent), with
    /// seqd's own migrator (see [`migrator`]); fails with
    /// [`StoreError::Migration`].
    async fn migrate(&self) -> Result<(), StoreError>;

    /// Checks that every migration of this backend is applied, running no
    /// DDL; fails with [`StoreError::Migration`] naming what is missing.
    /// A store without a schema (in memory) has nothing to check.
    async fn check_schema(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Prepares the schema as `mode` says: [`Store::migrate`],
    /// [`Store::check_schema`], or nothing.
    async fn prepare_schema(&self, mode: MigrateMode) -> Result<(), StoreError> {
        match mode {
            MigrateMode::Auto => self.migrate().await,
            MigrateMode::Check => self.check_schema().await,
            MigrateMode::Off => Ok(()),
        }
    }

    /// Checks that the database answers and the schema is in place.
    async fn ping(&self) -> Result<(), StoreError>;

    /// A short name of the backend for logs and the monitor ("postgres", ...).
    fn backend(&self) -> &'static str;

    /// The state of each stripe of a store over several databases; empty for
    /// a single database.
    fn stripe_status(&self) -> Vec<stripes::StripeStatus> {
        Vec::new()
    }

    /// This database's stripe record (`seqd_stripe`), `None` when it has no
    /// row. A missing table is [`StoreError::Migration`] (the schema is
    /// behind); [`stripes::record::bind_stripes`] decides what that means
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
}

/// Returns `url` with any password replaced by `***`, for logs: the password of
/// the user-info part (`scheme://user:secret@host`) and the value of query
/// parameters that carry one (`password`, `pass`, `pwd`, `sslpassword`).
/// Everything else is kept as written.
///
/// A password may hold any character, `@ : / ? #` included (drivers accept
/// them unencoded), so it ends at the last `@` that is followed by something
/// shaped like a host. When an `@` in the query could also be that one, more
/// is hidden than needed, never less.
pub fn redact_url(url: &str) -> String {
    let Some(i) = url.find("://") else {
        return redact_query(url);
    };
    let (head, rest) = url.split_at(i + 3);
    match password_span(rest) {
        Some((user_end, at)) => format!(
            "{head}{}:***{}",
            &rest[..user_end],
            redact_query(&rest[at..])
        ),
        None => format!("{head}{}", redact_query(rest)),
    }
}

/// In what follows `scheme://`: where the user name ends (at its `:`) and
/// where the password ends (at its `@`), when there is a password.
fn password_span(rest: &str) -> Option<(usize, usize)> {
    let user_end = rest.find([':', '@', '/', '?', '#'])?;
    if !rest[user_end..].starts_with(':') {
        return None;
    }
    let at = rest
        .match_indices('@')
        .map(|(i, _)| i)
        .rfind(|&i| i > user_end && looks_like_host(&rest[i + 1..]))?;
    Some((user_end, at))
}

/// Whether `after` (what follows an `@`) starts with a host, an optional
/// port, then a path, a query, a fragment or the end.
fn looks_like_host(after: &str) -> bool {
    let host_end = after.find(['/', '?', '#']).unwrap_or(after.len());
    after[..host_end]
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b".-_[]:%,".contains(&b))
}

/// `s` with the values of password query parameters replaced by `***`.
fn redact_query(s: &str) -> String {
    // Split off the fragment and the query so that '@', ':' or '/' in them are
    // not mistaken for anything else.
    let (before_fragment, fragment) = s.split_at(s.find('#').unwrap_or(s.len()));
    let Some((base, query)) = before_fragment.split_once('?') else {
        return s.to_string();
    };
    let redacted: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _))
                if ["password", "pass", "pwd", "sslpassword"]
                    .iter()
                    .any(|k| key.eq_ignore_ascii_case(k)) =>
            {
                format!("{key}=***")
            }
            _ => pair.to_string(),
        })
        .collect();
    format!("{base}?{}{fragment}", redacted.join("&"))
}

/// The backend's short name ([`Store::backend`]) for a sqlx database, for
/// [`retrying!`]'s metric and logs in code shared by the backends.
fn backend_of<DB: sqlx::Database>() -> &'static str {
    match DB::NAME {
        "PostgreSQL" => "postgres",
        "MySQL" => "mysql",
        _ => "sqlite",
    }
}

/// Narrows a driver error to [`StoreError`]: configuration problems become
/// [`StoreError::Config`], everything else [`StoreError::Unavailable`] with the
/// driver's text (for logs only).
fn unavailable(e: sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::Configuration(e) => StoreError::Config(e.to_string()),
        sqlx::Error::Database(db) if db.is_check_violation() => StoreError::Invalid(db.to_string()),
        other => StoreError::Unavailable(other.to_string()),
    }
}

/// Narrows an `INSERT` error: a unique violation means the name is taken.
fn insert_failed(e: sqlx::Error) -> StoreError {
    match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::AlreadyExists,
        _ => unavailable(e),
    }
}

/// `start - 1`, the `max_id` of a new sequence; `start` was validated (>= 1),
/// this only guards against a hand-built [`NewSequence`].
fn initial_max_id(seq: &NewSequence) -> Result<i64, StoreError> {
    seq.start
        .checked_sub(1)
        .filter(|m| *m >= 0)
        .ok_or_else(|| StoreError::Config(format!("invalid start {}: must be >= 1", seq.start)))
}

/// One row as PostgreSQL and SQLite return it (`TIMESTAMP` without zone, in UTC).
type NaiveRow = (
    String,
    i64,
    i64,
    String,
    chrono::NaiveDateTime,
    chrono::NaiveDateTime,
    String,
    i64,
    Option<String>,
    String,
    String,
    String,
);

/// The columns `counter_start, format, reset, time_zone, overflow` of a row.
#[derive(Debug)]
struct SerialColumns {
    counter_start: i64,
    format: Option<String>,
    reset: String,
    time_zone: String,
    overflow: String,
}

/// Converts a fetched [`NaiveRow`] (`None` for an invalid stored name).
fn naive_row(
    (
        name,
        max_id,
        step,
        description,
        created_at,
        updated_at,
        ordering,
        counter_start,
        format,
        reset,
        time_zone,
        overflow,
    ): NaiveRow,
) -> Option<SequenceRow> {
    let serial = SerialColumns {
        counter_start,
        format,
        reset,
        time_zone,
        overflow,
    };
    row_from_columns(
        name,
        max_id,
        step,
        description,
        created_at.and_utc(),
        updated_at.and_utc(),
        &ordering,
        serial,
    )
}

/// Like [`naive_row`] for a row looked up by a valid name, which must convert.
fn naive_found_row(row: NaiveRow) -> Result<SequenceRow, StoreError> {
    naive_row(row)
        .ok_or_else(|| StoreError::Unavailable("row with an invalid name returned".into()))
}

/// Builds a [`SequenceRow`] from the columns of the table, or `None` when the
/// stored name is not a valid [`SeqName`] (a row an operator inserted by hand
/// with a name the API could never ask for). Serial settings that do not
/// parse (a hand-edited `format`) keep the row, with its
/// [`SequenceRow::problem`] naming the field: reads, lists and repairs see
/// it, requests for it are refused.
#[allow(clippy::too_many_arguments)] // one per column of the table
fn row_from_columns(
    name: String,
    max_id: i64,
    step: i64,
    description: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    ordering: &str,
    columns: SerialColumns,
) -> Option<SequenceRow> {
    let Ok(name) = SeqName::parse(&name) else {
        tracing::warn!(name = %crate::domain::escape_controls(&name), "ignoring a row of `sequences` whose name is not a valid sequence name");
        return None;
    };
    let (serial, problem) = match &columns.format {
        None => (None, None),
        Some(format) => match crate::domain::SerialSettings::from_columns(
            format,
            &columns.reset,
            &columns.time_zone,
            &columns.overflow,
        ) {
            Ok(settings) => (Some(settings), None),
            Err(e) => {
                let problem = RowProblem {
                    field: e.field(),
                    message: e.to_string(),
                };
                tracing::warn!(sequence = %name, %problem, "a row of `sequences` has serial settings seqd cannot use");
                (None, Some(problem))
            }
        },
    };
    Some(SequenceRow {
        name,
        max_id,
        step,
        description,
        ordering: Ordering::from_column(ordering),
        created_at,
        updated_at,
        counter_start: columns.counter_start,
        serial,
        problem,
    })
}

/// Why a reserving statement updated no row, from the row's `format IS NOT
/// NULL` read afterwards (`None`: no row): [`StoreError::NotFound`],
/// [`StoreError::Serial`] (the row issues serial numbers) or
/// [`StoreError::Exhausted`].
fn refused(serial: Option<bool>) -> StoreError {
    match serial {
        None => StoreError::NotFound,
        Some(true) => StoreError::Serial,
        Some(false) => StoreError::Exhausted,
    }
}

/// Whether the schema is as current as this seqd needs, for readiness
/// (docs/design.md, "Readiness"): one query counts the migrations of this
/// binary that `seqd_migrations` records as applied. When one is missing,
/// `check` (the store's [`Store::check_schema`], which also accepts a history
/// still kept in `_sqlx_migrations`) gives the verdict and names what is
/// missing as [`StoreError::Migration`]. A database that does not answer, or
/// has no `seqd_migrations`, is [`StoreError::Unavailable`].
async fn schema_ready<DB, F>(
    pool: &sqlx::Pool<DB>,
    dialect: Dialect,
    check: F,
) -> Result<(), StoreError>
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
    F: std::future::Future<Output = Result<(), StoreError>>,
{
    let mut held = pool::Held::acquire(pool).await?;
    let sql = dialect.applied_count_sql();
    let row = retrying!(
        backend_of::<DB>(),
        sqlx::query_as::<DB, (i64,)>(sql)
            .fetch_one(held.conn())
            .await
    );
    let (applied,) = held.finish(row)?;
    if applied == dialect.migrations().len() as i64 {
        return Ok(());
    }
    check.await
}

/// Reads whether `name` issues serial numbers (`None`: no row), with
/// `sql` (bind: the name; one integer column, 1 for a serial row).
async fn read_serial_flag<DB>(
    pool: &sqlx::Pool<DB>,
    sql: &str,
    name: &SeqName,
) -> Result<Option<bool>, StoreError>
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    let mut held = pool::Held::acquire(pool).await?;
    let row = retrying!(
        backend_of::<DB>(),
        sqlx::query_as::<DB, (i64,)>(sql)
            .bind(name.as_str())
            .fetch_optional(held.conn())
            .await
    );
    Ok(held.finish(row)?.map(|(flag,)| flag != 0))
}

/// The values of `format, reset, time_zone, overflow` for settings
/// (`None`: a plain sequence, the columns' defaults).
fn serial_values(
    serial: Option<&crate::domain::SerialSettings>,
) -> (Option<String>, &'static str, String, &'static str) {
    match serial {
        Some(s) => (
            Some(s.format.to_string()),
            s.reset.as_str(),
            s.time_zone.clone(),
            s.overflow.as_str(),
        ),
        None => (None, "never", "UTC".to_owned(), "refuse"),
    }
}

/// Checks a period key before it goes into a row name: at most
/// [`crate::domain::MAX_PERIOD_KEY_LEN`] ASCII digits.
fn check_period_key(key: &str) -> Result<(), StoreError> {
    if key.len() <= crate::domain::MAX_PERIOD_KEY_LEN && key.bytes().all(|b| b.is_ascii_digit()) {
        Ok(())
    } else {
        Err(StoreError::Config(format!(
            "invalid period key {key:?}: at most {} digits",
            crate::domain::MAX_PERIOD_KEY_LEN
        )))
    }
}

/// The row names of the counters of `parent` with these keys (checked).
fn counter_names(parent: &SeqName, keys: &[String]) -> Result<Vec<String>, StoreError> {
    keys.iter()
        .map(|key| {
            check_period_key(key)?;
            Ok(parent.period_counter(key).as_str().to_owned())
        })
        .collect()
}

/// A [`PeriodRow`] from a counter row named `name` in the range that starts
/// at `low` (`parent@`).
fn period_row(
    low: &str,
    name: &str,
    max_id: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
) -> PeriodRow {
    PeriodRow {
        key: name.get(low.len()..).unwrap_or_default().to_owned(),
        max_id,
        created_at,
        updated_at,
    }
}

/// Builds a [`Reservation`] from what one reserving statement returned,
/// checking it is consistent (a positive size within the row's range).
fn reservation(
    max_id: i64,
    size: i64,
    row_step: i64,
    ordering: &str,
) -> Result<Reservation, StoreError> {
    if size >= 1 && row_step >= 1 && max_id.checked_sub(size).is_some() {
        Ok(Reservation {
            max_id,
            size,
            row_step,
            ordering: Ordering::from_column(ordering),
        })
    } else {
        Err(StoreError::Unavailable(format!(
            "inconsistent reservation from the database: max_id={max_id} size={size} step={row_step}"
        )))
    }
}

/// Rejects a bump no backend should run: `by` below 1, or an empty list of
/// names (which would be an empty SQL `IN ()`).
fn check_bump_request(names: Option<&[SeqName]>, by: i64) -> Result<(), StoreError> {
    if by < 1 {
        return Err(StoreError::Config(format!(
            "invalid bump {by}: must be from 1 to {}",
            i64::MAX
        )));
    }
    if names.is_some_and(|n| n.is_empty()) {
        return Err(StoreError::Config("a bump needs at least one name".into()));
    }
    Ok(())
}

/// Checks a bump of `by` against the rows read for it (`(name, max_id)`,
/// in any order) and returns the plan in name order, or the refusal naming
/// every requested name without a row and every row that would pass
/// `i64::MAX`.
fn plan_bump(
    names: Option<&[SeqName]>,
    rows: Vec<(String, i64)>,
    by: i64,
) -> Result<Vec<Bumped>, StoreError> {
    let rows: std::collections::BTreeMap<String, i64> = rows.into_iter().collect();
    let missing: std::collections::BTreeSet<&str> = names
        .unwrap_or_default()
        .iter()
        .map(SeqName::as_str)
        .filter(|n| !rows.contains_key(*n))
        .collect();
    let refusal = BumpRefusal {
        missing: missing.into_iter().map(str::to_string).collect(),
        overflow: rows
            .iter()
            .filter(|(_, max_id)| max_id.checked_add(by).is_none())
            .map(|(name, _)| name.clone())
            .collect(),
    };
    if refusal != BumpRefusal::default() {
        return Err(StoreError::BumpRefused(refusal));
    }
    Ok(rows
        .into_iter()
        .map(|(name, old_max_id)| Bumped {
            name,
            old_max_id,
            new_max_id: old_max_id + by,
        })
        .collect())
}

/// Checks that the bump's `UPDATE` changed exactly the planned rows; any
/// other count (a row created meanwhile under `--all`) must roll it back.
fn check_bumped(plan: &[Bumped], affected: u64) -> Result<(), StoreError> {
    if affected == plan.len() as u64 {
        Ok(())
    } else {
        Err(StoreError::Unavailable(format!(
            "bump changed {affected} rows where {} were planned; rolled back, nothing changed",
            plan.len()
        )))
    }
}

/// The statement bound inside a bump's transaction (see
/// `BumpSql::widen_bound`).
const BUMP_STATEMENT_BOUND: std::time::Duration = std::time::Duration::from_secs(120);

/// The statements of [`Store::bump`] on one backend; [`run_bump`] runs them
/// with the checks and the transaction every backend shares.
#[async_trait]
trait BumpSql: Send + Sync {
    /// The sqlx database.
    type Db: sqlx::Database;
    /// The statement that opens the bump's transaction.
    const BEGIN: &'static str = "BEGIN";

    /// Run first in the bump's transaction: lifts the pool's statement
    /// bound, made for a segment fetch, to [`BUMP_STATEMENT_BOUND`] for this
    /// transaction only (an operator's bump of every row reads and updates
    /// them all). The lock bound stays. Nothing where the bound is per
    /// session only.
    async fn widen_bound(
        conn: &mut <Self::Db as sqlx::Database>::Connection,
    ) -> Result<(), sqlx::Error> {
        let _ = conn;
        Ok(())
    }

    /// Reads `(name, max_id)` of the rows a bump touches (the named ones, or
    /// all); with `lock`, holds their row locks until the transaction ends.
    async fn read_bump(
        conn: &mut <Self::Db as sqlx::Database>::Connection,
        names: Option<&[SeqName]>,
        lock: bool,
    ) -> Result<Vec<(String, i64)>, sqlx::Error>;

    /// Adds `by` to `max_id` of those rows in one statement, sparing any that
    /// would pass `i64::MAX`, and returns how many rows it changed.
    async fn add_bump(
        conn: &mut <Self::Db as sqlx::Database>::Connection,
        names: Option<&[SeqName]>,
        by: i64,
    ) -> Result<u64, sqlx::Error>;
}

/// [`Store::bump`] on a backend's pool: a dry run plans from a plain read; a
/// bump reads under row locks, plans (or refuses), updates, checks the count
/// and commits, all in one transaction (dropped, hence rolled back, on error).
/// A conflict runs the whole transaction again ([`retrying!`]); a refusal or
/// a miscount ends it, rolled back, with that error.
async fn run_bump<B: BumpSql>(
    pool: &sqlx::Pool<B::Db>,
    names: Option<&[SeqName]>,
    by: i64,
    mode: BumpMode,
) -> Result<Vec<Bumped>, StoreError> {
    check_bump_request(names, by)?;
    let backend = backend_of::<B::Db>();
    if mode == BumpMode::DryRun {
        let rows = retrying!(
            backend,
            async {
                let mut conn = pool.acquire().await?;
                B::read_bump(&mut conn, names, false).await
            }
            .await
        )
        .map_err(unavailable)?;
        return plan_bump(names, rows, by);
    }
    retrying!(
        backend,
        async {
            let mut tx = pool.begin_with(B::BEGIN).await?;
            B::widen_bound(&mut tx).await?;
            let rows = B::read_bump(&mut tx, names, true).await?;
            let plan = match plan_bump(names, rows, by) {
                Ok(plan) => plan,
                refused => return Ok(refused),
            };
            let counted = check_bumped(&plan, B::add_bump(&mut tx, names, by).await?);
            if counted.is_ok() {
                tx.commit().await?;
            }
            Ok(counted.map(|()| plan))
        }
        .await
    )
    .map_err(unavailable)?
}

/// [`BumpSql::read_bump`]: runs `read` + [`names_in`]`(names, "WHERE")` +
/// `suffix`, binding [`bump_binds`].
async fn fetch_bump_rows<DB, O>(
    conn: &mut DB::Connection,
    dialect: Dialect,
    read: &str,
    suffix: &str,
    names: Option<&[SeqName]>,
) -> Result<Vec<O>, sqlx::Error>
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    O: for<'r> sqlx::FromRow<'r, DB::Row> + Send + Unpin,
{
    let sql = format!("{read}{}{suffix}", names_in(names, "WHERE", dialect, 1));
    let binds = bump_binds(names);
    let mut query = sqlx::query_as::<DB, O>(&sql);
    for bind in &binds {
        query = query.bind(bind.as_str());
    }
    query.fetch_all(conn).await
}

/// [`BumpSql::add_bump`]: runs `update` + [`names_in`]`(names, "AND")`,
/// bound as `by`, `by`, then [`bump_binds`].
async fn execute_bump<DB>(
    conn: &mut DB::Connection,
    dialect: Dialect,
    update: &str,
    names: Option<&[SeqName]>,
    by: i64,
) -> Result<DB::QueryResult, sqlx::Error>
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
{
    let sql = format!("{update}{}", names_in(names, "AND", dialect, 3));
    let binds = bump_binds(names);
    let mut query = sqlx::query::<DB>(&sql).bind(by).bind(by);
    for bind in &binds {
        query = query.bind(bind.as_str());
    }
    query.execute(conn).await
}

/// The rows a bump of `names` touches, as a condition: `" <keyword> (name IN
/// (p, ...) OR (n >= p AND n < p) OR ...)"`, the named rows and, per name,
/// the byte range of its period counters
/// ([`period_rows_range`](crate::domain::period_rows_range); ranges, not
/// `LIKE`, whose `_` would match any character). One placeholder per value
/// of [`bump_binds`], in its order: `?`, or on PostgreSQL `$first`,
/// `$first+1`, ... with the ranges compared on `name COLLATE "C"` (byte
/// order, which the index of migration 0003 serves). Nothing for all rows.
fn names_in(names: Option<&[SeqName]>, keyword: &str, dialect: Dialect, first: usize) -> String {
    let Some(names) = names else {
        return String::new();
    };
    let mut next = first;
    let mut placeholder = || match dialect {
        Dialect::Postgres => {
            next += 1;
            format!("${}", next - 1)
        }
        Dialect::Mysql | Dialect::Sqlite => "?".to_string(),
    };
    let bytes = match dialect {
        Dialect::Postgres => "name COLLATE \"C\"",
        Dialect::Mysql | Dialect::Sqlite => "name",
    };
    let named: Vec<String> = names.iter().map(|_| placeholder()).collect();
    let mut terms = vec![format!("name IN ({})", named.join(", "))];
    for _ in names {
        let (low, high) = (placeholder(), placeholder());
        terms.push(format!("({bytes} >= {low} AND {bytes} < {high})"));
    }
    format!(" {keyword} ({})", terms.join(" OR "))
}

/// The values [`names_in`]'s placeholders take: the names, then each name's
/// counter range (low, high).
fn bump_binds(names: Option<&[SeqName]>) -> Vec<String> {
    let names = names.unwrap_or_default();
    let mut binds: Vec<String> = names.iter().map(|n| n.as_str().to_string()).collect();
    for name in names {
        let (low, high) = crate::domain::period_rows_range(name);
        binds.extend([low, high]);
    }
    binds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_url_hides_the_password_of_the_user_info() {
        assert_eq!(
            redact_url("postgres://seqd:s3cret@db.example:5432/seqd"),
            "postgres://seqd:***@db.example:5432/seqd"
        );
        assert_eq!(
            redact_url("mysql://root:pw@127.0.0.1/test?ssl-mode=disabled"),
            "mysql://root:***@127.0.0.1/test?ssl-mode=disabled"
        );
    }

    #[test]
    fn redact_url_handles_at_and_colon_inside_the_password() {
        assert_eq!(
            redact_url("postgres://u:p@ss:w@rd@host/db"),
            "postgres://u:***@host/db"
        );
    }

    #[test]
    fn redact_url_hides_passwords_holding_slash_question_mark_or_hash() {
        for (url, shown) in [
            ("postgres://u:pa/ss@host/db", "postgres://u:***@host/db"),
            ("mysql://u:p?w#d@h:3306/db", "mysql://u:***@h:3306/db"),
            (
                "postgres://u:a#b?c/d@e@host:5432/db?sslmode=require",
                "postgres://u:***@host:5432/db?sslmode=require",
            ),
            (
                "mysql://root:/?#@[::1]:3306/test",
                "mysql://root:***@[::1]:3306/test",
            ),
            (
                "postgres://u:p/w@/db?host=/run/postgresql",
                "postgres://u:***@/db?host=/run/postgresql",
            ),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[test]
    fn redact_url_hides_rather_than_shows_when_the_user_info_is_ambiguous() {
        // An '@' in the query of a URL with a port reads as a password's end:
        // more is hidden than needed, nothing is shown that should not be.
        let shown = redact_url("postgres://u:pw@host:5432/db?application_name=a@b");
        assert!(!shown.contains("pw"), "{shown}");
        assert!(shown.starts_with("postgres://u:***@"), "{shown}");
    }

    #[test]
    fn redact_url_hides_password_query_parameters() {
        assert_eq!(
            redact_url("postgres://u@host/db?user=x&password=secret&sslmode=require"),
            "postgres://u@host/db?user=x&password=***&sslmode=require"
        );
        assert_eq!(redact_url("mysql://h/db?PWD=x"), "mysql://h/db?PWD=***");
    }

    #[test]
    fn redact_url_keeps_urls_without_password_unchanged() {
        for url in [
            "postgres://postgres@127.0.0.1:5432/test",
            "postgres://127.0.0.1/test?options=-csearch_path%3Dx",
            "mysql://root@127.0.0.1:3306/test",
            "sqlite://seqd.db?mode=rwc",
            "sqlite::memory:",
            "sqlite:relative.db",
            "not a url",
            "",
        ] {
            assert_eq!(redact_url(url), url);
        }
    }

    #[test]
    fn redact_url_does_not_take_an_at_in_the_path_or_query_for_user_info() {
        assert_eq!(
            redact_url("sqlite:///tmp/a:b@c.db?mode=rwc"),
            "sqlite:///tmp/a:b@c.db?mode=rwc"
        );
        assert_eq!(
            redact_url("postgres://host/db?application_name=a:b@c"),
            "postgres://host/db?application_name=a:b@c"
        );
    }

    fn names(list: &[&str]) -> Vec<SeqName> {
        list.iter().map(|n| SeqName::parse(n).unwrap()).collect()
    }

    fn rows(list: &[(&str, i64)]) -> Vec<(String, i64)> {
        list.iter().map(|(n, m)| (n.to_string(), *m)).collect()
    }

    #[test]
    fn plan_bump_refuses_missing_names_and_overflowing_rows_together() {
        let asked = names(&["z", "full", "a", "gone", "gone"]);
        let read = rows(&[("z", 1), ("full", i64::MAX - 4), ("a", 0)]);
        match plan_bump(Some(&asked), read, 5) {
            Err(StoreError::BumpRefused(r)) => {
                assert_eq!(r.missing, ["gone"]);
                assert_eq!(r.overflow, ["full"]);
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn plan_bump_orders_by_name_and_may_reach_i64_max_exactly() {
        let asked = names(&["b", "a", "b"]);
        let read = rows(&[("b", i64::MAX - 5), ("a", 10)]);
        let plan = plan_bump(Some(&asked), read, 5).unwrap();
        let got: Vec<(&str, i64, i64)> = plan
            .iter()
            .map(|b| (b.name.as_str(), b.old_max_id, b.new_max_id))
            .collect();
        assert_eq!(got, [("a", 10, 15), ("b", i64::MAX - 5, i64::MAX)]);
    }

    #[test]
    fn check_bump_request_rejects_a_by_below_one_and_an_empty_name_list() {
        assert!(check_bump_request(None, 1).is_ok());
        assert!(check_bump_request(None, i64::MAX).is_ok());
        assert!(matches!(
            check_bump_request(None, 0),
            Err(StoreError::Config(_))
        ));
        assert!(matches!(
            check_bump_request(None, -1),
            Err(StoreError::Config(_))
        ));
        assert!(matches!(
            check_bump_request(Some(&[]), 1),
            Err(StoreError::Config(_))
        ));
    }

    #[test]
    fn check_bumped_accepts_only_the_planned_count() {
        let plan = plan_bump(None, rows(&[("a", 0), ("b", 0)]), 1).unwrap();
        assert!(check_bumped(&plan, 2).is_ok());
        assert!(matches!(
            check_bumped(&plan, 1),
            Err(StoreError::Unavailable(_))
        ));
        assert!(matches!(
            check_bumped(&plan, 3),
            Err(StoreError::Unavailable(_))
        ));
    }

    #[test]
    fn bump_refusal_message_names_at_most_twenty_per_list() {
        let refusal = BumpRefusal {
            missing: (0..25).map(|i| format!("m{i:02}")).collect(),
            overflow: vec!["full".into()],
        };
        let msg = refusal.to_string();
        assert!(msg.starts_with("not found: 'm00', 'm01'"), "{msg}");
        assert!(msg.contains("'m19', ... and 5 more;"), "{msg}");
        assert!(!msg.contains("'m20'"), "{msg}");
        assert!(
            msg.ends_with("max_id would pass 9223372036854775807: 'full'"),
            "{msg}"
        );
    }

    #[test]
    fn names_in_matches_each_name_and_its_counter_range_one_placeholder_a_value() {
        assert_eq!(names_in(None, "WHERE", Dialect::Sqlite, 1), "");
        let asked = names(&["a", "b"]);
        assert_eq!(
            names_in(Some(&asked), "AND", Dialect::Mysql, 1),
            " AND (name IN (?, ?) OR (name >= ? AND name < ?) OR (name >= ? AND name < ?))"
        );
        assert_eq!(
            names_in(Some(&asked), "AND", Dialect::Postgres, 3),
            " AND (name IN ($3, $4) OR (name COLLATE \"C\" >= $5 AND name COLLATE \"C\" < $6) \
             OR (name COLLATE \"C\" >= $7 AND name COLLATE \"C\" < $8))"
        );
        assert_eq!(
            bump_binds(Some(&asked)),
            ["a", "b", "a@", "a@:", "b@", "b@:"]
        );
    }

    #[tokio::test]
    async fn memory_bump_is_all_or_nothing_and_a_dry_run_writes_nothing() {
        let store = memory::MemoryStore::new();
        store.insert("a", 10, 1);
        store.insert("b", 20, 1);
        let asked = names(&["a", "nope"]);
        let refused = store.bump(Some(&asked), 5, BumpMode::Apply).await;
        assert!(matches!(refused, Err(StoreError::BumpRefused(_))));
        let planned = store.bump(None, 5, BumpMode::DryRun).await.unwrap();
        assert_eq!(planned.len(), 2);
        assert_eq!((store.max_id("a"), store.max_id("b")), (Some(10), Some(20)));
        store.bump(None, 5, BumpMode::Apply).await.unwrap();
        assert_eq!((store.max_id("a"), store.max_id("b")), (Some(15), Some(25)));
    }

    #[tokio::test]
    async fn memory_list_page_reads_names_above_after_and_says_if_more_follow() {
        let store = memory::MemoryStore::new();
        for n in ["b", "a", "C", "a.b"] {
            store.insert(n, 0, 1);
        }
        let first = store.list_page(None, None, 2).await.unwrap();
        let got: Vec<&str> = first.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!((got, first.more), (vec!["C", "a"], true));
        let rest = store
            .list_page(None, Some(&names(&["a"])[0]), 2)
            .await
            .unwrap();
        let got: Vec<&str> = rest.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!((got, rest.more), (vec!["a.b", "b"], false));
    }

    fn prefix(p: &str) -> NamePrefix {
        NamePrefix::parse(p).unwrap()
    }

    #[test]
    fn the_names_end_is_the_character_above_every_name_character() {
        assert_eq!(NAMES_END, crate::domain::ABOVE_NAME_CHARS.to_string());
    }

    #[test]
    fn a_page_range_has_one_lower_bound_the_higher_of_after_and_prefix() {
        let (p, below, above) = (prefix("m"), names(&["a"]), names(&["m.x"]));
        let range = |prefix, after, limit| {
            let r = page_range(prefix, after, limit);
            (r.lower, r.lower_op(), r.upper.into_owned(), r.read)
        };
        assert_eq!(range(None, None, 100), ("", ">", "{".into(), 101));
        assert_eq!(range(None, Some(&above[0]), 5), ("m.x", ">", "{".into(), 6));
        assert_eq!(range(Some(&p), None, 1), ("m", ">=", "m{".into(), 2));
        assert_eq!(
            range(Some(&p), Some(&below[0]), 1),
            ("m", ">=", "m{".into(), 2)
        );
        assert_eq!(
            range(Some(&p), Some(&above[0]), 1),
            ("m.x", ">", "m{".into(), 2)
        );
        assert_eq!(range(None, None, 5000).3, i64::from(MAX_PAGE) + 1);
    }

    #[test]
    fn a_page_range_past_the_prefix_is_empty() {
        let p = prefix("m");
        let (inside, at_end, past) = (names(&["mz"]), names(&["m"]), names(&["n"]));
        assert!(!page_range(Some(&p), Some(&inside[0]), 10).is_empty());
        assert!(!page_range(Some(&p), Some(&at_end[0]), 10).is_empty());
        assert!(page_range(Some(&p), Some(&past[0]), 10).is_empty());
        assert!(!page_range(None, Some(&past[0]), 10).is_empty());
    }

    #[tokio::test]
    async fn memory_list_page_narrows_to_the_prefix_and_ends_with_it() {
        let store = memory::MemoryStore::new();
        for n in ["a", "a.b", "a-b", "a:b", "a_b", "ab", "b", "A"] {
            store.insert(n, 0, 1);
        }
        let read = |prefix: &'static str, after: Option<&'static str>, limit| {
            let store = &store;
            async move {
                let after = after.map(|a| names(&[a]).remove(0));
                let page = store
                    .list_page(Some(&self::prefix(prefix)), after.as_ref(), limit)
                    .await
                    .unwrap();
                let got: Vec<String> = page.rows.iter().map(|r| r.name.to_string()).collect();
                (got, page.more)
            }
        };
        let all_a = ["a", "a-b", "a.b", "a:b", "a_b", "ab"]
            .map(String::from)
            .to_vec();
        assert_eq!(read("a", None, 10).await, (all_a.clone(), false));
        assert_eq!(read("a", None, 6).await, (all_a.clone(), false));
        assert_eq!(read("a", None, 5).await, (all_a[..5].to_vec(), true));
        assert_eq!(
            read("a", Some("a:b"), 10).await,
            (all_a[4..].to_vec(), false)
        );
        assert_eq!(read("a", Some("ab"), 10).await, (vec![], false));
        assert_eq!(read("a", Some("b"), 10).await, (vec![], false));
        assert_eq!(read("a", Some("A"), 1).await, (vec!["a".into()], true));
        assert_eq!(read("a.", None, 10).await, (vec!["a.b".into()], false));
        assert_eq!(read("c", None, 10).await, (vec![], false));
    }

    #[test]
    fn reservation_rejects_inconsistent_values() {
        assert!(reservation(100, 10, 10, "instance").is_ok());
        assert!(reservation(100, 0, 10, "instance").is_err());
        assert!(reservation(100, 10, 0, "instance").is_err());
        assert!(reservation(i64::MIN, 10, 10, "instance").is_err());
    }
}
