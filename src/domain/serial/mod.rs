//! The values of serial numbers (docs/design.md, "Serial numbers"): what a
//! serial sequence's settings are and mean, below every feature that uses
//! them. Serving serials is [`crate::serial`]'s.
//!
//! - [`words`]: [`Reset`] and [`Overflow`], the words of the API.
//! - [`format`](mod@format): the `format` string parsed into [`Part`]s, the check that a
//!   format carries the date tokens of its reset, and rendering one serial
//!   ([`Exhausted`] when the counter outgrows `{seq:0N}`).
//! - [`period`]: the [`Period`] of a UTC instant in an IANA time zone (key,
//!   bounds, printed date), and [`parse_time_zone`]. Time zones are jiff's,
//!   with its bundled database (BENCHMARKS.md, "Time zones for serial
//!   numbers").
//! - [`error`]: [`SerialError`], every refused setting with a message
//!   naming what is wrong.
//! - [`settings`]: [`SerialSettings`], the whole setting of one sequence.

pub mod error;
pub mod format;
pub mod period;
pub mod settings;
pub mod words;

pub use error::SerialError;
pub use format::{Exhausted, Part, SerialFormat, MAX_WIDTH};
pub use period::{parse_time_zone, OutOfRange, Period};
pub use settings::{SerialSettings, MAX_FORMAT_LEN};
pub use words::{Overflow, Reset};
