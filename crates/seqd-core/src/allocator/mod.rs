//! The allocator core: per-sequence double buffers of ID segments.
//!
//! It knows no SQL and no HTTP: it talks to any [`Segments`] store and reads time from
//! an injected [`Clock`]. Usable on its own, in process:
//!
//! ```
//! use std::sync::atomic::{AtomicI64, Ordering};
//! use std::sync::Arc;
//! use seqd_core::allocator::{Allocator, AllocatorConfig};
//! use seqd_core::domain::{Count, IdOrdering, SeqName};
//! use seqd_core::store::{Reservation, Segments, StoreError};
//!
//! /// One sequence's `max_id` in memory, in steps of 1000: what a table
//! /// row (or a lease from a server) gives the allocator.
//! struct Counter(AtomicI64);
//!
//! #[async_trait::async_trait]
//! impl Segments for Counter {
//!     async fn reserve(&self, _: &SeqName, min_size: i64) -> Result<Reservation, StoreError> {
//!         let size = min_size.max(1000);
//!         let max_id = self.0.fetch_add(size, Ordering::SeqCst) + size;
//!         Ok(Reservation { max_id, size, row_step: 1000, ordering: IdOrdering::Instance, regressed: false })
//!     }
//!     async fn compare_and_set_max_id(&self, _: &SeqName, old: i64, new: i64) -> Result<bool, StoreError> {
//!         Ok(self.0.compare_exchange(old, new, Ordering::SeqCst, Ordering::SeqCst).is_ok())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), seqd_core::allocator::AllocError> {
//! let ids = Allocator::new(Arc::new(Counter(AtomicI64::new(0))), AllocatorConfig::default());
//! let order = SeqName::parse("order").unwrap();
//! assert_eq!(ids.next(&order).await?, 1);
//! let batch = ids.batch(&order, Count::new(3).unwrap()).await?;
//! assert_eq!(batch.ids().collect::<Vec<_>>(), vec![2, 3, 4]);
//! # Ok(()) }
//! ```
//!
//! # How it works
//!
//! Each sequence has a [`buffer::SeqBuffer`]: the current segment, served by
//! an atomic cursor, and the next one, fetched in the background once 10% of
//! the current is used (one fetch in flight per sequence at most). Requests that
//! find both empty wait on a `Notify` for the fetch, up to the wait timeout.
//! The name -> buffer map is a concurrent hash map (`live::LiveMap`):
//! lookups take no lock and write nothing shared; the first use of a
//! sequence inserts one entry (no copy of the map).

use std::collections::HashMap;

/// Name maps hash with foldhash: much faster than SipHash on short names, and
/// only names that exist in the database (or wait in `pending`) are keys.
type Map<V> = HashMap<SeqName, V, foldhash::fast::RandomState>;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::domain::{Count, SeqName, SeqNameRef};
use crate::store::Segments;

pub mod buffer;
pub mod clock;
pub mod double;
pub mod failure;
pub mod group;
mod live;
pub mod segment;
pub mod step;
pub mod sync;

pub use buffer::{BufferSnapshot, CounterBounds, SegmentView, SeqStats, Totals};

/// Counter: IDs given back to the database at graceful shutdown
/// ([`Allocator::give_back`]).
pub const GIVEN_BACK_METRIC: &str = "seqd_ids_given_back_total";

/// What [`Allocator::give_back`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GiveBackReport {
    /// Sequences whose row took back their unused IDs.
    pub sequences: u64,
    /// IDs given back over all of them.
    pub ids: u64,
    /// Sequences left alone because a fetch was in flight.
    pub fetch_in_flight: u64,
    /// Sequences left alone because another instance reserved since (the
    /// compare-and-set found another `max_id`).
    pub reserved_since: u64,
    /// Sequences whose give-back failed (database error).
    pub failed: u64,
    /// Sequences not given back within the bound.
    pub unfinished: u64,
}
pub use clock::{Clock, ManualClock, SystemClock};
pub use failure::FetchFailure;
pub use segment::IdRange;
pub use step::{FixedStep, LeafStep, RateStep, StepInput, StepPolicy};

use buffer::SeqBuffer;
use live::LiveMap;

