//! The monitor page's pictures and layout in a real browser (headless
//! Chromium through chromedriver, as monitor_browser.rs drives it): the rate
//! chart and sparklines drawn from live data against the API's totals, the
//! header on one line and nothing overflowing at 1,280 and 1,000 px, and a
//! page of 1,000 sequences.

use crate::support::monitor;
use crate::support::server;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use monitor::browser::{artifact_path, Browser};
use monitor::page::{create_from, load};
use seqd::config::Settings;
use serde_json::json;
use server::TestServer;

use super::monitor_browser::{dom_count, dom_rows, merchants, setup, tools_and_db, BEYOND_JS};

/// Rates as pictures, drawn from live data: under load, a served sequence's
/// row carries a sparkline of its IDs/s over the refreshes seen, 120 x 32
/// px, its line spanning it below its top edge, and the chart above the
/// table the instance's IDs/s with the refreshes in which segments were
/// fetched marked (a step of at most 10 IDs fetches on every refresh), a y
/// axis whose round top is above the highest rate drawn from the API's
/// totals, times of day in the window drawn, and the current rate labelled;
/// also on a page without the sequence drawn from; at rest its tile shows
/// the API's total of IDs drawn. At 1,280 px wide nothing overflows the
/// page; at 1,000 px the header stays one line, RESP address and all.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn monitor_page_draws_rates_from_live_data_and_fits_1280_px() {
    let Some((tools, db)) = tools_and_db().await else {
        return;
    };
    let (chromium, chromedriver) = tools;
    let mut settings = Settings::for_database(db.url.clone());
    settings.allocator.max_step = 10;
    // The RESP door on: its address is the header's widest pill.
    settings.resp_listen = Some("127.0.0.1:0".into());
    let srv = TestServer::start(settings).await;
    srv.create("order", 1, 10).await;
    srv.create("idle-one", 1, 10).await;
    // The widest rows: IDs past 2^53 and a serial sequence's line.
    srv.create("ledger-of-a-tenant-with-a-long-name", BEYOND_JS, 10)
        .await;
    let body = json!({ "name": "receipt", "step": 10, "format": "RC{yyyy}{MM}{dd}-{seq:05}",
        "reset": "day", "description": "receipts of every shop, numbered per day" });
    create_from(&srv, &body).await;
    for path in ["ledger-of-a-tenant-with-a-long-name", "receipt"] {
        let r = srv.get(&format!("/v1/sequences/{path}/next")).await;
        assert_eq!(r.status(), 200);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let load = load(
        &srv,
        "/v1/sequences/order/next".into(),
        Duration::from_millis(2),
        stop.clone(),
    );
    let browser = Browser::start(&chromium, &chromedriver).await;
    resize(&browser, 1280).await;
    let drawn_before = srv.get_json("/v1/info").await["totals"]["ids_drawn"].clone();
    let opened = epoch_ms();
    browser.open(&srv.url("/")).await;
    browser.wait_refreshes(5).await;
    let spark = browser
        .eval(
            "const s = document.querySelector('tr[data-name=\"order\"] svg[data-k=\"spark\"]');\
             return s && { points: Number(s.dataset.points), max: Number(s.dataset.max),\
               lines: s.querySelectorAll('polyline').length };",
        )
        .await;
    assert!(spark["points"].as_u64().unwrap() >= 3, "{spark}");
    assert!(spark["max"].as_f64().unwrap() > 0.0, "{spark}");
    assert_eq!(spark["lines"], 1, "{spark}");
    chart_shows_the_load(&browser).await;
    chart_axes_match_the_api(&browser, &srv, &drawn_before, opened).await;
    sparkline_shows_a_shape(&browser, "order").await;
    // A sequence never served has no sparkline.
    assert_eq!(
        dom_count(&browser, "tr[data-name=\"idle-one\"] svg").await,
        0
    );
    // 1,280 px: no horizontal overflow, every column shown.
    let png = browser.screenshot_png().await;
    let shot = artifact_path();
    std::fs::write(&shot, &png).unwrap();
    eprintln!("screenshot at 1,280 px: {}", shot.display());
    assert_eq!(fits(&browser, 1280.0).await, 0, "every column shown");
    // Narrower, the less important columns fold away and the rest fit.
    resize(&browser, 1000).await;
    assert_eq!(
        fits(&browser, 1000.0).await,
        2,
        "max ID and last fetch fold"
    );
    header_is_one_line(&browser).await;
    let seen = browser.refreshes().await;
    browser.wait_refreshes(seen + 1).await; // drawn at this width
    sparkline_shows_a_shape(&browser, "order").await;
    chart_axes_match_the_api(&browser, &srv, &drawn_before, opened).await;
    let png = browser.screenshot_png().await;
    let shot = artifact_path().with_file_name("monitor-1000.png");
    std::fs::write(&shot, &png).unwrap();
    eprintln!("screenshot at 1,000 px: {}", shot.display());
    // The chart and the tiles are the instance's: on a page whose only row
    // (`idle-one`) draws nothing, the chart still shows the load of `order`.
    resize(&browser, 1280).await;
    browser.open(&srv.url("/?prefix=idle")).await;
    browser.wait_refreshes(5).await;
    assert_eq!(dom_rows(&browser).await, 1);
    chart_shows_the_load(&browser).await;
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();
    // At rest, the tiles show the instance's IDs drawn and names live, as
    // the API does (four names: the serial sequence's period counter too).
    let totals = srv.get_json("/v1/info").await["totals"].clone();
    assert_eq!(totals["live_names"], 4, "{totals}");
    let seen = browser.refreshes().await;
    browser.wait_refreshes(seen + 2).await;
    let shown = browser
        .eval(
            "return ['t-issued', 't-memory'].map((id) => Number(document.getElementById(id).dataset.v))",
        )
        .await;
    assert_eq!(
        shown,
        json!([totals["ids_drawn"], totals["live_names"]]),
        "{totals}"
    );
    browser.close().await;
    srv.stop().await;
}

