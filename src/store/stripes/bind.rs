//! The checks that bind the URLs given to the stripes they were set up
//! as, read from each database's stripe record ([`super::record`]).
//! docs/design.md, "Stripes: records and checks".
//!
//! [`bind_stripes`] reads the records at start and refuses URLs given in
//! another order, missing, extra, or naming one database twice; a fresh
//! set of empty databases is claimed in order. [`bind_stripes_without`]
//! does the same for a start on which some stripes did not answer, and
//! [`LateStripe::check`] checks each of those when it does.
//!
//! Messages number URLs and stripes from 1, in the order the URLs are given
//! ("URL #1 is stripe 2 of 3"); the stored `stripe_index` counts from 0.

use std::sync::Arc;

use super::layout::StripeLayout;
use super::record::{new_database_id, StripeRecord};
use crate::store::migrator::MigrateMode;
use crate::store::{redact_url, Store, StoreError};

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
    let layouts = check_set(&records, urls)?;
    one_set(stores, urls, &records, mode).await?;
    Ok(layouts)
}

/// Checks that records which passed [`check_set`] name one set: a record
/// whose set identity differs from another's is a stripe of another set
/// (refused, exit status 2). Under `auto`, records written before seqd kept
/// the identity take it: the one a record already has, else the one the
/// first of them takes (of two processes doing this at once, both read
/// back the same). Under `check` and `off` they are accepted with a
/// warning, unchecked. Returns the set's identity in force, and the
/// position of the first record carrying it; `None` when none does.
async fn one_set(
    stores: &[Arc<dyn Store>],
    urls: &[String],
    records: &[Option<StripeRecord>],
    mode: MigrateMode,
) -> Result<Option<(usize, String)>, StoreError> {
    let mut set: Option<(usize, String)> = None;
    let mut unset = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let Some(r) = r else { continue }; // a stripe that did not answer
        match r.set_id.as_ref() {
            None => unset.push(i),
            Some(id) => match &set {
                None => set = Some((i, id.clone())),
                Some((j, s)) if s != id => return Err(two_sets(urls, *j, i)),
                Some(_) => {}
            },
        }
    }
    if unset.is_empty() {
        return Ok(set);
    }
    if mode != MigrateMode::Auto {
        if records.len() > 1 {
            tracing::warn!(
                urls = ?unset.iter().map(|i| i + 1).collect::<Vec<_>>(),
                "stripe records without the set's identity (written by an earlier seqd): a \
                 stripe of another set cannot be told apart until a start with --migrate auto \
                 records it"
            );
        }
        return Ok(set);
    }
    for i in unset {
        let want = set
            .as_ref()
            .map_or_else(new_database_id, |(_, s)| s.clone());
        let got = stores[i]
            .join_stripe_set(&want)
            .await
            .map_err(|e| at_url(urls, i, e))?;
        let Some(id) = got.and_then(|r| r.set_id) else {
            return Err(refuse(format!(
                "{}: its stripe record vanished while seqd recorded the set's identity",
                url_at(urls, i)
            )));
        };
        match &set {
            Some((j, s)) if *s != id => return Err(two_sets(urls, *j, i)),
            Some(_) => {}
            None => set = Some((i, id)),
        }
    }
    Ok(set)
}

/// What a stripe that did not answer at start must turn out to be when it
/// does: stripe `i` of this set ([`bind_stripes_without`]).
#[derive(Debug, Clone)]
pub struct LateStripe {
    /// Its position, from 0.
    pub index: u32,
    /// The set's count.
    pub count: u32,
    /// The set's block.
    pub block: i64,
    /// The set's identity, when its records carry one, and the position of
    /// a stripe whose record carries it.
    pub set: Option<(usize, String)>,
    /// The positions and `database_id`s of the stripes that answered.
    pub others: Vec<(usize, String)>,
}

impl LateStripe {
    /// Checks `store`'s record (URL `urls[index]`): the record of stripe
    /// `index` of this set, a database of its own, of this set (a record
    /// without the set's identity takes it under `auto`). Refusals are
    /// [`StoreError::Migration`], naming the URL.
    pub async fn check(
        &self,
        store: &Arc<dyn Store>,
        urls: &[String],
        mode: MigrateMode,
    ) -> Result<(), StoreError> {
        let i = self.index as usize;
        let record = store
            .stripe_record()
            .await
            .map_err(|e| at_url(urls, i, e))?;
        let Some(mut r) = record else {
            return Err(refuse(not_a_stripe(urls, i)));
        };
        if (r.index, r.count, r.block) != (self.index, self.count, self.block) {
            return Err(refuse(format!(
                "{} is {} with blocks of {} IDs, not stripe {} of {} with blocks of {}: the \
                 URLs are not those the stripes were set up with",
                url_at(urls, i),
                r.describe(),
                r.block,
                i + 1,
                self.count,
                self.block
            )));
        }
        if let Some((j, _)) = self.others.iter().find(|(_, id)| *id == r.database_id) {
            return Err(same_database(urls, i, *j));
        }
        if let (Some((_, set)), None, MigrateMode::Auto) = (&self.set, &r.set_id, mode) {
            r = store
                .join_stripe_set(set)
                .await
                .map_err(|e| at_url(urls, i, e))?
                .unwrap_or(r);
        }
        match (&self.set, &r.set_id) {
            (Some((j, a)), Some(b)) if a != b => Err(two_sets(urls, *j, i)),
            _ => Ok(()),
        }
    }
}

