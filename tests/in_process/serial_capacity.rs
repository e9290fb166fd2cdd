//! The capacity of a serial counter (`{seq:0N}` under `overflow: refuse`)
//! over HTTP, on every backend: a refused request consumes nothing (the
//! next one gets the very next counter, the row stays where it was), two
//! instances together never reserve past the capacity, and a `start` past
//! it is refused at create and PATCH, by the API and the CLI.

use crate::support::common;
use crate::support::server;

use std::collections::HashSet;

use common::{clear_of_midnight, today, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};
use server::TestServer;

/// The serial `/next` answers.
async fn next(s: &TestServer, name: &str) -> String {
    let got = s.get_json(&format!("/v1/sequences/{name}/next")).await;
    got["serial"]
        .as_str()
        .unwrap_or_else(|| panic!("{got}"))
        .to_owned()
}

/// Asserts 409 `serial_exhausted`.
async fn exhausted(resp: reqwest::Response) {
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "serial_exhausted", "{body}");
}

async fn batch(s: &TestServer, name: &str, count: u32) -> reqwest::Response {
    s.get(&format!("/v1/sequences/{name}/batch?count={count}"))
        .await
}

async fn serials_of(resp: reqwest::Response) -> Vec<String> {
    assert_eq!(resp.status(), StatusCode::OK);
    let body: Value = resp.json().await.unwrap();
    common::strings(&body, "serials")
}

/// The `max_id` of the counter row of `name`'s period `key`.
async fn period_max(s: &TestServer, name: &str, key: &str) -> i64 {
    let periods = s.store.list_periods(&common::name(name)).await.unwrap();
    periods
        .iter()
        .find(|p| p.key == key)
        .unwrap_or_else(|| panic!("no period {key:?} in {periods:?}"))
        .max_id
}

/// Issue 25, item 1, as reported: a daily `{seq:03}` counter; a batch of
/// 1000 refused must not burn the day. Then a batch that fits the format
/// but not what is left of the day (90 + 8 of 99... here 990 + 9 of 999):
/// refused, and the 8 left are still served, one by one.
async fn a_refused_batch_leaves_the_day_to_later_requests(db: TestDb) {
    clear_of_midnight().await;
    let s = TestServer::on(&db.url).await;
    let body = json!({"name": "inv", "step": 10, "format": "INV{yyyy}{MM}{dd}-{seq:03}",
                      "reset": "day"});
    assert_eq!(s.post_sequence(&body).await.status(), StatusCode::CREATED);
    let day = today();
    assert_eq!(next(&s, "inv").await, format!("INV{day}-001"));
    exhausted(batch(&s, "inv", 1000).await).await;
    assert_eq!(next(&s, "inv").await, format!("INV{day}-002"));
    let row = period_max(&s, "inv", &day).await;
    assert!(row < 999, "the refused batch burnt the day: row at {row}");
    let served = serials_of(batch(&s, "inv", 990).await).await;
    assert_eq!(served.last().unwrap(), &format!("INV{day}-992"));
    for _ in 0..3 {
        exhausted(batch(&s, "inv", 8).await).await;
    }
    for i in 993..=999 {
        assert_eq!(next(&s, "inv").await, format!("INV{day}-{i}"));
    }
    exhausted(s.get("/v1/sequences/inv/next").await).await;
    assert_eq!(period_max(&s, "inv", &day).await, 999);
    s.stop().await;
}

/// The same with `reset: never`: the one counter would be dead for good.
async fn a_refused_batch_never_kills_a_counter_that_never_resets(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    let body = json!({"name": "nr", "step": 10, "format": "N{seq:03}"});
    assert_eq!(s.post_sequence(&body).await.status(), StatusCode::CREATED);
    assert_eq!(next(&s, "nr").await, "N001");
    exhausted(batch(&s, "nr", 1000).await).await;
    assert_eq!(next(&s, "nr").await, "N002");
    let row = period_max(&s, "nr", "").await;
    assert!(
        row < 999,
        "the refused batch burnt the counter: row at {row}"
    );
    serials_of(batch(&s, "nr", 990).await).await;
    exhausted(batch(&s, "nr", 8).await).await;
    assert_eq!(next(&s, "nr").await, "N993");
    s.stop().await;
}

