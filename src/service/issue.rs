//! Issuing: one ID or a batch of any sequence, whatever its kind.
//!
//! The kind is the allocator's to know: its buffer of the name holds the
//! row's settings as last read (at first use, after a PATCH answered here,
//! and at every settings refresh). A plain or global sequence is served by
//! the allocator in that one call, the fast path of every request; a
//! serial sequence is answered [`AllocError::Serial`] from memory and goes
//! to [`crate::serial::Serials`]. Only when the settings change between
//! those two steps (a PATCH or a refresh in between, seen as
//! [`IssueError::Plain`]) is the allocator asked once more; a second change
//! within the same call is answered `unavailable`, never looped on.

use super::{Presented, Service, ServiceError, Want};
use crate::allocator::{AllocError, Batch, IdRange};
use crate::domain::{Count, SeqNameRef};
use crate::serial::{IssueError, Issued};

/// The most IDs [`Service::numbers`] draws in one call (Tinyid's
/// `batchSize` bound).
pub const MAX_NUMBERS: u32 = 100_000;

/// One ID of a sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum One {
    /// The ID of a plain (or globally ordered) sequence.
    Plain(i64),
    /// A serial sequence's counter and the serial number printed from it.
    Serial {
        /// The period's counter.
        counter: i64,
        /// The serial number.
        serial: String,
    },
}

/// A batch of IDs of a sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Many {
    /// IDs of a plain (or globally ordered) sequence.
    Plain(Batch),
    /// A serial sequence's counters, as runs, and one serial each.
    Serial {
        /// The counters, as runs in increasing order.
        counters: Batch,
        /// One serial per counter, in the same order.
        serials: Vec<String>,
    },
}

impl Many {
    /// The IDs (the counters of a serial sequence) as runs.
    pub fn ids(&self) -> &Batch {
        match self {
            Many::Plain(b) | Many::Serial { counters: b, .. } => b,
        }
    }

    /// The serials, empty for a plain sequence.
    pub fn serials(&self) -> &[String] {
        match self {
            Many::Plain(_) => &[],
            Many::Serial { serials, .. } => serials,
        }
    }
}

