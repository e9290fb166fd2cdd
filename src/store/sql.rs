//! What the SQL backends share: the page and name reads, the compare-and-set,
//! the narrowing of driver errors, the reading of rows and reservations, and
//! the schema and serial checks. Each statement is written once here where
//! the dialects agree.

#![allow(unused_imports)]

use std::borrow::Cow;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;

pub(crate) use super::engine::name_text;
use super::engine::{SqlDb, Statement};
use super::retry::retrying;
use super::*;
use crate::domain::{IdOrdering, NamePrefix, NewSequence, SeqName};

/// The names one page read covers, in byte order: those above `lower` (or
/// at it, when `inclusive`) and below `upper`, at most `read` rows (one more
/// than the page's limit, to learn whether more follow).
///
/// A lower and an upper bound on the name are a range an index on the names
/// serves, whatever the backend; there is only ever ONE lower bound, so no
/// planner can seek on the weaker of two and filter the rest (SQLite would).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PageRange<'a> {
    pub(crate) lower: &'a str,
    pub(crate) inclusive: bool,
    pub(crate) upper: Cow<'a, str>,
    pub(crate) read: i64,
}

impl PageRange<'_> {
    /// The comparison of the lower bound: `>` or `>=`.
    #[cfg(test)]
    pub(crate) fn lower_op(&self) -> &'static str {
        if self.inclusive {
            ">="
        } else {
            ">"
        }
    }

    /// Whether the range is empty for certain: its lower bound at or past
    /// its upper one (`after` beyond the prefix's names).
    pub(crate) fn is_empty(&self) -> bool {
        self.lower >= &*self.upper
    }
}

/// The range of [`Catalog::list_page`]`(prefix, after, limit)`.
///
/// - The upper bound is `prefix + "{"` ([`NamePrefix::upper_bound`]: exactly
///   the names starting with `prefix` lie in `[prefix, prefix{)`), or `"{"`
///   without a prefix, above every valid name (names begin with a letter or
///   a digit; rows inserted by SQL with other names are not listed anyway).
/// - The lower bound is the higher of `after` (exclusive) and `prefix`
///   (inclusive): when `after >= prefix`, `name > after` implies
///   `name >= prefix`; otherwise `name >= prefix` implies `name > after`.
///   Without either, `> ""`: every name.
pub(crate) fn page_range<'a>(
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

/// The statement of [`Catalog::list_page`] on the backends whose `name`
/// compares in byte order by itself, MySQL/MariaDB (`utf8mb4_bin`) and
/// SQLite (the default `BINARY` collation): names compared with `lower_op`
/// (`>` or `>=`) to the first `?` and below the second, at most the third
/// `?` of rows, in name order. The primary key's index serves the range and
/// the order. (`page_sql_in` of those dialects.)
pub fn binary_page_sql(lower_op: &str) -> String {
    page_sql_in(Dialect::Sqlite, lower_op)
}

/// The statement of [`Catalog::list_page`] in `dialect`: names compared
/// with `lower_op` (`>` or `>=`) to the first bind and below the second, at
/// most the third bind of rows, in byte order ([`page_sql_of`]).
pub(crate) fn page_sql_in(dialect: Dialect, lower_op: &str) -> String {
    page_sql_of(dialect, lower_op == ">=").to_owned()
}

/// The statement of [`Catalog::list_page`] in `dialect`, its lower bound
/// `inclusive` (`>=`) or not (`>`): names from the first bind and below the
/// second, at most the third bind of rows, in byte order. On PostgreSQL
/// every comparison and the order are on `name COLLATE "C"`, which the index
/// of migration 0003 (`sequences_name_bytes`) serves; the primary key's
/// index, in the database's collation, cannot, and each page would sort the
/// whole table. MySQL/MariaDB (`utf8mb4_bin`) and SQLite (`BINARY`) compare
/// bytes, and the primary key's index serves the range and the order.
pub(crate) fn page_sql_of(dialect: Dialect, inclusive: bool) -> &'static str {
    match (dialect, inclusive) {
        (Dialect::Postgres, false) => PAGE_AFTER_PG,
        (Dialect::Postgres, true) => PAGE_FROM_PG,
        (Dialect::Mysql | Dialect::Sqlite, false) => PAGE_AFTER,
        (Dialect::Mysql | Dialect::Sqlite, true) => PAGE_FROM,
    }
}

