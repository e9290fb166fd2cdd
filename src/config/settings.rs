//! [`Settings`]: what `seqd serve` runs with, from its flags or built by a
//! test. Not part of the loom build (it names the service's modules).

use std::time::Duration;

use super::{Secret, ServeArgs};
use crate::allocator::AllocatorConfig;
use crate::http::limits::Limits;
use crate::http::serve::ConnLimits;
use crate::resp::RespLimits;
use crate::service::ClientAuth;
use crate::store::migrator::SchemaSetup;
use crate::store::{self, StoreOptions};
use crate::tls::TlsFiles;

/// What `serve` needs besides the listener. `Debug` shows the database URL
/// with its password redacted.
#[derive(Clone)]
pub struct Settings {
    /// The database URLs, one per stripe (usually one).
    pub database_urls: Vec<String>,
    /// Admin bearer token, if any.
    pub admin_token: Option<Secret>,
    /// Whether drawing and reading need a client token (`--client-auth`).
    pub client_auth: ClientAuth,
    /// Allocator tuning.
    pub allocator: AllocatorConfig,
    /// Longest graceful shutdown waits for in-flight requests.
    pub shutdown_timeout: Duration,
    /// Snowflake IDs: enabled, layout, clock tolerance, lease.
    pub snowflake: crate::snowflake::SnowflakeSettings,
    /// Body size, request time and concurrency limits.
    pub limits: Limits,
    /// Connection limits: header-read and idle deadlines, open connections.
    pub connections: ConnLimits,
    /// `--migrate` and `--schema`.
    pub schema: SchemaSetup,
    /// Sequences given per-sequence series on `/metrics` (`--metrics-top`).
    pub metrics_top: usize,
    /// With several stripes, how long a stripe may take before the next
    /// one is raced (`--failover-after`).
    pub failover_after: Duration,
    /// Connections of each database's pool (`--db-max-connections`).
    pub db_max_connections: u32,
    /// How often the settings of live sequences are read again
    /// (`--settings-refresh`, docs/design.md, "Settings changes reach every
    /// instance").
    pub settings_refresh: Duration,
    /// How often the database is checked for the health routes
    /// (`--health-check-interval`, docs/design.md, "Readiness").
    pub health_check_interval: Duration,
    /// Largest range one lease may hold (`--max-lease`).
    pub max_lease: i64,
    /// Where Tinyid's routes are served (`--tinyid-prefix`).
    pub tinyid_prefix: String,
    /// Where the RESP door listens (`--resp-listen`); off when `None`.
    pub resp_listen: Option<String>,
    /// Where the health listener (plain HTTP: `/healthz`, `/readyz`,
    /// `/metrics`) listens (`--health-listen`); off when `None`.
    pub health_listen: Option<String>,
    /// The RESP door's caps and deadlines.
    pub resp: RespLimits,
    /// TLS on both listeners (`--tls-cert`, `--tls-key`, `--tls-client-ca`);
    /// plain TCP when `None`.
    pub tls: Option<TlsFiles>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Destructured, so that a new field cannot be left out unnoticed.
        let Settings {
            database_urls,
            admin_token,
            client_auth,
            max_lease,
            tinyid_prefix,
            resp_listen,
            health_listen,
            resp,
            tls,
            allocator,
            shutdown_timeout,
            snowflake,
            limits,
            connections,
            schema,
            metrics_top,
            failover_after,
            db_max_connections,
            settings_refresh,
            health_check_interval,
        } = self;
        f.debug_struct("Settings")
            .field(
                "database_urls",
                &database_urls
                    .iter()
                    .map(|u| store::redact_url(u))
                    .collect::<Vec<_>>(),
            )
            .field("admin_token", admin_token)
            .field("client_auth", client_auth)
            .field("max_lease", max_lease)
            .field("tinyid_prefix", tinyid_prefix)
            .field("resp_listen", resp_listen)
            .field("health_listen", health_listen)
            .field("resp", resp)
            .field("tls", tls)
            .field("allocator", allocator)
            .field("shutdown_timeout", shutdown_timeout)
            .field("snowflake", snowflake)
            .field("limits", limits)
            .field("connections", connections)
            .field("schema", schema)
            .field("metrics_top", metrics_top)
            .field("failover_after", failover_after)
            .field("db_max_connections", db_max_connections)
            .field("settings_refresh", settings_refresh)
            .field("health_check_interval", health_check_interval)
            .finish()
    }
}

