//! seqd: unique 64-bit IDs per named sequence, served over HTTP from segments
//! reserved in PostgreSQL, MySQL/MariaDB or SQLite.
//!
//! # Layout
//!
//! The layers, each importing only from those below it. The file-by-file
//! tree is in `docs/code-tour.md`, the one description of the layout.
//!
//! - Doors: [`http`] (the API; `http/error.rs` maps errors to status codes
//!   in one table), [`resp`] (Redis clients; `resp/command.rs` maps errors to
//!   RESP codes in one table), [`cli`], [`stripes_cli`], [`leaf`] and [`tinyid_import`] (the operators'
//!   commands), wired by [`startup`] and [`config`]. A door translates its
//!   protocol into calls of the service and its errors back; nothing else.
//!   [`tls`]: the certificate store both listeners share.
//! - [`service`]: issuing and administering any sequence, its kind decided
//!   once, every validation and the one-database rules;
//!   [`service::ServiceError`], the one list of failures.
//! - The core: [`allocator`] (segments, the double buffer, prefetch, the
//!   step policy; time from an injected clock; the crate `seqd-core` in
//!   `crates/seqd-core`, with the [`Segments`](store::Segments) trait and
//!   the names it takes, usable without sqlx or axum), [`serial`] (serial numbers
//!   over the allocator, the settings refresh) and [`snowflake`]. No SQL,
//!   no HTTP.
//! - [`store`]: the storage traits, one implementation per backend,
//!   stripes and the migrator; `sqlx::Error` never leaves it.
//! - Below every feature: [`domain`] (validated values), [`log_throttle`],
//!   [`telemetry`].

#![deny(missing_docs)]

pub use seqd_core::allocator;

pub mod cli;
pub mod config;
pub mod http;
pub mod leaf;
pub mod log_throttle;
pub mod open;
pub mod resp;
pub mod service;
pub mod startup;
pub mod stripes_cli;
pub mod tinyid_import;
pub mod tls;
pub mod tokens_cli;

pub mod domain;
pub mod serial;
pub mod snowflake;
pub mod store;
pub mod telemetry;