/// Milliseconds since 1970 on this machine's clock (the browser's too).
fn epoch_ms() -> f64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    since.as_millis() as f64
}

/// A number as an axis label writes it (`1,500`, `25k`, `1.2M`).
fn axis_number(text: &str) -> f64 {
    let t = text.replace(',', "");
    let (digits, times) = match t.strip_suffix('k') {
        Some(d) => (d.to_string(), 1e3),
        None => match t.strip_suffix('M') {
            Some(d) => (d.to_string(), 1e6),
            None => (t.clone(), 1.0),
        },
    };
    digits
        .parse::<f64>()
        .unwrap_or_else(|e| panic!("{text:?}: {e}"))
        * times
}

/// Asserts that the chart's axes say what the API's totals say. The chart
/// keeps, per point, the `ids_drawn` of `GET /v1/info` at the refresh before
/// and at its own, and the seconds between: those are the API's numbers (in
/// order, each point starting where the one before ended, from at least
/// `drawn_before`, read before the page opened at `opened`, to at most the
/// total now), and the rates they give are checked against the axes: the y
/// axis runs from 0 in equal steps to a top at least 10% above the highest
/// rate and at most twice it; the x axis's labels are times of day (the
/// browser's zone) within the window drawn, which ends at the last refresh;
/// the current rate is labelled.
async fn chart_axes_match_the_api(
    browser: &Browser,
    srv: &TestServer,
    drawn_before: &serde_json::Value,
    opened: f64,
) {
    let chart = browser
        .eval(
            "const c = document.querySelector('#chart svg');\
             const now = c.querySelector('[data-k=\"chart-now\"]');\
             return { series: JSON.parse(c.dataset.series), from: Number(c.dataset.from), to: Number(c.dataset.to),\
               y: [...c.querySelectorAll('text.y-label')].map((e) => [Number(e.dataset.v), e.textContent]),\
               x: [...c.querySelectorAll('text.x-label')].map((e) => [Number(e.dataset.t), e.textContent,\
                 new Date(Number(e.dataset.t)).getTimezoneOffset()]),\
               now: now && [Number(now.dataset.v), now.textContent] };",
        )
        .await;
    let drawn_now = srv.get_json("/v1/info").await["totals"]["ids_drawn"]
        .as_f64()
        .unwrap();
    let series: Vec<(f64, f64, f64, f64)> = chart["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let v = |i: usize| p[i].as_f64().unwrap();
            (v(0), v(1), v(2), v(3))
        })
        .collect();
    assert!(series.len() >= 3, "{chart}");
    let mut last_to = drawn_before.as_f64().unwrap();
    let mut last_at = opened;
    let mut max: f64 = 0.0;
    for &(at, secs, from, to) in &series {
        assert!(
            from >= last_to && to >= from,
            "not the API's totals: {chart}"
        );
        assert!(at >= last_at && secs > 0.0, "{chart}");
        max = max.max((to - from) / secs);
        (last_to, last_at) = (to, at);
    }
    assert!(
        last_to <= drawn_now,
        "{last_to} drawn, the API says {drawn_now}"
    );
    assert!(max > 0.0, "{chart}");
    // The y axis: 0, equal steps, a round top with headroom above the peak.
    let y = chart["y"].as_array().unwrap();
    assert!(y.len() >= 3, "{chart}");
    let ticks: Vec<f64> = y.iter().map(|l| l[0].as_f64().unwrap()).collect();
    for l in y {
        let (v, text) = (l[0].as_f64().unwrap(), l[1].as_str().unwrap());
        assert!((axis_number(text) - v).abs() <= 1e-9 * v.max(1.0), "{l}");
    }
    assert_eq!(ticks[0], 0.0, "{chart}");
    let step = ticks[1];
    for pair in ticks.windows(2) {
        assert!(((pair[1] - pair[0]) - step).abs() <= 1e-9 * step, "{chart}");
    }
    let top = *ticks.last().unwrap();
    assert!(top >= max * 1.1, "top {top} for a peak of {max}: {chart}");
    assert!(top <= max * 2.0, "top {top} for a peak of {max}: {chart}");
    // The x axis: the window drawn ends at the last point; its labels are
    // times of day within it.
    let (from, to) = (
        chart["from"].as_f64().unwrap(),
        chart["to"].as_f64().unwrap(),
    );
    assert_eq!(to, last_at, "{chart}");
    assert_eq!(to - from, 180_000.0, "three minutes: {chart}");
    assert!(to <= epoch_ms(), "{chart}");
    let x = chart["x"].as_array().unwrap();
    assert!(x.len() >= 2, "{chart}");
    for l in x {
        let (t, text, offset) = (
            l[0].as_f64().unwrap(),
            l[1].as_str().unwrap(),
            l[2].as_f64().unwrap(),
        );
        assert!(from <= t && t <= to, "{l} outside [{from}, {to}]");
        let local = ((t / 1000.0) as i64 - (offset as i64) * 60).rem_euclid(86_400);
        let want = format!(
            "{:02}:{:02}:{:02}",
            local / 3600,
            local / 60 % 60,
            local % 60
        );
        assert_eq!(text, want, "{l}");
    }
    // The current rate, labelled: the last point's.
    let (_, secs, from_drawn, to_drawn) = *series.last().unwrap();
    let now = &chart["now"];
    let current = (to_drawn - from_drawn) / secs;
    assert!(
        (now[0].as_f64().unwrap() - current).abs() <= 1e-9 * current.max(1.0),
        "{chart}"
    );
    assert!(now[1].as_str().unwrap().ends_with(" IDs/s"), "{chart}");
}

