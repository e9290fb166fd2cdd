//! Lease routes: `POST /v1/sequences/{name}/lease?size=N` reserves a range
//! for the caller alone, `POST /v1/sequences/{name}/lease/return` gives its
//! unused rest back (docs/api.md, "Leases").

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::extract::{
    exact_integer, known_params, one_param, sent_id_schema, IdDoc, IdsAs, IdsAsDoc, JsonBody,
    PathSeqName, Who,
};
use super::AppState;
use crate::service::{Lease, LeaseRest};

/// A range reserved for the caller: `[start, end)`.
#[derive(Debug, Serialize, ToSchema)]
pub struct LeaseBody {
    /// The sequence.
    #[schema(example = "order")]
    pub name: String,
    /// The first ID of the range (a string of digits with `as=string`).
    #[schema(value_type = IdDoc, example = 1001)]
    pub start: i64,
    /// One past the last ID of the range (`end` is not in it).
    #[schema(value_type = IdDoc, example = 2001)]
    pub end: i64,
    /// Proves the caller holds the lease when it gives the rest back: keep
    /// it with the range.
    #[schema(example = "9f86d081884c7d659a2feaa0c55ad015")]
    pub key: String,
}

impl From<Lease> for LeaseBody {
    fn from(lease: Lease) -> Self {
        LeaseBody {
            name: lease.name.to_string(),
            start: lease.start,
            end: lease.end,
            key: lease.key,
        }
    }
}

/// Body of `POST /v1/sequences/{name}/lease/return`: the lease
/// `[start, end)` and its key as they were answered, and the first ID not
/// used.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReturnBody {
    /// The lease's `start`.
    #[schema(schema_with = at_least_1, example = 1001)]
    #[serde(deserialize_with = "required_integer")]
    start: i64,
    /// The lease's `end`.
    #[schema(schema_with = at_least_2, example = 2001)]
    #[serde(deserialize_with = "required_integer")]
    end: i64,
    /// The first ID not used: `[next, end)` is given back.
    #[schema(schema_with = at_least_1, example = 1500)]
    #[serde(deserialize_with = "required_integer")]
    next: i64,
    /// The lease's `key`.
    #[schema(example = "9f86d081884c7d659a2feaa0c55ad015")]
    key: String,
}

/// The schema of `start` and `next`: at least 1, a number or its digits.
fn at_least_1() -> utoipa::openapi::schema::Schema {
    sent_id_schema(1)
}

/// The schema of `end`: at least 2, a number or its digits.
fn at_least_2() -> utoipa::openapi::schema::Schema {
    sent_id_schema(2)
}

/// A 64-bit integer field that must be given, read from the number's own
/// digits ([`exact_integer`]), or from a string of digits as `as=string`
/// answered it.
fn required_integer<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    use serde::de::Error;
    let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
    let raw = raw.get().trim();
    match raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => digits
            .parse()
            .map_err(|_| D::Error::custom("integer outside the 64-bit signed range")),
        Some(other) => Err(D::Error::custom(format!(
            "expected an integer, or a string of digits, got the string {other:?}"
        ))),
        None => exact_integer(raw).map_err(D::Error::custom),
    }
}

/// Whether the rest went back.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReturnedBody {
    /// `true` when the row went down to `next - 1`; `false` when something
    /// was reserved since, the lease was issued by another instance, or
    /// nothing was left: those IDs stay unused (a gap, never a duplicate).
    pub returned: bool,
}

/// The one optional `size` parameter of a query string, in digits (an
/// optional `-`, refused as below 1), and no other parameter.
fn size_from_query(query: Option<&str>) -> Result<Option<i64>, ApiError> {
    known_params(query, &["size", "as"]).map_err(ApiError::InvalidRequest)?;
    let Some(raw) = one_param(query, "size").map_err(ApiError::InvalidRequest)? else {
        return Ok(None);
    };
    let unsigned = raw.strip_prefix('-').unwrap_or(&raw);
    let digits = !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit());
    match exact_integer(&raw) {
        Ok(n) if digits => Ok(Some(n)),
        Ok(_) => Err(ApiError::InvalidRequest(format!(
            "size must be a whole number written in digits, not {raw:?}"
        ))),
        Err(why) => Err(ApiError::InvalidRequest(format!("size: {why}"))),
    }
}

