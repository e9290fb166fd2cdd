//! Serial numbers served (docs/design.md, "Serial numbers"): a sequence's
//! settings, its current period, and the period's counter, whose IDs the
//! allocator hands out like any other sequence's.
//!
//! - Each period's counter is a row of its own, `name@key`, created on first
//!   use by [`Catalog::create_period`](crate::store::Catalog::create_period) (one statement that tolerates other
//!   instances doing the same), then reserved from as usual.
//! - A request reads the wall clock once. That reading picks the period, the
//!   period picks the counter's row, and the serial prints the period's
//!   date: a counter is never printed with another period's date.
//! - A counter's buffer keeps within the period ([`CounterBounds`]): no
//!   reservation past `{seq:0N}`'s capacity, none larger than the rest of
//!   the period will use; when the period is over its buffer is retired.
//! - Settings are read from the sequence's row at first use, at once after
//!   a PATCH answered here ([`Serials::reload`]), and every few seconds by
//!   the instance's settings refresh (`super::refresh`), whatever the
//!   sequence's traffic: a change made elsewhere is in force here within
//!   that interval. A request never reads them.
//!
//! No SQL and no HTTP: it talks to the [`Store`] trait and the allocator.

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use jiff::tz::TimeZone;
use jiff::Timestamp;

use crate::allocator::{AllocError, Allocator, CounterBounds, IdRange};
use crate::domain::clock::WallClock;
use crate::domain::serial::Period;
use crate::domain::serial::{Exhausted, Overflow, Reset};
use crate::domain::{IdOrdering, SeqName, SeqNameRef, SerialSettings};
use crate::store::{RowProblem, SequenceRow, Store, StoreError};

/// Serial numbers of every serial sequence of this instance. Cheap to
/// clone (shared).
#[derive(Clone)]
pub struct Serials {
    inner: Arc<Inner>,
}

struct Inner {
    allocator: Allocator,
    /// The rows' settings and the period rows.
    store: Arc<dyn Store>,
    wall: Arc<dyn WallClock>,
    entries: papaya::HashMap<SeqName, Arc<Entry>, foldhash::fast::RandomState>,
    /// Settings written through this instance (PATCH, create) so far: a
    /// refresh whose read began before one of them drops what it read
    /// (it may be older than what was just applied).
    changes: AtomicU64,
    /// Held while settings are applied, so a refresh's check of `changes`
    /// and its applying are one step against a PATCH's.
    applying: Mutex<()>,
    /// Rounds of the settings refresh completed.
    rounds: AtomicU64,
}

/// A handle on [`Serials`] that does not keep it alive (the settings
/// refresh holds one, and ends once the instance is dropped).
#[derive(Clone)]
pub struct WeakSerials(Weak<Inner>);

impl WeakSerials {
    /// The serials, unless every handle was dropped.
    pub fn upgrade(&self) -> Option<Serials> {
        self.0.upgrade().map(|inner| Serials { inner })
    }
}

/// One serial sequence.
struct Entry {
    name: SeqName,
    current: Mutex<Arc<Current>>,
}

/// A sequence's settings as last read.
struct Config {
    settings: SerialSettings,
    zone: TimeZone,
    counter_start: i64,
    step: i64,
    ordering: IdOrdering,
}

/// The period in use and its counter.
struct Current {
    config: Arc<Config>,
    period: Period,
    counter: SeqName,
    /// Set once this instance made sure the counter's row exists.
    created: tokio::sync::OnceCell<()>,
    /// The counter of the period before, retired again when this one is
    /// left (a request that picked it just before the switch may have made
    /// its buffer live again).
    before: Option<SeqName>,
}

/// What [`Serials::issue`] hands out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// The counters, as runs in increasing order.
    pub runs: Vec<IdRange>,
    /// One serial per counter, in the same order.
    pub serials: Vec<String>,
    /// The key of the period they belong to (empty for `reset: never`).
    pub period: String,
}

