//! What a buffer shows of itself: its numbers for `/metrics`
//! ([`SeqStats`]) and its state for the API and the monitor
//! ([`BufferSnapshot`]).

use std::num::NonZeroI64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{FetchFailure, SeqBuffer};
use crate::allocator::segment::Segment;
use crate::domain::SeqName;

/// What a buffer shows of itself.
impl SeqBuffer {
    /// The numbers `/metrics` reads (no allocation).
    pub fn stats(&self) -> SeqStats {
        let (issued, ids_available) = self.segments.counts();
        let st = self.state.lock().unwrap();
        SeqStats {
            issued,
            fetches: self.fetches.load(Ordering::Relaxed),
            fetch_errors: self.fetch_errors.load(Ordering::Relaxed),
            waits: self.waits.load(Ordering::Relaxed),
            regressions: self.regressions.load(Ordering::Relaxed),
            step: st.last_size,
            ids_available,
            high_water: st.high_water.map(NonZeroI64::get),
        }
    }

    /// IDs this buffer can hand out without the database (its current and
    /// next segments' rest).
    pub(crate) fn ids_available(&self) -> u64 {
        self.segments.counts().1
    }

    /// A point-in-time view for monitoring.
    pub fn snapshot(&self) -> BufferSnapshot {
        let view = |s: &Segment, used: u64| {
            let remaining = s.len() - used;
            SegmentView {
                first: s.first(),
                last: s.last(),
                cursor: (remaining > 0).then(|| s.first() + used as i64),
                remaining,
            }
        };
        let (cur, used) = self.segments.current();
        let next = self.segments.next();
        let now = self.shared.clock.now();
        let st = self.state.lock().unwrap();
        BufferSnapshot {
            name: self.name.clone(),
            current: (!cur.is_empty()).then(|| view(&cur, used)),
            next: next.map(|n| view(&n, 0)),
            loading: self.fetching.load(Ordering::Relaxed),
            current_step: st.last_size,
            row_step: st.row_step,
            rate_per_sec: st.rate_per_sec,
            issued: self.segments.issued(),
            fetches: self.fetches.load(Ordering::Relaxed),
            fetch_errors: self.fetch_errors.load(Ordering::Relaxed),
            waits: self.waits.load(Ordering::Relaxed),
            last_fetch_ago_ms: st
                .last_fetch_at
                .map(|t| now.saturating_sub(t.get()).as_millis() as u64),
            last_fetch_latency_ms: st
                .last_fetch_latency
                .map(|d| d.get().as_secs_f64() * 1000.0),
            last_error: st.last_error,
        }
    }
}

/// The numbers of one live sequence, read without copying its name: what
/// `/metrics` reads of every sequence at each scrape.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SeqStats {
    /// IDs handed out by this instance.
    pub issued: u64,
    /// Successful segment fetches.
    pub fetches: u64,
    /// Failed segment fetches (each retry counts).
    pub fetch_errors: u64,
    /// Requests that found both segments empty and had to wait.
    pub waits: u64,
    /// Reserved ranges at or below IDs already reserved (the row went back).
    pub regressions: u64,
    /// Size of the most recent segment fetched (the adapted step).
    pub step: i64,
    /// IDs left in memory: current plus next segment.
    pub ids_available: u64,
    /// The highest ID reserved so far, if any.
    pub high_water: Option<i64>,
}

/// A point-in-time view of one segment, for monitoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SegmentView {
    /// First ID of the segment.
    pub first: i64,
    /// Last ID of the segment.
    pub last: i64,
    /// The next ID this segment would hand out (`None` when used up).
    pub cursor: Option<i64>,
    /// IDs still available in it.
    pub remaining: u64,
}

/// A point-in-time view of one sequence's buffer, for monitoring.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BufferSnapshot {
    /// The sequence.
    pub name: SeqName,
    /// The segment being served, unless none was loaded yet.
    pub current: Option<SegmentView>,
    /// The segment fetched ahead, if ready.
    pub next: Option<SegmentView>,
    /// True while a fetch is in flight.
    pub loading: bool,
    /// Size of the most recent segment fetched (the adapted step).
    pub current_step: i64,
    /// The row's step as the last fetch saw it.
    pub row_step: i64,
    /// Smoothed consumption rate, IDs per second, measured at fetch times.
    pub rate_per_sec: f64,
    /// IDs handed out by this instance.
    pub issued: u64,
    /// Successful segment fetches.
    pub fetches: u64,
    /// Failed segment fetches.
    pub fetch_errors: u64,
    /// Requests that found both segments empty and had to wait.
    pub waits: u64,
    /// Milliseconds since the last successful fetch started.
    pub last_fetch_ago_ms: Option<u64>,
    /// How long the last successful fetch took, in milliseconds.
    pub last_fetch_latency_ms: Option<f64>,
    /// Why the last fetch failed, if it did: a category and a fixed
    /// sentence, never the store's text (that is in the log).
    pub last_error: Option<FetchFailure>,
}

/// Every buffer's fetches, global reservations, waits and failed fetches
/// added up as they happen (all off the ID path), so the instance's totals
/// cost five reads, not a walk over every live sequence (docs/design.md,
/// "What the monitor reads").
/// Aligned to its own cache lines: the settings beside it in the buffers'
/// shared state are read on every request.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Tally {
    fetches: AtomicU64,
    fetch_micros: AtomicU64,
    reservations: AtomicU64,
    waits: AtomicU64,
    fetch_errors: AtomicU64,
}

impl Tally {
    pub(crate) fn fetched(&self, latency: Duration) {
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.fetch_micros.fetch_add(micros, Ordering::Relaxed);
    }

    pub(crate) fn reserved(&self) {
        self.reservations.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn waited(&self) {
        self.waits.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn failed(&self) {
        self.fetch_errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn totals(&self) -> Totals {
        Totals {
            fetches: self.fetches.load(Ordering::Relaxed),
            fetch_seconds: self.fetch_micros.load(Ordering::Relaxed) as f64 / 1e6,
            global_reservations: self.reservations.load(Ordering::Relaxed),
            waits: self.waits.load(Ordering::Relaxed),
            fetch_errors: self.fetch_errors.load(Ordering::Relaxed),
        }
    }
}

/// What every sequence of this instance did since it started, added up:
/// [`crate::allocator::Allocator::totals`]. Buffers dropped since (a serial
/// period's counter, once the period is over) still count.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    /// Segments fetched (a serial period's counter included); a global
    /// sequence's reservations are not segments and count in
    /// `global_reservations` instead.
    pub fetches: u64,
    /// The latencies of those fetches added up, in seconds.
    pub fetch_seconds: f64,
    /// Reservations made for global sequences: each serves the requests
    /// that were waiting together, and fetches no segment.
    pub global_reservations: u64,
    /// Requests that waited for a fetch (each counted once), those for a
    /// name then found missing included.
    pub waits: u64,
    /// Fetches that failed (each attempt).
    pub fetch_errors: u64,
}
