//! The monitor page in a real browser: headless Chromium, driven through
//! chromedriver (W3C WebDriver over HTTP), loads `/` from an in-process seqd
//! on SQLite while background tasks issue IDs, and the rows and numbers it
//! shows are compared with `GET /v1/sequences`:
//!
//! - under load: same sequences in the same order, same row steps, and every
//!   number that only grows (max_id, issued, fetches) between the API's values
//!   read just before and just after the page;
//! - once the load stopped and no fetch is in flight: every number equal,
//!   IDs above 2^53 included (the page keeps them exact).
//!
//! A second test pages: with 150 sequences the page shows the first 100, its
//! next control the other 50 (refreshing in place), and previous the first
//! 100 again.
//!
//! A third searches and pages 100,000 sequences (inserted by SQL before the
//! server starts): one page of rows at a time, typing a prefix shows only
//! its names from its first page, next/previous move within it, a prefix
//! given in the page's link opens its view, the DOM stays one page, and
//! every list request the page makes asks for one page.
//!
//! Screenshots are saved to `target/artifacts/monitor.png` and
//! `monitor-search.png`. Without Chromium
//! or chromedriver the test is skipped, or fails under `SEQD_TEST_REQUIRE_ALL=1`.

#[macro_use]
mod common;
mod server;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use seqd::config::Settings;
use serde_json::{json, Value};
use server::TestServer;
use tokio::time::Instant;

/// 2^53 + 1: the first integer a JavaScript number cannot hold.
const BEYOND_JS: i64 = 9_007_199_254_740_993;

// ---------------------------------------------------------------- browser

fn find_in_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

/// Chromium and chromedriver, or `None` after printing `skipped: ...`.
fn browser_tools() -> Option<(PathBuf, PathBuf)> {
    let chromium = find_in_path(&["chromium", "chromium-browser"]);
    let driver = find_in_path(&["chromedriver"]);
    match (chromium, driver) {
        (Some(c), Some(d)) => Some((c, d)),
        _ if common::require_all() => {
            panic!("chromium or chromedriver not found and SEQD_TEST_REQUIRE_ALL=1 (apt-get install chromium chromium-driver)")
        }
        _ => {
            eprintln!("skipped: chromium or chromedriver not found (Debian packages `chromium`, `chromium-driver`)");
            None
        }
    }
}

/// A chromedriver process and one headless Chromium session. Dropped
/// without [`Browser::close`] (a failed assertion), it kills the browser,
/// which chromedriver's death alone would leave running.
struct Browser {
    http: reqwest::Client,
    base: String,
    session: String,
    browser_pid: Option<u64>,
    _driver: tokio::process::Child,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(pid) = self.browser_pid.take() {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
    }
}

