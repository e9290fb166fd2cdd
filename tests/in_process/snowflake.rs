//! Snowflake IDs: the generator under a fake clock (rollbacks, sequence
//! overflow, restart behind the stored timestamp), encode/decode round trips
//! for random layouts, and, against the three real databases, the worker-ID
//! lease (expiry, takeover, release, restart) and many instances issuing at
//! once.
//!
//! The generator tests run on a paused tokio clock with a
//! `ManualWallClock::ticking` wall clock, which advances exactly as far as the
//! generator sleeps: deterministic, and they check the waits are real sleeps
//! of the right length. The database tests drive leases by hand
//! (`Snowflake::tick`) with a frozen clock, so expiry happens when the test
//! says so.

use crate::support::common;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::TestDb;
use proptest::prelude::*;
use seqd::snowflake::{
    Bits, Generator, Grant, Layout, LeaseConfig, ManualWallClock, Snowflake, SnowflakeError,
    SnowflakeSettings, SystemWallClock, TickOutcome, WallClock,
};
use seqd::store::workers::{WorkerLeases, WorkerRow};
use seqd::store::StoreError;

/// A wall-clock time well after the default epoch (2025-06-15T15:06:40Z).
const T: i64 = 1_750_000_000_000;
const TOLERANCE: Duration = Duration::from_millis(5);

fn layout() -> Layout {
    Layout::default()
}

/// A generator holding worker 3 with no lease deadline, on `clock`.
fn generator(clock: &ManualWallClock, floor_ms: Option<i64>) -> Generator {
    let g = Generator::new(layout(), Arc::new(clock.clone()), TOLERANCE);
    g.install(grant(3, i64::MAX, i64::MAX), floor_ms);
    g
}

/// The grant of worker `worker_id`, issuing until `issue_until_ms` within
/// the persisted bound `bound_ms`.
fn grant(worker_id: u32, issue_until_ms: i64, bound_ms: i64) -> Grant {
    Grant {
        worker_id,
        issue_until_ms,
        bound_ms,
    }
}

/// The timestamp (ms since the Unix epoch) an ID carries, in the default layout.
fn ts_ms(id: i64) -> i64 {
    let l = layout();
    l.unit_start_ms(l.decode(id).unwrap().timestamp)
}

fn assert_strictly_increasing(ids: &[i64]) {
    for w in ids.windows(2) {
        assert!(
            w[0] < w[1],
            "not strictly increasing: {} then {}",
            w[0],
            w[1]
        );
    }
}

// ---------------------------------------------------------------- fake clock

