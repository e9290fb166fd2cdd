//! ID routes: `/v1/sequences/{name}/next`, `/v1/sequences/{name}/batch`, and
//! Leaf's `/api/segment/get/{key}`.
//!
//! Bodies are written by hand with `itoa`: names are validated to a JSON-safe
//! alphabet, and IDs are integers, so nothing needs escaping.

use axum::extract::{RawQuery, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::extract::{count_from_query, PathSeqNameRef, WantsText};
use super::AppState;
use crate::allocator::Batch;
use crate::domain::SeqNameRef;

/// `Content-Type` of the ID routes' JSON answers (snowflake's too).
pub(super) const JSON: HeaderValue = HeaderValue::from_static("application/json");
const TEXT: HeaderValue = HeaderValue::from_static("text/plain; charset=utf-8");
const NO_STORE: HeaderValue = HeaderValue::from_static("no-store");

/// `GET|POST /v1/sequences/{name}/next`: one ID, JSON or (with
/// `Accept: text/plain`) the bare number.
#[utoipa::path(
    method(get, post),
    path = "/v1/sequences/{name}/next",
    operation_id = "next_id",
    tag = "ids",
    summary = "One ID",
    params(("name" = String, Path, description = "The sequence", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", example = "order")),
    responses(
        (status = 200, description = "The next ID of this instance; with `Accept: text/plain` the bare number", headers(("Cache-Control" = String, description = "`no-store`")),
            content((NextIdDoc = "application/json"), (String = "text/plain", example = json!("1001")))),
        (status = 400, description = "`invalid_name`", body = ErrorBody),
        (status = 404, description = "`sequence_not_found`; the message says how to create it", body = ErrorBody),
        (status = 409, description = "`sequence_exhausted`: the next segment would pass i64::MAX", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`: both segments empty and the database unreachable or too slow within the wait timeout", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn next(
    State(st): State<AppState>,
    name: PathSeqNameRef,
    WantsText(text): WantsText,
) -> Result<Response, ApiError> {
    let name = name.get();
    let id = next_id(&st, name).await?;
    if text {
        Ok(text_id(id))
    } else {
        let mut buf = itoa::Buffer::new();
        let digits = buf.format(id);
        let mut body = String::with_capacity(name.as_str().len() + digits.len() + 20);
        body.push_str("{\"name\":\"");
        body.push_str(name.as_str());
        body.push_str("\",\"id\":");
        body.push_str(digits);
        body.push('}');
        Ok(respond(JSON, body))
    }
}

/// `GET|POST /v1/sequences/{name}/batch?count=N`: N strictly increasing IDs.
#[utoipa::path(
    method(get, post),
    path = "/v1/sequences/{name}/batch",
    operation_id = "batch_ids",
    tag = "ids",
    summary = "N IDs, strictly increasing",
    params(
        ("name" = String, Path, description = "The sequence", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", example = "order"),
        ("count" = u32, Query, description = "How many IDs, exactly once", minimum = 1, maximum = 10000, example = 100),
    ),
    responses(
        (status = 200, description = "The IDs, increasing, following this instance's previous IDs", body = BatchDoc, headers(("Cache-Control" = String, description = "`no-store`"))),
        (status = 400, description = "`invalid_name` or `invalid_count`", body = ErrorBody),
        (status = 404, description = "`sequence_not_found`", body = ErrorBody),
        (status = 409, description = "`sequence_exhausted`", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`: both segments empty and the database unreachable or too slow within the wait timeout", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn batch(
    State(st): State<AppState>,
    name: PathSeqNameRef,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let name = name.get();
    let count = count_from_query(q.as_deref())?;
    let batch = st
        .allocator
        .batch(name, count)
        .await
        .map_err(|e| ApiError::from_alloc(name, e))?;
    Ok(respond(JSON, batch_json(name, &batch)))
}

/// `GET /api/segment/get/{key}`: Leaf's route, a plain-text ID; errors keep
/// their real status codes (Leaf answers 500 or a negative number).
#[utoipa::path(
    get,
    path = "/api/segment/get/{key}",
    tag = "ids",
    summary = "One ID, Leaf-compatible",
    description = "Meituan Leaf's segment route: the ID as plain text. Unlike Leaf, errors are not negative IDs \
                   but the JSON error body with a real status code.",
    params(("key" = String, Path, description = "The sequence (Leaf's biz_tag)", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", example = "order")),
    responses(
        (status = 200, description = "The ID", body = String, content_type = "text/plain",
            headers(("Cache-Control" = String, description = "`no-store`")), example = json!("1001")),
        (status = 400, description = "`invalid_name`", body = ErrorBody),
        (status = 404, description = "`sequence_not_found`", body = ErrorBody),
        (status = 409, description = "`sequence_exhausted`", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`: both segments empty and the database unreachable or too slow within the wait timeout", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn leaf_get(
    State(st): State<AppState>,
    name: PathSeqNameRef,
) -> Result<Response, ApiError> {
    Ok(text_id(next_id(&st, name.get()).await?))
}

async fn next_id(st: &AppState, name: SeqNameRef<'_>) -> Result<i64, ApiError> {
    st.allocator
        .next(name)
        .await
        .map_err(|e| ApiError::from_alloc(name, e))
}

/// An ID as a plain-text answer (snowflake's routes use it too).
pub(super) fn text_id(id: i64) -> Response {
    respond(TEXT, itoa::Buffer::new().format(id).to_owned())
}

/// An ID answer: `body` with `content_type` and `Cache-Control: no-store`.
pub(super) fn respond(content_type: HeaderValue, body: String) -> Response {
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, content_type);
    h.insert(CACHE_CONTROL, NO_STORE);
    resp
}

/// `{"name":"order","ids":[1,2,3]}`.
fn batch_json(name: SeqNameRef<'_>, batch: &Batch) -> String {
    let mut body = String::with_capacity(name.as_str().len() + 20 + batch.len() as usize * 20);
    body.push_str("{\"name\":\"");
    body.push_str(name.as_str());
    body.push_str("\",\"ids\":[");
    let mut buf = itoa::Buffer::new();
    for (i, id) in batch.ids().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(buf.format(id));
    }
    body.push_str("]}");
    body
}

/// `{"name":"order","id":1001}`.
#[derive(ToSchema)]
#[schema(as = NextId)]
pub struct NextIdDoc {
    /// The sequence.
    #[schema(example = "order")]
    pub name: String,
    /// The ID.
    #[schema(example = 1001)]
    pub id: i64,
}

/// `{"name":"order","ids":[1001,1002,...]}`.
#[derive(ToSchema)]
#[schema(as = Batch)]
pub struct BatchDoc {
    /// The sequence.
    #[schema(example = "order")]
    pub name: String,
    /// The IDs, strictly increasing.
    #[schema(example = json!([1001, 1002, 1003]))]
    pub ids: Vec<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocator::IdRange;

    #[test]
    fn batch_json_is_valid_json_with_every_id() {
        let name = SeqNameRef::parse("a.b:c-d_e").unwrap();
        let batch = Batch {
            ranges: vec![
                IdRange { first: 1, last: 3 },
                IdRange {
                    first: i64::MAX - 1,
                    last: i64::MAX,
                },
            ],
        };
        let v: serde_json::Value = serde_json::from_str(&batch_json(name, &batch)).unwrap();
        assert_eq!(v["name"], "a.b:c-d_e");
        let ids: Vec<i64> = v["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect();
        assert_eq!(ids, vec![1, 2, 3, i64::MAX - 1, i64::MAX]);
    }
}
