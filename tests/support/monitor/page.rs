//! The monitor page as the tests read it (its rows parsed from the DOM),
//! the API's numbers it is compared with, the load that moves them, and the
//! comparisons themselves.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::support::server::TestServer;

// ---------------------------------------------------------------- the DOM

/// A value shown on the page: `data-v` (raw) and the text a person reads.
#[derive(Debug, Clone)]
pub(crate) struct Shown {
    pub(crate) raw: String,
    pub(crate) text: String,
}

#[derive(Debug)]
pub(crate) struct PageRow {
    pub(crate) name: String,
    pub(crate) live: bool,
    pub(crate) status: String,
    pub(crate) cells: BTreeMap<String, Shown>,
}

pub(crate) fn decode(s: &str) -> String {
    s.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The value of attribute `name` in the tag text `tag`.
pub(crate) fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let len = tag[start..].find('"')?;
    Some(decode(&tag[start..start + len]))
}

/// Text of the element with `id` (a leaf element).
pub(crate) fn text_by_id(html: &str, id: &str) -> String {
    let key = format!("id=\"{id}\"");
    let at = html
        .find(&key)
        .unwrap_or_else(|| panic!("no #{id} in the page"));
    let open_end = at + html[at..].find('>').unwrap() + 1;
    let close = open_end + html[open_end..].find('<').unwrap();
    decode(&html[open_end..close])
}

/// The table rows: `<tr data-name=...>` with every `data-k` element inside.
pub(crate) fn parse_rows(html: &str) -> Vec<PageRow> {
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
    pub(crate) fn get(&self, key: &str) -> &Shown {
        self.cells
            .get(key)
            .unwrap_or_else(|| panic!("{}: no {key} on the page ({:?})", self.name, self.cells))
    }

    /// An integer cell: its raw value, checked against the digits shown.
    pub(crate) fn int(&self, key: &str) -> i128 {
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

    pub(crate) fn float(&self, key: &str) -> f64 {
        self.get(key)
            .raw
            .parse()
            .unwrap_or_else(|e| panic!("{}: {key}: {e}", self.name))
    }
}

pub(crate) fn int_of(v: &Value) -> i128 {
    v.as_i64()
        .map(i128::from)
        .or_else(|| v.as_u64().map(i128::from))
        .unwrap_or_else(|| panic!("not an integer: {v}"))
}

// ---------------------------------------------------------------- the API

pub(crate) type Api = BTreeMap<String, Value>;

pub(crate) async fn api(srv: &TestServer) -> Api {
    let v = srv.get_json("/v1/sequences").await;
    v["sequences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

/// The API once no fetch is in flight.
pub(crate) async fn quiet_api(srv: &TestServer) -> Api {
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
pub(crate) fn expected_order(a: &Api) -> Vec<String> {
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
pub(crate) fn expected_status(buf: &Value) -> &'static str {
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

/// Creates the sequence `body` describes (201 asserted).
pub(crate) async fn create_from(srv: &TestServer, body: &Value) {
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
pub(crate) fn load(
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
pub(crate) fn check_under_load(rows: &[PageRow], before: &Api, after: &Api) {
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
pub(crate) fn check_exact(rows: &[PageRow], before: &Api, after: &Api) {
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
