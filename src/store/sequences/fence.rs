//! The failover fence (docs/high-availability.md, "Failover of the
//! database"; docs/design.md, "The failover fence").
//!
//! An asynchronous replica promoted after its primary died has lost the
//! reservations it had not received; every instance that reserves from it
//! would hand those IDs out again. So every database records, in
//! `seqd_fence`, the identity of the server seqd reserves from
//! (`identity_sql`: PostgreSQL's system identifier and timeline, MySQL's
//! and MariaDB's `server_id`, `server_uuid` and `gtid_domain_id`), and each
//! store checks the identity of every new connection of its pool before the
//! pool hands it out (`Fence::admit`, run by sqlx's `after_connect`):
//!
//! - the identity this instance verified: the connection is used;
//! - another one: the connection is refused (reservations wait, then answer
//!   503) and the fence task runs `fence_once` on a connection of its own:
//!   in one transaction holding the record's row lock it raises every
//!   sequence row and every serial period row by the margin (and creates the
//!   current period rows, raised, where the lost window may have made them),
//!   then records the new identity with `epoch + 1`. An instance that finds
//!   the record already naming the server (another instance fenced while it
//!   waited for the lock) takes it and goes on. Only then are connections to
//!   the new server admitted.
//!
//! At start (`verify`, from the stores' `prepare_schema`) the same
//! routine runs before anything is reserved: a server whose record names
//! another is fenced, an empty record (a new database, or the first start
//! of a seqd with the fence) is filled in without a raise.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use serde::Serialize;
use sqlx::{Connection, Pool};

use crate::domain::period_rows_range;
use crate::store::engine::{SqlDb, Statement};
use crate::store::migrator::{Dialect, FenceOptions};
use crate::store::sql::{columns_row, Columns};
use statements::STATEMENTS;

mod statements;
use crate::store::{unavailable, StoreError};

/// How far around the fence's time a serial sequence's period rows are
/// created raised when missing: a period whose row the lost window created
/// (instances whose clocks are this much apart included).
const PERIOD_SKEW: Duration = Duration::from_secs(10 * 60);

/// Bounds of the fence's own transaction: its statements may run long (every
/// row of the table), and it waits for another instance's fence.
const FENCE_STATEMENT_BOUND: Duration = Duration::from_secs(600);
const FENCE_LOCK_BOUND: Duration = Duration::from_secs(60);

/// What `/readyz` and the logs say of a database's fence.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FenceStatus {
    /// `off`, `unchecked` (not verified yet), `ok`, `fencing` (a server
    /// change is being fenced: nothing is reserved on it meanwhile),
    /// `stale` (the server's record is older than the one this instance
    /// verified: an old primary back, never reserved from nor fenced),
    /// `refused` (the new server cannot be fenced: why is in
    /// `last_error`) or `failed` (the last attempt failed, retried).
    pub state: &'static str,
    /// The identity of the server verified.
    pub server: Option<String>,
    /// The record's epoch: fences since the record was created.
    pub epoch: i64,
    /// What this instance's fence did, as counters (flat in JSON).
    #[serde(flatten)]
    pub counts: FenceCounts,
    /// Why the last attempt failed or was refused.
    pub last_error: Option<String>,
}

/// The counters of one database's fence on this instance.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct FenceCounts {
    /// Fences this instance ran.
    pub fences: u64,
    /// Checks that found a server whose record is older than the one this
    /// instance verified (`stale`), each refused.
    pub stale_refusals: u64,
}

impl FenceStatus {
    /// Whether a server change is being fenced, refused or failing: nothing
    /// is reserved from the database meanwhile.
    pub fn blocking(&self) -> bool {
        matches!(self.state, "fencing" | "stale" | "refused" | "failed")
    }
}

/// The record as this instance verified it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Verified {
    server: String,
    epoch: i64,
}

#[derive(Debug, Default)]
struct State {
    /// The server this instance checked against the record; `None` before.
    verified: Option<Verified>,
    /// Before [`verify`]: the identity of the connections admitted so far.
    seen: Option<String>,
    /// A fence is wanted or running.
    pending: bool,
    /// The last attempt's failure (`refused`: it cannot succeed by retrying).
    failure: Option<(bool, String)>,
    /// The last attempt found a server older than the verified one
    /// ([`Verdict::Stale`]): refused until the verified server answers.
    stale: bool,
}

