//! The sequence store on the SQL backends, once: [`Catalog`] and the
//! reserving statements under [`Segments`] ([`Sequences`]), each statement
//! written once with `?` placeholders (numbered for PostgreSQL) and what a
//! dialect writes differently beside it. A backend gives the types it reads
//! and its reserving statements ([`SequenceDb`]), and [`sql_sequences!`]
//! implements the traits for its store in one line, in its `sequences.rs`.
//!
//! Where a dialect has `RETURNING` (PostgreSQL, SQLite), a statement that
//! writes a row returns it; on MySQL/MariaDB the row is read back in the
//! same transaction. Statements with `RETURNING` are read with `fetch_all`:
//! SQLite commits an autocommit statement only when it is stepped to
//! completion, and sqlx's `fetch_optional` stops after the first row and
//! ignores an error of the final reset, so a failed commit could go
//! unnoticed (and the same range be handed out twice). Stepping to the end
//! reports it.

pub(crate) mod fence;
mod statements;
mod stores;

use statements::{group_sql, Group, STATEMENTS, WIDEN_BOUND};
pub(crate) use stores::{on_sequences, sql_sequences};

use sqlx::{Connection, Pool};

use super::migrator::Dialect;
use super::pool::Held;
use super::retry::retrying;
use super::sql::{
    check_period_key, columns_row, compare_and_set, counter_names, fetch_named, fetch_page,
    found_row, in_dialect, in_list, initial_max_id, insert_failed, name_text, period_row, refused,
    reservation, serial_values, unavailable, Columns, ReadTime, Reserve, SETTINGS_CHUNK,
};
use super::workers::LeaseDb;
use super::{bump_binds, names_in};
use super::{PeriodRow, Reservation, SequencePage, SequencePatch, SequenceRow, StoreError};
use crate::domain::{period_rows_range, IdOrdering, NamePrefix, NewSequence, SeqName};

#[allow(unused_imports)] // for the links of the documentation
use super::{BumpSql, Catalog, Schema, Segments, StripeRecords};

/// What a backend's sqlx database brings to [`Sequences`]: the types of its
/// columns as read and its reserving statements (its [`LeaseDb`] gives its
/// dialect and its count of changed rows).
pub(crate) trait SequenceDb: LeaseDb {
    /// What `name` is read as: text, or its bytes ([`name_text`]).
    type Name: for<'r> sqlx::Decode<'r, Self>
        + sqlx::Type<Self>
        + Into<Vec<u8>>
        + Clone
        + Send
        + Unpin;

    /// What `created_at` and `updated_at` are read as.
    type Time: for<'r> sqlx::Decode<'r, Self> + sqlx::Type<Self> + ReadTime + Send + Unpin;

    /// The reserving statements (docs/design.md, "Reserving a segment").
    const RESERVING: Reserving;
}

/// A backend's reserving statements, each reading back `max_id`, the size
/// added, `step` and `ordering`.
pub(crate) enum Reserving {
    /// One `UPDATE ... RETURNING` each: `reserve` binds the name and the
    /// minimum size; `exact` the name, the size and the cap.
    Returning {
        /// At `max(step, min_size)`.
        reserve: &'static str,
        /// Exactly `n`, never past the cap.
        exact: &'static str,
        /// `exact` of a lease: never on a global row.
        lease: &'static str,
    },
    /// An `UPDATE` (binds: the size, the name and a guard: the minimum size,
    /// or the cap minus the size) then a `SELECT` (binds: the size, the
    /// name) in one transaction, rolled back when the update matched no row.
    UpdateThenSelect {
        /// At `max(step, min_size)`.
        reserve: (&'static str, &'static str),
        /// Exactly `n`, never past the cap.
        exact: (&'static str, &'static str),
        /// `exact` of a lease: never on a global row.
        lease: (&'static str, &'static str),
    },
}

