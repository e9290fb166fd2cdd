//! The snowflake flags of `seqd serve`, flattened into
//! [`crate::config::ServeArgs`]; each has an environment variable.

use std::time::Duration;

use clap::builder::BoolishValueParser;
use clap::{ArgAction, Args};

use super::layout::{parse_epoch, Bits};
use super::SnowflakeSettings;

/// Snowflake IDs (`/v1/snowflake/*`).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Snowflake IDs")]
pub struct SnowflakeArgs {
    /// Serve snowflake IDs (docs/snowflake.md), leasing a worker ID from the `workers` table
    /// (`false`: the routes answer 404 `snowflake_disabled`).
    #[arg(long = "snowflake", env = "SEQD_SNOWFLAKE", value_name = "BOOL", default_value = "true",
          action = ArgAction::Set, value_parser = BoolishValueParser::new())]
    pub enabled: bool,
    /// Epoch of the timestamp field (RFC 3339, in the past). Every instance sharing a database must
    /// use the same epoch, bits and time unit.
    #[arg(long = "snowflake-epoch", env = "SEQD_SNOWFLAKE_EPOCH", value_name = "TIME",
          default_value = "2024-01-01T00:00:00Z", value_parser = parse_epoch)]
    pub epoch_ms: i64,
    /// Bits of timestamp/worker ID/sequence; they must sum to 63.
    #[arg(
        long = "snowflake-bits",
        env = "SEQD_SNOWFLAKE_BITS",
        value_name = "T/W/S",
        default_value = "41/10/12"
    )]
    pub bits: Bits,
    /// Time unit of the timestamp field, a whole number of milliseconds (e.g. `1s` with
    /// `--snowflake-bits 36/5/22`), at most a third of `--snowflake-lease` plus 2 ms.
    #[arg(long = "snowflake-time-unit", env = "SEQD_SNOWFLAKE_TIME_UNIT", value_name = "DURATION",
          default_value = "1ms", value_parser = humantime::parse_duration)]
    pub time_unit: Duration,
    /// Clock rollbacks up to this long (at most `1m`) are waited out; longer ones answer 503
    /// `clock_moved_backwards` until the clock catches up.
    #[arg(long = "snowflake-clock-tolerance", env = "SEQD_SNOWFLAKE_CLOCK_TOLERANCE", value_name = "DURATION",
          default_value = "5ms", value_parser = humantime::parse_duration)]
    pub clock_tolerance: Duration,
    /// Worker-ID lease time-to-live (`1s` .. `1h`): renewed every quarter of it; issuing stops a
    /// third of it before an unrenewed lease ends.
    #[arg(long = "snowflake-lease", env = "SEQD_SNOWFLAKE_LEASE", value_name = "DURATION",
          default_value = "30s", value_parser = humantime::parse_duration)]
    pub lease: Duration,
}

impl SnowflakeArgs {
    /// The settings these flags give (validated at start-up).
    pub fn settings(&self) -> SnowflakeSettings {
        SnowflakeSettings {
            enabled: self.enabled,
            bits: self.bits,
            time_unit: self.time_unit,
            epoch_ms: self.epoch_ms,
            clock_tolerance: self.clock_tolerance,
            lease: self.lease,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        snowflake: SnowflakeArgs,
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let s = Cli::parse_from(["seqd"]).snowflake.settings();
        assert_eq!(s, SnowflakeSettings::default());
    }

    #[test]
    fn flags_parse() {
        let c = Cli::parse_from([
            "seqd",
            "--snowflake",
            "off",
            "--snowflake-bits",
            "36/5/22",
            "--snowflake-time-unit",
            "1s",
            "--snowflake-epoch",
            "2020-01-01T00:00:00Z",
            "--snowflake-clock-tolerance",
            "20ms",
            "--snowflake-lease",
            "1m",
        ]);
        let s = c.snowflake.settings();
        assert!(!s.enabled);
        assert_eq!(
            s.bits,
            Bits {
                time: 36,
                worker: 5,
                sequence: 22
            }
        );
        assert_eq!(s.time_unit, Duration::from_secs(1));
        assert_eq!(s.epoch_ms, 1_577_836_800_000);
        assert_eq!(
            (s.clock_tolerance, s.lease),
            (Duration::from_millis(20), Duration::from_secs(60))
        );
        assert!(s.validate(1_750_000_000_000).is_ok());
    }

    #[test]
    fn bad_values_are_refused_with_a_reason() {
        for args in [
            &["seqd", "--snowflake-bits", "41/10/13"][..],
            &["seqd", "--snowflake-bits", "41-10-12"],
            &["seqd", "--snowflake-epoch", "yesterday"],
            &["seqd", "--snowflake-lease", "soon"],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
        }
        let now = 1_750_000_000_000;
        let s = SnowflakeSettings {
            time_unit: Duration::from_micros(1500),
            ..Default::default()
        };
        assert!(s.validate(now).is_err());
        let s = SnowflakeSettings {
            epoch_ms: now + 1,
            ..Default::default()
        };
        assert!(s.validate(now).unwrap_err().contains("past"));
        let s = SnowflakeSettings {
            lease: Duration::from_millis(500),
            ..Default::default()
        };
        assert!(s.validate(now).is_err());
    }
}
