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

use serde::Serialize;
use tokio::task::JoinSet;

use super::layout::StripeLayout;
use super::record::StripeRecord;
use crate::domain::SeqName;
use crate::store::{FenceStatus, Store, StoreError};

mod calls;
mod missing;

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

impl StripedStore {
    /// A striped store over `stripes` (store and layout, in stripe order:
    /// layout `i` must be stripe `i` of `stripes.len()`), racing a stripe
    /// that has not answered after `failover_after` with the next one.
    pub fn new(
        stripes: Vec<(Arc<dyn Store>, StripeLayout)>,
        failover_after: Duration,
    ) -> Result<Self, StoreError> {
        let n = stripes.len();
        for (i, (_, layout)) in stripes.iter().enumerate() {
            if layout.index() as usize != i || layout.count() as usize != n {
                return Err(StoreError::Config(format!(
                    "stripe #{i} has the layout of stripe {} of {}",
                    layout.index(),
                    layout.count()
                )));
            }
        }
        let stripes: Vec<Stripe> = stripes
            .into_iter()
            .map(|(store, layout)| Stripe {
                store: Mutex::new(store),
                layout,
                up: AtomicBool::new(true),
                probing: AtomicBool::new(false),
                reservations: AtomicU64::new(0),
                failures: AtomicU64::new(0),
                last_error: Mutex::new(None),
                record: Mutex::new(None),
                fenced: AtomicBool::new(false),
            })
            .collect();
        Ok(StripedStore {
            inner: Arc::new(Inner {
                stripes,
                failover_after,
                missing: Mutex::new(BTreeMap::new()),
            }),
        })
    }

    /// How many stripes the set has.
    pub fn len(&self) -> usize {
        self.inner.stripes.len()
    }

    /// Always false: a set has at least one stripe.
    pub fn is_empty(&self) -> bool {
        self.inner.stripes.is_empty()
    }

    /// The stores of the stripes, in order.
    pub fn stores(&self) -> Vec<Arc<dyn Store>> {
        self.inner.stripes.iter().map(Stripe::store).collect()
    }

    /// The state of every stripe.
    pub fn status(&self) -> Vec<StripeStatus> {
        let missing = self.inner.missing.lock().unwrap();
        self.inner
            .stripes
            .iter()
            .map(|s| StripeStatus {
                index: s.layout.index(),
                backend: s.store().backend(),
                fence: s.store().fence_status(),
                up: s.is_up(),
                reservations: s.reservations.load(Ordering::Relaxed),
                failures: s.failures.load(Ordering::Relaxed),
                last_error: s.last_error.lock().unwrap().clone(),
                missing_rows: missing
                    .get(&s.layout.index())
                    .map(|names| names.iter().map(|n| n.as_str().to_string()).collect())
                    .unwrap_or_default(),
            })
            .collect()
    }

    /// The stripes in the order to try them: those up by index, then those
    /// marked down (a probe may not have caught up with their recovery);
    /// never a fenced one.
    fn order(&self) -> Vec<usize> {
        let stripes = &self.inner.stripes;
        let usable = |i: &usize| !stripes[*i].fenced.load(Ordering::Acquire);
        let up = (0..stripes.len()).filter(|&i| stripes[i].is_up());
        let down = (0..stripes.len())
            .filter(|&i| !stripes[i].is_up())
            .filter(usable);
        up.chain(down).collect()
    }

    /// Puts `store`, checked to be stripe `i` of this set, in place of the
    /// stand-in stripe `i` had since start; its probe then finds it
    /// answering and it is used again, lifted past what this instance
    /// served, like a stripe back from an outage.
    pub fn connect_stripe(&self, i: usize, store: Arc<dyn Store>) {
        let s = &self.inner.stripes[i];
        *s.store.lock().unwrap() = store;
        *s.record.lock().unwrap() = None;
        tracing::info!(stripe = i, "stripe connected and checked; probing it");
        if !s.probing.swap(true, Ordering::AcqRel) {
            tokio::spawn(probe(Arc::downgrade(&self.inner), i));
        }
    }

    /// Fences stripe `i` for `why` (seqd's words): the database at its URL
    /// is not the stripe this set was started with. Marked down, left out of
    /// the order reservations try, never set up again by a ping or a probe,
    /// and `why` stays its last error, until a restart checks the set.
    pub(crate) fn fence(&self, i: usize, why: &str) {
        let s = &self.inner.stripes[i];
        s.fenced.store(true, Ordering::Release);
        s.failures.fetch_add(1, Ordering::Relaxed);
        *s.last_error.lock().unwrap() = Some(why.to_string());
        s.set_up(false);
    }

    /// Marks stripe `i` down for `why` (seqd's words) and starts its probe
    /// (also for a stripe that did not answer at start, a stand-in until
    /// [`StripedStore::connect_stripe`]: its probe keeps it down meanwhile).
    pub(crate) fn mark_down(&self, i: usize, why: &str) {
        let s = &self.inner.stripes[i];
        if s.fenced.load(Ordering::Acquire) {
            return; // down for good, with the reason it was fenced
        }
        s.failures.fetch_add(1, Ordering::Relaxed);
        *s.last_error.lock().unwrap() = Some(why.to_string());
        if s.is_up() {
            tracing::warn!(
                stripe = i,
                backend = s.store().backend(),
                why,
                "stripe marked down; using the others until it answers a probe"
            );
        }
        s.set_up(false);
        if !s.probing.swap(true, Ordering::AcqRel) {
            tokio::spawn(probe(Arc::downgrade(&self.inner), i));
        }
    }

