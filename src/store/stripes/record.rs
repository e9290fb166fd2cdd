//! The stripe record of each database, and the checks that bind the URLs
//! given to the stripes they were set up as. docs/design.md, "Stripes:
//! records and checks".
//!
//! Every database keeps at most one row in `seqd_stripe` (migration
//! `000N_create_seqd_stripe.sql` of each dialect): its stripe index (from
//! 0), the number of stripes of its set, the block size, and a random
//! `database_id` written with the row and never changed. [`bind_stripes`]
//! reads them at start and refuses URLs given in another order, missing,
//! extra, or naming one database twice; a fresh set of empty databases is
//! claimed in order. `seqd stripes init` ([`super::init`]) writes them for an
//! existing database or set.
//!
//! Messages number URLs and stripes from 1, in the order the URLs are given
//! ("URL #1 is stripe 2 of 3"); the stored `stripe_index` counts from 0.

use std::sync::Arc;

use super::layout::StripeLayout;
use crate::store::migrator::{Dialect, MigrateMode};
use crate::store::retry::retrying;
use crate::store::{redact_url, unavailable, Store, StoreError};

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
        }
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
/// missing (binds: index, count, block, database_id); insert it or
/// overwrite index, count and block, keeping `database_id` (same binds).
fn statements(dialect: Dialect) -> (&'static str, &'static str, &'static str) {
    const READ: &str =
        "SELECT stripe_index, stripe_count, block, database_id FROM seqd_stripe WHERE id = 1";
    match dialect {
        Dialect::Postgres => (
            READ,
            "INSERT INTO seqd_stripe (id, stripe_index, stripe_count, block, database_id) \
             VALUES (1, $1, $2, $3, $4) ON CONFLICT (id) DO NOTHING",
            "INSERT INTO seqd_stripe (id, stripe_index, stripe_count, block, database_id) \
             VALUES (1, $1, $2, $3, $4) ON CONFLICT (id) DO UPDATE SET \
             stripe_index = excluded.stripe_index, stripe_count = excluded.stripe_count, \
             block = excluded.block, updated_at = CURRENT_TIMESTAMP",
        ),
        Dialect::Sqlite => (
            READ,
            "INSERT INTO seqd_stripe (id, stripe_index, stripe_count, block, database_id) \
             VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            "INSERT INTO seqd_stripe (id, stripe_index, stripe_count, block, database_id) \
             VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET \
             stripe_index = excluded.stripe_index, stripe_count = excluded.stripe_count, \
             block = excluded.block, updated_at = CURRENT_TIMESTAMP",
        ),
        // `id = id`: a no-op on a duplicate, where INSERT IGNORE would also
        // turn other errors (a CHECK) into warnings.
        Dialect::Mysql => (
            READ,
            "INSERT INTO seqd_stripe (id, stripe_index, stripe_count, block, database_id) \
             VALUES (1, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE id = id",
            "INSERT INTO seqd_stripe (id, stripe_index, stripe_count, block, database_id) \
             VALUES (1, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE \
             stripe_index = VALUES(stripe_index), stripe_count = VALUES(stripe_count), \
             block = VALUES(block), updated_at = CURRENT_TIMESTAMP",
        ),
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
    (index, count, block, database_id): (i64, i64, i64, String),
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
    })
}

/// The backend's short name of `dialect`, for [`retrying!`]'s metric.
fn backend_of(dialect: Dialect) -> &'static str {
    dialect.name()
}

/// [`StripeRecords::stripe_record`] on a backend's pool.
pub(crate) async fn read_record<DB>(
    pool: &sqlx::Pool<DB>,
    dialect: Dialect,
) -> Result<Option<StripeRecord>, StoreError>
where
    DB: sqlx::Database,
    for<'c> &'c sqlx::Pool<DB>: sqlx::Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    (i64, i64, i64, String): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    let (read, _, _) = statements(dialect);
    retrying!(
        backend_of(dialect),
        sqlx::query_as::<DB, (i64, i64, i64, String)>(read)
            .fetch_optional(pool)
            .await
    )
    .map_err(record_failed)?
    .map(from_columns)
    .transpose()
}