#[tokio::test(start_paused = true)]
async fn a_small_clock_rollback_is_waited_out_with_a_sleep() {
    let clock = ManualWallClock::ticking(T);
    let g = generator(&clock, None);
    let first = g.next().await.unwrap();
    clock.advance(-3);
    let started = tokio::time::Instant::now();
    let second = g.next().await.unwrap();
    // It slept until the clock was back at T (3 ms), and went on in T.
    assert_eq!(started.elapsed(), Duration::from_millis(3));
    assert!(second > first);
    assert_eq!(ts_ms(second), T);
    let st = g.status();
    assert_eq!((st.clock_waits, st.clock_refusals), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_large_clock_rollback_is_refused_then_ids_resume_by_themselves() {
    let clock = ManualWallClock::ticking(T);
    let g = generator(&clock, None);
    let before = g.next().await.unwrap();
    clock.set(T - 1_000);
    let started = tokio::time::Instant::now();
    assert_eq!(
        g.next().await,
        Err(SnowflakeError::ClockMovedBackwards { behind_ms: 1_000 })
    );
    assert_eq!(
        g.batch(10).await,
        Err(SnowflakeError::ClockMovedBackwards { behind_ms: 1_000 })
    );
    assert_eq!(started.elapsed(), Duration::ZERO, "a refusal does not wait");
    assert_eq!(g.status().clock_refusals, 2);
    // Still behind by 4 ms (within the tolerance): waited out.
    clock.set(T - 4);
    let after = g.next().await.unwrap();
    assert!(after > before);
    // Caught up: no wait at all.
    clock.set(T + 10);
    let started = tokio::time::Instant::now();
    let later = g.next().await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert!(later > after);
    assert_eq!(ts_ms(later), T + 10);
}

#[tokio::test(start_paused = true)]
async fn sequence_overflow_in_one_millisecond_moves_to_the_next() {
    let clock = ManualWallClock::ticking(T);
    let g = generator(&clock, None);
    let started = tokio::time::Instant::now();
    let mut ids = Vec::new();
    for _ in 0..4097 {
        ids.push(g.next().await.unwrap());
    }
    // 4096 IDs in T, then one sleep of 1 ms for the 4097th.
    assert_eq!(started.elapsed(), Duration::from_millis(1));
    assert_eq!(ts_ms(ids[4095]), T);
    assert_eq!(ts_ms(ids[4096]), T + 1);
    assert_eq!(layout().decode(ids[4096]).unwrap().sequence, 0);
    // A batch across three milliseconds is still one increasing run.
    let batch = g.batch(10_000).await.unwrap();
    assert_eq!(batch.len(), 10_000);
    assert!(batch[0] > ids[4096]);
    assert_strictly_increasing(&batch);
    let per_ms: BTreeMap<i64, usize> = batch.iter().fold(BTreeMap::new(), |mut m, id| {
        *m.entry(ts_ms(*id)).or_default() += 1;
        m
    });
    assert!(per_ms.values().all(|n| *n <= 4096), "{per_ms:?}");
    assert_eq!(per_ms.len(), 3, "{per_ms:?}");
    assert!(g.status().sequence_waits >= 3);
}

#[tokio::test(start_paused = true)]
async fn a_restart_with_the_clock_behind_the_stored_timestamp_waits_or_refuses() {
    // The lease row says timestamps up to T + 3 may have been used: wait 4 ms.
    let clock = ManualWallClock::ticking(T);
    let g = generator(&clock, Some(T + 3));
    let started = tokio::time::Instant::now();
    let id = g.next().await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_millis(4));
    assert_eq!(ts_ms(id), T + 4);

    // Up to T + 2000: refused (beyond the tolerance) until the clock passes it.
    let clock = ManualWallClock::ticking(T);
    let g = generator(&clock, Some(T + 2_000));
    assert_eq!(
        g.next().await,
        Err(SnowflakeError::ClockMovedBackwards { behind_ms: 2_000 })
    );
    clock.set(T + 2_000);
    let started = tokio::time::Instant::now();
    let id = g.next().await.unwrap();
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(1),
        "T + 2000 itself is used up"
    );
    assert_eq!(ts_ms(id), T + 2_001);
}

#[tokio::test(start_paused = true)]
async fn a_new_worker_id_never_goes_below_the_last_id_issued() {
    let clock = ManualWallClock::ticking(T);
    let g = generator(&clock, None);
    let last = g.next().await.unwrap();
    // Worker 1 < 3 in the same millisecond would give a smaller ID.
    g.install(grant(1, i64::MAX, i64::MAX), Some(0));
    let next = g.next().await.unwrap();
    assert!(next > last);
    assert_eq!(layout().decode(next).unwrap().worker, 1);
}

#[tokio::test(start_paused = true)]
async fn issuing_stops_at_the_lease_deadline_and_the_persisted_bound() {
    let clock = ManualWallClock::ticking(T);
    let g = Generator::new(layout(), Arc::new(clock.clone()), TOLERANCE);
    g.install(grant(0, T + 100, T + 50), None);
    assert!(g.next().await.is_ok());
    clock.set(T + 51);
    assert_eq!(
        g.next().await,
        Err(SnowflakeError::LeaseExpiring),
        "past the persisted bound"
    );
    clock.set(T + 100);
    assert_eq!(
        g.next().await,
        Err(SnowflakeError::LeaseExpiring),
        "past the deadline"
    );
}

