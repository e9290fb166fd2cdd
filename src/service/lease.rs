//! Segments held by clients (leases): a range of a plain sequence reserved
//! for one caller alone, and the give-back of its unused rest
//! (docs/design.md, "Leases").
//!
//! A lease is one reservation of the row, an atomic update of exactly its
//! size, so it never overlaps what any instance serves or another lease
//! holds. The reserving statement itself refuses what may not be leased: a
//! serial row ([`StoreError::Serial`]) and a global one
//! ([`StoreError::Global`]: its IDs are handed out in order at request
//! time) change nothing and are refused `not_leasable`, so a refused lease
//! consumes no ID. A lease without a size reads the row's step first. No
//! lease reaches `i64::MAX`, so its `end` (one past its last ID) is a
//! 64-bit integer.
//!
//! A give-back lowers the row's `max_id` from the lease's last ID, by a
//! compare-and-set, only while the lease is still the top of the row. A
//! caller could name a range it does not hold whose top is an instance's
//! segment or another caller's lease (ranges are easy to guess); lowering
//! the row under it would hand those IDs out twice. So each lease carries a
//! random key, answered only to its holder, and an instance gives back only
//! the last lease of each name it issued itself (`Issued`), presented with
//! its key; anything else is answered `false` and its IDs stay unused (a
//! gap, never a duplicate).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{Presented, Service, ServiceError, Want};
use crate::domain::{IdOrdering, SeqName};
use crate::store::StoreError;

/// `--max-lease`'s default: the largest lease a caller may ask for.
pub const DEFAULT_MAX_LEASE: i64 = 1_000_000;

/// At most this many names are remembered with their last lease; past it,
/// the oldest half is forgotten (their leases are no longer given back).
const REMEMBERED: usize = 100_000;

/// A range of IDs of `name` reserved for one caller: `[start, end)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The sequence.
    pub name: SeqName,
    /// The first ID of the range.
    pub start: i64,
    /// One past the last ID of the range.
    pub end: i64,
    /// What proves the caller holds it when it gives the rest back: 32 hex
    /// digits of 16 random bytes.
    pub key: String,
}

/// The unused rest of a lease `[start, end)`: `[next, end)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRest {
    /// The lease's first ID.
    pub start: i64,
    /// One past the lease's last ID.
    pub end: i64,
    /// The first ID the caller did not use.
    pub next: i64,
    /// The lease's key, as answered.
    pub key: String,
}

/// A lease as remembered: start, end, key, and a number that orders the
/// leases (for forgetting the oldest).
type Remembered = (i64, i64, String, u64);

/// The last lease this instance issued of each name.
#[derive(Default)]
pub(crate) struct Issued {
    last: Mutex<HashMap<SeqName, Remembered>>,
    count: std::sync::atomic::AtomicU64,
}

impl Issued {
    fn remember(&self, lease: &Lease) {
        let n = self
            .count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut last = self.last.lock().expect("lease map");
        if last.len() >= REMEMBERED && !last.contains_key(&lease.name) {
            let mut ages: Vec<u64> = last.values().map(|v| v.3).collect();
            let (_, median, _) = ages.select_nth_unstable(last.len() / 2);
            let median = *median;
            last.retain(|_, v| v.3 > median);
        }
        let remembered = (lease.start, lease.end, lease.key.clone(), n);
        last.insert(lease.name.clone(), remembered);
    }

    /// Whether `rest` is of the last lease of `name` issued here, with its
    /// key; it is forgotten once it matched (a range is given back once).
    fn take(&self, name: &SeqName, rest: &LeaseRest) -> bool {
        let mut last = self.last.lock().expect("lease map");
        match last.get(name) {
            Some((s, e, key, _)) if (*s, *e) == (rest.start, rest.end) && *key == rest.key => {
                last.remove(name);
                true
            }
            _ => false,
        }
    }
}

impl Service {
    /// The largest lease a caller may ask for (`--max-lease`).
    pub fn max_lease(&self) -> i64 {
        self.max_lease
    }

