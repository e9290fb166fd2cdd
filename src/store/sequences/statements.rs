//! The statements of the sequence store ([`super::SqlStore`]), as
//! constants: one table per dialect, SQLite's written as MariaDB's but for
//! what differs; and a group's statements, whose `IN` list has a length
//! known only at run time, each written once per padded count and kept.

use crate::store::migrator::Dialect;
use crate::store::sql::{in_dialect, in_list, PerDialect, GROUP_LIMIT};
use crate::store::BUMP_STATEMENT_BOUND;

use super::Statements;
#[allow(unused_imports)] // for the links of the documentation
use super::{begin_bump, padded, Granting, SqlStore};
#[allow(unused_imports)] // for the links of the documentation
use crate::store::sql::COLUMNS;
#[allow(unused_imports)] // for the links of the documentation
use crate::store::{names_in, Segments};

/// The statements of each dialect.
pub(super) static STATEMENTS: PerDialect<Statements> = PerDialect::new(&POSTGRES, &MYSQL, &SQLITE);

/// PostgreSQL: numbered placeholders, `RETURNING`, names compared in byte
/// order as `name COLLATE "C"` (the index of migration 0003); the `CASE`
/// of `read_kind` is a 32-bit integer unless cast. The bump's read locks
/// its rows in name order.
static POSTGRES: Statements = Statements {
    returning: true,
    get: "SELECT name, max_id, step, description, created_at, updated_at, ordering, \
        counter_start, format, reset, time_zone, overflow FROM sequences WHERE name = $1",
    list: "SELECT name, max_id, step, description, created_at, updated_at, ordering, \
        counter_start, format, reset, time_zone, overflow FROM sequences WHERE name NOT LIKE \
        '%@%' ORDER BY name COLLATE \"C\"",
    insert: "INSERT INTO sequences (name, max_id, step, description, ordering, counter_start, \
        format, reset, time_zone, overflow) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
        RETURNING name, max_id, step, description, created_at, updated_at, ordering, \
        counter_start, format, reset, time_zone, overflow",
    update: "UPDATE sequences SET step = COALESCE($1, step), description = COALESCE($2, \
        description), ordering = COALESCE($3, ordering), format = CASE WHEN $4 THEN $5 ELSE \
        format END, reset = CASE WHEN $6 THEN $7 ELSE reset END, time_zone = CASE WHEN $8 THEN \
        $9 ELSE time_zone END, overflow = CASE WHEN $10 THEN $11 ELSE overflow END, updated_at \
        = CURRENT_TIMESTAMP WHERE name = $12 RETURNING name, max_id, step, description, \
        created_at, updated_at, ordering, counter_start, format, reset, time_zone, overflow",
    update_periods: "UPDATE sequences SET step = COALESCE($1, step), ordering = COALESCE($2, \
        ordering), updated_at = CURRENT_TIMESTAMP WHERE name COLLATE \"C\" >= $3 AND name \
        COLLATE \"C\" < $4",
    create_period: "INSERT INTO sequences (name, max_id, step, description, ordering, \
        counter_start) SELECT $1, counter_start - 1, step, '', ordering, counter_start FROM \
        sequences WHERE name = $2 ON CONFLICT (name) DO NOTHING",
    list_periods: "SELECT name, max_id, created_at, updated_at FROM sequences WHERE name \
        COLLATE \"C\" >= $1 AND name COLLATE \"C\" < $2 ORDER BY name COLLATE \"C\"",
    read_kind: "SELECT CASE WHEN format IS NULL THEN 0 ELSE 1 END::BIGINT, ordering FROM \
        sequences WHERE name = $1",
    set_max_id_if: "UPDATE sequences SET max_id = $1, updated_at = CURRENT_TIMESTAMP WHERE name \
        = $2 AND max_id = $3",
    read_max_id: "SELECT max_id FROM sequences WHERE name = $1",
    bump_lock: " ORDER BY name COLLATE \"C\" FOR UPDATE",
    bump: "UPDATE sequences SET max_id = max_id + $1, updated_at = CURRENT_TIMESTAMP WHERE \
        max_id <= 9223372036854775807 - $2",
};