#[tokio::test(start_paused = true)]
async fn a_seconds_layout_waits_for_the_next_second_on_overflow() {
    let clock = ManualWallClock::ticking(T + 250);
    let l = layout_of("36/5/22", 1000, T);
    let g = Generator::new(l, Arc::new(clock.clone()), TOLERANCE);
    g.install(grant(31, i64::MAX, i64::MAX), None);
    let first = g.next().await.unwrap();
    let started = tokio::time::Instant::now();
    // The rest of this second's 4,194,304 IDs, then one more.
    let rest = g.batch(4_194_303).await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
    let next = g.next().await.unwrap();
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(750),
        "slept to the next second"
    );
    assert!(first < rest[0] && *rest.last().unwrap() < next);
    assert_eq!(
        l.decode(next).unwrap().timestamp,
        l.decode(first).unwrap().timestamp + 1
    );
}

// ------------------------------------------------------------------ layouts

/// A valid bit split: worker 0..=16, sequence 1..=30, time the rest.
fn any_bits() -> impl Strategy<Value = Bits> {
    (0u8..=16, 1u8..=30).prop_map(|(worker, sequence)| Bits {
        time: 63 - worker - sequence,
        worker,
        sequence,
    })
}

proptest! {
    #[test]
    fn decode_round_trips_encode(bits in any_bits(), t in any::<u64>(), w in any::<u32>(), s in any::<u64>(), unit in 1i64..=60_000) {
        let layout = Layout::new(bits, unit, 0, 0).unwrap();
        let t = (t % (layout.max_timestamp() as u64 + 1)) as i64;
        let w = w % layout.worker_count();
        let s = s % (layout.max_sequence() + 1);
        let id = layout.encode(t, w, s);
        prop_assert!(id >= 0);
        let d = layout.decode(id).unwrap();
        prop_assert_eq!((d.timestamp, d.worker, d.sequence), (t, w, s));
    }

    #[test]
    fn ids_sort_by_time_then_worker_then_sequence(bits in any_bits(), a in any::<(u64, u32, u64)>(), b in any::<(u64, u32, u64)>()) {
        let layout = Layout::new(bits, 1, 0, 0).unwrap();
        let norm = |(t, w, s): (u64, u32, u64)| {
            ((t % (layout.max_timestamp() as u64 + 1)) as i64, w % layout.worker_count(), s % (layout.max_sequence() + 1))
        };
        let (a, b) = (norm(a), norm(b));
        prop_assert_eq!(a.cmp(&b), layout.encode(a.0, a.1, a.2).cmp(&layout.encode(b.0, b.1, b.2)));
    }
}

// --------------------------------------------------- leases, real databases

/// A 30 s lease: renewed every 7.5 s, issuing stops 10 s before it ends.
fn lease() -> LeaseConfig {
    LeaseConfig::default()
}

async fn leases(db: &TestDb) -> Arc<dyn WorkerLeases> {
    common::database(db).await.leases() // migrated, on a pool of its own
}

/// An instance (its own owner and its own pool) without the background task.
async fn instance(db: &TestDb, layout: Layout, clock: &ManualWallClock) -> Snowflake {
    Snowflake::new(
        layout,
        TOLERANCE,
        Arc::new(clock.clone()),
        leases(db).await,
        lease(),
    )
}

/// For each worker ID, how many of `instances` may issue under it now: never more than one.
fn assert_one_holder_per_worker(
    instances: &[&Snowflake],
    now: i64,
    when: &str,
) -> BTreeMap<u32, usize> {
    let mut holders = BTreeMap::new();
    for s in instances {
        if let Some(g) = s.status().grant {
            if now < g.issue_until_ms {
                *holders.entry(g.worker_id).or_insert(0) += 1;
            }
        }
    }
    assert!(
        holders.values().all(|n| *n == 1),
        "{when}: worker ID held twice: {holders:?}"
    );
    holders
}

