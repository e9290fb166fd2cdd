//! What wraps every request: [`Front`], one service applied once around the
//! whole router. In order:
//!
//! - Route label: the route template the path matches (`unmatched` when none),
//!   from [`RouteLabels`], a table built from the same list as the router, so
//!   raw paths never become labels.
//! - Concurrency limit: at most `max_concurrency` requests in flight; beyond
//!   it a request is shed at once with 503 `overloaded` (never queued, so a
//!   flood cannot pile up memory or latency).
//! - Request id: the client's `x-request-id` if it sent one, else one made
//!   here (`<instance>-<n>`: 8 random hex digits per process, then a counter);
//!   echoed in the response's `x-request-id`.
//! - Span `request` with `request_id`, `method` and `route`. It is at DEBUG on
//!   the ID routes, so at the default `info` level they create no span and
//!   format nothing; at INFO on the others, so the admin routes' log lines
//!   carry their request id. One DEBUG event per request (`finished`, with
//!   status and latency); 5xx answers are not logged again here (`error.rs`
//!   logs their cause).
//! - Request timeout: a request still running `request_timeout` after it
//!   arrived answers 408 `request_timeout`. The timer is only created when the
//!   handler does not answer on its first poll, so an ID served from memory
//!   costs no timer.
//! - Metrics: [`HTTP_REQUESTS`] and [`HTTP_REQUEST_DURATION`] labelled by route
//!   template, method (known methods, else `OTHER`) and status. Each worker
//!   thread keeps the handles it resolved.
//!
//! Between the permit and the timeout, the request goes to the router, except
//! on the two routes that draw one ID (`/next`, Leaf's `get`): the label's
//! match says where the name is, and `ids::Direct` answers from it without
//! the router (docs/design.md, "The edge", direct routes).
//!
//! Why one hand-written service rather than a stack of tower layers
//! (`SetRequestId`, `Trace`, `PropagateRequestId`, `LoadShed`,
//! `GlobalConcurrencyLimit`, `Timeout`, applied per route by
//! `Router::layer`): hyper clones the service once per request, and that
//! stack cost 20 more heap allocations, 8 more clock reads and twice the
//! instructions of an answer from memory (BENCHMARKS.md, "HTTP load"). This
//! one clones two `Arc`s and reads the clock twice.

use std::cell::{Cell, RefCell};
use std::convert::Infallible;
use std::future::Future;
use std::hash::BuildHasher;
use std::ops::Range;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tower::Service;
use tracing::Span;

use super::error::ApiError;
use super::ids::{Direct, Later};
use super::limits::Limits;
use super::metrics::{HTTP_REQUESTS, HTTP_REQUEST_DURATION};
use super::AppState;

/// The `route` label of requests that matched no route.
pub const UNMATCHED: &str = "unmatched";

/// The request id header, read from requests and written to responses.
pub static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Route templates, looked up by path with the same matcher (and syntax) as
/// axum's router.
#[derive(Debug, Clone)]
pub struct RouteLabels {
    matcher: matchit::Router<u16>,
    /// Index 0 is [`UNMATCHED`].
    names: Vec<&'static str>,
    /// By the same index: the ID routes the edge answers itself.
    direct: Vec<Option<Direct>>,
}

impl RouteLabels {
    /// A table of `templates` (axum syntax: `{name}`, `{*rest}`).
    ///
    /// # Panics
    /// On a template the matcher refuses; the router would refuse it too.
    pub fn new(templates: impl IntoIterator<Item = &'static str>) -> Self {
        let mut labels = RouteLabels {
            matcher: matchit::Router::new(),
            names: vec![UNMATCHED],
            direct: vec![None],
        };
        for t in templates {
            let i = u16::try_from(labels.names.len()).expect("fewer than 65536 routes");
            labels
                .matcher
                .insert(t, i)
                .unwrap_or_else(|e| panic!("route {t:?}: {e}"));
            labels.names.push(t);
            labels.direct.push(Direct::of(t));
        }
        labels
    }

    /// The route `path` matches (index 0, [`UNMATCHED`], when none) and,
    /// when it is one the edge answers itself, how, with the byte range
    /// of its one parameter in `path`.
    fn route(&self, path: &str) -> (Route, Option<(Direct, Range<usize>)>) {
        let Ok(m) = self.matcher.at(path) else {
            return (
                Route {
                    index: 0,
                    label: UNMATCHED,
                },
                None,
            );
        };
        let index = *m.value;
        let i = usize::from(index);
        let direct = self.direct[i].and_then(|d| {
            let (_, raw) = m.params.iter().next()?;
            // A parameter is a slice of `path`.
            let start = raw.as_ptr() as usize - path.as_ptr() as usize;
            Some((d, start..start + raw.len()))
        });
        let route = Route {
            index,
            label: self.names[i],
        };
        (route, direct)
    }

