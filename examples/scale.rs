//! Client of the scale benchmark (`scripts/bench/scale.sh`): touches every
//! one of `N` sequences once through a running seqd and reports, per block of
//! names, the rate of first uses, the slowest of them and the server's
//! resident memory; then every name once more (the warm rate of the same
//! run), the time of a listing page and the size and time of a `/metrics`
//! scrape.
//!
//! `cargo run --release --example scale -- URL PID NAMES [BLOCK] [CONCURRENCY] [PREFIX]`
//!
//! Names are `{PREFIX}{i:07}` for `i` in `0..NAMES` (the rows are expected in
//! the database already). Prints one Markdown table row per block and a
//! summary line per measurement; every request must answer 200.

use std::time::{Duration, Instant};

use futures::StreamExt;

/// The server's resident set, in KiB, from `/proc/PID/status`.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("server running");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

async fn timed_get(client: &reqwest::Client, url: &str) -> (Duration, usize) {
    let t0 = Instant::now();
    let resp = client.get(url).send().await.expect("request");
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    let body = resp.bytes().await.expect("body");
    (t0.elapsed(), body.len())
}

/// Median of five timed GETs of `url`: (time, body bytes).
async fn median_get(client: &reqwest::Client, url: &str) -> (Duration, usize) {
    let mut runs = Vec::new();
    for _ in 0..5 {
        runs.push(timed_get(client, url).await);
    }
    runs.sort();
    runs[2]
}

/// One `/next` of each name `{prefix}{i:07}` for `i` in `range`, with
/// `concurrency` requests in flight: the rate per second and the slowest
/// request.
async fn pass(
    client: &reqwest::Client,
    base: &str,
    prefix: &str,
    range: std::ops::Range<usize>,
    concurrency: usize,
) -> (f64, Duration) {
    let count = range.len();
    let t0 = Instant::now();
    let slowest = futures::stream::iter(range)
        .map(|i| {
            let url = format!("{base}/v1/sequences/{prefix}{i:07}/next");
            async move {
                let sent = Instant::now();
                let resp = client
                    .get(&url)
                    .header("accept", "text/plain")
                    .send()
                    .await
                    .expect("request");
                assert_eq!(resp.status(), 200, "{url}");
                resp.bytes().await.expect("body");
                sent.elapsed()
            }
        })
        .buffer_unordered(concurrency)
        .fold(Duration::ZERO, |m, d| async move { m.max(d) })
        .await;
    (count as f64 / t0.elapsed().as_secs_f64(), slowest)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, base, pid, names, rest @ ..] = args.as_slice() else {
        eprintln!("usage: scale URL PID NAMES [BLOCK] [CONCURRENCY] [PREFIX]");
        std::process::exit(2);
    };
    let pid: u32 = pid.parse().expect("PID");
    let names: usize = names.parse().expect("NAMES");
    let block: usize = rest
        .first()
        .map_or(100_000, |b| b.parse().expect("BLOCK"))
        .min(names);
    let concurrency: usize = rest.get(1).map_or(32, |c| c.parse().expect("CONCURRENCY"));
    let prefix = rest.get(2).map_or("tenant-", String::as_str).to_owned();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()
        .unwrap();

    let rss_before = rss_kib(pid);
    println!("server RSS before the first use: {} KiB", rss_before);
    println!(
        "| names | first uses per second | slowest first use (ms) | RSS (MiB) | RSS growth per sequence (bytes) |"
    );
    println!("|---:|---:|---:|---:|---:|");
    let mut start = 0;
    while start < names {
        let end = (start + block).min(names);
        let (rate, slowest) = pass(&client, base, &prefix, start..end, concurrency).await;
        let rss = rss_kib(pid);
        println!(
            "| {start}..{end} | {rate:.0} | {:.0} | {:.1} | {:.0} |",
            slowest.as_secs_f64() * 1e3,
            rss as f64 / 1024.0,
            (rss.saturating_sub(rss_before) * 1024) as f64 / end as f64
        );
        start = end;
    }
    // The same names again, each now served from memory: the warm rate of
    // the same run, to set the first uses beside.
    let (warm, slowest) = pass(&client, base, &prefix, 0..names, concurrency).await;
    println!(
        "warm: every name once more, {warm:.0} per second (slowest {:.1} ms)",
        slowest.as_secs_f64() * 1e3
    );

    let middle = format!("{prefix}{:07}", names / 2);
    let (first, first_len) = median_get(&client, &format!("{base}/v1/sequences?limit=100")).await;
    let (mid, _) = median_get(
        &client,
        &format!("{base}/v1/sequences?limit=100&after={middle}"),
    )
    .await;
    println!(
        "list page (limit 100): first {:.2} ms ({first_len} bytes), after the middle name {:.2} ms (median of 5)",
        first.as_secs_f64() * 1e3,
        mid.as_secs_f64() * 1e3
    );
    let (scrape, size) = median_get(&client, &format!("{base}/metrics")).await;
    println!(
        "/metrics: {size} bytes, {:.1} ms (median of 5); server RSS after: {:.1} MiB",
        scrape.as_secs_f64() * 1e3,
        rss_kib(pid) as f64 / 1024.0
    );
}
