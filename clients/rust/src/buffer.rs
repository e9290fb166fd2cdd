//! One sequence's double buffer over leases: the lease IDs are handed out
//! from (current), the one fetched ahead (next), the switch between them,
//! and the one fetch in flight. Modelled on the server's own double buffer
//! (crates/seqd-core, `allocator/double.rs`), with leases instead of
//! segments of the row.
//!
//! The current lease lives inline as two atomics, `cursor` (the next ID to
//! hand out) and `end` (one past its last ID). Taking IDs is a load of both
//! and one compare-and-swap that never moves `cursor` past `end`: no lock,
//! no reference count, no await. Only when the current lease is used up does
//! a caller take the mutex, to make the next lease current (the switch) or to
//! wait for the fetch in flight.
//!
//! Why IDs come out in increasing order and never twice: `cursor` only ever
//! grows. Each lease starts above every ID of the leases before it (the
//! server reserves each lease above the row's top, and the buffer serves a
//! lease only from above what it held before, see [`Slow::install`]); the
//! switch stores the new lease's first ID, which is at least the old `end`,
//! and the close stores `end`. So a compare-and-swap from a value `c`
//! succeeds only while `c` is still the cursor of the lease it was read from,
//! and every ID handed out is the cursor's value at one point of its single
//! modification order: a call that starts after another one returned gets a
//! higher ID, whichever tasks made them. The switch stores the new `cursor`
//! before the new `end` (release); a taker that read the new `end` (acquire)
//! finds the new `cursor` in its compare-and-swap, which fails if it still
//! holds an old value; one that read an old `end` with a new `cursor` sees
//! `cursor >= end`, empty, and takes the slow path.
//!
//! Fetches: once `prefetch_at` IDs of the current lease are handed out, the
//! taker that passes the mark starts the next lease's fetch in a task of its
//! own (one at a time per sequence: the mark is set to `i64::MAX` under the
//! mutex when a fetch starts). Callers that find both leases empty wait for
//! the fetch in flight, or start one if none is; a fetch that lands while the
//! current lease is used up is made current at once.

use std::pin::pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

use crate::error::{Attempt, Error};
use crate::transport::{Lease, Transport};

/// What every buffer of a client shares: the transport and the settings.
#[derive(Debug)]
pub(crate) struct Shared {
    pub transport: Transport,
    /// The fraction of a lease handed out that starts the next fetch.
    pub prefetch_ratio: f64,
    /// How long a failed fetch ahead waits before the next one may start
    /// (callers that find both leases empty do not wait for it).
    pub retry_after: Duration,
}

/// A sequence's buffer. See the module docs.
pub(crate) struct Buffer {
    /// The next ID of the current lease; `end` once used up or closed.
    cursor: AtomicI64,
    /// One past the last ID of the current lease.
    end: AtomicI64,
    /// The cursor value whose taking starts the next fetch; `i64::MAX` when
    /// none is wanted (a fetch in flight, a lease waiting, closed).
    prefetch_at: AtomicI64,
    slow: Mutex<Slow>,
    /// Wakes the callers waiting for a fetch (or the close).
    landed: Notify,
    name: Box<str>,
    shared: Arc<Shared>,
}

/// A lease as the buffer holds it: the lease and the first ID served of it
/// (above `lease.start` only when the server answered a range reaching below
/// what this buffer held before).
#[derive(Debug)]
struct Held {
    lease: Lease,
    from: i64,
}

/// The part behind the mutex.
#[derive(Debug, Default)]
struct Slow {
    /// The current lease (its cursor is [`Buffer::cursor`]).
    current: Option<Held>,
    /// The prefetch mark of the current lease.
    mark: i64,
    /// The lease fetched ahead.
    next: Option<Held>,
    /// One past the highest ID this buffer held: leases are served above it.
    high: Option<i64>,
    /// A fetch is in flight.
    fetching: bool,
    /// Fetches started; the number of the one in flight.
    started: u64,
    /// The last fetch finished, and its error if it failed.
    finished: u64,
    failed: Option<(u64, Error)>,
    /// Switches made: tells a fetch that failed whether its lease is still
    /// the current one when it re-arms the prefetch mark.
    switches: u64,
    closed: bool,
}

/// What the close took out of a buffer: what is left to give back, newest
/// first.
pub(crate) struct Sealed {
    /// `(lease, first ID not handed out)`, the prefetched lease first.
    pub rests: Vec<(Lease, i64)>,
}

impl Slow {
    /// Takes `lease` as the lease ahead, served from above every ID held
    /// before; `Err` (why) when all of it lies at or below them: a server
    /// that broke its guarantee, never served.
    fn install(&mut self, lease: Lease) -> Result<(), String> {
        let from = match self.high {
            Some(h) if lease.end <= h => {
                return Err(format!(
                    "a lease [{}, {}) not above the IDs this client held (up to {})",
                    lease.start,
                    lease.end,
                    h - 1
                ))
            }
            Some(h) => lease.start.max(h),
            None => lease.start,
        };
        self.high = Some(lease.end);
        self.next = Some(Held { lease, from });
        Ok(())
    }
}

