//! The sequence store on the SQL backends, once: [`SqlStore`], one plain
//! type per backend (`PostgresStore = SqlStore<Postgres>`, ...) over its
//! pool, with [`Catalog`] and the reserving statements of [`Segments`]
//! written here once for every [`SqlDb`]. Each statement is a constant
//! ([`statements`]) with `?` placeholders (numbered for PostgreSQL) and
//! what a dialect writes differently beside it.
//!
//! Where a dialect has `RETURNING` (PostgreSQL, SQLite), a statement that
//! writes a row returns it; on MySQL/MariaDB the row is read back in the
//! same transaction. Statements with `RETURNING` are read to their end
//! ([`Statement::fetch_all`], also under `fetch_optional`): SQLite commits
//! an autocommit statement only when it is stepped to completion, and a
//! read that stopped after the first row could miss a failed commit (and
//! the same range be handed out twice). Stepping to the end reports it.

pub(crate) mod fence;
mod statements;
mod stores;

use statements::{group_sql, Group, STATEMENTS, WIDEN_BOUND};
pub use stores::SqlStore;

use async_trait::async_trait;
use sqlx::Connection;

pub(crate) use super::engine::Reserving;
use super::engine::{SqlDb, Statement};
use super::migrator::Dialect;
use super::pool::Held;
use super::retry::retrying;
use super::sql::{
    check_period_key, columns_row, compare_and_set, counter_names, fetch_named, fetch_page,
    found_row, in_dialect, in_list, initial_max_id, insert_failed, period_row, refused,
    reservation, serial_values, unavailable, Columns, Reserve, ReserveOnce, SETTINGS_CHUNK,
};
use super::{bump_binds, names_in, run_bump, BumpMode, Bumped, Catalog};
use super::{PeriodRow, Reservation, SequencePage, SequencePatch, SequenceRow, StoreError};
use crate::domain::{period_rows_range, IdOrdering, NamePrefix, NewSequence, SeqName};

#[allow(unused_imports)] // for the links of the documentation
use super::Segments;

/// What a bump changed, or why it did not.
type Bumps = Result<Vec<Bumped>, StoreError>;

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

/// What a reserving statement reads back: `max_id`, the size added, `step`
/// and `ordering`.
type Granted = (i64, i64, i64, String);

/// What a group's reserving statement reads back per row: the name, then
/// as [`Granted`].
type Granting = (String, i64, i64, i64, String);

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
type Period = (
    String,
    i64,
    chrono::DateTime<chrono::Utc>,
    chrono::DateTime<chrono::Utc>,
);

/// A page of the catalog, as read.
type Page = Result<SequencePage, StoreError>;

/// The statements of `DB`'s dialect.
fn statements<DB: SqlDb>() -> &'static Statements {
    STATEMENTS.of(DB::DIALECT)
}