    /// This service with `--max-lease` (at least 1).
    pub fn with_max_lease(mut self, max_lease: i64) -> Self {
        self.max_lease = max_lease.max(1);
        self
    }

    /// Reserves `size` IDs of plain sequence `name` (its row's step when
    /// `None`, at most [`Service::max_lease`]) for the caller alone,
    /// committed before the answer.
    pub async fn lease(
        &self,
        who: Presented<'_>,
        seq: &SeqName,
        size: Option<i64>,
    ) -> Result<Lease, ServiceError> {
        let caller = self.access.authorize(who, Want::Draw(seq.into()))?;
        if let Some(n) = size {
            if !(1..=self.max_lease).contains(&n) {
                return Err(ServiceError::InvalidRequest(format!(
                    "size must be a whole number from 1 to {} (--max-lease), not {n}",
                    self.max_lease
                )));
            }
        }
        let seq = seq.clone();
        let n = match size {
            Some(n) => n,
            // The row's step, read first: a step changed in between only
            // makes this lease the old step long.
            None => self.lease_default(&seq).await?,
        };
        // Never past `i64::MAX - 1`, so that `end`, one past the last ID,
        // is a 64-bit integer too.
        let r = match self.store.reserve_lease(&seq, n, i64::MAX - 1).await {
            Ok(r) => r,
            Err(StoreError::Serial) => return Err(ServiceError::NotLeasable(seq, "serial")),
            Err(StoreError::Global) => return Err(ServiceError::NotLeasable(seq, "global")),
            Err(e) => return Err(ServiceError::from_store(&seq, e)),
        };
        let lease = Lease {
            name: seq,
            start: r.first(),
            end: r.max_id + 1,
            key: new_key(),
        };
        self.issued.remember(&lease);
        caller.drew(&self.access, r.size as u64);
        Ok(lease)
    }

    /// The size of a lease asked without one: the row's step, at most
    /// [`Service::max_lease`]. A serial or global row is refused here
    /// already (the reserving statement refuses them too).
    async fn lease_default(&self, seq: &SeqName) -> Result<i64, ServiceError> {
        let row = self.get(seq).await?;
        if row.serial.is_some() {
            return Err(ServiceError::NotLeasable(seq.clone(), "serial"));
        }
        if row.ordering == IdOrdering::Global {
            return Err(ServiceError::NotLeasable(seq.clone(), "global"));
        }
        Ok(row.step.clamp(1, self.max_lease))
    }

    /// Gives back `[rest.next, rest.end)` of a lease of `name` that this
    /// instance issued, if it is still the top of the row: `true` when the
    /// row went down, `false` when something was reserved since, the lease
    /// was not issued here (or is not a lease at all, `next` outside it
    /// included), its key is wrong, or nothing is left to return.
    pub async fn return_lease(
        &self,
        who: Presented<'_>,
        seq: &SeqName,
        rest: LeaseRest,
    ) -> Result<bool, ServiceError> {
        self.access.authorize(who, Want::Draw(seq.into()))?;
        let (start, end, next) = (rest.start, rest.end, rest.next);
        if start < 1 || end < 2 || next < 1 {
            return Err(ServiceError::InvalidRequest(format!(
                "a lease's rest has start >= 1, end >= 2 and next >= 1, not start {start}, end \
                 {end}, next {next}"
            )));
        }
        // Not the rest of any lease (next outside it, an empty or inverted
        // range), nothing left, or not issued here: `false`, for a sequence
        // that exists (a missing one is `NotFound`, as on every route).
        let rest_of_a_lease = start < end && start <= next && next <= end;
        if !rest_of_a_lease || next == end || !self.issued.take(seq, &rest) {
            return self.get(seq).await.map(|_| false);
        }
        self.store
            .give_back(seq, end - 1, next - 1)
            .await
            .map_err(|e| ServiceError::from_store(seq, e))
    }
}

/// A lease's key: 16 random bytes from the operating system, in hex.
fn new_key() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random generator failed");
    hex::encode(bytes)
}

/// A shared `Issued`.
pub(crate) fn issued() -> Arc<Issued> {
    Arc::new(Issued::default())
}
