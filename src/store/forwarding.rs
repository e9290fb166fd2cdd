//! A store that passes every call on to another store, asking a [`Hook`]
//! first: the one wrapper that tests, benchmarks and examples put in front
//! of a real store to count calls, watch `max_id` moves or fail calls (a
//! stripe cut, a misconfigured database) without writing out the five
//! storage traits again.

use std::sync::Arc;

use async_trait::async_trait;

use super::stripes::{StripeRecord, StripeStatus};
use super::{
    BumpMode, Bumped, Catalog, FenceStatus, MigrateMode, PeriodRow, Reservation, Reserved, Schema,
    Segments, SequencePage, SequencePatch, SequenceRow, Store, StoreError, StripeRecords, TokenRow,
    Tokens,
};
use crate::domain::{NamePrefix, NewSequence, SeqName};

/// One call of the storage traits, as a [`Hook`] sees it before it reaches
/// the inner store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Call {
    /// [`Segments::reserve`] and [`Segments::reserve_above`].
    Reserve,
    /// [`Segments::reserve_exact`] and [`Segments::reserve_within`].
    ReserveExact,
    /// [`Segments::compare_and_set_max_id`] and [`Segments::give_back`].
    CompareAndSet,
    /// A read of [`Catalog`]: get, settings, list, a page, the periods.
    Read,
    /// A write of [`Catalog`]: create, update, bump, the periods.
    Write,
    /// [`Schema::migrate`] and [`Schema::check_schema`].
    Schema,
    /// [`Schema::ping`].
    Ping,
    /// [`StripeRecords`]: the stripe record, read or written.
    StripeRecord,
    /// [`Tokens`]: the token rows, read or written.
    Tokens,
}

/// What a [`Forwarding`] store does around each call.
pub trait Hook: Send + Sync + 'static {
    /// Runs before `call` reaches the inner store; an error is answered
    /// instead of calling it.
    fn before(&self, call: Call) -> Result<(), StoreError> {
        let _ = call;
        Ok(())
    }

    /// Runs after a compare-and-set (or a give-back) that moved `max_id`
    /// from `expected` to `new`.
    fn moved(&self, expected: i64, new: i64) {
        let _ = (expected, new);
    }

    /// The backend name to report instead of the inner store's.
    fn backend(&self) -> Option<&'static str> {
        None
    }
}

/// A [`Hook`] that counts the calls of one kind and lets every call through.
#[derive(Debug)]
pub struct Counting {
    call: Call,
    count: std::sync::atomic::AtomicU64,
}

impl Counting {
    /// Counts the calls of `call`.
    pub fn of(call: Call) -> Self {
        Counting {
            call,
            count: Default::default(),
        }
    }

