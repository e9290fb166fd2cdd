//! [`Tokens`] on the SQL backends, once: each statement of `seqd_tokens`
//! written with `?` placeholders (numbered for PostgreSQL), run on the pool
//! of any backend's [`SqlStore`]. A row is read as it is stored
//! ([`TokenRow`]); the service decides what an unusable one means.

use async_trait::async_trait;

use super::engine::{SqlDb, Statement};
use super::pool::Held;
use super::retry::retrying;
use super::sequences::SqlStore;
use super::sql::PerDialect;
use super::{insert_failed, StoreError, TokenRow, Tokens};

/// The statements of each dialect.
static STATEMENTS: PerDialect<Statements> = PerDialect::new(&POSTGRES, &MYSQL, &SQLITE);

/// PostgreSQL: numbered placeholders.
static POSTGRES: Statements = Statements {
    list: "SELECT label, hash, prefixes, rights, created_at, expires_at, revoked_at FROM \
        seqd_tokens ORDER BY label",
    insert: "INSERT INTO seqd_tokens (label, hash, prefixes, rights, created_at, expires_at, \
        revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    revoke: "UPDATE seqd_tokens SET revoked_at = $1 WHERE label = $2 AND revoked_at IS NULL",
    revoked_at: "SELECT revoked_at FROM seqd_tokens WHERE label = $1",
};

/// MariaDB/MySQL: a column of a binary collation is reported as VARBINARY,
/// which does not decode as text: `label` and `hash` are read as text.
const MYSQL: Statements = Statements {
    list: "SELECT CAST(label AS CHAR), CAST(hash AS CHAR), prefixes, rights, created_at, \
        expires_at, revoked_at FROM seqd_tokens ORDER BY label",
    insert: "INSERT INTO seqd_tokens (label, hash, prefixes, rights, created_at, expires_at, \
        revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    revoke: "UPDATE seqd_tokens SET revoked_at = ? WHERE label = ? AND revoked_at IS NULL",
    revoked_at: "SELECT revoked_at FROM seqd_tokens WHERE label = ?",
};

/// SQLite: MariaDB's placeholders, the columns read as they are.
static SQLITE: Statements = Statements {
    list: "SELECT label, hash, prefixes, rights, created_at, expires_at, revoked_at FROM \
        seqd_tokens ORDER BY label",
    ..MYSQL
};

/// The statements of one dialect, each with one placeholder per bind, in
/// bind order; the columns of `seqd_tokens` are bound and read in the order
/// `label, hash, prefixes, rights, created_at, expires_at, revoked_at`.
struct Statements {
    /// Reads every row, by label.
    list: &'static str,
    /// Binds the seven columns.
    insert: &'static str,
    /// Binds: revoked_at, label.
    revoke: &'static str,
    /// Bind: label. Reads `revoked_at`.
    revoked_at: &'static str,
}

type Columns = (
    String,
    String,
    String,
    String,
    i64,
    Option<i64>,
    Option<i64>,
);

#[async_trait]
impl<DB: SqlDb> Tokens for SqlStore<DB> {
    /// Every row of `seqd_tokens`, by label.
    async fn token_rows(&self) -> Result<Vec<TokenRow>, StoreError> {
        let mut held = Held::acquire(&self.pool).await?;
        let read = retrying!(
            DB::DIALECT.name(),
            Statement::new(STATEMENTS.of(DB::DIALECT).list)
                .fetch_all::<DB, Columns>(held.conn())
                .await
        );
        Ok(held
            .finish(read)?
            .into_iter()
            .map(
                |(label, hash, prefixes, rights, created_at, expires_at, revoked_at)| TokenRow {
                    label,
                    hash,
                    prefixes,
                    rights,
                    created_at,
                    expires_at,
                    revoked_at,
                },
            )
            .collect())
    }

    /// Inserts `row`; [`StoreError::AlreadyExists`] when its label (or hash)
    /// is taken.
    async fn insert_token(&self, row: &TokenRow) -> Result<(), StoreError> {
        let mut held = Held::acquire(&self.pool).await?;
        let done = retrying!(
            DB::DIALECT.name(),
            Statement::new(STATEMENTS.of(DB::DIALECT).insert)
                .bind(row.label.as_str())
                .bind(row.hash.as_str())
                .bind(row.prefixes.as_str())
                .bind(row.rights.as_str())
                .bind(row.created_at)
                .bind(row.expires_at)
                .bind(row.revoked_at)
                .execute::<DB>(held.conn())
                .await
        );
        held.finish_with(done, insert_failed).map(drop)
    }

    /// Marks `label` revoked at `at` (milliseconds): `true` when this call
    /// revoked it, `false` when it was revoked already; [`StoreError::NotFound`]
    /// when there is no such token.
    async fn revoke_token(&self, label: &str, at: i64) -> Result<bool, StoreError> {
        let statements = STATEMENTS.of(DB::DIALECT);
        let mut held = Held::acquire(&self.pool).await?;
        let done = retrying!(
            DB::DIALECT.name(),
            Statement::new(statements.revoke)
                .bind(at)
                .bind(label)
                .execute::<DB>(held.conn())
                .await
        );
        if held.finish(done)? == 1 {
            return Ok(true);
        }
        let mut held = Held::acquire(&self.pool).await?;
        let seen = retrying!(
            DB::DIALECT.name(),
            Statement::new(statements.revoked_at)
                .bind(label)
                .fetch_optional::<DB, (Option<i64>,)>(held.conn())
                .await
        );
        match held.finish(seen)? {
            Some(_) => Ok(false),
            None => Err(StoreError::NotFound),
        }
    }
}
