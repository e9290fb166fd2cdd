//! Wiring: store + migrations + allocator + router, and serving with a
//! graceful, bounded shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::allocator::{Allocator, AllocatorConfig};
use crate::config::{Secret, ServeArgs};
use crate::http::limits::Limits;
use crate::http::{router_with_limits, AdminAuth, AppState};
use crate::store::{self, Store};

/// What `serve` needs besides the listener.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The database URL.
    pub database_url: String,
    /// Admin bearer token, if any.
    pub admin_token: Option<Secret>,
    /// Allocator tuning.
    pub allocator: AllocatorConfig,
    /// Longest graceful shutdown waits for in-flight requests.
    pub shutdown_timeout: Duration,
    /// Snowflake IDs: enabled, layout, clock tolerance, lease.
    pub snowflake: crate::snowflake::SnowflakeSettings,
    /// Body size, request time and concurrency limits.
    pub limits: Limits,
}

impl Settings {
    /// Settings for a database URL with every other value at its default.
    pub fn for_database(url: impl Into<String>) -> Self {
        Settings {
            database_url: url.into(),
            admin_token: None,
            allocator: AllocatorConfig::default(),
            shutdown_timeout: Duration::from_secs(10),
            limits: Limits::default(),
            snowflake: crate::snowflake::SnowflakeSettings::default(),
        }
    }

    /// Settings from `seqd serve`'s flags.
    pub fn from_args(args: &ServeArgs) -> Self {
        Settings {
            database_url: args.db.url(),
            admin_token: args.admin_token.clone(),
            allocator: AllocatorConfig {
                segment_target: args.segment_target,
                max_step: args.db.max_step,
                wait_timeout: args.wait_timeout,
                ..AllocatorConfig::default()
            },
            shutdown_timeout: args.shutdown_timeout,
            limits: Limits {
                body_bytes: args.max_body,
                request_timeout: args.request_timeout,
                max_concurrency: args.max_concurrency.max(1),
            },
            snowflake: args.snowflake.settings(),
        }
    }
}

/// Connects to the database and applies the migrations.
pub async fn open_store(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    let redacted = store::redact_url(url);
    let store = store::connect(url)
        .await
        .with_context(|| format!("connecting to {redacted}"))?;
    store
        .migrate()
        .await
        .with_context(|| format!("migrating {redacted}"))?;
    Ok(store)
}

/// Serves the API on `listener` until `shutdown` resolves, then lets in-flight
/// requests finish for at most `settings.shutdown_timeout`.
pub async fn run(
    listener: TcpListener,
    store: Arc<dyn Store>,
    settings: &Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    // Validates the snowflake layout first: an unusable one is a start-up error.
    let snowflake = crate::snowflake::start(&settings.snowflake, &settings.database_url)?;
    let admin = AdminAuth::decide(settings.admin_token.clone(), addr.ip().is_loopback());
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        backend = store.backend(),
        database = %store::redact_url(&settings.database_url),
        listen = %addr,
        admin_auth = admin.describe(),
        "seqd started"
    );
    if matches!(admin, AdminAuth::OpenOnLoopback) {
        tracing::warn!(
            "no admin token set: admin calls are open to anyone on this host (loopback listener)"
        );
    }
    let allocator = Allocator::new(store, settings.allocator.clone());
    let state = AppState {
        allocator,
        admin,
        snowflake: snowflake.clone(),
    };
    let app = router_with_limits(state, &settings.limits);

    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let server = axum::serve(
        listener,
        axum::ServiceExt::<axum::extract::Request>::into_make_service(app),
    )
    .with_graceful_shutdown(async move {
        shutdown.await;
        tracing::info!("shutting down: finishing in-flight requests");
        let _ = stop_tx.send(true);
    });
    let bound = settings.shutdown_timeout;
    tokio::select! {
        r = server => r.context("serving HTTP")?,
        _ = async {
            let _ = stop_rx.wait_for(|stopped| *stopped).await;
            tokio::time::sleep(bound).await;
        } => tracing::warn!(?bound, "shutdown bound reached; dropping remaining connections"),
    }
    if let Some(sf) = &snowflake {
        // Stops issuing and releases the worker ID (bounded).
        sf.shutdown().await;
    }
    tracing::info!("seqd stopped");
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

/// `seqd serve`: open the store, bind, serve until a signal.
pub async fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    let settings = Settings::from_args(args);
    let store = open_store(&settings.database_url).await?;
    let listener = TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    run(listener, store, &settings, shutdown_signal()).await
}
