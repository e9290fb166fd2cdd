//! Bytes per idle live sequence in the allocator, measured in process: a
//! counting global allocator and the RSS around warming `N` sequences (one
//! `next` each) on the in-memory store, whose rows (and per-name records)
//! are made before the first reading so they are not counted. BENCHMARKS.md, "A million sequences".
//!
//! `cargo run --release --example memory_per_sequence [N]` (default 1,000,000)

use std::alloc::{GlobalAlloc, Layout};

use mimalloc::MiMalloc as System;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use seqd::allocator::buffer::SeqBuffer;
use seqd::allocator::{Allocator, AllocatorConfig};
use seqd::domain::SeqName;
use seqd::store::memory::MemoryStore;
use seqd::store::prelude::*;

/// The `seqd` binary's allocator (mimalloc), counting the bytes asked for
/// and the live blocks.
struct Counting;

static BYTES: AtomicUsize = AtomicUsize::new(0);
static BLOCKS: AtomicUsize = AtomicUsize::new(0);
/// Live blocks by size class (powers of two: `[2^k, 2^(k+1))`).
static CLASSES: [AtomicUsize; 32] = [const { AtomicUsize::new(0) }; 32];

fn class(size: usize) -> usize {
    (usize::BITS - size.max(1).leading_zeros() - 1) as usize
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        BLOCKS.fetch_add(1, Ordering::Relaxed);
        CLASSES[class(layout.size())].fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        BLOCKS.fetch_sub(1, Ordering::Relaxed);
        CLASSES[class(layout.size())].fetch_sub(1, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        BYTES.fetch_add(new_size, Ordering::Relaxed);
        BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        CLASSES[class(layout.size())].fetch_sub(1, Ordering::Relaxed);
        CLASSES[class(new_size)].fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn rss_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(1_000_000, |a| a.parse().expect("N"));
    let store = Arc::new(MemoryStore::new());
    let names: Vec<SeqName> = (0..n)
        .map(|i| SeqName::parse(&format!("tenant-{i:07}")).unwrap())
        .collect();
    for name in &names {
        store.insert(name.as_str(), 0, 1000);
    }
    // The in-memory store keeps a record per name on its first reservation
    // (fault injection); make them now so the readings below leave them out.
    for name in &names {
        store.reserve(name, 1).await.expect("row");
    }
    let alloc = Allocator::new(store, AllocatorConfig::default());
    let classes0: Vec<usize> = CLASSES.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let (bytes0, blocks0, rss0) = (
        BYTES.load(Ordering::Relaxed),
        BLOCKS.load(Ordering::Relaxed),
        rss_bytes(),
    );
    let t0 = std::time::Instant::now();
    futures::stream::iter(&names)
        .map(|name| {
            let alloc = alloc.clone();
            async move { alloc.next(name).await.expect("live") }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await;
    let took = t0.elapsed();
    // Let every buffer's first prefetch (if any) settle.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let (bytes1, blocks1, rss1) = (
        BYTES.load(Ordering::Relaxed),
        BLOCKS.load(Ordering::Relaxed),
        rss_bytes(),
    );
    assert_eq!(alloc.names_in_memory().live, n);
    let per = |a: usize, b: usize| (b as f64 - a as f64) / n as f64;
    println!(
        "{n} live sequences warmed in {:.2} s ({:.0} first uses/s, in process)",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64()
    );
    println!(
        "size_of::<SeqBuffer>() = {} bytes (+16 of Arc counts)",
        std::mem::size_of::<SeqBuffer>()
    );
    println!("heap bytes asked per sequence: {:.0}", per(bytes0, bytes1));
    println!("heap blocks per sequence: {:.2}", per(blocks0, blocks1));
    println!("RSS growth per sequence: {:.0} bytes", per(rss0, rss1));
    println!("blocks per sequence by size class:");
    for (k, c) in CLASSES.iter().enumerate() {
        let d = per(classes0[k], c.load(Ordering::Relaxed));
        if d.abs() >= 0.01 {
            println!(
                "  {:>6}..{:<6} bytes: {d:.2}",
                1usize << k,
                (1usize << (k + 1)) - 1
            );
        }
    }
}
