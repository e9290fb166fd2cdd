//! What the SQL code needs of a backend, in two traits (docs/design.md,
//! "The SQL store"):
//!
//! - [`Engine`], written by hand once per backend (`postgres/mod.rs`,
//!   `mysql/mod.rs`, `sqlite/mod.rs`): its dialect, the types it reads
//!   names and timestamps as, its reserving statements, its count of
//!   changed rows.
//! - [`SqlDb`], implemented once for every [`Engine`] that sqlx can bind,
//!   run and read as seqd does: it runs a [`Statement`] (its text and its
//!   [`Bind`]s) and reads columns by position ([`Column`], [`FromColumns`]).
//!
//! Code over the backends is generic over `DB: SqlDb` alone: every bound
//! sqlx asks for (what a connection executes, what a value encodes as, what
//! a column decodes to) is written once, on the impl of [`SqlDb`] below.

use std::marker::PhantomData;

use chrono::{DateTime, Utc};
use sqlx::{Arguments, Database, Pool, Row as _};

use super::dialect::Dialect;

/// A boxed, `Send` future of a statement.
pub(crate) type BoxFuture<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// A backend's sqlx database as seqd uses it: one hand-written impl per
/// backend.
pub(crate) trait Engine: Database {
    /// The dialect of its statements; its name is the backend's (the label
    /// of the retry metric and logs).
    const DIALECT: Dialect;

    /// What text is read as: text, or its bytes (MySQL/MariaDB reports a
    /// column of a binary collation as `VARBINARY`), made text by
    /// [`name_text`].
    type Name: for<'r> sqlx::Decode<'r, Self> + sqlx::Type<Self> + Into<Vec<u8>> + Send;

    /// What a column of bytes (a migration's checksum) is read as.
    type Bytes: for<'r> sqlx::Decode<'r, Self> + sqlx::Type<Self> + Into<Vec<u8>> + Send;

    /// What `created_at` and `updated_at` are read as.
    type Time: for<'r> sqlx::Decode<'r, Self> + sqlx::Type<Self> + ReadTime + Send;

    /// The reserving statements (docs/design.md, "Reserving a segment").
    const RESERVING: Reserving;

    /// How many rows a statement matched.
    fn rows_affected(done: &Self::QueryResult) -> u64;
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

/// A timestamp as a backend reads it: `TIMESTAMP` without zone, in UTC
/// (PostgreSQL, SQLite), or with it (MySQL/MariaDB, in the session's
/// `+00:00`).
pub(crate) trait ReadTime {
    /// The time in UTC.
    fn utc(self) -> DateTime<Utc>;
}

impl ReadTime for chrono::NaiveDateTime {
    fn utc(self) -> DateTime<Utc> {
        self.and_utc()
    }
}

impl ReadTime for DateTime<Utc> {
    fn utc(self) -> DateTime<Utc> {
        self
    }
}

/// A name as read (text, or its bytes: MySQL/MariaDB reports a column of a
/// binary collation as `VARBINARY`) as text; invalid UTF-8 gets replacement
/// characters, which no valid name contains.
pub(crate) fn name_text(name: impl Into<Vec<u8>>) -> String {
    String::from_utf8(name.into())
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A value a [`Statement`] binds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Bind<'q> {
    /// A 64-bit integer (also a worker ID, a `u32`).
    Int(i64),
    /// A 64-bit integer or `NULL`.
    MaybeInt(Option<i64>),
    /// A boolean.
    Flag(bool),
    /// Text.
    Text(&'q str),
    /// Text or `NULL`.
    MaybeText(Option<&'q str>),
}

impl From<i64> for Bind<'_> {
    fn from(v: i64) -> Self {
        Bind::Int(v)
    }
}

impl From<Option<i64>> for Bind<'_> {
    fn from(v: Option<i64>) -> Self {
        Bind::MaybeInt(v)
    }
}

impl From<bool> for Bind<'_> {
    fn from(v: bool) -> Self {
        Bind::Flag(v)
    }
}