/// [`bind_stripes`] for a start on which the databases at `missing`
/// (positions from 0, never the first) did not answer. The records of those
/// that answered must be stripes of one recorded set of N (each at its
/// position, N as count, one block, one set identity, distinct databases):
/// a new set is recorded only with every stripe answering. Returns every
/// stripe's layout (the missing ones' from the set's count and block) and
/// what each missing one must turn out to be when it answers. `stores` has
/// a stand-in at each missing position, never touched here.
pub async fn bind_stripes_without(
    stores: &[Arc<dyn Store>],
    missing: &[usize],
    urls: &[String],
    mode: MigrateMode,
) -> Result<(Vec<StripeLayout>, Vec<LateStripe>), StoreError> {
    let count = stripe_count(stores, urls)?;
    let n = stores.len();
    let mut records: Vec<Option<StripeRecord>> = vec![None; n];
    for i in (0..n).filter(|i| !missing.contains(i)) {
        let record = stores[i]
            .stripe_record()
            .await
            .map_err(|e| at_url(urls, i, e))?;
        if record.is_none() {
            return Err(refuse(format!(
                "{} has no stripe record and {} did not answer: a new stripe set is \
                 recorded at a start on which every stripe answers",
                url_at(urls, i),
                url_at(urls, missing[0])
            )));
        }
        records[i] = record;
    }
    let present = distinct_records(&records, urls)?;
    let (_, first) = present[0];
    for (i, r) in &present {
        if r.count != count || r.index as usize != *i || r.block != first.block {
            return Err(refuse(format!(
                "the databases that answered are not stripes of one set of {count} in this \
                 order ({})",
                describe_all(&records)
            )));
        }
    }
    let block = first.block;
    let others: Vec<(usize, String)> = present
        .iter()
        .map(|(i, r)| (*i, r.database_id.clone()))
        .collect();
    let set = one_set(stores, urls, &records, mode).await?;
    let layouts = (0..count)
        .map(|i| StripeLayout::new(i, count, block).map_err(|e| StoreError::Config(e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let late = missing
        .iter()
        .map(|&i| LateStripe {
            index: i as u32,
            count,
            block,
            set: set.clone(),
            others: others.clone(),
        })
        .collect();
    Ok((layouts, late))
}

/// The refusal of URLs `j` and `i` (from 0) being stripes of two sets.
fn two_sets(urls: &[String], j: usize, i: usize) -> StoreError {
    refuse(format!(
        "URL #{} and URL #{} are stripes of two different stripe sets (their records carry \
         different set identities): each set hands out IDs on its own, and mixing their \
         stripes would hand out the same IDs twice; give every stripe of one set, in its \
         order ({}; {})",
        j + 1,
        i + 1,
        url_at(urls, j),
        url_at(urls, i)
    ))
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
    let mut written = Vec::new();
    let bound = claim(stores, urls, block, &mut written).await;
    if bound.is_err() {
        undo_claims(stores, urls, &written).await;
    }
    bound
}

/// Claims stripe `i` of N on `stores[i]`, one after another, and checks
/// the records in force; `written` gets each record this call inserted
/// (its URL's position and `database_id`), also when it fails half-way.
async fn claim(
    stores: &[Arc<dyn Store>],
    urls: &[String],
    block: i64,
    written: &mut Vec<(usize, String)>,
) -> Result<Vec<StripeLayout>, StoreError> {
    let count = stores.len() as u32;
    let mut claimed: Vec<Option<StripeRecord>> = Vec::with_capacity(stores.len());
    // The set's identity: this claim's, unless another process claimed
    // the first database first (then its).
    let mut set_id = new_database_id();
    for (i, store) in stores.iter().enumerate() {
        let wanted = StripeRecord::new(i as u32, count, block).in_set(set_id.clone());
        let got = store
            .put_stripe_record(&wanted, false)
            .await
            .map_err(|e| at_url(urls, i, e))?;
        if got.database_id == wanted.database_id {
            written.push((i, got.database_id.clone()));
        }
        if i == 0 {
            if let Some(theirs) = &got.set_id {
                set_id = theirs.clone();
            }
        }
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
    let layouts = check_set(&claimed, urls)?;
    one_set(stores, urls, &claimed, MigrateMode::Auto).await?;
    Ok(layouts)
}

/// Deletes the records a refused claim wrote (each only if it still holds
/// the `database_id` written), so a refused start leaves the databases as
/// it found them: the next start, with the URLs corrected, claims them
/// afresh. A record that cannot be deleted is logged with how to remove it.
async fn undo_claims(stores: &[Arc<dyn Store>], urls: &[String], written: &[(usize, String)]) {
    for (i, database_id) in written {
        match stores[*i].drop_stripe_record(database_id).await {
            Ok(_) => tracing::info!(database = %url_at(urls, *i),
                "start refused: the stripe record this start wrote is removed"),
            Err(e) => tracing::error!(database = %url_at(urls, *i), error = %e,
                "start refused, and the stripe record this start wrote could not be removed: \
                 while no seqd serves from this database, delete it with \
                 `DELETE FROM seqd_stripe` (docs/high-availability.md)"),
        }
    }
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

    /// The layouts `stores` bind to as `urls(n)` under `mode` (blocks of
    /// 100 for a fresh set).
    async fn bound(stores: &[Arc<dyn Store>], mode: MigrateMode) -> Vec<StripeLayout> {
        bind_stripes(stores, &urls(stores.len()), mode, 100)
            .await
            .unwrap()
    }

    /// Stripe `i` of `count` with blocks of 100, for each `i`.
    fn set_of(count: u32) -> Vec<StripeLayout> {
        (0..count)
            .map(|i| StripeLayout::new(i, count, 100).unwrap())
            .collect()
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

    #[tokio::test]
    async fn a_single_database_is_claimed_as_stripe_0_of_1_under_auto_only() {
        let s = stores(1);
        s[0].create(&one_sequence(5)).await.unwrap();
        let got = bound(&s, MigrateMode::Check).await;
        assert_eq!(got, vec![StripeLayout::new(0, 1, 100).unwrap()]);
        assert_eq!(
            s[0].stripe_record().await.unwrap(),
            None,
            "check writes nothing"
        );
        bound(&s, MigrateMode::Auto).await;
        let r = s[0].stripe_record().await.unwrap().unwrap();
        assert_eq!((r.index, r.count, r.block), (0, 1, 100));
    }

    #[tokio::test]
    async fn a_fresh_set_is_claimed_in_order_and_then_checked() {
        let s = stores(3);
        let got = bound(&s, MigrateMode::Auto).await;
        let want = set_of(3);
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
        bound(&s, MigrateMode::Auto).await;
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

    /// Two sets set up apart (a, b, c) and (x, y, z): URLs mixing them
    /// (a, y, c) are refused although each is at its own position of a set
    /// of three with the same block; each set alone still starts.
    #[tokio::test]
    async fn stripes_of_two_sets_are_refused() {
        let (p, q) = (stores(3), stores(3));
        for set in [&p, &q] {
            bound(set, MigrateMode::Auto).await;
        }
        let mut ids = Vec::new();
        for store in [&p[0], &p[1], &q[0]] {
            ids.push(store.stripe_record().await.unwrap().unwrap().set_id);
        }
        assert!(
            ids[0].is_some() && ids[0] == ids[1] && ids[0] != ids[2],
            "{ids:?}"
        );
        let mixed = vec![p[0].clone(), q[1].clone(), p[2].clone()];
        for mode in [MigrateMode::Auto, MigrateMode::Check] {
            let m = refused(&mixed, mode).await;
            assert!(
                m.contains("URL #1 and URL #2 are stripes of two different stripe sets"),
                "{m}"
            );
        }
        for set in [&p, &q] {
            bound(set, MigrateMode::Check).await;
        }
    }

    /// Records without a set identity (written before seqd kept it) are
    /// accepted; `check` leaves them as they are, `auto` gives every one
    /// the same identity, which then tells another set's stripe apart.
    #[tokio::test]
    async fn records_without_a_set_identity_take_one_under_auto() {
        let s = stores(2);
        for (i, store) in s.iter().enumerate() {
            store
                .put_stripe_record(&StripeRecord::new(i as u32, 2, 100), false)
                .await
                .unwrap();
        }
        bound(&s, MigrateMode::Check).await;
        assert_eq!(s[0].stripe_record().await.unwrap().unwrap().set_id, None);
        bound(&s, MigrateMode::Auto).await;
        let (a, b) = (
            s[0].stripe_record().await.unwrap().unwrap(),
            s[1].stripe_record().await.unwrap().unwrap(),
        );
        assert!(a.set_id.is_some() && a.set_id == b.set_id, "{a:?} {b:?}");
        // Another set's stripe 2, without an identity: it takes this set's
        // only if given with it, so give it a different one first.
        let other = stores(2);
        bound(&other, MigrateMode::Auto).await;
        let mixed = vec![s[0].clone(), other[1].clone()];
        let m = refused(&mixed, MigrateMode::Auto).await;
        assert!(m.contains("two different stripe sets"), "{m}");
    }

    /// A set of three whose stripe 3 does not answer at start: the others
    /// give every layout and what stripe 3 must be. When it answers, its
    /// own record passes; another set's stripe 3, a database without a
    /// record, and stripe 2 given again are refused. A new set (no
    /// records) is not started without every stripe.
    #[tokio::test]
    async fn a_stripe_missing_at_start_is_checked_when_it_answers() {
        let s = stores(3);
        bound(&s, MigrateMode::Auto).await;
        let stand_in: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let partial = vec![s[0].clone(), s[1].clone(), stand_in.clone()];
        let (layouts, late) = bind_stripes_without(&partial, &[2], &urls(3), MigrateMode::Auto)
            .await
            .unwrap();
        let want = set_of(3);
        assert_eq!(layouts, want);
        assert_eq!(late.len(), 1);
        let late = &late[0];
        late.check(&s[2], &urls(3), MigrateMode::Auto)
            .await
            .unwrap();

        let other = stores(3);
        bound(&other, MigrateMode::Auto).await;
        let refusal = |r: Result<(), StoreError>| match r {
            Err(StoreError::Migration(m)) => m,
            other => panic!("expected a refusal, got {other:?}"),
        };
        let m = refusal(late.check(&other[2], &urls(3), MigrateMode::Auto).await);
        assert!(
            m.contains("URL #1 and URL #3 are stripes of two different stripe sets"),
            "{m}"
        );
        // A database answering as stripe 3 whose identity is stripe 1's:
        // the first URL's database, reached again.
        let first = s[0].stripe_record().await.unwrap().unwrap();
        let twin: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let as_third = StripeRecord {
            index: 2,
            ..first.clone()
        };
        twin.put_stripe_record(&as_third, false).await.unwrap();
        let m = refusal(late.check(&twin, &urls(3), MigrateMode::Auto).await);
        assert!(m.contains("URL #3 and URL #1 are the same database"), "{m}");
        let m = refusal(late.check(&stand_in, &urls(3), MigrateMode::Auto).await);
        assert!(m.contains("URL #3 is not a stripe of this set"), "{m}");
        let m = refusal(late.check(&s[1], &urls(3), MigrateMode::Auto).await);
        assert!(m.contains("is stripe 2 of 3"), "{m}");

        let fresh = stores(3);
        let partial = vec![fresh[0].clone(), fresh[1].clone(), stand_in];
        match bind_stripes_without(&partial, &[2], &urls(3), MigrateMode::Auto).await {
            Err(StoreError::Migration(m)) => {
                assert!(
                    m.contains(
                        "a new stripe set is recorded at a start on which every stripe answers"
                    ),
                    "{m}"
                )
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    /// A start refused after it claimed some databases (one of them given
    /// twice, or the last one failing) removes the records it wrote: the
    /// same databases, given right, are then claimed as a fresh set.
    #[tokio::test]
    async fn a_refused_claim_leaves_no_record_behind() {
        let s = stores(2);
        let twice = vec![s[0].clone(), s[1].clone(), s[0].clone()];
        let m = refused(&twice, MigrateMode::Auto).await;
        assert!(m.contains("URL #3 and URL #1 are the same database"), "{m}");
        for store in &s {
            assert_eq!(store.stripe_record().await.unwrap(), None);
        }

        // Lost just before its record is written.
        struct Down;
        impl crate::store::forwarding::Hook for Down {
            fn before(&self, call: crate::store::forwarding::Call) -> Result<(), StoreError> {
                match call {
                    crate::store::forwarding::Call::StripeRecord => {
                        Err(StoreError::Unavailable("down".into()))
                    }
                    _ => Ok(()),
                }
            }
        }
        let down: Arc<dyn Store> =
            crate::store::forwarding::Forwarding::new(Arc::new(MemoryStore::new()), Down);
        let failing = vec![s[0].clone(), s[1].clone(), down];
        assert!(matches!(
            bind_unrecorded(&failing, &urls(3), MigrateMode::Auto, 100).await,
            Err(StoreError::Unavailable(m)) if m.contains("URL #3")
        ));
        for store in &s {
            assert_eq!(store.stripe_record().await.unwrap(), None);
        }

        let got = bound(&s, MigrateMode::Auto).await;
        assert_eq!(got.len(), 2);
        // A record another start wrote is never removed by this one's undo.
        let other = StripeRecord::new(0, 2, 100);
        assert!(!s[0].drop_stripe_record(&other.database_id).await.unwrap());
        assert!(s[0].stripe_record().await.unwrap().is_some());
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
}
