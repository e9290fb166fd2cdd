//! The period of an instant: which day, month or year of a sequence's time
//! zone a UTC instant falls in, with its key, its bounds as UTC instants and
//! the civil date its serials print. Calendar and time-zone rules (DST days
//! of 23 or 25 hours, month lengths, leap years, a midnight that a zone
//! skips) are jiff's, with its bundled IANA database; nothing here counts
//! hours or days by hand.

use jiff::civil::{Date, Time};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

use super::error::SerialError;
use super::words::Reset;

/// One period of a sequence's counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Period {
    /// Names the period among the sequence's periods: `20261130` (day),
    /// `202611` (month), `2026` (year), empty for `never`.
    pub key: String,
    /// The first instant of the period (local midnight of its first day,
    /// or the first instant after it where the zone skips that midnight);
    /// [`Timestamp::MIN`] for `never`.
    pub start: Timestamp,
    /// The first instant of the next period (exclusive end); `None` for
    /// `never`.
    pub end: Option<Timestamp>,
    /// The civil date the period's serials print: its first day (so a
    /// monthly serial's `{dd}` is `01`); for `never`, the local date of the
    /// instant asked about.
    pub date: Date,
}

/// An instant whose period cannot be computed: its period would begin or
/// end outside the range jiff represents (years -9999 to 9999).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no {reset} period around {instant} in {time_zone}: out of the supported range of dates")]
pub struct OutOfRange {
    /// The instant asked about.
    pub instant: Timestamp,
    /// Its reset period.
    pub reset: Reset,
    /// The zone's IANA name.
    pub time_zone: String,
}

/// The time zone of an IANA name (`UTC`, `Europe/Paris`, `America/New_York`),
/// from the database bundled in the binary, never the host's (so every
/// instance computes the same periods). Names are matched as jiff does,
/// ignoring ASCII case.
pub fn parse_time_zone(name: &str) -> Result<TimeZone, SerialError> {
    TimeZone::get(name).map_err(|_| SerialError::UnknownTimeZone {
        name: name.to_owned(),
    })
}

impl Period {
    /// The period of `instant` in `time_zone` for `reset`.
    pub fn of(
        instant: Timestamp,
        time_zone: &TimeZone,
        reset: Reset,
    ) -> Result<Period, OutOfRange> {
        let local = time_zone.to_datetime(instant).date();
        let out_of_range = || OutOfRange {
            instant,
            reset,
            time_zone: time_zone.iana_name().unwrap_or("?").to_owned(),
        };
        let (first, next, key) = match reset {
            Reset::Never => {
                return Ok(Period {
                    key: String::new(),
                    start: Timestamp::MIN,
                    end: None,
                    date: local,
                })
            }
            Reset::Day => (
                local,
                local.tomorrow().map_err(|_| out_of_range())?,
                format!("{:04}{:02}{:02}", local.year(), local.month(), local.day()),
            ),
            Reset::Month => {
                let first = local.first_of_month();
                let next = first.checked_add(1.month()).map_err(|_| out_of_range())?;
                (
                    first,
                    next,
                    format!("{:04}{:02}", local.year(), local.month()),
                )
            }
            Reset::Year => {
                let first = local.first_of_year();
                let next = first.checked_add(1.year()).map_err(|_| out_of_range())?;
                (first, next, format!("{:04}", local.year()))
            }
        };
        let start = midnight(time_zone, first).ok_or_else(out_of_range)?;
        let end = midnight(time_zone, next).ok_or_else(out_of_range)?;
        Ok(Period {
            key,
            start,
            end: Some(end),
            date: first,
        })
    }

    /// Whether `instant` falls in this period.
    pub fn contains(&self, instant: Timestamp) -> bool {
        self.start <= instant && self.end.is_none_or(|end| instant < end)
    }

    /// The period's length; `None` for `never`.
    pub fn length(&self) -> Option<jiff::SignedDuration> {
        self.end.map(|end| end.duration_since(self.start))
    }
}