/// MariaDB/MySQL: no `UPDATE ... RETURNING` (MariaDB 10.11), so a written
/// row is read back in its transaction. `INSERT IGNORE` skips only the
/// duplicate here: every value comes from a row that passed the table's
/// checks, and the name fits (128 + 1 + 8); `ON DUPLICATE KEY UPDATE` would
/// count a found row as inserted, as sqlx connects with `CLIENT_FOUND_ROWS`.
/// The bump's read locks the rows and, for all rows, the gaps between them.
const MYSQL: Statements = Statements {
    returning: false,
    get: "SELECT name, max_id, step, description, created_at, updated_at, ordering, \
        counter_start, format, reset, time_zone, overflow FROM sequences WHERE name = ?",
    list: "SELECT name, max_id, step, description, created_at, updated_at, ordering, \
        counter_start, format, reset, time_zone, overflow FROM sequences WHERE name NOT LIKE \
        '%@%' ORDER BY name",
    insert: "INSERT INTO sequences (name, max_id, step, description, ordering, counter_start, \
        format, reset, time_zone, overflow) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    update: "UPDATE sequences SET step = COALESCE(?, step), description = COALESCE(?, \
        description), ordering = COALESCE(?, ordering), format = CASE WHEN ? THEN ? ELSE \
        format END, reset = CASE WHEN ? THEN ? ELSE reset END, time_zone = CASE WHEN ? THEN ? \
        ELSE time_zone END, overflow = CASE WHEN ? THEN ? ELSE overflow END, updated_at = \
        CURRENT_TIMESTAMP WHERE name = ?",
    update_periods: "UPDATE sequences SET step = COALESCE(?, step), ordering = COALESCE(?, \
        ordering), updated_at = CURRENT_TIMESTAMP WHERE name >= ? AND name < ?",
    create_period: "INSERT IGNORE INTO sequences (name, max_id, step, description, ordering, \
        counter_start) SELECT ?, counter_start - 1, step, '', ordering, counter_start FROM \
        sequences WHERE name = ?",
    list_periods: "SELECT name, max_id, created_at, updated_at FROM sequences WHERE name >= ? \
        AND name < ? ORDER BY name",
    read_kind: "SELECT CASE WHEN format IS NULL THEN 0 ELSE 1 END, ordering FROM sequences \
        WHERE name = ?",
    set_max_id_if: "UPDATE sequences SET max_id = ?, updated_at = CURRENT_TIMESTAMP WHERE name \
        = ? AND max_id = ?",
    read_max_id: "SELECT max_id FROM sequences WHERE name = ?",
    bump_lock: " FOR UPDATE",
    bump: "UPDATE sequences SET max_id = max_id + ?, updated_at = CURRENT_TIMESTAMP WHERE \
        max_id <= 9223372036854775807 - ?",
};

/// SQLite: MariaDB's texts but for `RETURNING` and `ON CONFLICT` (whose
/// `WHERE` keeps it from being read as a join). The bump takes no row
/// locks: its `BEGIN IMMEDIATE` ([`begin_bump`]) already holds the
/// database's write lock.
static SQLITE: Statements = Statements {
    returning: true,
    insert: "INSERT INTO sequences (name, max_id, step, description, ordering, counter_start, \
        format, reset, time_zone, overflow) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING \
        name, max_id, step, description, created_at, updated_at, ordering, counter_start, \
        format, reset, time_zone, overflow",
    update: "UPDATE sequences SET step = COALESCE(?, step), description = COALESCE(?, \
        description), ordering = COALESCE(?, ordering), format = CASE WHEN ? THEN ? ELSE \
        format END, reset = CASE WHEN ? THEN ? ELSE reset END, time_zone = CASE WHEN ? THEN ? \
        ELSE time_zone END, overflow = CASE WHEN ? THEN ? ELSE overflow END, updated_at = \
        CURRENT_TIMESTAMP WHERE name = ? RETURNING name, max_id, step, description, \
        created_at, updated_at, ordering, counter_start, format, reset, time_zone, overflow",
    create_period: "INSERT INTO sequences (name, max_id, step, description, ordering, \
        counter_start) SELECT ?, counter_start - 1, step, '', ordering, counter_start FROM \
        sequences WHERE name = ? ON CONFLICT (name) DO NOTHING",
    bump_lock: "",
    ..MYSQL
};

