//! A small TCP proxy for fault injection between seqd and its database: it can
//! cut every connection and refuse new ones (the database is "gone"), heal,
//! and add latency to every round trip.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
    let up = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
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
        loop {
            let n = match sr.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
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
