//! `next()` on a warm client (the current lease in memory) beside a bare
//! `AtomicU64::fetch_add`, in one run: the in-process hot path of
//! seqd-client against the cheapest shared counter there is. The client
//! leases from a real seqd server started in-process on SQLite.
//!
//! `cargo bench -p seqd-client --bench next`

#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn next(c: &mut Criterion) {
    // One worker for the server and the fetches; the measured loop runs on
    // the bench's own thread (`block_on`).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(support::Server::with_sequence("bench", 1000));
    // The largest lease the server allows by default: a fetch every
    // million IDs, made ahead in the background.
    let client = server.client(1_000_000);
    let seq = client.sequence("bench").unwrap();
    rt.block_on(async {
        seq.next().await.unwrap();
        client.next("bench").await.unwrap();
    });

    let mut g = c.benchmark_group("next");
    g.throughput(Throughput::Elements(1));
    g.bench_function("AtomicU64::fetch_add", |b| {
        let counter = AtomicU64::new(0);
        b.iter(|| black_box(&counter).fetch_add(1, Ordering::Relaxed))
    });
    g.bench_function("Sequence::next", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let t = Instant::now();
                for _ in 0..iters {
                    black_box(seq.next().await.unwrap());
                }
                t.elapsed()
            })
        })
    });
    g.bench_function("Client::next(name)", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let t = Instant::now();
                for _ in 0..iters {
                    black_box(client.next(black_box("bench")).await.unwrap());
                }
                t.elapsed()
            })
        })
    });
    g.finish();
    rt.block_on(async {
        client.close().await;
        server.stop().await;
    });
}

criterion_group!(benches, next);
criterion_main!(benches);
