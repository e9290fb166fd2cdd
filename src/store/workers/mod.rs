//! Storage of snowflake worker-ID leases: the `workers` table
//! (`migrations/*/0002_create_workers.sql`) behind the [`WorkerLeases`] trait,
//! implemented once for the SQL backends ([`SqlWorkerLeases`], `sql.rs`, with
//! each dialect's statements; `postgres/workers.rs`, `mysql/workers.rs`,
//! `sqlite/workers.rs` name it for each backend).
//!
//! A row exists for every worker ID ever leased; it is inserted by the first
//! claim of that ID. Each change is one atomic statement whose `WHERE` clause
//! carries its precondition, so two instances racing for one worker ID cannot
//! both win:
//!
//! - claim a new ID: `INSERT` (a duplicate key means someone else got it);
//! - claim an existing row: a compare-and-set on the whole row as it was read
//!   (`owner`, `lease_until`, `last_timestamp`), also requiring that the lease
//!   has expired or is the caller's own;
//! - renew and release: only `WHERE owner = <me>`.
//!
//! Times are milliseconds since the Unix epoch, from the caller's clock.
//! `last_timestamp` only ever holds an upper bound of the timestamps issued
//! under the worker ID (see `crate::snowflake::lease` for the scheme).

use async_trait::async_trait;

use super::StoreError;

mod sql;

pub(crate) use sql::numbered;
pub use sql::SqlWorkerLeases;

/// Longest owner string stored (the column is `VARCHAR(64)`).
pub const MAX_OWNER_LEN: usize = 64;

/// One row of the `workers` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRow {
    /// The worker ID.
    pub worker_id: u32,
    /// Who holds (or last held) it: an instance's owner string.
    pub owner: String,
    /// The lease is valid until this time (ms since the Unix epoch); `0` once released.
    pub lease_until: i64,
    /// Upper bound of every timestamp issued under this worker ID (ms since the Unix epoch).
    pub last_timestamp: i64,
}

impl WorkerRow {
    /// The row `owner` writes when it claims this one: the same worker ID,
    /// leased to `owner` until `lease_until`, with `last_timestamp`.
    pub fn claimed_by(&self, owner: &str, lease_until: i64, last_timestamp: i64) -> WorkerRow {
        WorkerRow {
            worker_id: self.worker_id,
            owner: owner.to_string(),
            lease_until,
            last_timestamp,
        }
    }
}

/// Lease storage for snowflake worker IDs.
///
/// Every method is one statement (or one read); a `false` answer means the
/// precondition did not hold (someone else got there first), never an error.
#[async_trait]
pub trait WorkerLeases: Send + Sync + 'static {
    /// Prepares the schema (creates `workers`): applies this backend's
    /// migrations (idempotent), or, for lease storage opened by
    /// [`super::connect`], what its options' `migrate` says.
    async fn migrate(&self) -> Result<(), StoreError>;

    /// Every row with `worker_id < below`, ordered by worker ID.
    async fn list(&self, below: u32) -> Result<Vec<WorkerRow>, StoreError>;

    /// Inserts `row`; `false` if its worker ID already has a row.
    async fn insert(&self, row: &WorkerRow) -> Result<bool, StoreError>;

    /// Replaces `seen` (a row as [`WorkerLeases::list`] returned it) by
    /// `new` (the same worker ID: the claimer as owner, its `lease_until`
    /// and `last_timestamp`; see [`WorkerRow::claimed_by`]) if and only if
    /// the row is still exactly `seen` and its lease has expired at `now`
    /// (`lease_until < now`) or belongs to `new.owner`.
    async fn claim(&self, seen: &WorkerRow, new: &WorkerRow, now: i64) -> Result<bool, StoreError>;

    /// Extends `owner`'s lease of worker ID `worker` to `until` (its
    /// `lease_until`) and raises `last_timestamp` to at least `until`;
    /// `false` if `owner` no longer holds the row.
    async fn renew(&self, worker: u32, owner: &str, until: i64) -> Result<bool, StoreError>;

    /// Frees `owner`'s lease of worker ID `worker` (`lease_until = 0`),
    /// recording `last` as `last_timestamp` (the exact bound of what `owner`
    /// issued); `false` if `owner` no longer holds the row.
    async fn release(&self, worker: u32, owner: &str, last: i64) -> Result<bool, StoreError>;

    /// A short name of the backend ("postgres", ...).
    fn backend(&self) -> &'static str;
}

/// Converts a fetched `(worker_id, owner, lease_until, last_timestamp)`.
fn worker_row(
    worker_id: i64,
    owner: String,
    lease_until: i64,
    last_timestamp: i64,
) -> Result<WorkerRow, StoreError> {
    let worker_id = u32::try_from(worker_id).map_err(|_| {
        StoreError::Unavailable(format!("workers row with an invalid worker_id {worker_id}"))
    })?;
    Ok(WorkerRow {
        worker_id,
        owner,
        lease_until,
        last_timestamp,
    })
}

/// Checks an owner string before it is written.
fn check_owner(owner: &str) -> Result<(), StoreError> {
    if owner.is_empty() || owner.len() > MAX_OWNER_LEN || !owner.is_ascii() {
        return Err(StoreError::Config(format!(
            "invalid worker owner {owner:?}: 1..={MAX_OWNER_LEN} ASCII characters"
        )));
    }
    Ok(())
}
