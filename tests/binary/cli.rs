//! The operators' subcommands through the real `seqd` binary, on every
//! backend: exit codes, what they print, and what they leave in the database.

use crate::support::common;

use std::process::Output;
use std::sync::Arc;

use common::{ok, seqd_on, TestDb};
use seqd::store::Store;

/// Runs the `seqd` binary with `args` and a clean environment for its settings.
async fn seqd(args: &[&str]) -> Output {
    common::seqd_binary(args).await
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts exit code 1 with one readable `error: ...` line on stderr (no
/// backtrace, no Rust debug output) and returns it.
#[track_caller]
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

/// The whitespace-separated fields of the line of `name` in the output of
/// `seqd sequences list` (or of a bump: `NAME MAX_ID -> NEW_MAX_ID`).
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
            vec!["order", "1000", "50", "instance", "order", "IDs"]
                .into_iter()
                .map(String::from)
                .collect()
        )
    );
    ok(&seqd_on(&db, &["sequences", "create", "user"]).await);
    let out = ok(&seqd_on(
        &db,
        &["sequences", "create", "invoice", "--ordering", "global"],
    )
    .await);
    assert_eq!(
        listed(&out, "invoice").unwrap()[..4],
        ["invoice", "0", "1000", "global"]
    );

    let out = ok(&seqd_on(&db, &["sequences", "list"]).await);
    let header: Vec<&str> = out
        .lines()
        .next()
        .expect("header")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "MAX_ID", "STEP", "ORDERING", "DESCRIPTION"]
    );
    assert_eq!(listed(&out, "order").unwrap()[..3], ["order", "1000", "50"]);
    assert_eq!(
        listed(&out, "user").unwrap(),
        ["user", "0", "1000", "instance"],
        "defaults: start 1, step 1000, instance ordering"
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

/// A migrated store on `db` holding `rows` (name, start), each with step 10.
async fn store_with(db: &TestDb, rows: &[(&str, i64)]) -> Arc<dyn Store> {
    let store = common::store(db).await;
    for (name, start) in rows {
        store
            .create(&common::new_seq(name, *start, 10))
            .await
            .unwrap_or_else(|e| panic!("creating {name}: {e}"));
    }
    store
}

/// The `max_id` of each of `names`, in that order.
async fn max_ids(store: &Arc<dyn Store>, names: &[&str]) -> Vec<i64> {
    let mut out = Vec::new();
    for name in names {
        out.push(common::row(store, name).await.max_id);
    }
    out
}

/// Runs `seqd sequences bump <args>` on `db`, `args` split at whitespace.
async fn bump(db: &TestDb, args: &str) -> Output {
    let mut all = vec!["sequences", "bump"];
    all.extend(args.split_whitespace());
    seqd_on(db, &all).await
}

/// The fields [`listed`] should find for a line `line`, split at whitespace.
fn line(line: &str) -> Option<Vec<String>> {
    Some(line.split_whitespace().map(str::to_string).collect())
}

async fn bump_of_named_sequences_raises_exactly_those_by_n(db: TestDb) {
    let store = store_with(&db, &[("a", 1001), ("b", 1), ("c", 6)]).await;
    let out = ok(&bump(&db, "a b a --by 500").await);
    assert_eq!(listed(&out, "a"), line("a 1000 -> 1500"));
    assert_eq!(listed(&out, "b"), line("b 0 -> 500"));
    assert_eq!(listed(&out, "c"), None, "{out}");
    assert!(out.contains("bumped 2 sequences by 500"), "{out}");
    assert_eq!(max_ids(&store, &["a", "b", "c"]).await, [1500, 500, 5]);
}

async fn bump_all_raises_every_row(db: TestDb) {
    let store = store_with(&db, &[("a", 1001), ("b", 1)]).await;
    // A row an operator inserted by hand with a name the API cannot serve is
    // bumped too: --all means every row.
    common::execute(
        &db,
        "INSERT INTO sequences (name, max_id, step) VALUES ('odd name', 7, 10)",
    )
    .await;
    let out = ok(&bump(&db, "--all --by 100").await);
    assert!(out.contains("bumped 3 sequences by 100"), "{out}");
    assert!(out.contains("odd name"), "{out}");
    assert_eq!(max_ids(&store, &["a", "b"]).await, [1100, 100]);
    let odd_bumped = common::execute(
        &db,
        "UPDATE sequences SET description = 'seen' WHERE name = 'odd name' AND max_id = 107",
    )
    .await;
    assert_eq!(odd_bumped, 1, "the hand-made row was bumped from 7 to 107");
}

async fn bump_dry_run_prints_the_plan_and_changes_nothing(db: TestDb) {
    let store = store_with(&db, &[("a", 1001), ("b", 1)]).await;
    for (args, b) in [
        ("a --by 5 --dry-run", None),
        ("--all --by 5 --dry-run", line("b 0 -> 5")),
    ] {
        let out = ok(&bump(&db, args).await);
        assert_eq!(listed(&out, "a"), line("a 1000 -> 1005"), "{args}");
        assert_eq!(listed(&out, "b"), b, "{args}");
        assert!(out.contains("dry run"), "{out}");
        assert!(out.contains("nothing written"), "{out}");
    }
    assert_eq!(max_ids(&store, &["a", "b"]).await, [1000, 0]);
}

async fn bump_with_a_missing_name_changes_nothing_and_names_it(db: TestDb) {
    let store = store_with(&db, &[("a", 1001), ("b", 1)]).await;
    for args in ["a nope b ghost --by 10", "a nope b ghost --by 10 --dry-run"] {
        let err = fails(&bump(&db, args).await);
        assert!(err.contains("nothing bumped"), "{err}");
        assert!(err.contains("not found: 'ghost', 'nope'"), "{err}");
        assert!(!err.contains("'a'") && !err.contains("'b'"), "{err}");
        assert_eq!(max_ids(&store, &["a", "b"]).await, [1000, 0], "{args}");
    }
    let err = fails(&bump(&db, "a bad/name --by 10").await);
    assert!(err.contains("invalid sequence name"), "{err}");
    assert_eq!(max_ids(&store, &["a"]).await, [1000]);
}

async fn bump_past_i64_max_is_refused_and_changes_nothing(db: TestDb) {
    let store = store_with(&db, &[("near", i64::MAX - 10), ("low", 1)]).await;
    let near = i64::MAX - 11;
    for args in ["--all --by 12", "low near --by 12 --dry-run"] {
        let err = fails(&bump(&db, args).await);
        assert!(
            err.contains("max_id would pass 9223372036854775807: 'near'"),
            "{err}"
        );
        assert!(!err.contains("'low'"), "{err}");
        assert_eq!(max_ids(&store, &["near", "low"]).await, [near, 0], "{args}");
    }
    // Up to i64::MAX itself is allowed.
    ok(&bump(&db, "near --by 11").await);
    assert_eq!(max_ids(&store, &["near"]).await, [i64::MAX]);
}

async fn bump_refuses_a_by_that_is_not_positive_at_argument_parsing(db: TestDb) {
    let store = store_with(&db, &[("a", 1001)]).await;
    for args in [
        "a --by 0",
        "a --by=-5",
        "a --by -5",
        "a --by 9223372036854775808",
        "a",
        "--by 5",
        "a --all --by 5",
    ] {
        let out = bump(&db, args).await;
        assert_eq!(out.status.code(), Some(2), "{args}: {}", stderr(&out));
    }
    assert_eq!(max_ids(&store, &["a"]).await, [1000]);
}

async fn after_a_bump_the_next_reservation_starts_above_old_max_plus_n(db: TestDb) {
    let store = store_with(&db, &[("a", 1)]).await;
    let before = store.reserve(&common::name("a"), 1).await.expect("reserve");
    ok(&bump(&db, "a --by 1000").await);
    let after = store.reserve(&common::name("a"), 1).await.expect("reserve");
    assert_eq!(before.max_id, 10);
    assert_eq!(after.first(), before.max_id + 1000 + 1);
}

/// `a ESC [31m red LF x U+009B DEL`, as each dialect writes it in SQL.
fn sql_with_controls(db: &TestDb) -> &'static str {
    match db.backend {
        common::Backend::Postgres => {
            "'a' || chr(27) || '[31mred' || chr(10) || 'x' || chr(155) || chr(127)"
        }
        common::Backend::Sqlite => {
            "'a' || char(27) || '[31mred' || char(10) || 'x' || char(155) || char(127)"
        }
        common::Backend::Mysql => {
            "CONCAT('a', CHAR(27 USING utf8mb4), '[31mred', CHAR(10 USING utf8mb4), 'x', \
             CHAR(0xC29B USING utf8mb4), CHAR(127 USING utf8mb4))"
        }
    }
}

