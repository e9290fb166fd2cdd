//! The operators' subcommands: `seqd migrate` and `seqd sequences ...`. They
//! talk to the database directly, not to a running server.

use std::sync::Arc;

use anyhow::{anyhow, Context};

use crate::allocator::AllocatorConfig;
use crate::config::{BumpArgs, DatabaseArgs, MigrateArgs, SchemaArgs, SequencesCommand};
use crate::domain::{escape_controls, NamePrefix, SeqName, PERIOD_SEPARATOR};
use crate::open::{open_database, open_store};
use crate::serial::purge::PURGE_MARGIN;
use crate::service::{
    AdminCalls, CreateRequest, PatchRequest, Presented, SerialFields, Service, ServiceError,
};
use crate::store::stripes::audit::audit_rows;
use crate::store::stripes::{bind_stripes, DEFAULT_BLOCK};
use crate::store::{self, BumpMode, Bumped, MigrateMode, SequenceRow, Store, StoreOptions};

/// `seqd migrate`: applies the migrations to every database URL, whatever
/// `--migrate` says, then checks (and for a fresh set, writes) their stripe
/// records, as `seqd serve` does at start ([`bind_stripes`]).
pub async fn migrate(args: &MigrateArgs) -> anyhow::Result<()> {
    let db = &args.db;
    let urls = db.urls();
    let mut setup = db.schema_setup();
    setup.fence.new_database = args.new_database;
    let stores = open_stores_with(db, &setup, MigrateMode::Auto).await?;
    for url in &urls {
        println!("migrations applied to {}", store::redact_url(url));
    }
    let layouts = bind_stripes(&stores, &urls, MigrateMode::Auto, DEFAULT_BLOCK)
        .await
        .context("checking the stripe records")?;
    if layouts.len() > 1 {
        println!(
            "stripe records in place: {} stripes, blocks of {} IDs",
            layouts.len(),
            layouts[0].block()
        );
    }
    Ok(())
}

/// Connects to every URL of `db` (stripe order) and prepares each schema as
/// `mode` says; the sequence stores.
pub(crate) async fn open_stores(
    db: &DatabaseArgs,
    mode: MigrateMode,
) -> anyhow::Result<Vec<Arc<dyn store::Store>>> {
    open_stores_with(db, &db.schema_setup(), mode).await
}

/// [`open_stores`] with the schema setup given.
async fn open_stores_with(
    db: &DatabaseArgs,
    setup: &crate::store::migrator::SchemaSetup,
    mode: MigrateMode,
) -> anyhow::Result<Vec<Arc<dyn store::Store>>> {
    let options = StoreOptions::default()
        .with_setup(setup)
        .with_migrate(mode)
        .with_max_connections(db.db_max_connections);
    let mut stores = Vec::new();
    for url in db.urls() {
        stores.push(open_database(&url, &options, mode).await?.sequences());
    }
    Ok(stores)
}

/// `seqd schema`: prints the complete DDL of a dialect.
pub fn schema(args: &SchemaArgs) {
    print!("{}", store::migrator::schema_sql(args.dialect));
}

/// `seqd sequences purge-periods NAME --older-than AGE [--dry-run]`: deletes
/// the period rows of a serial sequence whose period ended at least AGE and
/// at least [`PURGE_MARGIN`] ago, never the current period's
/// ([`plan_purge`]); says which rows the margin kept.
async fn purge_periods(
    name: &str,
    older_than: std::time::Duration,
    dry_run: bool,
    db: &DatabaseArgs,
) -> anyhow::Result<()> {
    let name = parse_name(name)?;
    let older_than = jiff::SignedDuration::try_from(older_than)
        .map_err(|_| anyhow!("--older-than is too long"))?;
    let report = admin(db)
        .await?
        .purge_periods(&name, older_than, jiff::Timestamp::now(), dry_run)
        .await
        .map_err(|e| door(e, &name))?;
    let (periods, plan) = (&report.periods, &report.plan);
    let keys = periods.len();
    let mut out = std::io::stdout().lock();
    use std::io::Write as _;
    let _ = writeln!(out, "{:<10} {:>20}  ACTION", "PERIOD", "MAX_ID");
    let hours = PURGE_MARGIN.as_hours();
    let margin = format!("keep: ended less than {hours}h ago (safety margin)");
    for p in periods {
        let action = if plan.purge.contains(&p.key) {
            if dry_run {
                "would delete"
            } else {
                "delete"
            }
        } else if plan.margin.contains(&p.key) {
            &margin
        } else {
            "keep"
        };
        let key = if p.key.is_empty() { "(never)" } else { &p.key };
        let _ = writeln!(out, "{key:<10} {:>20}  {action}", p.max_id);
    }
    if !plan.margin.is_empty() {
        let _ = writeln!(
            out,
            "kept {} period rows that ended less than {hours}h ago, whatever --older-than says \
             (an instance whose clock is behind would create them again and repeat their serials): {}",
            plan.margin.len(),
            plan.margin.join(", ")
        );
    }
    match report.deleted {
        None => {
            let _ = writeln!(
                out,
                "dry run: {} of {keys} period rows would be deleted",
                plan.purge.len()
            );
        }
        Some(deleted) => {
            let _ = writeln!(out, "deleted {deleted} of {keys} period rows");
        }
    }
    Ok(())
}

