//! [`SerialSettings`]: a sequence's serial-number settings, validated.

use super::error::SerialError;
use super::format::SerialFormat;
use super::period::parse_time_zone;
use super::words::{Overflow, Reset};

/// Longest accepted serial `format`, in characters.
pub const MAX_FORMAT_LEN: usize = 64;

/// A sequence's serial-number settings, validated (docs/design.md, "Serial
/// numbers"): the format, when its counter starts again, in which time
/// zone, and what a counter too wide for `{seq:0N}` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SerialSettings {
    /// The parsed format, e.g. `ORD{yyyy}{MM}{dd}{seq:06}`.
    pub format: SerialFormat,
    /// When the counter starts again.
    pub reset: Reset,
    /// The IANA name of the time zone periods follow, in jiff's spelling.
    pub time_zone: String,
    /// What a counter past `{seq:0N}` does.
    pub overflow: Overflow,
}

impl serde::Serialize for SerialSettings {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("SerialSettings", 4)?;
        st.serialize_field("format", &self.format.to_string())?;
        st.serialize_field("reset", self.reset.as_str())?;
        st.serialize_field("time_zone", &self.time_zone)?;
        st.serialize_field("overflow", self.overflow.as_str())?;
        st.end()
    }
}

impl SerialSettings {
    /// Validates a whole setting: the format (at most [`MAX_FORMAT_LEN`]
    /// characters), that it carries the date tokens of `reset`, and the
    /// time zone's name.
    pub fn new(
        format: &str,
        reset: Reset,
        time_zone: &str,
        overflow: Overflow,
    ) -> Result<Self, SerialError> {
        let length = format.chars().count();
        if length > MAX_FORMAT_LEN {
            return Err(SerialError::TooLong {
                length,
                max: MAX_FORMAT_LEN,
            });
        }
        let format = SerialFormat::parse(format)?;
        format.check_reset(reset)?;
        let zone = parse_time_zone(time_zone)?;
        let time_zone = zone.iana_name().unwrap_or(time_zone).to_owned();
        Ok(SerialSettings {
            format,
            reset,
            time_zone,
            overflow,
        })
    }

    /// From the table's columns (`format`, `reset`, `time_zone`,
    /// `overflow`), checked as [`SerialSettings::new`] does.
    pub fn from_columns(
        format: &str,
        reset: &str,
        time_zone: &str,
        overflow: &str,
    ) -> Result<Self, SerialError> {
        SerialSettings::new(format, reset.parse()?, time_zone, overflow.parse()?)
    }

    /// The settings that fields as sent (a create, a PATCH, the CLI) make:
    /// each one left out is taken from `current` (the row's settings), or
    /// else its default (`never`, `UTC`, `refuse`). `None` when neither
    /// the fields nor `current` have a format.
    pub fn merge(
        format: Option<&str>,
        reset: Option<&str>,
        time_zone: Option<&str>,
        overflow: Option<&str>,
        current: Option<&SerialSettings>,
    ) -> Result<Option<SerialSettings>, SerialError> {
        let format = match (format, current) {
            (Some(f), _) => f.to_owned(),
            (None, Some(c)) => c.format.to_string(),
            (None, None) if reset.or(time_zone).or(overflow).is_some() => {
                return Err(SerialError::NeedsFormat)
            }
            (None, None) => return Ok(None),
        };
        let reset = match reset {
            Some(r) => r.parse()?,
            None => current.map_or(Reset::Never, |c| c.reset),
        };
        let overflow = match overflow {
            Some(o) => o.parse()?,
            None => current.map_or(Overflow::Refuse, |c| c.overflow),
        };
        let time_zone = time_zone
            .or(current.map(|c| c.time_zone.as_str()))
            .unwrap_or("UTC");
        SerialSettings::new(&format, reset, time_zone, overflow).map(Some)
    }

    /// Checks that a counter starting at `start` can be printed: under
    /// `overflow: refuse`, `start` must be within `{seq:0N}`'s capacity,
    /// or every request would be refused (a create, a PATCH, the CLI;
    /// rows already stored are served as they are).
    pub fn check_start(&self, start: i64) -> Result<(), SerialError> {
        match (self.overflow, self.format.capacity()) {
            (Overflow::Refuse, Some(capacity)) if u64::try_from(start).unwrap_or(0) > capacity => {
                Err(SerialError::StartBeyondCapacity {
                    start,
                    width: self.format.width().unwrap_or(0),
                    capacity,
                })
            }
            _ => Ok(()),
        }
    }

    /// The time zone (its name was validated).
    pub fn zone(&self) -> jiff::tz::TimeZone {
        parse_time_zone(&self.time_zone).unwrap_or(jiff::tz::TimeZone::UTC)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_past_the_capacity_is_refused_only_under_refuse() {
        let settings = |format: &str, overflow| {
            SerialSettings::new(format, Reset::Never, "UTC", overflow).unwrap()
        };
        let two = settings("X{seq:02}", Overflow::Refuse);
        assert_eq!(two.check_start(99), Ok(()));
        assert_eq!(
            two.check_start(100),
            Err(SerialError::StartBeyondCapacity {
                start: 100,
                width: 2,
                capacity: 99
            })
        );
        assert_eq!(
            settings("X{seq:02}", Overflow::Widen).check_start(1000),
            Ok(())
        );
        assert_eq!(
            settings("X{seq}", Overflow::Refuse).check_start(i64::MAX),
            Ok(())
        );
    }
}
