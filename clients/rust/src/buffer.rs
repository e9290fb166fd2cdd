//! One sequence's buffer over leases: the core's double buffer
//! (`seqd_core::allocator::double::DoubleBuffer`, the server's own, whose
//! every operation this file calls is model-checked by
//! `crates/seqd-core/tests/loom_double.rs`) holds the leased ranges, the
//! current one and the one fetched ahead, and switches between them. Around
//! it, what only the client does: the lease behind each range (its key and
//! its server, for the give-back), the one fetch in flight, the callers
//! waiting for it, and the close. docs/design.md, "The double buffer",
//! explains the lock-free part.
//!
//! Taking an ID is the core's `take_fast(1)`: one compare-and-swap, no lock,
//! no await. Only when the current lease is used up does a caller take this
//! buffer's mutex, to take through the core's `take` (which switches to the
//! lease ahead) or to wait for the fetch in flight.
//!
//! Why IDs come out in increasing order and never twice: the core's cursor
//! only ever grows, because each lease is served from above every ID of the
//! leases before it (the server reserves each lease above the row's top, and
//! [`Buffer::install`] serves a lease only above what this buffer held
//! before). Every ID handed out is the cursor's value at one point of its
//! single modification order: a call that starts after another one returned
//! gets a higher ID, whichever tasks made them.
//!
//! Fetches: once the claims of the current lease pass its prefetch mark
//! (`prefetch_at` of it handed out), the taker that sees it starts the next
//! lease's fetch in a task of its own, one at a time per sequence: `hold` is
//! set while a fetch is in flight (and during the pause after a failed fetch
//! ahead, until that pause ends or a fetch of callers that ran out ends
//! first, and once closed), and a fetch starts only under the mutex with no
//! lease ahead and none in flight. Callers that find both leases empty wait
//! for the fetch in flight, or start one if none is.

use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use seqd_core::allocator::double::DoubleBuffer;
use seqd_core::allocator::segment::{IdRange, Segment};
use seqd_core::domain::SeqName;
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
    /// The leased ranges: current and next.
    ids: DoubleBuffer,
    /// No fetch ahead may start: one is in flight, a failed one pauses, or
    /// the buffer is closed. A hint read without the mutex; the mutex
    /// decides.
    hold: AtomicBool,
    slow: Mutex<Slow>,
    /// Wakes the callers waiting for a fetch (or the close).
    landed: Notify,
    name: SeqName,
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
    /// The lease installed last (the core's next segment until it is
    /// switched to), and the one before it (current, or used up).
    next: Option<Held>,
    before: Option<Held>,
    /// One past the highest ID this buffer held: leases are served above it
    /// (IDs below 0 are never served).
    high: i64,
    /// A fetch is in flight.
    fetching: bool,
    /// Fetches started; the number of the one in flight.
    started: u64,
    /// The last fetch finished, and its error if it failed.
    finished: u64,
    failed: Option<(u64, Error)>,
    closed: bool,
}

/// What the close took out of a buffer: what is left to give back, newest
/// first.
pub(crate) struct Sealed {
    /// `(lease, first ID not handed out)`, the prefetched lease first.
    pub rests: Vec<(Lease, i64)>,
}

/// How many IDs of a lease of `len` are handed out before the one whose
/// taking starts the next fetch: the `ceil(len * ratio)`-th ID (at least the
/// first, at most the last) starts it.
fn prefetch_mark(len: u64, ratio: f64) -> u64 {
    ((len as f64 * ratio).ceil() as u64).clamp(1, len) - 1
}

impl Buffer {
    pub(crate) fn new(name: SeqName, shared: Arc<Shared>) -> Buffer {
        Buffer {
            ids: DoubleBuffer::new(Segment::EMPTY),
            hold: AtomicBool::new(false),
            slow: Mutex::new(Slow::default()),
            landed: Notify::new(),
            name,
            shared,
        }
    }

    pub(crate) fn name(&self) -> &str {
        self.name.as_str()
    }