    /// How many calls of its kind went through so far.
    pub fn count(&self) -> u64 {
        self.count.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Hook for Counting {
    fn before(&self, call: Call) -> Result<(), StoreError> {
        if call == self.call {
            self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(())
    }
}

/// `inner` behind `hook`: every method of [`Store`] asks the hook, then
/// calls the same method of `inner`.
pub struct Forwarding<H> {
    inner: Arc<dyn Store>,
    hook: H,
}

impl<H: Hook> Forwarding<H> {
    /// `inner` behind `hook`.
    pub fn new(inner: Arc<dyn Store>, hook: H) -> Arc<Self> {
        Arc::new(Forwarding { inner, hook })
    }

    /// The hook, to read what it recorded or to switch it.
    pub fn hook(&self) -> &H {
        &self.hook
    }
}

/// What a compare-and-set answers: whether it set.
type Set = Result<bool, StoreError>;

/// What [`Catalog::list_page`] answers.
type Page = Result<SequencePage, StoreError>;

/// What [`Catalog::bump`] answers.
type Bumps = Result<Vec<Bumped>, StoreError>;

impl<H: Hook> Forwarding<H> {
    /// The inner store, once the hook let `call` through.
    fn ask(&self, call: Call) -> Result<&dyn Store, StoreError> {
        self.hook.before(call)?;
        Ok(&*self.inner)
    }

    /// A compare-and-set's answer, the hook told when it moved `max_id`
    /// from `from` to `to`.
    fn told(&self, set: Set, from: i64, to: i64) -> Set {
        if let Ok(true) = set {
            self.hook.moved(from, to);
        }
        set
    }
}

#[async_trait]
impl<H: Hook> Segments for Forwarding<H> {
    async fn reserve(&self, name: &SeqName, min_size: i64) -> Result<Reservation, StoreError> {
        self.ask(Call::Reserve)?.reserve(name, min_size).await
    }

    async fn reserve_above(&self, name: &SeqName, min_size: i64, floor: i64) -> Reserved {
        let inner = self.ask(Call::Reserve)?;
        inner.reserve_above(name, min_size, floor).await
    }

    fn group_limit(&self) -> usize {
        self.inner.group_limit()
    }

    /// One [`Call::Reserve`] for the whole group: refused, it is every
    /// name's answer.
    async fn reserve_group(&self, asks: &[(SeqName, i64)]) -> Vec<Reserved> {
        match self.ask(Call::Reserve) {
            Ok(inner) => inner.reserve_group(asks).await,
            Err(e) => vec![Err(e); asks.len()],
        }
    }

    async fn compare_and_set_max_id(&self, name: &SeqName, from: i64, to: i64) -> Set {
        let inner = self.ask(Call::CompareAndSet)?;
        let set = inner.compare_and_set_max_id(name, from, to).await;
        self.told(set, from, to)
    }

    async fn reserve_exact(&self, name: &SeqName, n: i64) -> Reserved {
        self.ask(Call::ReserveExact)?.reserve_exact(name, n).await
    }

    async fn reserve_within(&self, name: &SeqName, n: i64, cap: i64) -> Reserved {
        let inner = self.ask(Call::ReserveExact)?;
        inner.reserve_within(name, n, cap).await
    }

    async fn reserve_lease(&self, name: &SeqName, n: i64, cap: i64) -> Reserved {
        let inner = self.ask(Call::ReserveExact)?;
        inner.reserve_lease(name, n, cap).await
    }

    async fn give_back(&self, name: &SeqName, top: i64, keep: i64) -> Result<bool, StoreError> {
        let set = self.ask(Call::CompareAndSet)?.give_back(name, top, keep);
        self.told(set.await, top, keep)
    }
}

#[async_trait]
impl<H: Hook> Catalog for Forwarding<H> {
    async fn create(&self, seq: &NewSequence) -> Result<SequenceRow, StoreError> {
        self.ask(Call::Write)?.create(seq).await
    }

    async fn create_period(&self, parent: &SeqName, key: &str) -> Result<bool, StoreError> {
        self.ask(Call::Write)?.create_period(parent, key).await
    }

    async fn list_periods(&self, parent: &SeqName) -> Result<Vec<PeriodRow>, StoreError> {
        self.ask(Call::Read)?.list_periods(parent).await
    }

    async fn delete_periods(&self, parent: &SeqName, keys: &[String]) -> Result<u64, StoreError> {
        self.ask(Call::Write)?.delete_periods(parent, keys).await
    }

    async fn get(&self, name: &SeqName) -> Result<Option<SequenceRow>, StoreError> {
        self.ask(Call::Read)?.get(name).await
    }

    async fn settings_of(&self, names: &[SeqName]) -> Result<Vec<SequenceRow>, StoreError> {
        let inner = self.ask(Call::Read)?;
        inner.settings_of(names).await
    }

    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        self.ask(Call::Read)?.list().await
    }

    async fn list_page(&self, p: Option<&NamePrefix>, after: Option<&SeqName>, n: u32) -> Page {
        self.ask(Call::Read)?.list_page(p, after, n).await
    }

    async fn update(
        &self,
        name: &SeqName,
        patch: &SequencePatch,
    ) -> Result<SequenceRow, StoreError> {
        self.ask(Call::Write)?.update(name, patch).await
    }

    async fn bump(&self, names: Option<&[SeqName]>, by: i64, mode: BumpMode) -> Bumps {
        self.ask(Call::Write)?.bump(names, by, mode).await
    }
}

#[async_trait]
impl<H: Hook> Schema for Forwarding<H> {
    async fn migrate(&self) -> Result<(), StoreError> {
        self.ask(Call::Schema)?.migrate().await
    }

    async fn check_schema(&self) -> Result<(), StoreError> {
        let inner = self.ask(Call::Schema)?;
        inner.check_schema().await
    }

    async fn prepare_schema(&self, mode: MigrateMode) -> Result<(), StoreError> {
        self.ask(Call::Schema)?.prepare_schema(mode).await
    }

    fn fence_status(&self) -> Option<FenceStatus> {
        self.inner.fence_status()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.ask(Call::Ping)?.ping().await
    }

    fn backend(&self) -> &'static str {
        self.hook.backend().unwrap_or_else(|| self.inner.backend())
    }
}

#[async_trait]
impl<H: Hook> StripeRecords for Forwarding<H> {
    fn stripe_status(&self) -> Vec<StripeStatus> {
        self.inner.stripe_status()
    }

    fn stripe_of(&self, id: i64) -> Option<u32> {
        self.inner.stripe_of(id)
    }

    async fn stripe_record(&self) -> Result<Option<StripeRecord>, StoreError> {
        self.ask(Call::StripeRecord)?.stripe_record().await
    }

