//! Snowflake ID routes: `/v1/snowflake/next`, `/v1/snowflake/batch?count=N`,
//! `/v1/snowflake/decode/{id}`, and Leaf's `/api/snowflake/get/{key}`.
//!
//! Each route is a call of the service, which holds the generator when
//! snowflake IDs are enabled; without it every route answers 404
//! `snowflake_disabled`. JSON answers carry each ID twice, as a number and as
//! a string: snowflake IDs exceed 2^53, beyond which JavaScript's numbers
//! (and many JSON parsers) silently round.

use axum::extract::{RawQuery, State};
use axum::response::Response;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::extract::{count_from_query, IdDoc, IdsAs, IdsAsDoc, PathParam, WantsText, Who};
use super::ids::{respond, text_id, JSON};
use super::AppState;
use crate::snowflake::layout::iso_ms;

/// `GET|POST /v1/snowflake/next`: one ID, JSON or (with `Accept: text/plain`)
/// the bare number.
#[utoipa::path(
    method(get, post),
    path = "/v1/snowflake/next",
    operation_id = "snowflake_next",
    tag = "snowflake",
    summary = "One snowflake ID",
    description = "A time-ordered ID: timestamp, this instance's worker ID, sequence. Strictly increasing \
                   within an instance.",
    params(("as" = Option<IdsAsDoc>, Query, description = "`string`: `id` as a JSON string of digits too; `number` (the default): as a number", example = "string")),
    responses(
        (status = 200, description = "The ID, as a number and as a string (IDs exceed 2^53); with \
            `Accept: text/plain` the bare number", headers(("Cache-Control" = String, description = "`no-store`")),
            content((SnowflakeIdDoc = "application/json"), (String = "text/plain", example = json!("2199023255552001")))),
        (status = 400, description = "`invalid_request`: `as` other than `string` or `number`", body = ErrorBody),
        (status = 404, description = "`snowflake_disabled`", body = ErrorBody),
        (status = 409, description = "`snowflake_exhausted`: the timestamp field is full", body = ErrorBody),
        (status = 503, description = "`worker_lease_lost` (no worker ID leased, or its lease not renewed in time), \
            `clock_moved_backwards` (the clock is behind the last timestamp issued by more than the tolerance) or \
            `clock_stalled`", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn next(
    State(st): State<AppState>,
    who: Who,
    WantsText(text): WantsText,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let ids_as = IdsAs::from_query(q.as_deref())?;
    let id = st.service.snowflake_next(who.presented()).await?;
    if text {
        return Ok(text_id(id));
    }
    let mut body = String::with_capacity(64);
    body.push_str("{\"id\":");
    ids_as.push(&mut body, id);
    body.push_str(",\"id_str\":");
    IdsAs::String.push(&mut body, id);
    body.push('}');
    Ok(respond(JSON, body))
}

/// `GET|POST /v1/snowflake/batch?count=N`: N strictly increasing IDs.
#[utoipa::path(
    method(get, post),
    path = "/v1/snowflake/batch",
    operation_id = "snowflake_batch",
    tag = "snowflake",
    summary = "N snowflake IDs, strictly increasing",
    params(
        ("count" = u32, Query, description = "How many IDs, exactly once", minimum = 1, maximum = 10000, example = 100),
        ("as" = Option<IdsAsDoc>, Query, description = "`string`: `ids` as JSON strings of digits, for clients that read JSON numbers as doubles (exact only to 2^53); `number` (the default): as numbers", example = "string"),
    ),
    responses(
        (status = 200, description = "The IDs, increasing, following this instance's previous IDs", body = SnowflakeBatchDoc,
            headers(("Cache-Control" = String, description = "`no-store`"))),
        (status = 400, description = "`invalid_count`; `invalid_request`: `as` other than `string` or `number`", body = ErrorBody),
        (status = 404, description = "`snowflake_disabled`", body = ErrorBody),
        (status = 409, description = "`snowflake_exhausted`", body = ErrorBody),
        (status = 503, description = "`worker_lease_lost`, `clock_moved_backwards` or `clock_stalled`", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn batch(
    State(st): State<AppState>,
    who: Who,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let count = count_from_query(q.as_deref())?;
    let ids_as = IdsAs::from_query(q.as_deref())?;
    let ids = st.service.snowflake_batch(who.presented(), count).await?;
    Ok(respond(JSON, batch_json(&ids, ids_as)))
}

/// `GET /v1/snowflake/decode/{id}`: the parts of an ID, read with this
/// instance's layout.
#[utoipa::path(
    get,
    path = "/v1/snowflake/decode/{id}",
    operation_id = "snowflake_decode",
    tag = "snowflake",
    summary = "The parts of a snowflake ID",
    params(("id" = String, Path, description = "The ID, in decimal", example = "2199023255552001", pattern = "^[0-9]{1,19}$")),
    responses(
        (status = 200, description = "Timestamp, worker ID and sequence, read with this instance's layout", body = SnowflakeDecodedDoc),
        (status = 400, description = "`invalid_request`: not a non-negative 64-bit decimal integer, or not valid percent-encoded UTF-8", body = ErrorBody),
        (status = 404, description = "`snowflake_disabled`", body = ErrorBody),
    )
)]
pub async fn decode(
    State(st): State<AppState>,
    PathParam(raw): PathParam<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw)?;
    let decoded = st.service.snowflake_decode(id)?;
    let (d, ms) = (decoded.parts, decoded.unit_start_ms);
    let body = DecodedBody {
        id,
        id_str: id.to_string(),
        timestamp: d.timestamp,
        timestamp_ms: ms,
        time: iso_ms(ms),
        worker: d.worker,
        sequence: d.sequence,
    };
    let json = serde_json::to_string(&body).expect("plain fields serialize");
    Ok(respond(JSON, json))
}

/// `GET /api/snowflake/get/{key}`: Leaf's snowflake route, a plain-text ID.
/// The key is ignored, as in Leaf.
#[utoipa::path(
    get,
    path = "/api/snowflake/get/{key}",
    operation_id = "snowflake_leaf_get",
    tag = "snowflake",
    summary = "One snowflake ID, Leaf-compatible",
    description = "Meituan Leaf's snowflake route: the ID as plain text; the key is ignored. Unlike Leaf, errors \
                   are not negative IDs but the JSON error body with a real status code.",
    params(("key" = String, Path, description = "Ignored (Leaf's biz_tag)", example = "order")),
    responses(
        (status = 200, description = "The ID", body = String, content_type = "text/plain",
            headers(("Cache-Control" = String, description = "`no-store`")), example = json!("2199023255552001")),
        (status = 404, description = "`snowflake_disabled`", body = ErrorBody),
        (status = 409, description = "`snowflake_exhausted`", body = ErrorBody),
        (status = 503, description = "`worker_lease_lost`, `clock_moved_backwards` or `clock_stalled`", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn leaf_get(State(st): State<AppState>, who: Who) -> Result<Response, ApiError> {
    let id = st.service.snowflake_next(who.presented()).await?;
    Ok(text_id(id))
}

/// A decimal `i64` of at most 19 digits, no sign.
fn parse_id(raw: &str) -> Result<i64, ApiError> {
    if raw.is_empty() || raw.len() > 19 || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::InvalidRequest(
            "the ID must be a non-negative 64-bit decimal integer".into(),
        ));
    }
    raw.parse::<i64>().map_err(|_| {
        ApiError::InvalidRequest("the ID must be a non-negative 64-bit decimal integer".into())
    })
}

/// `{"ids":[1,2],"ids_str":["1","2"]}` (`ids` as strings too with
/// `as=string`).
fn batch_json(ids: &[i64], ids_as: IdsAs) -> String {
    let mut nums = String::with_capacity(ids.len() * 22);
    let mut strs = String::with_capacity(ids.len() * 22);
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            nums.push(',');
            strs.push(',');
        }
        ids_as.push(&mut nums, *id);
        IdsAs::String.push(&mut strs, *id);
    }
    format!("{{\"ids\":[{nums}],\"ids_str\":[{strs}]}}")
}

