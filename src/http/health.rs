//! `/healthz` (the process answers) and `/readyz` (the database answers and
//! the schema is in place).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use utoipa::ToSchema;

use super::error::{ErrorCode, ErrorDetail};
use super::AppState;

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

/// `GET /readyz`: 200 when the database answers and records every migration
/// this binary needs (one query, `Schema::ping`), else 503 naming the failed
/// check (`schema_behind` when a migration is missing). The query takes a permit of the read
/// gate ([`super::reads`]) like every unauthenticated read.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    summary = "Readiness: the database answers and the schema is in place",
    responses(
        (status = 200, description = "Ready", body = ReadyDoc,
            example = json!({"status": "ready", "checks": {"database": "ok"}})),
        (status = 503, description = "Not ready: the failed check, and `error.code` `storage_unavailable`; or `busy` and `overloaded` when too many database reads are in flight", body = ReadyDoc,
            headers(("Retry-After" = u64, description = "Seconds to wait")),
            example = json!({"status": "unavailable", "checks": {"database": "failed"},
                             "error": {"code": "storage_unavailable", "message": "database check failed: unreachable or not migrated"}})),
    )
)]
pub async fn readyz(State(st): State<AppState>) -> Response {
    match st.reads.run(st.service.ping()).await {
        Ok(Ok(())) => {
            let stripes = st.service.stripe_status();
            if stripes.is_empty() {
                Json(json!({ "status": "ready", "checks": { "database": "ok" } })).into_response()
            } else {
                // Ready while any stripe answers; the others are reported.
                let degraded = stripes.iter().any(|s| !s.up || !s.missing_rows.is_empty());
                Json(json!({
                    "status": if degraded { "degraded" } else { "ready" },
                    "checks": { "database": "ok", "stripes": stripes }
                }))
                .into_response()
            }
        }
        Ok(Err(crate::store::StoreError::Migration(why))) => {
            crate::log_throttle::throttled!(error, "readiness: the schema is behind", None, error = %why);
            not_ready(
                "schema_behind",
                ErrorCode::StorageUnavailable,
                "the database schema is older than this seqd needs: apply `seqd migrate` \
                 (or the DDL of `seqd schema`)",
            )
        }
        Ok(Err(e)) => {
            crate::log_throttle::throttled!(warn, "readiness check failed", None, error = %e);
            not_ready(
                "failed",
                ErrorCode::StorageUnavailable,
                "database check failed: unreachable or not migrated",
            )
        }
        Err(_) => not_ready(
            "busy",
            ErrorCode::Overloaded,
            "too many database reads in flight; retry shortly",
        ),
    }
}

/// A 503 answer of `/readyz`: the database check's result and the error.
fn not_ready(check: &str, code: ErrorCode, message: &str) -> Response {
    let error = ErrorDetail {
        code,
        message: message.into(),
    };
    let body = json!({
        "status": "unavailable",
        "checks": { "database": check },
        "error": error
    });
    let mut resp = (code.status(), Json(body)).into_response();
    resp.headers_mut().insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from(super::error::RETRY_AFTER_SECS),
    );
    resp
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
    /// `ready`, `degraded` (several databases: one is down or lacks a
    /// row, the others serve) or `unavailable`.
    #[schema(example = "ready")]
    pub status: String,
    /// Each check and its result.
    pub checks: ReadyChecksDoc,
    /// Present on 503 only (code `storage_unavailable`).
    #[schema(nullable = false)]
    pub error: Option<ErrorDetail>,
}

/// The checks of `/readyz`.
#[derive(ToSchema)]
#[schema(as = ReadyChecks)]
pub struct ReadyChecksDoc {
    /// `ok`; `failed`: the database does not answer (or has no schema);
    /// `schema_behind`: a migration this seqd needs is not applied; `busy`:
    /// not checked, too many database reads in flight.
    #[schema(example = "ok")]
    pub database: String,
    /// With several databases (stripes): the state of each, in order.
    #[schema(nullable = false)]
    pub stripes: Option<Vec<StripeDoc>>,
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
}
