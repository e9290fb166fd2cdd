//! Serial numbers, the pure core: formatted IDs such as `ORD20261130000123`
//! whose counter starts again every day, month or year of a time zone
//! (DESIGN.md, "Serial numbers"; docs/design.md, "Serial numbers (core
//! only)"). Not wired into the service yet: no columns, no API fields, no
//! allocator changes. No SQL, no HTTP, no clock: instants are handed in.
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

mod error;
pub mod format;
pub mod period;

pub use error::SerialError;
pub use format::{Exhausted, Overflow, Part, Reset, SerialFormat, MAX_WIDTH};
pub use period::{parse_time_zone, OutOfRange, Period};
