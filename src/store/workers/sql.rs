//! [`WorkerLeases`] on the SQL backends, once: [`SqlWorkerLeases`] over the
//! pool of any [`SqlDb`]. Each operation is one statement (see [`super`]
//! for their preconditions), written once below with what a dialect writes
//! differently beside it (`postgres/workers.rs`, `mysql/workers.rs`,
//! `sqlite/workers.rs` name the type for each backend).

use async_trait::async_trait;
use sqlx::Pool;

use super::{check_owner, worker_row, WorkerLeases, WorkerRow};
use crate::store::engine::{Bind, SqlDb, Statement};
use crate::store::migrator::{create_schema_sql, Dialect, Migrator, SchemaSetup};
use crate::store::pool::Held;
use crate::store::retry::retrying;
use crate::store::sql::PerDialect;
use crate::store::{insert_failed, unavailable, StoreError, StoreOptions};

/// The statements of each dialect.
static STATEMENTS: PerDialect<Statements> = PerDialect::new(&POSTGRES, &MYSQL, &SQLITE);

/// PostgreSQL: numbered placeholders; `worker_id` (an `INTEGER`) read as a
/// 64-bit integer.
static POSTGRES: Statements = Statements {
    list: "SELECT worker_id::BIGINT, owner, lease_until, last_timestamp FROM workers WHERE \
        worker_id < $1 ORDER BY worker_id",
    insert: "INSERT INTO workers (worker_id, owner, lease_until, last_timestamp) VALUES ($1, \
        $2, $3, $4)",
    claim: "UPDATE workers SET owner = $1, lease_until = $2, last_timestamp = $3, updated_at = \
        CURRENT_TIMESTAMP WHERE worker_id = $4 AND owner = $5 AND lease_until = $6 AND \
        last_timestamp = $7 AND (lease_until < $8 OR owner = $9)",
    renew: "UPDATE workers SET lease_until = $1, last_timestamp = GREATEST(last_timestamp, $2), \
        updated_at = CURRENT_TIMESTAMP WHERE worker_id = $3 AND owner = $4",
    release: "UPDATE workers SET lease_until = 0, last_timestamp = $1, updated_at = \
        CURRENT_TIMESTAMP WHERE worker_id = $2 AND owner = $3",
};

/// MariaDB/MySQL: `worker_id` (an `INT`) read as a 64-bit integer.
const MYSQL: Statements = Statements {
    list: "SELECT CAST(worker_id AS SIGNED), owner, lease_until, last_timestamp FROM workers \
        WHERE worker_id < ? ORDER BY worker_id",
    insert: "INSERT INTO workers (worker_id, owner, lease_until, last_timestamp) VALUES (?, ?, \
        ?, ?)",
    claim: "UPDATE workers SET owner = ?, lease_until = ?, last_timestamp = ?, updated_at = \
        CURRENT_TIMESTAMP WHERE worker_id = ? AND owner = ? AND lease_until = ? AND \
        last_timestamp = ? AND (lease_until < ? OR owner = ?)",
    renew: "UPDATE workers SET lease_until = ?, last_timestamp = GREATEST(last_timestamp, ?), \
        updated_at = CURRENT_TIMESTAMP WHERE worker_id = ? AND owner = ?",
    release: "UPDATE workers SET lease_until = 0, last_timestamp = ?, updated_at = \
        CURRENT_TIMESTAMP WHERE worker_id = ? AND owner = ?",
};

/// SQLite: MariaDB's placeholders; the larger of two values is the
/// two-argument `MAX`.
static SQLITE: Statements = Statements {
    list: "SELECT worker_id, owner, lease_until, last_timestamp FROM workers WHERE worker_id < \
        ? ORDER BY worker_id",
    renew: "UPDATE workers SET lease_until = ?, last_timestamp = MAX(last_timestamp, ?), \
        updated_at = CURRENT_TIMESTAMP WHERE worker_id = ? AND owner = ?",
    ..MYSQL
};

