//! An in-memory [`Store`](crate::store::Store) for the allocator's tests, benchmarks and simulations.
//!
//! It keeps rows in a mutex-guarded map and offers fault injection: make
//! reservations fail, slow them down, or hold them at a gate until released.
//! It also counts reservations and the most that were ever in flight at once
//! for one name, so tests can assert "at most one fetch per sequence".

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use tokio::sync::watch;

use super::bump::{check_bump_request, plan_bump};
use super::PeriodRow;
use super::StripeRecord;
use super::{BumpMode, Bumped};
use super::{
    Reservation, Reserved, SequencePage, SequencePatch, SequenceRow, StoreError, TokenRow, Tokens,
};
use crate::domain::{
    is_period_counter, period_rows_range, IdOrdering, NamePrefix, NewSequence, SeqName,
};
use crate::store::{Catalog, Schema, Segments, StripeRecords};
use std::ops::Bound::{Excluded, Included};

/// A page of the catalog, as read.
type Page = Result<SequencePage, StoreError>;

/// What a bump changed, or why it did not.
type Bumps = Result<Vec<Bumped>, StoreError>;

/// Per-name fault settings and counters.
#[derive(Debug, Default, Clone)]
struct Faults {
    fail_remaining: u64,
    fail_always: bool,
    delay: Duration,
    in_flight: u64,
    max_in_flight: u64,
    reserves: u64,
}

/// An in-memory store with fault injection. See the module docs.
#[derive(Debug)]
pub struct MemoryStore {
    rows: Mutex<BTreeMap<SeqName, SequenceRow>>,
    faults: Mutex<HashMap<String, Faults>>,
    gate: watch::Sender<bool>,
    total_reserves: AtomicU64,
    stripe: Mutex<Option<StripeRecord>>,
    tokens: Mutex<BTreeMap<String, TokenRow>>,
    /// [`Segments::group_limit`]: 1 (no grouping) unless a test sets it.
    group_limit: AtomicUsize,
    /// The size of every group reserved, in order.
    groups: Mutex<Vec<usize>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store with the gate open.
    pub fn new() -> Self {
        MemoryStore {
            rows: Mutex::new(BTreeMap::new()),
            faults: Mutex::new(HashMap::new()),
            gate: watch::Sender::new(true),
            total_reserves: AtomicU64::new(0),
            stripe: Mutex::new(None),
            tokens: Mutex::new(BTreeMap::new()),
            group_limit: AtomicUsize::new(1),
            groups: Mutex::new(Vec::new()),
        }
    }

    /// Lets the allocator group up to `limit` first reservations in one
    /// [`Segments::reserve_group`] (1: none), as a SQL store does.
    pub fn set_group_limit(&self, limit: usize) {
        self.group_limit.store(limit, Ordering::Relaxed);
    }

    /// The size of every group [`Segments::reserve_group`] was asked, in
    /// order.
    pub fn groups(&self) -> Vec<usize> {
        self.groups.lock().unwrap().clone()
    }

    /// Sets a row's ordering directly (like an operator's SQL `UPDATE`).
    pub fn set_ordering(&self, name: &str, ordering: crate::domain::IdOrdering) {
        if let Some(row) = self.rows.lock().unwrap().get_mut(name) {
            row.ordering = ordering;
        }
    }

    /// Inserts a row directly (like an operator's SQL `INSERT`), replacing any.
    pub fn insert(&self, name: &str, max_id: i64, step: i64) {
        let name = SeqName::parse(name).expect("valid name");
        let now = Utc::now();
        let row = SequenceRow {
            name: name.clone(),
            max_id,
            step,
            description: String::new(),
            created_at: now,
            updated_at: now,
            ordering: crate::domain::IdOrdering::Instance,
            counter_start: 1,
            serial: None,
            problem: None,
        };
        self.rows.lock().unwrap().insert(name, row);
    }

    /// Marks a row's serial settings as unusable (like an operator's SQL
    /// writing a `format` that does not parse): it keeps a format, so it
    /// hands out no plain range, and reads show `problem`.
    pub fn set_problem(&self, name: &str, problem: super::RowProblem) {
        if let Some(row) = self.rows.lock().unwrap().get_mut(name) {
            row.serial = None;
            row.problem = Some(problem);
        }
    }

