//! A store that passes every call on to a real one and records what the
//! tests watch: how many reservations went through it, and the `max_id`
//! moves of its compare-and-sets (the write by which a stripe reserves).

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use seqd::domain::{NamePrefix, NewSequence, SeqName};
use seqd::store::{
    BumpMode, Bumped, Reservation, SequencePage, SequencePatch, SequenceRow, Store, StoreError,
    StripeRecord,
};
use seqd::store::{Catalog, Schema, Segments, StripeRecords, TokenRow, Tokens};

/// `inner`, recording as it goes.
pub struct Recording {
    inner: Arc<dyn Store>,
    reserves: AtomicU64,
    moves: Mutex<Vec<(i64, i64)>>,
}

impl Recording {
    /// A recorder in front of `inner`.
    pub fn new(inner: Arc<dyn Store>) -> Arc<Recording> {
        Arc::new(Recording {
            inner,
            reserves: AtomicU64::new(0),
            moves: Mutex::new(Vec::new()),
        })
    }

    /// Calls of [`Store::reserve`] so far.
    pub fn reserves(&self) -> u64 {
        self.reserves.load(Ordering::SeqCst)
    }

    /// Every successful compare-and-set so far: `(expected, new)`.
    pub fn moves(&self) -> Vec<(i64, i64)> {
        self.moves.lock().unwrap().clone()
    }
}

#[async_trait]
impl Segments for Recording {
    async fn reserve(&self, name: &SeqName, min_size: i64) -> Result<Reservation, StoreError> {
        self.reserves.fetch_add(1, Ordering::SeqCst);
        self.inner.reserve(name, min_size).await
    }

    async fn compare_and_set_max_id(
        &self,
        name: &SeqName,
        expected: i64,
        new: i64,
    ) -> Result<bool, StoreError> {
        let set = self
            .inner
            .compare_and_set_max_id(name, expected, new)
            .await?;
        if set {
            self.moves.lock().unwrap().push((expected, new));
        }
        Ok(set)
    }
}

#[async_trait]
impl Catalog for Recording {
    async fn create(&self, seq: &NewSequence) -> Result<SequenceRow, StoreError> {
        self.inner.create(seq).await
    }

    async fn get(&self, name: &SeqName) -> Result<Option<SequenceRow>, StoreError> {
        self.inner.get(name).await
    }

    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        self.inner.list().await
    }

    async fn list_page(
        &self,
        prefix: Option<&NamePrefix>,
        after: Option<&SeqName>,
        limit: u32,
    ) -> Result<SequencePage, StoreError> {
        self.inner.list_page(prefix, after, limit).await
    }

    async fn update(
        &self,
        name: &SeqName,
        patch: &SequencePatch,
    ) -> Result<SequenceRow, StoreError> {
        self.inner.update(name, patch).await
    }

    async fn bump(
        &self,
        names: Option<&[SeqName]>,
        by: i64,
        mode: BumpMode,
    ) -> Result<Vec<Bumped>, StoreError> {
        self.inner.bump(names, by, mode).await
    }
}

#[async_trait]
impl Schema for Recording {
    async fn migrate(&self) -> Result<(), StoreError> {
        self.inner.migrate().await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }

    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
}

#[async_trait]
impl StripeRecords for Recording {
    async fn stripe_record(&self) -> Result<Option<StripeRecord>, StoreError> {
        self.inner.stripe_record().await
    }

    async fn put_stripe_record(
        &self,
        record: &StripeRecord,
        replace: bool,
    ) -> Result<StripeRecord, StoreError> {
        self.inner.put_stripe_record(record, replace).await
    }
}

#[async_trait]
impl Tokens for Recording {
    async fn token_rows(&self) -> Result<Vec<TokenRow>, StoreError> {
        self.inner.token_rows().await
    }

    async fn insert_token(&self, row: &TokenRow) -> Result<(), StoreError> {
        self.inner.insert_token(row).await
    }

    async fn revoke_token(&self, label: &str, at: i64) -> Result<bool, StoreError> {
        self.inner.revoke_token(label, at).await
    }
}
