//! Snowflake IDs: time-ordered 64-bit IDs made in memory from the clock, a
//! worker ID leased from the database, and a per-time-unit sequence. The
//! alternative to segments when IDs should sort by time and the database
//! should stay off the path (docs/snowflake.md).
//!
//! - [`args`]: the `--snowflake-*` flags of `seqd serve`.
//! - [`layout`]: the bit split, time unit and epoch; encode and decode.
//! - The injected wall clock is seqd's one [`WallClock`] (re-exported
//!   here).
//! - [`generator`]: issuing under a short lock; clock rollback, sequence
//!   overflow, lease deadline. No SQL, no HTTP.
//! - [`lease`]: claiming and renewing a worker ID through
//!   [`crate::store::workers::WorkerLeases`], and the timestamp fence that
//!   keeps restarts and takeovers from reusing a timestamp.

use std::sync::Arc;
use std::time::Duration;

use crate::store::WorkerLeases;

pub mod args;
pub mod generator;
pub mod layout;
pub mod lease;

pub use crate::domain::clock::{ManualWallClock, SystemWallClock, WallClock};
pub use args::SnowflakeArgs;
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
    /// epoch in the past, timestamps not run out, a lease of 1 s .. 1 h that
    /// serves the time unit ([`LeaseConfig::largest_time_unit`]), a
    /// tolerance of at most 1 min.
    pub fn validate(&self, now_ms: i64) -> Result<Layout, String> {
        let unit = self.time_unit;
        if !unit.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(LayoutError::Unit.to_string());
        }
        let layout = Layout::new(
            self.bits,
            unit.as_millis().min(i64::MAX as u128) as i64,
            self.epoch_ms,
            now_ms,
        )
        .map_err(|e| e.to_string())?;
        if !(MIN_LEASE..=MAX_LEASE).contains(&self.lease) {
            return Err(format!(
                "snowflake lease {:?} must be between 1s and 1h",
                self.lease
            ));
        }
        check_unit_fits_lease(unit, self.lease)?;
        if self.clock_tolerance > Duration::from_secs(60) {
            return Err(format!(
                "snowflake clock tolerance {:?} must be at most 1m",
                self.clock_tolerance
            ));
        }
        Ok(layout)
    }
}

/// Shortest worker-ID lease accepted.
const MIN_LEASE: Duration = Duration::from_secs(1);
/// Longest worker-ID lease accepted.
const MAX_LEASE: Duration = Duration::from_secs(3600);

/// Checks that a lease of `lease` serves a time unit of `unit` at every
/// instant ([`LeaseConfig::largest_time_unit`]); the error names both flags
/// and what would work.
fn check_unit_fits_lease(unit: Duration, lease: Duration) -> Result<(), String> {
    let largest = LeaseConfig::new(lease).largest_time_unit();
    if unit <= largest {
        return Ok(());
    }
    let shortest = LeaseConfig::shortest_ttl_for(unit);
    let remedy = if shortest <= MAX_LEASE {
        format!(
            "use {} or longer, or {} or shorter",
            flag("lease", shortest),
            flag("time-unit", largest)
        )
    } else {
        format!(
            "no lease up to 1h serves it: use {} or shorter with {}",
            flag("time-unit", LeaseConfig::new(MAX_LEASE).largest_time_unit()),
            flag("lease", MAX_LEASE)
        )
    };
    Err(format!(
        "{} is too long for {}: a unit that begins just before issuing stops (a third of the \
         lease before it ends) must end by the lease's end, so this lease serves units of at most \
         {}; {remedy}",
        flag("time-unit", unit),
        flag("lease", lease),
        humantime::format_duration(largest)
    ))
}

/// `--snowflake-NAME VALUE` as typed in a shell (quoted if it has spaces).
fn flag(name: &str, value: Duration) -> String {
    let value = humantime::format_duration(value).to_string();
    if value.contains(' ') {
        format!("--snowflake-{name} \"{value}\"")
    } else {
        format!("--snowflake-{name} {value}")
    }
}

/// Checks `settings` as [`start`] will, against the system clock, so that
/// `seqd serve` refuses unusable settings before it touches the database.
pub fn check(settings: &SnowflakeSettings) -> anyhow::Result<()> {
    if settings.enabled {
        settings
            .validate(SystemWallClock.now_ms())
            .map_err(anyhow::Error::msg)?;
    }
    Ok(())
}

/// Starts snowflake IDs for `seqd serve`: validates `settings` (an unusable
/// layout is a start-up error), logs the layout and when its timestamps run
/// out, and spawns the lease task on `leases` (the database's, over the
/// sequence store's pool: a database that goes down only delays the next
/// worker ID). `Ok(None)` when disabled; an error when enabled without
/// lease storage (a store with no database, such as the in-memory one).
pub fn start(
    settings: &SnowflakeSettings,
    leases: Option<Arc<dyn WorkerLeases>>,
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
    let leases = leases.ok_or_else(|| {
        anyhow::anyhow!(
            "snowflake worker leases: this store has no database to lease worker IDs in \
             (--snowflake false serves without them)"
        )
    })?;
    Ok(Some(
        Snowflake::new(
            layout,
            settings.clock_tolerance,
            clock,
            leases,
            LeaseConfig::new(settings.lease),
        )
        .started(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_750_000_000_000;

    fn with(time_unit: Duration, lease: Duration) -> SnowflakeSettings {
        SnowflakeSettings {
            time_unit,
            lease,
            ..Default::default()
        }
    }

    #[test]
    fn a_time_unit_longer_than_the_lease_serves_is_refused_naming_both_flags() {
        let err = with(Duration::from_secs(60), Duration::from_secs(30))
            .validate(NOW)
            .unwrap_err();
        for part in ["--snowflake-time-unit 1m", "--snowflake-lease 30s"] {
            assert!(err.contains(part), "{part:?} missing from: {err}");
        }
        assert!(
            err.contains(r#"--snowflake-lease "2m 59s 994ms" or longer"#),
            "smallest lease missing: {err}"
        );
        assert!(
            err.contains(r#"--snowflake-time-unit "10s 2ms" or shorter"#),
            "largest unit missing: {err}"
        );
        // A unit no accepted lease serves: the largest unit of the longest lease.
        let err = with(Duration::from_secs(86_400), Duration::from_secs(30))
            .validate(NOW)
            .unwrap_err();
        assert!(err.contains("no lease up to 1h"), "{err}");
        assert!(err.contains(r#"--snowflake-time-unit "20m 2ms""#), "{err}");
    }

    #[test]
    fn the_largest_time_unit_for_a_lease_is_accepted_and_one_ms_more_refused() {
        let lease = Duration::from_secs(30);
        assert_eq!(
            LeaseConfig::new(lease).largest_time_unit(),
            Duration::from_millis(10_002)
        );
        assert!(with(Duration::from_millis(10_002), lease)
            .validate(NOW)
            .is_ok());
        assert!(with(Duration::from_millis(10_003), lease)
            .validate(NOW)
            .is_err());
        // The smallest lease named for a unit of 1 minute serves it.
        assert!(
            with(Duration::from_secs(60), Duration::from_millis(179_994))
                .validate(NOW)
                .is_ok()
        );
        assert!(
            with(Duration::from_secs(60), Duration::from_millis(179_993))
                .validate(NOW)
                .is_err()
        );
    }
}
