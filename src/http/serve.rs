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
//! Time on the hot path is one atomic load: a sweeper task advances a coarse
//! clock every [`TICK`] and checks every connection against its deadlines,
//! so no request arms a timer of its own. Deadlines are therefore kept to
//! within one tick.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, Semaphore};
use tokio_rustls::server::TlsStream;
use tower::util::Oneshot;
use tower::ServiceExt;

use super::head_refusal::JsonRefusals;
use super::App;
use crate::tls::{TlsDoor, TlsStore};

pub use super::head_refusal::{MAX_HEADERS, MAX_HEAD_BYTES};

/// How long an open connection may still bring a request after shutdown
/// began (answered, with `Connection: close`) before it is closed.
pub const CLOSE_GRACE: Duration = Duration::from_millis(500);

/// How often the sweeper advances the clock and checks the deadlines.
pub const TICK: Duration = Duration::from_millis(100);

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

/// What one connection shares with the sweeper. Times are in ticks of the
/// registry's clock.
#[derive(Debug, Default)]
struct ConnState {
    /// When a byte was last read or written.
    last_progress: AtomicU64,
    /// 1 + when the first byte of a request head arrived; 0 when no head is
    /// being read.
    head_since: AtomicU64,
    /// Requests handed to the application and not answered yet.
    in_flight: AtomicU32,
    /// Woken by the sweeper when a deadline passed: the connection is closed.
    kill: Notify,
}

/// The open connections and the coarse clock.
#[derive(Debug, Default)]
struct Registry {
    /// Set at shutdown: every answer from then on carries `Connection: close`.
    closing: AtomicBool,
    now: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<ConnState>>>,
    next_id: AtomicU64,
}

impl Registry {
    fn now(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    fn add(&self) -> (u64, Arc<ConnState>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ConnState::default());
        state.last_progress.store(self.now(), Ordering::Relaxed);
        self.conns.lock().unwrap().insert(id, state.clone());
        (id, state)
    }

    fn remove(&self, id: u64) {
        self.conns.lock().unwrap().remove(&id);
    }

    /// Closes the connections past a deadline.
    fn sweep(&self, head_ticks: u64, idle_ticks: u64) {
        let now = self.now.fetch_add(1, Ordering::Relaxed) + 1;
        for state in self.conns.lock().unwrap().values() {
            let head = state.head_since.load(Ordering::Relaxed);
            let slow_head = head != 0 && now.saturating_sub(head - 1) >= head_ticks;
            // A request being handled is bounded by the request timeout instead.
            let idle = state.in_flight.load(Ordering::Relaxed) == 0
                && now.saturating_sub(state.last_progress.load(Ordering::Relaxed)) >= idle_ticks;
            if slow_head || idle {
                state.kill.notify_one();
            }
        }
    }
}

/// Whole ticks in `d`, at least one.
fn ticks(d: Duration) -> u64 {
    (d.as_millis() / TICK.as_millis()).max(1) as u64
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
    let registry = Arc::new(Registry::default());
    tokio::spawn(sweeper(
        Arc::downgrade(&registry),
        ticks(limits.header_read_timeout),
        ticks(limits.idle_timeout),
    ));
    let max = u32::try_from(limits.max_connections.max(1)).unwrap_or(u32::MAX);
    let permits = Arc::new(Semaphore::new(max as usize));
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
        };
        let stream = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        spawn_connection(stream, permit, &app, &registry, &stop_rx, &tls);
    }
    // From here on answers close their connection; connections the kernel
    // already accepted are taken and answered too, rather than reset when
    // the listener closes.
    registry.closing.store(true, Ordering::Relaxed);
    for stream in accept_pending(listener) {
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            break;
        };
        spawn_connection(stream, permit, &app, &registry, &stop_rx, &tls);
    }
    let _ = stop_tx.send(true);
    // Every connection holds a permit until it is closed.
    let _all_closed = permits.acquire_many(max).await;
    Ok(())
}

/// Closes `listener` after taking every connection the kernel has already
/// accepted for it (its backlog), which closing would otherwise reset. The
/// socket is asked directly, not through the runtime's readiness cache, so
/// a connection whose readiness event is not processed yet is taken too.
fn accept_pending(listener: TcpListener) -> Vec<TcpStream> {
    let mut taken = Vec::new();
    let Ok(listener) = listener.into_std() else {
        return taken;
    };
    while let Ok((stream, _)) = listener.accept() {
        // The listener is non-blocking (WouldBlock ends the loop); what it
        // accepts must be made so too before the runtime takes it.
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        match TcpStream::from_std(stream) {
            Ok(stream) => taken.push(stream),
            Err(e) => tracing::debug!(error = %e, "a pending connection could not be registered"),
        }
    }
    taken
}

