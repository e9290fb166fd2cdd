//! The allocator's hot path against the in-memory store, next to a bare
//! `AtomicU64::fetch_add`, with the pieces of the path measured apart so the
//! gap can be attributed. Results and the machine: BENCHMARKS.md,
//! "Allocator hot path".
//!
//! `cargo bench --bench hot_path -- --warm-up-time 1 --measurement-time 3`
//!
//! Rows have a step of 1,000,000 so the store is almost never on the path:
//! the background fetch (one per million IDs) runs on the worker of a tokio
//! runtime entered by every benchmark thread; after each allocator benchmark
//! the number of fetches and of requests that had to wait is printed, which
//! shows the prefetch kept up (waits stay at the one cold load).
//!
//! `Allocator::next` is async but completes without awaiting on the fast
//! path, so each call is polled once with a no-op waker (falling back to
//! `futures::executor::block_on` if it ever returns `Pending`), which measures
//! the call itself; the `block_on` variant shows what that wrapper adds.

use std::collections::HashMap;
use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use tokio::runtime::{Handle, Runtime};

use seqd::allocator::double::DoubleBuffer;
use seqd::allocator::segment::Segment;
use seqd::allocator::{Allocator, AllocatorConfig, FixedStep, SystemClock};
use seqd::domain::{Count, SeqName};
use seqd::store::memory::MemoryStore;

const STEP: i64 = 1_000_000;
const NAMES: usize = 10_000;
/// Live sequences of the largest round-robin case of the summary.
const MILLION: usize = 1_000_000;
/// A segment that never runs out during a benchmark.
const HUGE: u64 = 1 << 62;

/// What `Allocator::next` does on its fast path, written synchronously: load
/// the name map (arc-swap), look the name up, load the current segment
/// (arc-swap) and claim one ID. The gap to `next_poll_once` is the async
/// wrapper and the prefetch check.
fn sync_equivalent<S: std::hash::BuildHasher>(
    map: &ArcSwap<HashMap<SeqName, Arc<DoubleBuffer>, S>>,
    n: &SeqName,
) -> i64 {
    let live = map.load();
    let buf = live.get(n).unwrap();
    buf.take_fast(1).range.unwrap().first
}

fn sync_map<S: std::hash::BuildHasher + Default>(
    n: &SeqName,
) -> ArcSwap<HashMap<SeqName, Arc<DoubleBuffer>, S>> {
    let mut m = HashMap::default();
    m.insert(
        n.clone(),
        Arc::new(DoubleBuffer::new(Segment::new(1, HUGE, 0.1))),
    );
    ArcSwap::from_pointee(m)
}

/// Polls `fut` once; if it is not ready (a cold load or a wait for a
/// fetch), blocks on it.
#[inline]
fn run<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => futures::executor::block_on(fut),
    }
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn name(s: &str) -> SeqName {
    SeqName::parse(s).unwrap()
}

/// An allocator on a fresh store holding `names`, each with step 1,000,000,
/// every name loaded already (first segment in memory).
fn allocator(names: &[SeqName]) -> (Allocator, Arc<MemoryStore>) {
    let store = Arc::new(MemoryStore::new());
    for n in names {
        store.insert(n.as_str(), 0, STEP);
    }
    let alloc = Allocator::with_parts(
        store.clone(),
        AllocatorConfig::default(),
        Arc::new(SystemClock::default()),
        Arc::new(FixedStep),
    );
    for n in names {
        run(alloc.next(n)).unwrap();
    }
    (alloc, store)
}

/// Prints how many fetches the benchmark caused and how many requests had to
/// wait for one (1 = the cold load; more would mean the prefetch fell behind).
fn report(label: &str, alloc: &Allocator, n: &SeqName) {
    let s = alloc.snapshot(n).unwrap();
    eprintln!(
        "  [{label}] {} IDs issued, {} fetches, {} waits",
        s.issued, s.fetches, s.waits
    );
}

/// Runs `op` `iters` times split over two threads (each inside the runtime),
/// and returns the wall time from the first thread's start to the last
/// thread's finish, both read by the threads themselves (a coordinator's
/// clock would count its own scheduling delays).
fn two_threads(handle: &Handle, iters: u64, op: impl Fn() + Sync) -> Duration {
    let per_thread = iters.div_ceil(2);
    let start = Barrier::new(2);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let _rt = handle.enter();
                    start.wait();
                    let t0 = Instant::now();
                    for _ in 0..per_thread {
                        op();
                    }
                    (t0, Instant::now())
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let first = spans.iter().map(|s| s.0).min().unwrap();
    let last = spans.iter().map(|s| s.1).max().unwrap();
    last - first
}