/// What a check of a server against its record and this instance's
/// verified record decides ([`judge`]).
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// The record names this server, at the epoch this instance verified or
    /// later: reserve from it.
    Take,
    /// An empty record, and nothing verified before: fill it in, no raise.
    Record,
    /// Another server than the record names, whose record is this
    /// instance's or newer (a replica of it promoted), or an empty record
    /// where this instance verified a server (the record was lost with the
    /// window): raise every row, then record the server.
    Fence,
    /// A record older than the one this instance verified (an old primary
    /// back with its old data, a replica of it): its rows may lie inside
    /// what the newer server handed out, so no raise can make it safe.
    /// Refused; never reserved from.
    Stale,
}

/// One database's fence: what its pool's connections are checked against.
#[derive(Debug)]
pub struct Fence {
    options: FenceOptions,
    state: Mutex<State>,
    wake: tokio::sync::Notify,
    task: AtomicBool,
    fences: AtomicU64,
    stale_refusals: AtomicU64,
}

impl Fence {
    /// A fence with `options` (one per pool).
    pub fn new(options: FenceOptions) -> Arc<Fence> {
        Arc::new(Fence {
            options,
            state: Mutex::default(),
            wake: tokio::sync::Notify::new(),
            task: AtomicBool::new(false),
            fences: AtomicU64::new(0),
            stale_refusals: AtomicU64::new(0),
        })
    }

    /// A fence that checks nothing (SQLite, `--failover-fence off`, pools a
    /// test wraps).
    pub fn off() -> Arc<Fence> {
        Fence::new(FenceOptions {
            enabled: false,
            margin: 0,
            new_database: false,
        })
    }

    /// Whether identities are checked.
    pub fn enabled(&self) -> bool {
        self.options.enabled
    }

    /// The state for `/readyz`.
    pub fn status(&self) -> FenceStatus {
        let state = self.state.lock().unwrap();
        let label = if !self.options.enabled {
            "off"
        } else if state.pending {
            match &state.failure {
                Some(_) if state.stale => "stale",
                Some((true, _)) => "refused",
                Some((false, _)) => "failed",
                None => "fencing",
            }
        } else if state.verified.is_some() {
            "ok"
        } else {
            "unchecked"
        };
        FenceStatus {
            state: label,
            server: state.verified.as_ref().map(|v| v.server.clone()),
            epoch: state.verified.as_ref().map_or(0, |v| v.epoch),
            counts: FenceCounts {
                fences: self.fences.load(Ordering::Relaxed),
                stale_refusals: self.stale_refusals.load(Ordering::Relaxed),
            },
            last_error: state.failure.as_ref().map(|(_, why)| why.clone()),
        }
    }

    /// Whether a connection to the server `server` may be used: it is the
    /// verified one, or nothing is verified yet and it is the server every
    /// connection admitted so far reached. Otherwise the fence is wanted
    /// (the task started by `start` runs it) and the connection is refused.
    fn admit(&self, server: &str) -> Result<(), String> {
        let mut state = self.state.lock().unwrap();
        match &state.verified {
            Some(v) if v.server == server && !state.pending => Ok(()),
            Some(v) if v.server == server && state.stale => {
                // The verified server answers again after a stale one was
                // refused: nothing was written elsewhere, so it is used.
                tracing::warn!(server = %server,
                    "the verified database server answers again; reserving from it");
                state.pending = false;
                state.stale = false;
                state.failure = None;
                Ok(())
            }
            Some(v) => {
                if !state.pending {
                    tracing::error!(recorded = %v.server, now = %server,
                        "the database server changed (a failover?): fencing before any reservation");
                    state.pending = true;
                }
                drop(state);
                self.wake.notify_one();
                Err(format!(
                    "the database server changed (now {server}): not used until it is fenced"
                ))
            }
            None => match &state.seen {
                Some(seen) if seen != server => Err(format!(
                    "the database server changed during start-up ({seen}, then {server})"
                )),
                Some(_) => Ok(()),
                None => {
                    state.seen = Some(server.to_owned());
                    Ok(())
                }
            },
        }
    }
}