/// The first instant of `date` in `time_zone`: its midnight, or where the
/// zone skips midnight (a gap), the first instant after the gap (jiff's
/// "compatible" disambiguation; a repeated midnight resolves to its first
/// occurrence).
fn midnight(time_zone: &TimeZone, date: Date) -> Option<Timestamp> {
    time_zone
        .to_timestamp(date.to_datetime(Time::midnight()))
        .ok()
}

#[cfg(test)]
mod tests {
    use jiff::civil::date;
    use jiff::SignedDuration;
    use proptest::prelude::*;

    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn tz(name: &str) -> TimeZone {
        parse_time_zone(name).unwrap()
    }

    fn period(instant: &str, zone: &str, reset: Reset) -> Period {
        Period::of(ts(instant), &tz(zone), reset).unwrap()
    }

    #[test]
    fn an_unknown_time_zone_is_named() {
        let e = parse_time_zone("Mars/Olympus_Mons").unwrap_err();
        assert_eq!(
            e,
            SerialError::UnknownTimeZone {
                name: "Mars/Olympus_Mons".into()
            }
        );
        assert!(e.to_string().contains("`Mars/Olympus_Mons`"), "{e}");
        assert!(parse_time_zone("").is_err());
        assert!(parse_time_zone("EST5EDT,M3.2.0,M11.1.0").is_err());
    }

    #[test]
    fn known_time_zones_come_from_the_bundled_database() {
        // Only the bundled database: no dependency switched on jiff's
        // system-zoneinfo features (they would unify into seqd's build).
        assert_eq!(
            format!("{:?}", jiff::tz::db()),
            "TimeZoneDatabase(Bundled(available))"
        );
        for name in [
            "UTC",
            "Europe/Paris",
            "America/New_York",
            "Asia/Kolkata",
            "Etc/GMT+5",
        ] {
            assert_eq!(tz(name).iana_name(), Some(name));
        }
    }

    #[test]
    fn a_day_in_utc_runs_from_midnight_to_midnight() {
        let before = period("2026-11-30T23:59:59.999999999Z", "UTC", Reset::Day);
        assert_eq!(before.key, "20261130");
        assert_eq!(before.start, ts("2026-11-30T00:00:00Z"));
        assert_eq!(before.end, Some(ts("2026-12-01T00:00:00Z")));
        assert_eq!(before.date, date(2026, 11, 30));
        let after = period("2026-12-01T00:00:00Z", "UTC", Reset::Day);
        assert_eq!(after.key, "20261201");
        assert_eq!(after.start, before.end.unwrap());
        assert_eq!(after.length(), Some(SignedDuration::from_hours(24)));
    }

    #[test]
    fn month_end_and_year_end_in_utc() {
        let nov = period("2026-11-30T23:59:59Z", "UTC", Reset::Month);
        assert_eq!(nov.key, "202611");
        assert_eq!(nov.start, ts("2026-11-01T00:00:00Z"));
        assert_eq!(nov.end, Some(ts("2026-12-01T00:00:00Z")));
        assert_eq!(nov.date, date(2026, 11, 1));
        assert_eq!(
            period("2026-12-01T00:00:00Z", "UTC", Reset::Month).key,
            "202612"
        );

        let y2026 = period("2026-12-31T23:59:59Z", "UTC", Reset::Year);
        assert_eq!(y2026.key, "2026");
        assert_eq!(y2026.start, ts("2026-01-01T00:00:00Z"));
        assert_eq!(y2026.end, Some(ts("2027-01-01T00:00:00Z")));
        assert_eq!(y2026.date, date(2026, 1, 1));
        let y2027 = period("2027-01-01T00:00:00Z", "UTC", Reset::Year);
        assert_eq!(
            (y2027.key.as_str(), y2027.start),
            ("2027", y2026.end.unwrap())
        );
        let dec31 = period("2026-12-31T23:59:59Z", "UTC", Reset::Day);
        let jan1 = period("2027-01-01T00:00:00Z", "UTC", Reset::Day);
        assert_eq!(
            (dec31.key.as_str(), jan1.key.as_str()),
            ("20261231", "20270101")
        );
    }