/// [`StripeRecords::put_stripe_record`] on a backend's pool: one `INSERT` (which
/// the primary key `id = 1` makes race-free: of two writers of a new row,
/// one inserts and the other finds it), then the row read back.
pub(crate) async fn put_record<DB>(
    pool: &sqlx::Pool<DB>,
    dialect: Dialect,
    record: &StripeRecord,
    replace: bool,
) -> Result<StripeRecord, StoreError>
where
    DB: sqlx::Database,
    for<'c> &'c sqlx::Pool<DB>: sqlx::Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    (i64, i64, i64, String): for<'r> sqlx::FromRow<'r, DB::Row>,
{
    record.layout()?;
    let (_, insert, upsert) = statements(dialect);
    retrying!(
        backend_of(dialect),
        sqlx::query::<DB>(if replace { upsert } else { insert })
            .bind(i64::from(record.index))
            .bind(i64::from(record.count))
            .bind(record.block)
            .bind(record.database_id.as_str())
            .execute(pool)
            .await
    )
    .map_err(record_failed)?;
    read_record(pool, dialect).await?.ok_or_else(|| {
        StoreError::Unavailable("the stripe record just written reads back as missing".into())
    })
}

/// `URL #2 (sqlite://b.db)`: a URL by its position (from 0), redacted.
pub(crate) fn url_at(urls: &[String], i: usize) -> String {
    format!("URL #{} ({})", i + 1, redact_url(&urls[i]))
}

/// A refusal: the URLs do not match the stripe records. A configuration
/// problem of the databases' setup, reported like a migration problem
/// (`main` exits with status 2).
pub(crate) fn refuse(message: String) -> StoreError {
    StoreError::Migration(message)
}

/// `e` with the URL it came from, for the errors whose text is seqd's.
pub(crate) fn at_url(urls: &[String], i: usize, e: StoreError) -> StoreError {
    let at = url_at(urls, i);
    match e {
        StoreError::Unavailable(m) => StoreError::Unavailable(format!("{at}: {m}")),
        StoreError::Migration(m) => StoreError::Migration(format!("{at}: {m}")),
        StoreError::Invalid(m) => StoreError::Invalid(format!("{at}: {m}")),
        other => other,
    }
}

/// Checks the URLs given (`urls[i]` is the database of `stores[i]`, already
/// connected and prepared as `mode` says) against the stripe records of
/// their databases, claims a fresh set, and returns each store's layout.
///
/// With N = `stores.len()`:
///
/// - **No database has a record, N = 1**: today's single database (rows or
///   not). `auto` claims stripe 0 of 1; `check` and `off` accept it as such
///   without writing (under `off` a missing `seqd_stripe` table too: the
///   operator owns the schema, and a single database needs no record).
/// - **No database has a record, N > 1, every `sequences` table empty**: a
///   fresh set. `auto` claims stripe `i` on `stores[i]`, one after another,
///   each read back; a database that reads back the `database_id` of an
///   earlier URL is that URL's database given twice: refused. `check` and
///   `off` write nothing and refuse, pointing at `seqd stripes init`.
/// - **No record, N > 1, some database holds rows**: refused; an existing
///   database becomes a stripe only through `seqd stripes init`, which lifts
///   every stripe above every ID already handed out.
/// - **Some records**: every database must have one, with its position as
///   index, N as count, one block size, and distinct `database_id`s.
///
/// Refusals are [`StoreError::Migration`] (exit status 2) naming the URLs,
/// passwords redacted. `block` is the block size of a fresh set; a set
/// already recorded keeps its own.
pub async fn bind_stripes(
    stores: &[Arc<dyn Store>],
    urls: &[String],
    mode: MigrateMode,
    block: i64,
) -> Result<Vec<StripeLayout>, StoreError> {
    let count = stripe_count(stores, urls)?;
    let n = stores.len();
    StripeLayout::new(0, count, block).map_err(|e| StoreError::Config(e.to_string()))?;
    let mut records = Vec::with_capacity(n);
    for (i, store) in stores.iter().enumerate() {
        let record = match store.stripe_record().await {
            Ok(r) => r,
            Err(StoreError::Migration(m)) if mode == MigrateMode::Off && n == 1 => {
                tracing::warn!(
                    database = %redact_url(&urls[0]),
                    "no stripe record read ({m}); serving the database as the only stripe"
                );
                None
            }
            Err(e) => return Err(at_url(urls, i, e)),
        };
        records.push(record);
    }
    if records.iter().all(Option::is_none) {
        return bind_unrecorded(stores, urls, mode, block).await;
    }
    check_set(&records, urls)
}

