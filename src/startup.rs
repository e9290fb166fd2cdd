//! Wiring: database (sequences and worker leases over one pool) +
//! migrations + allocator + router, and serving with a graceful, bounded
//! shutdown.

use std::future::Future;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::allocator::Allocator;
use crate::config::{DatabaseArgs, ServeArgs, Settings};
use crate::http::{router_with_limits, AdminAuth, AppState};
use crate::store::stripes::StripedStore;
use crate::store::{self, Database, MigrateMode, Store, StoreOptions, WorkerLeases};


/// Connects to the databases of `db` (its `--schema`, default bounds; a
/// striped store when there are several) and prepares each schema as its
/// `--migrate` says; the sequence store.
pub async fn open_store(db: &DatabaseArgs) -> anyhow::Result<Arc<dyn Store>> {
    let setup = db.schema_setup();
    let options = StoreOptions::default()
        .with_schema(setup.schema)
        .with_migrate(setup.mode);
    let (store, _) = open_stripes(
        &db.urls(),
        &options,
        setup.mode,
        store::stripes::DEFAULT_FAILOVER_AFTER,
        false,
    )
    .await?;
    Ok(store)
}

/// Connects to the database with `options` and applies the migrations; the
/// sequence store.
pub async fn open_store_with(url: &str, options: &StoreOptions) -> anyhow::Result<Arc<dyn Store>> {
    Ok(open_database_with(url, options).await?.sequences())
}

/// Connects to the database with `options` and applies the migrations.
pub async fn open_database_with(url: &str, options: &StoreOptions) -> anyhow::Result<Database> {
    open_database(url, options, MigrateMode::Auto).await
}

/// Connects to the database with `options` (one pool for the sequences and
/// the worker leases) and prepares the schema as `mode` says; a migration
/// problem stays a [`store::StoreError::Migration`] in the error's chain
/// (`main` exits with status 2 on it).
pub async fn open_database(
    url: &str,
    options: &StoreOptions,
    mode: MigrateMode,
) -> anyhow::Result<Database> {
    let redacted = store::redact_url(url);
    let db = store::connect(url, options)
        .await
        .with_context(|| format!("connecting to {redacted}"))?;
    let doing = match mode {
        MigrateMode::Auto => "migrating",
        MigrateMode::Check => "checking the schema of",
        MigrateMode::Off => "using",
    };
    db.sequences()
        .prepare_schema(mode)
        .await
        .with_context(|| format!("{doing} {redacted}"))?;
    if mode == MigrateMode::Off {
        // No DDL, but say loudly what this binary needs and lacks: until
        // it is applied its requests fail and /readyz answers 503.
        if let Err(e) = db.sequences().check_schema().await {
            tracing::error!(database = %redacted, error = %e,
                "--migrate off: the schema is older than this seqd needs; requests will fail and \
                 /readyz answers 503 until `seqd migrate` (or the DDL of `seqd schema`) is applied");
        }
    }
    Ok(db)
}

/// Serves the API on `listener` from `store` (and snowflake IDs with
/// worker IDs leased in `leases`, which [`Database::leases`] gives over the
/// store's pool) until `shutdown` resolves, then lets in-flight requests
/// finish for at most `settings.shutdown_timeout`.
pub async fn run(
    listener: TcpListener,
    store: Arc<dyn Store>,
    leases: Option<Arc<dyn WorkerLeases>>,
    settings: &Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    // Validates the snowflake layout first: an unusable one is a start-up error.
    let snowflake = crate::snowflake::start(&settings.snowflake, leases)?;
    let admin = AdminAuth::decide(settings.admin_token.clone(), addr.ip().is_loopback());
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        backend = store.backend(),
        databases = %settings
            .database_urls
            .iter()
            .map(|u| store::redact_url(u))
            .collect::<Vec<_>>()
            .join(" "),
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
        snowflake: snowflake.clone(),
        metrics_top: settings.metrics_top,
        ..AppState::new(allocator.clone(), admin)
    };
    // Settings changed elsewhere reach this instance; the task ends with
    // the router (which holds the serials).
    crate::serial::refresh::spawn(&state.serials, settings.settings_refresh);
    let app = router_with_limits(state, &settings.limits);

    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let server = crate::http::serve::serve(listener, app, settings.connections, async move {
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
    // Requests are answered (or the bound passed): give back what the
    // buffers reserved and did not hand out, so a rolling restart leaves no
    // gap. A crash cannot, and leaves one.
    let started = std::time::Instant::now();
    let given = allocator
        .give_back(GIVE_BACK_CONCURRENCY, GIVE_BACK_BOUND.min(settings.shutdown_timeout))
        .await;
    tracing::info!(
        ids = given.ids,
        sequences = given.sequences,
        fetch_in_flight = given.fetch_in_flight,
        reserved_since = given.reserved_since,
        failed = given.failed,
        unfinished = given.unfinished,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "gave back unused IDs"
    );
    if let Some(sf) = &snowflake {
        // Stops issuing and releases the worker ID (bounded).
        sf.shutdown().await;
    }
    tracing::info!("seqd stopped");
    Ok(())
}

/// Give-backs in flight at once at shutdown.
const GIVE_BACK_CONCURRENCY: usize = 16;
/// Longest the give-back at shutdown may take.
const GIVE_BACK_BOUND: std::time::Duration = std::time::Duration::from_secs(5);

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

/// Opens every database of `urls` (each a stripe, in order) with
/// `options`, prepares each schema as `mode` says, and checks that the
/// databases are the stripes of one set in this order; the sequence store
/// (a [`StripedStore`] over them, racing a stripe after `failover_after`,
/// when there are several, auditing their rows in the background when
/// `audit` says so) and the worker leases (of the first database).
pub async fn open_stripes(
    urls: &[String],
    options: &StoreOptions,
    mode: MigrateMode,
    failover_after: std::time::Duration,
    audit: bool,
) -> anyhow::Result<(Arc<dyn Store>, Arc<dyn WorkerLeases>)> {
    anyhow::ensure!(!urls.is_empty(), "no database URL");
    let mut databases = Vec::with_capacity(urls.len());
    for url in urls {
        databases.push(open_database(url, options, mode).await?);
    }
    let leases = databases[0].leases();
    let stores: Vec<Arc<dyn Store>> = databases.iter().map(Database::sequences).collect();
    let layouts = store::stripes::bind_stripes(&stores, urls, mode, store::stripes::DEFAULT_BLOCK)
        .await
        .context("checking the stripe records")?;
    if stores.len() == 1 {
        return Ok((stores[0].clone(), leases));
    }
    let striped = StripedStore::new(stores.into_iter().zip(layouts).collect(), failover_after)?;
    if audit {
        striped.start_audit(store::stripes::striped::AUDIT_EVERY);
    }
    Ok((Arc::new(striped), leases))
}

/// `seqd serve`: check the settings, open the store, bind, serve until a signal.
pub async fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    let settings = Settings::from_args(args);
    crate::snowflake::check(&settings.snowflake)?;
    let (store, leases) = open_stripes(
        &settings.database_urls,
        &settings.store_options(),
        settings.schema.mode,
        settings.failover_after,
        true,
    )
    .await?;
    let listener = TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    run(listener, store, Some(leases), &settings, shutdown_signal()).await
}