/// Why no serial number was handed out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IssueError {
    /// No sequence has this name.
    #[error("sequence not found")]
    NotFound,
    /// The sequence does not issue serial numbers (any more): its IDs come
    /// from the allocator.
    #[error("sequence does not issue serial numbers")]
    Plain,
    /// The counter outgrew `{seq:0N}` and the overflow rule is `refuse`.
    #[error(transparent)]
    SerialExhausted(Exhausted),
    /// The counter's allocator failed (unavailable, or past `i64::MAX`).
    #[error(transparent)]
    Alloc(AllocError),
    /// The sequence's row holds serial settings seqd cannot use (written by
    /// SQL): the field and why.
    #[error("the sequence's row is unusable: {0}")]
    Unusable(RowProblem),
}

/// A serial sequence's period as this instance sees it (the monitor page,
/// `/metrics`, `GET /v1/sequences/{name}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeriodStatus {
    /// The period's key (empty for `reset: never`).
    pub key: String,
    /// Its first instant (`None` for `never`).
    pub start: Option<Timestamp>,
    /// The first instant of the next one (`None` for `never`).
    pub end: Option<Timestamp>,
    /// Where its counter starts.
    pub counter_start: i64,
    /// The highest counter this instance reserved in it, if any.
    pub reserved_up_to: Option<i64>,
    /// The largest counter `{seq:0N}` holds (`None` for a plain `{seq}`).
    pub capacity: Option<u64>,
}

impl PeriodStatus {
    /// The share of the period's counters reserved by this instance, 0 to 1
    /// (above 1 once widened); `None` without a capacity.
    pub fn fill(&self) -> Option<f64> {
        let capacity = self.capacity? as f64;
        let room = capacity - (self.counter_start - 1) as f64;
        let used = self
            .reserved_up_to
            .map_or(0.0, |r| (r - (self.counter_start - 1)) as f64);
        Some(if room > 0.0 { used / room } else { 1.0 })
    }
}

/// A request refused because the period's counter cannot hold it (the
/// counter asked for, or a part of it, is past `{seq:0N}`'s capacity).
fn exhausted(config: &Config, bounds: CounterBounds) -> IssueError {
    let capacity = bounds.max.unwrap_or(0).max(0) as u64;
    IssueError::SerialExhausted(Exhausted {
        counter: capacity + 1,
        width: config.settings.format.width().unwrap_or(0),
        capacity,
    })
}

impl Serials {
    /// Serial numbers over `allocator`, reading settings and making period
    /// rows in `store` (the allocator's own), and time from `wall`.
    /// Settings changed elsewhere reach it only once
    /// [`super::refresh::spawn`] runs for it.
    pub fn new(allocator: Allocator, store: Arc<dyn Store>, wall: Arc<dyn WallClock>) -> Self {
        Serials {
            inner: Arc::new(Inner {
                allocator,
                store,
                wall,
                entries: papaya::HashMap::with_hasher(Default::default()),
                changes: AtomicU64::new(0),
                applying: Mutex::new(()),
                rounds: AtomicU64::new(0),
            }),
        }
    }

    /// A handle that does not keep these serials alive.
    pub fn downgrade(&self) -> WeakSerials {
        WeakSerials(Arc::downgrade(&self.inner))
    }

    /// The allocator the counters are served by.
    pub fn allocator(&self) -> &Allocator {
        &self.inner.allocator
    }

