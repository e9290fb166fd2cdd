//! `seqd stripes init`: the command around [`init_stripes`] (what it does,
//! and why it is safe: `src/store/stripes/init.rs`; docs/operations.md, "Adding
//! stripes").

use std::io::Write;

use anyhow::Context;

use crate::cli::open_stores;
use crate::config::{StripesCommand, StripesInitArgs};
use crate::store::stripes::init::{init_stripes, InitReport};
use crate::store::{redact_url, MigrateMode};

/// `seqd stripes ...`.
pub async fn run(cmd: &StripesCommand) -> anyhow::Result<()> {
    match cmd {
        StripesCommand::Init(args) => init(args).await,
    }
}

/// `seqd stripes init`: migrates every database (not in a dry run), runs
/// [`init_stripes`] and prints its summary.
async fn init(args: &StripesInitArgs) -> anyhow::Result<()> {
    let urls = args.db.urls();
    let mode = if args.dry_run {
        MigrateMode::Off
    } else {
        MigrateMode::Auto
    };
    let stores = open_stores(&args.db, mode).await?;
    let report = init_stripes(&stores, &urls, args.block, args.dry_run)
        .await
        .context("setting up the stripes")?;
    print_report(&report, &urls).context("printing the summary")
}

/// One line per stripe (its URL, what it was, rows created and raised),
/// then what was (or would be) recorded.
fn print_report(report: &InitReport, urls: &[String]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let (create, raise) = if report.dry_run {
        ("would create", "would raise")
    } else {
        ("created", "raised")
    };
    for (i, (stripe, url)) in report.stripes.iter().zip(urls).enumerate() {
        let was = match &stripe.before {
            Some(r) if r.count > 1 => format!("was {}", r.describe()),
            Some(_) => "was a single database".to_string(),
            None if stripe.unmigrated => "no seqd schema yet (would be migrated)".to_string(),
            None => "no stripe record".to_string(),
        };
        writeln!(
            out,
            "stripe {} of {} ({was}): {}: {create} {} rows, {raise} {} rows",
            i + 1,
            report.count,
            redact_url(url),
            stripe.created,
            stripe.raised
        )?;
    }
    if !report.made_instance.is_empty() {
        let names: Vec<&str> = report.made_instance.iter().map(|n| n.as_str()).collect();
        writeln!(
            out,
            "{} {} sequences from global to instance ordering (global ordering needs one \
             database; stripes serve instance): {}",
            if report.dry_run {
                "would switch"
            } else {
                "switched"
            },
            names.len(),
            names.join(", ")
        )?;
    }
    let created: u64 = report.stripes.iter().map(|s| s.created).sum();
    let raised: u64 = report.stripes.iter().map(|s| s.raised).sum();
    if report.dry_run {
        writeln!(
            out,
            "dry run: {} sequences; would create {created} rows and raise {raised}, then \
             record {} stripes with blocks of {} IDs; nothing written",
            report.names, report.count, report.block
        )?;
        if report.count > 1 && report.stripes.iter().any(|s| s.before.is_none()) {
            writeln!(
                out,
                "(one database given under two URLs shows only in the run, which reads \
                 back each database's record before changing any row)"
            )?;
        }
    } else {
        writeln!(
            out,
            "{} sequences: {created} rows created, {raised} raised; recorded {} stripes \
             with blocks of {} IDs. Every stripe now starts above every ID handed out \
             before; start the seqd instances with these URLs, in this order.",
            report.names, report.count, report.block
        )?;
    }
    out.flush()
}
