//! The synchronization primitives of the lock-free core, swappable for loom's
//! under `--cfg seqd_loom` so the model checker explores the real code.
//!
//! [`ArcCell`] is `arc-swap` normally; under loom it is a mutex around an
//! `Arc` (arc-swap is not loom-aware), which gives the same linearizable
//! load/store semantics the core relies on.

#[cfg(not(seqd_loom))]
pub use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(not(seqd_loom))]
pub use std::sync::{Arc, Mutex};

#[cfg(seqd_loom)]
pub use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(seqd_loom)]
pub use loom::sync::{Arc, Mutex};

/// A shared, atomically replaceable `Arc<T>`.
#[cfg(not(seqd_loom))]
pub struct ArcCell<T>(arc_swap::ArcSwap<T>);

#[cfg(not(seqd_loom))]
impl<T> ArcCell<T> {
    /// A cell holding `value`.
    pub fn new(value: Arc<T>) -> Self {
        ArcCell(arc_swap::ArcSwap::new(value))
    }

    /// A cheap, lock-free read of the current value.
    #[inline]
    pub fn load(&self) -> arc_swap::Guard<Arc<T>> {
        self.0.load()
    }

    /// An owned reference to the current value.
    pub fn load_full(&self) -> Arc<T> {
        self.0.load_full()
    }

    /// Replaces the value.
    pub fn store(&self, value: Arc<T>) {
        self.0.store(value)
    }
}

/// A shared, atomically replaceable `Arc<T>` (loom model: a mutex).
#[cfg(seqd_loom)]
pub struct ArcCell<T>(Mutex<Arc<T>>);

#[cfg(seqd_loom)]
impl<T> ArcCell<T> {
    /// A cell holding `value`.
    pub fn new(value: Arc<T>) -> Self {
        ArcCell(Mutex::new(value))
    }

    /// A read of the current value.
    pub fn load(&self) -> Arc<T> {
        self.0.lock().unwrap().clone()
    }

    /// An owned reference to the current value.
    pub fn load_full(&self) -> Arc<T> {
        self.load()
    }

    /// Replaces the value.
    pub fn store(&self, value: Arc<T>) {
        *self.0.lock().unwrap() = value;
    }
}