    /// The store the settings are read from.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// `n` serial numbers of `name` (1 for `/next`), all from the period of
    /// one reading of the clock.
    pub async fn issue(&self, name: SeqNameRef<'_>, n: u64) -> Result<Issued, IssueError> {
        let entry = self.entry(name).await?;
        let now = self.inner.wall.utc();
        let current = self.current(&entry, now)?;
        let config = &current.config;
        let mut runs = Vec::with_capacity(1);
        let mut made_again = false;
        loop {
            let bounds = self.bounds(&current, now);
            // More than the whole period holds: refused before anything is
            // asked of memory or the row.
            let room = bounds
                .max
                .map(|max| max.saturating_sub(bounds.floor).max(0) as u64);
            if room.is_some_and(|room| n > room) {
                return Err(exhausted(config, bounds));
            }
            self.make_counter(&entry.name, &current).await?;
            let global = config.ordering == IdOrdering::Global;
            let taken = self
                .inner
                .allocator
                .take_counter(&current.counter, n, bounds, global, &mut runs)
                .await;
            match taken {
                Ok(()) => break,
                // The counter's row went (deleted by hand): made again once.
                Err(AllocError::NotFound) if !made_again => {
                    made_again = true;
                    self.create_period(&entry.name, &current.period.key).await?;
                    self.inner.allocator.clear_missing(&current.counter);
                }
                Err(AllocError::Exhausted) if bounds.max.is_some() => {
                    return Err(exhausted(config, bounds));
                }
                Err(e) => return Err(IssueError::Alloc(e)),
            }
        }
        let date = match config.settings.reset {
            // One counter for ever: the date printed is today's.
            Reset::Never => config.zone.to_datetime(now).date(),
            _ => current.period.date,
        };
        let mut serials = Vec::with_capacity(n as usize);
        for counter in runs.iter().flat_map(|r| r.iter()) {
            let serial = config
                .settings
                .format
                .render(date, counter as u64, config.settings.overflow)
                .map_err(IssueError::SerialExhausted)?;
            serials.push(serial);
        }
        Ok(Issued {
            runs,
            serials,
            period: current.period.key.clone(),
        })
    }

    /// The entry of `name`, read from its row at first use.
    async fn entry(&self, name: SeqNameRef<'_>) -> Result<Arc<Entry>, IssueError> {
        if let Some(entry) = self.inner.entries.pin().get(name.as_str()) {
            return Ok(entry.clone());
        }
        let name = name.to_owned();
        let row = self.read(&name).await?;
        let config = self.config_of(&row)?;
        let current = Arc::new(self.current_for(&name, config, None, None)?);
        let entry = Arc::new(Entry {
            name: name.clone(),
            current: Mutex::new(current),
        });
        let pinned = self.inner.entries.pin();
        Ok(pinned.get_or_insert(name, entry).clone())
    }

    async fn read(&self, name: &SeqName) -> Result<SequenceRow, IssueError> {
        match self.store().get(name).await {
            Ok(Some(row)) => Ok(row),
            Ok(None) => Err(IssueError::NotFound),
            Err(e) => {
                tracing::warn!(sequence = %name, error = %e, "reading a serial sequence's settings failed");
                Err(IssueError::Alloc(AllocError::Unavailable {
                    storage_failing: true,
                }))
            }
        }
    }

    /// The settings of a row, or [`IssueError::Plain`] (and the allocator
    /// told) for a row that issues none.
    fn config_of(&self, row: &SequenceRow) -> Result<Arc<Config>, IssueError> {
        if let Some(problem) = &row.problem {
            // Its `format` is set, so the allocator keeps refusing plain
            // IDs: the request is refused naming the field.
            return Err(IssueError::Unusable(problem.clone()));
        }
        let Some(settings) = row.serial.clone() else {
            self.inner.allocator.set_serial(&row.name, false);
            return Err(IssueError::Plain);
        };
        Ok(Arc::new(Config {
            zone: settings.zone(),
            settings,
            counter_start: row.counter_start,
            step: row.step,
            ordering: row.ordering,
        }))
    }

    /// The period of now under `config`, and its counter; of `not_before`
    /// instead when the clock reads earlier (a clock that stepped back
    /// never takes a change of settings into an earlier period than the
    /// one in use).
    fn current_for(
        &self,
        name: &SeqName,
        config: Arc<Config>,
        before: Option<SeqName>,
        not_before: Option<Timestamp>,
    ) -> Result<Current, IssueError> {
        let now = self.inner.wall.utc();
        let now = not_before.map_or(now, |at| now.max(at));
        let period = Period::of(now, &config.zone, config.settings.reset).map_err(|e| {
            tracing::error!(sequence = %name, error = %e, "no period for the clock's time");
            IssueError::Alloc(AllocError::Unavailable {
                storage_failing: false,
            })
        })?;
        Ok(Current {
            counter: name.period_counter(&period.key),
            config,
            period,
            created: tokio::sync::OnceCell::new(),
            before,
        })
    }