async fn list_escapes_control_characters_of_rows_inserted_by_sql(db: TestDb) {
    ok(&seqd_on(&db, &["migrate"]).await);
    let text = sql_with_controls(&db);
    common::execute(
        &db,
        &format!(
            "INSERT INTO sequences (name, max_id, step, description) VALUES ('ctl', 0, 10, {text})"
        ),
    )
    .await;
    common::execute(
        &db,
        &format!("INSERT INTO sequences (name, max_id, step) VALUES ({text}, 0, 10)"),
    )
    .await;
    let out = seqd_on(&db, &["sequences", "list"]).await;
    let shown = ok(&out);
    let raw = |s: &str| s.chars().any(|c| c.is_control() && c != '\n');
    assert!(!raw(&shown), "raw control characters on stdout: {shown:?}");
    // The log line about the row with an invalid name shows it escaped (the
    // log's own colours aside).
    let err = stderr(&out);
    assert!(
        !err.contains("a\u{1b}[31mred"),
        "raw name on stderr: {err:?}"
    );
    assert!(err.contains(r"a\u{1b}[31mred\nx"), "{err:?}");
    let line = shown
        .lines()
        .find(|l| l.starts_with("ctl "))
        .expect("the row is listed");
    assert!(line.ends_with(r"a\u{1b}[31mred\nx\u{9b}\u{7f}"), "{line:?}");
    let refused = seqd_on(
        &db,
        &["sequences", "create", "c2", "--description", "a\u{7}b"],
    )
    .await;
    let err = fails(&refused);
    assert!(err.contains("control character"), "{err}");
}

