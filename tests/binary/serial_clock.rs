//! Serial numbers from the real binary under a shifted system clock
//! (libfaketime, preloaded), three instances on one database, on every backend: clients
//! hammer a daily serial sequence across a midnight (the UTC year end, and
//! the end of New York's 23-hour DST day), and every serial is unique, each
//! period's counters are unique and start at `start`, each serial's date is
//! that of the instant it was issued, and the new period's row is created by
//! exactly one instance.

use crate::support::common;
use crate::support::server;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestDb;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde_json::json;
use server::{fetch_json, Process};

/// How long before the boundary the instances' clocks start.
const LEAD: i64 = 4;
/// How long the clients run.
const RUN: Duration = Duration::from_secs(8);

struct Issued {
    serial: String,
    counter: i64,
    /// The real time window of the request.
    sent: Timestamp,
    received: Timestamp,
}

async fn across(db: &TestDb, zone: &str, boundary: &str, days: [&str; 2]) {
    let Some(lib) = common::libfaketime() else {
        return;
    };
    let boundary: Timestamp = boundary.parse().unwrap();
    // Every instance runs `LEAD` s before the boundary, by the same offset
    // from the real clock (whole seconds).
    let offset = boundary
        .duration_since(Timestamp::now())
        .as_secs()
        .saturating_sub(LEAD);
    let shift = format!("{offset:+}s");
    let lib = lib.to_str().expect("a UTF-8 path");
    let env = [
        ("LD_PRELOAD", lib),
        ("FAKETIME", shift.as_str()),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ];
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(Process::spawn_with_env(&db.url, &[], &env).await);
    }
    let http = server::client(Duration::from_secs(10));
    server::create_with(
        &http,
        &servers[0].base,
        &json!({"name": "clock", "start": 1, "step": 20, "format": "S{yyyy}{MM}{dd}-{seq:06}",
                      "reset": "day", "time_zone": zone}),
    )
    .await;

    let bases: Arc<Vec<String>> = Arc::new(servers.iter().map(|s| s.base.clone()).collect());
    let started = Instant::now();
    let mut clients = Vec::new();
    for c in 0..9 {
        let (http, bases) = (http.clone(), bases.clone());
        clients.push(tokio::spawn(async move {
            let mut got = Vec::new();
            let mut i = c;
            while started.elapsed() < RUN {
                let base = &bases[i % bases.len()];
                i += 1;
                let sent = Timestamp::now();
                let v = fetch_json(http.get(format!("{base}/v1/sequences/clock/next"))).await;
                let received = Timestamp::now();
                got.push(Issued {
                    serial: v["serial"]
                        .as_str()
                        .unwrap_or_else(|| panic!("{v}"))
                        .to_owned(),
                    counter: v["id"].as_i64().unwrap(),
                    sent,
                    received,
                });
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            got
        }));
    }
    let mut all = Vec::new();
    for c in clients {
        all.extend(c.await.unwrap());
    }
    let tz = TimeZone::get(zone).unwrap();
    let shift = SignedDuration::from_secs(offset);
    let day_of = |t: Timestamp| {
        tz.to_datetime(t + shift)
            .date()
            .strftime("%Y%m%d")
            .to_string()
    };
    let mut serials = HashSet::new();
    let mut counters: HashMap<String, HashSet<i64>> = HashMap::new();
    for got in &all {
        assert!(serials.insert(got.serial.clone()), "{} twice", got.serial);
        let (day, seq) = got.serial[1..].split_once('-').unwrap();
        assert_eq!(seq.parse::<i64>().unwrap(), got.counter, "{}", got.serial);
        // The date printed is the one of the instant the serial was issued:
        // checked where the request's window lies within one day.
        let (a, b) = (day_of(got.sent), day_of(got.received));
        if a == b {
            assert_eq!(
                day, a,
                "{} issued between {} and {}",
                got.serial, got.sent, got.received
            );
        }
        assert!(
            counters
                .entry(day.to_owned())
                .or_default()
                .insert(got.counter),
            "counter {} of {day} twice",
            got.counter
        );
    }
    let seen: HashSet<&str> = counters.keys().map(String::as_str).collect();
    assert_eq!(seen, HashSet::from(days), "{} serials", all.len());
    for day in days {
        let min = counters[day].iter().min().copied();
        assert_eq!(min, Some(1), "the counter of {day} starts at 1");
    }
    // The new day's row: created by exactly one of the three instances.
    let mut created_by = 0;
    for s in &servers {
        created_by += s
            .log_lines("period counter created")
            .iter()
            .filter(|l| l["period"] == days[1])
            .count();
    }
    assert_eq!(
        created_by, 1,
        "period {} created by {created_by} instances",
        days[1]
    );
    for s in servers {
        s.kill().await;
    }
}

async fn utc_year_end(db: TestDb) {
    across(&db, "UTC", "2027-01-01T00:00:00Z", ["20261231", "20270101"]).await;
}

/// 2027-03-14 in New York has 23 hours: it ends at 04:00Z (a zone read as
/// a fixed UTC-5 would end it at 05:00Z).
async fn new_york_short_day(db: TestDb) {
    across(
        &db,
        "America/New_York",
        "2027-03-15T04:00:00Z",
        ["20270314", "20270315"],
    )
    .await;
}

per_backend!(utc_year_end);
per_backend!(new_york_short_day);