    /// The period in use at `now`: the current one, or the next once it is
    /// over (never an earlier one: a clock that steps back keeps the period
    /// it had).
    fn current(&self, entry: &Entry, now: Timestamp) -> Result<Arc<Current>, IssueError> {
        let mut slot = entry.current.lock().unwrap();
        let current = slot.clone();
        if current.period.end.is_none_or(|end| now < end) {
            return Ok(current);
        }
        let next = self.current_for(
            &entry.name,
            current.config.clone(),
            Some(current.counter.clone()),
            None,
        )?;
        if next.counter != current.counter {
            self.retire(&current);
        }
        let next = Arc::new(next);
        *slot = next.clone();
        Ok(next)
    }

    /// Retires a period's counter and the one before it.
    fn retire(&self, current: &Current) {
        self.inner.allocator.retire(&current.counter);
        if let Some(before) = &current.before {
            self.inner.allocator.retire(before);
        }
    }

    /// Makes sure the counter's row exists (once per period and instance).
    async fn make_counter(&self, name: &SeqName, current: &Current) -> Result<(), IssueError> {
        current
            .created
            .get_or_try_init(|| self.create_period(name, &current.period.key))
            .await
            .map(|_| ())
    }

    async fn create_period(&self, name: &SeqName, key: &str) -> Result<(), IssueError> {
        match self.store().create_period(name, key).await {
            Ok(created) => {
                if created {
                    tracing::info!(sequence = %name, period = key, "period counter created");
                }
                Ok(())
            }
            Err(StoreError::NotFound) => Err(IssueError::NotFound),
            Err(StoreError::Config(why)) => {
                // Not an outage: this store cannot hold period counters.
                tracing::error!(sequence = %name, period = key, %why, "serial numbers refused by the store");
                Err(IssueError::Alloc(AllocError::Unavailable {
                    storage_failing: false,
                }))
            }
            Err(e) => {
                tracing::warn!(sequence = %name, period = key, error = %e, "creating a period counter failed");
                Err(IssueError::Alloc(AllocError::Unavailable {
                    storage_failing: true,
                }))
            }
        }
    }

    /// The bounds of the counter of `current` (see [`CounterBounds`]).
    fn bounds(&self, current: &Current, now: Timestamp) -> CounterBounds {
        let config = &current.config;
        let max = match (config.settings.overflow, config.settings.format.capacity()) {
            (Overflow::Refuse, Some(capacity)) => Some(capacity as i64),
            _ => None,
        };
        let ends_at = current.period.end.map(|end| {
            let left = end.duration_since(now).max(jiff::SignedDuration::ZERO);
            let left = Duration::try_from(left).unwrap_or_default();
            self.inner.allocator.clock().now().saturating_add(left)
        });
        CounterBounds {
            max,
            floor: config.counter_start - 1,
            step: config.step,
            ends_at,
        }
    }

    /// Takes a sequence's row just written by a PATCH or a create answered
    /// here: its ordering and serial settings take effect at once (see
    /// `Serials::apply`), and a settings refresh that read the row before
    /// drops what it read.
    pub fn reload(&self, row: &SequenceRow) {
        let _applying = self.inner.applying.lock().unwrap();
        self.inner.changes.fetch_add(1, AtomicOrdering::AcqRel);
        self.apply(row);
    }

    /// How many settings were written through this instance so far; hand it
    /// to [`Serials::apply_read`] with the rows read after taking it.
    pub fn changes(&self) -> u64 {
        self.inner.changes.load(AtomicOrdering::Acquire)
    }

