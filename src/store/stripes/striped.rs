//! [`StripedStore`]: one [`Store`] over several databases (stripes).
//!
//! Reservations: each stripe's row is read, the range is computed by the
//! stripe's [`StripeLayout`] (lifted past the caller's high-water mark), and
//! written with one compare-and-set of `max_id`; a lost race reads again.
//! The stripes are tried in order, stripe 0 first (every sequence and every
//! instance prefers the same stripe, so IDs stay dense and trend upward
//! across instances); one that fails is marked down and the next one is
//! tried at once; one that has not answered after `failover_after` is raced
//! by the next (the first answer wins, the loser is dropped, which closes its
//! connection, and is marked down as slow). A stripe marked down is skipped
//! (tried last) until a background probe (`ping`, backing off from 250 ms to
//! 5 s) finds it answering again. docs/design.md, "Stripes".
//!
//! Admin writes (create, patch, bump) go to every stripe and are refused
//! while one is down; reads (get, list) take the first stripe that answers.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use tokio::task::JoinSet;

use super::layout::StripeLayout;
use super::record::StripeRecord;
use crate::domain::{NamePrefix, NewSequence, SeqName};
use crate::store::migrator::MigrateMode;
use crate::store::{
    reservation, BumpMode, Bumped, FenceStatus, PeriodRow, Reservation, Reserved, SequencePage,
    SequencePatch, SequenceRow, Store, StoreError,
};
use crate::store::{Catalog, Schema, Segments, StripeRecords};
use crate::store::{TokenRow, Tokens};

mod missing;
mod route;

use missing::Missing;

/// A page of the catalog, as read.
type Page = Result<SequencePage, StoreError>;

/// What a bump changed, or why it did not.
type Bumps = Result<Vec<Bumped>, StoreError>;

/// Counter: operations raced to the next stripe because the one tried had
/// not answered within `--failover-after`. (The state, reservations and
/// failures of each stripe are read from [`StripedStore::status`] at scrape
/// time: `seqd_stripe_up`, `seqd_stripe_reservations_total`,
/// `seqd_stripe_failures_total`.)
pub const STRIPE_HEDGES: &str = "seqd_stripe_hedges_total";

/// Default of `--failover-after`.
pub const DEFAULT_FAILOVER_AFTER: Duration = Duration::from_millis(200);

/// First wait of a down stripe's probe; doubled after each failed probe.
const PROBE_FIRST: Duration = Duration::from_millis(250);
/// Longest wait between two probes of a down stripe.
const PROBE_MAX: Duration = Duration::from_secs(5);
/// Bound of one probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound of one stripe's answer to [`StripedStore::ping`] (`/readyz`).
const PING_TIMEOUT: Duration = Duration::from_secs(2);
/// Compare-and-set rounds one reservation may lose before it gives up.
const CAS_ROUNDS: u32 = 64;
/// How often the background audit walks the stripes' rows.
pub const AUDIT_EVERY: Duration = Duration::from_secs(300);

/// One stripe: its store, its layout and its health.
struct Stripe {
    /// Replaced once by [`StripedStore::connect_stripe`] for a stripe that
    /// was not reachable at start.
    store: Mutex<Arc<dyn Store>>,
    layout: StripeLayout,
    up: AtomicBool,
    probing: AtomicBool,
    reservations: AtomicU64,
    failures: AtomicU64,
    last_error: Mutex<Option<String>>,
    /// Its stripe record as the first audit after start (or after it was
    /// connected) read it; later audits compare.
    record: Mutex<Option<StripeRecord>>,
    /// Set when an audit found another record than that: the database at
    /// this URL is no longer the stripe the set was started with, and the
    /// stripe stays down until a restart checks the set again.
    fenced: AtomicBool,
}

impl Stripe {
    fn store(&self) -> Arc<dyn Store> {
        self.store.lock().unwrap().clone()
    }

    fn index(&self) -> usize {
        self.layout.index() as usize
    }

    fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    fn set_up(&self, up: bool) {
        let up = up && !self.fenced.load(Ordering::Acquire);
        if self.up.swap(up, Ordering::AcqRel) != up && up {
            tracing::info!(stripe = self.index(), "stripe answers again; using it");
        }
    }
}

