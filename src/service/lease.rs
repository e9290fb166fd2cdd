//! Segments held by clients (leases): a range of a plain sequence reserved
//! for one caller alone, and the give-back of its unused rest
//! (docs/design.md, "Leases").
//!
//! A lease is one reservation of the row, the same atomic step update an
//! instance's buffer makes, so it never overlaps what any instance serves
//! or another lease holds. The reservation itself says what the row is: a
//! serial row reserves nothing ([`StoreError::Serial`]), a global one comes
//! back with its ordering and is given back at once; both are refused
//! `not_leasable`, decided once, with no read before.
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
        let r = match self.store.reserve(&seq, size.unwrap_or(1)).await {
            Ok(r) => r,
            Err(StoreError::Serial) => return Err(ServiceError::NotLeasable(seq, "serial")),
            Err(e) => return Err(ServiceError::from_store(&seq, e)),
        };
        let start = r.max_id - r.size + 1;
        if r.ordering == IdOrdering::Global {
            // Served in order at request time: a range held by one caller
            // would break that order. Nothing handed out; what the row gave
            // goes back if it is still its top (else it is a gap).
            self.give_back_logged(&seq, r.max_id, start - 1).await;
            return Err(ServiceError::NotLeasable(seq, "global"));
        }
        let len = size.unwrap_or(r.size).min(r.size).min(self.max_lease);
        if len < r.size {
            // The row's step is larger than asked: the rest goes back.
            self.give_back_logged(&seq, r.max_id, start + len - 1).await;
        }
        let lease = Lease {
            name: seq,
            start,
            end: start + len,
            key: new_key(),
        };
        self.issued.remember(&lease);
        caller.drew(&self.access, len as u64);
        Ok(lease)
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
        // range): nothing issued here matches it.
        if !(start < end && start <= next && next <= end) {
            return Ok(false);
        }
        if next == end || !self.issued.take(seq, &rest) {
            return Ok(false);
        }
        self.store
            .give_back(seq, end - 1, next - 1)
            .await
            .map_err(|e| ServiceError::from_store(seq, e))
    }

    async fn give_back_logged(&self, name: &SeqName, top: i64, keep: i64) {
        if let Err(e) = self.store.give_back(name, top, keep).await {
            tracing::info!(sequence = %name, error = %e, from = top, to = keep, "a lease's unused IDs could not be given back; they stay unused");
        }
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
