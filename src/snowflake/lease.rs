//! Worker-ID leases: claiming a worker ID in the `workers` table, renewing
//! it, and handing the [`Generator`] the right to issue under it.
//!
//! # The scheme
//!
//! - **Claim.** Read the rows, pick a candidate ([`choose`]): this
//!   instance's own row, else an expired or released row whose stored
//!   timestamp is already past, else a worker ID with no row yet, else the
//!   expired row with the smallest stored timestamp. Take it with one atomic
//!   statement: an `INSERT` for a new ID, or a compare-and-set on the row
//!   exactly as read that also requires `lease_until < now` (or the row to be
//!   ours). Losing a race means re-reading and trying again (bounded).
//! - **Lease and bound in one write.** The claim writes
//!   `lease_until = now + ttl` and raises `last_timestamp` to at least
//!   `lease_until`; each renewal (every `ttl / 4`) does the same. So before
//!   the generator may use a time unit, an upper bound covering it is in the
//!   database.
//! - **Stop before expiry.** The generator issues only while the clock is
//!   before `lease_until - ttl / 3` (the safety margin), and only time units
//!   that end by the persisted bound. An instance whose renewals fail stops by
//!   itself, `ttl / 3` before any other instance may take its worker ID.
//!   A time unit of at most `ttl / 3 + 2 ms` is served at every instant
//!   before that point ([`LeaseConfig::largest_time_unit`]); start-up
//!   refuses longer units.
//! - **Fence on takeover and restart.** A new holder issues only timestamps
//!   after the row's `last_timestamp`. Every earlier holder only ever issued
//!   timestamps up to bounds it had written to that row first, and the
//!   compare-and-set guarantees the new holder read the latest of them. So
//!   even if two instances both believed they held a worker ID (clocks far
//!   apart), their timestamps could not overlap. A claim that gets no
//!   answer (an error or a timeout after the database applied it) keeps the
//!   row it read until it is settled: if the row turns up as this
//!   instance's own, it is installed behind that fence all the same; if it
//!   turns up changed by someone else, the claim was lost.
//! - **Release.** On graceful shutdown the generator stops, and the row gets
//!   `lease_until = 0` and the exact last timestamp used, so a restarted
//!   instance may take it at once. After a crash the row is free once the
//!   lease expires; by then the clock is past its bound.
//!
//! Time comes from the injected [`WallClock`]; every database call is bounded
//! by a timeout; the background task holds only a `Weak` reference and ends
//! when the [`Snowflake`] is dropped or shut down.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use super::generator::{Generator, GeneratorStatus, Grant, SnowflakeError};
use super::layout::Layout;
use crate::domain::clock::WallClock;
use crate::store::workers::{WorkerLeases, WorkerRow, MAX_OWNER_LEN};
use crate::store::StoreError;

/// Lease timing, derived from the lease time-to-live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    /// How long a claim or renewal holds the worker ID.
    pub ttl: Duration,
    /// How often the lease is renewed (`ttl / 4`).
    pub renew_every: Duration,
    /// Issuing stops this long before the lease ends (`ttl / 3`).
    pub margin: Duration,
    /// Longest one database call may take.
    pub op_timeout: Duration,
}

impl LeaseConfig {
    /// The timing for a lease of `ttl`.
    pub fn new(ttl: Duration) -> Self {
        LeaseConfig {
            ttl,
            renew_every: ttl / 4,
            margin: ttl / 3,
            op_timeout: (ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(5)),
        }
    }
}

impl LeaseConfig {
    /// The longest time unit this lease serves at every instant it allows
    /// issuing: the margin plus 2 ms (10.002 s for a 30 s lease).
    ///
    /// A grant issues only before its deadline, `lease_until - margin`
    /// (exclusive), and uses a unit only if the unit ends by the persisted
    /// bound, `lease_until` (inclusive). Units are aligned on the epoch, so
    /// one may begin at the last millisecond before the deadline; it ends
    /// `unit - 1` ms later, by the bound only if `unit <= margin + 2 ms`.
    /// That instant is reached whenever a renewal comes late: the keeper
    /// sleeps `renew_every` after each tick (so renewals always come a
    /// little later than `renew_every`), and a failed renewal leaves the
    /// grant running to its deadline. Up to this unit, issuing stops only at
    /// the deadline; beyond it, some instants of a valid lease are refused.
    pub fn largest_time_unit(&self) -> Duration {
        Duration::from_millis(self.margin.as_millis() as u64 + 2)
    }

