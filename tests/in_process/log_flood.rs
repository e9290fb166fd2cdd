//! A flood of failing requests (a database outage) writes a bounded number of
//! log lines: the first failure per (error, sequence), then at most one line
//! per interval carrying the number of lines it stood for. The log is
//! captured with a tracing subscriber; the clock is tokio's paused clock.

use crate::support::server;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use seqd::allocator::AllocatorConfig;
use seqd::http::{router, AdminAuth, AppState};
use seqd::service::Service;
use seqd::store::memory::MemoryStore;
use serde_json::Value;
use tower::ServiceExt;

/// Log lines written by a subscriber, kept in memory.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Capture {
    /// The JSON lines whose message is `message`, taken out of the capture.
    fn take(&self, message: &str) -> Vec<Value> {
        let bytes = std::mem::take(&mut *self.0.lock().unwrap());
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|v| v["fields"]["message"] == message)
            .collect()
    }
}

async fn get_next(app: &seqd::http::App, name: &str) -> u16 {
    let req = Request::get(format!("/v1/sequences/{name}/next"))
        .body(Body::empty())
        .unwrap();
    // Its request counts in the process's request metrics.
    let _requests = server::requests_shared().await;
    app.clone().oneshot(req).await.unwrap().status().as_u16()
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_failing_requests_log_one_line_per_sequence_then_the_count() {
    let capture = Capture::default();
    let writer = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let store = Arc::new(MemoryStore::new());
    for name in ["down1", "down2"] {
        store.insert(name, 0, 10);
        store.set_failing(name, true);
    }
    let config = AllocatorConfig {
        wait_timeout: Duration::ZERO,
        ..AllocatorConfig::default()
    };
    let app = router(AppState::new(
        Service::new(store, config),
        AdminAuth::OpenOnLoopback,
    ));
    const MESSAGE: &str = "no segment available within the wait timeout";

    for i in 0..10_000 {
        let name = if i % 2 == 0 { "down1" } else { "down2" };
        assert_eq!(get_next(&app, name).await, 503);
    }
    let first = capture.take(MESSAGE);
    assert_eq!(
        first.len(),
        2,
        "{} lines for 10,000 failing requests",
        first.len()
    );
    let mut sequences: Vec<&str> = first
        .iter()
        .map(|v| v["fields"]["sequence"].as_str().unwrap())
        .collect();
    sequences.sort_unstable();
    assert_eq!(sequences, ["down1", "down2"], "{first:#?}");
    assert!(
        first.iter().all(|v| v["fields"]["suppressed"] == 0),
        "{first:#?}"
    );

    // The documented interval: one line per 10 s per (error, sequence).
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(get_next(&app, "down1").await, 503);
    let second = capture.take(MESSAGE);
    assert_eq!(second.len(), 1, "{second:#?}");
    assert_eq!(second[0]["fields"]["sequence"], "down1");
    assert_eq!(second[0]["fields"]["suppressed"], 4_999, "{second:#?}");
}
