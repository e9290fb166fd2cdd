//! TLS on the doors through the real binary and real clients, never one
//! written here for the purpose: curl (`--cacert`, a client certificate),
//! `openssl s_client` (TLS 1.2 and 1.3, the certificate served), `redis-cli
//! --tls` and redis-py with `ssl=True`, with certificates the tests make
//! (tests/support/pki): a CA, servers' and clients' certificates, expired, for
//! another host, self-signed and from another CA. Also: SIGHUP, and a
//! Kubernetes Secret's mount renewed as the kubelet does it, swapping the
//! certificate under load (no request of an open connection fails, new
//! handshakes get the new certificate, a file that does not load keeps the
//! old one and is logged once), TLS files refused at start, clients of the wrong
//! kind (plain to TLS, TLS to plain), and the warning when client tokens
//! would cross a network in clear.
//!
//! curl, openssl, redis-cli and Python's `redis` are skipped with a line when
//! missing, and required under `SEQD_TEST_REQUIRE_ALL=1` (.ci/run installs
//! them).

use crate::support::common;
use crate::support::pki;
use crate::support::server;

use std::time::Duration;

use common::{Printed, TestDb};
use pki::{Leaf, Pair, Pki};
use server::Process;
use sha2::Digest;

/// How long a wait for the server (a log line, connections' progress) may take.
pub(super) const BOUND: Duration = Duration::from_secs(30);

/// Whether every program the tests here run is on the `PATH` (each missing
/// one skips the test, or fails it under `SEQD_TEST_REQUIRE_ALL=1`).
pub(super) fn tools(programs: &[&str]) -> bool {
    programs.iter().all(|p| common::tool_available(p))
}

/// When `programs` are all here: a fresh SQLite database and a test CA.
pub(super) async fn ready(programs: &[&str]) -> Option<(TestDb, Pki)> {
    tools(programs).then_some(())?;
    Some((sqlite().await, Pki::new("seqd test CA")))
}

/// A fresh SQLite database.
pub(super) async fn sqlite() -> TestDb {
    common::test_db(common::Backend::Sqlite)
        .await
        .expect("an SQLite test database")
}

