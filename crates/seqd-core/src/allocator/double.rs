//! The synchronous heart of a sequence's buffer: the current segment, the
//! next one, and the switch between them. No async, no I/O: the model-checked
//! part of the allocator (see `tests/loom_double.rs`).
//!
//! The current segment lives inline in the buffer as two atomics, `cursor`
//! (the next ID to hand out) and `end` (one past its last ID), so taking IDs
//! reads the buffer's own cache line and nothing else: no pointer to a
//! segment, no reference count, no guard. A take loads `cursor` and `end` and
//! moves `cursor` forward with one compare-and-swap; it never moves it past
//! `end`. Only when the current segment is used up does a caller take the
//! mutex to make the next segment current: the switch.
//!
//! Why a stale `end` cannot hand out an ID twice or an ID not reserved:
//! `cursor` only ever grows, because every segment starts above the previous
//! one (the buffer installs only ranges above what it reserved before), so a
//! compare-and-swap from a value `c` succeeds only while `c` is still the
//! cursor of the segment it was read from, and no value recurs. The switch
//! stores the new `cursor` before the new `end` (release); a taker that read
//! the new `end` (acquire) therefore finds the new `cursor` in its
//! compare-and-swap, which fails if it still holds an old value. A taker that
//! read an old `end` with a new `cursor` sees `cursor >= end`: empty, and
//! goes to the slow path. docs/design.md, "The double buffer".
//!
//! IDs are at least 0 here (the buffer never installs lower ones), so they
//! and the end of a segment ending at `i64::MAX` fit an `u64`.

use super::segment::{IdRange, Segment, Taken};
use super::sync::{AtomicBool, AtomicU64, Mutex, Ordering};

/// Current + next segment. See the module docs.
pub struct DoubleBuffer {
    /// The next ID of the current segment (as `u64`); `end` once used up.
    cursor: AtomicU64,
    /// One past the last ID of the current segment.
    end: AtomicU64,
    /// Once `cursor` passes this, the next segment should be fetched (a hint:
    /// read without ordering, it may lag a switch by one take).
    prefetch_at: AtomicU64,
    /// Mirror of `slow.next.is_some()` readable without the mutex.
    has_next: AtomicBool,
    /// What only switches, installs and monitoring touch. Its mutex also
    /// serializes switches.
    slow: Mutex<Slow>,
}

/// The part of the buffer behind the mutex.
struct Slow {
    /// The current segment (its cursor is `DoubleBuffer::cursor`).
    current: Segment,
    /// The segment fetched ahead, if `len > 0` (fetched segments are never
    /// empty; a flag would cost 8 bytes per sequence).
    next: Segment,
    /// IDs of the segments already switched away from (all claimed), and
    /// IDs handed out outside the segments ([`DoubleBuffer::count_outside`]).
    retired: u64,
}

/// What [`DoubleBuffer::take_run`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// The run, and whether its claim passed the segment's prefetch mark.
    Got {
        /// The IDs, `n` of them.
        run: IdRange,
        /// True when the claim moved the cursor past the prefetch mark.
        past_prefetch_mark: bool,
    },
    /// No next segment, and the current one cannot hold the run: a fetch
    /// is needed. Nothing was claimed.
    Dry,
    /// The next segment holds fewer than `n` IDs: no segment of this
    /// length can serve the run. Nothing was claimed.
    TooShort {
        /// The next segment's length.
        len: u64,
    },
}

/// What [`DoubleBuffer::take`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// IDs still wanted: both segments ran dry first (0 when done).
    pub missing: u64,
    /// True when the last claim passed its segment's prefetch mark.
    pub past_prefetch_mark: bool,
}

impl Slow {
    /// Takes the segment fetched ahead, if any.
    fn take_next(&mut self) -> Option<Segment> {
        (!self.next.is_empty()).then(|| std::mem::replace(&mut self.next, Segment::EMPTY))
    }
}

