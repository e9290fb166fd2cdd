//! Sequences are isolated, and bursts are absorbed by waiting, not failing.
//!
//! Time is tokio's paused clock: "not slowed" means a sequence's requests all
//! complete while another sequence's fetch is still hanging (virtual time has
//! not reached its delay), which needs no wall-clock threshold.

use crate::support::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use common::{fixed_step_allocator, memory_with, name, new_seq, TestDb};
use seqd::allocator::{AllocError, Allocator, AllocatorConfig};
use seqd::domain::Count;
use seqd::store::memory::MemoryStore;

/// While the `hot` tasks run: `rounds` rounds of one ID from each of
/// `cold0` to `cold19`, each its next in order (1, 2, ...); then waits for
/// the hot tasks.
async fn serve_cold_while(alloc: &Allocator, rounds: i64, hot: Vec<tokio::task::JoinHandle<()>>) {
    for round in 0..rounds {
        for i in 0..20 {
            let id = alloc.next(&name(&format!("cold{i}"))).await.unwrap();
            assert_eq!(id, round + 1);
        }
    }
    for t in hot {
        t.await.unwrap();
    }
}

fn spawn_next(alloc: &Allocator, seq: &str) -> tokio::task::JoinHandle<Result<i64, AllocError>> {
    let alloc = alloc.clone();
    let seq = name(seq);
    tokio::spawn(async move { alloc.next(&seq).await })
}

#[tokio::test(start_paused = true)]
async fn a_hanging_and_a_failing_sequence_do_not_slow_or_fail_another() {
    let store = Arc::new(MemoryStore::new());
    for n in ["hangs", "fails", "healthy"] {
        store.insert(n, 0, 10);
    }
    let cfg = AllocatorConfig {
        fetch_timeout: Duration::from_secs(3600),
        ..AllocatorConfig::default()
    };
    let alloc = fixed_step_allocator(&store, cfg);
    store.set_delay("hangs", Duration::from_secs(3600));
    store.set_failing("fails", true);
    let start = tokio::time::Instant::now();
    let stuck: Vec<_> = (0..50)
        .flat_map(|_| [spawn_next(&alloc, "hangs"), spawn_next(&alloc, "fails")])
        .collect();
    tokio::task::yield_now().await;

    let healthy = name("healthy");
    let mut last = 0;
    for _ in 0..5_000 {
        let id = alloc.next(&healthy).await.expect("healthy sequence serves");
        assert!(id > last);
        last = id;
    }
    let batch = alloc
        .batch(&healthy, Count::new(1000).unwrap())
        .await
        .unwrap();
    assert_eq!(batch.len(), 1000);
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "healthy requests finished before the others' wait timeout ({:?})",
        start.elapsed()
    );
    assert!(
        stuck.iter().all(|t| !t.is_finished()),
        "the others are still waiting"
    );
    // `stuck` alternates "hangs" (slow: not failing) and "fails" (failing).
    for (i, t) in stuck.into_iter().enumerate() {
        let err = t.await.unwrap().unwrap_err();
        let failing = i % 2 == 1;
        assert_eq!(
            err,
            AllocError::Unavailable {
                storage_failing: failing
            },
            "request {i}"
        );
    }
    assert!(
        store.reserves("healthy") >= 600,
        "healthy kept fetching: {}",
        store.reserves("healthy")
    );
}