/// Asserts that the sparkline of `name` is big enough to show a shape
/// (120 x 32 px at least 100 x 24), that its line spans its width, and
/// that it stays below the top edge (a round scale with headroom).
async fn sparkline_shows_a_shape(browser: &Browser, name: &str) {
    let spark = browser
        .eval(&format!(
            "const s = document.querySelector('tr[data-name=\"{name}\"] svg[data-k=\"spark\"]');\
             const r = s.getBoundingClientRect(); const b = s.querySelector('polyline').getBBox();\
             return {{ width: r.width, height: r.height, points: Number(s.dataset.points),\
               view: s.viewBox.baseVal.width, viewH: s.viewBox.baseVal.height, lineWidth: b.width, lineTop: b.y }};"
        ))
        .await;
    let f = |k: &str| spark[k].as_f64().unwrap();
    assert!(f("width") >= 100.0 && f("height") >= 24.0, "{spark}");
    assert!(f("points") >= 3.0, "{spark}");
    assert!(
        f("lineWidth") >= 0.9 * f("view"),
        "a dash, not a line: {spark}"
    );
    assert!(
        f("lineTop") >= 0.1 * f("viewH"),
        "along the top edge: {spark}"
    );
}

/// Asserts that the header is one line: the pills at the same height, the
/// brand and the connection state on their line, no pill cut, and nothing
/// wider than the header.
async fn header_is_one_line(browser: &Browser) {
    let header = browser
        .eval(
            "const h = document.querySelector('header.top');\
             const box = (e) => { const r = e.getBoundingClientRect(); return [r.top, r.bottom, r.right]; };\
             return { pills: [...h.querySelectorAll('.fact')].map((e) => [e.offsetTop, e.textContent]),\
               boxes: [...h.querySelectorAll('.fact, .brand, .conn')].map(box), width: h.clientWidth,\
               scroll: h.scrollWidth, cut: [...h.querySelectorAll('.fact-v')].filter((e) => e.scrollWidth > e.clientWidth + 1)\
                 .map((e) => [e.textContent, e.scrollWidth, e.clientWidth]) };",
        )
        .await;
    let pills = header["pills"].as_array().unwrap();
    assert_eq!(pills.len(), 4, "{header}");
    assert!(
        pills.iter().all(|p| p[0] == pills[0][0]),
        "pills wrap: {header}"
    );
    assert!(
        pills
            .iter()
            .any(|p| p[1].as_str().unwrap().contains("127.0.0.1:")),
        "the RESP address shown: {header}"
    );
    let boxes = header["boxes"].as_array().unwrap();
    let mid = |b: &serde_json::Value| (b[0].as_f64().unwrap() + b[1].as_f64().unwrap()) / 2.0;
    let first = &boxes[0];
    for b in boxes {
        assert!(
            b[0].as_f64().unwrap() < mid(first) && mid(first) < b[1].as_f64().unwrap(),
            "not on one line: {header}"
        );
        assert!(
            b[2].as_f64().unwrap() <= header["width"].as_f64().unwrap(),
            "{header}"
        );
    }
    assert!(
        header["scroll"].as_f64() <= header["width"].as_f64(),
        "{header}"
    );
    assert_eq!(header["cut"], json!([]), "{header}");
}

