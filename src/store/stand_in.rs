//! [`StandIn`]: the store that takes a database's place where there is
//! none to use: a stripe that did not answer at start (every call fails as
//! an outage, until the stripe connects) or, in a dry run of the stripes'
//! set-up, a database without seqd's tables (empty: nothing to read).

use async_trait::async_trait;

use super::stripes::StripeRecord;
use super::{
    BumpMode, Bumped, Catalog, MigrateMode, PeriodRow, Reservation, Reserved, Schema, Segments,
    SequencePage, SequencePatch, SequenceRow, StoreError, StripeRecords, TokenRow, Tokens,
};
use crate::domain::{NamePrefix, NewSequence, SeqName};

/// What [`Catalog::list_page`] answers.
type Page = Result<SequencePage, StoreError>;

/// What [`Catalog::bump`] answers.
type Bumps = Result<Vec<Bumped>, StoreError>;

/// A store with no database behind it.
#[derive(Debug)]
pub(crate) struct StandIn {
    /// What [`Schema::backend`] reports.
    backend: &'static str,
    /// Why every call fails; `None`: reads find nothing, writes fail.
    down: Option<String>,
}

impl StandIn {
    /// A store whose every call fails with [`StoreError::Unavailable`]`(why)`,
    /// reporting `backend`.
    pub(crate) fn down(backend: &'static str, why: String) -> Self {
        StandIn {
            backend,
            down: Some(why),
        }
    }

    /// A store without rows in the place of a `backend` database: its reads
    /// answer nothing, its writes fail.
    pub(crate) fn empty(backend: &'static str) -> Self {
        StandIn {
            backend,
            down: None,
        }
    }

    /// The outage, if the store is down.
    fn check(&self) -> Result<(), StoreError> {
        match &self.down {
            Some(why) => Err(StoreError::Unavailable(why.clone())),
            None => Ok(()),
        }
    }

    /// What a write answers: the outage, or that there is no database.
    fn refuse<T>(&self) -> Result<T, StoreError> {
        self.check()?;
        Err(StoreError::Unavailable(
            "no database behind this store: nothing is written".into(),
        ))
    }
}

#[async_trait]
impl Segments for StandIn {
    async fn reserve(&self, _: &SeqName, _: i64) -> Result<Reservation, StoreError> {
        self.refuse()
    }

    async fn compare_and_set_max_id(
        &self,
        _: &SeqName,
        _: i64,
        _: i64,
    ) -> Result<bool, StoreError> {
        self.refuse()
    }

    async fn reserve_within(&self, _: &SeqName, _: i64, _: i64) -> Reserved {
        self.refuse()
    }
}

#[async_trait]
impl Catalog for StandIn {
    async fn create(&self, _: &NewSequence) -> Result<SequenceRow, StoreError> {
        self.refuse()
    }

    async fn create_period(&self, _: &SeqName, _: &str) -> Result<bool, StoreError> {
        self.refuse()
    }

    async fn list_periods(&self, _: &SeqName) -> Result<Vec<PeriodRow>, StoreError> {
        self.check().map(|()| Vec::new())
    }

    async fn delete_periods(&self, _: &SeqName, _: &[String]) -> Result<u64, StoreError> {
        self.refuse()
    }

    async fn get(&self, _: &SeqName) -> Result<Option<SequenceRow>, StoreError> {
        self.check().map(|()| None)
    }

    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        self.check().map(|()| Vec::new())
    }

    async fn list_page(&self, _: Option<&NamePrefix>, _: Option<&SeqName>, _: u32) -> Page {
        self.check().map(|()| SequencePage {
            rows: Vec::new(),
            more: false,
        })
    }

    async fn update(&self, _: &SeqName, _: &SequencePatch) -> Result<SequenceRow, StoreError> {
        self.refuse()
    }

    async fn bump(&self, _: Option<&[SeqName]>, _: i64, _: BumpMode) -> Bumps {
        self.refuse()
    }
}

#[async_trait]
impl Schema for StandIn {
    async fn migrate(&self) -> Result<(), StoreError> {
        self.check()
    }

    async fn check_schema(&self) -> Result<(), StoreError> {
        self.check()
    }

    async fn prepare_schema(&self, _: MigrateMode) -> Result<(), StoreError> {
        self.check()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.check()
    }

    fn backend(&self) -> &'static str {
        self.backend
    }
}

#[async_trait]
impl StripeRecords for StandIn {
    async fn stripe_record(&self) -> Result<Option<StripeRecord>, StoreError> {
        self.check().map(|()| None)
    }

    async fn put_stripe_record(
        &self,
        _: &StripeRecord,
        _: bool,
    ) -> Result<StripeRecord, StoreError> {
        self.refuse()
    }

    async fn drop_stripe_record(&self, _: &str) -> Result<bool, StoreError> {
        self.refuse()
    }

    async fn join_stripe_set(&self, _: &str) -> Result<Option<StripeRecord>, StoreError> {
        self.refuse()
    }
}

#[async_trait]
impl Tokens for StandIn {
    async fn token_rows(&self) -> Result<Vec<TokenRow>, StoreError> {
        self.check().map(|()| Vec::new())
    }

    async fn insert_token(&self, _: &TokenRow) -> Result<(), StoreError> {
        self.refuse()
    }

    async fn revoke_token(&self, _: &str, _: i64) -> Result<bool, StoreError> {
        self.refuse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_store_down_fails_every_call_with_its_reason() {
        let store = StandIn::down("postgres", "not connected".into());
        let name = SeqName::parse("a").unwrap();
        let why = |e: StoreError| matches!(e, StoreError::Unavailable(w) if w == "not connected");
        assert!(why(store.reserve(&name, 1).await.unwrap_err()));
        assert!(why(store.reserve_exact(&name, 1).await.unwrap_err()));
        assert!(why(store.list().await.unwrap_err()));
        assert!(why(store
            .prepare_schema(MigrateMode::Off)
            .await
            .unwrap_err()));
        assert!(why(store.token_rows().await.unwrap_err()));
        assert!(why(store.list_periods(&name).await.unwrap_err()));
        let asks = [(name.clone(), 1)];
        assert!(store.reserve_group(&asks).await[0].is_err());
        assert_eq!(store.backend(), "postgres");
        assert_eq!(store.group_limit(), 1);
    }

    #[tokio::test]
    async fn an_empty_store_reads_nothing() {
        let store = StandIn::empty("sqlite");
        let name = SeqName::parse("a").unwrap();
        assert!(store.get(&name).await.unwrap().is_none());
        assert!(store.list().await.unwrap().is_empty());
        let page = store.list_page(None, None, 10).await.unwrap();
        assert!(page.rows.is_empty() && !page.more);
        assert!(store.stripe_record().await.unwrap().is_none());
    }
}
