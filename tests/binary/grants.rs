//! The runtime grants of docs/operations.md ("The runtime grants"), read
//! from the document itself (tests/support/roles): after `seqd migrate` as the
//! administrator, a fresh role (PostgreSQL) or user (MariaDB) is given
//! exactly the documented statements, may read every table of seqd's schema,
//! and runs two instances (`--migrate check` and `off`) with every feature
//! on: client tokens (made by the CLI and by `/v1/tokens`, listed, revoked
//! and refused on both instances), admin create and patch, `/next`,
//! `/batch`, Leaf's and Tinyid's routes, a lease and its return, serial and
//! global sequences, snowflake IDs (worker-ID leases), the RESP door's
//! `INCR`, lists and reads, `/readyz`, and the settings and token refreshes
//! in the background. Every request answers 2xx and neither log says
//! "denied". SQLite has no roles.

use crate::support::common;
use crate::support::roles;
use crate::support::server;

use std::time::Duration;

use common::TestDb;
use reqwest::{Method, StatusCode};
use roles::RuntimeRole;
use serde_json::{json, Value};
use server::Process;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ADMIN: &str = "admin-secret-for-grants";

/// How long an instance may take to start issuing snowflake IDs, or to
/// refuse a token revoked on another one (its refresh promises 5 s).
const PATIENCE: Duration = Duration::from_secs(20);

/// One instance, reached by HTTP.
struct Instance {
    process: Process,
    http: reqwest::Client,
}

impl Instance {
    /// Starts `seqd serve` as the runtime role with `--migrate mode` and
    /// every feature on.
    async fn start(role: &RuntimeRole, mode: &str) -> Instance {
        let flags = [
            "--migrate",
            mode,
            "--client-auth",
            "on",
            "--admin-token",
            ADMIN,
            "--resp-listen",
            "127.0.0.1:0",
            "--settings-refresh",
            "100ms",
        ];
        Instance {
            process: Process::spawn(&role.url, &flags).await,
            http: server::client(Duration::from_secs(30)),
        }
    }

    /// `method path` as `token` with `body`: status and body (JSON, else
    /// the text as a JSON string).
    async fn call(
        &self,
        token: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> (StatusCode, Value) {
        let url = format!("{}{path}", self.process.base);
        let resp = server::send_as_to(&self.http, url, token, method, body).await;
        let status = resp.status();
        let text = resp.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, body)
    }

    /// [`Self::call`], asserted to answer 2xx: the body.
    async fn ok(&self, token: &str, method: Method, path: &str, body: Option<&Value>) -> Value {
        let (status, answer) = self.call(token, method.clone(), path, body).await;
        assert!(
            status.is_success(),
            "{method} {path} under the documented grants: {status} {answer}"
        );
        answer
    }

    /// `GET path` as `token`, asserted 2xx.
    async fn get(&self, token: &str, path: &str) -> Value {
        self.ok(token, Method::GET, path, None).await
    }

