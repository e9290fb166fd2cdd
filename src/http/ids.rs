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
use super::extract::{count_from_query, IdDoc, IdsAs, IdsAsDoc, PathSeqNameRef, WantsText, Who};
use super::AppState;
use crate::allocator::Batch;
use crate::domain::SeqNameRef;
use crate::service::One;

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
    params(
        ("name" = String, Path, description = "The sequence", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", example = "order"),
        ("as" = Option<IdsAsDoc>, Query, description = "`string`: the IDs as JSON strings of digits, for clients that read JSON numbers as doubles (exact only to 2^53); `number` (the default): as numbers", example = "string"),
    ),
    responses(
        (status = 200, description = "The next ID of this instance, and for a serial sequence its serial number; with `Accept: text/plain` the bare number (the serial number for a serial sequence)", headers(("Cache-Control" = String, description = "`no-store`")),
            content((NextIdDoc = "application/json"), (String = "text/plain", example = json!("1001")))),
        (status = 400, description = "`invalid_name`; `invalid_request`: `as` other than `string` or `number`", body = ErrorBody),
        (status = 404, description = "`sequence_not_found`; the message says how to create it", body = ErrorBody),
        (status = 409, description = "`sequence_exhausted`: the next segment would pass i64::MAX; `serial_exhausted`: the period's counter outgrew `{seq:0N}`", body = ErrorBody),
        (status = 500, description = "`sequence_misconfigured`: the row holds serial settings seqd cannot use (written by SQL); the message names the field", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`: both segments empty and the database unreachable or too slow within the wait timeout", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn next(
    State(st): State<AppState>,
    name: PathSeqNameRef,
    who: Who,
    WantsText(text): WantsText,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let name = name.get();
    let ids_as = IdsAs::from_query(q.as_deref())?;
    let one = st.service.next(who.presented(), name).await?;
    Ok(one_answer(name, one, text, ids_as))
}

/// The answer of `/next` (and, as text, of Leaf's route) once the service
/// gave `one`.
fn one_answer(name: SeqNameRef<'_>, one: One, text: bool, ids_as: IdsAs) -> Response {
    let (id, serial) = match one {
        One::Plain(id) if text => return text_id(id),
        One::Serial { serial, .. } if text => return respond(TEXT, serial),
        One::Plain(id) => (id, None),
        One::Serial { counter, serial } => (counter, Some(serial)),
    };
    let extra = serial.as_ref().map_or(0, |s| s.len() + 12);
    let mut body = String::with_capacity(name.as_str().len() + 42 + extra);
    body.push_str("{\"name\":\"");
    body.push_str(name.as_str());
    body.push_str("\",\"id\":");
    ids_as.push(&mut body, id);
    if let Some(serial) = serial {
        // A serial's characters are JSON-safe (`SerialFormat`'s alphabet).
        body.push_str(",\"serial\":\"");
        body.push_str(&serial);
        body.push('"');
    }
    body.push('}');
    respond(JSON, body)
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
        ("as" = Option<IdsAsDoc>, Query, description = "`string`: the IDs as JSON strings of digits, for clients that read JSON numbers as doubles (exact only to 2^53); `number` (the default): as numbers", example = "string"),
    ),
    responses(
        (status = 200, description = "The IDs, increasing, following this instance's previous IDs", body = BatchDoc, headers(("Cache-Control" = String, description = "`no-store`"))),
        (status = 400, description = "`invalid_name` or `invalid_count`; `invalid_request`: `as` other than `string` or `number`", body = ErrorBody),
        (status = 404, description = "`sequence_not_found`", body = ErrorBody),
        (status = 409, description = "`sequence_exhausted`, or `serial_exhausted` (the period's counter outgrew `{seq:0N}`)", body = ErrorBody),
        (status = 500, description = "`sequence_misconfigured`: the row holds serial settings seqd cannot use (written by SQL); the message names the field", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`: both segments empty and the database unreachable or too slow within the wait timeout", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn batch(
    State(st): State<AppState>,
    name: PathSeqNameRef,
    who: Who,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let name = name.get();
    let count = count_from_query(q.as_deref())?;
    let ids_as = IdsAs::from_query(q.as_deref())?;
    let ids = st.service.batch(who.presented(), name, count).await?;
    Ok(respond(
        JSON,
        batch_json(name, ids.ids(), ids.serials(), ids_as),
    ))
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
        (status = 200, description = "The ID (the serial number for a serial sequence)", body = String, content_type = "text/plain",
            headers(("Cache-Control" = String, description = "`no-store`")), example = json!("1001")),
        (status = 400, description = "`invalid_name`", body = ErrorBody),
        (status = 404, description = "`sequence_not_found`", body = ErrorBody),
        (status = 409, description = "`sequence_exhausted`, or `serial_exhausted` (the period's counter outgrew `{seq:0N}`)", body = ErrorBody),
        (status = 500, description = "`sequence_misconfigured`: the row holds serial settings seqd cannot use (written by SQL); the message names the field", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`: both segments empty and the database unreachable or too slow within the wait timeout", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn leaf_get(
    State(st): State<AppState>,
    name: PathSeqNameRef,
    who: Who,
) -> Result<Response, ApiError> {
    let name = name.get();
    let one = st.service.next(who.presented(), name).await?;
    Ok(one_answer(name, one, true, IdsAs::Number))
}

/// The template of `/next`.
pub(super) const NEXT: &str = "/v1/sequences/{name}/next";
/// The template of Leaf's route.
pub(super) const LEAF_GET: &str = "/api/segment/get/{name}";

/// An ID route the edge serves itself, without axum's router: one match
/// of the path (the edge's, which also labels the request) instead of two,
/// and no handler machinery (path parameters, extensions, extractors) for
/// an answer from memory. Behind it are the same calls as behind the
/// handlers [`next`] and [`leaf_get`], and the same answers; anything it
/// does not take (another method, a percent-encoded name) goes to the
/// router, whose handlers answer it (docs/design.md, "The edge").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Direct {
    /// `GET|POST /v1/sequences/{name}/next`.
    Next,
    /// `GET /api/segment/get/{name}`.
    LeafGet,
}

/// The boxed rest of a direct answer that has to wait (the database, the
/// serials): the uncommon case.
pub(super) type Later = std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>>;

impl Direct {
    /// The direct route of `template`, if it has one.
    pub(super) fn of(template: &str) -> Option<Direct> {
        match template {
            NEXT => Some(Direct::Next),
            LEAF_GET => Some(Direct::LeafGet),
            _ => None,
        }
    }

    /// Whether the edge answers `method` itself (HEAD and the rest go to
    /// the router: 405 from [`head_get_post`], [`head_get`] or axum).
    pub(super) fn takes(self, method: &axum::http::Method) -> bool {
        use axum::http::Method;
        match self {
            Direct::Next => *method == Method::GET || *method == Method::POST,
            Direct::LeafGet => *method == Method::GET,
        }
    }

    /// Answers `req`, whose path holds the raw name at `name` (a byte
    /// range without `%`): at once when the service answers without
    /// waiting, else the boxed rest. The handler's steps, answered in its
    /// order: the name checked (400 before anything about the token), the
    /// token taken, `Accept` read, the service called.
    pub(super) fn answer(
        self,
        st: &AppState,
        name: std::ops::Range<usize>,
        mut req: axum::extract::Request,
    ) -> Result<Response, Later> {
        // Taking the token answers nothing: a bad name is still refused
        // first, as by the handler's extractors.
        let who = Who::take(st, req.headers_mut());
        let text = self == Direct::LeafGet || WantsText::of(req.headers()).0;
        let valid = match SeqNameRef::parse(&req.uri().path()[name.clone()]) {
            Ok(valid) => valid,
            Err(e) => return Ok(ApiError::InvalidName(e).into_response()),
        };
        let ids_as = match req.uri().query() {
            Some(query) if !text => match IdsAs::from_query(Some(query)) {
                Ok(ids_as) => ids_as,
                Err(e) => return Ok(e.into_response()),
            },
            _ => IdsAs::Number,
        };
        match st.service.next_now(who.presented(), valid) {
            Some(Ok(id)) => Ok(one_answer(valid, One::Plain(id), text, ids_as)),
            Some(Err(e)) => Ok(ApiError::from(e).into_response()),
            None => {
                let st = st.clone();
                Err(Box::pin(async move {
                    let valid = SeqNameRef::validated(&req.uri().path()[name]);
                    match st.service.next(who.presented(), valid).await {
                        Ok(one) => one_answer(valid, one, text, ids_as),
                        Err(e) => ApiError::from(e).into_response(),
                    }
                }))
            }
        }
    }
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

/// `{"name":"order","ids":[1,2,3]}`, with `"serials":[...]` when given.
fn batch_json(name: SeqNameRef<'_>, batch: &Batch, serials: &[String], ids_as: IdsAs) -> String {
    let serial_bytes: usize = serials.iter().map(|s| s.len() + 3).sum();
    let mut body =
        String::with_capacity(name.as_str().len() + 32 + batch.len() as usize * 20 + serial_bytes);
    body.push_str("{\"name\":\"");
    body.push_str(name.as_str());
    body.push_str("\",\"ids\":[");
    for (i, id) in batch.ids().enumerate() {
        if i > 0 {
            body.push(',');
        }
        ids_as.push(&mut body, id);
    }
    body.push(']');
    if !serials.is_empty() {
        body.push_str(",\"serials\":[");
        for (i, serial) in serials.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            // A serial's characters are JSON-safe (`SerialFormat`'s alphabet).
            body.push('"');
            body.push_str(serial);
            body.push('"');
        }
        body.push(']');
    }
    body.push('}');
    body
}

/// `{"name":"order","id":1001}`.
#[derive(ToSchema)]
#[schema(as = NextId)]
pub struct NextIdDoc {
    /// The sequence.
    #[schema(example = "order")]
    pub name: String,
    /// The ID; for a serial sequence, the counter within its period.
    #[schema(example = 1001)]
    pub id: IdDoc,
    /// For a serial sequence only: the serial number.
    #[schema(example = "ORD20261130001001")]
    pub serial: Option<String>,
}

/// `{"name":"order","ids":[1001,1002,...]}`.
#[derive(ToSchema)]
#[schema(as = Batch)]
pub struct BatchDoc {
    /// The sequence.
    #[schema(example = "order")]
    pub name: String,
    /// The IDs, strictly increasing (for a serial sequence, the counters).
    #[schema(example = json!([1001, 1002, 1003]))]
    pub ids: Vec<IdDoc>,
    /// For a serial sequence only: the serial numbers, in the same order.
    #[schema(example = json!(["ORD20261130001001", "ORD20261130001002", "ORD20261130001003"]))]
    pub serials: Option<Vec<String>>,
}

/// `HEAD` on a route that draws IDs (`Allow: GET, POST`): 405, nothing
/// drawn. HEAD is a safe method that monitors and proxies send freely;
/// axum would answer it by running the GET handler.
pub async fn head_get_post() -> Response {
    head_refused(HeaderValue::from_static("GET, POST"))
}

/// `HEAD` on a GET-only route that draws IDs (Leaf's): 405, nothing drawn.
pub async fn head_get() -> Response {
    head_refused(HeaderValue::from_static("GET"))
}

fn head_refused(allow: HeaderValue) -> Response {
    let mut resp = ApiError::MethodNotAllowed.into_response();
    resp.headers_mut().insert(axum::http::header::ALLOW, allow);
    resp
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
        let serials: Vec<String> = (0..5).map(|i| format!("A-{i}/x:#_.")).collect();
        let json = |serials: &[String], ids_as| {
            serde_json::from_str::<serde_json::Value>(&batch_json(name, &batch, serials, ids_as))
                .unwrap()
        };
        let v = json(&[], IdsAs::Number);
        assert!(v.get("serials").is_none());
        let s = json(&serials, IdsAs::Number);
        let strings = json(&[], IdsAs::String);
        assert_eq!(
            strings["ids"],
            serde_json::json!([
                "1",
                "2",
                "3",
                (i64::MAX - 1).to_string(),
                i64::MAX.to_string()
            ])
        );
        assert_eq!(s["serials"], serde_json::json!(serials));
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
