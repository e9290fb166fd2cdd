//! The per-sequence double buffer: the current segment, the next one, and the
//! single background fetch that fills the next one.
//!
//! Hot path: claim IDs from the current segment, kept inline in the buffer
//! (one compare-and-swap, docs/design.md, "The double buffer"). Slow path (current empty): switch to the next segment under
//! a short mutex, or wait asynchronously (tokio `Notify`) for the fetch in
//! flight, up to the wait timeout.

use std::num::{NonZeroI64, NonZeroU64};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};

mod take;
mod tasks;
mod view;

use tasks::*;
pub(crate) use view::Tally;
pub use view::{BufferSnapshot, SegmentView, SeqStats, Totals};

use super::double::{DoubleBuffer, Run};
use super::failure::FetchFailure;
use super::segment::{IdRange, Segment};
use super::step::StepInput;
use super::{AllocError, Shared};
use crate::domain::{IdOrdering, SeqName};
use crate::store::{Reservation, StoreError};

/// Histogram of successful segment fetch latencies, one for all sequences
/// (no label: its size does not grow with the number of sequences). Served
/// on `/metrics`.
pub const FETCH_DURATION_METRIC: &str = "seqd_segment_fetch_duration_seconds";

/// Counter of reserved ranges that reached down to IDs this instance had
/// already reserved (the row went back), labelled by `sequence`.
pub const REGRESSIONS_METRIC: &str = "seqd_sequence_regressions_total";

/// Histogram: requests served by one reservation of a global sequence
/// (how many were merged).
pub const GLOBAL_MERGE_METRIC: &str = "seqd_global_merged_requests";

/// What [`SeqBuffer::seal`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sealed {
    /// A fetch was in flight: its reservation may land after anything done
    /// now, so nothing is given back.
    FetchInFlight,
    /// Nothing reserved, or nothing unused at the top.
    Nothing,
    /// The row's `max_id` may go from `top` (the last ID this buffer
    /// reserved) down to `keep` (every ID above it is unused, and reserved
    /// by this buffer).
    GiveBack { top: i64, keep: i64 },
}

/// What became of a reserved range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Installed {
    /// Installed as the next segment (trimmed if it overlapped).
    Ready,
    /// Entirely at or below the high-water mark, by this many IDs.
    Behind(i64),
    /// Reserved before a switch of ordering and below what was served since:
    /// dropped; the next reservation (from the row, which moved on) is above.
    Stale,
}

/// A fetch error that stops retrying until the negative-cache interval passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Terminal {
    NotFound,
    Exhausted,
}

impl From<Terminal> for AllocError {
    fn from(t: Terminal) -> Self {
        match t {
            Terminal::NotFound => AllocError::NotFound,
            Terminal::Exhausted => AllocError::Exhausted,
        }
    }
}

/// Bookkeeping of fetches, guarded by a mutex that only the slow path and the
/// fetch task take.
#[derive(Debug)]
struct FetchState {
    /// Last ID of the last segment installed; new segments must start above it.
    /// (At least 1: IDs below 1 are never installed, so `Option` costs no byte.)
    high_water: Option<NonZeroI64>,
    row_step: i64,
    last_size: i64,
    rate_per_sec: f64,
    /// True once `rate_per_sec` holds a measurement.
    rate_measured: bool,
    /// True when a switch to global ordering dropped segments since the last
    /// install: a range that lands below `high_water` is then a fetch that
    /// started before the switch (`Installed::Stale`), not a regression.
    dropped: bool,
    /// (time, IDs issued) when the previous fetch started.
    rate_sample: Option<(Stamp, u64)>,
    last_fetch_at: Option<Stamp>,
    last_fetch_latency: Option<Stamp>,
    last_error: Option<FetchFailure>,
    consecutive_failures: u32,
    terminal: Option<(Terminal, Stamp)>,
}

impl FetchState {
    /// Records the reservation `r`, made at `started` and answered at
    /// `now`, of which `size` IDs are kept: the new mark and step, failures
    /// forgotten.
    fn landed(&mut self, r: Reservation, size: i64, started: Duration, now: Duration) {
        self.high_water = NonZeroI64::new(r.max_id);
        self.dropped = false;
        self.row_step = r.row_step;
        self.last_size = size;
        self.last_fetch_at = Some(Stamp::of(started));
        self.last_fetch_latency = Some(Stamp::of(now.saturating_sub(started)));
        self.last_error = None;
        self.consecutive_failures = 0;
        self.terminal = None;
    }
}

