//! The map of live sequences: name -> buffer, read on every request.
//!
//! `scc::HashIndex`, chosen by measurement (BENCHMARKS.md, "Name map"): a
//! lookup takes no lock and writes no shared memory (it enters an epoch on a
//! thread-local counter), and an insert adds one entry, resizing the table
//! incrementally, so the first use of the millionth sequence costs what the
//! first did. Keys and values sit in the table's own bucket arrays: a lookup
//! reads the bucket (the key's bytes are behind its `Arc<str>`, fetched beside
//! the buffer pointer, not after it) and then the buffer, whose first bytes
//! hold the current segment (docs/design.md, "The hot path and the memory of
//! one sequence").
//!
//! Entries are removed only for a serial sequence's period counter whose
//! period is over ([`super::Allocator::retire`]); any other live buffer stays
//! for the life of the process (it carries the sequence's high-water mark).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::buffer::SeqBuffer;
use crate::domain::SeqName;

/// See the module docs.
pub(super) struct LiveMap {
    map: papaya::HashMap<SeqName, Arc<SeqBuffer>, foldhash::fast::RandomState>,
    /// Entries (`HashIndex::len` scans the table).
    len: AtomicUsize,
}

impl LiveMap {
    pub(super) fn new() -> Self {
        LiveMap {
            map: papaya::HashMap::with_hasher(foldhash::fast::RandomState::default()),
            len: AtomicUsize::new(0),
        }
    }

    /// Runs `f` on the buffer of `name`, if live, without cloning the `Arc`.
    #[inline]
    pub(super) fn with<R>(&self, name: &str, f: impl FnOnce(&Arc<SeqBuffer>) -> R) -> Option<R> {
        self.map.pin().get(name).map(f)
    }

    /// The buffer of `name`, if live.
    pub(super) fn get(&self, name: &str) -> Option<Arc<SeqBuffer>> {
        self.with(name, Arc::clone)
    }

    /// Makes `buf` live under its name. The caller holds the writers' lock,
    /// so the name is not live yet.
    pub(super) fn insert(&self, buf: Arc<SeqBuffer>) {
        // The key shares the buffer's name: one allocation per name.
        let key = buf.name().clone();
        if self.map.pin().insert(key, buf).is_none() {
            self.len.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Removes `name`'s buffer. The caller holds the writers' lock.
    pub(super) fn remove(&self, name: &str) -> Option<Arc<SeqBuffer>> {
        let removed = self.map.pin().remove(name).cloned();
        if removed.is_some() {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }

    /// Number of live sequences.
    pub(super) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Calls `f` on every live buffer, in no particular order.
    pub(super) fn for_each(&self, mut f: impl FnMut(&Arc<SeqBuffer>)) {
        for (_, buf) in self.map.pin().iter() {
            f(buf);
        }
    }
}
