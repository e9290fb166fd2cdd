//! `/metrics` at scale: 100,000 and 1,000,000 sequences fit a body under
//! 1 MB, with per-sequence series only for the `--metrics-top` sequences
//! (those in trouble first, then the busiest) and exact totals over all;
//! a top of zero shows no sequence and every total.

use crate::support::common;
use crate::support::metrics_text;

use std::collections::BTreeSet;
use std::sync::Arc;

use metrics_text::*;
use seqd::allocator::SeqStats;
use seqd::domain::SeqName;
use seqd::http::metrics::{render, render_from, DEFAULT_TOP};
use seqd::store::memory::MemoryStore;

/// `n` sequences as a scrape would read them, in no particular order: the
/// one with index `i` has issued `(i * 7919) % n` IDs (each count once),
/// and names padded to `name_len` characters. Indexes 10, 20 and 30 are in
/// trouble with few IDs issued: a regression, no ID left after failed
/// fetches, the ID space nearly used.
fn synthetic(n: usize, name_len: usize) -> Vec<(SeqName, SeqStats)> {
    (0..n)
        .map(|i| {
            let mut name = format!("seq-{i:07}-");
            while name.len() < name_len {
                name.push('x');
            }
            let issued = (i as u64 * 7919) % n as u64;
            let mut stats = SeqStats {
                issued,
                fetches: 1 + issued / 1000,
                fetch_errors: 0,
                waits: 1,
                regressions: 0,
                step: 1000,
                ids_available: 1000 - issued % 1000,
                high_water: Some((issued + 1000 - issued % 1000) as i64),
            };
            match i {
                10 => stats.regressions = 1,
                20 => (stats.fetch_errors, stats.ids_available) = (7, 0),
                30 => stats.high_water = Some(i64::MAX / 100 * 95),
                _ => {}
            }
            (common::name(&name), stats)
        })
        .collect()
}

/// The `top` sequences of [`synthetic`] that must be shown: the three in
/// trouble, then the most IDs issued.
fn expected_top(all: &[(SeqName, SeqStats)], top: usize) -> Vec<String> {
    let mut ranked: Vec<_> = all.iter().collect();
    let trouble = |i: usize| matches!(i, 10 | 20 | 30);
    let mut troubled: Vec<_> = [10, 20, 30].iter().map(|&i| &all[i]).collect();
    troubled.sort_by_key(|(_, s)| std::cmp::Reverse(s.issued));
    ranked.retain(|(n, _)| {
        let i: usize = n.as_str()[4..11].parse().unwrap();
        !trouble(i)
    });
    ranked.sort_by_key(|(_, s)| std::cmp::Reverse(s.issued));
    troubled
        .into_iter()
        .chain(ranked)
        .take(top)
        .map(|(n, _)| n.to_string())
        .collect()
}

fn render_synthetic(all: &[(SeqName, SeqStats)], top: usize) -> String {
    render_from(top, |f| all.iter().for_each(|(n, s)| f(n, s)))
}

/// The body for `all` with the default top, asserted under [`MAX_BODY`]
/// (its size printed), and its samples.
#[track_caller]
fn body_under_a_megabyte(all: &[(SeqName, SeqStats)], what: &str) -> (String, Vec<Sample>) {
    let text = render_synthetic(all, DEFAULT_TOP);
    eprintln!(
        "/metrics at {what}, top {DEFAULT_TOP}: {} bytes",
        text.len()
    );
    assert!(text.len() < MAX_BODY, "{what}: {} bytes", text.len());
    let samples = parse(&text);
    (text, samples)
}