/// N, the number of stripes `stores` (one per URL of `urls`) make.
pub(crate) fn stripe_count(stores: &[Arc<dyn Store>], urls: &[String]) -> Result<u32, StoreError> {
    let n = stores.len();
    if n == 0 || urls.len() != n {
        return Err(StoreError::Config(format!(
            "{n} stores for {} database URLs",
            urls.len()
        )));
    }
    u32::try_from(n).map_err(|_| StoreError::Config(format!("{n} database URLs: too many stripes")))
}

/// [`bind_stripes`] when no database has a record yet.
async fn bind_unrecorded(
    stores: &[Arc<dyn Store>],
    urls: &[String],
    mode: MigrateMode,
    block: i64,
) -> Result<Vec<StripeLayout>, StoreError> {
    let n = stores.len();
    let count = n as u32;
    if n > 1 {
        for (i, store) in stores.iter().enumerate() {
            let page = store
                .list_page(None, None, 1)
                .await
                .map_err(|e| at_url(urls, i, e))?;
            if !page.rows.is_empty() || page.more {
                return Err(refuse(format!(
                    "{} holds sequences but is not a stripe (it has no stripe record): \
                     to spread an existing database over {n} stripes, stop every seqd \
                     instance and run `seqd stripes init` with these URLs",
                    url_at(urls, i)
                )));
            }
        }
    }
    if mode != MigrateMode::Auto {
        if n == 1 {
            return Ok(vec![
                StripeLayout::new(0, 1, block).map_err(|e| StoreError::Config(e.to_string()))?
            ]);
        }
        return Err(refuse(format!(
            "the {n} databases are a new stripe set with no stripe records, and --migrate \
             {} writes none: record them with `seqd stripes init` (or start once with \
             --migrate auto)",
            if mode == MigrateMode::Check {
                "check"
            } else {
                "off"
            }
        )));
    }
    let mut claimed: Vec<Option<StripeRecord>> = Vec::with_capacity(n);
    for (i, store) in stores.iter().enumerate() {
        let wanted = StripeRecord::new(i as u32, count, block);
        let got = store
            .put_stripe_record(&wanted, false)
            .await
            .map_err(|e| at_url(urls, i, e))?;
        if let Some(j) = claimed
            .iter()
            .position(|r| r.as_ref().is_some_and(|r| r.database_id == got.database_id))
        {
            return Err(same_database(urls, i, j));
        }
        claimed.push(Some(got));
    }
    // Another instance claiming the same databases at once, in another
    // order, shows here.
    check_set(&claimed, urls)
}

/// The refusal of URL `i` being the database of URL `j` (from 0).
pub(crate) fn same_database(urls: &[String], i: usize, j: usize) -> StoreError {
    refuse(format!(
        "URL #{} and URL #{} are the same database (their stripe records share one \
         database_id): each stripe needs a database of its own ({}; {})",
        i + 1,
        j + 1,
        url_at(urls, i),
        url_at(urls, j)
    ))
}

