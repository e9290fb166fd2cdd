//! Serial numbers served by the allocator core, on the in-memory store, with
//! both clocks in the test's hands: the allocator's monotonic one and the
//! wall clock periods are read from. Midnight, month and year ends in UTC and
//! in America/New_York on its DST days; capacity, widening, the step bounded
//! by the period, global ordering without gaps, settings changed on the fly.

use crate::support::common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use common::serial_settings as settings;
use jiff::{SignedDuration, Timestamp};
use seqd::allocator::{AllocError, Allocator, ManualClock};
use seqd::domain::{IdOrdering, NewSequence, SeqName, SeqNameRef, SerialSettings};
use seqd::serial::{
    IssueError, Issued, ManualWallClock, Overflow, Period, Reset, Serials, WallClock,
};
use seqd::store::memory::MemoryStore;
use seqd::store::{prelude::*, SequencePatch};

struct Rig {
    store: Arc<MemoryStore>,
    clock: ManualClock,
    wall: ManualWallClock,
    serials: Serials,
    allocator: Allocator,
}

/// Noon of 2026-06-01, UTC: the start of the tests that cross no period.
const NOON: &str = "2026-06-01T12:00:00Z";

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// One instance over `store`: the rate-based step (as in production) on a
/// manual clock, and a manual wall clock at `now`.
fn instance(store: &Arc<MemoryStore>, now: Timestamp) -> Rig {
    let clock = ManualClock::new();
    let allocator = common::rate_step_allocator(store.clone(), &clock);
    let wall = ManualWallClock::at(now);
    let serials = Serials::new(allocator.clone(), store.clone(), Arc::new(wall.clone()));
    Rig {
        store: store.clone(),
        clock,
        wall,
        serials,
        allocator,
    }
}

/// A serial sequence `name` printing `format`, reset as `reset`: from 1 by
/// 10, in UTC, refused past its width, its counters reserved per instance
/// (a test sets another field where it needs to).
#[derive(Clone, Copy)]
struct Serial {
    name: &'static str,
    format: &'static str,
    start: i64,
    step: i64,
    reset: Reset,
    zone: &'static str,
    overflow: Overflow,
    ordering: IdOrdering,
}

impl Serial {
    fn new(name: &'static str, format: &'static str, reset: Reset) -> Serial {
        Serial {
            name,
            format,
            start: 1,
            step: 10,
            reset,
            zone: "UTC",
            overflow: Overflow::Refuse,
            ordering: IdOrdering::Instance,
        }
    }

    /// A sequence never reset whose counters are reserved at request time,
    /// across instances.
    fn global(name: &'static str, format: &'static str) -> Serial {
        Serial {
            ordering: IdOrdering::Global,
            ..Serial::new(name, format, Reset::Never)
        }
    }

    /// The same, printed in full past its width instead of refused.
    fn widen(self) -> Serial {
        Serial {
            overflow: Overflow::Widen,
            ..self
        }
    }

    fn settings(&self) -> SerialSettings {
        settings(self.format, self.reset, self.zone, self.overflow)
    }

    /// The PATCH that gives a sequence these settings.
    fn patch(&self) -> SequencePatch {
        SequencePatch {
            serial: Some(Some(self.settings())),
            ..Default::default()
        }
    }

    async fn create(&self, store: &Arc<MemoryStore>) {
        let name = SeqName::parse(self.name).unwrap();
        let new = NewSequence::new(name, self.start, self.step, String::new(), 1_000_000)
            .unwrap()
            .with_ordering(self.ordering)
            .with_serial(self.settings());
        store.create(&new).await.unwrap();
    }

    /// A fresh store holding the sequence.
    async fn store(&self) -> Arc<MemoryStore> {
        let store = Arc::new(MemoryStore::new());
        self.create(&store).await;
        store
    }

    /// [`Serial::store`], and one instance over it at `now`.
    async fn rig(&self, now: &str) -> (Arc<MemoryStore>, Rig) {
        let store = self.store().await;
        let rig = instance(&store, at(now));
        (store, rig)
    }
}

/// The PATCH that makes a sequence plain again.
fn plain() -> SequencePatch {
    SequencePatch {
        serial: Some(None),
        ..Default::default()
    }
}

