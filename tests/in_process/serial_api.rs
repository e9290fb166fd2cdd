//! Serial numbers over HTTP, on every backend: create and PATCH fields with
//! every refusal named by the contract (400), serials in `/next` (JSON and
//! text), `/batch` and the Leaf route, exhaustion (409 `serial_exhausted`)
//! and widening, a sequence made plain again, the period shown by `GET`.

use crate::support::common;
use crate::support::server;

use common::{clear_of_midnight, today, TestDb};
use reqwest::{Method, StatusCode};
use seqd::config::Settings;
use serde_json::{json, Value};
use server::TestServer;

/// Asserts a 400 `invalid_request` whose message holds `needle`.
async fn refused(resp: reqwest::Response, needle: &str) {
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "for {needle}");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_request", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(needle), "{message:?} lacks {needle:?}");
}

async fn every_bad_setting_is_refused_with_what_is_wrong(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    let cases = [
        (json!({"format": "A{foo}{seq}"}), "unknown token `{foo}`"),
        (
            json!({"format": "A{seq}{seq:03}"}),
            "a second counter token",
        ),
        (json!({"format": "A{seq:019}"}), "counter width 19"),
        (json!({"format": "A{seq:00}"}), "counter width 0"),
        (
            json!({"format": "A{yyyy}{MM}{seq}", "reset": "day"}),
            "missing: {dd}",
        ),
        (
            json!({"format": "A{seq}", "reset": "month"}),
            "missing: {yyyy} or {yy}, {MM}",
        ),
        (
            json!({"format": "A{dd}{seq}", "reset": "weekly"}),
            "unknown reset `weekly`",
        ),
        (
            json!({"format": "A{seq}", "time_zone": "Mars/Olympus"}),
            "unknown time zone `Mars/Olympus`",
        ),
        (
            json!({"format": "A{seq}", "overflow": "wrap"}),
            "unknown overflow `wrap`",
        ),
        (json!({"format": "A B{seq}"}), "character ' ' at position 1"),
        (json!({"format": "A{yyyy"}), "is not closed"),
        (json!({"format": "ABC"}), "no counter token"),
        (
            json!({"format": format!("{}{{seq}}", "x".repeat(60))}),
            "at most 64",
        ),
        (json!({"reset": "day"}), "give a format too"),
        (json!({"time_zone": "UTC"}), "give a format too"),
    ];
    for (fields, needle) in cases {
        let mut body = fields.clone();
        body["name"] = json!("bad");
        refused(s.post_sequence(&body).await, needle).await;
    }
    assert_eq!(
        s.get("/v1/sequences/bad").await.status(),
        StatusCode::NOT_FOUND
    );
    // The same checks on PATCH, of the merged settings.
    assert_eq!(
        s.post_sequence(&json!({"name": "p", "format": "P{yyyy}{MM}{dd}{seq}", "reset": "day"}))
            .await
            .status(),
        201
    );
    refused(
        s.patch_sequence("p", &json!({"format": "P{yyyy}{MM}{seq}"}))
            .await,
        "missing: {dd}",
    )
    .await;
    refused(
        s.patch_sequence("p", &json!({"time_zone": "Nowhere/Land"}))
            .await,
        "unknown time zone",
    )
    .await;
    refused(
        s.patch_sequence("p", &json!({"format": null, "reset": "day"}))
            .await,
        "go with it",
    )
    .await;
    assert_eq!(
        s.post_sequence(&json!({"name": "plain"})).await.status(),
        201
    );
    refused(
        s.patch_sequence("plain", &json!({"reset": "day"})).await,
        "give a format too",
    )
    .await;
    s.stop().await;
}

