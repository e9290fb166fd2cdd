//! What the allocator needs of a store ([`Segments`]: reserving ranges of
//! IDs, giving back the unused top of one), what a reservation answers
//! ([`Reservation`]) and how a store fails ([`StoreError`]). seqd's SQL
//! backends, its stripes over several databases and its in-memory store
//! implement [`Segments`]; so can a client that leases ranges over the
//! network.

use async_trait::async_trait;

use crate::domain::{IdOrdering, SeqName};

/// What the allocator needs of a store: reserving ranges of IDs and giving
/// back the unused top of one.
///
/// Implementations must make [`Segments::reserve`] atomic: two concurrent
/// callers (in one process or in many) never receive overlapping ranges.
#[async_trait]
pub trait Segments: Send + Sync + 'static {
    /// Reserves the next range of `name`: adds `max(row.step, min_size)` to
    /// `max_id` in one atomic operation and returns the range that operation
    /// added. Fails with [`StoreError::Exhausted`] when the addition would pass
    /// `i64::MAX` even at the row's own step, [`StoreError::NotFound`] when
    /// no row has this name, and [`StoreError::Serial`] (changing nothing)
    /// when the row issues serial numbers (`format` is not NULL). The same
    /// holds for [`Segments::reserve_above`] and [`Segments::reserve_exact`].
    async fn reserve(&self, name: &SeqName, min_size: i64) -> Result<Reservation, StoreError>;

    /// [`Segments::reserve`] for a caller that already holds IDs of `name` up
    /// to `floor` (its high-water mark, 0 if none). A store over several
    /// databases (stripes) lifts a database that lags below `floor` past it
    /// in the reserving statement, so the caller's IDs keep increasing when
    /// it moves between databases. A single database ignores `floor`: its
    /// row below the mark is a regression, which the allocator detects,
    /// reports and skips.
    async fn reserve_above(&self, name: &SeqName, min_size: i64, floor: i64) -> Reserved {
        let _ = floor;
        self.reserve(name, min_size).await
    }

    /// Most first reservations this store makes in one operation
    /// ([`Segments::reserve_group`]); 1, the default, groups none: the
    /// allocator then reserves each name alone, as it always does.
    fn group_limit(&self) -> usize {
        1
    }

    /// [`Segments::reserve`] of each `(name, min_size)` of `asks`, one
    /// answer per ask in the same order, each exactly what `reserve` alone
    /// would have answered (its own step, its own error): the first
    /// reservations of names that arrived together (docs/design.md,
    /// "Grouped first reservations"). A store of [`Segments::group_limit`]
    /// above 1 makes them in one operation; the default reserves each in
    /// turn.
    async fn reserve_group(&self, asks: &[(SeqName, i64)]) -> Vec<Reserved> {
        reserve_each(self, asks).await
    }

    /// Sets `max_id` of the row `name` to `new` if it is still `expected`,
    /// in one statement (a compare-and-set); true when it was set, false
    /// when the row holds another value. [`StoreError::NotFound`] when no
    /// row has this name.
    async fn compare_and_set_max_id(
        &self,
        name: &SeqName,
        expected: i64,
        new: i64,
    ) -> Result<bool, StoreError>;

    /// Reserves exactly `n` IDs (1..) of `name` in one atomic operation,
    /// whatever its step: a global sequence's merged requests.
    /// [`StoreError::Exhausted`] when that would pass `i64::MAX`,
    /// [`StoreError::NotFound`] when no row has this name.
    async fn reserve_exact(&self, name: &SeqName, n: i64) -> Result<Reservation, StoreError> {
        self.reserve_within(name, n, i64::MAX).await
    }

    /// [`Segments::reserve_exact`] that never moves `max_id` past `cap`: adds
    /// exactly `n` (1..) in one statement when `max_id + n <= cap`, and
    /// otherwise changes nothing and answers [`StoreError::Exhausted`]. A
    /// serial period's counter under `{seq:0N}` (`cap` its capacity), so
    /// that no number of instances reserving at once can pass it, and a
    /// request that does not fit consumes nothing (docs/design.md, "Serial
    /// numbers").
    async fn reserve_within(&self, name: &SeqName, n: i64, cap: i64) -> Reserved {
        let _ = (name, n, cap);
        Err(StoreError::Config(
            "this store cannot reserve a bounded exact count (serial capacity, global ordering)"
                .into(),
        ))
    }

    /// Reserves a lease of `name`: exactly `n` IDs (1..) for one caller
    /// alone, never moving `max_id` past `cap`, on a row whose IDs may be
    /// held by a caller. A global row changes nothing and answers
    /// [`StoreError::Global`] (it is served in order at request time), a
    /// serial one [`StoreError::Serial`], a range that does not fit under
    /// `cap` [`StoreError::Exhausted`]: a refused lease consumes nothing.
    ///
    /// The default is for stores whose rows are never global (stripes):
    /// [`Segments::reserve`], then the top above the lease given back. A
    /// store that may hold global rows refuses them in its reserving
    /// statement instead.
    async fn reserve_lease(&self, name: &SeqName, n: i64, cap: i64) -> Reserved {
        let r = self.reserve(name, n).await?;
        let first = r.first();
        let last = (first - 1).saturating_add(n.min(r.size)).min(cap);
        if r.ordering == IdOrdering::Global || last < first {
            let _ = self.give_back(name, r.max_id, first - 1).await;
            return Err(match r.ordering {
                IdOrdering::Global => StoreError::Global,
                IdOrdering::Instance => StoreError::Exhausted,
            });
        }
        if last < r.max_id {
            // Not given back (something was reserved since): a gap.
            let _ = self.give_back(name, r.max_id, last).await;
        }
        Ok(Reservation {
            max_id: last,
            size: last - first + 1,
            ..r
        })
    }

    /// Gives back unused IDs at the top of a reservation: lowers `max_id`
    /// of `name` from `top` (the last ID of the caller's last reservation)
    /// to `keep`, only if it is still `top` (nobody reserved since); true
    /// when it did. One compare-and-set; a store over several databases
    /// sends it to the one `top` came from.
    async fn give_back(&self, name: &SeqName, top: i64, keep: i64) -> Result<bool, StoreError> {
        self.compare_and_set_max_id(name, top, keep).await
    }
}