impl Rig {
    /// Moves both clocks by `d`.
    fn advance(&self, d: Duration) {
        self.clock.advance(d);
        self.wall.advance_by(SignedDuration::try_from(d).unwrap());
    }

    /// Sets the wall clock (the allocator's moves by the same amount, or by
    /// nothing if the wall clock goes back).
    fn set(&self, now: Timestamp) {
        let delta = now.duration_since(self.wall.utc());
        if delta.is_positive() {
            self.clock.advance(Duration::try_from(delta).unwrap());
        }
        self.wall.set_utc(now);
    }

    /// `n` serials of `name`, or the refusal.
    async fn issue(&self, name: &str, n: u64) -> Result<Issued, IssueError> {
        let name = SeqNameRef::parse(name).unwrap();
        self.serials.issue(name, n).await
    }

    async fn one(&self, name: &str) -> (i64, String) {
        let issued = self.issue(name, 1).await.unwrap();
        (issued.runs[0].first, issued.serials[0].clone())
    }

    /// Whether a request of `n` serials of `name` is refused
    /// `SerialExhausted`.
    async fn exhausted(&self, name: &str, n: u64) -> bool {
        let issued = self.issue(name, n).await;
        matches!(issued, Err(IssueError::SerialExhausted(_)))
    }

    /// What the allocator answers a plain request of `name`.
    async fn next(&self, name: &str) -> Result<i64, AllocError> {
        self.allocator.next(&SeqName::parse(name).unwrap()).await
    }

    /// Changes the row of `name` by `patch` and reloads its settings here, as
    /// a PATCH answered by this instance does.
    async fn patch(&self, name: &str, patch: &SequencePatch) {
        let row = self
            .store
            .update(&SeqName::parse(name).unwrap(), patch)
            .await
            .unwrap();
        self.serials.reload(&row);
    }

    async fn period_max(&self, name: &str, key: &str) -> Option<i64> {
        let periods = self
            .store
            .list_periods(&SeqName::parse(name).unwrap())
            .await
            .unwrap();
        periods.iter().find(|p| p.key == key).map(|p| p.max_id)
    }
}

#[tokio::test]
async fn a_daily_counter_starts_again_at_start_at_midnight_utc() {
    let mut order = Serial::new("order", "ORD{yyyy}{MM}{dd}{seq:06}", Reset::Day);
    (order.start, order.step) = (100, 1000);
    let (_store, rig) = order.rig("2026-11-30T23:59:59Z").await;
    assert_eq!(rig.one("order").await, (100, "ORD20261130000100".into()));
    assert_eq!(rig.one("order").await, (101, "ORD20261130000101".into()));
    rig.advance(Duration::from_millis(999));
    assert_eq!(rig.one("order").await, (102, "ORD20261130000102".into()));
    rig.advance(Duration::from_millis(1));
    assert_eq!(rig.one("order").await, (100, "ORD20261201000100".into()));
    assert_eq!(rig.one("order").await, (101, "ORD20261201000101".into()));
    // A wall clock that steps back keeps the period it reached.
    rig.set(at("2026-11-30T23:59:58Z"));
    assert_eq!(rig.one("order").await, (102, "ORD20261201000102".into()));
    // Each period has its own row.
    assert!(rig.period_max("order", "20261130").await.is_some());
    assert!(rig.period_max("order", "20261201").await.is_some());
}

#[tokio::test]
async fn month_and_year_ends_start_new_periods() {
    let monthly = Serial::new("inv", "INV-{yy}{MM}-{seq:04}", Reset::Month);
    let (store, rig) = monthly.rig("2028-02-29T23:59:59.999Z").await;
    let yearly = Serial::new("yr", "Y{yyyy}/{seq}", Reset::Year);
    yearly.create(&store).await;
    // The monthly and the yearly serial at each instant.
    for (now, inv, yr) in [
        ("2028-02-29T23:59:59.999Z", "INV-2802-0001", "Y2028/1"),
        ("2028-03-01T00:00:00Z", "INV-2803-0001", "Y2028/2"),
        ("2028-12-31T23:59:59Z", "INV-2812-0001", "Y2028/3"),
        ("2029-01-01T00:00:00Z", "INV-2901-0001", "Y2029/1"),
    ] {
        rig.set(at(now));
        assert_eq!(rig.one("inv").await.1, inv, "at {now}");
        assert_eq!(rig.one("yr").await.1, yr, "at {now}");
    }
}