/// [`page_sql_of`] on PostgreSQL, past the lower bound.
const PAGE_AFTER_PG: &str = "SELECT name, max_id, step, description, created_at, updated_at, \
    ordering, counter_start, format, reset, time_zone, overflow FROM sequences \
    WHERE name COLLATE \"C\" > $1 AND name COLLATE \"C\" < $2 AND name NOT LIKE '%@%' \
    ORDER BY name COLLATE \"C\" LIMIT $3";

/// [`page_sql_of`] on PostgreSQL, from the lower bound.
const PAGE_FROM_PG: &str = "SELECT name, max_id, step, description, created_at, updated_at, \
    ordering, counter_start, format, reset, time_zone, overflow FROM sequences \
    WHERE name COLLATE \"C\" >= $1 AND name COLLATE \"C\" < $2 AND name NOT LIKE '%@%' \
    ORDER BY name COLLATE \"C\" LIMIT $3";

/// [`page_sql_of`] on MySQL/MariaDB and SQLite, past the lower bound.
const PAGE_AFTER: &str = "SELECT name, max_id, step, description, created_at, updated_at, \
    ordering, counter_start, format, reset, time_zone, overflow FROM sequences \
    WHERE name > ? AND name < ? AND name NOT LIKE '%@%' ORDER BY name LIMIT ?";

/// [`page_sql_of`] on MySQL/MariaDB and SQLite, from the lower bound.
const PAGE_FROM: &str = "SELECT name, max_id, step, description, created_at, updated_at, \
    ordering, counter_start, format, reset, time_zone, overflow FROM sequences \
    WHERE name >= ? AND name < ? AND name NOT LIKE '%@%' ORDER BY name LIMIT ?";

/// `sql`, written with `?` placeholders, as `dialect` writes it: numbered
/// (`$1`, `$2`, ...) on PostgreSQL, as it is on MySQL/MariaDB and SQLite
/// (no `?` stands for anything else in seqd's statements).
pub(crate) fn in_dialect(dialect: Dialect, sql: &str) -> String {
    match dialect {
        Dialect::Postgres => workers::numbered(sql),
        Dialect::Mysql | Dialect::Sqlite => sql.to_owned(),
    }
}

/// One table of statements per dialect, each written as a constant:
/// `static STATEMENTS: PerDialect<Statements> = PerDialect::new(&POSTGRES,
/// &MYSQL, &SQLITE);`, then `STATEMENTS.of(dialect)`.
pub(crate) struct PerDialect<T: 'static> {
    postgres: &'static T,
    mysql: &'static T,
    sqlite: &'static T,
}

impl<T> PerDialect<T> {
    /// The tables of PostgreSQL, MariaDB/MySQL and SQLite.
    pub(crate) const fn new(postgres: &'static T, mysql: &'static T, sqlite: &'static T) -> Self {
        PerDialect {
            postgres,
            mysql,
            sqlite,
        }
    }

    /// The table of `dialect`.
    pub(crate) fn of(&self, dialect: Dialect) -> &'static T {
        match dialect {
            Dialect::Postgres => self.postgres,
            Dialect::Mysql => self.mysql,
            Dialect::Sqlite => self.sqlite,
        }
    }
}

/// The columns of a [`SequenceRow`], in the order the backends read them
/// (`Columns`).
pub const COLUMNS: &str = "name, max_id, step, description, created_at, updated_at, ordering, \
     counter_start, format, reset, time_zone, overflow";