/// The statements of one dialect, each with one placeholder per bind, in
/// bind order.
struct Statements {
    /// Whether a statement that writes a row returns it (`RETURNING`).
    returning: bool,
    /// Bind: the name. Reads [`COLUMNS`].
    get: &'static str,
    /// Reads [`COLUMNS`] of every sequence (no period counter), by name in
    /// byte order.
    list: &'static str,
    /// Binds: name, max_id, step, description, ordering, counter_start,
    /// format, reset, time_zone, overflow. Returns [`COLUMNS`] where
    /// `returning`.
    insert: &'static str,
    /// Binds: step, description, ordering (each `NULL`: unchanged), then
    /// four times whether the serial settings are set, each before one of
    /// format, reset, time_zone, overflow; then the name. Returns
    /// [`COLUMNS`] where `returning`.
    update: &'static str,
    /// Gives the counter rows in a name range the step and the ordering of
    /// their sequence (each `NULL`: unchanged). Binds: step, ordering, low,
    /// high.
    update_periods: &'static str,
    /// Creates a counter row (first bind) of a period of a sequence (second
    /// bind) from its row (`max_id = counter_start - 1`, its step and
    /// ordering), unless it exists: any number of instances may run it at
    /// once, one inserts.
    create_period: &'static str,
    /// The counter rows in the name range `[low, high)` (binds), in byte
    /// order. Reads `name, max_id, created_at, updated_at`.
    list_periods: &'static str,
    /// After a reserving statement that updated nothing: 1 when the row
    /// issues serial numbers, 0 when it is plain (and full, or global for a
    /// lease), and its ordering; no row when it is missing. Bind: the name.
    read_kind: &'static str,
    /// Sets `max_id` to the first bind where the name (second) and `max_id`
    /// (third) match: a compare-and-set, for
    /// [`Segments::compare_and_set_max_id`].
    set_max_id_if: &'static str,
    /// Reads `max_id` of one row. Bind: the name.
    read_max_id: &'static str,
    /// Appended to a bump's read inside its transaction: holds the rows'
    /// locks until commit.
    bump_lock: &'static str,
    /// Adds the first bind to `max_id`, sparing rows that would pass
    /// `i64::MAX` (the caller checks the count). Binds: by, by;
    /// [`names_in`] appends the names and their counters' ranges, if any.
    bump: &'static str,
}

/// The statement that opens a bump's transaction in `dialect`: on SQLite
/// `BEGIN IMMEDIATE`, which holds the database's write lock from the start,
/// so the rows read cannot change before the update.
pub(crate) const fn begin_bump(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => "BEGIN IMMEDIATE",
        Dialect::Postgres | Dialect::Mysql => "BEGIN",
    }
}

/// A row of the table as `DB` reads it.
pub(crate) type Row<DB> = Columns<<DB as SequenceDb>::Name, <DB as SequenceDb>::Time>;

/// What a reserving statement reads back: `max_id`, the size added, `step`
/// and `ordering`.
type Granted = (i64, i64, i64, String);

/// What a group's reserving statement reads back per row: the name, then
/// as [`Granted`].
type Granting<DB> = (<DB as SequenceDb>::Name, i64, i64, i64, String);

/// `names`, then its last name again up to the next power of two: a group's
/// list of names, padded so that a few statements serve every group size
/// (each prepared once per connection); `IN` ignores the repeats.
fn padded<'a>(names: &'a [&'a str]) -> impl Iterator<Item = &'a str> + 'a {
    let last = names.last().copied().unwrap_or_default();
    let len = names.len().next_power_of_two();
    names
        .iter()
        .copied()
        .chain(std::iter::repeat(last))
        .take(len)
}

/// A counter row as read by `list_periods`.
type Period<DB> = (
    <DB as SequenceDb>::Name,
    i64,
    <DB as SequenceDb>::Time,
    <DB as SequenceDb>::Time,
);

