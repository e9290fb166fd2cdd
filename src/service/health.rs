//! What the instance knows of its database, for the health routes: the
//! result of the last check, made in the background every second
//! ([`CHECK_INTERVAL`], `--health-check-interval`; docs/design.md,
//! "Readiness"). A probe reads it and
//! never waits on the store, whatever the store is doing (a fence, a pool
//! reconnecting, a database that does not answer).

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::store::{Store, StoreError};

/// How often the database is checked, by default.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The longest one check may take: above the stripes' own bounds (a ping of
/// each stripe and a recheck of its missing rows, 2 s each), so that a set
/// with one stripe slow is not judged by the bound alone.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// The database as the last check found it (why it failed goes to the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseState {
    /// It answered and records every migration this binary needs.
    Ok,
    /// It answered, and a migration this binary needs is missing.
    SchemaBehind,
    /// It failed, or gave no answer within [`CHECK_TIMEOUT`].
    Failed,
}

/// The last result of the database checks of one service.
#[derive(Debug, Default)]
pub struct DatabaseHealth {
    last: Mutex<Option<DatabaseState>>,
    /// Set once shutdown began: the instance takes no new work.
    draining: std::sync::atomic::AtomicBool,
}

impl DatabaseHealth {
    /// Marks the instance as shutting down (what `/readyz` then answers).
    pub fn begin_draining(&self) {
        self.draining
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether shutdown began.
    pub fn draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The last check's result; `None` before the first one ended.
    pub fn last(&self) -> Option<DatabaseState> {
        *self.last.lock().unwrap()
    }

    /// Checks `store` once, bounded by [`CHECK_TIMEOUT`], and keeps the
    /// result. A failure is logged (throttled).
    pub async fn check(&self, store: &dyn Store) -> DatabaseState {
        let state = match tokio::time::timeout(CHECK_TIMEOUT, store.ping()).await {
            Ok(Ok(())) => DatabaseState::Ok,
            Ok(Err(StoreError::Migration(why))) => {
                crate::log_throttle::throttled!(error, "readiness: the schema is behind", None, error = %why);
                DatabaseState::SchemaBehind
            }
            Ok(Err(e)) => {
                crate::log_throttle::throttled!(warn, "readiness check failed", None, error = %e);
                DatabaseState::Failed
            }
            Err(_) => {
                crate::log_throttle::throttled!(
                    warn,
                    "readiness check failed",
                    None,
                    error = "no answer within the check's bound"
                );
                DatabaseState::Failed
            }
        };
        *self.last.lock().unwrap() = Some(state);
        state
    }
}

/// Checks `store` every `every` into `health` until either is dropped (the
/// task holds neither). The first check is one interval away.
pub(super) async fn check_loop(
    health: Weak<DatabaseHealth>,
    store: Weak<dyn Store>,
    every: Duration,
) {
    let start = tokio::time::Instant::now() + every;
    let mut tick = tokio::time::interval_at(start, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (Some(health), Some(store)) = (health.upgrade(), store.upgrade()) else {
            return;
        };
        health.check(&*store).await;
    }
}

/// Starts [`check_loop`].
pub(super) fn spawn(
    health: &Arc<DatabaseHealth>,
    store: &Arc<dyn Store>,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(check_loop(
        Arc::downgrade(health),
        Arc::downgrade(store),
        every,
    ))
}
