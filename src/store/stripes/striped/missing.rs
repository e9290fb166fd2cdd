//! The rows missing on a stripe, as [`StripedStore::status`] reports them:
//! noted by reservations and creates that found a stripe without the row,
//! forgotten when a ping reads the row there again, and replaced by the
//! background audit's merge walk, which also watches every stripe's
//! record. docs/design.md, "Stripes".

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::StripedStore;
use crate::domain::SeqName;
use crate::store::stripes::audit::{audit_rows, MissingRow};
use crate::store::StripeRecord;

/// Names remembered as missing from a stripe (seen by reservations or by
/// the audit).
const MISSING_KEPT: usize = 1000;
/// Names noted missing on a stripe that one ping reads again.
const RECHECK_PER_PING: usize = 32;

impl StripedStore {
    /// Starts the background audit: at once and then every `every`, a merge
    /// walk over every stripe's rows ([`audit_rows`], at most
    /// `MISSING_KEPT` findings) replaces what [`StripedStore::status`]
    /// reports as missing, so a row added by SQL to some stripes only is
    /// reported even if no fetch has gone to the stripes that lack it. Skips
    /// a round while a stripe is down; ends when the store is dropped.
    pub fn start_audit(&self, every: Duration) {
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            loop {
                let Some(inner) = weak.upgrade() else { return };
                let this = StripedStore { inner };
                this.audit_records().await;
                if this.all_up().is_ok() {
                    match audit_rows(&this.stores(), MISSING_KEPT).await {
                        Ok(found) => this.replace_missing(found),
                        Err(e) => {
                            tracing::warn!(error = %e, "auditing the stripes' rows failed; will retry")
                        }
                    }
                }
                drop(this);
                tokio::time::sleep(every).await;
            }
        });
    }

    /// Reads every answering stripe's record: the first read is kept, and
    /// a later one that differs from it (another database, another set,
    /// another position: the database behind the URL was replaced while
    /// this instance ran) fences the stripe: marked down, never up again
    /// until a restart checks the set (docs/design.md, "Stripes: records
    /// and checks").
    async fn audit_records(&self) {
        for (i, s) in self.inner.stripes.iter().enumerate() {
            if !s.is_up() {
                continue;
            }
            let Ok(Some(now)) = s.store().stripe_record().await else {
                continue; // an outage shows in the fetches and the ping
            };
            let mut kept = s.record.lock().unwrap();
            match kept.as_ref() {
                None => *kept = Some(now),
                Some(was) if same_stripe(was, &now) => {}
                Some(was) => {
                    tracing::error!(stripe = i, was = ?was, now = ?now,
                        "the stripe record at this URL changed while this instance ran: another \
                         database (or another set's) is behind it; not using the stripe until a \
                         restart checks the set");
                    drop(kept);
                    self.fence(i, "its stripe record changed while this instance ran");
                }
            }
        }
    }

    /// Replaces the names known missing by an audit's findings.
    fn replace_missing(&self, found: Vec<MissingRow>) {
        let mut map: BTreeMap<u32, BTreeSet<SeqName>> = BTreeMap::new();
        for row in found {
            for i in row.missing_on {
                map.entry(i).or_default().insert(row.name.clone());
            }
        }
        for (i, names) in &map {
            tracing::error!(
                stripe = i,
                rows = names.len(),
                "sequences have no row on this stripe while other stripes have one \
                 (added by SQL to some stripes only?); `seqd stripes init` creates them"
            );
        }
        *self.inner.missing.lock().unwrap() = map;
    }

    /// Remembers that `name` has no row on the stripes `on`; `why` is
    /// logged once per stripe and name.
    pub(super) fn note_missing(&self, name: &SeqName, on: &[usize], why: Missing) {
        let mut missing = self.inner.missing.lock().unwrap();
        for &i in on {
            let names = missing.entry(i as u32).or_default();
            if names.len() < MISSING_KEPT && names.insert(name.clone()) {
                match why {
                    Missing::Found => tracing::error!(sequence = %name, stripe = i,
                        "sequence has no row on this stripe (added by SQL to the others?); \
                         serving it from the other stripes"),
                    Missing::CreateCutShort => tracing::error!(sequence = %name, stripe = i,
                        "the sequence was created on the other stripes only (this one failed); \
                         serving it from them; the same create, retried, creates this row"),
                }
            }
        }
    }

    /// Reads again (at most [`RECHECK_PER_PING`] of) the names noted missing
    /// on stripe `i` and forgets those that have a row there now: one
    /// reservation's "no such row" (a row created since, or an answer lost
    /// to a failover) must not keep `/readyz` degraded until the next audit.
    pub(super) async fn recheck_missing(&self, i: usize) {
        let names: Vec<SeqName> = match self.inner.missing.lock().unwrap().get(&(i as u32)) {
            Some(names) => names.iter().take(RECHECK_PER_PING).cloned().collect(),
            None => return,
        };
        let store = self.inner.stripes[i].store();
        for name in names {
            if let Ok(Some(_)) = store.get(&name).await {
                tracing::info!(sequence = %name, stripe = i, "sequence has a row on this stripe again");
                self.note_present(&name, i);
            }
        }
    }

    /// Forgets `name` as missing on stripe `i` (it has a row there now).
    pub(super) fn note_present(&self, name: &SeqName, i: usize) {
        let mut missing = self.inner.missing.lock().unwrap();
        if let Some(names) = missing.get_mut(&(i as u32)) {
            names.remove(name);
        }
    }
}

/// Why a stripe is known to lack a sequence's row.
#[derive(Debug, Clone, Copy)]
pub(super) enum Missing {
    /// A stripe answered "no such row" while others have it.
    Found,
    /// A create succeeded on other stripes and failed on this one.
    CreateCutShort,
}

/// Whether `now` is still the record `was`: the same database, position,
/// layout and set (a set identity recorded since, where there was none, is
/// the same set).
fn same_stripe(was: &StripeRecord, now: &StripeRecord) -> bool {
    was.database_id == now.database_id
        && (was.index, was.count, was.block) == (now.index, now.count, now.block)
        && (was.set_id.is_none() || was.set_id == now.set_id)
}