/// Tuning of the allocator. See docs/design.md, "Configuration".
#[derive(Debug, Clone)]
pub struct AllocatorConfig {
    /// How long a segment should last at the measured rate (`--segment-target`).
    pub segment_target: Duration,
    /// Largest adapted step (`--max-step`).
    pub max_step: i64,
    /// Longest a request waits for a segment (`--wait-timeout`).
    pub wait_timeout: Duration,
    /// Fraction of the current segment used before the next is fetched.
    pub prefetch_ratio: f64,
    /// How long "not found" / "exhausted" answers from the store are
    /// remembered before the store is asked again.
    pub negative_ttl: Duration,
    /// Longest one fetch may take before it is abandoned and retried, so a
    /// fetch hanging in the database (a locked row) cannot hold a pooled
    /// connection for long. An abandoned fetch can only leave a gap.
    pub fetch_timeout: Duration,
    /// First retry delay after a failed fetch (doubles per failure).
    pub retry_backoff_min: Duration,
    /// Longest retry delay after failed fetches.
    pub retry_backoff_max: Duration,
}

impl Default for AllocatorConfig {
    fn default() -> Self {
        AllocatorConfig {
            segment_target: Duration::from_secs(600),
            max_step: 1_000_000,
            wait_timeout: Duration::from_secs(3),
            prefetch_ratio: 0.1,
            negative_ttl: Duration::from_secs(1),
            fetch_timeout: Duration::from_secs(5),
            retry_backoff_min: Duration::from_millis(20),
            retry_backoff_max: Duration::from_secs(2),
        }
    }
}

/// Why the allocator could not hand out IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// No sequence has this name.
    #[error("sequence not found")]
    NotFound,
    /// The sequence reached `i64::MAX`.
    #[error("sequence exhausted")]
    Exhausted,
    /// The sequence issues serial numbers: its IDs are counters of its
    /// periods, served by seqd's serial numbers (`seqd::serial::Serials`), not by this call.
    #[error("sequence issues serial numbers")]
    Serial,
    /// A run asked of [`Allocator::run`] is longer than the segments
    /// this instance fetches of the sequence.
    #[error("a run longer than the sequence's segments ({segment} IDs)")]
    RunTooLong {
        /// The length of the segment that could not hold the run.
        segment: u64,
    },
    /// Both segments are empty and no new one arrived within the wait timeout.
    #[error("no IDs available in time (storage failing: {storage_failing})")]
    Unavailable {
        /// True when the last fetch attempt failed (rather than being slow).
        storage_failing: bool,
    },
}

/// What the buffers share: the store, the clock, the policy, the settings.
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn Segments>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) policy: Arc<dyn StepPolicy>,
    pub(crate) config: AllocatorConfig,
    /// The queue of grouped first reservations, when the store groups them.
    pub(crate) group: Option<Arc<group::Grouper>>,
    /// Every buffer's fetches and waits added up.
    pub(crate) tally: buffer::Tally,
}

/// IDs of one batch: one or more runs of consecutive IDs, in increasing order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// The runs, each above the previous.
    pub ranges: Vec<IdRange>,
}

impl Batch {
    /// Every ID of the batch in increasing order.
    pub fn ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.ranges.iter().flat_map(|r| r.iter())
    }

    /// Number of IDs.
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|r| r.len()).sum()
    }

    /// True when the batch holds no ID.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// Hands out IDs for any number of sequences. Cheap to clone (shared).
#[derive(Clone)]
pub struct Allocator {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    /// Live sequences (first fetch succeeded). Read without locks.
    live: LiveMap,
    /// Sequences whose first fetch has not succeeded yet, each with the
    /// callers waiting on it; also the writers' lock for `live`. An entry
    /// goes when its last caller does, whatever the outcome (found, missing,
    /// unavailable, the caller gone): its fetch task then ends.
    pending: Mutex<Map<Pending>>,
    /// Names recently found missing, with when.
    missing: Mutex<Map<Duration>>,
    /// Buffers whose callers all left while their fetch was in flight; only
    /// that fetch keeps them alive. A new caller adopts one instead of
    /// starting a second fetch for the name (lock order: `pending`, then this).
    draining: Mutex<Map<Weak<SeqBuffer>>>,
}

/// Entries of `draining` past which the dead ones are swept.
const DRAINING_SWEEP: usize = 1_024;

/// Most names remembered as missing; beyond it the oldest entries go.
const MISSING_CAP: usize = 10_000;

/// Most names loading at once; past it a request for one more unknown name
/// is answered "unavailable" at once (each entry is held by a request in
/// flight, so this is only reached by a flood of first uses).
const PENDING_CAP: usize = 10_000;