/// A layout of `bits` (time/worker/sequence) in units of `unit_ms`, from the
/// default epoch, made at `now_ms`.
fn layout_of(bits: &str, unit_ms: i64, now_ms: i64) -> Layout {
    Layout::new(
        bits.parse().unwrap(),
        unit_ms,
        seqd::snowflake::layout::DEFAULT_EPOCH_MS,
        now_ms,
    )
    .unwrap()
}

/// A layout with 2 worker IDs.
fn two_workers() -> Layout {
    layout_of("50/1/12", 1, T)
}

async fn two_instances_never_hold_the_same_worker_id(db: TestDb) {
    let clock = ManualWallClock::frozen(T);
    let l = two_workers();
    let (a, b, c) = (
        instance(&db, l, &clock).await,
        instance(&db, l, &clock).await,
        instance(&db, l, &clock).await,
    );
    let all = [&a, &b, &c];
    let mut issued: Vec<i64> = Vec::new();

    assert_eq!(a.tick().await, TickOutcome::Claimed(0));
    assert_eq!(b.tick().await, TickOutcome::Claimed(1));
    assert_eq!(c.tick().await, TickOutcome::NoneFree);
    assert_eq!(c.next().await, Err(SnowflakeError::NoWorker));
    issued.push(a.next().await.unwrap());
    issued.push(b.next().await.unwrap());
    assert_eq!(l.decode(issued[1]).unwrap().worker, 1);
    assert_one_holder_per_worker(&all, clock.now_ms(), "after the claims");

    // B stops renewing (hung, partitioned); A keeps renewing.
    let mut b_last = issued[1];
    for step in 1..=4 {
        clock.set(T + step * 7_500 - 1);
        assert_eq!(a.tick().await, TickOutcome::Renewed(0));
        issued.push(a.next().await.unwrap());
        match b.next().await {
            Ok(id) => {
                assert!(clock.now_ms() < T + 20_000, "B issued after its deadline");
                b_last = id;
                issued.push(id);
            }
            Err(e) => {
                assert_eq!(e, SnowflakeError::LeaseExpiring);
                assert!(clock.now_ms() >= T + 20_000, "B stopped early");
            }
        }
        // B's lease has not expired yet: nobody may take worker 1.
        assert_eq!(c.tick().await, TickOutcome::NoneFree, "step {step}");
        assert_one_holder_per_worker(&all, clock.now_ms(), "while B's lease runs out");
    }

    // Past B's lease: C takes worker 1 over, and starts after B's stored bound.
    clock.set(T + 30_001);
    assert_eq!(c.tick().await, TickOutcome::Claimed(1));
    assert_one_holder_per_worker(&all, clock.now_ms(), "after the takeover");
    clock.set(T + 30_003);
    let c_first = c.next().await.unwrap();
    assert_eq!(l.decode(c_first).unwrap().worker, 1);
    assert!(c_first > b_last);
    assert!(
        l.unit_start_ms(l.decode(c_first).unwrap().timestamp) > T + 30_000,
        "C reused B's timestamps"
    );
    issued.push(c_first);
    assert_eq!(b.next().await, Err(SnowflakeError::LeaseExpiring));
    // B learns it lost the worker ID at its next renewal; none is free.
    assert_eq!(b.tick().await, TickOutcome::Lost(1));
    assert_eq!(b.tick().await, TickOutcome::NoneFree);
    assert_eq!(b.next().await, Err(SnowflakeError::NoWorker));

    // A shuts down: its worker ID is released and B takes it at once,
    // after A's exact last timestamp.
    assert_eq!(a.tick().await, TickOutcome::Renewed(0));
    let a_last = a.next().await.unwrap();
    issued.push(a_last);
    a.shutdown().await;
    assert_eq!(a.next().await, Err(SnowflakeError::Closed));
    let rows = leases(&db).await.list(2).await.unwrap();
    let row0 = rows.iter().find(|r| r.worker_id == 0).unwrap();
    assert_eq!(row0.lease_until, 0, "released");
    assert_eq!(
        row0.last_timestamp,
        T + 30_003,
        "the exact last millisecond A used"
    );
    assert_eq!(b.tick().await, TickOutcome::Claimed(0));
    assert_one_holder_per_worker(&all, clock.now_ms(), "after the release");
    clock.advance(1);
    let b_new = b.next().await.unwrap();
    assert!(b_new > a_last);
    assert_eq!(l.decode(b_new).unwrap().worker, 0);
    issued.push(b_new);

    let unique: HashSet<i64> = issued.iter().copied().collect();
    assert_eq!(unique.len(), issued.len(), "{issued:?}");
}