    fn lock(&self) -> MutexGuard<'_, Slow> {
        // No code panics while holding it; a poisoned lock is still sound.
        self.slow.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hot path: one ID from the current lease, if it has one left.
    #[inline]
    pub(crate) fn take_one(self: &Arc<Self>) -> Option<i64> {
        let taken = self.ids.take_fast(1);
        self.passed_mark(taken.past_prefetch_mark);
        Some(taken.range?.first)
    }

    /// After a take without the lock: when it passed the prefetch mark and
    /// nothing is ahead or on its way, starts the next fetch.
    #[inline]
    fn passed_mark(self: &Arc<Self>, past_prefetch_mark: bool) {
        if past_prefetch_mark && !self.ids.has_next() && !self.hold.load(Ordering::Relaxed) {
            self.want_next();
        }
    }

    /// The current lease passed its prefetch mark: starts the next fetch.
    #[cold]
    #[inline(never)]
    fn want_next(self: &Arc<Self>) {
        let mut slow = self.lock();
        self.fetch_ahead(&mut slow);
    }

    /// Starts the fetch ahead unless one is in flight or waiting, or a failed
    /// one pauses (checked under the mutex, so there is only ever one), or
    /// the mark that was passed is a stale one (of the lease before a
    /// switch).
    fn fetch_ahead(self: &Arc<Self>, slow: &mut Slow) {
        if slow.fetching || slow.closed || self.hold.load(Ordering::Relaxed) || self.ids.has_next()
        {
            return;
        }
        let (current, used) = self.ids.current();
        if used > current.prefetch_at() {
            self.start_fetch(slow, true);
        }
    }

    /// Starts a fetch in a task of its own (so that a caller giving up its
    /// wait does not abandon a lease half-fetched); its number.
    fn start_fetch(self: &Arc<Self>, slow: &mut Slow, ahead: bool) -> u64 {
        debug_assert!(!slow.fetching && !self.ids.has_next() && !slow.closed);
        slow.fetching = true;
        slow.started += 1;
        let number = slow.started;
        self.hold.store(true, Ordering::Relaxed);
        let buffer = self.clone();
        tokio::spawn(async move { buffer.fetch(number, ahead).await });
        number
    }

    /// The fetch task: one lease (the transport tries every server),
    /// installed as the next one; the waiters woken.
    async fn fetch(self: Arc<Self>, number: u64, ahead: bool) {
        let result = self.shared.transport.lease(self.name()).await;
        let pause = {
            let mut slow = self.lock();
            slow.fetching = false;
            slow.finished = number;
            match result.and_then(|lease| self.install(&mut slow, lease)) {
                Ok(()) => {
                    slow.failed = None;
                    self.release_hold(&slow);
                    false
                }
                Err(e) => {
                    slow.failed = Some((number, e));
                    if !ahead {
                        self.release_hold(&slow);
                    }
                    ahead
                }
            }
        };
        self.landed.notify_waiters();
        if pause {
            // A fetch ahead failed: the next taker past the mark starts
            // another one, not before a pause (callers that run out do not
            // wait for it: they start a fetch of their own).
            tokio::time::sleep(self.shared.retry_after).await;
            let slow = self.lock();
            if slow.started == number {
                self.release_hold(&slow);
            }
        }
    }

    /// Lets the next fetch ahead start, unless closed.
    fn release_hold(&self, slow: &Slow) {
        if !slow.closed {
            self.hold.store(false, Ordering::Relaxed);
        }
    }

    /// Takes `lease` as the lease ahead, served from above every ID held
    /// before; an error when all of it lies at or below them: a server that
    /// broke its guarantee, never served. Once closed, it is only kept for
    /// the give-back, whole.
    fn install(&self, slow: &mut Slow, lease: Lease) -> Result<(), Error> {
        if lease.end <= slow.high {
            let reason = if slow.high == 0 {
                format!("a lease [{}, {}) of negative IDs", lease.start, lease.end)
            } else {
                format!(
                    "a lease [{}, {}) not above the IDs this client held (up to {})",
                    lease.start,
                    lease.end,
                    slow.high - 1
                )
            };
            return Err(Error::Unavailable {
                name: self.name().to_owned(),
                attempts: vec![Attempt {
                    server: self.shared.transport.servers()[lease.server].clone(),
                    reason,
                }],
            });
        }
        let from = lease.start.max(slow.high);
        slow.high = lease.end;
        let len = (lease.end - from) as u64;
        let held = Held { lease, from };
        if !slow.closed {
            let mark = prefetch_mark(len, self.shared.prefetch_ratio);
            // A fetch starts only with no segment ahead (under this mutex,
            // where installs happen): the core takes it.
            let installed = self
                .ids
                .install_next(Segment::with_prefetch_at(from, len, mark));
            debug_assert!(installed.is_ok(), "a second lease ahead");
            slow.before = slow.next.take();
        }
        slow.next = Some(held);
        Ok(())
    }

