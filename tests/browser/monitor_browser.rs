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

use crate::support::common;
use crate::support::monitor;
use crate::support::server;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::lock::HeldLock;
use monitor::browser::{artifact_path, browser_tools, png_size, Browser};
use monitor::page::{
    api, check_exact, check_under_load, create_from, int_of, load, parse_rows, quiet_api,
    text_by_id,
};
use seqd::config::Settings;
use serde_json::json;
use server::TestServer;
use tokio::time::Instant;

/// 2^53 + 1: the first integer a JavaScript number cannot hold.
pub(super) const BEYOND_JS: i64 = 9_007_199_254_740_993;

// ---------------------------------------------------------------- the test

/// The browser tools and a fresh SQLite database, or `None` when the tools
/// are missing.
pub(super) async fn tools_and_db() -> Option<((PathBuf, PathBuf), common::TestDb)> {
    let tools = browser_tools()?;
    let db = common::test_db(common::Backend::Sqlite)
        .await
        .expect("sqlite test database");
    Some((tools, db))
}

/// The browser tools and a server on a fresh SQLite database (kept alive by
/// the returned `TestDb`), or `None` when the tools are missing.
pub(super) async fn setup() -> Option<((PathBuf, PathBuf), common::TestDb, TestServer)> {
    let (tools, db) = tools_and_db().await?;
    let srv = TestServer::start(Settings::for_database(db.url.clone())).await;
    Some((tools, db, srv))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn monitor_page_shows_the_api_numbers_under_load_and_at_rest() {
    let Some(((chromium, chromedriver), _db, srv)) = setup().await else {
        return;
    };

    srv.create("order", 1, 1000).await;
    srv.create("payment", 1, 200).await;
    srv.create("user", 1_000_000, 500).await;
    srv.create("ledger", BEYOND_JS, 1000).await;
    srv.create("archive", 1, 100).await; // never served: shown greyed
    for _ in 0..3 {
        let r = srv.get("/v1/sequences/ledger/next").await;
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

/// A serial sequence's row shows its format, reset, current period, the
/// serials issued there and, said to be reserved, the top counter reserved
/// and the share of its `{seq:0N}` capacity that takes, as the API reports
/// them (not its own row's `max_id`, which never moves), and the state of
/// the period counter that issued its serials; a plain one shows none of
/// the period; a global one, no segment, no step, no estimate, but its IDs
/// issued, its reservations and the IDs per reservation.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn monitor_page_shows_a_serial_sequences_period_and_fill() {
    let Some(((chromium, chromedriver), _db, srv)) = setup().await else {
        return;
    };
    let body = json!({ "name": "order", "step": 10, "format": "ORD{yyyy}{MM}{dd}{seq:03}",
        "reset": "day", "time_zone": "Asia/Shanghai" });
    create_from(&srv, &body).await;
    srv.create("plain", 1, 10).await;
    create_from(&srv, &json!({ "name": "glob", "ordering": "global" })).await;
    for path in ["order", "order", "order", "plain", "glob", "glob", "glob"] {
        let r = srv.get(&format!("/v1/sequences/{path}/next")).await;
        assert_eq!(r.status(), 200);
    }
    let browser = Browser::start(&chromium, &chromedriver).await;
    browser.open(&srv.url("/")).await;
    browser.wait_page(1).await;
    // A prefetch finishing between two reads raises the counter: compare the
    // page with the API read the same before and after it (bounded).
    let read = || async {
        let order = srv.get_json("/v1/sequences/order").await;
        (order["period"].clone(), order["buffer"]["issued"].clone())
    };
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
    let ((period, issued), rows) = stable.expect("the period settled");
    let period = &period;
    let key = period["key"].as_str().expect("a period once served");
    assert_eq!(key.len(), 8, "a day's key: {period}");
    let order = rows
        .iter()
        .find(|r| r.name == "order")
        .expect("order shown");
    assert_eq!(order.get("format").raw, "ORD{yyyy}{MM}{dd}{seq:03}");
    // Its buffer state is the period counter's, which issued the serials:
    // not the settings row's, which issues nothing.
    assert!(order.int("issued") > 0, "{:?}", order.get("issued"));
    assert_eq!(order.get("status").raw, "ok");
    assert_eq!(order.get("period").raw, key);
    // Issued is what was issued; reserved is said to be reserved; the max ID
    // column shows the counter's top reserved, not the settings row's 0.
    assert_eq!(order.int("issued"), int_of(&issued));
    assert_eq!(order.int("period_issued"), int_of(&issued));
    let reserved = int_of(&period["reserved_up_to"]);
    assert!(
        reserved > int_of(&issued),
        "a segment reserved ahead: {period}"
    );
    assert_eq!(order.int("reserved"), reserved);
    assert_eq!(order.int("counter_top"), reserved);
    assert!(!order.cells.contains_key("max_id"), "{:?}", order.cells);
    let line = browser
        .eval("return document.querySelector('tr[data-name=\"order\"] .serial').textContent")
        .await;
    let line = line.as_str().unwrap();
    assert!(
        line.contains(&format!(" · {issued} issued · reserved to {reserved} (")),
        "{line}"
    );
    assert!(!line.contains('#'), "{line}");
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
    // A global sequence keeps no segment: shown as such, with its IDs and
    // reservations (one per request: they came one at a time), and ok.
    let glob = rows.iter().find(|r| r.name == "glob").expect("glob shown");
    assert_eq!(glob.get("ordering").raw, "global");
    assert_eq!(glob.int("issued"), 3);
    let api_glob = srv.get_json("/v1/sequences/glob").await["buffer"].clone();
    assert_eq!(glob.int("reservations"), int_of(&api_glob["fetches"]));
    assert_eq!(glob.int("reservations"), 3, "{api_glob}");
    assert_eq!(glob.float("ids_per_reservation"), 1.0);
    let said = browser
        .eval("return document.querySelector('tr[data-name=\"glob\"] [data-k=\"ids_per_reservation\"]').parentElement.textContent")
        .await;
    assert_eq!(said, "1 ID per reservation");
    assert_eq!(glob.get("status").raw, "ok");
    global_row_says_nothing_false(&browser, "glob").await;
    browser.close().await;
    srv.stop().await;
}

/// Asserts that a global sequence's row shows no segment numbers: a dash
/// for the step (it fetches no segment) and for the estimate, no fetches,
/// and its IDs per reservation said in good English.
async fn global_row_says_nothing_false(browser: &Browser, name: &str) {
    let row = browser
        .eval(&format!(
            "const r = document.querySelector('tr[data-name=\"{name}\"]');\
             return {{ text: r.textContent, step: r.cells[2].textContent, rate: r.cells[5].textContent,\
               keys: [...r.querySelectorAll('[data-k]')].map((e) => e.dataset.k) }};"
        ))
        .await;
    let text = row["text"].as_str().unwrap();
    for wrong in ["est. 0", "IDs a reservation", "fetch"] {
        assert!(!text.contains(wrong), "{wrong:?} in {row}");
    }
    assert!(text.contains(" per reservation"), "{row}");
    assert!(row["step"].as_str().unwrap().starts_with('—'), "{row}");
    assert!(row["rate"].as_str().unwrap().ends_with('—'), "{row}");
    for absent in ["step", "rate_est", "fetches", "waits"] {
        assert!(
            !row["keys"].as_array().unwrap().contains(&json!(absent)),
            "{absent}: {row}"
        );
    }
}

/// A global sequence under load (every request reserved from the database,
/// no segment): the instance's totals count its reservations apart from
/// segment fetches, so the chart draws its rate with no segment-fetch mark;
/// its row shows reservations and the IDs per reservation that the API's
/// numbers give, and no step, estimate or fetches.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn monitor_page_shows_global_reservations_as_no_segment_fetches() {
    let Some(((chromium, chromedriver), _db, srv)) = setup().await else {
        return;
    };
    create_from(&srv, &json!({ "name": "glob", "ordering": "global" })).await;
    // Its first use: the segment fetched finds the row global (given back).
    assert_eq!(srv.get("/v1/sequences/glob/next").await.status(), 200);
    let stop = Arc::new(AtomicBool::new(false));
    let path = "/v1/sequences/glob/next".to_string();
    let load = load(&srv, path, Duration::from_millis(5), stop.clone());
    let before = srv.get_json("/v1/info").await["totals"].clone();
    let browser = Browser::start(&chromium, &chromedriver).await;
    browser.open(&srv.url("/")).await;
    browser.wait_refreshes(5).await;
    let chart = browser
        .eval(
            "const c = document.querySelector('#chart svg');\
             return { points: Number(c.dataset.points), max: Number(c.dataset.max),\
               fetchMarks: Number(c.dataset.fetchMarks), circles: c.querySelectorAll('circle.m-fetch').length };",
        )
        .await;
    let api_before = api(&srv).await;
    let seen = browser.refreshes().await;
    browser.wait_refreshes(seen + 2).await; // the last one started after `api_before`
    let html = browser.source().await;
    let api_after = api(&srv).await;
    let after = srv.get_json("/v1/info").await["totals"].clone();
    assert!(chart["points"].as_u64().unwrap() >= 3, "{chart}");
    assert!(
        chart["max"].as_f64().unwrap() > 0.0,
        "the load is drawn: {chart}"
    );
    assert_eq!(
        chart["fetchMarks"], 0,
        "reservations drawn as fetches: {chart}"
    );
    assert_eq!(chart["circles"], 0, "{chart}");
    // The API: reservations made, no segment fetched meanwhile.
    assert_eq!(
        after["segment_fetches"], before["segment_fetches"],
        "{after}"
    );
    assert!(
        after["global_reservations"].as_u64().unwrap()
            > before["global_reservations"].as_u64().unwrap(),
        "{before} {after}"
    );
    // The row, under load: its reservations as the API counted them.
    let rows = parse_rows(&html);
    let glob = rows.iter().find(|r| r.name == "glob").expect("glob shown");
    let shown = glob.int("reservations");
    let fetches = |a: &monitor::page::Api| int_of(&a["glob"]["buffer"]["fetches"]);
    assert!(
        fetches(&api_before) <= shown && shown <= fetches(&api_after),
        "{shown}"
    );
    assert!(glob.float("ids_per_reservation") >= 1.0);
    global_row_says_nothing_false(&browser, "glob").await;
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();
    // At rest: the API's numbers exactly.
    let seen = browser.refreshes().await;
    browser.wait_refreshes(seen + 2).await;
    let buf = srv.get_json("/v1/sequences/glob").await["buffer"].clone();
    let rows = parse_rows(&browser.source().await);
    let glob = rows.iter().find(|r| r.name == "glob").expect("glob shown");
    assert_eq!(glob.int("issued"), int_of(&buf["issued"]));
    assert_eq!(glob.int("reservations"), int_of(&buf["fetches"]));
    let mean = buf["issued"].as_f64().unwrap() / buf["fetches"].as_f64().unwrap();
    assert!(
        (glob.float("ids_per_reservation") - mean).abs() <= 1e-9 * mean,
        "{buf}"
    );
    browser.close().await;
    srv.stop().await;
}

/// How many elements of the document match the CSS `selector` (`*`: all).
pub(super) async fn dom_count(browser: &Browser, selector: &str) -> u64 {
    browser
        .eval(&format!(
            "return document.querySelectorAll('{selector}').length"
        ))
        .await
        .as_u64()
        .unwrap()
}

/// The rows of the table shown (in the DOM, not only parsed from the source).
pub(super) async fn dom_rows(browser: &Browser) -> u64 {
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
pub(super) fn merchants(range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("merchant-{i:06}")).collect()
}

/// WebDriver's Escape key.
const ESCAPE: &str = "\u{E00C}";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn monitor_page_searches_and_pages_a_hundred_thousand_sequences_one_page_at_a_time() {
    use sqlx::Connection;

    let Some(((chromium, chromedriver), db)) = tools_and_db().await else {
        return;
    };
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

/// Under `--client-auth on` the page says a token is needed, and opened as
/// `/#token=...` lists what that token may read, and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn monitor_page_under_client_auth_lists_what_its_token_reads() {
    let Some(((chromium, chromedriver), db)) = tools_and_db().await else {
        return;
    };
    let srv = TestServer::start(Settings {
        client_auth: seqd::service::ClientAuth::On,
        ..Settings::for_database(db.url.clone())
    })
    .await;
    // Admin calls are open on the loopback listener (no admin token).
    srv.create("shop1-order", 1, 10).await;
    srv.create("shop2-order", 1, 10).await;
    let made = srv
        .send_json(
            reqwest::Method::POST,
            "/v1/tokens",
            &json!({"label": "monitor", "prefixes": ["shop1-"], "rights": ["read"]}),
        )
        .await;
    assert_eq!(made.status(), 201);
    let token = made.json::<serde_json::Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();

    let browser = Browser::start(&chromium, &chromedriver).await;
    browser.open(&srv.url("/")).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !browser.source().await.contains("client tokens are on") {
        assert!(
            Instant::now() < deadline,
            "the page does not say a token is needed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    browser
        .open(&srv.url(&format!("/?from=link#token={token}")))
        .await;
    browser.wait_page(1).await;
    browser.wait_refreshes(1).await;
    let html = browser.source().await;
    assert_eq!(shown_names(&html), ["shop1-order"]);
    assert!(!html.contains(&token), "the token stays out of the page");
    browser.close().await;
    srv.stop().await;
}

/// Over stripes (the real binary on two SQLite databases, the first one's
/// write lock held by another connection while the next segment is
/// fetched), each segment of a row says which stripe it came from, as the
/// API's `stripes` does: stripe 1 and stripe 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn monitor_page_shows_the_stripe_each_segment_came_from() {
    let Some((tools, one)) = tools_and_db().await else {
        return;
    };
    let (chromium, chromedriver) = tools;
    let two = common::test_db(common::Backend::Sqlite)
        .await
        .expect("sqlite test database");
    let p = server::Process::spawn(&format!("{} {}", one.url, two.url), &[]).await;
    let http = server::client(Duration::from_secs(30));
    server::create_at(&http, &p.base, "order", 1, 10).await;
    // The first segment from stripe 1 (index 0), which serves while it
    // answers; then another connection holds its write lock, so the
    // prefetch that the second ID starts fails over to stripe 2: the two
    // segments of the row come from different stripes.
    assert_eq!(server::next_at(&http, &p.base, "order").await, 1);
    let lock = HeldLock::take(&one, "order").await;
    assert_eq!(server::next_at(&http, &p.base, "order").await, 2);
    let deadline = Instant::now() + Duration::from_secs(20);
    let stripes = loop {
        let seq = server::fetch_json(http.get(format!("{}/v1/sequences/order", p.base))).await;
        if !seq["buffer"]["next"].is_null() && seq["buffer"]["loading"] == false {
            break seq["stripes"].clone();
        }
        assert!(Instant::now() < deadline, "no next segment: {seq}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    lock.release().await;
    assert_eq!(stripes, json!({"current": 0, "next": 1}));
    let want: Vec<String> = ["current", "next"]
        .iter()
        .map(|k| stripes[k].as_u64().expect("a stripe index").to_string())
        .collect();
    let browser = Browser::start(&chromium, &chromedriver).await;
    browser.open(&format!("{}/", p.base)).await;
    browser.wait_refreshes(2).await;
    let shown = browser
        .eval(
            "return [...document.querySelectorAll('tr[data-name=\"order\"] [data-k=\"stripe\"]')]\
             .map((e) => [e.dataset.v, e.textContent]);",
        )
        .await;
    let expected: Vec<serde_json::Value> = want
        .iter()
        .map(|v| json!([v, format!("stripe {}", v.parse::<u64>().unwrap() + 1)]))
        .collect();
    assert_eq!(shown, json!(expected), "{stripes}");
    browser.close().await;
    p.kill().await;
}

/// An instance restarted behind the open page (SIGTERM, as an orchestrator
/// stops it, then a new process on the same address and database): the
/// page follows the new process (its `started_at`), its tile shows the new
/// process's IDs drawn, and no chart point is drawn from the totals of two
/// processes (one point fewer than refreshes after the first of each).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn monitor_page_follows_a_restart_of_the_instance() {
    let Some((tools, db)) = tools_and_db().await else {
        return;
    };
    let (chromium, chromedriver) = tools;
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .to_string();
    let first = server::Process::spawn(&db.url, &["--listen", &addr]).await;
    let http = server::client(Duration::from_secs(30));
    server::create_at(&http, &first.base, "order", 1, 100).await;
    for want in 1..=5 {
        assert_eq!(server::next_at(&http, &first.base, "order").await, want);
    }
    let browser = Browser::start(&chromium, &chromedriver).await;
    browser.open(&format!("{}/", first.base)).await;
    browser.wait_refreshes(3).await;
    let read = "const c = document.querySelector('#chart svg');\
                return { started: document.body.dataset.started, refreshes: Number(document.body.dataset.refreshes),\
                  points: Number(c.dataset.points), drawn: document.getElementById('t-issued').dataset.v };";
    let before = browser.eval(read).await;
    assert_eq!(before["drawn"], "5", "{before}");
    assert_eq!(
        before["points"].as_u64().unwrap() + 1,
        before["refreshes"].as_u64().unwrap(),
        "{before}"
    );
    first.signal("TERM");
    let mut first = first;
    assert!(first.wait().await.success(), "a clean stop at SIGTERM");
    let second = server::Process::spawn(&db.url, &["--listen", &addr]).await;
    // The first process gave its unused IDs back at SIGTERM.
    for want in 6..=7 {
        assert_eq!(server::next_at(&http, &second.base, "order").await, want);
    }
    let seen = before["refreshes"].as_u64().unwrap();
    browser.wait_refreshes(seen + 3).await;
    let after = browser.eval(read).await;
    assert_ne!(after["started"], before["started"], "{after}");
    assert_eq!(after["drawn"], "2", "{after}");
    assert_eq!(
        after["points"].as_u64().unwrap() + 2,
        after["refreshes"].as_u64().unwrap(),
        "no point across the restart: {after}"
    );
    browser.close().await;
    second.kill().await;
}
