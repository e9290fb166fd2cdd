//! seqd: unique 64-bit IDs per named sequence, served over HTTP from segments
//! reserved in PostgreSQL, MySQL/MariaDB or SQLite.
//!
//! # Layout
//!
//! - [`domain`]: validated values (`SeqName`, `Count`, `NewSequence`).
//! - [`allocator`]: the core. Per-sequence double buffer of segments, lock-free
//!   hot path, background prefetch, async waiting, step policy. No SQL, no HTTP;
//!   time comes from an injected [`allocator::Clock`].
//! - [`store`]: the [`store::Store`] and [`store::WorkerLeases`] traits, and
//!   [`store::connect`], which opens one pool and returns a [`store::Database`]
//!   with both over it; one folder per backend ([`store::postgres`],
//!   [`store::mysql`], [`store::sqlite`]: the pool in `mod.rs`, the sequence
//!   store in `sequences.rs`, the worker leases in `workers.rs`), plus an
//!   in-memory store with fault injection for tests and benchmarks;
//!   [`store::migrator`]: seqd's own migrator (history in `seqd_migrations`,
//!   the carry-over from `_sqlx_migrations`, `seqd schema`'s DDL);
//!   `store/retry.rs`: every statement and transaction run again when the
//!   database aborts it for a conflict (SQLSTATE 40001, 40P01).
//! - [`http`]: `router(state) -> App` (the router inside one request service),
//!   handlers, and `error.rs`, the only place that knows status codes.
//! - [`config`]: flags and environment variables (`clap`).
//! - [`telemetry`]: the tracing subscriber.
//! - [`startup`]: wires database + allocator + router;
//!   `run(listener, store, leases, settings, shutdown)`.
//! - [`cli`]: the operators' subcommands (`migrate`, `schema`, `sequences ...`).
//! - [`stripes_cli`]: `seqd stripes init` (the work is in
//!   [`store::stripes`]: the records and checks, init, the missing-row audit).
//! - [`leaf`]: `import-leaf`, the migration from Leaf's `leaf_alloc` table.
//! - [`snowflake`]: time-ordered snowflake IDs: layout, generator (injected
//!   wall clock, rollback handling) and the worker-ID lease. No SQL, no HTTP
//!   but through [`store::workers::WorkerLeases`].
//! - [`serial`]: serial numbers: format, reset period in a time zone,
//!   rendering, the wall clock, and `Serials` over the allocator (left out
//!   of the model-checking build with it), with the settings refresh that
//!   applies settings changed elsewhere (`serial/refresh.rs`). No SQL, no
//!   HTTP.

/// Declares the modules that exist only in the service build: under
/// `--cfg seqd_loom` (the model-checking tests, `tests/loom_double.rs`) they
/// are left out, and `allocator` is only its lock-free core on loom's
/// primitives (`allocator/model.rs`). The one place the switch is made.
macro_rules! service_only {
    ($(pub mod $name:ident;)*) => {
        $(
            #[cfg(not(seqd_loom))]
            pub mod $name;
        )*
    };
}

service_only! {
    pub mod allocator;
    pub mod cli;
    pub mod http;
    pub mod leaf;
    pub mod startup;
    pub mod stripes_cli;
}

#[cfg(seqd_loom)]
#[path = "allocator/model.rs"]
pub mod allocator;

pub mod config;
pub mod domain;
pub mod serial;
pub mod snowflake;
pub mod store;
pub mod telemetry;
