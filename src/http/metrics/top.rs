//! The per-sequence part of `/metrics`, written at scrape time straight into
//! the text output (never into the process-wide registry, so the registry
//! does not grow with the number of sequences, and a sequence that leaves the
//! top leaves no stale series behind).
//!
//! One pass over every live sequence ([`Allocator::for_each_stats`]: no name
//! copied, nothing allocated per sequence) sums the exact totals and keeps the
//! `top` highest-ranked sequences in a bounded heap; only those get series.
//!
//! **Ranking.** Sequences in trouble come first, so that alerts on the
//! per-sequence series can name them:
//! - a regression counted (the row went back; kept until the process ends),
//! - no ID left in memory after failed fetches (its requests wait, then fail),
//! - at least [`TROUBLE_SPACE_RATIO`] of the ID space used.
//!
//! Then, within each group, the most IDs issued by this instance since it
//! started; ties by name. The lifetime count needs no memory per sequence and
//! gives a stable set: a sequence leaves the top only when another overtakes
//! it, so Prometheus does not see series come and go at every scrape (a
//! "most issued since the last scrape" ranking would need the previous count
//! of every sequence, and among sequences of similar traffic would change its
//! choice at every scrape). The cost: a sequence that was busy earlier keeps
//! its place until others overtake it.
//!
//! [`Allocator::for_each_stats`]: crate::allocator::Allocator::for_each_stats

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::fmt::Write;

use crate::allocator::SeqStats;
use crate::domain::SeqName;

/// From this fraction of the ID space used on, a sequence is ranked with the
/// sequences in trouble (the shipped alert warns at the same value).
pub const TROUBLE_SPACE_RATIO: f64 = 0.9;

/// One family: its name, type, help, and its value read from a `T` (a
/// sequence's [`SeqStats`], or the [`Totals`]).
struct Family<T> {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    value: fn(&T) -> Value,
}

/// A sample value: integers are written exactly.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Value {
    Unsigned(u64),
    Signed(i64),
    Float(f64),
}

impl Value {
    fn write(self, out: &mut String) {
        // Writing into a String cannot fail.
        let _ = match self {
            Value::Unsigned(v) => write!(out, "{v}"),
            Value::Signed(v) => write!(out, "{v}"),
            // The shortest text that reads back exactly; an exponent below
            // 1e-4 rather than a run of zeros.
            Value::Float(v) if v != 0.0 && v.abs() < 1e-4 => write!(out, "{v:e}"),
            Value::Float(v) if v.is_finite() => write!(out, "{v}"),
            Value::Float(v) if v.is_nan() => write!(out, "NaN"),
            Value::Float(v) if v > 0.0 => write!(out, "+Inf"),
            Value::Float(_) => write!(out, "-Inf"),
        };
    }
}

/// The per-sequence families, in output order. The names are those of
/// earlier versions, so dashboards keep working.
const FAMILIES: &[Family<SeqStats>] = &[
    Family {
        name: super::IDS_ISSUED,
        kind: "counter",
        help: "IDs handed out by this instance, for the --metrics-top sequences; seqd_all_ids_issued_total counts all.",
        value: |s| Value::Unsigned(s.issued),
    },
    Family {
        name: super::SEGMENT_FETCHES,
        kind: "counter",
        help: "Segments reserved from the database, for the --metrics-top sequences; seqd_all_segment_fetches_total counts all.",
        value: |s| Value::Unsigned(s.fetches),
    },
    Family {
        name: super::SEGMENT_FETCH_ERRORS,
        kind: "counter",
        help: "Failed segment fetches (each retry counts), for the --metrics-top sequences; seqd_all_segment_fetch_errors_total counts all.",
        value: |s| Value::Unsigned(s.fetch_errors),
    },
    Family {
        name: super::SEGMENT_WAITS,
        kind: "counter",
        help: "Requests that found both segments empty and waited for a fetch, for the --metrics-top sequences; seqd_all_segment_waits_total counts all.",
        value: |s| Value::Unsigned(s.waits),
    },
    Family {
        name: super::SEQUENCE_STEP,
        kind: "gauge",
        help: "Size of the last segment fetched (the adapted step), for the --metrics-top sequences.",
        value: |s| Value::Signed(s.step),
    },
    Family {
        name: super::SEQUENCE_IDS_AVAILABLE,
        kind: "gauge",
        help: "IDs left in memory (current plus next segment), for the --metrics-top sequences; seqd_all_sequence_ids_available sums all.",
        value: |s| Value::Unsigned(s.ids_available),
    },
    Family {
        name: super::SEQUENCE_REGRESSIONS,
        kind: "counter",
        help: "Reserved ranges at or below IDs this instance already reserved (the row went back; skipped past), for the --metrics-top sequences; seqd_all_sequence_regressions_total counts all.",
        value: |s| Value::Unsigned(s.regressions),
    },
    Family {
        name: super::SEQUENCE_SPACE_USED,
        kind: "gauge",
        help: "Fraction of the ID space used (the highest ID reserved over 9223372036854775807), for the --metrics-top sequences; seqd_all_sequence_max_space_used_ratio is the largest of all.",
        value: |s| Value::Float(space_used(s)),
    },
];