async fn concurrent_claims_get_distinct_worker_ids(db: TestDb) {
    let clock = ManualWallClock::frozen(SystemWallClock.now_ms());
    let l = layout_of("49/2/12", 1, clock.now_ms());
    let mut instances = Vec::new();
    for _ in 0..8 {
        instances.push(instance(&db, l, &clock).await);
    }
    let outcomes = futures::future::join_all(instances.iter().map(|s| s.tick())).await;
    // Losers of a race retry inside the tick; a few may give up (Failed) and
    // succeed at their next tick, as the background task would.
    let mut claimed: Vec<u32> = outcomes
        .iter()
        .filter_map(|o| {
            if let TickOutcome::Claimed(w) = o {
                Some(*w)
            } else {
                None
            }
        })
        .collect();
    for (s, o) in instances.iter().zip(&outcomes) {
        if *o == TickOutcome::Failed {
            if let TickOutcome::Claimed(w) = s.tick().await {
                claimed.push(w);
            }
        }
    }
    claimed.sort_unstable();
    assert_eq!(claimed, vec![0, 1, 2, 3], "{outcomes:?}");
    let refs: Vec<&Snowflake> = instances.iter().collect();
    assert_one_holder_per_worker(&refs, clock.now_ms(), "after concurrent claims");
}

/// A layout with one worker ID only, so every instance gets the same one.
fn one_worker() -> Layout {
    layout_of("51/0/12", 1, T)
}

async fn restarts_never_reuse_a_timestamp(db: TestDb) {
    let l = one_worker();

    // Graceful: A releases with its exact last timestamp; B's clock is 3 ms
    // behind it (within the tolerance): B's first ID waits and comes after.
    let clock_a = ManualWallClock::frozen(T);
    let a = instance(&db, l, &clock_a).await;
    assert_eq!(a.tick().await, TickOutcome::Claimed(0));
    let mut a_ids = a.batch(10).await.unwrap();
    clock_a.set(T + 5);
    a_ids.extend(a.batch(10).await.unwrap());
    a.shutdown().await;
    let clock_b = ManualWallClock::ticking(T + 2);
    let b = instance(&db, l, &clock_b).await;
    assert_eq!(b.tick().await, TickOutcome::Claimed(0));
    clock_b.set(T + 2); // the claim took real time; B's clock is behind A's last again
    let b_first = b.next().await.unwrap();
    assert!(b_first > *a_ids.last().unwrap());
    assert!(l.unit_start_ms(l.decode(b_first).unwrap().timestamp) > T + 5);
    assert!(b.status().clock_waits >= 1);

    // B's clock far behind the stored timestamp: refused until it passes it.
    b.shutdown().await;
    let stored = leases(&db).await.list(1).await.unwrap()[0].last_timestamp;
    let clock_c = ManualWallClock::frozen(stored - 2_000);
    let c = instance(&db, l, &clock_c).await;
    assert_eq!(c.tick().await, TickOutcome::Claimed(0));
    assert!(
        matches!(c.next().await, Err(SnowflakeError::ClockMovedBackwards { behind_ms }) if behind_ms >= 2_000)
    );
    clock_c.set(stored + 1);
    let c_first = c.next().await.unwrap();
    assert!(l.unit_start_ms(l.decode(c_first).unwrap().timestamp) > stored);

    // Crash: C vanishes without releasing. Its row is free only after the
    // lease, and D starts after the bound C persisted (the lease's end).
    let c_bound = leases(&db).await.list(1).await.unwrap()[0].last_timestamp;
    assert_eq!(
        c_bound,
        stored - 2_000 + 30_000,
        "the bound is the end of C's lease"
    );
    drop(c);
    let clock_d = ManualWallClock::frozen(stored + 2);
    let d = instance(&db, l, &clock_d).await;
    assert_eq!(
        d.tick().await,
        TickOutcome::NoneFree,
        "C's lease still runs"
    );
    clock_d.set(c_bound + 1);
    assert_eq!(d.tick().await, TickOutcome::Claimed(0));
    clock_d.set(c_bound + 2);
    let d_first = d.next().await.unwrap();
    assert!(l.unit_start_ms(l.decode(d_first).unwrap().timestamp) > c_bound);
    assert!(d_first > c_first);
}