/// Leaves out the period counters of serial sequences (`name@key`, see
/// [`crate::domain::is_period_counter`]) from lists: they are rows of the
/// table, not sequences.
pub const NOT_COUNTER: &str = "name NOT LIKE '%@%'";

/// `"{"`: above every valid name in byte order (see
/// [`crate::domain::ABOVE_NAME_CHARS`]).
pub(crate) const NAMES_END: &str = "{";

/// [`Catalog::list_page`] on a backend's pool: runs the statement
/// [`page_sql_in`] of `dialect` and converts the rows read with `convert`.
pub(crate) async fn fetch_page<DB: SqlDb>(
    pool: &sqlx::Pool<DB>,
    prefix: Option<&NamePrefix>,
    after: Option<&SeqName>,
    limit: u32,
) -> Result<SequencePage, StoreError> {
    let range = page_range(prefix, after, limit);
    if range.is_empty() {
        return Ok(SequencePage::from_read(Vec::new(), limit, columns_row));
    }
    let sql = page_sql_of(DB::DIALECT, range.inclusive);
    let rows: Vec<Columns> = retrying!(
        DB::DIALECT.name(),
        Statement::new(sql)
            .bind(range.lower)
            .bind(&*range.upper)
            .bind(range.read)
            .fetch_all_pooled::<DB, Columns>(pool)
            .await
    )
    .map_err(unavailable)?;
    Ok(SequencePage::from_read(rows, limit, columns_row))
}

/// Most names one statement of [`Catalog::settings_of`] asks for: every
/// backend takes this many binds in one statement (SQLite's historic limit
/// is 999), and an `IN` list of this size is one index probe per name.
pub const SETTINGS_CHUNK: usize = 500;

/// `SELECT` of the rows named by `n` placeholders, as MySQL/MariaDB and
/// SQLite write them (`?`).
pub fn named_rows_sql(n: usize) -> String {
    format!("SELECT {COLUMNS} FROM sequences WHERE name {}", in_list(n))
}

/// `IN (?, ?, ...)` with `n` placeholders.
pub(crate) fn in_list(n: usize) -> String {
    format!("IN ({})", vec!["?"; n].join(", "))
}

/// [`Catalog::settings_of`] on a backend's pool: runs [`named_rows_sql`]
/// (in `dialect`) once per [`SETTINGS_CHUNK`] names and converts the rows
/// read with `convert` (a row that does not convert is left out).
pub(crate) async fn fetch_named<DB: SqlDb>(
    pool: &sqlx::Pool<DB>,
    names: &[SeqName],
) -> Result<Vec<SequenceRow>, StoreError> {
    let mut rows = Vec::with_capacity(names.len());
    for chunk in names.chunks(SETTINGS_CHUNK) {
        let sql = in_dialect(DB::DIALECT, &named_rows_sql(chunk.len()));
        let read = retrying!(
            DB::DIALECT.name(),
            Statement::new(&sql)
                .bind_all(chunk.iter().map(SeqName::as_str))
                .fetch_all_pooled::<DB, Columns>(pool)
                .await
        )
        .map_err(unavailable)?;
        rows.extend(read.into_iter().filter_map(columns_row));
    }
    Ok(rows)
}

