//! A row whose serial settings seqd cannot use (written by SQL) is reported
//! as what it is, naming the row and the field, and never hides or breaks
//! anything else: reads, pages, other sequences, repairs (PATCH, the CLI).
//! On every backend (docs/design.md, "Rows seqd cannot use").

use crate::support::common;
use crate::support::server;

use common::TestDb;
use reqwest::StatusCode;
use seqd::config::Settings;
use serde_json::{json, Value};
use server::TestServer;

/// Ten daily serial sequences `q00`..`q09`; then SQL breaks `q03`..`q05`
/// (a format with an unknown token) and `q07` (a time zone that does not
/// exist).
async fn broken_rows(db: &TestDb) -> TestServer {
    let s = TestServer::start(Settings::for_database(db.url.clone())).await;
    for i in 0..10 {
        let body = json!({"name": format!("q{i:02}"), "format": "Q{yyyy}{MM}{dd}-{seq:04}", "reset": "day"});
        let resp = s.post_sequence(&body).await;
        assert_eq!(
            resp.status(),
            StatusCode::CREATED,
            "{:?}",
            resp.text().await
        );
    }
    common::execute(
        db,
        "UPDATE sequences SET format = 'Q{nope}{seq}' WHERE name IN ('q03', 'q04', 'q05')",
    )
    .await;
    common::execute(
        db,
        "UPDATE sequences SET time_zone = 'Mars/Olympus' WHERE name = 'q07'",
    )
    .await;
    s
}

async fn an_unusable_row_is_named_and_hides_nothing(db: TestDb) {
    let s = broken_rows(&db).await;

    // Its own requests: 500 naming the row and the field, not an outage.
    for (name, field) in [("q03", "format"), ("q07", "time_zone")] {
        let resp = s.get(&format!("/v1/sequences/{name}/next")).await;
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR, "{name}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "sequence_misconfigured", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("'{name}'")) && message.contains(field),
            "{message}"
        );
        // Read: 200, the row with its problem.
        let row = s.get_json(&format!("/v1/sequences/{name}")).await;
        assert_eq!(row["name"], name, "{row}");
        assert_eq!(row["problem"]["field"], field, "{row}");
    }

    // Every other sequence serves.
    for name in ["q02", "q06", "q09"] {
        let resp = s.get(&format!("/v1/sequences/{name}/next")).await;
        assert_eq!(resp.status(), StatusCode::OK, "{name}");
        let body: Value = resp.json().await.unwrap();
        assert!(
            body["serial"].as_str().unwrap().ends_with("-0001"),
            "{body}"
        );
    }

    // Pages list every row, the unusable ones with their problem, and go on.
    let page = s.get_json("/v1/sequences?limit=3&after=q02").await;
    assert_eq!(server::listed_names(&page), ["q03", "q04", "q05"], "{page}");
    assert_eq!(page["next"], "q05", "{page}");
    assert!(
        page["sequences"][0]["problem"]["message"].is_string(),
        "{page}"
    );
    let mut all = Vec::new();
    let mut after = String::new();
    loop {
        let path = if after.is_empty() {
            "/v1/sequences?limit=4".to_string()
        } else {
            format!("/v1/sequences?limit=4&after={after}")
        };
        let page = s.get_json(&path).await;
        for r in page["sequences"].as_array().unwrap() {
            all.push(r["name"].as_str().unwrap().to_string());
        }
        match page["next"].as_str() {
            Some(next) => after = next.to_string(),
            None => break,
        }
    }
    let want: Vec<String> = (0..10).map(|i| format!("q{i:02}")).collect();
    assert_eq!(all, want);
}

async fn an_unusable_row_is_repaired_by_patch_and_by_the_cli(db: TestDb) {
    let s = broken_rows(&db).await;
    // PATCH with a good format repairs it, and it serves at once.
    let resp = s
        .patch_sequence("q03", &json!({"format": "R{yyyy}{MM}{dd}-{seq:04}"}))
        .await;
    assert_eq!(resp.status(), StatusCode::OK, "{:?}", resp.text().await);
    let row: Value = s.get_json("/v1/sequences/q03").await;
    assert!(row.get("problem").is_none(), "{row}");
    let body: Value = s.get("/v1/sequences/q03/next").await.json().await.unwrap();
    let serial = body["serial"].as_str().unwrap_or_default();
    assert!(
        serial.starts_with('R') && serial.ends_with("-0001"),
        "{body}"
    );

    // A PATCH of another field answers 200 and keeps reporting the problem.
    let resp = s.patch_sequence("q04", &json!({"step": 50})).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let row: Value = resp.json().await.unwrap();
    assert_eq!(
        (row["step"].clone(), row["problem"]["field"].clone()),
        (json!(50), json!("format"))
    );

    // The CLI changes the step of an unusable row, exits 0 and names the problem.
    let out = common::seqd_on(&db, &["sequences", "set-step", "q05", "70"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("q05") && stdout.contains("cannot be used: field `format`"),
        "{stdout}"
    );
    let out = common::seqd_on(&db, &["sequences", "list"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    for i in 0..10 {
        assert!(
            stdout.contains(&format!("q{i:02}")),
            "q{i:02} missing from:\n{stdout}"
        );
    }
    assert_eq!(stdout.matches("cannot be used").count(), 3, "{stdout}");
}

per_backend!(
    an_unusable_row_is_named_and_hides_nothing,
    an_unusable_row_is_repaired_by_patch_and_by_the_cli
);