/// Serves `stream` on a task of its own, which holds `permit` until the
/// connection is closed.
fn spawn_connection(
    stream: TcpStream,
    permit: tokio::sync::OwnedSemaphorePermit,
    app: &App,
    registry: &Arc<Registry>,
    stop: &watch::Receiver<bool>,
    tls: &Option<Arc<TlsStore>>,
) {
    let (id, state) = registry.add();
    let registry = registry.clone();
    let app = app.clone();
    let stop = stop.clone();
    let tls = tls.clone();
    tokio::spawn(async move {
        let io = Tracked {
            inner: stream,
            state: state.clone(),
            registry: registry.clone(),
        };
        match tls {
            None => connection(io, app, state, &registry, stop).await,
            Some(tls) => {
                if let Some(io) = handshake(io, &tls, &state, &registry).await {
                    connection(io, app, state, &registry, stop).await;
                }
            }
        }
        registry.remove(id);
        drop(permit);
    });
}

/// Advances the clock and enforces the deadlines until the server is gone.
async fn sweeper(registry: Weak<Registry>, head_ticks: u64, idle_ticks: u64) {
    let mut every = tokio::time::interval(TICK);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(registry) = registry.upgrade() else {
            return;
        };
        registry.sweep(head_ticks, idle_ticks);
    }
}

/// The TLS handshake of a connection, under the header-read deadline
/// counted from now (the sweeper ends a handshake that stalls, as it ends a
/// head sent by halves); `None` when it failed or was cut.
async fn handshake(
    io: Tracked,
    tls: &TlsStore,
    state: &ConnState,
    registry: &Registry,
) -> Option<TlsStream<Tracked>> {
    state
        .head_since
        .store(registry.now() + 1, Ordering::Relaxed);
    let accepted = tokio::select! {
        accepted = tls.acceptor(TlsDoor::Http).accept(io) => accepted,
        _ = state.kill.notified() => {
            tracing::debug!("closing a connection whose TLS handshake passed the header-read deadline");
            return None;
        }
    };
    match accepted {
        Ok(stream) => {
            // The deadline of the first request head starts at its first byte.
            state.head_since.store(0, Ordering::Relaxed);
            Some(stream)
        }
        Err(e) => {
            tracing::debug!(error = %e, "TLS handshake failed");
            None
        }
    }
}

/// Serves one connection (`io`: the socket, or TLS over it) until the client
/// closes it, a deadline passes, or shutdown (then the request in flight is
/// finished first).
async fn connection<I>(
    io: I,
    app: App,
    state: Arc<ConnState>,
    registry: &Arc<Registry>,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // hyper's own refusals (a head it cannot read) get the error body.
    let io = TokioIo::new(JsonRefusals::new(io));
    let service = Tracking {
        app,
        state: state.clone(),
        registry: registry.clone(),
    };
    let conn = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS)
        .serve_connection(io, service);
    tokio::pin!(conn);
    // At shutdown a connection gets CLOSE_GRACE to bring the request its
    // client may already have sent (answered with `Connection: close`),
    // then hyper's graceful shutdown closes it once idle. Closing an idle
    // keep-alive at once would reset a request already on its way.
    let grace = tokio::time::sleep(Duration::MAX);
    tokio::pin!(grace);
    let (mut stopping, mut graced) = (false, false);
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            _ = state.kill.notified() => {
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
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// The socket, recording progress for the sweeper.
struct Tracked {
    inner: TcpStream,
    state: Arc<ConnState>,
    registry: Arc<Registry>,
}

impl Tracked {
    fn progressed(&self) {
        self.state
            .last_progress
            .store(self.registry.now(), Ordering::Relaxed);
    }

    /// A write's outcome, recorded as progress when it wrote bytes.
    fn wrote(&self, polled: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.progressed();
        }
        polled
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.progressed();
            // Bytes while no request is in flight start the next request head.
            let state = &this.state;
            if state.in_flight.load(Ordering::Relaxed) == 0
                && state.head_since.load(Ordering::Relaxed) == 0
            {
                state
                    .head_since
                    .store(this.registry.now() + 1, Ordering::Relaxed);
            }
        }
        polled
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.wrote(polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.wrote(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The application as a hyper service: counts the request in flight (its
/// head is complete) until it is answered.
#[derive(Clone)]
struct Tracking {
    app: App,
    state: Arc<ConnState>,
    registry: Arc<Registry>,
}

impl hyper::service::Service<hyper::Request<Incoming>> for Tracking {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = Answer;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        self.state.in_flight.fetch_add(1, Ordering::Relaxed);
        self.state.head_since.store(0, Ordering::Relaxed);
        Answer {
            inner: self.app.clone().oneshot(req.map(Body::new)),
            in_flight: InFlight(self.state.clone()),
            close: self.registry.closing.load(Ordering::Relaxed),
        }
    }
}

/// Counts one request in flight until dropped.
struct InFlight(Arc<ConnState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
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
