//! Which period rows `seqd sequences purge-periods` deletes: those whose
//! period ended longer ago than `--older-than` and longer ago than
//! [`PURGE_MARGIN`], never the current period's (docs/design.md, "Serial
//! numbers"). Pure: the rows, the zone and the instant are handed in.

use jiff::civil::{Date, Time};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use crate::domain::serial::Period;
use crate::domain::serial::Reset;

/// How long after its end a period's row is kept, whatever `--older-than`
/// says. An instance whose clock is behind still sees that period as the
/// current one; if its row were gone it would create it again, at `start`,
/// and print that period's serials a second time. A day is far above the
/// clock skew seqd tolerates anywhere else (`--snowflake-clock-tolerance` is
/// at most 1 m) and covers a host clock off by a whole zone offset (up to
/// 14 h: a hardware clock kept in local time); keeping one more row a day
/// costs nothing.
pub const PURGE_MARGIN: SignedDuration = SignedDuration::from_hours(24);

/// What to do with each period row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgePlan {
    /// Keys to delete, in the order given.
    pub purge: Vec<String>,
    /// Keys kept: the current period, periods not old enough, and keys that
    /// name no period (a counter that never resets).
    pub keep: Vec<String>,
    /// Of `keep`, the keys kept only because their period ended less than
    /// [`PURGE_MARGIN`] ago (`--older-than` alone would delete them).
    pub margin: Vec<String>,
}

/// The plan for `keys` of a sequence whose periods follow `reset` in
/// `zone`, at `now`: a key goes when its period ended at least
/// `older_than` and at least [`PURGE_MARGIN`] before `now`. A key is read by
/// its length (`yyyyMMdd`, `yyyyMM`, `yyyy`), so rows left by an earlier
/// `reset` are judged by their own period. The current period's key is
/// always kept, whatever `older_than` says.
pub fn plan_purge(
    keys: &[String],
    reset: Reset,
    zone: &TimeZone,
    now: Timestamp,
    older_than: SignedDuration,
) -> PurgePlan {
    let current = Period::of(now, zone, reset).ok().map(|p| p.key);
    let mut plan = PurgePlan::default();
    for key in keys {
        let ended = (current.as_deref() != Some(key.as_str()))
            .then(|| end_of(key, zone))
            .flatten()
            .filter(|end| *end <= now)
            .map(|end| now.duration_since(end));
        match ended {
            Some(ago) if ago >= older_than && ago >= PURGE_MARGIN => plan.purge.push(key.clone()),
            Some(ago) if ago >= older_than => {
                plan.margin.push(key.clone());
                plan.keep.push(key.clone());
            }
            _ => plan.keep.push(key.clone()),
        }
    }
    plan
}

/// The end of the period a key names, in `zone`; `None` for the empty key
/// (never resets) or a key that is not a date.
pub fn end_of(key: &str, zone: &TimeZone) -> Option<Timestamp> {
    if !key.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let number = |range: std::ops::Range<usize>| key.get(range)?.parse::<i8>().ok();
    let year: i16 = key.get(0..4)?.parse().ok()?;
    let (date, reset) = match key.len() {
        8 => (
            Date::new(year, number(4..6)?, number(6..8)?).ok()?,
            Reset::Day,
        ),
        6 => (Date::new(year, number(4..6)?, 1).ok()?, Reset::Month),
        4 => (Date::new(year, 1, 1).ok()?, Reset::Year),
        _ => return None,
    };
    // Noon of the period's first day is inside it whatever the zone's rules.
    let inside = zone
        .to_timestamp(date.to_datetime(Time::new(12, 0, 0, 0).ok()?))
        .ok()?;
    let period = Period::of(inside, zone, reset).ok()?;
    (period.key == key).then_some(period.end).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn periods_older_than_the_bound_go_and_the_current_one_stays() {
        let utc = TimeZone::UTC;
        let now: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let all = keys(&[
            "20251026", "20251027", "20261129", "20261130", "20261201", "",
        ]);
        let plan = plan_purge(
            &all,
            Reset::Day,
            &utc,
            now,
            SignedDuration::from_hours(400 * 24),
        );
        // 2025-10-27 ended 2025-10-28T00:00Z: 399 days and 10 hours ago.
        assert_eq!(plan.purge, keys(&["20251026"]));
        assert_eq!(
            plan.keep,
            keys(&["20251027", "20261129", "20261130", "20261201", ""])
        );
        assert!(plan.margin.is_empty(), "{plan:?}");
        // With no bound at all, everything over goes, never today's nor
        // yesterday's, which ended 10 h ago: within the margin.
        let plan = plan_purge(&all, Reset::Day, &utc, now, SignedDuration::ZERO);
        assert_eq!(plan.purge, keys(&["20251026", "20251027", "20261129"]));
        assert_eq!(plan.keep, keys(&["20261130", "20261201", ""]));
        assert_eq!(plan.margin, keys(&["20261130"]));
    }

    #[test]
    fn a_period_goes_only_once_the_margin_has_passed_since_its_end() {
        let utc = TimeZone::UTC;
        let all = keys(&["20261130"]);
        // 2026-11-30 ended 2026-12-01T00:00Z.
        for (now, gone) in [
            ("2026-12-01T00:00:01Z", false),
            ("2026-12-01T23:59:59Z", false),
            ("2026-12-02T00:00:00Z", true),
        ] {
            let now: Timestamp = now.parse().unwrap();
            let plan = plan_purge(&all, Reset::Day, &utc, now, SignedDuration::ZERO);
            assert_eq!(plan.purge.is_empty(), !gone, "{now}: {plan:?}");
            assert_eq!(plan.margin.is_empty(), gone, "{now}: {plan:?}");
        }
    }

    #[test]
    fn the_current_period_is_kept_even_with_a_negative_bound() {
        let zone = TimeZone::get("Asia/Tokyo").unwrap();
        // 2026-12-01T16:00Z is already the 2nd in Tokyo.
        let now: Timestamp = "2026-12-01T16:00:00Z".parse().unwrap();
        let all = keys(&["20261130", "20261201", "20261202", "20261203"]);
        let plan = plan_purge(
            &all,
            Reset::Day,
            &zone,
            now,
            SignedDuration::from_hours(-1000),
        );
        // The 1st ended an hour ago: kept by the margin.
        assert_eq!(plan.purge, keys(&["20261130"]));
        assert_eq!(plan.keep, keys(&["20261201", "20261202", "20261203"]));
        assert_eq!(plan.margin, keys(&["20261201"]));
    }

    #[test]
    fn keys_are_read_by_their_own_length_and_nonsense_is_kept() {
        let utc = TimeZone::UTC;
        let now: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let all = keys(&["2024", "202411", "20241131", "2026", "abc", "123"]);
        let plan = plan_purge(&all, Reset::Year, &utc, now, SignedDuration::from_hours(24));
        assert_eq!(plan.purge, keys(&["2024", "202411"]));
        assert_eq!(plan.keep, keys(&["20241131", "2026", "abc", "123"]));
    }

    #[test]
    fn a_period_ends_at_the_zones_midnight() {
        let ny = TimeZone::get("America/New_York").unwrap();
        let end = end_of("20261101", &ny).unwrap();
        assert_eq!(end, "2026-11-02T05:00:00Z".parse::<Timestamp>().unwrap());
        let end = end_of("202603", &ny).unwrap();
        assert_eq!(end, "2026-04-01T04:00:00Z".parse::<Timestamp>().unwrap());
    }
}