/// Body of the decode route.
#[derive(Debug, Serialize)]
struct DecodedBody {
    id: i64,
    id_str: String,
    timestamp: i64,
    timestamp_ms: i64,
    time: String,
    worker: u32,
    sequence: u64,
}

/// `{"id":2199023255552001,"id_str":"2199023255552001"}`.
#[derive(ToSchema)]
#[schema(as = SnowflakeId)]
pub struct SnowflakeIdDoc {
    /// The ID (may exceed 2^53: read `id_str` in JavaScript).
    #[schema(example = 2199023255552001i64)]
    pub id: IdDoc,
    /// The same ID as a decimal string.
    #[schema(example = "2199023255552001")]
    pub id_str: String,
}

/// `{"ids":[...],"ids_str":[...]}`.
#[derive(ToSchema)]
#[schema(as = SnowflakeBatch)]
pub struct SnowflakeBatchDoc {
    /// The IDs, strictly increasing.
    pub ids: Vec<IdDoc>,
    /// The same IDs as decimal strings, in the same order.
    pub ids_str: Vec<String>,
}

/// The parts of a snowflake ID.
#[derive(ToSchema)]
#[schema(as = SnowflakeDecoded)]
pub struct SnowflakeDecodedDoc {
    /// The ID.
    pub id: i64,
    /// The ID as a decimal string.
    pub id_str: String,
    /// Time units since the layout's epoch (the timestamp field).
    pub timestamp: i64,
    /// Start of that time unit, in milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    /// The same, RFC 3339 UTC with milliseconds.
    #[schema(example = "2024-06-01T12:00:00.123Z")]
    pub time: String,
    /// The worker ID.
    pub worker: u32,
    /// The sequence within the time unit.
    pub sequence: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_json_carries_numbers_and_strings() {
        let v: serde_json::Value =
            serde_json::from_str(&batch_json(&[1, i64::MAX], IdsAs::Number)).unwrap();
        assert_eq!(v["ids"][1].as_i64(), Some(i64::MAX));
        assert_eq!(
            v["ids_str"],
            serde_json::json!(["1", "9223372036854775807"])
        );
    }

    #[test]
    fn ids_parse_as_plain_decimals_only() {
        assert_eq!(parse_id("9223372036854775807").unwrap(), i64::MAX);
        assert_eq!(parse_id("0").unwrap(), 0);
        for bad in [
            "",
            "-1",
            "+1",
            "1e3",
            "9223372036854775808",
            "12345678901234567890",
            " 1",
            "0x10",
        ] {
            assert!(
                matches!(parse_id(bad), Err(ApiError::InvalidRequest(_))),
                "{bad:?}"
            );
        }
    }
}
