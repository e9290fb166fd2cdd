//! One reserved range of IDs and its lock-free cursor.

use super::sync::{AtomicU64, Ordering};
use std::time::Duration;

/// A contiguous range of IDs `[first, first + len)` handed out by an atomic
/// cursor. Taking IDs is one `fetch_add`; no lock.
#[derive(Debug)]
pub struct Segment {
    first: i64,
    len: u64,
    /// IDs claimed so far. May grow past `len` once the segment is empty
    /// (late takers add to it and get nothing); readers clamp it.
    used: AtomicU64,
    /// Once `used` passes this offset, the next segment should be fetched.
    prefetch_at: u64,
    /// When the segment was installed, on the allocator's clock.
    installed_at: Duration,
}

/// A run of consecutive IDs `first..=last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdRange {
    /// First ID of the run.
    pub first: i64,
    /// Last ID of the run (inclusive).
    pub last: i64,
}

impl IdRange {
    /// How many IDs the run holds.
    pub fn len(&self) -> u64 {
        (self.last - self.first) as u64 + 1
    }

    /// Always false: a run holds at least one ID.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The IDs of the run in increasing order.
    pub fn iter(&self) -> std::ops::RangeInclusive<i64> {
        self.first..=self.last
    }
}

/// What one take from a segment produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// The IDs obtained, if any (at most the number asked for).
    pub range: Option<IdRange>,
    /// True when the take moved the cursor past the prefetch mark.
    pub past_prefetch_mark: bool,
}

impl Segment {
    /// A segment of `len` IDs starting at `first`, prefetching once `ratio`
    /// of it is used. `first + len - 1` must not overflow.
    pub fn new(first: i64, len: u64, ratio: f64, installed_at: Duration) -> Self {
        debug_assert!(len == 0 || first.checked_add(len as i64 - 1).is_some());
        let prefetch_at = ((len as f64) * ratio).ceil() as u64;
        Segment {
            first,
            len,
            used: AtomicU64::new(0),
            prefetch_at,
            installed_at,
        }
    }

    /// An empty placeholder (a sequence not loaded yet).
    pub fn empty(installed_at: Duration) -> Self {
        Segment::new(0, 0, 0.0, installed_at)
    }

    /// Claims up to `n` IDs. Exactly one caller can get a partial run (the one
    /// whose claim crosses the end); every later caller gets `None`.
    #[inline]
    pub fn take(&self, n: u64) -> Taken {
        let off = self.used.fetch_add(n, Ordering::Relaxed);
        let past_prefetch_mark = off.saturating_add(n) > self.prefetch_at;
        if off >= self.len {
            return Taken {
                range: None,
                past_prefetch_mark,
            };
        }
        let got = n.min(self.len - off);
        let first = self.first + off as i64;
        Taken {
            range: Some(IdRange {
                first,
                last: first + (got as i64 - 1),
            }),
            past_prefetch_mark,
        }
    }

    /// True once every ID has been claimed.
    pub fn is_exhausted(&self) -> bool {
        self.used.load(Ordering::Relaxed) >= self.len
    }

    /// First ID of the segment.
    pub fn first(&self) -> i64 {
        self.first
    }

    /// Last ID of the segment (`first - 1` when empty).
    pub fn last(&self) -> i64 {
        if self.len == 0 {
            self.first - 1
        } else {
            self.first + (self.len as i64 - 1)
        }
    }

    /// Number of IDs in the segment.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for a placeholder with no IDs.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// IDs claimed so far (clamped to the length).
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed).min(self.len)
    }

    /// IDs still available.
    pub fn remaining(&self) -> u64 {
        self.len - self.used()
    }

    /// When the segment was installed, on the allocator's clock.
    pub fn installed_at(&self) -> Duration {
        self.installed_at
    }

    /// The offset past which the next segment should be fetched.
    pub fn prefetch_at(&self) -> u64 {
        self.prefetch_at
    }
}

/// A point-in-time view of a segment in a double buffer: its bounds and
/// how many of its IDs were claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentState {
    first: i64,
    len: u64,
    used: u64,
}

impl SegmentState {
    /// `len` IDs from `first`, `used` of them claimed.
    pub fn new(first: i64, len: u64, used: u64) -> Self {
        SegmentState {
            first,
            len,
            used: used.min(len),
        }
    }

    /// First ID of the segment.
    pub fn first(&self) -> i64 {
        self.first
    }

    /// Last ID of the segment (`first - 1` when empty).
    pub fn last(&self) -> i64 {
        if self.len == 0 {
            self.first - 1
        } else {
            self.first + (self.len as i64 - 1)
        }
    }

    /// Number of IDs in the segment.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for a placeholder with no IDs.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// IDs claimed so far.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// IDs still available.
    pub fn remaining(&self) -> u64 {
        self.len - self.used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_hands_out_consecutive_ids_then_nothing() {
        let s = Segment::new(11, 5, 0.1, Duration::ZERO);
        assert_eq!(
            s.take(2).range,
            Some(IdRange {
                first: 11,
                last: 12
            })
        );
        assert_eq!(
            s.take(1).range,
            Some(IdRange {
                first: 13,
                last: 13
            })
        );
        // crosses the end: partial run
        assert_eq!(
            s.take(5).range,
            Some(IdRange {
                first: 14,
                last: 15
            })
        );
        assert_eq!(s.take(1).range, None);
        assert!(s.is_exhausted());
        assert_eq!(s.remaining(), 0);
    }

    #[test]
    fn prefetch_mark_is_ten_percent() {
        let s = Segment::new(1, 100, 0.1, Duration::ZERO);
        for _ in 0..10 {
            assert!(!s.take(1).past_prefetch_mark);
        }
        assert!(
            s.take(1).past_prefetch_mark,
            "the 11th ID passes the 10% mark"
        );
    }

    #[test]
    fn segment_ending_at_i64_max_does_not_overflow() {
        let s = Segment::new(i64::MAX - 2, 3, 0.1, Duration::ZERO);
        assert_eq!(s.last(), i64::MAX);
        assert_eq!(
            s.take(10).range,
            Some(IdRange {
                first: i64::MAX - 2,
                last: i64::MAX
            })
        );
        assert_eq!(s.take(1).range, None);
    }

    #[test]
    fn empty_placeholder_gives_nothing() {
        let s = Segment::empty(Duration::ZERO);
        assert_eq!(s.take(1).range, None);
        assert!(s.is_exhausted());
    }
}
