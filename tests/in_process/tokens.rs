//! Client tokens (docs/api.md, "Client tokens") through the HTTP door on
//! every backend: each right on each route with a token that covers the
//! name, one that does not, an expired one, a revoked one (here and on
//! another instance), none; rotation; the admin routes and the CLI.

use crate::support::common;
use crate::support::server;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Backend, TestDb};
use reqwest::{Method, StatusCode};
use seqd::config::{Secret, Settings};
use seqd::service::access::REFRESH_EVERY;
use seqd::service::ClientAuth;
use seqd::store::forwarding::{Call, Forwarding, Hook};
use seqd::store::StoreError;
use serde_json::{json, Value};
use server::TestServer;
use sqlx::{Connection, Executor};

const ADMIN: &str = "admin-secret-for-tests";

fn settings(db: &TestDb) -> Settings {
    Settings {
        admin_token: Some(Secret::new(ADMIN)),
        client_auth: ClientAuth::On,
        ..Settings::for_database(db.url.clone())
    }
}

/// `method path` with `token` as Bearer (none when `None`): status and body.
async fn call(
    s: &TestServer,
    method: Method,
    path: &str,
    token: Option<&str>,
) -> (StatusCode, Value) {
    let resp = match token {
        Some(t) => s.send_as(t, method, path, None).await,
        None => s.send(method, path).await,
    };
    let status = resp.status();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// Makes a token through the admin API; its text.
async fn make(
    s: &TestServer,
    label: &str,
    prefixes: &[&str],
    rights: &[&str],
    expires: Option<&str>,
) -> String {
    let mut body = json!({"label": label, "prefixes": prefixes, "rights": rights});
    if let Some(e) = expires {
        body["expires_in"] = json!(e);
    }
    let v = s.make_token(ADMIN, &body).await;
    assert_eq!(v["label"], label);
    assert_eq!(v["state"], "active");
    v["token"].as_str().unwrap().to_owned()
}

async fn create_seq(s: &TestServer, name: &str) {
    let body = json!({"name": name, "start": 1, "step": 100});
    let resp = s
        .send_as(ADMIN, Method::POST, "/v1/sequences", Some(&body))
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED, "create {name}");
}

