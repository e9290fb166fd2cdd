//! Candidates for the allocator's name -> buffer map, side by side: what a
//! lookup plus one `fetch_add` on the found value costs with one name and
//! round-robin over many (100,000 and 1,000,000), and what inserting every
//! name one by one costs (the first use of each sequence). Results and the
//! machine: BENCHMARKS.md, "Name map".
//!
//! `cargo bench --bench name_map` (about 2 minutes; prints a Markdown table)
//!
//! Every case runs in short interleaved rounds and keeps the fastest and the
//! median round, as `benches/hot_path.rs` does: the machines are shared, and
//! interleaving exposes every candidate to the same background load.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use seqd::domain::SeqName;

type Fold = foldhash::fast::RandomState;

/// What a map holds per name: a counter standing for the sequence's buffer.
struct Slot(AtomicU64);

fn slot() -> Arc<Slot> {
    Arc::new(Slot(AtomicU64::new(0)))
}

/// One candidate: lookup + claim, and insert.
trait Candidate: Sync {
    const NAME: &'static str;
    fn new() -> Self;
    fn insert(&self, name: SeqName, value: Arc<Slot>);
    fn claim(&self, name: &str) -> u64;
}

/// Today's map: a `HashMap` behind `ArcSwap`, copied on every insert.
struct ArcSwapMap {
    map: ArcSwap<HashMap<SeqName, Arc<Slot>, Fold>>,
    writers: Mutex<()>,
}

impl Candidate for ArcSwapMap {
    const NAME: &'static str = "ArcSwap<HashMap> (copy on insert)";
    fn new() -> Self {
        ArcSwapMap {
            map: ArcSwap::from_pointee(HashMap::default()),
            writers: Mutex::new(()),
        }
    }
    fn insert(&self, name: SeqName, value: Arc<Slot>) {
        let _w = self.writers.lock().unwrap();
        let mut m = HashMap::clone(&self.map.load());
        m.insert(name, value);
        self.map.store(Arc::new(m));
    }
    #[inline]
    fn claim(&self, name: &str) -> u64 {
        self.map
            .load()
            .get(name)
            .unwrap()
            .0
            .fetch_add(1, Ordering::Relaxed)
    }
}

/// A candidate `$name` (shown as `$label`) that wraps a map `$map` made by
/// `with_hasher`: `$m` is the map in `$insert` (of `$n`, `$v`) and in `$claim`
/// (of `$n`).
macro_rules! candidate {
    (
        $name:ident($label:literal, $map:ty),
        insert |$m:ident, $n:ident, $v:ident| $insert:expr,
        claim |$cm:ident, $cn:ident| $claim:expr
    ) => {
        struct $name($map);

        impl Candidate for $name {
            const NAME: &'static str = $label;
            fn new() -> Self {
                $name(<$map>::with_hasher(Fold::default()))
            }
            fn insert(&self, $n: SeqName, $v: Arc<Slot>) {
                let $m = &self.0;
                let _ = $insert;
            }
            #[inline]
            fn claim(&self, $cn: &str) -> u64 {
                let $cm = &self.0;
                $claim
            }
        }
    };
}

candidate!(Papaya("papaya::HashMap", papaya::HashMap<SeqName, Arc<Slot>, Fold>),
    insert |m, name, value| m.pin().insert(name, value),
    claim |m, name| m.pin().get(name).unwrap().0.fetch_add(1, Ordering::Relaxed));
candidate!(SccIndex("scc::HashIndex", scc::HashIndex<SeqName, Arc<Slot>, Fold>),
    insert |m, name, value| m.insert(name, value),
    claim |m, name| m.peek_with(name, |_, v| v.0.fetch_add(1, Ordering::Relaxed)).unwrap());
candidate!(Dash("dashmap::DashMap (sharded RwLock)", dashmap::DashMap<SeqName, Arc<Slot>, Fold>),
    insert |m, name, value| m.insert(name, value),
    claim |m, name| m.get(name).unwrap().0.fetch_add(1, Ordering::Relaxed));
candidate!(SccMap("scc::HashMap", scc::HashMap<SeqName, Arc<Slot>, Fold>),
    insert |m, name, value| m.insert(name, value),
    claim |m, name| m.read(name, |_, v| v.0.fetch_add(1, Ordering::Relaxed)).unwrap());

