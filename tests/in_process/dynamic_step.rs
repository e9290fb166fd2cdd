//! The rate-based step: a burst grows the step fast, idle shrinks it back to
//! the row's step, and a step changed in the table is the floor at the next
//! fetch. Manual clock for the rate, paused tokio clock for the store.

use crate::support::common;

use std::sync::Arc;
use std::time::Duration;

use seqd::allocator::{Allocator, ManualClock};
use seqd::domain::{Count, SeqName};
use seqd::store::memory::MemoryStore;
use seqd::store::{prelude::*, SequencePatch};

fn setup(row_step: i64) -> (Arc<MemoryStore>, ManualClock, Allocator, SeqName) {
    let store = Arc::new(MemoryStore::new());
    store.insert("s", 0, row_step);
    let clock = ManualClock::new();
    let alloc = common::rate_step_allocator(store.clone(), &clock);
    (store, clock, alloc, SeqName::parse("s").unwrap())
}

/// Issues `rate` IDs per second for `secs` seconds, one batch per 100 ms.
async fn traffic(alloc: &Allocator, clock: &ManualClock, name: &SeqName, rate: u32, secs: u32) {
    let per_tick = rate / 10;
    for _ in 0..secs * 10 {
        clock.advance(Duration::from_millis(100));
        let mut left = per_tick;
        while left > 0 {
            let n = left.min(10_000);
            alloc.batch(name, Count::new(n).unwrap()).await.unwrap();
            left -= n;
        }
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
    }
}

fn step_of(alloc: &Allocator, name: &SeqName) -> i64 {
    alloc.snapshot(name).unwrap().current_step
}

#[tokio::test(start_paused = true)]
async fn a_burst_grows_the_step_towards_ten_minutes_of_traffic() {
    let (_store, clock, alloc, s) = setup(100);
    traffic(&alloc, &clock, &s, 1_000, 30).await;
    let step = step_of(&alloc, &s);
    // 1,000 IDs/s x 600 s = 600,000: the step lands near it, far above the row's
    // 100 and below the 1,000,000 cap (a policy that jumps to the cap fails here).
    assert!((300_000..=900_000).contains(&step), "step {step}");
}

#[tokio::test(start_paused = true)]
async fn the_step_never_exceeds_max_step() {
    let (_store, clock, alloc, s) = setup(100);
    traffic(&alloc, &clock, &s, 50_000, 10).await;
    assert_eq!(step_of(&alloc, &s), 1_000_000);
}

#[tokio::test(start_paused = true)]
async fn a_slowdown_shrinks_the_step_at_the_following_fetches() {
    let (_store, clock, alloc, s) = setup(100);
    traffic(&alloc, &clock, &s, 1_000, 30).await;
    let burst_step = step_of(&alloc, &s);
    assert!(burst_step > 300_000, "{burst_step}");
    // Ten times less traffic for 3 hours: several segments turn over.
    traffic(&alloc, &clock, &s, 100, 3 * 3600).await;
    let step = step_of(&alloc, &s);
    // 100 IDs/s x 600 s = 60,000.
    assert!(
        (30_000..=120_000).contains(&step),
        "step {step} after the slowdown (was {burst_step})"
    );
}

#[tokio::test(start_paused = true)]
async fn a_quiet_sequence_stays_at_the_row_step() {
    let (store, clock, alloc, s) = setup(100);
    for _ in 0..500 {
        clock.advance(Duration::from_secs(60));
        alloc.next(&s).await.unwrap();
        tokio::task::yield_now().await;
    }
    assert_eq!(step_of(&alloc, &s), 100);
    assert!(store.reserves("s") >= 5);
}

#[tokio::test(start_paused = true)]
async fn a_step_raised_in_the_table_is_the_floor_at_the_next_fetch() {
    let (store, clock, alloc, s) = setup(10);
    traffic(&alloc, &clock, &s, 10, 2).await; // slow: the adapted step stays small
    let fetches = alloc.snapshot(&s).unwrap().fetches;
    store
        .update(
            &s,
            &SequencePatch {
                step: Some(5_000),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    // Use up what is in memory so a new fetch happens.
    while alloc.snapshot(&s).unwrap().fetches == fetches {
        alloc.next(&s).await.unwrap();
        tokio::task::yield_now().await;
    }
    let snap = alloc.snapshot(&s).unwrap();
    assert_eq!(snap.row_step, 5_000);
    assert!(snap.current_step >= 5_000, "{snap:?}");
}
