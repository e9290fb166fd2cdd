//! Throttled logging of failing requests: during a database outage or a
//! clock rollback every request fails the same way, and one log line each
//! would bury the log (44,102 lines in 4 s were seen).
//!
//! Each (event, sequence) logs its first occurrence, then at most one line
//! per [`LOG_INTERVAL`], carrying `suppressed`: how many occurrences were not
//! logged since the previous line. The metrics still count every request.
//! At most [`MAX_KEYS`] keys are tracked: past that, windows with nothing
//! suppressed and older than the interval are dropped, and if none is, new
//! sequences share one key per event (logged without a sequence).
//!
//! Only failing requests reach this; an ID served from memory never does.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// At most one line per (event, sequence) per this interval.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Most (event, sequence) keys tracked at once.
pub const MAX_KEYS: usize = 1000;

/// The key of events without a sequence, and of sequences past [`MAX_KEYS`]
/// (never a valid sequence name).
const SHARED: &str = "";

/// The log windows of (event, sequence) keys; see the module documentation.
#[derive(Debug)]
pub struct LogThrottle {
    interval: Duration,
    max_keys: usize,
    state: Mutex<Windows>,
}

#[derive(Debug, Default)]
struct Windows {
    /// Event -> sequence (or [`SHARED`]) -> window. Nested, so that a lookup
    /// borrows the name and allocates nothing.
    by_event: HashMap<&'static str, HashMap<Box<str>, Window>>,
    /// Keys held in `by_event`.
    keys: usize,
    /// When spent windows were last dropped (at most once per interval, so
    /// a full map costs no scan per failing request).
    pruned_at: Option<Instant>,
}

#[derive(Debug)]
struct Window {
    logged_at: Instant,
    suppressed: u64,
}

impl Window {
    /// `Some(suppressed since the last line)` when this occurrence is logged.
    fn occur(&mut self, now: Instant, interval: Duration) -> Option<u64> {
        if now.saturating_duration_since(self.logged_at) < interval {
            self.suppressed += 1;
            return None;
        }
        self.logged_at = now;
        Some(std::mem::take(&mut self.suppressed))
    }

    /// Nothing would be lost by forgetting it.
    fn is_spent(&self, now: Instant, interval: Duration) -> bool {
        self.suppressed == 0 && now.saturating_duration_since(self.logged_at) >= interval
    }
}

impl LogThrottle {
    /// A throttle logging each key at most once per `interval`, tracking at
    /// most `max_keys` keys.
    pub fn new(interval: Duration, max_keys: usize) -> Self {
        LogThrottle {
            interval,
            max_keys,
            state: Mutex::new(Windows::default()),
        }
    }

    /// Records one occurrence of `event` for `sequence` at `now`: `Some(n)`
    /// when it is to be logged, `n` being the occurrences not logged since
    /// the key's previous line; `None` when it is to be left out.
    pub fn admit(&self, event: &'static str, sequence: Option<&str>, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut name = sequence.unwrap_or(SHARED);
        let known = state
            .by_event
            .get(event)
            .is_some_and(|w| w.contains_key(name));
        if !known && state.keys >= self.max_keys {
            state.forget_spent(now, self.interval);

            if state.keys >= self.max_keys {
                name = SHARED;
            }
        }
        let windows = state.by_event.entry(event).or_default();
        if let Some(window) = windows.get_mut(name) {
            return window.occur(now, self.interval);
        }
        windows.insert(
            name.into(),
            Window {
                logged_at: now,
                suppressed: 0,
            },
        );
        state.keys += 1;
        Some(0)
    }

    /// Keys tracked now.
    pub fn keys(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys
    }
}

impl Windows {
    fn forget_spent(&mut self, now: Instant, interval: Duration) {
        if self
            .pruned_at
            .is_some_and(|t| now.saturating_duration_since(t) < interval)
        {
            return;
        }
        self.pruned_at = Some(now);
        for windows in self.by_event.values_mut() {
            windows.retain(|_, w| !w.is_spent(now, interval));
        }
        self.keys = self.by_event.values().map(HashMap::len).sum();
    }
}

/// The process's throttle, on tokio's clock (so tests can pause it).
pub fn admit(event: &'static str, sequence: Option<&str>) -> Option<u64> {
    static GLOBAL: OnceLock<LogThrottle> = OnceLock::new();
    GLOBAL
        .get_or_init(|| LogThrottle::new(LOG_INTERVAL, MAX_KEYS))
        .admit(event, sequence, Instant::now())
}

/// Logs `message` at `level` through the process's throttle, keyed by the
/// message and `sequence` (an `Option<&str>`), with a `suppressed` field:
/// `throttled!(warn, "storage unavailable", None, error = %detail)`.
macro_rules! throttled {
    ($level:ident, $message:literal, $sequence:expr $(, $($field:tt)+)?) => {
        if let Some(suppressed) = $crate::log_throttle::admit($message, $sequence) {
            tracing::$level!(suppressed, $($($field)+,)? $message);
        }
    };
}
pub(crate) use throttled;

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn a_key_logs_first_then_once_per_interval_with_the_count() {
        let t = LogThrottle::new(10 * SEC, 100);
        let start = Instant::now();
        assert_eq!(t.admit("e", Some("a"), start), Some(0));
        for i in 1..=500u32 {
            assert_eq!(t.admit("e", Some("a"), start + i * SEC / 100), None);
        }
        assert_eq!(t.admit("e", Some("b"), start), Some(0), "keys are separate");
        assert_eq!(
            t.admit("other", Some("a"), start),
            Some(0),
            "events are separate"
        );
        assert_eq!(t.admit("e", Some("a"), start + 10 * SEC), Some(500));
        assert_eq!(t.admit("e", Some("a"), start + 11 * SEC), None);
        assert_eq!(t.admit("e", Some("a"), start + 20 * SEC), Some(1));
        assert_eq!(t.admit("e", None, start), Some(0));
        assert_eq!(t.admit("e", None, start), None);
    }

    #[test]
    fn keys_stay_bounded_and_later_sequences_share_one() {
        let t = LogThrottle::new(10 * SEC, 1000);
        let start = Instant::now();
        let names: Vec<String> = (0..5000).map(|i| format!("s{i}")).collect();
        let logged = names
            .iter()
            .filter(|n| t.admit("e", Some(n), start).is_some())
            .count();
        assert_eq!(t.keys(), 1001, "1000 sequences and the shared key");
        assert_eq!(logged, 1001, "the first 1000, then one shared line");
        // Once windows are spent they make room again.
        let later = start + 10 * SEC;
        for n in &names[..1000] {
            assert_eq!(t.admit("e", Some(n), later), Some(0));
        }
        assert_eq!(
            t.admit("e", Some("fresh"), later + SEC),
            Some(3999),
            "full again: the shared key logs what the others had"
        );
        assert!(t.keys() <= 1001);
    }
}
