//! `GET /metrics`: the Prometheus text format.
//!
//! Two sources, one body:
//! - The process-wide registry of `metrics-exporter-prometheus`, rendered by
//!   its handle: HTTP requests and latency per route template (each request
//!   bumps one cached counter and one histogram, [`super::middleware`]), the
//!   segment fetch latency histogram (one for all sequences, recorded by the
//!   allocator when a fetch succeeds), [`NAMES_IN_MEMORY`], build info and
//!   start time, and the store's retries after conflicts ([`STORE_RETRIES`]).
//!   Nothing in it is per sequence.
//! - The per-sequence families and their exact totals, read from the
//!   allocator at scrape time and written straight into the text
//!   ([`write_sequences`]): series for at most `--metrics-top` sequences
//!   (those in trouble first, then the most IDs issued), unlabelled totals
//!   over all of them. Nothing per sequence is kept between scrapes, so the
//!   body stays small however many sequences are live, and a sequence that
//!   leaves the top leaves no stale series.
//!
//! The ID hot path records nothing. The recorder is global (the `metrics`
//! macros need one), installed once per process by [`handle`], and shared by
//! every router built in the process.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use super::error::ApiError;
use super::AppState;
use crate::allocator::SeqStats;
use crate::domain::SeqName;
use crate::serial::{PeriodStatus, Serials};
use crate::service::Service;
use crate::store::stripes::StripeStatus;

mod top;

pub use top::{write_sequences, TROUBLE_SPACE_RATIO};

/// Default of `--metrics-top`: how many sequences get per-sequence series.
pub const DEFAULT_TOP: usize = 100;

