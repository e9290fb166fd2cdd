//! Serial numbers: formatted IDs such as `ORD20261130000123` whose counter
//! starts again every day, month or year of a time zone (docs/design.md,
//! "Serial numbers"). No SQL and no HTTP.
//!
//! - The values (format, reset, overflow, periods, settings) are in
//!   [`crate::domain::serial`], below every feature; re-exported here.
//! - The wall clock serials read, in UTC, is seqd's one [`WallClock`]
//!   (re-exported here).
//! - [`service`]: [`Serials`], which serves them: settings, the current
//!   period, its counter row and buffer.
//! - [`refresh`]: the settings refresh, which applies settings changed
//!   elsewhere (PATCH on another instance, SQL) within its interval.
//! - [`purge`]: which old period rows `seqd sequences purge-periods` deletes.

pub mod purge;
pub mod refresh;
pub mod service;

pub use crate::domain::clock::{ManualWallClock, SystemWallClock, WallClock};
pub use crate::domain::serial::{
    format, parse_time_zone, period, Exhausted, OutOfRange, Overflow, Part, Period, Reset,
    SerialError, SerialFormat, SerialSettings, MAX_WIDTH,
};
pub use service::{IssueError, Issued, PeriodStatus, Serials, WeakSerials};