/// [`BUMP_STATEMENT_BOUND`] (in milliseconds) as PostgreSQL's bound of
/// the statements of the bump's transaction ([`super::BumpStatements::widen_bound`]).
pub(super) const WIDEN_BOUND: &str = "SET LOCAL statement_timeout = 120000";
const _: () = assert!(BUMP_STATEMENT_BOUND.as_millis() == 120_000);

/// A group's statements ([`ReserveOnce::reserve_group_once`](crate::store::sql::ReserveOnce::reserve_group_once)), each with an `IN`
/// list of one placeholder per name, the names [`padded`].
#[derive(Clone, Copy)]
pub(super) enum Group {
    /// Where `UPDATE` returns its rows: the group's reservation. Binds: the
    /// size, the names, the size twice. Reads as [`Granting`].
    Reserve,
    /// Elsewhere (MariaDB), first: the rows read and locked. Binds: the
    /// size, the names. Reads as [`Granting`].
    Lock,
    /// Then: the update of the locked rows that fit. Binds: the size, the
    /// names.
    Raise,
}

/// How many texts each group statement has: one per padded count, 1, 2,
/// 4, ... up to [`GROUP_LIMIT`].
const GROUP_SIZES: usize = GROUP_LIMIT.trailing_zeros() as usize + 1;

/// The text of `group` in `dialect` for `n` names, a power of two up to
/// [`GROUP_LIMIT`] ([`padded`]): the `IN` list's length is only known at
/// run time, so each text is written on its first use ([`write_group_sql`])
/// and kept for the process; a group's reservation never formats one.
pub(super) fn group_sql(group: Group, dialect: Dialect, n: usize) -> &'static str {
    type Texts = [[std::sync::OnceLock<String>; GROUP_SIZES]; 3];
    static TEXTS: [Texts; 3] =
        [const { [const { [const { std::sync::OnceLock::new() }; GROUP_SIZES] }; 3] }; 3];
    assert!(
        n.is_power_of_two() && n <= GROUP_LIMIT,
        "a group of {n} names"
    );
    TEXTS[group as usize][dialect as usize][n.trailing_zeros() as usize]
        .get_or_init(|| write_group_sql(group, dialect, n))
}

/// The text of `group` in `dialect` for `n` names ([`group_sql`]).
fn write_group_sql(group: Group, dialect: Dialect, n: usize) -> String {
    let names = in_list(n);
    // SQLite's two-argument `MAX` is its `GREATEST`.
    let greatest = match dialect {
        Dialect::Sqlite => "MAX",
        Dialect::Postgres | Dialect::Mysql => "GREATEST",
    };
    let text = match group {
        Group::Reserve => format!(
            "UPDATE sequences SET max_id = max_id + {greatest}(step, ?), \
             updated_at = CURRENT_TIMESTAMP WHERE name {names} AND format IS NULL \
             AND max_id <= 9223372036854775807 - {greatest}(step, ?) \
             RETURNING name, max_id, {greatest}(step, ?) AS size, step, ordering"
        ),
        Group::Lock => format!(
            "SELECT name, max_id, GREATEST(step, ?) AS size, step, ordering \
             FROM sequences WHERE name {names} AND format IS NULL FOR UPDATE"
        ),
        Group::Raise => format!(
            "UPDATE sequences SET max_id = max_id + GREATEST(step, ?), \
             updated_at = CURRENT_TIMESTAMP WHERE name {names}"
        ),
    };
    in_dialect(dialect, &text)
}
