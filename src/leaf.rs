//! `seqd import-leaf`: a drop-in migration from Meituan's Leaf. It reads Leaf's
//! segment table `leaf_alloc` (PostgreSQL or MySQL/MariaDB) and creates one
//! seqd sequence per row, through the service's admin calls
//! ([`AdminCalls`]), so that seqd continues
//! each Leaf sequence exactly where Leaf left off.
//!
//! # The offset
//!
//! Leaf reserves a segment with `UPDATE leaf_alloc SET max_id = max_id + step`
//! and then serves `[max_id - step, max_id)`: Leaf's `max_id` is the next ID it
//! has *not* issued. seqd's `max_id` is the highest ID *reserved*. The seqd row
//! that continues a Leaf row therefore has `max_id = leaf.max_id - 1`, i.e. it
//! is created with `start = leaf.max_id`, and the first ID seqd serves is the
//! one Leaf would have served next.
//!
//! Leaf's servers must be stopped (or no longer reach `leaf_alloc`) before the
//! import: a Leaf fetch after the read would hand out IDs seqd will issue too.
//! IDs a Leaf server still held in memory are all below `leaf.max_id`, so they
//! never collide with seqd's.
//!
//! # Rows that are not imported
//!
//! - A `biz_tag` that is not a valid seqd name, a `max_id` below 1, or a `step`
//!   outside `1..=--max-step`: reported as invalid and skipped; the command
//!   exits non-zero at the end unless `--skip-invalid`.
//! - A name that already exists in seqd: left as it is, with a message. If its
//!   `max_id` is below `leaf.max_id - 1` it could re-issue IDs Leaf issued: a
//!   conflict, unless `--raise` is given, which raises seqd's `max_id` to at
//!   least `leaf.max_id - 1` by reserving (and discarding) the IDs in between
//!   with one atomic [`Segments::reserve`](crate::store::Segments::reserve).
//! - A name that is a serial sequence in seqd: a conflict, with or without
//!   `--raise`. Its own row hands out no IDs (its counters are per period),
//!   so Leaf's IDs cannot continue in it, and Leaf's callers would get
//!   serials.
//!
//! # Plan, then write
//!
//! Every row is judged first, with reads only ([`plan`]). A conflict refuses
//! the whole import before anything is written: the report names each
//! problem row and the command exits 1. Otherwise the plan is written row by
//! row; a write that fails (the row changed meanwhile, the database went
//! away) is recorded as [`Action::Failed`] and the import goes on, so the
//! report always covers every row.
//!
//! `sqlx::Error` stays in this module: reading Leaf's table fails with a
//! [`LeafError`]. The connection is opened by the store's backend
//! (`store::postgres::connection`, `store::mysql::connection`), so that the
//! URL's TLS parameters mean what they mean for seqd's own database.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{bail, Context};
use sqlx::Connection;

use crate::config::ImportLeafArgs;
use crate::domain::{NewSequence, SeqName};
use crate::service::{AdminCalls, Presented, ServiceError};
use crate::store::{self, Dialect, SequenceRow};

/// Longest the connection to Leaf's database may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads `leaf_alloc` on PostgreSQL, casting to the types seqd decodes.
const PG_SELECT: &str = "SELECT biz_tag::text, max_id::bigint, step::bigint, description::text \
                         FROM leaf_alloc ORDER BY biz_tag";
/// Reads `leaf_alloc` on MySQL/MariaDB, casting to the types seqd decodes.
const MYSQL_SELECT: &str =
    "SELECT CAST(biz_tag AS CHAR), CAST(max_id AS SIGNED), CAST(step AS SIGNED), \
                            CAST(description AS CHAR) FROM leaf_alloc ORDER BY biz_tag";

/// One row of Leaf's `leaf_alloc` table, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafRow {
    /// Leaf's key (`biz_tag`), the name of the seqd sequence to create.
    pub biz_tag: String,
    /// Leaf's `max_id`: the next ID Leaf has not issued (`None` if NULL).
    pub max_id: Option<i64>,
    /// Leaf's `step` (`None` if NULL).
    pub step: Option<i64>,
    /// Leaf's `description` (`None` if NULL).
    pub description: Option<String>,
}