impl<'q> From<&'q str> for Bind<'q> {
    fn from(v: &'q str) -> Self {
        Bind::Text(v)
    }
}

impl<'q> From<Option<&'q str>> for Bind<'q> {
    fn from(v: Option<&'q str>) -> Self {
        Bind::MaybeText(v)
    }
}

/// A statement's text and its binds, in order, to run on any [`SqlDb`].
/// Like sqlx's `query`, it is prepared once per connection and kept.
#[derive(Debug, Clone)]
pub(crate) struct Statement<'q> {
    sql: &'q str,
    binds: Vec<Bind<'q>>,
    /// Sent as a simple query, without binds: several statements allowed
    /// (the migrator's scripts).
    simple: bool,
}

impl<'q> Statement<'q> {
    /// `sql`, with no binds yet.
    pub(crate) fn new(sql: &'q str) -> Self {
        Statement {
            sql,
            binds: Vec::new(),
            simple: false,
        }
    }

    /// `sql` sent as one simple query: no binds, not prepared, and it may
    /// hold several statements.
    pub(crate) fn simple(sql: &'q str) -> Self {
        Statement {
            simple: true,
            ..Statement::new(sql)
        }
    }

    /// Binds `value` to the next placeholder.
    pub(crate) fn bind(mut self, value: impl Into<Bind<'q>>) -> Self {
        self.binds.push(value.into());
        self
    }

    /// Binds each of `values`, in order.
    pub(crate) fn bind_all<V: Into<Bind<'q>>>(
        mut self,
        values: impl IntoIterator<Item = V>,
    ) -> Self {
        self.binds.extend(values.into_iter().map(Into::into));
        self
    }

    /// Runs it on `conn`: how many rows it changed.
    pub(crate) async fn execute<DB: SqlDb>(
        self,
        conn: &mut DB::Connection,
    ) -> Result<u64, sqlx::Error> {
        DB::execute(conn, self).await
    }

    /// [`Statement::execute`] on a connection of `pool`, handed back after.
    pub(crate) async fn execute_pooled<DB: SqlDb>(
        self,
        pool: &Pool<DB>,
    ) -> Result<u64, sqlx::Error> {
        self.execute::<DB>(&mut *pool.acquire().await?).await
    }

    /// [`Statement::fetch_all`] on a connection of `pool`, handed back after.
    pub(crate) async fn fetch_all_pooled<DB: SqlDb, T: FromColumns>(
        self,
        pool: &Pool<DB>,
    ) -> Result<Vec<T>, sqlx::Error> {
        self.fetch_all::<DB, T>(&mut *pool.acquire().await?).await
    }

    /// [`Statement::fetch_optional`] on a connection of `pool`, handed back
    /// after.
    pub(crate) async fn fetch_optional_pooled<DB: SqlDb, T: FromColumns>(
        self,
        pool: &Pool<DB>,
    ) -> Result<Option<T>, sqlx::Error> {
        self.fetch_optional::<DB, T>(&mut *pool.acquire().await?)
            .await
    }

    /// Runs it on `conn` and reads every row as `T`.
    pub(crate) async fn fetch_all<DB: SqlDb, T: FromColumns>(
        self,
        conn: &mut DB::Connection,
    ) -> Result<Vec<T>, sqlx::Error> {
        DB::fetch(conn, self)
            .await?
            .iter()
            .map(T::read::<DB>)
            .collect()
    }

    /// Runs it on `conn` and reads its first row as `T`, if any (every row
    /// is read: a statement is stepped to its end, see
    /// [`super::sequences`]).
    pub(crate) async fn fetch_optional<DB: SqlDb, T: FromColumns>(
        self,
        conn: &mut DB::Connection,
    ) -> Result<Option<T>, sqlx::Error> {
        Ok(self.fetch_all::<DB, T>(conn).await?.into_iter().next())
    }

    /// Runs it on `conn` and reads its first row as `T`; no row is
    /// [`sqlx::Error::RowNotFound`].
    pub(crate) async fn fetch_one<DB: SqlDb, T: FromColumns>(
        self,
        conn: &mut DB::Connection,
    ) -> Result<T, sqlx::Error> {
        self.fetch_optional::<DB, T>(conn)
            .await?
            .ok_or(sqlx::Error::RowNotFound)
    }
}

