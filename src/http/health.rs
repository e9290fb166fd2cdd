//! `/healthz` (the process answers) and `/readyz` (the database answers and
//! the schema is in place).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::openapi::{HealthDoc, ReadyDoc};
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

/// `GET /readyz`: 200 when the database answers a query on `sequences`,
/// else 503 naming the failed check.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    summary = "Readiness: the database answers and the schema is in place",
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
    match st.allocator.store().ping().await {
        Ok(()) => {
            Json(json!({ "status": "ready", "checks": { "database": "ok" } })).into_response()
        }
        Err(e) => {
            tracing::warn!(error = %e, "readiness check failed");
            let body = json!({
                "status": "unavailable",
                "checks": { "database": "failed" },
                "error": { "code": "storage_unavailable", "message": "database check failed: unreachable or not migrated" }
            });
            let mut resp = (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(super::error::RETRY_AFTER_SECS),
            );
            resp
        }
    }
}