    #[test]
    fn new_york_midnight_is_five_hours_after_utc_midnight_in_winter() {
        // 04:59Z is still the 30th in New York (UTC-5).
        let before = period("2026-12-01T04:59:59Z", "America/New_York", Reset::Day);
        assert_eq!(before.key, "20261130");
        assert_eq!(before.start, ts("2026-11-30T05:00:00Z"));
        assert_eq!(before.end, Some(ts("2026-12-01T05:00:00Z")));
        let after = period("2026-12-01T05:00:00Z", "America/New_York", Reset::Day);
        assert_eq!(after.key, "20261201");
        // Month end and year end follow the zone too.
        let nov = period("2026-12-01T04:59:59Z", "America/New_York", Reset::Month);
        assert_eq!(nov.key, "202611");
        assert_eq!(nov.end, Some(ts("2026-12-01T05:00:00Z")));
        let y = period("2027-01-01T04:59:59Z", "America/New_York", Reset::Year);
        assert_eq!(y.key, "2026");
        assert_eq!(y.end, Some(ts("2027-01-01T05:00:00Z")));
        assert_eq!(
            period("2027-01-01T05:00:00Z", "America/New_York", Reset::Year).key,
            "2027"
        );
    }

    #[test]
    fn the_spring_forward_day_in_new_york_is_23_hours() {
        let p = period("2026-03-08T12:00:00Z", "America/New_York", Reset::Day);
        assert_eq!(p.key, "20260308");
        assert_eq!(p.start, ts("2026-03-08T05:00:00Z")); // midnight EST
        assert_eq!(p.end, Some(ts("2026-03-09T04:00:00Z"))); // midnight EDT
        assert_eq!(p.length(), Some(SignedDuration::from_hours(23)));
        assert_eq!(
            period("2026-03-09T03:59:59Z", "America/New_York", Reset::Day).key,
            "20260308"
        );
        assert_eq!(
            period("2026-03-09T04:00:00Z", "America/New_York", Reset::Day).key,
            "20260309"
        );
    }

    #[test]
    fn the_fall_back_day_in_new_york_is_25_hours() {
        let p = period("2026-11-01T12:00:00Z", "America/New_York", Reset::Day);
        assert_eq!(p.key, "20261101");
        assert_eq!(p.start, ts("2026-11-01T04:00:00Z")); // midnight EDT
        assert_eq!(p.end, Some(ts("2026-11-02T05:00:00Z"))); // midnight EST
        assert_eq!(p.length(), Some(SignedDuration::from_hours(25)));
        // Both 01:30s of that night (05:30Z EDT, 06:30Z EST) are the 1st.
        for t in ["2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z"] {
            assert_eq!(period(t, "America/New_York", Reset::Day).key, "20261101");
        }
        // The month and the year that hold a DST day are one hour off 24 h
        // multiples but begin and end at local midnight.
        let mar = period("2026-03-15T00:00:00Z", "America/New_York", Reset::Month);
        assert_eq!(mar.start, ts("2026-03-01T05:00:00Z"));
        assert_eq!(mar.end, Some(ts("2026-04-01T04:00:00Z")));
        assert_eq!(mar.length(), Some(SignedDuration::from_hours(31 * 24 - 1)));
    }