/// What each URL is: `URL #1 is stripe 1 of 2, URL #2 has no stripe record`.
fn describe_all(records: &[Option<StripeRecord>]) -> String {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| match r {
            Some(r) => format!("URL #{} is {}", i + 1, r.describe()),
            None => format!("URL #{} has no stripe record", i + 1),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The records that exist, with their positions, after checking that no
/// two share a `database_id` (one database under two URLs: refused).
pub(crate) fn distinct_records<'r>(
    records: &'r [Option<StripeRecord>],
    urls: &[String],
) -> Result<Vec<(usize, &'r StripeRecord)>, StoreError> {
    let present: Vec<(usize, &StripeRecord)> = records
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.as_ref().map(|r| (i, r)))
        .collect();
    for (a, (i, r)) in present.iter().enumerate() {
        if let Some((j, _)) = present[..a]
            .iter()
            .find(|(_, s)| s.database_id == r.database_id)
        {
            return Err(same_database(urls, *i, *j));
        }
    }
    Ok(present)
}

/// Checks records of which at least one exists against the URLs' order
/// (see [`bind_stripes`]) and returns the layouts.
pub(crate) fn check_set(
    records: &[Option<StripeRecord>],
    urls: &[String],
) -> Result<Vec<StripeLayout>, StoreError> {
    let n = records.len();
    let present = distinct_records(records, urls)?;
    let Some(&(first_at, first)) = present.first() else {
        return Err(StoreError::Config("check_set: no stripe record".into()));
    };
    if present.iter().any(|(_, r)| r.count != first.count) {
        return Err(refuse(format!(
            "the databases are not one stripe set: {}",
            describe_all(records)
        )));
    }
    let set_up = first.count as usize;
    let missing_record = records.iter().position(Option::is_none);
    if set_up != n {
        return Err(refuse(match missing_record {
            Some(i) if n > set_up => not_a_stripe(urls, i),
            _ => format!(
                "the databases were set up as {set_up} stripes; {n} URLs given ({}): give \
                 every stripe's URL, in the order they were set up",
                describe_all(records)
            ),
        }));
    }
    if let Some(i) = missing_record {
        return Err(refuse(not_a_stripe(urls, i)));
    }
    for (i, r) in &present {
        if r.index as usize != *i {
            return Err(refuse(format!(
                "URL #{} is {}, not stripe {}: the URLs are in a different order than when \
                 the stripes were set up ({})",
                i + 1,
                r.describe(),
                i + 1,
                describe_all(records)
            )));
        }
        if r.block != first.block {
            return Err(refuse(format!(
                "URL #{} has blocks of {} IDs, URL #{} of {}: the databases were not set up \
                 as one stripe set",
                i + 1,
                r.block,
                first_at + 1,
                first.block
            )));
        }
    }
    present
        .iter()
        .map(|(i, r)| r.layout().map_err(|e| at_url(urls, *i, e)))
        .collect()
}

