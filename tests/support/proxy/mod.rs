//! A small TCP proxy for fault injection between seqd and its database: it can
//! cut every connection and refuse new ones (the database is "gone"), heal,
//! add latency to every round trip, and freeze single connections: the path
//! goes silent (nothing forwarded either way, no reset, the socket stays
//! open), as behind a middlebox that dropped its state.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Debug)]
struct State {
    /// Bumped at every cut; connections of an older epoch end.
    epoch: watch::Sender<u64>,
    down: std::sync::atomic::AtomicBool,
    /// Added before forwarding each client -> database chunk, in ms.
    latency_ms: AtomicU64,
    cuts: AtomicU64,
    accepted: AtomicU64,
    /// How many more connections freeze at their next client -> database chunk.
    freeze_budget: AtomicU64,
    /// Connections frozen so far.
    frozen: AtomicU64,
    /// Frozen connections that the client (seqd) closed.
    frozen_closed: AtomicU64,
    /// Longest time from a freeze to the client closing that connection, in ms.
    frozen_longest_ms: AtomicU64,
    /// Where new connections go ([`Proxy::repoint`] changes it).
    upstream: std::sync::Mutex<SocketAddr>,
}

/// A running proxy; stops accepting when dropped.
pub struct Proxy {
    /// The address clients connect to.
    pub addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on 127.0.0.1:0 and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            epoch: watch::Sender::new(0),
            down: false.into(),
            latency_ms: AtomicU64::new(0),
            cuts: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            freeze_budget: AtomicU64::new(0),
            frozen: AtomicU64::new(0),
            frozen_closed: AtomicU64::new(0),
            frozen_longest_ms: AtomicU64::new(0),
            upstream: std::sync::Mutex::new(upstream),
        });
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                st.accepted.fetch_add(1, Ordering::Relaxed);
                if st.down.load(Ordering::SeqCst) {
                    drop(client); // refused: closed at once
                    continue;
                }
                let upstream = *st.upstream.lock().unwrap();
                tokio::spawn(serve(client, upstream, st.clone()));
            }
        });
        Proxy { addr, state, task }
    }

    /// Cuts every open connection and refuses new ones until [`Proxy::heal`].
    pub fn cut(&self) {
        self.state.down.store(true, Ordering::SeqCst);
        self.state.cuts.fetch_add(1, Ordering::Relaxed);
        self.state.epoch.send_modify(|e| *e += 1);
    }

    /// Sends new connections to `upstream` from now on, and ends the open
    /// ones (as a failover's address switch does: the old server is gone).
    pub fn repoint(&self, upstream: SocketAddr) {
        *self.state.upstream.lock().unwrap() = upstream;
        self.state.epoch.send_modify(|e| *e += 1);
    }

    /// Accepts and forwards connections again.
    pub fn heal(&self) {
        self.state.down.store(false, Ordering::SeqCst);
    }

    /// Adds `d` before every chunk sent towards the database (one round trip
    /// of a request/response protocol pays it once).
    pub fn set_latency(&self, d: Duration) {
        self.state
            .latency_ms
            .store(d.as_millis() as u64, Ordering::SeqCst);
    }

    /// Freezes the next `n` connections that send a statement (anything but
    /// a bare ping) towards the database: that chunk and everything after
    /// it, either way, is held back, and the socket stays open until the
    /// client closes it.
    pub fn freeze_next(&self, n: u64) {
        self.state.freeze_budget.store(n, Ordering::SeqCst);
    }

    /// Connections frozen so far.
    pub fn frozen(&self) -> u64 {
        self.state.frozen.load(Ordering::SeqCst)
    }

    /// Frozen connections the client has closed.
    pub fn frozen_closed(&self) -> u64 {
        self.state.frozen_closed.load(Ordering::SeqCst)
    }

    /// The longest a frozen connection stayed open before the client closed it.
    pub fn frozen_longest(&self) -> Duration {
        Duration::from_millis(self.state.frozen_longest_ms.load(Ordering::SeqCst))
    }

    /// Connections accepted so far (refused ones included).
    pub fn accepted(&self) -> u64 {
        self.state.accepted.load(Ordering::SeqCst)
    }

    /// How many times the proxy was cut.
    pub fn cuts(&self) -> u64 {
        self.state.cuts.load(Ordering::Relaxed)
    }

    /// `url` with its host and port replaced by this proxy's.
    pub fn url_for(&self, url: &str) -> String {
        let mut u = url::Url::parse(url).expect("database URL");
        u.set_host(Some("127.0.0.1")).unwrap();
        u.set_port(Some(self.addr.port())).unwrap();
        u.to_string()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.task.abort();
    }
}

/// The upstream address of a database URL.
pub fn upstream_of(url: &str) -> SocketAddr {
    let u = url::Url::parse(url).expect("database URL");
    let host = u.host_str().unwrap_or("127.0.0.1");
    let host = if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    format!("{}:{}", host, u.port().expect("explicit port"))
        .parse()
        .expect("socket address")
}

/// Whether a chunk is a driver's bare ping: PostgreSQL's `Sync` message or
/// MySQL's `COM_PING` packet.
fn is_ping(chunk: &[u8]) -> bool {
    chunk == [b'S', 0, 0, 0, 4] || chunk == [1, 0, 0, 0, 0x0e]
}

/// The length of the next chunk `from` gives into `buf`; `None` at its end
/// or on an error.
async fn next_chunk(from: &mut OwnedReadHalf, buf: &mut [u8]) -> Option<usize> {
    match from.read(buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

async fn serve(client: TcpStream, upstream: SocketAddr, st: Arc<State>) {
    let mut epoch = st.epoch.subscribe();
    let born = *epoch.borrow_and_update();
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let st_up = st.clone();
    let frozen = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let frozen_down = frozen.clone();
    let up = async move {
        let mut buf = vec![0u8; 16 * 1024];
        while let Some(n) = next_chunk(&mut cr, &mut buf).await {
            let take = || {
                st_up
                    .freeze_budget
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| b.checked_sub(1))
                    .is_ok()
            };
            if !is_ping(&buf[..n]) && take() {
                frozen.store(true, Ordering::SeqCst);
                st_up.frozen.fetch_add(1, Ordering::SeqCst);
                let since = std::time::Instant::now();
                // Silent from now on: swallow what the client sends until it closes.
                while let Ok(n) = cr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
                let open_ms = since.elapsed().as_millis() as u64;
                st_up.frozen_longest_ms.fetch_max(open_ms, Ordering::SeqCst);
                st_up.frozen_closed.fetch_add(1, Ordering::SeqCst);
                return;
            }
            let ms = st_up.latency_ms.load(Ordering::SeqCst);
            if ms > 0 {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            if sw.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let down = async move {
        let mut buf = vec![0u8; 16 * 1024];
        while let Some(n) = next_chunk(&mut sr, &mut buf).await {
            if frozen_down.load(Ordering::SeqCst) {
                // Frozen: hold the answer back, and never end the connection from here.
                std::future::pending::<()>().await;
            }
            if cw.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let cut = async move {
        let _ = epoch.wait_for(|e| *e != born).await;
    };
    tokio::select! {
        _ = up => {}
        _ = down => {}
        _ = cut => {}
    }
}
