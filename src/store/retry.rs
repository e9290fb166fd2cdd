//! Running an operation again when the database aborted it for a conflict.
//!
//! Databases that run every transaction SERIALIZABLE (CockroachDB,
//! YugabyteDB, PostgreSQL with `default_transaction_isolation =
//! serializable`) abort a statement or a transaction that conflicts with a
//! concurrent one with SQLSTATE `40001` (serialization_failure) and expect
//! the client to run it again; PostgreSQL reports a deadlock as `40P01`, and
//! MariaDB/MySQL (and TiDB) report a deadlock (error 1213) as `40001`. The
//! database has rolled the work back, so running the WHOLE operation again
//! (a statement, or a transaction from its `BEGIN`) is safe, and on the same
//! connection: the database answered, so the connection is healthy (a
//! transaction dropped on the error is rolled back by sqlx before the
//! connection's next statement).
//!
//! [`retrying!`] does that: at most [`MAX_ATTEMPTS`] attempts, with
//! exponential backoff and full jitter in between (a random pause up to 2 ms,
//! 4 ms, 8 ms, ... capped at 100 ms, about 1 s of pauses at most), each
//! retry counted in [`RETRIES_METRIC`] and logged at DEBUG, a give-up logged
//! at WARN and its error handed back. No other error is retried. The store
//! knows no deadline: the allocator bounds each fetch by dropping its future
//! at the fetch timeout, which is safe at any point (a pause or a statement
//! in flight; see [`super::pool::Held`]).

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// Counter: operations run again after a conflict, per `backend`
/// (`postgres`, `mysql`) and `sqlstate` (`40001`, `40P01`).
pub const RETRIES_METRIC: &str = "seqd_store_retries_total";

/// Most attempts of one operation, the first included. Measured with 16
/// clients reserving from one row of PostgreSQL under SERIALIZABLE
/// (`tests/in_process/serializable.rs`, five runs each): 8 attempts left 6 to 9 of the
/// 16 clients with a give-up per run, 12 none, 16 none; 16 leaves a margin.
/// The pauses of 16 attempts add up to at most about 1 s, well under the
/// allocator's 5 s fetch timeout.
pub const MAX_ATTEMPTS: u32 = 16;

/// Upper bound of the pause before the first retry; it doubles per retry.
const FIRST_BACKOFF: Duration = Duration::from_millis(2);

/// Upper bound of any pause.
const MAX_BACKOFF: Duration = Duration::from_millis(100);

/// The SQLSTATE of `e` when it is a conflict the database asks the client to
/// retry: `40001` (serialization failure; MariaDB/MySQL deadlock) or `40P01`
/// (PostgreSQL deadlock).
pub(crate) fn conflict(e: &sqlx::Error) -> Option<&'static str> {
    let sqlx::Error::Database(db) = e else {
        return None;
    };
    match db.code().as_deref() {
        Some("40001") => Some("40001"),
        Some("40P01") => Some("40P01"),
        _ => None,
    }
}

/// Evaluates `$attempt`, an expression ending in `.await` that runs a whole
/// operation once and yields `Result<_, sqlx::Error>`, again and again until
/// it ends other than by a conflict ([`conflict`]) or [`MAX_ATTEMPTS`] ran
/// out (see [`Retry`]); yields the last outcome. `$backend` labels the
/// metric and the logs:
///
/// ```ignore
/// let row = retrying!("postgres", sqlx::query(SQL).fetch_optional(held.conn()).await);
/// ```
///
/// A macro rather than a function taking an async closure: the closure
/// must borrow the held connection mutably for each attempt, and rustc
/// cannot yet prove such a closure's future `Send` inside `async_trait`
/// methods ("implementation of `Send` is not general enough").
macro_rules! retrying {
    ($backend:expr, $attempt:expr) => {{
        let mut retry = $crate::store::retry::Retry::new($backend);
        loop {
            let outcome = $attempt;
            match retry.pause_after(&outcome) {
                Some(pause) => {
                    drop(outcome);
                    ::tokio::time::sleep(pause).await;
                }
                None => break outcome,
            }
        }
    }};
}
pub(crate) use retrying;

/// The retry state of one operation (what [`retrying!`] keeps).
#[derive(Debug)]
pub(crate) struct Retry {
    backend: &'static str,
    /// Attempts run so far.
    attempts: u32,
}

impl Retry {
    /// Before the first attempt of an operation on `backend`.
    pub(crate) fn new(backend: &'static str) -> Self {
        Retry {
            backend,
            attempts: 0,
        }
    }