/// America/New_York: 2026-03-08 has 23 hours (02:00 EST -> 03:00 EDT),
/// 2026-11-01 has 25 (02:00 EDT -> 01:00 EST). Each day starts at its local
/// midnight: 05:00Z in winter, 04:00Z in summer.
#[tokio::test]
async fn new_york_days_follow_local_midnight_across_both_dst_changes() {
    let mut ny = Serial::new("ny", "NY{yyyy}{MM}{dd}-{seq:03}", Reset::Day);
    (ny.zone, ny.step) = ("America/New_York", 5);
    let (_store, rig) = ny.rig("2026-03-08T04:59:59Z").await;
    let steps = [
        ("2026-03-08T04:59:59Z", "NY20260307-001"),
        ("2026-03-08T05:00:00Z", "NY20260308-001"),
        // 02:30 local does not exist; 07:30Z is 03:30 EDT, still the 8th.
        ("2026-03-08T07:30:00Z", "NY20260308-002"),
        ("2026-03-09T03:59:59Z", "NY20260308-003"),
        ("2026-03-09T04:00:00Z", "NY20260309-001"),
        ("2026-11-01T03:59:59Z", "NY20261031-001"),
        ("2026-11-01T04:00:00Z", "NY20261101-001"),
        // 01:30 happens twice on the 1st (05:30Z EDT, 06:30Z EST).
        ("2026-11-01T05:30:00Z", "NY20261101-002"),
        ("2026-11-01T06:30:00Z", "NY20261101-003"),
        ("2026-11-02T04:59:59Z", "NY20261101-004"),
        ("2026-11-02T05:00:00Z", "NY20261102-001"),
    ];
    for (now, want) in steps {
        rig.set(at(now));
        assert_eq!(rig.one("ny").await.1, want, "at {now}");
    }
}

/// Random walks of the clock over DST days: every serial prints the date of
/// the period of the instant it was asked at, and each period's counters are
/// start, start+1, ... with no repeat (one instance, fixed step: no gap
/// either while the period lasts).
#[tokio::test]
async fn the_prefix_always_matches_the_counters_period() {
    let zone = "America/New_York";
    let mut walk = Serial::new("walk", "{yyyy}{MM}{dd}{seq:05}", Reset::Day);
    (walk.zone, walk.start, walk.step) = (zone, 7, 3);
    let tz = jiff::tz::TimeZone::get(zone).unwrap();
    let (_store, rig) = walk.rig("2026-10-31T20:00:00Z").await;
    let mut seen: HashMap<String, Vec<i64>> = HashMap::new();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..3000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rig.advance(Duration::from_secs(rng % 240));
        let now = rig.wall.utc();
        let (counter, serial) = rig.one("walk").await;
        let period = Period::of(now, &tz, Reset::Day).unwrap();
        let date = format!(
            "{:04}{:02}{:02}",
            period.date.year(),
            period.date.month(),
            period.date.day()
        );
        assert_eq!(&serial[..8], date, "{serial} asked at {now}");
        assert_eq!(serial[8..].parse::<i64>().unwrap(), counter);
        seen.entry(period.key).or_default().push(counter);
    }
    assert!(seen.len() >= 3, "the walk crossed {} days", seen.len());
    for (key, counters) in seen {
        let want: Vec<i64> = (7..7 + counters.len() as i64).collect();
        assert_eq!(counters, want, "period {key}");
    }
}

#[tokio::test]
async fn a_full_counter_answers_serial_exhausted_and_never_reserves_past_its_capacity() {
    let mut tiny = Serial::new("tiny", "T{yyyy}{MM}{dd}{seq:02}", Reset::Day);
    tiny.step = 1000;
    let (_store, rig) = tiny.rig(NOON).await;
    for i in 1..=99 {
        assert_eq!(rig.one("tiny").await.1, format!("T20260601{i:02}"));
    }
    match rig.issue("tiny", 1).await {
        Err(IssueError::SerialExhausted(e)) => {
            assert_eq!((e.width, e.capacity), (2, 99));
        }
        other => panic!("expected SerialExhausted, got {other:?}"),
    }
    // The step of 1000 was cut to the 99 the period can hold.
    assert_eq!(rig.period_max("tiny", "20260601").await, Some(99));
    // The next day has a fresh counter.
    rig.set(at("2026-06-02T00:00:00Z"));
    assert_eq!(rig.one("tiny").await.1, "T2026060201");
}

