//! Headless Chromium driven through chromedriver (W3C WebDriver over HTTP),
//! for the monitor page's tests; and where their screenshots go.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::support::common;
use crate::support::server::fetch_json;

pub(crate) fn find_in_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

/// Chromium and chromedriver, or `None` after printing `skipped: ...`.
pub(crate) fn browser_tools() -> Option<(PathBuf, PathBuf)> {
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
pub(crate) struct Browser {
    pub(crate) http: reqwest::Client,
    pub(crate) base: String,
    pub(crate) session: String,
    pub(crate) browser_pid: Option<u64>,
    pub(crate) _driver: tokio::process::Child,
    pub(crate) _profile: tempfile::TempDir,
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
    pub(crate) async fn start(
        chromium: &std::path::Path,
        chromedriver: &std::path::Path,
    ) -> Browser {
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
        let http = crate::support::server::client(Duration::from_secs(60));
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
        let resp = fetch_json(http.post(format!("{base}/session")).json(&caps)).await;
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

    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Value {
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

    pub(crate) async fn open(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    pub(crate) async fn eval(&self, script: &str) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({ "script": script, "args": [] })),
        )
        .await
    }

    /// Successful refreshes of the page so far.
    pub(crate) async fn refreshes(&self) -> u64 {
        self.eval("return Number(document.body.dataset.refreshes || 0)")
            .await
            .as_u64()
            .unwrap_or(0)
    }

    /// Waits until the page completed at least `n` refreshes.
    pub(crate) async fn wait_refreshes(&self, n: u64) {
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
    pub(crate) async fn wait_page(&self, n: u64) {
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
    pub(crate) async fn click(&self, id: &str) {
        self.eval(&format!("document.getElementById('{id}').click()"))
            .await;
    }

    /// Whether the button with this id is disabled.
    pub(crate) async fn disabled(&self, id: &str) -> bool {
        self.eval(&format!("return document.getElementById('{id}').disabled"))
            .await
            .as_bool()
            .unwrap()
    }

    /// Waits until the page shows page `n` (1-based) of the names starting
    /// with `prefix` ("": all names).
    pub(crate) async fn wait_view(&self, n: u64, prefix: &str) {
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
    pub(crate) async fn type_into(&self, selector: &str, text: &str) {
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

    pub(crate) async fn source(&self) -> String {
        self.call(reqwest::Method::GET, "/source", None)
            .await
            .as_str()
            .unwrap()
            .to_string()
    }

    pub(crate) async fn screenshot_png(&self) -> Vec<u8> {
        let b64 = self.call(reqwest::Method::GET, "/screenshot", None).await;
        base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap())
            .unwrap()
    }

    /// Ends the session: chromedriver quits the browser.
    pub(crate) async fn close(mut self) {
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

pub(crate) fn artifact_path() -> PathBuf {
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
pub(crate) fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(
        png.len() > 24 && png.starts_with(b"\x89PNG\r\n\x1a\n") && &png[12..16] == b"IHDR",
        "not a PNG"
    );
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}