impl Service {
    /// The next ID of `name` (its serial number for a serial sequence),
    /// for a caller who presented `who`.
    pub async fn next<'n>(
        &self,
        who: Presented<'_>,
        name: impl Into<SeqNameRef<'n>>,
    ) -> Result<One, ServiceError> {
        let name = name.into();
        let caller = self.access.authorize(who, Want::Draw(name))?;
        let one = self.next_of(name).await?;
        caller.drew(&self.access, 1);
        Ok(one)
    }

    /// [`Service::next`] when it answers without waiting: the caller
    /// refused, or a plain sequence's next ID taken from memory. `None`
    /// when the answer needs more (the database, the serials, a name not
    /// served yet, an error of the allocator): then `next` gives it. What
    /// the HTTP door calls first on the hottest routes, so that an answer
    /// from memory builds no future (docs/design.md, "The edge").
    pub fn next_now<'n>(
        &self,
        who: Presented<'_>,
        name: impl Into<SeqNameRef<'n>>,
    ) -> Option<Result<i64, ServiceError>> {
        let name = name.into();
        let caller = match self.access.authorize(who, Want::Draw(name)) {
            Ok(caller) => caller,
            Err(e) => return Some(Err(e)),
        };
        let id = self.allocator.next_now(name)?;
        caller.drew(&self.access, 1);
        Some(Ok(id))
    }

    /// The next ID of plain (or global) sequence `name` as an integer, for
    /// a caller who presented `who`: what Redis's `INCR` answers. A serial
    /// sequence is refused [`ServiceError::NotLeasable`] before anything is
    /// drawn.
    pub async fn next_id<'n>(
        &self,
        who: Presented<'_>,
        name: impl Into<SeqNameRef<'n>>,
    ) -> Result<i64, ServiceError> {
        let name = name.into();
        let caller = self.access.authorize(who, Want::Draw(name))?;
        let id = self
            .allocator
            .next(name)
            .await
            .map_err(|e| plain_only(name, e))?;
        caller.drew(&self.access, 1);
        Ok(id)
    }

    /// `count` IDs of `name`, strictly increasing (serial numbers for a
    /// serial sequence, all of one period), for a caller who presented `who`.
    pub async fn batch<'n>(
        &self,
        who: Presented<'_>,
        name: impl Into<SeqNameRef<'n>>,
        count: Count,
    ) -> Result<Many, ServiceError> {
        let name = name.into();
        let caller = self.access.authorize(who, Want::Draw(name))?;
        let many = self.batch_of(name, count).await?;
        caller.drew(&self.access, u64::from(count.get()));
        Ok(many)
    }

    /// `total` plain IDs of `name` (1 to [`MAX_NUMBERS`]), strictly
    /// increasing, drawn [`crate::domain::MAX_BATCH`] at a time, for a
    /// caller who presented `who`: what Tinyid's `nextId` routes answer. A
    /// serial sequence is refused [`ServiceError::NotLeasable`] before
    /// anything is drawn (its IDs are serial numbers, which these answers
    /// cannot carry). A later part that fails leaves the earlier ones
    /// unused: a gap, never a duplicate.
    pub async fn numbers<'n>(
        &self,
        who: Presented<'_>,
        name: impl Into<SeqNameRef<'n>>,
        total: u32,
    ) -> Result<Vec<Batch>, ServiceError> {
        let name = name.into();
        let caller = self.access.authorize(who, Want::Draw(name))?;
        if !(1..=MAX_NUMBERS).contains(&total) {
            return Err(ServiceError::InvalidRequest(format!(
                "batchSize must be a whole number from 1 to {MAX_NUMBERS}, not {total}"
            )));
        }
        let mut parts = Vec::with_capacity(total.div_ceil(crate::domain::MAX_BATCH) as usize);
        let mut left = total;
        while left > 0 {
            let n = left.min(crate::domain::MAX_BATCH);
            let count = Count::new(n).map_err(|_| ServiceError::Internal)?;
            let batch = self
                .allocator
                .batch(name, count)
                .await
                .map_err(|e| plain_only(name, e))?;
            parts.push(batch);
            left -= n;
        }
        caller.drew(&self.access, u64::from(total));
        Ok(parts)
    }

    /// `count` consecutive IDs of plain (or global) sequence `name` as one
    /// run, for a caller who presented `who`: what Redis's `INCRBY` promises
    /// (the caller owns `[r - count + 1, r]`), from one segment in the
    /// instance's order ([`crate::allocator::Allocator::run`]). A serial
    /// sequence is refused [`ServiceError::NotLeasable`] before anything is
    /// drawn; one whose segments are shorter than `count` is answered
    /// [`ServiceError::InvalidRequest`].
    pub async fn consecutive<'n>(
        &self,
        who: Presented<'_>,
        name: impl Into<SeqNameRef<'n>>,
        count: Count,
    ) -> Result<IdRange, ServiceError> {
        let name = name.into();
        let caller = self.access.authorize(who, Want::Draw(name))?;
        let run = self
            .allocator
            .run(name, count)
            .await
            .map_err(|e| plain_only(name, e))?;
        caller.drew(&self.access, u64::from(count.get()));
        Ok(run)
    }

    async fn next_of(&self, name: SeqNameRef<'_>) -> Result<One, ServiceError> {
        match self.allocator.next(name).await {
            Ok(id) => Ok(One::Plain(id)),
            Err(AllocError::Serial) => match self.serials.issue(name, 1).await {
                Ok(issued) => one_serial(issued),
                Err(IssueError::Plain) => self.plain_again_one(name).await,
                Err(e) => Err(ServiceError::from_issue(name, e)),
            },
            Err(e) => Err(ServiceError::from_alloc(name, e)),
        }
    }

    async fn batch_of(&self, name: SeqNameRef<'_>, count: Count) -> Result<Many, ServiceError> {
        match self.allocator.batch(name, count).await {
            Ok(batch) => Ok(Many::Plain(batch)),
            Err(AllocError::Serial) => match self.serials.issue(name, u64::from(count.get())).await
            {
                Ok(issued) => Ok(many_serial(issued)),
                Err(IssueError::Plain) => self
                    .allocator
                    .batch(name, count)
                    .await
                    .map(Many::Plain)
                    .map_err(|e| changed_twice(name, e)),
                Err(e) => Err(ServiceError::from_issue(name, e)),
            },
            Err(e) => Err(ServiceError::from_alloc(name, e)),
        }
    }

    /// The sequence was made plain between the allocator's answer and the
    /// serials' read: the allocator, told by the serials, serves it.
    async fn plain_again_one(&self, name: SeqNameRef<'_>) -> Result<One, ServiceError> {
        self.allocator
            .next(name)
            .await
            .map(One::Plain)
            .map_err(|e| changed_twice(name, e))
    }
}

/// The allocator's error on a path that answers plain IDs only (integers:
/// Tinyid's `nextId`, RESP `INCR`/`INCRBY`): a serial sequence, known from
/// the allocator's first answer before any serial is issued, is refused
/// `not_leasable`.
fn plain_only(name: SeqNameRef<'_>, e: AllocError) -> ServiceError {
    match e {
        AllocError::Serial => ServiceError::NotLeasable(name.to_owned(), "serial"),
        e => ServiceError::from_alloc(name, e),
    }
}

/// The allocator's error on its second try: `Serial` again means the
/// settings changed back within the call, answered `unavailable` (a retry
/// is served), never tried a third time.
fn changed_twice(name: SeqNameRef<'_>, e: AllocError) -> ServiceError {
    match e {
        AllocError::Serial => ServiceError::from_issue(name, IssueError::Plain),
        e => ServiceError::from_alloc(name, e),
    }
}

fn one_serial(mut issued: Issued) -> Result<One, ServiceError> {
    match (issued.runs.first(), issued.serials.pop()) {
        (Some(run), Some(serial)) => Ok(One::Serial {
            counter: run.first,
            serial,
        }),
        _ => {
            tracing::error!("a serial request was served no counter");
            Err(ServiceError::Internal)
        }
    }
}

fn many_serial(issued: Issued) -> Many {
    Many::Serial {
        counters: Batch {
            ranges: issued.runs,
        },
        serials: issued.serials,
    }
}
