//! The edge every door stands on (docs/design.md, "The edge",
//! "Connections", "TLS on the doors"): the accept loop, the connection cap,
//! the TLS handshake under its deadline, the head and idle deadlines, and
//! the drain at shutdown. A door ([`Door`]) gives what is its own: how to
//! serve one accepted (and, under TLS, decrypted) stream, its names and its
//! [`Edge`] settings; [`serve`] does the rest.
//!
//! Deadlines are kept one of two ways, each door choosing ([`Deadlines`]):
//!
//! - **Swept**: a sweeper task advances a coarse clock every [`TICK`] and
//!   checks every connection against its head and idle deadlines, which the
//!   stream ([`Stream`]) keeps with one atomic load and store per read or
//!   write. For a door whose reads a protocol library makes (hyper), where
//!   a timer per request would cost on the hot path. Deadlines hold to
//!   within one tick.
//! - **Timed**: the door keeps its own timers (armed once per connection,
//!   re-armed only when they fire early), since its own loop makes every
//!   read and knows where a command begins and ends; the edge hands it the
//!   socket itself (nothing recorded per read) and bounds only the
//!   handshake, with one timer.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio_rustls::server::TlsStream;

use crate::tls::{TlsDoor, TlsStore};

/// How often the sweeper advances the clock and checks the deadlines.
pub const TICK: Duration = Duration::from_millis(100);

/// A stream a door serves: the socket, or TLS over it.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// What a door gives the edge.
pub trait Door: Send + Sync + 'static {
    /// Serves one connection until it is closed: `io` is the socket (a
    /// [`Stream`] under swept deadlines), or TLS over it; `conn` its
    /// deadlines and the shutdown signal.
    fn serve<S: Io>(self: Arc<Self>, io: S, conn: Conn) -> impl Future<Output = ()> + Send;

    /// The edge closed a connection before the door served it.
    fn cut(&self, _why: Cut) {}

    /// A connection took its place under the cap (before its handshake).
    fn opened(&self) {}

    /// A connection gave its place back.
    fn ended(&self) {}
}

/// Why the edge closed a connection before the door served it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Past the connection cap ([`PastCap::Refuse`]).
    PastCap,
    /// The TLS handshake failed.
    Tls,
    /// The TLS handshake passed its deadline.
    SlowHandshake,
    /// Shutdown began during the TLS handshake ([`Drain::AtOnce`]).
    Shutdown,
}

/// A door's settings at the edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// Which door this is: the certificates its handshakes use, its name
    /// in log lines.
    pub door: TlsDoor,
    /// The warning when accepting fails (out of descriptors and the like).
    pub accept_failed: &'static str,
    /// Most open connections (at least one).
    pub max_connections: usize,
    /// What happens to a connection past the cap.
    pub past_cap: PastCap,
    /// How the deadlines are kept.
    pub deadlines: Deadlines,
    /// What shutdown does to the listener and to handshakes under way.
    pub drain: Drain,
    /// Sets `TCP_NODELAY` on every accepted socket.
    pub nodelay: bool,
}

/// What happens to a connection past the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PastCap {
    /// Not accepted: it waits in the kernel's backlog, taking no memory here.
    Backlog,
    /// Accepted, sent these bytes (plain doors only: no handshake is spent
    /// on it under TLS) and closed.
    Refuse(&'static [u8]),
}

/// How the deadlines are kept (see the module's text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadlines {
    /// By the sweeper: a head (or a handshake) must be done within `head`
    /// of its first byte (of the accept), and a connection with no byte
    /// read or written for `idle`, and no request in flight, is closed.
    Swept {
        /// The head deadline, which bounds the handshake too.
        head: Duration,
        /// The idle deadline.
        idle: Duration,
    },
    /// By the door's own timers; the handshake within `handshake` of the
    /// accept.
    Timed {
        /// The handshake deadline.
        handshake: Duration,
    },
}

/// What shutdown does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// Connections the kernel already accepted are taken and served too
    /// (rather than reset when the listener closes), and handshakes under
    /// way finish: what was accepted is answered.
    Backlog,
    /// The listener is closed at once, and handshakes under way are cut.
    AtOnce,
}

/// One connection as its door sees it: its deadlines and the shutdown
/// signal.
pub struct Conn {
    tracker: Tracker,
    stop: watch::Receiver<bool>,
}

impl Conn {
    /// What keeps the connection's swept deadlines.
    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    /// Turns true when shutdown began and the listener is closed.
    pub fn stop(&self) -> watch::Receiver<bool> {
        self.stop.clone()
    }
}