/// One past the last ID of `seg`, as the cursor counts.
fn end_of(seg: &Segment) -> u64 {
    to_cursor(seg.first()) + seg.len()
}

/// The cursor value past which the next segment should be fetched.
fn prefetch_id(seg: &Segment) -> u64 {
    to_cursor(seg.first()) + seg.prefetch_at()
}

/// The run of `n` IDs from the cursor value `c`.
fn run_at(c: u64, n: u64) -> IdRange {
    let first = c as i64;
    IdRange {
        first,
        last: first + (n as i64 - 1),
    }
}

/// `id` as the cursor holds it. Segments hold IDs >= 0 only.
fn to_cursor(id: i64) -> u64 {
    debug_assert!(id >= 0, "segments hold IDs >= 0");
    id.max(0) as u64
}

impl DoubleBuffer {
    /// A buffer serving `initial` (often an empty placeholder) with no next.
    pub fn new(initial: Segment) -> Self {
        DoubleBuffer {
            cursor: AtomicU64::new(to_cursor(initial.first())),
            end: AtomicU64::new(end_of(&initial)),
            prefetch_at: AtomicU64::new(prefetch_id(&initial)),
            has_next: AtomicBool::new(false),
            slow: Mutex::new(Slow {
                current: initial,
                next: Segment::EMPTY,
                retired: 0,
            }),
        }
    }