/// The exact numbers over every live sequence.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Totals {
    issued: u64,
    fetches: u64,
    fetch_errors: u64,
    waits: u64,
    regressions: u64,
    ids_available: u64,
    max_space_used: f64,
    failing: u64,
    regressed: u64,
    shown: u64,
}

impl Totals {
    fn add(&mut self, s: &SeqStats) {
        self.issued = self.issued.saturating_add(s.issued);
        self.fetches = self.fetches.saturating_add(s.fetches);
        self.fetch_errors = self.fetch_errors.saturating_add(s.fetch_errors);
        self.waits = self.waits.saturating_add(s.waits);
        self.regressions = self.regressions.saturating_add(s.regressions);
        self.ids_available = self.ids_available.saturating_add(s.ids_available);
        self.max_space_used = self.max_space_used.max(space_used(s));
        self.failing += u64::from(failing(s));
        self.regressed += u64::from(s.regressions > 0);
    }
}

/// The totals, in output order.
const TOTALS: &[Family<Totals>] = &[
    Family {
        name: super::ALL_IDS_ISSUED,
        kind: "counter",
        help: "IDs handed out by this instance, all sequences together.",
        value: |t| Value::Unsigned(t.issued),
    },
    Family {
        name: super::ALL_SEGMENT_FETCHES,
        kind: "counter",
        help: "Segments reserved from the database, all sequences together.",
        value: |t| Value::Unsigned(t.fetches),
    },
    Family {
        name: super::ALL_SEGMENT_FETCH_ERRORS,
        kind: "counter",
        help: "Failed segment fetches (each retry counts), all sequences together.",
        value: |t| Value::Unsigned(t.fetch_errors),
    },
    Family {
        name: super::ALL_SEGMENT_WAITS,
        kind: "counter",
        help: "Requests that found both segments empty and waited for a fetch, all sequences together.",
        value: |t| Value::Unsigned(t.waits),
    },
    Family {
        name: super::ALL_SEQUENCE_REGRESSIONS,
        kind: "counter",
        help: "Reserved ranges at or below IDs this instance already reserved, all sequences together.",
        value: |t| Value::Unsigned(t.regressions),
    },
    Family {
        name: super::ALL_SEQUENCE_IDS_AVAILABLE,
        kind: "gauge",
        help: "IDs left in memory, all sequences together.",
        value: |t| Value::Unsigned(t.ids_available),
    },
    Family {
        name: super::ALL_SEQUENCE_MAX_SPACE_USED,
        kind: "gauge",
        help: "The largest fraction of the ID space used by any live sequence.",
        value: |t| Value::Float(t.max_space_used),
    },
    Family {
        name: super::ALL_SEQUENCES_FAILING,
        kind: "gauge",
        help: "Live sequences with no ID left in memory after failed fetches: their requests wait, then get 503, until a fetch succeeds.",
        value: |t| Value::Unsigned(t.failing),
    },
    Family {
        name: super::ALL_SEQUENCES_REGRESSED,
        kind: "gauge",
        help: "Live sequences with at least one regression counted since the process started.",
        value: |t| Value::Unsigned(t.regressed),
    },
    Family {
        name: super::METRICS_TOP_SEQUENCES,
        kind: "gauge",
        help: "Sequences given per-sequence series in this scrape: at most --metrics-top (seqd_names_in_memory{state=\"live\"} counts them all).",
        value: |t| Value::Unsigned(t.shown),
    },
];