/// `seqd sequences create|list|set-step|bump|purge-periods`.
pub async fn sequences(cmd: &SequencesCommand) -> anyhow::Result<()> {
    match cmd {
        SequencesCommand::Create {
            name,
            start,
            step,
            description,
            ordering,
            serial,
            db,
        } => {
            let req = CreateRequest {
                name: name.clone(),
                start: Some(*start),
                step: Some(*step),
                description: Some(description.clone()),
                ordering: Some(ordering.clone()),
                serial: SerialFields {
                    format: serial.format.clone(),
                    reset: serial.reset.clone(),
                    time_zone: serial.time_zone.clone(),
                    overflow: serial.overflow.clone(),
                },
            };
            let name = parse_name(name)?;
            let row = admin(db)
                .await?
                .create(req)
                .await
                .map_err(|e| door(e, &name))?;
            print_rows(&[row]);
        }
        SequencesCommand::List { prefix, db } => {
            let prefix = prefix
                .as_deref()
                .map(|p| NamePrefix::parse(p).map_err(|e| anyhow!("{e} (got {p:?})")))
                .transpose()?;
            let stores = open_stores(db, db.migrate).await?;
            list(stores[0].as_ref(), prefix.as_ref()).await?;
            if stores.len() > 1 {
                report_missing(&stores).await?;
            }
        }
        SequencesCommand::SetStep { name, step, db } => {
            let name = parse_name(name)?;
            let req = PatchRequest {
                step: Some(*step),
                ..PatchRequest::default()
            };
            let row = admin(db)
                .await?
                .patch(&name, req)
                .await
                .map_err(|e| door(e, &name))?;
            print_rows(&[row]);
        }
        SequencesCommand::Bump(args) => bump(args).await?,
        SequencesCommand::PurgePeriods {
            name,
            older_than,
            dry_run,
            db,
        } => purge_periods(name, *older_than, *dry_run, db).await?,
    }
    Ok(())
}

/// `seqd sequences bump`: checks the names, then bumps (or plans) in one
/// transaction and prints each row's `max_id` before and after: the named
/// sequences' and their period counter rows ([`store::Catalog::bump`]).
async fn bump(args: &BumpArgs) -> anyhow::Result<()> {
    let names = if args.all {
        None
    } else {
        Some(
            args.names
                .iter()
                .map(|n| parse_name(n))
                .collect::<Result<Vec<_>, _>>()?,
        )
    };
    let mode = if args.dry_run {
        BumpMode::DryRun
    } else {
        BumpMode::Apply
    };
    let plan = admin(&args.db)
        .await?
        .bump(names.as_deref(), args.by, mode)
        .await
        .map_err(|e| match e {
            ServiceError::BumpRefused(refusal) => anyhow!("nothing bumped: {refusal}"),
            e => anyhow::Error::new(e).context("bumping the sequences"),
        })?;
    print_bumped(&plan, args.by, mode).context("printing the bumped sequences")
}

/// The service over the databases of `db`, for one command.
pub(crate) async fn service(db: &DatabaseArgs) -> anyhow::Result<Service> {
    Ok(service_over(open_store(db).await?, db))
}

/// The service over `store`, opened from `db`, for one command.
pub(crate) fn service_over(store: Arc<dyn Store>, db: &DatabaseArgs) -> Service {
    let config = AllocatorConfig {
        max_step: db.max_step,
        ..AllocatorConfig::default()
    };
    Service::new(store, config)
}

/// The admin calls of [`service`]: its commands run on this machine with
/// the database's credentials ([`Presented::LOCAL`]).
pub(crate) async fn admin(db: &DatabaseArgs) -> anyhow::Result<AdminCalls> {
    Ok(service(db).await?.admin(Presented::LOCAL)?)
}

/// The CLI's words for a service error about `name`: what to run next.
fn door(e: ServiceError, name: &SeqName) -> anyhow::Error {
    match e {
        ServiceError::NotFound(_) => {
            anyhow!("sequence '{name}' not found; create it with `seqd sequences create {name}`")
        }
        ServiceError::Exists(_) => anyhow!(
            "sequence '{name}' already exists (see `seqd sequences list`; change its step with \
             `seqd sequences set-step`)"
        ),
        ServiceError::Unavailable | ServiceError::Unreachable => {
            anyhow!("the database is unreachable or too slow; nothing changed")
        }
        e => anyhow::Error::new(e),
    }
}