/// Reading Leaf's table failed.
#[derive(Debug, thiserror::Error)]
pub enum LeafError {
    /// The `--from` URL is not a PostgreSQL or MySQL/MariaDB URL.
    #[error(
        "unsupported Leaf database URL scheme {0:?}: expected postgres://, mysql:// or mariadb://"
    )]
    Scheme(String),
    /// Leaf's database could not be reached.
    #[error("connecting to Leaf's database {url}: {detail}")]
    Connect {
        /// The URL, password redacted.
        url: String,
        /// The driver's message.
        detail: String,
    },
    /// A table could not be read (missing table, permissions, ...).
    #[error("reading {table} from {url}: {detail}")]
    Read {
        /// The table.
        table: &'static str,
        /// The URL, password redacted.
        url: String,
        /// The driver's message.
        detail: String,
    },
}

/// The raw columns of one `leaf_alloc` row.
type RawRow = (String, Option<i64>, Option<i64>, Option<String>);

/// Reads every row of `leaf_alloc` from a `postgres://`, `postgresql://`,
/// `mysql://` or `mariadb://` URL, ordered by `biz_tag`.
pub async fn read_leaf_alloc(url: &str) -> Result<Vec<LeafRow>, LeafError> {
    let raw: Vec<RawRow> = query_all(url, "leaf_alloc", PG_SELECT, MYSQL_SELECT).await?;
    Ok(raw
        .into_iter()
        .map(|(biz_tag, max_id, step, description)| LeafRow {
            biz_tag,
            max_id,
            step,
            description,
        })
        .collect())
}

/// Every row `pg` (on PostgreSQL) or `mysql` (on MySQL/MariaDB) selects
/// from `table` at `url`, over one connection: how the imports read
/// another system's tables.
pub(crate) async fn query_all<R>(
    url: &str,
    table: &'static str,
    pg: &'static str,
    mysql: &'static str,
) -> Result<Vec<R>, LeafError>
where
    R: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
        + for<'r> sqlx::FromRow<'r, sqlx::mysql::MySqlRow>
        + Send
        + Unpin,
{
    let shown = store::redact_url(url);
    let dialect = Dialect::of_url(url).map_err(LeafError::Scheme)?;
    let connect_err = |detail: String| LeafError::Connect {
        url: shown.clone(),
        detail,
    };
    let read_err = |e: sqlx::Error| LeafError::Read {
        table,
        url: shown.clone(),
        detail: e.to_string(),
    };
    let timed_out = || {
        connect_err(format!(
            "no connection within {}s",
            CONNECT_TIMEOUT.as_secs()
        ))
    };
    match dialect {
        (Dialect::Postgres, url) => {
            let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, store::postgres::connection(&url))
                .await
                .map_err(|_| timed_out())?
                .map_err(|e| connect_err(e.to_string()))?;
            let rows = sqlx::query_as(pg)
                .fetch_all(&mut conn)
                .await
                .map_err(read_err)?;
            let _ = conn.close().await;
            Ok(rows)
        }
        (Dialect::Mysql, url) => {
            let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, store::mysql::connection(&url))
                .await
                .map_err(|_| timed_out())?
                .map_err(|e| connect_err(e.to_string()))?;
            let rows = sqlx::query_as(mysql)
                .fetch_all(&mut conn)
                .await
                .map_err(read_err)?;
            let _ = conn.close().await;
            Ok(rows)
        }
        (Dialect::Sqlite, _) => Err(LeafError::Scheme("sqlite".into())),
    }
}

/// The seqd sequence that continues a Leaf row (`start = leaf.max_id`), or why
/// the row cannot be imported.
pub fn to_new_sequence(row: &LeafRow, max_step: i64) -> Result<NewSequence, String> {
    let name = SeqName::parse(&row.biz_tag).map_err(|e| e.to_string())?;
    let max_id = row.max_id.ok_or("max_id is NULL")?;
    let step = row.step.ok_or("step is NULL")?;
    if max_id < 1 {
        return Err(format!(
            "max_id {max_id} is below 1: seqd sequences start at 1 or above"
        ));
    }
    if step > max_step {
        return Err(format!(
            "step {step} is above --max-step {max_step}: raise --max-step to import it"
        ));
    }
    NewSequence::new(
        name,
        max_id,
        step,
        row.description.clone().unwrap_or_default(),
        max_step,
    )
    .map_err(|e| e.to_string())
}

