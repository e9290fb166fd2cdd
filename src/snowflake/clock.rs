//! Wall-clock time as the snowflake generator and the worker lease see it:
//! milliseconds since the Unix epoch, behind a trait so that tests can move
//! it by hand, backwards included.
//!
//! Unlike the allocator's monotonic [`crate::allocator::Clock`], snowflake IDs
//! embed wall-clock time, so this clock can jump backwards (NTP steps, an
//! operator's `date -s`); the generator is written for that.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A wall clock: milliseconds since 1970-01-01T00:00:00Z. May go backwards.
pub trait WallClock: Send + Sync + 'static {
    /// The current time, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;

    /// The current time in microseconds since the Unix epoch, for waits that
    /// should end right at a millisecond boundary. Defaults to `now_ms` x 1000.
    fn now_micros(&self) -> i64 {
        self.now_ms().saturating_mul(1000)
    }
}

/// The system's real-time clock (`SystemTime::now`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemWallClock;

impl WallClock for SystemWallClock {
    fn now_ms(&self) -> i64 {
        self.now_micros().div_euclid(1000)
    }

    fn now_micros(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_micros() as i64,
            // A clock set before 1970: negative microseconds.
            Err(e) => -(e.duration().as_micros() as i64),
        }
    }
}

/// A clock for tests. Clones share the same time.
///
/// A *frozen* clock only moves when told to ([`ManualWallClock::set`],
/// [`ManualWallClock::advance`]). A *ticking* clock also follows tokio's
/// clock from the moment it was made, so under `tokio::time::pause()` it
/// advances exactly as far as the generator sleeps, and a test stays
/// deterministic while the generator waits for time to pass.
#[derive(Debug, Clone)]
pub struct ManualWallClock {
    offset_ms: Arc<AtomicI64>,
    ticking_since: Option<tokio::time::Instant>,
}

impl ManualWallClock {
    /// A clock that reads `ms` until told otherwise.
    pub fn frozen(ms: i64) -> Self {
        ManualWallClock {
            offset_ms: Arc::new(AtomicI64::new(ms)),
            ticking_since: None,
        }
    }

    /// A clock that reads `ms` now and advances with tokio's clock.
    pub fn ticking(ms: i64) -> Self {
        ManualWallClock {
            offset_ms: Arc::new(AtomicI64::new(ms)),
            ticking_since: Some(tokio::time::Instant::now()),
        }
    }

    /// Makes the clock read `ms` now (may move it backwards).
    pub fn set(&self, ms: i64) {
        let ticked = self.ticked_ms();
        self.offset_ms.store(ms - ticked, Ordering::SeqCst);
    }

    /// Moves the clock by `delta_ms` (negative: backwards).
    pub fn advance(&self, delta_ms: i64) {
        self.offset_ms.fetch_add(delta_ms, Ordering::SeqCst);
    }

    fn ticked_ms(&self) -> i64 {
        self.ticking_since
            .map_or(0, |t| t.elapsed().as_millis() as i64)
    }
}

impl WallClock for ManualWallClock {
    fn now_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::SeqCst) + self.ticked_ms()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_after_2024() {
        assert!(SystemWallClock.now_ms() > 1_704_067_200_000);
    }

    #[test]
    fn frozen_clock_moves_only_when_told() {
        let c = ManualWallClock::frozen(1_000);
        let shared = c.clone();
        assert_eq!(c.now_ms(), 1_000);
        c.advance(5);
        assert_eq!(shared.now_ms(), 1_005);
        c.set(10);
        assert_eq!(shared.now_ms(), 10);
        c.advance(-20);
        assert_eq!(c.now_ms(), -10);
    }

    #[tokio::test(start_paused = true)]
    async fn ticking_clock_follows_paused_tokio_time() {
        let c = ManualWallClock::ticking(1_000);
        tokio::time::sleep(std::time::Duration::from_millis(7)).await;
        assert_eq!(c.now_ms(), 1_007);
        c.set(500);
        assert_eq!(c.now_ms(), 500);
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        assert_eq!(c.now_ms(), 503);
    }
}