/// `--tls-cert` and `--tls-key` for `pair`, then `extra`.
pub(super) fn tls_flags<'a>(pair: &'a Pair, extra: &[&'a str]) -> Vec<&'a str> {
    let (cert, key) = pair.paths();
    let mut flags = vec!["--tls-cert", cert, "--tls-key", key];
    flags.extend_from_slice(extra);
    flags
}

/// The binary over TLS with `pair` (and `extra` flags), with a RESP
/// listener and the sequence `order` (created with curl presenting
/// `identity`); its HTTPS base URL and RESP address.
pub(super) async fn tls_process(
    db: &TestDb,
    pki: &Pki,
    pair: &Pair,
    identity: Option<&Pair>,
    extra: &[&str],
) -> (Process, String, String) {
    let mut flags = tls_flags(pair, &["--resp-listen", "127.0.0.1:0"]);
    flags.extend_from_slice(extra);
    let p = Process::spawn(&db.url, &flags).await;
    let base = p.base.replace("http://", "https://");
    let resp = p.resp.clone().expect("a RESP listener");
    let url = format!("{base}/v1/sequences");
    let created = curl(
        &pki.ca,
        identity,
        &[
            "-H",
            "content-type: application/json",
            "-d",
            r#"{"name":"order"}"#,
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &url,
        ],
    )
    .await;
    assert_eq!(created.stdout, "201", "create over HTTPS: {created:?}");
    (p, base, resp)
}

/// `curl -sS` trusting `ca`, presenting `identity` when given, with `args`.
pub(super) async fn curl(ca: &std::path::Path, identity: Option<&Pair>, args: &[&str]) -> Printed {
    let mut all = vec!["-sS", "--max-time", "30", "--cacert", ca.to_str().unwrap()];
    all.extend(identity_flags(identity));
    all.extend_from_slice(args);
    common::run("curl", &all, b"").await
}

/// `--cert CERT --key KEY` of `identity` (curl and redis-cli spell them
/// alike); none without one.
pub(super) fn identity_flags(identity: Option<&Pair>) -> Vec<&str> {
    identity.map_or_else(Vec::new, |pair| {
        let (cert, key) = pair.paths();
        vec!["--cert", cert, "--key", key]
    })
}

/// `GET /v1/sequences/order/next` with curl as text: the ID.
pub(super) async fn curl_next(base: &str, ca: &std::path::Path, identity: Option<&Pair>) -> i64 {
    let url = format!("{base}/v1/sequences/order/next");
    let out = curl(ca, identity, &["-H", "accept: text/plain", &url]).await;
    out.int(&format!("curl {url}"))
}

/// Asserts `out` is a failed client run whose output says `says`.
#[track_caller]
pub(super) fn assert_refused(what: &str, out: &Printed, says: &str) {
    assert!(
        !out.status.success() && out.text().contains(says),
        "{what}: expected a failure saying {says:?}: {out:?}"
    );
}

/// `redis-cli --tls` trusting `ca`, presenting `identity` when given: `args`
/// sent to `addr`.
pub(super) async fn redis_cli(
    addr: &str,
    ca: &std::path::Path,
    identity: Option<&Pair>,
    args: &[&str],
) -> Printed {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let mut all = vec![
        "--tls",
        "--cacert",
        ca.to_str().unwrap(),
        "-h",
        host,
        "-p",
        port,
    ];
    all.extend(identity_flags(identity));
    all.extend_from_slice(args);
    common::run("redis-cli", &all, b"").await
}

/// redis-py with `ssl=True`: `INCR order` at `addr`, trusting `ca`,
/// presenting `identity` when given; what it printed (the ID, or
/// `error: CLASS MESSAGE`).
pub(super) async fn redis_py(addr: &str, ca: &std::path::Path, identity: Option<&Pair>) -> String {
    const PYTHON: &str = r#"
import sys
import redis

host, port, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cert, key = (sys.argv[4], sys.argv[5]) if len(sys.argv) > 5 else (None, None)
r = redis.Redis(host=host, port=port, ssl=True, ssl_ca_certs=ca,
                ssl_certfile=cert, ssl_keyfile=key, socket_timeout=30)
try:
    print(r.incr("order"))
except (redis.RedisError, OSError) as e:
    print("error:", type(e).__name__, e)
"#;
    let (host, port) = addr.rsplit_once(':').unwrap();
    let mut args = vec!["-", host, port, ca.to_str().unwrap()];
    if let Some(pair) = identity {
        let (cert, key) = pair.paths();
        args.extend([cert, key]);
    }
    let out = common::run("python3", &args, PYTHON.as_bytes()).await;
    assert!(out.status.success(), "python: {out:?}");
    out.stdout.trim().to_owned()
}

/// What `openssl s_client` saw at `addr` (`tls1_2` or `tls1_3`): its
/// output, and the serial and SHA-256 fingerprint of the certificate served
/// as `openssl x509` prints them (`serial=...`, `sha256 Fingerprint=...`).
pub(super) async fn s_client(addr: &str, ca: &std::path::Path, version: &str) -> (String, String) {
    let out = common::run(
        "openssl",
        &[
            "s_client",
            "-connect",
            addr,
            "-servername",
            "localhost",
            "-CAfile",
            ca.to_str().unwrap(),
            &format!("-{version}"),
        ],
        b"",
    )
    .await;
    let cert = common::run(
        "openssl",
        &["x509", "-noout", "-serial", "-fingerprint", "-sha256"],
        out.stdout.as_bytes(),
    )
    .await;
    assert!(
        cert.status.success(),
        "s_client {addr}: no certificate: {out:?}"
    );
    (out.stdout, cert.stdout)
}

/// How `openssl x509 -serial -fingerprint -sha256` prints `pair`'s
/// certificate, with serial `serial`.
pub(super) fn printed(pair: &Pair, serial: &str) -> String {
    let digest = sha2::Sha256::digest(&pair.der);
    let hex: Vec<String> = digest.iter().map(|b| format!("{b:02X}")).collect();
    format!("serial={serial}\nsha256 Fingerprint={}\n", hex.join(":"))
}

/// curl, `openssl s_client`, `redis-cli --tls` and redis-py draw IDs over
/// TLS from both doors, which serve the certificate given (TLS 1.2 and 1.3
/// both negotiated); a curl that does not trust the CA is refused; plain
/// clients get nothing from the TLS doors, and the server keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_openssl_redis_cli_and_redis_py_speak_tls_to_both_doors() {
    let Some((db, pki)) = ready(&["curl", "openssl", "redis-cli"]).await else {
        return;
    };
    if !common::python_redis_available() {
        return;
    }
    let pair = pki.server("server", 0x5eed);
    let (p, base, resp) = tls_process(&db, &pki, &pair, None, &[]).await;
    let http: &str = base.strip_prefix("https://").unwrap();

    assert_eq!(curl_next(&base, &pki.ca, None).await, 1);
    for (addr, door) in [(http, "HTTP"), (resp.as_str(), "RESP")] {
        for (version, name) in [("tls1_2", "TLSv1.2"), ("tls1_3", "TLSv1.3")] {
            let (out, cert) = s_client(addr, &pki.ca, version).await;
            assert!(
                out.contains(&format!("New, {name}, Cipher is")),
                "{door} {version}: {out}"
            );
            assert!(out.contains("Verify return code: 0 (ok)"), "{door}: {out}");
            assert_eq!(cert, printed(&pair, "5EED"), "{door} {version}");
        }
    }
    let cli = redis_cli(&resp, &pki.ca, None, &["INCR", "order"]).await;
    assert_eq!(cli.stdout.trim(), "2", "{cli:?}");
    assert_eq!(redis_py(&resp, &pki.ca, None).await, "3");

    let untrusted = common::run("curl", &["-sS", &format!("{base}/healthz")], b"").await;
    assert_eq!(untrusted.status.code(), Some(60), "{untrusted:?}");
    let plain_http = common::run(
        "curl",
        &[
            "-sS",
            "--max-time",
            "30",
            &format!("http://{http}/v1/sequences/order/next"),
        ],
        b"",
    )
    .await;
    assert!(
        !plain_http.status.success(),
        "plain HTTP to the TLS port: {plain_http:?}"
    );
    let (host, port) = resp.rsplit_once(':').unwrap();
    let plain_resp =
        common::run("redis-cli", &["-h", host, "-p", port, "INCR", "order"], b"").await;
    assert!(
        plain_resp.stdout.trim().parse::<i64>().is_err(),
        "plain RESP to the TLS port: {plain_resp:?}"
    );
    // Nothing was issued to the plain clients.
    assert_eq!(curl_next(&base, &pki.ca, None).await, 4);
    drop(p);
}

