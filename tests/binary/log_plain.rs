//! Text log lines written to a pipe (a file, a log collector) carry no ANSI colour codes:
//! `seqd serve` and an operator's command, each with its stderr on a pipe.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// `seqd ARGS` with the environment of a plain shell: no `SEQD_*` variable, `info` logs.
fn seqd(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_seqd"));
    cmd.args(args).env("RUST_LOG", "info");
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("SEQD_") || key == "DATABASE_URL" {
            cmd.env_remove(key);
        }
    }
    cmd
}

fn assert_plain(what: &str, log: &str) {
    assert!(
        !log.contains("\x1b["),
        "{what}: ANSI escapes in a log written to a pipe:\n{log:?}"
    );
}

#[test]
fn text_logs_written_to_a_pipe_have_no_colours() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/seqd.db?mode=rwc", dir.path().display());

    let migrate = seqd(&["migrate", "--database-url", &url])
        .output()
        .expect("run seqd migrate");
    let log = String::from_utf8_lossy(&migrate.stderr);
    assert!(migrate.status.success(), "{log}");
    assert!(log.contains("INFO"), "migrate logged at INFO: {log}");
    assert_plain("seqd migrate", &log);

    let mut serve = seqd(&[
        "serve",
        "--database-url",
        &url,
        "--listen",
        "127.0.0.1:0",
        "--log-format",
        "text",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn seqd serve");
    let mut log = String::new();
    // Read up to the start-up line (the pipe closes if the process exits first).
    for line in BufReader::new(serve.stderr.take().unwrap()).lines() {
        let line = line.expect("a log line");
        log.push_str(&line);
        log.push('\n');
        if line.contains("seqd started") {
            break;
        }
    }
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(log.contains("seqd started"), "serve started: {log}");
    assert!(log.contains(" INFO "), "a plain level: {log}");
    assert_plain("seqd serve", &log);
}
