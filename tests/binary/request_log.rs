//! Request ids and the request log of a real `seqd serve` process with
//! `--log-format json` at the default level: every response carries an
//! `x-request-id` (the client's, or one made by seqd), admin log lines carry
//! it in their `request` span, and the ID routes log nothing at `info`.

use crate::support::common;

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

/// Reads JSON log lines until one has `fields.message == message`; returns
/// every line read, that one last.
async fn lines_until(rx: &mut mpsc::UnboundedReceiver<Value>, message: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(v) = rx.recv().await {
            let done = v["message"] == message || v["fields"]["message"] == message;
            seen.push(v);
            if done {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(found, Ok(true)),
        "no log line {message:?}; saw {seen:#?}"
    );
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_log_lines_carry_the_request_id_and_id_routes_stay_quiet() {
    let db = common::test_db(common::Backend::Sqlite).await.unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_seqd"))
        .args(["serve", "--listen", "127.0.0.1:0", "--log-format", "json"])
        .env("SEQD_DATABASE_URL", &db.url)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn seqd");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    tokio::spawn(async move {
        while let Ok(Some(line)) = stderr.next_line().await {
            let v: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            if tx.send(v).is_err() {
                break;
            }
        }
    });
    let started = lines_until(&mut rx, "seqd started").await;
    let listen = started.last().unwrap()["listen"]
        .as_str()
        .expect("listen field")
        .to_string();
    let base = format!("http://{listen}");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();

    let created = http
        .post(format!("{base}/v1/sequences"))
        .header("x-request-id", "it-create-1")
        .json(&json!({ "name": "logged", "step": 10 }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    assert_eq!(
        created.headers()["x-request-id"],
        "it-create-1",
        "the client's id is echoed"
    );

    let mut made = std::collections::HashSet::new();
    for _ in 0..25 {
        let r = http
            .get(format!("{base}/v1/sequences/logged/next"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
        let (instance, n) = id
            .split_once('-')
            .unwrap_or_else(|| panic!("request id {id:?}"));
        assert!(
            instance.len() == 8 && instance.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
        assert!(n.parse::<u64>().is_ok(), "{id}");
        assert!(made.insert(id), "request ids repeat");
    }

    let patched = http
        .patch(format!("{base}/v1/sequences/logged"))
        .header("x-request-id", "it-patch-2")
        .json(&json!({ "step": 20 }))
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), 200);

    let lines = lines_until(&mut rx, "sequence updated").await;
    let span_of = |message: &str| {
        let line = lines
            .iter()
            .find(|v| v["message"] == message || v["fields"]["message"] == message)
            .unwrap_or_else(|| panic!("no {message:?} in {lines:#?}"));
        line["span"].clone()
    };
    let created_span = span_of("sequence created");
    assert_eq!(created_span["name"], "request");
    assert_eq!(created_span["request_id"], "it-create-1");
    assert_eq!(created_span["method"], "POST");
    assert_eq!(created_span["route"], "/v1/sequences");
    let updated_span = span_of("sequence updated");
    assert_eq!(updated_span["request_id"], "it-patch-2");
    assert_eq!(updated_span["route"], "/v1/sequences/{name}");
    let in_requests = lines.iter().filter(|v| !v["span"].is_null()).count();
    assert_eq!(
        in_requests, 2,
        "at info, the 25 ID requests log nothing: {lines:#?}"
    );
    assert!(
        !lines.iter().any(|v| v.to_string().contains("/next")),
        "{lines:#?}"
    );

    let _ = child.start_kill();
    let _ = child.wait().await;
}