/// The statement that reads the server's identity, as `(key, value)` rows:
/// PostgreSQL's system identifier (the same on every replica of a cluster)
/// and the timeline of the WAL it writes (one higher at each promotion;
/// `pg_current_wal_lsn()` also fails on a server in recovery, which takes no
/// writes); MySQL's and MariaDB's `server_id` (distinct on every server of
/// a replication topology), `server_uuid` (MySQL) and `gtid_domain_id`
/// (MariaDB). Every one is readable by any role.
pub(crate) fn identity_sql(dialect: Dialect) -> Option<&'static str> {
    match dialect {
        Dialect::Postgres => Some(
            "SELECT 'system_identifier', system_identifier::text FROM pg_control_system() \
             UNION ALL SELECT 'timeline', \
             (('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint)::text",
        ),
        Dialect::Mysql => Some(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN \
             ('server_id', 'server_uuid', 'gtid_domain_id')",
        ),
        Dialect::Sqlite => None,
    }
}

/// The identity as one line, `key=value` in key order.
fn identity_line(dialect: Dialect, mut pairs: Vec<(String, String)>) -> String {
    pairs.sort();
    let pairs: Vec<String> = pairs.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{} {}", dialect.name(), pairs.join(" "))
}

/// The statements that lift the pool's statement bounds for the fence's
/// transaction (its first statements, after `BEGIN`).
fn bounds_sql(dialect: Dialect) -> Vec<String> {
    let (statement, lock) = (FENCE_STATEMENT_BOUND.as_secs(), FENCE_LOCK_BOUND.as_secs());
    match dialect {
        Dialect::Postgres => vec![
            format!("SET LOCAL statement_timeout = '{statement}s'"),
            format!("SET LOCAL lock_timeout = '{lock}s'"),
        ],
        // `max_statement_time` is MariaDB's; MySQL bounds only SELECTs.
        Dialect::Mysql => vec![format!("SET SESSION innodb_lock_wait_timeout = {lock}")],
        Dialect::Sqlite => Vec::new(),
    }
}

/// What to do with a server `server` whose record reads `record`, for an
/// instance that verified `known` before ([`Verdict`]): epochs only grow
/// along one line of servers, so a record older than the verified one, or
/// as old but of another server, is not of this instance's line.
fn judge(record: &Verified, server: &str, known: Option<&Verified>) -> Verdict {
    if record.server.is_empty() {
        // Never recorded: a new database, or the first start of a seqd
        // with the fence; fenced only when this instance verified another
        // server (its record was lost with the window).
        return if known.is_some() {
            Verdict::Fence
        } else {
            Verdict::Record
        };
    }
    if let Some(k) = known {
        if record.epoch < k.epoch || (record.epoch == k.epoch && record.server != k.server) {
            return Verdict::Stale;
        }
    }
    if record.server == server {
        Verdict::Take
    } else {
        Verdict::Fence
    }
}

/// Reads the identity of the server `conn` is connected to.
async fn server_identity<DB: SqlDb>(conn: &mut DB::Connection) -> Result<String, sqlx::Error> {
    let sql = identity_sql(DB::DIALECT).expect("a dialect with a fence");
    let pairs = Statement::new(sql)
        .fetch_all::<DB, (String, String)>(conn)
        .await?;
    Ok(identity_line(DB::DIALECT, pairs))
}

/// The after-connect check of `fence` on a new connection of a pool of
/// `DB`: the connection's server identity must be the verified one
/// ([`Fence::admit`]); a change starts the fence task over the pool's
/// `connect` options. Nothing when the fence is off.
pub(crate) async fn check_connection<DB: SqlDb>(
    fence: &Arc<Fence>,
    conn: &mut DB::Connection,
    connect: impl FnOnce() -> <DB::Connection as Connection>::Options,
) -> Result<(), sqlx::Error> {
    if !fence.enabled() {
        return Ok(());
    }
    let server = server_identity::<DB>(conn).await?;
    match fence.admit(&server) {
        Ok(()) => Ok(()),
        Err(why) => {
            if !fence.task.swap(true, Ordering::AcqRel) {
                tokio::spawn(fence_task::<DB>(fence.clone(), connect()));
            }
            Err(sqlx::Error::Protocol(why))
        }
    }
}