/// Counter: IDs handed out by this instance, per `sequence` (top sequences only).
pub const IDS_ISSUED: &str = "seqd_ids_issued_total";
/// Counter: successful segment fetches, per `sequence` (top sequences only).
pub const SEGMENT_FETCHES: &str = "seqd_segment_fetches_total";
/// Counter: failed segment fetches (each retry counts), per `sequence` (top
/// sequences only).
pub const SEGMENT_FETCH_ERRORS: &str = "seqd_segment_fetch_errors_total";
/// Histogram: latency of successful segment fetches, all sequences together.
pub const SEGMENT_FETCH_DURATION: &str = crate::allocator::buffer::FETCH_DURATION_METRIC;
/// Counter: requests that found both segments empty and had to wait, per
/// `sequence` (top sequences only).
pub const SEGMENT_WAITS: &str = "seqd_segment_waits_total";
/// Gauge: size of the last segment fetched (the adapted step), per
/// `sequence` (top sequences only).
pub const SEQUENCE_STEP: &str = "seqd_sequence_step";
/// Gauge: IDs left in memory (current + next segment), per `sequence` (top
/// sequences only).
pub const SEQUENCE_IDS_AVAILABLE: &str = "seqd_sequence_ids_available";
/// Counter: reserved ranges that reached down to IDs this instance already
/// reserved (the row went back and was skipped past), per `sequence` (top
/// sequences only).
pub const SEQUENCE_REGRESSIONS: &str = crate::allocator::buffer::REGRESSIONS_METRIC;
/// Gauge: fraction of the ID space used (highest ID reserved / `i64::MAX`),
/// per `sequence` (top sequences only).
pub const SEQUENCE_SPACE_USED: &str = "seqd_sequence_space_used_ratio";
/// Counter: [`IDS_ISSUED`] over every live sequence.
pub const ALL_IDS_ISSUED: &str = "seqd_all_ids_issued_total";
/// Counter: [`SEGMENT_FETCHES`] over every live sequence.
pub const ALL_SEGMENT_FETCHES: &str = "seqd_all_segment_fetches_total";
/// Counter: [`SEGMENT_FETCH_ERRORS`] over every live sequence.
pub const ALL_SEGMENT_FETCH_ERRORS: &str = "seqd_all_segment_fetch_errors_total";
/// Counter: [`SEGMENT_WAITS`] over every live sequence.
pub const ALL_SEGMENT_WAITS: &str = "seqd_all_segment_waits_total";
/// Counter: [`SEQUENCE_REGRESSIONS`] over every live sequence.
pub const ALL_SEQUENCE_REGRESSIONS: &str = "seqd_all_sequence_regressions_total";
/// Gauge: [`SEQUENCE_IDS_AVAILABLE`] summed over every live sequence.
pub const ALL_SEQUENCE_IDS_AVAILABLE: &str = "seqd_all_sequence_ids_available";
/// Gauge: the largest [`SEQUENCE_SPACE_USED`] of any live sequence.
pub const ALL_SEQUENCE_MAX_SPACE_USED: &str = "seqd_all_sequence_max_space_used_ratio";
/// Gauge: live sequences with no ID in memory after failed fetches.
pub const ALL_SEQUENCES_FAILING: &str = "seqd_all_sequences_failing";
/// Gauge: live sequences with at least one regression counted.
pub const ALL_SEQUENCES_REGRESSED: &str = "seqd_all_sequences_regressed";
/// Gauge: sequences given per-sequence series in this scrape (at most
/// `--metrics-top`).
pub const METRICS_TOP_SEQUENCES: &str = "seqd_metrics_top_sequences";
/// Gauge: names held in memory, per `state`: `live` (served), `pending`
/// (being loaded by requests in flight), `missing` (the negative cache).
pub const NAMES_IN_MEMORY: &str = "seqd_names_in_memory";
/// Counter: HTTP requests, per `route` template, `method` and `status`.
pub const HTTP_REQUESTS: &str = "seqd_http_requests_total";
/// Histogram: HTTP request latency until the response head, per `route`, `method` and `status`.
pub const HTTP_REQUEST_DURATION: &str = "seqd_http_request_duration_seconds";
/// Counter: database operations run again after the database aborted them
/// for a conflict, per `backend` (`postgres`, `mysql`) and `sqlstate`
/// (`40001` serialization failure or MariaDB/MySQL deadlock, `40P01`
/// PostgreSQL deadlock); see `crate::store::retry`.
pub const STORE_RETRIES: &str = crate::store::retry::RETRIES_METRIC;
/// Histogram: requests served by one reservation of a global sequence.
pub const GLOBAL_MERGED: &str = crate::allocator::buffer::GLOBAL_MERGE_METRIC;
/// Histogram: first reservations made by one operation of the store
/// (grouped first fetches of names new to this instance).
pub const FIRST_GROUPED: &str = crate::allocator::group::GROUP_SIZE_METRIC;
/// Gauge: 1 while a stripe is up, per `stripe` and `backend` (stripes only).
pub const STRIPE_UP: &str = "seqd_stripe_up";
/// Gauge: the share of the current period's `{seq:0N}` capacity reserved by
/// this instance, per serial `sequence` and `period` (the `--metrics-top`
/// fullest).
pub const SERIAL_PERIOD_USED: &str = "seqd_serial_period_capacity_used_ratio";
/// Gauge: the highest counter this instance reserved in the current
/// period, per serial `sequence` and `period` (same sequences).
pub const SERIAL_PERIOD_COUNTER: &str = "seqd_serial_period_reserved_max";

/// Counter: rounds of the settings refresh this instance completed
/// (`crate::serial::refresh`), read from the instance's own serials.
pub const SETTINGS_REFRESH_ROUNDS: &str = "seqd_settings_refresh_rounds_total";
/// Counter: ranges reserved from a stripe, per `stripe` and `backend`.
pub const STRIPE_RESERVATIONS: &str = "seqd_stripe_reservations_total";
/// Counter: operations on a stripe that failed or were overtaken, per
/// `stripe` and `backend`.
pub const STRIPE_FAILURES: &str = "seqd_stripe_failures_total";
/// Counter: stripe operations raced to the next stripe.
pub const STRIPE_HEDGES: &str = crate::store::stripes::striped::STRIPE_HEDGES;
/// Counter: failover fences this instance ran (`crate::store::sequences::fence`), read
/// from the fences of its databases.
pub const FAILOVER_FENCES: &str = "seqd_failover_fences_total";
/// Counter: servers refused as older than the verified one
/// (docs/high-availability.md, "Failover of the database").
pub const FAILOVER_STALE: &str = "seqd_failover_stale_refusals_total";
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

