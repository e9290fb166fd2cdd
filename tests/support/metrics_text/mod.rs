//! What the `/metrics` tests share: the text parsed into samples, the
//! real `promtool` run over it, and the checks of which sequences a body
//! shows. Each test binary uses part of it.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output};

use crate::support::common;
use crate::support::server::TestServer;

/// The bound on the size of a `/metrics` body, whatever the number of sequences.
pub const MAX_BODY: usize = 1 << 20;
/// The per-sequence families, each with a `sequence` label.
pub const PER_SEQUENCE: [&str; 8] = [
    "seqd_ids_issued_total",
    "seqd_segment_fetches_total",
    "seqd_segment_fetch_errors_total",
    "seqd_segment_waits_total",
    "seqd_sequence_step",
    "seqd_sequence_ids_available",
    "seqd_sequence_regressions_total",
    "seqd_sequence_space_used_ratio",
];

/// One sample line: `name{labels} value`.
#[derive(Debug)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses the sample lines of the text format (label values here never hold
/// `"` or `,`: names are validated and routes are templates).
pub fn parse(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad sample line {line:?}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|e| panic!("bad value in {line:?}: {e}"));
        let (name, labels) = match series.split_once('{') {
            None => (series.to_string(), BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .unwrap_or_else(|| panic!("bad labels in {line:?}"));
                let labels = body
                    .split("\",")
                    .filter(|p| !p.is_empty())
                    .map(|pair| {
                        let (k, v) = pair
                            .split_once("=\"")
                            .unwrap_or_else(|| panic!("bad label in {line:?}"));
                        (k.to_string(), v.trim_end_matches('"').to_string())
                    })
                    .collect();
                (name.to_string(), labels)
            }
        };
        out.push(Sample {
            name,
            labels,
            value,
        });
    }
    out
}

/// The value of the one sample named `name` whose labels include `labels`.
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let found: Vec<_> = samples
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert!(
        found.len() <= 1,
        "{name} {labels:?} matches several samples: {found:?}"
    );
    found.first().map(|s| s.value)
}

pub async fn scrape(srv: &TestServer) -> String {
    let resp = srv.get("/metrics").await;
    assert_eq!(resp.status(), 200);
    let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(
        ct.starts_with("text/plain; version=0.0.4"),
        "content-type {ct}"
    );
    resp.text().await.unwrap()
}

/// Runs `promtool ARGS` in the repository root, with `stdin` as its input.
/// `None` (after a line saying it is skipped) when promtool is not
/// installed; a failure instead under `SEQD_TEST_REQUIRE_ALL=1` (the Debian
/// package `prometheus` has it).
pub fn promtool(args: &[&str], stdin: &str) -> Option<Output> {
    if !common::tool_available("promtool") {
        return None;
    }
    let mut command = Command::new("promtool");
    command.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    Some(common::run_with_stdin(&mut command, stdin))
}

/// Runs `promtool check metrics` on `text` and asserts it passes without a
/// word (lint warnings included).
pub fn promtool_check(text: &str) {
    let Some(out) = promtool(&["check", "metrics"], text) else {
        return;
    };
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics failed ({}):\n{}{}\n--- exposition ---\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs promtool on a file of `deploy/` and asserts it succeeds.
pub fn promtool_ok(args: &[&str]) {
    let Some(out) = promtool(args, "") else {
        return;
    };
    assert!(
        out.status.success(),
        "promtool {args:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The sequences that have a series of `family`, in output order.
pub fn shown(samples: &[Sample], family: &str) -> Vec<String> {
    samples
        .iter()
        .filter(|s| s.name == family)
        .map(|s| s.labels["sequence"].clone())
        .collect()
}

/// Asserts that every per-sequence family has a series for exactly the
/// sequences of `expected` (in any order), and returns them in output order.
#[track_caller]
pub fn assert_shown<S: AsRef<str>>(samples: &[Sample], expected: &[S], text: &str) -> Vec<String> {
    let want: BTreeSet<&str> = expected.iter().map(AsRef::as_ref).collect();
    let first = shown(samples, PER_SEQUENCE[0]);
    for family in PER_SEQUENCE {
        let got = shown(samples, family);
        assert_eq!(
            got, first,
            "{family} shows other sequences than {}",
            PER_SEQUENCE[0]
        );
        let got: BTreeSet<&str> = got.iter().map(String::as_str).collect();
        assert_eq!(got, want, "{family}:\n{text}");
    }
    assert_eq!(
        value(samples, "seqd_metrics_top_sequences", &[]),
        Some(expected.len() as f64)
    );
    first
}

/// Like [`assert_shown`], and the series come in the order of `expected`:
/// trouble first, then the most IDs issued.
#[track_caller]
pub fn assert_top<S: AsRef<str>>(samples: &[Sample], expected: &[S], text: &str) {
    let order = assert_shown(samples, expected, text);
    let expected: Vec<&str> = expected.iter().map(AsRef::as_ref).collect();
    assert_eq!(order, expected, "not in rank order:\n{text}");
}

/// Scrapes `srv`, asserts [`assert_top`] with `expected` and that promtool
/// accepts the body; the body and its samples.
pub async fn scrape_top(srv: &TestServer, expected: &[&str]) -> (String, Vec<Sample>) {
    let text = scrape(srv).await;
    let samples = parse(&text);
    assert_top(&samples, expected, &text);
    promtool_check(&text);
    (text, samples)
}

/// The unlabelled sample `name` (panics if missing).
#[track_caller]
pub fn total(samples: &[Sample], name: &str) -> f64 {
    value(samples, name, &[]).unwrap_or_else(|| panic!("no {name}"))
}
