//! The allocator core against the in-memory store with fault injection and a
//! manual clock: prefetch, switch, waiting, failures, batches, bounds.

use crate::support::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use common::{fixed_step_allocator as fixed, memory_with};
use seqd::allocator::{AllocError, Allocator, AllocatorConfig, FixedStep, ManualClock, Totals};
use seqd::domain::{Count, SeqName};
use seqd::store::memory::MemoryStore;

fn name(s: &str) -> SeqName {
    SeqName::parse(s).unwrap()
}

fn config() -> AllocatorConfig {
    AllocatorConfig {
        wait_timeout: Duration::from_secs(3),
        ..AllocatorConfig::default()
    }
}

/// Lets spawned fetch tasks run until `cond` holds (bounded; no sleeping, so
/// paused time does not move). The bound is large: on a multi-thread runtime
/// the other tasks run on worker threads that a loaded machine may not
/// schedule for a while, and 10,000 yields once passed before they did.
async fn until(mut cond: impl FnMut() -> bool) {
    for _ in 0..2_000_000 {
        if cond() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("condition not reached");
}

#[tokio::test]
async fn first_request_loads_the_first_segment() {
    let store = memory_with("a", 0, 100);
    let alloc = fixed(&store, config());
    assert_eq!(alloc.next(&name("a")).await.unwrap(), 1);
    assert_eq!(store.reserves("a"), 1);
    let snap = alloc.snapshot(&name("a")).unwrap();
    let cur = snap.current.unwrap();
    assert_eq!((cur.first, cur.last, cur.cursor), (1, 100, Some(2)));
}

#[tokio::test]
async fn prefetch_starts_at_the_ten_percent_mark() {
    let store = memory_with("a", 0, 100);
    let alloc = fixed(&store, config());
    let a = name("a");
    for expected in 1..=10 {
        assert_eq!(alloc.next(&a).await.unwrap(), expected);
    }
    // 10 of 100 used: exactly at the mark, not past it.
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    assert_eq!(store.reserves("a"), 1, "no prefetch before passing 10%");
    assert_eq!(alloc.next(&a).await.unwrap(), 11);
    until(|| alloc.snapshot(&a).unwrap().next.is_some()).await;
    assert_eq!(store.reserves("a"), 2, "one prefetch once past 10%");
    let next = alloc.snapshot(&a).unwrap().next.unwrap();
    assert_eq!((next.first, next.last), (101, 200));
}

#[tokio::test]
async fn switches_to_the_next_segment_without_a_gap() {
    let store = memory_with("a", 0, 10);
    let alloc = fixed(&store, config());
    let a = name("a");
    let mut got = Vec::new();
    for _ in 0..35 {
        got.push(alloc.next(&a).await.unwrap());
    }
    assert_eq!(got, (1..=35).collect::<Vec<_>>());
    assert!(store.reserves("a") >= 4);
    assert_eq!(store.max_in_flight("a"), 1);
}

#[tokio::test(start_paused = true)]
async fn waits_when_both_segments_are_empty_then_succeeds_when_the_fetch_lands() {
    let store = memory_with("a", 0, 5);
    let alloc = fixed(&store, config());
    let a = name("a");
    assert_eq!(alloc.next(&a).await.unwrap(), 1);
    assert_eq!(alloc.next(&a).await.unwrap(), 2); // past 10% of 5: prefetch 6..=10
    until(|| alloc.snapshot(&a).unwrap().next.is_some()).await;
    let waits_before = alloc.snapshot(&a).unwrap().waits; // the first load waited
    store.close_gate();
    // drain current (3..=5) and next (6..=10); the refill is held at the gate
    for expected in 3..=10 {
        assert_eq!(alloc.next(&a).await.unwrap(), expected);
    }
    let waiter = tokio::spawn({
        let alloc = alloc.clone();
        let a = a.clone();
        async move { alloc.next(&a).await }
    });
    until(|| alloc.snapshot(&a).unwrap().waits == waits_before + 1).await;
    assert!(!waiter.is_finished(), "the request waits for the fetch");
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(!waiter.is_finished(), "still waiting within the timeout");
    store.open_gate();
    assert_eq!(waiter.await.unwrap().unwrap(), 11);
}

#[tokio::test(start_paused = true)]
async fn gives_up_after_the_wait_timeout_with_unavailable() {
    let store = memory_with("a", 0, 5);
    let alloc = fixed(&store, config());
    store.close_gate();
    let started = tokio::time::Instant::now();
    let err = alloc.next(&name("a")).await.unwrap_err();
    assert!(
        matches!(
            err,
            AllocError::Unavailable {
                storage_failing: false
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(3),
        "waited exactly the timeout (paused clock)"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_store_then_recovering_never_leaves_the_sequence_stuck() {
    let store = memory_with("a", 0, 5);
    let alloc = fixed(&store, config());
    let a = name("a");
    store.set_failing("a", true);
    let err = alloc.next(&a).await.unwrap_err();
    assert_eq!(
        err,
        AllocError::Unavailable {
            storage_failing: true
        }
    );
    let attempts = store.reserves("a");
    assert!(
        attempts >= 3,
        "fetch retried with backoff while waiting ({attempts})"
    );
    store.set_failing("a", false);
    // The retry loop (not a new request) brings it back.
    assert_eq!(alloc.next(&a).await.unwrap(), 1);
    assert_eq!(store.max_in_flight("a"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_few_failed_fetches_within_the_timeout_are_invisible_to_clients() {
    let store = memory_with("a", 0, 5);
    let alloc = fixed(&store, config());
    store.fail_next("a", 3);
    assert_eq!(alloc.next(&name("a")).await.unwrap(), 1);
    assert_eq!(store.reserves("a"), 4);
    assert_eq!(alloc.snapshot(&name("a")).unwrap().fetch_errors, 3);
}

/// The instance's totals (what the monitor's chart draws) count every
/// sequence's fetches, their latency on the allocator's clock, waits and
/// failed fetches as they happen: the same numbers as a walk over every
/// buffer.
#[tokio::test(start_paused = true)]
async fn the_instance_totals_add_up_every_sequence() {
    let store = memory_with("a", 0, 100);
    store.insert("b", 0, 100);
    let clock = Arc::new(ManualClock::new());
    let alloc = Allocator::with_parts(store.clone(), config(), clock.clone(), Arc::new(FixedStep));
    assert_eq!(alloc.totals(), Totals::default());
    // b: three failed fetches, then its first segment (its request waits).
    store.fail_next("b", 3);
    assert_eq!(alloc.next(&name("b")).await.unwrap(), 1);
    // a: its first fetch is held at the gate while the clock moves 250 ms.
    store.close_gate();
    let first = tokio::spawn({
        let alloc = alloc.clone();
        async move { alloc.next(&name("a")).await }
    });
    until(|| store.reserves("a") == 1).await;
    clock.advance(Duration::from_millis(250));
    store.open_gate();
    assert_eq!(first.await.unwrap().unwrap(), 1);
    let totals = alloc.totals();
    assert_eq!(
        totals,
        Totals {
            fetches: 2,
            fetch_seconds: 0.25,
            global_reservations: 0,
            waits: 2,
            fetch_errors: 3,
        }
    );
    let mut walked = (0, 0, 0);
    alloc.for_each_stats(|_, s| {
        walked.0 += s.fetches;
        walked.1 += s.waits;
        walked.2 += s.fetch_errors;
    });
    assert_eq!(walked, (totals.fetches, totals.waits, totals.fetch_errors));
}

#[tokio::test]
async fn a_batch_spans_a_segment_boundary_in_order() {
    let store = memory_with("a", 0, 10);
    let alloc = fixed(&store, config());
    let a = name("a");
    assert_eq!(alloc.next(&a).await.unwrap(), 1);
    let batch = alloc.batch(&a, Count::new(25).unwrap()).await.unwrap();
    assert_eq!(
        batch.ids().collect::<Vec<_>>(),
        (2..=26).collect::<Vec<_>>()
    );
    assert!(
        batch.ranges.len() >= 3,
        "drawn from several segments: {:?}",
        batch.ranges
    );
    assert_eq!(
        alloc.next(&a).await.unwrap(),
        27,
        "the next ID follows the batch"
    );
}

#[tokio::test]
async fn exhaustion_near_i64_max_stops_without_wrapping() {
    let store = Arc::new(MemoryStore::new());
    store.insert("a", i64::MAX - 15, 10);
    let alloc = fixed(&store, config());
    let a = name("a");
    let mut last = 0;
    let mut issued = 0;
    loop {
        match alloc.next(&a).await {
            Ok(id) => {
                assert!(id > last, "strictly increasing, never wrapping");
                last = id;
                issued += 1;
            }
            Err(e) => {
                assert_eq!(e, AllocError::Exhausted);
                break;
            }
        }
        assert!(issued <= 15, "more IDs than room below i64::MAX");
    }
    // Only one full row step fits below i64::MAX: the last 5 IDs are never issued.
    assert_eq!((issued, last), (10, i64::MAX - 5));
    let batch_err = alloc.batch(&a, Count::new(3).unwrap()).await.unwrap_err();
    assert_eq!(batch_err, AllocError::Exhausted);
}

#[tokio::test]
async fn a_segment_ending_exactly_at_i64_max_is_served_to_the_last_id() {
    let store = Arc::new(MemoryStore::new());
    store.insert("a", i64::MAX - 20, 10);
    let alloc = fixed(&store, config());
    let batch = alloc
        .batch(&name("a"), Count::new(20).unwrap())
        .await
        .unwrap();
    assert_eq!(batch.ids().last(), Some(i64::MAX));
    assert_eq!(
        alloc.next(&name("a")).await.unwrap_err(),
        AllocError::Exhausted
    );
}

#[tokio::test]
async fn unknown_names_are_not_found_and_remembered_briefly() {
    let store = Arc::new(MemoryStore::new());
    let clock = ManualClock::new();
    let alloc = Allocator::with_parts(
        store.clone(),
        config(),
        Arc::new(clock.clone()),
        Arc::new(FixedStep),
    );
    let x = name("x");
    assert_eq!(alloc.next(&x).await.unwrap_err(), AllocError::NotFound);
    assert_eq!(alloc.next(&x).await.unwrap_err(), AllocError::NotFound);
    assert_eq!(
        store.reserves("x"),
        1,
        "the second miss is answered from memory"
    );
    // Created by SQL meanwhile: served once the negative entry expires.
    store.insert("x", 0, 10);
    clock.advance(Duration::from_secs(2));
    assert_eq!(alloc.next(&x).await.unwrap(), 1);
    assert!(alloc.snapshot(&x).is_some(), "now live");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_requests_share_one_fetch() {
    let store = memory_with("a", 0, 1000);
    let alloc = fixed(&store, config());
    store.close_gate();
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let alloc = alloc.clone();
            tokio::spawn(async move { alloc.next(&name("a")).await.unwrap() })
        })
        .collect();
    until(|| store.reserves("a") >= 1).await;
    store.open_gate();
    let mut ids = HashSet::new();
    for t in tasks {
        assert!(ids.insert(t.await.unwrap()));
    }
    assert_eq!(ids.len(), 64);
    assert_eq!(store.max_in_flight("a"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_tasks_get_unique_ids_and_each_sees_them_increase() {
    let store = memory_with("a", 0, 7);
    let alloc = fixed(&store, config());
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let alloc = alloc.clone();
            tokio::spawn(async move {
                let a = name("a");
                let mut mine = Vec::new();
                for j in 0..500 {
                    if (i + j) % 3 == 0 {
                        let b = alloc
                            .batch(&a, Count::new(1 + (j % 17) as u32).unwrap())
                            .await
                            .unwrap();
                        mine.extend(b.ids());
                    } else {
                        mine.push(alloc.next(&a).await.unwrap());
                    }
                }
                mine
            })
        })
        .collect();
    common::unique_increasing("16 tasks", tasks).await;
    assert_eq!(store.max_in_flight("a"), 1);
}

#[tokio::test]
async fn a_range_below_ids_already_served_is_never_reissued() {
    let store = memory_with("a", 0, 10);
    let alloc = fixed(&store, config());
    let a = name("a");
    for _ in 0..15 {
        alloc.next(&a).await.unwrap();
    }
    until(|| alloc.snapshot(&a).unwrap().next.is_some()).await; // 21..=30 fetched
                                                                // The operator recreates the row lower than what was served.
    store.insert("a", 0, 10);
    let mut seen = HashSet::new();
    let mut last = 15;
    for _ in 0..40 {
        let id = alloc.next(&a).await.unwrap();
        assert!(id > last, "{id} after {last}");
        assert!(seen.insert(id));
        last = id;
    }
}

/// Discovery of a missing name under parallel threads: however the callers
/// interleave with the load that finds the name missing, the name costs one
/// query per negative-cache interval (the manual clock never advances here).
/// Repeated on fresh allocators to give the interleavings many chances.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_callers_of_a_missing_name_cost_one_query() {
    for round in 0..200 {
        let store = Arc::new(MemoryStore::new());
        let alloc = fixed(&store, config());
        let tasks: Vec<_> = (0..64)
            .map(|i| {
                let alloc = alloc.clone();
                let n = name(if i % 2 == 0 { "ghost-a" } else { "ghost-b" });
                tokio::spawn(async move { alloc.next(&n).await })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap(), Err(AllocError::NotFound), "round {round}");
        }
        assert_eq!(store.reserves("ghost-a"), 1, "round {round}");
        assert_eq!(store.reserves("ghost-b"), 1, "round {round}");
    }
}

/// A row that went back far below what this instance served (3,000 IDs at
/// step 10, then `max_id = 0`): the next requests succeed at once, above
/// everything served, and the whole catch-up costs ONE extra reservation
/// (not one per row step, as retrying the planned size would).
#[tokio::test(start_paused = true)]
async fn a_row_that_went_far_back_is_skipped_with_one_reservation() {
    let store = memory_with("r", 0, 10);
    let alloc = fixed(&store, config());
    let r = name("r");
    for _ in 0..3 {
        alloc.batch(&r, Count::new(1000).unwrap()).await.unwrap();
    }
    until(|| alloc.snapshot(&r).unwrap().next.is_some()).await; // 3001..=3010
    store.insert("r", 0, 10);
    let reserves = store.reserves("r");
    let mut last = 3000;
    for _ in 0..20 {
        let id = alloc.next(&r).await.expect("served at once");
        assert!(id > last, "{id} after {last}");
        last = id;
    }
    // 3001..=3010 came from memory; then one regressed reservation (1..=10),
    // one catch-up of 10 + 3000 IDs (11..=3020, trimmed to 3011..=3020), and
    // at most the prefetch of the segment after it.
    let extra = store.reserves("r") - reserves;
    assert!((2..=3).contains(&extra), "{extra} reservations");
    assert!(store.max_id("r").unwrap() >= 3020);
    assert_eq!(alloc.snapshot(&r).unwrap().fetch_errors, 0);
}

/// A request for a name whose lookup never answers, from a caller that goes
/// away: its pending entry goes with it.
#[tokio::test(start_paused = true)]
async fn a_caller_that_leaves_takes_its_pending_entry_with_it() {
    let store = memory_with("slow", 0, 100);
    store.close_gate();
    let alloc = fixed(&store, config());
    let left = tokio::time::timeout(Duration::from_millis(10), alloc.next(&name("slow"))).await;
    assert!(left.is_err(), "the lookup is held at the gate");
    assert_eq!(alloc.names_in_memory().pending, 0);
    // A caller arriving while that lookup's fetch is still in flight joins it
    // rather than starting a second fetch for the name.
    let slow = name("slow");
    let next = alloc.next(&slow);
    store.open_gate();
    assert_eq!(next.await, Ok(1));
    assert_eq!(store.reserves("slow"), 1, "one fetch for both callers");
    let names = alloc.names_in_memory();
    assert_eq!((names.live, names.pending), (1, 0));
}

/// A lookup that ends "unavailable" (the database is down) leaves no pending
/// entry, and no fetch keeps retrying for the name once nobody asks for it.
#[tokio::test(start_paused = true)]
async fn an_unavailable_lookup_leaves_no_entry_and_no_retrying_fetch() {
    let store = memory_with("down", 0, 100);
    store.set_failing("down", true);
    let alloc = fixed(&store, config());
    let got = alloc.next(&name("down")).await;
    assert!(
        matches!(got, Err(AllocError::Unavailable { .. })),
        "{got:?}"
    );
    assert_eq!(alloc.names_in_memory().pending, 0);
    let tried = store.reserves("down");
    assert!(tried > 1, "the fetch retried while the caller waited");
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(
        store.reserves("down") <= tried + 1,
        "{} reservations after the caller left ({tried} before)",
        store.reserves("down")
    );
}

/// Concurrent callers share one pending entry; it goes when the last leaves.
#[tokio::test(start_paused = true)]
async fn a_pending_entry_stays_while_any_caller_waits() {
    let store = memory_with("shared", 0, 100);
    store.close_gate();
    let alloc = fixed(&store, config());
    let waiting = {
        let alloc = alloc.clone();
        tokio::spawn(async move { alloc.next(&name("shared")).await })
    };
    until(|| alloc.names_in_memory().pending == 1).await;
    let left = tokio::time::timeout(Duration::from_millis(10), alloc.next(&name("shared"))).await;
    assert!(left.is_err());
    assert_eq!(
        alloc.names_in_memory().pending,
        1,
        "the first caller still waits"
    );
    assert_eq!(
        store.reserves("shared"),
        1,
        "both callers shared one lookup"
    );
    store.open_gate();
    assert_eq!(waiting.await.unwrap(), Ok(1));
    let names = alloc.names_in_memory();
    assert_eq!((names.live, names.pending), (1, 0));
}

// ---------------------------------------------------------------------------
// giving back at shutdown

/// The unused tail of the last reservation goes back to the row: a
/// restarted instance continues at the next ID.
#[tokio::test]
async fn give_back_lowers_the_row_to_the_last_id_handed_out() {
    let store = memory_with("a", 0, 1000);
    let alloc = fixed(&store, config());
    for expected in 1..=5 {
        assert_eq!(alloc.next(&name("a")).await.unwrap(), expected);
    }
    let report = alloc.give_back(4, Duration::from_secs(5)).await;
    assert_eq!((report.sequences, report.ids), (1, 995));
    assert_eq!(store.max_id("a"), Some(5));
    let after = fixed(&store, config());
    assert_eq!(after.next(&name("a")).await.unwrap(), 6);
}

/// A next segment contiguous with the current one goes back with the
/// current one's tail; one that another instance's reservation separates
/// from it goes back alone.
#[tokio::test]
async fn give_back_takes_only_the_run_this_instance_reserved_at_the_top() {
    // contiguous: current 1..=10 (2 used), next 11..=20
    let store = memory_with("a", 0, 10);
    let alloc = fixed(&store, config());
    for _ in 0..2 {
        alloc.next(&name("a")).await.unwrap();
    }
    until(|| alloc.snapshot(&name("a")).unwrap().next.is_some()).await;
    alloc.give_back(4, Duration::from_secs(5)).await;
    assert_eq!(store.max_id("a"), Some(2));

    // separated: current 1..=10 (2 used), another instance 11..=20, next 21..=30
    let store = memory_with("b", 0, 10);
    let alloc = fixed(&store, config());
    alloc.next(&name("b")).await.unwrap();
    store.close_gate();
    alloc.next(&name("b")).await.unwrap(); // past the mark: the prefetch waits at the gate
    until(|| store.max_in_flight("b") == 1).await;
    store.insert("b", 20, 10); // another instance reserves 11..=20 meanwhile
    store.open_gate();
    until(|| alloc.snapshot(&name("b")).unwrap().next.is_some()).await;
    let next = alloc.snapshot(&name("b")).unwrap().next.unwrap();
    assert_eq!((next.first, next.last), (21, 30));
    let report = alloc.give_back(4, Duration::from_secs(5)).await;
    assert_eq!((report.sequences, report.ids), (1, 10));
    assert_eq!(
        store.max_id("b"),
        Some(20),
        "the other instance's range stays taken"
    );

    // and when another instance reserved after this one's last reservation,
    // the compare-and-set finds another max_id and nothing changes
    let store = memory_with("c", 0, 10);
    let alloc = fixed(&store, config());
    alloc.next(&name("c")).await.unwrap();
    store.insert("c", 20, 10);
    let report = alloc.give_back(4, Duration::from_secs(5)).await;
    assert_eq!((report.reserved_since, report.ids), (1, 0));
    assert_eq!(store.max_id("c"), Some(20));
}

/// A sequence `seq` of step 10 whose first segment is in use and whose
/// prefetch waits at the store's closed gate.
async fn prefetch_at_the_gate(seq: &str) -> (Arc<MemoryStore>, Allocator) {
    let store = memory_with(seq, 0, 10);
    let alloc = fixed(&store, config());
    alloc.next(&name(seq)).await.unwrap();
    store.close_gate();
    alloc.next(&name(seq)).await.unwrap();
    until(|| store.max_in_flight(seq) == 1).await;
    (store, alloc)
}

/// A sequence whose fetch is in flight gives nothing back (its reservation
/// may land after), and the row keeps every reservation.
#[tokio::test]
async fn give_back_leaves_a_sequence_with_a_fetch_in_flight_alone() {
    let (store, alloc) = prefetch_at_the_gate("a").await;
    let report = alloc.give_back(4, Duration::from_secs(5)).await;
    assert_eq!((report.fetch_in_flight, report.ids), (1, 0));
    store.open_gate();
    until(|| store.max_id("a") == Some(20)).await;
    let after = fixed(&store, config());
    assert_eq!(after.next(&name("a")).await.unwrap(), 21);
}

// ---------------------------------------------------------------------------
// global ordering

/// A global sequence: the first request finds the row global (its segment
/// is given back to the row, untouched since) and from then on every
/// request is reserved at request time, from the sequence's start.
async fn global(store: &Arc<MemoryStore>, name_: &str) -> Allocator {
    store.insert(name_, 0, 1000);
    store.set_ordering(name_, seqd::domain::IdOrdering::Global);
    let alloc = fixed(store, config());
    // first use: a segment reservation that finds the row global, given back
    let first = alloc.next(&name(name_)).await.unwrap();
    assert_eq!(
        first, 1,
        "served by the database at request time, from the start"
    );
    assert_eq!(store.max_id(name_), Some(1));
    alloc
}

#[tokio::test]
async fn global_requests_arriving_during_a_reservation_share_the_next_one_in_arrival_order() {
    let store = Arc::new(MemoryStore::new());
    let alloc = global(&store, "g").await;
    let before = store.reserves("g");
    store.close_gate();
    let g = name("g");
    // a's reservation starts (and waits at the gate) before b, c, d arrive
    let a = tokio::spawn({
        let alloc = alloc.clone();
        async move { alloc.next(&name("g")).await }
    });
    until(|| store.reserves("g") == before + 1).await;
    let b = alloc.batch(&g, Count::new(2).unwrap());
    let c = alloc.next(&g);
    let d = alloc.batch(&g, Count::new(3).unwrap());
    let opener = async {
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        store.open_gate();
    };
    // first polled in this order: b, c, d queue behind a's reservation
    let (b, c, d, ()) = tokio::join!(b, c, d, opener);
    assert_eq!(a.await.unwrap().unwrap(), 2);
    assert_eq!(b.unwrap().ids().collect::<Vec<_>>(), vec![3, 4]);
    assert_eq!(c.unwrap(), 5);
    assert_eq!(d.unwrap().ids().collect::<Vec<_>>(), vec![6, 7, 8]);
    assert_eq!(
        store.reserves("g") - before,
        2,
        "one reservation for a, one for b, c and d together"
    );
    assert_eq!(store.max_id("g"), Some(8), "no gap while all callers stay");
}

/// A global sequence's reservations fetch no segment: the instance's totals
/// count them as reservations, not as segment fetches (the monitor's chart
/// marks fetches), with no fetch latency; its own buffer counts each as
/// one of its `fetches`, all of its IDs issued.
#[tokio::test(start_paused = true)]
async fn global_reservations_are_counted_apart_from_segment_fetches() {
    let store = memory_with("plain", 0, 100);
    store.insert("g", 0, 1000);
    store.set_ordering("g", seqd::domain::IdOrdering::Global);
    let clock = Arc::new(ManualClock::new());
    let alloc = Allocator::with_parts(store.clone(), config(), clock, Arc::new(FixedStep));
    // plain: one segment fetch. g: its first use fetches a segment that
    // finds the row global (given back, not counted), then reserves.
    assert_eq!(alloc.next(&name("plain")).await.unwrap(), 1);
    let g = name("g");
    assert_eq!(alloc.next(&g).await.unwrap(), 1);
    for want in 2..=5 {
        assert_eq!(alloc.next(&g).await.unwrap(), want);
    }
    let run = alloc.batch(&g, Count::new(3).unwrap()).await.unwrap();
    assert_eq!(run.ids().collect::<Vec<_>>(), vec![6, 7, 8]);
    let totals = alloc.totals();
    assert_eq!(
        totals.fetches, 1,
        "the plain sequence's segment only: {totals:?}"
    );
    assert_eq!(totals.global_reservations, 6, "{totals:?}");
    let snap = alloc.snapshot(&g).unwrap();
    assert_eq!((snap.issued, snap.fetches), (8, 6));
    assert_eq!(snap.current_step, 0, "no segment fetched");
}

#[tokio::test]
async fn global_ids_from_two_instances_increase_in_the_order_they_are_answered() {
    let store = Arc::new(MemoryStore::new());
    let one = global(&store, "g").await;
    let two = fixed(&store, config());
    let mut last = 1;
    for i in 0..50 {
        let alloc = if i % 2 == 0 { &two } else { &one };
        let id = alloc.next(&name("g")).await.unwrap();
        assert!(id > last, "{id} after {last}");
        last = id;
    }
}

#[tokio::test]
async fn a_global_sequence_does_not_ride_through_an_outage() {
    let store = Arc::new(MemoryStore::new());
    let alloc = global(&store, "g").await;
    store.set_failing("g", true);
    assert!(matches!(
        alloc.next(&name("g")).await,
        Err(AllocError::Unavailable { .. })
    ));
    store.set_failing("g", false);
    assert!(alloc.next(&name("g")).await.unwrap() > 1);
}

/// The regressions `alloc` counted for `g`.
fn regressions(alloc: &Allocator, g: &SeqName) -> u64 {
    let mut counted = None;
    alloc.for_each_stats(|n, stats| {
        if n == g {
            counted = Some(stats.regressions);
        }
    });
    counted.expect("a live buffer")
}

/// The row of a global sequence goes back under an instance (a restore, a
/// hand edit): the low reservation is a regression, counted, and skipped in
/// one more reservation; the instance never hands out an ID at or below one
/// it handed out.
#[tokio::test]
async fn a_global_row_that_goes_back_is_skipped_in_one_more_reservation() {
    let store = Arc::new(MemoryStore::new());
    let alloc = global(&store, "g").await;
    let g = name("g");
    let batch = |n: u32| {
        let (alloc, g) = (alloc.clone(), g.clone());
        async move {
            let ids = alloc.batch(&g, Count::new(n).unwrap()).await.unwrap();
            ids.ids().collect::<Vec<i64>>()
        }
    };
    let served = batch(100).await;
    assert_eq!(served.last(), Some(&101));
    // lowered by 50, ordering kept
    store.insert("g", 51, 1000);
    store.set_ordering("g", seqd::domain::IdOrdering::Global);
    let before = store.reserves("g");
    assert_eq!(batch(3).await, vec![102, 103, 104]);
    assert_eq!(store.reserves("g") - before, 2, "the low one and one more");
    assert_eq!(regressions(&alloc, &g), 1);
    assert_eq!(alloc.next(&g).await.unwrap(), 105);
    assert_eq!(regressions(&alloc, &g), 1);
}

#[tokio::test]
async fn switching_to_global_and_back_never_repeats_an_id() {
    let store = memory_with("s", 0, 10);
    let alloc = fixed(&store, config());
    let mut seen = HashSet::new();
    let mut last = 0;
    for round in 0..6 {
        let ordering = if round % 2 == 0 {
            seqd::domain::IdOrdering::Instance
        } else {
            seqd::domain::IdOrdering::Global
        };
        store.set_ordering("s", ordering);
        alloc.set_ordering(&name("s"), ordering);
        for _ in 0..25 {
            let id = alloc.next(&name("s")).await.unwrap();
            assert!(seen.insert(id) && id > last, "{id} after {last}");
            last = id;
        }
    }
}

/// Segments dropped by a switch to global ordering are never given back:
/// the buffer's high-water mark may be a dropped next segment's top, with
/// another instance's range below it.
#[tokio::test]
async fn give_back_after_a_switch_to_global_and_back_gives_nothing() {
    let (store, alloc) = prefetch_at_the_gate("s").await;
    store.insert("s", 20, 10); // another instance reserves 11..=20
    store.open_gate();
    until(|| alloc.snapshot(&name("s")).unwrap().next.is_some()).await; // 21..=30
    alloc.set_ordering(&name("s"), seqd::domain::IdOrdering::Global);
    alloc.set_ordering(&name("s"), seqd::domain::IdOrdering::Instance);
    let report = alloc.give_back(4, Duration::from_secs(5)).await;
    assert_eq!(report.ids, 0);
    assert_eq!(store.max_id("s"), Some(30), "11..=20 stay taken");
}

/// Runs (`Allocator::run`, what `INCRBY` draws): 8 tasks drawing runs of 37
/// from segments of 100, next to single IDs: every run is 37 consecutive
/// IDs from one segment, no ID is handed out twice, each task's IDs
/// increase; a segment's rest too short for a run stays unused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn runs_come_whole_from_one_segment_in_order() {
    let store = memory_with("runs", 0, 100);
    let alloc = fixed(&store, config());
    let mut tasks = Vec::new();
    for t in 0..8 {
        let alloc = alloc.clone();
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for _ in 0..200 {
                if t % 4 == 0 {
                    ids.push(alloc.next(&name("runs")).await.unwrap());
                    continue;
                }
                let run = alloc
                    .run(&name("runs"), Count::new(37).unwrap())
                    .await
                    .unwrap();
                assert_eq!(run.len(), 37);
                // One segment of 100 from 1: never across a boundary.
                assert_eq!((run.first - 1) / 100, (run.last - 1) / 100, "{run:?}");
                ids.extend(run.iter());
            }
            ids
        }));
    }
    let all = common::unique_increasing("8 tasks", tasks).await;
    assert_eq!(all.len(), 2 * 200 + 6 * 200 * 37);
}

/// A run longer than the segments is refused, and the sequence still serves.
#[tokio::test]
async fn a_run_longer_than_the_segments_is_refused() {
    let store = memory_with("short", 0, 10);
    let alloc = fixed(&store, config());
    assert_eq!(alloc.next(&name("short")).await.unwrap(), 1);
    let err = alloc
        .run(&name("short"), Count::new(20).unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(err, AllocError::RunTooLong { segment: 10 }),
        "{err:?}"
    );
    let run = alloc
        .run(&name("short"), Count::new(10).unwrap())
        .await
        .unwrap();
    assert_eq!(run.len(), 10);
    assert!(alloc.next(&name("short")).await.unwrap() > run.last);
}

/// A refused run takes nothing: on a live sequence neither the rest of its
/// current segment nor its next segment is touched (the next ID follows the
/// last one answered), and on a name not loaded yet the refusal makes the
/// one reservation of its first use, whose IDs the next draws get.
#[tokio::test]
async fn a_refused_run_takes_nothing() {
    let store = memory_with("warm", 0, 1000);
    store.insert("cold", 0, 1000);
    let alloc = fixed(&store, config());
    let five_thousand = Count::new(5000).unwrap();
    for expected in 1..=4 {
        assert_eq!(alloc.next(&name("warm")).await.unwrap(), expected);
    }
    let err = alloc.run(&name("warm"), five_thousand).await.unwrap_err();
    assert!(
        matches!(err, AllocError::RunTooLong { segment: 1000 }),
        "{err:?}"
    );
    assert_eq!(alloc.next(&name("warm")).await.unwrap(), 5);

    let err = alloc.run(&name("cold"), five_thousand).await.unwrap_err();
    assert!(
        matches!(err, AllocError::RunTooLong { segment: 1000 }),
        "{err:?}"
    );
    assert_eq!(store.reserves("cold"), 1, "one segment, the first use's");
    assert_eq!(alloc.next(&name("cold")).await.unwrap(), 1);
    let run = alloc.run(&name("cold"), Count::new(10).unwrap()).await;
    assert_eq!(run.unwrap().first, 2);
    assert_eq!(store.reserves("cold"), 1);
}
