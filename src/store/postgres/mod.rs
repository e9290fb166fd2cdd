//! PostgreSQL: one pool (this file: connect options, statement bounds,
//! [`connect`](crate::store::connect)) with the sequence store over it ([`PostgresStore`],
//! `sequences.rs`) and the worker leases ([`PgWorkerLeases`], `workers.rs`).

pub mod sequences;
pub mod workers;

pub use sequences::PostgresStore;
pub use workers::PgWorkerLeases;

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgSslMode};
use sqlx::ConnectOptions;

use crate::store::migrator::check_schema_name;
use crate::store::tls::{check_files, connect_failed, has_param, without_param};
use crate::store::{unavailable, StoreError, StoreOptions};

/// The names of the CA file's parameter (libpq's first, then the driver's).
const ROOT_CERT: [&str; 3] = ["sslrootcert", "ssl-root-cert", "ssl-ca"];
/// The names of the parameters that name a certificate or key file.
const TLS_FILES: [&str; 7] = [
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
];

/// The connect options the URL says (the driver's reading, and the
/// `PG...` environment variables for what the URL leaves out), with libpq's
/// rules for TLS that the driver lacks:
///
/// - `sslmode=require` with a CA file (`sslrootcert`, or `PGSSLROOTCERT`)
///   checks that the CA signed the server's certificate, as `verify-ca`;
/// - `sslrootcert=system` trusts the system's CA store only (no file) and
///   means `sslmode=verify-full`: no `sslmode` takes that, a weaker one is
///   refused.
///
/// Files the URL names must be readable ([`check_files`]).
pub(crate) fn url_options(url: &str) -> Result<PgConnectOptions, StoreError> {
    let (url, system) = without_param(url, &ROOT_CERT, "system");
    check_files(&url, &TLS_FILES)?;
    let connect = PgConnectOptions::from_str(&url).map_err(unavailable)?;
    let mode_named =
        has_param(&url, &["sslmode", "ssl-mode"]) || std::env::var_os("PGSSLMODE").is_some();
    let ca_named = has_param(&url, &ROOT_CERT) || std::env::var_os("PGSSLROOTCERT").is_some();
    Ok(match connect.get_ssl_mode() {
        PgSslMode::VerifyFull => connect,
        _ if system && !mode_named => connect.ssl_mode(PgSslMode::VerifyFull),
        _ if system => {
            return Err(StoreError::Config(
                "sslrootcert=system checks the server's certificate and host name against the \
                 system's CA store: it takes sslmode=verify-full (or no sslmode)"
                    .into(),
            ))
        }
        PgSslMode::Require if ca_named => connect.ssl_mode(PgSslMode::VerifyCa),
        _ => connect,
    })
}

/// One connection to `url` with its own settings ([`url_options`]), for
/// reading another system's tables (the imports).
pub(crate) async fn connection(url: &str) -> Result<PgConnection, StoreError> {
    url_options(url)?.connect().await.map_err(connect_failed)
}

/// The connect options of `url` with the statement bounds of `options` and
/// its schema as `search_path` (after the URL's own options, so it wins),
/// sent in the startup packet (no extra round trip per connection).
fn connect_options(url: &str, options: &StoreOptions) -> Result<PgConnectOptions, StoreError> {
    let ms = |d: std::time::Duration| format!("{}ms", d.as_millis().max(1));
    let mut connect = url_options(url)?.options([
        ("lock_timeout", ms(options.lock_timeout)),
        ("statement_timeout", ms(options.statement_timeout)),
    ]);
    if let Some(schema) = &options.schema {
        check_schema_name(schema)?;
        connect = connect.options([("search_path", schema)]);
    }
    Ok(connect)
}
