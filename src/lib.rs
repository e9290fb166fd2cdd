//! seqd: unique 64-bit IDs per named sequence, served over HTTP from segments
//! reserved in PostgreSQL, MySQL/MariaDB or SQLite.
//!
//! # Layout
//!
//! The layers, from the bottom; a module imports only from its own layer
//! and those below (`tests/in_process/layers.rs` holds the same table and fails on an
//! arrow up). The file-by-file tree is in `docs/code-tour.md`, the one
//! description of the layout.
//!
//! 0. [`domain`] (validated values, the one wall clock), [`log_throttle`],
//!    [`telemetry`].
//! 1. [`store`]: the storage traits, one implementation per backend,
//!    stripes, the failover fence and the migrator; `sqlx::Error` never
//!    leaves it.
//! 2. [`allocator`]: segments, the double buffer, prefetch, the step
//!    policy; time from an injected clock. It is the crate `seqd-core` in
//!    `crates/seqd-core`, with the [`Segments`](store::Segments) trait and
//!    the names it takes, usable without sqlx or axum. No SQL, no HTTP.
//! 3. [`serial`] (serial numbers over the allocator, the settings refresh)
//!    and [`snowflake`] (time-ordered IDs from a leased worker ID).
//! 4. [`service`]: issuing and administering any sequence, its kind
//!    decided once, every validation, the one-database rules and who may
//!    do what; the snowflake generator is reached through it;
//!    [`service::ServiceError`], the one list of failures.
//! 5. The doors that serve, and the [`edge`] they stand on (the accept
//!    loop, the connection cap, the TLS handshake, the deadlines, the drain
//!    at shutdown): [`http`] (the API; `http/error.rs` maps errors
//!    to status codes in one table), [`resp`] (Redis clients;
//!    `resp/command.rs` maps errors to RESP codes in one table), and
//!    [`tls`], the certificate store both listeners share. A door
//!    translates its protocol into calls of the service and its errors
//!    back; nothing else.
//! 6. [`config`] (flags and settings) and [`open`] (opening the stores).
//! 7. The operators' commands: [`cli`], [`stripes_cli`], [`tokens_cli`],
//!    [`leaf`] and [`tinyid_import`]; their writes go through the service
//!    too.
//! 8. [`startup`]: wires a serving instance together.

#![deny(missing_docs)]

pub use seqd_core::allocator;

pub mod cli;
pub mod config;
pub mod edge;
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