/// TLS clients against plain doors fail their handshake (curl: exit 35),
/// and the doors keep serving plain clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_clients_fail_against_plain_doors() {
    let Some((db, pki)) = ready(&["curl", "redis-cli"]).await else {
        return;
    };
    let p = Process::spawn(&db.url, &["--resp-listen", "127.0.0.1:0"]).await;
    let resp = p.resp.clone().unwrap();
    let https = p.base.replace("http://", "https://");
    let out = curl(&pki.ca, None, &[&format!("{https}/healthz")]).await;
    assert_eq!(
        out.status.code(),
        Some(35),
        "curl https:// to a plain port: {out:?}"
    );
    let out = redis_cli(&resp, &pki.ca, None, &["PING"]).await;
    assert!(
        out.stdout.trim() != "PONG",
        "redis-cli --tls to a plain port: {out:?}"
    );
    let (host, port) = resp.rsplit_once(':').unwrap();
    let out = common::run("redis-cli", &["-h", host, "-p", port, "PING"], b"").await;
    assert_eq!(out.stdout.trim(), "PONG", "{out:?}");
    let out = common::run("curl", &["-sS", &format!("{}/healthz", p.base)], b"").await;
    assert!(out.status.success(), "{out:?}");
}

/// Over TLS too, a head refused before any route (101 headers, sent by
/// curl) answers 431 with the JSON error body, and nothing is drawn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_refused_over_tls_answers_the_json_error_body() {
    let Some((db, pki)) = ready(&["curl"]).await else {
        return;
    };
    let pair = pki.server("server", 0x431);
    let (p, base, _) = tls_process(&db, &pki, &pair, None, &[]).await;
    let url = format!("{base}/v1/sequences/order/next");
    let headers: Vec<String> = (0..101).map(|i| format!("x-extra-{i}: 1")).collect();
    let mut args = vec!["-X", "POST", "-w", "\n%{http_code}", url.as_str()];
    for h in &headers {
        args.extend(["-H", h.as_str()]);
    }
    let out = curl(&pki.ca, None, &args).await;
    let (body, status) = out.stdout.rsplit_once('\n').expect("body and status");
    assert_eq!(status, "431", "{out:?}");
    let v: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(v["error"]["code"], "request_head_too_large", "{v}");
    assert_eq!(curl_next(&base, &pki.ca, None).await, 1);
    drop(p);
}