    /// Calls `GET path` as `token` until it answers `status`, within
    /// [`PATIENCE`]; its body.
    async fn until(&self, token: &str, path: &str, status: StatusCode) -> Value {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let (got, body) = self.call(token, Method::GET, path, None).await;
            if got == status {
                return body;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "GET {path}: still {got} {body} after {PATIENCE:?}, not {status}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `seqd_settings_refresh_rounds_total` on `/metrics`.
    async fn refresh_rounds(&self) -> u64 {
        let metrics = server::fetch_text(
            self.http
                .get(format!("{}/metrics", self.process.base))
                .bearer_auth(ADMIN),
        )
        .await;
        metrics
            .lines()
            .find_map(|l| l.strip_prefix("seqd_settings_refresh_rounds_total "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no settings refresh rounds on /metrics:\n{metrics}"))
    }

    /// Waits until two more rounds of the settings refresh ran (each reads
    /// the settings of every live sequence).
    async fn two_more_refresh_rounds(&self) {
        let from = self.refresh_rounds().await;
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while self.refresh_rounds().await < from + 2 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the settings refresh stopped"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Asserts that no log line says "denied" (PostgreSQL's "permission
    /// denied for table ...", MariaDB's "... command denied to user ...").
    fn assert_nothing_denied(&self, which: &str) {
        for line in self.process.all_logs() {
            assert!(
                !line.to_lowercase().contains("denied"),
                "{which} under the documented grants logged: {line}"
            );
        }
    }
}

/// `AUTH token` then `INCR name` on the RESP door at `addr`: the two
/// replies as written.
async fn resp_auth_incr(addr: &str, token: &str, name: &str) -> String {
    let frame = |args: &[&str]| {
        args.iter().fold(format!("*{}\r\n", args.len()), |f, a| {
            f + &format!("${}\r\n{a}\r\n", a.len())
        })
    };
    let talk = async {
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        let commands = frame(&["AUTH", token]) + &frame(&["INCR", name]);
        c.write_all(commands.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        while got.windows(2).filter(|w| w == b"\r\n").count() < 2 {
            let mut buf = [0u8; 256];
            let n = c.read(&mut buf).await.unwrap();
            assert!(n > 0, "the RESP door closed after {got:?}");
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8(got).unwrap()
    };
    tokio::time::timeout(Duration::from_secs(30), talk)
        .await
        .expect("the RESP door answered within 30 s")
}

/// Admin calls: a sequence of each kind created, one patched.
async fn creates_and_patches(s: &Instance) {
    for body in [
        json!({"name": "order", "start": 1, "step": 100}),
        json!({"name": "slot", "start": 1, "step": 100}),
        json!({"name": "invoice", "format": "INV{yyyy}{seq:06}", "reset": "year"}),
        json!({"name": "ledger", "step": 10, "ordering": "global"}),
    ] {
        s.ok(ADMIN, Method::POST, "/v1/sequences", Some(&body))
            .await;
    }
    let patch = json!({"step": 200});
    s.ok(ADMIN, Method::PATCH, "/v1/sequences/order", Some(&patch))
        .await;
}

/// Draws as `drawer` through every door: `/next`, `/batch`, Leaf's and
/// Tinyid's routes, a global and a serial sequence, snowflake IDs (once a
/// worker ID is leased) and the RESP door's `INCR`.
async fn draws_every_way(s: &Instance, drawer: &str) {
    for path in [
        "/v1/sequences/order/next",
        "/v1/sequences/order/batch?count=3",
        "/api/segment/get/order",
        "/v1/sequences/ledger/next",
    ] {
        s.get(drawer, path).await;
    }
    let tinyid = format!("/tinyid/id/nextIdSimple?bizType=order&batchSize=2&token={drawer}");
    s.get(drawer, &tinyid).await;
    let serial = s.get(drawer, "/v1/sequences/invoice/next").await;
    assert!(serial["serial"].is_string(), "{serial}");
    s.until(drawer, "/v1/snowflake/next", StatusCode::OK).await;
    let resp = s.process.resp.as_deref().expect("a RESP door");
    let replies = resp_auth_incr(resp, drawer, "order").await;
    assert!(replies.starts_with("+OK\r\n:"), "AUTH, INCR: {replies:?}");
}

/// A lease as `drawer`, and the return of all of it but its first ID.
async fn leases_and_gives_back(s: &Instance, drawer: &str) {
    let path = "/v1/sequences/slot/lease?size=10";
    let lease = s.ok(drawer, Method::POST, path, None).await;
    let rest = json!({"start": lease["start"], "end": lease["end"],
        "next": lease["start"].as_i64().unwrap() + 1, "key": lease["key"]});
    let path = "/v1/sequences/slot/lease/return";
    let returned = s.ok(drawer, Method::POST, path, Some(&rest)).await;
    assert_eq!(returned["returned"], true, "{lease}");
}

/// A reading token made over `a`'s API, read with on both instances,
/// listed, revoked on `a`, and then refused by both.
async fn a_read_token_lives_and_is_revoked(a: &Instance, b: &Instance) {
    let made = json!({"label": "reader", "prefixes": ["order"], "rights": ["read"]});
    let reader = a.ok(ADMIN, Method::POST, "/v1/tokens", Some(&made)).await;
    let reader = reader["token"].as_str().unwrap().to_owned();
    a.get(&reader, "/v1/sequences/order").await;
    b.until(&reader, "/v1/sequences", StatusCode::OK).await;
    let listed = a.get(ADMIN, "/v1/tokens").await;
    let labels: Vec<&str> = listed["tokens"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|t| t["label"].as_str())
        .collect();
    assert_eq!(labels, ["drawer", "reader"], "{listed}");
    a.ok(ADMIN, Method::DELETE, "/v1/tokens/reader", None).await;
    for s in [a, b] {
        s.until(&reader, "/v1/sequences/order", StatusCode::UNAUTHORIZED)
            .await;
    }
}

async fn every_feature_serves_under_the_documented_runtime_grants(db: TestDb) {
    common::ok(&common::seqd_on(&db, &["migrate"]).await);
    // A token the operator made with the CLI before the instances start.
    let drawer = common::cli_token(
        &db,
        "--label drawer --prefix order --prefix invoice --prefix ledger --prefix slot \
         --prefix snowflake --can draw",
    )
    .await;
    let role = RuntimeRole::grant(&db).await;
    for table in &role.tables {
        let sql = format!("SELECT COUNT(*) FROM {table}");
        let read = common::try_execute_at(db.backend, &role.url, &sql).await;
        assert!(
            read.is_ok(),
            "the runtime role cannot read {table}: {read:?}"
        );
    }
    let a = Instance::start(&role, "check").await;
    let b = Instance::start(&role, "off").await;
    for s in [&a, &b] {
        s.get(ADMIN, "/readyz").await;
    }
    creates_and_patches(&a).await;
    for s in [&a, &b] {
        draws_every_way(s, &drawer).await;
    }
    leases_and_gives_back(&a, &drawer).await;
    a_read_token_lives_and_is_revoked(&a, &b).await;
    for (s, which) in [(&a, "--migrate check"), (&b, "--migrate off")] {
        s.two_more_refresh_rounds().await;
        s.get(ADMIN, "/readyz").await;
        s.assert_nothing_denied(which);
    }
}

network_backends!(every_feature_serves_under_the_documented_runtime_grants);
