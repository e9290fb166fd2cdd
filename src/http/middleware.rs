//! What wraps every request ([`layers`]): a request id, a tracing span that
//! carries it, and the per-route request count and latency for `/metrics`.
//!
//! - Request id: the client's `x-request-id` if it sent one, else one made
//!   here (`<instance>-<n>`: 8 random hex digits per process, then a counter);
//!   echoed in the response's `x-request-id`.
//! - Span `request` with `request_id`, `method` and `route` (the route template). It is
//!   at DEBUG on the ID routes, so at the default `info` level they create no
//!   span and format nothing; at INFO on the others, so the admin routes' log
//!   lines carry their request id. Per-request events (`started`, `finished`
//!   with latency) are at DEBUG; 5xx answers are not logged again here
//!   (`error.rs` logs their cause).
//! - Metrics: [`HTTP_REQUESTS`] and [`HTTP_REQUEST_DURATION`] labelled by route
//!   template (`unmatched` when no route matched, so raw paths never become
//!   labels), method (known methods, else `OTHER`) and status. Each worker
//!   thread keeps the handles it resolved, so a request costs a small map
//!   lookup, an atomic add and a histogram push.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use axum::extract::MatchedPath;
use axum::http::{HeaderValue, Method, Request, Response, StatusCode};
use tower::layer::util::{Identity, Stack};
use tower::{Layer, Service, ServiceBuilder};
use tower_http::classify::{ServerErrorsAsFailures, SharedClassifier};
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tower_http::trace::{
    DefaultOnBodyChunk, DefaultOnEos, DefaultOnRequest, DefaultOnResponse, MakeSpan, TraceLayer,
};
use tracing::Span;

use super::metrics::{HTTP_REQUESTS, HTTP_REQUEST_DURATION};

/// The `route` label of requests that matched no route.
pub const UNMATCHED: &str = "unmatched";

/// The tracing layer as configured here.
pub type Trace = TraceLayer<
    SharedClassifier<ServerErrorsAsFailures>,
    RequestSpan,
    DefaultOnRequest,
    DefaultOnResponse,
    DefaultOnBodyChunk,
    DefaultOnEos,
    (),
>;

/// The whole stack, outermost first: set the request id, open the span,
/// echo the id, count the request.
pub type Layers = ServiceBuilder<
    Stack<
        RequestMetricsLayer,
        Stack<
            PropagateRequestIdLayer,
            Stack<Trace, Stack<SetRequestIdLayer<RequestIds>, Identity>>,
        >,
    >,
>;

/// The layers for `Router::layer` (applied per route, so the route template
/// is known to each of them). Installs the metrics recorder if needed.
pub fn layers() -> Layers {
    super::metrics::handle();
    ServiceBuilder::new()
        .layer(SetRequestIdLayer::x_request_id(RequestIds))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(RequestSpan)
                .on_failure(()),
        )
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(RequestMetricsLayer)
}

/// True for the ID routes (`.../next`, `.../batch`, and Leaf's `/api/...`),
/// whose spans are at DEBUG.
fn is_hot(route: &str) -> bool {
    route.ends_with("/next") || route.ends_with("/batch") || route.starts_with("/api/")
}

/// Makes request ids `<instance>-<n>`, unique per process and, through the
/// random instance part, very likely across instances and restarts.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestIds;

/// Request numbers are handed to threads in blocks, so threads do not contend
/// on one counter.
const ID_BLOCK: u64 = 1024;
static NEXT_ID_BLOCK: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static ID_RANGE: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

fn next_request_number() -> u64 {
    ID_RANGE.with(|r| {
        let (mut next, mut end) = r.get();
        if next == end {
            next = NEXT_ID_BLOCK.fetch_add(ID_BLOCK, Ordering::Relaxed);
            end = next + ID_BLOCK;
        }
        r.set((next + 1, end));
        next + 1
    })
}

/// 8 random lowercase hex digits, fixed for the life of the process.
fn instance_tag() -> &'static [u8; 8] {
    static TAG: OnceLock<[u8; 8]> = OnceLock::new();
    TAG.get_or_init(|| {
        let r = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
        let mut tag = [0u8; 8];
        for (i, c) in tag.iter_mut().enumerate() {
            *c = b"0123456789abcdef"[((r >> (60 - 4 * i)) & 0xf) as usize];
        }
        tag
    })
}

impl MakeRequestId for RequestIds {
    fn make_request_id<B>(&mut self, _request: &Request<B>) -> Option<RequestId> {
        let mut buf = [0u8; 29];
        buf[..8].copy_from_slice(instance_tag());
        buf[8] = b'-';
        let mut digits = itoa::Buffer::new();
        let n = digits.format(next_request_number()).as_bytes();
        buf[9..9 + n.len()].copy_from_slice(n);
        HeaderValue::from_bytes(&buf[..9 + n.len()])
            .ok()
            .map(RequestId::new)
    }
}

