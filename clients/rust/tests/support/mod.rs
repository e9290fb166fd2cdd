//! A real seqd server for the client's tests, bench and example: started
//! in-process on a fresh SQLite database, on 127.0.0.1:0, stopped when
//! dropped.

#![allow(dead_code)] // not every test binary uses every helper

use std::net::SocketAddr;
use std::time::Duration;

use seqd::config::{Secret, Settings};
use seqd::service::ClientAuth;
use seqd_client::Client;
use tokio::sync::oneshot;

/// Hang guard of every test: far above what any of them takes.
pub const GUARD: Duration = Duration::from_secs(120);

/// Awaits `f`, failing the test if it hangs.
pub async fn guarded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(GUARD, f).await.expect("hung")
}

/// The admin token of servers started with [`Server::with_client_auth`].
pub const ADMIN: &str = "admin-secret-for-client-tests";

/// `n` tasks at once, the `t`-th running `task(t)`: what each returned, in
/// that order (guarded: a task that hangs fails the test).
pub async fn in_tasks<T, F>(n: usize, task: impl Fn(usize) -> F) -> Vec<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = (0..n).map(|t| tokio::spawn(task(t))).collect();
    let mut out = Vec::with_capacity(n);
    for h in handles {
        out.push(guarded(h).await.expect("task"));
    }
    out
}

/// A running server and its database.
pub struct Server {
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The admin token, when one is set.
    pub admin: Option<&'static str>,
    pub http: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), String>>>,
    /// The database's directory, removed on drop (after the server stops).
    _dir: Option<tempfile::TempDir>,
}

/// A fresh SQLite database: its directory and URL.
pub fn sqlite() -> (tempfile::TempDir, String) {
    let dir = tempfile::Builder::new()
        .prefix("seqd-client-test-")
        .tempdir()
        .expect("temporary directory");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("seqd.db").display());
    (dir, url)
}

impl Server {
    /// A server with the default settings on a fresh database.
    pub async fn start() -> Server {
        let (dir, url) = sqlite();
        let mut s = Self::on(Settings::for_database(url)).await;
        s._dir = Some(dir);
        s
    }

    /// A server with the default settings on a fresh database, holding the
    /// plain sequence `name` from 1 by `step`.
    pub async fn with_sequence(name: &str, step: i64) -> Server {
        let s = Self::start().await;
        s.create(name, 1, step).await;
        s
    }

    /// A server under `--client-auth on` with the admin token [`ADMIN`], on
    /// a fresh database.
    pub async fn with_client_auth() -> Server {
        let (dir, url) = sqlite();
        let settings = Settings {
            admin_token: Some(Secret::new(ADMIN)),
            client_auth: ClientAuth::On,
            ..Settings::for_database(url)
        };
        let mut s = Self::on(settings).await;
        s._dir = Some(dir);
        s.admin = Some(ADMIN);
        s
    }

    /// A server with `settings` (its database migrated first); the caller
    /// keeps the database's directory.
    pub async fn on(settings: Settings) -> Server {
        let database =
            seqd::open::open_database_with(&settings.database_urls[0], &settings.store_options())
                .await
                .expect("open database");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let stop = async {
            let _ = rx.await;
        };
        let task = tokio::spawn(async move {
            seqd::startup::run(
                listener,
                database.sequences(),
                Some(database.leases()),
                &settings,
                stop,
            )
            .await
            .map_err(|e| format!("{e:#}"))
        });
        Server {
            addr,
            base: format!("http://{addr}"),
            admin: None,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
            stop: Some(tx),
            task: Some(task),
            _dir: None,
        }
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        let req = self.http.post(format!("{}{path}", self.base));
        match self.admin {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// Creates the plain sequence `name` from `start` by `step`.
    pub async fn create(&self, name: &str, start: i64, step: i64) {
        let body = serde_json::json!({"name": name, "start": start, "step": step});
        self.create_with(&body).await;
    }

    /// `POST /v1/sequences` with `body`, asserting 201.
    pub async fn create_with(&self, body: &serde_json::Value) {
        let resp = self.post("/v1/sequences").json(body).send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert_eq!(status.as_u16(), 201, "create {body}: {text}");
    }

    /// A client token with `rights` on names starting with `prefix`
    /// (needs the admin token).
    pub async fn token(&self, label: &str, prefix: &str, rights: &[&str]) -> String {
        let body = serde_json::json!({"label": label, "prefixes": [prefix], "rights": rights});
        let resp = self.post("/v1/tokens").json(&body).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 201, "make token {label}");
        let v: serde_json::Value = resp.json().await.unwrap();
        v["token"].as_str().unwrap().to_owned()
    }

    /// `GET /v1/sequences/{name}/next`: the ID.
    pub async fn next(&self, name: &str) -> i64 {
        next_over_http(&self.http, &self.base, name).await
    }

    /// The sequence's row as `GET /v1/sequences/{name}` answers it.
    pub async fn row(&self, name: &str) -> serde_json::Value {
        let resp = self
            .http
            .get(format!("{}/v1/sequences/{name}", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "row {name}");
        resp.json().await.unwrap()
    }

    /// The row's `max_id`.
    pub async fn max_id(&self, name: &str) -> i64 {
        self.row(name).await["max_id"].as_i64().unwrap()
    }

    /// Waits (guarded) until the row's `max_id` is `value`: a lease fetched.
    pub async fn wait_for_max_id(&self, name: &str, value: i64) {
        guarded(async {
            while self.max_id(name).await != value {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
    }

    /// A client of this server alone, leasing `lease_size` IDs at a time.
    pub fn client(&self, lease_size: u64) -> Client {
        Client::builder()
            .server(&self.base)
            .lease_size(lease_size)
            .build()
            .unwrap()
    }

    /// Tells the server to stop (once).
    fn signal_stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }

    /// Stops the server and waits for it.
    pub async fn stop(mut self) {
        self.signal_stop();
        if let Some(task) = self.task.take() {
            task.await.expect("server task").expect("server result");
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.signal_stop();
    }
}

/// `GET {base}/v1/sequences/{name}/next` with `http`: the ID (panics on
/// anything but 200).
pub async fn next_over_http(http: &reqwest::Client, base: &str, name: &str) -> i64 {
    let resp = http
        .get(format!("{base}/v1/sequences/{name}/next"))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(status.as_u16(), 200, "next {name}: {body}");
    body["id"].as_i64().unwrap()
}

/// A base URL on which nothing listens: a port bound, then released.
pub async fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

impl Server {
    /// A server speaking TLS only with `tls`, on a fresh database; `base`
    /// is `https://localhost:PORT` (the name its certificate is for).
    pub async fn with_tls(tls: seqd::tls::TlsFiles) -> Server {
        let (dir, url) = sqlite();
        let settings = Settings {
            tls: Some(tls),
            ..Settings::for_database(url)
        };
        let mut s = Self::on(settings).await;
        s._dir = Some(dir);
        s.base = format!("https://localhost:{}", s.addr.port());
        s
    }
}