fn single_thread(c: &mut Criterion) {
    let rt = runtime();
    let _rt = rt.enter();
    let mut g = c.benchmark_group("single_thread");
    g.throughput(Throughput::Elements(1));

    let counter = AtomicU64::new(0);
    g.bench_function("atomic_fetch_add", |b| {
        b.iter(|| black_box(&counter).fetch_add(1, Ordering::Relaxed))
    });

    let double = DoubleBuffer::new(Segment::new(1, HUGE, 0.1));
    g.bench_function("double_buffer_take_fast", |b| {
        b.iter(|| black_box(&double).take_fast(1))
    });

    let one = name("order");
    let map: HashMap<SeqName, Arc<u64>> = [(one.clone(), Arc::new(0))].into_iter().collect();
    g.bench_function("hashmap_get_siphash", |b| {
        b.iter(|| black_box(&map).get(black_box(&one)).is_some())
    });

    let foldmap: HashMap<SeqName, Arc<u64>, foldhash::fast::RandomState> =
        map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    g.bench_function("hashmap_get_foldhash", |b| {
        b.iter(|| black_box(&foldmap).get(black_box(&one)).is_some())
    });

    let swap = ArcSwap::from_pointee(map.clone());
    g.bench_function("arcswap_load", |b| b.iter(|| black_box(&swap).load().len()));
    g.bench_function("arcswap_load_and_get", |b| {
        b.iter(|| black_box(&swap).load().get(black_box(&one)).is_some())
    });

    let sip = sync_map::<std::collections::hash_map::RandomState>(&one);
    g.bench_function("sync_equivalent_siphash", |b| {
        b.iter(|| sync_equivalent(black_box(&sip), black_box(&one)))
    });
    let fold = sync_map::<foldhash::fast::RandomState>(&one);
    g.bench_function("sync_equivalent_foldhash", |b| {
        b.iter(|| sync_equivalent(black_box(&fold), black_box(&one)))
    });

    let (alloc, _store) = allocator(std::slice::from_ref(&one));
    eprintln!(
        "  size of the futures: next {} bytes, batch {} bytes",
        std::mem::size_of_val(&alloc.next(&one)),
        std::mem::size_of_val(&alloc.batch(&one, Count::new(1).unwrap()))
    );
    g.bench_function("next_poll_once", |b| {
        b.iter(|| run(alloc.next(black_box(&one))).unwrap())
    });
    report("next_poll_once", &alloc, &one);

    let (alloc, _store) = allocator(std::slice::from_ref(&one));
    g.bench_function("next_polled_in_place", |b| {
        b.iter(|| {
            let mut fut = std::pin::pin!(alloc.next(black_box(&one)));
            let mut cx = Context::from_waker(futures::task::noop_waker_ref());
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(id) => id.unwrap(),
                Poll::Pending => futures::executor::block_on(fut).unwrap(),
            }
        })
    });
    report("next_polled_in_place", &alloc, &one);

    let (alloc, _store) = allocator(std::slice::from_ref(&one));
    g.bench_function("next_futures_block_on", |b| {
        b.iter(|| futures::executor::block_on(alloc.next(black_box(&one))).unwrap())
    });
    report("next_futures_block_on", &alloc, &one);

    let (alloc, _store) = allocator(std::slice::from_ref(&one));
    let hundred = Count::new(100).unwrap();
    g.throughput(Throughput::Elements(100));
    g.bench_function("batch100_poll_once", |b| {
        b.iter(|| run(alloc.batch(black_box(&one), hundred)).unwrap())
    });
    report("batch100_poll_once", &alloc, &one);
    g.finish();
}

fn two_threads_contended(c: &mut Criterion) {
    let rt = runtime();
    let handle = rt.handle().clone();
    let mut g = c.benchmark_group("two_threads");
    g.throughput(Throughput::Elements(1));

    let counter = AtomicU64::new(0);
    g.bench_function("atomic_fetch_add", |b| {
        b.iter_custom(|iters| {
            two_threads(&handle, iters, || {
                black_box(counter.fetch_add(1, Ordering::Relaxed));
            })
        })
    });

    let one = name("order");
    let (alloc, _store) = {
        let _rt = rt.enter();
        allocator(std::slice::from_ref(&one))
    };
    g.bench_function("next", |b| {
        b.iter_custom(|iters| {
            two_threads(&handle, iters, || {
                black_box(run(alloc.next(&one)).unwrap());
            })
        })
    });
    report("two_threads/next", &alloc, &one);

    let (alloc, _store) = {
        let _rt = rt.enter();
        allocator(std::slice::from_ref(&one))
    };
    let hundred = Count::new(100).unwrap();
    g.throughput(Throughput::Elements(100));
    g.bench_function("batch100", |b| {
        b.iter_custom(|iters| {
            two_threads(&handle, iters, || {
                black_box(run(alloc.batch(&one, hundred)).unwrap());
            })
        })
    });
    report("two_threads/batch100", &alloc, &one);
    g.finish();
}