    /// Deletes a row directly (like an operator's SQL `DELETE`).
    pub fn remove(&self, name: &str) {
        self.rows.lock().unwrap().remove(name);
    }

    /// Makes the next `n` reservations of `name` fail as if the database were down.
    pub fn fail_next(&self, name: &str, n: u64) {
        self.with_faults(name, |f| f.fail_remaining = n);
    }

    /// Makes every reservation of `name` fail (or stops doing so).
    pub fn set_failing(&self, name: &str, failing: bool) {
        self.with_faults(name, |f| f.fail_always = failing);
    }

    /// Delays every reservation of `name` by `delay` (tokio time, so a paused
    /// clock in tests skips it).
    pub fn set_delay(&self, name: &str, delay: Duration) {
        self.with_faults(name, |f| f.delay = delay);
    }

    /// Closes the gate: every reservation waits until [`MemoryStore::open_gate`].
    pub fn close_gate(&self) {
        self.gate.send_replace(false);
    }

    /// Opens the gate, letting held reservations proceed.
    pub fn open_gate(&self) {
        self.gate.send_replace(true);
    }

    /// Reservations of `name` attempted so far (failed ones included).
    pub fn reserves(&self, name: &str) -> u64 {
        self.faults_of(name).reserves
    }

    /// Reservations attempted so far over all names.
    pub fn total_reserves(&self) -> u64 {
        self.total_reserves.load(Ordering::Relaxed)
    }

    /// The most reservations of `name` that were ever in flight at once.
    pub fn max_in_flight(&self, name: &str) -> u64 {
        self.faults_of(name).max_in_flight
    }

    /// The row's current `max_id`, if it exists.
    pub fn max_id(&self, name: &str) -> Option<i64> {
        self.rows.lock().unwrap().get(name).map(|r| r.max_id)
    }

    // Keyed by the row's name as stored: a sequence's or a period counter's.
    fn faults_of(&self, name: &str) -> Faults {
        self.faults
            .lock()
            .unwrap()
            .get(name)
            .cloned()
            .unwrap_or_default()
    }

    fn with_faults<R>(&self, name: &str, f: impl FnOnce(&mut Faults) -> R) -> R {
        let mut faults = self.faults.lock().unwrap();
        f(faults.entry(name.to_owned()).or_default())
    }

    /// Runs the injected faults of a reservation of `name`: counts it, waits
    /// at the gate, sleeps the delay, fails if set to. The guard returned
    /// keeps it counted as in flight until dropped.
    async fn faulted<'a>(&'a self, name: &'a str) -> Result<InFlight<'a>, StoreError> {
        let (fail, delay) = self.enter(name);
        let guard = InFlight(self, name);
        let mut gate = self.gate.subscribe();
        let _ = gate.wait_for(|open| *open).await;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if fail {
            return Err(StoreError::Unavailable("injected failure".into()));
        }
        Ok(guard)
    }

    /// Enters a reservation: counts it and returns (should_fail, delay).
    fn enter(&self, name: &str) -> (bool, Duration) {
        self.total_reserves.fetch_add(1, Ordering::Relaxed);
        self.with_faults(name, |f| {
            f.reserves += 1;
            f.in_flight += 1;
            f.max_in_flight = f.max_in_flight.max(f.in_flight);
            let fail = f.fail_always || f.fail_remaining > 0;
            f.fail_remaining = f.fail_remaining.saturating_sub(1);
            (fail, f.delay)
        })
    }

    /// Exactly `n` IDs of `name`, never past `cap` (of a `lease`: never of
    /// a global row), as the databases' exact reserving statements.
    fn exact_now(
        &self,
        name: &SeqName,
        n: i64,
        cap: i64,
        lease: bool,
    ) -> Result<Reservation, StoreError> {
        let mut rows = self.rows.lock().unwrap();
        let row = plain_row(&mut rows, name)?;
        if lease && row.ordering == IdOrdering::Global {
            return Err(StoreError::Global);
        }
        if n < 1 || cap.checked_sub(n).is_none_or(|limit| row.max_id > limit) {
            return Err(StoreError::Exhausted);
        }
        row.max_id += n;
        row.updated_at = Utc::now();
        Ok(Reservation {
            max_id: row.max_id,
            size: n,
            row_step: row.step,
            ordering: row.ordering,
            regressed: false,
        })
    }