/// Clients that trust the CA refuse a server certificate for another host
/// and a self-signed one, with the reason. (One that expired never reaches
/// a client: seqd refuses it at start and at reload, see
/// `unusable_tls_files_refuse_the_start_with_a_clear_message`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_refuse_expired_wrong_host_and_self_signed_server_certificates() {
    if !tools(&["curl", "redis-cli"]) {
        return;
    }
    let pki = Pki::new("seqd test CA");
    let good = pki.server("good", 1);
    let cases = [
        (
            "wrong-host",
            Leaf {
                hosts: &["other.example"],
                ..Leaf::default()
            },
            "no alternative certificate subject name matches target host name '127.0.0.1'",
        ),
        (
            "self-signed",
            Leaf {
                self_signed: true,
                ..Leaf::default()
            },
            "self-signed certificate",
        ),
    ];
    for (name, leaf, says) in cases {
        let db = sqlite().await;
        let bad = pki.leaf(name, leaf);
        let p = Process::spawn(&db.url, &tls_flags(&bad, &["--resp-listen", "127.0.0.1:0"])).await;
        let base = p.base.replace("http://", "https://");
        let out = curl(&pki.ca, None, &[&format!("{base}/healthz")]).await;
        assert_eq!(out.status.code(), Some(60), "{name}: {out:?}");
        assert_refused(name, &out, says);
        if name != "wrong-host" {
            // redis-cli checks the chain, not the host name.
            let out = redis_cli(p.resp.as_ref().unwrap(), &pki.ca, None, &["PING"]).await;
            assert!(out.stdout.trim() != "PONG", "{name}: redis-cli: {out:?}");
        }
    }
    // The same clients accept a good certificate.
    let db = sqlite().await;
    let (p, base, resp) = tls_process(&db, &pki, &good, None, &[]).await;
    assert_eq!(curl_next(&base, &pki.ca, None).await, 1);
    let out = redis_cli(&resp, &pki.ca, None, &["PING"]).await;
    assert_eq!(out.stdout.trim(), "PONG", "{out:?}");
    drop(p);
}

/// Under `--tls-client-ca`, both doors serve a client certificate signed
/// by the CA (curl, redis-cli, redis-py) and refuse no certificate, an
/// expired one, a self-signed one and one from another CA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_on_both_doors_under_tls_client_ca() {
    let Some((db, pki)) = ready(&["curl", "redis-cli"]).await else {
        return;
    };
    if !common::python_redis_available() {
        return;
    }
    let pair = pki.server("server", 1);
    let ca = pki.ca.to_str().unwrap().to_owned();
    let good = pki.client("client");
    let (p, base, resp) =
        tls_process(&db, &pki, &pair, Some(&good), &["--tls-client-ca", &ca]).await;
    let client = Leaf {
        client: true,
        ..Leaf::default()
    };
    let expired = pki.leaf(
        "expired",
        Leaf {
            expired: true,
            ..client
        },
    );
    let own = pki.leaf(
        "own",
        Leaf {
            self_signed: true,
            ..client
        },
    );
    let another = Pki::new("another CA");
    let other = another.client("stranger");

    assert_eq!(curl_next(&base, &pki.ca, Some(&good)).await, 1);
    assert_eq!(
        redis_cli(&resp, &pki.ca, Some(&good), &["INCR", "order"])
            .await
            .stdout
            .trim(),
        "2"
    );
    assert_eq!(redis_py(&resp, &pki.ca, Some(&good)).await, "3");

    let url = format!("{base}/v1/sequences/order/next");
    for (what, identity, says) in [
        ("no certificate", None, "certificate required"),
        ("expired", Some(&expired), "certificate expired"),
        ("self-signed", Some(&own), "unknown ca"),
        ("another CA", Some(&other), "unknown ca"),
    ] {
        let out = curl(&pki.ca, identity, &[&url]).await;
        assert_refused(&format!("curl, {what}"), &out, says);
        let out = redis_cli(&resp, &pki.ca, identity, &["INCR", "order"]).await;
        assert!(
            out.stdout.trim().parse::<i64>().is_err(),
            "redis-cli, {what}: {out:?}"
        );
        let said = redis_py(&resp, &pki.ca, identity).await;
        assert!(said.starts_with("error:"), "redis-py, {what}: {said}");
    }
    // Nothing was issued to the refused clients.
    assert_eq!(curl_next(&base, &pki.ca, Some(&good)).await, 4);
    drop(p);
}

