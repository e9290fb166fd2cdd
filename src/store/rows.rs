//! The values the storage traits take and give: rows, reservations, pages,
//! patches, bumps, and [`StoreError`].

#![allow(unused_imports)]

use std::borrow::Cow;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::*;
use crate::domain::token::{Rights, Scope, TokenError, TokenHash, TokenLabel, TokenRecord};
use crate::domain::{IdOrdering, NamePrefix, NewSequence, SeqName};

/// One row of the `sequences` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SequenceRow {
    /// The sequence's name.
    pub name: SeqName,
    /// The highest ID reserved so far; the next segment starts at `max_id + 1`.
    pub max_id: i64,
    /// The base segment size (the floor of the adapted step).
    pub step: i64,
    /// Free text for operators.
    pub description: String,
    /// When the row was created.
    pub created_at: DateTime<Utc>,
    /// When the row was last changed (by a reservation or an update).
    pub updated_at: DateTime<Utc>,
    /// How the sequence orders its IDs.
    pub ordering: IdOrdering,
    /// Where each period's counter starts: the `start` given at create (1
    /// for rows made before serial numbers).
    pub counter_start: i64,
    /// Its serial-number settings (`format` not NULL), if it issues serial
    /// numbers.
    pub serial: Option<crate::domain::SerialSettings>,
    /// Why seqd cannot use this row, when it cannot (settings written by SQL
    /// that do not parse): the row is still read, listed and repairable, and
    /// its requests are refused naming the field (docs/design.md, "Rows seqd
    /// cannot use"). `serial` is `None` then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<RowProblem>,
}

/// What is wrong with a row seqd cannot use: the column and seqd's words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RowProblem {
    /// The column at fault (`format`, `reset`, `time_zone`, `overflow`).
    pub field: &'static str,
    /// Why its value is refused.
    pub message: String,
}

impl std::fmt::Display for RowProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "field `{}`: {}", self.field, self.message)
    }
}

/// One counter row of a serial sequence: `name@key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeriodRow {
    /// The period's key: `20261130`, `202611`, `2026`, or empty for a
    /// counter that never resets.
    pub key: String,
    /// The highest counter reserved in the period.
    pub max_id: i64,
    /// When the row was created (the period's first use).
    pub created_at: DateTime<Utc>,
    /// When the row was last changed.
    pub updated_at: DateTime<Utc>,
}

/// A range of IDs reserved by one atomic update: `(max_id - size, max_id]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// The row's `max_id` after the update: the last ID of the range.
    pub max_id: i64,
    /// How much the update added to `max_id`: the range's length.
    pub size: i64,
    /// The row's `step` as the update saw it (the floor of the adapted step).
    pub row_step: i64,
    /// The row's `ordering` as the update saw it.
    pub ordering: IdOrdering,
}

impl Reservation {
    /// The first ID of the range.
    pub fn first(&self) -> i64 {
        self.max_id - self.size + 1
    }
}

/// Most rows one [`Catalog::list_page`] may return.
pub const MAX_PAGE: u32 = 1000;

/// One page of rows, ordered by name in byte order (see [`Catalog::list_page`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequencePage {
    /// The rows of the page (rows whose stored name is not a valid
    /// [`SeqName`] are left out).
    pub rows: Vec<SequenceRow>,
    /// True when rows follow the page.
    pub more: bool,
}

impl SequencePage {
    /// A page from up to `limit + 1` rows read in name order: the first
    /// `limit` are the page, one more means more follow. `convert` drops a
    /// row by answering `None`.
    pub(crate) fn from_read<R>(
        mut read: Vec<R>,
        limit: u32,
        convert: impl Fn(R) -> Option<SequenceRow>,
    ) -> Self {
        let more = read.len() > limit as usize;
        read.truncate(limit as usize);
        SequencePage {
            rows: read.into_iter().filter_map(convert).collect(),
            more,
        }
    }
}

/// What a field update (operator change) asks for; `None` leaves a field alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SequencePatch {
    /// New base step, already validated.
    pub step: Option<i64>,
    /// New description, already validated.
    pub description: Option<String>,
    /// New ordering.
    pub ordering: Option<IdOrdering>,
    /// New serial-number settings: `Some(None)` makes the sequence plain.
    pub serial: Option<Option<crate::domain::SerialSettings>>,
}

/// Whether [`Catalog::bump`] writes or only plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BumpMode {
    /// Change the rows, in one transaction.
    Apply,
    /// Read the rows and check the bump; write nothing.
    DryRun,
}

