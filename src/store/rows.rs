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