/// TLS flags or files that cannot be used stop the start, exit status 2,
/// with a message naming the flag, the file and the problem (a certificate
/// expired or not valid yet included, and a truncated PEM file's missing
/// end line as text).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_tls_files_refuse_the_start_with_a_clear_message() {
    let pki = Pki::new("seqd test CA");
    let one = pki.server("one", 1);
    let two = pki.server("two", 2);
    let db = pki.path("seqd.db");
    let url = format!("sqlite://{}?mode=rwc", db.display());
    let (cert, key) = one.paths();
    let (_, other_key) = two.paths();
    let missing = pki.path("missing.pem");
    let missing = missing.to_str().unwrap();
    let leaf = |name: &str, expired: bool| {
        pki.leaf(
            name,
            pki::Leaf {
                expired,
                not_yet_valid: !expired,
                ..pki::Leaf::default()
            },
        )
    };
    let (expired, early) = (leaf("expired", true), leaf("early", false));
    let truncated = pki.path("truncated.pem");
    let pem = std::fs::read_to_string(cert).unwrap();
    std::fs::write(&truncated, &pem[..pem.len() / 2]).unwrap();
    let truncated = truncated.to_str().unwrap();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (vec!["--tls-cert", cert], "--tls-key <PATH>".into()),
        (vec!["--tls-key", key], "--tls-cert <PATH>".into()),
        (vec!["--tls-client-ca", cert], "--tls-cert <PATH>".into()),
        (
            vec!["--tls-cert", cert, "--tls-key", other_key],
            format!("error: --tls-key {other_key}: the private key does not match the certificate of --tls-cert {cert}"),
        ),
        (
            vec!["--tls-cert", missing, "--tls-key", key],
            format!("error: --tls-cert {missing}: cannot read it: No such file or directory"),
        ),
        (
            vec!["--tls-cert", key, "--tls-key", key],
            format!("error: --tls-cert {key}: no certificate in it"),
        ),
        (
            vec!["--tls-cert", cert, "--tls-key", cert],
            format!("error: --tls-key {cert}: no private key in it"),
        ),
        (
            vec!["--tls-cert", cert, "--tls-key", key, "--tls-client-ca", key],
            format!("error: --tls-client-ca {key}: no certificate in it"),
        ),
        (
            vec!["--tls-cert", expired.paths().0, "--tls-key", expired.paths().1],
            format!("error: --tls-cert {}: the certificate expired at 2001-01-01T00:00:00Z", expired.paths().0),
        ),
        (
            vec!["--tls-cert", early.paths().0, "--tls-key", early.paths().1],
            format!("error: --tls-cert {}: the certificate is not valid before 2090-01-01T00:00:00Z", early.paths().0),
        ),
        (
            vec!["--tls-cert", truncated, "--tls-key", key],
            format!("error: --tls-cert {truncated}: not a valid PEM file: its `-----END CERTIFICATE-----` line is missing (a truncated file?)"),
        ),
    ];
    for (flags, says) in cases {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--database-url", &url];
        args.extend(&flags);
        let out = common::seqd_binary(&args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(
            stderr.contains(&says),
            "{flags:?}: {stderr:?} does not say {says:?}"
        );
    }
    assert!(
        !db.exists(),
        "no database work before the TLS files are read"
    );
}

/// Message of the warning about client tokens over plain TCP.
pub(super) const IN_CLEAR: &str = "--client-auth on without TLS on a non-loopback address: client tokens cross the network in clear (set --tls-cert and --tls-key)";

