//! The operators' subcommands: `seqd migrate` and `seqd sequences ...`. They
//! talk to the database directly, not to a running server.

use anyhow::{bail, Context};

use crate::config::{DatabaseArgs, SequencesCommand};
use crate::domain::{validate_step, NewSequence, SeqName};
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
        SequencesCommand::Create { name, start, step, description, db } => {
            let name = SeqName::parse(name)?;
            let new = NewSequence::new(name.clone(), *start, *step, description.clone(), db.max_step)?;
            let store = open_store(&db.url()).await?;
            match store.create(&new).await {
                Ok(row) => print_rows(&[row]),
                Err(StoreError::AlreadyExists) => bail!("sequence '{name}' already exists"),
                Err(e) => return Err(e).context("creating the sequence"),
            }
        }
        SequencesCommand::List { db } => {
            let store = open_store(&db.url()).await?;
            print_rows(&store.list().await?);
        }
        SequencesCommand::SetStep { name, step, db } => {
            let name = SeqName::parse(name)?;
            let step = validate_step(*step, db.max_step)?;
            let store = open_store(&db.url()).await?;
            let patch = SequencePatch { step: Some(step), description: None };
            match store.update(&name, &patch).await {
                Ok(row) => print_rows(&[row]),
                Err(StoreError::NotFound) => bail!("sequence '{name}' not found"),
                Err(e) => return Err(e).context("updating the sequence"),
            }
        }
    }
    Ok(())
}

fn print_rows(rows: &[SequenceRow]) {
    println!("{:<32} {:>20} {:>10}  DESCRIPTION", "NAME", "MAX_ID", "STEP");
    for r in rows {
        println!("{:<32} {:>20} {:>10}  {}", r.name, r.max_id, r.step, r.description);
    }
}
