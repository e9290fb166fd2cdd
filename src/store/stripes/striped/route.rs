//! How an operation reaches the stripes of a [`StripedStore`]: in order,
//! stripe 0 first, one that fails marked down and the next tried at once,
//! one slower than `failover_after` raced by the next; admin writes on
//! every stripe. docs/design.md, "Stripes".

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinSet;

use super::{
    describe, probe, verdict, worse, Inner, Stripe, StripeOp, StripeStatus, StripedStore, Verdict,
    STRIPE_HEDGES,
};
use crate::store::stripes::StripeLayout;
use crate::store::{Store, StoreError};

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
    pub(super) fn order(&self) -> Vec<usize> {
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
    pub(super) async fn first_answer<T: Send + 'static>(
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
    pub(super) fn all_up(&self) -> Result<(), StoreError> {
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
    pub(super) async fn on_every_stripe<T, F, Fut>(
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