#[tokio::test]
async fn a_widening_counter_prints_in_full_past_its_width() {
    let mut wide = Serial::new("wide", "W{seq:02}", Reset::Never).widen();
    wide.start = 98;
    let (_store, rig) = wide.rig(NOON).await;
    let got: Vec<String> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(rig.one("wide").await.1);
        }
        v
    };
    assert_eq!(got, ["W98", "W99", "W100", "W101"]);
}

#[tokio::test]
async fn a_batch_takes_every_serial_from_one_period_and_stops_at_capacity() {
    let mut b = Serial::new("b", "B{MM}{dd}{yy}{seq:03}", Reset::Day);
    b.step = 100;
    let (_store, rig) = b.rig("2026-06-01T23:59:59Z").await;
    let issued = rig.issue("b", 500).await.unwrap();
    assert_eq!(issued.period, "20260601");
    assert_eq!(issued.serials.len(), 500);
    assert_eq!(issued.serials[0], "B060126001");
    assert_eq!(issued.serials[499], "B060126500");
    let too_many = rig.issue("b", 500).await;
    assert!(
        matches!(too_many, Err(IssueError::SerialExhausted(_))),
        "{too_many:?}"
    );
    assert!(rig.period_max("b", "20260601").await.unwrap() <= 999);
}

/// A serial sequence's plain requests (`Allocator::next`, which `/next`
/// tries first) are answered from memory once the row was found serial:
/// they never reach the store again. They each started a refused fetch (a
/// database round trip per few requests under load) before.
#[tokio::test]
async fn plain_requests_of_a_serial_sequence_stay_off_the_store() {
    let ps = Serial::new("ps", "P{yyyy}{seq}", Reset::Year);
    let (store, rig) = ps.rig("2026-06-01T09:00:00Z").await;
    for _ in 0..200 {
        assert_eq!(rig.next("ps").await, Err(AllocError::Serial));
        rig.one("ps").await;
        tokio::task::yield_now().await;
    }
    assert_eq!(
        store.reserves("ps"),
        1,
        "only the first request asked the store"
    );
}

/// A burst on one instance must not reserve a bounded period's whole
/// capacity: one reservation takes at most a quarter of what is left (or
/// the row's step), so another instance still gets counters, and between
/// them every counter up to the capacity is served exactly once.
#[tokio::test]
async fn a_burst_on_one_instance_leaves_counters_for_another() {
    let fair = Serial::new("fair", "F{yyyy}{MM}{dd}{seq:03}", Reset::Day);
    let (store, a) = fair.rig("2026-06-01T09:00:00Z").await;
    let b = instance(&store, at("2026-06-01T09:00:00Z"));
    let mut seen = std::collections::BTreeSet::new();
    // 300 serials a second on `a` for two seconds: its rate-based step
    // alone would ask for 300 × 600 s, far past the 999 the day holds.
    for _ in 0..2 {
        for _ in 0..300 {
            assert!(seen.insert(a.one("fair").await.1));
        }
        a.advance(Duration::from_secs(1));
        b.advance(Duration::from_secs(1));
        tokio::task::yield_now().await;
    }
    let after_burst = a.period_max("fair", "20260601").await.unwrap();
    assert!(
        after_burst < 999,
        "the burst reserved the whole day: {after_burst}"
    );
    let (first_b, serial_b) = b.one("fair").await;
    assert!(seen.insert(serial_b));
    assert!(first_b > 600, "{first_b}");
    // Both keep asking until the day is full: every counter once.
    let mut full = [false, false];
    while full != [true, true] {
        for (i, rig) in [&a, &b].into_iter().enumerate() {
            if full[i] {
                continue;
            }
            match rig.issue("fair", 1).await {
                Ok(issued) => assert!(seen.insert(issued.serials[0].clone())),
                Err(IssueError::SerialExhausted(_)) => full[i] = true,
                Err(e) => panic!("{e:?}"),
            }
        }
    }
    assert_eq!(seen.len(), 999);
    let want: std::collections::BTreeSet<String> =
        (1..=999).map(|i| format!("F20260601{i:03}")).collect();
    assert_eq!(seen, want);
}