/// The fraction of the ID space a sequence has used: its highest reserved
/// ID over `i64::MAX` (0 before its first segment).
pub fn space_used(s: &SeqStats) -> f64 {
    s.high_water
        .map_or(0.0, |h| h.max(0) as f64 / i64::MAX as f64)
}

/// No ID left in memory after failed fetches.
fn failing(s: &SeqStats) -> bool {
    s.fetch_errors > 0 && s.ids_available == 0
}

/// Whether a sequence is ranked with the sequences in trouble.
pub fn in_trouble(s: &SeqStats) -> bool {
    s.regressions > 0 || failing(s) || space_used(s) >= TROUBLE_SPACE_RATIO
}

/// The rank of a sequence: higher is shown first. Ties by name, the smaller
/// first (so the choice does not depend on the order of the pass).
fn rank<'a>(name: &'a SeqName, s: &SeqStats) -> (bool, u64, Reverse<&'a str>) {
    (in_trouble(s), s.issued, Reverse(name.as_str()))
}

/// A sequence kept in the heap.
struct Ranked {
    name: SeqName,
    stats: SeqStats,
}

impl Ranked {
    fn rank(&self) -> (bool, u64, Reverse<&str>) {
        rank(&self.name, &self.stats)
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}

/// Reads every sequence once through `each_stats` and returns the `top`
/// highest-ranked (highest first) and the totals over all of them.
/// O(n log top) time, O(top) memory; a name is cloned (a reference count,
/// not a copy of the text) only when it enters the heap.
fn choose(
    top: usize,
    each_stats: impl FnOnce(&mut dyn FnMut(&SeqName, &SeqStats)),
) -> (Vec<Ranked>, Totals) {
    let mut totals = Totals::default();
    // A min-heap: its head is the lowest-ranked sequence kept so far.
    let mut heap: BinaryHeap<Reverse<Ranked>> = BinaryHeap::with_capacity(top.min(4096));
    each_stats(&mut |name, stats| {
        totals.add(stats);
        if top == 0 {
            return;
        }
        if heap.len() < top {
            heap.push(Reverse(Ranked {
                name: name.clone(),
                stats: *stats,
            }));
        } else if let Some(mut lowest) = heap.peek_mut() {
            if rank(name, stats) > lowest.0.rank() {
                *lowest = Reverse(Ranked {
                    name: name.clone(),
                    stats: *stats,
                });
            }
        }
    });
    // Ascending order of `Reverse`: the highest-ranked first.
    let chosen: Vec<Ranked> = heap.into_sorted_vec().into_iter().map(|r| r.0).collect();
    totals.shown = chosen.len() as u64;
    (chosen, totals)
}

/// Appends the per-sequence families (for the `top` highest-ranked
/// sequences) and the totals (over all) to `out`, in the Prometheus text
/// format 0.0.4. `each_stats` calls its argument once per live sequence.
pub fn write_sequences(
    out: &mut String,
    top: usize,
    each_stats: impl FnOnce(&mut dyn FnMut(&SeqName, &SeqStats)),
) {
    let (chosen, totals) = choose(top, each_stats);
    if !chosen.is_empty() {
        for family in FAMILIES {
            header(out, family.name, family.kind, family.help);
            for r in &chosen {
                out.push_str(family.name);
                out.push_str("{sequence=\"");
                escape_label_value(out, r.name.as_str());
                out.push_str("\"} ");
                (family.value)(&r.stats).write(out);
                out.push('\n');
            }
        }
    }
    for total in TOTALS {
        header(out, total.name, total.kind, total.help);
        out.push_str(total.name);
        out.push(' ');
        (total.value)(&totals).write(out);
        out.push('\n');
    }
}

/// The `# HELP` and `# TYPE` lines of a family.
fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    out.push_str("# HELP ");
    out.push_str(name);
    out.push(' ');
    escape_help(out, help);
    out.push_str("\n# TYPE ");
    out.push_str(name);
    out.push(' ');
    out.push_str(kind);
    out.push('\n');
}

