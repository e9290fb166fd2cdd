//! The words of a serial sequence's settings: [`Reset`] (when its counter
//! starts again) and [`Overflow`] (what a counter too wide for `{seq:0N}`
//! does), as the API and the `sequences` columns spell them.

use std::fmt;
use std::str::FromStr;

/// A `reset` that is not `never`, `day`, `month` or `year`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown reset `{0}`: one of never, day, month, year")]
pub struct UnknownReset(pub String);

/// An `overflow` that is not `refuse` or `widen`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown overflow `{0}`: one of refuse, widen")]
pub struct UnknownOverflow(pub String);

/// When the counter starts again at `start`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Reset {
    /// One counter for the sequence's whole life.
    #[default]
    Never,
    /// A counter per local calendar day.
    Day,
    /// A counter per local calendar month.
    Month,
    /// A counter per local calendar year.
    Year,
}

/// What a counter wider than `{seq:0N}` does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Overflow {
    /// The serial is refused ([`Exhausted`](super::format::Exhausted); 409 `serial_exhausted` once wired).
    #[default]
    Refuse,
    /// The counter is printed in full, wider than N.
    Widen,
}

impl Reset {
    /// The word of the API: `never`, `day`, `month`, `year`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reset::Never => "never",
            Reset::Day => "day",
            Reset::Month => "month",
            Reset::Year => "year",
        }
    }
}

impl FromStr for Reset {
    type Err = UnknownReset;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "never" => Ok(Reset::Never),
            "day" => Ok(Reset::Day),
            "month" => Ok(Reset::Month),
            "year" => Ok(Reset::Year),
            other => Err(UnknownReset(other.to_owned())),
        }
    }
}

impl fmt::Display for Reset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Overflow {
    /// The word of the API: `refuse`, `widen`.
    pub fn as_str(self) -> &'static str {
        match self {
            Overflow::Refuse => "refuse",
            Overflow::Widen => "widen",
        }
    }
}

impl FromStr for Overflow {
    type Err = UnknownOverflow;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "refuse" => Ok(Overflow::Refuse),
            "widen" => Ok(Overflow::Widen),
            other => Err(UnknownOverflow(other.to_owned())),
        }
    }
}

impl fmt::Display for Overflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_and_overflow_parse_from_their_words() {
        for r in [Reset::Never, Reset::Day, Reset::Month, Reset::Year] {
            assert_eq!(r.as_str().parse::<Reset>().unwrap(), r);
        }
        assert_eq!(Reset::default(), Reset::Never);
        assert_eq!(
            "hourly".parse::<Reset>().unwrap_err(),
            UnknownReset("hourly".into())
        );
        assert!("Day".parse::<Reset>().is_err());
        for o in [Overflow::Refuse, Overflow::Widen] {
            assert_eq!(o.as_str().parse::<Overflow>().unwrap(), o);
        }
        assert_eq!(Overflow::default(), Overflow::Refuse);
        assert_eq!(
            "wrap".parse::<Overflow>().unwrap_err(),
            UnknownOverflow("wrap".into())
        );
    }
}
