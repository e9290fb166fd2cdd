//! `seqd stripes init`: turns a single database into stripe 0 of N, or
//! re-stripes an existing set to N, without ever reissuing an ID. docs/operations.md,
//! "Adding stripes"; docs/design.md, "Stripes: records and checks".
//!
//! # Why raising every row to the highest `max_id` makes it safe
//!
//! On any stripe, under any layout, an ID handed out is at most that
//! stripe's `max_id` of the name (a reservation sets `max_id` to the last
//! ID of its range), and the next reservation starts above the row's
//! `max_id` ([`super::StripeLayout::next_range`]). Let `M` be the highest
//! `max_id` of a name over every stripe of the old set (a single database
//! is a set of one). After init every stripe's row of that name is at least
//! `M`, so every ID any stripe hands out from then on is above `M`, hence
//! above every ID any stripe ever handed out, whatever the old layout was
//! and whatever the new one is; the new stripes are disjoint among
//! themselves by their layout. Raising each row only to its own stripe's
//! history would not do: under the old layout stripe 1 may have handed out
//! IDs in blocks the new layout gives to stripe 0 (a new count or block
//! moves the blocks), and a new database has no history at all.
//!
//! This holds only if no instance reserves with the old layout meanwhile:
//! every seqd instance must be stopped during init (a running one keeps the
//! old stripe set and layout, and would reserve above its own rows in blocks
//! the new layout gives to other stripes). Rows are raised by
//! compare-and-set anyway, so a forgotten instance's reservation is never
//! lowered, only left above `M`.
//!
//! The steps, each harmless to repeat: check the existing records (the old
//! stripes first, in their order); give every database without a record a
//! provisional one (`0 of 1`, what `seqd serve` on it alone would write) to
//! learn its identity and refuse one database given twice; walk every
//! stripe's rows by name a page at a time ([`MergeWalk`]), creating missing
//! rows at `M` and raising lower ones to `M`; last, write each database's
//! record as stripe `i` of N. Until that last step no server accepts the
//! new set (its records disagree), and the old set's records still say
//! what they said.

use std::sync::Arc;

use super::audit::MergeWalk;
use super::bind::{at_url, distinct_records, refuse, same_database, stripe_count, url_at};
use super::layout::{StripeLayout, DEFAULT_BLOCK};
use super::record::{new_database_id, StripeRecord};
use crate::domain::{IdOrdering, NewSequence, SeqName};
use crate::store::stand_in::StandIn;
use crate::store::{SequencePatch, SequenceRow, Store, StoreError};

/// What init did (or, in a dry run, would do) on one stripe.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StripeInit {
    /// The database's record before init.
    pub before: Option<StripeRecord>,
    /// Rows created (names it lacked), at the highest `max_id` of the name.
    pub created: u64,
    /// Rows whose `max_id` was raised to the highest of the name.
    pub raised: u64,
    /// Dry run only: seqd's schema is not (fully) there; the run would
    /// migrate it first.
    pub unmigrated: bool,
}

/// What init did, per stripe in the order of the URLs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitReport {
    /// The stripes of the new set.
    pub count: u32,
    /// Its block size.
    pub block: i64,
    /// Nothing was written.
    pub dry_run: bool,
    /// Names seen on any stripe.
    pub names: u64,
    /// Sequences whose rows said `ordering = 'global'`, which needs one
    /// database: set to `instance` on every stripe (in a dry run, would be).
    pub made_instance: Vec<SeqName>,
    /// Per stripe.
    pub stripes: Vec<StripeInit>,
}