/// The sequence store over the pool of a SQL backend: each method of
/// [`Catalog`] and each reserving statement of [`Segments`], once.
pub(crate) struct Sequences<'p, DB: sqlx::Database>(pub(crate) &'p Pool<DB>);

impl<DB> Sequences<'_, DB>
where
    DB: SequenceDb,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'c> &'c Pool<DB>: sqlx::Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<i64>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> bool: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<&'q str>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Row<DB>: for<'r> sqlx::FromRow<'r, DB::Row>,
    Period<DB>: for<'r> sqlx::FromRow<'r, DB::Row>,
    Granted: for<'r> sqlx::FromRow<'r, DB::Row>,
    Granting<DB>: for<'r> sqlx::FromRow<'r, DB::Row>,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
    (i64, String): for<'r> sqlx::FromRow<'r, DB::Row>,
    (DB::Name, i64): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    fn statements() -> &'static Statements {
        STATEMENTS.of(DB::DIALECT)
    }

    /// The row a statement that writes it returned (`RETURNING`), or else
    /// read back on the same connection (inside its transaction); `None`
    /// when there is no such row.
    async fn written(
        conn: &mut DB::Connection,
        returned: Vec<Row<DB>>,
        name: &SeqName,
    ) -> Result<Option<Row<DB>>, sqlx::Error> {
        let statements = Self::statements();
        match returned.into_iter().next() {
            Some(row) => Ok(Some(row)),
            None if statements.returning => Ok(None),
            None => {
                sqlx::query_as::<DB, Row<DB>>(statements.get)
                    .bind(name.as_str())
                    .fetch_optional(conn)
                    .await
            }
        }
    }

    /// [`Catalog::create`]: inserts the row and returns it, in one
    /// transaction.
    pub(crate) async fn create(&self, seq: &NewSequence) -> Result<SequenceRow, StoreError> {
        let max_id = initial_max_id(seq)?;
        let (format, reset, time_zone, overflow) = serial_values(seq.serial.as_ref());
        let row = retrying!(
            DB::DIALECT.name(),
            async {
                let mut tx = self.0.begin().await?;
                let returned = sqlx::query_as::<DB, Row<DB>>(Self::statements().insert)
                    .bind(seq.name.as_str())
                    .bind(max_id)
                    .bind(seq.step)
                    .bind(seq.description.as_str())
                    .bind(seq.ordering.as_str())
                    .bind(seq.start)
                    .bind(format.as_deref())
                    .bind(reset)
                    .bind(time_zone.as_str())
                    .bind(overflow)
                    .fetch_all(&mut *tx)
                    .await?;
                let row = Self::written(&mut tx, returned, &seq.name).await?;
                tx.commit().await?;
                Ok(row)
            }
            .await
        )
        .map_err(insert_failed)?;
        row.map(found_row)
            .transpose()?
            .ok_or_else(|| StoreError::Unavailable("inserted row not found".into()))
    }

    /// [`Catalog::get`].
    pub(crate) async fn get(&self, name: &SeqName) -> Result<Option<SequenceRow>, StoreError> {
        let row: Option<Row<DB>> = retrying!(
            DB::DIALECT.name(),
            sqlx::query_as(Self::statements().get)
                .bind(name.as_str())
                .fetch_optional(self.0)
                .await
        )
        .map_err(unavailable)?;
        row.map(found_row).transpose()
    }

    /// [`Catalog::settings_of`].
    pub(crate) async fn settings_of(
        &self,
        names: &[SeqName],
    ) -> Result<Vec<SequenceRow>, StoreError> {
        fetch_named(
            self.0,
            DB::DIALECT,
            names,
            columns_row::<DB::Name, DB::Time>,
        )
        .await
    }

    /// [`Catalog::list`].
    pub(crate) async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        let rows: Vec<Row<DB>> = retrying!(
            DB::DIALECT.name(),
            sqlx::query_as(Self::statements().list)
                .fetch_all(self.0)
                .await
        )
        .map_err(unavailable)?;
        Ok(rows.into_iter().filter_map(columns_row).collect())
    }

    /// [`Catalog::list_page`].
    pub(crate) async fn list_page(
        &self,
        prefix: Option<&NamePrefix>,
        after: Option<&SeqName>,
        limit: u32,
    ) -> Result<SequencePage, StoreError> {
        let convert = columns_row::<DB::Name, DB::Time>;
        fetch_page(self.0, DB::DIALECT, prefix, after, limit, convert).await
    }

    /// [`Catalog::update`]: the row and its period counters (a new step or
    /// ordering reaches them) in one transaction. The row is decided on as
    /// returned or read back, not on a count of changed rows (which, on
    /// MySQL/MariaDB, depends on the "found rows" flag). The first statement
    /// writes, so on SQLite the transaction takes the write lock at once
    /// (no read lock to upgrade).
    pub(crate) async fn update(
        &self,
        name: &SeqName,
        patch: &SequencePatch,
    ) -> Result<SequenceRow, StoreError> {
        let statements = Self::statements();
        let (format, reset, time_zone, overflow) =
            serial_values(patch.serial.as_ref().and_then(Option::as_ref));
        let set = patch.serial.is_some();
        let (low, high) = period_rows_range(name);
        let row = retrying!(
            DB::DIALECT.name(),
            async {
                let mut tx = self.0.begin().await?;
                let returned = sqlx::query_as::<DB, Row<DB>>(statements.update)
                    .bind(patch.step)
                    .bind(patch.description.as_deref())
                    .bind(patch.ordering.map(|o| o.as_str()))
                    .bind(set)
                    .bind(format.as_deref())
                    .bind(set)
                    .bind(reset)
                    .bind(set)
                    .bind(time_zone.as_str())
                    .bind(set)
                    .bind(overflow)
                    .bind(name.as_str())
                    .fetch_all(&mut *tx)
                    .await?;
                let row = Self::written(&mut tx, returned, name).await?;
                if row.is_some() && (patch.step.is_some() || patch.ordering.is_some()) {
                    sqlx::query::<DB>(statements.update_periods)
                        .bind(patch.step)
                        .bind(patch.ordering.map(|o| o.as_str()))
                        .bind(low.as_str())
                        .bind(high.as_str())
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(row)
            }
            .await
        )
        .map_err(unavailable)?;
        row.map(found_row).transpose()?.ok_or(StoreError::NotFound)
    }

    /// [`Catalog::create_period`].
    pub(crate) async fn create_period(
        &self,
        parent: &SeqName,
        key: &str,
    ) -> Result<bool, StoreError> {
        check_period_key(key)?;
        let statements = Self::statements();
        let counter = parent.period_counter(key);
        let done = retrying!(
            DB::DIALECT.name(),
            sqlx::query::<DB>(statements.create_period)
                .bind(counter.as_str())
                .bind(parent.as_str())
                .execute(self.0)
                .await
        )
        .map_err(unavailable)?;
        if DB::rows_affected(&done) == 1 {
            return Ok(true);
        }
        match self.serial_flag(parent).await? {
            Some(_) => Ok(false),
            None => Err(StoreError::NotFound),
        }
    }

    /// [`Catalog::list_periods`].
    pub(crate) async fn list_periods(
        &self,
        parent: &SeqName,
    ) -> Result<Vec<PeriodRow>, StoreError> {
        let (low, high) = period_rows_range(parent);
        let rows: Vec<Period<DB>> = retrying!(
            DB::DIALECT.name(),
            sqlx::query_as(Self::statements().list_periods)
                .bind(low.as_str())
                .bind(high.as_str())
                .fetch_all(self.0)
                .await
        )
        .map_err(unavailable)?;
        Ok(rows
            .into_iter()
            .map(|(name, max_id, created_at, updated_at)| {
                period_row(
                    &low,
                    &name_text(name),
                    max_id,
                    created_at.utc(),
                    updated_at.utc(),
                )
            })
            .collect())
    }

    /// [`Catalog::delete_periods`]: one `DELETE` per [`SETTINGS_CHUNK`]
    /// names, all in one transaction.
    pub(crate) async fn delete_periods(
        &self,
        parent: &SeqName,
        keys: &[String],
    ) -> Result<u64, StoreError> {
        let names = counter_names(parent, keys)?;
        retrying!(
            DB::DIALECT.name(),
            async {
                let mut tx = self.0.begin().await?;
                let mut deleted = 0;
                for chunk in names.chunks(SETTINGS_CHUNK) {
                    let sql = in_dialect(
                        DB::DIALECT,
                        &format!("DELETE FROM sequences WHERE name {}", in_list(chunk.len())),
                    );
                    let mut query = sqlx::query::<DB>(&sql);
                    for name in chunk {
                        query = query.bind(name.as_str());
                    }
                    deleted += DB::rows_affected(&query.execute(&mut *tx).await?);
                }
                tx.commit().await?;
                Ok(deleted)
            }
            .await
        )
        .map_err(unavailable)
    }

    /// [`Segments::compare_and_set_max_id`].
    pub(crate) async fn compare_and_set(
        &self,
        name: &SeqName,
        expected: i64,
        new: i64,
    ) -> Result<bool, StoreError> {
        let statements = Self::statements();
        let (update, exists) = (statements.set_max_id_if, statements.read_max_id);
        compare_and_set(
            self.0,
            update,
            exists,
            DB::rows_affected,
            name,
            expected,
            new,
        )
        .await
    }

    /// A reserving statement of [`SequenceDb::RESERVING`] once, as `how`
    /// says: at `max(step, size)`, or exactly `size` never past a cap (of
    /// a lease: never on a global row); `None` when it matched no row.
    pub(crate) async fn reserve(
        &self,
        name: &SeqName,
        size: i64,
        how: Reserve,
    ) -> Result<Option<Reservation>, StoreError> {
        let granted = match DB::RESERVING {
            Reserving::Returning {
                reserve,
                exact,
                lease,
            } => {
                let (sql, cap) = match how {
                    Reserve::Step => (reserve, None),
                    Reserve::Exact(cap) => (exact, Some(cap)),
                    Reserve::Lease(cap) => (lease, Some(cap)),
                };
                let mut held = Held::acquire(self.0).await?;
                let rows = retrying!(DB::DIALECT.name(), {
                    let query = sqlx::query_as::<DB, Granted>(sql)
                        .bind(name.as_str())
                        .bind(size);
                    match cap {
                        Some(cap) => query.bind(cap),
                        None => query,
                    }
                    .fetch_all(held.conn())
                    .await
                });
                held.finish(rows)?.into_iter().next()
            }
            Reserving::UpdateThenSelect {
                reserve,
                exact,
                lease,
            } => {
                // The exact update's guard is `cap - size`, computed here:
                // no overflow, the cap is at least 0 and the size at least 1.
                let under = |cap: i64| cap.checked_sub(size).ok_or(StoreError::Exhausted);
                let (statements, guard) = match how {
                    Reserve::Step => (reserve, size),
                    Reserve::Exact(cap) => (exact, under(cap)?),
                    Reserve::Lease(cap) => (lease, under(cap)?),
                };
                let mut held = Held::acquire(self.0).await?;
                let read = retrying!(
                    DB::DIALECT.name(),
                    Self::update_then_select(held.conn(), statements, name, size, guard).await
                );
                held.finish(read)?
            }
        };
        granted
            .map(|(max_id, size, step, ordering)| reservation(max_id, size, step, &ordering))
            .transpose()
    }

    /// One reservation transaction of [`Reserving::UpdateThenSelect`] on
    /// `conn`: the update, then the select, then `COMMIT`; `None` (rolled
    /// back) if no row was updated.
    async fn update_then_select(
        conn: &mut DB::Connection,
        (update, select): (&str, &str),
        name: &SeqName,
        size: i64,
        guard: i64,
    ) -> Result<Option<Granted>, sqlx::Error> {
        let mut tx = conn.begin().await?;
        let updated = sqlx::query::<DB>(update)
            .bind(size)
            .bind(name.as_str())
            .bind(guard)
            .execute(&mut *tx)
            .await?;
        if DB::rows_affected(&updated) == 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        let read = sqlx::query_as::<DB, Granted>(select)
            .bind(size)
            .bind(name.as_str())
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(read))
    }

    /// One group of first reservations, all of `size` (docs/design.md,
    /// "Grouped first reservations"): what [`Sequences::reserve`] at
    /// [`Reserve::Step`] does to each of `names` (distinct), for all of
    /// them in one statement (PostgreSQL, SQLite: `UPDATE ... WHERE name IN
    /// (...) RETURNING`) or one transaction (MariaDB: the rows read `FOR
    /// UPDATE`, then one `UPDATE` of those that fit). The rows are locked in
    /// the order the database scans the list, the same for every group (a
    /// deadlock reported all the same is retried). Answers the names
    /// reserved with their reservation; a
    /// name left out (missing, serial, full) is for the caller to reserve
    /// alone, which says why.
    pub(crate) async fn reserve_group(
        &self,
        names: &[&str],
        size: i64,
    ) -> Result<Vec<(String, Reservation)>, StoreError> {
        let dialect = DB::DIALECT;
        let mut held = Held::acquire(self.0).await?;
        let granted = if Self::statements().returning {
            let sql = group_sql(Group::Reserve, dialect, padded(names).count());
            let rows = retrying!(dialect.name(), {
                let mut query = sqlx::query_as::<DB, Granting<DB>>(sql).bind(size);
                for name in padded(names) {
                    query = query.bind(name);
                }
                query.bind(size).bind(size).fetch_all(held.conn()).await
            });
            held.finish(rows)?
        } else {
            let rows = retrying!(
                dialect.name(),
                Self::lock_then_update(held.conn(), names, size).await
            );
            held.finish(rows)?
        };
        granted
            .into_iter()
            .map(|(name, max_id, size, step, ordering)| {
                Ok((name_text(name), reservation(max_id, size, step, &ordering)?))
            })
            .collect()
    }

    /// [`Sequences::reserve_group`] where no `UPDATE` returns its rows: in
    /// one transaction, the rows of `names` read and locked, then one
    /// `UPDATE` of those whose range fits under `i64::MAX`; answers them as
    /// updated.
    async fn lock_then_update(
        conn: &mut DB::Connection,
        names: &[&str],
        size: i64,
    ) -> Result<Vec<Granting<DB>>, sqlx::Error> {
        let mut tx = conn.begin().await?;
        let read = group_sql(Group::Lock, DB::DIALECT, padded(names).count());
        let mut query = sqlx::query_as::<DB, Granting<DB>>(read).bind(size);
        for name in padded(names) {
            query = query.bind(name);
        }
        let mut rows = query.fetch_all(&mut *tx).await?;
        rows.retain(|&(_, max_id, grant, _, _)| max_id <= i64::MAX - grant);
        if rows.is_empty() {
            tx.rollback().await?;
            return Ok(rows);
        }
        let fit: Vec<String> = rows.iter().map(|r| name_text(r.0.clone())).collect();
        let fit: Vec<&str> = fit.iter().map(String::as_str).collect();
        let update = group_sql(Group::Raise, DB::DIALECT, padded(&fit).count());
        let mut query = sqlx::query::<DB>(update).bind(size);
        for name in padded(&fit) {
            query = query.bind(name);
        }
        let updated = DB::rows_affected(&query.execute(&mut *tx).await?);
        if updated != fit.len() as u64 {
            // The rows are locked: only a broken database gets here.
            tx.rollback().await?;
            return Err(sqlx::Error::Protocol(format!(
                "a group's update changed {updated} of {} locked rows",
                fit.len()
            )));
        }
        tx.commit().await?;
        for row in &mut rows {
            row.1 += row.2;
        }
        Ok(rows)
    }

    /// [`BumpSql::widen_bound`]: `SET LOCAL` on PostgreSQL, until the
    /// transaction ends, then the pool's bound again; elsewhere the bound is
    /// per session only.
    pub(crate) async fn widen_bound(conn: &mut DB::Connection) -> Result<(), sqlx::Error> {
        if DB::DIALECT == Dialect::Postgres {
            sqlx::query::<DB>(WIDEN_BOUND).execute(conn).await?;
        }
        Ok(())
    }

    /// [`BumpSql::read_bump`]: `name, max_id` of the named rows and their
    /// counters ([`names_in`]), or of all rows.
    pub(crate) async fn read_bump(
        conn: &mut DB::Connection,
        names: Option<&[SeqName]>,
        lock: bool,
    ) -> Result<Vec<(String, i64)>, sqlx::Error> {
        let lock = if lock {
            Self::statements().bump_lock
        } else {
            ""
        };
        let sql = format!(
            "SELECT name, max_id FROM sequences{}{lock}",
            names_in(names, "WHERE", DB::DIALECT, 1)
        );
        let binds = bump_binds(names);
        let mut query = sqlx::query_as::<DB, (DB::Name, i64)>(&sql);
        for bind in &binds {
            query = query.bind(bind.as_str());
        }
        Ok(query
            .fetch_all(conn)
            .await?
            .into_iter()
            .map(|(name, max_id)| (name_text(name), max_id))
            .collect())
    }

    /// [`BumpSql::add_bump`]: the bump's update of the named rows and their
    /// counters ([`names_in`]), or of all rows.
    pub(crate) async fn add_bump(
        conn: &mut DB::Connection,
        names: Option<&[SeqName]>,
        by: i64,
    ) -> Result<u64, sqlx::Error> {
        let update = Self::statements().bump;
        let sql = format!("{update}{}", names_in(names, "AND", DB::DIALECT, 3));
        let binds = bump_binds(names);
        let mut query = sqlx::query::<DB>(&sql).bind(by).bind(by);
        for bind in &binds {
            query = query.bind(bind.as_str());
        }
        Ok(DB::rows_affected(&query.execute(conn).await?))
    }

    /// Why a reserving statement of `how` on `name` matched no row.
    pub(crate) async fn refusal(
        &self,
        name: &SeqName,
        how: Reserve,
    ) -> Result<StoreError, StoreError> {
        Ok(refused(self.kind(name).await?, how))
    }

    /// Whether `name` issues serial numbers (`None`: no row).
    async fn serial_flag(&self, name: &SeqName) -> Result<Option<bool>, StoreError> {
        Ok(self.kind(name).await?.map(|(serial, _)| serial))
    }

    /// Whether `name` issues serial numbers, and its ordering (`None`: no
    /// row).
    async fn kind(&self, name: &SeqName) -> Result<Option<(bool, IdOrdering)>, StoreError> {
        let mut held = Held::acquire(self.0).await?;
        let row = retrying!(
            DB::DIALECT.name(),
            sqlx::query_as::<DB, (i64, String)>(Self::statements().read_kind)
                .bind(name.as_str())
                .fetch_optional(held.conn())
                .await
        );
        let row = held.finish(row)?;
        Ok(row.map(|(flag, ordering)| (flag != 0, IdOrdering::from_column(&ordering))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::{binary_page_sql, page_sql_in, COLUMNS, GROUP_LIMIT, NOT_COUNTER};
    use crate::store::BUMP_STATEMENT_BOUND;

    #[test]
    fn each_dialect_writes_its_placeholders_returning_and_byte_order() {
        let pg = STATEMENTS.of(Dialect::Postgres);
        assert_eq!(
            pg.list_periods,
            "SELECT name, max_id, created_at, updated_at FROM sequences \
             WHERE name COLLATE \"C\" >= $1 AND name COLLATE \"C\" < $2 ORDER BY name COLLATE \"C\""
        );
        assert_eq!(
            pg.read_kind,
            "SELECT CASE WHEN format IS NULL THEN 0 ELSE 1 END::BIGINT, ordering FROM sequences \
             WHERE name = $1"
        );
        assert!(
            pg.update
                .ends_with(&format!("WHERE name = $12 RETURNING {COLUMNS}")),
            "{}",
            pg.update
        );
        let mysql = STATEMENTS.of(Dialect::Mysql);
        assert!(!mysql.returning && !mysql.insert.contains("RETURNING"));
        assert!(mysql
            .create_period
            .starts_with("INSERT IGNORE INTO sequences "));
        assert_eq!(
            mysql.set_max_id_if,
            "UPDATE sequences SET max_id = ?, updated_at = CURRENT_TIMESTAMP \
             WHERE name = ? AND max_id = ?"
        );
        let sqlite = STATEMENTS.of(Dialect::Sqlite);
        assert!(sqlite.returning && sqlite.insert.ends_with(&format!("RETURNING {COLUMNS}")));
        assert!(
            sqlite
                .create_period
                .ends_with("WHERE name = ? ON CONFLICT (name) DO NOTHING"),
            "{}",
            sqlite.create_period
        );
        assert_eq!(begin_bump(Dialect::Sqlite), "BEGIN IMMEDIATE");
        assert_eq!(
            WIDEN_BOUND,
            format!(
                "SET LOCAL statement_timeout = {}",
                BUMP_STATEMENT_BOUND.as_millis()
            )
        );
        assert_eq!(begin_bump(Dialect::Mysql), "BEGIN");
    }

    #[test]
    fn a_group_statement_is_written_once_per_padded_count() {
        let two = group_sql(Group::Reserve, Dialect::Postgres, 2);
        assert_eq!(
            two,
            "UPDATE sequences SET max_id = max_id + GREATEST(step, $1), \
             updated_at = CURRENT_TIMESTAMP WHERE name IN ($2, $3) AND format IS NULL \
             AND max_id <= 9223372036854775807 - GREATEST(step, $4) \
             RETURNING name, max_id, GREATEST(step, $5) AS size, step, ordering"
        );
        assert!(std::ptr::eq(
            two,
            group_sql(Group::Reserve, Dialect::Postgres, 2)
        ));
        assert!(group_sql(Group::Reserve, Dialect::Sqlite, 4).contains("MAX(step, ?) AS size"));
        assert_eq!(
            group_sql(Group::Lock, Dialect::Mysql, 2),
            "SELECT name, max_id, GREATEST(step, ?) AS size, step, ordering \
             FROM sequences WHERE name IN (?, ?) AND format IS NULL FOR UPDATE"
        );
        assert_eq!(
            group_sql(Group::Raise, Dialect::Mysql, GROUP_LIMIT)
                .matches('?')
                .count(),
            GROUP_LIMIT + 1
        );
    }

    #[test]
    fn a_page_is_read_in_byte_order_on_every_dialect() {
        assert_eq!(
            page_sql_in(Dialect::Postgres, ">="),
            format!(
                "SELECT {COLUMNS} FROM sequences WHERE name COLLATE \"C\" >= $1 \
                 AND name COLLATE \"C\" < $2 AND {NOT_COUNTER} ORDER BY name COLLATE \"C\" LIMIT $3"
            )
        );
        assert_eq!(
            binary_page_sql(">"),
            format!(
                "SELECT {COLUMNS} FROM sequences \
                 WHERE name > ? AND name < ? AND {NOT_COUNTER} ORDER BY name LIMIT ?"
            )
        );
    }
}
