//! Administering: create, patch, read, list, bump and purge sequences.
//!
//! Every validation of an admin call lives here, and the one-database
//! rules with it: global ordering and serial numbers are refused on a
//! stripe set (a failover between stripes jumps a sequence by a block of
//! IDs: it breaks a global order and passes any `{seq:0N}`). The HTTP
//! routes and the CLI hand in the fields as their users sent them and get
//! rows or a [`ServiceError`] back.

use super::{Presented, Service, ServiceError, Want};
use crate::domain::{
    validate_description, validate_step, IdOrdering, NamePrefix, NewSequence, ParseError, SeqName,
    SerialSettings,
};
use crate::serial::purge::{plan_purge, PurgePlan};
use crate::serial::Period;
use crate::store::{BumpMode, Bumped, PeriodRow, SequencePage, SequencePatch, SequenceRow};

/// Default first ID of a created sequence.
pub const DEFAULT_START: i64 = 1;
/// Default base step of a created sequence.
pub const DEFAULT_STEP: i64 = 1000;

/// The fields of a create, as a caller sent them.
#[derive(Debug, Clone, Default)]
pub struct CreateRequest {
    /// The name (validated here).
    pub name: String,
    /// The first ID ([`DEFAULT_START`] when left out).
    pub start: Option<i64>,
    /// The base step ([`DEFAULT_STEP`] when left out).
    pub step: Option<i64>,
    /// Free text (empty when left out).
    pub description: Option<String>,
    /// `instance` (the default) or `global`.
    pub ordering: Option<String>,
    /// The serial fields; a serial sequence needs `format`.
    pub serial: SerialFields,
}

/// The fields of a patch, as a caller sent them; at least one is given.
#[derive(Debug, Clone, Default)]
pub struct PatchRequest {
    /// A new base step.
    pub step: Option<i64>,
    /// A new description.
    pub description: Option<String>,
    /// A new ordering, `instance` or `global`.
    pub ordering: Option<String>,
    /// `Some(None)` makes the sequence plain; `Some(Some(f))` sets a format.
    pub format: Option<Option<String>>,
    /// A new reset, time zone or overflow rule (`format` is not read here).
    pub serial: SerialFields,
}

/// The serial-number fields of a create or a patch.
#[derive(Debug, Clone, Default)]
pub struct SerialFields {
    /// The format (create only; a patch carries it in [`PatchRequest::format`]).
    pub format: Option<String>,
    /// `never`, `day`, `month` or `year`.
    pub reset: Option<String>,
    /// An IANA time zone.
    pub time_zone: Option<String>,
    /// `refuse` or `widen`.
    pub overflow: Option<String>,
}

impl SerialFields {
    fn any_but_format(&self) -> bool {
        self.reset.is_some() || self.time_zone.is_some() || self.overflow.is_some()
    }
}

/// What a purge of period rows found and did.
#[derive(Debug, Clone)]
pub struct PurgeReport {
    /// Every period row of the sequence, as read before the purge.
    pub periods: Vec<PeriodRow>,
    /// Which of them go, and which are kept by the safety margin.
    pub plan: PurgePlan,
    /// Rows deleted (`None` on a dry run).
    pub deleted: Option<u64>,
}

/// One page of sequences as a caller sees it.
#[derive(Debug, Clone)]
pub struct ListPage {
    /// The rows the caller may see.
    pub rows: Vec<SequenceRow>,
    /// The `after` of the next page; `None` on the last one.
    pub next: Option<SeqName>,
}

/// The service for a caller allowed admin calls: what [`Service::admin`]
/// hands out once the access rules let the caller in, and the only way to
/// the calls that change sequences and tokens. Every door reaches them
/// through it, so no door decides who may administer.
#[derive(Clone)]
pub struct AdminCalls(Service);

impl std::ops::Deref for AdminCalls {
    type Target = Service;

    fn deref(&self) -> &Service {
        &self.0
    }
}

impl Service {
    /// The admin calls, for a caller who presented `who`: refused
    /// [`ServiceError::Unauthorized`] unless the admin token was presented
    /// (or no admin token is set and the door vouches the caller is on
    /// this machine; `seqd`'s own commands present [`Presented::LOCAL`]).
    pub fn admin(&self, who: Presented<'_>) -> Result<AdminCalls, ServiceError> {
        self.access.authorize(who, Want::Admin)?;
        Ok(AdminCalls(self.clone()))
    }
}

