//! A store that passes every call on to a real one and records what the
//! tests watch: how many reservations went through it, and the `max_id`
//! moves of its compare-and-sets (the write by which a stripe reserves).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use seqd::store::forwarding::{Call, Forwarding, Hook};
use seqd::store::{Store, StoreError};

/// `inner`, recording as it goes: [`Record`] is its hook.
pub type Recording = Forwarding<Record>;

/// A recorder in front of `inner`.
pub fn recording(inner: Arc<dyn Store>) -> Arc<Recording> {
    Forwarding::new(inner, Record::default())
}

/// What a [`Recording`] saw.
#[derive(Default)]
pub struct Record {
    reserves: AtomicU64,
    moves: Mutex<Vec<(i64, i64)>>,
}

impl Record {
    /// Reservations (`reserve`, `reserve_above`) so far.
    pub fn reserves(&self) -> u64 {
        self.reserves.load(Ordering::SeqCst)
    }

    /// Every successful compare-and-set so far: `(expected, new)`.
    pub fn moves(&self) -> Vec<(i64, i64)> {
        self.moves.lock().unwrap().clone()
    }
}

impl Hook for Record {
    fn before(&self, call: Call) -> Result<(), StoreError> {
        if call == Call::Reserve {
            self.reserves.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }

    fn moved(&self, expected: i64, new: i64) {
        self.moves.lock().unwrap().push((expected, new));
    }
}