/// [`Segments::compare_and_set_max_id`] on a backend's pool: runs `update`
/// (binds, in this order: new, name, expected; `max_id = new` where the
/// name and the expected value match), then, if it changed no row, `exists` (bind: name)
/// to tell a moved row (false) from a missing one ([`StoreError::NotFound`]);
/// `affected` reads the backend's count of changed rows.
/// `new == expected` only reads: a database may count an update that
/// changes nothing as no row.
pub(crate) async fn compare_and_set<DB: SqlDb>(
    pool: &sqlx::Pool<DB>,
    update: &str,
    exists: &str,
    name: &SeqName,
    expected: i64,
    new: i64,
) -> Result<bool, StoreError> {
    let mut held = pool::Held::acquire(pool).await?;
    if new != expected {
        let done = retrying!(
            DB::DIALECT.name(),
            Statement::new(update)
                .bind(new)
                .bind(name.as_str())
                .bind(expected)
                .execute::<DB>(held.conn())
                .await
        );
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
        DB::DIALECT.name(),
        Statement::new(exists)
            .bind(name.as_str())
            .fetch_optional::<DB, (i64,)>(held.conn())
            .await
    );
    match held.finish(row)? {
        Some((max_id,)) => Ok(new == expected && max_id == expected),
        None => Err(StoreError::NotFound),
    }
}

/// Narrows a driver error to [`StoreError`]: configuration problems become
/// [`StoreError::Config`], everything else [`StoreError::Unavailable`] with the
/// driver's text (for logs only).
pub(crate) fn unavailable(e: sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::Configuration(e) => StoreError::Config(e.to_string()),
        sqlx::Error::Database(db) if db.is_check_violation() => StoreError::Invalid(db.to_string()),
        other => StoreError::Unavailable(other.to_string()),
    }
}

/// Narrows an `INSERT` error: a unique violation means the name is taken.
pub(crate) fn insert_failed(e: sqlx::Error) -> StoreError {
    match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::AlreadyExists,
        _ => unavailable(e),
    }
}

/// `start - 1`, the `max_id` of a new sequence; `start` was validated (>= 1),
/// this only guards against a hand-built [`NewSequence`].
pub(crate) fn initial_max_id(seq: &NewSequence) -> Result<i64, StoreError> {
    seq.start
        .checked_sub(1)
        .filter(|m| *m >= 0)
        .ok_or_else(|| StoreError::Config(format!("invalid start {}: must be >= 1", seq.start)))
}

/// One row of the table's [`COLUMNS`] as read: `name` as `N` (text, or
/// its bytes on MySQL/MariaDB, [`name_text`]), the timestamps as `T`
/// ([`ReadTime`]).
pub(crate) type Columns = (
    String,
    i64,
    i64,
    String,
    DateTime<Utc>,
    DateTime<Utc>,
    String,
    i64,
    Option<String>,
    String,
    String,
    String,
);

/// The columns `counter_start, format, reset, time_zone, overflow` of a row.
#[derive(Debug)]
pub(crate) struct SerialColumns {
    pub(crate) counter_start: i64,
    pub(crate) format: Option<String>,
    pub(crate) reset: String,
    pub(crate) time_zone: String,
    pub(crate) overflow: String,
}

/// Converts fetched [`Columns`] (`None` for an invalid stored name).
pub(crate) fn columns_row(row: Columns) -> Option<SequenceRow> {
    let serial = SerialColumns {
        counter_start: row.7,
        format: row.8,
        reset: row.9,
        time_zone: row.10,
        overflow: row.11,
    };
    row_from_columns(row.0, row.1, row.2, row.3, row.4, row.5, &row.6, serial)
}

/// Like [`columns_row`] for a row looked up by a valid name, which must
/// convert.
pub(crate) fn found_row(row: Columns) -> Result<SequenceRow, StoreError> {
    columns_row(row)
        .ok_or_else(|| StoreError::Unavailable("row with an invalid name returned".into()))
}

/// Builds a [`SequenceRow`] from the columns of the table, or `None` when the
/// stored name is not a valid [`SeqName`] (a row an operator inserted by hand
/// with a name the API could never ask for). Serial settings that do not
/// parse (a hand-edited `format`) keep the row, with its
/// [`SequenceRow::problem`] naming the field: reads, lists and repairs see
/// it, requests for it are refused.
#[allow(clippy::too_many_arguments)] // one per column of the table
pub(crate) fn row_from_columns(
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
        ordering: IdOrdering::from_column(ordering),
        created_at,
        updated_at,
        counter_start: columns.counter_start,
        serial,
        problem,
    })
}