/// A 3 s lease: renewed every 750 ms, issuing stops 1000 ms before it ends.
const SHORT_LEASE: Duration = Duration::from_secs(3);

/// Issues one ID at every millisecond of the clock, on `layout`: a claim, four renewals on time, then none (the database stops
/// answering), until issuing stops at the last renewal's deadline. The times
/// are chosen so that a time unit begins in the last millisecond before that
/// deadline: the worst case for a unit to end by the persisted bound.
/// Returns the refusals before the deadline, as `(time, error)`, and the
/// deadline.
async fn issue_every_millisecond_until_the_deadline(
    db: &TestDb,
    layout: Layout,
) -> (Vec<(i64, SnowflakeError)>, i64) {
    let config = LeaseConfig::new(SHORT_LEASE);
    let (every, renewals) = (config.renew_every.as_millis() as i64, 4);
    let until_deadline = (config.ttl - config.margin).as_millis() as i64;
    let last_unit = layout.unit_start_ms(layout.unit_at(T) + 20);
    let claimed_at = last_unit + 1 - renewals * every - until_deadline;
    let deadline = claimed_at + renewals * every + until_deadline;

    let clock = ManualWallClock::frozen(claimed_at);
    let s = Snowflake::new(
        layout,
        TOLERANCE,
        Arc::new(clock.clone()),
        leases(db).await,
        config,
    );
    assert!(matches!(s.tick().await, TickOutcome::Claimed(_)));
    let mut refused = Vec::new();
    for now in claimed_at..deadline {
        clock.set(now);
        let since = now - claimed_at;
        if since > 0 && since % every == 0 && since / every <= renewals {
            assert!(
                matches!(s.tick().await, TickOutcome::Renewed(_)),
                "at {now}"
            );
        }
        if let Err(e) = s.next().await {
            refused.push((now, e));
        }
    }
    assert_eq!(s.status().grant.unwrap().issue_until_ms, deadline);
    clock.set(deadline);
    assert_eq!(
        s.next().await,
        Err(SnowflakeError::LeaseExpiring),
        "the deadline"
    );
    (refused, deadline)
}

/// The settings of `unit` with the short lease, default otherwise.
fn short_lease_with_unit(unit: Duration) -> SnowflakeSettings {
    SnowflakeSettings {
        time_unit: unit,
        lease: SHORT_LEASE,
        ..Default::default()
    }
}

async fn at_the_largest_time_unit_every_instant_issues_and_one_ms_more_is_refused(db: TestDb) {
    let largest = LeaseConfig::new(SHORT_LEASE).largest_time_unit();
    assert_eq!(largest, Duration::from_millis(1_002));
    let layout = short_lease_with_unit(largest)
        .validate(T)
        .expect("the largest unit is accepted");
    let (refused, _) = issue_every_millisecond_until_the_deadline(&db, layout).await;
    assert_eq!(refused, vec![], "every instant before the deadline issues");

    // One millisecond more is refused by validation, and rightly so: the
    // unit that begins just before the deadline would end past the bound.
    let over = largest + Duration::from_millis(1);
    assert!(short_lease_with_unit(over).validate(T).is_err());
    let layout = Layout::new(
        Bits::default(),
        over.as_millis() as i64,
        seqd::snowflake::layout::DEFAULT_EPOCH_MS,
        T,
    )
    .unwrap();
    let (refused, deadline) = issue_every_millisecond_until_the_deadline(&db, layout).await;
    assert_eq!(
        refused,
        vec![(deadline - 1, SnowflakeError::LeaseExpiring)],
        "only the unit that begins in the last millisecond before the deadline"
    );
}

