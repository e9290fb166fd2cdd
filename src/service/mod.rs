//! The protocol-neutral service every door calls (docs/design.md, "One
//! service under every door").
//!
//! - [`issue`]: next and batch for any sequence, its kind (plain, global,
//!   serial) decided here, not by the door.
//! - [`lease`]: ranges held by clients, and the give-back of their rest.
//! - [`admin`]: create, patch, read, list, bump and purge, with every
//!   validation and the one-database rules.
//! - [`snowflake`]: snowflake IDs, drawn and decoded.
//! - [`tokens`]: client tokens made, listed and revoked.
//! - [`access`]: who may do what, for every call above.
//! - [`error`]: [`ServiceError`], the one list of failures; each door maps
//!   it to its protocol in one table.
//!
//! The doors (`http`, `cli`) translate their protocol into these calls and
//! the answers back; none of them reaches the store itself. No SQL and no
//! HTTP here: the service talks to the allocator, the serials and the
//! [`Store`] traits.

use std::sync::Arc;
use std::time::Duration;

use crate::allocator::{Allocator, AllocatorConfig, BufferSnapshot};
use crate::domain::SeqName;
use crate::serial::{PeriodStatus, Serials, SystemWallClock, WallClock};
use crate::store::{stripes::StripeStatus, Store, StoreError};

pub mod access;
pub mod admin;
pub mod error;
pub mod health;
pub mod issue;
pub mod lease;
pub mod snowflake;
pub mod tokens;

pub use access::{Access, AdminAuth, Caller, ClientAuth, Presented, Want};
pub use admin::{AdminCalls, CreateRequest, ListPage, PatchRequest, PurgeReport, SerialFields};
pub use error::ServiceError;
pub use issue::{Many, One};
pub use lease::{Lease, LeaseRest};
pub use snowflake::DecodedId;

/// Issues and administers sequences over one store. Cheap to clone (shared).
#[derive(Clone)]
pub struct Service {
    store: Arc<dyn Store>,
    allocator: Allocator,
    serials: Serials,
    access: Access,
    max_lease: i64,
    issued: Arc<lease::Issued>,
    snowflake: Option<crate::snowflake::Snowflake>,
    health: Arc<health::DatabaseHealth>,
}

impl Service {
    /// A service over `store`, on the real clocks.
    pub fn new(store: Arc<dyn Store>, config: AllocatorConfig) -> Self {
        let allocator = Allocator::new(store.clone(), config);
        Self::with_parts(store, allocator, Arc::new(SystemWallClock))
    }

    /// A service over `store` with its allocator (built over the same
    /// store, with any clock and step policy) and the serials' wall clock.
    pub fn with_parts(
        store: Arc<dyn Store>,
        allocator: Allocator,
        wall: Arc<dyn WallClock>,
    ) -> Self {
        let serials = Serials::new(allocator.clone(), store.clone(), wall);
        Service {
            store,
            allocator,
            serials,
            access: Access::new(ClientAuth::Off, AdminAuth::OpenOnLoopback),
            max_lease: lease::DEFAULT_MAX_LEASE,
            issued: lease::issued(),
            snowflake: None,
            health: Arc::default(),
        }
    }

    /// This service with the access rules `access` (by default:
    /// `--client-auth off`, admin calls open on loopback).
    pub fn with_access(mut self, access: Access) -> Self {
        self.access = access;
        self
    }

    /// Who may do what.
    pub fn access(&self) -> &Access {
        &self.access
    }

    /// Reads the token set now and starts its refresh (nothing under
    /// `--client-auth off`). A failed first read is logged; the refresh
    /// reads again.
    pub async fn start_token_refresh(&self) -> Option<tokio::task::JoinHandle<()>> {
        if self.access.client_auth() == ClientAuth::Off {
            return None;
        }
        if let Err(e) = self.access.refresh(&*self.store).await {
            tracing::warn!(error = %e, "reading the client tokens failed; every token is refused until a read succeeds");
        }
        let store: Arc<dyn crate::store::Tokens> = self.store.clone();
        self.access.spawn_refresh(store)
    }

    /// The allocator (buffers, their state and statistics).
    pub fn allocator(&self) -> &Allocator {
        &self.allocator
    }

    /// The serial numbers (periods, their state, the settings refresh).
    pub fn serials(&self) -> &Serials {
        &self.serials
    }

    /// The largest step a sequence may be given.
    pub fn max_step(&self) -> i64 {
        self.allocator.config().max_step
    }

    /// How many databases the store spans: 1 for a single database, the
    /// number of stripes otherwise.
    pub fn stripes(&self) -> usize {
        self.store.stripe_status().len().max(1)
    }

    /// The stripe whose blocks hold `id`; `None` on a single database.
    pub fn stripe_of(&self, id: i64) -> Option<u32> {
        self.store.stripe_of(id)
    }

    /// The state of each stripe, in order.
    pub fn stripe_status(&self) -> Vec<StripeStatus> {
        self.store.stripe_status()
    }

    /// The failover fence of the database (`None`: off, SQLite, or several
    /// stripes, whose [`StripeStatus`] each carries its own).
    pub fn fence_status(&self) -> Option<crate::store::FenceStatus> {
        self.store.fence_status()
    }

