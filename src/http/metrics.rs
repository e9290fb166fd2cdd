//! `GET /metrics`: the Prometheus text format, rendered by
//! `metrics-exporter-prometheus` from one process-wide recorder.
//!
//! What it costs where:
//! - The ID hot path records nothing. Per-sequence numbers (IDs issued,
//!   fetches, fetch errors, waits, adapted step, IDs in memory) are read from
//!   [`Allocator::snapshots`] at scrape time and written into the registry
//!   then (`counter.absolute`, `gauge.set`). Only live sequences (names found
//!   in the database) are read, so unknown names never create labels.
//! - The allocator records [`SEGMENT_FETCH_DURATION`] when a fetch succeeds.
//! - Each HTTP request bumps one cached counter and one histogram
//!   ([`super::middleware`]), labelled by the route template, never the raw
//!   path.
//!
//! The recorder is global (the `metrics` macros need one), installed once per
//! process by [`handle`], and shared by every router built in the process.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use super::AppState;
use crate::allocator::{Allocator, BufferSnapshot, SeqStats};
use crate::domain::SeqName;

/// Counter: IDs handed out by this instance, per `sequence`.
pub const IDS_ISSUED: &str = "seqd_ids_issued_total";
/// Counter: successful segment fetches, per `sequence`.
pub const SEGMENT_FETCHES: &str = "seqd_segment_fetches_total";
/// Counter: failed segment fetches (each retry counts), per `sequence`.
pub const SEGMENT_FETCH_ERRORS: &str = "seqd_segment_fetch_errors_total";
/// Histogram: latency of successful segment fetches, per `sequence`.
pub const SEGMENT_FETCH_DURATION: &str = crate::allocator::buffer::FETCH_DURATION_METRIC;
/// Counter: requests that found both segments empty and had to wait, per `sequence`.
pub const SEGMENT_WAITS: &str = "seqd_segment_waits_total";
/// Gauge: size of the last segment fetched (the adapted step), per `sequence`.
pub const SEQUENCE_STEP: &str = "seqd_sequence_step";
/// Gauge: IDs left in memory (current + next segment), per `sequence`.
pub const SEQUENCE_IDS_AVAILABLE: &str = "seqd_sequence_ids_available";
/// Counter: reserved ranges that reached down to IDs this instance already
/// reserved (the row went back and was skipped past), per `sequence`.
pub const SEQUENCE_REGRESSIONS: &str = crate::allocator::buffer::REGRESSIONS_METRIC;
/// Gauge: names held in memory, per `state`: `live` (served), `pending`
/// (being loaded by requests in flight), `missing` (the negative cache).
pub const NAMES_IN_MEMORY: &str = "seqd_names_in_memory";
/// Counter: HTTP requests, per `route` template, `method` and `status`.
pub const HTTP_REQUESTS: &str = "seqd_http_requests_total";
/// Histogram: HTTP request latency until the response head, per `route`, `method` and `status`.
pub const HTTP_REQUEST_DURATION: &str = "seqd_http_request_duration_seconds";
/// Gauge: when the process started, in seconds since the Unix epoch.
pub const PROCESS_START_TIME: &str = "process_start_time_seconds";
/// Gauge: always 1, labelled with the `version`.
pub const BUILD_INFO: &str = "seqd_build_info";

/// Buckets of the HTTP latency histogram, in seconds (100 µs .. 10 s).
const HTTP_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];
/// Buckets of the segment fetch histogram, in seconds (1 ms .. 10 s).
const FETCH_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// How often histogram samples are folded into their buckets between scrapes,
/// so that memory stays bounded when nobody scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

struct Registry {
    handle: PrometheusHandle,
    started: SystemTime,
}

static REGISTRY: OnceLock<Registry> = OnceLock::new();

fn registry() -> &'static Registry {
    REGISTRY.get_or_init(|| {
        let started = SystemTime::now();
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(HTTP_REQUEST_DURATION.into()), HTTP_BUCKETS)
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full(SEGMENT_FETCH_DURATION.into()), FETCH_BUCKETS))
            .expect("bucket lists are not empty")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("another metrics recorder is installed; /metrics will be empty");
        }
        let upkeep = handle.clone();
        let spawned = std::thread::Builder::new().name("seqd-metrics".into()).spawn(move || loop {
            std::thread::sleep(UPKEEP_EVERY);
            upkeep.run_upkeep();
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the metrics upkeep thread; histograms are folded at scrape time only");
        }
        describe();
        let since_epoch = started.duration_since(UNIX_EPOCH).unwrap_or_default();
        metrics::gauge!(PROCESS_START_TIME).set(since_epoch.as_secs_f64());
        metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
        Registry { handle, started }
    })
}