impl Buffer {
    pub(crate) fn new(name: &str, shared: Arc<Shared>) -> Buffer {
        Buffer {
            cursor: AtomicI64::new(0),
            end: AtomicI64::new(0),
            prefetch_at: AtomicI64::new(i64::MAX),
            slow: Mutex::new(Slow::default()),
            landed: Notify::new(),
            name: name.into(),
            shared,
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    fn lock(&self) -> MutexGuard<'_, Slow> {
        // No code panics while holding it; a poisoned lock is still sound.
        self.slow.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hot path: one ID from the current lease, if it has one left.
    #[inline]
    pub(crate) fn take_one(self: &Arc<Self>) -> Option<i64> {
        let mut c = self.cursor.load(Ordering::Relaxed);
        loop {
            let end = self.end.load(Ordering::Acquire);
            if c >= end {
                return None;
            }
            match self
                .cursor
                .compare_exchange_weak(c, c + 1, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    if c >= self.prefetch_at.load(Ordering::Relaxed) {
                        self.want_next();
                    }
                    return Some(c);
                }
                Err(now) => c = now,
            }
        }
    }

    /// Up to `n` (>= 1) consecutive IDs from the current lease: `(first,
    /// count)`.
    #[inline]
    fn take_run(self: &Arc<Self>, n: u64) -> Option<(i64, u64)> {
        let mut c = self.cursor.load(Ordering::Relaxed);
        loop {
            let end = self.end.load(Ordering::Acquire);
            if c >= end {
                return None;
            }
            let got = n.min((end - c) as u64);
            match self.cursor.compare_exchange_weak(
                c,
                c + got as i64,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    if c + got as i64 > self.prefetch_at.load(Ordering::Relaxed) {
                        self.want_next();
                    }
                    return Some((c, got));
                }
                Err(now) => c = now,
            }
        }
    }

    /// The current lease passed its prefetch mark: starts the next fetch
    /// unless one is in flight or waiting (checked under the mutex, so there
    /// is only ever one).
    #[cold]
    #[inline(never)]
    fn want_next(self: &Arc<Self>) {
        let mut slow = self.lock();
        if slow.fetching || slow.next.is_some() || slow.closed {
            self.prefetch_at.store(i64::MAX, Ordering::Relaxed);
            return;
        }
        // A stale mark (of the lease before a switch) read by the taker.
        if self.cursor.load(Ordering::Relaxed) <= slow.mark {
            self.prefetch_at.store(slow.mark, Ordering::Relaxed);
            return;
        }
        self.start_fetch(&mut slow, true);
    }

    /// Starts a fetch in a task of its own (so that a caller giving up its
    /// wait does not abandon a lease half-fetched); its number.
    fn start_fetch(self: &Arc<Self>, slow: &mut Slow, ahead: bool) -> u64 {
        debug_assert!(!slow.fetching && slow.next.is_none() && !slow.closed);
        slow.fetching = true;
        slow.started += 1;
        let number = slow.started;
        let switches = slow.switches;
        self.prefetch_at.store(i64::MAX, Ordering::Relaxed);
        let buffer = self.clone();
        tokio::spawn(async move { buffer.fetch(number, switches, ahead).await });
        number
    }

    /// The fetch task: one lease (the transport tries every server), made
    /// current at once if the current one is used up; the waiters woken.
    async fn fetch(self: Arc<Self>, number: u64, switches: u64, ahead: bool) {
        let result = self.shared.transport.lease(&self.name).await;
        let retry = {
            let mut slow = self.lock();
            slow.fetching = false;
            slow.finished = number;
            let result = result.and_then(|lease| {
                let server = lease.server;
                slow.install(lease).map_err(|reason| Error::Unavailable {
                    name: self.name.to_string(),
                    attempts: vec![Attempt {
                        server: self.shared.transport.servers()[server].clone(),
                        reason,
                    }],
                })
            });
            match result {
                Ok(()) => {
                    slow.failed = None;
                    if !slow.closed {
                        self.switch(&mut slow);
                    }
                    false
                }
                Err(e) => {
                    slow.failed = Some((number, e));
                    ahead
                }
            }
        };
        self.landed.notify_waiters();
        if retry {
            // A fetch ahead failed: the next taker past the mark starts
            // another one, not before a pause (callers that run out do not
            // wait for it: they start a fetch of their own).
            tokio::time::sleep(self.shared.retry_after).await;
            let slow = self.lock();
            if slow.switches == switches && !slow.fetching && slow.next.is_none() && !slow.closed {
                self.prefetch_at.store(slow.mark, Ordering::Relaxed);
            }
        }
    }

