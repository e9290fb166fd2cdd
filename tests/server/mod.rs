//! Runs seqd's HTTP server in-process on 127.0.0.1:0 for the API tests, and
//! stops it (gracefully) when dropped.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use seqd::startup::{self, Settings};
use seqd::store::Store;
use tokio::sync::oneshot;

/// A running server.
pub struct TestServer {
    /// Its address.
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The store it serves from (for direct checks).
    pub store: Arc<dyn Store>,
    /// A client with short timeouts.
    pub http: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl TestServer {
    /// Starts a server on `settings.database_url` (migrated first).
    pub async fn start(settings: Settings) -> TestServer {
        let store = startup::open_store(&settings.database_url).await.expect("open store");
        Self::start_with_store(settings, store).await
    }

    /// Starts a server on an already opened store.
    pub async fn start_with_store(settings: Settings, store: Arc<dyn Store>) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let served = store.clone();
        let task = tokio::spawn(async move {
            startup::run(listener, served, &settings, async {
                let _ = rx.await;
            })
            .await
        });
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .unwrap();
        TestServer { addr, base: format!("http://{addr}"), store, http, stop: Some(tx), task: Some(task) }
    }

    /// The full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Stops the server and waits for it to finish.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("server task").expect("server result");
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}
