//! Durability of reservations on the embedded SQLite default: every segment
//! fetch is on disk before its IDs are handed out. A `kill -9` test cannot
//! show this (the page cache survives a killed process, not a power loss),
//! so the real binary's `fsync`/`fdatasync` calls are counted with `strace`.

use crate::support::common;
use crate::support::server;

use std::process::Stdio;
use std::time::Duration;

use common::Backend;
use server::{fetch_json, Process};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The buffer's successful fetch count, from `GET /v1/sequences/{name}`.
async fn fetches(http: &reqwest::Client, base: &str, name: &str) -> u64 {
    let v = fetch_json(http.get(format!("{base}/v1/sequences/{name}"))).await;
    v["buffer"]["fetches"].as_u64().unwrap()
}

/// 40 one-ID segment fetches on SQLite: the traced process syncs to disk at
/// least once per fetch (`synchronous = FULL`; under WAL's NORMAL it synced
/// none of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_syncs_every_segment_fetch_to_disk() {
    if !common::tool_available("strace") {
        return;
    }
    let db = common::test_db(Backend::Sqlite).await.unwrap();
    let store = common::store(&db).await;
    common::create_seq(&store, "durable", 1, 1).await;
    let seqd = Process::spawn(&db.url, &["--max-step", "1", "--snowflake", "false"]).await;
    let http = reqwest::Client::new();
    let next = format!("{}/v1/sequences/durable/next", seqd.base);
    http.get(&next).send().await.unwrap(); // loaded before tracing starts

    let trace = db.dir().unwrap().join("fsync.trace");
    let mut strace = tokio::process::Command::new("strace")
        .args(["-f", "-e", "trace=fsync,fdatasync", "-o"])
        .arg(&trace)
        .args(["-p", &seqd.pid.to_string()])
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn strace");
    let mut log = BufReader::new(strace.stderr.take().unwrap()).lines();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = log.next_line().await.unwrap() {
            if line.contains("attached") {
                return;
            }
        }
        panic!("strace ended before attaching");
    })
    .await
    .expect("strace attached");

    let before = fetches(&http, &seqd.base, "durable").await;
    let mut last = 0;
    for _ in 0..40 {
        let id = fetch_json(http.get(&next)).await["id"].as_i64().unwrap();
        assert!(id > last);
        last = id;
    }
    let fetched = fetches(&http, &seqd.base, "durable").await - before;
    let status = std::process::Command::new("kill")
        .args(["-INT", &strace.id().unwrap().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    strace.wait().await.unwrap();
    let syncs = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .filter(|l| l.contains("fsync(") || l.contains("fdatasync("))
        .count() as u64;
    eprintln!("{fetched} segment fetches, {syncs} fsync/fdatasync calls");
    assert!(fetched >= 30, "one-ID segments: a fetch per ID ({fetched})");
    assert!(syncs >= fetched, "{syncs} syncs for {fetched} fetches");
    seqd.kill().await;
}
