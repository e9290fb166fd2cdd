//! `seqd sequences create --format ...` and `seqd sequences purge-periods`
//! through the binary, on every backend: the dry run deletes nothing; a
//! purge deletes the periods that ended longer ago than `--older-than` and
//! only those, never the current period's (not even with `--older-than 0s`),
//! nor one that ended less than a day ago (the margin for instances whose
//! clock is behind), and never another sequence's rows.

use crate::support::common;

use common::{clear_of_midnight, ok, seqd_on, TestDb};

/// `seqd migrate`, then `seqd sequences create` of each `(name, format)`
/// with a daily reset.
async fn migrate_and_create_daily(db: &TestDb, sequences: &[(&str, &str)]) {
    ok(&seqd_on(db, &["migrate"]).await);
    for (name, format) in sequences {
        let args = [
            "sequences",
            "create",
            name,
            "--format",
            format,
            "--reset",
            "day",
        ];
        ok(&seqd_on(db, &args).await);
    }
}

async fn keys(db: &TestDb, name: &str) -> Vec<String> {
    let store = common::connect(db).await;
    let periods = store.list_periods(&common::name(name)).await.unwrap();
    periods.into_iter().map(|p| p.key).collect()
}

fn key_of(t: jiff::Timestamp) -> String {
    let d = jiff::tz::TimeZone::UTC.to_datetime(t).date();
    format!("{:04}{:02}{:02}", d.year(), d.month(), d.day())
}

async fn purge_removes_old_periods_only(db: TestDb) {
    migrate_and_create_daily(
        &db,
        &[
            ("inv", "INV{yyyy}{MM}{dd}{seq:05}"),
            ("inv.x", "X{yyyy}{MM}{dd}{seq}"),
        ],
    )
    .await;
    let now = jiff::Timestamp::now();
    let today = key_of(now);
    let recent = key_of(now - jiff::SignedDuration::from_hours(24 * 30));
    for row in [
        "inv@20240101",
        "inv@20240102",
        &format!("inv@{recent}"),
        &format!("inv@{today}"),
        "inv.x@20200101",
    ] {
        common::execute(
            &db,
            &format!("INSERT INTO sequences (name, max_id, step) VALUES ('{row}', 5, 10)"),
        )
        .await;
    }
    let all = vec![
        "20240101".to_string(),
        "20240102".into(),
        recent.clone(),
        today.clone(),
    ];
    let listed = ok(&seqd_on(
        &db,
        &[
            "sequences",
            "purge-periods",
            "inv",
            "--older-than",
            "400d",
            "--dry-run",
        ],
    )
    .await);
    assert!(
        listed.contains("20240101") && listed.contains("would delete"),
        "{listed}"
    );
    assert!(listed.contains("dry run: 2 of 4"), "{listed}");
    assert_eq!(keys(&db, "inv").await, all, "a dry run deletes nothing");
    let done = ok(&seqd_on(
        &db,
        &["sequences", "purge-periods", "inv", "--older-than", "400d"],
    )
    .await);
    assert!(done.contains("deleted 2 of 4"), "{done}");
    assert_eq!(keys(&db, "inv").await, vec![recent.clone(), today.clone()]);
    // However small the age, the current period stays.
    let done = ok(&seqd_on(
        &db,
        &["sequences", "purge-periods", "inv", "--older-than", "0s"],
    )
    .await);
    assert!(done.contains("deleted 1 of 2"), "{done}");
    assert_eq!(keys(&db, "inv").await, vec![today]);
    // Another sequence's rows were never touched.
    assert_eq!(keys(&db, "inv.x").await, vec!["20200101".to_string()]);
    // A plain sequence has no periods to purge.
    ok(&seqd_on(&db, &["sequences", "create", "plain"]).await);
    let refused = seqd_on(
        &db,
        &["sequences", "purge-periods", "plain", "--older-than", "1d"],
    )
    .await;
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("does not issue serial numbers"));
    // A bad setting is refused before anything is written.
    let bad = seqd_on(
        &db,
        &[
            "sequences",
            "create",
            "bad",
            "--format",
            "B{seq}",
            "--reset",
            "day",
        ],
    )
    .await;
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("missing"),
        "{bad:?}"
    );
}

/// Yesterday's period ended at most a day ago: an instance whose clock is a
/// little behind still serves it and would create its row again (counting
/// from 1) if a purge deleted it. `--older-than 0s` deletes the periods
/// older than that and keeps yesterday's, saying why, in the dry run and
/// for real.
async fn purge_keeps_a_period_that_just_ended_whatever_older_than_says(db: TestDb) {
    clear_of_midnight().await;
    migrate_and_create_daily(&db, &[("inv", "I{yyyy}{MM}{dd}{seq}")]).await;
    let now = jiff::Timestamp::now();
    let day = jiff::SignedDuration::from_hours(24);
    let (old, yesterday, today) = (key_of(now - day * 3), key_of(now - day), key_of(now));
    for key in [&old, &yesterday, &today] {
        common::execute(
            &db,
            &format!("INSERT INTO sequences (name, max_id, step) VALUES ('inv@{key}', 5, 10)"),
        )
        .await;
    }
    for dry_run in [true, false] {
        let mut args = vec!["sequences", "purge-periods", "inv", "--older-than", "0s"];
        if dry_run {
            args.push("--dry-run");
        }
        let out = ok(&seqd_on(&db, &args).await);
        let line = out
            .lines()
            .find(|l| l.starts_with(yesterday.as_str()))
            .unwrap_or_else(|| panic!("no line for {yesterday}: {out}"));
        assert!(line.contains("keep: ended less than 24h ago"), "{out}");
        assert!(
            out.contains(
                "kept 1 period rows that ended less than 24h ago, whatever --older-than says"
            ),
            "{out}"
        );
        assert!(out.contains(&format!(": {yesterday}")), "{out}");
    }
    assert_eq!(keys(&db, "inv").await, vec![yesterday, today]);

    let help = common::seqd_binary(&["sequences", "purge-periods", "--help"]).await;
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let words = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("less than 24 hours ago is kept"), "{help}");
}

per_backend!(
    purge_removes_old_periods_only,
    purge_keeps_a_period_that_just_ended_whatever_older_than_says,
);
