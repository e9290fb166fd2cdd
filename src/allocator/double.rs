//! The synchronous heart of a sequence's buffer: the current segment, the
//! next one, and the switch between them. No async, no I/O: the model-checked
//! part of the allocator (see `tests/loom_double.rs`).
//!
//! Taking IDs loads the current segment (lock-free) and claims them with one
//! `fetch_add`. Only when the current segment is used up does a caller take the
//! `next` mutex to make the next segment current: the switch.

use super::segment::{IdRange, Segment};
use super::sync::{Arc, ArcCell, AtomicBool, AtomicU64, Mutex, Ordering};

/// Current + next segment. See the module docs.
pub struct DoubleBuffer {
    current: ArcCell<Segment>,
    /// The segment fetched ahead; its mutex also serializes switches.
    next: Mutex<Option<Arc<Segment>>>,
    /// Mirror of `next.is_some()` readable without the mutex.
    has_next: AtomicBool,
    /// IDs of the segments already switched away from (all claimed).
    retired: AtomicU64,
}

/// What [`DoubleBuffer::take`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// IDs still wanted: both segments ran dry first (0 when done).
    pub missing: u64,
    /// True when the last claim passed its segment's prefetch mark.
    pub past_prefetch_mark: bool,
}

impl DoubleBuffer {
    /// A buffer serving `initial` (often an empty placeholder) with no next.
    pub fn new(initial: Segment) -> Self {
        DoubleBuffer {
            current: ArcCell::new(Arc::new(initial)),
            next: Mutex::new(None),
            has_next: AtomicBool::new(false),
            retired: AtomicU64::new(0),
        }
    }

    /// Hot path: claims up to `n` IDs from the current segment only.
    #[inline]
    pub fn take_fast(&self, n: u64) -> super::segment::Taken {
        self.current.load().take(n)
    }

    /// Claims `n` IDs from the current segment, switching to the next one as
    /// often as needed, and appends the runs obtained (in increasing order) to
    /// `out`. Stops when done or when both segments are used up.
    pub fn take(&self, n: u64, out: &mut Vec<IdRange>) -> Progress {
        let mut missing = n;
        let mut past_prefetch_mark;
        loop {
            let cur = self.current.load_full();
            let taken = cur.take(missing);
            // Only the segment taken from last matters: earlier ones are retired.
            past_prefetch_mark = taken.past_prefetch_mark;
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
            if !self.try_switch(&cur) {
                return Progress {
                    missing,
                    past_prefetch_mark,
                };
            }
        }
    }

    /// If `observed` is still current and used up, makes the next segment
    /// current. Returns true when the caller should look again (switched, or
    /// someone else switched), false when there is no next segment yet.
    fn try_switch(&self, observed: &Arc<Segment>) -> bool {
        let mut next = self.next.lock().unwrap();
        let cur = self.current.load_full();
        if !Arc::ptr_eq(&cur, observed) || !cur.is_exhausted() {
            return true;
        }
        match next.take() {
            Some(seg) => {
                self.has_next.store(false, Ordering::Release);
                self.retired.fetch_add(cur.len(), Ordering::Relaxed);
                self.current.store(seg);
                true
            }
            None => false,
        }
    }

    /// Installs the segment fetched ahead. Returns it back if one is already
    /// waiting (callers fetch one at a time, so that is a bug upstream).
    pub fn install_next(&self, seg: Segment) -> Result<(), Segment> {
        let mut next = self.next.lock().unwrap();
        if next.is_some() {
            return Err(seg);
        }
        *next = Some(Arc::new(seg));
        self.has_next.store(true, Ordering::Release);
        Ok(())
    }

    /// True when a next segment is waiting (lock-free read).
    #[inline]
    pub fn has_next(&self) -> bool {
        self.has_next.load(Ordering::Acquire)
    }

    /// IDs handed out so far through this buffer.
    pub fn issued(&self) -> u64 {
        self.retired.load(Ordering::Relaxed) + self.current.load().used()
    }

    /// The current segment.
    pub fn current(&self) -> Arc<Segment> {
        self.current.load_full()
    }

    /// The next segment, if fetched.
    pub fn next(&self) -> Option<Arc<Segment>> {
        self.next.lock().unwrap().clone()
    }
}
