//! Opening the databases as the flags say: one pool per database (the
//! sequences and the worker leases over it), the schema prepared as
//! `--migrate` says, several databases checked and bound as the stripes of
//! one set. Used by `seqd serve` and the operators' commands alike.

use std::sync::Arc;

use anyhow::Context;

use crate::config::DatabaseArgs;
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
