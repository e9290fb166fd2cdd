//! Serial numbers in the storage layer, on every backend (SQLite,
//! PostgreSQL, MariaDB): the settings columns, the sequence's own row
//! refusing plain ranges, period counter rows created on first use by a
//! statement that tolerates racing instances, and their list, propagation
//! and purge. Run one backend with e.g. `cargo test --test in_process serial_store:: -- --skip sqlite --skip postgres`.

use crate::support::common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::{execute, name, new_seq, TestDb};
use seqd::domain::{IdOrdering, NewSequence, SerialSettings};
use seqd::serial::{Overflow, Reset};
use seqd::store::{SequencePatch, Store, StoreError};

fn settings(format: &str, reset: Reset, zone: &str) -> SerialSettings {
    common::serial_settings(format, reset, zone, Overflow::Refuse)
}

/// The keys of the periods (counter rows) of `name_`, in order.
async fn period_keys(store: &Arc<dyn Store>, name_: &str) -> Vec<String> {
    let periods = store.list_periods(&name(name_)).await.unwrap();
    periods.into_iter().map(|p| p.key).collect()
}

/// A serial sequence `name` starting its counters at `start`, step `step`.
async fn create_serial(store: &Arc<dyn Store>, name_: &str, start: i64, step: i64) {
    let mut seq = new_seq(name_, start, step);
    seq.serial = Some(settings(
        "ORD{yyyy}{MM}{dd}{seq:06}",
        Reset::Day,
        "Asia/Shanghai",
    ));
    store.create(&seq).await.unwrap();
}

async fn settings_round_trip_through_create_get_update_and_back_to_plain(db: TestDb) {
    let store = common::store(&db).await;
    let mut seq: NewSequence = new_seq("order", 100, 50);
    let s = common::serial_settings(
        "ORD{yyyy}{MM}{seq:08}",
        Reset::Month,
        "america/new_york",
        Overflow::Widen,
    );
    seq.serial = Some(s.clone());
    let created = store.create(&seq).await.unwrap();
    assert_eq!(created.serial.as_ref(), Some(&s));
    assert_eq!(s.time_zone, "America/New_York", "stored in jiff's spelling");
    assert_eq!(created.counter_start, 100);
    let got = common::row(&store, "order").await;
    assert_eq!(got, created, "as stored");

    // A PATCH of settings only changes the settings.
    let daily = settings("D{yyyy}{MM}{dd}{seq}", Reset::Day, "UTC");
    let patch = SequencePatch {
        serial: Some(Some(daily.clone())),
        ..Default::default()
    };
    let updated = store.update(&name("order"), &patch).await.unwrap();
    assert_eq!(updated.serial, Some(daily));
    assert_eq!((updated.step, updated.counter_start), (50, 100));

    // A PATCH of something else keeps them.
    let patch = SequencePatch {
        description: Some("orders".into()),
        ..Default::default()
    };
    let updated = store.update(&name("order"), &patch).await.unwrap();
    assert!(updated.serial.is_some());

    // Some(None): plain again, and reservable.
    let patch = SequencePatch {
        serial: Some(None),
        ..Default::default()
    };
    assert_eq!(
        store.update(&name("order"), &patch).await.unwrap().serial,
        None
    );
    let r = store.reserve(&name("order"), 1).await.unwrap();
    assert_eq!(r.first(), 100);

    // A plain create stores no settings and counters from 1.
    let plain = store.create(&new_seq("plain", 7, 5)).await.unwrap();
    assert_eq!((plain.serial, plain.counter_start), (None, 7));
}

async fn a_serial_row_hands_out_no_range_and_is_left_unchanged(db: TestDb) {
    let store = common::store(&db).await;
    create_serial(&store, "order", 1, 10).await;
    let n = name("order");
    assert!(matches!(
        store.reserve(&n, 1).await,
        Err(StoreError::Serial)
    ));
    assert!(matches!(
        store.reserve_exact(&n, 3).await,
        Err(StoreError::Serial)
    ));
    assert_eq!(common::row(&store, "order").await.max_id, 0, "unchanged");
    assert!(matches!(
        store.reserve(&name("missing"), 1).await,
        Err(StoreError::NotFound)
    ));
}

