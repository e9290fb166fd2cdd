//! Serial numbers: formatted IDs such as `ORD20261130000123` whose counter
//! starts again every day, month or year of a time zone (docs/design.md,
//! "Serial numbers"). No SQL and no HTTP.
//!
//! - [`format`]: the `format` string parsed into [`Part`]s, the [`Reset`]
//!   and [`Overflow`] words, the check that a format carries the date
//!   tokens of its reset, and rendering one serial ([`Exhausted`] when the
//!   counter outgrows `{seq:0N}`).
//! - [`period`]: the [`Period`] of a UTC instant in an IANA time zone (key,
//!   bounds, printed date), and [`parse_time_zone`]. Time zones are jiff's,
//!   with its bundled database (BENCHMARKS.md, "Time zones for serial
//!   numbers").
//! - `error.rs`: [`SerialError`], every refused setting with a message
//!   naming what is wrong.
//! - [`clock`]: the one wall clock serials read, in UTC ([`WallClock`]).
//! - [`service`]: [`Serials`], which serves them: settings, the current
//!   period, its counter row and buffer.
//! - [`refresh`]: the settings refresh, which applies settings changed
//!   elsewhere (PATCH on another instance, SQL) within its interval.
//! - [`purge`]: which old period rows `seqd sequences purge-periods` deletes.

pub mod clock;
mod error;
pub mod format;
pub mod period;
pub mod purge;
// Over the allocator, which the model-checking build leaves out.
#[cfg(not(seqd_loom))]
pub mod refresh;
#[cfg(not(seqd_loom))]
pub mod service;

pub use clock::{ManualWallClock, SystemWallClock, WallClock};
pub use error::SerialError;
pub use format::{Exhausted, Overflow, Part, Reset, SerialFormat, MAX_WIDTH};
pub use period::{parse_time_zone, OutOfRange, Period};
#[cfg(not(seqd_loom))]
pub use service::{IssueError, Issued, PeriodStatus, Serials, WeakSerials};