fn names(n: usize) -> Vec<SeqName> {
    (0..n)
        .map(|i| SeqName::parse(&format!("tenant-{i:07}")).unwrap())
        .collect()
}

/// Times `iters` calls of `op`, in nanoseconds per call.
fn per_call(iters: u64, mut op: impl FnMut()) -> f64 {
    let t0 = Instant::now();
    for _ in 0..iters {
        op();
    }
    t0.elapsed().as_nanos() as f64 / iters as f64
}

/// Fastest and median of `rounds` measurements.
fn summarize(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[0], v[v.len() / 2])
}

struct Row {
    candidate: &'static str,
    one: (f64, f64),
    rr: Vec<(usize, (f64, f64))>,
    insert: Vec<(usize, Duration)>,
}

fn measure<C: Candidate>(sizes: &[usize], insert_cap: usize, floor: &AtomicU64) -> Row {
    const ROUNDS: usize = 60;
    const ITERS: u64 = 200_000;
    let mut rr = Vec::new();
    let mut insert = Vec::new();
    let mut one = Vec::new();
    for &n in sizes {
        let all = names(n);
        let map = C::new();
        let t0 = Instant::now();
        let mut done = 0usize;
        for name in &all {
            map.insert(name.clone(), slot());
            done += 1;
            if n > insert_cap && done.is_multiple_of(1024) && t0.elapsed() > Duration::from_secs(20)
            {
                break;
            }
        }
        let took = t0.elapsed();
        if done < n {
            eprintln!(
                "  {}: {done} of {n} names inserted in 20 s; stopped",
                C::NAME
            );
            insert.push((n, Duration::MAX));
            continue;
        }
        insert.push((n, took));
        let first = all[0].as_str();
        let mut samples_rr = Vec::new();
        let mut i = 0usize;
        for _ in 0..ROUNDS {
            samples_rr.push(per_call(ITERS, || {
                i = if i + 1 == all.len() { 0 } else { i + 1 };
                black_box(map.claim(black_box(all[i].as_str())));
            }));
            if one.len() < ROUNDS {
                one.push(per_call(ITERS, || {
                    black_box(map.claim(black_box(first)));
                }));
                black_box(per_call(ITERS, || {
                    black_box(black_box(floor).fetch_add(1, Ordering::Relaxed));
                }));
            }
        }
        rr.push((n, summarize(samples_rr)));
    }
    Row {
        candidate: C::NAME,
        one: summarize(one),
        rr,
        insert,
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` lists benches; nothing to list here.
    }
    let quick = std::env::args().any(|a| a == "--test" || a == "quick");
    let sizes: &[usize] = if quick {
        &[1_000]
    } else {
        &[100_000, 1_000_000]
    };
    let floor = AtomicU64::new(0);
    let fetch_add = summarize(
        (0..60)
            .map(|_| {
                per_call(200_000, || {
                    black_box(black_box(&floor).fetch_add(1, Ordering::Relaxed));
                })
            })
            .collect(),
    );
    let rows = vec![
        measure::<ArcSwapMap>(sizes, 100_000, &floor),
        measure::<Papaya>(sizes, usize::MAX, &floor),
        measure::<SccIndex>(sizes, usize::MAX, &floor),
        measure::<SccMap>(sizes, usize::MAX, &floor),
        measure::<Dash>(sizes, usize::MAX, &floor),
    ];
    println!(
        "bare fetch_add: fastest {:.1} ns, median {:.1} ns",
        fetch_add.0, fetch_add.1
    );
    print!("| map | 1 name: lookup + fetch_add (fastest / median ns) |");
    for n in sizes {
        print!(" round-robin over {n} (fastest / median ns) |");
    }
    for n in sizes {
        print!(" insert {n} names one by one |");
    }
    println!();
    print!("|---|---:|");
    for _ in 0..sizes.len() * 2 {
        print!("---:|");
    }
    println!();
    for r in rows {
        print!("| {} | {:.1} / {:.1} |", r.candidate, r.one.0, r.one.1);
        for &(_, (f, m)) in &r.rr {
            print!(" {f:.1} / {m:.1} |");
        }
        for _ in r.rr.len()..sizes.len() {
            print!(" - |");
        }
        for &(_, d) in &r.insert {
            if d == Duration::MAX {
                print!(" > 20 s (stopped) |");
            } else {
                print!(" {:.2} s |", d.as_secs_f64());
            }
        }
        println!();
    }
}
