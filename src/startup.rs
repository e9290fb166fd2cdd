//! Wiring of `seqd serve`: the databases opened ([`crate::open`]), the
//! service, the settings refresh and the router over them, and serving with
//! a graceful, bounded shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::config::{ServeArgs, Settings};
use crate::http::serve::serve_with_tls;
use crate::http::{router_with, AdminAuth, AppState};
use crate::service::{Access, ClientAuth, Service};
use crate::store::{self, Store, WorkerLeases};
use crate::tls::{TlsFiles, TlsStore};

/// Serves the API on `listener` from `store` (and snowflake IDs with
/// worker IDs leased in `leases`, which [`Database::leases`](store::Database::leases) gives over the
/// store's pool) until `shutdown` resolves, then lets in-flight requests
/// finish for at most `settings.shutdown_timeout`. With
/// `settings.resp_listen`, the RESP door is bound and served too.
pub async fn run(
    listener: TcpListener,
    store: Arc<dyn Store>,
    leases: Option<Arc<dyn WorkerLeases>>,
    settings: &Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let resp = match &settings.resp_listen {
        Some(a) => {
            let l = TcpListener::bind(a)
                .await
                .with_context(|| format!("binding the RESP listener {a}"))?;
            Some(l)
        }
        None => None,
    };
    run_with_resp(listener, resp, store, leases, settings, shutdown).await
}

/// [`run`] with the RESP listener bound by the caller (`None`: no RESP
/// door, whatever `settings.resp_listen` says). The steps in order: bind
/// the listeners, start the service and its background tasks, say so,
/// serve the doors until `shutdown` and the drain, then shut down.
pub async fn run_with_resp(
    listener: TcpListener,
    resp: Option<TcpListener>,
    store: Arc<dyn Store>,
    leases: Option<Arc<dyn WorkerLeases>>,
    settings: &Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let listeners = Listeners::bind(listener, resp, settings).await?;
    let started = start(store, leases, settings, &listeners).await?;
    log_start(settings, &listeners, &started);
    let _health = serve_doors(listeners, &started, settings, shutdown).await?;
    shut_down(&started, settings).await;
    Ok(())
}

/// The listeners of a serving instance, and their addresses.
struct Listeners {
    http: TcpListener,
    resp: Option<TcpListener>,
    health: Option<TcpListener>,
    addr: SocketAddr,
    resp_addr: Option<SocketAddr>,
    health_addr: Option<SocketAddr>,
}

impl Listeners {
    /// The doors' listeners, and the health listener bound when asked for.
    async fn bind(
        http: TcpListener,
        resp: Option<TcpListener>,
        settings: &Settings,
    ) -> anyhow::Result<Listeners> {
        let health = match &settings.health_listen {
            Some(a) => Some(
                TcpListener::bind(a)
                    .await
                    .with_context(|| format!("binding the health listener {a}"))?,
            ),
            None => None,
        };
        Ok(Listeners {
            addr: http.local_addr()?,
            resp_addr: resp.as_ref().map(|l| l.local_addr()).transpose()?,
            health_addr: health.as_ref().map(|l| l.local_addr()).transpose()?,
            http,
            resp,
            health,
        })
    }
}

/// What start-up made: the service and what serves it, and the background
/// tasks (each ended when this is dropped, when the server returns).
struct Started {
    service: Service,
    snowflake: Option<crate::snowflake::Snowflake>,
    admin: AdminAuth,
    tls: Option<Arc<TlsStore>>,
    _tasks: Vec<AbortOnDrop>,
}

