//! Sequence resources: create, list, read, patch.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::{Admin, JsonBody, Name};
use super::openapi::{ErrorBody, SequenceDoc, SequenceListDoc};
use super::AppState;
use crate::allocator::BufferSnapshot;
use crate::domain::{validate_description, validate_step, NewSequence, SeqName};
use crate::store::{SequencePatch, SequenceRow};

/// Default first ID of a created sequence.
pub const DEFAULT_START: i64 = 1;
/// Default base step of a created sequence.
pub const DEFAULT_STEP: i64 = 1000;

/// A sequence as the API shows it: its row and this instance's buffer.
#[derive(Debug, Serialize)]
pub struct SequenceView {
    /// The database row.
    #[serde(flatten)]
    pub row: SequenceRow,
    /// This instance's buffer, if it has served the sequence.
    pub buffer: Option<BufferSnapshot>,
}

/// Body of `POST /v1/sequences`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    /// The sequence's name.
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", example = "order")]
    name: String,
    /// The first ID it will issue (default 1).
    #[schema(minimum = 1, example = 1, nullable = false)]
    #[serde(default, deserialize_with = "integer")]
    start: Option<i64>,
    /// Its base segment size, 1..=max-step (default 1000).
    #[schema(minimum = 1, maximum = 1_000_000, example = 1000, nullable = false)]
    #[serde(default, deserialize_with = "integer")]
    step: Option<i64>,
    /// Free text, at most 256 characters (default empty).
    #[schema(max_length = 256, example = "order IDs", nullable = false)]
    #[serde(default, deserialize_with = "text")]
    description: Option<String>,
}

/// Body of `PATCH /v1/sequences/{name}`: at least one field.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchBody {
    /// New base step, 1..=max-step; takes effect at each instance's next fetch.
    #[schema(minimum = 1, maximum = 1_000_000, example = 5000, nullable = false)]
    #[serde(default, deserialize_with = "integer")]
    step: Option<i64>,
    /// New description, at most 256 characters.
    #[schema(max_length = 256, nullable = false)]
    #[serde(default, deserialize_with = "text")]
    description: Option<String>,
}

/// A 64-bit integer field that may be left out but not set to `null`, and
/// that also accepts JSON numbers written with a zero fraction (`1000.0`),
/// which JSON Schema counts as integers.
fn integer<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    use serde::de::Error;
    let n = serde_json::Number::deserialize(d)?;
    if let Some(i) = n.as_i64() {
        return Ok(Some(i));
    }
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64 => {
            Ok(Some(f as i64))
        }
        _ => Err(D::Error::custom(format!(
            "expected a 64-bit integer, got {n}"
        ))),
    }
}

/// A string field that may be left out but not set to `null`.
fn text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

fn view(st: &AppState, row: SequenceRow) -> SequenceView {
    let buffer = st.allocator.snapshot(&row.name);
    SequenceView { row, buffer }
}