/// What a reservation answers.
pub type Reserved = Result<Reservation, StoreError>;

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
    /// The store found the row below an ID it had handed this caller (the
    /// `floor` of [`Segments::reserve_above`], when that database owns it)
    /// and lifted the range past it: the row went back (a restore, a hand
    /// edit, a lagging replica). Only a store over several databases lifts;
    /// a single database's regression shows in the range itself. Either way
    /// the allocator reports it (docs/design.md, "Regressions and the bump").
    pub regressed: bool,
}

impl Reservation {
    /// The first ID of the range.
    pub fn first(&self) -> i64 {
        self.max_id - self.size + 1
    }
}

/// Storage failures, narrowed from the driver's errors.
#[derive(Debug, Clone, thiserror::Error)]
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
    /// A bump was refused as a whole and changed nothing (see `Catalog::bump` in seqd).
    #[error("bump refused: {0}")]
    BumpRefused(BumpRefusal),
    /// The sequence issues serial numbers: its own row hands out no range
    /// (its counters are the rows of its periods).
    #[error("sequence issues serial numbers")]
    Serial,
    /// The sequence is served in global order: none of its ranges may be
    /// held by one caller ([`Segments::reserve_lease`]).
    #[error("sequence is served in global order")]
    Global,
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

/// What [`Segments::reserve_group`] does by default: each ask reserved in
/// turn with [`Segments::reserve`], an answer per ask in order.
pub async fn reserve_each<S: Segments + ?Sized>(
    store: &S,
    asks: &[(SeqName, i64)],
) -> Vec<Reserved> {
    let mut answers = Vec::with_capacity(asks.len());
    for (name, min_size) in asks {
        answers.push(store.reserve(name, *min_size).await);
    }
    answers
}
