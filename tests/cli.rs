//! The operators' subcommands through the real `seqd` binary, on every
//! backend: exit codes, what they print, and what they leave in the database.

#[macro_use]
mod common;

use std::process::Output;

use common::TestDb;

/// Runs the `seqd` binary with `args` and a clean environment for its settings.
async fn seqd(args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_seqd"))
        .args(args)
        .env_remove("SEQD_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .env_remove("SEQD_MAX_STEP")
        .env("RUST_LOG", "warn")
        .output()
        .await
        .expect("run seqd")
}

/// Runs `seqd <args> --database-url <db>`.
async fn seqd_on(db: &TestDb, args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend(["--database-url", db.url.as_str()]);
    seqd(&all).await
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts success and returns stdout.
fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        stdout(out),
        stderr(out)
    );
    stdout(out)
}

/// Asserts exit code 1 with one readable `error: ...` line on stderr (no
/// backtrace, no Rust debug output) and returns it.
fn fails(out: &Output) -> String {
    let err = stderr(out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {}\nstderr: {err}",
        stdout(out)
    );
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected: {err}"
    );
    for debug in ["backtrace", "Stack", "{ ", "Error(", "panicked"] {
        assert!(!err.contains(debug), "debug output {debug:?} in: {err}");
    }
    err
}

/// The whitespace-separated fields of the `seqd sequences list` line of `name`.
fn listed(list_output: &str, name: &str) -> Option<Vec<String>> {
    list_output
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .find(|fields| fields.first().map(String::as_str) == Some(name))
}

async fn migrate_succeeds_and_is_idempotent(db: TestDb) {
    for _ in 0..2 {
        let out = ok(&seqd_on(&db, &["migrate"]).await);
        assert!(out.contains("migrations applied"), "{out}");
    }
    let store = common::connect(&db).await;
    store
        .ping()
        .await
        .expect("schema in place after seqd migrate");
}

async fn create_then_list_shows_the_sequence(db: TestDb) {
    let out = ok(&seqd_on(
        &db,
        &[
            "sequences",
            "create",
            "order",
            "--start",
            "1001",
            "--step",
            "50",
            "--description",
            "order IDs",
        ],
    )
    .await);
    assert_eq!(
        listed(&out, "order"),
        Some(
            vec!["order", "1000", "50", "order", "IDs"]
                .into_iter()
                .map(String::from)
                .collect()
        )
    );
    ok(&seqd_on(&db, &["sequences", "create", "user"]).await);

    let out = ok(&seqd_on(&db, &["sequences", "list"]).await);
    let header: Vec<&str> = out
        .lines()
        .next()
        .expect("header")
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "MAX_ID", "STEP", "DESCRIPTION"]);
    assert_eq!(listed(&out, "order").unwrap()[..3], ["order", "1000", "50"]);
    assert_eq!(
        listed(&out, "user").unwrap(),
        ["user", "0", "1000"],
        "defaults: start 1, step 1000"
    );
    // Columns line up: every MAX_ID ends where the header's does.
    let end = out.lines().next().unwrap().find("MAX_ID").unwrap() + "MAX_ID".len();
    for line in out.lines().skip(1) {
        assert!(
            line[..end].ends_with(char::is_numeric),
            "misaligned: {line:?}\n{out}"
        );
    }

    let store = common::connect(&db).await;
    let row = common::row(&store, "order").await;
    assert_eq!(
        (row.max_id, row.step, row.description.as_str()),
        (1000, 50, "order IDs")
    );
}

async fn create_of_an_existing_name_fails_readably(db: TestDb) {
    ok(&seqd_on(&db, &["sequences", "create", "order", "--step", "10"]).await);
    let err = fails(&seqd_on(&db, &["sequences", "create", "order", "--step", "20"]).await);
    assert!(err.contains("sequence 'order' already exists"), "{err}");
    let store = common::connect(&db).await;
    assert_eq!(common::row(&store, "order").await.step, 10, "unchanged");
}