/// A time on the allocator's clock (or a duration) in 8 bytes, `Option`
/// included: nanoseconds plus one. Keeps `FetchState` small, since every
/// live sequence has one (docs/design.md, "The hot path and the memory of
/// one sequence").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp(NonZeroU64);

impl Stamp {
    fn of(d: Duration) -> Self {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX - 1);
        Stamp(NonZeroU64::new(nanos.min(u64::MAX - 1) + 1).expect("at least 1"))
    }

    fn get(self) -> Duration {
        Duration::from_nanos(self.0.get() - 1)
    }
}

/// One sequence's double buffer. See the module docs.
pub struct SeqBuffer {
    name: SeqName,
    shared: Arc<Shared>,
    segments: DoubleBuffer,
    fetching: AtomicBool,
    notify: Notify,
    state: Mutex<FetchState>,
    waits: AtomicU64,
    fetches: AtomicU64,
    fetch_errors: AtomicU64,
    regressions: AtomicU64,
    /// The sequence's ordering is `global`: no segments, every request is
    /// reserved at request time through [`Merger`].
    global: AtomicBool,
    /// The queue of a global sequence's requests, made at its first one.
    merger: OnceLock<Box<Mutex<Merger>>>,
    /// The row issues serial numbers: it hands out no range, and requests
    /// are answered [`AllocError::Serial`] (docs/design.md, "Serial numbers").
    serial: AtomicBool,
    /// A period counter's limits (serial numbers), set when it is made.
    counter: OnceLock<Box<Counter>>,
}

/// What a period counter's buffer holds besides a plain one.
struct Counter {
    bounds: CounterBounds,
    /// Taken by every request of a counter with a capacity (and only
    /// there: plain sequences never see it), so that a request is served
    /// whole or not at all: it looks at memory and the row without another
    /// request taking counters meanwhile ([`SeqBuffer::take_bounded`]).
    turn: tokio::sync::Mutex<()>,
}

/// The limits of a serial sequence's period counter, which its fetches
/// respect (docs/design.md, "Serial numbers"): a reservation never passes
/// what `{seq:0N}` holds, nor what the rest of the period will use at the
/// measured rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterBounds {
    /// The largest counter the period may hand out (`{seq:0N}`'s capacity
    /// under `overflow: refuse`); `None`: no limit.
    pub max: Option<i64>,
    /// The row's `max_id` before its first reservation (`counter_start - 1`).
    pub floor: i64,
    /// The sequence's `step` (the row's, before a fetch has read it).
    pub step: i64,
    /// When the period ends, on the allocator's clock; `None`: never.
    pub ends_at: Option<Duration>,
}

/// What the next fetch reserves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// At least this many (the row's step is the floor): `Segments::reserve_above`.
    AtLeast(i64),
    /// Exactly this many (a bounded counter): `Segments::reserve_exact`.
    Exactly(i64),
    /// Nothing: the counter reached its bound.
    Full,
}

/// A global sequence's requests waiting for the next reservation.
#[derive(Default)]
struct Merger {
    /// Requests in arrival order: how many IDs, and where to send them.
    queue: Vec<(u64, oneshot::Sender<Result<IdRange, AllocError>>)>,
    /// A reservation loop is running ([`global_loop`]).
    running: bool,
}

impl SeqBuffer {
    pub(super) fn new(name: SeqName, shared: Arc<Shared>) -> Self {
        SeqBuffer {
            name,
            shared,
            segments: DoubleBuffer::new(Segment::EMPTY),
            fetching: AtomicBool::new(false),
            notify: Notify::new(),
            state: Mutex::new(FetchState {
                high_water: None,
                row_step: 0,
                last_size: 0,
                rate_per_sec: 0.0,
                rate_measured: false,
                dropped: false,
                rate_sample: None,
                last_fetch_at: None,
                last_fetch_latency: None,
                last_error: None,
                consecutive_failures: 0,
                terminal: None,
            }),
            waits: AtomicU64::new(0),
            fetches: AtomicU64::new(0),
            fetch_errors: AtomicU64::new(0),
            regressions: AtomicU64::new(0),
            global: AtomicBool::new(false),
            merger: OnceLock::new(),
            serial: AtomicBool::new(false),
            counter: OnceLock::new(),
        }
    }

    /// A period counter's buffer: its bounds, and global ordering from the
    /// start when the sequence has it (its first request then reserves
    /// exactly, wasting no segment).
    pub(super) fn counter(
        name: SeqName,
        shared: Arc<Shared>,
        bounds: CounterBounds,
        global: bool,
    ) -> Self {
        let buf = SeqBuffer::new(name, shared);
        let _ = buf.counter.set(Box::new(Counter {
            bounds,
            turn: tokio::sync::Mutex::new(()),
        }));
        buf.global.store(global, Ordering::Relaxed);
        buf
    }