/// Turns the databases of `urls` (`stores[i]` on `urls[i]`; migrated,
/// unless `dry_run`) into stripes 0..N of one set with blocks of `block`
/// IDs (default: the existing set's block, else [`DEFAULT_BLOCK`]). See the
/// module docs for the steps and why they are safe. With `dry_run`, reads
/// only and reports what it would do.
///
/// Refused ([`StoreError::Migration`], nothing written but provisional
/// records) when a database is given twice, when the existing stripes of a
/// set are not the first URLs in their order, or when fewer URLs than the
/// existing set's stripes are given (stripes cannot be removed); refused
/// with nothing written at all, dry run or not, when any database holds a
/// serial sequence (stripes serve none).
pub async fn init_stripes(
    stores: &[Arc<dyn Store>],
    urls: &[String],
    block: Option<i64>,
    dry_run: bool,
) -> Result<InitReport, StoreError> {
    let count = stripe_count(stores, urls)?;
    let (records, walked, unmigrated) = read_all(stores, urls, dry_run).await?;
    let block = block.unwrap_or_else(|| existing_block(&records, count));
    StripeLayout::new(0, count, block).map_err(|e| StoreError::Config(e.to_string()))?;
    check_existing(&records, urls, count)?;
    refuse_serial_sequences(&walked).await?;
    if !dry_run {
        claim_identities(stores, urls, &records).await?;
    }
    let mut stripes: Vec<StripeInit> = records
        .iter()
        .zip(unmigrated)
        .map(|(before, unmigrated)| StripeInit {
            before: before.clone(),
            unmigrated,
            ..StripeInit::default()
        })
        .collect();
    let (names, made_instance) = level_rows(&walked, &mut stripes, dry_run).await?;
    if !dry_run {
        // The set keeps the identity of its first stripe's record, if it
        // has one: an interrupted init, run again, writes the same.
        let set_id = records[0]
            .as_ref()
            .and_then(|r| r.set_id.clone())
            .unwrap_or_else(new_database_id);
        for (i, store) in stores.iter().enumerate() {
            let record = StripeRecord::new(i as u32, count, block).in_set(set_id.clone());
            store
                .put_stripe_record(&record, true)
                .await
                .map_err(|e| at_url(urls, i, e))?;
        }
    }
    Ok(InitReport {
        count,
        block,
        dry_run,
        names,
        made_instance,
        stripes,
    })
}

/// Every store's record, the stores to walk (a dry run walks an empty
/// stand-in for a database without seqd's tables), and which databases a
/// dry run found unmigrated.
async fn read_all(
    stores: &[Arc<dyn Store>],
    urls: &[String],
    dry_run: bool,
) -> Result<(Vec<Option<StripeRecord>>, Vec<Arc<dyn Store>>, Vec<bool>), StoreError> {
    let (mut records, mut walked, mut unmigrated) = (Vec::new(), Vec::new(), Vec::new());
    for (i, store) in stores.iter().enumerate() {
        let ready = !dry_run || store.check_schema().await.is_ok();
        let record = match store.stripe_record().await {
            Ok(r) => r,
            Err(StoreError::Migration(_)) if !ready => None,
            Err(e) => return Err(at_url(urls, i, e)),
        };
        let readable = ready || store.list_page(None, None, 1).await.is_ok();
        records.push(record);
        walked.push(if readable {
            store.clone()
        } else {
            Arc::new(StandIn::empty(store.backend())) as Arc<dyn Store>
        });
        unmigrated.push(!ready);
    }
    Ok((records, walked, unmigrated))
}

/// The block an existing set uses: that of a record of several stripes
/// (the old set's first, else one of the target count), else
/// [`DEFAULT_BLOCK`] (a single database's block means nothing).
fn existing_block(records: &[Option<StripeRecord>], count: u32) -> i64 {
    let multi = || records.iter().flatten().filter(|r| r.count > 1);
    multi()
        .find(|r| r.count != count)
        .or_else(|| multi().next())
        .map_or(DEFAULT_BLOCK, |r| r.block)
}

/// Checks the records before anything is written: no database twice;
/// records of several stripes (an old set, or the new one from an earlier
/// run) at their own position; one old set at most, of no more stripes
/// than given, all of whose stripes come first. Records of one stripe
/// (single databases) may stand anywhere: their rows are merged by the
/// raise like any other.
fn check_existing(
    records: &[Option<StripeRecord>],
    urls: &[String],
    count: u32,
) -> Result<(), StoreError> {
    let present = distinct_records(records, urls)?;
    let multi: Vec<&(usize, &StripeRecord)> = present.iter().filter(|(_, r)| r.count > 1).collect();
    for (i, r) in &multi {
        if r.index as usize != *i {
            return Err(refuse(format!(
                "URL #{} is {}, not stripe {}: give the existing stripes first, in the order \
                 they were set up, then the new databases",
                i + 1,
                r.describe(),
                i + 1
            )));
        }
    }
    let mut sets = multi.iter().filter_map(|(_, r)| r.set_id.as_deref());
    if let Some(first) = sets.next() {
        if sets.any(|s| s != first) {
            return Err(refuse(
                "the databases hold stripes of different sets (their records carry different \
                 set identities): init joins one existing set (and single databases) into one \
                 new set"
                    .into(),
            ));
        }
    }
    let old: Vec<u32> = multi
        .iter()
        .map(|(_, r)| r.count)
        .filter(|c| *c != count)
        .collect();
    let Some(&old_count) = old.first() else {
        return Ok(());
    };
    if old.iter().any(|c| *c != old_count) {
        return Err(refuse(
            "the databases hold stripes of different sets: init joins one existing set \
             (and single databases) into one new set"
                .into(),
        ));
    }
    if old_count > count {
        return Err(refuse(format!(
            "the databases were set up as {old_count} stripes; {count} URLs given: stripes \
             cannot be removed (every stripe of the set must be given, in its order)"
        )));
    }
    for (i, record) in records.iter().enumerate().take(old_count as usize) {
        if record.as_ref().is_none_or(|r| r.count == 1) {
            return Err(refuse(format!(
                "{} is not stripe {} of the existing set of {old_count}: give the existing \
                 stripes first, in the order they were set up, then the new databases",
                url_at(urls, i),
                i + 1
            )));
        }
    }
    Ok(())
}

