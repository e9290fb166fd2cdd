//! Storage: the one trait the allocator and the operators' tools need, and one
//! implementation per backend.
//!
//! Every backend keeps the `sequences` table of DESIGN.md. Reserving a segment
//! is a single atomic step in the database (`UPDATE ... RETURNING` on
//! PostgreSQL and SQLite, `UPDATE` + `SELECT` inside one transaction holding
//! the row lock on MySQL/MariaDB), so two instances can never receive
//! overlapping ranges. `sqlx::Error` never leaves this module: every backend
//! narrows it to [`StoreError`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::{NewSequence, SeqName};

pub mod memory;
pub mod mysql;
pub mod postgres;
pub mod sqlite;
pub mod workers;
pub mod workers_mysql;
pub mod workers_postgres;
pub mod workers_sqlite;

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
}

impl Reservation {
    /// The first ID of the range.
    pub fn first(&self) -> i64 {
        self.max_id - self.size + 1
    }
}

/// What a field update (operator change) asks for; `None` leaves a field alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SequencePatch {
    /// New base step, already validated.
    pub step: Option<i64>,
    /// New description, already validated.
    pub description: Option<String>,
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
    /// `i64::MAX` even at the row's own step, and [`StoreError::NotFound`] when
    /// no row has this name.
    async fn reserve(&self, name: &SeqName, min_size: i64) -> Result<Reservation, StoreError>;

    /// Inserts a new row with `max_id = start - 1`.
    async fn create(&self, seq: &NewSequence) -> Result<SequenceRow, StoreError>;

    /// Reads one row.
    async fn get(&self, name: &SeqName) -> Result<Option<SequenceRow>, StoreError>;

    /// Reads every row, ordered by name.
    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError>;

    /// Changes `step` and/or `description` of an existing row.
    async fn update(
        &self,
        name: &SeqName,
        patch: &SequencePatch,
    ) -> Result<SequenceRow, StoreError>;

    /// Applies the embedded migrations of this backend (idempotent).
    async fn migrate(&self) -> Result<(), StoreError>;

    /// Checks that the database answers and the schema is in place.
    async fn ping(&self) -> Result<(), StoreError>;

    /// A short name of the backend for logs and the monitor ("postgres", ...).
    fn backend(&self) -> &'static str;
}

/// Opens the store named by `url`, choosing the backend by its scheme:
/// `postgres://` or `postgresql://`, `mysql://` or `mariadb://` (both served
/// by [`mysql::MySqlStore`]), `sqlite:` (e.g. `sqlite://seqd.db?mode=rwc`).
///
/// It connects (so an unreachable database fails here) but does not run the
/// migrations: call [`Store::migrate`] for that.
pub async fn connect(url: &str) -> Result<std::sync::Arc<dyn Store>, StoreError> {
    use std::sync::Arc;

    let scheme = url
        .split_once(':')
        .map(|(s, _)| s.to_ascii_lowercase())
        .unwrap_or_default();
    let store: Arc<dyn Store> = match scheme.as_str() {
        "postgres" | "postgresql" => Arc::new(postgres::PostgresStore::connect(url).await?),
        "mysql" => Arc::new(mysql::MySqlStore::connect(url).await?),
        // Same wire protocol; sqlx only knows the `mysql://` scheme.
        "mariadb" => {
            let url = format!("mysql{}", &url[scheme.len()..]);
            Arc::new(mysql::MySqlStore::connect(&url).await?)
        }
        "sqlite" => Arc::new(sqlite::SqliteStore::connect(url).await?),
        _ => {
            return Err(StoreError::Config(format!(
                "unsupported database URL scheme {scheme:?}: \
                 expected postgres://, mysql://, mariadb:// or sqlite:"
            )))
        }
    };
    Ok(store)
}

