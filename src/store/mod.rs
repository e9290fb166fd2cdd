//! Storage: the traits the allocator, the snowflake leases and the operators'
//! tools need ([`Store`], [`WorkerLeases`]), and one folder per backend.
//!
//! Every backend keeps the `sequences` table (docs/design.md, "Tables and
//! migrations"; "Reserving a segment" for the statements). Reserving a segment
//! is a single atomic step in the database (`UPDATE ... RETURNING` on
//! PostgreSQL and SQLite, `UPDATE` + `SELECT` inside one transaction holding
//! the row lock on MySQL/MariaDB), so two instances can never receive
//! overlapping ranges. `sqlx::Error` never leaves this module: every backend
//! narrows it to [`StoreError`].
//!
//! `postgres/`, `mysql/` and `sqlite/` each hold that backend's pool
//! (`mod.rs`), its sequence store (`sequences.rs`) and its worker leases
//! (`workers.rs`); [`connect`] opens one pool and returns both over it as a
//! [`Database`]. The traits never name their implementations. `stand_in.rs`
//! takes the place of a database there is none to use (a stripe that did
//! not answer at start). With the feature `test-util` (the package's own
//! tests, benchmarks and examples): `memory.rs`, an in-memory [`Store`],
//! and `forwarding.rs`, a hook in front of any store.

pub use database::{connect, Database};
pub use migrator::FenceOptions;
pub use migrator::{Dialect, MigrateMode};
pub use pool::{StoreOptions, DEFAULT_MAX_CONNECTIONS, LEASE_CONNECTIONS};
pub use sequences::fence::{FenceCounts, FenceStatus};
pub use sequences::SqlStore;
pub use stripes::record::StripeRecord;
pub use workers::WorkerLeases;

pub(crate) use bump::{bump_binds, names_in, run_bump, BUMP_STATEMENT_BOUND};
pub use rows::{
    BumpMode, Bumped, PeriodRow, RowProblem, SequencePage, SequencePatch, SequenceRow, TokenRow,
    MAX_PAGE,
};
pub use seqd_core::store::{
    reserve_each, BumpRefusal, Reservation, Reserved, Segments, StoreError,
};
pub use sql::{binary_page_sql, named_rows_sql, COLUMNS, NOT_COUNTER, SETTINGS_CHUNK};
pub(crate) use sql::{insert_failed, page_sql_in, reservation, schema_ready, unavailable};
pub use traits::{Catalog, Schema, Store, StripeRecords, Tokens};
pub use url::redact_url;

/// The storage traits, for code that calls their methods on a concrete
/// store: `use seqd::store::prelude::*;`.
pub mod prelude {
    pub use super::{Catalog, Schema, Segments, Store, StripeRecords, Tokens};
}

pub(crate) mod bump;
pub(crate) mod database;
pub(crate) mod dialect;
pub(crate) mod engine;
#[cfg(any(test, feature = "test-util"))]
pub mod forwarding;
#[cfg(any(test, feature = "test-util"))]
pub mod memory;
pub mod migrator;
pub mod mysql;
pub mod pool;
pub mod postgres;
pub(crate) mod retry;
mod rows;
pub(crate) mod sequences;
pub(crate) mod sql;
pub mod sqlite;
mod stand_in;
pub mod stripes;
pub(crate) mod tls;
pub(crate) mod tokens;
mod traits;
mod url;
pub mod workers;