/// A name being loaded and how many callers wait on it.
struct Pending {
    buf: Arc<SeqBuffer>,
    callers: usize,
}

/// How many names this instance holds in memory, by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NamesInMemory {
    /// Sequences being served (their first fetch succeeded).
    pub live: usize,
    /// Names being loaded by requests in flight.
    pub pending: usize,
    /// Names remembered as missing (the negative cache).
    pub missing: usize,
}

/// One caller's hold on a pending entry: released on drop, whatever ended
/// the call (an answer, an error, or the caller's future being dropped).
struct PendingHold<'a> {
    inner: &'a Inner,
    buf: Arc<SeqBuffer>,
}

impl Drop for PendingHold<'_> {
    fn drop(&mut self) {
        let mut pending = self.inner.pending.lock().unwrap();
        let name = self.buf.name();
        if let Some(entry) = pending.get_mut(name) {
            if Arc::ptr_eq(&entry.buf, &self.buf) {
                entry.callers -= 1;
                if entry.callers == 0 {
                    pending.remove(name);
                    // A fetch still in flight holds the buffer until it ends;
                    // remember it so a new caller joins that fetch.
                    let mut draining = self.inner.draining.lock().unwrap();
                    if draining.len() >= DRAINING_SWEEP {
                        draining.retain(|_, b| b.strong_count() > 0);
                    }
                    draining.insert(name.clone(), Arc::downgrade(&self.buf));
                }
            }
        }
    }
}

impl Allocator {
    /// An allocator on the real clock with the rate-based step policy.
    pub fn new(store: Arc<dyn Segments>, config: AllocatorConfig) -> Self {
        let policy = RateStep {
            target: config.segment_target,
            max_step: config.max_step,
        };
        Self::with_parts(
            store,
            config,
            Arc::new(SystemClock::default()),
            Arc::new(policy),
        )
    }

    /// An allocator with an explicit clock and step policy (tests, simulations).
    pub fn with_parts(
        store: Arc<dyn Segments>,
        config: AllocatorConfig,
        clock: Arc<dyn Clock>,
        policy: Arc<dyn StepPolicy>,
    ) -> Self {
        let group = group::Grouper::over(&store, config.fetch_timeout);
        let shared = Arc::new(Shared {
            store,
            clock,
            policy,
            config,
            group,
            tally: buffer::Tally::default(),
        });
        Allocator {
            inner: Arc::new(Inner {
                shared,
                live: LiveMap::new(),
                pending: Mutex::new(Map::default()),
                missing: Mutex::new(Map::default()),
                draining: Mutex::new(Map::default()),
            }),
        }
    }

    /// The settings in force.
    pub fn config(&self) -> &AllocatorConfig {
        &self.inner.shared.config
    }

