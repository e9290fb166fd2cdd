//! Sequences come and go under a running instance, on every backend: rows
//! added by SQL are discovered, missing names cost at most one query per
//! interval, steps changed by SQL apply at the next fetch, deleted sequences
//! stop once memory runs out, and a re-created one never re-issues an ID.

use crate::support::common;
use crate::support::recording;
use crate::support::server;

use std::sync::Arc;
use std::time::Duration;

use common::TestDb;
use recording::{recording, Recording};
use seqd::allocator::{AllocError, Allocator, AllocatorConfig, FixedStep, SystemClock};
use seqd::config::Settings;
use seqd::domain::SeqName;
use seqd::store::prelude::*;
use serde_json::json;

fn name(s: &str) -> SeqName {
    SeqName::parse(s).unwrap()
}

/// A real store that counts the reservations passed through it.
async fn counting(db: &TestDb) -> Arc<Recording> {
    recording(common::store(db).await)
}

fn fixed(store: Arc<Recording>, negative_ttl: Duration) -> Allocator {
    let cfg = AllocatorConfig {
        negative_ttl,
        ..AllocatorConfig::default()
    };
    Allocator::with_parts(
        store,
        cfg,
        Arc::new(SystemClock::default()),
        Arc::new(FixedStep),
    )
}

async fn a_flood_of_unknown_names_costs_one_query_per_name_and_interval(db: TestDb) {
    let store = counting(&db).await;
    let alloc = fixed(store.clone(), Duration::from_secs(3600));
    let tasks: Vec<_> = (0..500)
        .map(|i| {
            let alloc = alloc.clone();
            tokio::spawn(async move { alloc.next(&name(&format!("ghost{}", i % 5))).await })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), Err(AllocError::NotFound));
    }
    for _ in 0..100 {
        assert_eq!(alloc.next(&name("ghost0")).await, Err(AllocError::NotFound));
    }
    // Five names, each asked of the database once: alone or in a group of
    // first reservations (one call for several names).
    let calls = store.hook().reserves();
    assert!(
        (1..=5).contains(&calls),
        "at most one query per missing name: {calls} calls"
    );
}

async fn a_row_inserted_by_sql_after_a_miss_is_served_after_the_interval(db: TestDb) {
    let store = counting(&db).await;
    let alloc = fixed(store.clone(), Duration::from_millis(200));
    assert_eq!(alloc.next(&name("later")).await, Err(AllocError::NotFound));
    common::execute(
        &db,
        "INSERT INTO sequences (name, max_id, step) VALUES ('later', 0, 10)",
    )
    .await;
    let mut tries = 0;
    let id = loop {
        match alloc.next(&name("later")).await {
            Ok(id) => break id,
            Err(AllocError::NotFound) => {
                tries += 1;
                assert!(tries < 200, "never discovered");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{e:?}"),
        }
    };
    assert_eq!(id, 1);
    assert!(
        store.hook().reserves() <= 2 + 1,
        "misses were not re-queried per request"
    );
}

async fn a_step_changed_by_sql_applies_at_the_next_fetch(db: TestDb) {
    let store = counting(&db).await;
    store.create(&common::new_seq("st", 1, 10)).await.unwrap();
    let alloc = fixed(store.clone(), Duration::from_secs(1));
    assert_eq!(alloc.next(&name("st")).await.unwrap(), 1);
    common::execute(&db, "UPDATE sequences SET step = 500 WHERE name = 'st'").await;
    // 1..=10 current, 11..=20 may be prefetched already with the old step.
    for _ in 0..30 {
        alloc.next(&name("st")).await.unwrap();
    }
    let snap = alloc.snapshot(&name("st")).unwrap();
    assert_eq!((snap.row_step, snap.current_step), (500, 500), "{snap:?}");
}

async fn a_deleted_sequence_stops_when_memory_runs_out_and_a_recreated_one_never_reissues(
    db: TestDb,
) {
    let store = counting(&db).await;
    store.create(&common::new_seq("gone", 1, 10)).await.unwrap();
    let alloc = fixed(store.clone(), Duration::from_millis(100));
    let mut last = 0;
    for _ in 0..5 {
        last = alloc.next(&name("gone")).await.unwrap();
    }
    common::execute(&db, "DELETE FROM sequences WHERE name = 'gone'").await;
    // What is in memory is still served, then 404.
    let err = loop {
        match alloc.next(&name("gone")).await {
            Ok(id) => {
                assert!(id > last);
                last = id;
            }
            Err(e) => break e,
        }
    };
    assert_eq!(err, AllocError::NotFound);
    let reserved = alloc.reserved_up_to(&name("gone")).unwrap();
    assert!(reserved >= last);
    // Re-created by SQL from scratch (the dangerous way): IDs already
    // reserved by this instance are skipped, never issued again.
    common::execute(
        &db,
        "INSERT INTO sequences (name, max_id, step) VALUES ('gone', 0, 10)",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let id = alloc.next(&name("gone")).await.unwrap();
    assert!(id > reserved, "{id} re-issued below {reserved}");
}

async fn the_api_refuses_to_recreate_below_what_the_instance_reserved(db: TestDb) {
    let s = server::TestServer::start(Settings::for_database(db.url.clone())).await;
    let create = |body: serde_json::Value| s.http.post(s.url("/v1/sequences")).json(&body).send();
    s.create("re", 1, 10).await;
    for _ in 0..3 {
        s.next("re").await;
    }
    common::execute(&db, "DELETE FROM sequences WHERE name = 're'").await;
    let resp = create(json!({"name": "re", "start": 5})).await.unwrap();
    assert_eq!(resp.status(), 400);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_request");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("start must be above"));
    let resp = create(json!({"name": "re", "start": 1_000_000}))
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    s.stop().await;
}

per_backend!(
    a_flood_of_unknown_names_costs_one_query_per_name_and_interval,
    a_row_inserted_by_sql_after_a_miss_is_served_after_the_interval,
    a_step_changed_by_sql_applies_at_the_next_fetch,
    a_deleted_sequence_stops_when_memory_runs_out_and_a_recreated_one_never_reissues,
    the_api_refuses_to_recreate_below_what_the_instance_reserved
);