/// Global ordering reserves at request time: a refused request leaves the
/// row's `max_id` exactly where it was, however often it is repeated.
async fn a_refused_global_request_leaves_max_id_unchanged(db: TestDb) {
    clear_of_midnight().await;
    let s = TestServer::on(&db.url).await;
    let body = json!({"name": "g", "step": 10, "format": "G{yyyy}{MM}{dd}-{seq:03}",
                      "reset": "day", "ordering": "global"});
    assert_eq!(s.post_sequence(&body).await.status(), StatusCode::CREATED);
    let day = today();
    assert_eq!(next(&s, "g").await, format!("G{day}-001"));
    assert_eq!(period_max(&s, "g", &day).await, 1);
    for _ in 0..3 {
        exhausted(batch(&s, "g", 1000).await).await;
        assert_eq!(period_max(&s, "g", &day).await, 1);
    }
    assert_eq!(next(&s, "g").await, format!("G{day}-002"));
    serials_of(batch(&s, "g", 990).await).await;
    assert_eq!(period_max(&s, "g", &day).await, 992);
    for count in [8, 100, 8] {
        exhausted(batch(&s, "g", count).await).await;
        assert_eq!(period_max(&s, "g", &day).await, 992, "after {count}");
    }
    assert_eq!(next(&s, "g").await, format!("G{day}-993"));
    assert_eq!(period_max(&s, "g", &day).await, 993);
    s.stop().await;
}

/// Issue 25, item 7: two instances on one database, many clients each, on
/// a `{seq:02}` counter: the row never passes 99, no serial is served
/// twice, and every one of the 99 is served.
async fn two_instances_never_reserve_past_a_two_digit_counter(db: TestDb) {
    let a = TestServer::on(&db.url).await;
    let b = TestServer::on(&db.url).await;
    let body = json!({"name": "two", "step": 7, "format": "T{seq:02}"});
    assert_eq!(a.post_sequence(&body).await.status(), StatusCode::CREATED);
    let servers = std::sync::Arc::new([a, b]);
    let mut clients = Vec::new();
    for c in 0..12usize {
        let servers = servers.clone();
        clients.push(tokio::spawn(async move {
            let s = &servers[c % 2];
            let count = 1 + (c % 3) as u32;
            let mut got = Vec::new();
            loop {
                let resp = batch(s, "two", count).await;
                if resp.status() == StatusCode::CONFLICT {
                    exhausted(resp).await;
                    break;
                }
                got.extend(serials_of(resp).await);
            }
            // What memory still holds goes out one by one.
            loop {
                let resp = s.get("/v1/sequences/two/next").await;
                if resp.status() == StatusCode::CONFLICT {
                    break;
                }
                assert_eq!(resp.status(), StatusCode::OK);
                let body: Value = resp.json().await.unwrap();
                got.push(body["serial"].as_str().unwrap().to_owned());
            }
            got
        }));
    }
    let mut all = HashSet::new();
    for c in clients {
        for serial in c.await.unwrap() {
            assert!(all.insert(serial.clone()), "{serial} twice");
        }
    }
    let row = period_max(&servers[0], "two", "").await;
    assert!(row <= 99, "the counter row passed the capacity: {row}");
    let want: HashSet<String> = (1..=99).map(|i| format!("T{i:02}")).collect();
    assert_eq!(all, want);
    let Ok([a, b]) = std::sync::Arc::try_unwrap(servers) else {
        panic!("a client still holds the servers")
    };
    a.stop().await;
    b.stop().await;
}