    #[test]
    fn february_29_2028_is_a_day_and_february_2028_has_29() {
        let leap = period("2028-02-29T12:00:00Z", "UTC", Reset::Day);
        assert_eq!(leap.key, "20280229");
        assert_eq!(leap.end, Some(ts("2028-03-01T00:00:00Z")));
        let feb = period("2028-02-10T00:00:00Z", "UTC", Reset::Month);
        assert_eq!(feb.length(), Some(SignedDuration::from_hours(29 * 24)));
        let feb_2027 = period("2027-02-10T00:00:00Z", "UTC", Reset::Month);
        assert_eq!(feb_2027.length(), Some(SignedDuration::from_hours(28 * 24)));
        let y2028 = period("2028-06-01T00:00:00Z", "UTC", Reset::Year);
        assert_eq!(y2028.length(), Some(SignedDuration::from_hours(366 * 24)));
        // In New York the 29th starts at 05:00Z.
        let ny = period("2028-03-01T04:59:59Z", "America/New_York", Reset::Day);
        assert_eq!((ny.key.as_str(), ny.date), ("20280229", date(2028, 2, 29)));
    }

    #[test]
    fn a_zone_that_skips_midnight_starts_the_day_after_the_gap() {
        // Chile springs forward at 24:00 (2026-09-06 00:00 -04 becomes
        // 01:00 -03): the 6th starts at 04:00Z, its first local hour is
        // 01:00, and it lasts 23 hours.
        let p = period("2026-09-06T12:00:00Z", "America/Santiago", Reset::Day);
        assert_eq!(p.key, "20260906");
        assert_eq!(p.start, ts("2026-09-06T04:00:00Z"));
        assert_eq!(p.end, Some(ts("2026-09-07T03:00:00Z")));
        assert_eq!(p.length(), Some(SignedDuration::from_hours(23)));
        let prev = period("2026-09-06T03:59:59Z", "America/Santiago", Reset::Day);
        assert_eq!(prev.key, "20260905");
        assert_eq!(prev.end, Some(p.start));
    }

    #[test]
    fn never_has_one_endless_period_that_prints_the_local_date() {
        let p = period("2026-12-01T03:00:00Z", "America/New_York", Reset::Never);
        assert_eq!(p.key, "");
        assert_eq!(p.start, Timestamp::MIN);
        assert_eq!(p.end, None);
        assert_eq!(p.date, date(2026, 11, 30));
        assert!(p.contains(Timestamp::MAX));
        assert_eq!(p.length(), None);
    }

    #[test]
    fn the_last_representable_year_is_out_of_range() {
        let e = Period::of(ts("9999-06-01T00:00:00Z"), &tz("UTC"), Reset::Year).unwrap_err();
        assert!(e.to_string().contains("out of the supported range"), "{e}");
    }

    const ZONES: &[&str] = &[
        "UTC",
        "America/New_York",
        "America/Santiago",
        "Europe/London",
        "Australia/Lord_Howe",
        "Asia/Kathmandu",
        "Pacific/Apia",
    ];

    proptest! {
        /// For instants from 1970 to 2100: the period holds the instant, and
        /// the period of its end is the next one (a different key, starting
        /// where this one ends).
        #[test]
        fn an_instant_lies_in_its_period_and_the_end_opens_the_next(
            seconds in 0i64..4_102_444_800,
            zone in proptest::sample::select(ZONES),
            reset in proptest::sample::select(&[Reset::Day, Reset::Month, Reset::Year][..]),
        ) {
            let zone = tz(zone);
            let instant = Timestamp::from_second(seconds).unwrap();
            let p = Period::of(instant, &zone, reset).unwrap();
            let end = p.end.unwrap();
            prop_assert!(p.start <= instant && instant < end, "{p:?} {instant}");
            prop_assert!(p.contains(instant));
            let next = Period::of(end, &zone, reset).unwrap();
            prop_assert_ne!(&next.key, &p.key);
            prop_assert!(next.key > p.key);
            prop_assert_eq!(next.start, end);
            // The last instant before the end is still this period.
            let last = end.checked_sub(SignedDuration::from_nanos(1)).unwrap();
            prop_assert_eq!(Period::of(last, &zone, reset).unwrap(), p);
        }
    }
}