    /// Marks the row as issuing serial numbers, or not: a serial row's
    /// segments are dropped (their unused IDs are a gap) and its requests
    /// answered [`AllocError::Serial`]; a plain one fetches again.
    pub(super) fn set_serial(&self, serial: bool) {
        if self.serial.swap(serial, Ordering::AcqRel) != serial {
            if serial {
                self.state.lock().unwrap().dropped = true;
                self.segments.seal();
            }
            tracing::info!(sequence = %self.name, serial, "serial numbers switched");
            // Waiters look at the flag after registering: only a change
            // needs waking them (the settings refresh sets the flag of
            // every live name every round).
            self.notify.notify_waiters();
        }
    }

    /// Switches between the orderings: to `global`, the segments in memory
    /// are dropped (their unused IDs are a gap) and every request goes to
    /// the database; to `instance`, the next request fetches a segment.
    pub(super) fn set_ordering(&self, ordering: IdOrdering) {
        let global = ordering == IdOrdering::Global;
        if self.global.swap(global, Ordering::AcqRel) != global {
            if global {
                self.state.lock().unwrap().dropped = true;
                self.segments.seal();
            }
            tracing::info!(sequence = %self.name, ordering = ordering.as_str(), "ordering switched");
            self.notify.notify_waiters();
        }
    }

    /// The sequence's name.
    pub fn name(&self) -> &SeqName {
        &self.name
    }

    /// Starts a fetch if none is in flight and no next segment is waiting.
    #[inline]
    fn maybe_prefetch(self: &Arc<Self>) {
        if !self.segments.has_next() && !self.fetching.load(Ordering::Acquire) {
            self.start_fetch();
        }
    }

    /// Starts the background fetch unless one is in flight, a next segment is
    /// ready, a recent fetch found the sequence missing or exhausted, or the
    /// row issues serial numbers (its sealed segment reads as past the
    /// prefetch mark on every request: each one started a refused fetch).
    fn start_fetch(self: &Arc<Self>) {
        if self
            .fetching
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        if self.segments.has_next()
            || self.live_terminal().is_some()
            || self.global.load(Ordering::Acquire)
            || self.serial.load(Ordering::Acquire)
        {
            self.fetching.store(false, Ordering::Release);
            return;
        }
        let weak = Arc::downgrade(self);
        tokio::spawn(fetch_loop(weak));
    }

    /// A terminal error recorded less than the negative-cache interval ago.
    fn live_terminal(&self) -> Option<Terminal> {
        let state = self.state.lock().unwrap();
        let (t, at) = state.terminal?;
        let at = at.get();
        let now = self.shared.clock.now();
        (now.saturating_sub(at) < self.shared.config.negative_ttl).then_some(t)
    }

    /// Measures the rate, asks the policy for the next size, and keeps a
    /// bounded counter within its bounds.
    fn plan_fetch(&self) -> Plan {
        let size = self.policy_size();
        let Some(bounds) = self.counter.get().map(|c| &c.bounds) else {
            return Plan::AtLeast(size);
        };
        // Counters still in memory (current and next segment), read before
        // the state's lock, as every other path takes the two.
        let held = i64::try_from(self.segments.counts().1).unwrap_or(i64::MAX);
        let st = self.state.lock().unwrap();
        let mark = st.high_water.map_or(bounds.floor, NonZeroI64::get);
        let row_step = if st.row_step > 0 {
            st.row_step
        } else {
            bounds.step
        };
        let mut size = size.max(row_step);
        if let Some(max) = bounds.max {
            if mark >= max {
                return Plan::Full;
            }
            // One reservation takes at most a quarter of what is left (or
            // the row's step, if larger): a burst measured on one instance
            // must not take the whole capacity while others still ask.
            size = size.min(row_step.max((max - mark) / 4)).min(max - mark);
        }
        if let (Some(end), true) = (bounds.ends_at, st.rate_measured) {
            // What the rest of the period will use at the measured rate,
            // with a quarter more for a rise, less what memory still holds,
            // and at least one: the counters stranded at the period's end
            // stay within that quarter.
            let left = end.saturating_sub(self.shared.clock.now()).as_secs_f64();
            let wanted = (st.rate_per_sec * left * 1.25).ceil() as i64;
            size = size.min(wanted.saturating_sub(held).max(1));
        }
        Plan::Exactly(size.max(1))
    }

