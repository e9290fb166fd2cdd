//! The two time-zone crates considered for serial numbers (`jiff` with its
//! bundled database, `chrono-tz`), on the two conversions a period needs.
//! Results, versions and the decision: BENCHMARKS.md, "Time zones for serial
//! numbers".
//!
//! `cargo bench --bench time_zone -- --warm-up-time 1 --measurement-time 3`
//!
//! Every iteration converts 1,024 UTC instants spread over 2026 (about 8.5
//! hours apart, so both DST transitions of America/New_York fall inside the
//! set), and the throughput is per instant.
//!
//! - `civil_date`: a UTC instant to its civil date in America/New_York.
//! - `next_midnight`: a UTC instant to the next local midnight in
//!   America/New_York, as a UTC instant (the end of a daily period).
//! - `lookup`: the time zone from its IANA name (once per sequence, not per
//!   instant: measured to know it can stay off the path).

use std::hint::black_box;

use chrono::{DateTime, NaiveTime, TimeZone as _, Utc};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use jiff::civil::Time;
use jiff::tz::TimeZone;
use jiff::Timestamp;

const ZONE: &str = "America/New_York";
const INSTANTS: usize = 1024;
/// 2026-01-01T00:00:00Z.
const START_SECONDS: i64 = 1_767_225_600;
/// A year of seconds over `INSTANTS`.
const STRIDE_SECONDS: i64 = 365 * 86_400 / INSTANTS as i64;

fn seconds() -> Vec<i64> {
    (0..INSTANTS as i64)
        .map(|i| START_SECONDS + i * STRIDE_SECONDS + i % 7)
        .collect()
}

fn jiff_instants() -> Vec<Timestamp> {
    seconds()
        .into_iter()
        .map(|s| Timestamp::from_second(s).unwrap())
        .collect()
}

fn chrono_instants() -> Vec<DateTime<Utc>> {
    seconds()
        .into_iter()
        .map(|s| DateTime::from_timestamp(s, 0).unwrap())
        .collect()
}

fn jiff_next_midnight(tz: &TimeZone, t: Timestamp) -> Timestamp {
    let tomorrow = tz.to_datetime(t).date().tomorrow().unwrap();
    // Compatible disambiguation: a midnight inside a gap becomes the first
    // instant after it.
    tz.to_timestamp(tomorrow.to_datetime(Time::midnight()))
        .unwrap()
}

fn chrono_next_midnight(tz: &chrono_tz::Tz, t: DateTime<Utc>) -> DateTime<Utc> {
    let tomorrow = t.with_timezone(tz).date_naive().succ_opt().unwrap();
    let local = tomorrow.and_time(NaiveTime::MIN);
    // `earliest` is None inside a gap; no gap at midnight in New York, and
    // the service would have to step forward by hand where there is one.
    tz.from_local_datetime(&local)
        .earliest()
        .unwrap()
        .with_timezone(&Utc)
}

fn bench(c: &mut Criterion) {
    let jiff_tz = TimeZone::get(ZONE).unwrap();
    let chrono_tz: chrono_tz::Tz = ZONE.parse().unwrap();
    let jiff_ts = jiff_instants();
    let chrono_ts = chrono_instants();

    // Both crates agree on every instant before anything is timed.
    for (j, c) in jiff_ts.iter().zip(&chrono_ts) {
        let jd = jiff_tz.to_datetime(*j).date();
        let cd = c.with_timezone(&chrono_tz).date_naive();
        assert_eq!(jd.to_string(), cd.to_string());
        assert_eq!(
            jiff_next_midnight(&jiff_tz, *j).as_second(),
            chrono_next_midnight(&chrono_tz, *c).timestamp()
        );
    }

    let mut group = c.benchmark_group("civil_date");
    group.throughput(Throughput::Elements(INSTANTS as u64));
    group.bench_function(BenchmarkId::new("jiff", ZONE), |b| {
        b.iter(|| {
            for t in &jiff_ts {
                black_box(jiff_tz.to_datetime(black_box(*t)).date());
            }
        })
    });
    group.bench_function(BenchmarkId::new("chrono-tz", ZONE), |b| {
        b.iter(|| {
            for t in &chrono_ts {
                black_box(black_box(*t).with_timezone(&chrono_tz).date_naive());
            }
        })
    });
    group.finish();

    let mut group = c.benchmark_group("next_midnight");
    group.throughput(Throughput::Elements(INSTANTS as u64));
    group.bench_function(BenchmarkId::new("jiff", ZONE), |b| {
        b.iter(|| {
            for t in &jiff_ts {
                black_box(jiff_next_midnight(&jiff_tz, black_box(*t)));
            }
        })
    });
    group.bench_function(BenchmarkId::new("chrono-tz", ZONE), |b| {
        b.iter(|| {
            for t in &chrono_ts {
                black_box(chrono_next_midnight(&chrono_tz, black_box(*t)));
            }
        })
    });
    group.finish();

    let mut group = c.benchmark_group("lookup");
    group.bench_function(BenchmarkId::new("jiff", ZONE), |b| {
        b.iter(|| black_box(TimeZone::get(black_box(ZONE)).unwrap()))
    });
    group.bench_function(BenchmarkId::new("chrono-tz", ZONE), |b| {
        b.iter(|| black_box(black_box(ZONE).parse::<chrono_tz::Tz>().unwrap()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