    /// The template `path` matches, or [`UNMATCHED`].
    pub fn label(&self, path: &str) -> &'static str {
        self.route(path).0.label
    }
}

/// A matched route: its place in [`RouteLabels`] (the per-thread metric
/// handles are kept by it) and its template.
#[derive(Debug, Clone, Copy)]
struct Route {
    index: u16,
    label: &'static str,
}

/// True for the ID routes (`.../next`, `.../batch`, and Leaf's `/api/...`),
/// whose spans are at DEBUG.
fn is_hot(route: &str) -> bool {
    route.ends_with("/next") || route.ends_with("/batch") || route.starts_with("/api/")
}

struct Shared {
    labels: RouteLabels,
    /// What the routes the edge answers itself call.
    app: AppState,
    permits: Arc<Semaphore>,
    timeout: Duration,
    /// `--max-body`: a request announcing more is refused on every route.
    body_bytes: usize,
}

/// The service around the router; see the module documentation.
#[derive(Clone)]
pub struct Front<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> Front<S> {
    /// Wraps `inner` (the router) in the request id, span, limits and metrics;
    /// the direct routes call `app`, the router's own state. Installs the
    /// metrics recorder if needed.
    pub fn new(inner: S, labels: RouteLabels, limits: &Limits, app: AppState) -> Self {
        super::metrics::handle();
        Front {
            inner,
            shared: Arc::new(Shared {
                labels,
                app,
                permits: Arc::new(Semaphore::new(limits.max_concurrency)),
                timeout: limits.request_timeout,
                body_bytes: limits.body_bytes,
            }),
        }
    }
}

impl<S> Service<Request<Body>> for Front<S>
where
    S: Service<Request<Body>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = FrontFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let start = Instant::now();
        let (route, direct) = self.shared.labels.route(req.uri().path());
        let method = method_label(req.method());
        let request_id = req
            .headers()
            .get(&X_REQUEST_ID)
            .cloned()
            .unwrap_or_else(make_request_id);
        let span = request_span(route.label, method, &request_id);
        let state = match self.shared.permits.clone().try_acquire_owned() {
            // A body announced over `--max-body` is refused on every route
            // before anything runs, those that never read a body (and
            // draw) included: 413, nothing drawn.
            _ if super::limits::announces_more_than(req.headers(), self.shared.body_bytes) => {
                State::Shed {
                    resp: Some(ApiError::PayloadTooLarge.into_response()),
                }
            }
            Ok(permit) => {
                let _entered = span.enter();
                match direct {
                    // A percent-encoded name is the router's to decode.
                    Some((direct, name))
                        if direct.takes(req.method())
                            && !req.uri().path()[name.clone()].contains('%') =>
                    {
                        match direct.answer(&self.shared.app, name, req) {
                            Ok(resp) => State::Shed { resp: Some(resp) },
                            Err(later) => State::Later {
                                fut: later,
                                _permit: permit,
                                timer: None,
                            },
                        }
                    }
                    _ => State::Running {
                        fut: self.inner.call(req),
                        _permit: permit,
                        timer: None,
                    },
                }
            }
            Err(_) => State::Shed {
                resp: Some(ApiError::Overloaded.into_response()),
            },
        };
        FrontFuture {
            state,
            span,
            start,
            timeout: self.shared.timeout,
            route,
            method,
            request_id: Some(request_id),
        }
    }
}

fn request_span(route: &'static str, method: &'static str, request_id: &HeaderValue) -> Span {
    let id = || request_id.to_str().unwrap_or("-");
    if is_hot(route) {
        tracing::debug_span!("request", request_id = id(), method, route)
    } else {
        tracing::info_span!("request", request_id = id(), method, route)
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<F> {
        Running {
            #[pin]
            fut: F,
            _permit: OwnedSemaphorePermit,
            // Boxed, and only made when the handler did not answer at once.
            timer: Option<Pin<Box<Sleep>>>,
        },
        // A direct answer that has to wait.
        Later {
            fut: Later,
            _permit: OwnedSemaphorePermit,
            timer: Option<Pin<Box<Sleep>>>,
        },
        // Answered already: shed, or a direct answer from memory.
        Shed { resp: Option<Response> },
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`Front`].
    pub struct FrontFuture<F> {
        #[pin]
        state: State<F>,
        span: Span,
        start: Instant,
        timeout: Duration,
        route: Route,
        method: &'static str,
        request_id: Option<HeaderValue>,
    }
}

impl<F> Future for FrontFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.enter();
        let mut resp = match this.state.project() {
            StateProj::Shed { resp } => resp.take().expect("polled after completion"),
            StateProj::Running { fut, timer, .. } => match fut.poll(cx) {
                Poll::Ready(Ok(resp)) => resp,
                Poll::Pending => ready!(timed_out(timer, *this.start + *this.timeout, cx)),
            },
            StateProj::Later { fut, timer, .. } => match fut.as_mut().poll(cx) {
                Poll::Ready(resp) => resp,
                Poll::Pending => ready!(timed_out(timer, *this.start + *this.timeout, cx)),
            },
        };
        let elapsed = this.start.elapsed();
        let status = resp.status();
        if let Some(id) = this.request_id.take() {
            resp.headers_mut().insert(X_REQUEST_ID.clone(), id);
        }
        record(*this.route, this.method, status, elapsed);
        tracing::debug!(
            status = status.as_u16(),
            latency_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
            "finished"
        );
        Poll::Ready(Ok(resp))
    }
}