    /// The backend's name (`postgres`, `mysql`, `sqlite`, ...).
    pub fn backend(&self) -> &'static str {
        self.store.backend()
    }

    /// Whether the database answers and its schema is what this binary needs.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.store.ping().await
    }

    /// The last check of the database ([`health`]): what the health routes
    /// answer from, without waiting on the store. `None` before the first.
    pub fn database_health(&self) -> Option<health::DatabaseState> {
        self.health.last()
    }

    /// Marks the instance as shutting down: `/readyz` answers 503
    /// `draining` from then on.
    pub fn begin_draining(&self) {
        self.health.begin_draining();
    }

    /// Whether shutdown began ([`Service::begin_draining`]).
    pub fn draining(&self) -> bool {
        self.health.draining()
    }

    /// How many live sequences hold IDs in memory: what this instance can
    /// still serve while its database does not answer.
    pub fn sequences_holding_ids(&self) -> usize {
        self.allocator.sequences_holding_ids()
    }

    /// Checks the database once now (bounded), then every `every` in the
    /// background; the task ends when the handle is aborted or the service
    /// and its store are dropped.
    pub async fn start_database_checks(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        self.health.check(&*self.store).await;
        health::spawn(&self.health, &self.store, every)
    }

    /// This instance's buffer of `name` (of a serial sequence: its current
    /// period's counter's), if it served it.
    pub fn buffer(&self, name: &SeqName) -> Option<BufferSnapshot> {
        // A serial sequence's settings row issues nothing: its current
        // period's counter does (docs/design.md, "Serial numbers").
        match self.serials.counter(name) {
            Some(counter) => self.allocator.snapshot(&counter),
            None => self.allocator.snapshot(name),
        }
    }

    /// A serial sequence's current period in this instance, if it served it.
    pub fn period(&self, name: &SeqName) -> Option<PeriodStatus> {
        self.serials.status(name)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::stripes::{StripeLayout, StripedStore};

    /// The one-database rules compare with this count: a single database is
    /// one, not the empty list of stripe states it has.
    #[tokio::test]
    async fn a_single_database_counts_as_one_and_a_stripe_set_as_its_stripes() {
        let one = Service::new(Arc::new(MemoryStore::new()), AllocatorConfig::default());
        assert_eq!(one.stripes(), 1);
        let set: Vec<(Arc<dyn Store>, StripeLayout)> = (0..3)
            .map(|i| {
                let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
                (store, StripeLayout::new(i, 3, 1000).unwrap())
            })
            .collect();
        let striped = StripedStore::new(set, Duration::from_millis(200)).unwrap();
        let three = Service::new(Arc::new(striped), AllocatorConfig::default());
        assert_eq!(three.stripes(), 3);
        // Which stripe's blocks hold an ID (what the API shows of a
        // buffer's segments): blocks of 1000, in turn.
        assert_eq!(one.stripe_of(5), None);
        for (id, stripe) in [
            (1, 0),
            (999, 0),
            (1000, 1),
            (1999, 1),
            (2000, 2),
            (3000, 0),
            (4321, 1),
        ] {
            assert_eq!(three.stripe_of(id), Some(stripe), "{id}");
        }
    }

    /// The service decides who may administer, whatever door asks: the
    /// admin token opens the calls; without one set, only a caller the
    /// door vouches is local ([`Presented::LOCAL`], a loopback `Host`); a
    /// non-loopback listener without a token refuses everyone.
    #[tokio::test]
    async fn admin_calls_are_opened_by_the_service_alone() {
        let service = || Service::new(Arc::new(MemoryStore::new()), AllocatorConfig::default());
        let with = |admin: AdminAuth| service().with_access(Access::new(ClientAuth::On, admin));
        let token = |t: &'static [u8]| Presented {
            token: Some(t),
            local: false,
        };
        let secret = crate::domain::Secret::new("s3cret-admin-token");
        let by_token = with(AdminAuth::Token(secret));
        assert!(by_token.admin(token(b"s3cret-admin-token")).is_ok());
        for refused in [Presented::LOCAL, Presented::default(), token(b"wrong")] {
            assert!(matches!(
                by_token.admin(refused),
                Err(ServiceError::Unauthorized(_))
            ));
        }
        let open = with(AdminAuth::OpenOnLoopback);
        assert!(open.admin(Presented::LOCAL).is_ok());
        assert!(matches!(
            open.admin(Presented::default()),
            Err(ServiceError::Unauthorized(_))
        ));
        let closed = with(AdminAuth::Refused);
        assert!(matches!(
            closed.admin(Presented::LOCAL),
            Err(ServiceError::Unauthorized(_))
        ));
        // What an admin call does once opened is the service's: a create
        // through the handle lands in the store.
        let calls = open.admin(Presented::LOCAL).unwrap();
        let row = calls
            .create(CreateRequest {
                name: "order".into(),
                ..CreateRequest::default()
            })
            .await
            .unwrap();
        assert_eq!(row.name.as_str(), "order");
    }

    /// Snowflake calls go through the service: refused `SnowflakeDisabled`
    /// when the instance serves none, before any token is looked at.
    #[tokio::test]
    async fn snowflake_calls_without_a_generator_are_refused_as_disabled() {
        let service = Service::new(Arc::new(MemoryStore::new()), AllocatorConfig::default())
            .with_access(Access::new(ClientAuth::On, AdminAuth::Refused));
        assert!(matches!(
            service.snowflake_next(Presented::default()).await,
            Err(ServiceError::SnowflakeDisabled)
        ));
        assert!(matches!(
            service.snowflake_decode(1),
            Err(ServiceError::SnowflakeDisabled)
        ));
    }
}
