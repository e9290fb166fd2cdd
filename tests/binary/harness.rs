//! The test harness itself (tests/support/server): a `seqd serve` started under a
//! wrapper that forks it and waits (a shell, as `prlimit` and such wrappers
//! do) is killed with its wrapper, on every backend.

use crate::support::common;
use crate::support::server;

use std::time::Duration;

use common::TestDb;
use server::Process;

/// The ids of the child processes of `pid` (`pgrep -P`).
fn children_of(pid: u32) -> Vec<String> {
    let out = std::process::Command::new("pgrep")
        .args(["-P", &pid.to_string()])
        .output()
        .expect("run pgrep");
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Whether process `pid` still exists (`kill -0`).
fn alive(pid: &str) -> bool {
    std::process::Command::new("kill")
        .args(["-0", pid])
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// A wrapper that forks seqd and waits: killing the wrapper alone left seqd
/// running. Three servers under wrappers, each with one seqd under it; once
/// they are killed, no seqd under them is left.
async fn no_seqd_outlives_its_wrapper(db: TestDb) {
    // `sh -c` with a command after seqd's cannot exec it in place: it forks
    // seqd and waits for it.
    let wrapper = ["sh", "-c", "\"$@\"; exit $?", "sh"];
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(Process::spawn_under(&wrapper, &db.url, &[], &[]).await);
    }
    let seqds: Vec<String> = servers.iter().flat_map(|s| children_of(s.pid)).collect();
    assert_eq!(seqds.len(), 3, "one seqd under each wrapper: {seqds:?}");
    for s in servers {
        s.kill().await;
    }
    // Bounded: the kernel reaps the killed processes soon, not at once.
    for _ in 0..50 {
        if !seqds.iter().any(|p| alive(p)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left: Vec<_> = seqds.iter().filter(|p| alive(p)).collect();
    assert!(left.is_empty(), "seqd outlived its wrapper: {left:?}");
}

per_backend!(no_seqd_outlives_its_wrapper);