    /// Hot path: claims up to `n` IDs from the current segment only.
    #[inline]
    pub fn take_fast(&self, n: u64) -> Taken {
        let mut c = self.cursor.load(Ordering::Relaxed);
        loop {
            let end = self.end.load(Ordering::Acquire);
            if c >= end {
                return Taken {
                    range: None,
                    past_prefetch_mark: true,
                };
            }
            let got = n.min(end - c);
            match self.cursor.compare_exchange_weak(
                c,
                c + got,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    let past_prefetch_mark = c + got > self.prefetch_at.load(Ordering::Relaxed);
                    let first = c as i64;
                    return Taken {
                        range: Some(IdRange {
                            first,
                            last: first + (got as i64 - 1),
                        }),
                        past_prefetch_mark,
                    };
                }
                Err(now) => c = now,
            }
        }
    }

    /// Claims `n` IDs from the current segment, switching to the next one as
    /// often as needed, and appends the runs obtained (in increasing order) to
    /// `out`. Stops when done or when both segments are used up.
    pub fn take(&self, n: u64, out: &mut Vec<IdRange>) -> Progress {
        if n == 0 {
            // Nothing asked (a fetch whose every ID comes from the store):
            // `take_fast(0)` would answer an empty run, `last < first`.
            return Progress {
                missing: 0,
                past_prefetch_mark: false,
            };
        }
        let mut missing = n;
        loop {
            let taken = self.take_fast(missing);
            // Only the segment taken from last matters: earlier ones are retired.
            let past_prefetch_mark = taken.past_prefetch_mark;
            if let Some(r) = taken.range {
                out.push(r);
                missing -= r.len();
                if missing == 0 {
                    return Progress {
                        missing,
                        past_prefetch_mark,
                    };
                }
            }
            if !self.try_switch() {
                return Progress {
                    missing,
                    past_prefetch_mark,
                };
            }
        }
    }

    /// Claims `n` consecutive IDs from one segment: from the current one
    /// when it still holds `n`; otherwise from the next one, whose first
    /// `n` IDs are claimed by the switch that makes it current, the rest of
    /// the current one left unused (a gap, as a sealed segment's rest).
    /// When neither can hold the run ([`Run::Dry`]: no next segment yet;
    /// [`Run::TooShort`]) nothing is claimed: a refused run takes no ID.
    /// The same compare-and-swap on the cursor as
    /// [`DoubleBuffer::take_fast`], with a stricter condition: it moves the
    /// cursor by exactly `n`.
    pub fn take_run(&self, n: u64) -> Run {
        let mut c = self.cursor.load(Ordering::Relaxed);
        loop {
            let end = self.end.load(Ordering::Acquire);
            if c >= end || end - c < n {
                match self.switch_for_run(n) {
                    Some(run) => return run,
                    None => {
                        c = self.cursor.load(Ordering::Relaxed);
                        continue;
                    }
                }
            }
            match self
                .cursor
                .compare_exchange_weak(c, c + n, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    return Run::Got {
                        run: run_at(c, n),
                        past_prefetch_mark: c + n > self.prefetch_at.load(Ordering::Relaxed),
                    }
                }
                Err(now) => c = now,
            }
        }
    }

    /// The current segment cannot hold a run of `n`. Under the mutex, so
    /// no other switch happens meanwhile: `None` to look again when it can
    /// now (another caller switched); [`Run::Dry`] or [`Run::TooShort`],
    /// having claimed nothing, when the next segment is missing or shorter
    /// than `n`; otherwise the rest of the current segment is claimed and
    /// left unused, and the next one made current with its first `n` IDs
    /// claimed: the run.
    fn switch_for_run(&self, n: u64) -> Option<Run> {
        let mut slow = self.slow.lock().unwrap();
        let end = self.end.load(Ordering::Relaxed);
        let c = self.cursor.load(Ordering::Relaxed);
        if c < end && end - c >= n {
            return None;
        }
        let len = slow.next.len();
        if slow.next.is_empty() {
            return Some(Run::Dry);
        }
        if len < n {
            return Some(Run::TooShort { len });
        }
        self.claim_rest();
        let seg = slow.take_next()?;
        let first = to_cursor(seg.first());
        self.make_current(&mut slow, seg, first + n);
        Some(Run::Got {
            run: run_at(first, n),
            past_prefetch_mark: first + n > prefetch_id(&seg),
        })
    }

    /// Claims what is left of the current segment, under the mutex (so
    /// its `end` holds): takers racing this get their IDs first. Returns
    /// the first ID of it not handed out (its end when used up).
    fn claim_rest(&self) -> u64 {
        let end = self.end.load(Ordering::Relaxed);
        let mut c = self.cursor.load(Ordering::Relaxed);
        while c < end {
            match self
                .cursor
                .compare_exchange_weak(c, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => c = now,
            }
        }
        c.min(end)
    }

    /// Makes `seg` (the next segment, taken out) current, its cursor at
    /// `cursor`: what a switch does, under the mutex.
    fn make_current(&self, slow: &mut Slow, seg: Segment, cursor: u64) {
        self.has_next.store(false, Ordering::Release);
        slow.retired += slow.current.len();
        self.prefetch_at.store(prefetch_id(&seg), Ordering::Relaxed);
        // The cursor first, then the end: see the module docs.
        self.cursor.store(cursor, Ordering::Release);
        self.end.store(end_of(&seg), Ordering::Release);
        slow.current = seg;
    }

    /// If the current segment is used up, makes the next segment current.
    /// Returns true when the caller should look again (switched, or IDs are
    /// available: someone else switched), false when the current segment is
    /// used up and there is no next segment yet.
    fn try_switch(&self) -> bool {
        let mut slow = self.slow.lock().unwrap();
        // Under the mutex no one else switches, and takers never move the
        // cursor past `end`: `cursor < end` means IDs are available.
        if self.cursor.load(Ordering::Relaxed) < self.end.load(Ordering::Relaxed) {
            return true;
        }
        match slow.take_next() {
            Some(seg) => {
                self.make_current(&mut slow, seg, to_cursor(seg.first()));
                true
            }
            None => false,
        }
    }

    /// Installs the segment fetched ahead. Returns it back if one is already
    /// waiting (callers fetch one at a time, so that is a bug upstream) or if
    /// it is empty.
    /// The segment must start above every ID this buffer held before.
    pub fn install_next(&self, seg: Segment) -> Result<(), Segment> {
        let mut slow = self.slow.lock().unwrap();
        if !slow.next.is_empty() || seg.is_empty() {
            return Err(seg);
        }
        slow.next = seg;
        self.has_next.store(true, Ordering::Release);
        Ok(())
    }

    /// Ends handing out: claims whatever is left of the current segment
    /// (a taker racing it gets its IDs first, or nothing) and takes the next
    /// segment out. Returns the current segment, the first ID of it not
    /// handed out (its end when used up), and the next segment, if any.
    /// The caller must keep new segments from being installed after it
    /// (the buffer does, by never starting another fetch).
    pub fn seal(&self) -> (Segment, i64, Option<Segment>) {
        let mut slow = self.slow.lock().unwrap();
        let unissued = self.claim_rest() as i64;
        let next = slow.take_next();
        self.has_next.store(false, Ordering::Release);
        (slow.current, unissued, next)
    }

    /// True when a next segment is waiting (lock-free read).
    #[inline]
    pub fn has_next(&self) -> bool {
        self.has_next.load(Ordering::Acquire)
    }

    /// Counts `n` IDs handed out without a segment (a global sequence's
    /// reservations, a bounded counter's reserved run) in
    /// [`DoubleBuffer::issued`].
    pub fn count_outside(&self, n: u64) {
        self.slow.lock().unwrap().retired += n;
    }

    /// IDs handed out so far through this buffer.
    pub fn issued(&self) -> u64 {
        let slow = self.slow.lock().unwrap();
        slow.retired + self.used(&slow)
    }

    /// IDs claimed from the current segment (read under the mutex, so the
    /// segment cannot change meanwhile).
    fn used(&self, slow: &Slow) -> u64 {
        let cursor = self.cursor.load(Ordering::Relaxed);
        cursor
            .saturating_sub(to_cursor(slow.current.first()))
            .min(slow.current.len())
    }

    /// IDs handed out so far and IDs left in memory (current plus next), read
    /// together under one lock: what a `/metrics` scrape reads of every
    /// sequence.
    pub fn counts(&self) -> (u64, u64) {
        let slow = self.slow.lock().unwrap();
        let used = self.used(&slow);
        (
            slow.retired + used,
            slow.current.len() - used + slow.next.len(),
        )
    }

    /// The current segment and how many of its IDs were claimed.
    pub fn current(&self) -> (Segment, u64) {
        let slow = self.slow.lock().unwrap();
        (slow.current, self.used(&slow))
    }

    /// The next segment, if fetched.
    pub fn next(&self) -> Option<Segment> {
        let slow = self.slow.lock().unwrap();
        (!slow.next.is_empty()).then_some(slow.next)
    }
}