/// What `/readyz`, the monitor and the CLI show of one stripe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StripeStatus {
    /// Position in the set, from 0.
    pub index: u32,
    /// The backend ("postgres", "mysql", "sqlite").
    pub backend: &'static str,
    /// Its failover fence (each stripe is fenced on its own); `None` when
    /// off.
    pub fence: Option<FenceStatus>,
    /// False while marked down (failed or slow, until a probe answers).
    pub up: bool,
    /// Ranges reserved from it by this instance.
    pub reservations: u64,
    /// Operations on it that failed or were overtaken.
    pub failures: u64,
    /// seqd's words for the last failure (no driver text), if any.
    pub last_error: Option<String>,
    /// Names this instance found missing on it (reservations that got "no
    /// such row" there while another stripe had one), at most 1000.
    pub missing_rows: Vec<String>,
}

struct Inner {
    stripes: Vec<Stripe>,
    failover_after: Duration,
    /// Names found missing on a stripe, by stripe index.
    missing: Mutex<BTreeMap<u32, BTreeSet<SeqName>>>,
}

/// A [`Store`] over several stripes. See the module docs.
#[derive(Clone)]
pub struct StripedStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for StripedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripedStore")
            .field("stripes", &self.inner.stripes.len())
            .field("failover_after", &self.inner.failover_after)
            .finish_non_exhaustive()
    }
}

/// A boxed operation on one stripe's store.
type StripeOp<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send>>;

/// What one stripe's answer means for the others.
enum Verdict {
    /// This stripe cannot do it, the next one may (no row there, exhausted
    /// there): try the next, the stripe stays up.
    NextMay,
    /// The stripe failed (unreachable, timed out): mark it down, try the next.
    Down,
    /// The request itself is wrong (bad value, configuration): stop.
    Final,
}

fn verdict(e: &StoreError) -> Verdict {
    match e {
        StoreError::NotFound | StoreError::Exhausted => Verdict::NextMay,
        StoreError::Unavailable(_) => Verdict::Down,
        _ => Verdict::Final,
    }
}

/// Of two errors from different stripes, the one to answer with: an outage
/// (the caller retries) over exhaustion over a missing row.
fn worse(a: StoreError, b: StoreError) -> StoreError {
    fn rank(e: &StoreError) -> u8 {
        match e {
            StoreError::NotFound => 0,
            StoreError::Exhausted => 1,
            StoreError::Unavailable(_) => 2,
            _ => 3,
        }
    }
    if rank(&b) > rank(&a) {
        b
    } else {
        a
    }
}
/// The store of a stripe that did not answer at start, until
/// [`StripedStore::connect_stripe`] replaces it: every call fails with
/// `why` as an outage, and it reports `backend` (the URL's).
pub fn stand_in(backend: &'static str, why: String) -> Arc<dyn Store> {
    Arc::new(crate::store::stand_in::StandIn::down(backend, why))
}

/// A row as the stripes serve it. Global ordering needs one database (IDs
/// from one row, in the order it commits them), so a row set to `global` on
/// a stripe (by SQL: the API refuses it) is served as `instance`, with a
/// warning, and nothing is stuck when the row is set back
/// (docs/design.md, "Stripes").
fn as_served(mut row: SequenceRow) -> SequenceRow {
    if row.ordering == crate::domain::IdOrdering::Global {
        crate::log_throttle::throttled!(
            warn,
            "a sequence's row on a stripe says ordering = 'global', which needs one database: \
             served as 'instance'; set the row back to 'instance' on every stripe",
            Some(row.name.as_str()),
            sequence = %row.name
        );
        row.ordering = crate::domain::IdOrdering::Instance;
    }
    row
}

/// Global ordering needs one database: IDs from one row, in the order the
/// database commits them. Across stripes there is no such row.
fn refuse_global(ordering: Option<crate::domain::IdOrdering>) -> Result<(), StoreError> {
    if ordering == Some(crate::domain::IdOrdering::Global) {
        Err(StoreError::Config(
            "ordering \"global\" needs a single database, not stripes".into(),
        ))
    } else {
        Ok(())
    }
}

/// Refuses serial-number settings: a failover between stripes jumps a
/// period's counter by a block of IDs, past any `{seq:0N}`. Making a
/// sequence plain (`Some(None)`) is allowed.
fn refuse_serial(serial: Option<&crate::domain::SerialSettings>) -> Result<(), StoreError> {
    match serial {
        Some(_) => Err(serial_refused()),
        None => Ok(()),
    }
}

/// Serial numbers need one database: a failover between stripes would jump
/// a period's counter by a block.
fn serial_refused() -> StoreError {
    StoreError::Config("serial numbers need a single database, not stripes".into())
}

/// seqd's words for a store error (the variant, not the driver's text).
fn describe(e: &StoreError) -> &'static str {
    match e {
        StoreError::NotFound => "no such row",
        StoreError::AlreadyExists => "row exists",
        StoreError::Exhausted => "exhausted",
        StoreError::Unavailable(_) => "unreachable, timed out or failed",
        StoreError::Config(_) => "configuration",
        StoreError::Migration(_) => "schema",
        StoreError::Invalid(_) => "value refused",
        StoreError::BumpRefused(_) => "bump refused",
        StoreError::Serial => "serial sequence",
        StoreError::Global => "global sequence",
    }
}