    /// The shortest lease whose [`LeaseConfig::largest_time_unit`] is at
    /// least `unit` (a whole number of milliseconds).
    pub fn shortest_ttl_for(unit: Duration) -> Duration {
        unit.saturating_sub(Duration::from_millis(2)) * 3
    }
}

impl Default for LeaseConfig {
    /// A 30 s lease.
    fn default() -> Self {
        LeaseConfig::new(Duration::from_secs(30))
    }
}

/// What a claim would take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Candidate {
    /// An existing row, as read.
    Existing(WorkerRow),
    /// A worker ID that has no row yet.
    New(u32),
}

/// Picks the worker ID to claim among `rows` (those below `capacity`), at
/// `now`, for `owner`; `None` when every worker ID is leased by someone else.
pub fn choose(rows: &[WorkerRow], capacity: u32, owner: &str, now: i64) -> Option<Candidate> {
    if let Some(own) = rows
        .iter()
        .find(|r| r.owner == owner && r.worker_id < capacity)
    {
        return Some(Candidate::Existing(own.clone()));
    }
    let free = |r: &&WorkerRow| r.worker_id < capacity && r.lease_until < now;
    if let Some(r) = rows.iter().filter(free).find(|r| r.last_timestamp < now) {
        return Some(Candidate::Existing(r.clone()));
    }
    let mut used: Vec<u32> = rows
        .iter()
        .map(|r| r.worker_id)
        .filter(|w| *w < capacity)
        .collect();
    used.sort_unstable();
    let mut next = 0u32;
    for w in used {
        if w != next {
            break;
        }
        next += 1;
    }
    if next < capacity {
        return Some(Candidate::New(next));
    }
    rows.iter()
        .filter(free)
        .min_by_key(|r| (r.last_timestamp, r.worker_id))
        .cloned()
        .map(Candidate::Existing)
}

/// A fresh owner string for this process: `host/pid/random`, ASCII, at most
/// 64 characters.
pub fn new_owner() -> String {
    use std::hash::{BuildHasher, Hasher};
    let host: String = std::fs::read_to_string("/etc/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "host".into())
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .take(32)
        .collect();
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    let mut owner = format!(
        "{}/{}/{:016x}",
        if host.is_empty() { "host" } else { &host },
        std::process::id(),
        h.finish()
    );
    owner.truncate(MAX_OWNER_LEN);
    owner
}

/// What the lease side holds; guarded by an async mutex so that a renewal
/// and the shutdown's release never interleave.
#[derive(Debug, Default)]
struct Held {
    migrated: bool,
    worker: Option<u32>,
    failures: u32,
    /// Takeovers whose claim got no answer (failed or timed out), by worker
    /// ID: the row as that claim read it. Such a claim may have been applied,
    /// and then the row is found again as this instance's own: the previous
    /// holder's `last_timestamp` must still fence it.
    unanswered: BTreeMap<u32, WorkerRow>,
}

impl Held {
    /// Forgets the unanswered claims that `rows` (as just read) show lost:
    /// the row is neither `owner`'s nor still as the claim read it, so the
    /// claim's compare-and-set can never apply.
    fn settle(&mut self, rows: &[WorkerRow], owner: &str) {
        self.unanswered
            .retain(|w, seen| match rows.iter().find(|r| r.worker_id == *w) {
                Some(row) => row.owner == owner || row == seen,
                None => true,
            });
    }

    /// The worker ID `candidate` would give `owner`, and the floor to install
    /// it with: the previous holder's `last_timestamp` when the row is someone
    /// else's (remembered until the claim is settled), or that of an
    /// unanswered claim that made the row `owner`'s. `None`: a new worker ID,
    /// or a row nobody else held since this instance did.
    fn before_claim(&mut self, candidate: &Candidate, owner: &str) -> (u32, Option<i64>) {
        let worker = match candidate {
            Candidate::New(w) => *w,
            Candidate::Existing(seen) => {
                if seen.owner != owner {
                    self.unanswered.insert(seen.worker_id, seen.clone());
                }
                seen.worker_id
            }
        };
        (
            worker,
            self.unanswered.get(&worker).map(|r| r.last_timestamp),
        )
    }
}

struct Inner {
    generator: Generator,
    leases: Arc<dyn WorkerLeases>,
    config: LeaseConfig,
    owner: String,
    held: tokio::sync::Mutex<Held>,
    stop: Arc<Notify>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Wakes the background task so it ends now rather than at its next tick.
        self.stop.notify_one();
    }
}

