//! TLS to the database (docs/operations.md, "TLS to the database"), against
//! real servers: the machine's PostgreSQL with its own (snake-oil)
//! certificate, and PostgreSQL clusters and a MariaDB server the tests start
//! with certificates of their own (tests/support/tls_peers). Each URL parameter is
//! shown to take effect: `sslmode` (all five modes), `sslrootcert`,
//! `sslcert`, `sslkey`; `ssl-mode`, `ssl-ca`, `ssl-cert`, `ssl-key`. Then
//! through the binary: `seqd serve` on a TLS database, a stripe over TLS,
//! the imports' `--from`.

use crate::support::common;
use crate::support::proxy;
use crate::support::server;
use crate::support::tls_peers;

use std::time::Duration;

use common::{Backend, TestDb};
use seqd::store::mysql::MySqlStore;
use seqd::store::postgres::PostgresStore;
use seqd::store::StoreError;
use serde_json::json;
use server::Process;
use tls_peers::{mariadb, pki, postgres, PgCluster, ServerCert};

/// A password put in URLs whose connection fails: it must never be printed.
const PASSWORD: &str = "Pw-Secret-42";

/// The one value `sql` selects in a session through seqd's PostgreSQL
/// store to `url`, or why it could not connect.
async fn pg_value<T>(url: &str, sql: &str) -> Result<T, StoreError>
where
    T: for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres> + Send + Unpin,
{
    let store = PostgresStore::connect(url).await?;
    let value = sqlx::query_scalar(sql)
        .fetch_one(store.pool())
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    store.pool().close().await;
    Ok(value)
}

/// Whether a session through seqd's PostgreSQL store to `url` is encrypted
/// (`pg_stat_ssl`), or why it could not connect.
async fn pg_encrypted(url: &str) -> Result<bool, StoreError> {
    pg_value(
        url,
        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
    )
    .await
}

/// The user of a session through seqd's PostgreSQL store to `url`.
async fn pg_user(url: &str) -> Result<String, StoreError> {
    pg_value(url, "SELECT current_user::text").await
}

/// The TLS cipher of a session through seqd's MySQL store to `url` (empty
/// when the session is not encrypted), or why it could not connect.
async fn mysql_cipher(url: &str) -> Result<String, StoreError> {
    let store = MySqlStore::connect(url).await?;
    let (cipher,): (String,) = sqlx::query_as(
        "SELECT CAST(VARIABLE_VALUE AS CHAR) FROM information_schema.SESSION_STATUS \
         WHERE VARIABLE_NAME = 'SSL_CIPHER'",
    )
    .fetch_one(store.pool())
    .await
    .expect("reading Ssl_cipher");
    store.pool().close().await;
    Ok(cipher)
}

/// The message of a configuration error (what a refused certificate is).
#[track_caller]
fn config_error<T: std::fmt::Debug>(result: Result<T, StoreError>) -> String {
    match result {
        Err(StoreError::Config(m)) => m,
        other => panic!("expected a configuration error, got {other:?}"),
    }
}

/// The message of a connection the server refused.
#[track_caller]
fn refused<T: std::fmt::Debug>(result: Result<T, StoreError>) -> String {
    match result {
        Err(StoreError::Unavailable(m)) => m,
        other => panic!("expected the server to refuse, got {other:?}"),
    }
}

/// `sslmode=verify-full&sslrootcert=<the tests' CA>`.
fn verify_full() -> String {
    format!("sslmode=verify-full&sslrootcert={}", pki().ca.display())
}

/// The tests' cluster presenting `kind` and a fresh test database of
/// `backend`, when both can be had.
async fn postgres_and(kind: ServerCert, backend: Backend) -> Option<(&'static PgCluster, TestDb)> {
    let pg = postgres(kind)?;
    Some((pg, common::test_db(backend).await?))
}