    /// Measures the rate and asks the policy for the next size.
    fn policy_size(&self) -> i64 {
        let now = self.shared.clock.now();
        let issued = self.segments.issued();
        let mut st = self.state.lock().unwrap();
        if let Some((t0, n0)) = st.rate_sample {
            let t0 = t0.get();
            // Over less than a second, IDs taken in one instant (a batch, a
            // burst of concurrent requests) would read as an absurd rate.
            let secs = now.saturating_sub(t0).as_secs_f64().max(1.0);
            let inst = issued.saturating_sub(n0) as f64 / secs;
            // Smooth with a weight that grows with the time the measurement
            // covers (time constant: a quarter of the segment target), so a
            // measurement over hours replaces the estimate: a fixed per-fetch
            // weight kept a spike's rate alive for hours of 1,000,000-ID
            // segments (BENCHMARKS.md, simulation). Rises count at least half,
            // so a burst still grows the step within a few fetches.
            let tau = (self.shared.config.segment_target.as_secs_f64() / 4.0).max(1.0);
            st.rate_per_sec = if st.rate_measured {
                let by_time = 1.0 - (-secs / tau).exp();
                let alpha = if inst > st.rate_per_sec {
                    by_time.max(0.5)
                } else {
                    by_time
                };
                st.rate_per_sec + alpha * (inst - st.rate_per_sec)
            } else {
                inst
            };
            st.rate_measured = true;
        }
        st.rate_sample = Some((Stamp::of(now), issued));
        let input = StepInput {
            row_step: st.row_step,
            prev_size: st.last_size,
            rate_per_sec: st.rate_per_sec,
            prev_lifetime: st.last_fetch_at.map(|t| now.saturating_sub(t.get())),
        };
        self.shared
            .policy
            .next_size(&input)
            .clamp(1, self.shared.config.max_step.max(1))
    }

    /// Installs a reserved range as the next segment, or reports a
    /// regression: a range at or below IDs this buffer already reserved (the
    /// row was lowered, rolled back or recreated).
    /// A range that only starts at or below them is trimmed and installed; it
    /// counts as a regression unless it answers `catching_up`, the reservation
    /// made to clear an earlier one.
    fn install(&self, r: Reservation, started: Duration, catching_up: bool) -> Installed {
        if r.ordering == IdOrdering::Global || self.global.load(Ordering::Acquire) {
            // A global sequence keeps no segment: this one is dropped (a gap)
            // and the waiting requests go to the database themselves.
            self.global.store(true, Ordering::Release);
            self.state.lock().unwrap().dropped = true;
            self.segments.seal();
            self.fetching.store(false, Ordering::Release);
            self.notify.notify_waiters();
            return Installed::Ready;
        }
        let now = self.shared.clock.now();
        let mut st = self.state.lock().unwrap();
        let mut first = r.first();
        // IDs below 1 are never handed out (a row lowered below zero by SQL
        // is lifted like a regression), which the segment cursor relies on.
        let floor = st.high_water.map_or(0, NonZeroI64::get);
        // After a switch of ordering, a range below the mark is a fetch that
        // started before the switch, not a row that went back.
        let regression = st.high_water.is_some() && !st.dropped;
        if r.max_id <= floor {
            if st.dropped {
                // Once: should the next range be below the mark too, the row
                // did go back, and it is handled as a regression.
                st.dropped = false;
                return Installed::Stale;
            }
            drop(st);
            if regression {
                self.regressed(r, floor);
            }
            return Installed::Behind(floor.saturating_sub(r.max_id));
        }
        if r.regressed && first > floor {
            // A store over several databases lifted a row that went back.
            self.regressed(r, floor);
        }
        if first <= floor {
            if regression && !catching_up {
                self.regressed(r, floor);
            }
            first = floor + 1;
        }
        let len = (r.max_id - first + 1) as u64;
        let seg = Segment::new(first, len, self.shared.config.prefetch_ratio);
        // The trimmed length: a catch-up reservation is not a step to adapt from.
        st.landed(r, len as i64, started, now);
        drop(st);
        self.count_fetch(started, now);
        if self.segments.install_next(seg).is_err() {
            tracing::error!(sequence = %self.name, "a next segment was already waiting; dropping the new one");
        }
        self.fetching.store(false, Ordering::Release);
        self.notify.notify_waiters();
        Installed::Ready
    }

    /// Counts a fetch that landed, made at `started` and answered at `now`.
    fn count_fetch(&self, started: Duration, now: Duration) {
        let latency = self.count_landed(started, now);
        self.shared.tally.fetched(latency);
    }