    /// Applies `rows`, read by the settings refresh after [`Serials::changes`]
    /// answered `changes`, unless a PATCH or create answered here wrote
    /// settings since (what was read may be older than what that applied;
    /// the next round reads again). True when they were applied.
    pub fn apply_read(&self, changes: u64, rows: &[SequenceRow]) -> bool {
        let _applying = self.inner.applying.lock().unwrap();
        if self.changes() != changes {
            return false;
        }
        for row in rows {
            self.apply(row);
        }
        true
    }

    /// Counts a completed round of the settings refresh.
    pub(crate) fn count_round(&self) {
        self.inner.rounds.fetch_add(1, AtomicOrdering::Relaxed);
    }

    /// Rounds of the settings refresh completed by this instance.
    pub fn refresh_rounds(&self) -> u64 {
        self.inner.rounds.load(AtomicOrdering::Relaxed)
    }

    /// Calls `f` with the name of every serial sequence served here.
    pub fn for_each_name(&self, mut f: impl FnMut(&SeqName)) {
        for name in self.inner.entries.pin().keys() {
            f(name);
        }
    }

    /// How many serial sequences are served here.
    pub fn len(&self) -> usize {
        self.inner.entries.len()
    }

    /// True when no serial sequence is served here.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes a sequence's row as it is now: the allocator's buffer of the
    /// name switches ordering and serial-or-plain at once, a serial
    /// sequence's settings take effect at once, and one made plain is
    /// handed back to the allocator. A change of settings starts a new
    /// counter buffer (the old one's unused counters are a gap) in the
    /// period in use, or a later one, never an earlier one.
    fn apply(&self, row: &SequenceRow) {
        self.inner.allocator.set_ordering(&row.name, row.ordering);
        // A row with unusable settings still has a `format`: not plain.
        self.inner
            .allocator
            .set_serial(&row.name, row.serial.is_some() || row.problem.is_some());
        let pinned = self.inner.entries.pin();
        let Some(entry) = pinned.get(row.name.as_str()) else {
            return;
        };
        let Ok(config) = self.config_of(row) else {
            if let Some(entry) = pinned.remove(row.name.as_str()) {
                self.retire(&entry.current.lock().unwrap());
            }
            return;
        };
        let mut slot = entry.current.lock().unwrap();
        let same = {
            let old = &slot.config;
            old.settings == config.settings
                && old.counter_start == config.counter_start
                && old.step == config.step
                && old.ordering == config.ordering
        };
        if same {
            return;
        }
        tracing::info!(sequence = %row.name, "serial settings changed");
        self.retire(&slot);
        let in_use = slot.period.start;
        if let Ok(next) =
            self.current_for(&row.name, config, Some(slot.counter.clone()), Some(in_use))
        {
            *slot = Arc::new(next);
        }
    }

    /// The period in use for `name` in this instance, if it served serials.
    pub fn status(&self, name: &SeqName) -> Option<PeriodStatus> {
        let pinned = self.inner.entries.pin();
        let entry = pinned.get(name.as_str())?;
        Some(self.status_of(entry))
    }

    /// The counter of the period in use for `name` in this instance (the
    /// sequence whose buffer issues its serials), if it served serials.
    pub fn counter(&self, name: &SeqName) -> Option<SeqName> {
        let pinned = self.inner.entries.pin();
        let entry = pinned.get(name.as_str())?;
        let counter = entry.current.lock().unwrap().counter.clone();
        Some(counter)
    }

    /// Calls `f` with every serial sequence served here and its period.
    pub fn for_each_status(&self, mut f: impl FnMut(&SeqName, &PeriodStatus)) {
        for (name, entry) in self.inner.entries.pin().iter() {
            f(name, &self.status_of(entry));
        }
    }

    fn status_of(&self, entry: &Entry) -> PeriodStatus {
        let current = entry.current.lock().unwrap().clone();
        PeriodStatus {
            key: current.period.key.clone(),
            start: current.period.end.map(|_| current.period.start),
            end: current.period.end,
            counter_start: current.config.counter_start,
            reserved_up_to: self.inner.allocator.reserved_up_to(&current.counter),
            capacity: current.config.settings.format.capacity(),
        }
    }
}