/// Snowflake IDs for one instance: the generator plus its worker lease.
/// Clones share everything.
#[derive(Clone)]
pub struct Snowflake {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Snowflake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snowflake")
            .field("owner", &self.inner.owner)
            .field("config", &self.inner.config)
            .finish()
    }
}

/// What [`Snowflake::tick`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickOutcome {
    /// Claimed this worker ID.
    Claimed(u32),
    /// Renewed the lease of this worker ID.
    Renewed(u32),
    /// Every worker ID is leased by another instance.
    NoneFree,
    /// The lease of this worker ID was taken over; it is no longer used.
    Lost(u32),
    /// The database failed or timed out; the detail is in the log.
    Failed,
    /// Shut down: nothing done.
    Closed,
}

impl Snowflake {
    /// A generator on `layout` with its lease storage, without the
    /// background task: call [`Snowflake::tick`] to claim and renew (tests),
    /// or use [`Snowflake::started`].
    pub fn new(
        layout: Layout,
        tolerance: Duration,
        clock: Arc<dyn WallClock>,
        leases: Arc<dyn WorkerLeases>,
        config: LeaseConfig,
    ) -> Self {
        Snowflake {
            inner: Arc::new(Inner {
                generator: Generator::new(layout, clock, tolerance),
                leases,
                config,
                owner: new_owner(),
                held: tokio::sync::Mutex::new(Held::default()),
                stop: Arc::new(Notify::new()),
            }),
        }
    }

    /// Spawns the task that claims a worker ID and keeps it renewed, and
    /// returns the generator: `Snowflake::new(..).started()`. The task ends
    /// when every clone is dropped, or on [`Snowflake::shutdown`].
    pub fn started(self) -> Self {
        self.spawn_keeper();
        self
    }