    async fn put_stripe_record(
        &self,
        record: &StripeRecord,
        replace: bool,
    ) -> Result<StripeRecord, StoreError> {
        let inner = self.ask(Call::StripeRecord)?;
        inner.put_stripe_record(record, replace).await
    }

    async fn drop_stripe_record(&self, database_id: &str) -> Result<bool, StoreError> {
        let inner = self.ask(Call::StripeRecord)?;
        inner.drop_stripe_record(database_id).await
    }

    async fn join_stripe_set(&self, set_id: &str) -> Result<Option<StripeRecord>, StoreError> {
        self.ask(Call::StripeRecord)?.join_stripe_set(set_id).await
    }
}

#[async_trait]
impl<H: Hook> Tokens for Forwarding<H> {
    async fn token_rows(&self) -> Result<Vec<TokenRow>, StoreError> {
        self.ask(Call::Tokens)?.token_rows().await
    }

    async fn insert_token(&self, row: &TokenRow) -> Result<(), StoreError> {
        self.ask(Call::Tokens)?.insert_token(row).await
    }

    async fn revoke_token(&self, label: &str, at: i64) -> Result<bool, StoreError> {
        self.ask(Call::Tokens)?.revoke_token(label, at).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    use super::*;
    use crate::store::memory::MemoryStore;

    #[derive(Default)]
    struct Watch {
        reserves: AtomicU64,
        moves: Mutex<Vec<(i64, i64)>>,
        refuse_reads: std::sync::atomic::AtomicBool,
        refuse_reserves: std::sync::atomic::AtomicBool,
    }

    impl Hook for Watch {
        fn before(&self, call: Call) -> Result<(), StoreError> {
            if call == Call::Reserve {
                self.reserves.fetch_add(1, Ordering::SeqCst);
                if self.refuse_reserves.load(Ordering::SeqCst) {
                    return Err(StoreError::Unavailable("cut".into()));
                }
            }
            if call == Call::Read && self.refuse_reads.load(Ordering::SeqCst) {
                return Err(StoreError::Unavailable("cut".into()));
            }
            Ok(())
        }

        fn moved(&self, expected: i64, new: i64) {
            self.moves.lock().unwrap().push((expected, new));
        }

        fn backend(&self) -> Option<&'static str> {
            Some("watched")
        }
    }

    #[tokio::test]
    async fn every_call_reaches_the_inner_store_after_the_hook() {
        let inner = Arc::new(MemoryStore::new());
        let name = SeqName::parse("a").unwrap();
        inner.insert("a", 0, 10);
        let store = Forwarding::new(inner.clone(), Watch::default());

        let r = store.reserve(&name, 10).await.unwrap();
        assert_eq!(r.max_id, 10);
        store.reserve_above(&name, 10, 0).await.unwrap();
        assert_eq!(store.hook().reserves.load(Ordering::SeqCst), 2);
        assert_eq!(store.reserve_exact(&name, 3).await.unwrap().max_id, 23);
        // A group is one call; the memory store groups nothing by default.
        inner.set_group_limit(8);
        assert_eq!(store.group_limit(), 8);
        let asks = [(name.clone(), 1), (SeqName::parse("b").unwrap(), 1)];
        let answers = store.reserve_group(&asks).await;
        assert_eq!(answers[0].as_ref().unwrap().max_id, 33);
        assert!(matches!(answers[1], Err(StoreError::NotFound)));
        assert_eq!(store.hook().reserves.load(Ordering::SeqCst), 3);
        assert_eq!(inner.groups(), [2]);
        store.hook().refuse_reserves.store(true, Ordering::SeqCst);
        let refused = store.reserve_group(&asks).await;
        assert!(refused
            .iter()
            .all(|a| matches!(a, Err(StoreError::Unavailable(_)))));
        assert_eq!(
            inner.max_id("a"),
            Some(33),
            "a refused group reaches nothing"
        );
        store.hook().refuse_reserves.store(false, Ordering::SeqCst);
        assert!(store.compare_and_set_max_id(&name, 33, 23).await.unwrap());

        assert!(store.compare_and_set_max_id(&name, 23, 30).await.unwrap());
        assert!(!store.compare_and_set_max_id(&name, 23, 40).await.unwrap());
        assert!(store.give_back(&name, 30, 25).await.unwrap());
        assert_eq!(
            *store.hook().moves.lock().unwrap(),
            vec![(33, 23), (23, 30), (30, 25)]
        );
        assert_eq!(inner.max_id("a"), Some(25));

        assert!(store.get(&name).await.unwrap().is_some());
        store.hook().refuse_reads.store(true, Ordering::SeqCst);
        assert!(matches!(
            store.get(&name).await,
            Err(StoreError::Unavailable(_))
        ));
        assert!(store.list().await.is_err());
        store.ping().await.unwrap();
        assert_eq!(store.backend(), "watched");
    }
}