/// Issue 25, item 11: a `start` past what `{seq:0N}` holds is refused (400
/// `invalid_request` naming it) at create and at a PATCH of the format or
/// the overflow rule; with `overflow: widen` it prints in full and is
/// accepted.
async fn a_start_past_the_capacity_is_refused_at_create_and_patch(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    let refused = |resp: reqwest::Response| async move {
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_request", "{body}");
        let message = body["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains("start 1000"), "{message}");
        assert!(message.contains("{seq:02}"), "{message}");
        assert!(message.contains("99"), "{message}");
    };
    refused(
        s.post_sequence(&json!({"name": "x", "start": 1000, "format": "X{seq:02}"}))
            .await,
    )
    .await;
    assert_eq!(
        s.get("/v1/sequences/x").await.status(),
        StatusCode::NOT_FOUND
    );
    // At the capacity itself: one counter a period, accepted.
    let edge = json!({"name": "edge", "start": 99, "format": "E{seq:02}"});
    assert_eq!(s.post_sequence(&edge).await.status(), StatusCode::CREATED);
    assert_eq!(next(&s, "edge").await, "E99");
    // Widening prints it in full.
    let wide = json!({"name": "w", "start": 1000, "format": "W{seq:02}", "overflow": "widen"});
    assert_eq!(s.post_sequence(&wide).await.status(), StatusCode::CREATED);
    assert_eq!(next(&s, "w").await, "W1000");
    // PATCH: made serial, narrowed, or made to refuse again.
    let plain = json!({"name": "p", "start": 1000});
    assert_eq!(s.post_sequence(&plain).await.status(), StatusCode::CREATED);
    refused(s.patch_sequence("p", &json!({"format": "P{seq:02}"})).await).await;
    let serial = json!({"name": "q", "start": 1000, "format": "Q{seq:04}"});
    assert_eq!(s.post_sequence(&serial).await.status(), StatusCode::CREATED);
    refused(s.patch_sequence("q", &json!({"format": "Q{seq:02}"})).await).await;
    refused(s.patch_sequence("w", &json!({"overflow": "refuse"})).await).await;
    let rows = [
        ("p", None),
        ("q", Some("Q{seq:04}")),
        ("w", Some("W{seq:02}")),
    ];
    for (name, format) in rows {
        let row = s.get_json(&format!("/v1/sequences/{name}")).await;
        assert_eq!(row["serial"]["format"].as_str(), format, "{row}");
    }
    assert_eq!(
        s.patch_sequence("q", &json!({"format": "Q{seq:05}"}))
            .await
            .status(),
        StatusCode::OK
    );
    s.stop().await;
}

/// The CLI refuses the same, as it refuses any other bad value: exit 1 and
/// one `error:` line naming the problem, and no row.
async fn the_cli_refuses_a_start_past_the_capacity(db: TestDb) {
    let store = common::store(&db).await;
    let run = |args: &'static [&'static str]| {
        let db = &db;
        async move {
            let mut all = vec!["sequences", "create"];
            all.extend(args);
            common::seqd_on(db, &all).await
        }
    };
    let out = run(&["x", "--start", "1000", "--format", "X{seq:02}"]).await;
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("start 1000") && err.contains("{seq:02}"),
        "{err}"
    );
    assert_eq!(store.get(&common::name("x")).await.unwrap(), None);
    let out = run(&["y", "--start", "99", "--format", "Y{seq:02}"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wide = &[
        "w",
        "--start",
        "1000",
        "--format",
        "W{seq:02}",
        "--overflow",
        "widen",
    ];
    let out = run(wide).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

per_backend!(
    a_refused_batch_leaves_the_day_to_later_requests,
    a_refused_batch_never_kills_a_counter_that_never_resets,
    a_refused_global_request_leaves_max_id_unchanged,
    two_instances_never_reserve_past_a_two_digit_counter,
    a_start_past_the_capacity_is_refused_at_create_and_patch,
    the_cli_refuses_a_start_past_the_capacity,
);