/// One row a bump changed (or, in a dry run, would change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bumped {
    /// The row's name as stored (under `--all`, possibly one an operator
    /// inserted by hand that is not a valid [`SeqName`]).
    pub name: String,
    /// `max_id` before the bump.
    pub old_max_id: i64,
    /// `max_id` after the bump: `old_max_id + by`.
    pub new_max_id: i64,
}

/// Why a bump was refused: every offending sequence, by name, in name order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BumpRefusal {
    /// Names asked for that have no row.
    pub missing: Vec<String>,
    /// Rows whose `max_id + by` would pass `i64::MAX`.
    pub overflow: Vec<String>,
}

/// At most this many names are shown per list in a [`BumpRefusal`]'s message.
const SHOWN_NAMES: usize = 20;

impl std::fmt::Display for BumpRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if !self.missing.is_empty() {
            parts.push(format!("not found: {}", shown(&self.missing)));
        }
        if !self.overflow.is_empty() {
            parts.push(format!(
                "max_id would pass {}: {}",
                i64::MAX,
                shown(&self.overflow)
            ));
        }
        f.write_str(&parts.join("; "))
    }
}

/// `'a', 'b', ... and N more`: the first [`SHOWN_NAMES`] names, quoted.
fn shown(names: &[String]) -> String {
    let mut out: Vec<String> = names
        .iter()
        .take(SHOWN_NAMES)
        .map(|n| format!("'{n}'"))
        .collect();
    if names.len() > SHOWN_NAMES {
        out.push(format!("... and {} more", names.len() - SHOWN_NAMES));
    }
    out.join(", ")
}

/// Storage failures, narrowed from the driver's errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No row has this name.
    #[error("sequence not found")]
    NotFound,
    /// A row with this name already exists.
    #[error("sequence already exists")]
    AlreadyExists,
    /// Reserving another segment would pass `i64::MAX`.
    #[error("sequence exhausted")]
    Exhausted,
    /// The database is unreachable, timed out, or failed; the detail is for logs.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The database URL or configuration is unusable (unknown scheme, bad options).
    #[error("invalid storage configuration: {0}")]
    Config(String),
    /// seqd's schema cannot be brought to or is not at this version (a
    /// missing migration under `--migrate check`, a changed or failed one, a
    /// DDL statement the database refused): a configuration problem, not an
    /// outage.
    #[error("migration: {0}")]
    Migration(String),
    /// The database refused a value as invalid (a `CHECK` constraint of the
    /// table, such as `step >= 1`): bad input, not an outage; the detail is
    /// for logs.
    #[error("value refused by the table: {0}")]
    Invalid(String),
    /// A bump was refused as a whole and changed nothing (see [`Catalog::bump`]).
    #[error("bump refused: {0}")]
    BumpRefused(BumpRefusal),
    /// The sequence issues serial numbers: its own row hands out no range
    /// (its counters are the rows of its periods).
    #[error("sequence issues serial numbers")]
    Serial,
}

/// A row of `seqd_tokens` as stored (docs/api.md, "Client tokens"): text and
/// milliseconds since the Unix epoch. [`TokenRow::record`] reads it into a
/// checked [`TokenRecord`]; a row written by SQL may not be one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRow {
    /// The unique label.
    pub label: String,
    /// The SHA-256 of the token, 64 hex digits.
    pub hash: String,
    /// The name prefixes it covers, joined by commas (`*`: every name).
    pub prefixes: String,
    /// `draw`, `read` or `draw,read`.
    pub rights: String,
    /// When it was made.
    pub created_at: i64,
    /// When it stops working, if set.
    pub expires_at: Option<i64>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<i64>,
}

impl TokenRow {
    /// The row of `record`.
    pub fn of(record: &TokenRecord) -> Self {
        TokenRow {
            label: record.label.as_str().to_owned(),
            hash: record.hash.to_hex(),
            prefixes: record.scope.to_column(),
            rights: record.rights.to_column().to_owned(),
            created_at: record.created_at.timestamp_millis(),
            expires_at: record.expires_at.map(|t| t.timestamp_millis()),
            revoked_at: record.revoked_at.map(|t| t.timestamp_millis()),
        }
    }

    /// The checked token of this row, or what is wrong with it.
    pub fn record(&self) -> Result<TokenRecord, TokenError> {
        let time = |ms: i64| {
            DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or(DateTime::<Utc>::MIN_UTC)
        };
        Ok(TokenRecord {
            label: TokenLabel::parse(&self.label)?,
            hash: TokenHash::from_hex(&self.hash)?,
            scope: Scope::from_column(&self.prefixes)?,
            rights: Rights::parse(&self.rights)?,
            created_at: time(self.created_at),
            expires_at: self.expires_at.map(time),
            revoked_at: self.revoked_at.map(time),
        })
    }
}