#[cfg(all(test, not(seqd_loom)))]
mod tests {
    use super::*;

    fn run(first: i64, last: i64) -> Option<IdRange> {
        Some(IdRange { first, last })
    }

    #[test]
    fn take_fast_hands_out_consecutive_ids_then_nothing() {
        let b = DoubleBuffer::new(Segment::new(11, 5, 0.1));
        assert_eq!(b.take_fast(2).range, run(11, 12));
        assert_eq!(b.take_fast(1).range, run(13, 13));
        // crosses the end: partial run
        assert_eq!(b.take_fast(5).range, run(14, 15));
        assert_eq!(b.take_fast(1).range, None);
        assert_eq!(b.counts(), (5, 0));
    }

    #[test]
    fn taking_nothing_claims_nothing_and_gives_no_run() {
        let b = DoubleBuffer::new(Segment::new(1, 10, 0.1));
        let mut out = Vec::new();
        let progress = b.take(0, &mut out);
        assert_eq!(progress.missing, 0);
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(b.take_fast(1).range, run(1, 1));
    }

    #[test]
    fn take_run_takes_n_from_one_segment_and_leaves_a_short_rest_unused() {
        let b = DoubleBuffer::new(Segment::new(1, 10, 0.1));
        let got = |r: Run| match r {
            Run::Got { run, .. } => Some(run),
            _ => None,
        };
        assert_eq!(got(b.take_run(4)), run(1, 4));
        assert_eq!(got(b.take_run(4)), run(5, 8));
        // 9 and 10 cannot hold 4 and there is no next segment yet: nothing
        // is claimed.
        assert_eq!(b.take_run(4), Run::Dry);
        assert_eq!(b.take_fast(1).range, run(9, 9));
        b.install_next(Segment::new(21, 10, 0.1)).unwrap();
        // The switch gives up 10 and claims the run in the next segment.
        assert_eq!(got(b.take_run(4)), run(21, 24));
        assert_eq!(b.counts(), (14, 6));
        assert_eq!(got(b.take_run(6)), run(25, 30));
        b.install_next(Segment::new(41, 3, 0.1)).unwrap();
        // A next segment shorter than the run is reported, not switched to.
        assert_eq!(b.take_run(4), Run::TooShort { len: 3 });
        assert_eq!(b.counts(), (20, 3));
        let mut out = Vec::new();
        assert_eq!(b.take(3, &mut out).missing, 0);
        assert_eq!(
            out,
            vec![IdRange {
                first: 41,
                last: 43
            }]
        );
    }