/// An [`Engine`] as the SQL code runs it: statements and columns. Every
/// backend's is the one impl below.
pub(crate) trait SqlDb: Engine {
    /// Runs `statement` on `conn`: how many rows it changed.
    fn execute<'a>(
        conn: &'a mut Self::Connection,
        statement: Statement<'a>,
    ) -> BoxFuture<'a, Result<u64, sqlx::Error>>;

    /// Runs `statement` on `conn`: every row it answered.
    fn fetch<'a>(
        conn: &'a mut Self::Connection,
        statement: Statement<'a>,
    ) -> BoxFuture<'a, Result<Vec<Self::Row>, sqlx::Error>>;

    /// Column `at` of `row` as an integer (`None`: `NULL`).
    fn int(row: &Self::Row, at: usize) -> Result<Option<i64>, sqlx::Error>;

    /// Column `at` of `row` as text ([`Engine::Name`]; `None`: `NULL`).
    fn text(row: &Self::Row, at: usize) -> Result<Option<String>, sqlx::Error>;

    /// Column `at` of `row` as a time in UTC ([`Engine::Time`]; `None`:
    /// `NULL`).
    fn time(row: &Self::Row, at: usize) -> Result<Option<DateTime<Utc>>, sqlx::Error>;

    /// Column `at` of `row` as bytes ([`Engine::Bytes`]; `None`: `NULL`).
    fn bytes(row: &Self::Row, at: usize) -> Result<Option<Vec<u8>>, sqlx::Error>;

    /// Column `at` of `row` as a boolean (`None`: `NULL`).
    fn flag(row: &Self::Row, at: usize) -> Result<Option<bool>, sqlx::Error>;
}

impl<DB: Engine> SqlDb for DB
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Decode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> bool: sqlx::Encode<'q, DB> + sqlx::Decode<'q, DB> + sqlx::Type<DB>,
{
    fn execute<'a>(
        conn: &'a mut DB::Connection,
        statement: Statement<'a>,
    ) -> BoxFuture<'a, Result<u64, sqlx::Error>> {
        Box::pin(async move {
            let done = if statement.simple {
                sqlx::Executor::execute(conn, statement.sql).await?
            } else {
                let arguments = arguments::<DB>(&statement.binds)?;
                sqlx::query_with(statement.sql, arguments)
                    .execute(conn)
                    .await?
            };
            Ok(DB::rows_affected(&done))
        })
    }

    fn fetch<'a>(
        conn: &'a mut DB::Connection,
        statement: Statement<'a>,
    ) -> BoxFuture<'a, Result<Vec<DB::Row>, sqlx::Error>> {
        Box::pin(async move {
            let arguments = arguments::<DB>(&statement.binds)?;
            sqlx::query_with(statement.sql, arguments)
                .fetch_all(conn)
                .await
        })
    }

    fn int(row: &DB::Row, at: usize) -> Result<Option<i64>, sqlx::Error> {
        row.try_get::<Option<i64>, usize>(at)
    }

    fn text(row: &DB::Row, at: usize) -> Result<Option<String>, sqlx::Error> {
        Ok(row.try_get::<Option<DB::Name>, usize>(at)?.map(name_text))
    }

    fn time(row: &DB::Row, at: usize) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        Ok(row
            .try_get::<Option<DB::Time>, usize>(at)?
            .map(ReadTime::utc))
    }

    fn bytes(row: &DB::Row, at: usize) -> Result<Option<Vec<u8>>, sqlx::Error> {
        Ok(row.try_get::<Option<DB::Bytes>, usize>(at)?.map(Into::into))
    }

    fn flag(row: &DB::Row, at: usize) -> Result<Option<bool>, sqlx::Error> {
        row.try_get::<Option<bool>, usize>(at)
    }
}