#[tokio::test(start_paused = true)]
async fn a_fetch_hanging_in_the_database_is_abandoned_and_retried() {
    let store = memory_with("a", 0, 10);
    let cfg = AllocatorConfig {
        fetch_timeout: Duration::from_secs(1),
        wait_timeout: Duration::from_secs(10),
        ..AllocatorConfig::default()
    };
    let alloc = fixed_step_allocator(&store, cfg);
    store.set_delay("a", Duration::from_secs(3600));
    let start = tokio::time::Instant::now();
    let waiter = spawn_next(&alloc, "a");
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    store.set_delay("a", Duration::ZERO); // applies to the next attempt only
    assert_eq!(waiter.await.unwrap().unwrap(), 1);
    assert_eq!(
        store.reserves("a"),
        2,
        "the hanging fetch was abandoned and retried"
    );
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hot_sequence_keeps_one_fetch_in_flight_and_cold_ones_are_served() {
    let store = memory_with("hot", 0, 1);
    for i in 0..20 {
        store.insert(&format!("cold{i}"), 0, 5);
    }
    store.set_delay("hot", Duration::from_millis(1));
    let cfg = AllocatorConfig {
        max_step: 1,
        ..AllocatorConfig::default()
    };
    let alloc = fixed_step_allocator(&store, cfg);
    let hot: Vec<_> = (0..16)
        .map(|_| {
            let alloc = alloc.clone();
            tokio::spawn(async move {
                for _ in 0..100 {
                    alloc.next(&name("hot")).await.unwrap();
                }
            })
        })
        .collect();
    serve_cold_while(&alloc, 10, hot).await;
    assert_eq!(
        store.max_in_flight("hot"),
        1,
        "one fetch in flight for the hot sequence"
    );
    assert!(store.reserves("hot") >= 1600, "step 1: one fetch per ID");
    for i in 0..20 {
        assert!(store.max_in_flight(&format!("cold{i}")) <= 1);
    }
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_concurrent_requests_on_a_fresh_sequence_all_succeed() {
    // The default (rate) policy with 10,000 requests; the fixed step of 10 with
    // 2,000 (200 fetches, each waking every waiter: slow in debug builds).
    for (policy, requests) in [("rate", 10_000), ("fixed", 2_000)] {
        let store = memory_with("burst", 0, 10);
        store.set_delay("burst", Duration::from_millis(1));
        let cfg = AllocatorConfig::default();
        let alloc = match policy {
            "fixed" => fixed_step_allocator(&store, cfg),
            _ => Allocator::new(store.clone(), cfg),
        };
        let tasks: Vec<_> = (0..requests).map(|_| spawn_next(&alloc, "burst")).collect();
        let mut ids = HashSet::new();
        for t in tasks {
            let id = t
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("{policy}: a request failed: {e:?}"));
            assert!(ids.insert(id), "{policy}: duplicate {id}");
        }
        assert_eq!(ids.len(), requests);
        assert_eq!(
            store.max_in_flight("burst"),
            1,
            "{policy}: at most one fetch in flight"
        );
        let fetches = store.reserves("burst");
        eprintln!("{policy}: {requests} requests served with {fetches} fetches");
        if policy == "rate" {
            assert!(
                fetches < 20,
                "the adapted step absorbs the burst in a few fetches ({fetches})"
            );
        } else {
            assert!(fetches >= 200);
        }
    }
}

/// On a real database: a hot sequence with step 1 hammered by 16 tasks, and
/// 20 cold sequences served meanwhile, with no error anywhere.
async fn hot_and_cold_sequences_share_the_database(db: TestDb) {
    let store = common::store_with(&db, "hot", 1, 1).await;
    for i in 0..20 {
        store
            .create(&new_seq(&format!("cold{i}"), 1, 1))
            .await
            .unwrap();
    }
    let cfg = AllocatorConfig {
        max_step: 1,
        ..AllocatorConfig::default()
    };
    let alloc = Allocator::new(store, cfg);
    let hot: Vec<_> = (0..16)
        .map(|_| {
            let alloc = alloc.clone();
            tokio::spawn(async move {
                let mut last = 0;
                for _ in 0..100 {
                    let id = alloc.next(&name("hot")).await.unwrap();
                    assert!(id > last);
                    last = id;
                }
            })
        })
        .collect();
    serve_cold_while(&alloc, 5, hot).await;
    let hot_snap = alloc.snapshot(&name("hot")).unwrap();
    assert_eq!(hot_snap.fetch_errors, 0);
    assert!(hot_snap.fetches >= 1600);
}

per_backend!(hot_and_cold_sequences_share_the_database);
