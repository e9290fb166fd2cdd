//! IDs per second through seqd-client beside `/next` over HTTP: one
//! process, a seqd server started in it on SQLite (127.0.0.1), and 8 tasks
//! drawing IDs, first through one `Client` (leases, IDs handed out in
//! process), then each with `GET /v1/sequences/{name}/next` through one
//! shared `reqwest::Client`.
//!
//! `cargo run --release -p seqd-client --example throughput [SECONDS]`
//! (3 seconds a run by default).

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TASKS: usize = 8;

/// Runs `TASKS` copies of `draw` for `secs`; IDs per second. Each call of
/// `draw` gets `n` IDs and returns how many it got.
async fn run<F, Fut>(secs: f64, draw: F) -> f64
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = u64> + Send,
{
    let total = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (draw, total) = (draw.clone(), total.clone());
        tasks.push(tokio::spawn(async move {
            let mut mine = 0;
            while Instant::now() < deadline {
                mine += draw().await;
                // Let the other tasks (and the server) run, as work between
                // IDs would.
                tokio::task::yield_now().await;
            }
            total.fetch_add(mine, Ordering::Relaxed);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    total.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("SECONDS: a number"))
        .unwrap_or(3.0);
    let server = support::Server::start().await;
    server.create("tp-client", 1, 1000).await;
    server.create("tp-http", 1, 1000).await;

    let client = server.client(100_000);
    let seq = client.sequence("tp-client").unwrap();
    seq.next().await.unwrap();
    let via_client = run(secs, move || {
        let seq = seq.clone();
        async move {
            // 1000 calls of next() between two yields.
            for _ in 0..1000 {
                std::hint::black_box(seq.next().await.unwrap());
            }
            1000
        }
    })
    .await;
    let summary = client.close().await;

    let http = reqwest::Client::new();
    let base = server.base.clone();
    support::next_over_http(&http, &base, "tp-http").await;
    let via_http = run(secs, move || {
        let (http, base) = (http.clone(), base.clone());
        async move {
            std::hint::black_box(support::next_over_http(&http, &base, "tp-http").await);
            1
        }
    })
    .await;
    server.stop().await;

    println!("{TASKS} tasks, {secs} s each, server in process on SQLite over 127.0.0.1 HTTP");
    println!("seqd-client next() (leases of 100,000): {via_client:>14.0} IDs/s");
    println!("GET /next over HTTP (reqwest):          {via_http:>14.0} IDs/s");
    println!("ratio: {:.0}x", via_client / via_http);
    println!(
        "close: {} IDs given back, {} left unused",
        summary.returned, summary.kept
    );
}