/// Probes down stripe `i` until it answers, then marks it up. Ends early
/// when the store is dropped.
async fn probe(inner: Weak<Inner>, i: usize) {
    let mut wait = PROBE_FIRST;
    loop {
        tokio::time::sleep(wait).await;
        let Some(inner) = inner.upgrade() else { return };
        let s = &inner.stripes[i];
        if s.is_up() {
            s.probing.store(false, Ordering::Release);
            return;
        }
        let store = s.store();
        if let Ok(Ok(())) = tokio::time::timeout(PROBE_TIMEOUT, store.ping()).await {
            s.probing.store(false, Ordering::Release);
            s.set_up(true);
            return;
        }
        wait = (wait * 2).min(PROBE_MAX);
    }
}

/// Reserves on one stripe: reads the row, computes the range with `layout`
/// above `floor`, and writes it with a compare-and-set; a lost race reads
/// again (with a short, growing pause after the first few).
async fn reserve_on(
    store: Arc<dyn Store>,
    layout: StripeLayout,
    name: SeqName,
    min_size: i64,
    floor: i64,
) -> Result<Reservation, StoreError> {
    for round in 0..CAS_ROUNDS {
        let row = as_served(store.get(&name).await?.ok_or(StoreError::NotFound)?);
        // A serial row (made before `seqd stripes init`) hands out no plain
        // range here either, as its own database's statements refuse it.
        if row.serial.is_some() || row.problem.is_some() {
            return Err(StoreError::Serial);
        }
        let want = row.step.max(min_size).max(1);
        let (first, last) = layout
            .next_range(row.max_id, floor, want)
            .ok_or(StoreError::Exhausted)?;
        if store
            .compare_and_set_max_id(&name, row.max_id, last)
            .await?
        {
            let mut r = reservation(last, last - first + 1, row.step, row.ordering.as_str())?;
            // The caller's mark is an ID this stripe owns, so this stripe
            // handed it out and its row once stood at or above it: below it
            // now, the row went back, which the lift hides from the caller.
            // A row below a mark that another stripe owns only lags.
            r.regressed = floor > 0 && row.max_id < floor && layout.owns(floor);
            return Ok(r);
        }
        if round >= 2 {
            // Spread the contenders: up to 2^round microseconds, capped.
            let cap = 1u64 << round.min(14);
            tokio::time::sleep(Duration::from_micros(jitter(cap))).await;
        }
    }
    Err(StoreError::Unavailable(format!(
        "lost {CAS_ROUNDS} compare-and-set rounds in a row on a stripe"
    )))
}

/// A pseudo-random number in `0..cap` (spreads retries; not for secrets).
fn jitter(cap: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(cap);
    h.finish() % cap.max(1)
}

#[async_trait]
impl Segments for StripedStore {
    async fn reserve(&self, name: &SeqName, min_size: i64) -> Result<Reservation, StoreError> {
        self.reserve_above(name, min_size, 0).await
    }

    async fn reserve_above(&self, name: &SeqName, min_size: i64, floor: i64) -> Reserved {
        let missing_on = Arc::new(Mutex::new(Vec::new()));
        let seen = missing_on.clone();
        let (i, r) = self
            .first_answer("reservation", |store, layout| {
                let name = name.clone();
                let seen = seen.clone();
                Box::pin(async move {
                    let r = reserve_on(store, layout, name, min_size, floor).await;
                    if matches!(r, Err(StoreError::NotFound)) {
                        seen.lock().unwrap().push(layout.index() as usize);
                    }
                    r
                })
            })
            .await?;
        let missing = std::mem::take(&mut *missing_on.lock().unwrap());
        if !missing.is_empty() {
            self.note_missing(name, &missing, Missing::Found);
        }
        let s = &self.inner.stripes[i];
        s.reservations.fetch_add(1, Ordering::Relaxed);
        Ok(r)
    }

    async fn compare_and_set_max_id(
        &self,
        _name: &SeqName,
        _expected: i64,
        _new: i64,
    ) -> Result<bool, StoreError> {
        // Each stripe has its own row: there is no one `max_id` to compare.
        Err(StoreError::Config(
            "a compare-and-set of max_id names one stripe, not the set".into(),
        ))
    }

