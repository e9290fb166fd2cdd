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
        .with_setup(&setup)
        .with_max_connections(db.db_max_connections);
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
/// when there are several) and the worker leases (of the first database).
///
/// `serving` (`seqd serve`): the background audit of the stripes' rows
/// runs, and a stripe other than the first that does not answer does not
/// stop the start when the others are stripes of a recorded set: it is
/// served without, marked down, while a task connects it, checks that it
/// is the missing stripe of this set and only then puts it in use
/// (docs/high-availability.md). The operators' commands need every stripe.
pub async fn open_stripes(
    urls: &[String],
    options: &StoreOptions,
    mode: MigrateMode,
    failover_after: std::time::Duration,
    serving: bool,
) -> anyhow::Result<(Arc<dyn Store>, Arc<dyn WorkerLeases>)> {
    anyhow::ensure!(!urls.is_empty(), "no database URL");
    let mut stores: Vec<Arc<dyn Store>> = Vec::with_capacity(urls.len());
    let mut leases = None;
    let mut missing = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        match open_database(url, options, mode).await {
            Ok(db) => {
                if i == 0 {
                    leases = Some(db.leases());
                }
                stores.push(db.sequences());
            }
            Err(e) if serving && i > 0 && is_outage(&e) => {
                let why = "not reachable since start: the database did not answer".to_string();
                tracing::error!(stripe = i, database = %store::redact_url(url), error = %e,
                    "a stripe does not answer at start; serving from the others and connecting \
                     it in the background");
                let backend = store::Dialect::of_url(url).map_or("unknown", |(d, _)| d.name());
                stores.push(store::stripes::striped::stand_in(backend, why));
                missing.push(i);
            }
            Err(e) => return Err(e),
        }
    }
    let leases = leases.expect("the first database answered");
    let bound = if missing.is_empty() {
        let block = store::stripes::DEFAULT_BLOCK;
        let layouts = store::stripes::bind_stripes(&stores, urls, mode, block).await;
        layouts.map(|layouts| (layouts, Vec::new()))
    } else {
        store::stripes::bind::bind_stripes_without(&stores, &missing, urls, mode).await
    };
    let (layouts, late) = bound.context("checking the stripe records")?;
    if stores.len() == 1 {
        return Ok((stores[0].clone(), leases));
    }
    let striped = StripedStore::new(stores.into_iter().zip(layouts).collect(), failover_after)?;
    for stripe in late {
        let i = stripe.index as usize;
        striped.mark_down(i, "not reachable since start");
        tokio::spawn(connect_later(
            striped.clone(),
            stripe,
            urls.to_vec(),
            options.clone(),
            mode,
        ));
    }
    if serving {
        striped.start_audit(store::stripes::striped::AUDIT_EVERY);
    }
    Ok((Arc::new(striped), leases))
}

/// Whether opening a database failed because it did not answer (not
/// because of its configuration or schema).
fn is_outage(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<store::StoreError>(),
            Some(store::StoreError::Unavailable(_))
        )
    })
}

/// How often a stripe that did not answer at start is tried again, at most.
const CONNECT_EVERY_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// Connects stripe `late.index` of `striped` (which did not answer at
/// start), prepares its schema, checks that it is that stripe of this set,
/// and puts it in use; tries again, backing off to [`CONNECT_EVERY_MAX`],
/// until it answers and checks out. One that answers but cannot be opened
/// as configured (its TLS certificate refused, say) is logged at each try
/// and stays out of use until it can be; one that answers but is not that
/// stripe is logged and stays out of use until a restart.
async fn connect_later(
    striped: StripedStore,
    late: store::stripes::bind::LateStripe,
    urls: Vec<String>,
    options: StoreOptions,
    mode: MigrateMode,
) {
    let i = late.index as usize;
    let url = &urls[i];
    let mut wait = std::time::Duration::from_millis(250);
    loop {
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(CONNECT_EVERY_MAX);
        let db = match open_database(url, &options, mode).await {
            Ok(db) => db,
            Err(e) if is_outage(&e) => {
                tracing::debug!(stripe = i, error = %e, "the stripe still does not answer");
                continue;
            }
            Err(e) => {
                // It answers, but cannot be opened as configured (a refused
                // TLS certificate, a schema it lacks): said at each try, as
                // the fix (a renewed certificate) needs no restart.
                tracing::error!(stripe = i, error = %format!("{e:#}"),
                    "the stripe answers but cannot be opened; it stays out of use, trying again");
                continue;
            }
        };
        let store = db.sequences();
        match late.check(&store, &urls, mode).await {
            Ok(()) => {
                striped.connect_stripe(i, store);
                return;
            }
            Err(e @ store::StoreError::Unavailable(_)) => {
                tracing::debug!(stripe = i, error = %e, "the stripe still does not answer");
            }
            Err(e) => {
                tracing::error!(stripe = i, error = %e,
                    "the database that answered is not the stripe this set misses: it stays out \
                     of use (fix the URL and restart)");
                striped.fence(i, "the database at this URL is not this stripe of the set");
                return;
            }
        }
    }
}
