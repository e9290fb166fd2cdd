//! The stripe record of each database: the one row of `seqd_stripe`, and
//! the statements that read, write and delete it on every SQL backend.
//! docs/design.md, "Stripes: records and checks".
//!
//! Every database keeps at most one row in `seqd_stripe` (migration
//! `000N_create_seqd_stripe.sql` of each dialect): its stripe index (from
//! 0), the number of stripes of its set, the block size, and a random
//! `database_id` written with the row and never changed. The checks that
//! bind the URLs given to these records at start are in [`super::bind`];
//! `seqd stripes init` ([`super::init`]) writes them for an existing
//! database or set.

use super::layout::StripeLayout;
use crate::store::engine::{SqlDb, Statement};
use crate::store::migrator::Dialect;
use crate::store::retry::retrying;
use crate::store::{unavailable, StoreError};

/// One database's row of `seqd_stripe`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripeRecord {
    /// Its position in the set, from 0 (`stripe_index`).
    pub index: u32,
    /// How many stripes the set has (`stripe_count`).
    pub count: u32,
    /// IDs per block of the set's layout.
    pub block: i64,
    /// Random text written with the row and kept by every later write: two
    /// URLs reading the same one reach the same database.
    pub database_id: String,
    /// The identity of the set (`set_id`): the same on every stripe of a
    /// set, different between two sets set up apart. `None` on a record
    /// written before seqd kept it.
    pub set_id: Option<String>,
}

impl StripeRecord {
    /// The record of stripe `index` of `count` with blocks of `block` IDs,
    /// under a new [`new_database_id`] (kept only if the row is new).
    pub fn new(index: u32, count: u32, block: i64) -> Self {
        StripeRecord {
            index,
            count,
            block,
            database_id: new_database_id(),
            set_id: None,
        }
    }

    /// The same record as a stripe of the set `set_id`.
    pub fn in_set(mut self, set_id: impl Into<String>) -> Self {
        self.set_id = Some(set_id.into());
        self
    }

    /// The layout this record describes; [`StoreError::Invalid`] for one
    /// no set can have (index past the count, block below 1).
    pub fn layout(&self) -> Result<StripeLayout, StoreError> {
        StripeLayout::new(self.index, self.count, self.block)
            .map_err(|e| StoreError::Invalid(format!("stripe record: {e}")))
    }

    /// `stripe 2 of 3`: counted from 1, as messages count URLs.
    pub fn describe(&self) -> String {
        format!("stripe {} of {}", u64::from(self.index) + 1, self.count)
    }
}

/// 128 bits as 32 hex digits, unique per call: two SipHash outputs under
/// the standard library's randomly keyed `RandomState` (keys drawn from the
/// operating system per thread, then stepped per instance) over the time,
/// the process id and a counter. Not a secret, only an identity: no two
/// databases' records should ever share it.
pub fn new_database_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};

    static CALLS: AtomicU64 = AtomicU64::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let half = |which: u8| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u8(which);
        h.write_u64(call);
        h.write_u32(std::process::id());
        h.write_u128(nanos);
        h.finish()
    };
    format!("{:016x}{:016x}", half(0), half(1))
}

/// The statements of the record, per dialect: read the row; insert it if
/// missing (binds: index, count, block, database_id, set_id); insert it or
/// overwrite index, count, block and set_id, keeping `database_id` (same
/// binds); record the set's identity where it has none (binds: set_id).
fn statements(dialect: Dialect) -> [&'static str; 4] {
    const READ: &str = "SELECT stripe_index, stripe_count, block, database_id, set_id \
                        FROM seqd_stripe WHERE id = 1";
    match dialect {
        Dialect::Postgres => [
            READ,
            "INSERT INTO seqd_stripe (id, stripe_index, stripe_count, block, database_id, set_id) \
             VALUES (1, $1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
            "INSERT INTO seqd_stripe (id, stripe_index, stripe_count, block, database_id, set_id) \
             VALUES (1, $1, $2, $3, $4, $5) ON CONFLICT (id) DO UPDATE SET \
             stripe_index = excluded.stripe_index, stripe_count = excluded.stripe_count, \
             block = excluded.block, set_id = excluded.set_id, updated_at = CURRENT_TIMESTAMP",
            "UPDATE seqd_stripe SET set_id = $1, updated_at = CURRENT_TIMESTAMP \
             WHERE id = 1 AND set_id IS NULL",
        ],
        Dialect::Sqlite => [
            READ,
            "INSERT INTO seqd_stripe (id, stripe_index, stripe_count, block, database_id, set_id) \
             VALUES (1, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            "INSERT INTO seqd_stripe (id, stripe_index, stripe_count, block, database_id, set_id) \
             VALUES (1, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET \
             stripe_index = excluded.stripe_index, stripe_count = excluded.stripe_count, \
             block = excluded.block, set_id = excluded.set_id, updated_at = CURRENT_TIMESTAMP",
            "UPDATE seqd_stripe SET set_id = ?, updated_at = CURRENT_TIMESTAMP \
             WHERE id = 1 AND set_id IS NULL",
        ],
        // `id = id`: a no-op on a duplicate, where INSERT IGNORE would also
        // turn other errors (a CHECK) into warnings.
        Dialect::Mysql => [
            READ,
            "INSERT INTO seqd_stripe (id, stripe_index, stripe_count, block, database_id, set_id) \
             VALUES (1, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE id = id",
            "INSERT INTO seqd_stripe (id, stripe_index, stripe_count, block, database_id, set_id) \
             VALUES (1, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE \
             stripe_index = VALUES(stripe_index), stripe_count = VALUES(stripe_count), \
             block = VALUES(block), set_id = VALUES(set_id), updated_at = CURRENT_TIMESTAMP",
            "UPDATE seqd_stripe SET set_id = ?, updated_at = CURRENT_TIMESTAMP \
             WHERE id = 1 AND set_id IS NULL",
        ],
    }
}

/// Whether a driver error says the table does not exist (PostgreSQL
/// `42P01`, MariaDB/MySQL `42S02`, SQLite "no such table").
fn is_missing_table(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => {
            matches!(db.code().as_deref(), Some("42P01" | "42S02"))
                || db.message().starts_with("no such table")
        }
        _ => false,
    }
}