/// Why a reserving statement of `how` updated no row, from the row's
/// `format IS NOT NULL` and `ordering` read afterwards (`None`: no row):
/// [`StoreError::NotFound`], [`StoreError::Serial`] (the row issues serial
/// numbers), [`StoreError::Global`] (a lease of a global row) or
/// [`StoreError::Exhausted`].
pub(crate) fn refused(row: Option<(bool, IdOrdering)>, how: Reserve) -> StoreError {
    match (row, how) {
        (None, _) => StoreError::NotFound,
        (Some((true, _)), _) => StoreError::Serial,
        (Some((false, IdOrdering::Global)), Reserve::Lease(_)) => StoreError::Global,
        (Some((false, _)), _) => StoreError::Exhausted,
    }
}

/// Whether the schema is as current as this seqd needs, for readiness
/// (docs/design.md, "Readiness"): one query counts the migrations of this
/// binary that `seqd_migrations` records as applied. When one is missing,
/// `check` (the store's [`Schema::check_schema`], which also accepts a history
/// still kept in `_sqlx_migrations`) gives the verdict and names what is
/// missing as [`StoreError::Migration`]. A database that does not answer, or
/// has no `seqd_migrations`, is [`StoreError::Unavailable`].
pub(crate) async fn schema_ready<DB: SqlDb>(
    pool: &sqlx::Pool<DB>,
    check: impl std::future::Future<Output = Result<(), StoreError>>,
) -> Result<(), StoreError> {
    let dialect = DB::DIALECT;
    let mut held = pool::Held::acquire(pool).await?;
    let row = retrying!(
        dialect.name(),
        Statement::new(dialect.applied_count_sql())
            .fetch_one::<DB, (i64,)>(held.conn())
            .await
    );
    let (applied,) = held.finish(row)?;
    if applied == dialect.migrations().len() as i64 {
        return Ok(());
    }
    check.await
}

/// The values of `format, reset, time_zone, overflow` for settings
/// (`None`: a plain sequence, the columns' defaults).
pub(crate) fn serial_values(
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
pub(crate) fn check_period_key(key: &str) -> Result<(), StoreError> {
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
pub(crate) fn counter_names(parent: &SeqName, keys: &[String]) -> Result<Vec<String>, StoreError> {
    keys.iter()
        .map(|key| {
            check_period_key(key)?;
            Ok(parent.period_counter(key).as_str().to_owned())
        })
        .collect()
}

/// A [`PeriodRow`] from a counter row named `name` in the range that starts
/// at `low` (`parent@`).
pub(crate) fn period_row(
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
pub(crate) fn reservation(
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
            ordering: IdOrdering::from_column(ordering),
            regressed: false,
        })
    } else {
        Err(StoreError::Unavailable(format!(
            "inconsistent reservation from the database: max_id={max_id} size={size} step={row_step}"
        )))
    }
}

/// Which reserving statement of `Reserving` (`store/sequences/mod.rs`) a reservation runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reserve {
    /// At `max(step, size)`.
    Step,
    /// Exactly the size, never past this cap.
    Exact(i64),
    /// Exactly the size, never past this cap, never on a global row.
    Lease(i64),
}

/// One backend's reserving statements, each run once. The flow around them
/// ([`reserve_flow`], [`reserve_exact_flow`]) is the same on every backend
/// and written once: the retry at the row's own step near `i64::MAX`, and
/// the reason a statement matched no row.
#[async_trait]
pub(crate) trait ReserveOnce: Send + Sync {
    /// The reserving statement `how` says, of `size`, once; `None` when it
    /// matched no row (missing, full, serial, or global for a lease).
    async fn reserve_once(
        &self,
        name: &SeqName,
        size: i64,
        how: Reserve,
    ) -> Result<Option<Reservation>, StoreError>;