impl AdminCalls {
    /// Creates a sequence, refusing what no instance could serve safely.
    pub async fn create(&self, req: CreateRequest) -> Result<SequenceRow, ServiceError> {
        let name = SeqName::parse(&req.name).map_err(ServiceError::InvalidName)?;
        let start = req.start.unwrap_or(DEFAULT_START);
        let step = req.step.unwrap_or(DEFAULT_STEP);
        let description = req.description.unwrap_or_default();
        let chars = description.chars().count();
        let new = NewSequence::new(name.clone(), start, step, description, self.max_step())
            .map_err(|e| {
                ServiceError::InvalidRequest(match e {
                    ParseError::Start => format!("{e} (got {start})"),
                    ParseError::Step { .. } => format!("{e} (got {step})"),
                    ParseError::DescriptionControl { .. } => e.to_string(),
                    _ => format!("{e} (got {chars} characters)"),
                })
            })?
            .with_ordering(self.ordering(req.ordering.as_deref())?.unwrap_or_default());
        let new = match self.serial_settings(req.serial.format.as_deref(), &req.serial, None)? {
            Some(s) => {
                s.check_start(new.start).map_err(invalid)?;
                new.with_serial(s)
            }
            None => new,
        };
        self.create_new(new).await
    }

    /// Creates the sequence `new`, already checked (an import's rows):
    /// refused [`ServiceError::Exists`] when the name is taken, and, when
    /// this instance still remembers IDs under a name whose row is gone, a
    /// `start` at or below them.
    pub async fn create_new(&self, new: NewSequence) -> Result<SequenceRow, ServiceError> {
        let name = new.name.clone();
        if let Some(reserved) = self.allocator.reserved_up_to(&name) {
            // Only a name whose row is gone while this instance remembers
            // its IDs needs the check. When a row exists the store answers
            // below: "exists", or, on stripes, the rows a create cut short
            // by an outage left missing are created now (docs/design.md,
            // "Stripes: records and checks").
            if self.read(&name).await?.is_none() && new.start <= reserved {
                return Err(ServiceError::InvalidRequest(format!(
                    "start must be above {reserved}: this instance already reserved IDs up to it \
                     under this name, and a re-created sequence must never issue them again"
                )));
            }
        }
        let row = self
            .store
            .create(&new)
            .await
            .map_err(|e| ServiceError::from_store(&name, e))?;
        self.allocator.clear_missing(&name);
        self.serials.reload(&row);
        tracing::info!(sequence = %name, start = new.start, step = new.step, "sequence created");
        Ok(row)
    }

    /// Raises plain sequence `name` by at least `by` IDs in one atomic
    /// reservation that hands them to nobody (an import continuing another
    /// system's IDs): `max_id` only grows, and reservations of running
    /// instances meanwhile only add to it. Answers the new `max_id` and
    /// how far it rose.
    pub async fn raise(&self, name: &SeqName, by: i64) -> Result<(i64, i64), ServiceError> {
        let r = self
            .store
            .reserve(name, by)
            .await
            .map_err(|e| ServiceError::from_store(name, e))?;
        Ok((r.max_id, r.size))
    }