/// Buckets of [`GLOBAL_MERGED`] and [`FIRST_GROUPED`]: requests or names
/// per reservation.
const MERGE_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0];

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
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full(GLOBAL_MERGED.into()), MERGE_BUCKETS))
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full(FIRST_GROUPED.into()), MERGE_BUCKETS))
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
    describe_counter!(
        crate::snowflake::generator::CLOCK_BACKWARDS_METRIC,
        "Snowflake requests refused with 503 clock_moved_backwards: the clock went back further than --snowflake-clock-tolerance."
    );
    describe_counter!(
        "seqd_ids_drawn_total",
        "IDs drawn, by client token label (`none`: no token, under --client-auth off; `admin`: the admin token)."
    );
    describe_histogram!(
        SEGMENT_FETCH_DURATION,
        "Latency of successful segment fetches, all sequences together, in seconds."
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
    describe_counter!(
        STORE_RETRIES,
        "Database operations run again after the database aborted them for a conflict (SQLSTATE 40001 serialization failure or deadlock, 40P01 deadlock), by backend and sqlstate."
    );
    describe_histogram!(
        GLOBAL_MERGED,
        "Requests of global sequences served by one reservation (merged while the previous one was in flight), all sequences together."
    );
    describe_histogram!(
        FIRST_GROUPED,
        "First reservations of names new to this instance made by one statement (grouped while earlier groups were in flight)."
    );
    describe_counter!(
        crate::allocator::GIVEN_BACK_METRIC,
        "IDs given back to the database at graceful shutdown (the unused top of the last reservations)."
    );
    describe_counter!(
        STRIPE_HEDGES,
        "Stripe operations raced to the next stripe because the one asked had not answered within --failover-after."
    );
    describe_gauge!(
        PROCESS_START_TIME,
        "Start time of the process since the Unix epoch, in seconds."
    );
    describe_gauge!(BUILD_INFO, "Always 1; the labels describe the build.");
}

/// The whole `/metrics` body: the registry, then the per-sequence families
/// of the `top` highest-ranked live sequences and the totals over all.
pub fn render(service: &Service, top: usize) -> String {
    let (allocator, serials) = (service.allocator(), service.serials());
    let names = allocator.names_in_memory();
    for (state, n) in [
        ("live", names.live),
        ("pending", names.pending),
        ("missing", names.missing),
    ] {
        metrics::gauge!(NAMES_IN_MEMORY, "state" => state).set(n as f64);
    }
    let mut out = render_from(top, |f| allocator.for_each_stats(f));
    let stripes = service.stripe_status();
    write_stripes(&mut out, &stripes);
    let fence_states: Vec<_> = service
        .fence_status()
        .into_iter()
        .chain(stripes.iter().filter_map(|s| s.fence.clone()))
        .collect();
    let fences: u64 = fence_states.iter().map(|f| f.counts.fences).sum();
    let stale: u64 = fence_states.iter().map(|f| f.counts.stale_refusals).sum();
    let _ = std::fmt::Write::write_fmt(
        &mut out,
        format_args!(
            "# HELP {FAILOVER_FENCES} Failover fences this instance ran: the database server changed and every sequence was raised by the margin.\n# TYPE {FAILOVER_FENCES} counter\n{FAILOVER_FENCES} {fences}\n\
             # HELP {FAILOVER_STALE} Checks that found a database server whose fence record is older than the one this instance verified (an old primary back), each refused: nothing is reserved from it.\n# TYPE {FAILOVER_STALE} counter\n{FAILOVER_STALE} {stale}\n"
        ),
    );
    write_serials(&mut out, serials, top);
    let _ = std::fmt::Write::write_fmt(
        &mut out,
        format_args!(
            "# HELP {SETTINGS_REFRESH_ROUNDS} Rounds of the settings refresh (settings of live sequences read again and applied) this instance completed.\n# TYPE {SETTINGS_REFRESH_ROUNDS} counter\n{SETTINGS_REFRESH_ROUNDS} {}\n",
            serials.refresh_rounds()
        ),
    );
    out
}