/// Refuses ([`StoreError::Migration`]) databases that hold a serial
/// sequence, naming them: a serial sequence's period counters live on one
/// database, and a striped instance serves no serial sequence (it would
/// answer 503 for it while ready). Read only: a dry run is refused too.
async fn refuse_serial_sequences(stores: &[Arc<dyn Store>]) -> Result<(), StoreError> {
    let mut walk = MergeWalk::new(stores);
    let mut serial = Vec::new();
    while let Some((name, rows)) = walk.next().await? {
        if rows.iter().flatten().any(|r| r.serial.is_some()) {
            serial.push(name.to_string());
        }
    }
    if serial.is_empty() {
        return Ok(());
    }
    let shown = serial
        .iter()
        .take(20)
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>();
    let more = match serial.len().saturating_sub(20) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    Err(refuse(format!(
        "stripes serve no serial sequence (the counters of its periods live on one database): \
         {}{more} issue serial numbers; delete them, or keep them on a database of their own, \
         before striping (docs/high-availability.md)",
        shown.join(", ")
    )))
}

/// Gives each database without a record a provisional `0 of 1` (what
/// `seqd serve` on it alone writes), reading back which database each URL
/// reaches: one database given twice is refused before any row changes.
async fn claim_identities(
    stores: &[Arc<dyn Store>],
    urls: &[String],
    records: &[Option<StripeRecord>],
) -> Result<(), StoreError> {
    let mut ids: Vec<String> = Vec::with_capacity(stores.len());
    for (i, (store, record)) in stores.iter().zip(records).enumerate() {
        let id = match record {
            Some(r) => r.database_id.clone(),
            None => {
                store
                    .put_stripe_record(&StripeRecord::new(0, 1, DEFAULT_BLOCK), false)
                    .await
                    .map_err(|e| at_url(urls, i, e))?
                    .database_id
            }
        };
        if let Some(j) = ids.iter().position(|seen| *seen == id) {
            return Err(same_database(urls, i, j));
        }
        ids.push(id);
    }
    Ok(())
}

/// Walks every stripe's rows by name and brings each name's rows to its
/// highest `max_id` on every stripe (creating missing rows there), counting
/// per stripe; a name whose rows say `global` ordering (one database only)
/// gets `instance` everywhere. Writes nothing in a dry run. Returns the
/// names seen and those made `instance`.
async fn level_rows(
    stores: &[Arc<dyn Store>],
    stripes: &mut [StripeInit],
    dry_run: bool,
) -> Result<(u64, Vec<SeqName>), StoreError> {
    let mut walk = MergeWalk::new(stores);
    let mut names = 0;
    let mut made_instance = Vec::new();
    while let Some((name, rows)) = walk.next().await? {
        names += 1;
        let Some(mut model) = rows.iter().flatten().next().cloned() else {
            continue;
        };
        if rows
            .iter()
            .flatten()
            .any(|r| r.ordering == IdOrdering::Global)
        {
            made_instance.push(name.clone());
            model.ordering = IdOrdering::Instance;
            if !dry_run {
                let patch = SequencePatch {
                    ordering: Some(IdOrdering::Instance),
                    ..SequencePatch::default()
                };
                for (store, row) in stores.iter().zip(&rows) {
                    if row
                        .as_ref()
                        .is_some_and(|r| r.ordering == IdOrdering::Global)
                    {
                        store.update(&name, &patch).await?;
                    }
                }
            }
        }
        let top = rows.iter().flatten().map(|r| r.max_id).max().unwrap_or(0);
        for ((store, row), stripe) in stores.iter().zip(&rows).zip(stripes.iter_mut()) {
            match row {
                None => {
                    stripe.created += 1;
                    if !dry_run {
                        create_at(store.as_ref(), &model, top).await?;
                    }
                }
                Some(row) if row.max_id < top => {
                    stripe.raised += 1;
                    if !dry_run {
                        raise_to(store.as_ref(), &name, row.max_id, top).await?;
                    }
                }
                Some(_) => {}
            }
        }
    }
    Ok((names, made_instance))
}

