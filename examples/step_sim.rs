//! Step policy simulation: seqd's `RateStep` against Leaf's doubling/halving
//! rule (`LeafStep`) and a fixed step (`FixedStep`), over several traffic
//! shapes, driving the real [`Allocator`] in simulated time.
//!
//! ```text
//! cargo run --release --example step_sim
//! ```
//!
//! How it works:
//!
//! - Every (shape, policy) pair runs on its own current-thread tokio runtime
//!   with time paused, against a fresh [`MemoryStore`] whose reservations take
//!   20 ms of tokio time. The allocator reads a [`ManualClock`]; the driver
//!   always moves the `ManualClock` and tokio's clock together (clock first,
//!   then `tokio::time::advance`), so the rate measurement, the fetch latency
//!   and the wait timeout all see the same simulated time.
//! - Traffic is generated per 100 ms tick: `rate(t) x 0.1 s` IDs (fractions
//!   carried over), issued as `batch` requests of at most 100 IDs, spread
//!   evenly over the tick. Same requests, same times, for every policy.
//! - Each request is polled once in place. If it completes, it did not wait.
//!   If not, it is spawned and finishes when the fetch lands (open-loop
//!   arrivals: requests that arrive during a stall wait too). The official
//!   count is the buffer's `waits` counter from `allocator.snapshot()`; the
//!   "pending on first poll" count is checked against it.
//! - While a fetch is in flight the driver steps time by at most 1 ms, so a
//!   prefetch lands about 20 ms after it started (21 ms measured: tokio's
//!   timer granularity), as against a real database. Otherwise time jumps
//!   straight to the next request (or restart instant).
//! - Besides `RateStep`, `LeafStep` and `FixedStep`, one what-if variant runs:
//!   `RateStep` capped at 512,000 (where Leaf's doubling from 1000 stops).
//!
//! Knobs: `STEP_SIM_LATENCY_MS=500` changes the store latency;
//! `STEP_SIM_TRACE=spike` (or any shape name) prints every fetch of that shape.
//! - Restart waste: at 50 instants drawn with a fixed-seed PRNG (the same
//!   instants for every policy of a shape) the driver reads the snapshot and
//!   records `current.remaining + next.remaining`: the IDs a restart at that
//!   instant would lose.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use seqd::allocator::{
    AllocError, Allocator, AllocatorConfig, FixedStep, LeafStep, ManualClock, RateStep, StepPolicy,
};
use seqd::domain::{Count, SeqName};
use seqd::store::memory::MemoryStore;
use tokio::task::JoinSet;

