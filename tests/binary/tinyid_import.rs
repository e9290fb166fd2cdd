//! `seqd import-tinyid` through the real binary: Tinyid's own tables (its
//! `db.sql`) in two Tinyid databases (PostgreSQL schemas or MariaDB
//! databases), each with its own delta and remainder, imported into seqd.
//! What is proved: each sequence continues above every ID either database
//! reserved; a Tinyid token keeps working, as a client token, on its biz
//! types only through Tinyid's own routes; a dry run writes nothing; an
//! existing sequence behind Tinyid refuses the whole import (exit 1) until
//! `--raise`; an import run twice changes nothing.

use crate::support::common;
use crate::support::server;

use common::{Backend, TestDb};
use reqwest::StatusCode;
use seqd::config::{Secret, Settings};
use seqd::service::ClientAuth;
use server::TestServer;

/// Creates Tinyid's two tables in `db` (Tinyid's db.sql, for the backend, as
/// docs/import-tinyid.md gives it) and fills them: `rows` of
/// `(biz_type, max_id, step, delta, remainder)` and `tokens` of `(token, biz_type)`.
async fn tinyid_database(
    db: &TestDb,
    rows: &[(&str, i64, i64, i64, i64)],
    tokens: &[(&str, &str)],
) {
    let dialect = match db.backend {
        Backend::Mysql => "mysql",
        _ => "postgres",
    };
    for table in ["tiny_id_info", "tiny_id_token"] {
        let ddl = common::doc_sql("import-tinyid.md", &format!("{table}: {dialect}"));
        common::execute(db, &ddl).await;
    }
    for (biz, max, step, delta, remainder) in rows {
        common::execute(
            db,
            &format!(
                "INSERT INTO tiny_id_info (biz_type, begin_id, max_id, step, delta, remainder) \
                 VALUES ('{biz}', 1, {max}, {step}, {delta}, {remainder})"
            ),
        )
        .await;
    }
    for (token, biz) in tokens {
        common::execute(
            db,
            &format!("INSERT INTO tiny_id_token (token, biz_type, remark) VALUES ('{token}', '{biz}', 'r')"),
        )
        .await;
    }
}

const TOKEN: &str = "0f673adf80504e2eaa552f5d791b644c";

/// Runs `seqd import-tinyid --from A --from B <extra>` into `into`.
async fn import(into: &TestDb, from: &[&TestDb], extra: &[&str]) -> std::process::Output {
    let mut args = vec!["import-tinyid"];
    for db in from {
        args.extend(["--from", db.url.as_str()]);
    }
    args.extend(extra);
    common::seqd_on(into, &args).await
}

async fn max_id(db: &TestDb, name: &str) -> Option<i64> {
    let store = common::store(db).await;
    store
        .get(&common::name(name))
        .await
        .unwrap()
        .map(|r| r.max_id)
}

