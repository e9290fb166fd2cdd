//! The tasks a buffer starts and the reservations they make: the
//! background fetch loop of every buffer, and the merge loop of a global
//! sequence with its bounded reservations.

use super::*;

/// A reservation in flight, whichever statement makes it.
pub(super) type Reserving<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Reservation, StoreError>> + Send + 'a>,
>;

/// Reserves between `need` and `want` IDs of `name` (`need <= want`) that
/// keep its `max_id` within `cap` ([`crate::store::Segments::reserve_within`]):
/// `want` first, then a quarter as many after each refusal, down to
/// `need`; [`StoreError::Exhausted`], having changed nothing, when not even
/// `need` fits.
pub(super) async fn reserve_capped(
    store: &dyn crate::store::Segments,
    name: &SeqName,
    want: i64,
    need: i64,
    cap: i64,
) -> Result<Reservation, StoreError> {
    let mut ask = want.max(need);
    loop {
        match store.reserve_within(name, ask, cap).await {
            Err(StoreError::Exhausted) if ask > need && cap < i64::MAX => {
                ask = (ask / 4).max(need);
            }
            other => return other,
        }
    }
}

/// Serves a global sequence's queue: takes every request queued, reserves
/// their total in one statement, hands each its run in arrival order, and
/// goes again while requests arrived meanwhile. Ends when the queue is
/// empty (the next request starts a new loop).
///
/// A counter with a capacity reserves only within it: when the total does
/// not fit, each request is reserved on its own, in arrival order, and
/// those that do not fit are refused having changed nothing.
pub(super) async fn global_loop(buf: Arc<SeqBuffer>) {
    let merger = buf.merger.get().expect("made before the loop starts");
    let cap = buf.cap();
    loop {
        let batch = {
            let mut m = merger.lock().unwrap();
            if m.queue.is_empty() {
                m.running = false;
                return;
            }
            std::mem::take(&mut m.queue)
        };
        let total: u64 = batch.iter().map(|(n, _)| n).sum();
        metrics::histogram!(GLOBAL_MERGE_METRIC).record(batch.len() as f64);
        let answer = reserve_global(&buf, total, cap).await;
        if answer == Err(AllocError::Exhausted) && cap < i64::MAX && batch.len() > 1 {
            for (n, tx) in batch {
                let reply = reserve_global(&buf, n, cap).await.map(|first| IdRange {
                    first,
                    last: first + (n as i64 - 1),
                });
                // A caller that went away leaves its run unused: a gap.
                let _ = tx.send(reply);
            }
            continue;
        }
        let mut next = answer;
        for (n, tx) in batch {
            let reply = next.map(|first| IdRange {
                first,
                last: first + (n as i64 - 1),
            });
            if let Ok(first) = &mut next {
                *first += n as i64;
            }
            // A caller that went away leaves its run unused: a gap.
            let _ = tx.send(reply);
        }
    }
}

/// One reservation of [`global_loop`]: exactly `total` IDs within `cap`;
/// the first of them.
///
/// The high-water rule of the segments holds here too: a reservation that
/// reaches down to IDs this instance handed out (the row went back: a
/// restore, a hand edit, a lagging replica) is reported as a regression and
/// followed at once by ONE reservation large enough to clear the mark,
/// whose top `total` IDs are handed out; the IDs between are a gap.
pub(super) async fn reserve_global(
    buf: &Arc<SeqBuffer>,
    total: u64,
    cap: i64,
) -> Result<i64, AllocError> {
    let started = buf.shared.clock.now();
    let total = i64::try_from(total).unwrap_or(i64::MAX);
    let mut r = reserve_bounded(buf, total, cap).await?;
    if let Some(mark) = buf.high_water().filter(|&mark| r.first() <= mark) {
        buf.regressed(r, mark);
        let behind = mark.saturating_sub(r.max_id).max(0);
        r = reserve_bounded(buf, total.saturating_add(behind), cap).await?;
    }
    let first = r.max_id - (total - 1);
    if first <= buf.high_water().unwrap_or(0) || first < 1 {
        tracing::error!(sequence = %buf.name, max_id = r.max_id, total,
            "a global reservation still at or below IDs this instance handed out (or below \
             ID 1): refusing it");
        buf.count_error();
        return Err(AllocError::Unavailable {
            storage_failing: true,
        });
    }
    let now = buf.shared.clock.now();
    buf.count_reservation(started, now);
    buf.segments.count_outside(total as u64);
    // Every ID this instance hands out counts for the high-water mark: a
    // segment reserved before a switch and landing after the switch back is
    // then below it, and never served; a global reservation below it is a
    // regression (above).
    {
        let mut st = buf.state.lock().unwrap();
        if st.high_water.is_none_or(|h| h.get() < r.max_id) {
            st.high_water = NonZeroI64::new(r.max_id);
        }
        // What the monitor shows of a global sequence: when its last
        // reservation started and how long it took.
        st.last_fetch_at = Some(Stamp::of(started));
        st.last_fetch_latency = Some(Stamp::of(now.saturating_sub(started)));
        st.last_error = None;
    }
    if r.ordering == IdOrdering::Instance {
        // Switched back by PATCH or SQL: later requests use segments.
        buf.set_ordering(IdOrdering::Instance);
    }
    if !buf.global.load(Ordering::Acquire) {
        // Segments are in use again (switched back while this queue
        // drained): one reserved before this reservation lies below its
        // IDs, so it goes, before they are handed out; the next fetch lands
        // above them.
        buf.state.lock().unwrap().dropped = true;
        buf.segments.seal();
    }
    Ok(first)
}