/// Resolves once `stop` is true (holding no borrow of it).
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Serves `door` on `listener` until `shutdown` resolves; then drains as
/// `edge.drain` says, tells every connection to stop ([`Conn::stop`]) and
/// returns once all are closed.
pub async fn serve<D: Door>(
    listener: TcpListener,
    door: Arc<D>,
    edge: Edge,
    tls: Option<Arc<TlsStore>>,
    shutdown: impl Future<Output = ()>,
) {
    let registry = Arc::new(Registry::default());
    let swept = match edge.deadlines {
        Deadlines::Swept { head, idle } => {
            let weak = Arc::downgrade(&registry);
            tokio::spawn(sweeper(weak, ticks(head), ticks(idle)));
            true
        }
        Deadlines::Timed { .. } => false,
    };
    let max = u32::try_from(edge.max_connections.max(1)).unwrap_or(u32::MAX);
    let permits = Arc::new(Semaphore::new(max as usize));
    let (stop_tx, stop) = watch::channel(false);
    let accepting = Accepting {
        door,
        edge,
        tls,
        registry,
        swept,
        stop,
    };
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = accepting.accept(&listener, &permits) => accepted,
        };
        if let Some((stream, permit)) = accepted {
            accepting.spawn(stream, permit);
        }
    }
    // From here on answers close their connection.
    accepting.registry.closing.store(true, Ordering::Relaxed);
    match edge.drain {
        Drain::Backlog => {
            for stream in accept_pending(listener) {
                let Ok(permit) = permits.clone().try_acquire_owned() else {
                    break;
                };
                accepting.spawn(stream, permit);
            }
        }
        Drain::AtOnce => drop(listener),
    }
    let _ = stop_tx.send(true);
    // Every connection holds a permit until it is closed.
    let _all_closed = permits.acquire_many(max).await;
}

/// The accept loop: the door, its settings, and what it hands each
/// connection.
struct Accepting<D> {
    door: Arc<D>,
    edge: Edge,
    tls: Option<Arc<TlsStore>>,
    registry: Arc<Registry>,
    swept: bool,
    stop: watch::Receiver<bool>,
}

impl<D: Door> Accepting<D> {
    /// The next connection and its place under the cap; `None` when
    /// accepting failed or the connection was past the cap.
    async fn accept(
        &self,
        listener: &TcpListener,
        permits: &Arc<Semaphore>,
    ) -> Option<(TcpStream, OwnedSemaphorePermit)> {
        let waited = match self.edge.past_cap {
            PastCap::Backlog => {
                let p = permits.clone().acquire_owned().await;
                Some(p.expect("the semaphore is never closed"))
            }
            PastCap::Refuse(_) => None,
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Wait, do not spin.
                tracing::warn!(error = %e, "{}", self.edge.accept_failed);
                tokio::time::sleep(Duration::from_millis(50)).await;
                return None;
            }
        };
        if self.edge.nodelay {
            let _ = stream.set_nodelay(true);
        }
        match waited {
            Some(p) => Some((stream, p)),
            None => match permits.clone().try_acquire_owned() {
                Ok(p) => Some((stream, p)),
                Err(_) => {
                    self.refuse(stream);
                    None
                }
            },
        }
    }

    /// One connection past the cap ([`PastCap::Refuse`]).
    fn refuse(&self, mut stream: TcpStream) {
        self.door.cut(Cut::PastCap);
        let PastCap::Refuse(words) = self.edge.past_cap else {
            return;
        };
        if self.tls.is_none() {
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(words)).await;
            });
        }
    }

    /// Serves `stream` on a task of its own, which holds `permit` until the
    /// connection is closed.
    fn spawn(&self, stream: TcpStream, permit: OwnedSemaphorePermit) {
        let (id, tracker) = self.registry.add(self.swept);
        let registry = self.registry.clone();
        let (door, edge, tls) = (self.door.clone(), self.edge, self.tls.clone());
        let conn = Conn {
            tracker: tracker.clone(),
            stop: self.stop.clone(),
        };
        tokio::spawn(async move {
            door.opened();
            if id.is_some() {
                let io = Stream {
                    inner: stream,
                    tracker,
                };
                serve_one(&door, io, tls, &edge, conn).await;
            } else {
                // Under timed deadlines nothing is recorded per read: the
                // door reads the socket itself.
                serve_one(&door, stream, tls, &edge, conn).await;
            }
            if let Some(id) = id {
                registry.remove(id);
            }
            door.ended();
            drop(permit);
        });
    }
}

/// Serves one connection: its handshake first under TLS.
async fn serve_one<D: Door, I: Io>(
    door: &Arc<D>,
    io: I,
    tls: Option<Arc<TlsStore>>,
    edge: &Edge,
    mut conn: Conn,
) {
    match tls {
        None => door.clone().serve(io, conn).await,
        Some(tls) => {
            if let Some(io) = handshake(&**door, io, &tls, edge, &mut conn).await {
                door.clone().serve(io, conn).await;
            }
        }
    }
}