const ROW_STEP: i64 = 1_000;
const MAX_STEP: i64 = 1_000_000;
const SEGMENT_TARGET: Duration = Duration::from_secs(600);
/// Store latency per fetch; `STEP_SIM_LATENCY_MS` overrides it (default 20 ms).
fn store_latency() -> Duration {
    let ms = std::env::var("STEP_SIM_LATENCY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    Duration::from_millis(ms)
}
const TICK: Duration = Duration::from_millis(100);
/// Time step while a fetch is in flight.
const FINE_STEP: Duration = Duration::from_millis(1);
const MAX_BATCH: u64 = 100;
const RESTART_SAMPLES: usize = 50;
const SEED: u64 = 0x05EE_D1D5;

/// A traffic shape: IDs per second as a function of simulated time.
#[derive(Clone, Copy)]
enum Shape {
    Steady,
    Ramp,
    Spike,
    Diurnal,
    Idle,
}

const SPIKE_AT: f64 = 45.0 * 60.0;
const SPIKE_LEN: f64 = 60.0;

impl Shape {
    fn all() -> [Shape; 5] {
        [
            Shape::Steady,
            Shape::Ramp,
            Shape::Spike,
            Shape::Diurnal,
            Shape::Idle,
        ]
    }

    fn name(self) -> &'static str {
        match self {
            Shape::Steady => "steady",
            Shape::Ramp => "ramp",
            Shape::Spike => "spike",
            Shape::Diurnal => "diurnal",
            Shape::Idle => "idle",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Shape::Steady => "200 IDs/s for 2 h",
            Shape::Ramp => "0 -> 5,000 IDs/s linearly over 4 h",
            Shape::Spike => "100 IDs/s for 6 h, except 20,000 IDs/s for 60 s at 0:45",
            Shape::Diurnal => "50..3,000 IDs/s sinusoid, 24 h period, 24 h",
            Shape::Idle => "0.05 IDs/s (one ID every 20 s) for 6 h",
        }
    }

    fn duration(self) -> Duration {
        let h = match self {
            Shape::Steady => 2,
            Shape::Spike => 6,
            Shape::Ramp => 4,
            Shape::Diurnal => 24,
            Shape::Idle => 6,
        };
        Duration::from_secs(h * 3600)
    }

    fn rate(self, t: f64) -> f64 {
        let total = self.duration().as_secs_f64();
        match self {
            Shape::Steady => 200.0,
            Shape::Ramp => 5_000.0 * t / total,
            Shape::Spike => {
                if (SPIKE_AT..SPIKE_AT + SPIKE_LEN).contains(&t) {
                    20_000.0
                } else {
                    100.0
                }
            }
            Shape::Diurnal => {
                let phase = 2.0 * std::f64::consts::PI * t / 86_400.0;
                1_525.0 - 1_475.0 * phase.cos()
            }
            Shape::Idle => 0.05,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Policy {
    Rate,
    Leaf,
    Fixed,
    /// What-if: RateStep capped where Leaf's doubling effectively stops (512,000).
    Rate512k,
}

/// Leaf's doubling from a row step of 1000 stops at 1000 x 2^9 = 512,000:
/// 1,024,000 would pass max_step, and `LeafStep` then keeps the previous size.
const LEAF_EFFECTIVE_CAP: i64 = 512_000;

impl Policy {
    fn all() -> [Policy; 4] {
        [Policy::Rate, Policy::Leaf, Policy::Fixed, Policy::Rate512k]
    }

    fn what_if(self) -> bool {
        matches!(self, Policy::Rate512k)
    }

    fn build(self) -> Arc<dyn StepPolicy> {
        match self {
            Policy::Rate => Arc::new(RateStep {
                target: SEGMENT_TARGET,
                max_step: MAX_STEP,
            }),
            Policy::Leaf => Arc::new(LeafStep { max_step: MAX_STEP }),
            Policy::Fixed => Arc::new(FixedStep),
            Policy::Rate512k => Arc::new(RateStep {
                target: SEGMENT_TARGET,
                max_step: LEAF_EFFECTIVE_CAP,
            }),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Policy::Rate => "RateStep (seqd)",
            Policy::Leaf => "LeafStep",
            Policy::Fixed => "FixedStep (1000)",
            Policy::Rate512k => "RateStep, max_step 512k",
        }
    }
}

/// splitmix64: a fixed-seed PRNG in a few lines.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The restart instants of a shape (same for every policy).
fn restart_instants(shape: Shape, index: usize) -> VecDeque<Duration> {
    let mut rng = Rng(SEED ^ (index as u64).wrapping_mul(0x1234_5678_9ABC));
    let total = shape.duration().as_secs_f64();
    let mut v: Vec<Duration> = (0..RESTART_SAMPLES)
        .map(|_| Duration::from_secs_f64(rng.unit() * total))
        .collect();
    v.sort();
    v.into()
}

#[derive(Debug, Default, Clone)]
struct Outcome {
    hours: f64,
    fetches: u64,
    calls: u64,
    ids: u64,
    waits: u64,
    pending_first_poll: u64,
    errors: u64,
    waste: Vec<u64>,
    max_segment: i64,
    final_segment: i64,
    mean_fetch_latency_ms: f64,
    /// (time, segment size, measured rate) of every fetch, for `STEP_SIM_TRACE`.
    trace: Vec<(Duration, i64, f64)>,
}

impl Outcome {
    fn fetches_per_hour(&self) -> f64 {
        self.fetches as f64 / self.hours
    }
    fn waste_mean(&self) -> f64 {
        self.waste.iter().sum::<u64>() as f64 / self.waste.len().max(1) as f64
    }
    fn waste_max(&self) -> u64 {
        self.waste.iter().copied().max().unwrap_or(0)
    }
    fn wait_pct(&self) -> f64 {
        100.0 * self.waits as f64 / self.calls.max(1) as f64
    }
}

struct Sim {
    clock: ManualClock,
    now: Duration,
    alloc: Allocator,
    name: SeqName,
    samples: VecDeque<Duration>,
    inflight: JoinSet<Result<u64, AllocError>>,
    out: Outcome,
    latency_sum_ms: f64,
    latency_n: u64,
    last_fetches: u64,
}

impl Sim {
    /// Moves both clocks to `to`; steps finely while a fetch is in flight;
    /// takes the restart samples that fall on the way.
    async fn advance_to(&mut self, to: Duration) {
        loop {
            let loading = self.observe();
            let mut step_to = to;
            if let Some(&s) = self.samples.front() {
                step_to = step_to.min(s);
            }
            if loading {
                step_to = step_to.min(self.now + FINE_STEP);
            }
            if step_to > self.now {
                // Clock first: fetch tasks that run during advance() read it.
                self.clock.set(step_to);
                tokio::time::advance(step_to - self.now).await;
                self.now = step_to;
            } else {
                tokio::task::yield_now().await;
            }
            self.reap();
            while self.samples.front().is_some_and(|&s| s <= self.now) {
                self.samples.pop_front();
                let waste = self.alloc.snapshot(&self.name).map_or(0, |s| {
                    s.current.map_or(0, |c| c.remaining) + s.next.map_or(0, |n| n.remaining)
                });
                self.out.waste.push(waste);
            }
            if self.now >= to {
                return;
            }
        }
    }

    /// Reads the buffer state; returns whether a fetch is in flight.
    fn observe(&mut self) -> bool {
        match self.alloc.snapshot(&self.name) {
            Some(s) => {
                self.out.max_segment = self.out.max_segment.max(s.current_step);
                if s.fetches != self.last_fetches {
                    self.last_fetches = s.fetches;
                    self.out
                        .trace
                        .push((self.now, s.current_step, s.rate_per_sec));
                    if let Some(l) = s.last_fetch_latency_ms {
                        self.latency_sum_ms += l;
                        self.latency_n += 1;
                    }
                }
                s.loading
            }
            // Not live yet: the first fetch is in flight if anything was asked.
            None => self.out.calls > 0,
        }
    }

    fn reap(&mut self) {
        while let Some(r) = self.inflight.try_join_next() {
            self.account(r.expect("request task panicked"));
        }
    }

    fn account(&mut self, r: Result<u64, AllocError>) {
        match r {
            Ok(n) => self.out.ids += n,
            Err(_) => self.out.errors += 1,
        }
    }

    /// Issues one request of `n` IDs at the current time.
    async fn request(&mut self, n: u64) {
        self.out.calls += 1;
        let alloc = self.alloc.clone();
        let name = self.name.clone();
        let count = Count::new(n as u32).expect("1..=100");
        let mut fut = Box::pin(async move { alloc.batch(&name, count).await.map(|b| b.len()) });
        match futures::poll!(fut.as_mut()) {
            Poll::Ready(r) => self.account(r),
            Poll::Pending => {
                self.out.pending_first_poll += 1;
                self.inflight.spawn(fut);
            }
        }
    }
}

async fn simulate(shape: Shape, index: usize, policy: Policy) -> Outcome {
    let store = Arc::new(MemoryStore::new());
    store.insert("sim", 0, ROW_STEP);
    store.set_delay("sim", store_latency());
    let clock = ManualClock::new();
    let config = AllocatorConfig {
        segment_target: SEGMENT_TARGET,
        max_step: MAX_STEP,
        ..AllocatorConfig::default()
    };
    let alloc = Allocator::with_parts(
        store.clone(),
        config,
        Arc::new(clock.clone()),
        policy.build(),
    );
    let name = SeqName::parse("sim").unwrap();
    let mut sim = Sim {
        clock,
        now: Duration::ZERO,
        alloc,
        name: name.clone(),
        samples: restart_instants(shape, index),
        inflight: JoinSet::new(),
        out: Outcome {
            hours: shape.duration().as_secs_f64() / 3600.0,
            ..Outcome::default()
        },
        latency_sum_ms: 0.0,
        latency_n: 0,
        last_fetches: 0,
    };

    let total = shape.duration();
    let ticks = (total.as_nanos() / TICK.as_nanos()) as u64;
    let mut carry = 0.0f64;
    for k in 0..ticks {
        let t0 = TICK * k as u32;
        let mid = (t0 + TICK / 2).as_secs_f64();
        carry += shape.rate(mid) * TICK.as_secs_f64();
        let n_ids = carry.floor() as u64;
        carry -= n_ids as f64;
        if n_ids == 0 {
            continue;
        }
        let calls = n_ids.div_ceil(MAX_BATCH);
        for j in 0..calls {
            // Near-equal parts, spread evenly over the tick.
            let n = n_ids * (j + 1) / calls - n_ids * j / calls;
            let at = t0 + TICK * j as u32 / calls as u32;
            sim.advance_to(at).await;
            sim.request(n).await;
        }
    }
    sim.advance_to(total).await;
    while let Some(r) = sim.inflight.join_next().await {
        sim.account(r.expect("request task panicked"));
    }

    let snap = sim.alloc.snapshot(&name);
    let mut out = sim.out;
    out.fetches = store.reserves("sim");
    out.waits = snap.as_ref().map_or(0, |s| s.waits);
    out.final_segment = snap.as_ref().map_or(0, |s| s.current_step);
    out.mean_fetch_latency_ms = if sim.latency_n > 0 {
        sim.latency_sum_ms / sim.latency_n as f64
    } else {
        0.0
    };
    out
}

fn run_one(shape: Shape, index: usize, policy: Policy) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(simulate(shape, index, policy))
}

fn fmt_int(n: f64) -> String {
    let n = n.round() as i64;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

fn main() {
    let started = Instant::now();
    let jobs: Vec<(usize, Shape, Policy)> = Shape::all()
        .into_iter()
        .enumerate()
        .flat_map(|(i, s)| Policy::all().into_iter().map(move |p| (i, s, p)))
        .collect();

    // Independent runs (each its own paused runtime) on all cores.
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(jobs.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(vec![None; jobs.len()]);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(idx, shape, policy)) = jobs.get(i) else {
                    break;
                };
                let t = Instant::now();
                let out = run_one(shape, idx, policy);
                eprintln!(
                    "  {:<8} {:<17} done in {:.1?}",
                    shape.name(),
                    policy.label(),
                    t.elapsed()
                );
                results.lock().unwrap()[i] = Some(out);
            });
        }
    });
    let results: Vec<Outcome> = results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect();

    let mut md = String::new();
    writeln!(
        md,
        "Row step {ROW_STEP}, max_step {}, segment_target {} min, store latency {} ms per fetch, \
         prefetch at 10%, wait timeout 3 s. Requests are batches of up to {MAX_BATCH} IDs \
         (a tick's `rate x 100 ms` IDs split into near-equal batches spread over the tick), \
         identical for every policy. Restart waste: mean (max) of `current.remaining + next.remaining` \
         at {RESTART_SAMPLES} random instants (fixed seed).\n",
        fmt_int(MAX_STEP as f64),
        SEGMENT_TARGET.as_secs() / 60,
        store_latency().as_millis(),
    )
    .unwrap();
    let table = |md: &mut String, what_if: bool| {
        writeln!(
            md,
            "| shape | policy | DB fetches/h | requests that waited | restart waste, mean (max) IDs | largest segment | last segment |"
        )
        .unwrap();
        writeln!(md, "|---|---|---:|---:|---:|---:|---:|").unwrap();
        for ((_, shape, policy), o) in jobs.iter().zip(&results) {
            if policy.what_if() != what_if {
                continue;
            }
            writeln!(
                md,
                "| {} | {} | {} | {} ({:.3}%) | {} ({}) | {} | {} |",
                shape.name(),
                policy.label(),
                if o.fetches_per_hour() >= 10.0 {
                    fmt_int(o.fetches_per_hour())
                } else {
                    format!("{:.2}", o.fetches_per_hour())
                },
                fmt_int(o.waits as f64),
                o.wait_pct(),
                fmt_int(o.waste_mean()),
                fmt_int(o.waste_max() as f64),
                fmt_int(o.max_segment as f64),
                fmt_int(o.final_segment as f64),
            )
            .unwrap();
        }
    };
    table(&mut md, false);
    writeln!(
        md,
        "\nWhat-if variant (not seqd's default): RateStep capped at Leaf's effective cap \
         (doubling from 1000 stops at 512,000).\n"
    )
    .unwrap();
    table(&mut md, true);

    println!("## Step policy simulation (generated by `cargo run --release --example step_sim`)\n");
    println!("Shapes:");
    for s in Shape::all() {
        println!("- {}: {}", s.name(), s.describe());
    }
    println!();
    print!("{md}");
    println!();
    println!("Details (sanity checks):");
    println!("| shape | policy | requests | IDs issued | pending on first poll | errors | mean fetch latency (ms) |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for ((_, shape, policy), o) in jobs.iter().zip(&results) {
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.1} |",
            shape.name(),
            policy.label(),
            fmt_int(o.calls as f64),
            fmt_int(o.ids as f64),
            fmt_int(o.pending_first_poll as f64),
            o.errors,
            o.mean_fetch_latency_ms
        );
        if o.pending_first_poll != o.waits {
            println!(
                "  (note: {} requests were pending on first poll but the waits counter says {})",
                o.pending_first_poll, o.waits
            );
        }
    }
    if let Ok(want) = std::env::var("STEP_SIM_TRACE") {
        for ((_, shape, policy), o) in jobs.iter().zip(&results) {
            if shape.name() != want || *policy == Policy::Fixed {
                continue;
            }
            println!();
            println!(
                "Fetch trace, {} / {}: time the segment landed, its size, plan_fetch's smoothed rate (IDs/s)",
                shape.name(),
                policy.label()
            );
            for (t, size, rate) in &o.trace {
                let secs = t.as_secs_f64();
                println!(
                    "  {:>2}:{:02}:{:06.3}  {:>9}  {:>10.1}",
                    (secs / 3600.0) as u64,
                    ((secs % 3600.0) / 60.0) as u64,
                    secs % 60.0,
                    fmt_int(*size as f64),
                    rate
                );
            }
        }
    }
    println!();
    println!(
        "Total wall time: {:.1?} on {threads} thread(s)",
        started.elapsed()
    );
}