/// Runs the fence whenever a connection found the server changed, on a
/// connection of its own, retrying (1 s, doubling to 30 s) until it
/// succeeds.
async fn fence_task<DB: SqlDb>(
    fence: Arc<Fence>,
    connect: <DB::Connection as Connection>::Options,
) -> () {
    loop {
        let wanted = fence.wake.notified();
        if !fence.state.lock().unwrap().pending {
            wanted.await;
        }
        let mut backoff = Duration::from_secs(1);
        loop {
            match run_on::<DB>(&fence, &connect).await {
                Ok(()) => break,
                Err(e) => {
                    let refused = matches!(e, StoreError::Migration(_) | StoreError::Config(_));
                    tracing::error!(error = %e, refused, "the failover fence did not complete; retrying");
                    fence.state.lock().unwrap().failure = Some((refused, e.to_string()));
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                }
            }
        }
    }
}

/// Connects with `connect` and runs [`fence_once`].
async fn run_on<DB: SqlDb>(
    fence: &Fence,
    connect: &<DB::Connection as Connection>::Options,
) -> Result<(), StoreError> {
    let mut conn = DB::Connection::connect_with(connect)
        .await
        .map_err(unavailable)?;
    let outcome = fence_once::<DB>(fence, &mut conn).await;
    let _ = conn.close().await;
    outcome
}

/// At start, before anything is reserved: checks the server of `pool`
/// against its record and fences it if it changed (see the module docs).
/// Fails when the identity cannot be read (privileges: docs/operations.md),
/// seqd's tables are absent, or the server changed during start-up.
pub(crate) async fn verify<DB: SqlDb>(fence: &Fence, pool: &Pool<DB>) -> Result<(), StoreError> {
    if !fence.enabled() {
        return Ok(());
    }
    match run_on::<DB>(fence, &pool.connect_options()).await {
        // No table of seqd's at all (`--migrate off` on an empty database,
        // a dry run): nothing can be reserved from it, so nothing to fence;
        // its first reservation fails on the missing table.
        Err(StoreError::Migration(_)) if !has_sequences::<DB>(pool).await => Ok(()),
        outcome => outcome,
    }
}

/// Whether the `sequences` table answers on `pool`.
async fn has_sequences<DB: SqlDb>(pool: &Pool<DB>) -> bool {
    Statement::new("SELECT max_id FROM sequences WHERE 1 = 0")
        .execute_pooled::<DB>(pool)
        .await
        .is_ok()
}