/// Under `--client-auth on`, each listener on a non-loopback address
/// without TLS is named by a warning at start (one line each); loopback
/// listeners and TLS (here from `SEQD_TLS_CERT` and `SEQD_TLS_KEY`) are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_auth_on_warns_of_each_listener_without_tls_off_loopback() {
    if !tools(&["curl"]) {
        return;
    }
    let db = sqlite().await;
    let on = ["--client-auth", "on"];
    let http_out = Process::spawn(
        &db.url,
        &[
            &on[..],
            &["--listen", "0.0.0.0:0", "--resp-listen", "127.0.0.1:0"],
        ]
        .concat(),
    )
    .await;
    let resp_out = Process::spawn(
        &db.url,
        &[&on[..], &["--resp-listen", "0.0.0.0:0"]].concat(),
    )
    .await;
    let pki = Pki::new("seqd test CA");
    let pair = pki.server("server", 1);
    let (cert, key) = pair.paths();
    let tls = Process::spawn_with_env(
        &db.url,
        &[
            &on[..],
            &["--listen", "0.0.0.0:0", "--resp-listen", "0.0.0.0:0"],
        ]
        .concat(),
        &[("SEQD_TLS_CERT", cert), ("SEQD_TLS_KEY", key)],
    )
    .await;
    let http_addr = http_out.base.strip_prefix("http://").unwrap();
    let warned = nth_log(&http_out, IN_CLEAR, 1).await;
    assert_eq!(
        (warned["door"].as_str(), warned["address"].as_str()),
        (Some("http"), Some(http_addr))
    );
    assert_eq!(warned["level"], "WARN");
    let warned = nth_log(&resp_out, IN_CLEAR, 1).await;
    let resp_addr = resp_out.resp.clone().unwrap();
    assert_eq!(
        (warned["door"].as_str(), warned["address"].as_str()),
        (Some("resp"), Some(resp_addr.as_str()))
    );
    // Each serves on loopback, the TLS one HTTPS.
    for (p, scheme) in [(&http_out, "http"), (&resp_out, "http"), (&tls, "https")] {
        let port = p.base.rsplit_once(':').unwrap().1;
        let url = format!("{scheme}://127.0.0.1:{port}/healthz");
        let out = curl(&pki.ca, None, &[&url]).await;
        assert!(out.status.success(), "{out:?}");
        // Its last line read, every line before it has been.
        p.signal("TERM");
        nth_log(p, "seqd stopped", 1).await;
    }
    assert_eq!(
        http_out.log_lines(IN_CLEAR).len(),
        1,
        "{:?}",
        http_out.all_logs()
    );
    assert_eq!(
        resp_out.log_lines(IN_CLEAR).len(),
        1,
        "{:?}",
        resp_out.all_logs()
    );
    assert!(tls.log_lines(IN_CLEAR).is_empty(), "{:?}", tls.all_logs());
}

/// Under `--tls-client-ca` the doors refuse a client without a certificate,
/// so the kubelet's probes and Prometheus cannot reach them: the health
/// listener (`--health-listen`, plain HTTP) answers such a client on
/// `/healthz`, `/readyz` and `/metrics` (curl, no certificate), serves
/// nothing else (no ID is drawn through it), and the door still refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_listener_answers_probes_without_a_certificate_under_tls_client_ca() {
    let Some((db, pki)) = ready(&["curl"]).await else {
        return;
    };
    let pair = pki.server("server", 0x4ea1);
    let ca = pki.ca.to_str().unwrap().to_owned();
    let good = pki.client("client");
    let extra = [
        "--tls-client-ca",
        ca.as_str(),
        "--health-listen",
        "127.0.0.1:0",
    ];
    let (p, base, _) = tls_process(&db, &pki, &pair, Some(&good), &extra).await;
    let health = p.health.clone().expect("a health listener");
    let plain = |path: &str| {
        let url = format!("{health}{path}");
        async move {
            let out = common::run("curl", &["-sS", "-w", "\n%{http_code}", &url], b"").await;
            let (body, status) = out.stdout.rsplit_once('\n').expect("body and status");
            (status.to_owned(), body.to_owned())
        }
    };
    let (status, body) = plain("/healthz").await;
    assert_eq!(status, "200", "{body}");
    let (status, body) = plain("/readyz").await;
    assert_eq!(status, "200", "{body}");
    assert!(body.contains(r#""status":"ready""#), "{body}");
    let (status, body) = plain("/metrics").await;
    assert_eq!(status, "200");
    assert!(body.contains("seqd_"), "a scrape: {body:.200}");
    for path in ["/v1/sequences/order/next", "/v1/sequences", "/"] {
        let (status, body) = plain(path).await;
        assert_eq!(status, "404", "{path} on the health listener: {body}");
    }
    // The door still wants a certificate; nothing was drawn meanwhile.
    let out = curl(&pki.ca, None, &[&format!("{base}/healthz")]).await;
    assert_refused("curl without a certificate", &out, "certificate required");
    assert_eq!(curl_next(&base, &pki.ca, Some(&good)).await, 1);
    drop(p);
}

/// Waits until the process logged `message` `n` times; the last one.
pub(super) async fn nth_log(p: &Process, message: &str, n: usize) -> serde_json::Value {
    let found = tokio::time::timeout(BOUND, async {
        loop {
            let lines = p.log_lines(message);
            if lines.len() >= n {
                return lines[n - 1].clone();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("{message:?} not logged {n} times: {:?}", p.all_logs()))
}