/// The families of serial sequences' current periods, for the `top`
/// fullest (those without a capacity, `{seq}`, after the others, by
/// counter).
fn write_serials(out: &mut String, serials: &Serials, top: usize) {
    use std::fmt::Write;
    let mut all: Vec<(SeqName, PeriodStatus)> = Vec::new();
    serials.for_each_status(|name, status| all.push((name.clone(), status.clone())));
    if all.is_empty() {
        return;
    }
    let fill = |s: &PeriodStatus| s.fill().unwrap_or(-1.0);
    all.sort_by(|a, b| {
        fill(&b.1)
            .total_cmp(&fill(&a.1))
            .then(b.1.reserved_up_to.cmp(&a.1.reserved_up_to))
    });
    all.truncate(top);
    let _ = writeln!(
        out,
        "# HELP {SERIAL_PERIOD_USED} Share of the current period's {{seq:0N}} capacity this instance reserved (serial sequences, fullest first).\n# TYPE {SERIAL_PERIOD_USED} gauge"
    );
    for (name, s) in &all {
        if let Some(f) = s.fill() {
            let _ = writeln!(
                out,
                "{SERIAL_PERIOD_USED}{{sequence=\"{name}\",period=\"{}\"}} {f}",
                s.key
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP {SERIAL_PERIOD_COUNTER} Highest counter this instance reserved in the current period (serial sequences).\n# TYPE {SERIAL_PERIOD_COUNTER} gauge"
    );
    for (name, s) in &all {
        let counter = s.reserved_up_to.unwrap_or(s.counter_start - 1);
        let _ = writeln!(
            out,
            "{SERIAL_PERIOD_COUNTER}{{sequence=\"{name}\",period=\"{}\"}} {counter}",
            s.key
        );
    }
}

/// The families of the stripes (none with one database), read from the
/// striped store at scrape time: `seqd_stripe_up`, and the reservations and
/// failures of each stripe since start.
fn write_stripes(out: &mut String, stripes: &[StripeStatus]) {
    use std::fmt::Write;
    if stripes.is_empty() {
        return;
    }
    type Family = (
        &'static str,
        &'static str,
        &'static str,
        fn(&StripeStatus) -> u64,
    );
    let families: [Family; 3] = [
        (
            STRIPE_UP,
            "gauge",
            "1 while the stripe is up, 0 while it is marked down (failed or slower than --failover-after, until a probe finds it answering).",
            |s| u64::from(s.up),
        ),
        (
            STRIPE_RESERVATIONS,
            "counter",
            "Ranges this instance reserved from the stripe.",
            |s| s.reservations,
        ),
        (
            STRIPE_FAILURES,
            "counter",
            "Operations on the stripe that failed or were overtaken by the next stripe.",
            |s| s.failures,
        ),
    ];
    for (name, kind, help, value) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for s in stripes {
            let _ = writeln!(
                out,
                "{name}{{stripe=\"{}\",backend=\"{}\"}} {}",
                s.index,
                s.backend,
                value(s)
            );
        }
    }
}

/// The registry's exposition followed by the per-sequence families and the
/// totals of the sequences `each_stats` goes through (it calls its argument
/// once per sequence): what [`render`] writes, from any source of numbers.
pub fn render_from(
    top: usize,
    each_stats: impl FnOnce(&mut dyn FnMut(&SeqName, &SeqStats)),
) -> String {
    let mut out = handle().render();
    write_sequences(&mut out, top, each_stats);
    out
}

/// `GET /metrics`. The pass over every live sequence runs on the blocking
/// pool: with a million sequences it takes long enough to hold up the ID
/// requests that share a runtime thread.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    summary = "Prometheus metrics",
    description = "Prometheus text format. Per-sequence series (IDs issued, fetches, fetch errors, waits, \
                   regressions, adapted step, IDs in memory, fraction of the ID space used) for at most \
                   `--metrics-top` sequences (default 100): those in trouble first (a regression, no ID \
                   in memory after failed fetches, 90% of the ID space used), then those with the most IDs \
                   issued. Exact totals over every sequence under `seqd_all_*` names, and \
                   `seqd_metrics_top_sequences`, how many got series. Segment fetch latency (one \
                   histogram for all sequences), names in memory, HTTP requests and latency per route, \
                   build info and start time. The body stays small however many sequences are live.",
    responses((status = 200, description = "Prometheus text exposition format 0.0.4", body = String,
        content_type = "text/plain; version=0.0.4; charset=utf-8")),
)]
pub async fn metrics(State(st): State<AppState>) -> Response {
    let AppState {
        service,
        metrics_top,
        ..
    } = st;
    let body = match tokio::task::spawn_blocking(move || render(&service, metrics_top)).await {
        Ok(body) => body,
        Err(e) => {
            tracing::error!(error = %e, "rendering /metrics failed");
            return ApiError::Internal.into_response();
        }
    };
    (
        [
            (CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8"),
            (CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}