    /// The slow path of `next` and `batch`: `n` (>= 1) IDs in increasing
    /// order, across as many leases as it takes, switching to the lease
    /// ahead, or waiting for the fetch in flight, or starting one. On an
    /// error the IDs already taken are dropped (never handed out: a gap).
    async fn take(self: &Arc<Self>, n: u64) -> Result<Vec<IdRange>, Error> {
        let mut runs = Vec::new();
        let mut missing = n;
        let mut waited = None;
        loop {
            let mut landed = pin!(self.landed.notified());
            {
                let mut slow = self.lock();
                if slow.closed {
                    return Err(Error::Closed);
                }
                let progress = self.ids.take(missing, &mut runs);
                missing = progress.missing;
                if missing == 0 {
                    if progress.past_prefetch_mark {
                        self.fetch_ahead(&mut slow);
                    }
                    return Ok(runs);
                }
                waited = Some(self.fetch_to_wait_for(&mut slow, waited)?);
                landed.as_mut().enable();
            }
            landed.await;
        }
    }

    /// The slow path of `next`: one ID.
    pub(crate) async fn next_slow(self: &Arc<Self>) -> Result<i64, Error> {
        Ok(self.take(1).await?[0].first)
    }

    /// `batch`: `n` (>= 1) IDs in increasing order, lock-free while the
    /// current lease holds them.
    pub(crate) async fn batch(self: &Arc<Self>, n: usize) -> Result<Vec<i64>, Error> {
        let mut ids = Vec::with_capacity(n);
        // From the current lease without the lock first, as `next` does;
        // the rest (if any) after those IDs, under it.
        let taken = self.ids.take_fast(n as u64);
        self.passed_mark(taken.past_prefetch_mark);
        if let Some(run) = taken.range {
            ids.extend(run.iter());
        }
        if ids.len() < n {
            for run in self.take((n - ids.len()) as u64).await? {
                ids.extend(run.iter());
            }
        }
        Ok(ids)
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
    /// flight, and takes every lease out, with the first ID of each not
    /// handed out.
    pub(crate) async fn seal(&self) -> Sealed {
        let mut rests = {
            let mut slow = self.lock();
            slow.closed = true;
            self.hold.store(true, Ordering::Relaxed);
            let (current, unissued, next) = self.ids.seal();
            let mut rests = Vec::with_capacity(2);
            // Leases are told apart by their first ID served: no two share one.
            for held in [slow.next.take(), slow.before.take()].into_iter().flatten() {
                if next.is_some_and(|s| s.first() == held.from) {
                    rests.push((held.lease, held.from));
                } else if !current.is_empty() && current.first() == held.from {
                    rests.push((held.lease, unissued));
                }
            }
            rests
        };
        // A fetch in flight lands whole in `next` (never served once closed).
        loop {
            let mut landed = pin!(self.landed.notified());
            {
                let mut slow = self.lock();
                if !slow.fetching {
                    if let Some(late) = slow.next.take() {
                        rests.insert(0, (late.lease, late.from));
                    }
                    break;
                }
                landed.as_mut().enable();
            }
            landed.await;
        }
        // Wakes the callers that were waiting: they find it closed.
        self.landed.notify_waiters();
        Sealed { rests }
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (issued, left) = self.ids.counts();
        f.debug_struct("Buffer")
            .field("name", &self.name)
            .field("issued", &issued)
            .field("left", &left)
            .finish_non_exhaustive()
    }
}