/// The request timeout's answer once `deadline` passed, the timer made at
/// the first call (a handler that answers at once never makes one).
fn timed_out(
    timer: &mut Option<Pin<Box<Sleep>>>,
    deadline: Instant,
    cx: &mut Context<'_>,
) -> Poll<Response> {
    let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
    ready!(timer.as_mut().poll(cx));
    Poll::Ready(ApiError::RequestTimeout.into_response())
}

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

/// A request id `<instance>-<n>`, unique per process and, through the random
/// instance part, very likely across instances and restarts.
fn make_request_id() -> HeaderValue {
    let mut buf = [0u8; 29];
    buf[..8].copy_from_slice(instance_tag());
    buf[8] = b'-';
    let mut digits = itoa::Buffer::new();
    let n = digits.format(next_request_number()).as_bytes();
    buf[9..9 + n.len()].copy_from_slice(n);
    HeaderValue::from_bytes(&buf[..9 + n.len()]).expect("hex digits, '-' and digits")
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
    /// Route index -> the handles this thread resolved for it.
    static HANDLES: RefCell<Vec<Vec<Handles>>> = const { RefCell::new(Vec::new()) };
}

fn record(route: Route, method: &'static str, status: StatusCode, elapsed: Duration) {
    HANDLES.with(|cache| {
        let mut cache = cache.borrow_mut();
        let index = usize::from(route.index);
        if cache.len() <= index {
            cache.resize_with(index + 1, Vec::new);
        }
        let per_route = &mut cache[index];
        let i = match per_route
            .iter()
            .position(|h| h.method == method && h.status == status)
        {
            Some(i) => i,
            None => {
                let labels = [
                    ("route", route.label.to_owned()),
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
        h.duration.record(elapsed.as_secs_f64());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_unique_and_well_formed() {
        let mut ids = std::collections::HashSet::new();
        for _ in 0..3000 {
            let s = make_request_id().to_str().unwrap().to_owned();
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

    #[test]
    fn labels_are_templates_and_unknown_paths_are_unmatched() {
        let labels = RouteLabels::new([
            "/v1/sequences",
            "/v1/sequences/{name}",
            "/v1/sequences/{name}/next",
            "/docs/{*rest}",
        ]);
        assert_eq!(labels.label("/v1/sequences"), "/v1/sequences");
        assert_eq!(labels.label("/v1/sequences/a.b"), "/v1/sequences/{name}");
        assert_eq!(
            labels.label("/v1/sequences/%61/next"),
            "/v1/sequences/{name}/next"
        );
        assert_eq!(labels.label("/docs/x/y.js"), "/docs/{*rest}");
        for raw in [
            "/",
            "/v1/sequences/",
            "/v1/sequences/a/b/next",
            "/v1/sequences/a/next/",
            "",
        ] {
            assert_eq!(labels.label(raw), UNMATCHED, "{raw:?}");
        }
    }

    /// Only `/next` and Leaf's `get` are answered by the edge, with the
    /// byte range of the name in the path; every other route, and no
    /// route, goes to the router.
    #[test]
    fn the_direct_routes_carry_the_range_of_their_name() {
        let labels = RouteLabels::new(crate::http::route_templates());
        let direct = |path: &'static str| labels.route(path).1.map(|(d, r)| (d, &path[r]));
        assert_eq!(
            direct("/v1/sequences/order.eu/next"),
            Some((Direct::Next, "order.eu"))
        );
        assert_eq!(
            direct("/v1/sequences/%61/next"),
            Some((Direct::Next, "%61"))
        );
        assert_eq!(
            direct("/api/segment/get/pay-1"),
            Some((Direct::LeafGet, "pay-1"))
        );
        for routed in [
            "/v1/sequences/order/batch",
            "/v1/sequences/order",
            "/v1/sequences",
            "/v1/snowflake/next",
            "/v1/sequences/order/next/",
            "/nowhere",
        ] {
            assert_eq!(direct(routed), None, "{routed}");
        }
        assert!(Direct::Next.takes(&Method::GET) && Direct::Next.takes(&Method::POST));
        assert!(Direct::LeafGet.takes(&Method::GET) && !Direct::LeafGet.takes(&Method::POST));
        for d in [Direct::Next, Direct::LeafGet] {
            for m in [Method::HEAD, Method::PUT, Method::DELETE, Method::OPTIONS] {
                assert!(!d.takes(&m), "{d:?} {m}");
            }
        }
    }

    /// The direct routes never reach the router: `/next` and Leaf's route
    /// are answered by the edge, from the database the first time (the
    /// boxed rest) and from memory after; a percent-encoded name, HEAD
    /// and any other route reach the router (here a stand-in that counts
    /// its calls and answers 418).
    #[tokio::test]
    async fn direct_routes_are_answered_without_the_router() {
        use std::sync::atomic::AtomicUsize;
        use tower::ServiceExt;

        let store = Arc::new(crate::store::memory::MemoryStore::new());
        store.insert("a", 0, 10);
        let state = AppState::serving(crate::service::Service::new(
            store,
            crate::allocator::AllocatorConfig::default(),
        ));
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let router = tower::service_fn(move |_req: Request<Body>| {
            counted.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Ok::<_, Infallible>(StatusCode::IM_A_TEAPOT.into_response()))
        });
        let labels = RouteLabels::new(crate::http::route_templates());
        let front = Front::new(router, labels, &Limits::default(), state);
        let ask = |method: Method, path: &str| {
            let req = Request::builder()
                .method(method)
                .uri(path)
                .body(Body::empty())
                .unwrap();
            let front = Front {
                inner: front.inner.clone(),
                shared: front.shared.clone(),
            };
            async move { front.oneshot(req).await.unwrap().status() }
        };
        for (method, path, want) in [
            (Method::GET, "/v1/sequences/a/next", StatusCode::OK),
            (Method::POST, "/v1/sequences/a/next", StatusCode::OK),
            (Method::GET, "/api/segment/get/a", StatusCode::OK),
            (
                Method::GET,
                "/v1/sequences/a!/next",
                StatusCode::BAD_REQUEST,
            ),
            (
                Method::GET,
                "/v1/sequences/nowhere/next",
                StatusCode::NOT_FOUND,
            ),
        ] {
            assert_eq!(ask(method.clone(), path).await, want, "{method} {path}");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 0, "the edge answered alone");
        for (method, path) in [
            (Method::GET, "/v1/sequences/%61/next"),
            (Method::HEAD, "/v1/sequences/a/next"),
            (Method::POST, "/api/segment/get/a"),
            (Method::GET, "/v1/sequences/a/batch"),
        ] {
            let status = ask(method.clone(), path).await;
            assert_eq!(status, StatusCode::IM_A_TEAPOT, "{method} {path}");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    /// The labels and axum's router match every path the same way: paths of
    /// up to four segments drawn from the routes' own words, with empty and
    /// percent-encoded segments and trailing slashes.
    #[tokio::test]
    async fn labels_agree_with_the_router_on_every_path() {
        use axum::body::Body;
        use axum::extract::MatchedPath;
        use axum::routing::any;
        use tower::ServiceExt;

        let templates: Vec<&'static str> = crate::http::route_templates()
            .into_iter()
            .chain(crate::http::openapi::SWAGGER_UI_ROUTES)
            .collect();
        let labels = RouteLabels::new(templates.iter().copied());
        let mirror = templates
            .iter()
            .fold(axum::Router::new(), |r, t| {
                r.route(
                    t,
                    any(|m: MatchedPath| async move { m.as_str().to_owned() }),
                )
            })
            .fallback(|| async { UNMATCHED });
        let words = [
            "",
            "v1",
            "sequences",
            "next",
            "batch",
            "api",
            "segment",
            "get",
            "snowflake",
            "decode",
            "docs",
            "assets",
            "a.b",
            "%61",
            "openapi.json",
        ];
        let mut paths = vec![String::from("/")];
        let mut frontier = vec![String::new()];
        for _ in 0..4 {
            let mut grown = Vec::new();
            for p in &frontier {
                for w in words {
                    grown.push(format!("{p}/{w}"));
                }
            }
            paths.extend(grown.iter().cloned());
            paths.extend(grown.iter().map(|p| format!("{p}/")));
            frontier = grown;
        }
        let mut matched = 0;
        for path in &paths {
            let req = Request::get(path.as_str()).body(Body::empty()).unwrap();
            let resp = mirror.clone().oneshot(req).await.unwrap();
            let body = axum::body::to_bytes(resp.into_body(), 1024).await.unwrap();
            let routed = std::str::from_utf8(&body).unwrap();
            assert_eq!(labels.label(path), routed, "{path}");
            matched += usize::from(routed != UNMATCHED);
        }
        assert!(
            matched > 100,
            "only {matched} of {} paths matched a route",
            paths.len()
        );
    }
}
