//! How a buffer serves its requests: from the current segment, switching
//! to the next one and waiting for fetches; a global sequence's at request
//! time; a bounded counter's whole or not at all (docs/design.md, "The hot
//! path and the memory of one sequence", "Serial numbers").

use super::*;

/// A request's wait for fetches: its deadline, and whether its first wait
/// was counted in the buffer's `waits`.
struct Waiting {
    deadline: tokio::time::Instant,
    counted: bool,
}

impl SeqBuffer {
    /// Whether requests are served in global order now (at request time,
    /// [`SeqBuffer::take_global`]); [`AllocError::Serial`] when the row
    /// issues serial numbers, whose requests are refused.
    #[inline]
    fn in_global_order(&self) -> Result<bool, AllocError> {
        if self.serial.load(Ordering::Acquire) {
            return Err(AllocError::Serial);
        }
        Ok(self.global.load(Ordering::Acquire))
    }

    /// Serves `n` IDs of a global sequence: the request joins the queue and
    /// is served by the next reservation that starts after it arrived, one
    /// for every request queued meanwhile, each its own run in arrival
    /// order (docs/design.md, "Global ordering"). No memory to ride on: a
    /// failing database fails the request.
    async fn take_global(
        self: &Arc<Self>,
        n: u64,
        out: &mut Vec<IdRange>,
    ) -> Result<(), AllocError> {
        let (tx, rx) = oneshot::channel();
        let lead = {
            let merger = self.merger.get_or_init(Box::default);
            let mut m = merger.lock().unwrap();
            m.queue.push((n, tx));
            !std::mem::replace(&mut m.running, true)
        };
        if lead {
            tokio::spawn(global_loop(self.clone()));
        }
        match tokio::time::timeout(self.shared.config.wait_timeout, rx).await {
            Ok(Ok(Ok(run))) => {
                out.push(run);
                Ok(())
            }
            Ok(Ok(Err(e))) => Err(e),
            _ => Err(AllocError::Unavailable {
                storage_failing: false,
            }),
        }
    }

    /// Hot path: claims `n` IDs from the current segment without waiting.
    /// Returns the run obtained (possibly shorter than `n`, or `None`).
    #[inline]
    pub(in crate::allocator) fn take_fast(self: &Arc<Self>, n: u64) -> Option<IdRange> {
        let taken = self.segments.take_fast(n);
        if taken.past_prefetch_mark {
            self.maybe_prefetch();
        }
        taken.range
    }

    /// Claims `n` IDs, switching segments and waiting for fetches as needed.
    /// Appends the runs obtained to `out`, in increasing order.
    pub(in crate::allocator) async fn take(
        self: &Arc<Self>,
        n: u64,
        out: &mut Vec<IdRange>,
    ) -> Result<(), AllocError> {
        let mut remaining = n;
        if self.in_global_order()? {
            return self.take_global(n, out).await;
        }
        if let Some(r) = self.take_fast(n) {
            out.push(r);
            remaining -= r.len();
        }
        if remaining > 0 {
            self.take_slow(remaining, out).await?;
        }
        Ok(())
    }