    fn spawn_keeper(&self) {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let stop = self.inner.stop.clone();
        tokio::spawn(async move {
            loop {
                let delay = {
                    let Some(inner) = weak.upgrade() else { return };
                    let s = Snowflake { inner };
                    let outcome = s.tick().await;
                    if outcome == TickOutcome::Closed {
                        return;
                    }
                    s.delay_after(outcome).await
                };
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = stop.notified() => return,
                }
            }
        });
    }

    async fn delay_after(&self, outcome: TickOutcome) -> Duration {
        let every = self.inner.config.renew_every;
        match outcome {
            TickOutcome::Claimed(_)
            | TickOutcome::Renewed(_)
            | TickOutcome::NoneFree
            | TickOutcome::Closed => every,
            TickOutcome::Lost(_) => Duration::ZERO,
            TickOutcome::Failed => {
                let failures = self.inner.held.lock().await.failures.min(10);
                (Duration::from_millis(100) * 2u32.pow(failures)).min(every)
            }
        }
    }

    /// The owner string this instance writes in `workers`.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        self.inner.generator.layout()
    }

    /// The lease timing.
    pub fn config(&self) -> LeaseConfig {
        self.inner.config
    }

    /// The generator's counters and grant.
    pub fn status(&self) -> GeneratorStatus {
        self.inner.generator.status()
    }

    /// One ID.
    pub async fn next(&self) -> Result<i64, SnowflakeError> {
        self.inner.generator.next().await
    }

    /// `n` IDs, strictly increasing.
    pub async fn batch(&self, n: usize) -> Result<Vec<i64>, SnowflakeError> {
        self.inner.generator.batch(n).await
    }

    async fn bounded<T>(
        &self,
        what: &str,
        op: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Option<T> {
        match tokio::time::timeout(self.inner.config.op_timeout, op).await {
            Ok(Ok(v)) => Some(v),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "snowflake worker lease: {what} failed");
                None
            }
            Err(_) => {
                tracing::warn!(timeout = ?self.inner.config.op_timeout, "snowflake worker lease: {what} timed out");
                None
            }
        }
    }

    /// One step of the lease: renews the worker ID held, or claims one.
    pub async fn tick(&self) -> TickOutcome {
        let mut held = self.inner.held.lock().await;
        if self.inner.generator.is_closed() {
            return TickOutcome::Closed;
        }
        let outcome = self.tick_locked(&mut held).await;
        if outcome == TickOutcome::Failed {
            held.failures = held.failures.saturating_add(1);
        } else {
            held.failures = 0;
        }
        outcome
    }

    async fn tick_locked(&self, held: &mut Held) -> TickOutcome {
        let inner = &self.inner;
        if !held.migrated {
            if self
                .bounded("migrating the workers table", inner.leases.migrate())
                .await
                .is_none()
            {
                return TickOutcome::Failed;
            }
            held.migrated = true;
        }
        if let Some(w) = held.worker {
            let now = inner.generator.clock().now_ms();
            let until = now.saturating_add(inner.config.ttl.as_millis() as i64);
            match self
                .bounded("renewal", inner.leases.renew(w, &inner.owner, until))
                .await
            {
                Some(true) => {
                    inner.generator.extend(
                        w,
                        until - inner.config.margin.as_millis() as i64,
                        until,
                    );
                    return TickOutcome::Renewed(w);
                }
                Some(false) => {
                    inner.generator.revoke(w);
                    held.worker = None;
                    tracing::warn!(
                        worker_id = w,
                        "snowflake worker ID taken over by another instance; no longer used"
                    );
                    return TickOutcome::Lost(w);
                }
                None => return TickOutcome::Failed,
            }
        }
        self.claim(held).await
    }

    async fn claim(&self, held: &mut Held) -> TickOutcome {
        let inner = &self.inner;
        let capacity = inner.generator.layout().worker_count();
        for _ in 0..8 {
            let Some(rows) = self
                .bounded("reading workers", inner.leases.list(capacity))
                .await
            else {
                return TickOutcome::Failed;
            };
            held.settle(&rows, &inner.owner);
            let now = inner.generator.clock().now_ms();
            let Some(candidate) = choose(&rows, capacity, &inner.owner, now) else {
                tracing::warn!(
                    workers = capacity,
                    "no snowflake worker ID free: all are leased by other instances"
                );
                return TickOutcome::NoneFree;
            };
            let until = now.saturating_add(inner.config.ttl.as_millis() as i64);
            let (worker, floor) = held.before_claim(&candidate, &inner.owner);
            match self.take(candidate, until, now).await {
                // The claim may have been applied all the same: `held` keeps its floor.
                None => return TickOutcome::Failed,
                Some(false) => continue,
                Some(true) => {
                    self.install(held, worker, until, floor);
                    return TickOutcome::Claimed(worker);
                }
            }
        }
        tracing::warn!(
            "snowflake worker lease: lost 8 races for a worker ID in a row; retrying later"
        );
        TickOutcome::Failed
    }

    /// Sends the claim of `candidate` for a lease until `until`; `None` if
    /// its outcome is unknown (failed or timed out).
    async fn take(&self, candidate: Candidate, until: i64, now: i64) -> Option<bool> {
        let inner = &self.inner;
        match candidate {
            Candidate::New(w) => {
                let row = WorkerRow {
                    worker_id: w,
                    owner: inner.owner.clone(),
                    lease_until: until,
                    last_timestamp: until,
                };
                self.bounded("claim (insert)", inner.leases.insert(&row))
                    .await
            }
            Candidate::Existing(seen) => {
                let new = seen.claimed_by(&inner.owner, until, seen.last_timestamp.max(until));
                self.bounded("claim", inner.leases.claim(&seen, &new, now))
                    .await
            }
        }
    }

    /// Hands the generator the worker ID just claimed, leased until `until`,
    /// with the previous holders' `floor`.
    fn install(&self, held: &mut Held, worker: u32, until: i64, floor: Option<i64>) {
        let inner = &self.inner;
        let grant = Grant {
            worker_id: worker,
            issue_until_ms: until - inner.config.margin.as_millis() as i64,
            bound_ms: until,
        };
        inner.generator.install(grant, floor);
        held.worker = Some(worker);
        held.unanswered.remove(&worker);
        tracing::info!(
            worker_id = worker,
            owner = %inner.owner,
            lease_until = %super::layout::iso_ms(until),
            "snowflake worker ID leased"
        );
    }

    /// Stops issuing for good and releases the worker ID, writing the exact
    /// last timestamp used; bounded by the database call timeouts. Ends the
    /// background task.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        // Shutdown waits at most 1 s per step: an unreleased lease only
        // expires later, it never endangers uniqueness.
        let bound = inner.config.op_timeout.min(Duration::from_secs(1));
        let mut held = tokio::time::timeout(bound, inner.held.lock()).await.ok();
        let closed = inner.generator.close();
        inner.stop.notify_one();
        if let Some((w, last)) = closed {
            match tokio::time::timeout(bound, inner.leases.release(w, &inner.owner, last)).await {
                Ok(Ok(true)) => {
                    tracing::info!(worker_id = w, last_timestamp = %super::layout::iso_ms(last), "snowflake worker ID released")
                }
                Ok(Ok(false)) => tracing::warn!(
                    worker_id = w,
                    "snowflake worker ID was taken over before release"
                ),
                Ok(Err(e)) => {
                    tracing::warn!(worker_id = w, error = %e, "snowflake worker ID release failed; it expires by itself")
                }
                Err(_) => tracing::warn!(
                    worker_id = w,
                    "snowflake worker ID release timed out; it expires by itself"
                ),
            }
        }
        if let Some(h) = held.as_mut() {
            h.worker = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(w: u32, owner: &str, lease_until: i64, last: i64) -> WorkerRow {
        WorkerRow {
            worker_id: w,
            owner: owner.into(),
            lease_until,
            last_timestamp: last,
        }
    }

    #[test]
    fn choose_prefers_own_then_free_past_then_new_then_free_future() {
        let now = 1000;
        let rows = vec![
            row(0, "a", 2000, 2000),
            row(1, "me", 500, 500),
            row(2, "b", 900, 900),
        ];
        assert_eq!(
            choose(&rows, 4, "me", now),
            Some(Candidate::Existing(rows[1].clone()))
        );
        assert_eq!(
            choose(&rows, 4, "x", now),
            Some(Candidate::Existing(rows[1].clone()))
        );
        let held = vec![row(0, "a", 2000, 2000), row(1, "b", 2000, 2000)];
        assert_eq!(choose(&held, 4, "x", now), Some(Candidate::New(2)));
        assert_eq!(choose(&held, 2, "x", now), None);
        // Expired but with a stored timestamp ahead of the clock: after new IDs.
        let ahead = vec![row(0, "a", 900, 5000), row(1, "b", 900, 3000)];
        assert_eq!(choose(&ahead, 3, "x", now), Some(Candidate::New(2)));
        assert_eq!(
            choose(&ahead, 2, "x", now),
            Some(Candidate::Existing(ahead[1].clone()))
        );
        // Rows of a larger layout are ignored.
        assert_eq!(
            choose(&[row(5, "me", 0, 0)], 4, "me", now),
            Some(Candidate::New(0))
        );
    }

    #[test]
    fn an_unanswered_takeover_keeps_its_floor_until_settled() {
        let mut held = Held::default();
        let theirs = row(2, "old", 900, 5000);
        let ours = row(2, "me", 31_000, 31_000);
        let take_over = Candidate::Existing(theirs.clone());
        assert_eq!(held.before_claim(&take_over, "me"), (2, Some(5000)));
        // Still as the claim read it: undecided.
        held.settle(&[theirs], "me");
        // Found as ours: applied after all; reclaiming it keeps the fence.
        held.settle(std::slice::from_ref(&ours), "me");
        let reclaim = Candidate::Existing(ours);
        assert_eq!(held.before_claim(&reclaim, "me"), (2, Some(5000)));
        // Changed by someone else: lost, forgotten.
        held.settle(&[row(2, "other", 40_000, 40_000)], "me");
        assert_eq!(held.before_claim(&reclaim, "me"), (2, None));
        assert_eq!(
            held.before_claim(&Candidate::New(3), "me"),
            (3, None),
            "a new worker ID has no previous holder"
        );
    }

    #[test]
    fn owner_is_short_ascii_and_unique() {
        let (a, b) = (new_owner(), new_owner());
        assert_ne!(a, b);
        assert!(a.len() <= MAX_OWNER_LEN && a.is_ascii(), "{a}");
    }

    #[test]
    fn the_largest_time_unit_and_the_shortest_lease_for_it_agree() {
        let c = LeaseConfig::default();
        assert_eq!(c.largest_time_unit(), Duration::from_millis(10_002));
        for unit_ms in [1, 2, 3, 999, 10_002, 60_000, 86_400_000] {
            let unit = Duration::from_millis(unit_ms);
            let shortest = LeaseConfig::shortest_ttl_for(unit);
            assert!(LeaseConfig::new(shortest).largest_time_unit() >= unit);
            if !shortest.is_zero() {
                let shorter = shortest - Duration::from_nanos(1);
                assert!(
                    LeaseConfig::new(shorter).largest_time_unit() < unit,
                    "{unit_ms}"
                );
            }
        }
    }

    #[test]
    fn lease_timing_stops_issuing_well_before_expiry() {
        let c = LeaseConfig::default();
        assert_eq!(
            (c.renew_every, c.margin),
            (Duration::from_millis(7500), Duration::from_secs(10))
        );
        assert!(c.renew_every < c.margin && c.op_timeout < c.renew_every);
    }
}
