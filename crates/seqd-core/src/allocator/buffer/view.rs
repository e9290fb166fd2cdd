//! What a buffer shows of itself: its numbers for `/metrics`
//! ([`SeqStats`]) and its state for the API and the monitor
//! ([`BufferSnapshot`]).

use super::FetchFailure;
use crate::domain::SeqName;

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