    /// After an attempt that ended with `outcome`: the pause before running
    /// the operation again (the retry counted and logged), or `None` when
    /// `outcome` is final (a success, an error other than a conflict, or a
    /// conflict after [`MAX_ATTEMPTS`], logged as a give-up).
    pub(crate) fn pause_after<T>(&mut self, outcome: &Result<T, sqlx::Error>) -> Option<Duration> {
        self.attempts += 1;
        let e = outcome.as_ref().err()?;
        let sqlstate = conflict(e)?;
        let backend = self.backend;
        if self.attempts >= MAX_ATTEMPTS {
            tracing::warn!(backend, sqlstate, attempts = self.attempts, error = %e,
                "a database operation kept conflicting with concurrent ones; giving up");
            return None;
        }
        metrics::counter!(RETRIES_METRIC, "backend" => backend, "sqlstate" => sqlstate)
            .increment(1);
        let pause = backoff(self.attempts);
        tracing::debug!(backend, sqlstate, attempt = self.attempts, ?pause, error = %e,
            "the database aborted an operation for a conflict; running it again");
        Some(pause)
    }
}

/// The pause after failed attempt `attempt` (1, 2, ...): uniformly random
/// up to `FIRST_BACKOFF * 2^(attempt - 1)`, capped at [`MAX_BACKOFF`]
/// ("full jitter", so that the conflicting clients do not come back together).
fn backoff(attempt: u32) -> Duration {
    let ceiling = FIRST_BACKOFF
        .saturating_mul(1 << (attempt - 1).min(16))
        .min(MAX_BACKOFF);
    let micros = ceiling.as_micros() as u64;
    Duration::from_micros(random() % (micros + 1))
}

/// A random number: the standard library keys each `RandomState` anew (no
/// other source is needed for a pause).
fn random() -> u64 {
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_two_milliseconds_and_stops_at_the_cap() {
        for attempt in 1..=MAX_ATTEMPTS + 3 {
            let ceiling = Duration::from_millis(2 << (attempt - 1).min(16)).min(MAX_BACKOFF);
            for _ in 0..100 {
                assert!(backoff(attempt) <= ceiling, "attempt {attempt}");
            }
        }
        let pauses: std::collections::HashSet<Duration> = (0..50).map(|_| backoff(7)).collect();
        assert!(pauses.len() > 10, "the pauses are jittered: {pauses:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn other_errors_are_not_retried_and_success_ends_at_once() {
        let mut calls = 0;
        let out: Result<(), _> = retrying!(
            "postgres",
            async {
                calls += 1;
                Err(sqlx::Error::RowNotFound)
            }
            .await
        );
        assert!(matches!(out, Err(sqlx::Error::RowNotFound)));
        assert_eq!(calls, 1);
        let out = retrying!("postgres", async { Ok::<_, sqlx::Error>(7) }.await);
        assert_eq!(out.unwrap(), 7);
    }

    /// A database error with SQLSTATE `code`.
    #[derive(Debug)]
    struct Coded(&'static str);

    impl std::fmt::Display for Coded {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "error with SQLSTATE {}", self.0)
        }
    }

    impl std::error::Error for Coded {}

    impl sqlx::error::DatabaseError for Coded {
        fn message(&self) -> &str {
            "coded"
        }
        fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
            Some(self.0.into())
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    fn coded(code: &'static str) -> sqlx::Error {
        sqlx::Error::Database(Box::new(Coded(code)))
    }

    #[test]
    fn only_serialization_failures_and_deadlocks_are_conflicts() {
        assert_eq!(conflict(&coded("40001")), Some("40001"));
        assert_eq!(conflict(&coded("40P01")), Some("40P01"));
        for other in ["23505", "55P03", "57014", "HY000", "5"] {
            assert_eq!(conflict(&coded(other)), None, "{other}");
        }
        assert_eq!(conflict(&sqlx::Error::PoolTimedOut), None);
    }

    #[tokio::test(start_paused = true)]
    async fn conflicts_run_the_whole_operation_again_until_it_succeeds_or_attempts_run_out() {
        let mut calls = 0;
        let out = retrying!(
            "mysql",
            async {
                calls += 1;
                if calls < 3 {
                    Err(coded(if calls == 1 { "40001" } else { "40P01" }))
                } else {
                    Ok(calls)
                }
            }
            .await
        );
        assert_eq!(out.unwrap(), 3);
        let mut calls = 0;
        let out: Result<(), _> = retrying!(
            "postgres",
            async {
                calls += 1;
                Err(coded("40001"))
            }
            .await
        );
        assert_eq!(conflict(&out.unwrap_err()), Some("40001"));
        assert_eq!(calls, MAX_ATTEMPTS);
    }
}