/// At 100,000 live sequences with the longest names allowed, `/metrics`
/// stays under 1 MB, passes promtool, shows exactly the top sequences
/// (trouble first, then the most IDs issued, in that order) and totals equal
/// to the sums over all of them.
#[test]
fn a_hundred_thousand_sequences_fit_in_a_megabyte_with_exact_totals() {
    let all = synthetic(100_000, 128);
    let (text, samples) =
        body_under_a_megabyte(&all, "100,000 sequences (names of 128 characters)");
    let expected = expected_top(&all, DEFAULT_TOP);
    assert_top(&samples, &expected, "");
    let chosen: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
    for (name, stats) in all.iter().filter(|(n, _)| chosen.contains(n.as_str())) {
        let seq = [("sequence", name.as_str())];
        let m = |family: &str| value(&samples, family, &seq).unwrap();
        assert_eq!(m("seqd_ids_issued_total"), stats.issued as f64);
        assert_eq!(m("seqd_segment_fetches_total"), stats.fetches as f64);
        assert_eq!(
            m("seqd_segment_fetch_errors_total"),
            stats.fetch_errors as f64
        );
        assert_eq!(m("seqd_segment_waits_total"), stats.waits as f64);
        assert_eq!(m("seqd_sequence_step"), stats.step as f64);
        assert_eq!(m("seqd_sequence_ids_available"), stats.ids_available as f64);
        assert_eq!(
            m("seqd_sequence_regressions_total"),
            stats.regressions as f64
        );
        assert_eq!(
            m("seqd_sequence_space_used_ratio"),
            stats.high_water.unwrap() as f64 / i64::MAX as f64
        );
    }
    let sum = |f: fn(&SeqStats) -> u64| all.iter().map(|(_, s)| f(s)).sum::<u64>() as f64;
    assert_eq!(
        total(&samples, "seqd_all_ids_issued_total"),
        sum(|s| s.issued)
    );
    assert_eq!(
        total(&samples, "seqd_all_segment_fetches_total"),
        sum(|s| s.fetches)
    );
    assert_eq!(total(&samples, "seqd_all_segment_fetch_errors_total"), 7.0);
    assert_eq!(total(&samples, "seqd_all_segment_waits_total"), 100_000.0);
    assert_eq!(total(&samples, "seqd_all_sequence_regressions_total"), 1.0);
    assert_eq!(
        total(&samples, "seqd_all_sequence_ids_available"),
        sum(|s| s.ids_available)
    );
    assert_eq!(
        total(&samples, "seqd_all_sequence_max_space_used_ratio"),
        (i64::MAX / 100 * 95) as f64 / i64::MAX as f64
    );
    assert_eq!(total(&samples, "seqd_all_sequences_failing"), 1.0);
    assert_eq!(total(&samples, "seqd_all_sequences_regressed"), 1.0);
    promtool_check(&text);

    // Another top: the same rule, as many as asked.
    let text = render_synthetic(&all, 7);
    assert_top(&parse(&text), &expected_top(&all, 7), &text);
}

/// 100,000 sequences made live through the allocator itself (one first use
/// each, on the in-memory store), then a real scrape: every one is live, the
/// body is under 1 MB and passes promtool, exactly the top get series, and
/// the totals count every sequence's ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_live_sequences_scrape_under_a_megabyte() {
    use futures::StreamExt;
    use seqd::allocator::AllocatorConfig;
    use seqd::service::Service;
    const N: usize = 100_000;
    let store = Arc::new(MemoryStore::new());
    let names: Vec<SeqName> = (0..N)
        .map(|i| common::name(&format!("tenant-{i:06}")))
        .collect();
    for n in &names {
        store.insert(n.as_str(), 0, 10);
    }
    let service = Service::new(store, AllocatorConfig::default());
    let alloc = service.allocator().clone();
    let ids: Vec<i64> = futures::stream::iter(&names)
        .map(|n| {
            let alloc = alloc.clone();
            async move { alloc.next(n).await.unwrap() }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    assert!(ids.iter().all(|&id| id == 1), "each name's first ID is 1");
    assert_eq!(alloc.names_in_memory().live, N);
    let text = {
        let service = service.clone();
        tokio::task::spawn_blocking(move || render(&service, DEFAULT_TOP))
            .await
            .unwrap()
    };
    eprintln!("/metrics at {N} live sequences: {} bytes", text.len());
    assert!(text.len() < MAX_BODY, "{} bytes", text.len());
    let samples = parse(&text);
    assert_eq!(shown(&samples, "seqd_ids_issued_total").len(), DEFAULT_TOP);
    assert_eq!(total(&samples, "seqd_all_ids_issued_total"), N as f64);
    promtool_check(&text);
}

/// At a million live sequences the body is still under 1 MB.
#[test]
fn a_million_sequences_fit_in_a_megabyte() {
    let all = synthetic(1_000_000, 24);
    let (_, samples) = body_under_a_megabyte(&all, "1,000,000 sequences");
    assert_eq!(shown(&samples, "seqd_ids_issued_total").len(), DEFAULT_TOP);
    let issued: u64 = all.iter().map(|(_, s)| s.issued).sum();
    assert_eq!(total(&samples, "seqd_all_ids_issued_total"), issued as f64);
}

/// `--metrics-top 0`: no per-sequence series at all, the totals still.
#[test]
fn top_zero_shows_no_sequence_and_every_total() {
    let all = synthetic(1_000, 16);
    let text = render_synthetic(&all, 0);
    assert!(!text.contains("sequence=\""), "{text}");
    let samples = parse(&text);
    assert_shown::<&str>(&samples, &[], &text);
    let issued: u64 = all.iter().map(|(_, s)| s.issued).sum();
    assert_eq!(total(&samples, "seqd_all_ids_issued_total"), issued as f64);
    assert_eq!(total(&samples, "seqd_all_sequences_failing"), 1.0);
    promtool_check(&text);
}