/// Opens the `request` span: DEBUG on the ID routes, INFO elsewhere.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestSpan;

impl<B> MakeSpan<B> for RequestSpan {
    fn make_span(&mut self, req: &Request<B>) -> Span {
        let route = req
            .extensions()
            .get::<MatchedPath>()
            .map_or(UNMATCHED, MatchedPath::as_str);
        let id = || {
            req.headers()
                .get("x-request-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-")
        };
        if is_hot(route) {
            tracing::debug_span!("request", request_id = id(), method = %req.method(), route)
        } else {
            tracing::info_span!("request", request_id = id(), method = %req.method(), route)
        }
    }
}

/// Counts requests and their latency per route template, method and status.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestMetricsLayer;

impl<S> Layer<S> for RequestMetricsLayer {
    type Service = RequestMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestMetrics { inner }
    }
}

/// The service of [`RequestMetricsLayer`].
#[derive(Debug, Clone)]
pub struct RequestMetrics<S> {
    inner: S,
}

impl<S, B, ResB> Service<Request<B>> for RequestMetrics<S>
where
    S: Service<Request<B>, Response = Response<ResB>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = RequestMetricsFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let route = req.extensions().get::<MatchedPath>().cloned();
        let method = method_label(req.method());
        let start = Instant::now();
        RequestMetricsFuture {
            inner: self.inner.call(req),
            route,
            method,
            start,
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`RequestMetrics`].
    pub struct RequestMetricsFuture<F> {
        #[pin]
        inner: F,
        route: Option<MatchedPath>,
        method: &'static str,
        start: Instant,
    }
}

impl<F, ResB, E> Future for RequestMetricsFuture<F>
where
    F: Future<Output = Result<Response<ResB>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let out = ready!(this.inner.poll(cx));
        if let Ok(resp) = &out {
            let route = this.route.as_ref().map_or(UNMATCHED, MatchedPath::as_str);
            record(
                route,
                this.method,
                resp.status(),
                this.start.elapsed().as_secs_f64(),
            );
        }
        Poll::Ready(out)
    }
}

/// A bounded set of method labels.
fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PATCH => "PATCH",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}

struct Handles {
    method: &'static str,
    status: StatusCode,
    requests: metrics::Counter,
    duration: metrics::Histogram,
}

thread_local! {
    /// Route template -> the handles this thread resolved for it.
    static HANDLES: RefCell<HashMap<Box<str>, Vec<Handles>>> = RefCell::new(HashMap::new());
}

fn record(route: &str, method: &'static str, status: StatusCode, secs: f64) {
    HANDLES.with(|cache| {
        let mut cache = cache.borrow_mut();
        if !cache.contains_key(route) {
            cache.insert(route.into(), Vec::new());
        }
        let per_route = cache.get_mut(route).expect("inserted above");
        let i = match per_route
            .iter()
            .position(|h| h.method == method && h.status == status)
        {
            Some(i) => i,
            None => {
                let labels = [
                    ("route", route.to_owned()),
                    ("method", method.to_owned()),
                    ("status", status.as_str().to_owned()),
                ];
                per_route.push(Handles {
                    method,
                    status,
                    requests: metrics::counter!(HTTP_REQUESTS, &labels),
                    duration: metrics::histogram!(HTTP_REQUEST_DURATION, &labels),
                });
                per_route.len() - 1
            }
        };
        let h = &per_route[i];
        h.requests.increment(1);
        h.duration.record(secs);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_unique_and_well_formed() {
        let req = Request::new(());
        let mut ids = std::collections::HashSet::new();
        for _ in 0..3000 {
            let id = RequestIds.make_request_id(&req).unwrap();
            let s = id.header_value().to_str().unwrap().to_owned();
            let (tag, n) = s.split_once('-').unwrap();
            assert_eq!(tag.len(), 8);
            assert!(tag.bytes().all(|b| b.is_ascii_hexdigit()));
            assert!(n.parse::<u64>().unwrap() > 0);
            assert!(ids.insert(s));
        }
    }

    #[test]
    fn only_the_id_routes_are_hot() {
        assert!(is_hot("/v1/sequences/{name}/next"));
        assert!(is_hot("/v1/sequences/{name}/batch"));
        assert!(is_hot("/api/segment/get/{name}"));
        assert!(is_hot("/v1/snowflake/next"));
        assert!(is_hot("/v1/snowflake/batch"));
        assert!(is_hot("/api/snowflake/get/{key}"));
        for cold in [
            "/v1/sequences",
            "/v1/sequences/{name}",
            "/metrics",
            "/",
            UNMATCHED,
        ] {
            assert!(!is_hot(cold), "{cold}");
        }
    }
}