/// The fence's transaction on `conn`: locks the record, reads the server's
/// identity, and raises the rows and records the server when it must
/// ([`must_fence`]); then `fence` admits connections to that server.
async fn fence_once<DB: SqlDb>(fence: &Fence, conn: &mut DB::Connection) -> Result<(), StoreError> {
    let dialect = DB::DIALECT;
    let server = server_identity::<DB>(conn).await.map_err(|e| {
        StoreError::Config(format!(
            "the failover fence cannot read the database server's identity ({e}); grant what \
             docs/operations.md lists, or start with --failover-fence off where replication is \
             synchronous"
        ))
    })?;
    let mut tx = conn.begin().await.map_err(unavailable)?;
    for sql in bounds_sql(dialect) {
        Statement::new(&sql)
            .execute::<DB>(&mut tx)
            .await
            .map_err(unavailable)?;
    }
    let record = Statement::new(STATEMENTS.of(dialect).record)
        .fetch_optional::<DB, (String, i64)>(&mut tx)
        .await
        .map_err(|e| match e {
            sqlx::Error::Database(ref d) if denied(d.as_ref()) => StoreError::Config(format!(
            "the failover fence may not read or lock seqd_fence ({e}): grant SELECT and UPDATE \
             on it as docs/operations.md lists, or start with --failover-fence off where \
             replication is synchronous"
        )),
            sqlx::Error::Database(_) => StoreError::Migration(format!(
                "seqd's tables are absent or behind on this server ({e}): a promoted server \
                     without them is never set up again by seqd; restore them (with \
                     `seqd sequences bump --all` past every ID handed out), or run \
                     `seqd migrate --new-database` if this is a new database"
            )),
            other => unavailable(other),
        })?;
    let record = record.map_or_else(
        || Verified {
            server: String::new(),
            epoch: 0,
        },
        |(server, epoch)| Verified { server, epoch },
    );
    let (known, seen) = {
        let state = fence.state.lock().unwrap();
        (state.verified.clone(), state.seen.clone())
    };
    if known.is_none() && seen.as_deref().is_some_and(|s| s != server) {
        return Err(StoreError::Unavailable(format!(
            "the database server changed during start-up ({}, then {server}); start again",
            seen.unwrap_or_default()
        )));
    }
    let verdict = judge(&record, &server, known.as_ref());
    if verdict == Verdict::Stale {
        tx.rollback().await.map_err(unavailable)?;
        fence.stale_refusals.fetch_add(1, Ordering::Relaxed);
        let known = known.unwrap_or_default();
        let why = format!(
            "the database server {server} has fence epoch {} (recorded for {}), older than \
             epoch {} of {} that this instance verified: an old primary back, or a replica \
             of it; its rows may lie inside IDs the newer server handed out, so nothing is \
             reserved from it. Point the address at the newer server (see \
             docs/high-availability.md)",
            record.epoch, record.server, known.epoch, known.server
        );
        tracing::error!(server = %server, epoch = record.epoch, verified = %known.server,
            verified_epoch = known.epoch,
            "refusing a database server older than the one verified (an old primary back?)");
        let mut state = fence.state.lock().unwrap();
        state.pending = true;
        state.stale = true;
        return Err(StoreError::Config(why));
    }
    let verified = if verdict == Verdict::Fence {
        let margin = fence.options.margin;
        tracing::warn!(recorded = %record.server, server = %server, margin,
            "fencing the database: every sequence raised past what a failover may have lost");
        let raised = raise_rows::<DB>(&mut tx, margin)
            .await
            .map_err(unavailable)?;
        let epoch = record.epoch.max(known.as_ref().map_or(0, |k| k.epoch)) + 1;
        Statement::new(STATEMENTS.of(dialect).fenced)
            .bind(server.as_str())
            .bind(epoch)
            .bind(margin)
            .execute::<DB>(&mut tx)
            .await
            .map_err(unavailable)?;
        tx.commit().await.map_err(unavailable)?;
        fence.fences.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(server = %server, epoch, rows = raised, margin,
            "the database is fenced: every sequence raised; reserving from it again");
        Verified { server, epoch }
    } else if verdict == Verdict::Record {
        let epoch = 1;
        Statement::new(STATEMENTS.of(dialect).recorded)
            .bind(server.as_str())
            .bind(epoch)
            .execute::<DB>(&mut tx)
            .await
            .map_err(unavailable)?;
        tx.commit().await.map_err(unavailable)?;
        tracing::info!(server = %server, "recorded the database server for the failover fence");
        Verified { server, epoch }
    } else {
        tx.commit().await.map_err(unavailable)?;
        if known.as_ref().is_some_and(|k| k.server != server) {
            tracing::warn!(server = %server, epoch = record.epoch,
                "another instance fenced the new database server; reserving from it");
        }
        record
    };
    let mut state = fence.state.lock().unwrap();
    state.verified = Some(verified);
    state.seen = None;
    state.pending = false;
    state.stale = false;
    state.failure = None;
    Ok(())
}