/// `POST /v1/sequences` (admin).
#[utoipa::path(
    post,
    path = "/v1/sequences",
    operation_id = "create_sequence",
    tag = "sequences",
    summary = "Create a sequence",
    request_body = CreateBody,
    security(("admin_token" = [])),
    responses(
        (status = 201, description = "Created", body = SequenceDoc),
        (status = 400, description = "`invalid_name` or `invalid_request` (step, start, description, unknown field, not JSON)", body = ErrorBody),
        (status = 401, description = "`unauthorized`: no or wrong admin token, or admin calls disabled", body = ErrorBody),
        (status = 409, description = "`sequence_exists`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: body over 64 KiB", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn create(
    State(st): State<AppState>,
    _admin: Admin,
    JsonBody(body): JsonBody<CreateBody>,
) -> Result<impl IntoResponse, ApiError> {
    let name = SeqName::parse(&body.name).map_err(ApiError::InvalidName)?;
    let new = NewSequence::new(
        name.clone(),
        body.start.unwrap_or(DEFAULT_START),
        body.step.unwrap_or(DEFAULT_STEP),
        body.description.unwrap_or_default(),
        st.allocator.config().max_step,
    )
    .map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
    if let Some(reserved) = st.allocator.reserved_up_to(&name) {
        // An existing row is a plain duplicate (409); only a name whose row
        // is gone while this instance remembers its IDs needs the check.
        if st
            .allocator
            .store()
            .get(&name)
            .await
            .map_err(|e| ApiError::from_store(&name, e))?
            .is_some()
        {
            return Err(ApiError::SequenceExists(name));
        }
        if new.start <= reserved {
            return Err(ApiError::InvalidRequest(format!(
                "start must be above {reserved}: this instance already reserved IDs up to it under this \
                 name, and a re-created sequence must never issue them again"
            )));
        }
    }
    let row = st
        .allocator
        .store()
        .create(&new)
        .await
        .map_err(|e| ApiError::from_store(&name, e))?;
    st.allocator.clear_missing(&name);
    tracing::info!(sequence = %name, start = new.start, step = new.step, "sequence created");
    Ok((StatusCode::CREATED, Json(view(&st, row))))
}

/// `GET /v1/sequences`.
#[utoipa::path(
    get,
    path = "/v1/sequences",
    operation_id = "list_sequences",
    tag = "sequences",
    summary = "List every sequence, each with this instance's buffer",
    responses(
        (status = 200, description = "Every sequence, ordered by name", body = SequenceListDoc),
        (status = 503, description = "`storage_unavailable`", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn list(State(st): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let rows = st.allocator.store().list().await?;
    let sequences: Vec<_> = rows.into_iter().map(|r| view(&st, r)).collect();
    Ok(Json(serde_json::json!({ "sequences": sequences })))
}

/// `GET /v1/sequences/{name}`.
#[utoipa::path(
    get,
    path = "/v1/sequences/{name}",
    operation_id = "get_sequence",
    tag = "sequences",
    summary = "One sequence: its row and this instance's buffer",
    params(("name" = String, Path, description = "The sequence", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", example = "order")),
    responses(
        (status = 200, description = "The sequence", body = SequenceDoc),
        (status = 400, description = "`invalid_name`", body = ErrorBody),
        (status = 404, description = "`sequence_not_found`; the message says how to create it", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn get(
    State(st): State<AppState>,
    Name(name): Name,
) -> Result<impl IntoResponse, ApiError> {
    let row = st
        .allocator
        .store()
        .get(&name)
        .await
        .map_err(|e| ApiError::from_store(&name, e))?;
    let row = row.ok_or_else(|| ApiError::SequenceNotFound(name.clone()))?;
    Ok(Json(view(&st, row)))
}

/// `PATCH /v1/sequences/{name}` (admin): change `step` and/or `description`.
#[utoipa::path(
    patch,
    path = "/v1/sequences/{name}",
    operation_id = "update_sequence",
    tag = "sequences",
    summary = "Change a sequence's step and/or description",
    params(("name" = String, Path, description = "The sequence", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", example = "order")),
    request_body = PatchBody,
    security(("admin_token" = [])),
    responses(
        (status = 200, description = "The changed sequence", body = SequenceDoc),
        (status = 400, description = "`invalid_name` or `invalid_request` (empty patch, step out of range, description too long, unknown field, not JSON)", body = ErrorBody),
        (status = 401, description = "`unauthorized`: no or wrong admin token, or admin calls disabled", body = ErrorBody),
        (status = 404, description = "`sequence_not_found`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: body over 64 KiB", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn patch(
    State(st): State<AppState>,
    _admin: Admin,
    Name(name): Name,
    JsonBody(body): JsonBody<PatchBody>,
) -> Result<impl IntoResponse, ApiError> {
    if body.step.is_none() && body.description.is_none() {
        return Err(ApiError::InvalidRequest(
            "nothing to change: give step and/or description".into(),
        ));
    }
    let max_step = st.allocator.config().max_step;
    let step = body
        .step
        .map(|s| validate_step(s, max_step))
        .transpose()
        .map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
    if let Some(d) = &body.description {
        validate_description(d).map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
    }
    let patch = SequencePatch {
        step,
        description: body.description,
    };
    let row = st
        .allocator
        .store()
        .update(&name, &patch)
        .await
        .map_err(|e| ApiError::from_store(&name, e))?;
    tracing::info!(sequence = %name, step = ?patch.step, "sequence updated");
    Ok(Json(view(&st, row)))
}