/// The statements of one dialect, each with one placeholder per bind, in
/// bind order.
struct Statements {
    /// Bind: the bound of worker IDs. Reads `(worker_id, owner,
    /// lease_until, last_timestamp)`.
    list: &'static str,
    /// Binds: worker_id, owner, lease_until, last_timestamp.
    insert: &'static str,
    /// Compare-and-set on the row as read, and only if its lease expired or
    /// is ours. Binds: owner, lease_until, last_timestamp, worker_id, seen
    /// owner, seen lease_until, seen last_timestamp, now, owner.
    claim: &'static str,
    /// Binds: lease_until, lease_until, worker_id, owner.
    renew: &'static str,
    /// Binds: last_timestamp, worker_id, owner.
    release: &'static str,
}

/// `sql` with its `?` placeholders numbered, as PostgreSQL writes them:
/// `$1`, `$2`, ... (no `?` stands for anything else in these statements).
pub(crate) fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    for (n, part) in sql.split('?').enumerate() {
        if n > 0 {
            out.push('$');
            out.push_str(&n.to_string());
        }
        out.push_str(part);
    }
    out
}

/// Worker leases in a PostgreSQL, MariaDB/MySQL or SQLite database
/// ([`crate::store::postgres::PgWorkerLeases`], ...).
#[derive(Debug)]
pub struct SqlWorkerLeases<DB: sqlx::Database> {
    pool: Pool<DB>,
    setup: SchemaSetup,
}

impl<DB: sqlx::Database> Clone for SqlWorkerLeases<DB> {
    fn clone(&self) -> Self {
        SqlWorkerLeases {
            pool: self.pool.clone(),
            setup: self.setup.clone(),
        }
    }
}

impl<DB: sqlx::Database> SqlWorkerLeases<DB> {
    /// The leases over `pool`, shared with the sequence store of the
    /// same database; [`WorkerLeases::migrate`] does what `options`'
    /// `migrate` says (in its `schema`, on PostgreSQL).
    pub(crate) fn over(pool: Pool<DB>, options: &StoreOptions) -> Self {
        SqlWorkerLeases {
            pool,
            setup: SchemaSetup {
                mode: options.migrate,
                schema: options.schema.clone(),
                fence: options.fence,
            },
        }
    }

    /// Uses an existing pool (e.g. the sequence store's, as
    /// [`crate::store::postgres::PostgresStore::pool`] gives it).
    pub fn from_pool(pool: Pool<DB>) -> Self {
        SqlWorkerLeases {
            pool,
            setup: SchemaSetup::default(),
        }
    }
}

#[allow(private_bounds)] // the crate's own backends only
impl<DB: SqlDb> SqlWorkerLeases<DB> {
    /// Runs `pick`'s statement of the dialect with `binds` on a connection
    /// held from the pool, again on a conflict ([`retrying!`]), and settles
    /// the connection with the error narrowed by `narrow`: whether it
    /// matched one row.
    async fn one_row(
        &self,
        pick: fn(&Statements) -> &'static str,
        binds: &[Bind<'_>],
        narrow: fn(sqlx::Error) -> StoreError,
    ) -> Result<bool, StoreError> {
        let statement =
            Statement::new(pick(STATEMENTS.of(DB::DIALECT))).bind_all(binds.iter().copied());
        let mut held = Held::acquire(&self.pool).await?;
        let done = retrying!(
            DB::DIALECT.name(),
            statement.clone().execute::<DB>(held.conn()).await
        );
        held.finish_with(done, narrow).map(|changed| changed == 1)
    }
}

#[async_trait]
impl<DB: SqlDb> WorkerLeases for SqlWorkerLeases<DB> {
    async fn migrate(&self) -> Result<(), StoreError> {
        // Only PostgreSQL puts the tables in a schema (`--schema`), which
        // `auto` creates if missing.
        let create_schema = match DB::DIALECT {
            Dialect::Postgres => create_schema_sql(self.setup.schema.as_deref()),
            Dialect::Mysql | Dialect::Sqlite => None,
        };
        Migrator::prepare(&self.pool, self.setup.mode, create_schema).await
    }

