//! Serial numbers against plain IDs on the allocator core (the in-memory
//! store, no HTTP): what reading the clock, finding the period and printing
//! the serial add to one ID. Results and the machine: BENCHMARKS.md,
//! "Serial numbers".
//!
//! `cargo bench --bench serial -- --warm-up-time 1 --measurement-time 3`
//!
//! - `plain_next`: `Allocator::next` on a plain sequence.
//! - `serial_one`: `Serials::issue(name, 1)` on a monthly serial sequence
//!   (`ORD{yyyy}{MM}{dd}{seq:010}`, Asia/Shanghai): one clock reading, the
//!   period check, one counter from the allocator and its serial.
//! - `serial_batch_100`: `Serials::issue(name, 100)`, per serial.
//!
//! Rows have a step of 1,000,000, so the store is almost never on the path.
//! Every call runs under the same current-thread runtime's `block_on`, so
//! both sides pay the same wrapper.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tokio::runtime::Runtime;

use seqd::allocator::{Allocator, AllocatorConfig, FixedStep, SystemClock};
use seqd::domain::{IdOrdering, NewSequence, SeqName, SeqNameRef, SerialSettings};
use seqd::serial::{Overflow, Reset, Serials, SystemWallClock};
use seqd::store::memory::MemoryStore;
use seqd::store::prelude::*;

const STEP: i64 = 1_000_000;

fn setup(rt: &Runtime) -> (Allocator, Serials) {
    let store = Arc::new(MemoryStore::new());
    let plain = NewSequence::new(
        SeqName::parse("plain").unwrap(),
        1,
        STEP,
        String::new(),
        STEP,
    )
    .unwrap();
    let settings = SerialSettings::new(
        "ORD{yyyy}{MM}{dd}{seq:010}",
        Reset::Month,
        "Asia/Shanghai",
        Overflow::Refuse,
    )
    .unwrap();
    let ord = NewSequence::new(SeqName::parse("ord").unwrap(), 1, STEP, String::new(), STEP)
        .unwrap()
        .with_ordering(IdOrdering::Instance)
        .with_serial(settings);
    rt.block_on(async {
        store.create(&plain).await.unwrap();
        store.create(&ord).await.unwrap();
    });
    let alloc = Allocator::with_parts(
        store.clone(),
        AllocatorConfig::default(),
        Arc::new(SystemClock::default()),
        Arc::new(FixedStep),
    );
    let serials = Serials::new(alloc.clone(), store.clone(), Arc::new(SystemWallClock));
    (alloc, serials)
}

fn serial(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (alloc, serials) = setup(&rt);
    let plain = SeqName::parse("plain").unwrap();
    let ord = SeqNameRef::parse("ord").unwrap();
    // Load both, and show what is measured.
    let id = rt.block_on(alloc.next(&plain)).unwrap();
    let first = rt.block_on(serials.issue(ord, 1)).unwrap();
    eprintln!("plain id {id}, serial {}", first.serials[0]);

    let mut g = c.benchmark_group("serial");
    g.throughput(Throughput::Elements(1));
    g.bench_function("plain_next", |b| {
        b.iter(|| black_box(rt.block_on(alloc.next(&plain)).unwrap()))
    });
    g.bench_function("serial_one", |b| {
        b.iter(|| black_box(rt.block_on(serials.issue(ord, 1)).unwrap()))
    });
    g.throughput(Throughput::Elements(100));
    g.bench_function("serial_batch_100", |b| {
        b.iter(|| black_box(rt.block_on(serials.issue(ord, 100)).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, serial);
criterion_main!(benches);