/// Raises every counting row by `margin` (a row that cannot take it is set
/// to `i64::MAX`: exhausted), the period rows of a serial sequence that
/// refuses past `{seq:0N}` at most to its capacity (the period is then
/// full), and creates the period rows of now (and [`PERIOD_SKEW`] around)
/// that are missing, raised: the lost window may have made them. The rows
/// changed or made.
async fn raise_rows<DB: SqlDb>(conn: &mut DB::Connection, margin: i64) -> Result<u64, sqlx::Error> {
    let dialect = DB::DIALECT;
    let margin = stripe_margin::<DB>(conn, margin).await?;
    let statements = STATEMENTS.of(dialect);
    let mut changed = Statement::new(statements.raise)
        .bind(margin)
        .bind(margin)
        .execute::<DB>(&mut *conn)
        .await?;
    let serials = Statement::new(statements.serials)
        .fetch_all::<DB, Columns>(&mut *conn)
        .await?;
    let now = Utc::now();
    for row in serials.into_iter().filter_map(columns_row) {
        let Some(settings) = row.serial.as_ref() else {
            continue;
        };
        let cap = match (settings.overflow, settings.format.capacity()) {
            (crate::domain::serial::Overflow::Refuse, Some(capacity)) => {
                Some(i64::try_from(capacity).unwrap_or(i64::MAX))
            }
            _ => None,
        };
        if let Some(cap) = cap {
            let (low, high) = period_rows_range(&row.name);
            Statement::new(statements.cap_periods)
                .bind(cap)
                .bind(cap)
                .bind(low.as_str())
                .bind(high.as_str())
                .execute::<DB>(&mut *conn)
                .await?;
        }
        let raised_start = (row.counter_start - 1).saturating_add(margin);
        let start = cap.map_or(raised_start, |cap| raised_start.min(cap));
        let mut keys: Vec<String> = Vec::new();
        for at in [now - skew(), now, now + skew()] {
            let at = jiff::Timestamp::from_millisecond(at.timestamp_millis())
                .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
            if let Ok(period) =
                crate::domain::serial::Period::of(at, &settings.zone(), settings.reset)
            {
                if !keys.contains(&period.key) {
                    keys.push(period.key);
                }
            }
        }
        for key in keys {
            changed += Statement::new(statements.raised_period)
                .bind(row.name.period_counter(&key).as_str())
                .bind(start)
                .bind(row.name.as_str())
                .execute::<DB>(&mut *conn)
                .await?;
        }
    }
    Ok(changed)
}

/// The margin on a stripe of a set of `n` (its record in `seqd_stripe`):
/// a reservation on a stripe may skip the other stripes' blocks, so the
/// lost window advanced the row by at most `n × (margin + block)`.
async fn stripe_margin<DB: SqlDb>(
    conn: &mut DB::Connection,
    margin: i64,
) -> Result<i64, sqlx::Error> {
    let record = Statement::new(STATEMENTS.of(DB::DIALECT).stripe)
        .fetch_all::<DB, (String, String)>(&mut *conn)
        .await?;
    let parsed = record
        .first()
        .and_then(|(count, block)| Some((count.parse::<i64>().ok()?, block.parse::<i64>().ok()?)));
    Ok(match parsed {
        Some((count, block)) if count > 1 => count.saturating_mul(margin.saturating_add(block)),
        _ => margin,
    })
}

/// Before `--migrate auto` creates seqd's tables: refuses when they are
/// absent on a server that was promoted from a replica (PostgreSQL: a
/// timeline above 1; MariaDB: a replication position in `gtid_slave_pos`),
/// where they were most likely lost with a failover: setting them up again
/// would hand out every ID again. `seqd migrate --new-database` creates them
/// anyway: the operator says the database is new.
pub(crate) async fn refuse_tables_on_promoted<DB: SqlDb>(
    fence: &Fence,
    pool: &Pool<DB>,
) -> Result<(), StoreError> {
    if !fence.enabled() || has_sequences::<DB>(pool).await {
        return Ok(());
    }
    let mut conn = pool.acquire().await.map_err(unavailable)?;
    let promoted = match DB::DIALECT {
        Dialect::Postgres => server_identity::<DB>(&mut conn)
            .await
            .map_err(unavailable)?
            .split(' ')
            .find_map(|pair| pair.strip_prefix("timeline="))
            .and_then(|t| t.parse::<i64>().ok())
            .is_some_and(|timeline| timeline > 1)
            .then(|| "its timeline is above 1".to_owned()),
        Dialect::Mysql => {
            let position = Statement::new("SELECT CAST(@@global.gtid_slave_pos AS CHAR)")
                .fetch_one::<DB, (String,)>(&mut conn)
                .await;
            position
                .ok()
                .filter(|(p,)| !p.trim().is_empty())
                .map(|(p,)| format!("it replicated up to {p}"))
        }
        Dialect::Sqlite => None,
    };
    match promoted {
        Some(why) if fence.options.new_database => {
            tracing::warn!(why = %why,
                "creating seqd's tables on a server promoted from a replica, as a new database \
                 (--new-database)");
            Ok(())
        }
        Some(why) => Err(StoreError::Migration(format!(
            "seqd's tables are absent on a server that was promoted from a replica ({why}): \
             they were most likely lost with a failover, and setting them up again would hand \
             out every ID again; restore them and `seqd sequences bump --all` past every ID \
             handed out, or run `seqd migrate --new-database` if this really is a new \
             database (an empty one made on this server after its promotion)"
        ))),
        None => Ok(()),
    }
}