    async fn give_back(&self, name: &SeqName, top: i64, keep: i64) -> Result<bool, StoreError> {
        // The stripe `top` came from: the one that owns it. `keep` is at
        // least the first ID of that reservation minus one, so its row
        // never goes below what other instances reserved there before.
        let Some(s) = self.inner.stripes.iter().find(|s| s.layout.owns(top)) else {
            return Ok(false);
        };
        s.store().compare_and_set_max_id(name, top, keep).await
    }
}

#[async_trait]
impl Catalog for StripedStore {
    async fn create(&self, seq: &NewSequence) -> Result<SequenceRow, StoreError> {
        refuse_global(Some(seq.ordering))?;
        refuse_serial(seq.serial.as_ref())?;
        let results = self
            .on_every_stripe(|store| {
                let seq = seq.clone();
                async move { store.create(&seq).await }
            })
            .await?;
        // A create that failed half-way is completed by the next one: the
        // stripes that have the row already say so. Until then the stripes
        // that failed are reported missing the row (`/readyz`), as an audit
        // would find them.
        let mut created = None;
        let mut error = None;
        let mut has_row = false;
        let mut failed = Vec::new();
        for (i, r) in results.into_iter().enumerate() {
            match r {
                Ok(row) => {
                    has_row = true;
                    created.get_or_insert(row);
                }
                Err(StoreError::AlreadyExists) => has_row = true,
                Err(e) => {
                    failed.push(i);
                    error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = error {
            if has_row {
                self.note_missing(&seq.name, &failed, Missing::CreateCutShort);
            }
            return Err(e);
        }
        created.ok_or(StoreError::AlreadyExists)
    }

    async fn get(&self, name: &SeqName) -> Result<Option<SequenceRow>, StoreError> {
        let name = name.clone();
        self.first_answer("read", move |store, _| {
            let name = name.clone();
            Box::pin(async move { store.get(&name).await })
        })
        .await
        .map(|(_, row)| row.map(as_served))
    }

    async fn settings_of(&self, names: &[SeqName]) -> Result<Vec<SequenceRow>, StoreError> {
        // Settings are written to every stripe: any one answers.
        let names: Arc<[SeqName]> = names.into();
        self.first_answer("read", move |store, _| {
            let names = names.clone();
            Box::pin(async move { store.settings_of(&names).await })
        })
        .await
        .map(|(_, rows)| rows.into_iter().map(as_served).collect())
    }

    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        self.first_answer("read", |store, _| {
            Box::pin(async move { store.list().await })
        })
        .await
        .map(|(_, rows)| rows.into_iter().map(as_served).collect())
    }

    async fn list_page(&self, p: Option<&NamePrefix>, after: Option<&SeqName>, limit: u32) -> Page {
        let prefix = p;
        let prefix = prefix.cloned();
        let after = after.cloned();
        self.first_answer("read", move |store, _| {
            let (prefix, after) = (prefix.clone(), after.clone());
            Box::pin(async move {
                store
                    .list_page(prefix.as_ref(), after.as_ref(), limit)
                    .await
            })
        })
        .await
        .map(|(_, mut page)| {
            page.rows = page.rows.into_iter().map(as_served).collect();
            page
        })
    }

    async fn update(
        &self,
        name: &SeqName,
        patch: &SequencePatch,
    ) -> Result<SequenceRow, StoreError> {
        refuse_global(patch.ordering)?;
        refuse_serial(patch.serial.as_ref().and_then(Option::as_ref))?;
        let results = self
            .on_every_stripe(|store| {
                let (name, patch) = (name.clone(), patch.clone());
                async move { store.update(&name, &patch).await }
            })
            .await?;
        let mut updated = None;
        let mut missing = Vec::new();
        let mut error = None;
        for (i, r) in results.into_iter().enumerate() {
            match r {
                Ok(row) => {
                    self.note_present(name, i);
                    updated.get_or_insert(row);
                }
                Err(StoreError::NotFound) => missing.push(i),
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = error {
            return Err(e);
        }
        let row = updated.ok_or(StoreError::NotFound)?;
        if !missing.is_empty() {
            self.note_missing(name, &missing, Missing::Found);
        }
        Ok(row)
    }

    async fn bump(&self, names: Option<&[SeqName]>, by: i64, mode: BumpMode) -> Bumps {
        let names: Option<Vec<SeqName>> = names.map(<[SeqName]>::to_vec);
        let results = self
            .on_every_stripe(|store| {
                let names = names.clone();
                async move { store.bump(names.as_deref(), by, mode).await }
            })
            .await?;
        let mut first = None;
        for r in results {
            let plan = r?;
            first.get_or_insert(plan);
        }
        Ok(first.unwrap_or_default())
    }

    async fn create_period(&self, _parent: &SeqName, _key: &str) -> Result<bool, StoreError> {
        Err(serial_refused())
    }

    async fn list_periods(&self, _parent: &SeqName) -> Result<Vec<PeriodRow>, StoreError> {
        Err(serial_refused())
    }

    async fn delete_periods(&self, _parent: &SeqName, _keys: &[String]) -> Result<u64, StoreError> {
        Err(serial_refused())
    }
}

#[async_trait]
impl Schema for StripedStore {
    async fn migrate(&self) -> Result<(), StoreError> {
        for s in &self.inner.stripes {
            s.store().migrate().await?;
        }
        Ok(())
    }

    async fn check_schema(&self) -> Result<(), StoreError> {
        for s in &self.inner.stripes {
            s.store().check_schema().await?;
        }
        Ok(())
    }

    async fn prepare_schema(&self, mode: MigrateMode) -> Result<(), StoreError> {
        for s in &self.inner.stripes {
            s.store().prepare_schema(mode).await?;
        }
        Ok(())
    }

    /// Pings every stripe at once (each bounded by `PING_TIMEOUT`): a
    /// stripe that fails is marked down, one that answers is marked up;
    /// `Ok` while any answers, so `/readyz` stays ready and reports each
    /// stripe, including the ones no fetch has used lately.
    async fn ping(&self) -> Result<(), StoreError> {
        let mut pings = JoinSet::new();
        for (i, s) in self.inner.stripes.iter().enumerate() {
            let this = self.clone();
            let store = s.store();
            pings.spawn(async move {
                let answered = tokio::time::timeout(PING_TIMEOUT, store.ping()).await;
                if matches!(answered, Ok(Ok(()))) {
                    let _ = tokio::time::timeout(PING_TIMEOUT, this.recheck_missing(i)).await;
                }
                (i, answered)
            });
        }
        let mut error = None;
        let mut any = false;
        while let Some(joined) = pings.join_next().await {
            let Ok((i, outcome)) = joined else { continue };
            match outcome {
                Ok(Ok(())) => {
                    any = true;
                    self.inner.stripes[i].set_up(true);
                }
                Ok(Err(e)) => {
                    self.mark_down(i, &format!("ping failed: {}", describe(&e)));
                    error.get_or_insert(e);
                }
                Err(_) => {
                    self.mark_down(i, "ping timed out");
                    error.get_or_insert(StoreError::Unavailable("ping timed out".into()));
                }
            }
        }
        if any {
            Ok(())
        } else {
            Err(error.unwrap_or_else(|| StoreError::Unavailable("no stripe answered".into())))
        }
    }

    fn backend(&self) -> &'static str {
        "striped"
    }
}

#[async_trait]
impl StripeRecords for StripedStore {
    async fn stripe_record(&self) -> Result<Option<StripeRecord>, StoreError> {
        Err(StoreError::Config(
            "a stripe record belongs to one database, not to the set".into(),
        ))
    }

    async fn put_stripe_record(
        &self,
        _record: &StripeRecord,
        _replace: bool,
    ) -> Result<StripeRecord, StoreError> {
        Err(StoreError::Config(
            "a stripe record belongs to one database, not to the set".into(),
        ))
    }

    async fn drop_stripe_record(&self, _database_id: &str) -> Result<bool, StoreError> {
        Err(StoreError::Config(
            "a stripe record belongs to one database, not to the set".into(),
        ))
    }

    async fn join_stripe_set(&self, _set_id: &str) -> Result<Option<StripeRecord>, StoreError> {
        Err(StoreError::Config(
            "a stripe record belongs to one database, not to the set".into(),
        ))
    }

    fn stripe_status(&self) -> Vec<StripeStatus> {
        self.status()
    }

    fn stripe_of(&self, id: i64) -> Option<u32> {
        self.inner
            .stripes
            .iter()
            .find(|s| s.layout.owns(id))
            .map(|s| s.layout.index())
    }
}

/// The tokens live on the first stripe (docs/operations.md, "Client
/// tokens"): while it is down, instances keep the set they read last, and
/// no token is made or revoked.
#[async_trait]
impl Tokens for StripedStore {
    async fn token_rows(&self) -> Result<Vec<TokenRow>, StoreError> {
        self.inner.stripes[0].store().token_rows().await
    }

    async fn insert_token(&self, row: &TokenRow) -> Result<(), StoreError> {
        self.inner.stripes[0].store().insert_token(row).await
    }

    async fn revoke_token(&self, label: &str, at: i64) -> Result<bool, StoreError> {
        self.inner.stripes[0].store().revoke_token(label, at).await
    }
}
