//! The snowflake generator: (timestamp, worker ID, sequence) under one short
//! lock, with a wall clock that may go backwards.
//!
//! Rules, in the order [`Generator`] applies them on every call:
//!
//! 1. No [`Grant`] (no worker ID leased), or the clock has reached the grant's
//!    `issue_until_ms` (the lease was not renewed in time): refuse.
//! 2. The clock is behind the last timestamp used: if by at most the
//!    tolerance, wait (async sleep) until it catches up; otherwise refuse with
//!    [`SnowflakeError::ClockMovedBackwards`] and count it. Nothing is kept
//!    from a refusal: the next call that finds the clock caught up succeeds.
//! 3. The sequence of the current time unit is used up: wait (async sleep,
//!    asked to end at the microsecond the next unit starts; tokio's timer
//!    then fires at its next 1 ms tick) for the next unit. No spinning.
//! 4. Never use a time unit that ends after the grant's `bound_ms`, the upper
//!    bound persisted with the lease before any ID under it was issued.
//!
//! So the IDs this generator issues strictly increase, across worker-ID changes too (a new worker ID starts after the
//! last timestamp used). Every wait of one call together is bounded (see
//! [`Generator::wait_budget`]); past it the call fails instead of hanging.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::layout::Layout;
use crate::domain::clock::WallClock;

/// Counter: calls refused because the clock was behind by more than the tolerance.
pub const CLOCK_BACKWARDS_METRIC: &str = "seqd_snowflake_clock_backwards_total";
/// Counter: waits for a clock that was behind by at most the tolerance.
pub const CLOCK_WAITS_METRIC: &str = "seqd_snowflake_clock_waits_total";

/// The right to issue IDs under one worker ID, given by the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The leased worker ID.
    pub worker_id: u32,
    /// Stop issuing when the clock reaches this (ms since the Unix epoch):
    /// the lease's end minus a safety margin.
    pub issue_until_ms: i64,
    /// Upper bound of timestamps persisted in the lease row (ms since the
    /// Unix epoch): no time unit ending after it is used.
    pub bound_ms: i64,
}

/// Why no ID was issued. Its text is what clients read, on every door.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnowflakeError {
    /// No worker ID is leased (not yet, none free, or the lease was lost).
    #[error(
        "no snowflake worker ID is leased (not yet, the database is unreachable, or every \
         worker ID is held by another instance); retry later"
    )]
    NoWorker,
    /// The lease was not renewed in time; issuing stopped before it could expire.
    #[error("the snowflake worker ID lease could not be renewed in time; IDs resume once it is")]
    LeaseExpiring,
    /// The clock is behind the last timestamp issued by more than the tolerance.
    #[error(
        "the clock is {behind_ms} ms behind the last timestamp issued; IDs resume when it \
         catches up"
    )]
    ClockMovedBackwards {
        /// How far behind the last timestamp issued the clock is.
        behind_ms: i64,
    },
    /// The waits of one call exceeded their bound (the clock does not advance).
    #[error("the clock did not advance to a free timestamp within {waited_ms} ms; retry later")]
    ClockStalled {
        /// How long the call waited.
        waited_ms: u64,
    },
    /// The timestamp field is full: no more IDs with this layout.
    #[error(
        "the timestamp field of the snowflake layout is full; no more IDs with this epoch and \
         bits"
    )]
    Exhausted,
    /// The generator was shut down.
    #[error("shutting down")]
    Closed,
}

/// What the generator has done, for tests, logs and the monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GeneratorStatus {
    /// The grant in force, if any.
    pub grant: Option<Grant>,
    /// The last time unit used (or fenced off); -1 before any.
    pub last_timestamp: i64,
    /// IDs issued.
    pub issued: u64,
    /// Waits for a clock behind by at most the tolerance.
    pub clock_waits: u64,
    /// Calls refused because the clock was behind by more than the tolerance.
    pub clock_refusals: u64,
    /// Waits for the next time unit after its sequence ran out.
    pub sequence_waits: u64,
}