/// One statement of [`reserve_global`]: exactly `n` IDs within `cap`, under
/// the fetch timeout, its failures counted and mapped.
async fn reserve_bounded(
    buf: &Arc<SeqBuffer>,
    n: i64,
    cap: i64,
) -> Result<Reservation, AllocError> {
    let timeout = buf.shared.config.fetch_timeout;
    let reserved =
        tokio::time::timeout(timeout, buf.shared.store.reserve_within(&buf.name, n, cap)).await;
    match reserved {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(StoreError::NotFound)) => Err(AllocError::NotFound),
        Ok(Err(StoreError::Exhausted)) => Err(AllocError::Exhausted),
        Ok(Err(StoreError::Serial)) => {
            buf.set_serial(true);
            Err(AllocError::Serial)
        }
        Ok(Err(e)) => {
            tracing::warn!(sequence = %buf.name, error = %e, "global reservation failed");
            buf.count_error();
            Err(AllocError::Unavailable {
                storage_failing: true,
            })
        }
        Err(_) => {
            tracing::warn!(sequence = %buf.name, ?timeout, "global reservation timed out");
            buf.count_error();
            Err(AllocError::Unavailable {
                storage_failing: true,
            })
        }
    }
}

/// The background fetch: reserve a range, install it, retry with backoff on
/// storage errors. Ends when the range is installed, on a terminal error, or
/// when the buffer is dropped.
///
/// A range at or below the high-water mark (a regression) is followed at once
/// by ONE reservation large enough to clear the mark; only if that one still
/// falls short does the loop back off.
pub(super) async fn fetch_loop(weak: Weak<SeqBuffer>) {
    // IDs to ask for on top of the planned size, to clear the high-water mark.
    let mut catch_up: Option<i64> = None;
    // Whether an attempt of this fetch failed.
    let mut failed = false;
    loop {
        let Some(buf) = weak.upgrade() else { return };
        let plan = buf.plan_fetch();
        let started = buf.shared.clock.now();
        let timeout = buf.shared.config.fetch_timeout;
        let store = &buf.shared.store;
        let reserve: Reserving<'_> = match plan {
            Plan::Full => return buf.fail_terminal(Terminal::Exhausted),
            Plan::AtLeast(size) => {
                let ask = size.saturating_add(catch_up.unwrap_or(0));
                // Above every ID this buffer holds: a store over several
                // databases lifts a lagging one past it (a single database
                // ignores it).
                let floor = buf.high_water().unwrap_or(0);
                match &buf.shared.group {
                    // The first fetch of a name new to this instance joins
                    // the next group; after a failure it goes alone, so
                    // that a name whose row is locked does not hold up the
                    // next group too (docs/design.md, "Grouped first
                    // reservations").
                    Some(group) if floor == 0 && catch_up.is_none() && !failed => {
                        Box::pin(group.clone().reserve(buf.name.clone(), ask))
                    }
                    _ => store.reserve_above(&buf.name, ask, floor),
                }
            }
            Plan::Exactly(size) => Box::pin(reserve_capped(
                store.as_ref(),
                &buf.name,
                size,
                1,
                buf.cap(),
            )),
        };
        let result = tokio::time::timeout(timeout, reserve).await;
        let backoff = match result {
            Err(_elapsed) => {
                tracing::warn!(sequence = %buf.name, ?timeout, "segment fetch timed out; will retry");
                buf.record_failure(FetchFailure::Timeout)
            }
            Ok(Ok(r)) if r.ordering == IdOrdering::Global || buf.global.load(Ordering::Acquire) => {
                // A global sequence serves no segment: this one goes back to
                // the row (when nothing was reserved since) before the
                // waiting requests reserve, so that a new global sequence
                // starts at its `start`; otherwise it is a gap.
                let given = store.give_back(&buf.name, r.max_id, r.first() - 1);
                if let Ok(Err(e)) = tokio::time::timeout(timeout, given).await {
                    tracing::debug!(sequence = %buf.name, error = %e,
                        "giving back a segment of a global sequence failed (a gap)");
                }
                let installed = buf.install(r, started, false);
                debug_assert!(matches!(installed, Installed::Ready));
                return;
            }
            Ok(Ok(r)) => match buf.install(r, started, catch_up.is_some()) {
                Installed::Ready => return,
                Installed::Stale => continue,
                Installed::Behind(behind) if catch_up.is_none() => {
                    catch_up = Some(behind);
                    continue;
                }
                Installed::Behind(behind) => {
                    catch_up = Some(behind);
                    buf.record_failure(FetchFailure::Regression)
                }
            },
            Ok(Err(StoreError::NotFound)) => return buf.fail_terminal(Terminal::NotFound),
            Ok(Err(StoreError::Exhausted)) => return buf.fail_terminal(Terminal::Exhausted),
            Ok(Err(StoreError::Serial)) => {
                // Serial first: a request between the two starts no fetch.
                buf.set_serial(true);
                buf.fetching.store(false, Ordering::Release);
                return;
            }
            Ok(Err(e)) => {
                tracing::warn!(sequence = %buf.name, error = %e, "segment fetch failed; will retry");
                buf.record_failure(FetchFailure::of_store(&e))
            }
        };
        failed = true;
        drop(buf);
        tokio::time::sleep(backoff).await;
    }
}
