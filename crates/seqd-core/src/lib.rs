//! seqd's allocator core: unique 64-bit IDs per named sequence, served from
//! memory out of ranges ("segments") reserved from a store.
//!
//! No SQL and no HTTP: the [`allocator`] draws from any [`store::Segments`]
//! (seqd's database backends, or a client's leases over the network) and
//! reads time from an injected clock. The [`domain`] values it takes (names,
//! counts, the ordering of a sequence) are checked when they are built. A
//! permuted sequence's IDs are its counter through [`permute`] (FF1).
//!
//! The seqd service re-exports these modules unchanged (`seqd::allocator`,
//! `seqd::domain`, `seqd::store`); its `docs/design.md` describes them.

#![deny(missing_docs)]

#[cfg(not(seqd_loom))]
pub mod allocator;

/// Under `--cfg seqd_loom` (the model-checking tests, `tests/loom_double.rs`)
/// the allocator is only its lock-free core on loom's primitives
/// (`allocator/model.rs`).
#[cfg(seqd_loom)]
#[path = "allocator/model.rs"]
pub mod allocator;

pub mod domain;
pub mod permute;
pub mod store;