#[derive(Debug)]
struct State {
    grant: Option<Grant>,
    /// Last time unit used or fenced off; units up to it are never used again,
    /// and it is used only with sequences from `seq` on.
    last_t: i64,
    /// Next sequence in `last_t`; `max_sequence + 1` when it is used up.
    seq: u64,
    /// Highest floor (ms) read from a lease row: previous holders' bound.
    floor_ms: i64,
    closed: bool,
    status: GeneratorStatus,
}

/// What one locked step decided.
enum Step {
    Done,
    /// Sleep this long (µs), then try again; `behind_ms` if the clock is behind.
    Wait {
        us: i64,
        behind_ms: Option<i64>,
    },
}

/// Where issued IDs go: a `Vec` for batches, one slot for `next` (no allocation).
trait Sink: Send {
    fn len(&self) -> usize;
    fn push(&mut self, id: i64);
}

impl Sink for Vec<i64> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn push(&mut self, id: i64) {
        Vec::push(self, id)
    }
}

struct One(Option<i64>);

impl Sink for One {
    fn len(&self) -> usize {
        self.0.is_some() as usize
    }
    fn push(&mut self, id: i64) {
        self.0 = Some(id);
    }
}

/// Issues snowflake IDs for one instance. Knows no SQL and no HTTP.
pub struct Generator {
    layout: Layout,
    clock: Arc<dyn WallClock>,
    tolerance_ms: i64,
    state: Mutex<State>,
}

impl std::fmt::Debug for Generator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generator")
            .field("layout", &self.layout)
            .field("tolerance_ms", &self.tolerance_ms)
            .finish()
    }
}