/// Near the end of a period, a fetch reserves what the rest of the period
/// will use at the measured rate (a quarter more), less what memory still
/// holds: the counters stranded at the period's end stay within that
/// quarter, where the rate-based step alone (a segment target's worth,
/// twice over with the next segment) would strand more than the period used.
#[tokio::test]
async fn the_step_is_cut_to_what_the_rest_of_the_period_will_use() {
    let rate = Serial::new("rate", "R{yyyy}{MM}{dd}{seq}", Reset::Day);
    let (_store, rig) = rate.rig("2026-06-01T23:50:00Z").await;
    // 100 serials a second for the period's last 10 minutes.
    for _ in 0..600 {
        for _ in 0..100 {
            rig.one("rate").await;
        }
        rig.advance(Duration::from_secs(1));
        tokio::task::yield_now().await;
    }
    let issued: i64 = 60_000;
    let reserved = rig.period_max("rate", "20260601").await.unwrap();
    // A quarter more than what was used, and the first segments (fetched
    // before any rate was measured).
    let bound = issued + issued / 4 + 1_000;
    assert!(
        reserved <= bound,
        "reserved {reserved} for {issued} issued in the period (bound {bound})"
    );
}

/// Global ordering: every counter is reserved at request time, exactly, so
/// a period's counters have no gap, whichever instance asks.
#[tokio::test]
async fn global_serials_have_no_gap_across_instances() {
    let mut g = Serial::new("g", "G{yyyy}{MM}{dd}{seq:06}", Reset::Day);
    (g.step, g.ordering) = (1000, IdOrdering::Global);
    let store = g.store().await;
    let now = at("2026-06-01T10:00:00Z");
    let rigs: Vec<Rig> = (0..3).map(|_| instance(&store, now)).collect();
    let mut counters = Vec::new();
    let mut last = 0;
    for i in 0..300 {
        let (counter, serial) = rigs[i % 3].one("g").await;
        assert!(counter > last, "global order: {counter} after {last}");
        last = counter;
        assert_eq!(serial, format!("G20260601{counter:06}"));
        counters.push(counter);
    }
    assert_eq!(counters, (1..=300).collect::<Vec<_>>());
    assert_eq!(rigs[0].period_max("g", "20260601").await, Some(300));
}

/// Many tasks of two instances cross midnight together: every serial once,
/// each period's counters unique, and each period's row made once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_crossing_midnight_hand_out_every_serial_once() {
    let mut x = Serial::new("x", "X{yyyy}{MM}{dd}{seq:07}", Reset::Day);
    x.step = 50;
    let store = x.store().await;
    let all = on_two_instances(&store, "2026-12-31T23:59:59.900Z", |_, rig| async move {
        let mut got = Vec::new();
        for i in 0..200 {
            if i == 100 {
                // Each instance's clock passes midnight on its own.
                rig.set(at("2027-01-01T00:00:00.100Z"));
            }
            got.push(rig.one("x").await.1);
        }
        got
    })
    .await;
    assert_eq!(all.len(), 16 * 200);
    let days: HashSet<&str> = all.iter().map(|s| &s[1..9]).collect();
    assert_eq!(days, HashSet::from(["20261231", "20270101"]));
    let periods = store
        .list_periods(&SeqName::parse("x").unwrap())
        .await
        .unwrap();
    let keys: Vec<&str> = periods.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, ["20261231", "20270101"]);
}

/// A retired period's buffer leaves memory: ten days of a daily counter
/// keep at most two counters live.
#[tokio::test]
async fn old_periods_leave_memory() {
    let daily = Serial::new("d", "D{yyyy}{MM}{dd}{seq}", Reset::Day);
    let (_store, rig) = daily.rig(NOON).await;
    for _ in 0..10 {
        rig.one("d").await;
        rig.advance(Duration::from_secs(86_400));
    }
    let live = rig.allocator.names_in_memory().live;
    // The parent (answering "serial") and today's counter.
    assert!(live <= 3, "{live} buffers live after ten days");
}