    /// Counts a global sequence's reservation, made at `started` and
    /// answered at `now`: in this buffer's `fetches` (a global sequence has
    /// no other) and the latency histogram, but in the instance's tally as a
    /// reservation, not as a segment fetch.
    fn count_reservation(&self, started: Duration, now: Duration) {
        self.count_landed(started, now);
        self.shared.tally.reserved();
    }

    /// What a fetch and a global reservation both count; their latency.
    fn count_landed(&self, started: Duration, now: Duration) -> Duration {
        let latency = now.saturating_sub(started);
        self.fetches.fetch_add(1, Ordering::Relaxed);
        metrics::histogram!(FETCH_DURATION_METRIC).record(latency.as_secs_f64());
        latency
    }

    /// Counts a failed fetch (an attempt), here and in the instance's tally.
    fn count_error(&self) {
        self.fetch_errors.fetch_add(1, Ordering::Relaxed);
        self.shared.tally.failed();
    }

    /// Logs and counts a reserved range that reaches down to IDs already
    /// reserved by this buffer (`served_up_to`).
    fn regressed(&self, r: Reservation, served_up_to: i64) {
        tracing::error!(sequence = %self.name, first = r.first(), max_id = r.max_id, served_up_to,
            "the database handed out a range at or below IDs this instance already reserved: \
             the row was lowered, rolled back or recreated (a failover to a lagging replica?); \
             skipping past it");
        self.regressions.fetch_add(1, Ordering::Relaxed);
    }

    fn fail_terminal(&self, t: Terminal) {
        let now = self.shared.clock.now();
        let mut st = self.state.lock().unwrap();
        st.terminal = Some((t, Stamp::of(now)));
        st.last_error = Some(match t {
            Terminal::NotFound => FetchFailure::NotFound,
            Terminal::Exhausted => FetchFailure::Exhausted,
        });
        drop(st);
        self.fetching.store(false, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Records a failed fetch; returns how long to back off before retrying.
    fn record_failure(&self, failure: FetchFailure) -> Duration {
        self.count_error();
        let mut st = self.state.lock().unwrap();
        st.consecutive_failures = st.consecutive_failures.saturating_add(1);
        st.last_error = Some(failure);
        let exp = st.consecutive_failures.min(16) - 1;
        let backoff = self
            .shared
            .config
            .retry_backoff_min
            .saturating_mul(1 << exp);
        backoff.min(self.shared.config.retry_backoff_max)
    }

    /// Stops this buffer for good (no more IDs, no more fetches) and says
    /// what of its reservation can be given back to the row: the unused
    /// top of what it reserved last. See [`Sealed`].
    pub(super) fn seal(&self) -> Sealed {
        // Holding `fetching` for good: no fetch starts after this one.
        if self
            .fetching
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Sealed::FetchInFlight;
        }
        let Some(top) = self.high_water() else {
            return Sealed::Nothing;
        };
        let (current, unissued, next) = self.segments.seal();
        // The mark must be the top of the segments held: otherwise IDs were
        // handed out above them (global ordering) or a segment was dropped,
        // and what lies between is not this buffer's to give back.
        let held_top = next.map_or(current.last(), |n| n.last());
        if current.is_empty() && next.is_none() || held_top != top {
            return Sealed::Nothing;
        }
        // Only the run at the top that this buffer reserved itself goes
        // back: the next segment, and the current one's tail below it only
        // when the two are contiguous (no other instance reserved between).
        let keep = match next {
            Some(n) if current.is_empty() || n.first() != current.last() + 1 => n.first() - 1,
            _ => unissued - 1,
        };
        if keep >= top {
            Sealed::Nothing
        } else {
            Sealed::GiveBack { top, keep }
        }
    }

    /// The highest ID this buffer has reserved so far, if any.
    pub fn high_water(&self) -> Option<i64> {
        self.state.lock().unwrap().high_water.map(NonZeroI64::get)
    }
}

#[cfg(all(test, not(seqd_loom)))]
mod size_tests {
    /// The per-sequence memory budget (docs/design.md, "The hot path and the
    /// memory of one sequence"): global ordering added its flag and a
    /// pointer-sized slot for its queue, not the queue itself.
    #[test]
    fn a_buffer_stays_within_its_budget() {
        let size = std::mem::size_of::<super::SeqBuffer>();
        eprintln!("size_of::<SeqBuffer>() = {size}");
        assert!(size <= 320, "{size} bytes");
    }
}