/// A label value in the text format: `\`, `"` and line feeds escaped.
pub fn escape_label_value(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Help text in the text format: `\` and line feeds escaped.
fn escape_help(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> SeqName {
        SeqName::parse(s).unwrap()
    }

    fn stats(issued: u64) -> SeqStats {
        SeqStats {
            issued,
            fetches: 1,
            step: 10,
            ids_available: 5,
            high_water: Some(issued as i64 + 5),
            ..SeqStats::default()
        }
    }

    fn chosen_names(top: usize, all: &[(SeqName, SeqStats)]) -> Vec<String> {
        let (chosen, _) = choose(top, |f| all.iter().for_each(|(n, s)| f(n, s)));
        chosen.iter().map(|r| r.name.to_string()).collect()
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = String::new();
        escape_label_value(&mut out, "a\\b\"c\nd");
        assert_eq!(out, r#"a\\b\"c\nd"#);
        let mut out = String::new();
        escape_help(&mut out, "x\\y\nz \"q\"");
        assert_eq!(out, r#"x\\y\nz "q""#);
    }

    #[test]
    fn values_are_written_exactly() {
        for (v, text) in [
            (Value::Unsigned(u64::MAX), "18446744073709551615"),
            (Value::Signed(-3), "-3"),
            (Value::Float(0.25), "0.25"),
            (Value::Float(0.0), "0"),
            (Value::Float(1.0), "1"),
            (
                Value::Float(1000.0 / i64::MAX as f64),
                "1.0842021724855044e-16",
            ),
            (Value::Float(f64::NAN), "NaN"),
            (Value::Float(f64::INFINITY), "+Inf"),
            (Value::Float(f64::NEG_INFINITY), "-Inf"),
        ] {
            let mut out = String::new();
            v.write(&mut out);
            assert_eq!(out, text);
        }
    }

    #[test]
    fn trouble_ranks_ahead_of_traffic_then_most_issued_then_name() {
        let mut regressed = stats(1);
        regressed.regressions = 1;
        let mut failing = stats(2);
        failing.fetch_errors = 3;
        failing.ids_available = 0;
        let mut riding_through = stats(3);
        riding_through.fetch_errors = 3; // IDs left: not in trouble
        let mut full = stats(4);
        full.high_water = Some(i64::MAX - 10);
        let all = vec![
            (name("busy"), stats(1_000)),
            (name("b-tie"), stats(500)),
            (name("a-tie"), stats(500)),
            (name("regressed"), regressed),
            (name("failing"), failing),
            (name("riding"), riding_through),
            (name("full"), full),
            (name("idle"), stats(0)),
        ];
        assert_eq!(
            chosen_names(6, &all),
            ["full", "failing", "regressed", "busy", "a-tie", "b-tie"]
        );
        assert_eq!(
            chosen_names(4, &all),
            ["full", "failing", "regressed", "busy"]
        );
        assert!(chosen_names(0, &all).is_empty());
        assert_eq!(chosen_names(100, &all).len(), all.len());
    }

    #[test]
    fn the_choice_does_not_depend_on_the_order_of_the_pass() {
        let mut all: Vec<_> = (0..50)
            .map(|i| (name(&format!("s{i}")), stats(i % 7)))
            .collect();
        let first = chosen_names(10, &all);
        all.reverse();
        assert_eq!(chosen_names(10, &all), first);
        all.sort_by_key(|(n, _)| n.to_string());
        assert_eq!(chosen_names(10, &all), first);
    }

    #[test]
    fn totals_cover_every_sequence_whatever_the_top() {
        let mut all: Vec<_> = (0..20)
            .map(|i| (name(&format!("t{i}")), stats(i)))
            .collect();
        all[3].1.regressions = 2;
        all[4].1.fetch_errors = 1;
        all[4].1.ids_available = 0;
        let (_, totals) = choose(0, |f| all.iter().for_each(|(n, s)| f(n, s)));
        let (_, three) = choose(3, |f| all.iter().for_each(|(n, s)| f(n, s)));
        assert_eq!(totals.issued, (0..20).sum::<u64>());
        assert_eq!(totals.regressions, 2);
        assert_eq!((totals.regressed, totals.failing), (1, 1));
        assert_eq!(totals.ids_available, 19 * 5);
        assert_eq!((totals.shown, three.shown), (0, 3));
        assert_eq!(Totals { shown: 3, ..totals }, three);
    }
}