    fn reserve_now(&self, name: &SeqName, min_size: i64) -> Result<Reservation, StoreError> {
        let mut rows = self.rows.lock().unwrap();
        let row = plain_row(&mut rows, name)?;
        let wanted = row.step.max(min_size);
        let size = if row.max_id <= i64::MAX - wanted {
            wanted
        } else if row.max_id <= i64::MAX - row.step {
            row.step
        } else {
            return Err(StoreError::Exhausted);
        };
        row.max_id += size;
        row.updated_at = Utc::now();
        Ok(Reservation {
            max_id: row.max_id,
            size,
            row_step: row.step,
            ordering: row.ordering,
            regressed: false,
        })
    }
}

/// The row a reservation of `name` changes: [`StoreError::NotFound`]
/// without one, [`StoreError::Serial`] when it issues serial numbers (as
/// the databases' `AND format IS NULL`).
fn plain_row<'a>(
    rows: &'a mut BTreeMap<SeqName, SequenceRow>,
    name: &SeqName,
) -> Result<&'a mut SequenceRow, StoreError> {
    match rows.get_mut(name) {
        None => Err(StoreError::NotFound),
        Some(row) if row.serial.is_some() || row.problem.is_some() => Err(StoreError::Serial),
        Some(row) => Ok(row),
    }
}

/// Decrements the in-flight count when a reservation ends, even if cancelled.
struct InFlight<'a>(&'a MemoryStore, &'a str);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.with_faults(self.1, |f| f.in_flight -= 1);
    }
}

#[async_trait]
impl Segments for MemoryStore {
    async fn reserve(&self, name: &SeqName, min_size: i64) -> Result<Reservation, StoreError> {
        let _in_flight = self.faulted(name.as_str()).await?;
        self.reserve_now(name, min_size)
    }

    fn group_limit(&self) -> usize {
        self.group_limit.load(Ordering::Relaxed)
    }

    /// Each ask reserved in turn, as alone (faults, delays and the gate
    /// apply to each); the group's size recorded.
    async fn reserve_group(&self, asks: &[(SeqName, i64)]) -> Vec<Reserved> {
        self.groups.lock().unwrap().push(asks.len());
        crate::store::reserve_each(self, asks).await
    }

    async fn reserve_within(&self, name: &SeqName, n: i64, cap: i64) -> Reserved {
        let _in_flight = self.faulted(name.as_str()).await?;
        self.exact_now(name, n, cap, false)
    }

    async fn reserve_lease(&self, name: &SeqName, n: i64, cap: i64) -> Reserved {
        let _in_flight = self.faulted(name.as_str()).await?;
        self.exact_now(name, n, cap, true)
    }

    async fn compare_and_set_max_id(
        &self,
        name: &SeqName,
        expected: i64,
        new: i64,
    ) -> Result<bool, StoreError> {
        // The statement that reserves on a stripe: faults and the gate apply,
        // and it counts as a reservation.
        let _in_flight = self.faulted(name.as_str()).await?;
        let mut rows = self.rows.lock().unwrap();
        let row = rows.get_mut(name).ok_or(StoreError::NotFound)?;
        if row.max_id != expected {
            return Ok(false);
        }
        row.max_id = new;
        row.updated_at = Utc::now();
        Ok(true)
    }
}

#[async_trait]
impl Catalog for MemoryStore {
    async fn create(&self, seq: &NewSequence) -> Result<SequenceRow, StoreError> {
        let mut rows = self.rows.lock().unwrap();
        if rows.contains_key(&seq.name) {
            return Err(StoreError::AlreadyExists);
        }
        let now = Utc::now();
        let row = SequenceRow {
            name: seq.name.clone(),
            max_id: seq.start - 1,
            step: seq.step,
            description: seq.description.clone(),
            created_at: now,
            updated_at: now,
            ordering: seq.ordering,
            counter_start: seq.start,
            serial: seq.serial.clone(),
            problem: None,
        };
        rows.insert(seq.name.clone(), row.clone());
        Ok(row)
    }