    /// Why a reserving statement of `how` on `name` matched no row.
    async fn refusal(&self, name: &SeqName, how: Reserve) -> Result<StoreError, StoreError>;

    /// One group's reserving statement: `names` (distinct, at most
    /// [`GROUP_LIMIT`]) at `max(step, size)`; the names it reserved, each
    /// with its reservation.
    async fn reserve_group_once(
        &self,
        names: &[&str],
        size: i64,
    ) -> Result<Vec<(String, Reservation)>, StoreError>;
}

/// Most names in one group's reserving statement
/// ([`Segments::group_limit`] of a SQL store): far under every dialect's
/// bound on placeholders, and one statement of a few milliseconds.
pub(crate) const GROUP_LIMIT: usize = 256;

/// [`Segments::reserve_group`] over a backend's statements: the asks of
/// one size in one statement ([`ReserveOnce::reserve_group_once`]), a name
/// it left out (missing, serial, full), asked twice or alone of its size
/// reserved alone by
/// [`reserve_flow`], which answers as it would have alone; a failed
/// statement is every one of its names' answer.
pub(crate) async fn reserve_group_flow<S: ReserveOnce + ?Sized>(
    store: &S,
    asks: &[(SeqName, i64)],
) -> Vec<Result<Reservation, StoreError>> {
    let mut answers: Vec<Option<Result<Reservation, StoreError>>> = vec![None; asks.len()];
    let mut sizes: Vec<i64> = asks.iter().map(|(_, size)| *size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for size in sizes {
        let mut seen = std::collections::HashSet::new();
        let of_size: Vec<usize> = (0..asks.len())
            .filter(|&i| asks[i].1 == size && seen.insert(asks[i].0.as_str()))
            .collect();
        // A name alone goes through `reserve_flow` below: the statement of a
        // lone first use stays the one it always was.
        for chunk in of_size.chunks(GROUP_LIMIT).filter(|c| c.len() > 1) {
            let names: Vec<&str> = chunk.iter().map(|&i| asks[i].0.as_str()).collect();
            match store.reserve_group_once(&names, size).await {
                Ok(granted) => {
                    let mut granted: std::collections::HashMap<String, Reservation> =
                        granted.into_iter().collect();
                    for &i in chunk {
                        answers[i] = granted.remove(asks[i].0.as_str()).map(Ok);
                    }
                }
                Err(e) => {
                    for &i in chunk {
                        answers[i] = Some(Err(e.clone()));
                    }
                }
            }
        }
    }
    let mut out = Vec::with_capacity(asks.len());
    for (answer, (name, size)) in answers.into_iter().zip(asks) {
        out.push(match answer {
            Some(answer) => answer,
            None => reserve_flow(store, name, *size).await,
        });
    }
    out
}

/// [`Segments::reserve`] over a backend's statements.
pub(crate) async fn reserve_flow<S: ReserveOnce + ?Sized>(
    store: &S,
    name: &SeqName,
    min_size: i64,
) -> Result<Reservation, StoreError> {
    if let Some(r) = store.reserve_once(name, min_size, Reserve::Step).await? {
        return Ok(r);
    }
    // Near i64::MAX a large request may not fit while the row's own step does.
    if min_size > 1 {
        if let Some(r) = store.reserve_once(name, 1, Reserve::Step).await? {
            return Ok(r);
        }
    }
    Err(store.refusal(name, Reserve::Step).await?)
}

/// [`Segments::reserve_within`] and [`Segments::reserve_lease`] over a
/// backend's statements: exactly `n`, as `how` says.
pub(crate) async fn reserve_exact_flow<S: ReserveOnce + ?Sized>(
    store: &S,
    name: &SeqName,
    n: i64,
    how: Reserve,
) -> Result<Reservation, StoreError> {
    match store.reserve_once(name, n, how).await? {
        Some(r) => Ok(r),
        None => Err(store.refusal(name, how).await?),
    }
}