/// Creates `model`'s sequence (its step and description) on `store` with
/// `max_id` at least `top`; a row that appeared meanwhile is raised instead.
async fn create_at(store: &dyn Store, model: &SequenceRow, top: i64) -> Result<(), StoreError> {
    if let Some(problem) = &model.problem {
        // Copied without its settings it would become a plain sequence.
        return Err(StoreError::Config(format!(
            "sequence '{}' has settings seqd cannot use ({problem}): repair its row first",
            model.name
        )));
    }
    let new = NewSequence {
        name: model.name.clone(),
        // `start - 1` is the row's max_id; a top at i64::MAX or below 0 is
        // reached by the raise below.
        start: top.clamp(0, i64::MAX - 1) + 1,
        step: model.step,
        description: model.description.clone(),
        ordering: model.ordering,
        serial: model.serial.clone(),
    };
    let created = match store.create(&new).await {
        Ok(row) => row.max_id,
        Err(StoreError::AlreadyExists) => match store.get(&model.name).await? {
            Some(row) => row.max_id,
            None => return Err(StoreError::NotFound),
        },
        Err(e) => return Err(e),
    };
    raise_to(store, &model.name, created, top).await
}

/// Raises `name`'s `max_id` on `store` from `seen` to at least `top`, by
/// compare-and-set: a row that moved meanwhile is read again, and one
/// already at or above `top` is left as it is.
async fn raise_to(
    store: &dyn Store,
    name: &SeqName,
    seen: i64,
    top: i64,
) -> Result<(), StoreError> {
    let mut current = seen;
    while current < top {
        if store.compare_and_set_max_id(name, current, top).await? {
            return Ok(());
        }
        current = match store.get(name).await? {
            Some(row) => row.max_id,
            None => return Err(StoreError::NotFound),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::{Catalog, StripeRecords};

    fn urls(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("sqlite://db{i}.db")).collect()
    }

    fn memory(rows: &[(&str, i64)]) -> Arc<MemoryStore> {
        let s = MemoryStore::new();
        for (n, max_id) in rows {
            s.insert(n, *max_id, 10);
        }
        Arc::new(s)
    }

    fn dyns(stores: &[Arc<MemoryStore>]) -> Vec<Arc<dyn Store>> {
        stores.iter().map(|s| s.clone() as Arc<dyn Store>).collect()
    }

    /// A global sequence of a single database (global ordering needs one
    /// database) is switched to instance on every stripe and reported; a
    /// dry run reports it and writes nothing.
    #[tokio::test]
    async fn global_rows_become_instance_and_are_reported() {
        let single = memory(&[("g", 40), ("p", 7)]);
        single.set_ordering("g", IdOrdering::Global);
        let stores = [single, memory(&[])];
        let dry = init_stripes(&dyns(&stores), &urls(2), Some(100), true)
            .await
            .unwrap();
        assert_eq!(dry.made_instance, vec![SeqName::parse("g").unwrap()]);
        let row = stores[0]
            .get(&SeqName::parse("g").unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.ordering, IdOrdering::Global, "a dry run writes nothing");
        let report = init_stripes(&dyns(&stores), &urls(2), Some(100), false)
            .await
            .unwrap();
        assert_eq!(report.made_instance, vec![SeqName::parse("g").unwrap()]);
        for s in &stores {
            for name in ["g", "p"] {
                let row = s
                    .get(&SeqName::parse(name).unwrap())
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(row.ordering, IdOrdering::Instance, "{name}");
            }
            assert_eq!(s.max_id("g"), Some(40));
        }
    }

    /// A serial sequence on any database refuses init, dry run or not,
    /// naming it, and nothing is written: no record, no row on another
    /// stripe.
    #[tokio::test]
    async fn a_serial_sequence_refuses_init_dry_run_too_writing_nothing() {
        use crate::domain::serial::SerialSettings;
        use crate::domain::serial::{Overflow, Reset};
        let single = memory(&[("p", 7)]);
        let settings = SerialSettings::new(
            "RC{yyyy}{MM}{dd}-{seq:05}",
            Reset::Day,
            "UTC",
            Overflow::Refuse,
        )
        .unwrap();
        let receipt = NewSequence {
            name: SeqName::parse("receipt").unwrap(),
            start: 1,
            step: 100,
            description: String::new(),
            ordering: IdOrdering::Instance,
            serial: Some(settings),
        };
        single.create(&receipt).await.unwrap();
        let stores = [single, memory(&[])];
        for dry_run in [true, false] {
            let refused = init_stripes(&dyns(&stores), &urls(2), Some(100), dry_run).await;
            match refused {
                Err(StoreError::Migration(m)) => assert!(m.contains("'receipt'"), "{m}"),
                other => panic!("dry run {dry_run}: {other:?}"),
            }
        }
        for s in &stores {
            assert_eq!(
                s.stripe_record().await.unwrap(),
                None,
                "a record was written"
            );
        }
        assert_eq!(stores[1].max_id("p"), None, "a row was copied");
    }

    #[tokio::test]
    async fn a_single_database_becomes_stripe_0_and_new_ones_start_at_its_max() {
        let stores = [memory(&[("a", 500), ("b", 7)]), memory(&[]), memory(&[])];
        let report = init_stripes(&dyns(&stores), &urls(3), Some(100), false)
            .await
            .unwrap();
        assert_eq!((report.count, report.block, report.names), (3, 100, 2));
        let counts: Vec<(u64, u64)> = report
            .stripes
            .iter()
            .map(|s| (s.created, s.raised))
            .collect();
        assert_eq!(counts, vec![(0, 0), (2, 0), (2, 0)]);
        for (i, s) in stores.iter().enumerate() {
            assert_eq!((s.max_id("a"), s.max_id("b")), (Some(500), Some(7)));
            let r = s.stripe_record().await.unwrap().unwrap();
            assert_eq!((r.index, r.count, r.block), (i as u32, 3, 100));
        }
        // Again: nothing to do, same records.
        let again = init_stripes(&dyns(&stores), &urls(3), None, false)
            .await
            .unwrap();
        assert_eq!(again.block, 100, "the set's block is kept");
        assert!(again
            .stripes
            .iter()
            .all(|s| s.created == 0 && s.raised == 0));
    }

    #[tokio::test]
    async fn a_dry_run_writes_nothing_and_counts_what_it_would_do() {
        let stores = [memory(&[("a", 500)]), memory(&[("a", 900), ("c", 1)])];
        let report = init_stripes(&dyns(&stores), &urls(2), None, true)
            .await
            .unwrap();
        let counts: Vec<(u64, u64)> = report
            .stripes
            .iter()
            .map(|s| (s.created, s.raised))
            .collect();
        assert_eq!(counts, vec![(1, 1), (0, 0)]);
        assert_eq!(stores[0].max_id("a"), Some(500));
        assert_eq!(stores[0].max_id("c"), None);
        assert!(stores[0].stripe_record().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn one_database_given_twice_is_refused_before_any_row_changes() {
        let a = memory(&[("a", 5)]);
        let b = memory(&[("a", 9)]);
        let stores: Vec<Arc<dyn Store>> = vec![a.clone(), b.clone(), a.clone()];
        match init_stripes(&stores, &urls(3), None, false).await {
            Err(StoreError::Migration(m)) => {
                assert!(m.contains("URL #3 and URL #1 are the same database"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(a.max_id("a"), Some(5));
    }

    #[tokio::test]
    async fn an_old_set_must_come_first_in_order_and_whole() {
        let stores = [memory(&[]), memory(&[]), memory(&[])];
        init_stripes(&dyns(&stores[..2]), &urls(2), Some(10), false)
            .await
            .unwrap();
        let swapped: Vec<Arc<dyn Store>> =
            vec![stores[1].clone(), stores[0].clone(), stores[2].clone()];
        assert!(init_stripes(&swapped, &urls(3), None, false).await.is_err());
        let late: Vec<Arc<dyn Store>> =
            vec![stores[2].clone(), stores[0].clone(), stores[1].clone()];
        assert!(init_stripes(&late, &urls(3), None, false).await.is_err());
        assert!(init_stripes(&dyns(&stores[..1]), &urls(1), None, false)
            .await
            .is_err());
        init_stripes(&dyns(&stores), &urls(3), None, false)
            .await
            .unwrap();
        let r = stores[2].stripe_record().await.unwrap().unwrap();
        assert_eq!((r.index, r.count, r.block), (2, 3, 10));
    }
}