impl Generator {
    /// A generator with no grant yet: it refuses until [`Generator::install`].
    pub fn new(layout: Layout, clock: Arc<dyn WallClock>, tolerance: Duration) -> Self {
        let max_seq = layout.max_sequence();
        Generator {
            layout,
            clock,
            tolerance_ms: tolerance.as_millis().min(i64::MAX as u128) as i64,
            state: Mutex::new(State {
                grant: None,
                last_t: -1,
                seq: max_seq + 1,
                floor_ms: i64::MIN,
                closed: false,
                status: GeneratorStatus {
                    last_timestamp: -1,
                    ..Default::default()
                },
            }),
        }
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn WallClock> {
        &self.clock
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts issuing under `grant`. `floor_ms` is the lease row's
    /// `last_timestamp` as claimed (the previous holders' bound): only time
    /// units after the one containing it are used. `None` when the row was
    /// this generator's own and nobody else held it since. A new worker ID
    /// also never reuses the last time unit used under the previous one, so
    /// this instance's IDs keep increasing.
    pub fn install(&self, grant: Grant, floor_ms: Option<i64>) {
        let mut st = self.lock();
        if st.closed {
            return;
        }
        let max_seq = self.layout.max_sequence();
        if let Some(floor) = floor_ms {
            st.floor_ms = st.floor_ms.max(floor);
            let t = self.layout.unit_at(floor);
            if t >= st.last_t {
                st.last_t = t;
                st.seq = max_seq + 1;
            }
        }
        if st.grant.map(|g| g.worker_id) != Some(grant.worker_id) {
            st.seq = max_seq + 1;
        }
        st.grant = Some(grant);
        st.status.grant = st.grant;
        st.status.last_timestamp = st.last_t;
    }

    /// Extends the grant of `worker_id` after a renewal; `false` if this
    /// generator holds no grant for it.
    pub fn extend(&self, worker_id: u32, issue_until_ms: i64, bound_ms: i64) -> bool {
        let mut st = self.lock();
        let closed = st.closed;
        match &mut st.grant {
            Some(g) if g.worker_id == worker_id && !closed => {
                g.issue_until_ms = issue_until_ms;
                g.bound_ms = g.bound_ms.max(bound_ms);
                st.status.grant = st.grant;
                true
            }
            _ => false,
        }
    }

    /// Stops issuing under `worker_id` (its lease is lost).
    pub fn revoke(&self, worker_id: u32) {
        let mut st = self.lock();
        if st.grant.is_some_and(|g| g.worker_id == worker_id) {
            st.grant = None;
            st.status.grant = None;
        }
    }

    /// Stops issuing for good. Returns the worker ID held, if any, and the
    /// exact upper bound (ms) of the timestamps issued under it, to be
    /// written back when the lease is released.
    pub fn close(&self) -> Option<(u32, i64)> {
        let mut st = self.lock();
        st.closed = true;
        st.status.grant = None;
        let grant = st.grant.take()?;
        let used = if st.last_t >= 0 {
            self.layout.unit_end_ms(st.last_t)
        } else {
            self.layout.epoch_ms() - 1
        };
        Some((grant.worker_id, used.max(st.floor_ms)))
    }

    /// Whether [`Generator::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// What the generator has done so far.
    pub fn status(&self) -> GeneratorStatus {
        self.lock().status
    }

    /// One ID.
    pub async fn next(&self) -> Result<i64, SnowflakeError> {
        let mut one = One(None);
        self.fill(1, &mut one).await?;
        one.0.ok_or(SnowflakeError::Closed)
    }

    /// `n` IDs, strictly increasing, after every ID this generator issued
    /// before the call.
    pub async fn batch(&self, n: usize) -> Result<Vec<i64>, SnowflakeError> {
        let mut out = Vec::with_capacity(n);
        self.fill(n, &mut out).await?;
        Ok(out)
    }

    /// The longest one call for `n` IDs may wait in all: the tolerance, the
    /// time units its IDs need plus one, and one second for timer slack and
    /// contention.
    pub fn wait_budget(&self, n: usize) -> Duration {
        let per_unit = self.layout.max_sequence().saturating_add(1);
        let units = (n as u64).div_ceil(per_unit).saturating_add(1);
        let ms = (self.tolerance_ms as u64)
            .saturating_add(units.saturating_mul(self.layout.unit_ms() as u64))
            .saturating_add(1000);
        Duration::from_millis(ms)
    }

    async fn fill(&self, n: usize, out: &mut impl Sink) -> Result<(), SnowflakeError> {
        let budget = self.wait_budget(n);
        let started = tokio::time::Instant::now();
        loop {
            match self.step(n, out)? {
                Step::Done => return Ok(()),
                Step::Wait { us, behind_ms } => {
                    let d = Duration::from_micros(us.max(1) as u64);
                    // Real time waited, not the sum of the requests: a timer
                    // tick is 1 ms, however little was asked for.
                    let waited = started.elapsed();
                    if waited + d > budget {
                        return Err(match behind_ms {
                            Some(behind_ms) => SnowflakeError::ClockMovedBackwards { behind_ms },
                            None => SnowflakeError::ClockStalled {
                                waited_ms: waited.as_millis() as u64,
                            },
                        });
                    }
                    tokio::time::sleep(d).await;
                }
            }
        }
    }

    /// Issues what it can under the lock, or says how long to wait.
    fn step(&self, n: usize, out: &mut impl Sink) -> Result<Step, SnowflakeError> {
        let mut st = self.lock();
        let now_us = self.clock.now_micros();
        let now = now_us.div_euclid(1000);
        // Microseconds from now until the first millisecond of unit `t`.
        let until = |t: i64| self.layout.unit_start_ms(t).saturating_mul(1000) - now_us;
        if st.closed {
            return Err(SnowflakeError::Closed);
        }
        let grant = st.grant.ok_or(SnowflakeError::NoWorker)?;
        if now >= grant.issue_until_ms {
            return Err(SnowflakeError::LeaseExpiring);
        }
        let l = &self.layout;
        let max_seq = l.max_sequence();
        let t = l.unit_at(now);
        if t < st.last_t {
            let behind_ms = l.unit_start_ms(st.last_t) - now;
            if behind_ms > self.tolerance_ms {
                st.status.clock_refusals += 1;
                metrics::counter!(CLOCK_BACKWARDS_METRIC).increment(1);
                return Err(SnowflakeError::ClockMovedBackwards { behind_ms });
            }
            st.status.clock_waits += 1;
            metrics::counter!(CLOCK_WAITS_METRIC).increment(1);
            let target = if st.seq <= max_seq {
                st.last_t
            } else {
                st.last_t + 1
            };
            return Ok(Step::Wait {
                us: until(target),
                behind_ms: Some(behind_ms),
            });
        }
        if t > l.max_timestamp() {
            return Err(SnowflakeError::Exhausted);
        }
        if t > st.last_t {
            st.last_t = t;
            st.seq = 0;
            st.status.last_timestamp = t;
        }
        if st.seq > max_seq {
            st.status.sequence_waits += 1;
            return Ok(Step::Wait {
                us: until(t + 1),
                behind_ms: None,
            });
        }
        if l.unit_end_ms(t) > grant.bound_ms {
            return Err(SnowflakeError::LeaseExpiring);
        }
        let take = ((max_seq - st.seq + 1).min((n - out.len()) as u64)) as usize;
        for _ in 0..take {
            out.push(l.encode(t, grant.worker_id, st.seq));
            st.seq += 1;
        }
        st.status.issued += take as u64;
        if out.len() == n {
            Ok(Step::Done)
        } else {
            st.status.sequence_waits += 1;
            Ok(Step::Wait {
                us: until(t + 1),
                behind_ms: None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::clock::ManualWallClock;
    use crate::snowflake::layout::DEFAULT_EPOCH_MS;

    const T0: i64 = DEFAULT_EPOCH_MS + 1_000_000;

    fn generator(clock: &ManualWallClock) -> Generator {
        let g = Generator::new(
            Layout::default(),
            Arc::new(clock.clone()),
            Duration::from_millis(5),
        );
        g.install(
            Grant {
                worker_id: 7,
                issue_until_ms: i64::MAX,
                bound_ms: i64::MAX,
            },
            Some(0),
        );
        g
    }

    #[tokio::test(start_paused = true)]
    async fn ids_carry_time_worker_and_sequence() {
        let clock = ManualWallClock::ticking(T0);
        let g = generator(&clock);
        let ids = g.batch(3).await.unwrap();
        let l = Layout::default();
        for (i, id) in ids.iter().enumerate() {
            let d = l.decode(*id).unwrap();
            assert_eq!(
                (d.timestamp, d.worker, d.sequence),
                (1_000_000, 7, i as u64)
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn no_grant_and_late_lease_refuse() {
        let clock = ManualWallClock::ticking(T0);
        let g = Generator::new(
            Layout::default(),
            Arc::new(clock.clone()),
            Duration::from_millis(5),
        );
        assert_eq!(g.next().await, Err(SnowflakeError::NoWorker));
        g.install(
            Grant {
                worker_id: 1,
                issue_until_ms: T0 + 10,
                bound_ms: T0 + 20,
            },
            None,
        );
        assert!(g.next().await.is_ok());
        clock.set(T0 + 10);
        assert_eq!(g.next().await, Err(SnowflakeError::LeaseExpiring));
        assert!(g.extend(1, T0 + 100, T0 + 200));
        assert!(g.next().await.is_ok());
        g.revoke(1);
        assert_eq!(g.next().await, Err(SnowflakeError::NoWorker));
    }

    #[tokio::test(start_paused = true)]
    async fn a_frozen_clock_fails_after_the_budget_instead_of_hanging() {
        let clock = ManualWallClock::frozen(T0);
        let g = generator(&clock);
        assert_eq!(g.batch(4096).await.unwrap().len(), 4096);
        let started = tokio::time::Instant::now();
        assert!(matches!(
            g.next().await,
            Err(SnowflakeError::ClockStalled { .. })
        ));
        assert!(started.elapsed() <= g.wait_budget(1));
    }

    #[tokio::test(start_paused = true)]
    async fn close_reports_the_last_timestamp_used() {
        let clock = ManualWallClock::ticking(T0);
        let g = generator(&clock);
        g.next().await.unwrap();
        assert_eq!(g.close(), Some((7, T0)));
        assert_eq!(g.next().await, Err(SnowflakeError::Closed));
    }
}