    #[test]
    fn a_refused_run_claims_nothing() {
        let b = DoubleBuffer::new(Segment::new(1, 10, 0.1));
        assert_eq!(b.take_fast(4).range, run(1, 4));
        assert_eq!(b.take_run(7), Run::Dry);
        b.install_next(Segment::new(11, 5, 0.1)).unwrap();
        assert_eq!(b.take_run(7), Run::TooShort { len: 5 });
        assert_eq!(b.counts(), (4, 11), "6 left in the current, 5 next");
        assert_eq!(b.take_fast(1).range, run(5, 5));
    }

    #[test]
    fn prefetch_mark_is_ten_percent() {
        let b = DoubleBuffer::new(Segment::new(1, 100, 0.1));
        for _ in 0..10 {
            assert!(!b.take_fast(1).past_prefetch_mark);
        }
        assert!(
            b.take_fast(1).past_prefetch_mark,
            "the 11th ID passes the 10% mark"
        );
    }

    #[test]
    fn segment_ending_at_i64_max_does_not_overflow() {
        let b = DoubleBuffer::new(Segment::new(i64::MAX - 2, 3, 0.1));
        assert_eq!(Segment::new(i64::MAX - 2, 3, 0.1).last(), i64::MAX);
        assert_eq!(b.take_fast(10).range, run(i64::MAX - 2, i64::MAX));
        assert_eq!(b.take_fast(1).range, None);
    }

    #[test]
    fn seal_claims_the_rest_and_takes_the_next_segment_out() {
        let b = DoubleBuffer::new(Segment::new(11, 5, 0.1));
        b.install_next(Segment::new(21, 5, 0.1)).unwrap();
        assert_eq!(b.take_fast(2).range, run(11, 12));
        let (current, unissued, next) = b.seal();
        assert_eq!((current.first(), unissued), (11, 13));
        assert_eq!(next, Some(Segment::new(21, 5, 0.1)));
        // nothing more comes out, not even by switching
        assert_eq!(b.take_fast(1).range, None);
        let mut out = Vec::new();
        assert_eq!(b.take(1, &mut out).missing, 1);
        assert!(out.is_empty());
        // a used-up segment seals at its end
        let b = DoubleBuffer::new(Segment::new(1, 2, 0.1));
        b.take_fast(5);
        assert_eq!(b.seal().1, 3);
    }

    #[test]
    fn empty_placeholder_gives_nothing_and_refuses_an_empty_next() {
        let b = DoubleBuffer::new(Segment::EMPTY);
        assert_eq!(b.take_fast(1).range, None);
        assert!(b.install_next(Segment::EMPTY).is_err());
        assert!(!b.has_next());
    }
}