async fn serials_come_from_next_batch_text_and_the_leaf_route(db: TestDb) {
    clear_of_midnight().await;
    let s = TestServer::on(&db.url).await;
    let resp = s
        .post_sequence(
            &json!({"name": "ord", "start": 100, "step": 10, "format": "ORD{yyyy}{MM}{dd}{seq:06}",
               "reset": "day", "time_zone": "utc"}),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let row: Value = resp.json().await.unwrap();
    assert_eq!(
        row["serial"],
        json!({"format": "ORD{yyyy}{MM}{dd}{seq:06}", "reset": "day", "time_zone": "UTC", "overflow": "refuse"})
    );
    let day = today();
    let next = s.get_json("/v1/sequences/ord/next").await;
    assert_eq!(
        next,
        json!({"name": "ord", "id": 100, "serial": format!("ORD{day}000100")})
    );
    let text = s
        .send_plain(Method::GET, "/v1/sequences/ord/next")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(text, format!("ORD{day}000101"));
    let batch = s.get_json("/v1/sequences/ord/batch?count=3").await;
    assert_eq!(batch["ids"], json!([102, 103, 104]));
    assert_eq!(
        batch["serials"],
        json!([
            format!("ORD{day}000102"),
            format!("ORD{day}000103"),
            format!("ORD{day}000104")
        ])
    );
    let leaf = s.get("/api/segment/get/ord").await.text().await.unwrap();
    assert_eq!(leaf, format!("ORD{day}000105"));
    // GET shows the period this instance is in.
    let got = s.get_json("/v1/sequences/ord").await;
    assert_eq!(got["period"]["key"], json!(day));
    assert_eq!(got["period"]["capacity"], json!(999_999));
    assert!(
        got["period"]["reserved_up_to"].as_i64().unwrap() >= 105,
        "{got}"
    );
    // Its buffer is the period counter's, which issued all six serials and
    // whose next ID is 106 (the settings row's own buffer issues nothing),
    // in the listing too.
    let buffer = &got["buffer"];
    assert_eq!(buffer["name"], json!(format!("ord@{day}")), "{got}");
    assert_eq!(buffer["issued"], json!(6), "{got}");
    assert!(buffer["fetches"].as_u64().unwrap() >= 1, "{got}");
    assert_eq!(buffer["current"]["cursor"], json!(106), "{got}");
    assert!(buffer["last_error"].is_null(), "{got}");
    let listed = s.get_json("/v1/sequences?prefix=ord").await;
    assert_eq!(listed["sequences"][0]["name"], json!("ord"), "{listed}");
    let listed = &listed["sequences"][0]["buffer"];
    for k in ["name", "issued", "current"] {
        assert_eq!(listed[k], buffer[k], "{k}: {listed}");
    }
    // A plain sequence's answers are unchanged.
    assert_eq!(
        s.post_sequence(&json!({"name": "plain"})).await.status(),
        201
    );
    assert_eq!(
        s.get_json("/v1/sequences/plain/next").await,
        json!({"name": "plain", "id": 1})
    );
    s.stop().await;
}

async fn a_full_counter_answers_409_until_widened_and_plain_again_serves_ids(db: TestDb) {
    let s = TestServer::on(&db.url).await;
    let resp = s
        .post_sequence(&json!({"name": "t", "step": 100, "format": "T{seq:01}"}))
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    for i in 1..=9 {
        assert_eq!(
            s.get_json("/v1/sequences/t/next").await["serial"],
            format!("T{i}")
        );
    }
    let full = s.get("/v1/sequences/t/next").await;
    assert_eq!(full.status(), StatusCode::CONFLICT);
    let body: Value = full.json().await.unwrap();
    assert_eq!(body["error"]["code"], "serial_exhausted", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("{seq:01}"),
        "{body}"
    );
    let batch = s.get("/v1/sequences/t/batch?count=2").await;
    assert_eq!(batch.status(), StatusCode::CONFLICT);
    // The step of 100 was cut at the capacity: the counter row stopped at 9.
    let periods = s.store.list_periods(&common::name("t")).await.unwrap();
    assert_eq!(periods.len(), 1);
    assert_eq!((periods[0].key.as_str(), periods[0].max_id), ("", 9));
    // Widened: the counter goes on past its width.
    let widened = s.patch_sequence("t", &json!({"overflow": "widen"})).await;
    assert_eq!(widened.status(), StatusCode::OK);
    assert_eq!(s.get_json("/v1/sequences/t/next").await["serial"], "T10");
    // Made plain: IDs without serials, from the sequence's own row.
    let plain = s.patch_sequence("t", &json!({"format": null})).await;
    assert_eq!(plain.status(), StatusCode::OK);
    let row: Value = plain.json().await.unwrap();
    assert_eq!(row["serial"], Value::Null);
    let next = s.get_json("/v1/sequences/t/next").await;
    assert!(next.get("serial").is_none(), "{next}");
    assert!(next["id"].as_i64().unwrap() >= 1);
    s.stop().await;
}

/// An instance whose settings refresh runs every 100 ms.
async fn start_refreshing(db: &TestDb) -> TestServer {
    let mut settings = Settings::for_database(db.url.clone());
    settings.settings_refresh = std::time::Duration::from_millis(100);
    TestServer::start(settings).await
}

/// The settings refresh rounds `s` completed, from its `/metrics`.
async fn refresh_rounds(s: &TestServer) -> u64 {
    let text = s.get("/metrics").await.text().await.unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("seqd_settings_refresh_rounds_total "))
        .expect("the refresh rounds on /metrics");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Waits (bounded) until `s` completed two settings refresh rounds from
/// now: the second one began after every change made before this call.
/// Draws nothing: `/metrics` is the only request `s` gets meanwhile.
async fn two_refresh_rounds(s: &TestServer) {
    let from = refresh_rounds(s).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while refresh_rounds(s).await < from + 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "no settings refresh round in 60 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn next(s: &TestServer, name: &str) -> reqwest::Response {
    s.get(&format!("/v1/sequences/{name}/next")).await
}

/// Every setting PATCHed on one instance is in force on another at its
/// first request after one refresh round, with no request to it in between
/// (no traffic, no reservation): plain -> serial, serial -> plain, a new
/// format, overflow refuse -> widen, ordering instance -> global.
async fn every_setting_patched_on_one_instance_is_in_force_on_another_without_traffic(db: TestDb) {
    let a = TestServer::on(&db.url).await;
    let b = start_refreshing(&db).await;
    let made = [
        json!({"name": "plain", "step": 100000}),
        json!({"name": "serial", "step": 10, "format": "S{seq:03}"}),
        json!({"name": "fmt", "step": 10, "format": "M{seq:03}"}),
        json!({"name": "full", "step": 1, "format": "W{seq:01}"}),
        json!({"name": "order", "step": 1000}),
    ];
    for body in made {
        assert_eq!(a.post_sequence(&body).await.status(), StatusCode::CREATED);
    }
    // `b` serves each from memory: a segment, a period counter.
    let first_plain = b.next("plain").await;
    assert_eq!(
        b.get_json("/v1/sequences/serial/next").await["serial"],
        "S001"
    );
    assert_eq!(b.get_json("/v1/sequences/fmt/next").await["serial"], "M001");
    for i in 1..=9 {
        assert_eq!(
            b.get_json("/v1/sequences/full/next").await["serial"],
            format!("W{i}")
        );
    }
    assert_eq!(next(&b, "full").await.status(), StatusCode::CONFLICT);
    assert_eq!(b.next("order").await, 1);
    // `a` reserves above `b`'s segment of `order`.
    let a_order = a.next("order").await;
    assert!(a_order > 1000, "{a_order}");

    let patches = [
        ("plain", json!({"format": "P{seq:03}"})),
        ("serial", json!({"format": null})),
        ("fmt", json!({"format": "N{seq:04}"})),
        ("full", json!({"overflow": "widen"})),
        ("order", json!({"ordering": "global"})),
    ];
    for (name, body) in patches {
        assert_eq!(
            a.patch_sequence(name, &body).await.status(),
            StatusCode::OK,
            "{name}"
        );
    }
    two_refresh_rounds(&b).await;

    // Every setting is checked, and every one not in force is named.
    let mut stale = Vec::new();
    let plain = b.get_json("/v1/sequences/plain/next").await;
    if plain["serial"] != "P001" {
        stale.push(format!(
            "plain -> serial: {plain} (b served {first_plain} before)"
        ));
    }
    let serial = b.get_json("/v1/sequences/serial/next").await;
    if serial.get("serial").is_some() || serial["id"].as_i64().is_none() {
        stale.push(format!("serial -> plain: {serial}"));
    }
    let fmt = b.get_json("/v1/sequences/fmt/next").await;
    if !fmt["serial"].as_str().is_some_and(|f| f.starts_with('N')) {
        stale.push(format!("format: {fmt}"));
    }
    let full = next(&b, "full").await;
    let full = (full.status(), full.text().await.unwrap());
    if full.0 != StatusCode::OK || !full.1.contains("\"W10\"") {
        stale.push(format!("overflow -> widen: {full:?}"));
    }
    // Global: from the row, above `a`'s segment, not 2 from `b`'s.
    let order = b.get_json("/v1/sequences/order/next").await;
    if order["id"].as_i64().is_none_or(|id| id <= a_order) {
        stale.push(format!("ordering -> global: {order} after {a_order}"));
    }
    assert!(stale.is_empty(), "not in force on b: {stale:#?}");
    a.stop().await;
    b.stop().await;
}

/// A row changed by SQL (no PATCH anywhere) is in force on every instance
/// after one refresh round, with no request in between.
async fn a_row_changed_by_sql_is_in_force_on_every_instance_without_traffic(db: TestDb) {
    let a = start_refreshing(&db).await;
    let b = start_refreshing(&db).await;
    let body = json!({"name": "q", "step": 10, "format": "Q{seq:03}"});
    assert_eq!(a.post_sequence(&body).await.status(), StatusCode::CREATED);
    let body = json!({"name": "r", "step": 100000});
    assert_eq!(a.post_sequence(&body).await.status(), StatusCode::CREATED);
    assert_eq!(a.get_json("/v1/sequences/q/next").await["serial"], "Q001");
    let q = b.get_json("/v1/sequences/q/next").await;
    assert!(
        q["serial"].as_str().is_some_and(|q| q.starts_with('Q')),
        "{q}"
    );
    for s in [&a, &b] {
        assert!(s
            .get_json("/v1/sequences/r/next")
            .await
            .get("serial")
            .is_none());
    }
    common::execute(
        &db,
        "UPDATE sequences SET format = 'X-{seq:05}' WHERE name = 'q'",
    )
    .await;
    common::execute(
        &db,
        "UPDATE sequences SET format = 'R{seq}' WHERE name = 'r'",
    )
    .await;
    two_refresh_rounds(&a).await;
    two_refresh_rounds(&b).await;
    for s in [&a, &b] {
        let q = s.get_json("/v1/sequences/q/next").await["serial"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(q.starts_with("X-"), "{q}");
        let r = s.get_json("/v1/sequences/r/next").await;
        assert!(
            r["serial"].as_str().is_some_and(|r| r.starts_with('R')),
            "{r}"
        );
    }
    a.stop().await;
    b.stop().await;
}

/// `/metrics` shows each served serial sequence's current period: the share
/// of its capacity reserved and its highest counter, as `GET` reports them.
async fn metrics_show_the_period_fill_and_counter(db: TestDb) {
    clear_of_midnight().await;
    let s = TestServer::on(&db.url).await;
    let body =
        json!({"name": "inv", "step": 10, "format": "I{yyyy}{MM}{dd}{seq:02}", "reset": "day"});
    assert_eq!(s.post_sequence(&body).await.status(), StatusCode::CREATED);
    for _ in 0..3 {
        s.get_json("/v1/sequences/inv/next").await;
    }
    // A prefetch finishing between two reads raises the counter: compare
    // /metrics with a GET that reads the same before and after it (bounded).
    let mut stable = None;
    for _ in 0..50 {
        let before = s.get_json("/v1/sequences/inv").await["period"].clone();
        let text = s.get("/metrics").await.text().await.unwrap();
        let after = s.get_json("/v1/sequences/inv").await["period"].clone();
        if before == after {
            stable = Some((after, text));
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (period, text) = stable.expect("the period settled");
    let key = period["key"].as_str().unwrap().to_string();
    assert_eq!(key, today());
    let counter = period["reserved_up_to"].as_i64().unwrap();
    assert!((3..=99).contains(&counter), "{period}");
    let labels = format!("{{sequence=\"inv\",period=\"{key}\"}}");
    let value = |family: &str| -> f64 {
        let prefix = format!("{family}{labels} ");
        let line = text
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no {prefix} in /metrics"));
        line[prefix.len()..].parse().unwrap()
    };
    assert_eq!(value("seqd_serial_period_reserved_max"), counter as f64);
    let used = value("seqd_serial_period_capacity_used_ratio");
    assert!((used - counter as f64 / 99.0).abs() < 1e-9, "{used}");
    let fill = period["fill"].as_f64().unwrap();
    assert!(
        (used - fill).abs() < 1e-9,
        "{used} on /metrics, {fill} from GET"
    );
    s.stop().await;
}

per_backend!(
    metrics_show_the_period_fill_and_counter,
    every_bad_setting_is_refused_with_what_is_wrong,
    serials_come_from_next_batch_text_and_the_leaf_route,
    a_full_counter_answers_409_until_widened_and_plain_again_serves_ids,
    every_setting_patched_on_one_instance_is_in_force_on_another_without_traffic,
    a_row_changed_by_sql_is_in_force_on_every_instance_without_traffic,
);