/// Asserts that the rate chart is drawn from live load: at least 3 points,
/// a peak above 0, one line, at least one refresh with fetches marked, and as
/// many marks drawn as the chart says.
async fn chart_shows_the_load(browser: &Browser) {
    let chart = browser
        .eval(
            "const c = document.querySelector('#chart svg');\
             return c && { points: Number(c.dataset.points), max: Number(c.dataset.max),\
               fetchMarks: Number(c.dataset.fetchMarks), circles: c.querySelectorAll('circle.m-fetch').length,\
               waitMarks: Number(c.dataset.waitMarks), triangles: c.querySelectorAll('path.m-wait').length,\
               lines: c.querySelectorAll('polyline').length };",
        )
        .await;
    assert!(chart["points"].as_u64().unwrap() >= 3, "{chart}");
    assert!(chart["max"].as_f64().unwrap() > 0.0, "{chart}");
    assert_eq!(chart["lines"], 1, "{chart}");
    assert!(chart["fetchMarks"].as_u64().unwrap() >= 1, "{chart}");
    assert_eq!(chart["fetchMarks"], chart["circles"], "{chart}");
    assert_eq!(chart["waitMarks"], chart["triangles"], "{chart}");
}

/// 1,000 sequences on a page (the per-page choice, kept as `?limit=1000`):
/// every row shown, each live one with its sparkline, refreshed as a page
/// of 100 is, with one request of 1,000 per refresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn monitor_page_shows_1000_sequences_on_a_page() {
    let Some((tools, _db, srv)) = setup().await else {
        return;
    };
    let (chromium, chromedriver) = tools;
    let names = merchants(0..1000);
    for n in &names {
        srv.create(n, 1, 100).await;
    }
    for n in names.iter().step_by(10) {
        let r = srv.get(&format!("/v1/sequences/{n}/next")).await;
        assert_eq!(r.status(), 200);
    }
    let browser = Browser::start(&chromium, &chromedriver).await;
    browser.open(&srv.url("/")).await;
    browser.wait_refreshes(1).await;
    assert_eq!(dom_rows(&browser).await, 100);
    browser
        .eval(
            "const s = document.getElementById('page-size'); s.value = '1000';\
             s.dispatchEvent(new Event('change')); return true;",
        )
        .await;
    let seen = browser.refreshes().await;
    browser.wait_refreshes(seen + 3).await;
    assert_eq!(dom_rows(&browser).await, 1000);
    assert_eq!(dom_count(&browser, "#rows tr[data-live=\"1\"]").await, 100);
    assert_eq!(
        dom_count(&browser, "#rows svg[data-k=\"spark\"]").await,
        100
    );
    let url = browser.eval("return location.search").await;
    assert_eq!(url, "?limit=1000");
    let sizes = browser
        .eval(
            "return performance.getEntriesByType('resource').map((e) => e.name)\
             .filter((u) => u.includes('/v1/sequences?limit=1000')).length",
        )
        .await;
    assert!(sizes.as_u64().unwrap() >= 3, "{sizes}");
    // All 1,000 on one page: no page after it.
    assert!(browser.disabled("next").await);
    browser.close().await;
    srv.stop().await;
}

/// Asserts that the page and its table fit the visible width, at most
/// `width`; answers how many of the table's columns are folded away.
async fn fits(browser: &Browser, width: f64) -> u64 {
    let fit = browser
        .eval(
            "const t = document.getElementById('sequences');\
             return { inner: document.documentElement.clientWidth, page: document.documentElement.scrollWidth,\
               table: t.getBoundingClientRect().right,\
               hidden: [...t.querySelectorAll('thead th')].filter((h) => h.offsetWidth === 0).length };",
        )
        .await;
    let inner = fit["inner"].as_f64().unwrap();
    assert!(inner <= width, "{fit}");
    assert!(fit["page"].as_f64().unwrap() <= inner, "{fit}");
    assert!(fit["table"].as_f64().unwrap() <= inner, "{fit}");
    fit["hidden"].as_u64().unwrap()
}

/// Sets the browser window to `width` x 900 px.
async fn resize(browser: &Browser, width: u32) {
    let rect = json!({ "width": width, "height": 900 });
    browser
        .call(reqwest::Method::POST, "/window/rect", Some(rect))
        .await;
}