/// Whether the database refused a statement for lack of a privilege
/// (PostgreSQL 42501; MySQL's and MariaDB's 1142 and 1143, SQLSTATE 42000).
fn denied(e: &dyn sqlx::error::DatabaseError) -> bool {
    match e.code().as_deref() {
        Some("42501") => true,
        Some("42000") => e.message().contains("denied"),
        _ => false,
    }
}

fn skew() -> chrono::Duration {
    chrono::Duration::from_std(PERIOD_SKEW).expect("a small duration")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(server: &str, epoch: i64) -> Verified {
        Verified {
            server: server.into(),
            epoch,
        }
    }

    #[test]
    fn a_new_record_is_filled_in_without_a_fence() {
        assert_eq!(judge(&v("", 0), "a", None), Verdict::Record);
        // ... unless this instance verified a server before: that record was lost.
        assert_eq!(judge(&v("", 0), "b", Some(&v("a", 1))), Verdict::Fence);
    }

    #[test]
    fn another_server_is_fenced_and_a_fenced_one_is_taken() {
        assert_eq!(judge(&v("a", 1), "b", None), Verdict::Fence);
        assert_eq!(judge(&v("a", 1), "b", Some(&v("a", 1))), Verdict::Fence);
        assert_eq!(judge(&v("b", 2), "b", Some(&v("a", 1))), Verdict::Take);
        assert_eq!(judge(&v("a", 1), "a", Some(&v("a", 1))), Verdict::Take);
        assert_eq!(judge(&v("a", 1), "a", None), Verdict::Take);
        // A replica of a server newer than the verified one, promoted.
        assert_eq!(judge(&v("c", 3), "d", Some(&v("b", 2))), Verdict::Fence);
    }

    #[test]
    fn a_server_older_than_what_was_seen_is_refused_never_fenced() {
        // The old primary back with its old record, after this instance
        // verified the promoted server's fence: raising its rows could put
        // them inside what the promoted server handed out.
        assert_eq!(judge(&v("a", 1), "a", Some(&v("b", 2))), Verdict::Stale);
        // A sibling replica of the old primary, promoted.
        assert_eq!(judge(&v("a", 1), "c", Some(&v("b", 2))), Verdict::Stale);
        // Another line of servers at the same epoch.
        assert_eq!(judge(&v("a", 2), "a", Some(&v("b", 2))), Verdict::Stale);
    }

    #[test]
    fn the_margin_covers_a_thousand_of_the_largest_reservations() {
        assert_eq!(FenceOptions::margin_for(5, 1_000_000), 1_000_000_000);
        assert_eq!(
            FenceOptions::margin_for(2_000_000_000, 1_000_000),
            2_000_000_000
        );
        assert_eq!(FenceOptions::margin_for(1, i64::MAX), i64::MAX);
    }

    #[test]
    fn identities_are_one_line_in_key_order() {
        let line = identity_line(
            Dialect::Mysql,
            vec![
                ("server_id".into(), "2".into()),
                ("gtid_domain_id".into(), "0".into()),
            ],
        );
        assert_eq!(line, "mysql gtid_domain_id=0 server_id=2");
    }
}
