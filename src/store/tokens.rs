//! [`Tokens`] on the SQL backends, once: each statement of `seqd_tokens`
//! written with `?` placeholders (numbered for PostgreSQL), run on the pool
//! of any backend ([`sql_tokens!`] implements the trait in one line per
//! backend, in its `sequences.rs`). A row is read as it is stored
//! ([`TokenRow`]); the service decides what an unusable one means.

use sqlx::Pool;

use super::pool::Held;
use super::retry::retrying;
use super::sql::PerDialect;
use super::workers::LeaseDb;
use super::{insert_failed, StoreError, TokenRow};

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

/// The tokens over the pool of a SQL backend: each statement of
/// `seqd_tokens`, once.
pub(crate) struct SqlTokens<'p, DB: sqlx::Database>(pub(crate) &'p Pool<DB>);

impl<DB> SqlTokens<'_, DB>
where
    DB: LeaseDb,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<i64>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Columns: for<'r> sqlx::FromRow<'r, DB::Row>,
    (Option<i64>,): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    /// Every row of `seqd_tokens`, by label.
    pub(crate) async fn rows(&self) -> Result<Vec<TokenRow>, StoreError> {
        let mut held = Held::acquire(self.0).await?;
        let read: Result<Vec<Columns>, _> = retrying!(
            DB::DIALECT.name(),
            sqlx::query_as::<DB, Columns>(STATEMENTS.of(DB::DIALECT).list)
                .fetch_all(held.conn())
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
    pub(crate) async fn insert(&self, row: &TokenRow) -> Result<(), StoreError> {
        let mut held = Held::acquire(self.0).await?;
        let done = retrying!(
            DB::DIALECT.name(),
            sqlx::query::<DB>(STATEMENTS.of(DB::DIALECT).insert)
                .bind(row.label.as_str())
                .bind(row.hash.as_str())
                .bind(row.prefixes.as_str())
                .bind(row.rights.as_str())
                .bind(row.created_at)
                .bind(row.expires_at)
                .bind(row.revoked_at)
                .execute(held.conn())
                .await
        );
        held.finish_with(done, insert_failed).map(drop)
    }

    /// Marks `label` revoked at `at` (milliseconds): `true` when this call
    /// revoked it, `false` when it was revoked already; [`StoreError::NotFound`]
    /// when there is no such token.
    pub(crate) async fn revoke(&self, label: &str, at: i64) -> Result<bool, StoreError> {
        let statements = STATEMENTS.of(DB::DIALECT);
        let mut held = Held::acquire(self.0).await?;
        let done = retrying!(
            DB::DIALECT.name(),
            sqlx::query::<DB>(statements.revoke)
                .bind(at)
                .bind(label)
                .execute(held.conn())
                .await
        );
        if DB::rows_affected(&held.finish(done)?) == 1 {
            return Ok(true);
        }
        let mut held = Held::acquire(self.0).await?;
        let seen: Result<Option<(Option<i64>,)>, _> = retrying!(
            DB::DIALECT.name(),
            sqlx::query_as::<DB, (Option<i64>,)>(statements.revoked_at)
                .bind(label)
                .fetch_optional(held.conn())
                .await
        );
        match held.finish(seen)? {
            Some(_) => Ok(false),
            None => Err(StoreError::NotFound),
        }
    }
}

/// Implements [`Tokens`](crate::store::Tokens) for a SQL backend's store
/// `$store` (with a `pool` field of the sqlx database `$db`).
macro_rules! sql_tokens {
    ($store:ty, $db:ty) => {
        #[::async_trait::async_trait]
        impl $crate::store::Tokens for $store {
            async fn token_rows(
                &self,
            ) -> Result<Vec<$crate::store::TokenRow>, $crate::store::StoreError> {
                $crate::store::tokens::SqlTokens::<$db>(&self.pool)
                    .rows()
                    .await
            }

            async fn insert_token(
                &self,
                row: &$crate::store::TokenRow,
            ) -> Result<(), $crate::store::StoreError> {
                $crate::store::tokens::SqlTokens::<$db>(&self.pool)
                    .insert(row)
                    .await
            }

            async fn revoke_token(
                &self,
                label: &str,
                at: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                $crate::store::tokens::SqlTokens::<$db>(&self.pool)
                    .revoke(label, at)
                    .await
            }
        }
    };
}
pub(crate) use sql_tokens;