    /// Changes a sequence's settings; this instance applies them at once,
    /// the others within their settings refresh.
    pub async fn patch(
        &self,
        name: &SeqName,
        req: PatchRequest,
    ) -> Result<SequenceRow, ServiceError> {
        let serial_given = req.format.is_some() || req.serial.any_but_format();
        if req.step.is_none()
            && req.description.is_none()
            && req.ordering.is_none()
            && !serial_given
        {
            return Err(ServiceError::InvalidRequest(
                "nothing to change: give step, description, ordering, format, reset, time_zone \
                 and/or overflow"
                    .into(),
            ));
        }
        let serial = match &req.format {
            Some(None) if req.serial.any_but_format() => {
                return Err(ServiceError::InvalidRequest(
                    "\"format\": null makes the sequence plain: reset, time_zone and overflow go \
                     with it"
                        .into(),
                ))
            }
            Some(None) => Some(None),
            format if serial_given => {
                let row = self
                    .read(name)
                    .await?
                    .ok_or_else(|| ServiceError::NotFound(name.clone()))?;
                let format = format.as_ref().and_then(|f| f.as_deref());
                let settings = self.serial_settings(format, &req.serial, row.serial.as_ref())?;
                if let Some(s) = &settings {
                    s.check_start(row.counter_start).map_err(invalid)?;
                }
                Some(settings)
            }
            _ => None,
        };
        let ordering = self.ordering(req.ordering.as_deref())?;
        let step = req
            .step
            .map(|s| {
                validate_step(s, self.max_step()).map_err(|e| invalid(format!("{e} (got {s})")))
            })
            .transpose()?;
        if let Some(d) = &req.description {
            validate_description(d).map_err(invalid)?;
        }
        let patch = SequencePatch {
            step,
            description: req.description,
            ordering,
            serial,
        };
        let row = self
            .store
            .update(name, &patch)
            .await
            .map_err(|e| ServiceError::from_store(name, e))?;
        self.serials.reload(&row);
        tracing::info!(sequence = %name, step = ?patch.step, ordering = ?patch.ordering, "sequence updated");
        Ok(row)
    }
}

impl Service {
    /// One sequence's row.
    pub async fn get(&self, name: &SeqName) -> Result<SequenceRow, ServiceError> {
        self.read(name)
            .await?
            .ok_or_else(|| ServiceError::NotFound(name.clone()))
    }

    /// One page of sequences by name: at most `limit` rows above `after`
    /// whose names start with `prefix`.
    pub async fn list_page(
        &self,
        prefix: Option<&NamePrefix>,
        after: Option<&SeqName>,
        limit: u32,
    ) -> Result<SequencePage, ServiceError> {
        Ok(self.store.list_page(prefix, after, limit).await?)
    }

    /// [`Service::get`] for a caller who presented `who` (the `read` right
    /// covering `name` under `--client-auth on`). A name outside the token
    /// is refused the same whether or not it exists.
    pub async fn get_for(
        &self,
        who: Presented<'_>,
        name: &SeqName,
    ) -> Result<SequenceRow, ServiceError> {
        self.access.authorize(who, Want::Read(name.into()))?;
        self.get(name).await
    }

    /// [`Service::list_page`] for a caller who presented `who`: a client
    /// token (with `read`) sees only the names it covers. Its page is read
    /// from the ranges of its prefixes alone, one after another in name
    /// order, so neither the rows nor `next` ever name a sequence it does
    /// not cover, and a page is short only when it is the last (or when the
    /// range read held rows whose stored names are not valid, left out).
    pub async fn list_for(
        &self,
        who: Presented<'_>,
        prefix: Option<&NamePrefix>,
        after: Option<&SeqName>,
        limit: u32,
    ) -> Result<ListPage, ServiceError> {
        let caller = self.access.authorize(who, Want::List)?;
        let Some(ranges) = caller.ranges(prefix) else {
            let page = self.list_page(prefix, after, limit).await?;
            let next = page.more.then(|| page.rows.last()).flatten();
            let next = next.map(|r| r.name.clone());
            return Ok(ListPage {
                rows: page.rows,
                next,
            });
        };
        // The ranges not wholly at or before `after`.
        let ranges: Vec<NamePrefix> = ranges
            .into_iter()
            .filter(|r| after.is_none_or(|a| a.as_str() < r.upper_bound().as_str()))
            .collect();
        let mut rows = Vec::new();
        for (i, range) in ranges.iter().enumerate() {
            let left = limit - rows.len() as u32;
            let page = self.list_page(Some(range), after, left).await?;
            rows.extend(page.rows);
            // A page of the range short of `left` yet with more behind it
            // left out rows whose stored names are not valid: it ends here.
            if rows.len() as u32 == limit || page.more {
                let more = page.more || i + 1 < ranges.len();
                let next = more.then(|| rows.last().map(|r| r.name.clone())).flatten();
                return Ok(ListPage { rows, next });
            }
        }
        Ok(ListPage { rows, next: None })
    }
}