/// Lease storage whose first claim is applied and then never answered: the
/// caller's call times out although the claim committed (an ambiguous claim).
struct FirstClaimUnanswered {
    inner: Arc<dyn WorkerLeases>,
    answered_one: AtomicBool,
}

#[async_trait]
impl WorkerLeases for FirstClaimUnanswered {
    async fn migrate(&self) -> Result<(), StoreError> {
        self.inner.migrate().await
    }

    async fn list(&self, below: u32) -> Result<Vec<WorkerRow>, StoreError> {
        self.inner.list(below).await
    }

    async fn insert(&self, row: &WorkerRow) -> Result<bool, StoreError> {
        self.inner.insert(row).await
    }

    async fn claim(&self, seen: &WorkerRow, new: &WorkerRow, now: i64) -> Result<bool, StoreError> {
        let won = self.inner.claim(seen, new, now).await?;
        if !self.answered_one.swap(true, Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        Ok(won)
    }

    async fn renew(&self, worker: u32, owner: &str, until: i64) -> Result<bool, StoreError> {
        self.inner.renew(worker, owner, until).await
    }

    async fn release(&self, worker: u32, owner: &str, last: i64) -> Result<bool, StoreError> {
        self.inner.release(worker, owner, last).await
    }

    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
}

async fn an_ambiguous_takeover_still_starts_after_the_previous_holders_timestamps(db: TestDb) {
    let l = one_worker();
    let store = leases(&db).await;
    // The previous holder's lease has run out, but its clock was 5 s ahead of
    // ours: it may have issued timestamps up to T + 5000.
    let floor = T + 5_000;
    let previous = WorkerRow {
        worker_id: 0,
        owner: "previous-holder".into(),
        lease_until: T - 1,
        last_timestamp: floor,
    };
    assert!(store.insert(&previous).await.unwrap());
    let clock = ManualWallClock::frozen(T);
    let s = Snowflake::new(
        l,
        TOLERANCE,
        Arc::new(clock.clone()),
        Arc::new(FirstClaimUnanswered {
            inner: store.clone(),
            answered_one: AtomicBool::new(false),
        }),
        LeaseConfig {
            op_timeout: Duration::from_millis(100),
            ..lease()
        },
    );

    assert_eq!(s.tick().await, TickOutcome::Failed, "the claim timed out");
    let row = store.list(1).await.unwrap().remove(0);
    assert_eq!(row.owner, s.owner(), "yet it was applied");
    assert_eq!(
        s.tick().await,
        TickOutcome::Claimed(0),
        "found again as ours"
    );

    // Nothing at or below the previous holder's timestamps: refused while the
    // clock is behind them, issued after them once it has passed them.
    let mut issued = Vec::new();
    for now in [T, floor - 1_000, floor + 1, floor + 2] {
        clock.set(now);
        match s.next().await {
            Ok(id) => issued.push(id),
            Err(e) => assert!(
                matches!(e, SnowflakeError::ClockMovedBackwards { .. }),
                "at {now}: {e:?}"
            ),
        }
    }
    for id in &issued {
        let t = l.decode(*id).unwrap().timestamp;
        assert!(
            l.unit_start_ms(t) > floor,
            "ID {id} has timestamp {} at or below the previous holder's {floor}",
            l.unit_start_ms(t)
        );
    }
    assert_eq!(issued.len(), 2, "issued once the clock passed the floor");
}

async fn the_background_task_renews_the_lease_and_ends_when_dropped(db: TestDb) {
    // A 1 s lease: renewed every 250 ms; without renewals issuing would stop
    // 667 ms after the claim.
    let leases = leases(&db).await;
    let s = Snowflake::new(
        Layout::default(),
        TOLERANCE,
        Arc::new(SystemWallClock),
        leases.clone(),
        LeaseConfig::new(Duration::from_secs(1)),
    )
    .started();
    tokio::time::timeout(Duration::from_secs(20), async {
        while s.status().grant.is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a worker ID within 20 s");
    let first_deadline = s.status().grant.unwrap().issue_until_ms;
    let started = tokio::time::Instant::now();
    let mut last = 0;
    while started.elapsed() < Duration::from_millis(1_500) {
        let id = s.next().await.expect("renewed in the background");
        assert!(id > last);
        last = id;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(s.status().grant.unwrap().issue_until_ms > first_deadline + 500);

    // Dropped: the task ends, the row is no longer renewed (and expires).
    drop(s);
    // Let a renewal already in flight finish.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = leases.list(1024).await.unwrap()[0].lease_until;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        leases.list(1024).await.unwrap()[0].lease_until,
        before,
        "renewed after the drop"
    );
}

/// Total IDs of the multi-instance test (`SEQD_SNOWFLAKE_TEST_IDS`, default 300,000).
fn total_ids() -> usize {
    std::env::var("SEQD_SNOWFLAKE_TEST_IDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300_000)
}

async fn three_instances_eight_clients_issue_unique_increasing_ids(db: TestDb) {
    const INSTANCES: usize = 3;
    const CLIENTS: usize = 8;
    let per_client = total_ids() / (INSTANCES * CLIENTS);
    let leases = leases(&db).await;
    let mut instances = Vec::new();
    for _ in 0..INSTANCES {
        instances.push(
            Snowflake::new(
                Layout::default(),
                TOLERANCE,
                Arc::new(SystemWallClock),
                leases.clone(),
                lease(),
            )
            .started(),
        );
    }
    // The background tasks claim a worker ID each.
    for s in &instances {
        tokio::time::timeout(Duration::from_secs(20), async {
            while s.status().grant.is_none() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("a worker ID within 20 s");
    }

    let mut tasks = Vec::new();
    for (i, s) in instances.iter().enumerate() {
        for c in 0..CLIENTS {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                let mut ids = Vec::with_capacity(per_client);
                let mut k = 0usize;
                while ids.len() < per_client {
                    // Singles and batches of varying size, mixed.
                    let n = [1, 1, 7, 100, 1000][(k + c) % 5].min(per_client - ids.len());
                    if n == 1 {
                        ids.push(s.next().await.expect("next"));
                    } else {
                        ids.extend(s.batch(n).await.expect("batch"));
                    }
                    k += 1;
                }
                (i, ids)
            }));
        }
    }
    let mut seen = HashSet::with_capacity(per_client * INSTANCES * CLIENTS);
    let mut workers: BTreeMap<usize, HashSet<u32>> = BTreeMap::new();
    for t in tasks {
        let (i, ids) = t.await.unwrap();
        assert_strictly_increasing(&ids);
        for id in ids {
            assert!(seen.insert(id), "duplicate ID {id}");
            workers
                .entry(i)
                .or_default()
                .insert(Layout::default().decode(id).unwrap().worker);
        }
    }
    assert_eq!(seen.len(), per_client * INSTANCES * CLIENTS);
    // One worker ID per instance, all different.
    let per_instance: Vec<u32> = workers
        .values()
        .map(|w| {
            assert_eq!(w.len(), 1, "{workers:?}");
            *w.iter().next().unwrap()
        })
        .collect();
    assert_eq!(
        per_instance.iter().collect::<HashSet<_>>().len(),
        INSTANCES,
        "{workers:?}"
    );
    for s in &instances {
        s.shutdown().await;
    }
}

per_backend!(
    two_instances_never_hold_the_same_worker_id,
    the_background_task_renews_the_lease_and_ends_when_dropped,
    concurrent_claims_get_distinct_worker_ids,
    restarts_never_reuse_a_timestamp,
    an_ambiguous_takeover_still_starts_after_the_previous_holders_timestamps,
    at_the_largest_time_unit_every_instant_issues_and_one_ms_more_is_refused,
    three_instances_eight_clients_issue_unique_increasing_ids,
);
