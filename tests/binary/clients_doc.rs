//! The examples of docs/clients.md run as written against a `seqd serve` process: the
//! Python HTTP function draws IDs and lets a 404 through, the redis-py lines get
//! `INCRBY`'s last ID and own the n IDs below it, and the Go function (when `go` is on
//! the `PATH`) draws an ID. What changes from the page: the address and port only.

use crate::support::common;
use crate::support::server;

use std::io::Write;
use std::process::{Command, Stdio};

use common::Backend;
use server::Process;

/// The code blocks of docs/clients.md in language `lang`, in order.
fn blocks(lang: &str) -> Vec<String> {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/clients.md"))
        .expect("docs/clients.md");
    let fence = format!("```{lang}\n");
    page.split(&fence)
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap().to_owned())
        .collect()
}

/// Runs `python3 -` on `script`; its stdout, asserted to succeed.
fn python(script: &str) -> String {
    let mut child = Command::new("python3")
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script}\n{stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn has_python_module(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_examples_of_clients_md_draw_ids_as_the_page_says() {
    let db = common::test_db(Backend::Sqlite).await.expect("SQLite");
    let seqd = Process::spawn(&db.url, &["--resp-listen", "127.0.0.1:0"]).await;
    let http = reqwest::Client::new();
    let made = http
        .post(format!("{}/v1/sequences", seqd.base))
        .json(&serde_json::json!({"name": "order", "start": 1, "step": 1000}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 201);

    // Python, standard library: two IDs in order, and a 404 raised, not retried.
    let python_blocks = blocks("python");
    assert_eq!(python_blocks.len(), 2, "the HTTP and the redis-py examples");
    let next_id = &python_blocks[0];
    let base = &seqd.base;
    let out = python(&format!(
        "{next_id}\n\
         print(next_id('order', base='{base}'), next_id('order', base='{base}'))\n\
         try:\n    next_id('nosuch', base='{base}')\n\
         except urllib.error.HTTPError as e:\n    print(e.code)\n"
    ));
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        ["1", "2", "404"]
    );

    // redis-py: INCR, then INCRBY 100 whose reply is the last of the caller's 100.
    if has_python_module("redis") {
        let resp = seqd.resp.clone().expect("the RESP address");
        let (host, port) = resp.rsplit_once(':').unwrap();
        let lines = python_blocks[1].replace(
            "host=\"127.0.0.1\", port=6380",
            &format!("host=\"{host}\", port={port}"),
        );
        assert!(
            lines.contains(port),
            "the page's address was replaced: {lines}"
        );
        let out = python(&format!(
            "{lines}\nprint(one, last, ids[0], ids[-1], len(ids))\n"
        ));
        assert_eq!(
            out.split_whitespace().collect::<Vec<_>>(),
            ["3", "103", "4", "103", "100"]
        );
    } else {
        assert!(!common::require_all(), "python3 with redis is required");
        eprintln!("skipped: redis-py example (python3 -c 'import redis' failed)");
    }

    // Go, net/http: one ID (.ci/run installs Debian's golang-go).
    if Command::new("go").arg("version").output().is_ok() {
        let dir = tempfile::tempdir().unwrap();
        let module = dir.path();
        std::fs::create_dir(module.join("seqd")).unwrap();
        std::fs::write(module.join("seqd/seqd.go"), &blocks("go")[0]).unwrap();
        std::fs::write(module.join("go.mod"), "module example.com/ids\n\ngo 1.19\n").unwrap();
        std::fs::write(
            module.join("main.go"),
            format!(
                "package main\n\nimport (\n\t\"fmt\"\n\t\"net/http\"\n\n\t\"example.com/ids/seqd\"\n)\n\n\
                 func main() {{\n\tid, err := seqd.NextID(http.DefaultClient, \"{base}\", \"order\", \"\")\n\
                 \tif err != nil {{\n\t\tpanic(err)\n\t}}\n\tfmt.Println(id)\n}}\n"
            ),
        )
        .unwrap();
        let out = Command::new("go")
            .args(["run", "."])
            .current_dir(module)
            .env("GOTOOLCHAIN", "local")
            .env("GOFLAGS", "-mod=mod")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "go run: {stderr}");
        let id: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        assert!(id > 2, "an ID after the Python ones: {id}");
    } else {
        assert!(
            !common::require_all(),
            "go is required (Debian's golang-go)"
        );
        eprintln!("skipped: Go example (no go on the PATH)");
    }
    seqd.kill().await;
}