/// How to run an import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportOptions {
    /// Only work out the plan; write nothing.
    pub dry_run: bool,
    /// Raise the `max_id` of existing sequences that are behind Leaf.
    pub raise: bool,
    /// Largest base step accepted (`--max-step`).
    pub max_step: i64,
}

/// What the import did (or, in a dry run, would do) with one Leaf row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Created in seqd with `start = leaf.max_id`.
    Import(NewSequence),
    /// Already in seqd and left as it is.
    Exists {
        /// seqd's `max_id`.
        seqd_max_id: i64,
        /// Leaf's `max_id` (the next ID Leaf would issue).
        leaf_max_id: i64,
    },
    /// Already in seqd and behind Leaf; `max_id` raised (`--raise`).
    Raised {
        /// seqd's `max_id` before.
        from: i64,
        /// seqd's `max_id` after (in a dry run: the least it will be).
        to: i64,
    },
    /// Not importable: the reason.
    Invalid(String),
    /// Conflicts with what seqd holds under this name (a serial sequence):
    /// the reason. Any conflict refuses the whole import.
    Conflict(String),
    /// Importable, but writing it failed: the reason.
    Failed(String),
}

impl Action {
    /// An existing seqd sequence whose `max_id` is below `leaf.max_id - 1`,
    /// left as it is: it could issue IDs that Leaf already issued.
    pub fn is_behind(&self) -> bool {
        matches!(self, Action::Exists { seqd_max_id, leaf_max_id } if *seqd_max_id < leaf_max_id - 1)
    }

    /// Whether this row refuses the import: a conflict, or a sequence behind
    /// Leaf that is not to be raised.
    pub fn refuses(&self) -> bool {
        matches!(self, Action::Conflict(_)) || self.is_behind()
    }
}

/// One Leaf row and what happened to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Leaf's `biz_tag`, as read.
    pub biz_tag: String,
    /// What the import did with it.
    pub action: Action,
}

/// The outcome of an import, row by row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Whether nothing was written because it was asked for.
    pub dry_run: bool,
    /// Whether some row refuses the import ([`Action::refuses`]): then
    /// nothing was (or, in a dry run, would be) written, and the entries
    /// are the plan.
    pub refused: bool,
    /// One entry per Leaf row, in Leaf's order.
    pub entries: Vec<Entry>,
}

impl Report {
    fn count(&self, f: impl Fn(&Action) -> bool) -> usize {
        self.entries.iter().filter(|e| f(&e.action)).count()
    }

    /// Rows created in seqd (or to be created, in a dry run).
    pub fn imported(&self) -> usize {
        self.count(|a| matches!(a, Action::Import(_)))
    }

    /// Rows skipped because the name exists in seqd (raised or not).
    pub fn skipped(&self) -> usize {
        self.count(|a| matches!(a, Action::Exists { .. } | Action::Raised { .. }))
    }

    /// Existing sequences whose `max_id` was (or would be) raised.
    pub fn raised(&self) -> usize {
        self.count(|a| matches!(a, Action::Raised { .. }))
    }

    /// Existing sequences behind Leaf, left as they are.
    pub fn behind(&self) -> usize {
        self.count(Action::is_behind)
    }

    /// Rows that are not valid seqd sequences.
    pub fn invalid(&self) -> usize {
        self.count(|a| matches!(a, Action::Invalid(_)))
    }

    /// Rows whose write failed.
    pub fn failed(&self) -> usize {
        self.count(|a| matches!(a, Action::Failed(_)))
    }

    /// Rows in conflict with seqd's sequences (serial sequences).
    pub fn conflicts(&self) -> usize {
        self.count(|a| matches!(a, Action::Conflict(_)))
    }

    /// Whether the entries were written (neither a dry run nor refused).
    pub fn written(&self) -> bool {
        !self.dry_run && !self.refused
    }