/// The names `seqd sequences list` printed, in its order.
fn listed_names(list_output: &str) -> Vec<String> {
    list_output
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

async fn list_pages_through_every_sequence_or_those_with_a_prefix(db: TestDb) {
    ok(&seqd_on(&db, &["migrate"]).await);
    // 2,300 names with the prefix `m:` (three pages of 1000) and neighbours.
    let mut names: Vec<String> = (0..2300).map(|i| format!("m:{i:05}")).collect();
    names.extend(["m", "m.1", "m9", "mA", "l:1", "n:0", "M:1"].map(String::from));
    let values: Vec<String> = names.iter().map(|n| format!("('{n}', 0, 1)")).collect();
    common::execute(
        &db,
        &format!(
            "INSERT INTO sequences (name, max_id, step) VALUES {}",
            values.join(", ")
        ),
    )
    .await;
    names.sort();
    let all = ok(&seqd_on(&db, &["sequences", "list"]).await);
    assert_eq!(
        all.lines().next().unwrap().split_whitespace().next(),
        Some("NAME")
    );
    assert_eq!(listed_names(&all), names, "every row once, in byte order");
    let matching: Vec<String> = names
        .iter()
        .filter(|n| n.starts_with("m:"))
        .cloned()
        .collect();
    assert_eq!(matching.len(), 2300);
    let out = ok(&seqd_on(&db, &["sequences", "list", "--prefix", "m:"]).await);
    assert_eq!(listed_names(&out), matching);
    let out = ok(&seqd_on(&db, &["sequences", "list", "--prefix", "m:0229"]).await);
    assert_eq!(listed_names(&out), matching[2290..]);
    let out = ok(&seqd_on(&db, &["sequences", "list", "--prefix", "x"]).await);
    assert_eq!(out.lines().count(), 1, "only the header: {out}");
    for bad in ["", ":m", "m n", "m%"] {
        let err = fails(&seqd_on(&db, &["sequences", "list", "--prefix", bad]).await);
        assert!(err.contains("invalid prefix"), "{bad:?}: {err}");
    }
}

per_backend!(
    migrate_succeeds_and_is_idempotent,
    list_escapes_control_characters_of_rows_inserted_by_sql,
    create_then_list_shows_the_sequence,
    list_pages_through_every_sequence_or_those_with_a_prefix,
    create_of_an_existing_name_fails_readably,
    create_rejects_invalid_names_and_values,
    set_step_changes_the_step_and_rejects_unknown_names,
    bump_of_named_sequences_raises_exactly_those_by_n,
    bump_all_raises_every_row,
    bump_dry_run_prints_the_plan_and_changes_nothing,
    bump_with_a_missing_name_changes_nothing_and_names_it,
    bump_past_i64_max_is_refused_and_changes_nothing,
    bump_refuses_a_by_that_is_not_positive_at_argument_parsing,
    after_a_bump_the_next_reservation_starts_above_old_max_plus_n,
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
    for sub in ["create", "list", "set-step", "bump"] {
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
async fn serve_help_documents_metrics_top_with_its_variable_and_default() {
    let out = ok(&seqd(&["serve", "--help"]).await);
    let start = out
        .find("--metrics-top <N>")
        .unwrap_or_else(|| panic!("--metrics-top missing from:\n{out}"));
    let entry = &out[start..];
    // Up to the next flag.
    let flag = &entry[..entry.find("\n      -").unwrap_or(entry.len())];
    for part in ["[env: SEQD_METRICS_TOP=]", "[default: 100]", "0 for none"] {
        assert!(flag.contains(part), "{part:?} missing from:\n{flag}");
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

#[tokio::test]
async fn serve_refuses_a_time_unit_its_lease_cannot_serve_before_touching_the_database() {
    // The database cannot be opened: the settings are refused first.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/missing/seqd.db", dir.path().display());
    let err = fails(
        &seqd(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &url,
            "--snowflake-time-unit",
            "1m",
            "--snowflake-lease",
            "30s",
        ])
        .await,
    );
    for part in [
        "--snowflake-time-unit 1m",
        "--snowflake-lease 30s",
        r#"--snowflake-lease "2m 59s 994ms" or longer"#,
    ] {
        assert!(err.contains(part), "{part:?} missing from: {err}");
    }
}
