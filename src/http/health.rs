//! `/healthz` (the process answers) and `/readyz` (the instance can answer
//! draws: the database answered its last check and the schema is in place,
//! or, while it does not answer, IDs are held in memory), both answered from
//! what the instance knows, never waiting on the store.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use utoipa::ToSchema;

use super::error::{ErrorCode, ErrorDetail};
use super::AppState;
use crate::service::health::DatabaseState;

/// `GET /healthz`: always 200 while the process serves HTTP.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    summary = "Liveness: the process answers",
    responses((status = 200, description = "Alive", body = HealthDoc)),
)]
pub async fn healthz() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

/// `GET /readyz`: 200 while the instance can answer draws: the database
/// answered the last check and records every migration this binary needs
/// (`"status":"ready"`), or it does not answer but IDs are held in memory
/// (`"status":"degraded"`, the ride-through). Else 503 naming the failed
/// check: `schema_behind` when a migration is missing, `fencing` while the
/// failover fence blocks, `failed` with no IDs in memory, `draining` once
/// shutdown began. Answered from what the instance knows (the fence's state,
/// the last background check of [`crate::service::health`], the buffers): it
/// never waits on the store.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    summary = "Readiness: the instance can answer draws (database answering, or IDs in memory)",
    responses(
        (status = 200, description = "Ready", body = ReadyDoc,
            example = json!({"status": "ready", "checks": {"database": "ok"}})),
        (status = 503, description = "Not ready: the failed check, and `error.code` `storage_unavailable`", body = ReadyDoc,
            headers(("Retry-After" = u64, description = "Seconds to wait")),
            example = json!({"status": "unavailable", "checks": {"database": "failed"},
                             "error": {"code": "storage_unavailable", "message": "database check failed: unreachable or not migrated"}})),
    )
)]
pub async fn readyz(State(st): State<AppState>) -> Response {
    if st.service.draining() {
        return not_ready_checks(
            json!({ "instance": "draining" }),
            ErrorCode::Overloaded,
            "shutting down: this instance takes no new work",
        );
    }
    let fence = st.service.fence_status();
    if let Some(f) = fence.as_ref().filter(|f| f.blocking()) {
        let message = match f.state {
            "fencing" => {
                "the database server changed (a failover): fencing it before any reservation"
            }
            "stale" => {
                "the database server is older than the one this instance verified (an old \
                 primary back?): nothing is reserved from it"
            }
            _ => "the database server changed (a failover) and cannot be fenced: see the logs",
        };
        return not_ready_with(
            "fencing",
            ErrorCode::StorageUnavailable,
            message,
            Some(json!(f)),
        );
    }
    match st.service.database_health() {
        Some(DatabaseState::Ok) => {
            let stripes = st.service.stripe_status();
            if stripes.is_empty() {
                let mut checks = json!({ "database": "ok" });
                if let Some(f) = fence {
                    checks["fence"] = json!(f);
                }
                Json(json!({ "status": "ready", "checks": checks })).into_response()
            } else {
                // Ready while any stripe answers; the others are reported.
                let degraded = stripes.iter().any(|s| {
                    !s.up
                        || !s.missing_rows.is_empty()
                        || s.fence.as_ref().is_some_and(|f| f.blocking())
                });
                Json(json!({
                    "status": if degraded { "degraded" } else { "ready" },
                    "checks": { "database": "ok", "stripes": stripes }
                }))
                .into_response()
            }
        }
        Some(DatabaseState::SchemaBehind) => not_ready(
            "schema_behind",
            ErrorCode::StorageUnavailable,
            "the database schema is older than this seqd needs: apply `seqd migrate` \
             (or the DDL of `seqd schema`)",
        ),
        Some(DatabaseState::Failed) => match st.service.sequences_holding_ids() {
            // The buffers carry the instance through the outage: it stays
            // in rotation while it holds IDs to hand out.
            0 => not_ready(
                "failed",
                ErrorCode::StorageUnavailable,
                "database check failed (unreachable or not migrated) and no IDs in memory",
            ),
            holding => Json(json!({
                "status": "degraded",
                "checks": {
                    "database": "failed",
                    "memory": { "sequences_holding_ids": holding }
                }
            }))
            .into_response(),
        },
        None => not_ready(
            "unchecked",
            ErrorCode::StorageUnavailable,
            "the database has not been checked yet",
        ),
    }
}

/// A 503 answer of `/readyz`: the database check's result and the error.
fn not_ready(check: &str, code: ErrorCode, message: &str) -> Response {
    not_ready_with(check, code, message, None)
}

/// A 503 answer of `/readyz` with `checks` as given.
fn not_ready_checks(checks: serde_json::Value, code: ErrorCode, message: &str) -> Response {
    let error = ErrorDetail {
        code,
        message: message.into(),
    };
    let body = json!({ "status": "unavailable", "checks": checks, "error": error });
    let mut resp = (code.status(), Json(body)).into_response();
    resp.headers_mut().insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from(super::error::RETRY_AFTER_SECS),
    );
    resp
}