/// Two Tinyid databases of one biz type (delta 2, remainders 0 and 1, as
/// Tinyid's multi-database mode runs) and one each of two others; a token
/// for `test` and `test_odd` in both: imported, every sequence above every
/// ID either database reserved, the token working on its types only.
async fn sequences_continue_above_every_database_and_tokens_keep_working(a: TestDb) {
    let Some([b]) = common::test_dbs([a.backend]).await else {
        return;
    };
    tinyid_database(
        &a,
        &[("test", 4000, 1000, 2, 0), ("test_odd", 77, 100, 1, 0)],
        &[(TOKEN, "test"), (TOKEN, "test_odd")],
    )
    .await;
    tinyid_database(
        &b,
        &[
            ("test", 5001, 1000, 2, 1),
            ("other", 0, 50, 1, 0),
            ("test_x", 10, 10, 1, 0),
        ],
        &[(TOKEN, "test"), ("second-token-text", "other")],
    )
    .await;

    // A dry run writes nothing.
    let dry = common::ok(&import(&a, &[&a, &b], &["--dry-run"]).await);
    assert!(dry.contains("dry run"), "{dry}");
    assert_eq!(
        max_id(&a, "test").await,
        None,
        "the dry run wrote a sequence"
    );

    let out = common::ok(&import(&a, &[&a, &b], &[]).await);
    assert!(out.contains("tokens: 2 imported"), "{out}");
    // test_x begins with test, which the token covers: seqd's scopes are
    // prefixes, so the token reaches it too, and the report says so.
    assert!(out.contains("also covers test_x"), "{out}");
    assert_eq!(max_id(&a, "test").await, Some(5001), "above both databases");
    assert_eq!(max_id(&a, "test_odd").await, Some(77));
    assert_eq!(max_id(&a, "other").await, Some(0));

    // Run twice: nothing changes, nothing fails.
    let again = common::ok(&import(&a, &[&a, &b], &[]).await);
    assert!(
        again.contains("tokens: 0 imported, 2 already in seqd"),
        "{again}"
    );
    assert_eq!(max_id(&a, "test").await, Some(5001));

    // Tinyid's client, unchanged: its token and its routes.
    let s = TestServer::start(Settings {
        admin_token: Some(Secret::new("admin-for-tinyid-import")),
        client_auth: ClientAuth::On,
        ..Settings::for_database(a.url.clone())
    })
    .await;
    let get = |q: String| {
        let s = &s;
        async move {
            let resp = s
                .http
                .get(s.url(&format!("/tinyid/id/nextIdSimple?{q}")))
                .send()
                .await
                .unwrap();
            (resp.status(), resp.text().await.unwrap())
        }
    };
    let (status, first) = get(format!("bizType=test&token={TOKEN}")).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first, "5002", "the first ID above every Tinyid database");
    let (status, odd) = get(format!("bizType=test_odd&token={TOKEN}")).await;
    assert_eq!((status, odd.as_str()), (StatusCode::OK, "78"));
    let (status, _) = get(format!("bizType=other&token={TOKEN}")).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "not one of the token's biz types"
    );
    let (status, other) = get("bizType=other&token=second-token-text".into()).await;
    assert_eq!((status, other.as_str()), (StatusCode::OK, "1"));
    s.stop().await;
}

/// An existing seqd sequence behind Tinyid refuses the whole import: exit
/// 1, no sequence and no token written; `--raise` lifts it.
async fn a_sequence_behind_refuses_until_raised(a: TestDb) {
    tinyid_database(
        &a,
        &[("late", 900, 100, 1, 0), ("fresh", 10, 10, 1, 0)],
        &[(TOKEN, "late")],
    )
    .await;
    let store = common::store(&a).await;
    common::create_seq(&store, "late", 1, 100).await;

    let refused = import(&a, &[&a], &[]).await;
    assert_eq!(
        refused.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&refused.stdout)
    );
    let stdout = String::from_utf8_lossy(&refused.stdout);
    assert!(stdout.contains("BEHIND Tinyid"), "{stdout}");
    assert_eq!(
        max_id(&a, "fresh").await,
        None,
        "nothing written when refused"
    );
    assert!(
        store.token_rows().await.unwrap().is_empty(),
        "no token written when refused"
    );

    common::ok(&import(&a, &[&a], &["--raise"]).await);
    assert!(max_id(&a, "late").await.unwrap() >= 900);
    assert_eq!(max_id(&a, "fresh").await, Some(10));
    assert_eq!(store.token_rows().await.unwrap().len(), 1);
}

/// Bad input: a biz type that is not a seqd name is reported and skipped
/// (exit non-zero unless `--skip-invalid`); a database without Tinyid's
/// tables names the table it could not read.
async fn invalid_rows_and_missing_tables(a: TestDb) {
    let Some([empty]) = common::test_dbs([a.backend]).await else {
        return;
    };
    tinyid_database(&a, &[("bad type", 5, 10, 1, 0), ("good", 5, 10, 1, 0)], &[]).await;
    let out = import(&a, &[&a], &[]).await;
    assert_ne!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("invalid") && stdout.contains("bad type"),
        "{stdout}"
    );
    assert_eq!(
        max_id(&a, "good").await,
        Some(5),
        "the valid rows are imported"
    );
    common::ok(&import(&a, &[&a], &["--skip-invalid"]).await);

    let missing = import(&a, &[&empty], &[]).await;
    assert_ne!(missing.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("tiny_id_info"), "{stderr}");
}

network_backends!(
    sequences_continue_above_every_database_and_tokens_keep_working,
    a_sequence_behind_refuses_until_raised,
    invalid_rows_and_missing_tables,
);