/// The query parameters of a client certificate.
fn client_cert(files: &tls_peers::CertFiles, cert: &str, key: &str) -> String {
    format!(
        "{cert}={}&{key}={}",
        files.cert.display(),
        files.key.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_machines_postgresql_encrypts_under_require_and_prefer_and_not_under_disable() {
    let Some(db) = common::test_db(Backend::Postgres).await else {
        return;
    };
    for (mode, encrypted) in [("require", true), ("prefer", true), ("disable", false)] {
        let url = format!("{}&sslmode={mode}", db.url);
        assert_eq!(
            pg_encrypted(&url).await.unwrap(),
            encrypted,
            "sslmode={mode}"
        );
    }
    // No sslmode is libpq's `prefer`: encrypted where the server offers TLS.
    assert!(pg_encrypted(&db.url).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_with_the_tests_ca_refuses_the_machines_snake_oil_certificate() {
    let Some(db) = common::test_db(Backend::Postgres).await else {
        return;
    };
    let url = format!("{}&{}", db.url, verify_full());
    let m = config_error(pg_encrypted(&url).await);
    // The CA file is added to the system's store, and Debian links its
    // snake-oil certificate into /etc/ssl/certs: there it is refused for
    // its name (localhost, not 127.0.0.1), elsewhere for its issuer.
    assert!(
        m.contains("unknown issuer") || m.contains("name mismatch"),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_with_the_tests_ca_connects_encrypted_by_address_and_by_name() {
    let Some(pg) = postgres(ServerCert::Good) else {
        return;
    };
    for host in ["127.0.0.1", "localhost"] {
        let url = pg.url("postgres", host, "postgres", &verify_full());
        assert!(pg_encrypted(&url).await.unwrap(), "{url}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_taking_tls_only_refuses_sslmode_disable() {
    let Some(pg) = postgres(ServerCert::Good) else {
        return;
    };
    let url = pg.url("postgres", "127.0.0.1", "postgres", "sslmode=disable");
    let m = refused(pg_encrypted(&url).await);
    assert!(m.contains("no encryption"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslcert_and_sslkey_log_in_a_user_by_its_client_certificate() {
    let Some(pg) = postgres(ServerCert::Good) else {
        return;
    };
    let pki = pki();
    let with = |cert: &str| pg.url("certuser", "127.0.0.1", "postgres", cert);
    let ours = with(&format!(
        "{}&{}",
        verify_full(),
        client_cert(&pki.client, "sslcert", "sslkey")
    ));
    assert_eq!(pg_user(&ours).await.unwrap(), "certuser");
    let none = refused(pg_user(&with(&verify_full())).await);
    assert!(none.contains("certificate"), "{none}");
    let foreign = with(&format!(
        "{}&{}",
        verify_full(),
        client_cert(&pki.client_other_ca, "sslcert", "sslkey")
    ));
    assert!(
        pg_user(&foreign).await.is_err(),
        "a client certificate of another CA"
    );
}

/// verify-ca checks the host name as well with the driver of this release
/// (sqlx 0.8.6 over rustls 0.23.24 and later: its verifier that skips the
/// name misses rustls's newer name-mismatch error, launchbadge/sqlx#3793):
/// a certificate for another host is refused by both, and taken by
/// `require` only. docs/operations.md says so; this test notices the fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_ca_and_verify_full_both_refuse_a_certificate_for_another_host() {
    let Some(pg) = postgres(ServerCert::OtherHost) else {
        return;
    };
    let ca = pki().ca.display().to_string();
    let url = |params: &str| pg.url("postgres", "127.0.0.1", "postgres", params);
    for mode in ["verify-ca", "verify-full"] {
        let m = config_error(pg_encrypted(&url(&format!("sslmode={mode}&sslrootcert={ca}"))).await);
        assert!(m.contains("name mismatch"), "{mode}: {m}");
        assert!(m.contains("db.elsewhere.example"), "{mode}: {m}");
    }
    assert!(pg_encrypted(&url("sslmode=require")).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_server_certificate_is_refused_unless_nothing_is_checked() {
    let Some(pg) = postgres(ServerCert::Expired) else {
        return;
    };
    let ca = pki().ca.display().to_string();
    for mode in ["verify-ca", "verify-full"] {
        let url = pg.url(
            "postgres",
            "127.0.0.1",
            "postgres",
            &format!("sslmode={mode}&sslrootcert={ca}"),
        );
        let m = config_error(pg_encrypted(&url).await);
        assert!(m.contains("expired"), "{mode}: {m}");
    }
    // `require` encrypts without checking the certificate.
    let url = pg.url("postgres", "127.0.0.1", "postgres", "sslmode=require");
    assert!(pg_encrypted(&url).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_with_sslrootcert_checks_the_ca_as_libpq_does() {
    let Some(pg) = postgres(ServerCert::SelfSigned) else {
        return;
    };
    let url = |params: &str| pg.url("postgres", "127.0.0.1", "postgres", params);
    assert!(pg_encrypted(&url("sslmode=require")).await.unwrap());
    let ca = pki().ca.display().to_string();
    for mode in ["require", "verify-ca", "verify-full"] {
        let m = config_error(pg_encrypted(&url(&format!("sslmode={mode}&sslrootcert={ca}"))).await);
        assert!(m.contains("unknown issuer"), "{mode}: {m}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslrootcert_system_checks_against_the_systems_ca_store_with_verify_full() {
    let Some(pg) = postgres(ServerCert::Good) else {
        return;
    };
    let url = |params: &str| pg.url("postgres", "127.0.0.1", "postgres", params);
    // The tests' CA is not in the system's store.
    for params in [
        "sslrootcert=system",
        "sslrootcert=system&sslmode=verify-full",
    ] {
        let m = config_error(pg_encrypted(&url(params)).await);
        assert!(m.contains("unknown issuer"), "{params}: {m}");
    }
    let m = config_error(pg_encrypted(&url("sslrootcert=system&sslmode=require")).await);
    assert!(m.contains("sslmode=verify-full"), "{m}");
}

/// The CA file is read again for each new connection: a pool opened with it
/// refuses new connections once the file holds another CA, and takes them
/// again once it is put back, without being opened again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_files_are_read_again_for_every_new_connection() {
    let Some(pg) = postgres(ServerCert::Good) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::copy(&pki().ca, &ca).unwrap();
    let params = format!("sslmode=verify-full&sslrootcert={}", ca.display());
    let store = PostgresStore::connect(&pg.url("postgres", "127.0.0.1", "postgres", &params))
        .await
        .unwrap();
    let held = store.pool().acquire().await.unwrap();
    std::fs::copy(&pki().other_ca, &ca).unwrap();
    let refused = store
        .pool()
        .acquire()
        .await
        .expect_err("a CA that did not sign it");
    assert!(refused.to_string().contains("UnknownIssuer"), "{refused}");
    std::fs::copy(&pki().ca, &ca).unwrap();
    store
        .pool()
        .acquire()
        .await
        .expect("the CA back in the file");
    drop(held);
    store.pool().close().await;
}

#[tokio::test]
async fn a_certificate_file_that_cannot_be_read_is_named_before_connecting() {
    // Nothing listens on port 9: the files are checked before any connection.
    for (url, named) in [
        (
            "postgres://u@127.0.0.1:9/db?sslmode=verify-full&sslrootcert=/no/ca.pem",
            "sslrootcert=/no/ca.pem",
        ),
        (
            "postgres://u@127.0.0.1:9/db?sslcert=/no/c.pem&sslkey=/no/c.key",
            "sslcert=/no/c.pem",
        ),
    ] {
        let m = config_error(PostgresStore::connect(url).await);
        assert!(m.contains(named), "{m}");
    }
    let url = "mysql://u@127.0.0.1:9/db?ssl-mode=VERIFY_CA&ssl-ca=/no/ca.pem";
    let m = config_error(MySqlStore::connect(url).await);
    assert!(m.contains("ssl-ca=/no/ca.pem"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_encrypts_under_required_and_refuses_disabled() {
    let Some(my) = mariadb() else {
        return;
    };
    let url = |params: &str| my.url("root", "127.0.0.1", "mysql", params);
    for params in ["ssl-mode=REQUIRED", "ssl-mode=PREFERRED", ""] {
        let cipher = mysql_cipher(&url(params)).await.unwrap();
        assert!(!cipher.is_empty(), "{params:?}: not encrypted");
    }
    let m = refused(mysql_cipher(&url("ssl-mode=DISABLED")).await);
    assert!(m.contains("denied") || m.contains("insecure"), "{m}");
}

/// VERIFY_CA checks the host name too, as verify-ca does on PostgreSQL
/// (see [`verify_ca_and_verify_full_both_refuse_a_certificate_for_another_host`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_verify_ca_and_verify_identity_check_the_ca_and_the_host() {
    let Some(my) = mariadb() else {
        return;
    };
    let pki = pki();
    let url = |host: &str, mode: &str, ca: &std::path::Path| {
        my.url(
            "root",
            host,
            "mysql",
            &format!("ssl-mode={mode}&ssl-ca={}", ca.display()),
        )
    };
    for mode in ["VERIFY_CA", "VERIFY_IDENTITY"] {
        // The server's certificate is signed by the tests' CA and names
        // 127.0.0.1, not localhost.
        let cipher = mysql_cipher(&url("127.0.0.1", mode, &pki.ca))
            .await
            .unwrap();
        assert!(!cipher.is_empty(), "{mode}");
        let m = config_error(mysql_cipher(&url("localhost", mode, &pki.ca)).await);
        assert!(m.contains("name mismatch"), "{mode}: {m}");
        let m = config_error(mysql_cipher(&url("127.0.0.1", mode, &pki.other_ca)).await);
        assert!(m.contains("unknown issuer"), "{mode}: {m}");
    }
    // REQUIRED checks nothing, even with a CA named (as the mysql client).
    let params = format!("ssl-mode=REQUIRED&ssl-ca={}", pki.other_ca.display());
    let cipher = mysql_cipher(&my.url("root", "localhost", "mysql", &params)).await;
    assert!(!cipher.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_ssl_cert_and_ssl_key_log_in_a_user_by_its_client_certificate() {
    let Some(my) = mariadb() else {
        return;
    };
    let pki = pki();
    let ca = format!("ssl-mode=VERIFY_IDENTITY&ssl-ca={}", pki.ca.display());
    let with_cert = format!("{ca}&{}", client_cert(&pki.client, "ssl-cert", "ssl-key"));
    let cipher = mysql_cipher(&my.url("certuser", "127.0.0.1", "mysql", &with_cert)).await;
    assert!(!cipher.unwrap().is_empty());
    let m = refused(mysql_cipher(&my.url("certuser", "127.0.0.1", "mysql", &ca)).await);
    assert!(m.contains("denied"), "{m}");
}

/// A client for the instances the tests start.
fn http() -> reqwest::Client {
    server::client(Duration::from_secs(20))
}

/// Runs the `seqd` binary with `args` (bounded: a start that does not stop
/// fails the test), asserts that it fails, and returns its exit status and
/// standard error.
async fn seqd_fails(args: &[&str]) -> (Option<i32>, String) {
    seqd_fails_with_env(args, &[]).await
}

/// [`seqd_fails`] with the environment variables `env` set.
async fn seqd_fails_with_env(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let run = common::seqd_binary_with_env(args, env);
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .unwrap_or_else(|_| panic!("seqd {args:?} did not stop within 60 s"));
    assert!(!out.status.success(), "seqd {args:?} succeeded");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `seqd serve` with `args` after `serve`, and asserts that the start
/// stops with status 1, saying `says`, never showing the password.
async fn start_stops(args: &[&str], says: &str) {
    let all: Vec<&str> = ["serve", "--listen", "127.0.0.1:0"]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    let (code, stderr) = seqd_fails(&all).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(says), "{stderr}");
    assert!(!stderr.contains(PASSWORD), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_draws_ids_over_a_verified_tls_connection() {
    let Some(pg) = postgres(ServerCert::Good) else {
        return;
    };
    pg.create_database("serve");
    let url = pg.url("postgres", "127.0.0.1", "serve", &verify_full());
    let seqd = Process::spawn(&url, &[]).await;
    let http = http();
    server::create_with(&http, &seqd.base, &json!({"name": "s", "step": 10})).await;
    assert_eq!(server::next_at(&http, &seqd.base, "s").await, 1);
    // Every session of the instance's is encrypted.
    let store = PostgresStore::connect(&url).await.unwrap();
    let (all, sessions): (Option<bool>, i64) = sqlx::query_as(
        "SELECT bool_and(s.ssl), count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
         WHERE a.datname = 'serve' AND a.pid <> pg_backend_pid()",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert!(
        sessions >= 1 && all == Some(true),
        "{sessions} sessions, all encrypted: {all:?}"
    );
    seqd.kill().await;
}

/// The system's CA store is the one OpenSSL reads, or what `SSL_CERT_FILE`
/// and `SSL_CERT_DIR` name: set to the tests' CA and to nothing, only that
/// CA is trusted (the machine's snake-oil certificate, which Debian links
/// into /etc/ssl/certs, no longer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_sslrootcert_the_system_store_is_used_and_ssl_cert_file_and_dir_make_it() {
    let Some((pg, machine)) = postgres_and(ServerCert::Good, Backend::Postgres).await else {
        return;
    };
    let ca = pki().ca.display().to_string();
    let only_the_ca = [("SSL_CERT_FILE", ca.as_str()), ("SSL_CERT_DIR", "")];
    pg.create_database("system_store");
    let url = pg.url(
        "postgres",
        "127.0.0.1",
        "system_store",
        "sslmode=verify-full",
    );
    let seqd = Process::spawn_with_env(&url, &[], &only_the_ca).await;
    let http = http();
    server::create_with(&http, &seqd.base, &json!({"name": "s"})).await;
    assert_eq!(server::next_at(&http, &seqd.base, "s").await, 1);
    seqd.kill().await;

    let url = format!("{}&sslmode=verify-full", machine.url);
    let args = ["serve", "--listen", "127.0.0.1:0", "--database-url", &url];
    let (code, stderr) = seqd_fails_with_env(&args, &only_the_ca).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("unknown issuer"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_stops_at_a_refused_certificate_naming_it_and_not_the_password() {
    let Some(pg) = postgres(ServerCert::OtherHost) else {
        return;
    };
    let url = pg.url(
        &format!("postgres:{PASSWORD}"),
        "127.0.0.1",
        "postgres",
        &verify_full(),
    );
    start_stops(&["--database-url", &url], "name mismatch").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stripe_over_tls_serves_and_a_refused_stripe_certificate_stops_the_start() {
    let Some((pg, local)) = postgres_and(ServerCert::Good, Backend::Postgres).await else {
        return;
    };
    pg.create_database("stripes");
    let userinfo = format!("postgres:{PASSWORD}");
    let tls = pg.url(&userinfo, "127.0.0.1", "stripes", &verify_full());
    let seqd = Process::spawn(&format!("{} {tls}", local.url), &[]).await;
    let http = http();
    server::create_with(&http, &seqd.base, &json!({"name": "s", "step": 10})).await;
    server::next_at(&http, &seqd.base, "s").await;
    let ready = server::fetch_json(http.get(format!("{}/readyz", seqd.base))).await;
    assert_eq!(ready["checks"]["stripes"][1]["up"], true, "{ready}");
    seqd.kill().await;

    // The same set, stripe 2 checked against a CA that did not sign its
    // certificate: not an outage to serve around, a start that stops.
    let params = format!(
        "sslmode=verify-full&sslrootcert={}",
        pki().other_ca.display()
    );
    let wrong = pg.url(&userinfo, "127.0.0.1", "stripes", &params);
    let args = ["--database-url", &local.url, "--database-url", &wrong];
    start_stops(&args, "unknown issuer").await;
}

/// A stripe that did not answer at start, then answers with a certificate
/// the checks refuse, stays out of use, and the log names the problem at
/// each try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_stripe_whose_certificate_is_refused_stays_out_and_is_logged() {
    let Some((pg, local)) = postgres_and(ServerCert::Good, Backend::Postgres).await else {
        return;
    };
    pg.create_database("late_stripe");
    let proxy = proxy::Proxy::start(([127, 0, 0, 1], pg.port).into()).await;
    let through = |ca: &std::path::Path| {
        let params = format!("sslmode=verify-full&sslrootcert={}", ca.display());
        let url = pg.url("postgres", "127.0.0.1", "late_stripe", &params);
        format!("{} {}", local.url, proxy.url_for(&url))
    };
    Process::spawn(&through(&pki().ca), &[]).await.kill().await;

    proxy.cut();
    let seqd = Process::spawn(&through(&pki().other_ca), &[]).await;
    proxy.heal();
    let message = "the stripe answers but cannot be opened; it stays out of use, trying again";
    let line = seqd.log_line(message).await.expect("the refusal is logged");
    let error = line["error"].as_str().unwrap_or_default();
    assert!(error.contains("unknown issuer"), "{line}");
    let ready = server::fetch_json(http().get(format!("{}/readyz", seqd.base))).await;
    assert_eq!(ready["checks"]["stripes"][1]["up"], false, "{ready}");
    seqd.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_leaf_reads_leaf_alloc_over_a_verified_tls_connection() {
    let Some((pg, target)) = postgres_and(ServerCert::Good, Backend::Sqlite).await else {
        return;
    };
    pg.create_database("leaf");
    pg.psql(
        "leaf",
        "CREATE TABLE leaf_alloc (biz_tag varchar(128) PRIMARY KEY, max_id bigint NOT NULL, \
         step int NOT NULL, description varchar(256)); \
         INSERT INTO leaf_alloc VALUES ('order', 2001, 1000, 'orders')",
    )
    .unwrap();
    let from = pg.url("postgres", "127.0.0.1", "leaf", &verify_full());
    let out = common::seqd_on(&target, &["import-leaf", "--from", &from, "--dry-run"]).await;
    let stdout = common::ok(&out);
    assert!(stdout.contains("1 to import"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_imports_stop_at_a_refused_certificate_naming_it_and_not_the_password() {
    let (Some(pg), Some(my)) = (postgres(ServerCert::Good), mariadb()) else {
        return;
    };
    let Some(target) = common::test_db(Backend::Sqlite).await else {
        return;
    };
    let other = pki().other_ca.display().to_string();
    let userinfo = |user: &str| format!("{user}:{PASSWORD}");
    let pg_url = pg.url(
        &userinfo("postgres"),
        "127.0.0.1",
        "postgres",
        &format!("sslmode=verify-full&sslrootcert={other}"),
    );
    let my_url = my.url(
        &userinfo("root"),
        "127.0.0.1",
        "mysql",
        &format!("ssl-mode=VERIFY_IDENTITY&ssl-ca={other}"),
    );
    for (command, from) in [
        ("import-leaf", &pg_url),
        ("import-leaf", &my_url),
        ("import-tinyid", &pg_url),
        ("import-tinyid", &my_url),
    ] {
        let args = [
            command,
            "--from",
            from,
            "--dry-run",
            "--database-url",
            &target.url,
        ];
        let (_, stderr) = seqd_fails(&args).await;
        assert!(
            stderr.contains("unknown issuer"),
            "{command} {from}: {stderr}"
        );
        assert!(!stderr.contains(PASSWORD), "{stderr}");
    }
}