    /// The one-line summary.
    pub fn summary(&self) -> String {
        let (verb, raised) = if self.written() {
            ("imported", "raised")
        } else {
            ("to import", "to raise")
        };
        let prefix = match (self.dry_run, self.refused) {
            (true, false) => "dry run, nothing written: ",
            (true, true) => "dry run, nothing written (the import would be refused): ",
            (false, true) => "refused, nothing written: ",
            (false, false) => "",
        };
        let mut s = format!(
            "{prefix}{} {verb}, {} skipped (already in seqd, {} of them {raised}), {} invalid",
            self.imported(),
            self.skipped(),
            self.raised(),
            self.invalid(),
        );
        if self.conflicts() > 0 {
            let _ = write!(s, ", {} in conflict", self.conflicts());
        }
        if self.failed() > 0 {
            let _ = write!(s, ", {} failed", self.failed());
        }
        s
    }
}

/// Imports `rows` into `target`, or with `dry_run` only works out what would
/// happen. `target` is `None` only for a dry run against a database whose
/// `sequences` table cannot be read yet (not migrated): then no name exists.
///
/// Every row is planned first ([`plan`], reads only); if a row refuses the
/// import ([`Action::refuses`]) nothing is written and the report is the
/// plan, with [`Report::refused`] set. Fails only if reading the target
/// fails, before anything is written; a failed write is recorded as
/// [`Action::Failed`] and the import goes on with the next row.
///
/// # Panics
///
/// If `target` is `None` without `dry_run`.
pub async fn import(
    rows: &[LeafRow],
    target: Option<&AdminCalls>,
    opts: ImportOptions,
) -> Result<Report, ServiceError> {
    assert!(
        target.is_some() || opts.dry_run,
        "a real import needs a target store"
    );
    let mut entries = plan(rows, target, opts).await?;
    let refused = entries.iter().any(|e| e.action.refuses());
    if let (false, false, Some(store)) = (opts.dry_run, refused, target) {
        for entry in &mut entries {
            let planned = std::mem::replace(&mut entry.action, Action::Failed(String::new()));
            entry.action = write(store, &entry.biz_tag, planned, opts).await;
        }
    }
    Ok(Report {
        dry_run: opts.dry_run,
        refused,
        entries,
    })
}

/// What the import would do with each row, from reads only.
pub async fn plan(
    rows: &[LeafRow],
    target: Option<&AdminCalls>,
    opts: ImportOptions,
) -> Result<Vec<Entry>, ServiceError> {
    let mut entries = Vec::with_capacity(rows.len());
    for row in rows {
        let action = match to_new_sequence(row, opts.max_step) {
            Err(reason) => Action::Invalid(reason),
            Ok(new) => match target {
                None => Action::Import(new),
                Some(admin) => match find(admin, &new.name).await? {
                    None => Action::Import(new),
                    Some(existing) => judge_existing(&existing, new.start, opts),
                },
            },
        };
        entries.push(Entry {
            biz_tag: row.biz_tag.clone(),
            action,
        });
    }
    Ok(entries)
}