fn many_names(c: &mut Criterion) {
    let rt = runtime();
    let _rt = rt.enter();
    let mut g = c.benchmark_group("names");
    g.throughput(Throughput::Elements(1));

    let names: Vec<SeqName> = (0..NAMES).map(|i| name(&format!("seq-{i:05}"))).collect();
    let (alloc, _store) = allocator(&names);

    let one = names[0].clone();
    g.bench_with_input(BenchmarkId::new("next", 1), &one, |b, one| {
        b.iter(|| run(alloc.next(black_box(one))).unwrap())
    });

    let mut i = 0usize;
    g.bench_with_input(
        BenchmarkId::new("next_round_robin", NAMES),
        &names,
        |b, names| {
            b.iter(|| {
                i = if i + 1 == names.len() { 0 } else { i + 1 };
                run(alloc.next(black_box(&names[i]))).unwrap()
            })
        },
    );
    report("names/next_round_robin", &alloc, &names[1]);
    g.finish();
}

/// One case of the interleaved summary: runs `iters` calls, returns the time.
struct Case<'a> {
    name: &'static str,
    ids_per_call: u64,
    run: Box<dyn FnMut(u64) -> Duration + 'a>,
}

fn case<'a>(name: &'static str, ids_per_call: u64, mut op: impl FnMut() + 'a) -> Case<'a> {
    Case {
        name,
        ids_per_call,
        run: Box::new(move |iters| {
            let t0 = Instant::now();
            for _ in 0..iters {
                op();
            }
            t0.elapsed()
        }),
    }
}

