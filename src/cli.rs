//! The operators' subcommands: `seqd migrate` and `seqd sequences ...`. They
//! talk to the database directly, not to a running server.

use anyhow::{anyhow, bail, Context};

use crate::config::{DatabaseArgs, SequencesCommand};
use crate::domain::{validate_step, NewSequence, ParseError, SeqName};
use crate::startup::open_store;
use crate::store::{self, SequencePatch, SequenceRow, StoreError};

/// `seqd migrate`.
pub async fn migrate(db: &DatabaseArgs) -> anyhow::Result<()> {
    let url = db.url();
    open_store(&url).await?;
    println!("migrations applied to {}", store::redact_url(&url));
    Ok(())
}

/// `seqd sequences create|list|set-step`.
pub async fn sequences(cmd: &SequencesCommand) -> anyhow::Result<()> {
    match cmd {
        SequencesCommand::Create {
            name,
            start,
            step,
            description,
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
                _ => anyhow!("{e} (got {} characters)", description.chars().count()),
            })?;
            let store = open_store(&db.url()).await?;
            match store.create(&new).await {
                Ok(row) => print_rows(&[row]),
                Err(StoreError::AlreadyExists) => {
                    bail!("sequence '{name}' already exists (see `seqd sequences list`; change its step with `seqd sequences set-step`)")
                }
                Err(e) => return Err(e).context("creating the sequence"),
            }
        }
        SequencesCommand::List { db } => {
            let store = open_store(&db.url()).await?;
            print_rows(&store.list().await?);
        }
        SequencesCommand::SetStep { name, step, db } => {
            let name = parse_name(name)?;
            let step =
                validate_step(*step, db.max_step).map_err(|e| anyhow!("{e} (got {step})"))?;
            let store = open_store(&db.url()).await?;
            let patch = SequencePatch {
                step: Some(step),
                description: None,
            };
            match store.update(&name, &patch).await {
                Ok(row) => print_rows(&[row]),
                Err(StoreError::NotFound) => {
                    bail!("sequence '{name}' not found; create it with `seqd sequences create {name}`")
                }
                Err(e) => return Err(e).context("updating the sequence"),
            }
        }
    }
    Ok(())
}

/// Parses a name given on the command line, echoing it in the error.
fn parse_name(name: &str) -> anyhow::Result<SeqName> {
    SeqName::parse(name).map_err(|e| anyhow!("{e} (got {name:?})"))
}

fn print_rows(rows: &[SequenceRow]) {
    println!(
        "{:<32} {:>20} {:>10}  DESCRIPTION",
        "NAME", "MAX_ID", "STEP"
    );
    for r in rows {
        // `as_str`: SeqName's Display ignores width, which would break the columns.
        println!(
            "{:<32} {:>20} {:>10}  {}",
            r.name.as_str(),
            r.max_id,
            r.step,
            r.description
        );
    }
}
