//! The one clock serial numbers read: seqd's own, in UTC, behind a trait so
//! tests can set it (docs/design.md, "Serial numbers"). A request reads it
//! once; the period, the counter's row and the printed date all come from
//! that one reading.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

/// A wall clock in UTC.
pub trait WallClock: Send + Sync + 'static {
    /// Now, in UTC.
    fn utc(&self) -> Timestamp;
}

/// The system's clock (what `faketime` shifts).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemWallClock;

impl WallClock for SystemWallClock {
    fn utc(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A wall clock that only moves when told to. Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualWallClock {
    nanos: Arc<AtomicI64>,
}

impl ManualWallClock {
    /// A clock at `at`.
    pub fn at(at: Timestamp) -> Self {
        ManualWallClock {
            nanos: Arc::new(AtomicI64::new(nanos_of(at))),
        }
    }

    /// Sets the clock (it may go backwards).
    pub fn set(&self, at: Timestamp) {
        self.nanos.store(nanos_of(at), Ordering::SeqCst);
    }

    /// Moves the clock by `d`.
    pub fn advance(&self, d: SignedDuration) {
        self.nanos.fetch_add(
            d.as_nanos().clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            Ordering::SeqCst,
        );
    }
}

impl WallClock for ManualWallClock {
    fn utc(&self) -> Timestamp {
        Timestamp::from_nanosecond(i128::from(self.nanos.load(Ordering::SeqCst)))
            .unwrap_or(Timestamp::UNIX_EPOCH)
    }
}

/// Nanoseconds since the epoch, within what an `i64` holds (years 1678 to
/// 2262, far beyond any test).
fn nanos_of(at: Timestamp) -> i64 {
    at.as_nanosecond().clamp(i64::MIN as i128, i64::MAX as i128) as i64
}