/// [`not_ready`] with the failover fence's state in `checks.fence`.
fn not_ready_with(
    check: &str,
    code: ErrorCode,
    message: &str,
    fence: Option<serde_json::Value>,
) -> Response {
    let mut checks = json!({ "database": check });
    if let Some(f) = fence {
        checks["fence"] = f;
    }
    not_ready_checks(checks, code, message)
}

/// `{"status":"ok"}`.
#[derive(ToSchema)]
#[schema(as = Health)]
pub struct HealthDoc {
    /// Always `ok`.
    #[schema(example = "ok")]
    pub status: String,
}

/// Readiness: `{"status":"ready","checks":{"database":"ok"}}`, or on 503
/// `{"status":"unavailable","checks":{"database":"failed"},"error":{...}}`.
#[derive(ToSchema)]
#[schema(as = Ready)]
pub struct ReadyDoc {
    /// `ready`, `degraded` (the database does not answer and IDs remain in
    /// memory; or several databases: one is down or lacks a row, the others
    /// serve) or `unavailable`.
    #[schema(example = "ready")]
    pub status: String,
    /// Each check and its result.
    pub checks: ReadyChecksDoc,
    /// Present on 503 only (code `storage_unavailable`; `overloaded` once
    /// shutdown began).
    #[schema(nullable = false)]
    pub error: Option<ErrorDetail>,
}

/// The checks of `/readyz`.
#[derive(ToSchema)]
#[schema(as = ReadyChecks)]
pub struct ReadyChecksDoc {
    /// The last background check (one a second): `ok`; `failed`: the
    /// database did not answer (or has no schema); `schema_behind`: a
    /// migration this seqd needs is not applied; `unchecked`: no check
    /// has ended yet; `fencing`: the
    /// database server changed (a failover) and is being fenced, or cannot
    /// be (`fence.state` `stale`, `refused` or `failed`): nothing is reserved.
    /// Absent once shutdown began (`instance` says `draining`).
    #[schema(example = "ok", nullable = false)]
    pub database: Option<String>,
    /// `draining` once shutdown began (then the only check).
    #[schema(nullable = false)]
    pub instance: Option<String>,
    /// While the database does not answer: what the buffers still hold
    /// (the ride-through).
    #[schema(nullable = false)]
    pub memory: Option<MemoryDoc>,
    /// The failover fence of the database (absent when off, on SQLite, and
    /// with stripes, where each stripe has its own).
    #[schema(nullable = false)]
    pub fence: Option<FenceDoc>,
    /// With several databases (stripes): the state of each, in order.
    #[schema(nullable = false)]
    pub stripes: Option<Vec<StripeDoc>>,
}

/// What the buffers hold, in `/readyz` while the database does not answer.
#[derive(ToSchema)]
#[schema(as = ReadyMemory)]
pub struct MemoryDoc {
    /// Live sequences with IDs left in memory: the instance stays ready
    /// while this is above 0.
    pub sequences_holding_ids: u64,
}

/// One stripe in `/readyz`.
#[derive(ToSchema)]
#[schema(as = Stripe)]
pub struct StripeDoc {
    /// Position in the set, from 0.
    pub index: u32,
    /// `postgres`, `mysql` or `sqlite`.
    pub backend: String,
    /// False while marked down (failed or slower than `--failover-after`,
    /// until a probe finds it answering).
    pub up: bool,
    /// Ranges this instance reserved from it.
    pub reservations: u64,
    /// Operations on it that failed or were overtaken.
    pub failures: u64,
    /// seqd's words for the last failure.
    pub last_error: Option<String>,
    /// Sequences that have no row on this stripe while others have one
    /// (added by SQL to some stripes only).
    pub missing_rows: Vec<String>,
    /// Its failover fence (absent when off).
    #[schema(nullable = false)]
    pub fence: Option<FenceDoc>,
}

/// The failover fence of a database in `/readyz`
/// (docs/high-availability.md, "Failover of the database").
#[derive(ToSchema)]
#[schema(as = Fence)]
pub struct FenceDoc {
    /// `unchecked` (not verified yet), `ok`, `fencing` (the server changed:
    /// every sequence is being raised; nothing is reserved meanwhile),
    /// `stale` (the server's fence record is older than the one this
    /// instance verified, an old primary back: never reserved from, never
    /// fenced, until the address leads to the newer server again),
    /// `refused` (the new server cannot be fenced, e.g. seqd's tables are
    /// absent on it) or `failed` (the last attempt failed; retried).
    #[schema(example = "ok")]
    pub state: String,
    /// The identity of the server verified (PostgreSQL: system identifier
    /// and timeline; MySQL/MariaDB: server id, uuid, GTID domain).
    #[schema(example = "postgres system_identifier=7312345678901234567 timeline=2")]
    pub server: Option<String>,
    /// The record's epoch: fences of this database since it was recorded.
    pub epoch: i64,
    /// Fences this instance ran.
    pub fences: u64,
    /// Checks that found the server `stale`, each refused.
    pub stale_refusals: u64,
    /// Why the last attempt failed or was refused.
    pub last_error: Option<String>,
}