    /// Runs `op` on the stripes in [`StripedStore::order`]: the first
    /// success wins. A stripe that fails is marked down and the next one
    /// starts at once; one that has not answered after `failover_after` is
    /// raced by the next one. Returns the stripe that answered and its
    /// answer, or the worst error when every stripe failed.
    async fn first_answer<T: Send + 'static>(
        &self,
        what: &'static str,
        op: impl Fn(Arc<dyn Store>, StripeLayout) -> StripeOp<T>,
    ) -> Result<(usize, T), StoreError> {
        let mut waiting = self.order().into_iter();
        let mut running: JoinSet<(usize, Result<T, StoreError>)> = JoinSet::new();
        // The stripes still running, by task: a panicked task is known by its id.
        let mut started: Vec<(tokio::task::Id, usize)> = Vec::new();
        let mut error: Option<StoreError> = None;
        let launch = |i: usize, running: &mut JoinSet<_>, started: &mut Vec<_>| {
            let s = &self.inner.stripes[i];
            let fut = op(s.store(), s.layout);
            let task = running.spawn(async move { (i, fut.await) });
            started.push((task.id(), i));
        };
        if let Some(i) = waiting.next() {
            launch(i, &mut running, &mut started);
        }
        loop {
            let more = waiting.len() > 0;
            let hedge = tokio::time::sleep(self.inner.failover_after);
            tokio::select! {
                joined = running.join_next_with_id(), if !running.is_empty() => {
                    let (id, i, result) = match joined.expect("joined only while running") {
                        Ok((id, (i, result))) => (id, i, result),
                        Err(e) => {
                            // A panicked operation: a bug, handled as an outage.
                            tracing::error!(error = %e, what, "a stripe operation panicked");
                            let i = started.iter().find(|(id, _)| *id == e.id()).map(|&(_, i)| i);
                            let i = i.expect("every task is in `started`");
                            (e.id(), i, Err(StoreError::Unavailable("stripe operation panicked".into())))
                        }
                    };
                    started.retain(|&(t, _)| t != id);
                    match result {
                        Ok(v) => {
                            // Stripes still running lost a race they had
                            // more than `failover_after` to win.
                            for (_, j) in started {
                                self.mark_down(j, "slower than --failover-after");
                            }
                            self.inner.stripes[i].set_up(true);
                            return Ok((i, v));
                        }
                        Err(e) => {
                            match verdict(&e) {
                                Verdict::Final => return Err(e),
                                Verdict::Down => self.mark_down(i, &format!("{what} failed: {}", describe(&e))),
                                Verdict::NextMay => {}
                            }
                            error = Some(match error.take() {
                                Some(prev) => worse(prev, e),
                                None => e,
                            });
                            if let Some(next) = waiting.next() {
                                launch(next, &mut running, &mut started);
                            } else if running.is_empty() {
                                return Err(error.expect("set above"));
                            }
                        }
                    }
                }
                _ = hedge, if more => {
                    metrics::counter!(STRIPE_HEDGES).increment(1);
                    if let Some(next) = waiting.next() {
                        launch(next, &mut running, &mut started);
                    }
                }
            }
        }
    }

    /// Refuses an admin write while a stripe is marked down: it must reach
    /// every stripe.
    fn all_up(&self) -> Result<(), StoreError> {
        match self.inner.stripes.iter().find(|s| !s.is_up()) {
            Some(s) => Err(StoreError::Unavailable(format!(
                "stripe {} is down; admin changes need every stripe",
                s.index()
            ))),
            None => Ok(()),
        }
    }

    /// Runs an admin write on every stripe in order; a stripe that fails to
    /// answer is marked down. Returns each stripe's result.
    async fn on_every_stripe<T, F, Fut>(
        &self,
        op: F,
    ) -> Result<Vec<Result<T, StoreError>>, StoreError>
    where
        F: Fn(Arc<dyn Store>) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        self.all_up()?;
        let mut out = Vec::with_capacity(self.inner.stripes.len());
        for (i, s) in self.inner.stripes.iter().enumerate() {
            let r = op(s.store()).await;
            if let Err(e @ StoreError::Unavailable(_)) = &r {
                self.mark_down(i, &format!("admin write failed: {}", describe(e)));
            }
            out.push(r);
        }
        Ok(out)
    }
}

/// The store of a stripe that did not answer at start, until
/// [`StripedStore::connect_stripe`] replaces it: every call fails with
/// `why` as an outage, and it reports `backend` (the URL's).
pub fn stand_in(backend: &'static str, why: String) -> Arc<dyn Store> {
    struct NotConnected {
        backend: &'static str,
        why: String,
    }
    impl crate::store::forwarding::Hook for NotConnected {
        fn before(&self, _: crate::store::forwarding::Call) -> Result<(), StoreError> {
            Err(StoreError::Unavailable(self.why.clone()))
        }
        fn backend(&self) -> Option<&'static str> {
            Some(self.backend)
        }
    }
    crate::store::forwarding::Forwarding::new(
        Arc::new(crate::store::memory::MemoryStore::new()),
        NotConnected { backend, why },
    )
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
