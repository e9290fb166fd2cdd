//! The synchronization primitives of the lock-free core, swappable for loom's
//! under `--cfg seqd_loom` so the model checker explores the real code.

#[cfg(not(seqd_loom))]
pub use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(not(seqd_loom))]
pub use std::sync::Mutex;

#[cfg(seqd_loom)]
pub use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(seqd_loom)]
pub use loom::sync::Mutex;