/// Returns `url` with any password replaced by `***`, for logs: the password of
/// the user-info part (`scheme://user:secret@host`) and the value of query
/// parameters that carry one (`password`, `pass`, `pwd`, `sslpassword`).
/// Everything else is kept as written.
pub fn redact_url(url: &str) -> String {
    // Split off the fragment and the query so that '@', ':' or '/' in them are
    // not mistaken for the authority's separators.
    let (before_fragment, fragment) = match url.find('#') {
        Some(i) => (&url[..i], Some(&url[i..])),
        None => (url, None),
    };
    let (base, query) = match before_fragment.find('?') {
        Some(i) => (&before_fragment[..i], Some(&before_fragment[i + 1..])),
        None => (before_fragment, None),
    };

    let mut out = String::with_capacity(url.len());
    match base.find("://") {
        Some(i) => {
            let authority_start = i + 3;
            let rest = &base[authority_start..];
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let authority = &rest[..authority_end];
            out.push_str(&base[..authority_start]);
            match authority.rfind('@') {
                Some(at) => {
                    let userinfo = &authority[..at];
                    match userinfo.find(':') {
                        Some(colon) => {
                            out.push_str(&userinfo[..colon]);
                            out.push_str(":***");
                        }
                        None => out.push_str(userinfo),
                    }
                    out.push_str(&authority[at..]);
                }
                None => out.push_str(authority),
            }
            out.push_str(&rest[authority_end..]);
        }
        None => out.push_str(base),
    }

    if let Some(query) = query {
        out.push('?');
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
        out.push_str(&redacted.join("&"));
    }
    if let Some(fragment) = fragment {
        out.push_str(fragment);
    }
    out
}

/// Narrows a driver error to [`StoreError`]: configuration problems become
/// [`StoreError::Config`], everything else [`StoreError::Unavailable`] with the
/// driver's text (for logs only).
fn unavailable(e: sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::Configuration(e) => StoreError::Config(e.to_string()),
        other => StoreError::Unavailable(other.to_string()),
    }
}

/// Narrows a migration error to [`StoreError::Unavailable`].
fn migrate_failed(e: sqlx::migrate::MigrateError) -> StoreError {
    StoreError::Unavailable(format!("migration failed: {e}"))
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
);

/// Converts a fetched [`NaiveRow`] (`None` for an invalid stored name).
fn naive_row(
    (name, max_id, step, description, created_at, updated_at): NaiveRow,
) -> Option<SequenceRow> {
    row_from_columns(
        name,
        max_id,
        step,
        description,
        created_at.and_utc(),
        updated_at.and_utc(),
    )
}

/// Like [`naive_row`] for a row looked up by a valid name, which must convert.
fn naive_found_row(row: NaiveRow) -> Result<SequenceRow, StoreError> {
    naive_row(row)
        .ok_or_else(|| StoreError::Unavailable("row with an invalid name returned".into()))
}

/// Builds a [`SequenceRow`] from the columns of the table, or `None` when the
/// stored name is not a valid [`SeqName`] (a row an operator inserted by hand
/// with a name the API could never ask for).
fn row_from_columns(
    name: String,
    max_id: i64,
    step: i64,
    description: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
) -> Option<SequenceRow> {
    match SeqName::parse(&name) {
        Ok(name) => Some(SequenceRow {
            name,
            max_id,
            step,
            description,
            created_at,
            updated_at,
        }),
        Err(_) => {
            tracing::warn!(name = %name, "ignoring a row of `sequences` whose name is not a valid sequence name");
            None
        }
    }
}

/// Builds a [`Reservation`] from what one reserving statement returned,
/// checking it is consistent (a positive size within the row's range).
fn reservation(max_id: i64, size: i64, row_step: i64) -> Result<Reservation, StoreError> {
    if size >= 1 && row_step >= 1 && max_id.checked_sub(size).is_some() {
        Ok(Reservation {
            max_id,
            size,
            row_step,
        })
    } else {
        Err(StoreError::Unavailable(format!(
            "inconsistent reservation from the database: max_id={max_id} size={size} step={row_step}"
        )))
    }
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

    #[tokio::test]
    async fn connect_rejects_unknown_schemes_without_echoing_the_url() {
        match connect("redis://user:secret@host/0").await {
            Err(StoreError::Config(msg)) => {
                assert!(msg.contains("redis"), "{msg}");
                assert!(!msg.contains("secret"), "{msg}");
            }
            Err(other) => panic!("expected a Config error, got {other:?}"),
            Ok(_) => panic!("expected a Config error, got a store"),
        }
    }

    #[test]
    fn reservation_rejects_inconsistent_values() {
        assert!(reservation(100, 10, 10).is_ok());
        assert!(reservation(100, 0, 10).is_err());
        assert!(reservation(100, 10, 0).is_err());
        assert!(reservation(i64::MIN, 10, 10).is_err());
    }
}
