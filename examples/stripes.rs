//! Fetch latency and fetch-bound IDs/s with one database and with three
//! stripes (BENCHMARKS.md, "Stripes"; run by `scripts/bench/stripes.sh`).
//!
//! `cargo run --release --example stripes -- URL0 URL1 URL2`
//!
//! The URLs must name fresh, empty databases (the script makes them). For
//! each setup, one database (URL0 alone: one atomic `UPDATE ... RETURNING`
//! per fetch) and three stripes (a read and a compare-and-set on stripe 0),
//! and the three stripes with stripe 0 failing (every fetch fails over to
//! stripe 1), it measures:
//! - the latency of 2,000 reservations one after another (p50, p99, mean);
//! - IDs/s through the allocator when every fetch goes to the database: 32
//!   tasks taking IDs for 3 s from sequences of step 10 (a fetch per 10 IDs).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seqd::allocator::{Allocator, AllocatorConfig, FixedStep, SystemClock};
use seqd::domain::{NewSequence, SeqName};
use seqd::store::forwarding::{Call, Forwarding, Hook};
use seqd::store::prelude::*;
use seqd::store::stripes::{StripeLayout, StripedStore, DEFAULT_BLOCK};
use seqd::store::{StoreError, StoreOptions};

/// Fails every call while `down` is set (a stripe cut).
#[derive(Default)]
struct Switch {
    down: AtomicBool,
}

impl Hook for Switch {
    fn before(&self, _: Call) -> Result<(), StoreError> {
        if self.down.load(Ordering::Relaxed) {
            Err(StoreError::Unavailable("switched off".into()))
        } else {
            Ok(())
        }
    }
}

fn name(s: &str) -> SeqName {
    SeqName::parse(s).unwrap()
}

/// p50, p99 and mean of `n` reservations of `seq` one after another.
async fn latency(store: &dyn Store, seq: &str, n: usize) -> (Duration, Duration, Duration) {
    let mut times = Vec::with_capacity(n);
    let mut floor = 0;
    for _ in 0..n {
        let t0 = Instant::now();
        let r = store.reserve_above(&name(seq), 1, floor).await.unwrap();
        times.push(t0.elapsed());
        floor = r.max_id;
    }
    let mean = times.iter().sum::<Duration>() / n as u32;
    times.sort();
    (times[n / 2], times[n * 99 / 100], mean)
}

/// IDs per second from 32 tasks for 3 s, every fetch reserving 10 IDs.
async fn ids_per_sec(store: Arc<dyn Store>, seq: &str) -> f64 {
    let alloc = Allocator::with_parts(
        store,
        AllocatorConfig {
            wait_timeout: Duration::from_secs(10),
            ..AllocatorConfig::default()
        },
        Arc::new(SystemClock::default()),
        Arc::new(FixedStep),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (alloc, stop, total, seq) = (alloc.clone(), stop.clone(), total.clone(), name(seq));
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                alloc.next(&seq).await.unwrap();
                total.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    total.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let urls: Vec<String> = std::env::args().skip(1).collect();
    assert_eq!(urls.len(), 3, "usage: stripes URL0 URL1 URL2");
    let mut stripes: Vec<Arc<Forwarding<Switch>>> = Vec::new();
    for url in &urls {
        let db = seqd::store::connect(url, &StoreOptions::default())
            .await
            .expect("connect");
        let store = db.sequences();
        store.migrate().await.expect("migrate");
        for seq in ["lat1", "lat3", "latf", "ids1", "ids3", "idsf"] {
            let new = NewSequence::new(name(seq), 1, 10, String::new(), 1_000_000).unwrap();
            store.create(&new).await.expect("create");
        }
        stripes.push(Forwarding::new(store, Switch::default()));
    }
    let single: Arc<dyn Store> = stripes[0].clone();
    let set = (0..3u32)
        .map(|i| {
            let s: Arc<dyn Store> = stripes[i as usize].clone();
            (s, StripeLayout::new(i, 3, DEFAULT_BLOCK).unwrap())
        })
        .collect();
    let striped: Arc<dyn Store> =
        Arc::new(StripedStore::new(set, seqd::store::stripes::DEFAULT_FAILOVER_AFTER).unwrap());
    println!("| setup | fetch p50 ms | fetch p99 ms | fetch mean ms | IDs/s, a fetch per 10 IDs |");
    println!("|---|---|---|---|---|");
    let (p50, p99, mean) = latency(&*single, "lat1", 2000).await;
    let rate = ids_per_sec(single.clone(), "ids1").await;
    println!(
        "| one database ({}) | {} | {} | {} | {rate:.0} |",
        single.backend(),
        ms(p50),
        ms(p99),
        ms(mean)
    );
    let (p50, p99, mean) = latency(&*striped, "lat3", 2000).await;
    let rate = ids_per_sec(striped.clone(), "ids3").await;
    println!(
        "| three stripes ({}), stripe 0 serving | {} | {} | {} | {rate:.0} |",
        stripes
            .iter()
            .map(|s| s.backend())
            .collect::<Vec<_>>()
            .join(", "),
        ms(p50),
        ms(p99),
        ms(mean)
    );
    stripes[0].hook().down.store(true, Ordering::Relaxed);
    let (p50, p99, mean) = latency(&*striped, "latf", 2000).await;
    let rate = ids_per_sec(striped.clone(), "idsf").await;
    println!(
        "| three stripes, stripe 0 failing (stripe 1 serving) | {} | {} | {} | {rate:.0} |",
        ms(p50),
        ms(p99),
        ms(mean)
    );
}
