//! PostgreSQL: one pool (this file: connect options, statement bounds,
//! [`connect`](crate::store::connect)) with the sequence store over it ([`PostgresStore`],
//! `sequences.rs`) and the worker leases ([`PgWorkerLeases`], `workers.rs`).

pub mod sequences;
pub mod workers;

pub use sequences::PostgresStore;
pub use workers::PgWorkerLeases;

use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;

use crate::store::migrator::check_schema_name;
use crate::store::{unavailable, StoreError, StoreOptions};

/// The connect options of `url` with the statement bounds of `options` and
/// its schema as `search_path` (after the URL's own options, so it wins),
/// sent in the startup packet (no extra round trip per connection).
fn connect_options(url: &str, options: &StoreOptions) -> Result<PgConnectOptions, StoreError> {
    let ms = |d: std::time::Duration| format!("{}ms", d.as_millis().max(1));
    let mut connect = PgConnectOptions::from_str(url)
        .map_err(unavailable)?
        .options([
            ("lock_timeout", ms(options.lock_timeout)),
            ("statement_timeout", ms(options.statement_timeout)),
        ]);
    if let Some(schema) = &options.schema {
        check_schema_name(schema)?;
        connect = connect.options([("search_path", schema)]);
    }
    Ok(connect)
}