impl Browser {
    async fn start(chromium: &std::path::Path, chromedriver: &std::path::Path) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = tokio::process::Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start chromedriver");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = http.get(format!("{base}/status")).send().await {
                if let Ok(v) = r.json::<Value>().await {
                    if v["value"]["ready"] == true {
                        break;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not become ready on {base}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::Builder::new()
            .prefix("seqd-chromium-")
            .tempdir()
            .unwrap();
        let args = [
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-background-networking".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--hide-scrollbars".into(),
            "--window-size=1400,900".into(),
            "--lang=en-US".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": chromium, "args": args }
        }}});
        let resp: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let session = resp["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {resp}"))
            .to_string();
        let browser_pid = resp["value"]["capabilities"]["goog:processID"].as_u64();
        Browser {
            http,
            base,
            session,
            browser_pid,
            _driver: driver,
            _profile: profile,
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{}", self.base, self.session, path);
        let mut req = self.http.request(method, url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let ok = resp.status().is_success();
        let v: Value = resp.json().await.unwrap();
        assert!(ok, "WebDriver {path}: {v}");
        v["value"].clone()
    }

    async fn open(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    async fn eval(&self, script: &str) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({ "script": script, "args": [] })),
        )
        .await
    }

    /// Successful refreshes of the page so far.
    async fn refreshes(&self) -> u64 {
        self.eval("return Number(document.body.dataset.refreshes || 0)")
            .await
            .as_u64()
            .unwrap_or(0)
    }

    /// Waits until the page completed at least `n` refreshes.
    async fn wait_refreshes(&self, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.refreshes().await < n {
            assert!(
                Instant::now() < deadline,
                "the page did not refresh {n} times"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the page shows page `n` (1-based) of the sequences.
    async fn wait_page(&self, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let shown = || async {
            self.eval("return Number(document.body.dataset.page || 0)")
                .await
                .as_u64()
        };
        while shown().await != Some(n) {
            assert!(Instant::now() < deadline, "the page did not show page {n}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks the button with this id.
    async fn click(&self, id: &str) {
        self.eval(&format!("document.getElementById('{id}').click()"))
            .await;
    }

    /// Whether the button with this id is disabled.
    async fn disabled(&self, id: &str) -> bool {
        self.eval(&format!("return document.getElementById('{id}').disabled"))
            .await
            .as_bool()
            .unwrap()
    }

    /// Waits until the page shows page `n` (1-based) of the names starting
    /// with `prefix` ("": all names).
    async fn wait_view(&self, n: u64, prefix: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let want = json!([n.to_string(), prefix]);
        let script =
            "return [document.body.dataset.page || '', document.body.dataset.prefix || '']";
        loop {
            let shown = self.eval(script).await;
            if shown == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the page did not show page {n} of prefix {prefix:?}: {shown}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Types `text` into the element matching the CSS `selector`, as a
    /// user would (WebDriver key events: focus, keydown, input, keyup).
    async fn type_into(&self, selector: &str, text: &str) {
        let found = self
            .call(
                reqwest::Method::POST,
                "/element",
                Some(json!({ "using": "css selector", "value": selector })),
            )
            .await;
        let id = found
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {selector}: {found}"))
            .to_string();
        self.call(
            reqwest::Method::POST,
            &format!("/element/{id}/value"),
            Some(json!({ "text": text })),
        )
        .await;
    }

    async fn source(&self) -> String {
        self.call(reqwest::Method::GET, "/source", None)
            .await
            .as_str()
            .unwrap()
            .to_string()
    }

    async fn screenshot_png(&self) -> Vec<u8> {
        let b64 = self.call(reqwest::Method::GET, "/screenshot", None).await;
        base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap())
            .unwrap()
    }

    /// Ends the session: chromedriver quits the browser.
    async fn close(mut self) {
        let url = format!("{}/session/{}", self.base, self.session);
        if self
            .http
            .delete(url)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            self.browser_pid = None;
        }
    }
}

// ---------------------------------------------------------------- the DOM

/// A value shown on the page: `data-v` (raw) and the text a person reads.
#[derive(Debug, Clone)]
struct Shown {
    raw: String,
    text: String,
}

#[derive(Debug)]
struct PageRow {
    name: String,
    live: bool,
    status: String,
    cells: BTreeMap<String, Shown>,
}

fn decode(s: &str) -> String {
    s.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The value of attribute `name` in the tag text `tag`.
fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let len = tag[start..].find('"')?;
    Some(decode(&tag[start..start + len]))
}

/// Text of the element with `id` (a leaf element).
fn text_by_id(html: &str, id: &str) -> String {
    let key = format!("id=\"{id}\"");
    let at = html
        .find(&key)
        .unwrap_or_else(|| panic!("no #{id} in the page"));
    let open_end = at + html[at..].find('>').unwrap() + 1;
    let close = open_end + html[open_end..].find('<').unwrap();
    decode(&html[open_end..close])
}

/// The table rows: `<tr data-name=...>` with every `data-k` element inside.
fn parse_rows(html: &str) -> Vec<PageRow> {
    let mut rows = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find("<tr data-name=\"") {
        rest = &rest[i..];
        let open_end = rest.find('>').unwrap();
        let tag = &rest[..open_end];
        let end = rest.find("</tr>").expect("unclosed row");
        let mut body = &rest[open_end + 1..end];
        let mut cells = BTreeMap::new();
        while let Some(j) = body.find("data-k=\"") {
            let tag_start = body[..j].rfind('<').unwrap();
            let tag_end = j + body[j..].find('>').unwrap();
            let t = &body[tag_start..tag_end];
            let text_end = tag_end + 1 + body[tag_end + 1..].find('<').unwrap();
            let shown = Shown {
                raw: attr(t, "data-v").unwrap_or_default(),
                text: decode(&body[tag_end + 1..text_end]),
            };
            let key = attr(t, "data-k").unwrap();
            assert!(
                cells.insert(key.clone(), shown).is_none(),
                "{key} twice in a row"
            );
            body = &body[text_end..];
        }
        rows.push(PageRow {
            name: attr(tag, "data-name").unwrap(),
            live: attr(tag, "data-live").as_deref() == Some("1"),
            status: attr(tag, "data-status").unwrap(),
            cells,
        });
        rest = &rest[end..];
    }
    rows
}

impl PageRow {
    fn get(&self, key: &str) -> &Shown {
        self.cells
            .get(key)
            .unwrap_or_else(|| panic!("{}: no {key} on the page ({:?})", self.name, self.cells))
    }

    /// An integer cell: its raw value, checked against the digits shown.
    fn int(&self, key: &str) -> i128 {
        let s = self.get(key);
        let digits: String = s.text.chars().filter(char::is_ascii_digit).collect();
        assert_eq!(
            digits, s.raw,
            "{}: {key} shows {:?} for {}",
            self.name, s.text, s.raw
        );
        s.raw
            .parse()
            .unwrap_or_else(|e| panic!("{}: {key} = {:?}: {e}", self.name, s.raw))
    }

    fn float(&self, key: &str) -> f64 {
        self.get(key)
            .raw
            .parse()
            .unwrap_or_else(|e| panic!("{}: {key}: {e}", self.name))
    }
}

fn int_of(v: &Value) -> i128 {
    v.as_i64()
        .map(i128::from)
        .or_else(|| v.as_u64().map(i128::from))
        .unwrap_or_else(|| panic!("not an integer: {v}"))
}

// ---------------------------------------------------------------- the API

type Api = BTreeMap<String, Value>;

async fn api(srv: &TestServer) -> Api {
    let v = srv.get_json("/v1/sequences").await;
    v["sequences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

/// The API once no fetch is in flight.
async fn quiet_api(srv: &TestServer) -> Api {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let a = api(srv).await;
        if a.values()
            .all(|s| s["buffer"].is_null() || s["buffer"]["loading"] == false)
        {
            return a;
        }
        assert!(Instant::now() < deadline, "fetches still in flight");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The page's order: live sequences first, then the others; by name within each.
fn expected_order(a: &Api) -> Vec<String> {
    let mut names: Vec<_> = a
        .values()
        .map(|s| {
            (
                s["buffer"].is_null(),
                s["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    names.sort();
    names.into_iter().map(|(_, n)| n).collect()
}

/// The status colour the page must show for a buffer (see monitor.js).
fn expected_status(buf: &Value) -> &'static str {
    if buf.is_null() {
        "idle"
    } else if !buf["last_error"].is_null() {
        "error"
    } else if buf["loading"] == true {
        "loading"
    } else if (buf["current"].is_null() || buf["current"]["remaining"] == 0)
        && buf["next"].is_null()
    {
        "low"
    } else {
        "ok"
    }
}

async fn create(srv: &TestServer, name: &str, start: i64, step: i64) {
    let body =
        json!({ "name": name, "start": start, "step": step, "description": format!("{name} IDs") });
    create_from(srv, &body).await;
}

/// Creates the sequence `body` describes (201 asserted).
async fn create_from(srv: &TestServer, body: &Value) {
    let resp = srv
        .http
        .post(srv.url("/v1/sequences"))
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201, "create {body}");
}

/// Issues IDs from `path` until `stop`, pausing between requests; bounded in
/// time and count.
fn load(
    srv: &TestServer,
    path: String,
    pause: Duration,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<u64> {
    let http = srv.http.clone();
    let url = srv.url(&path);
    tokio::spawn(async move {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) && Instant::now() < deadline && n < 200_000 {
            let resp = http.get(&url).send().await.unwrap();
            assert_eq!(resp.status(), 200, "{url}");
            n += 1;
            tokio::time::sleep(pause).await;
        }
        n
    })
}

// ---------------------------------------------------------------- checks

/// Under load: same rows, exact row steps, growing numbers between `before`
/// and `after`.
fn check_under_load(rows: &[PageRow], before: &Api, after: &Api) {
    let names: Vec<_> = rows.iter().map(|r| r.name.clone()).collect();
    assert_eq!(names, expected_order(after), "rows");
    for row in rows {
        let (b, a) = (&before[&row.name], &after[&row.name]);
        assert_eq!(
            row.int("row_step"),
            int_of(&a["step"]),
            "{}: row step",
            row.name
        );
        let between = |key: &str, lo: &Value, hi: &Value| {
            let shown = row.int(key);
            assert!(
                int_of(lo) <= shown && shown <= int_of(hi),
                "{}: {key} {shown} not within [{lo}, {hi}]",
                row.name
            );
        };
        between("max_id", &b["max_id"], &a["max_id"]);
        assert_eq!(
            row.live,
            !a["buffer"].is_null() || !b["buffer"].is_null(),
            "{}: live",
            row.name
        );
        if !b["buffer"].is_null() {
            assert!(row.live, "{}: live before the page loaded", row.name);
            let (bb, ab) = (&b["buffer"], &a["buffer"]);
            between("issued", &bb["issued"], &ab["issued"]);
            between("fetches", &bb["fetches"], &ab["fetches"]);
            let (first, last) = (row.int("cur_first"), row.int("cur_last"));
            assert!(first <= last);
            if row.cells.contains_key("cursor") {
                let cursor = row.int("cursor");
                assert!(
                    first <= cursor && cursor <= last,
                    "{}: cursor {cursor} outside [{first}, {last}]",
                    row.name
                );
            }
        }
    }
}

/// At rest: every number shown equals the API's.
fn check_exact(rows: &[PageRow], before: &Api, after: &Api) {
    let names: Vec<_> = rows.iter().map(|r| r.name.clone()).collect();
    assert_eq!(names, expected_order(after), "rows");
    for row in rows {
        let (seq, buf) = (&after[&row.name], &after[&row.name]["buffer"]);
        assert_eq!(
            row.int("max_id"),
            int_of(&seq["max_id"]),
            "{}: max_id",
            row.name
        );
        assert_eq!(
            row.int("row_step"),
            int_of(&seq["step"]),
            "{}: row step",
            row.name
        );
        assert_eq!(row.live, !buf.is_null(), "{}: live", row.name);
        assert_eq!(row.status, expected_status(buf), "{}: status", row.name);
        assert_eq!(row.get("status").raw, row.status);
        if buf.is_null() {
            let keys: Vec<_> = row.cells.keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                ["max_id", "row_step", "status"],
                "{}: a row not served shows no buffer",
                row.name
            );
            continue;
        }
        let exact =
            |key: &str, v: &Value| assert_eq!(row.int(key), int_of(v), "{}: {key}", row.name);
        exact("step", &buf["current_step"]);
        exact("issued", &buf["issued"]);
        exact("fetches", &buf["fetches"]);
        exact("waits", &buf["waits"]);
        exact("errors", &buf["fetch_errors"]);
        let cur = &buf["current"];
        exact("cur_first", &cur["first"]);
        exact("cur_last", &cur["last"]);
        let len = int_of(&cur["last"]) - int_of(&cur["first"]) + 1;
        let used = if cur["cursor"].is_null() {
            assert!(!row.cells.contains_key("cursor"));
            len
        } else {
            exact("cursor", &cur["cursor"]);
            int_of(&cur["cursor"]) - int_of(&cur["first"])
        };
        let pct = (used * 10000 / len) as f64 / 100.0;
        assert!(
            (row.float("used_pct") - pct).abs() < 1e-9,
            "{}: used {} vs {pct}",
            row.name,
            row.float("used_pct")
        );
        let next = &row.get("next").raw;
        if buf["next"].is_null() {
            assert_eq!(
                next,
                if buf["loading"] == true {
                    "loading"
                } else {
                    "none"
                },
                "{}: next",
                row.name
            );
        } else {
            assert_eq!(next, "ready", "{}: next", row.name);
            exact("next_first", &buf["next"]["first"]);
            exact("next_last", &buf["next"]["last"]);
        }
        // serde_json parses floats to within an ulp (no `float_roundtrip`); JS exactly.
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0);
        let rate_est = row.float("rate_est");
        assert!(
            close(rate_est, buf["rate_per_sec"].as_f64().unwrap()),
            "{}: rate estimate {rate_est} vs {buf}",
            row.name
        );
        assert_eq!(
            row.float("rate"),
            0.0,
            "{}: no IDs issued between the last two refreshes",
            row.name
        );
        let fetch_ms = row.float("fetch_ms");
        assert!(
            close(fetch_ms, buf["last_fetch_latency_ms"].as_f64().unwrap()),
            "{}: last fetch latency {fetch_ms} vs {buf}",
            row.name
        );
        let ago: i128 = row.get("fetch_ago").raw.parse().unwrap(); // shown as "9 s ago"
        let (lo, hi) = (
            &before[&row.name]["buffer"]["last_fetch_ago_ms"],
            &buf["last_fetch_ago_ms"],
        );
        assert!(
            int_of(lo) <= ago && ago <= int_of(hi),
            "{}: last fetch {ago} ms ago not within [{lo}, {hi}]",
            row.name
        );
    }
}

fn artifact_path() -> PathBuf {
    // CARGO_TARGET_TMPDIR is <target>/tmp; artifacts go beside it.
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let dir = target.join("artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("monitor.png")
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(
        png.len() > 24 && png.starts_with(b"\x89PNG\r\n\x1a\n") && &png[12..16] == b"IHDR",
        "not a PNG"
    );
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

// ---------------------------------------------------------------- the test

/// The browser tools and a server on a fresh SQLite database (kept alive by
/// the returned `TestDb`), or `None` when the tools are missing.
async fn setup() -> Option<((PathBuf, PathBuf), common::TestDb, TestServer)> {
    let tools = browser_tools()?;
    let db = common::test_db(common::Backend::Sqlite)
        .await
        .expect("sqlite test database");
    let srv = TestServer::start(Settings::for_database(db.url.clone())).await;
    Some((tools, db, srv))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn monitor_page_shows_the_api_numbers_under_load_and_at_rest() {
    let Some(((chromium, chromedriver), _db, srv)) = setup().await else {
        return;
    };

    create(&srv, "order", 1, 1000).await;
    create(&srv, "payment", 1, 200).await;
    create(&srv, "user", 1_000_000, 500).await;
    create(&srv, "ledger", BEYOND_JS, 1000).await;
    create(&srv, "archive", 1, 100).await; // never served: shown greyed
    for _ in 0..3 {
        let r = srv
            .http
            .get(srv.url("/v1/sequences/ledger/next"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let loads = vec![
        load(
            &srv,
            "/v1/sequences/order/batch?count=50".into(),
            Duration::from_millis(1),
            stop.clone(),
        ),
        load(
            &srv,
            "/v1/sequences/payment/next".into(),
            Duration::from_millis(2),
            stop.clone(),
        ),
        load(
            &srv,
            "/v1/sequences/user/next".into(),
            Duration::from_millis(10),
            stop.clone(),
        ),
    ];
    // Let the load reach every sequence and move `order` past a few segments.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let a = api(&srv).await;
        let issued = |n: &str| a[n]["buffer"]["issued"].as_u64().unwrap_or(0);
        if issued("order") >= 20_000 && issued("payment") >= 100 && issued("user") >= 10 {
            break;
        }
        assert!(Instant::now() < deadline, "load too slow: {a:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let browser = Browser::start(&chromium, &chromedriver).await;

    // Under load.
    let before = api(&srv).await;
    browser.open(&srv.url("/")).await;
    browser.wait_refreshes(2).await; // two refreshes: the live rate is shown
    let html = browser.source().await;
    let after = api(&srv).await;
    let png = browser.screenshot_png().await;
    let shot = artifact_path();
    std::fs::write(&shot, &png).unwrap();
    eprintln!("screenshot: {}", shot.display());
    let (w, h) = png_size(&png);
    assert!(w >= 1000 && h >= 600, "screenshot is {w}x{h}");

    let rows = parse_rows(&html);
    check_under_load(&rows, &before, &after);
    let order = rows.iter().find(|r| r.name == "order").unwrap();
    assert!(
        order.float("rate") > 0.0,
        "order is under load: live rate {:?}",
        order.get("rate")
    );
    assert_eq!(text_by_id(&html, "backend"), "sqlite");
    assert_eq!(text_by_id(&html, "admin"), "open · loopback only");
    assert_eq!(
        text_by_id(&html, "version"),
        format!("v{}", env!("CARGO_PKG_VERSION"))
    );

    // At rest.
    stop.store(true, Ordering::Relaxed);
    for l in loads {
        assert!(l.await.unwrap() > 0);
    }
    let before = quiet_api(&srv).await;
    let seen = browser.refreshes().await;
    browser.wait_refreshes(seen + 2).await; // the last two started after the load stopped
    let html = browser.source().await;
    let after = quiet_api(&srv).await;
    for (name, s) in &after {
        assert_eq!(s["max_id"], before[name]["max_id"], "{name} moved at rest");
        assert_eq!(
            s["buffer"]["issued"], before[name]["buffer"]["issued"],
            "{name} moved at rest"
        );
    }
    let rows = parse_rows(&html);
    check_exact(&rows, &before, &after);
    let ledger = rows.iter().find(|r| r.name == "ledger").unwrap();
    assert_eq!(
        ledger.int("cur_first"),
        i128::from(BEYOND_JS),
        "IDs above 2^53 stay exact"
    );
    assert_eq!(ledger.get("cursor").raw, (BEYOND_JS + 3).to_string());
    assert_eq!(text_by_id(&html, "t-live"), "4");
    assert_eq!(text_by_id(&html, "t-total"), "5");

    browser.close().await;
    srv.stop().await;
}

/// The names of the rows shown, sorted.
fn shown_names(html: &str) -> Vec<String> {
    let mut names: Vec<String> = parse_rows(html).into_iter().map(|r| r.name).collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn monitor_page_shows_100_sequences_and_pages_with_next_and_previous() {
    let Some(((chromium, chromedriver), _db, srv)) = setup().await else {
        return;
    };
    let all: Vec<String> = (0..150).map(|i| format!("seq-{i:03}")).collect();
    for name in &all {
        srv.store
            .create(&common::new_seq(name, 1, 10))
            .await
            .unwrap();
    }

    let browser = Browser::start(&chromium, &chromedriver).await;
    browser.open(&srv.url("/")).await;
    browser.wait_page(1).await;
    assert_eq!(shown_names(&browser.source().await), all[..100]);
    assert!(browser.disabled("prev").await, "no page before the first");
    assert!(!browser.disabled("next").await, "more pages follow");

    browser.click("next").await;
    browser.wait_page(2).await;
    assert_eq!(shown_names(&browser.source().await), all[100..]);
    assert!(browser.disabled("next").await, "the last page");
    // The refresh keeps showing the same page.
    let seen = browser.refreshes().await;
    browser.wait_refreshes(seen + 1).await;
    let html = browser.source().await;
    assert_eq!(shown_names(&html), all[100..]);
    assert_eq!(text_by_id(&html, "t-total"), "50");

    browser.click("prev").await;
    browser.wait_page(1).await;
    assert_eq!(shown_names(&browser.source().await), all[..100]);

    browser.close().await;
    srv.stop().await;
}

/// A serial sequence's row shows its format, reset, current period and the
/// share of its `{seq:0N}` capacity reserved, as the API reports them; a
/// plain one shows none of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn monitor_page_shows_a_serial_sequences_period_and_fill() {
    let Some(((chromium, chromedriver), _db, srv)) = setup().await else {
        return;
    };
    let body = json!({ "name": "order", "step": 10, "format": "ORD{yyyy}{MM}{dd}{seq:03}",
        "reset": "day", "time_zone": "Asia/Shanghai" });
    create_from(&srv, &body).await;
    create(&srv, "plain", 1, 10).await;
    for path in ["order", "order", "order", "plain"] {
        let r = srv
            .http
            .get(srv.url(&format!("/v1/sequences/{path}/next")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let browser = Browser::start(&chromium, &chromedriver).await;
    browser.open(&srv.url("/")).await;
    browser.wait_page(1).await;
    // A prefetch finishing between two reads raises the counter: compare the
    // page with the API read the same before and after it (bounded).
    let read = || async { srv.get_json("/v1/sequences/order").await["period"].clone() };
    let mut stable = None;
    for _ in 0..10 {
        let before = read().await;
        // Two refreshes: the second one started after `before` was read.
        let seen = browser.refreshes().await;
        browser.wait_refreshes(seen + 2).await;
        let rows = parse_rows(&browser.source().await);
        if read().await == before {
            stable = Some((before, rows));
            break;
        }
    }
    let (period, rows) = stable.expect("the period settled");
    let period = &period;
    let key = period["key"].as_str().expect("a period once served");
    assert_eq!(key.len(), 8, "a day's key: {period}");
    let order = rows
        .iter()
        .find(|r| r.name == "order")
        .expect("order shown");
    assert_eq!(order.get("format").raw, "ORD{yyyy}{MM}{dd}{seq:03}");
    assert_eq!(order.get("period").raw, key);
    assert_eq!(order.int("counter"), int_of(&period["reserved_up_to"]));
    let fill = period["fill"].as_f64().expect("fill of a bounded counter");
    assert!(fill > 0.0 && fill <= 1.0, "{period}");
    assert!((order.float("fill") - fill).abs() < 1e-9, "{period}");
    assert!(
        order.get("fill").text.contains("of 999"),
        "{:?}",
        order.get("fill")
    );
    let plain = rows
        .iter()
        .find(|r| r.name == "plain")
        .expect("plain shown");
    for k in ["format", "period", "fill"] {
        assert!(!plain.cells.contains_key(k), "plain shows {k}");
    }
    browser.close().await;
    srv.stop().await;
}

/// How many elements of the document match the CSS `selector` (`*`: all).
async fn dom_count(browser: &Browser, selector: &str) -> u64 {
    browser
        .eval(&format!(
            "return document.querySelectorAll('{selector}').length"
        ))
        .await
        .as_u64()
        .unwrap()
}

/// The rows of the table shown (in the DOM, not only parsed from the source).
async fn dom_rows(browser: &Browser) -> u64 {
    dom_count(browser, "#rows tr").await
}

/// Asserts that every request for the list that this document made asked
/// for one page of 100 (the browser's resource timing entries).
async fn one_page_requests_only(browser: &Browser) {
    let requests = browser
        .eval(
            "return performance.getEntriesByType('resource').map((e) => e.name)\
             .filter((u) => u.includes('/v1/sequences'))",
        )
        .await;
    let requests: Vec<&str> = requests
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    assert!(!requests.is_empty());
    for url in &requests {
        assert!(url.contains("/v1/sequences?limit=100"), "{url}");
    }
}

/// `merchant-NNNNNN` for `range`, in byte order.
fn merchants(range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("merchant-{i:06}")).collect()
}

/// WebDriver's Escape key.
const ESCAPE: &str = "\u{E00C}";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn monitor_page_searches_and_pages_a_hundred_thousand_sequences_one_page_at_a_time() {
    use sqlx::Connection;

    let Some((chromium, chromedriver)) = browser_tools() else {
        return;
    };
    let db = common::test_db(common::Backend::Sqlite)
        .await
        .expect("sqlite test database");
    common::store(&db).await; // the schema
                              // 100,000 rows, inserted by SQL in one transaction before the server starts.
    let mut conn = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99999) \
         INSERT INTO sequences (name, max_id, step) \
         SELECT 'merchant-' || printf('%06d', i), 0, 1000 FROM n",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM sequences")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(count, 100_000);
    conn.close().await.unwrap();
    let srv = TestServer::start(Settings::for_database(db.url.clone())).await;

    let browser = Browser::start(&chromium, &chromedriver).await;
    browser.open(&srv.url("/")).await;
    browser.wait_view(1, "").await;
    // One page of rows, the first 100 names.
    assert_eq!(shown_names(&browser.source().await), merchants(0..100));
    assert_eq!(dom_rows(&browser).await, 100);
    let elements = dom_count(&browser, "*").await;
    assert!(browser.disabled("prev").await);
    assert!(!browser.disabled("next").await);

    // Typing a prefix shows its first page, only names starting with it.
    browser.type_into("#search", "merchant-042").await;
    browser.wait_view(1, "merchant-042").await;
    let html = browser.source().await;
    assert_eq!(shown_names(&html), merchants(42_000..42_100));
    for id in ["page-info", "view-info"] {
        assert_eq!(
            text_by_id(&html, id),
            "page 1 of names starting with “merchant-042” · merchant-042000 – merchant-042099"
        );
    }
    assert!(
        browser.disabled("prev").await,
        "a new prefix starts at its first page"
    );

    // Next pages within the prefix; the DOM stays one page.
    for page in 2..=4u32 {
        browser.click("next").await;
        browser.wait_view(u64::from(page), "merchant-042").await;
        let from = 42_000 + (page - 1) * 100;
        assert_eq!(
            shown_names(&browser.source().await),
            merchants(from..from + 100),
            "page {page}"
        );
        assert_eq!(dom_rows(&browser).await, 100);
        assert!(!browser.disabled("prev").await);
    }
    browser.click("prev").await;
    browser.wait_view(3, "merchant-042").await;
    assert_eq!(
        shown_names(&browser.source().await),
        merchants(42_200..42_300)
    );

    // A longer prefix starts again at page 1; exactly one page: no next.
    browser.type_into("#search", "1").await;
    browser.wait_view(1, "merchant-0421").await;
    assert_eq!(
        shown_names(&browser.source().await),
        merchants(42_100..42_200)
    );
    assert!(browser.disabled("next").await, "the prefix's only page");
    assert!(browser.disabled("prev").await);

    // A prefix nothing starts with.
    browser
        .type_into("#search", &format!("{ESCAPE}nomatch"))
        .await;
    browser.wait_view(1, "nomatch").await;
    let html = browser.source().await;
    assert!(shown_names(&html).is_empty());
    let hidden = |id: &str| {
        let id = id.to_string();
        let browser = &browser;
        async move {
            browser
                .eval(&format!("return document.getElementById('{id}').hidden"))
                .await
                .as_bool()
                .unwrap()
        }
    };
    assert!(!hidden("no-match").await && hidden("empty").await);
    assert_eq!(text_by_id(&html, "no-match-prefix"), "nomatch");

    // Escape clears the search: all names again; text that cannot start a
    // name is flagged and changes nothing.
    browser.type_into("#search", ESCAPE).await;
    browser.wait_view(1, "").await;
    assert_eq!(shown_names(&browser.source().await), merchants(0..100));
    browser.type_into("#search", "-x").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while hidden("search-hint").await {
        assert!(
            Instant::now() < deadline,
            "an invalid prefix is not flagged"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seen = browser.refreshes().await;
    browser.wait_refreshes(seen + 1).await;
    browser.wait_view(1, "").await;
    assert_eq!(shown_names(&browser.source().await), merchants(0..100));

    one_page_requests_only(&browser).await;

    // A link with the prefix in the page's query string opens its view.
    browser.open(&srv.url("/?prefix=merchant-0999")).await;
    browser.wait_view(1, "merchant-0999").await;
    assert_eq!(
        shown_names(&browser.source().await),
        merchants(99_900..100_000)
    );
    assert!(browser.disabled("next").await);

    // After all that, still one page in the DOM, and every list request of
    // both documents asked for one page.
    assert_eq!(dom_rows(&browser).await, 100);
    assert!(
        dom_count(&browser, "*").await <= elements + 50,
        "the DOM grew"
    );
    one_page_requests_only(&browser).await;

    let png = browser.screenshot_png().await;
    let shot = artifact_path().with_file_name("monitor-search.png");
    std::fs::write(&shot, &png).unwrap();
    eprintln!("screenshot: {}", shot.display());

    browser.close().await;
    srv.stop().await;
}