async fn revoke(s: &TestServer, label: &str) -> Value {
    let (status, body) = call(
        s,
        Method::DELETE,
        &format!("/v1/tokens/{label}"),
        Some(ADMIN),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// The status of `GET path` on `s` with `token` as Bearer (none when `None`).
async fn draw(s: &TestServer, path: &str, token: Option<&str>) -> StatusCode {
    call(s, Method::GET, path, token).await.0
}

/// A refusal: its status and error code.
type Refusal = (StatusCode, &'static str);
const UNAUTHORIZED: Refusal = (StatusCode::UNAUTHORIZED, "unauthorized");
const FORBIDDEN: Refusal = (StatusCode::FORBIDDEN, "forbidden");
const NOT_FOUND: Refusal = (StatusCode::NOT_FOUND, "sequence_not_found");

/// Asserts that `method path` on `s` with `token` (none when `None`) is
/// refused as `refusal` says; `what` names the request in a failure.
async fn assert_refused(
    s: &TestServer,
    method: Method,
    path: &str,
    token: Option<&str>,
    (status, code): Refusal,
    what: &str,
) {
    assert_code(&call(s, method, path, token).await, status, code, what);
}

#[track_caller]
fn assert_code(got: &(StatusCode, Value), status: StatusCode, code: &str, what: &str) {
    assert_eq!(got.0, status, "{what}: {}", got.1);
    assert_eq!(got.1["error"]["code"], code, "{what}: {}", got.1);
}

/// The drawing routes of sequence `name`, with their methods.
fn drawing(name: &str) -> Vec<(Method, String)> {
    vec![
        (Method::GET, format!("/v1/sequences/{name}/next")),
        (Method::POST, format!("/v1/sequences/{name}/next")),
        (Method::GET, format!("/v1/sequences/{name}/batch?count=3")),
        (Method::POST, format!("/v1/sequences/{name}/batch?count=3")),
        (Method::GET, format!("/api/segment/get/{name}")),
        (Method::POST, format!("/v1/sequences/{name}/lease?size=3")),
    ]
}

const SNOWFLAKE: [&str; 3] = [
    "/v1/snowflake/next",
    "/v1/snowflake/batch?count=2",
    "/api/snowflake/get/any",
];

async fn every_right_on_every_route(db: TestDb) {
    let s = TestServer::start(settings(&db)).await;
    create_seq(&s, "shop1-order").await;
    create_seq(&s, "shop2-order").await;
    let drawer = make(&s, "shop1-draw", &["shop1-"], &["draw"], None).await;
    let reader = make(&s, "shop1-read", &["shop1-"], &["read"], None).await;
    let all = make(&s, "everything", &["*"], &["draw", "read"], None).await;
    let snow = make(&s, "snow", &["snowflake"], &["draw"], None).await;
    let unknown = format!("seqd_{}", "0".repeat(64));
    assert_eq!(s.get_json("/v1/info").await["client_auth"], "on");

    for (m, path) in drawing("shop1-order") {
        let what = format!("{m} {path}");
        assert_refused(&s, m.clone(), &path, None, UNAUTHORIZED, &what).await;
        assert_refused(&s, m.clone(), &path, Some(&unknown), UNAUTHORIZED, &what).await;
        assert_refused(&s, m.clone(), &path, Some(&reader), FORBIDDEN, &what).await;
        assert_refused(&s, m.clone(), &path, Some(&snow), FORBIDDEN, &what).await;
        for ok in [&drawer, &all, &ADMIN.to_owned()] {
            let got = call(&s, m.clone(), &path, Some(ok)).await;
            assert_eq!(got.0, StatusCode::OK, "{what}: {}", got.1);
        }
    }
    // Outside the token: the same 403 whether the sequence exists or not;
    // inside it, a missing sequence is the usual 404.
    for (m, path) in drawing("shop2-order")
        .into_iter()
        .chain(drawing("shop2-nothing"))
    {
        assert_refused(&s, m, &path, Some(&drawer), FORBIDDEN, &path).await;
    }
    for (m, path) in drawing("shop1-nothing") {
        assert_refused(&s, m, &path, Some(&drawer), NOT_FOUND, &path).await;
    }
    for path in SNOWFLAKE {
        assert_refused(&s, Method::GET, path, None, UNAUTHORIZED, path).await;
        assert_refused(&s, Method::GET, path, Some(&drawer), FORBIDDEN, path).await;
        for ok in [&snow, &all] {
            let got = call(&s, Method::GET, path, Some(ok)).await;
            assert_eq!(got.0, StatusCode::OK, "{path}: {}", got.1);
        }
    }

    // Reading one sequence.
    let one = "/v1/sequences/shop1-order";
    assert_refused(&s, Method::GET, one, None, UNAUTHORIZED, one).await;
    assert_refused(&s, Method::GET, one, Some(&drawer), FORBIDDEN, one).await;
    assert_eq!(draw(&s, one, Some(&reader)).await, StatusCode::OK);
    for other in ["/v1/sequences/shop2-order", "/v1/sequences/shop2-nothing"] {
        assert_refused(&s, Method::GET, other, Some(&reader), FORBIDDEN, other).await;
    }
    // Listing: a token sees the names it covers, nothing of the others.
    assert_refused(&s, Method::GET, "/v1/sequences", None, UNAUTHORIZED, "list").await;
    assert_refused(
        &s,
        Method::GET,
        "/v1/sequences",
        Some(&drawer),
        FORBIDDEN,
        "list",
    )
    .await;
    let (status, scoped) = call(&s, Method::GET, "/v1/sequences", Some(&reader)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(server::listed_names(&scoped), ["shop1-order"]);
    let (_, every) = call(&s, Method::GET, "/v1/sequences", Some(&all)).await;
    assert_eq!(server::listed_names(&every), ["shop1-order", "shop2-order"]);
    // Its one name fills a page of one, and nothing follows it.
    let (_, first) = call(&s, Method::GET, "/v1/sequences?limit=1", Some(&reader)).await;
    assert_eq!(server::listed_names(&first), ["shop1-order"]);
    assert!(first["next"].is_null(), "{first}");

    // Client tokens are not admin tokens.
    for t in [&drawer, &all] {
        let what = "tokens with a client token";
        assert_refused(&s, Method::GET, "/v1/tokens", Some(t), UNAUTHORIZED, what).await;
        let body = json!({"name": "shop1-new"});
        let resp = s
            .send_as(t, Method::POST, "/v1/sequences", Some(&body))
            .await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    }

    // Revoked here: refused at once; expired: refused once its time passed.
    let short = make(&s, "short", &["shop1-"], &["draw"], Some("3s")).await;
    assert_eq!(
        draw(&s, "/v1/sequences/shop1-order/next", Some(&short)).await,
        StatusCode::OK
    );
    let gone = make(&s, "gone", &["shop1-"], &["draw"], None).await;
    assert_eq!(
        draw(&s, "/v1/sequences/shop1-order/next", Some(&gone)).await,
        StatusCode::OK
    );
    assert_eq!(revoke(&s, "gone").await["revoked"], true);
    assert_eq!(revoke(&s, "gone").await["revoked"], false);
    assert_refused(
        &s,
        Method::GET,
        "/v1/sequences/shop1-order/next",
        Some(&gone),
        UNAUTHORIZED,
        "revoked",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(3_100)).await;
    assert_refused(
        &s,
        Method::GET,
        "/v1/sequences/shop1-order/next",
        Some(&short),
        UNAUTHORIZED,
        "expired",
    )
    .await;

    // The list shows each state and never a token's text or hash.
    let (status, list) = call(&s, Method::GET, "/v1/tokens", Some(ADMIN)).await;
    assert_eq!(status, StatusCode::OK);
    let state = |label: &str| {
        list["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["label"] == label)
            .unwrap()["state"]
            .clone()
    };
    assert_eq!(state("gone"), "revoked");
    assert_eq!(state("short"), "expired");
    assert_eq!(state("shop1-draw"), "active");
    let text = list.to_string();
    for t in [&drawer, &reader, &all, &short, &gone] {
        assert!(!text.contains(t.as_str()), "the list holds a token");
        assert!(!text.contains(&hex_sha256(t)), "the list holds a hash");
    }
    s.stop().await;
}

fn hex_sha256(token: &str) -> String {
    seqd::domain::token::TokenHash::of(token).to_hex()
}

async fn bad_requests_are_refused_and_labels_stay_taken(db: TestDb) {
    let s = TestServer::start(settings(&db)).await;
    make(&s, "taken", &["a"], &["draw"], None).await;
    let post = |body: Value| {
        let s = &s;
        async move {
            let resp = s
                .send_as(ADMIN, Method::POST, "/v1/tokens", Some(&body))
                .await;
            let status = resp.status();
            (status, resp.json::<Value>().await.unwrap())
        }
    };
    for (body, what) in [
        (
            json!({"label": "x y", "prefixes": ["a"], "rights": ["draw"]}),
            "label",
        ),
        (
            json!({"label": "admin", "prefixes": ["a"], "rights": ["draw"]}),
            "reserved label",
        ),
        (
            json!({"label": "x", "prefixes": [], "rights": ["draw"]}),
            "no prefix",
        ),
        (
            json!({"label": "x", "prefixes": ["bad prefix"], "rights": ["draw"]}),
            "prefix",
        ),
        (
            json!({"label": "x", "prefixes": ["*", "bad prefix"], "rights": ["draw"]}),
            "a bad prefix beside *",
        ),
        (
            json!({"label": "x", "prefixes": ["a"], "rights": ["write"]}),
            "right",
        ),
        (
            json!({"label": "x", "prefixes": ["a"], "rights": ["draw"], "expires_in": "soon"}),
            "expiry",
        ),
        (
            json!({"label": "x", "prefixes": ["a"], "rights": ["draw"], "expires_in": "1 s"}),
            "expiry with a space",
        ),
        (
            json!({"label": "x", "prefixes": ["a"], "rights": ["draw"], "expires_in": "1y"}),
            "expiry in years",
        ),
        (
            json!({"label": "x", "prefixes": ["a"], "rights": ["draw"], "expires_in": "+5d"}),
            "expiry with a sign",
        ),
        (
            json!({"label": "x", "prefixes": ["a"], "rights": ["draw"], "extra": 1}),
            "unknown field",
        ),
    ] {
        assert_code(
            &post(body).await,
            StatusCode::BAD_REQUEST,
            "invalid_request",
            what,
        );
    }
    let dup = post(json!({"label": "taken", "prefixes": ["b"], "rights": ["read"]})).await;
    assert_code(&dup, StatusCode::CONFLICT, "token_exists", "duplicate");
    revoke(&s, "taken").await;
    let again = post(json!({"label": "taken", "prefixes": ["b"], "rights": ["read"]})).await;
    assert_code(
        &again,
        StatusCode::CONFLICT,
        "token_exists",
        "after a revoke",
    );
    let missing = call(&s, Method::DELETE, "/v1/tokens/nobody", Some(ADMIN)).await;
    assert_code(
        &missing,
        StatusCode::NOT_FOUND,
        "token_not_found",
        "revoke of nobody",
    );
    assert_refused(
        &s,
        Method::GET,
        "/v1/tokens",
        None,
        UNAUTHORIZED,
        "no admin token",
    )
    .await;
    // Nothing refused was written.
    let (_, list) = call(&s, Method::GET, "/v1/tokens", Some(ADMIN)).await;
    assert_eq!(list["tokens"].as_array().unwrap().len(), 1, "{list}");
    s.stop().await;
}

/// A token made on one instance works on another, and one revoked on one is
/// refused by the other, each within the promised 5 s; two tokens over the
/// same prefixes live side by side (rotation).
async fn another_instance_follows_within_5s(db: TestDb) {
    let a = TestServer::start(settings(&db)).await;
    let b = TestServer::start(settings(&db)).await;
    create_seq(&a, "rot-order").await;
    let path = "/v1/sequences/rot-order/next";
    let old = make(&a, "rot-v1", &["rot-"], &["draw"], None).await;
    let until = |want: StatusCode, token: String| {
        let b = &b;
        async move {
            let start = Instant::now();
            loop {
                let (status, _) = call(b, Method::GET, path, Some(&token)).await;
                if status == want {
                    return start.elapsed();
                }
                assert!(
                    start.elapsed() < Duration::from_secs(5),
                    "instance B still answers {status}, not {want}, after 5 s"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    until(StatusCode::OK, old.clone()).await;
    // Rotation: the new token beside the old one, both work on both.
    let new = make(&a, "rot-v2", &["rot-"], &["draw"], None).await;
    until(StatusCode::OK, new.clone()).await;
    assert_eq!(draw(&a, path, Some(&old)).await, StatusCode::OK);
    assert_eq!(draw(&b, path, Some(&old)).await, StatusCode::OK);
    revoke(&a, "rot-v1").await;
    assert_eq!(draw(&a, path, Some(&old)).await, StatusCode::UNAUTHORIZED);
    until(StatusCode::UNAUTHORIZED, old.clone()).await;
    assert_eq!(draw(&b, path, Some(&new)).await, StatusCode::OK);
    assert_eq!(draw(&a, path, Some(&new)).await, StatusCode::OK);
    a.stop().await;
    b.stop().await;
}

/// `--client-auth off` (the default) is today's behaviour: no token asked,
/// and a token sent is not looked at.
async fn off_asks_for_nothing(db: TestDb) {
    let s = TestServer::start(Settings {
        admin_token: Some(Secret::new(ADMIN)),
        ..Settings::for_database(db.url.clone())
    })
    .await;
    create_seq(&s, "open-order").await;
    assert_eq!(s.get_json("/v1/info").await["client_auth"], "off");
    // No RESP door unless asked for (tests/binary/resp.rs starts one).
    assert!(s.get_json("/v1/info").await["resp_listen"].is_null());
    assert_eq!(
        draw(&s, "/v1/sequences/open-order/next", None).await,
        StatusCode::OK
    );
    assert_eq!(
        draw(&s, "/v1/sequences/open-order/next", Some("seqd_nonsense")).await,
        StatusCode::OK
    );
    assert_eq!(draw(&s, "/v1/sequences", None).await, StatusCode::OK);
    s.stop().await;
}

/// `seqd tokens create|list|revoke` on the database: the token is printed
/// once, only its SHA-256 stored, and an instance honours it.
async fn the_cli_makes_lists_and_revokes(db: TestDb) {
    let token = common::cli_token(
        &db,
        "--label cli --prefix cli- --prefix x. --can draw,read --expires 90d",
    )
    .await;
    assert!(token.starts_with("seqd_") && token.len() == 69, "{token}");
    let rows = common::connect(&db).await.token_rows().await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].hash, hex_sha256(&token));
    assert_eq!(rows[0].prefixes, "cli-,x.");
    assert_eq!(rows[0].rights, "draw,read");
    assert!(rows[0].expires_at.is_some());

    let s = TestServer::start(settings(&db)).await;
    create_seq(&s, "cli-order").await;
    assert_eq!(
        draw(&s, "/v1/sequences/cli-order/next", Some(&token)).await,
        StatusCode::OK
    );

    // A label of the longest kind beside it: every cell starts under its
    // column's heading, whatever the widths (the expiry, to the second, too).
    let long = "l".repeat(64);
    common::cli_token(&db, &format!("--label {long} --prefix z --can read")).await;
    let listed = common::ok(&common::seqd_on(&db, &["tokens", "list"]).await);
    let lines: Vec<&str> = listed.lines().collect();
    let at = |name: &str| lines[0].find(name).unwrap_or_else(|| panic!("{listed}"));
    let row = |label: &str| {
        *lines
            .iter()
            .find(|l| l.starts_with(&format!("{label} ")))
            .unwrap_or_else(|| panic!("{label}: {listed}"))
    };
    let cli = row("cli");
    assert_eq!(
        &cli[at("RIGHTS")..at("STATE")],
        format!("{:<1$}", "draw,read", at("STATE") - at("RIGHTS")),
        "{listed}"
    );
    assert!(cli[at("STATE")..].starts_with("active "), "{listed}");
    let expires = cli[at("EXPIRES")..at("PREFIXES")].trim_end();
    assert!(
        expires.len() == 20 && expires.ends_with('Z') && expires.starts_with("20"),
        "{listed}"
    );
    assert_eq!(&cli[at("PREFIXES")..], "cli- x.", "{listed}");
    let other = row(&long);
    assert!(other[at("RIGHTS")..].starts_with("read "), "{listed}");
    assert!(other[at("EXPIRES")..].starts_with("- "), "{listed}");
    assert_eq!(&other[at("PREFIXES")..], "z", "{listed}");
    assert!(
        !listed.contains(&token) && !listed.contains(&rows[0].hash),
        "{listed}"
    );
    let dup = common::seqd_on(
        &db,
        &["tokens", "create", "--label", "cli", "--prefix", "y"],
    )
    .await;
    assert!(!dup.status.success());
    assert!(
        String::from_utf8_lossy(&dup.stderr).contains("already exists"),
        "{dup:?}"
    );

    common::ok(&common::seqd_on(&db, &["tokens", "revoke", "cli"]).await);
    let listed = common::ok(&common::seqd_on(&db, &["tokens", "list"]).await);
    assert!(listed.contains("revoked"), "{listed}");
    let start = Instant::now();
    while draw(&s, "/v1/sequences/cli-order/next", Some(&token)).await != StatusCode::UNAUTHORIZED {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "a token revoked by the CLI still works after 5 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.stop().await;
}

/// Counts the reads of the token table and fails them while `down` is set.
#[derive(Default)]
struct TokenTable {
    down: AtomicBool,
    reads: AtomicU64,
}

impl Hook for TokenTable {
    fn before(&self, call: Call) -> Result<(), StoreError> {
        if call != Call::Tokens {
            return Ok(());
        }
        self.reads.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("the token table is cut".into()));
        }
        Ok(())
    }
}

/// Another client's session holding the token table locked, as an
/// operator's would: PostgreSQL `LOCK TABLE ... ACCESS EXCLUSIVE` in an open
/// transaction, MariaDB `LOCK TABLES ... WRITE`; inside it, `label` is
/// revoked, which nobody else sees before [`TableLock::release`]. `None` on
/// SQLite, whose readers a writer does not block (WAL).
enum TableLock {
    Postgres(sqlx::PgConnection),
    Mysql(sqlx::MySqlConnection),
}

impl TableLock {
    async fn take_revoking(db: &TestDb, label: &str) -> Option<TableLock> {
        let revoke = format!("UPDATE seqd_tokens SET revoked_at = 1 WHERE label = '{label}'");
        match db.backend {
            Backend::Postgres => {
                let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
                c.execute("BEGIN").await.unwrap();
                c.execute("LOCK TABLE seqd_tokens IN ACCESS EXCLUSIVE MODE")
                    .await
                    .unwrap();
                c.execute(revoke.as_str()).await.unwrap();
                Some(TableLock::Postgres(c))
            }
            Backend::Mysql => {
                let mut c = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
                c.execute("LOCK TABLES seqd_tokens WRITE").await.unwrap();
                c.execute(revoke.as_str()).await.unwrap();
                Some(TableLock::Mysql(c))
            }
            Backend::Sqlite => None,
        }
    }

    async fn release(self) {
        match self {
            TableLock::Postgres(mut c) => c.execute("COMMIT").await.map(drop).unwrap(),
            TableLock::Mysql(mut c) => c.execute("UNLOCK TABLES").await.map(drop).unwrap(),
        }
    }
}

/// Draws with `token` until `reads` has counted `more` further reads of
/// the token table, every draw answered 200 meanwhile.
async fn served_across_reads(
    s: &TestServer,
    path: &str,
    token: &str,
    reads: &AtomicU64,
    more: u64,
) {
    let target = reads.load(Ordering::SeqCst) + more;
    let start = Instant::now();
    while reads.load(Ordering::SeqCst) < target {
        assert_eq!(draw(s, path, Some(token)).await, StatusCode::OK);
        assert!(
            start.elapsed() < 10 * REFRESH_EVERY,
            "the token table was not read {more} more times"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Draws with `token` until it is refused 401, which must happen within
/// the promised 5 s.
async fn refused_within_5s(s: &TestServer, path: &str, token: &str, what: &str) {
    let start = Instant::now();
    while draw(s, path, Some(token)).await != StatusCode::UNAUTHORIZED {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{what}: still served 5 s after the table could be read again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// While the token table cannot be read (a lock another session holds on
/// the network databases; reads failing, on every backend), the set read
/// last stays in force: its tokens keep drawing and unknown ones stay
/// refused. A revocation made meanwhile takes effect within 5 s of the
/// table answering again.
async fn tokens_in_force_stay_in_force_while_the_table_cannot_be_read(db: TestDb) {
    let store = Forwarding::new(common::store(&db).await, TokenTable::default());
    let mut settings = settings(&db);
    settings.snowflake.enabled = false;
    let s = TestServer::start_with_store(settings, store.clone()).await;
    create_seq(&s, "cut-order").await;
    let path = "/v1/sequences/cut-order/next";
    let reads = &store.hook().reads;

    let locked = make(&s, "cut-locked", &["cut-"], &["draw"], None).await;
    assert_eq!(draw(&s, path, Some(&locked)).await, StatusCode::OK);
    if let Some(lock) = TableLock::take_revoking(&db, "cut-locked").await {
        // Two reads start while the lock is held: each waits on it and fails.
        served_across_reads(&s, path, &locked, reads, 2).await;
        let (status, body) = call(&s, Method::GET, path, Some("seqd_unknown")).await;
        assert_code(
            &(status, body),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "unknown, locked",
        );
        lock.release().await;
        refused_within_5s(&s, path, &locked, "revoked under the lock").await;
    }

    let cut = make(&s, "cut-failing", &["cut-"], &["draw"], None).await;
    assert_eq!(draw(&s, path, Some(&cut)).await, StatusCode::OK);
    store.hook().down.store(true, Ordering::SeqCst);
    common::execute(
        &db,
        "UPDATE seqd_tokens SET revoked_at = 1 WHERE label = 'cut-failing'",
    )
    .await;
    served_across_reads(&s, path, &cut, reads, 2).await;
    assert_eq!(
        draw(&s, path, Some("seqd_unknown")).await,
        StatusCode::UNAUTHORIZED
    );
    store.hook().down.store(false, Ordering::SeqCst);
    refused_within_5s(&s, path, &cut, "revoked while reads failed").await;
    s.stop().await;
}

/// A row an operator wrote by SQL that cannot be used (rights `fly`) is
/// skipped: its token is refused, every other token keeps working, and
/// the list shows it as unusable, saying why. Fixed by SQL, it is in force
/// at the next read.
async fn an_unusable_row_written_by_sql_is_skipped_and_listed_as_such(db: TestDb) {
    let s = TestServer::start(settings(&db)).await;
    create_seq(&s, "us-order").await;
    let path = "/v1/sequences/us-order/next";
    let good = make(&s, "us-good", &["us-"], &["draw"], None).await;
    let text = "seqd_written-by-an-operator-who-misspelt-the-rights";
    common::execute(
        &db,
        &format!(
            "INSERT INTO seqd_tokens (label, hash, prefixes, rights, created_at) \
             VALUES ('us-bad', '{}', 'us-', 'fly', 0)",
            hex_sha256(text)
        ),
    )
    .await;
    // A create reads the table again before it answers.
    make(&s, "us-read-1", &["us-"], &["read"], None).await;
    assert_refused(
        &s,
        Method::GET,
        path,
        Some(text),
        UNAUTHORIZED,
        "unusable row",
    )
    .await;
    assert_eq!(draw(&s, path, Some(&good)).await, StatusCode::OK);
    let (status, list) = call(&s, Method::GET, "/v1/tokens", Some(ADMIN)).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let states: Vec<(String, String)> = list["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["label"].as_str().unwrap().into(),
                t["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    let bad = states.iter().find(|(l, _)| l == "us-bad").expect("listed");
    assert!(
        bad.1.starts_with("unusable") && bad.1.contains("fly"),
        "{states:?}"
    );
    assert!(
        states.contains(&("us-good".into(), "active".into())),
        "{states:?}"
    );

    common::execute(
        &db,
        "UPDATE seqd_tokens SET rights = 'draw' WHERE label = 'us-bad'",
    )
    .await;
    make(&s, "us-read-2", &["us-"], &["read"], None).await;
    assert_eq!(draw(&s, path, Some(text)).await, StatusCode::OK);
    s.stop().await;
}

/// Every name a page walk shows a token, in its rows and in `next`, with
/// the page size and the asked `prefix` given.
async fn walk(s: &TestServer, token: &str, limit: u32, prefix: Option<&str>) -> Vec<String> {
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..50 {
        let mut path = format!("/v1/sequences?limit={limit}");
        if let Some(p) = prefix {
            path += &format!("&prefix={p}");
        }
        if let Some(a) = &after {
            path += &format!("&after={a}");
        }
        let (status, page) = call(s, Method::GET, &path, Some(token)).await;
        assert_eq!(status, StatusCode::OK, "{path}: {page}");
        seen.extend(server::listed_names(&page));
        match page["next"].as_str() {
            Some(next) => {
                seen.push(next.to_owned());
                after = Some(next.to_owned());
            }
            None => return seen,
        }
    }
    panic!("a page walk of {limit} a page did not end: {seen:?}");
}

/// A token for `order.` and `pay.` walking the list, page by page, sees
/// its names and only them: no page and no `next` names `alpha`, `order`,
/// `orders`, `ORDER.x` or `zeta`, whatever the page size and the prefix
/// asked.
async fn a_list_walk_names_only_what_the_token_covers(db: TestDb) {
    let s = TestServer::start(settings(&db)).await;
    let names = [
        "ORDER.x", "alpha", "order", "order.a", "order.b", "order.c", "orders", "pay", "pay.x",
        "zeta",
    ];
    for name in names {
        create_seq(&s, name).await;
    }
    let reader = make(&s, "walker", &["pay.", "order."], &["read"], None).await;
    let covered = ["order.a", "order.b", "order.c", "pay.x"];
    for limit in [1, 2, 3, 4, 5, 100] {
        let seen = walk(&s, &reader, limit, None).await;
        assert!(
            seen.iter().all(|n| covered.contains(&n.as_str())),
            "a walk of {limit} a page named what the token does not cover: {seen:?}"
        );
        let mut rows = seen.clone();
        rows.dedup();
        assert_eq!(rows, covered, "a walk of {limit} a page");
    }
    for (prefix, want) in [
        ("o", &covered[..3]),
        ("order.b", &covered[1..2]),
        ("p", &covered[3..]),
        ("a", &[][..]),
    ] {
        for limit in [1, 2] {
            let mut seen = walk(&s, &reader, limit, Some(prefix)).await;
            seen.dedup();
            assert_eq!(seen, want, "prefix {prefix}, {limit} a page");
        }
    }
    s.stop().await;
}

per_backend!(
    a_list_walk_names_only_what_the_token_covers,
    an_unusable_row_written_by_sql_is_skipped_and_listed_as_such,
    tokens_in_force_stay_in_force_while_the_table_cannot_be_read,
    every_right_on_every_route,
    bad_requests_are_refused_and_labels_stay_taken,
    another_instance_follows_within_5s,
    off_asks_for_nothing,
    the_cli_makes_lists_and_revokes,
);
