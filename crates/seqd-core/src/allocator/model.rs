//! The allocator's lock-free core alone, built on loom's primitives under
//! `--cfg seqd_loom` for model checking. See `double.rs` and `sync.rs`.

pub mod double;
pub mod segment;
pub mod sync;