#[allow(private_bounds)] // the crate's own backends only (see `stores.rs`)
impl<DB: SqlDb> SqlStore<DB> {
    /// The row a statement that writes it returned (`RETURNING`), or else
    /// read back on the same connection (inside its transaction); `None`
    /// when there is no such row.
    async fn written(
        conn: &mut DB::Connection,
        returned: Vec<Columns>,
        name: &SeqName,
    ) -> Result<Option<Columns>, sqlx::Error> {
        let statements = statements::<DB>();
        match returned.into_iter().next() {
            Some(row) => Ok(Some(row)),
            None if statements.returning => Ok(None),
            None => {
                Statement::new(statements.get)
                    .bind(name.as_str())
                    .fetch_optional::<DB, Columns>(conn)
                    .await
            }
        }
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
        let updated = Statement::new(update)
            .bind(size)
            .bind(name.as_str())
            .bind(guard)
            .execute::<DB>(&mut tx)
            .await?;
        if updated == 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        let read = Statement::new(select)
            .bind(size)
            .bind(name.as_str())
            .fetch_one::<DB, Granted>(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(Some(read))
    }

    /// [`ReserveOnce::reserve_group_once`] where no `UPDATE` returns its
    /// rows: in one transaction, the rows of `names` read and locked, then
    /// one `UPDATE` of those whose range fits under `i64::MAX`; answers them
    /// as updated.
    async fn lock_then_update(
        conn: &mut DB::Connection,
        names: &[&str],
        size: i64,
    ) -> Result<Vec<Granting>, sqlx::Error> {
        let mut tx = conn.begin().await?;
        let read = group_sql(Group::Lock, DB::DIALECT, padded(names).count());
        let mut rows = Statement::new(read)
            .bind(size)
            .bind_all(padded(names))
            .fetch_all::<DB, Granting>(&mut tx)
            .await?;
        rows.retain(|&(_, max_id, grant, _, _)| max_id <= i64::MAX - grant);
        if rows.is_empty() {
            tx.rollback().await?;
            return Ok(rows);
        }
        let fit: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        let update = group_sql(Group::Raise, DB::DIALECT, padded(&fit).count());
        let updated = Statement::new(update)
            .bind(size)
            .bind_all(padded(&fit))
            .execute::<DB>(&mut tx)
            .await?;
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

    /// [`Segments::compare_and_set_max_id`].
    pub(crate) async fn compare_and_set(
        &self,
        name: &SeqName,
        expected: i64,
        new: i64,
    ) -> Result<bool, StoreError> {
        let statements = statements::<DB>();
        let (update, exists) = (statements.set_max_id_if, statements.read_max_id);
        compare_and_set(&self.pool, update, exists, name, expected, new).await
    }

    /// Whether `name` issues serial numbers (`None`: no row).
    async fn serial_flag(&self, name: &SeqName) -> Result<Option<bool>, StoreError> {
        Ok(self.kind(name).await?.map(|(serial, _)| serial))
    }

    /// Whether `name` issues serial numbers, and its ordering (`None`: no
    /// row).
    async fn kind(&self, name: &SeqName) -> Result<Option<(bool, IdOrdering)>, StoreError> {
        let mut held = Held::acquire(&self.pool).await?;
        let row = retrying!(
            DB::DIALECT.name(),
            Statement::new(statements::<DB>().read_kind)
                .bind(name.as_str())
                .fetch_optional::<DB, (i64, String)>(held.conn())
                .await
        );
        let row = held.finish(row)?;
        Ok(row.map(|(flag, ordering)| (flag != 0, IdOrdering::from_column(&ordering))))
    }
}

#[async_trait]
impl<DB: SqlDb> Catalog for SqlStore<DB> {
    /// Inserts the row and returns it, in one transaction.
    async fn create(&self, seq: &NewSequence) -> Result<SequenceRow, StoreError> {
        let max_id = initial_max_id(seq)?;
        let (format, reset, time_zone, overflow) = serial_values(seq.serial.as_ref());
        let row = retrying!(
            DB::DIALECT.name(),
            async {
                let mut tx = self.pool.begin().await?;
                let returned = Statement::new(statements::<DB>().insert)
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
                    .fetch_all::<DB, Columns>(&mut tx)
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

    async fn get(&self, name: &SeqName) -> Result<Option<SequenceRow>, StoreError> {
        let row = retrying!(
            DB::DIALECT.name(),
            Statement::new(statements::<DB>().get)
                .bind(name.as_str())
                .fetch_optional_pooled::<DB, Columns>(&self.pool)
                .await
        )
        .map_err(unavailable)?;
        row.map(found_row).transpose()
    }

    async fn settings_of(&self, names: &[SeqName]) -> Result<Vec<SequenceRow>, StoreError> {
        fetch_named(&self.pool, names).await
    }

    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        let rows = retrying!(
            DB::DIALECT.name(),
            Statement::new(statements::<DB>().list)
                .fetch_all_pooled::<DB, Columns>(&self.pool)
                .await
        )
        .map_err(unavailable)?;
        Ok(rows.into_iter().filter_map(columns_row).collect())
    }

    async fn list_page(&self, p: Option<&NamePrefix>, after: Option<&SeqName>, n: u32) -> Page {
        fetch_page(&self.pool, p, after, n).await
    }

    /// The row and its period counters (a new step or ordering reaches
    /// them) in one transaction. The row is decided on as returned or read
    /// back, not on a count of changed rows (which, on MySQL/MariaDB,
    /// depends on the "found rows" flag). The first statement writes, so on
    /// SQLite the transaction takes the write lock at once (no read lock to
    /// upgrade).
    async fn update(
        &self,
        name: &SeqName,
        patch: &SequencePatch,
    ) -> Result<SequenceRow, StoreError> {
        let statements = statements::<DB>();
        let (format, reset, time_zone, overflow) =
            serial_values(patch.serial.as_ref().and_then(Option::as_ref));
        let set = patch.serial.is_some();
        let (low, high) = period_rows_range(name);
        let row = retrying!(
            DB::DIALECT.name(),
            async {
                let mut tx = self.pool.begin().await?;
                let returned = Statement::new(statements.update)
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
                    .fetch_all::<DB, Columns>(&mut tx)
                    .await?;
                let row = Self::written(&mut tx, returned, name).await?;
                if row.is_some() && (patch.step.is_some() || patch.ordering.is_some()) {
                    Statement::new(statements.update_periods)
                        .bind(patch.step)
                        .bind(patch.ordering.map(|o| o.as_str()))
                        .bind(low.as_str())
                        .bind(high.as_str())
                        .execute::<DB>(&mut tx)
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

    async fn create_period(&self, parent: &SeqName, key: &str) -> Result<bool, StoreError> {
        check_period_key(key)?;
        let counter = parent.period_counter(key);
        let created = retrying!(
            DB::DIALECT.name(),
            Statement::new(statements::<DB>().create_period)
                .bind(counter.as_str())
                .bind(parent.as_str())
                .execute_pooled::<DB>(&self.pool)
                .await
        )
        .map_err(unavailable)?;
        if created == 1 {
            return Ok(true);
        }
        match self.serial_flag(parent).await? {
            Some(_) => Ok(false),
            None => Err(StoreError::NotFound),
        }
    }

    async fn list_periods(&self, parent: &SeqName) -> Result<Vec<PeriodRow>, StoreError> {
        let (low, high) = period_rows_range(parent);
        let rows = retrying!(
            DB::DIALECT.name(),
            Statement::new(statements::<DB>().list_periods)
                .bind(low.as_str())
                .bind(high.as_str())
                .fetch_all_pooled::<DB, Period>(&self.pool)
                .await
        )
        .map_err(unavailable)?;
        Ok(rows
            .into_iter()
            .map(|(name, max_id, created_at, updated_at)| {
                period_row(&low, &name, max_id, created_at, updated_at)
            })
            .collect())
    }

    /// One `DELETE` per [`SETTINGS_CHUNK`] names, all in one transaction.
    async fn delete_periods(&self, parent: &SeqName, keys: &[String]) -> Result<u64, StoreError> {
        let names = counter_names(parent, keys)?;
        retrying!(
            DB::DIALECT.name(),
            async {
                let mut tx = self.pool.begin().await?;
                let mut deleted = 0;
                for chunk in names.chunks(SETTINGS_CHUNK) {
                    let sql = in_dialect(
                        DB::DIALECT,
                        &format!("DELETE FROM sequences WHERE name {}", in_list(chunk.len())),
                    );
                    deleted += Statement::new(&sql)
                        .bind_all(chunk.iter().map(String::as_str))
                        .execute::<DB>(&mut tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(deleted)
            }
            .await
        )
        .map_err(unavailable)
    }

    async fn bump(&self, names: Option<&[SeqName]>, by: i64, mode: BumpMode) -> Bumps {
        run_bump::<DB>(&self.pool, names, by, mode).await
    }
}

#[async_trait]
impl<DB: SqlDb> ReserveOnce for SqlStore<DB> {
    /// A reserving statement of [`Engine::RESERVING`] once, as `how` says:
    /// at `max(step, size)`, or exactly `size` never past a cap (of a lease:
    /// never on a global row); `None` when it matched no row.
    async fn reserve_once(
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
                let mut held = Held::acquire(&self.pool).await?;
                let rows = retrying!(
                    DB::DIALECT.name(),
                    Statement::new(sql)
                        .bind(name.as_str())
                        .bind(size)
                        .bind_all(cap)
                        .fetch_optional::<DB, Granted>(held.conn())
                        .await
                );
                held.finish(rows)?
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
                let mut held = Held::acquire(&self.pool).await?;
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

    /// Why a reserving statement of `how` on `name` matched no row.
    async fn refusal(&self, name: &SeqName, how: Reserve) -> Result<StoreError, StoreError> {
        Ok(refused(self.kind(name).await?, how))
    }

    /// One group of first reservations, all of `size` (docs/design.md,
    /// "Grouped first reservations"): what [`ReserveOnce::reserve_once`] at
    /// [`Reserve::Step`] does to each of `names` (distinct), for all of
    /// them in one statement (PostgreSQL, SQLite: `UPDATE ... WHERE name IN
    /// (...) RETURNING`) or one transaction (MariaDB: the rows read `FOR
    /// UPDATE`, then one `UPDATE` of those that fit). The rows are locked in
    /// the order the database scans the list, the same for every group (a
    /// deadlock reported all the same is retried). Answers the names
    /// reserved with their reservation; a name left out (missing, serial,
    /// full) is for the caller to reserve alone, which says why.
    async fn reserve_group_once(
        &self,
        names: &[&str],
        size: i64,
    ) -> Result<Vec<(String, Reservation)>, StoreError> {
        let dialect = DB::DIALECT;
        let mut held = Held::acquire(&self.pool).await?;
        let granted = if statements::<DB>().returning {
            let sql = group_sql(Group::Reserve, dialect, padded(names).count());
            let rows = retrying!(
                dialect.name(),
                Statement::new(sql)
                    .bind(size)
                    .bind_all(padded(names))
                    .bind(size)
                    .bind(size)
                    .fetch_all::<DB, Granting>(held.conn())
                    .await
            );
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
                Ok((name, reservation(max_id, size, step, &ordering)?))
            })
            .collect()
    }
}

/// [`super::bump`]'s statements on `DB`, for [`run_bump`].
pub(crate) struct BumpStatements;

impl BumpStatements {
    /// Run first in the bump's transaction: on PostgreSQL, lifts the pool's
    /// statement bound, made for a segment fetch, to
    /// [`super::BUMP_STATEMENT_BOUND`] until the transaction ends (`SET
    /// LOCAL`; an operator's bump of every row reads and updates them all).
    /// The lock bound stays. Nothing elsewhere: the bound is per session
    /// only.
    pub(crate) async fn widen_bound<DB: SqlDb>(
        conn: &mut DB::Connection,
    ) -> Result<(), sqlx::Error> {
        if DB::DIALECT == Dialect::Postgres {
            Statement::new(WIDEN_BOUND).execute::<DB>(conn).await?;
        }
        Ok(())
    }

    /// `name, max_id` of the named rows and their counters ([`names_in`]),
    /// or of all rows; with `lock`, their row locks held until the
    /// transaction ends.
    pub(crate) async fn read_bump<DB: SqlDb>(
        conn: &mut DB::Connection,
        names: Option<&[SeqName]>,
        lock: bool,
    ) -> Result<Vec<(String, i64)>, sqlx::Error> {
        let lock = if lock {
            statements::<DB>().bump_lock
        } else {
            ""
        };
        let sql = format!(
            "SELECT name, max_id FROM sequences{}{lock}",
            names_in(names, "WHERE", DB::DIALECT, 1)
        );
        let binds = bump_binds(names);
        Statement::new(&sql)
            .bind_all(binds.iter().map(String::as_str))
            .fetch_all::<DB, (String, i64)>(conn)
            .await
    }

    /// The bump's update of the named rows and their counters
    /// ([`names_in`]), or of all rows, sparing any that would pass
    /// `i64::MAX`: how many rows it changed.
    pub(crate) async fn add_bump<DB: SqlDb>(
        conn: &mut DB::Connection,
        names: Option<&[SeqName]>,
        by: i64,
    ) -> Result<u64, sqlx::Error> {
        let update = statements::<DB>().bump;
        let sql = format!("{update}{}", names_in(names, "AND", DB::DIALECT, 3));
        let binds = bump_binds(names);
        Statement::new(&sql)
            .bind(by)
            .bind(by)
            .bind_all(binds.iter().map(String::as_str))
            .execute::<DB>(conn)
            .await
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
