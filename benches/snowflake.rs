//! Snowflake IDs in process: the generator's cost per ID with the real
//! system clock, and how close it gets to the layout's ceiling. Results and
//! the machine: BENCHMARKS.md, "Snowflake".
//!
//! `cargo bench --bench snowflake -- --warm-up-time 1 --measurement-time 3`
//!
//! No database: a worker ID is granted by hand (the lease only renews in the
//! background and is never on the path). Each sample runs its iterations in
//! one `block_on` on a current-thread tokio runtime, so the sleeps of a
//! sequence overflow are real async sleeps, as in the server.
//!
//! - `default_41_10_12`: the default layout, capped at 4,096 IDs per
//!   millisecond per worker (4.096 M IDs/s); once the generator is faster
//!   than that, every 4,097th call sleeps to the next millisecond.
//! - `wide_41_0_22`: 4,194,304 IDs per millisecond, so the cap is never hit:
//!   the generator's own cost (lock, clock read, encode).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use seqd::snowflake::layout::DEFAULT_EPOCH_MS;
use seqd::snowflake::{Generator, Grant, Layout, SystemWallClock, WallClock};
use tokio::runtime::Runtime;

fn generator(bits: &str) -> Generator {
    let layout = Layout::new(
        bits.parse().unwrap(),
        1,
        DEFAULT_EPOCH_MS,
        SystemWallClock.now_ms(),
    )
    .unwrap();
    let g = Generator::new(layout, Arc::new(SystemWallClock), Duration::from_millis(5));
    g.install(
        Grant {
            worker_id: 0,
            issue_until_ms: i64::MAX,
            bound_ms: i64::MAX,
        },
        None,
    );
    g
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("snowflake");
    for bits in ["41/10/12", "41/0/22"] {
        let name = if bits == "41/10/12" {
            "default_41_10_12"
        } else {
            "wide_41_0_22"
        };
        let g = generator(bits);
        group.throughput(Throughput::Elements(1));
        group.bench_function(format!("{name}/next"), |b| {
            b.iter_custom(|iters| next_loop(&rt, &g, iters))
        });
        group.throughput(Throughput::Elements(1000));
        group.bench_function(format!("{name}/batch_1000"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        black_box(g.batch(1000).await.unwrap());
                    }
                    start.elapsed()
                })
            })
        });
        let st = g.status();
        println!(
            "{name}: {} IDs issued, {} waits for the next millisecond",
            st.issued, st.sequence_waits
        );
    }
    group.finish();
}

fn next_loop(rt: &Runtime, g: &Generator, iters: u64) -> Duration {
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(g.next().await.unwrap());
        }
        start.elapsed()
    })
}

criterion_group!(benches, bench);
criterion_main!(benches);
