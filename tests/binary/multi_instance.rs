//! Several independent instances on one database never hand out the same ID.
//!
//! In-process: 3 allocators, each with its own connection pool, 8 clients,
//! 120,000 IDs, step 10 (segments turn over constantly). Out-of-process: 3
//! `seqd` processes on one database, clients over HTTP.

use crate::support::common;
use crate::support::server;

use std::collections::HashSet;
use std::time::Duration;

use common::TestDb;
use seqd::allocator::{Allocator, AllocatorConfig};
use seqd::domain::{Count, NewSequence, SeqName};
use server::{fetch_json, Process};

const INSTANCES: usize = 3;
const CLIENTS: usize = 8;
const IDS_PER_CLIENT: usize = 15_000;
const STEP: i64 = 10;

/// Small segments: the adapted step may never exceed the row's step of 10.
fn small_steps() -> AllocatorConfig {
    AllocatorConfig {
        max_step: STEP,
        wait_timeout: Duration::from_secs(30),
        ..AllocatorConfig::default()
    }
}

/// Waits for the clients' tasks (each answering the IDs it drew, in
/// order), then checks global uniqueness and per-client strict order;
/// returns the total.
async fn check(clients: Vec<tokio::task::JoinHandle<Vec<i64>>>) -> usize {
    let mut all = HashSet::new();
    for (c, task) in clients.into_iter().enumerate() {
        let ids = task.await.unwrap();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "client {c}: IDs not strictly increasing"
        );
        for &id in &ids {
            assert!(all.insert(id), "ID {id} issued twice");
        }
    }
    all.len()
}

async fn three_allocators_with_separate_pools_never_duplicate(db: TestDb) {
    let first = common::store(&db).await;
    let name = SeqName::parse("multi").unwrap();
    first
        .create(&NewSequence::new(name.clone(), 1, STEP, String::new(), STEP).unwrap())
        .await
        .unwrap();
    let mut instances = vec![Allocator::new(first, small_steps())];
    for _ in 1..INSTANCES {
        instances.push(Allocator::new(common::connect(&db).await, small_steps()));
    }
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let alloc = instances[c % INSTANCES].clone();
            let name = name.clone();
            tokio::spawn(async move {
                let mut mine = Vec::with_capacity(IDS_PER_CLIENT);
                let mut i = 0;
                while mine.len() < IDS_PER_CLIENT {
                    if i % 2 == 0 {
                        mine.push(alloc.next(&name).await.expect("next"));
                    } else {
                        let want = (1 + (i * 7 + c) % 40).min(IDS_PER_CLIENT - mine.len());
                        let batch = alloc
                            .batch(&name, Count::new(want as u32).unwrap())
                            .await
                            .expect("batch");
                        mine.extend(batch.ids());
                    }
                    i += 1;
                }
                mine
            })
        })
        .collect();
    let total = check(tasks).await;
    assert_eq!(total, CLIENTS * IDS_PER_CLIENT);
    let fetches: u64 = instances
        .iter()
        .map(|a| a.snapshot(&name).unwrap().fetches)
        .sum();
    assert!(
        fetches >= (total as u64) / STEP as u64,
        "segments of {STEP} were used ({fetches} fetches)"
    );
    eprintln!(
        "{:?}: {total} IDs, {INSTANCES} instances, {CLIENTS} clients, {fetches} segment fetches",
        db.backend
    );
}

per_backend!(three_allocators_with_separate_pools_never_duplicate);

async fn three_seqd_processes_never_duplicate(db: TestDb) {
    let store = common::store(&db).await;
    let name = SeqName::parse("procs").unwrap();
    store
        .create(&NewSequence::new(name, 1, STEP, String::new(), STEP).unwrap())
        .await
        .unwrap();
    let mut procs = Vec::new();
    for _ in 0..INSTANCES {
        procs.push(Process::spawn(&db.url, &["--max-step", "10"]).await);
    }
    let http = reqwest::Client::new();
    let per_client_ids = 2_500;
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let base = procs[c % INSTANCES].base.clone();
            let http = http.clone();
            tokio::spawn(async move {
                let mut mine: Vec<i64> = Vec::new();
                let mut i = 0;
                while mine.len() < per_client_ids {
                    if i % 2 == 0 {
                        let v =
                            fetch_json(http.get(format!("{base}/v1/sequences/procs/next"))).await;
                        mine.push(v["id"].as_i64().expect("id"));
                    } else {
                        let url =
                            format!("{base}/v1/sequences/procs/batch?count={}", 1 + (i + c) % 30);
                        let v = fetch_json(http.get(url)).await;
                        mine.extend(common::integers(&v, "ids"));
                    }
                    i += 1;
                }
                mine
            })
        })
        .collect();
    let total = check(tasks).await;
    assert!(total >= CLIENTS * per_client_ids);
    eprintln!(
        "{:?}: {total} IDs over HTTP from {INSTANCES} seqd processes",
        db.backend
    );
    for p in procs {
        p.kill().await;
    }
}

per_backend!(three_seqd_processes_never_duplicate);
