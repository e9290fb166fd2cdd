//! The one error of a serial-number setting that cannot be accepted: a bad
//! `format`, `reset`, `overflow` or `time_zone`, or a `start` the format
//! cannot print. Every variant is the
//! client's mistake (a 400 `invalid_request` once the fields reach the API),
//! and its message names what is wrong and where.

use super::words::{Reset, UnknownOverflow, UnknownReset};

/// A `format`, `reset`, `overflow` or `time_zone` that was refused.
///
/// Positions are character offsets into the format, counted from 0.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SerialError {
    /// A `{...}` that is none of the known tokens.
    #[error(
        "unknown token `{token}` at position {position} of the format: \
         the tokens are {{yyyy}} {{yy}} {{MM}} {{dd}} {{seq}} {{seq:0N}}"
    )]
    UnknownToken {
        /// The token as written.
        token: String,
        /// Its position in the format, in characters from 0.
        position: usize,
    },
    /// `{seq:...}` whose width is not written `0N`, e.g. `{seq:5}`.
    #[error(
        "malformed counter token `{token}` at position {position} of the format: \
         write {{seq:0N}}, a zero then the width N (1 to 18), e.g. {{seq:06}}"
    )]
    MalformedWidth {
        /// The token as written.
        token: String,
        /// Its position in the format, in characters from 0.
        position: usize,
    },
    /// `{seq:0N}` with N = 0 or N > 18.
    #[error(
        "counter width {width} at position {position} of the format is out of range: \
         {{seq:0N}} takes 1 <= N <= 18"
    )]
    WidthOutOfRange {
        /// The width given.
        width: u64,
        /// Its position in the format, in characters from 0.
        position: usize,
    },
    /// A second `{seq}` or `{seq:0N}`.
    #[error(
        "a second counter token at position {position} of the format \
         (the first is at position {first}): a format has exactly one {{seq}}"
    )]
    SecondSeq {
        /// Its position in the format, in characters from 0.
        position: usize,
        /// The position of the first counter token.
        first: usize,
    },
    /// No `{seq}` at all.
    #[error("the format has no counter token: it needs exactly one {{seq}} or {{seq:0N}}")]
    MissingSeq,
    /// A `{` without its `}`.
    #[error("`{{` at position {position} of the format is not closed by `}}`")]
    Unclosed {
        /// Its position in the format, in characters from 0.
        position: usize,
    },
    /// A character that literal text may not hold (including a lone `}`).
    #[error(
        "character {character:?} at position {position} of the format is not allowed: \
         literal text is ASCII letters, digits and - _ . / : #"
    )]
    ForbiddenCharacter {
        /// The character.
        character: char,
        /// Its position in the format, in characters from 0.
        position: usize,
    },
    /// The format lacks a date token its reset period needs (serials would
    /// repeat from one period to the next).
    #[error(
        "a reset every {reset} needs {needs} in the format, or serials would repeat \
         from one {reset} to the next; missing: {missing}"
    )]
    MissingDateToken {
        /// The reset period.
        reset: Reset,
        /// All the tokens this reset needs, e.g. `{yyyy} or {yy}, {MM} and {dd}`.
        needs: &'static str,
        /// The ones the format lacks, e.g. `{dd}`.
        missing: String,
    },
    /// `reset`, `time_zone` or `overflow` given to a sequence without a
    /// format.
    #[error("reset, time_zone and overflow belong to serial numbers: give a format too")]
    NeedsFormat,
    /// A format longer than the column holds.
    #[error("the format is {length} characters long: at most {max}")]
    TooLong {
        /// The format's length, in characters.
        length: usize,
        /// The most accepted.
        max: usize,
    },
    /// A `reset` that is not `never`, `day`, `month` or `year`.
    #[error(transparent)]
    UnknownReset(#[from] UnknownReset),
    /// An `overflow` that is not `refuse` or `widen`.
    #[error(transparent)]
    UnknownOverflow(#[from] UnknownOverflow),
    /// A counter that starts past what `{seq:0N}` holds, under `overflow:
    /// refuse`: no serial could ever be printed.
    #[error(
        "start {start} is past the capacity of {{seq:0{width}}}, {capacity}: no serial could \
         be printed; start at most {capacity}, widen the counter, or set overflow to widen"
    )]
    StartBeyondCapacity {
        /// The start asked for.
        start: i64,
        /// The counter's width `N`.
        width: u8,
        /// The largest counter `{seq:0N}` prints.
        capacity: u64,
    },
    /// A `time_zone` that is not in the IANA database seqd carries.
    #[error(
        "unknown time zone `{name}`: an IANA name such as UTC, Europe/Paris or \
         America/New_York"
    )]
    UnknownTimeZone {
        /// The name as given.
        name: String,
    },
}

impl SerialError {
    /// The setting (a column of `sequences`, a field of the API) at fault.
    pub fn field(&self) -> &'static str {
        match self {
            SerialError::UnknownReset(_) => "reset",
            SerialError::UnknownOverflow(_) => "overflow",
            SerialError::UnknownTimeZone { .. } => "time_zone",
            _ => "format",
        }
    }
}
