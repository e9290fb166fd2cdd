//! seqd: unique 64-bit IDs per named sequence, served over HTTP from segments
//! reserved in PostgreSQL, MySQL/MariaDB or SQLite.
//!
//! # Layout
//!
//! - [`domain`]: validated values (`SeqName`, `Count`, `NewSequence`).
//! - [`allocator`]: the core. Per-sequence double buffer of segments, lock-free
//!   hot path, background prefetch, async waiting, step policy. No SQL, no HTTP;
//!   time comes from an injected [`allocator::Clock`].
//! - [`store`]: the [`store::Store`] trait and one implementation per backend,
//!   plus an in-memory store with fault injection for tests and benchmarks.
//! - [`http`]: `router(state) -> App` (the router inside one request service),
//!   handlers, and `error.rs`, the only place that knows status codes.
//! - [`config`]: flags and environment variables (`clap`).
//! - [`telemetry`]: the tracing subscriber.
//! - [`startup`]: wires store + allocator + router; `run(listener, shutdown)`.
//! - [`cli`]: the operators' subcommands (`migrate`, `sequences ...`).
//! - [`leaf`]: `import-leaf`, the migration from Leaf's `leaf_alloc` table.
//! - [`snowflake`]: time-ordered snowflake IDs: layout, generator (injected
//!   wall clock, rollback handling) and the worker-ID lease. No SQL, no HTTP
//!   but through [`store::workers::WorkerLeases`].

#[cfg(not(seqd_loom))]
pub mod allocator;
/// Under `--cfg seqd_loom` only the lock-free core is built, on loom's
/// primitives, for the model-checking tests (`tests/loom_double.rs`).
#[cfg(seqd_loom)]
#[path = "allocator/model.rs"]
pub mod allocator;
#[cfg(not(seqd_loom))]
pub mod cli;
pub mod config;
pub mod domain;
#[cfg(not(seqd_loom))]
pub mod http;
#[cfg(not(seqd_loom))]
pub mod leaf;
pub mod snowflake;
#[cfg(not(seqd_loom))]
pub mod startup;
pub mod store;
pub mod telemetry;