/// The process-wide Prometheus handle; installs the global recorder on first
/// use (the router calls it, so it is in place before the first request).
pub fn handle() -> &'static PrometheusHandle {
    &registry().handle
}

/// When the metrics registry was installed: at the first router built, i.e.
/// at start-up.
pub fn started_at() -> SystemTime {
    registry().started
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(IDS_ISSUED, "IDs handed out by this instance.");
    describe_counter!(SEGMENT_FETCHES, "Segments reserved from the database.");
    describe_counter!(
        SEGMENT_FETCH_ERRORS,
        "Failed segment fetches (each retry counts)."
    );
    describe_histogram!(
        SEGMENT_FETCH_DURATION,
        "Latency of successful segment fetches, in seconds."
    );
    describe_counter!(
        SEGMENT_WAITS,
        "Requests that found both segments empty and waited for a fetch."
    );
    describe_gauge!(
        SEQUENCE_STEP,
        "Size of the last segment fetched (the adapted step)."
    );
    describe_gauge!(
        SEQUENCE_IDS_AVAILABLE,
        "IDs left in memory: current plus next segment."
    );
    describe_counter!(
        SEQUENCE_REGRESSIONS,
        "Reserved ranges at or below IDs this instance already reserved (the row went back); skipped past."
    );
    describe_gauge!(
        NAMES_IN_MEMORY,
        "Names held in memory: live (served), pending (being loaded), missing (negative cache)."
    );
    describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests by route template, method and status."
    );
    describe_histogram!(
        HTTP_REQUEST_DURATION,
        "HTTP request latency until the response head, in seconds."
    );
    describe_gauge!(
        PROCESS_START_TIME,
        "Start time of the process since the Unix epoch, in seconds."
    );
    describe_gauge!(BUILD_INFO, "Always 1; the labels describe the build.");
}

/// Writes one live sequence's numbers into the registry.
fn record_snapshot(s: &BufferSnapshot) {
    let name = s.name.as_str();
    let labels = [("sequence", name.to_owned())];
    let available = s.current.map_or(0, |c| c.remaining) + s.next.map_or(0, |n| n.remaining);
    metrics::counter!(IDS_ISSUED, &labels).absolute(s.issued);
    metrics::counter!(SEGMENT_FETCHES, &labels).absolute(s.fetches);
    metrics::counter!(SEGMENT_FETCH_ERRORS, &labels).absolute(s.fetch_errors);
    metrics::counter!(SEGMENT_WAITS, &labels).absolute(s.waits);
    metrics::gauge!(SEQUENCE_STEP, &labels).set(s.current_step as f64);
    metrics::gauge!(SEQUENCE_IDS_AVAILABLE, &labels).set(available as f64);
}

/// Writes one live sequence's regression count into the registry (only
/// sequences that regressed get the series).
fn record_regressions(name: &SeqName, s: &SeqStats) {
    if s.regressions > 0 {
        metrics::counter!(SEQUENCE_REGRESSIONS, "sequence" => name.as_str().to_owned())
            .absolute(s.regressions);
    }
}

/// Reads the allocator's live sequences into the registry and renders the
/// Prometheus text format.
pub fn render(allocator: &Allocator) -> String {
    let handle = handle();
    for s in allocator.snapshots() {
        record_snapshot(&s);
    }
    allocator.for_each_stats(record_regressions);
    let names = allocator.names_in_memory();
    for (state, n) in [
        ("live", names.live),
        ("pending", names.pending),
        ("missing", names.missing),
    ] {
        metrics::gauge!(NAMES_IN_MEMORY, "state" => state).set(n as f64);
    }
    handle.render()
}

/// `GET /metrics`.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    summary = "Prometheus metrics",
    description = "Per-sequence IDs issued, fetches, fetch errors and latency, waits, adapted step and IDs \
                   in memory; HTTP requests and latency per route; build info and start time.",
    responses((status = 200, description = "Prometheus text exposition format 0.0.4", body = String,
        content_type = "text/plain; version=0.0.4; charset=utf-8")),
)]
pub async fn metrics(State(st): State<AppState>) -> Response {
    let body = render(&st.allocator);
    (
        [
            (CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8"),
            (CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}