/// The row of `name`, if it exists.
async fn find(admin: &AdminCalls, name: &SeqName) -> Result<Option<SequenceRow>, ServiceError> {
    match admin.get(name).await {
        Ok(row) => Ok(Some(row)),
        Err(ServiceError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What to do with an existing seqd row for a Leaf row whose next ID is
/// `leaf_max_id`.
fn judge_existing(row: &SequenceRow, leaf_max_id: i64, opts: ImportOptions) -> Action {
    if let Some(serial) = &row.serial {
        return Action::Conflict(format!(
            "already in seqd as a serial sequence (format {}): its own row hands out no IDs, \
             so the imported IDs cannot continue in it. Rename one of the two",
            serial.format
        ));
    }
    let wanted = leaf_max_id - 1;
    if row.max_id >= wanted || !opts.raise {
        Action::Exists {
            seqd_max_id: row.max_id,
            leaf_max_id,
        }
    } else {
        Action::Raised {
            from: row.max_id,
            to: wanted,
        }
    }
}

/// Writes the planned action of the row `tag`; what was done, or why it
/// failed. The row is read again where it matters: it may have changed
/// since the plan.
async fn write(store: &AdminCalls, tag: &str, planned: Action, opts: ImportOptions) -> Action {
    match planned {
        Action::Import(new) => match store.create_new(new.clone()).await {
            Ok(_) => Action::Import(new),
            // Created meanwhile by someone else: judge it as existing.
            Err(ServiceError::Exists(_)) => {
                let name = new.name.clone();
                write_existing(store, &name, new.start, opts).await
            }
            Err(e) => Action::Failed(e.to_string()),
        },
        Action::Raised { to, .. } => match SeqName::parse(tag) {
            Ok(name) => write_existing(store, &name, to + 1, opts).await,
            Err(e) => Action::Failed(e.to_string()),
        },
        other => other,
    }
}

/// For the existing row `name` and a Leaf row whose next ID is
/// `leaf_max_id`: reads it, judges it again ([`judge_existing`]) and raises
/// it if that is the verdict.
async fn write_existing(
    store: &AdminCalls,
    name: &SeqName,
    leaf_max_id: i64,
    opts: ImportOptions,
) -> Action {
    let row = match find(store, name).await {
        Ok(Some(row)) => row,
        Ok(None) => return Action::Failed("deleted by someone else meanwhile".into()),
        Err(e) => return Action::Failed(format!("reading it again: {e}")),
    };
    match judge_existing(&row, leaf_max_id, opts) {
        Action::Raised { to, .. } => raise(store, &row, to).await,
        Action::Conflict(reason) => Action::Failed(format!("changed meanwhile: {reason}")),
        other => other,
    }
}

/// Raises `row` to at least `wanted` with one atomic reservation of at least
/// the gap: `max_id` only grows, and concurrent reservations by running
/// instances only add to it.
async fn raise(store: &AdminCalls, row: &SequenceRow, wanted: i64) -> Action {
    match store.raise(&row.name, wanted - row.max_id).await {
        Ok((max_id, size)) if max_id >= wanted => Action::Raised {
            from: max_id - size,
            to: max_id,
        },
        Ok((max_id, _)) => {
            Action::Failed(format!("raised max_id only to {max_id}, below {wanted}"))
        }
        Err(e) => Action::Failed(format!("raising max_id: {e}")),
    }
}

/// One line of the plan for an entry; `dry_run`: it was not written (a
/// dry run, or a refused import), so it says what would be done.
pub fn describe(entry: &Entry, dry_run: bool) -> String {
    describe_from(entry, dry_run, &LEAF)
}

/// [`describe`] in the words of `source`.
pub fn describe_from(entry: &Entry, dry_run: bool, source: &Source) -> String {
    let system = source.system;
    let tag = &entry.biz_tag;
    match &entry.action {
        Action::Import(new) => format!(
            "{:<8} {tag:<32} {system} next ID {} step {} -> seqd max_id {}: next ID {}",
            if dry_run { "import?" } else { "import" },
            new.start,
            new.step,
            new.start - 1,
            new.start
        ),
        a @ Action::Exists { seqd_max_id, leaf_max_id } if a.is_behind() => format!(
            "{:<8} {tag:<32} already in seqd and BEHIND {system}: seqd max_id {seqd_max_id} < {system}'s last ID {}; \
             seqd could issue IDs {system} issued. Rerun with --raise, or: UPDATE sequences SET max_id = {} \
             WHERE name = '{tag}' AND max_id < {}",
            "skip",
            leaf_max_id - 1,
            leaf_max_id - 1,
            leaf_max_id - 1
        ),
        Action::Exists { seqd_max_id, leaf_max_id } => format!(
            "{:<8} {tag:<32} already in seqd (max_id {seqd_max_id}, at or above {system}'s last ID {})",
            "skip",
            leaf_max_id - 1
        ),
        Action::Raised { from, to } => format!(
            "{:<8} {tag:<32} already in seqd, behind {system}: max_id {from} -> {}{to}",
            if dry_run { "raise?" } else { "raise" },
            if dry_run { "at least " } else { "" }
        ),
        Action::Invalid(reason) => format!("{:<8} {:<32} {reason}", "invalid", format!("{tag:?}")),
        Action::Conflict(reason) => format!("{:<8} {tag:<32} {reason}", "CONFLICT"),
        Action::Failed(reason) => format!("{:<8} {tag:<32} {reason}", "failed"),
    }
}

/// `seqd import-leaf`: reads `leaf_alloc` from `--from`, plans every row,
/// writes the plan (unless `--dry-run`, or a row refuses the import: a
/// serial sequence under the tag, or an existing sequence behind Leaf
/// without `--raise`), prints it and a summary. Exits non-zero when a row
/// refuses the import, a row is invalid (unless `--skip-invalid`) or a write
/// failed.
pub async fn run(args: &ImportLeafArgs) -> anyhow::Result<()> {
    let rows = read_leaf_alloc(&args.from).await?;
    let from = store::redact_url(&args.from);
    let opts = ImportOptions {
        dry_run: args.dry_run,
        raise: args.raise,
        max_step: args.db.max_step,
    };
    let (_, problems) =
        import_and_report(&rows, &args.db, opts, args.skip_invalid, &LEAF, &from).await?;
    if !problems.is_empty() {
        bail!("{}", problems.join("; "));
    }
    Ok(())
}

/// Where imported rows come from, for the report's words.
pub struct Source {
    /// The system (`Leaf`).
    pub system: &'static str,
    /// Its table (`leaf_alloc`).
    pub table: &'static str,
    /// What it calls a row's name (`tag`).
    pub key: &'static str,
}

/// Leaf's words.
pub const LEAF: Source = Source {
    system: "Leaf",
    table: "leaf_alloc",
    key: "tag",
};

/// Plans and (unless a dry run or refused) writes `rows` into the seqd
/// database of `db`, printing each row and the summary; answers the report
/// and the problems that make the command fail (empty when none).
pub(crate) async fn import_and_report(
    rows: &[LeafRow],
    db: &crate::config::DatabaseArgs,
    opts: ImportOptions,
    skip_invalid: bool,
    source: &Source,
    from: &str,
) -> anyhow::Result<(Report, Vec<String>)> {
    anyhow::ensure!(
        db.urls().len() == 1,
        "an import writes into one database: import into a single database first, \
         then make it stripe 1 of a set with `seqd stripes init`"
    );
    let target_url = db.url();
    let shown = store::redact_url(&target_url);
    println!(
        "{} {} row(s) of {} from {from} into {shown}",
        if opts.dry_run {
            "plan (dry run) for"
        } else {
            "importing"
        },
        rows.len(),
        source.table,
    );

    let target = if opts.dry_run {
        let options = store::StoreOptions::default().with_setup(&db.schema_setup());
        let s = store::connect(&target_url, &options)
            .await
            .with_context(|| format!("connecting to {shown}"))?
            .sequences();
        match s.ping().await {
            Ok(()) => Some(crate::cli::service_over(s, db).admin(Presented::LOCAL)?),
            Err(e) => {
                println!("note: seqd's sequences table cannot be read ({e}); not migrated yet? Every valid row is shown as new");
                None
            }
        }
    } else {
        Some(crate::cli::admin(db).await?)
    };
    let report = import(rows, target.as_ref(), opts)
        .await
        .with_context(|| format!("reading seqd's sequences in {shown}"))?;

    for entry in &report.entries {
        println!("{}", describe_from(entry, !report.written(), source));
    }
    println!("{}", report.summary());

    let Source { system, table, key } = source;
    let mut problems = Vec::new();
    if report.refused {
        problems.push(format!(
            "nothing {}written: {} row(s) refuse the import (marked CONFLICT or BEHIND above); \
             resolve them and run the import again",
            if opts.dry_run { "would be " } else { "" },
            report.entries.iter().filter(|e| e.action.refuses()).count()
        ));
    }
    if report.conflicts() > 0 {
        problems.push(format!(
            "{} {system} {key}(s) name a serial sequence in seqd, which cannot continue {system}'s IDs",
            report.conflicts()
        ));
    }
    if report.invalid() > 0 && !skip_invalid {
        problems.push(format!(
            "{} row(s) of {table} are not valid seqd sequences and were not imported \
             (rename or fix them, or pass --skip-invalid to accept this)",
            report.invalid()
        ));
    }
    if report.behind() > 0 {
        problems.push(format!(
            "{} existing sequence(s) are behind {system} and could issue IDs {system} already issued \
             (rerun with --raise)",
            report.behind()
        ));
    }
    if report.failed() > 0 {
        problems.push(format!("{} row(s) failed to import", report.failed()));
    }
    Ok((report, problems))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::allocator::AllocatorConfig;
    use crate::service::Service;
    use crate::store::memory::MemoryStore;

    /// The admin calls of a service over `store`.
    fn admin(store: &Arc<MemoryStore>) -> AdminCalls {
        Service::new(store.clone(), AllocatorConfig::default())
            .admin(Presented::LOCAL)
            .unwrap()
    }
    use crate::store::Catalog;

    fn leaf(tag: &str, max_id: i64, step: i64) -> LeafRow {
        LeafRow {
            biz_tag: tag.into(),
            max_id: Some(max_id),
            step: Some(step),
            description: None,
        }
    }

    #[test]
    fn a_leaf_row_continues_at_leaf_max_id() {
        let new = to_new_sequence(&leaf("order", 2001, 2000), 1_000_000).unwrap();
        assert_eq!(
            (new.name.as_str(), new.start, new.step),
            ("order", 2001, 2000)
        );
    }

    #[test]
    fn invalid_rows_say_why() {
        for (row, needle) in [
            (leaf("bad tag", 1, 10), "invalid sequence name"),
            (leaf("a", 0, 10), "max_id 0"),
            (leaf("a", 1, 0), "invalid step"),
            (leaf("a", 1, 2_000_000), "--max-step"),
            (
                LeafRow {
                    max_id: None,
                    ..leaf("a", 1, 1)
                },
                "NULL",
            ),
        ] {
            let err = to_new_sequence(&row, 1_000_000).unwrap_err();
            assert!(err.contains(needle), "{row:?}: {err}");
        }
    }

    /// The options of an import that writes, raising sequences behind
    /// Leaf or not.
    fn writing(raise: bool) -> ImportOptions {
        ImportOptions {
            dry_run: false,
            raise,
            max_step: 1_000_000,
        }
    }

    #[tokio::test]
    async fn raise_lifts_an_existing_sequence_to_leafs_next_id() {
        let store = Arc::new(MemoryStore::new());
        store.insert("order", 10, 5);
        let opts = writing(true);
        let report = import(&[leaf("order", 501, 100)], Some(&admin(&store)), opts)
            .await
            .unwrap();
        assert_eq!(
            report.entries[0].action,
            Action::Raised { from: 10, to: 500 }
        );
        let row = store
            .get(&SeqName::parse("order").unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.max_id, 500);
    }

    #[tokio::test]
    async fn a_serial_sequence_under_a_leaf_tag_refuses_the_import_before_any_write() {
        use crate::domain::SerialSettings;
        use crate::serial::{Overflow, Reset};

        let store = Arc::new(MemoryStore::new());
        store.insert("behind", 10, 5);
        let mut serial = NewSequence::new(
            SeqName::parse("zz-serial").unwrap(),
            1,
            10,
            String::new(),
            1_000_000,
        )
        .unwrap();
        serial.serial =
            Some(SerialSettings::new("Z{seq}", Reset::Never, "UTC", Overflow::Refuse).unwrap());
        store.create(&serial).await.unwrap();
        let opts = writing(true);
        let rows = [
            leaf("a-new", 11, 10),
            leaf("behind", 501, 100),
            leaf("zz-serial", 900, 10),
        ];
        let report = import(&rows, Some(&admin(&store)), opts).await.unwrap();
        assert!(report.refused && !report.written(), "{report:?}");
        assert!(
            matches!(report.entries[2].action, Action::Conflict(_)),
            "{report:?}"
        );
        assert_eq!(
            report.entries[1].action,
            Action::Raised { from: 10, to: 500 }
        );
        assert_eq!(store.max_id("a-new"), None, "nothing created");
        assert_eq!(store.max_id("behind"), Some(10), "nothing raised");
        assert!(report
            .summary()
            .starts_with("refused, nothing written: 1 to import"));
    }

    #[tokio::test]
    async fn without_raise_a_sequence_behind_leaf_is_reported() {
        let store = Arc::new(MemoryStore::new());
        store.insert("order", 10, 5);
        let opts = writing(false);
        let report = import(&[leaf("order", 501, 100)], Some(&admin(&store)), opts)
            .await
            .unwrap();
        assert!(report.entries[0].action.is_behind());
        assert_eq!(
            (report.skipped(), report.behind(), report.imported()),
            (1, 1, 0)
        );
    }
}