/// The TLS handshake of a connection, within the door's handshake deadline
/// of now (under swept deadlines, the sweeper ends a handshake that stalls
/// as it ends a head sent by halves); `None` when it failed or was cut.
async fn handshake<D: Door, I: Io>(
    door: &D,
    io: I,
    tls: &TlsStore,
    edge: &Edge,
    conn: &mut Conn,
) -> Option<TlsStream<I>> {
    let tracker = conn.tracker.clone();
    tracker.head_began();
    let deadline = async {
        match edge.deadlines {
            Deadlines::Swept { .. } => tracker.killed().await,
            Deadlines::Timed { handshake } => tokio::time::sleep(handshake).await,
        }
    };
    let shutdown = async {
        match edge.drain {
            Drain::AtOnce => stopped(&mut conn.stop).await,
            Drain::Backlog => std::future::pending().await,
        }
    };
    let accepted = tokio::select! {
        accepted = tls.acceptor(edge.door).accept(io) => accepted,
        () = deadline => {
            tracing::debug!(door = ?edge.door, "closing a connection whose TLS handshake passed its deadline");
            door.cut(Cut::SlowHandshake);
            return None;
        }
        () = shutdown => {
            door.cut(Cut::Shutdown);
            return None;
        }
    };
    match accepted {
        Ok(stream) => {
            // The deadline of the first head starts at its first byte.
            tracker.head_done();
            Some(stream)
        }
        Err(e) => {
            tracing::debug!(door = ?edge.door, error = %e, "TLS handshake failed");
            door.cut(Cut::Tls);
            None
        }
    }
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

/// What one connection shares with the sweeper. Times are in ticks of the
/// registry's clock.
#[derive(Debug, Default)]
struct ConnState {
    /// When a byte was last read or written.
    last_progress: AtomicU64,
    /// 1 + when the first byte of a head arrived; 0 when no head is being
    /// read.
    head_since: AtomicU64,
    /// Requests handed to the door's application and not answered yet.
    in_flight: AtomicU32,
    /// Woken by the sweeper when a deadline passed: the connection is closed.
    kill: Notify,
}

/// The open connections under swept deadlines, the coarse clock, and the
/// shutdown flag.
#[derive(Debug, Default)]
struct Registry {
    /// Set at shutdown: answers from then on close their connection.
    closing: AtomicBool,
    now: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<ConnState>>>,
    next_id: AtomicU64,
}

impl Registry {
    fn now(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    /// A new connection's tracker; registered with the sweeper (its id
    /// given) when `swept`.
    fn add(self: &Arc<Self>, swept: bool) -> (Option<u64>, Tracker) {
        if !swept {
            let tracker = Tracker {
                state: None,
                registry: self.clone(),
            };
            return (None, tracker);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ConnState::default());
        state.last_progress.store(self.now(), Ordering::Relaxed);
        self.conns.lock().unwrap().insert(id, state.clone());
        let tracker = Tracker {
            state: Some(state),
            registry: self.clone(),
        };
        (Some(id), tracker)
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

/// One connection's swept deadlines (none under [`Deadlines::Timed`]: then
/// every method but [`Tracker::closing`] does nothing) and the shutdown
/// flag.
#[derive(Debug, Clone)]
pub struct Tracker {
    state: Option<Arc<ConnState>>,
    registry: Arc<Registry>,
}

impl Tracker {
    /// Shutdown began: an answer should close its connection.
    pub fn closing(&self) -> bool {
        self.registry.closing.load(Ordering::Relaxed)
    }

    /// Resolves when a swept deadline passed (never under timed ones).
    pub async fn killed(&self) {
        match &self.state {
            Some(state) => state.kill.notified().await,
            None => std::future::pending().await,
        }
    }

    /// A request's head is complete: it is in flight (not idle, its head
    /// deadline over) until the guard is dropped.
    pub fn request(&self) -> InFlight {
        if let Some(state) = &self.state {
            state.in_flight.fetch_add(1, Ordering::Relaxed);
            state.head_since.store(0, Ordering::Relaxed);
        }
        InFlight(self.state.clone())
    }

    /// A head (or a handshake) begins now.
    fn head_began(&self) {
        if let Some(state) = &self.state {
            state
                .head_since
                .store(self.registry.now() + 1, Ordering::Relaxed);
        }
    }

    fn head_done(&self) {
        if let Some(state) = &self.state {
            state.head_since.store(0, Ordering::Relaxed);
        }
    }

    /// Bytes were read: progress, and the start of a head when none is
    /// being read and no request is in flight.
    fn read(&self) {
        if let Some(state) = &self.state {
            let now = self.registry.now();
            state.last_progress.store(now, Ordering::Relaxed);
            if state.in_flight.load(Ordering::Relaxed) == 0
                && state.head_since.load(Ordering::Relaxed) == 0
            {
                state.head_since.store(now + 1, Ordering::Relaxed);
            }
        }
    }

    /// A write's outcome, recorded as progress when it wrote bytes.
    fn wrote(&self, polled: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if let (Some(state), Poll::Ready(Ok(1..))) = (&self.state, &polled) {
            state
                .last_progress
                .store(self.registry.now(), Ordering::Relaxed);
        }
        polled
    }
}

/// Counts one request in flight until dropped.
#[derive(Debug)]
pub struct InFlight(Option<Arc<ConnState>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(state) = &self.0 {
            state.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The socket under swept deadlines, recording progress for the sweeper.
pub struct Stream {
    inner: TcpStream,
    tracker: Tracker,
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.tracker.read();
        }
        polled
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.tracker.wrote(polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.tracker.wrote(polled)
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