/// Settings changed by PATCH reach the instance that answers at once
/// (`reload`); a sequence made plain again is served by the allocator.
#[tokio::test]
async fn changed_settings_take_effect_and_a_plain_sequence_goes_back_to_the_allocator() {
    let (_store, rig) = Serial::new("c", "A{seq:03}", Reset::Never).rig(NOON).await;
    assert_eq!(rig.next("c").await, Err(AllocError::Serial));
    assert_eq!(rig.one("c").await.1, "A001");
    let b = Serial::new("c", "B{yyyy}-{seq:05}", Reset::Never);
    rig.patch("c", &b.patch()).await;
    let (counter, serial) = rig.one("c").await;
    assert!(serial.starts_with("B2026-"), "{serial}");
    assert!(counter > 1, "the counter goes on: {counter}");
    rig.patch("c", &plain()).await;
    let id = rig.next("c").await.unwrap();
    assert!(id >= 1);
    assert_eq!(rig.issue("c", 1).await, Err(IssueError::Plain));
}

#[tokio::test]
async fn a_missing_sequence_is_not_found() {
    let store = Arc::new(MemoryStore::new());
    let rig = instance(&store, at(NOON));
    assert_eq!(rig.issue("nope", 1).await, Err(IssueError::NotFound));
}

/// A change of settings never takes serials back to an earlier period: the
/// wall clock stepped back into the day before, the sequence is PATCHed,
/// and its serials stay in the later day they had reached.
#[tokio::test]
async fn a_settings_change_after_the_clock_stepped_back_keeps_the_later_period() {
    let d = Serial::new("d", "D{yyyy}{MM}{dd}-{seq:04}", Reset::Day);
    let (_store, rig) = d.rig("2026-12-01T00:00:05Z").await;
    assert_eq!(rig.one("d").await.1, "D20261201-0001");
    rig.set(at("2026-11-30T23:59:58Z"));
    assert_eq!(rig.one("d").await.1, "D20261201-0002");
    rig.patch("d", &d.widen().patch()).await;
    let (_, serial) = rig.one("d").await;
    assert!(serial.starts_with("D20261201-"), "{serial}");
    let name = SeqName::parse("d").unwrap();
    assert_eq!(rig.serials.status(&name).unwrap().key, "20261201");
    // A change of reset too: the period of the later instant, never of now.
    let monthly = Serial::new("d", "M{yyyy}{MM}-{seq:04}", Reset::Month);
    rig.patch("d", &monthly.widen().patch()).await;
    let (_, serial) = rig.one("d").await;
    assert!(serial.starts_with("M202612-"), "{serial}");
    assert!(rig.period_max("d", "202611").await.is_none());
}

/// Runs `task(t, rig)` for 16 tasks `t` at once, on two instances over
/// `store` at `now` (task `t` on instance `t % 2`): every serial they
/// answered, each asserted to come once.
async fn on_two_instances<F, Fut>(store: &Arc<MemoryStore>, now: &str, task: F) -> HashSet<String>
where
    F: Fn(usize, Arc<Rig>) -> Fut,
    Fut: std::future::Future<Output = Vec<String>> + Send + 'static,
{
    let rigs: Vec<Arc<Rig>> = (0..2).map(|_| Arc::new(instance(store, at(now)))).collect();
    let tasks: Vec<_> = (0..16)
        .map(|t| tokio::spawn(task(t, rigs[t % 2].clone())))
        .collect();
    let mut all = HashSet::new();
    for t in tasks {
        for serial in t.await.unwrap() {
            assert!(all.insert(serial.clone()), "{serial} twice");
        }
    }
    all
}

/// Settings refresh on a paused tokio clock: an instance over `store`
/// refreshing every [`EVERY`].
const EVERY: Duration = Duration::from_secs(2);

fn refreshing(store: &Arc<MemoryStore>) -> Rig {
    let rig = instance(store, at(NOON));
    seqd::serial::refresh::spawn(&rig.serials, EVERY);
    rig
}

