//! Serving connections: hyper's HTTP/1.1 server (the stack `axum::serve`
//! uses) with the limits a server facing many clients needs at the edge.
//!
//! - **At most `max_connections` open connections.** The accept loop takes a
//!   permit before it accepts; past the cap, new connections wait in the
//!   kernel's backlog instead of taking memory here.
//! - **A request head must arrive within `header_read_timeout`**, counted
//!   from its first byte; a client that sends half a head and stops
//!   (slowloris) is disconnected.
//! - **A connection that makes no progress for `idle_timeout`** (no byte read
//!   or written: an idle keep-alive, or a client that stopped reading a large
//!   answer) is closed. A request being handled is bounded by the request
//!   timeout instead.
//! - **A request head is at most [`MAX_HEAD_BYTES`]** and [`MAX_HEADERS`]
//!   headers, so a connection that never finishes its head holds no more
//!   than that. hyper refuses a larger or malformed head itself; its answer
//!   gets the API's error body ([`super::head_refusal`]).
//! - **Under TLS, the handshake runs on the connection's task**, never in the
//!   accept loop, and is a request head for the deadlines: it must be done
//!   within `header_read_timeout` of the accept, and it holds its place under
//!   the cap meanwhile.
//!
//! The accept loop, the cap, the handshake and the deadlines are the edge's
//! ([`crate::edge`]); this door gives it hyper on each connection. Time on
//! the hot path is one atomic load: the edge's sweeper advances a coarse
//! clock every [`TICK`] and checks every connection against its deadlines,
//! so no request arms a timer of its own. Deadlines are therefore kept to
//! within one tick.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tower::util::Oneshot;
use tower::ServiceExt;

use super::head_refusal::JsonRefusals;
use super::App;
use crate::edge::{self, Conn, Deadlines, Drain, Edge, InFlight, Io, PastCap, Tracker};
use crate::tls::{TlsDoor, TlsStore};

pub use super::head_refusal::{MAX_HEADERS, MAX_HEAD_BYTES};
pub use crate::edge::TICK;

/// How long an open connection may still bring a request after shutdown
/// began (answered, with `Connection: close`) before it is closed.
pub const CLOSE_GRACE: Duration = Duration::from_millis(500);

/// The connection limits. See `seqd serve --help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Longest a client may take to send a request head, from its first byte.
    pub header_read_timeout: Duration,
    /// A connection with no byte read or written for this long is closed.
    pub idle_timeout: Duration,
    /// Most open connections; more wait in the listen backlog.
    pub max_connections: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(60),
            max_connections: 10_000,
        }
    }
}

impl ConnLimits {
    /// The HTTP door at the edge: past the cap, connections wait in the
    /// backlog; deadlines swept (hyper makes the reads, so a request arms
    /// no timer); at shutdown, what the kernel accepted is answered.
    fn edge(&self) -> Edge {
        Edge {
            door: TlsDoor::Http,
            accept_failed: "accepting a connection failed",
            max_connections: self.max_connections,
            past_cap: PastCap::Backlog,
            deadlines: Deadlines::Swept {
                head: self.header_read_timeout,
                idle: self.idle_timeout,
            },
            drain: Drain::Backlog,
            nodelay: false,
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves; then stops
/// accepting, lets each connection finish its request in flight and close,
/// and returns once all are closed.
pub async fn serve(
    listener: TcpListener,
    app: App,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    serve_with_tls(listener, app, limits, None, shutdown).await
}

/// [`serve`], speaking TLS only, with the certificates of `tls`, when given.
pub async fn serve_with_tls(
    listener: TcpListener,
    app: App,
    limits: ConnLimits,
    tls: Option<Arc<TlsStore>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let door = Arc::new(HttpDoor { app });
    edge::serve(listener, door, limits.edge(), tls, shutdown).await;
    Ok(())
}

/// The HTTP door: the application, served by hyper on each connection.
struct HttpDoor {
    app: App,
}

impl edge::Door for HttpDoor {
    fn serve<S: Io>(self: Arc<Self>, io: S, conn: Conn) -> impl Future<Output = ()> + Send {
        connection(io, self.app.clone(), conn)
    }
}

/// Serves one connection (`io`: the socket, or TLS over it) until the client
/// closes it, a deadline passes, or shutdown (then the request in flight is
/// finished first).
async fn connection<I: Io>(io: I, app: App, conn: Conn) {
    // hyper's own refusals (a head it cannot read) get the error body.
    let io = TokioIo::new(JsonRefusals::new(io));
    let tracker = conn.tracker().clone();
    let service = Tracking {
        app,
        tracker: tracker.clone(),
    };
    let mut stop = conn.stop();
    let served = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS)
        .serve_connection(io, service);
    tokio::pin!(served);
    // At shutdown a connection gets CLOSE_GRACE to bring the request its
    // client may already have sent (answered with `Connection: close`),
    // then hyper's graceful shutdown closes it once idle. Closing an idle
    // keep-alive at once would reset a request already on its way.
    let grace = tokio::time::sleep(Duration::MAX);
    tokio::pin!(grace);
    let killed = tracker.killed();
    tokio::pin!(killed);
    let (mut stopping, mut graced) = (false, false);
    loop {
        tokio::select! {
            result = served.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            _ = killed.as_mut() => {
                tracing::debug!("closing a connection past its header-read or idle deadline");
                return;
            }
            changed = stop.wait_for(|s| *s), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    grace.as_mut().reset(tokio::time::Instant::now() + CLOSE_GRACE);
                }
            }
            _ = grace.as_mut(), if stopping && !graced => {
                graced = true;
                served.as_mut().graceful_shutdown();
            }
        }
    }
}

/// The application as a hyper service: counts the request in flight (its
/// head is complete) until it is answered.
#[derive(Clone)]
struct Tracking {
    app: App,
    tracker: Tracker,
}

impl hyper::service::Service<hyper::Request<Incoming>> for Tracking {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = Answer;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        Answer {
            in_flight: self.tracker.request(),
            inner: self.app.clone().oneshot(req.map(Body::new)),
            close: self.tracker.closing(),
        }
    }
}

pin_project_lite::pin_project! {
    /// The application's answer to one request.
    pub struct Answer {
        #[pin]
        inner: Oneshot<App, Request>,
        in_flight: InFlight,
        // Shutdown had begun when the request arrived: answer `Connection: close`.
        close: bool,
    }
}

impl Future for Answer {
    type Output = Result<axum::response::Response, std::convert::Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut answer = std::task::ready!(this.inner.poll(cx));
        if *this.close {
            if let Ok(resp) = &mut answer {
                resp.headers_mut().insert(
                    axum::http::header::CONNECTION,
                    axum::http::HeaderValue::from_static("close"),
                );
            }
        }
        Poll::Ready(answer)
    }
}
