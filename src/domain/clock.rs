//! The one wall clock seqd reads, behind a trait so that tests can set it
//! (backwards included). Serial numbers read it as a UTC [`Timestamp`] (the
//! period, the counter's row and the printed date all come from one
//! reading); snowflake IDs read it in milliseconds (their timestamp field)
//! and microseconds (waits that end at a millisecond boundary).
//!
//! Unlike the allocator's monotonic clock, this one can jump backwards (NTP
//! steps, an operator's `date -s`): the snowflake generator and the serial
//! periods are written for that (docs/design.md, "Serial numbers").

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use jiff::{SignedDuration, Timestamp};

/// A wall clock. May go backwards.
pub trait WallClock: Send + Sync + 'static {
    /// Now, in microseconds since 1970-01-01T00:00:00Z (negative before).
    fn now_micros(&self) -> i64;

    /// Now, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64 {
        self.now_micros().div_euclid(1000)
    }

    /// Now, in UTC.
    fn utc(&self) -> Timestamp {
        Timestamp::from_microsecond(self.now_micros()).unwrap_or(Timestamp::UNIX_EPOCH)
    }
}

/// The system's real-time clock (what `faketime` shifts).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemWallClock;

impl WallClock for SystemWallClock {
    fn now_micros(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_micros() as i64,
            // A clock set before 1970: negative microseconds.
            Err(e) => -(e.duration().as_micros() as i64),
        }
    }

    fn utc(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock for tests. Clones share the same time.
///
/// A *frozen* clock only moves when told to. A *ticking* clock also
/// follows tokio's clock from the moment it was made, so under
/// `tokio::time::pause()` it advances exactly as far as the code under test
/// sleeps, and a test stays deterministic while it waits for time to pass.
#[derive(Debug, Clone)]
pub struct ManualWallClock {
    offset_nanos: Arc<AtomicI64>,
    ticking_since: Option<tokio::time::Instant>,
}

impl ManualWallClock {
    /// A clock that reads `ms` (milliseconds since the Unix epoch) until
    /// told otherwise.
    pub fn frozen(ms: i64) -> Self {
        Self::starting(ms.saturating_mul(1_000_000), None)
    }

    /// A clock that reads `ms` now and advances with tokio's clock.
    pub fn ticking(ms: i64) -> Self {
        Self::starting(
            ms.saturating_mul(1_000_000),
            Some(tokio::time::Instant::now()),
        )
    }

    /// A frozen clock at `at`.
    pub fn at(at: Timestamp) -> Self {
        Self::starting(nanos_of(at), None)
    }

    fn starting(nanos: i64, ticking_since: Option<tokio::time::Instant>) -> Self {
        ManualWallClock {
            offset_nanos: Arc::new(AtomicI64::new(nanos)),
            ticking_since,
        }
    }

    /// Makes the clock read `ms` now (it may go backwards).
    pub fn set(&self, ms: i64) {
        self.set_nanos(ms.saturating_mul(1_000_000));
    }

    /// Moves the clock by `delta_ms` (negative: backwards).
    pub fn advance(&self, delta_ms: i64) {
        self.offset_nanos
            .fetch_add(delta_ms.saturating_mul(1_000_000), Ordering::SeqCst);
    }

    /// Makes the clock read `at` now (it may go backwards).
    pub fn set_utc(&self, at: Timestamp) {
        self.set_nanos(nanos_of(at));
    }

    /// Moves the clock by `d` (negative: backwards).
    pub fn advance_by(&self, d: SignedDuration) {
        let nanos = d.as_nanos().clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        self.offset_nanos.fetch_add(nanos, Ordering::SeqCst);
    }

    fn set_nanos(&self, nanos: i64) {
        self.offset_nanos
            .store(nanos - self.ticked_nanos(), Ordering::SeqCst);
    }

    fn ticked_nanos(&self) -> i64 {
        self.ticking_since
            .map_or(0, |t| t.elapsed().as_nanos() as i64)
    }

    fn now_nanos(&self) -> i64 {
        self.offset_nanos.load(Ordering::SeqCst) + self.ticked_nanos()
    }
}

impl WallClock for ManualWallClock {
    fn now_micros(&self) -> i64 {
        self.now_nanos().div_euclid(1000)
    }

    fn utc(&self) -> Timestamp {
        Timestamp::from_nanosecond(i128::from(self.now_nanos())).unwrap_or(Timestamp::UNIX_EPOCH)
    }
}

/// Nanoseconds since the epoch, within what an `i64` holds (years 1678 to
/// 2262, far beyond any test).
fn nanos_of(at: Timestamp) -> i64 {
    at.as_nanosecond().clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_is_after_2024_in_every_unit() {
        let c = SystemWallClock;
        assert!(c.now_ms() > 1_704_067_200_000);
        assert!(c.now_micros() / 1000 >= 1_704_067_200_000);
        assert!(c.utc().as_millisecond() > 1_704_067_200_000);
    }

    #[test]
    fn a_frozen_clock_moves_only_when_told_and_reads_alike_in_every_unit() {
        let c = ManualWallClock::frozen(1_000);
        let shared = c.clone();
        assert_eq!(c.now_ms(), 1_000);
        c.advance(5);
        assert_eq!(shared.now_ms(), 1_005);
        assert_eq!(shared.now_micros(), 1_005_000);
        assert_eq!(shared.utc().as_millisecond(), 1_005);
        c.set(10);
        assert_eq!(shared.now_ms(), 10);
        c.advance(-20);
        assert_eq!(c.now_ms(), -10);
        let at: Timestamp = "2024-12-31T23:59:59.999999999Z".parse().unwrap();
        c.set_utc(at);
        assert_eq!(c.utc(), at, "nanoseconds kept");
        c.advance_by(SignedDuration::from_nanos(1));
        assert_eq!(c.utc().to_string(), "2025-01-01T00:00:00Z");
        assert_eq!(ManualWallClock::at(at).utc(), at);
    }

    #[tokio::test(start_paused = true)]
    async fn a_ticking_clock_follows_paused_tokio_time() {
        let c = ManualWallClock::ticking(1_000);
        tokio::time::sleep(std::time::Duration::from_millis(7)).await;
        assert_eq!(c.now_ms(), 1_007);
        c.set(500);
        assert_eq!(c.now_ms(), 500);
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        assert_eq!(c.now_ms(), 503);
    }
}
