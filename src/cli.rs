//! The operators' subcommands: `seqd migrate` and `seqd sequences ...`. They
//! talk to the database directly, not to a running server.

use std::sync::Arc;

use anyhow::{anyhow, bail, Context};

use crate::config::{BumpArgs, DatabaseArgs, SchemaArgs, SequencesCommand};
use crate::domain::{
    escape_controls, validate_step, NamePrefix, NewSequence, ParseError, SeqName, SerialSettings,
    PERIOD_SEPARATOR,
};
use crate::serial::purge::{plan_purge, PURGE_MARGIN};
use crate::startup::{open_database, open_store};
use crate::store::stripes::audit::audit_rows;
use crate::store::stripes::{bind_stripes, DEFAULT_BLOCK};
use crate::store::{
    self, BumpMode, Bumped, MigrateMode, SequencePatch, SequenceRow, StoreError, StoreOptions,
};

/// `seqd migrate`: applies the migrations to every database URL, whatever
/// `--migrate` says, then checks (and for a fresh set, writes) their stripe
/// records, as `seqd serve` does at start ([`bind_stripes`]).
pub async fn migrate(db: &DatabaseArgs) -> anyhow::Result<()> {
    let urls = db.urls();
    let stores = open_stores(db, MigrateMode::Auto).await?;
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
    let setup = db.schema_setup();
    let options = StoreOptions::default()
        .with_schema(setup.schema)
        .with_migrate(mode);
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
    let store = open_store(db).await?;
    let row = store
        .get(&name)
        .await
        .context("reading the sequence")?
        .ok_or_else(|| anyhow!("sequence '{name}' not found"))?;
    let Some(settings) = &row.serial else {
        bail!("sequence '{name}' does not issue serial numbers: it has no period rows");
    };
    let periods = store.list_periods(&name).await.context("listing period rows")?;
    let keys: Vec<String> = periods.iter().map(|p| p.key.clone()).collect();
    let plan = plan_purge(
        &keys,
        settings.reset,
        &settings.zone(),
        jiff::Timestamp::now(),
        older_than,
    );
    let mut out = std::io::stdout().lock();
    use std::io::Write as _;
    let _ = writeln!(out, "{:<10} {:>20}  ACTION", "PERIOD", "MAX_ID");
    let hours = PURGE_MARGIN.as_hours();
    let margin = format!("keep: ended less than {hours}h ago (safety margin)");
    for p in &periods {
        let action = if plan.purge.contains(&p.key) {
            if dry_run { "would delete" } else { "delete" }
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
    if dry_run {
        let _ = writeln!(out, "dry run: {} of {} period rows would be deleted", plan.purge.len(), keys.len());
        return Ok(());
    }
    let deleted = store
        .delete_periods(&name, &plan.purge)
        .await
        .context("deleting period rows")?;
    let _ = writeln!(out, "deleted {deleted} of {} period rows", keys.len());
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
            let name = parse_name(name)?;
            let new = NewSequence::new(
                name.clone(),
                *start,
                *step,
                description.clone(),
                db.max_step,
            )
            .map_err(|e| match e {
                ParseError::Start => anyhow!("{e} (got {start})"),
                ParseError::Step { .. } => anyhow!("{e} (got {step})"),
                ParseError::DescriptionControl { .. } => anyhow!("{e}"),
                _ => anyhow!("{e} (got {} characters)", description.chars().count()),
            })?
            .with_ordering(ordering.parse().map_err(|e| anyhow!("{e} (got {ordering:?})"))?);
            let settings = SerialSettings::merge(
                serial.format.as_deref(),
                serial.reset.as_deref(),
                serial.time_zone.as_deref(),
                serial.overflow.as_deref(),
                None,
            )?;
            let new = match settings {
                Some(s) if db.urls().len() > 1 => {
                    bail!("serial numbers need a single database, not stripes (format {})", s.format)
                }
                Some(s) => {
                    s.check_start(new.start)?;
                    new.with_serial(s)
                }
                None => new,
            };
            let store = open_store(db).await?;
            match store.create(&new).await {
                Ok(row) => print_rows(&[row]),
                Err(StoreError::AlreadyExists) => {
                    bail!("sequence '{name}' already exists (see `seqd sequences list`; change its step with `seqd sequences set-step`)")
                }
                Err(e) => return Err(e).context("creating the sequence"),
            }
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
            let step =
                validate_step(*step, db.max_step).map_err(|e| anyhow!("{e} (got {step})"))?;
            let store = open_store(db).await?;
            let patch = SequencePatch {
                step: Some(step),
                description: None,
                ordering: None,
                serial: None,
            };
            match store.update(&name, &patch).await {
                Ok(row) => print_rows(&[row]),
                Err(StoreError::NotFound) => {
                    bail!("sequence '{name}' not found; create it with `seqd sequences create {name}`")
                }
                Err(e) => return Err(e).context("updating the sequence"),
            }
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
/// sequences' and their period counter rows ([`store::Store::bump`]).
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
    let store = open_store(&args.db).await?;
    if mode == BumpMode::Apply {
        make_current_periods(&store, names.as_deref()).await?;
    }
    match store.bump(names.as_deref(), args.by, mode).await {
        Ok(plan) => print_bumped(&plan, args.by, mode).context("printing the bumped sequences")?,
        Err(StoreError::BumpRefused(refusal)) => {
            bail!("nothing bumped: {refusal}")
        }
        Err(e) => return Err(e).context("bumping the sequences"),
    }
    Ok(())
}

/// Before a bump: makes sure the counter row of the current period (on this
/// host's clock) exists for every serial sequence the bump covers, so the
/// bump raises it too. After a failover to
/// a replica that never received that row, the first request would create
/// it at `start` and repeat the serials the old primary issued in it.
async fn make_current_periods(
    store: &Arc<dyn crate::store::Store>,
    names: Option<&[crate::domain::SeqName]>,
) -> anyhow::Result<()> {
    let rows = match names {
        Some(names) => {
            let mut rows = Vec::with_capacity(names.len());
            for name in names {
                if let Some(row) = store.get(name).await.context("reading a sequence to bump")? {
                    rows.push(row);
                }
            }
            rows
        }
        None => store.list().await.context("listing the sequences to bump")?,
    };
    let now = jiff::Timestamp::now();
    for row in rows {
        let Some(settings) = &row.serial else { continue };
        let Ok(period) = crate::serial::Period::of(now, &settings.zone(), settings.reset) else {
            continue;
        };
        let key = period.key;
        store
            .create_period(&row.name, &key)
            .await
            .with_context(|| format!("creating the period row {key} of {}", row.name))?;
    }
    Ok(())
}

/// Prints one line per row (`NAME MAX_ID -> NEW_MAX_ID`; a period counter
/// row says whose period it is) and a summary that counts the sequences and
/// the counter rows apart: a serial sequence is fenced by its counters.
fn print_bumped(plan: &[Bumped], by: i64, mode: BumpMode) -> std::io::Result<()> {
    use std::io::Write;

    // Locked and buffered: `--all` may print many thousands of lines.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    writeln!(out, "{:<32} {:>20}    NEW_MAX_ID", "NAME", "MAX_ID")?;
    let mut counters = 0;
    for b in plan {
        write!(out, "{:<32} {:>20} -> {}", b.name, b.old_max_id, b.new_max_id)?;
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
        writeln!(out, "... and more (only the first {MISSING_SHOWN} are shown)")?;
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