/// The cases again, run in short interleaved rounds (about 1 ms each, all
/// cases one after another, `ROUNDS` times) and summarized by the fastest and
/// the median round per case. On a shared machine the fastest round is the
/// cost without preemption, and interleaving exposes every case to the same
/// background load, so the ratios hold even when the absolute times drift.
fn interleaved_summary() {
    const ROUNDS: usize = 200;
    const ITERS: u64 = 20_000;
    let rt = runtime();
    let _rt = rt.enter();
    let handle = rt.handle().clone();

    let counter = AtomicU64::new(0);
    let counter2 = AtomicU64::new(0);
    let double = DoubleBuffer::new(Segment::new(1, HUGE, 0.1));
    let one = name("order");
    let map: HashMap<SeqName, Arc<u64>> = [(one.clone(), Arc::new(0))].into_iter().collect();
    let swap = ArcSwap::from_pointee(map.clone());
    let foldmap: HashMap<SeqName, Arc<u64>, foldhash::fast::RandomState> =
        map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let sip = sync_map::<std::collections::hash_map::RandomState>(&one);
    let fold = sync_map::<foldhash::fast::RandomState>(&one);
    let (a_next, _s1) = allocator(std::slice::from_ref(&one));
    let (a_block, _s2) = allocator(std::slice::from_ref(&one));
    let (a_place, _s7) = allocator(std::slice::from_ref(&one));
    let (a_batch, _s3) = allocator(std::slice::from_ref(&one));
    let (a_two, _s4) = allocator(std::slice::from_ref(&one));
    let (a_two_batch, _s5) = allocator(std::slice::from_ref(&one));
    let names: Vec<SeqName> = (0..NAMES).map(|i| name(&format!("seq-{i:05}"))).collect();
    let (a_names, _s6) = allocator(&names);
    let million: Vec<SeqName> = (0..MILLION)
        .map(|i| name(&format!("tenant-{i:07}")))
        .collect();
    let (a_million, _s8) = allocator(&million);
    let hundred = Count::new(100).unwrap();
    let mut rr = 0usize;
    let mut rr_m = 0usize;

    let mut cases = vec![
        case("atomic_fetch_add", 1, || {
            black_box(black_box(&counter).fetch_add(1, Ordering::Relaxed));
        }),
        case("double_buffer_take_fast", 1, || {
            black_box(black_box(&double).take_fast(1));
        }),
        case("arcswap_load (guard taken and dropped)", 1, || {
            black_box(black_box(&swap).load().len());
        }),
        case("hashmap_get_siphash", 1, || {
            black_box(black_box(&map).get(black_box(&one)).is_some());
        }),
        case("hashmap_get_foldhash", 1, || {
            black_box(black_box(&foldmap).get(black_box(&one)).is_some());
        }),
        case("arcswap_load_and_get", 1, || {
            black_box(black_box(&swap).load().get(black_box(&one)).is_some());
        }),
        case("sync_equivalent_siphash", 1, || {
            black_box(sync_equivalent(black_box(&sip), black_box(&one)));
        }),
        case("sync_equivalent_foldhash", 1, || {
            black_box(sync_equivalent(black_box(&fold), black_box(&one)));
        }),
        case("next_poll_once", 1, || {
            black_box(run(a_next.next(black_box(&one))).unwrap());
        }),
        case("next_polled_in_place", 1, || {
            // Built inside `pin!` and polled there: no move of the future.
            let mut fut = std::pin::pin!(a_place.next(black_box(&one)));
            let mut cx = Context::from_waker(futures::task::noop_waker_ref());
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(id) => black_box(id.unwrap()),
                Poll::Pending => black_box(futures::executor::block_on(fut).unwrap()),
            };
        }),
        case("next_futures_block_on", 1, || {
            black_box(futures::executor::block_on(a_block.next(black_box(&one))).unwrap());
        }),
        case("batch100_poll_once", 100, || {
            black_box(run(a_batch.batch(black_box(&one), hundred)).unwrap());
        }),
        case("names/next/1 (of 10,000)", 1, || {
            black_box(run(a_names.next(black_box(&names[0]))).unwrap());
        }),
        case("names/next_round_robin/10000", 1, || {
            rr = if rr + 1 == names.len() { 0 } else { rr + 1 };
            black_box(run(a_names.next(black_box(&names[rr]))).unwrap());
        }),
        case("names/next/1 (of 1,000,000)", 1, || {
            black_box(run(a_million.next(black_box(&million[0]))).unwrap());
        }),
        case("names/next_round_robin/1000000", 1, || {
            rr_m = if rr_m + 1 == million.len() {
                0
            } else {
                rr_m + 1
            };
            black_box(run(a_million.next(black_box(&million[rr_m]))).unwrap());
        }),
    ];
    let two = [
        ("two_threads/atomic_fetch_add", 1),
        ("two_threads/next", 1),
        ("two_threads/batch100", 100),
    ];
    cases.push(Case {
        name: two[0].0,
        ids_per_call: two[0].1,
        run: Box::new(|iters| {
            two_threads(&handle, iters, || {
                black_box(counter2.fetch_add(1, Ordering::Relaxed));
            })
        }),
    });
    cases.push(Case {
        name: two[1].0,
        ids_per_call: two[1].1,
        run: Box::new(|iters| {
            two_threads(&handle, iters, || {
                black_box(run(a_two.next(&one)).unwrap());
            })
        }),
    });
    cases.push(Case {
        name: two[2].0,
        ids_per_call: two[2].1,
        run: Box::new(|iters| {
            two_threads(&handle, iters, || {
                black_box(run(a_two_batch.batch(&one, hundred)).unwrap());
            })
        }),
    });

    let mut rounds: Vec<Vec<f64>> = vec![Vec::with_capacity(ROUNDS); cases.len()];
    for _ in 0..ROUNDS {
        for (c, r) in cases.iter_mut().zip(rounds.iter_mut()) {
            // Batches: a tenth of the calls, ten times the IDs per round.
            let iters = if c.ids_per_call > 1 {
                ITERS / 10
            } else {
                ITERS
            };
            let t = (c.run)(iters);
            r.push(t.as_nanos() as f64 / (iters * c.ids_per_call) as f64);
        }
    }
    let summary: Vec<(f64, f64)> = rounds
        .iter_mut()
        .map(|r| {
            r.sort_by(|a, b| a.total_cmp(b));
            (r[0], r[r.len() / 2])
        })
        .collect();
    let (base_min, base_med) = summary[0];
    eprintln!("\nInterleaved summary ({ROUNDS} rounds of {ITERS} calls; ns per ID; ratio to single-thread fetch_add)");
    eprintln!("| case | fastest round | median round | ratio (fastest) | ratio (median) |");
    eprintln!("|---|---:|---:|---:|---:|");
    for (c, (min, med)) in cases.iter().zip(&summary) {
        eprintln!(
            "| {} | {min:.2} | {med:.2} | {:.1}x | {:.1}x |",
            c.name,
            min / base_min,
            med / base_med
        );
    }
    report("summary/next_poll_once", &a_next, &one);
    report("summary/two_threads/next", &a_two, &one);
}

criterion_group!(benches, single_thread, two_threads_contended, many_names);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let listing = args.iter().any(|a| a == "--list" || a == "--test");
    // A criterion filter is a bare word; numbers are option values
    // (`--measurement-time 3`).
    let filtered = args
        .iter()
        .skip(1)
        .any(|a| !a.starts_with('-') && a != "summary" && a.parse::<f64>().is_err());
    benches();
    Criterion::default().configure_from_args().final_summary();
    // After the criterion groups, unless they were filtered: the interleaved
    // summary. `cargo bench --bench hot_path -- summary` runs it alone (the
    // filter matches no criterion benchmark).
    if !listing && !filtered {
        interleaved_summary();
    }
}