/// Starts the service over `store` and its background tasks: the token and
/// settings refreshes, the database checks, the TLS files' watch.
async fn start(
    store: Arc<dyn Store>,
    leases: Option<Arc<dyn WorkerLeases>>,
    settings: &Settings,
    listeners: &Listeners,
) -> anyhow::Result<Started> {
    // Validates the snowflake layout first: an unusable one is a start-up error.
    let snowflake = crate::snowflake::start(&settings.snowflake, leases)?;
    let admin = AdminAuth::decide(
        settings.admin_token.clone(),
        listeners.addr.ip().is_loopback(),
    );
    let tls = settings.tls.as_ref().map(TlsStore::load).transpose()?;
    // The metrics recorder first: the token set's counters are taken when
    // it is read, before the router (which would install it) is built.
    crate::http::metrics::handle();
    let access = Access::new(settings.client_auth, admin.clone());
    let service = Service::new(store, settings.allocator.clone())
        .with_access(access)
        .with_max_lease(settings.max_lease)
        .with_snowflake(snowflake.clone());
    // Tokens made or revoked elsewhere reach this instance; the task ends
    // with the service.
    service.start_token_refresh().await;
    // What the health routes answer from: one check now, before the
    // start-up line (whoever waits for it may probe at once), then one a
    // second.
    let mut tasks = vec![AbortOnDrop(
        service
            .start_database_checks(settings.health_check_interval)
            .await,
    )];
    // SIGHUP and a change of the files read the TLS files again.
    if let Some(t) = &tls {
        let watch = crate::tls::keep_current(Arc::downgrade(t), settings.tls_watch_interval);
        tasks.push(AbortOnDrop(tokio::spawn(watch)));
    }
    // Settings changed elsewhere reach this instance; the task ends with
    // the router (which holds the serials).
    crate::serial::refresh::spawn(service.serials(), settings.settings_refresh);
    Ok(Started {
        service,
        snowflake,
        admin,
        tls,
        _tasks: tasks,
    })
}

/// The start-up line, and the warnings about what is open to whom.
fn log_start(settings: &Settings, listeners: &Listeners, started: &Started) {
    let (addr, resp_addr) = (listeners.addr, listeners.resp_addr);
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        backend = started.service.backend(),
        databases = %settings
            .database_urls
            .iter()
            .map(|u| store::redact_url(u))
            .collect::<Vec<_>>()
            .join(" "),
        listen = %addr,
        resp_listen = resp_addr.map(|a| a.to_string()),
        health_listen = listeners.health_addr.map(|a| a.to_string()),
        admin_auth = started.admin.describe(),
        client_auth = ?settings.client_auth,
        tls = describe_tls(settings.tls.as_ref()),
        "seqd started"
    );
    if matches!(started.admin, AdminAuth::OpenOnLoopback) {
        tracing::warn!(
            "no admin token set: admin calls are open to anyone on this host (loopback listener)"
        );
    }
    let exposed = !addr.ip().is_loopback() || resp_addr.is_some_and(|a| !a.ip().is_loopback());
    if settings.client_auth == ClientAuth::Off && exposed {
        tracing::warn!(
            "--client-auth off: anyone who reaches this port may draw IDs from and list every sequence"
        );
    }
    if settings.client_auth == ClientAuth::On && started.tls.is_none() {
        let doors = [("http", Some(addr)), ("resp", resp_addr)];
        for (door, address) in doors.into_iter().filter_map(|(d, a)| Some((d, a?))) {
            if !address.ip().is_loopback() {
                tracing::warn!(
                    door,
                    %address,
                    "--client-auth on without TLS on a non-loopback address: client tokens cross the network in clear (set --tls-cert and --tls-key)"
                );
            }
        }
    }
}

/// Serves the health listener (plain HTTP, whatever the doors speak) until
/// the returned sender is used or dropped; its /readyz says `draining`
/// meanwhile.
fn serve_health(
    listener: TcpListener,
    state: &AppState,
    settings: &Settings,
) -> (tokio::sync::oneshot::Sender<()>, AbortOnDrop) {
    let (stop_health, health_stop) = tokio::sync::oneshot::channel::<()>();
    let app = crate::http::health_router(state.clone(), &settings.limits);
    // Probes and scrapers: a few connections, kept out of the doors' share.
    let connections = crate::http::serve::ConnLimits {
        max_connections: HEALTH_CONNECTIONS,
        ..settings.connections
    };
    let task = tokio::spawn(async move {
        let stop = async move {
            let _ = health_stop.await;
        };
        if let Err(e) = crate::http::serve::serve(listener, app, connections, stop).await {
            tracing::error!(error = %e, "serving the health listener failed");
        }
    });
    (stop_health, AbortOnDrop(task))
}

