//! Admin routes of the client tokens: `GET|POST /v1/tokens` and
//! `DELETE /v1/tokens/{label}` (docs/api.md, "Client tokens"); the work is
//! the service's (`service/tokens.rs`).

use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::extract::{JsonBody, PathParam};
use crate::service::tokens::{NewToken, TokenView};
use crate::service::AdminCalls;

/// `{"tokens":[...]}`.
#[derive(Serialize, ToSchema)]
pub struct TokenList {
    /// Every token by label, revoked and expired ones too (never the token's text).
    pub tokens: Vec<TokenView>,
}

/// A token just made: its text, shown this once, and its row.
#[derive(Serialize, ToSchema)]
pub struct MadeTokenBody {
    /// The token: `seqd_` and 64 hex digits. Only its SHA-256 is stored.
    #[schema(example = "seqd_3f0c...")]
    pub token: String,
    /// The token as listed.
    #[serde(flatten)]
    pub view: TokenView,
}

/// `{"label":"shop-42","revoked":true}`.
#[derive(Serialize, ToSchema)]
pub struct RevokedBody {
    /// The token's label.
    pub label: String,
    /// True when this call revoked it; false when it was revoked already.
    pub revoked: bool,
}

/// `GET /v1/tokens` (admin).
#[utoipa::path(
    get,
    path = "/v1/tokens",
    operation_id = "list_tokens",
    tag = "tokens",
    summary = "Every client token (never its text)",
    security(("admin_token" = [])),
    responses(
        (status = 200, description = "The tokens by label", body = TokenList),
        (status = 401, description = "`unauthorized`: no or wrong admin token, or admin calls disabled", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn list(admin: AdminCalls) -> Result<Json<TokenList>, ApiError> {
    let tokens = admin.tokens().await?;
    Ok(Json(TokenList { tokens }))
}

/// `POST /v1/tokens` (admin).
#[utoipa::path(
    post,
    path = "/v1/tokens",
    operation_id = "create_token",
    tag = "tokens",
    summary = "Make a client token; its text is in this answer only",
    request_body = NewToken,
    security(("admin_token" = [])),
    responses(
        (status = 201, description = "Made: in force on this instance now, on every other within 5 s", body = MadeTokenBody),
        (status = 400, description = "`invalid_request`: a bad label, prefix, right or expires_in, unknown field, not JSON", body = ErrorBody),
        (status = 401, description = "`unauthorized`: no or wrong admin token, or admin calls disabled", body = ErrorBody),
        (status = 409, description = "`token_exists`: the label is taken (labels stay taken after a revoke)", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: body over 64 KiB", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn create(
    admin: AdminCalls,
    JsonBody(body): JsonBody<NewToken>,
) -> Result<impl IntoResponse, ApiError> {
    let made = admin.create_token(body).await?;
    let view = TokenView::of(&made.record, chrono::Utc::now());
    let body = MadeTokenBody {
        token: made.token.expose().to_owned(),
        view,
    };
    Ok((StatusCode::CREATED, Json(body)))
}

/// `DELETE /v1/tokens/{label}` (admin): revoke.
#[utoipa::path(
    delete,
    path = "/v1/tokens/{label}",
    operation_id = "revoke_token",
    tag = "tokens",
    summary = "Revoke a client token: refused here now, on every other instance within 5 s",
    params(("label" = String, Path, description = "The token's label", example = "shop-42")),
    security(("admin_token" = [])),
    responses(
        (status = 200, description = "Revoked (its row stays, marked revoked)", body = RevokedBody),
        (status = 401, description = "`unauthorized`: no or wrong admin token, or admin calls disabled", body = ErrorBody),
        (status = 404, description = "`token_not_found`", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn revoke(
    admin: AdminCalls,
    PathParam(label): PathParam<String>,
) -> Result<Json<RevokedBody>, ApiError> {
    let revoked = admin.revoke_token(&label).await?;
    Ok(Json(RevokedBody { label, revoked }))
}