/// `binds` as `DB`'s arguments (what [`SqlDb`]'s impl can encode).
fn arguments<'q, DB>(binds: &[Bind<'q>]) -> Result<DB::Arguments<'q>, sqlx::Error>
where
    DB: Database,
    for<'a> i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> bool: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    let mut arguments = DB::Arguments::default();
    arguments.reserve(binds.len(), binds.len() * 8);
    for bind in binds {
        match *bind {
            Bind::Int(v) | Bind::MaybeInt(Some(v)) => arguments.add(v),
            Bind::MaybeInt(None) => arguments.add(Null::<i64>(PhantomData)),
            Bind::Flag(v) => arguments.add(v),
            Bind::Text(v) | Bind::MaybeText(Some(v)) => arguments.add(v),
            Bind::MaybeText(None) => arguments.add(Null::<&str>(PhantomData)),
        }
        .map_err(sqlx::Error::Encode)?;
    }
    Ok(arguments)
}

/// `NULL` of type `T`, bound as `T` is (sqlx encodes `Option<T>` per
/// backend only; this is the same for every one).
struct Null<T>(PhantomData<T>);

impl<DB: Database, T: sqlx::Type<DB>> sqlx::Type<DB> for Null<T> {
    fn type_info() -> DB::TypeInfo {
        T::type_info()
    }
}

impl<'q, DB: Database, T: sqlx::Type<DB>> sqlx::Encode<'q, DB> for Null<T> {
    fn encode_by_ref(
        &self,
        _: &mut DB::ArgumentBuffer<'q>,
    ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
        Ok(sqlx::encode::IsNull::Yes)
    }

    fn produces(&self) -> Option<DB::TypeInfo> {
        Some(T::type_info())
    }
}

/// A value read from one column of a row, by position.
pub(crate) trait Column: Sized {
    /// Column `at` of `row`.
    fn column<DB: SqlDb>(row: &DB::Row, at: usize) -> Result<Self, sqlx::Error>;
}

/// A `NULL` where a value must be.
fn required<T>(read: Option<T>, at: usize) -> Result<T, sqlx::Error> {
    read.ok_or_else(|| sqlx::Error::ColumnDecode {
        index: at.to_string(),
        source: Box::new(sqlx::error::UnexpectedNullError),
    })
}

/// Implements [`Column`] for each type listed, and for its `Option`
/// (`None`: `NULL`), over the [`SqlDb`] method that reads it.
macro_rules! columns {
    ($($t:ty => $read:ident,)*) => {$(
        impl Column for Option<$t> {
            fn column<DB: SqlDb>(row: &DB::Row, at: usize) -> Result<Self, sqlx::Error> {
                DB::$read(row, at)
            }
        }

        impl Column for $t {
            fn column<DB: SqlDb>(row: &DB::Row, at: usize) -> Result<Self, sqlx::Error> {
                required(DB::$read(row, at)?, at)
            }
        }
    )*};
}

columns! {
    i64 => int,
    String => text,
    DateTime<Utc> => time,
    Vec<u8> => bytes,
    bool => flag,
}

/// A row read by position: a tuple of [`Column`]s, the first column first.
pub(crate) trait FromColumns: Sized {
    /// Reads `row`.
    fn read<DB: SqlDb>(row: &DB::Row) -> Result<Self, sqlx::Error>;
}

/// Implements [`FromColumns`] for tuples of each arity listed (a type
/// parameter and its column's position each).
macro_rules! tuple_columns {
    ($(($($t:ident $at:tt),+))*) => {$(
        impl<$($t: Column),+> FromColumns for ($($t,)+) {
            fn read<DB: SqlDb>(row: &DB::Row) -> Result<Self, sqlx::Error> {
                Ok(($($t::column::<DB>(row, $at)?,)+))
            }
        }
    )*};
}

tuple_columns! {
    (A 0)
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, D 3)
    (A 0, B 1, C 2, D 3, E 4)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11)
}
