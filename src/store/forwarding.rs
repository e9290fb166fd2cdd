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

/// Writes `impl $trait for Forwarding<H>`: each method listed as
/// `Call => fn name(args) -> T;` asks the hook about that [`Call`], then
/// calls the same method of the inner store with the same arguments; with
/// `moved(a, b)` after it, the hook also hears of a compare-and-set that
/// moved `max_id` from `a` to `b`. What follows the list is written into
/// the impl as it is (the methods that ask no hook).
macro_rules! forwarded {
    (
        impl $trait:ident {
            $($call:ident => fn $name:ident($($arg:ident: $ty:ty),*) -> $t:ty
                $(, moved($from:ident, $to:ident))?;)*
        }
        $($rest:tt)*
    ) => {
        #[async_trait]
        impl<H: Hook> $trait for Forwarding<H> {
            $(
                async fn $name(&self, $($arg: $ty),*) -> Result<$t, StoreError> {
                    self.hook.before(Call::$call)?;
                    self.inner.$name($($arg),*).await
                        $(.inspect(|&set| if set { self.hook.moved($from, $to) }))?
                }
            )*
            $($rest)*
        }
    };
}

forwarded! {
    impl Segments {
        Reserve => fn reserve(name: &SeqName, min_size: i64) -> Reservation;
        Reserve => fn reserve_above(name: &SeqName, min_size: i64, floor: i64) -> Reservation;
        CompareAndSet => fn compare_and_set_max_id(name: &SeqName, expected: i64, new: i64) -> bool,
            moved(expected, new);
        ReserveExact => fn reserve_exact(name: &SeqName, n: i64) -> Reservation;
        ReserveExact => fn reserve_within(name: &SeqName, n: i64, cap: i64) -> Reservation;
        ReserveExact => fn reserve_lease(name: &SeqName, n: i64, cap: i64) -> Reservation;
        CompareAndSet => fn give_back(name: &SeqName, top: i64, keep: i64) -> bool, moved(top, keep);
    }

    fn group_limit(&self) -> usize {
        self.inner.group_limit()
    }

    /// One [`Call::Reserve`] for the whole group: refused, it is every
    /// name's answer.
    async fn reserve_group(&self, asks: &[(SeqName, i64)]) -> Vec<Reserved> {
        match self.hook.before(Call::Reserve) {
            Ok(()) => self.inner.reserve_group(asks).await,
            Err(e) => vec![Err(e); asks.len()],
        }
    }
}

forwarded! {
    impl Catalog {
        Write => fn create(seq: &NewSequence) -> SequenceRow;
        Write => fn create_period(parent: &SeqName, key: &str) -> bool;
        Read => fn list_periods(parent: &SeqName) -> Vec<PeriodRow>;
        Write => fn delete_periods(parent: &SeqName, keys: &[String]) -> u64;
        Read => fn get(name: &SeqName) -> Option<SequenceRow>;
        Read => fn settings_of(names: &[SeqName]) -> Vec<SequenceRow>;
        Read => fn list() -> Vec<SequenceRow>;
        Read => fn list_page(prefix: Option<&NamePrefix>, after: Option<&SeqName>, limit: u32)
            -> SequencePage;
        Write => fn update(name: &SeqName, patch: &SequencePatch) -> SequenceRow;
        Write => fn bump(names: Option<&[SeqName]>, by: i64, mode: BumpMode) -> Vec<Bumped>;
    }
}

forwarded! {
    impl Schema {
        Schema => fn migrate() -> ();
        Schema => fn check_schema() -> ();
        Schema => fn prepare_schema(mode: MigrateMode) -> ();
        Ping => fn ping() -> ();
    }

    fn fence_status(&self) -> Option<FenceStatus> {
        self.inner.fence_status()
    }

    fn backend(&self) -> &'static str {
        self.hook.backend().unwrap_or_else(|| self.inner.backend())
    }
}

forwarded! {
    impl StripeRecords {
        StripeRecord => fn stripe_record() -> Option<StripeRecord>;
        StripeRecord => fn put_stripe_record(record: &StripeRecord, replace: bool) -> StripeRecord;
        StripeRecord => fn drop_stripe_record(database_id: &str) -> bool;
        StripeRecord => fn join_stripe_set(set_id: &str) -> Option<StripeRecord>;
    }

    fn stripe_status(&self) -> Vec<StripeStatus> {
        self.inner.stripe_status()
    }

    fn stripe_of(&self, id: i64) -> Option<u32> {
        self.inner.stripe_of(id)
    }
}

forwarded! {
    impl Tokens {
        Tokens => fn token_rows() -> Vec<TokenRow>;
        Tokens => fn insert_token(row: &TokenRow) -> ();
        Tokens => fn revoke_token(label: &str, at: i64) -> bool;
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
