//! One reserved range of IDs, as a fetch installs it in a double buffer
//! (the claims go through the buffer's own cursor, `double.rs`).

/// A contiguous range of IDs `[first, first + len)` and its prefetch mark.
/// 24 bytes, `Copy`: every live sequence keeps two (current and next).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    first: i64,
    len: u64,
    /// Once this many IDs are claimed, the next segment should be fetched.
    prefetch_at: u64,
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
    /// No IDs (a sequence not loaded yet, or no next segment).
    pub const EMPTY: Segment = Segment {
        first: 0,
        len: 0,
        prefetch_at: 0,
    };

    /// A segment of `len` IDs starting at `first`, prefetching once `ratio`
    /// of it is used. `first + len - 1` must not overflow.
    pub fn new(first: i64, len: u64, ratio: f64) -> Self {
        Segment::with_prefetch_at(first, len, ((len as f64) * ratio).ceil() as u64)
    }

    /// A segment of `len` IDs starting at `first` whose prefetch mark is
    /// given as a count of claimed IDs: every take once the claims are past
    /// `prefetch_at` reports it ([`Taken::past_prefetch_mark`]; the buffer
    /// starts one fetch ahead however often it is told).
    /// [`Segment::new`] computes the mark from a ratio; the Rust client
    /// (`clients/rust`) places it on the ID whose taking starts the next
    /// lease's fetch. `first + len - 1` must not overflow.
    pub fn with_prefetch_at(first: i64, len: u64, prefetch_at: u64) -> Self {
        debug_assert!(len == 0 || first.checked_add(len as i64 - 1).is_some());
        Segment {
            first,
            len,
            prefetch_at,
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

    /// True for a segment with no IDs.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many claimed IDs pass the prefetch mark.
    pub fn prefetch_at(&self) -> u64 {
        self.prefetch_at
    }
}