async fn a_period_row_is_created_once_from_the_sequence_and_reserves_like_any_row(db: TestDb) {
    let store = common::store(&db).await;
    create_serial(&store, "order", 1000, 25).await;
    let order = name("order");
    assert!(store.create_period(&order, "20261130").await.unwrap());
    assert!(!store.create_period(&order, "20261130").await.unwrap());
    let counter = order.period_counter("20261130");
    let r = store.reserve(&counter, 1).await.unwrap();
    assert_eq!((r.first(), r.max_id, r.row_step), (1000, 1024, 25));
    let r = store.reserve_exact(&counter, 3).await.unwrap();
    assert_eq!((r.first(), r.max_id), (1025, 1027));
    // A second create leaves the counter where it is.
    assert!(!store.create_period(&order, "20261130").await.unwrap());
    let periods = store.list_periods(&order).await.unwrap();
    assert_eq!(periods.len(), 1);
    assert_eq!(
        (periods[0].key.as_str(), periods[0].max_id),
        ("20261130", 1027)
    );

    assert!(matches!(
        store.create_period(&name("missing"), "20261130").await,
        Err(StoreError::NotFound)
    ));
    for bad in ["2026113000", "2026-11", "x"] {
        assert!(
            matches!(
                store.create_period(&order, bad).await,
                Err(StoreError::Config(_))
            ),
            "key {bad:?}"
        );
    }
}

/// Many tasks (each its own connection) create the same period at once:
/// exactly one inserts, none fails, and the counter is untouched by the
/// others.
async fn racing_creates_of_one_period_insert_it_once(db: TestDb) {
    let store = common::store(&db).await;
    create_serial(&store, "order", 1, 10).await;
    // A second store: another instance with its own pool.
    let other = common::store(&db).await;
    for key in ["20261201", "20261202", "20261203", "20261204", "20261205"] {
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let s = [&store, &other][i % 2].clone();
                let key = key.to_string();
                tokio::spawn(async move { s.create_period(&name("order"), &key).await })
            })
            .collect();
        let mut inserted = 0;
        for t in tasks {
            if t.await.unwrap().unwrap() {
                inserted += 1;
            }
        }
        assert_eq!(inserted, 1, "period {key}");
    }
    let keys: Vec<String> = store
        .list_periods(&name("order"))
        .await
        .unwrap()
        .into_iter()
        .map(|p| {
            assert_eq!(p.max_id, 0, "counter of {} untouched", p.key);
            p.key
        })
        .collect();
    assert_eq!(
        keys,
        ["20261201", "20261202", "20261203", "20261204", "20261205"]
    );
}

/// Counters of two instances of one period never overlap.
async fn reservations_of_a_counter_from_two_stores_tile_it(db: TestDb) {
    let store = common::store(&db).await;
    create_serial(&store, "order", 1, 7).await;
    let other = common::store(&db).await;
    let counter = name("order").period_counter("20261130");
    let mut seen = BTreeSet::new();
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let s = [&store, &other][i % 2].clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                s.create_period(&name("order"), "20261130").await.unwrap();
                s.reserve(&counter, 1).await.unwrap()
            })
        })
        .collect();
    for t in tasks {
        let r = t.await.unwrap();
        for id in r.first()..=r.max_id {
            assert!(seen.insert(id), "counter {id} reserved twice");
        }
    }
    assert_eq!(seen, (1..=280).collect());
}

/// Lists, pages and `get` show sequences, never counter rows; the counter
/// rows of one sequence are those of its name only (`a@` is not `ab@`).
async fn lists_leave_counter_rows_out(db: TestDb) {
    let store = common::store(&db).await;
    create_serial(&store, "a", 1, 10).await;
    create_serial(&store, "ab", 1, 10).await;
    store.create(&new_seq("a-plain", 1, 10)).await.unwrap();
    for key in ["2026", "20261130", ""] {
        store.create_period(&name("a"), key).await.unwrap();
    }
    store.create_period(&name("ab"), "2026").await.unwrap();
    assert_eq!(common::names(&store).await, ["a", "a-plain", "ab"]);
    let page = store.list_page(None, None, 2).await.unwrap();
    let names: Vec<&str> = page.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!((names, page.more), (vec!["a", "a-plain"], true));
    let prefix = seqd::domain::NamePrefix::parse("a").unwrap();
    let page = store.list_page(Some(&prefix), None, 10).await.unwrap();
    assert_eq!(page.rows.len(), 3);
    let keys = period_keys(&store, "a").await;
    assert_eq!(keys, ["", "2026", "20261130"]);
}