/// `POST /v1/sequences/{name}/lease?size=N`: a range held by the caller.
#[utoipa::path(
    post, path = "/v1/sequences/{name}/lease", operation_id = "lease", tag = "ids",
    summary = "A range of IDs for the caller alone",
    description = "Reserves `[start, end)` by the same atomic step update an instance's buffer makes, committed \
                   before the answer: it never overlaps IDs any instance serves or another lease holds. The \
                   caller hands the IDs out itself.",
    responses(
        (status = 200, description = "The range", body = LeaseBody),
        (status = 400, description = "`invalid_name`, or `invalid_request`: size not a whole number from 1 to `--max-lease` written in digits, a parameter other than `size` and `as`, `as` other than `string` or `number`", body = ErrorBody),
        (status = 404, description = "`sequence_not_found`", body = ErrorBody),
        (status = 409, description = "`not_leasable`: a global or serial sequence; `sequence_exhausted`", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`: the database unreachable or too slow", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    ),
    params(
        ("name" = String, Path, description = "The sequence", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", example = "order"),
        ("size" = Option<i64>, Query, description = "How many IDs (default: the sequence's step), 1 to `--max-lease` (default 1,000,000, the maximum shown)", minimum = 1, maximum = 1000000, example = 1000),
        ("as" = Option<IdsAsDoc>, Query, description = "`string`: `start` and `end` as JSON strings of digits, for clients that read JSON numbers as doubles (exact only to 2^53); `number` (the default): as numbers", example = "string"),
    )
)]
pub async fn lease(
    State(st): State<AppState>,
    PathSeqName(name): PathSeqName,
    who: Who,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let size = size_from_query(q.as_deref())?;
    let ids_as = IdsAs::from_query(q.as_deref())?;
    let lease = st.service.lease(who.presented(), &name, size).await?;
    let body = LeaseBody::from(lease);
    Ok(match ids_as {
        IdsAs::Number => Json(body).into_response(),
        IdsAs::String => Json(LeaseStrings {
            name: body.name,
            start: body.start.to_string(),
            end: body.end.to_string(),
            key: body.key,
        })
        .into_response(),
    })
}

/// [`LeaseBody`] with its IDs as strings (`as=string`).
#[derive(Serialize)]
struct LeaseStrings {
    name: String,
    start: String,
    end: String,
    key: String,
}

/// `POST /v1/sequences/{name}/lease/return`: gives back a lease's unused rest.
#[utoipa::path(
    post, path = "/v1/sequences/{name}/lease/return", operation_id = "lease_return", tag = "ids",
    summary = "Give back the unused rest of a lease",
    description = "Lowers the sequence's row from the lease's last ID to `next - 1` by a compare-and-set, only \
                   while the lease is still the top of the row, only on the instance that issued it and only \
                   with the lease's key; otherwise `{\"returned\": false}` and the IDs stay unused.",
    params(("name" = String, Path, description = "The sequence", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", example = "order")),
    request_body(content = ReturnBody, content_type = "application/json"),
    responses(
        (status = 200, description = "Whether the rest went back", body = ReturnedBody),
        (status = 400, description = "`invalid_name`, or `invalid_request`: a field missing, not an integer (`key`: not a string) or below its minimum", body = ErrorBody),
        (status = 404, description = "`sequence_not_found`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`: the database unreachable or too slow", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn lease_return(
    State(st): State<AppState>,
    PathSeqName(name): PathSeqName,
    who: Who,
    JsonBody(body): JsonBody<ReturnBody>,
) -> Result<Json<ReturnedBody>, ApiError> {
    let rest = LeaseRest {
        start: body.start,
        end: body.end,
        next: body.next,
        key: body.key,
    };
    let returned = st
        .service
        .return_lease(who.presented(), &name, rest)
        .await?;
    Ok(Json(ReturnedBody { returned }))
}
