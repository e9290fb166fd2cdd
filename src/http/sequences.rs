//! Sequence resources: create, list, read, patch.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::{Admin, JsonBody, Name};
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
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    name: String,
    start: Option<i64>,
    step: Option<i64>,
    description: Option<String>,
}

/// Body of `PATCH /v1/sequences/{name}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchBody {
    step: Option<i64>,
    description: Option<String>,
}

fn view(st: &AppState, row: SequenceRow) -> SequenceView {
    let buffer = st.allocator.snapshot(&row.name);
    SequenceView { row, buffer }
}

/// `POST /v1/sequences` (admin).
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
        if new.start <= reserved {
            return Err(ApiError::InvalidRequest(format!(
                "start must be above {reserved}: this instance already reserved IDs up to it under this \
                 name, and a re-created sequence must never issue them again"
            )));
        }
    }
    let row = st.allocator.store().create(&new).await.map_err(|e| ApiError::from_store(&name, e))?;
    st.allocator.clear_missing(&name);
    tracing::info!(sequence = %name, start = new.start, step = new.step, "sequence created");
    Ok((StatusCode::CREATED, Json(view(&st, row))))
}

/// `GET /v1/sequences`.
pub async fn list(State(st): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let rows = st.allocator.store().list().await?;
    let sequences: Vec<_> = rows.into_iter().map(|r| view(&st, r)).collect();
    Ok(Json(serde_json::json!({ "sequences": sequences })))
}

/// `GET /v1/sequences/{name}`.
pub async fn get(State(st): State<AppState>, Name(name): Name) -> Result<impl IntoResponse, ApiError> {
    let row = st.allocator.store().get(&name).await.map_err(|e| ApiError::from_store(&name, e))?;
    let row = row.ok_or_else(|| ApiError::SequenceNotFound(name.clone()))?;
    Ok(Json(view(&st, row)))
}

/// `PATCH /v1/sequences/{name}` (admin): change `step` and/or `description`.
pub async fn patch(
    State(st): State<AppState>,
    _admin: Admin,
    Name(name): Name,
    JsonBody(body): JsonBody<PatchBody>,
) -> Result<impl IntoResponse, ApiError> {
    if body.step.is_none() && body.description.is_none() {
        return Err(ApiError::InvalidRequest("nothing to change: give step and/or description".into()));
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
    let patch = SequencePatch { step, description: body.description };
    let row = st.allocator.store().update(&name, &patch).await.map_err(|e| ApiError::from_store(&name, e))?;
    tracing::info!(sequence = %name, step = ?patch.step, "sequence updated");
    Ok(Json(view(&st, row)))
}
