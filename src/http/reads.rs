//! The bound on the database reads of the HTTP layer.
//!
//! `GET /v1/sequences` and `GET /v1/sequences/{name}` need no token, and
//! each costs a query (`/readyz` costs none: it answers from the last
//! background check). Unbounded, a flood of them takes every
//! pooled connection and segment fetches wait behind it until live sequences
//! answer 503 (docs/design.md, "The read gate"). So every such read holds a permit of one
//! small [`ReadGate`] while it runs: at most [`READ_PERMITS`] pooled
//! connections serve reads, and fetches keep the rest. (A read cancelled
//! mid-query gives its permit back at once, while its connection returns to
//! the pool only after the statement ends, within the statement bound.) A read
//! that finds no permit within [`READ_WAIT`] answers 503 `overloaded` with
//! `Retry-After`. The ID routes never pass through the gate: a first-use
//! lookup is a segment fetch, not a read.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::error::ApiError;

/// Database reads in flight at once, by default: two of the store's ten
/// pooled connections at most.
pub const READ_PERMITS: usize = 2;

/// Longest a read waits for a permit before answering `overloaded`.
pub const READ_WAIT: Duration = Duration::from_millis(250);

/// Permits for the database reads of the HTTP layer. Cloning shares them.
#[derive(Debug, Clone)]
pub struct ReadGate {
    permits: Arc<Semaphore>,
    wait: Duration,
}

impl Default for ReadGate {
    /// [`READ_PERMITS`] permits, waiting at most [`READ_WAIT`].
    fn default() -> Self {
        ReadGate::new(READ_PERMITS, READ_WAIT)
    }
}

impl ReadGate {
    /// The gate for a pool of `connections` per database
    /// (`--db-max-connections`): one permit in five connections, at least
    /// one, so that fetches keep four in five whatever the size.
    pub fn for_pool(connections: u32) -> Self {
        ReadGate::new((connections as usize / 5).max(1), READ_WAIT)
    }

    /// A gate of `permits` (at least one) that waits at most `wait` for one.
    pub fn new(permits: usize, wait: Duration) -> Self {
        ReadGate {
            permits: Arc::new(Semaphore::new(permits.max(1))),
            wait,
        }
    }

    /// Runs `read` holding a permit, or answers [`ApiError::Overloaded`] when
    /// none is free within the wait bound.
    pub async fn run<T>(&self, read: impl Future<Output = T>) -> Result<T, ApiError> {
        let permit = tokio::time::timeout(self.wait, self.permits.acquire())
            .await
            .map_err(|_| ApiError::Overloaded)?
            .map_err(|_| ApiError::Overloaded)?;
        let out = read.await;
        drop(permit);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_read_waits_for_a_permit_then_answers_overloaded() {
        let gate = ReadGate::new(1, Duration::from_millis(100));
        let (release, held) = tokio::sync::oneshot::channel::<()>();
        let holder = tokio::spawn({
            let gate = gate.clone();
            async move { gate.run(held).await }
        });
        tokio::task::yield_now().await;
        let shed = gate.run(async { 1 }).await;
        assert!(matches!(shed, Err(ApiError::Overloaded)), "{shed:?}");
        release.send(()).unwrap();
        assert!(holder.await.unwrap().is_ok());
        assert_eq!(
            gate.run(async { 2 }).await.unwrap(),
            2,
            "the permit is back"
        );
    }
}