    /// Claims `n` consecutive IDs as one run (docs/design.md, "Runs"): from
    /// one segment, the rest of a segment too short for it left unused once
    /// the next segment holds the run, waiting for that segment's fetch as
    /// [`SeqBuffer::take`] does. A global sequence's draw is one run
    /// already. [`AllocError::RunTooLong`], having taken nothing, when the
    /// next segment is shorter than `n`.
    pub(in crate::allocator) async fn take_run(
        self: &Arc<Self>,
        n: u64,
    ) -> Result<IdRange, AllocError> {
        let mut waiting = self.waiting();
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();

            if self.in_global_order()? {
                let mut out = Vec::with_capacity(1);
                self.take_global(n, &mut out).await?;
                return out.pop().ok_or(AllocError::Unavailable {
                    storage_failing: false,
                });
            }
            match self.segments.take_run(n) {
                Run::Got {
                    run,
                    past_prefetch_mark,
                } => {
                    if past_prefetch_mark {
                        self.maybe_prefetch();
                    }
                    return Ok(run);
                }
                Run::TooShort { len } => return Err(AllocError::RunTooLong { segment: len }),
                Run::Dry => {}
            }
            if let Some(t) = self.live_terminal() {
                return Err(t.into());
            }
            self.start_fetch();
            self.wait_for_fetch(notified, &mut waiting).await?;
        }
    }

    /// [`SeqBuffer::take`] for any buffer: a counter with a capacity is
    /// served whole or not at all ([`SeqBuffer::take_bounded`]).
    pub(in crate::allocator) async fn take_counter(
        self: &Arc<Self>,
        n: u64,
        out: &mut Vec<IdRange>,
    ) -> Result<(), AllocError> {
        match self.counter.get() {
            Some(counter) if counter.bounds.max.is_some() => {
                self.take_bounded(counter, n, out).await
            }
            _ => self.take(n, out).await,
        }
    }

    /// The largest counter a reservation may reach: the capacity of a
    /// bounded counter, else `i64::MAX`.
    pub(super) fn cap(&self) -> i64 {
        self.counter
            .get()
            .and_then(|c| c.bounds.max)
            .unwrap_or(i64::MAX)
    }

    /// Claims `n` counters of a counter with a capacity, all of them or
    /// none (docs/design.md, "Serial numbers"): a request the capacity
    /// cannot serve takes nothing from memory and changes nothing in the
    /// row. One request at a time ([`Counter::turn`]): it serves itself
    /// from memory when memory holds `n`; otherwise it reserves what memory
    /// lacks (a segment's worth when that is more and fits) in one
    /// statement that never passes the capacity, and is refused, having
    /// taken nothing, when even what it lacks does not fit.
    async fn take_bounded(
        self: &Arc<Self>,
        counter: &Counter,
        n: u64,
        out: &mut Vec<IdRange>,
    ) -> Result<(), AllocError> {
        let mut waiting = self.waiting();
        let Ok(turn) = tokio::time::timeout_at(waiting.deadline, counter.turn.lock()).await else {
            return Err(AllocError::Unavailable {
                storage_failing: false,
            });
        };
        let base = out.len();
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();

            if self.in_global_order()? {
                drop(turn);
                return self.take_global(n, out).await;
            }
            let held = self.segments.counts().1;
            if held >= n {
                let progress = self.segments.take(n, out);
                if progress.past_prefetch_mark {
                    self.maybe_prefetch();
                }
                if progress.missing == 0 {
                    return Ok(());
                }
                // Sealed meanwhile (settings switched, shutdown): what was
                // taken is a gap, as the rest of the sealed segments.
                out.truncate(base);
                continue;
            }
            if let Some(t) = self.live_terminal() {
                return Err(t.into());
            }
            // Holding the fetch slot: no fetch lands while memory and the
            // row are combined.
            if self
                .fetching
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return self.reserve_missing(n, held, out).await;
            }
            // A fetch is in flight: it may bring enough.
            self.wait_for_fetch(notified, &mut waiting).await?;
        }
    }

    /// The end of [`SeqBuffer::take_bounded`] when memory holds `held`
    /// counters, fewer than `n`, and the caller holds the fetch slot
    /// (released here): reserves the `n - held` missing, or a segment's
    /// worth when that is more and fits, as a fetch would, and hands out
    /// memory's counters then the reserved ones; the rest is the next
    /// segment. Refused by the row, it takes nothing.
    async fn reserve_missing(
        self: &Arc<Self>,
        n: u64,
        held: u64,
        out: &mut Vec<IdRange>,
    ) -> Result<(), AllocError> {
        let need = i64::try_from(n - held).unwrap_or(i64::MAX);
        let more = match self.plan_fetch() {
            Plan::Full => return self.refuse_missing(need),
            Plan::Exactly(size) | Plan::AtLeast(size) => size,
        };
        let started = self.shared.clock.now();
        let timeout = self.shared.config.fetch_timeout;
        let reserve = reserve_capped(
            self.shared.store.as_ref(),
            &self.name,
            need.max(more),
            need,
            self.cap(),
        );
        let r = match tokio::time::timeout(timeout, reserve).await {
            Ok(Ok(r)) => r,
            Ok(Err(StoreError::Exhausted)) => return self.refuse_missing(need),
            Ok(Err(StoreError::NotFound)) => {
                self.fail_terminal(Terminal::NotFound);
                return Err(AllocError::NotFound);
            }
            Ok(Err(StoreError::Serial)) => {
                self.set_serial(true);
                self.fetching.store(false, Ordering::Release);
                return Err(AllocError::Serial);
            }
            Ok(Err(e)) => {
                tracing::warn!(sequence = %self.name, error = %e, "counter reservation failed");
                return Err(self.missing_failed(FetchFailure::of_store(&e)));
            }
            Err(_) => {
                tracing::warn!(sequence = %self.name, ?timeout, "counter reservation timed out");
                return Err(self.missing_failed(FetchFailure::Timeout));
            }
        };
        let now = self.shared.clock.now();
        {
            let mut st = self.state.lock().unwrap();
            if let Some(hw) = st
                .high_water
                .map(NonZeroI64::get)
                .filter(|hw| r.first() <= *hw)
            {
                drop(st);
                // The row went back (lowered or restored by hand): its
                // counters may have been served; none is handed out.
                self.regressed(r, hw);
                return Err(self.missing_failed(FetchFailure::Regression));
            }
            st.landed(r, r.size, started, now);
        }
        self.count_fetch(started, now);
        // Memory's counters first: every reserved counter lies above them.
        let progress = self.segments.take(held, out);
        let first = r.first();
        out.push(IdRange {
            first,
            last: first + (need - 1),
        });
        // Handed out without passing a segment: counted as issued all the same.
        self.segments.count_outside(need as u64);
        let rest = Segment::new(
            first + need,
            (r.size - need) as u64,
            self.shared.config.prefetch_ratio,
        );
        if !rest.is_empty() && self.segments.install_next(rest).is_err() {
            tracing::error!(sequence = %self.name, "a next segment was already waiting; dropping the new one");
        }
        self.fetching.store(false, Ordering::Release);
        self.notify.notify_waiters();
        if r.ordering == IdOrdering::Global {
            // Switched by PATCH or SQL: the next requests go global.
            self.set_ordering(IdOrdering::Global);
        }
        if progress.missing > 0 {
            // Sealed meanwhile: the request is not served whole.
            return Err(AllocError::Unavailable {
                storage_failing: false,
            });
        }
        Ok(())
    }

    /// The row cannot hold the `need` counters a request lacks: it is
    /// refused, having taken nothing. When not even one fits, the counter
    /// is full: remembered for the negative-cache interval.
    fn refuse_missing(&self, need: i64) -> Result<(), AllocError> {
        if need <= 1 {
            self.fail_terminal(Terminal::Exhausted);
        } else {
            self.fetching.store(false, Ordering::Release);
            self.notify.notify_waiters();
        }
        Err(AllocError::Exhausted)
    }

    /// Records a failed reservation of [`SeqBuffer::reserve_missing`] and
    /// releases the fetch slot.
    fn missing_failed(&self, failure: FetchFailure) -> AllocError {
        self.record_failure(failure);
        self.fetching.store(false, Ordering::Release);
        self.notify.notify_waiters();
        AllocError::Unavailable {
            storage_failing: true,
        }
    }

    async fn take_slow(
        self: &Arc<Self>,
        mut remaining: u64,
        out: &mut Vec<IdRange>,
    ) -> Result<(), AllocError> {
        let mut waiting = self.waiting();
        loop {
            // Register for the wake-up before looking, so none is missed.
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();

            let progress = self.segments.take(remaining, out);
            if progress.past_prefetch_mark {
                self.maybe_prefetch();
            }
            remaining = progress.missing;
            if remaining == 0 {
                return Ok(());
            }
            if let Some(t) = self.live_terminal() {
                return Err(t.into());
            }
            if self.in_global_order()? {
                // Switched while waiting (the fetch found the row global).
                return self.take_global(remaining, out).await;
            }
            self.start_fetch();
            self.wait_for_fetch(notified, &mut waiting).await?;
        }
    }

    /// A request's wait for fetches, from now: [`SeqBuffer::wait_for_fetch`].
    fn waiting(&self) -> Waiting {
        Waiting {
            deadline: tokio::time::Instant::now() + self.shared.config.wait_timeout,
            counted: false,
        }
    }

    /// Waits for the next wake-up of this buffer (a fetch landed or failed,
    /// settings switched) until the request's deadline, counting its first
    /// wait in `waits`; past the deadline, [`AllocError::Unavailable`].
    async fn wait_for_fetch(
        &self,
        notified: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
        waiting: &mut Waiting,
    ) -> Result<(), AllocError> {
        if !std::mem::replace(&mut waiting.counted, true) {
            self.waits.fetch_add(1, Ordering::Relaxed);
            self.shared.tally.waited();
        }
        if tokio::time::timeout_at(waiting.deadline, notified)
            .await
            .is_err()
        {
            let failing = self.state.lock().unwrap().consecutive_failures > 0;
            return Err(AllocError::Unavailable {
                storage_failing: failing,
            });
        }
        Ok(())
    }
}