/// Lets one refresh interval pass on the paused clock, without a request to
/// the instance, and asserts that a refresh round completed in it (the
/// clock does not move while the test yields).
async fn one_interval(rig: &Rig) {
    let before = rig.serials.refresh_rounds();
    tokio::time::sleep(EVERY).await;
    for _ in 0..100 {
        if rig.serials.refresh_rounds() > before {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(
        rig.serials.refresh_rounds() > before,
        "no refresh round within one interval"
    );
}

/// Changes the row as another instance's PATCH or an SQL statement would:
/// this instance is not told.
async fn change_elsewhere(store: &Arc<MemoryStore>, name: &str, patch: SequencePatch) {
    store
        .update(&SeqName::parse(name).unwrap(), &patch)
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_plain_sequence_made_serial_elsewhere_stops_serving_plain_ids_within_one_refresh() {
    let store = common::memory_with("p", 0, 100_000);
    let rig = refreshing(&store);
    assert_eq!(rig.next("p").await, Ok(1));
    let serial = Serial::new("p", "P{seq:03}", Reset::Never);
    change_elsewhere(&store, "p", serial.patch()).await;
    one_interval(&rig).await;
    assert_eq!(rig.next("p").await, Err(AllocError::Serial));
    assert_eq!(rig.one("p").await.1, "P001");
}

#[tokio::test(start_paused = true)]
async fn a_serial_sequence_made_plain_elsewhere_serves_ids_within_one_refresh() {
    let store = Serial::new("s", "S{seq:03}", Reset::Never).store().await;
    let rig = refreshing(&store);
    assert_eq!(rig.next("s").await, Err(AllocError::Serial));
    assert_eq!(rig.one("s").await.1, "S001");
    change_elsewhere(&store, "s", plain()).await;
    one_interval(&rig).await;
    assert!(rig.next("s").await.is_ok());
    assert_eq!(rig.issue("s", 1).await, Err(IssueError::Plain));
}

#[tokio::test(start_paused = true)]
async fn a_format_changed_elsewhere_prints_the_next_serial_within_one_refresh() {
    let store = Serial::new("f", "A{seq:03}", Reset::Never).store().await;
    let rig = refreshing(&store);
    assert_eq!(rig.one("f").await.1, "A001");
    let b = Serial::new("f", "B-{seq:05}", Reset::Never);
    change_elsewhere(&store, "f", b.patch()).await;
    one_interval(&rig).await;
    let (_, serial) = rig.one("f").await;
    assert!(serial.starts_with("B-"), "{serial}");
}

#[tokio::test(start_paused = true)]
async fn a_full_counter_widened_elsewhere_serves_again_within_one_refresh() {
    let mut w = Serial::new("w", "W{seq:01}", Reset::Never);
    w.step = 1;
    let store = w.store().await;
    let rig = refreshing(&store);
    for i in 1..=9 {
        assert_eq!(rig.one("w").await.1, format!("W{i}"));
    }
    assert!(rig.exhausted("w", 1).await);
    change_elsewhere(&store, "w", w.widen().patch()).await;
    one_interval(&rig).await;
    assert_eq!(rig.one("w").await.1, "W10");
}

#[tokio::test(start_paused = true)]
async fn an_ordering_made_global_elsewhere_takes_the_next_id_from_the_row_within_one_refresh() {
    let store = common::memory_with("g", 0, 1000);
    let rig = refreshing(&store);
    assert_eq!(rig.next("g").await, Ok(1));
    let global = SequencePatch {
        ordering: Some(IdOrdering::Global),
        ..Default::default()
    };
    change_elsewhere(&store, "g", global).await;
    one_interval(&rig).await;
    // Not 2 from the segment in memory: the row's next ID.
    assert_eq!(rig.next("g").await, Ok(1001));
}

#[tokio::test(start_paused = true)]
async fn the_settings_refresh_ends_when_its_instance_is_dropped() {
    let store = Arc::new(MemoryStore::new());
    let rig = instance(&store, at(NOON));
    let task = seqd::serial::refresh::spawn(&rig.serials, EVERY);
    tokio::time::sleep(EVERY * 2).await;
    assert!(!task.is_finished());
    drop(rig);
    tokio::time::timeout(EVERY * 2, task)
        .await
        .expect("the task ended")
        .unwrap();
}

/// A request the capacity cannot serve whole is refused having taken
/// nothing (a refused request consumes no serial capacity): not
/// the counters memory holds, not the row's. The next request gets the
/// very next counter, and the rest of the period is still served.
#[tokio::test]
async fn a_refused_request_takes_no_counter_from_memory_or_the_row() {
    let k = Serial::new("k", "K{seq:02}", Reset::Never);
    let (_store, rig) = k.rig(NOON).await;
    assert_eq!(rig.one("k").await, (1, "K01".into()));
    // More than the whole period holds: refused before anything is asked.
    let before = rig.period_max("k", "").await;
    assert!(rig.exhausted("k", 100).await);
    assert_eq!(rig.period_max("k", "").await, before);
    assert_eq!(rig.one("k").await, (2, "K02".into()));
    // 90 fit (3..=92); then 8 do not (7 are left): refused, and the 7 stay.
    let ninety = rig.issue("k", 90).await.unwrap();
    assert_eq!(ninety.serials.first().unwrap(), "K03");
    assert_eq!(ninety.serials.last().unwrap(), "K92");
    for _ in 0..3 {
        assert!(rig.exhausted("k", 8).await);
    }
    assert_eq!(rig.one("k").await, (93, "K93".into()));
    let rest = rig.issue("k", 6).await.unwrap();
    assert_eq!(rest.serials, ["K94", "K95", "K96", "K97", "K98", "K99"]);
    assert!(rig.exhausted("k", 1).await);
    assert_eq!(rig.period_max("k", "").await, Some(99));
}

/// Global ordering reserves at request time: a request that does not fit
/// leaves the row's `max_id` where it was, however often it is repeated.
#[tokio::test]
async fn a_refused_global_request_leaves_the_row_unchanged() {
    let (_store, rig) = Serial::global("q", "Q{seq:02}").rig(NOON).await;
    assert_eq!(rig.one("q").await, (1, "Q01".into()));
    rig.issue("q", 90).await.unwrap();
    assert_eq!(rig.period_max("q", "").await, Some(91));
    for n in [9, 50, 100, 9] {
        assert!(rig.exhausted("q", n).await);
        assert_eq!(rig.period_max("q", "").await, Some(91), "after {n}");
    }
    assert_eq!(rig.one("q").await, (92, "Q92".into()));
    assert_eq!(rig.period_max("q", "").await, Some(92));
}

/// Global requests merged into one reservation: when their total does not
/// fit, each is reserved on its own in arrival order, so a large one that
/// does not fit does not take a small one down with it.
#[tokio::test]
async fn a_merged_global_request_that_does_not_fit_refuses_only_itself() {
    let (store, rig) = Serial::global("mg", "M{seq:02}").rig(NOON).await;
    let rig = Arc::new(rig);
    rig.issue("mg", 60).await.unwrap();
    let counter = "mg@";
    let reserves = store.reserves(counter);
    // The first request's reservation waits at the gate; two more queue
    // behind it, to be merged into the next one.
    store.close_gate();
    let ask = |n: u64| {
        let rig = rig.clone();
        tokio::spawn(async move { rig.issue("mg", n).await })
    };
    let first = ask(1);
    for _ in 0..1000 {
        if store.reserves(counter) > reserves {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(
        store.reserves(counter),
        reserves + 1,
        "the first is at the gate"
    );
    let large = ask(50);
    let small = ask(1);
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    store.open_gate();
    assert_eq!(first.await.unwrap().unwrap().serials, ["M61"]);
    assert!(matches!(
        large.await.unwrap(),
        Err(IssueError::SerialExhausted(_))
    ));
    assert_eq!(small.await.unwrap().unwrap().serials, ["M62"]);
    assert_eq!(rig.period_max("mg", "").await, Some(62));
}

/// Two instances and many tasks on a two-digit counter: the row never
/// passes 99, whichever instance reserves, and every counter is served
/// once (the store is the in-memory one; tests/in_process/serial_capacity.rs runs
/// the same on the databases).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_never_reserve_past_the_capacity() {
    let mut z = Serial::new("z", "Z{seq:02}", Reset::Never);
    z.step = 7;
    let store = z.store().await;
    let all = on_two_instances(&store, NOON, |t, rig| async move {
        let mut got = Vec::new();
        loop {
            match rig.issue("z", 1 + (t as u64 % 3)).await {
                Ok(issued) => got.extend(issued.serials),
                Err(IssueError::SerialExhausted(_)) => break,
                Err(e) => panic!("{e:?}"),
            }
            tokio::task::yield_now().await;
        }
        // Draining one by one: what memory still holds is served.
        while let Ok(issued) = rig.issue("z", 1).await {
            got.extend(issued.serials);
        }
        got
    })
    .await;
    assert_eq!(store.max_id("z@"), Some(99));
    let want: HashSet<String> = (1..=99).map(|i| format!("Z{i:02}")).collect();
    assert_eq!(all, want);
}