/// The refusal of URL `i` (from 0), which has no record beside ones that do.
fn not_a_stripe(urls: &[String], i: usize) -> String {
    format!(
        "URL #{} is not a stripe of this set (it has no stripe record: a new or replaced \
         database?); add stripes with `seqd stripes init`, every seqd instance stopped ({})",
        i + 1,
        url_at(urls, i)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::StripeRecords;

    fn urls(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("postgres://seqd:hunter2@db{i}/seqd"))
            .collect()
    }

    fn stores(n: usize) -> Vec<Arc<dyn Store>> {
        (0..n)
            .map(|_| Arc::new(MemoryStore::new()) as Arc<dyn Store>)
            .collect()
    }

    fn one_sequence(start: i64) -> crate::domain::NewSequence {
        crate::domain::NewSequence {
            name: crate::domain::SeqName::parse("a").unwrap(),
            start,
            step: 1,
            description: String::new(),
            ordering: crate::domain::IdOrdering::Instance,
            serial: None,
        }
    }

    async fn refused(stores: &[Arc<dyn Store>], mode: MigrateMode) -> String {
        match bind_stripes(stores, &urls(stores.len()), mode, 100).await {
            Err(StoreError::Migration(m)) => {
                assert!(!m.contains("hunter2"), "{m}");
                m
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn database_ids_are_32_hex_digits_and_differ() {
        let (a, b) = (new_database_id(), new_database_id());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }

    #[tokio::test]
    async fn a_single_database_is_claimed_as_stripe_0_of_1_under_auto_only() {
        let s = stores(1);
        s[0].create(&one_sequence(5)).await.unwrap();
        let got = bind_stripes(&s, &urls(1), MigrateMode::Check, 100)
            .await
            .unwrap();
        assert_eq!(got, vec![StripeLayout::new(0, 1, 100).unwrap()]);
        assert_eq!(
            s[0].stripe_record().await.unwrap(),
            None,
            "check writes nothing"
        );
        bind_stripes(&s, &urls(1), MigrateMode::Auto, 100)
            .await
            .unwrap();
        let r = s[0].stripe_record().await.unwrap().unwrap();
        assert_eq!((r.index, r.count, r.block), (0, 1, 100));
    }

    #[tokio::test]
    async fn a_fresh_set_is_claimed_in_order_and_then_checked() {
        let s = stores(3);
        let got = bind_stripes(&s, &urls(3), MigrateMode::Auto, 100)
            .await
            .unwrap();
        let want: Vec<_> = (0..3)
            .map(|i| StripeLayout::new(i, 3, 100).unwrap())
            .collect();
        assert_eq!(got, want);
        // Again, under check: the records are read, nothing written.
        let again = bind_stripes(&s, &urls(3), MigrateMode::Check, 7)
            .await
            .unwrap();
        assert_eq!(again, want, "the recorded block wins");
    }

    #[tokio::test]
    async fn a_fresh_set_under_check_is_refused_without_writing() {
        let s = stores(2);
        let m = refused(&s, MigrateMode::Check).await;
        assert!(m.contains("seqd stripes init"), "{m}");
        assert_eq!(s[0].stripe_record().await.unwrap(), None);
    }

    #[tokio::test]
    async fn reordered_missing_extra_and_duplicate_urls_are_refused() {
        let s = stores(3);
        bind_stripes(&s, &urls(3), MigrateMode::Auto, 100)
            .await
            .unwrap();
        let swapped = vec![s[1].clone(), s[0].clone(), s[2].clone()];
        let m = refused(&swapped, MigrateMode::Auto).await;
        assert!(
            m.contains("URL #1 is stripe 2 of 3, not stripe 1: the URLs are in a different order"),
            "{m}"
        );
        let m = refused(&s[..2], MigrateMode::Auto).await;
        assert!(
            m.contains("the databases were set up as 3 stripes; 2 URLs given"),
            "{m}"
        );
        let mut more = s.clone();
        more.push(Arc::new(MemoryStore::new()));
        let m = refused(&more, MigrateMode::Auto).await;
        assert!(m.contains("URL #4 is not a stripe of this set"), "{m}");
        assert!(m.contains("seqd stripes init"), "{m}");
        let twice = vec![s[0].clone(), s[1].clone(), s[1].clone()];
        let m = refused(&twice, MigrateMode::Auto).await;
        assert!(m.contains("URL #3 and URL #2 are the same database"), "{m}");
    }

    #[tokio::test]
    async fn one_empty_database_given_twice_in_a_fresh_set_is_refused() {
        let s = stores(1);
        let twice = vec![s[0].clone(), s[0].clone()];
        let m = refused(&twice, MigrateMode::Auto).await;
        assert!(m.contains("URL #2 and URL #1 are the same database"), "{m}");
    }

    #[tokio::test]
    async fn a_database_with_rows_and_no_record_is_no_stripe_of_a_new_set() {
        let s = stores(2);
        s[1].create(&one_sequence(1)).await.unwrap();
        let m = refused(&s, MigrateMode::Auto).await;
        assert!(
            m.contains("URL #2") && m.contains("seqd stripes init"),
            "{m}"
        );
        assert_eq!(s[0].stripe_record().await.unwrap(), None, "nothing claimed");
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