/// A PATCH of step or ordering reaches the counter rows (in the same
/// transaction); one of the description does not touch them.
async fn step_and_ordering_changes_reach_the_counter_rows(db: TestDb) {
    let store = common::store(&db).await;
    create_serial(&store, "order", 1, 10).await;
    create_serial(&store, "order2", 1, 10).await;
    store
        .create_period(&name("order"), "20261130")
        .await
        .unwrap();
    store
        .create_period(&name("order"), "20261201")
        .await
        .unwrap();
    store
        .create_period(&name("order2"), "20261130")
        .await
        .unwrap();
    let patch = SequencePatch {
        step: Some(33),
        ordering: Some(IdOrdering::Global),
        ..Default::default()
    };
    store.update(&name("order"), &patch).await.unwrap();
    for key in ["20261130", "20261201"] {
        let r = store
            .reserve(&name("order").period_counter(key), 1)
            .await
            .unwrap();
        assert_eq!((r.row_step, r.ordering), (33, IdOrdering::Global), "{key}");
    }
    let r = store
        .reserve(&name("order2").period_counter("20261130"), 1)
        .await
        .unwrap();
    assert_eq!(
        (r.row_step, r.ordering),
        (10, IdOrdering::Instance),
        "another sequence's counter"
    );
}

async fn delete_periods_deletes_those_keys_only(db: TestDb) {
    let store = common::store(&db).await;
    create_serial(&store, "order", 1, 10).await;
    for key in ["20261128", "20261129", "20261130"] {
        store.create_period(&name("order"), key).await.unwrap();
    }
    let deleted = store
        .delete_periods(
            &name("order"),
            &["20261128".into(), "20261129".into(), "20200101".into()],
        )
        .await
        .unwrap();
    assert_eq!(deleted, 2);
    let left = period_keys(&store, "order").await;
    assert_eq!(left, ["20261130"]);
    assert!(common::row(&store, "order").await.serial.is_some());
    assert!(matches!(
        store.delete_periods(&name("order"), &["1;".into()]).await,
        Err(StoreError::Config(_))
    ));
}

/// The table refuses settings no seqd writes (an operator's SQL): an
/// unknown reset or overflow, a counter start below 1.
async fn the_table_checks_the_serial_columns(db: TestDb) {
    let store = common::store_with(&db, "s", 1, 10).await;
    for set in ["reset = 'week'", "overflow = 'wrap'", "counter_start = 0"] {
        let sql = format!("UPDATE sequences SET {set} WHERE name = 's'");
        assert!(
            common::try_execute(&db, &sql).await.is_err(),
            "{sql} was accepted"
        );
    }
    // A name of 128 characters takes a counter row with an 8-digit key.
    let long = "n".repeat(128);
    create_serial(&store, &long, 1, 10).await;
    assert!(store.create_period(&name(&long), "20261130").await.unwrap());
    let counter = name(&long).period_counter("20261130");
    assert_eq!(store.reserve(&counter, 1).await.unwrap().max_id, 10);
}

/// A row made serial by an operator's SQL is refused for plain ranges and
/// read with its settings.
async fn settings_written_by_sql_are_read(db: TestDb) {
    let store = common::store_with(&db, "s", 1, 10).await;
    execute(
        &db,
        "UPDATE sequences SET format = 'S{yyyy}{seq:04}', reset = 'year', time_zone = 'Europe/Paris' WHERE name = 's'",
    )
    .await;
    let row = common::row(&store, "s").await;
    assert_eq!(
        row.serial,
        Some(settings("S{yyyy}{seq:04}", Reset::Year, "Europe/Paris"))
    );
    assert!(matches!(
        store.reserve(&name("s"), 1).await,
        Err(StoreError::Serial)
    ));
}

per_backend!(
    settings_round_trip_through_create_get_update_and_back_to_plain,
    a_serial_row_hands_out_no_range_and_is_left_unchanged,
    a_period_row_is_created_once_from_the_sequence_and_reserves_like_any_row,
    racing_creates_of_one_period_insert_it_once,
    reservations_of_a_counter_from_two_stores_tile_it,
    lists_leave_counter_rows_out,
    step_and_ordering_changes_reach_the_counter_rows,
    delete_periods_deletes_those_keys_only,
    the_table_checks_the_serial_columns,
    settings_written_by_sql_are_read,
);
