//! A permuted sequence's cost per ID in process: FF1 with AES-256
//! (`seqd_core::permute`) from a counter to an ID and back. Results and the
//! machine: BENCHMARKS.md, "Permuted sequences".
//!
//! `cargo bench -p seqd-core --bench permute -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use seqd_core::permute::{Domain, Permutation};

fn permute(c: &mut Criterion) {
    let key = [0x5au8; 32];
    let mut group = c.benchmark_group("permute");
    group.throughput(Throughput::Elements(1));
    for domain in [Domain::Bits(53), Domain::Bits(63), Domain::Digits(12)] {
        let p = Permutation::new(&key, b"order", domain).unwrap();
        let mut counter = 1i64;
        group.bench_function(format!("id_{domain}"), |b| {
            b.iter(|| {
                counter += 1;
                black_box(p.id(black_box(counter)).unwrap())
            })
        });
        let batch: Vec<i64> = (1..=1000).collect();
        group.throughput(Throughput::Elements(1000));
        group.bench_function(format!("ids_1000_{domain}"), |b| {
            b.iter(|| black_box(p.ids(black_box(&batch)).unwrap()))
        });
        group.throughput(Throughput::Elements(1));
        let id = p.id(12345).unwrap();
        group.bench_function(format!("counter_{domain}"), |b| {
            b.iter(|| black_box(p.counter(black_box(id)).unwrap()))
        });
    }
    group.finish();
}

criterion_group!(benches, permute);
criterion_main!(benches);