    async fn list(&self, below: u32) -> Result<Vec<WorkerRow>, StoreError> {
        let mut held = Held::acquire(&self.pool).await?;
        let rows = retrying!(
            DB::DIALECT.name(),
            Statement::new(STATEMENTS.of(DB::DIALECT).list)
                .bind(i64::from(below))
                .fetch_all::<DB, (i64, String, i64, i64)>(held.conn())
                .await
        );
        held.finish(rows)?
            .into_iter()
            .map(|(w, o, l, t)| worker_row(w, o, l, t))
            .collect()
    }

    async fn insert(&self, row: &WorkerRow) -> Result<bool, StoreError> {
        check_owner(&row.owner)?;
        let binds: [Bind<'_>; 4] = [
            i64::from(row.worker_id).into(),
            row.owner.as_str().into(),
            row.lease_until.into(),
            row.last_timestamp.into(),
        ];
        let inserted = self.one_row(|s| s.insert, &binds, insert_failed).await;
        match inserted {
            Err(StoreError::AlreadyExists) => Ok(false),
            other => other,
        }
    }

    async fn claim(&self, seen: &WorkerRow, new: &WorkerRow, now: i64) -> Result<bool, StoreError> {
        check_owner(&new.owner)?;
        if new.worker_id != seen.worker_id {
            return Err(StoreError::Invalid(format!(
                "a claim of worker {} cannot write worker {}",
                seen.worker_id, new.worker_id
            )));
        }
        let owner = new.owner.as_str();
        let binds: [Bind<'_>; 9] = [
            owner.into(),
            new.lease_until.into(),
            new.last_timestamp.into(),
            i64::from(seen.worker_id).into(),
            seen.owner.as_str().into(),
            seen.lease_until.into(),
            seen.last_timestamp.into(),
            now.into(),
            owner.into(),
        ];
        self.one_row(|s| s.claim, &binds, unavailable).await
    }

    async fn renew(&self, worker: u32, owner: &str, until: i64) -> Result<bool, StoreError> {
        let binds = [
            until.into(),
            until.into(),
            i64::from(worker).into(),
            owner.into(),
        ];
        self.one_row(|s| s.renew, &binds, unavailable).await
    }

    async fn release(&self, worker: u32, owner: &str, last: i64) -> Result<bool, StoreError> {
        let binds = [last.into(), i64::from(worker).into(), owner.into()];
        self.one_row(|s| s.release, &binds, unavailable).await
    }

    fn backend(&self) -> &'static str {
        DB::DIALECT.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_dialect_writes_its_placeholders_and_functions() {
        let renew = |d| STATEMENTS.of(d).renew;
        assert_eq!(
            renew(Dialect::Postgres),
            "UPDATE workers SET lease_until = $1, last_timestamp = GREATEST(last_timestamp, $2), \
             updated_at = CURRENT_TIMESTAMP WHERE worker_id = $3 AND owner = $4"
        );
        assert_eq!(
            renew(Dialect::Mysql),
            "UPDATE workers SET lease_until = ?, last_timestamp = GREATEST(last_timestamp, ?), \
             updated_at = CURRENT_TIMESTAMP WHERE worker_id = ? AND owner = ?"
        );
        assert_eq!(
            renew(Dialect::Sqlite),
            "UPDATE workers SET lease_until = ?, last_timestamp = MAX(last_timestamp, ?), \
             updated_at = CURRENT_TIMESTAMP WHERE worker_id = ? AND owner = ?"
        );
        for (dialect, column) in [
            (Dialect::Postgres, "worker_id::BIGINT"),
            (Dialect::Mysql, "CAST(worker_id AS SIGNED)"),
            (Dialect::Sqlite, "worker_id"),
        ] {
            let list = &STATEMENTS.of(dialect).list;
            assert!(
                list.starts_with(&format!("SELECT {column}, owner,")),
                "{list}"
            );
        }
        let claim = &STATEMENTS.of(Dialect::Postgres).claim;
        assert!(
            claim.ends_with("AND (lease_until < $8 OR owner = $9)"),
            "{claim}"
        );
        assert!(!claim.contains('?'), "{claim}");
    }
}