/// Narrows an error of the record's statements: a missing `seqd_stripe` is
/// [`StoreError::Migration`] (the schema is behind), anything else as usual.
fn record_failed(e: sqlx::Error) -> StoreError {
    if is_missing_table(&e) {
        StoreError::Migration(
            "table seqd_stripe does not exist: the schema is behind \
             (apply the migrations: `seqd migrate`, or `seqd schema` in your own tool)"
                .into(),
        )
    } else {
        unavailable(e)
    }
}

/// A record from its columns; a stored value out of range is
/// [`StoreError::Invalid`].
fn from_columns(
    (index, count, block, database_id, set_id): Columns,
) -> Result<StripeRecord, StoreError> {
    let bad = || {
        StoreError::Invalid(format!(
            "seqd_stripe holds stripe_index {index}, stripe_count {count}: out of range"
        ))
    };
    Ok(StripeRecord {
        index: u32::try_from(index).map_err(|_| bad())?,
        count: u32::try_from(count).map_err(|_| bad())?,
        block,
        database_id,
        set_id,
    })
}

/// The columns of a record as read.
type Columns = (i64, i64, i64, String, Option<String>);

/// [`StripeRecords::stripe_record`] on a backend's pool.
pub(crate) async fn read_record<DB: SqlDb>(
    pool: &sqlx::Pool<DB>,
) -> Result<Option<StripeRecord>, StoreError> {
    let [read, ..] = statements(DB::DIALECT);
    retrying!(
        DB::DIALECT.name(),
        Statement::new(read)
            .fetch_optional_pooled::<DB, Columns>(pool)
            .await
    )
    .map_err(record_failed)?
    .map(from_columns)
    .transpose()
}

/// [`StripeRecords::put_stripe_record`] on a backend's pool: one `INSERT` (which
/// the primary key `id = 1` makes race-free: of two writers of a new row,
/// one inserts and the other finds it), then the row read back.
pub(crate) async fn put_record<DB: SqlDb>(
    pool: &sqlx::Pool<DB>,
    record: &StripeRecord,
    replace: bool,
) -> Result<StripeRecord, StoreError> {
    record.layout()?;
    let [_, insert, upsert, _] = statements(DB::DIALECT);
    let write = Statement::new(if replace { upsert } else { insert })
        .bind(i64::from(record.index))
        .bind(i64::from(record.count))
        .bind(record.block)
        .bind(record.database_id.as_str())
        .bind(record.set_id.as_deref());
    write_record(pool, write).await?;
    read_record(pool).await?.ok_or_else(|| {
        StoreError::Unavailable("the stripe record just written reads back as missing".into())
    })
}

/// [`StripeRecords::join_stripe_set`] on a backend's pool: one `UPDATE`
/// of a row without a set identity, then the row read back.
pub(crate) async fn join_set<DB: SqlDb>(
    pool: &sqlx::Pool<DB>,
    set_id: &str,
) -> Result<Option<StripeRecord>, StoreError> {
    let [.., join] = statements(DB::DIALECT);
    write_record(pool, Statement::new(join).bind(set_id)).await?;
    read_record(pool).await
}

/// [`StripeRecords::drop_stripe_record`] on a backend's pool: one `DELETE`
/// of the row if it holds `database_id`.
pub(crate) async fn delete_record<DB: SqlDb>(
    pool: &sqlx::Pool<DB>,
    database_id: &str,
) -> Result<bool, StoreError> {
    let delete = match DB::DIALECT {
        Dialect::Postgres => "DELETE FROM seqd_stripe WHERE id = 1 AND database_id = $1",
        Dialect::Mysql | Dialect::Sqlite => {
            "DELETE FROM seqd_stripe WHERE id = 1 AND database_id = ?"
        }
    };
    Ok(write_record(pool, Statement::new(delete).bind(database_id)).await? > 0)
}

/// Runs `write`, a statement on the record, on a connection of `pool`
/// (again on a conflict): how many rows it changed.
async fn write_record<DB: SqlDb>(
    pool: &sqlx::Pool<DB>,
    write: Statement<'_>,
) -> Result<u64, StoreError> {
    retrying!(
        DB::DIALECT.name(),
        write.clone().execute_pooled::<DB>(pool).await
    )
    .map_err(record_failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::StripeRecords;

    #[test]
    fn database_ids_are_32_hex_digits_and_differ() {
        let (a, b) = (new_database_id(), new_database_id());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }

    #[tokio::test]
    async fn put_keeps_the_first_row_or_replaces_all_but_the_database_id() {
        let s = MemoryStore::new();
        let first = s
            .put_stripe_record(&StripeRecord::new(0, 1, 10), false)
            .await
            .unwrap();
        let kept = s
            .put_stripe_record(&StripeRecord::new(1, 2, 10), false)
            .await
            .unwrap();
        assert_eq!(kept, first);
        let replaced = s
            .put_stripe_record(&StripeRecord::new(1, 2, 20), true)
            .await
            .unwrap();
        assert_eq!((replaced.index, replaced.count, replaced.block), (1, 2, 20));
        assert_eq!(replaced.database_id, first.database_id);
        assert!(s
            .put_stripe_record(&StripeRecord::new(2, 2, 20), true)
            .await
            .is_err());
    }
}