impl Settings {
    /// Settings for a database URL with every other value at its default.
    pub fn for_database(url: impl Into<String>) -> Self {
        Settings {
            database_urls: vec![url.into()],
            admin_token: None,
            client_auth: ClientAuth::Off,
            max_lease: crate::service::lease::DEFAULT_MAX_LEASE,
            tinyid_prefix: crate::http::tinyid::DEFAULT_PREFIX.to_owned(),
            resp_listen: None,
            health_listen: None,
            resp: RespLimits::default(),
            tls: None,
            allocator: AllocatorConfig::default(),
            shutdown_timeout: Duration::from_secs(10),
            limits: Limits::default(),
            connections: ConnLimits::default(),
            snowflake: crate::snowflake::SnowflakeSettings::default(),
            schema: SchemaSetup::default(),
            metrics_top: crate::http::metrics::DEFAULT_TOP,
            failover_after: store::stripes::DEFAULT_FAILOVER_AFTER,
            db_max_connections: store::DEFAULT_MAX_CONNECTIONS,
            settings_refresh: crate::serial::refresh::DEFAULT_EVERY,
            health_check_interval: crate::service::health::CHECK_INTERVAL,
        }
    }

    /// Settings from `seqd serve`'s flags.
    pub fn from_args(args: &ServeArgs) -> Self {
        Settings {
            database_urls: args.db.urls(),
            admin_token: args.admin_token.clone(),
            client_auth: args.client_auth,
            max_lease: args.max_lease,
            tinyid_prefix: args.tinyid_prefix.clone(),
            resp_listen: args.resp_listen.clone(),
            health_listen: args.health_listen.clone(),
            resp: RespLimits {
                frame: crate::resp::FrameLimits::default(),
                frame_timeout: args.header_read_timeout,
                idle_timeout: args.resp_idle_timeout,
                max_connections: args.resp_max_connections.max(1),
            },
            tls: args.tls_cert.clone().map(|cert| TlsFiles {
                cert,
                key: args
                    .tls_key
                    .clone()
                    .expect("clap requires --tls-key with --tls-cert"),
                client_ca: args.tls_client_ca.clone(),
            }),
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
            connections: ConnLimits {
                header_read_timeout: args.header_read_timeout,
                idle_timeout: args.idle_timeout,
                max_connections: args.max_connections.max(1),
            },
            snowflake: args.snowflake.settings(),
            schema: args.db.schema_setup().with_reservation(args.max_lease),
            metrics_top: args.metrics_top,
            failover_after: args.failover_after,
            db_max_connections: args.db.db_max_connections,
            settings_refresh: args.settings_refresh,
            health_check_interval: args.health_check_interval,
        }
    }
}

impl Settings {
    /// The store's pool and statement bounds: under the allocator's fetch
    /// timeout, so the database ends a statement before a fetch gives up;
    /// `--schema`, and `--migrate` for the worker leases.
    pub fn store_options(&self) -> StoreOptions {
        StoreOptions::for_fetch_timeout(self.allocator.fetch_timeout)
            .with_setup(&self.schema)
            .with_max_connections(self.db_max_connections)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_redact_the_database_url_in_debug() {
        let settings = Settings::for_database("mysql://root:hunter2@db:3306/seqd");
        let shown = format!("{settings:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("mysql://root:***@db:3306/seqd"), "{shown}");
        assert!(
            shown.contains("shutdown_timeout"),
            "other fields still shown: {shown}"
        );
    }
}