    async fn get(&self, name: &SeqName) -> Result<Option<SequenceRow>, StoreError> {
        Ok(self.rows.lock().unwrap().get(name).cloned())
    }

    async fn settings_of(&self, names: &[SeqName]) -> Result<Vec<SequenceRow>, StoreError> {
        let rows = self.rows.lock().unwrap();
        Ok(names.iter().filter_map(|n| rows.get(n).cloned()).collect())
    }

    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        let rows = self.rows.lock().unwrap();
        Ok(rows
            .values()
            .filter(|r| !is_period_counter(r.name.as_str()))
            .cloned()
            .collect())
    }

    async fn list_page(&self, p: Option<&NamePrefix>, after: Option<&SeqName>, limit: u32) -> Page {
        let prefix = p;
        // The same range as the databases read (a map's range panics on an
        // empty one, hence the check).
        let range = super::sql::page_range(prefix, after, limit);
        if range.is_empty() {
            return Ok(SequencePage::from_read(Vec::new(), limit, Some));
        }
        let lower = if range.inclusive {
            Included(range.lower)
        } else {
            Excluded(range.lower)
        };
        let rows = self.rows.lock().unwrap();
        let read: Vec<SequenceRow> = rows
            .range::<str, _>((lower, Excluded(&*range.upper)))
            .filter(|(name, _)| !is_period_counter(name.as_str()))
            .map(|(_, row)| row.clone())
            .take(range.read as usize)
            .collect();
        Ok(SequencePage::from_read(read, limit, Some))
    }

    async fn update(
        &self,
        name: &SeqName,
        patch: &SequencePatch,
    ) -> Result<SequenceRow, StoreError> {
        let mut rows = self.rows.lock().unwrap();
        let row = rows.get_mut(name).ok_or(StoreError::NotFound)?;
        if let Some(step) = patch.step {
            row.step = step;
        }
        if let Some(d) = &patch.description {
            row.description = d.clone();
        }
        if let Some(o) = patch.ordering {
            row.ordering = o;
        }
        if let Some(serial) = &patch.serial {
            row.serial = serial.clone();
            row.problem = None;
        }
        row.updated_at = Utc::now();
        let row = row.clone();
        // Step and ordering reach the period counters, as the databases'
        // transaction does.
        if patch.step.is_some() || patch.ordering.is_some() {
            let (low, high) = period_rows_range(name);
            for (_, counter) in
                rows.range_mut::<str, _>((Included(low.as_str()), Excluded(high.as_str())))
            {
                counter.step = row.step;
                counter.ordering = row.ordering;
                counter.updated_at = row.updated_at;
            }
        }
        Ok(row)
    }

    async fn create_period(&self, parent: &SeqName, key: &str) -> Result<bool, StoreError> {
        let mut rows = self.rows.lock().unwrap();
        let row = rows.get(parent).ok_or(StoreError::NotFound)?;
        let name = parent.period_counter(key);
        if rows.contains_key(&name) {
            return Ok(false);
        }
        let now = Utc::now();
        let counter = SequenceRow {
            name: name.clone(),
            max_id: row.counter_start - 1,
            step: row.step,
            description: String::new(),
            created_at: now,
            updated_at: now,
            ordering: row.ordering,
            counter_start: row.counter_start,
            serial: None,
            problem: None,
        };
        rows.insert(name, counter);
        Ok(true)
    }

    async fn list_periods(&self, parent: &SeqName) -> Result<Vec<PeriodRow>, StoreError> {
        let rows = self.rows.lock().unwrap();
        let (low, high) = period_rows_range(parent);
        Ok(rows
            .range::<str, _>((Included(low.as_str()), Excluded(high.as_str())))
            .map(|(name, row)| PeriodRow {
                key: name.as_str()[low.len()..].to_owned(),
                max_id: row.max_id,
                created_at: row.created_at,
                updated_at: row.updated_at,
            })
            .collect())
    }

    async fn delete_periods(&self, parent: &SeqName, keys: &[String]) -> Result<u64, StoreError> {
        let mut rows = self.rows.lock().unwrap();
        let mut deleted = 0;
        for key in keys {
            if rows.remove(parent.period_counter(key).as_str()).is_some() {
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    async fn bump(&self, names: Option<&[SeqName]>, by: i64, mode: BumpMode) -> Bumps {
        check_bump_request(names, by)?;
        // One lock over the read and the writes: atomic like a transaction.
        let mut rows = self.rows.lock().unwrap();
        let selected: Vec<&SequenceRow> = match names {
            // Each named row and its period counters, as the databases read them.
            Some(names) => names
                .iter()
                .flat_map(|n| {
                    let (low, high) = period_rows_range(n);
                    let counters = rows
                        .range::<str, _>((Included(low.as_str()), Excluded(high.as_str())))
                        .map(|(_, row)| row)
                        .collect::<Vec<_>>();
                    rows.get(n).into_iter().chain(counters)
                })
                .collect(),
            None => rows.values().collect(),
        };
        let read = selected
            .iter()
            .map(|r| (r.name.to_string(), r.max_id))
            .collect();
        let plan = plan_bump(names, read, by)?;
        if mode == BumpMode::Apply {
            let now = Utc::now();
            for bumped in &plan {
                let row = rows
                    .get_mut(bumped.name.as_str())
                    .expect("planned from a row");
                row.max_id = bumped.new_max_id;
                row.updated_at = now;
            }
        }
        Ok(plan)
    }
}

#[async_trait]
impl Schema for MemoryStore {
    async fn migrate(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn backend(&self) -> &'static str {
        "memory"
    }
}

#[async_trait]
impl StripeRecords for MemoryStore {
    async fn stripe_record(&self) -> Result<Option<StripeRecord>, StoreError> {
        Ok(self.stripe.lock().unwrap().clone())
    }

    async fn put_stripe_record(
        &self,
        record: &StripeRecord,
        replace: bool,
    ) -> Result<StripeRecord, StoreError> {
        record.layout()?;
        let mut stripe = self.stripe.lock().unwrap();
        match stripe.as_mut() {
            None => *stripe = Some(record.clone()),
            Some(kept) if replace => {
                kept.index = record.index;
                kept.count = record.count;
                kept.block = record.block;
                kept.set_id = record.set_id.clone();
            }
            Some(_) => {}
        }
        Ok(stripe.clone().expect("written above"))
    }

    async fn join_stripe_set(&self, set_id: &str) -> Result<Option<StripeRecord>, StoreError> {
        let mut stripe = self.stripe.lock().unwrap();
        if let Some(r) = stripe.as_mut() {
            r.set_id.get_or_insert_with(|| set_id.to_owned());
        }
        Ok(stripe.clone())
    }

    async fn drop_stripe_record(&self, database_id: &str) -> Result<bool, StoreError> {
        let mut stripe = self.stripe.lock().unwrap();
        if stripe
            .as_ref()
            .is_some_and(|r| r.database_id == database_id)
        {
            *stripe = None;
            return Ok(true);
        }
        Ok(false)
    }
}

#[async_trait]
impl Tokens for MemoryStore {
    async fn token_rows(&self) -> Result<Vec<TokenRow>, StoreError> {
        Ok(self.tokens.lock().unwrap().values().cloned().collect())
    }

    async fn insert_token(&self, row: &TokenRow) -> Result<(), StoreError> {
        let mut tokens = self.tokens.lock().unwrap();
        if tokens.contains_key(&row.label) || tokens.values().any(|t| t.hash == row.hash) {
            return Err(StoreError::AlreadyExists);
        }
        tokens.insert(row.label.clone(), row.clone());
        Ok(())
    }

    async fn revoke_token(&self, label: &str, at: i64) -> Result<bool, StoreError> {
        let mut tokens = self.tokens.lock().unwrap();
        let row = tokens.get_mut(label).ok_or(StoreError::NotFound)?;
        Ok(row.revoked_at.is_none() && row.revoked_at.replace(at).is_none())
    }
}