    /// If the current lease is used up, makes the next one current. True
    /// when there are IDs to take now.
    fn switch(&self, slow: &mut Slow) -> bool {
        // Under the mutex no one else switches, and takers never move the
        // cursor past `end`.
        if self.cursor.load(Ordering::Relaxed) < self.end.load(Ordering::Relaxed) {
            return true;
        }
        if slow.closed {
            return false;
        }
        let Some(held) = slow.next.take() else {
            return false;
        };
        let (from, end) = (held.from, held.lease.end);
        let len = (end - from) as f64;
        let claimed = ((len * self.shared.prefetch_ratio).ceil() as i64).clamp(1, end - from);
        // The mark is the cursor value whose taking passes it.
        slow.mark = from + claimed - 1;
        slow.current = Some(held);
        slow.switches += 1;
        // Never a fetch in flight here: one starts only with no lease ahead.
        self.prefetch_at.store(slow.mark, Ordering::Relaxed);
        // The cursor first, then the end: see the module docs.
        self.cursor.store(from, Ordering::Release);
        self.end.store(end, Ordering::Release);
        true
    }

    /// The slow path of `next`: the current lease is used up (or there is
    /// none yet). Switches, or waits for the fetch in flight, or starts one.
    pub(crate) async fn next_slow(self: &Arc<Self>) -> Result<i64, Error> {
        let mut waited = None;
        loop {
            if let Some(id) = self.take_one() {
                return Ok(id);
            }
            let mut landed = pin!(self.landed.notified());
            {
                let mut slow = self.lock();
                if slow.closed {
                    return Err(Error::Closed);
                }
                if self.switch(&mut slow) {
                    continue;
                }
                waited = Some(self.fetch_to_wait_for(&mut slow, waited)?);
                landed.as_mut().enable();
            }
            landed.await;
        }
    }

    /// The slow path of `batch`: `n` IDs in increasing order, across as many
    /// leases as it takes. On an error the IDs already taken are dropped
    /// (never handed out: a gap).
    pub(crate) async fn batch(self: &Arc<Self>, n: usize) -> Result<Vec<i64>, Error> {
        let mut out = Vec::with_capacity(n);
        let mut waited = None;
        while out.len() < n {
            if let Some((first, got)) = self.take_run((n - out.len()) as u64) {
                out.extend(first..first + got as i64);
                continue;
            }
            let mut landed = pin!(self.landed.notified());
            {
                let mut slow = self.lock();
                if slow.closed {
                    return Err(Error::Closed);
                }
                if self.switch(&mut slow) {
                    continue;
                }
                waited = Some(self.fetch_to_wait_for(&mut slow, waited)?);
                landed.as_mut().enable();
            }
            landed.await;
        }
        Ok(out)
    }

    /// Both leases are empty: the fetch to wait for (the one in flight, or
    /// one started now), or the error of the fetch waited for last time if
    /// it failed and none finished since.
    fn fetch_to_wait_for(
        self: &Arc<Self>,
        slow: &mut Slow,
        waited: Option<u64>,
    ) -> Result<u64, Error> {
        if let (Some(w), Some((failed, e))) = (waited, &slow.failed) {
            if *failed >= w && *failed == slow.finished {
                return Err(e.clone());
            }
        }
        Ok(if slow.fetching {
            slow.started
        } else {
            self.start_fetch(slow, false)
        })
    }

    /// Ends handing out: claims what is left of the current lease (a taker
    /// racing it gets its ID first, or nothing), waits for the fetch in
    /// flight, and takes both leases out, with the first ID of each not
    /// handed out.
    pub(crate) async fn seal(&self) -> Sealed {
        let unissued = {
            let mut slow = self.lock();
            slow.closed = true;
            self.prefetch_at.store(i64::MAX, Ordering::Relaxed);
            let end = self.end.load(Ordering::Relaxed);
            let mut c = self.cursor.load(Ordering::Relaxed);
            while c < end {
                match self.cursor.compare_exchange_weak(
                    c,
                    end,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(now) => c = now,
                }
            }
            c.min(end)
        };
        // A fetch in flight lands in `next` (never made current once closed).
        loop {
            let mut landed = pin!(self.landed.notified());
            {
                let slow = self.lock();
                if !slow.fetching {
                    break;
                }
                landed.as_mut().enable();
            }
            landed.await;
        }
        let mut slow = self.lock();
        let mut rests = Vec::with_capacity(2);
        if let Some(next) = slow.next.take() {
            rests.push((next.lease, next.from));
        }
        if let Some(current) = slow.current.take() {
            rests.push((current.lease, unissued));
        }
        // Wakes the callers that were waiting: they find it closed.
        drop(slow);
        self.landed.notify_waiters();
        Sealed { rests }
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("name", &self.name)
            .field("cursor", &self.cursor.load(Ordering::Relaxed))
            .field("end", &self.end.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}