/// the counter rows apart: a serial sequence is fenced by its counters.
fn print_bumped(plan: &[Bumped], by: i64, mode: BumpMode) -> std::io::Result<()> {
    use std::io::Write;

    // Locked and buffered: `--all` may print many thousands of lines.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    writeln!(out, "{:<32} {:>20}    NEW_MAX_ID", "NAME", "MAX_ID")?;
    let mut counters = 0;
    for b in plan {
        write!(
            out,
            "{:<32} {:>20} -> {}",
            b.name, b.old_max_id, b.new_max_id
        )?;
        match b.name.split_once(PERIOD_SEPARATOR) {
            Some((parent, key)) => {
                counters += 1;
                let key = if key.is_empty() { "(never)" } else { key };
                writeln!(out, "  (counter of period {key} of {parent})")?;
            }
            None => writeln!(out)?,
        }
    }
    let sequences = plan.len() - counters;
    let with = if counters > 0 {
        format!(", with {counters} period counter rows of serial sequences")
    } else {
        String::new()
    };
    match mode {
        BumpMode::Apply => writeln!(out, "bumped {sequences} sequences by {by}{with}")?,
        BumpMode::DryRun => writeln!(
            out,
            "dry run: would bump {sequences} sequences by {by}{with}; nothing written"
        )?,
    }
    out.flush()
}

/// Parses a name given on the command line, echoing it in the error.
fn parse_name(name: &str) -> anyhow::Result<SeqName> {
    SeqName::parse(name).map_err(|e| anyhow!("{e} (got {name:?})"))
}

/// `seqd sequences list`: every sequence, or those whose name starts with
/// `prefix`, read and printed one page of [`store::MAX_PAGE`] at a time, so
/// a million rows never sit in memory at once. Pages are separate reads, not
/// one snapshot: a row created or deleted meanwhile may or may not show,
/// every other row shows once.
async fn list(store: &dyn store::Store, prefix: Option<&NamePrefix>) -> anyhow::Result<()> {
    use std::io::Write;

    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    write_header(&mut out)?;
    let mut after = None;
    loop {
        let page = store
            .list_page(prefix, after.as_ref(), store::MAX_PAGE)
            .await
            .context("listing the sequences")?;
        write_rows(&mut out, &page.rows)?;
        out.flush()?;
        match page.rows.last() {
            Some(last) if page.more => after = Some(last.name.clone()),
            _ => return Ok(()),
        }
    }
}

/// Most names [`report_missing`] shows.
const MISSING_SHOWN: usize = 1000;

/// After `seqd sequences list` over several stripes (which lists stripe 1's
/// rows): the names that have a row on some stripes and not on others, from
/// a merge walk over every stripe's pages ([`audit_rows`]), at most
/// [`MISSING_SHOWN`]. Stripes count from 1, as the URLs do. Reports, never
/// fails: the exit status stays 0.
async fn report_missing(stores: &[Arc<dyn store::Store>]) -> anyhow::Result<()> {
    use std::io::Write;

    let missing = audit_rows(stores, MISSING_SHOWN + 1)
        .await
        .context("comparing the stripes' rows")?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if missing.is_empty() {
        writeln!(
            out,
            "\nevery sequence has its row on all {} stripes (rows above: stripe 1's)",
            stores.len()
        )?;
        return Ok(out.flush()?);
    }
    writeln!(
        out,
        "\nrows above: stripe 1's. Sequences whose row is missing on some stripes \
         (`seqd stripes init` creates them):"
    )?;
    writeln!(out, "{:<32} MISSING ON STRIPES", "NAME")?;
    for m in missing.iter().take(MISSING_SHOWN) {
        let on: Vec<String> = m.missing_on.iter().map(|i| (i + 1).to_string()).collect();
        writeln!(out, "{:<32} {}", m.name.as_str(), on.join(", "))?;
    }
    if missing.len() > MISSING_SHOWN {
        writeln!(
            out,
            "... and more (only the first {MISSING_SHOWN} are shown)"
        )?;
    }
    Ok(out.flush()?)
}

/// Prints the rows as a table (see [`write_rows`]).
fn print_rows(rows: &[SequenceRow]) {
    let mut out = std::io::stdout().lock();
    let _ = write_header(&mut out).and_then(|()| write_rows(&mut out, rows));
}

/// The header line of [`write_rows`]' table.
fn write_header(out: &mut impl std::io::Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<32} {:>20} {:>10}  {:<8}  DESCRIPTION",
        "NAME", "MAX_ID", "STEP", "ORDERING"
    )
}

/// Writes one line per row; text read from the database is written with
/// its control characters escaped (rows inserted by SQL may hold them).
fn write_rows(out: &mut impl std::io::Write, rows: &[SequenceRow]) -> std::io::Result<()> {
    for r in rows {
        // `as_str`: SeqName's Display ignores width, which would break the columns.
        writeln!(
            out,
            "{:<32} {:>20} {:>10}  {:<8}  {}",
            r.name.as_str(),
            r.max_id,
            r.step,
            r.ordering.as_str(),
            escape_controls(&r.description)
        )?;
        if let Some(problem) = &r.problem {
            // Named where the operator looks, never hidden from the list.
            writeln!(
                out,
                "{:<32} cannot be used: {problem}; repair it with PATCH or SQL",
                "",
            )?;
        }
    }
    Ok(())
}