/// Serves both doors (and the health listener) until `shutdown`, then
/// drains them: at most `settings.shutdown_timeout`, then the remaining
/// connections are dropped. The health listener answers until the doors
/// are done; then it drains too, on its task (returned: it ends when
/// dropped).
async fn serve_doors(
    listeners: Listeners,
    started: &Started,
    settings: &Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Option<AbortOnDrop>> {
    let state = AppState {
        metrics_top: settings.metrics_top,
        resp_listen: listeners.resp_addr.map(|a| a.to_string()),
        reads: crate::http::reads::ReadGate::for_pool(settings.db_max_connections),
        ..AppState::serving(started.service.clone())
    };
    let health = listeners.health.map(|l| serve_health(l, &state, settings));
    let app = router_with(state, &settings.limits, &settings.tinyid_prefix);
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let resp_server = {
        let (service, limits) = (started.service.clone(), settings.resp);
        let (tls, stop, resp) = (started.tls.clone(), stop_rx.clone(), listeners.resp);
        async move {
            match resp {
                Some(l) => crate::resp::serve(l, service, limits, tls, stop).await,
                None => Ok(()),
            }
        }
    };
    let draining = started.service.clone();
    let (http, tls) = (listeners.http, started.tls.clone());
    let http_server = serve_with_tls(http, app, settings.connections, tls, async move {
        shutdown.await;
        tracing::info!("shutting down: finishing in-flight requests");
        draining.begin_draining();
        let _ = stop_tx.send(true);
    });
    let servers = async {
        let (h, r) = tokio::join!(http_server, resp_server);
        h.context("serving HTTP")?;
        r.context("serving RESP")
    };
    let bound = settings.shutdown_timeout;
    tokio::select! {
        r = servers => r?,
        _ = async {
            let _ = stop_rx.wait_for(|stopped| *stopped).await;
            tokio::time::sleep(bound).await;
        } => tracing::warn!(?bound, "shutdown bound reached; dropping remaining connections"),
    }
    Ok(health.map(|(stop_health, task)| {
        let _ = stop_health.send(());
        task
    }))
}

/// After the doors: gives back what the buffers reserved and did not hand
/// out, so a rolling restart leaves no gap (a crash cannot, and leaves
/// one), then stops the snowflake generator.
async fn shut_down(started: &Started, settings: &Settings) {
    let started_at = std::time::Instant::now();
    let given = started
        .service
        .allocator()
        .give_back(
            GIVE_BACK_CONCURRENCY.min(settings.db_max_connections as usize),
            GIVE_BACK_BOUND.min(settings.shutdown_timeout),
        )
        .await;
    tracing::info!(
        ids = given.ids,
        sequences = given.sequences,
        fetch_in_flight = given.fetch_in_flight,
        reserved_since = given.reserved_since,
        failed = given.failed,
        unfinished = given.unfinished,
        elapsed_ms = started_at.elapsed().as_millis() as u64,
        "gave back unused IDs"
    );
    if let Some(sf) = &started.snowflake {
        // Stops issuing and releases the worker ID (bounded).
        sf.shutdown().await;
    }
    tracing::info!("seqd stopped");
}

/// How the start-up line describes TLS on the listeners.
fn describe_tls(files: Option<&TlsFiles>) -> &'static str {
    match files {
        None => "off",
        Some(TlsFiles {
            client_ca: None, ..
        }) => "on",
        Some(_) => "on, client certificates required",
    }
}

/// Aborts a background task when the server that started it returns.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Give-backs in flight at once at shutdown.
const GIVE_BACK_CONCURRENCY: usize = 16;
/// Longest the give-back at shutdown may take.
pub const GIVE_BACK_BOUND: std::time::Duration = std::time::Duration::from_secs(5);

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