    /// The next ID of `name` (a `&SeqName` or a borrowed [`SeqNameRef`]; the
    /// name is only copied when this instance has not served it yet).
    pub async fn next<'n>(&self, name: impl Into<SeqNameRef<'n>>) -> Result<i64, AllocError> {
        let name = name.into();
        if let Some(id) = self.next_now(name) {
            return Ok(id);
        }
        // Boxed so the slow path's state does not bloat this future: callers
        // move it on every call, and the fast path above is the common case.
        Box::pin(self.next_slow(name)).await
    }

    /// The next ID of `name` if it can be taken from memory without
    /// waiting: the fast path of [`Allocator::next`], for callers that
    /// answer at once when it succeeds and only otherwise build the
    /// future of `next` (`None`: the name is not live, its segments are
    /// empty, or it is serial; `next` then says which).
    pub fn next_now<'n>(&self, name: impl Into<SeqNameRef<'n>>) -> Option<i64> {
        let name = name.into();
        let fast = self.inner.live.with(name.as_str(), |buf| buf.take_fast(1));
        fast.flatten().map(|r| r.first)
    }

    async fn next_slow(&self, name: SeqNameRef<'_>) -> Result<i64, AllocError> {
        let mut out = Vec::with_capacity(1);
        self.take_into(name, 1, None, &mut out).await?;
        Ok(out[0].first)
    }

    /// `count` consecutive-in-order IDs of `name`, strictly increasing.
    pub async fn batch<'n>(
        &self,
        name: impl Into<SeqNameRef<'n>>,
        count: Count,
    ) -> Result<Batch, AllocError> {
        let mut ranges = Vec::with_capacity(1);
        self.take_into(name.into(), u64::from(count.get()), None, &mut ranges)
            .await?;
        Ok(Batch { ranges })
    }

    /// `count` consecutive IDs of `name` as one run, from one segment: the
    /// rest of a segment too short for it stays unused (a gap). In the
    /// instance's order, as every draw. [`AllocError::RunTooLong`] when the
    /// segment the run would come from is shorter than `count`: refused
    /// having taken nothing (on a name not served here yet, after the load
    /// of its first segment, which serves the next draws).
    pub async fn run<'n>(
        &self,
        name: impl Into<SeqNameRef<'n>>,
        count: Count,
    ) -> Result<IdRange, AllocError> {
        let name = name.into();
        let n = u64::from(count.get());
        if let Some(buf) = self.inner.live.get(name.as_str()) {
            return buf.take_run(n).await;
        }
        self.cold(name, None, |buf| async move { buf.take_run(n).await })
            .await
    }

    /// Claims `n` IDs of `name` and appends their runs to `out`; a buffer
    /// made here for a period counter (`counter`: its bounds, and whether it
    /// starts in global order) keeps within its bounds.
    async fn take_into(
        &self,
        name: SeqNameRef<'_>,
        n: u64,
        counter: Option<(CounterBounds, bool)>,
        out: &mut Vec<IdRange>,
    ) -> Result<(), AllocError> {
        if let Some(buf) = self.inner.live.get(name.as_str()) {
            // A plain name's batch skips the counter's check (one load).
            return match counter {
                Some(_) => buf.take_counter(n, out).await,
                None => buf.take(n, out).await,
            };
        }
        self.cold(name, counter, |buf| async move {
            buf.take_counter(n, out).await
        })
        .await
    }

    /// `n` counters of a serial sequence's period (the row `name`, made by
    /// [`SeqName::period_counter`]), appended to `out` as runs: like
    /// [`Allocator::batch`], but a buffer made here keeps within `bounds`,
    /// and starts with global ordering when `global` (docs/design.md,
    /// "Serial numbers").
    pub async fn take_counter(
        &self,
        name: &SeqName,
        n: u64,
        bounds: CounterBounds,
        global: bool,
        out: &mut Vec<IdRange>,
    ) -> Result<(), AllocError> {
        self.take_into(name.into(), n, Some((bounds, global)), out)
            .await
    }

    /// Drops a period counter whose period is over: its buffer leaves the
    /// map (its unused counters are a gap) and goes when the requests that
    /// hold it are answered. It is not sealed: a request that picked the
    /// old period just before is still served from it (a counter of that
    /// period, printed with that period's date).
    pub fn retire(&self, name: &SeqName) {
        let _writers = self.inner.pending.lock().unwrap();
        self.inner.live.remove(name.as_str());
    }

    /// Marks `name` as issuing serial numbers or not in this instance at
    /// once (after a PATCH answered here, a change read by the settings
    /// refresh, or a serial sequence found plain again).
    pub fn set_serial(&self, name: &SeqName, serial: bool) {
        self.inner
            .live
            .with(name.as_str(), |buf| buf.set_serial(serial));
    }

    /// The allocator's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.shared.clock
    }

    /// First use of a name in this instance: `draw` from its buffer, which
    /// loads it (one fetch shared by all concurrent callers), then make it
    /// live, or remember that it is missing.
    async fn cold<T, F, Fut>(
        &self,
        name: SeqNameRef<'_>,
        counter: Option<(CounterBounds, bool)>,
        draw: F,
    ) -> Result<T, AllocError>
    where
        F: FnOnce(Arc<SeqBuffer>) -> Fut,
        Fut: std::future::Future<Output = Result<T, AllocError>>,
    {
        if self.recently_missing(name.as_str()) {
            return Err(AllocError::NotFound);
        }
        let hold = {
            let mut pending = self.inner.pending.lock().unwrap();
            if let Some(buf) = self.inner.live.get(name.as_str()) {
                drop(pending);
                return draw(buf).await;
            }
            let buf = if let Some(entry) = pending.get_mut(name.as_str()) {
                entry.callers += 1;
                entry.buf.clone()
            } else {
                // Again under the lock: a load that just found the name missing
                // records that before it leaves `pending` (`forget_pending`), so
                // a caller that checked above, before that, does not query again.
                if self.recently_missing(name.as_str()) {
                    return Err(AllocError::NotFound);
                }
                if pending.len() >= PENDING_CAP {
                    return Err(AllocError::Unavailable {
                        storage_failing: false,
                    });
                }
                // A buffer whose fetch is still in flight is adopted, so a
                // name never has two fetches at once.
                let draining = self.inner.draining.lock().unwrap().remove(name.as_str());
                let adopted = draining.and_then(|b| b.upgrade());
                // The name's only copy on this path (none for an adopted
                // buffer): a name seen before is found above, and a missing
                // one is answered from `missing`.
                let buf = adopted.unwrap_or_else(|| {
                    let shared = self.inner.shared.clone();
                    Arc::new(match counter {
                        Some((bounds, global)) => {
                            SeqBuffer::counter(name.to_owned(), shared, bounds, global)
                        }
                        None => SeqBuffer::new(name.to_owned(), shared),
                    })
                });
                let entry = Pending {
                    buf: buf.clone(),
                    callers: 1,
                };
                pending.insert(buf.name().clone(), entry);
                buf
            };
            PendingHold {
                inner: &self.inner,
                buf,
            }
        };
        let buf = &hold.buf;
        let result = draw(buf.clone()).await;
        match &result {
            // A serial sequence stays live, answering `Serial` from memory;
            // a refused run leaves its segments to the next draws.
            Ok(_) | Err(AllocError::Serial | AllocError::RunTooLong { .. }) => self.promote(buf),
            Err(AllocError::NotFound) => self.forget_pending(buf),
            Err(_) => {}
        }
        result
    }

    fn promote(&self, buf: &Arc<SeqBuffer>) {
        let mut pending = self.inner.pending.lock().unwrap();
        let is_pending = pending
            .get(buf.name())
            .is_some_and(|p| Arc::ptr_eq(&p.buf, buf));
        if !is_pending {
            return;
        }
        pending.remove(buf.name());
        // Under the `pending` lock: the only writer of `live`.
        self.inner.live.insert(buf.clone());
    }

    /// Records that `buf`'s name is missing, then drops `buf` from `pending`,
    /// both under the `pending` lock (lock order: `pending`, then `missing`).
    fn forget_pending(&self, buf: &Arc<SeqBuffer>) {
        let now = self.inner.shared.clock.now();
        let mut pending = self.inner.pending.lock().unwrap();
        self.record_missing(buf.name(), now);
        if pending
            .get(buf.name())
            .is_some_and(|p| Arc::ptr_eq(&p.buf, buf))
        {
            pending.remove(buf.name());
        }
    }

    fn record_missing(&self, name: &SeqName, now: Duration) {
        let mut missing = self.inner.missing.lock().unwrap();
        if missing.len() >= MISSING_CAP {
            let ttl = self.inner.shared.config.negative_ttl;
            missing.retain(|_, at| now.saturating_sub(*at) < ttl);
            if missing.len() >= MISSING_CAP {
                missing.clear();
            }
        }
        missing.insert(name.clone(), now);
    }

    fn recently_missing(&self, name: &str) -> bool {
        let missing = self.inner.missing.lock().unwrap();
        let ttl = self.inner.shared.config.negative_ttl;
        missing
            .get(name)
            .is_some_and(|at| self.inner.shared.clock.now().saturating_sub(*at) < ttl)
    }

    /// Forgets that `name` was missing (after it was created through this
    /// instance), so the next request looks it up at once.
    pub fn clear_missing(&self, name: &SeqName) {
        self.inner.missing.lock().unwrap().remove(name);
    }

    /// The highest ID this instance has reserved for `name`, if it served it.
    /// A sequence re-created under the same name must start above it.
    pub fn reserved_up_to(&self, name: &SeqName) -> Option<i64> {
        if let Some(hw) = self.inner.live.with(name.as_str(), |buf| buf.high_water()) {
            return hw;
        }
        self.inner
            .pending
            .lock()
            .unwrap()
            .get(name)
            .and_then(|p| p.buf.high_water())
    }

    /// How many names this instance holds in memory, by state.
    pub fn names_in_memory(&self) -> NamesInMemory {
        let pending = self.inner.pending.lock().unwrap().len();
        NamesInMemory {
            live: self.inner.live.len(),
            pending,
            missing: self.inner.missing.lock().unwrap().len(),
        }
    }

    /// The buffer state of one live sequence.
    pub fn snapshot(&self, name: &SeqName) -> Option<BufferSnapshot> {
        self.inner.live.with(name.as_str(), |b| b.snapshot())
    }

    /// What every sequence did since start, added up (five reads, however
    /// many sequences are live).
    pub fn totals(&self) -> Totals {
        self.inner.shared.tally.totals()
    }

    /// Calls `f` with the numbers of every live sequence, in no particular
    /// order, copying no name (what a scrape of `/metrics` reads).
    pub fn for_each_stats(&self, mut f: impl FnMut(&SeqName, &SeqStats)) {
        self.inner.live.for_each(|buf| f(buf.name(), &buf.stats()));
    }

    /// How many live sequences hold IDs in memory: those this instance can
    /// still serve without its database (the ride-through that `/readyz`
    /// keeps). A walk over the live sequences, each read as a scrape of
    /// `/metrics` reads it.
    pub fn sequences_holding_ids(&self) -> usize {
        let mut holding = 0;
        self.inner.live.for_each(|buf| {
            if buf.ids_available() > 0 {
                holding += 1;
            }
        });
        holding
    }

    /// Calls `f` with the name of every live sequence (period counters
    /// included), in no particular order, copying no name.
    pub fn for_each_name(&self, mut f: impl FnMut(&SeqName)) {
        self.inner.live.for_each(|buf| f(buf.name()));
    }

    /// Switches `name`'s ordering in this instance at once (after a PATCH
    /// answered here, or a change read by the settings refresh). A name not
    /// live here learns it at its first fetch.
    pub fn set_ordering(&self, name: &SeqName, ordering: crate::domain::IdOrdering) {
        self.inner
            .live
            .with(name.as_str(), |buf| buf.set_ordering(ordering));
    }

    /// Gives back the unused IDs of every live sequence, for a graceful
    /// shutdown: each buffer is sealed (it hands out no more IDs and starts
    /// no more fetches: call this last), and for each one with unused IDs
    /// at the top of what it reserved, one compare-and-set lowers the row's
    /// `max_id` from the top of that reservation to the last ID kept
    /// ([`Segments::give_back`]): it fails, changing nothing, when another
    /// instance reserved since. A sequence with a fetch in flight is left
    /// alone. At most `concurrency` at once, and none started after
    /// `bound`. docs/design.md, "Giving back at shutdown".
    pub async fn give_back(&self, concurrency: usize, bound: Duration) -> GiveBackReport {
        let mut report = GiveBackReport::default();
        let mut plans = Vec::new();
        self.inner.live.for_each(|buf| match buf.seal() {
            buffer::Sealed::FetchInFlight => report.fetch_in_flight += 1,
            buffer::Sealed::Nothing => {}
            buffer::Sealed::GiveBack { top, keep } => plans.push((buf.name().clone(), top, keep)),
        });
        let deadline = tokio::time::Instant::now() + bound;
        let permits = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
        let mut running = tokio::task::JoinSet::new();
        for (name, top, keep) in plans {
            let permit = tokio::select! {
                p = permits.clone().acquire_owned() => p.expect("never closed"),
                _ = tokio::time::sleep_until(deadline) => {
                    report.unfinished += 1;
                    continue;
                }
            };
            let store = self.inner.shared.store.clone();
            running.spawn(async move {
                let outcome =
                    tokio::time::timeout_at(deadline, store.give_back(&name, top, keep)).await;
                drop(permit);
                (name, top - keep, outcome)
            });
        }
        while let Some(joined) = running.join_next().await {
            let Ok((name, ids, outcome)) = joined else {
                report.failed += 1;
                continue;
            };
            match outcome {
                Ok(Ok(true)) => {
                    report.sequences += 1;
                    report.ids += ids as u64;
                }
                Ok(Ok(false)) => report.reserved_since += 1,
                Ok(Err(e)) => {
                    tracing::warn!(sequence = %name, error = %e, "giving back unused IDs failed");
                    report.failed += 1;
                }
                Err(_) => report.unfinished += 1,
            }
        }
        metrics::counter!(GIVEN_BACK_METRIC).increment(report.ids);
        report
    }

    /// The buffer state of every live sequence, ordered by name.
    pub fn snapshots(&self) -> Vec<BufferSnapshot> {
        let mut all = Vec::with_capacity(self.inner.live.len());
        self.inner.live.for_each(|b| all.push(b.snapshot()));
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }
}