impl AdminCalls {
    /// Raises `max_id` of `names` (every sequence with `None`) by `by`,
    /// with their serial sequences' period counters, all or nothing. Before
    /// it writes, the current period's row of each serial sequence covered
    /// is made, so that a row this database never received is fenced too.
    pub async fn bump(
        &self,
        names: Option<&[SeqName]>,
        by: i64,
        mode: BumpMode,
    ) -> Result<Vec<Bumped>, ServiceError> {
        if mode == BumpMode::Apply {
            self.make_current_periods(names).await?;
        }
        Ok(self.store.bump(names, by, mode).await?)
    }

    /// Deletes the period rows of a serial sequence that ended more than
    /// `older_than` before `now` (and never one within the safety margin),
    /// or with `dry_run` only says which it would.
    pub async fn purge_periods(
        &self,
        name: &SeqName,
        older_than: jiff::SignedDuration,
        now: jiff::Timestamp,
        dry_run: bool,
    ) -> Result<PurgeReport, ServiceError> {
        let row = self.get(name).await?;
        let Some(settings) = &row.serial else {
            return Err(invalid(format!(
                "sequence '{name}' does not issue serial numbers: it has no period rows"
            )));
        };
        let periods = self.store.list_periods(name).await?;
        let keys: Vec<String> = periods.iter().map(|p| p.key.clone()).collect();
        let plan = plan_purge(&keys, settings.reset, &settings.zone(), now, older_than);
        let deleted = if dry_run {
            None
        } else {
            Some(self.store.delete_periods(name, &plan.purge).await?)
        };
        Ok(PurgeReport {
            periods,
            plan,
            deleted,
        })
    }
}

impl Service {
    async fn make_current_periods(&self, names: Option<&[SeqName]>) -> Result<(), ServiceError> {
        let rows = match names {
            Some(names) => {
                let mut rows = Vec::with_capacity(names.len());
                for name in names {
                    rows.extend(self.read(name).await?);
                }
                rows
            }
            None => self.store.list().await?,
        };
        let now = jiff::Timestamp::now();
        for row in rows {
            let Some(settings) = &row.serial else {
                continue;
            };
            let Ok(period) = Period::of(now, &settings.zone(), settings.reset) else {
                continue;
            };
            self.store
                .create_period(&row.name, &period.key)
                .await
                .map_err(|e| ServiceError::from_store(&row.name, e))?;
        }
        Ok(())
    }

    async fn read(&self, name: &SeqName) -> Result<Option<SequenceRow>, ServiceError> {
        self.store
            .get(name)
            .await
            .map_err(|e| ServiceError::from_store(name, e))
    }

    /// The serial settings the fields make from `current` (see
    /// [`SerialSettings::merge`]); refused on stripes.
    fn serial_settings(
        &self,
        format: Option<&str>,
        fields: &SerialFields,
        current: Option<&SerialSettings>,
    ) -> Result<Option<SerialSettings>, ServiceError> {
        let settings = SerialSettings::merge(
            format,
            fields.reset.as_deref(),
            fields.time_zone.as_deref(),
            fields.overflow.as_deref(),
            current,
        )
        .map_err(invalid)?;
        let stripes = self.stripes();
        if settings.is_some() && stripes > 1 {
            return Err(ServiceError::InvalidRequest(format!(
                "serial numbers need a single database; these are {stripes} stripes (a \
                 failover between stripes jumps a counter by a block of IDs, past any {{seq:0N}})"
            )));
        }
        Ok(settings)
    }

    /// Parses an `ordering` field; `global` needs a single database.
    fn ordering(&self, raw: Option<&str>) -> Result<Option<IdOrdering>, ServiceError> {
        let Some(raw) = raw else { return Ok(None) };
        let o: IdOrdering = raw
            .parse()
            .map_err(|e: ParseError| invalid(format!("{e} (got {raw:?})")))?;
        let stripes = self.stripes();
        if o == IdOrdering::Global && stripes > 1 {
            return Err(ServiceError::InvalidRequest(format!(
                "ordering \"global\" needs a single database; these are {stripes} stripes"
            )));
        }
        Ok(Some(o))
    }
}

fn invalid(e: impl ToString) -> ServiceError {
    ServiceError::InvalidRequest(e.to_string())
}