/// Most open connections of the health listener (probes and scrapers);
/// counted apart from the doors' caps in the open-file budget.
const HEALTH_CONNECTIONS: usize = 64;

/// Descriptors seqd holds besides its connections' sockets: the listeners,
/// log and database files, the runtime's own.
const OTHER_DESCRIPTORS: u64 = 64;

/// Raises the soft limit on open files to the hard one (a service manager
/// or a shell often sets the soft one far lower). When the doors' connection
/// caps, the pools and [`OTHER_DESCRIPTORS`] need more than that, the caps
/// are lowered to fit ([`fit_caps`]) and one line at start says so: past the
/// limit no door could accept, so a flood on one door would take the other
/// (and its health routes) with it.
fn open_files(settings: &mut Settings) {
    let resp = settings
        .resp_listen
        .is_some()
        .then_some(settings.resp.max_connections);
    let http = settings.connections.max_connections;
    let pools = settings.database_urls.len() as u64 * u64::from(settings.db_max_connections) + 2;
    let health = if settings.health_listen.is_some() {
        HEALTH_CONNECTIONS as u64
    } else {
        0
    };
    let reserved = pools + health + OTHER_DESCRIPTORS;
    let needed = (http + resp.unwrap_or(0)) as u64 + reserved;
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) if limit < needed => {
            let (http_cap, resp_cap) = fit_caps(limit.saturating_sub(reserved), http, resp);
            settings.connections.max_connections = http_cap;
            if let Some(cap) = resp_cap {
                settings.resp.max_connections = cap;
            }
            tracing::warn!(
                limit,
                needed,
                max_connections = http_cap,
                resp_max_connections = resp_cap.unwrap_or(0),
                "the open-file limit is below what the doors' connection caps and the database \
                 pools may use: the caps are lowered to fit, each door keeping its share; raise \
                 the hard limit (ulimit -Hn, LimitNOFILE=) to serve more connections"
            )
        }
        Ok(limit) => tracing::debug!(limit, needed, "open-file limit"),
        Err(e) => tracing::warn!(error = %e, "the open-file limit could not be read or raised"),
    }
}

/// The doors' connection caps lowered to fit `available` descriptors: each
/// door keeps up to half of them, and what one does not ask for goes to the
/// other (each at least one), so that a flood on one door leaves the other
/// its share.
fn fit_caps(available: u64, http: usize, resp: Option<usize>) -> (usize, Option<usize>) {
    let available = usize::try_from(available).unwrap_or(usize::MAX).max(2);
    let Some(resp) = resp else {
        return (http.min(available), None);
    };
    let http_cap = http.min((available / 2).max(available.saturating_sub(resp)));
    let resp_cap = resp.min(available - http_cap).max(1);
    (http_cap.max(1), Some(resp_cap))
}

/// `seqd serve`: check the settings, open the store, bind, serve until a signal.
pub async fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    let mut settings = Settings::from_args(args);
    crate::snowflake::check(&settings.snowflake)?;
    open_files(&mut settings);
    // TLS files that do not load stop the start before any database work.
    if let Some(files) = &settings.tls {
        TlsStore::load(files)?;
    }
    let (store, leases) = crate::open::open_stripes(
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

#[cfg(test)]
mod tests {
    use super::fit_caps;

    #[test]
    fn caps_past_the_limit_are_shared_between_the_doors() {
        assert_eq!(fit_caps(180, 10_000, Some(10_000)), (90, Some(90)));
        assert_eq!(fit_caps(180, 10, Some(10_000)), (10, Some(170)));
        assert_eq!(fit_caps(180, 10_000, Some(10)), (170, Some(10)));
        assert_eq!(fit_caps(180, 10_000, None), (180, None));
        assert_eq!(fit_caps(0, 10_000, Some(10_000)), (1, Some(1)));
    }
}