async fn create_rejects_invalid_names_and_values(db: TestDb) {
    ok(&seqd_on(&db, &["migrate"]).await);
    for (args, needle) in [
        (vec!["a b"], "invalid sequence name"),
        (vec!["-x"], ""), // clap: an unknown flag (exit code 2, checked below)
        (vec!["x/y"], "invalid sequence name"),
        (vec!["order", "--step", "0"], "invalid step"),
        (
            vec!["order", "--step", "1000001"],
            "invalid step: must be an integer from 1 to 1000000",
        ),
        (vec!["order", "--start", "0"], "invalid start"),
        (
            vec!["order", "--description", "d".repeat(257).as_str()],
            "invalid description",
        ),
    ] {
        let mut all = vec!["sequences", "create"];
        all.extend(args.iter().copied());
        let out = seqd_on(&db, &all).await;
        if needle.is_empty() {
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        } else {
            let err = fails(&out);
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }
    // A larger --max-step admits a larger step.
    ok(&seqd_on(
        &db,
        &[
            "sequences",
            "create",
            "big",
            "--step",
            "2000000",
            "--max-step",
            "5000000",
        ],
    )
    .await);
    let store = common::connect(&db).await;
    assert_eq!(common::names(&store).await, ["big"]);
}

async fn set_step_changes_the_step_and_rejects_unknown_names(db: TestDb) {
    ok(&seqd_on(&db, &["sequences", "create", "order", "--step", "10"]).await);
    let out = ok(&seqd_on(&db, &["sequences", "set-step", "order", "5000"]).await);
    assert_eq!(listed(&out, "order").unwrap()[..3], ["order", "0", "5000"]);
    let out = ok(&seqd_on(&db, &["sequences", "list"]).await);
    assert_eq!(listed(&out, "order").unwrap()[2], "5000");

    let err = fails(&seqd_on(&db, &["sequences", "set-step", "nope", "5"]).await);
    assert!(err.contains("sequence 'nope' not found"), "{err}");
    assert!(err.contains("seqd sequences create nope"), "{err}");
    let err = fails(&seqd_on(&db, &["sequences", "set-step", "order", "0"]).await);
    assert!(err.contains("invalid step"), "{err}");
    let err = fails(&seqd_on(&db, &["sequences", "set-step", "bad name", "5"]).await);
    assert!(err.contains("invalid sequence name"), "{err}");
}

per_backend!(
    migrate_succeeds_and_is_idempotent,
    create_then_list_shows_the_sequence,
    create_of_an_existing_name_fails_readably,
    create_rejects_invalid_names_and_values,
    set_step_changes_the_step_and_rejects_unknown_names,
);

#[tokio::test]
async fn help_mentions_every_subcommand() {
    let out = ok(&seqd(&["--help"]).await);
    for sub in ["serve", "migrate", "sequences", "import-leaf"] {
        assert!(
            out.lines().any(|l| l.trim_start().starts_with(sub)),
            "{sub} missing from:\n{out}"
        );
    }
    let out = ok(&seqd(&["sequences", "--help"]).await);
    for sub in ["create", "list", "set-step"] {
        assert!(
            out.lines().any(|l| l.trim_start().starts_with(sub)),
            "{sub} missing from:\n{out}"
        );
    }
    let out = ok(&seqd(&["import-leaf", "--help"]).await);
    for flag in [
        "--from",
        "--dry-run",
        "--skip-invalid",
        "--raise",
        "--database-url",
    ] {
        assert!(out.contains(flag), "{flag} missing from:\n{out}");
    }
}

#[tokio::test]
async fn an_unusable_database_url_fails_readably() {
    let err = fails(
        &seqd(&[
            "sequences",
            "list",
            "--database-url",
            "redis://user:hunter2@host/0",
        ])
        .await,
    );
    assert!(err.contains("unsupported database URL scheme"), "{err}");
    assert!(!err.contains("hunter2"), "password leaked: {err}");
}
