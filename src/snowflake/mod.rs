//! Snowflake IDs: time-ordered 64-bit IDs made in memory from the clock, a
//! worker ID leased from the database, and a per-time-unit sequence. The
//! alternative to segments when IDs should sort by time and the database
//! should stay off the path (README, "Snowflake IDs").
//!
//! - [`args`]: the `--snowflake-*` flags of `seqd serve`.
//! - [`layout`]: the bit split, time unit and epoch; encode and decode.
//! - [`clock`]: the injected wall clock (system, manual).
//! - [`generator`]: issuing under a short lock; clock rollback, sequence
//!   overflow, lease deadline. No SQL, no HTTP.
//! - [`lease`]: claiming and renewing a worker ID through
//!   [`crate::store::workers::WorkerLeases`], and the timestamp fence that
//!   keeps restarts and takeovers from reusing a timestamp.

use std::sync::Arc;
use std::time::Duration;

pub mod args;
pub mod clock;
pub mod generator;
pub mod layout;
pub mod lease;

pub use args::SnowflakeArgs;
pub use clock::{ManualWallClock, SystemWallClock, WallClock};
pub use generator::{Generator, GeneratorStatus, Grant, SnowflakeError};
pub use layout::{Bits, Decoded, Layout, LayoutError};
pub use lease::{LeaseConfig, Snowflake, TickOutcome};

/// The snowflake part of `seqd serve`'s settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnowflakeSettings {
    /// Whether this instance serves snowflake IDs (and leases a worker ID).
    pub enabled: bool,
    /// The bit split.
    pub bits: Bits,
    /// The time unit of the timestamp field.
    pub time_unit: Duration,
    /// The epoch, in milliseconds since the Unix epoch.
    pub epoch_ms: i64,
    /// Clock rollbacks up to this long are waited out; longer ones refused.
    pub clock_tolerance: Duration,
    /// Worker-ID lease time-to-live.
    pub lease: Duration,
}

impl Default for SnowflakeSettings {
    /// Enabled; 41/10/12 bits of milliseconds since 2024-01-01T00:00:00Z;
    /// 5 ms tolerance; 30 s lease.
    fn default() -> Self {
        SnowflakeSettings {
            enabled: true,
            bits: Bits::default(),
            time_unit: Duration::from_millis(1),
            epoch_ms: layout::DEFAULT_EPOCH_MS,
            clock_tolerance: Duration::from_millis(5),
            lease: Duration::from_secs(30),
        }
    }
}

impl SnowflakeSettings {
    /// Checks every setting against the clock reading `now_ms` and returns
    /// the layout: bits summing to 63, a whole-millisecond time unit, an
    /// epoch in the past, timestamps not run out, a lease of 1 s .. 1 h, a
    /// tolerance of at most 1 min.
    pub fn validate(&self, now_ms: i64) -> Result<Layout, String> {
        let unit = self.time_unit;
        if unit.subsec_nanos() % 1_000_000 != 0 {
            return Err(LayoutError::Unit.to_string());
        }
        let layout = Layout::new(
            self.bits,
            unit.as_millis().min(i64::MAX as u128) as i64,
            self.epoch_ms,
            now_ms,
        )
        .map_err(|e| e.to_string())?;
        if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&self.lease) {
            return Err(format!(
                "snowflake lease {:?} must be between 1s and 1h",
                self.lease
            ));
        }
        if self.clock_tolerance > Duration::from_secs(60) {
            return Err(format!(
                "snowflake clock tolerance {:?} must be at most 1m",
                self.clock_tolerance
            ));
        }
        Ok(layout)
    }
}

/// Starts snowflake IDs for `seqd serve`: validates `settings` (an unusable
/// layout is a start-up error), logs the layout and when its timestamps run
/// out, opens lease storage on `database_url` (lazily: a database that is
/// down only delays the first worker ID) and spawns the lease task.
/// `Ok(None)` when disabled.
pub fn start(
    settings: &SnowflakeSettings,
    database_url: &str,
) -> anyhow::Result<Option<Snowflake>> {
    if !settings.enabled {
        tracing::info!("snowflake IDs disabled (--snowflake false)");
        return Ok(None);
    }
    let clock: Arc<dyn WallClock> = Arc::new(SystemWallClock);
    let now = clock.now_ms();
    let layout = settings.validate(now).map_err(anyhow::Error::msg)?;
    let runs_out = layout.runs_out_at_ms();
    let years_left = (runs_out.saturating_sub(now)) as f64 / (365.25 * 86_400_000.0);
    tracing::info!(
        layout = %layout.describe(),
        worker_ids = layout.worker_count(),
        ids_per_unit_and_worker = layout.max_sequence() + 1,
        runs_out = %layout::iso_ms(runs_out),
        years_left = format_args!("{years_left:.1}"),
        lease = ?settings.lease,
        clock_tolerance = ?settings.clock_tolerance,
        "snowflake IDs enabled"
    );
    if years_left < 1.0 {
        tracing::warn!(runs_out = %layout::iso_ms(runs_out), "snowflake timestamps run out in less than a year");
    }
    let leases = crate::store::workers::connect_leases(database_url)
        .map_err(|e| anyhow::anyhow!("snowflake worker leases: {e}"))?;
    Ok(Some(Snowflake::start(
        layout,
        settings.clock_tolerance,
        clock,
        leases,
        LeaseConfig::new(settings.lease),
    )))
}
