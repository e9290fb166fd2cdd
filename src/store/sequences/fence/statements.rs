//! The failover fence's statements, as constants: one table per dialect,
//! SQLite's written as MariaDB's but for what differs (the fence is off on
//! SQLite, which has no replica; its table is kept whole for the contract
//! tests). The session bounds of a fence's transaction are numbers from
//! the configuration and are written when it runs (`bounds_sql`).

use crate::store::sql::PerDialect;

/// The fence's statements of each dialect.
pub(super) static STATEMENTS: PerDialect<FenceStatements> =
    PerDialect::new(&POSTGRES, &MYSQL, &SQLITE);

/// The fence's statements of one dialect, each with one placeholder per
/// bind, in bind order.
pub(super) struct FenceStatements {
    /// Reads `server, epoch` of the record, locked until the transaction
    /// ends (not on SQLite, whose transaction holds the write lock).
    pub(super) record: &'static str,
    /// Records a fence. Binds: server, epoch, margin.
    pub(super) fenced: &'static str,
    /// Records the first server. Binds: server, epoch.
    pub(super) recorded: &'static str,
    /// Raises every counting row by the margin (a row that cannot take it
    /// is set to `i64::MAX`). Binds: margin, margin.
    pub(super) raise: &'static str,
    /// Reads every serial sequence's row (`COLUMNS`).
    pub(super) serials: &'static str,
    /// Caps the period rows in a name range at a capacity. Binds: cap, cap,
    /// low, high.
    pub(super) cap_periods: &'static str,
    /// Creates a period row, raised, unless it exists. Binds: its name,
    /// its `max_id`, the sequence's name.
    pub(super) raised_period: &'static str,
    /// The stripe record's `stripe_count, block`, as text.
    pub(super) stripe: &'static str,
}

/// PostgreSQL: numbered placeholders, names compared in byte order.
static POSTGRES: FenceStatements = FenceStatements {
    record: "SELECT server, epoch FROM seqd_fence WHERE id = 1 FOR UPDATE",
    fenced: "UPDATE seqd_fence SET server = $1, epoch = $2, margin = $3, \
             fenced_at = CURRENT_TIMESTAMP WHERE id = 1",
    recorded: "UPDATE seqd_fence SET server = $1, epoch = $2 WHERE id = 1",
    raise: "UPDATE sequences SET max_id = CASE WHEN max_id > 9223372036854775807 - $1 \
            THEN 9223372036854775807 ELSE max_id + $2 END, updated_at = CURRENT_TIMESTAMP \
            WHERE format IS NULL",
    serials: "SELECT name, max_id, step, description, created_at, updated_at, ordering, \
              counter_start, format, reset, time_zone, overflow FROM sequences \
              WHERE format IS NOT NULL",
    cap_periods: "UPDATE sequences SET max_id = CASE WHEN max_id > $1 THEN $2 ELSE max_id END \
                  WHERE name COLLATE \"C\" >= $3 AND name COLLATE \"C\" < $4",
    raised_period: "INSERT INTO sequences (name, max_id, step, description, ordering, \
                    counter_start) SELECT $1, $2, step, '', ordering, counter_start \
                    FROM sequences WHERE name = $3 ON CONFLICT (name) DO NOTHING",
    stripe: "SELECT CAST(stripe_count AS TEXT), CAST(block AS TEXT) FROM seqd_stripe \
             WHERE id = 1",
};

/// MariaDB/MySQL: `INSERT IGNORE`, text cast as `CHAR`.
static MYSQL: FenceStatements = FenceStatements {
    record: "SELECT server, epoch FROM seqd_fence WHERE id = 1 FOR UPDATE",
    fenced: "UPDATE seqd_fence SET server = ?, epoch = ?, margin = ?, \
             fenced_at = CURRENT_TIMESTAMP WHERE id = 1",
    recorded: "UPDATE seqd_fence SET server = ?, epoch = ? WHERE id = 1",
    raise: "UPDATE sequences SET max_id = CASE WHEN max_id > 9223372036854775807 - ? \
            THEN 9223372036854775807 ELSE max_id + ? END, updated_at = CURRENT_TIMESTAMP \
            WHERE format IS NULL",
    serials: POSTGRES.serials,
    cap_periods: "UPDATE sequences SET max_id = CASE WHEN max_id > ? THEN ? ELSE max_id END \
                  WHERE name >= ? AND name < ?",
    raised_period: "INSERT IGNORE INTO sequences (name, max_id, step, description, ordering, \
                    counter_start) SELECT ?, ?, step, '', ordering, counter_start \
                    FROM sequences WHERE name = ?",
    stripe: "SELECT CAST(stripe_count AS CHAR), CAST(block AS CHAR) FROM seqd_stripe \
             WHERE id = 1",
};

/// SQLite: MariaDB's but for no row lock, `ON CONFLICT` and `TEXT`.
static SQLITE: FenceStatements = FenceStatements {
    record: "SELECT server, epoch FROM seqd_fence WHERE id = 1",
    raised_period: "INSERT INTO sequences (name, max_id, step, description, ordering, \
                    counter_start) SELECT ?, ?, step, '', ordering, counter_start \
                    FROM sequences WHERE name = ? ON CONFLICT (name) DO NOTHING",
    stripe: POSTGRES.stripe,
    ..MYSQL
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::migrator::Dialect;
    use crate::store::sql::{in_dialect, COLUMNS};

    #[test]
    fn postgres_writes_mariadbs_statements_with_numbered_placeholders() {
        let (pg, my) = (
            STATEMENTS.of(Dialect::Postgres),
            STATEMENTS.of(Dialect::Mysql),
        );
        for (pg, my) in [
            (pg.fenced, my.fenced),
            (pg.recorded, my.recorded),
            (pg.raise, my.raise),
        ] {
            assert_eq!(pg, in_dialect(Dialect::Postgres, my));
        }
        assert_eq!(
            pg.serials,
            format!("SELECT {COLUMNS} FROM sequences WHERE format IS NOT NULL")
        );
        assert!(pg.cap_periods.ends_with("name COLLATE \"C\" < $4"));
        assert!(STATEMENTS
            .of(Dialect::Sqlite)
            .raised_period
            .ends_with("DO NOTHING"));
        assert!(!STATEMENTS.of(Dialect::Sqlite).record.contains("FOR UPDATE"));
    }
}
