//! Tinyid's four routes under `--tinyid-prefix` (docs/api.md, "Tinyid's
//! routes"), so that Tinyid's clients draw from seqd unchanged: segments
//! (`id/nextSegmentIdSimple`, `id/nextSegmentId`) are leases of the
//! sequence's step, IDs (`id/nextIdSimple`, `id/nextId`) come from the
//! instance's buffer as `/batch` does. GET or POST; `bizType`, `token` and
//! `batchSize` from the query string or a form body, the query first.
//!
//! Tinyid's segment `(currentId, maxId]` is open below and closed above, so
//! a lease `[start, end)` is answered `currentId = start - 1` and
//! `maxId = end - 1`; Tinyid's client starts loading the next segment at
//! `loadingId`, answered 20% into the segment. `delta` is 1 and `remainder` 0: every ID
//! of the range belongs to the caller.
//!
//! Errors keep a real HTTP status (the seqd code's): the Simple routes
//! answer an empty body (Tinyid's client takes any non-2xx as a failure),
//! the others Tinyid's JSON shape with code 5 for a token refused and 6 for
//! the rest.

use std::sync::{Mutex, OnceLock};

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody, ErrorCode, RETRY_AFTER_SECS};
use super::extract::Who;
use super::ids::respond;
use super::AppState;
use crate::domain::SeqName;
use crate::service::issue::MAX_NUMBERS;
use crate::service::Presented;

/// `--tinyid-prefix`'s default: Tinyid's own context path.
pub const DEFAULT_PREFIX: &str = "/tinyid";

/// The share of a segment after which Tinyid's client loads the next one
/// (`loadingId`), in percent.
const LOADING_PERCENT: i64 = 20;

/// Tinyid's code of a refused token, in its JSON error shape.
const TOKEN_ERROR: i32 = 5;

/// Tinyid's code of every other failure.
const OTHER_ERROR: i32 = 6;

/// The four routes: where each is under the prefix, and what it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `id/nextSegmentIdSimple`: `currentId,loadingId,maxId,delta,remainder`.
    SegmentSimple,
    /// `id/nextSegmentId`: the same numbers in Tinyid's JSON.
    Segment,
    /// `id/nextIdSimple`: IDs joined by commas.
    IdsSimple,
    /// `id/nextId`: the IDs in Tinyid's JSON.
    Ids,
}

impl Route {
    /// Every route.
    pub const ALL: [Route; 4] = [
        Route::SegmentSimple,
        Route::Segment,
        Route::IdsSimple,
        Route::Ids,
    ];

    /// The path under the prefix.
    pub fn path(self) -> &'static str {
        match self {
            Route::SegmentSimple => "/id/nextSegmentIdSimple",
            Route::Segment => "/id/nextSegmentId",
            Route::IdsSimple => "/id/nextIdSimple",
            Route::Ids => "/id/nextId",
        }
    }

    fn simple(self) -> bool {
        matches!(self, Route::SegmentSimple | Route::IdsSimple)
    }
}

/// Checks a `--tinyid-prefix`: empty (the routes at the root) or segments
/// of `[A-Za-z0-9._-]`, each after a `/`, with no `/` at the end.
pub fn parse_prefix(raw: &str) -> Result<String, String> {
    if raw.is_empty() {
        return Ok(String::new());
    }
    let Some(rest) = raw.strip_prefix('/') else {
        return Err(format!("--tinyid-prefix must begin with '/', not {raw:?}"));
    };
    let segment_ok = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    };
    if raw.len() > 100 || !rest.split('/').all(segment_ok) {
        return Err(format!(
            "--tinyid-prefix must be '/' and segments of letters, digits, '.', '_' or '-' \
             (no '/' at the end, at most 100 bytes), not {raw:?}"
        ));
    }
    Ok(raw.to_owned())
}

/// The route template of `route` under `prefix`, as a `'static` string:
/// the route table and the request metrics' labels take them so. Each
/// distinct template is made once per process (a test process builds many
/// routers).
pub fn template(prefix: &str, route: Route) -> &'static str {
    static MADE: OnceLock<Mutex<Vec<&'static str>>> = OnceLock::new();
    let wanted = format!("{prefix}{}", route.path());
    let mut made = MADE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(t) = made.iter().find(|t| **t == wanted) {
        return t;
    }
    let t: &'static str = Box::leak(wanted.into_boxed_str());
    made.push(t);
    t
}

/// What a Tinyid request names, each the first of its key, the query
/// before the body.
#[derive(Default)]
struct Params {
    biz_type: Option<String>,
    token: Option<String>,
    batch_size: Option<String>,
}

impl Params {
    fn read(query: Option<&str>, headers: &HeaderMap, body: &[u8]) -> Params {
        let mut p = Params::default();
        p.take(query.unwrap_or("").as_bytes());
        if !body.is_empty() && is_form(headers) {
            p.take(body);
        }
        p
    }

    fn take(&mut self, form: &[u8]) {
        for (k, v) in url::form_urlencoded::parse(form) {
            let slot = match &*k {
                "bizType" => &mut self.biz_type,
                "token" => &mut self.token,
                "batchSize" => &mut self.batch_size,
                _ => continue,
            };
            slot.get_or_insert_with(|| v.into_owned());
        }
    }
}

/// Whether a body is a form: `application/x-www-form-urlencoded`, or no
/// type at all (what `curl -d` and Tinyid's client send).
fn is_form(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).is_none_or(|v| {
        v.to_str().is_ok_and(|t| {
            t.split(';').next().is_some_and(|m| {
                m.trim()
                    .eq_ignore_ascii_case("application/x-www-form-urlencoded")
            })
        })
    })
}

/// A failure: the status and seqd's code it answers with, and the text
/// Tinyid's JSON shape carries.
struct Failure {
    code: ErrorCode,
    message: String,
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        Failure {
            code: e.code(),
            message: e.public_message(),
        }
    }
}

impl From<crate::service::ServiceError> for Failure {
    fn from(e: crate::service::ServiceError) -> Self {
        ApiError::from(e).into()
    }
}

fn invalid(message: String) -> Failure {
    Failure {
        code: ErrorCode::InvalidRequest,
        message,
    }
}

impl Failure {
    fn answer(self, route: Route) -> Response {
        let status = self.code.status();
        let mut resp = if route.simple() {
            status.into_response()
        } else {
            let tinyid_code = match self.code {
                ErrorCode::Unauthorized | ErrorCode::Forbidden => TOKEN_ERROR,
                _ => OTHER_ERROR,
            };
            // Tinyid's order of the fields: data, code, message.
            let message = serde_json::Value::from(self.message);
            let body = format!("{{\"data\":null,\"code\":{tinyid_code},\"message\":{message}}}");
            (status, respond(JSON, body)).into_response()
        };
        if status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        }
        resp
    }
}

/// The sequence `bizType` names.
fn biz_type(p: &Params) -> Result<SeqName, Failure> {
    let Some(raw) = p.biz_type.as_deref() else {
        return Err(invalid("bizType is required".into()));
    };
    SeqName::parse(raw).map_err(|e| ApiError::InvalidName(e).into())
}

/// `batchSize`: 1 when not given, else a whole number from 1 to
/// [`MAX_NUMBERS`] in digits.
fn batch_size(p: &Params) -> Result<u32, Failure> {
    let Some(raw) = p.batch_size.as_deref() else {
        return Ok(1);
    };
    let raw = raw.trim();
    raw.parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_NUMBERS).contains(n) && raw.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            invalid(format!(
                "batchSize must be a whole number from 1 to {MAX_NUMBERS}, not {raw:?}"
            ))
        })
}

/// The token: the `token` parameter, else a Bearer header.
fn presented<'a>(p: &'a Params, who: &'a Who) -> Presented<'a> {
    match p.token.as_deref() {
        Some(t) => Presented {
            token: Some(t.as_bytes()),
            local: false,
        },
        None => who.presented(),
    }
}

const TEXT: HeaderValue = HeaderValue::from_static("text/plain; charset=utf-8");
const JSON: HeaderValue = HeaderValue::from_static("application/json");

async fn answer(st: &AppState, route: Route, p: &Params, who: &Who) -> Result<Response, Failure> {
    let name = biz_type(p)?;
    match route {
        Route::SegmentSimple | Route::Segment => {
            // A segment has no size to ask for, but a `batchSize` given is
            // held to the same rule as on the `nextId` routes, as documented.
            batch_size(p)?;
            let lease = st.service.lease(presented(p, who), &name, None).await?;
            let current = lease.start - 1;
            let max = lease.end - 1;
            // A lease is at most `--max-lease` long and ends at `i64::MAX`
            // at the most: the share of it is below its length, never past
            // `max`.
            let share = i128::from(lease.end - lease.start) * i128::from(LOADING_PERCENT) / 100;
            let loading = current + share as i64;
            Ok(if route == Route::SegmentSimple {
                respond(TEXT, format!("{current},{loading},{max},1,0"))
            } else {
                respond(
                    JSON,
                    format!(
                        "{{\"data\":{{\"currentId\":{current},\"loadingId\":{loading},\
                         \"maxId\":{max},\"delta\":1,\"remainder\":0}},\"code\":200,\"message\":\"\"}}"
                    ),
                )
            })
        }
        Route::IdsSimple | Route::Ids => {
            let total = batch_size(p)?;
            let parts = st.service.numbers(presented(p, who), &name, total).await?;
            let mut ids = String::with_capacity(total as usize * 20);
            let mut buf = itoa::Buffer::new();
            for id in parts.iter().flat_map(|b| b.ids()) {
                if !ids.is_empty() {
                    ids.push(',');
                }
                ids.push_str(buf.format(id));
            }
            Ok(if route == Route::IdsSimple {
                respond(TEXT, ids)
            } else {
                respond(
                    JSON,
                    format!("{{\"data\":[{ids}],\"code\":200,\"message\":\"\"}}"),
                )
            })
        }
    }
}

async fn serve(
    st: AppState,
    route: Route,
    who: Who,
    query: Option<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let params = Params::read(query.as_deref(), &headers, &body);
    match answer(&st, route, &params, &who).await {
        Ok(resp) => resp,
        Err(f) => f.answer(route),
    }
}

/// The handler of `route`, for GET and POST; HEAD is refused (it would draw).
pub fn handler(route: Route) -> axum::routing::MethodRouter<AppState> {
    use axum::routing::get;
    let r = match route {
        Route::SegmentSimple => get(next_segment_id_simple).post(next_segment_id_simple),
        Route::Segment => get(next_segment_id).post(next_segment_id),
        Route::IdsSimple => get(next_id_simple).post(next_id_simple),
        Route::Ids => get(next_id).post(next_id),
    };
    r.head(super::ids::head_get_post)
}

/// Tinyid's JSON answer of a failure: `{"data":null,"code":5|6,"message":...}`.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct TinyidErrorDoc {
    /// Always null.
    #[schema(value_type = Option<i64>)]
    pub data: Option<()>,
    /// 5: the token refused (401, 403); 6: anything else.
    #[schema(example = 6)]
    pub code: i32,
    /// What went wrong, in seqd's words.
    pub message: String,
}

/// Tinyid's segment, `(currentId, maxId]` the caller's.
#[derive(Debug, serde::Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TinyidSegmentDoc {
    /// One below the first ID of the segment.
    #[schema(example = 1000)]
    pub current_id: i64,
    /// Where Tinyid's client loads its next segment: 20% in.
    #[schema(example = 1200)]
    pub loading_id: i64,
    /// The last ID of the segment.
    #[schema(example = 2000)]
    pub max_id: i64,
    /// Always 1: every ID of the range.
    #[schema(example = 1)]
    pub delta: i64,
    /// Always 0.
    #[schema(example = 0)]
    pub remainder: i64,
}

/// `{"data":{segment},"code":200,"message":""}`.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct TinyidSegmentAnswerDoc {
    /// The segment.
    pub data: TinyidSegmentDoc,
    /// Always 200.
    #[schema(example = 200)]
    pub code: i32,
    /// Always empty.
    #[schema(example = "")]
    pub message: String,
}

/// `{"data":[ids],"code":200,"message":""}`.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct TinyidIdsAnswerDoc {
    /// The IDs, strictly increasing.
    #[schema(example = json!([2001, 2002]))]
    pub data: Vec<i64>,
    /// Always 200.
    #[schema(example = 200)]
    pub code: i32,
    /// Always empty.
    #[schema(example = "")]
    pub message: String,
}

/// A request's body, bounded as every body is, read as a form by
/// `Params::read`; its own type so that the OpenAPI document does not
/// describe it as a second, binary body.
pub struct RawForm(Bytes);

impl<S: Send + Sync> axum::extract::FromRequest<S> for RawForm {
    type Rejection = <Bytes as axum::extract::FromRequest<S>>::Rejection;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        Bytes::from_request(req, state).await.map(RawForm)
    }
}

/// The error answers of the JSON routes: Tinyid's shape.
macro_rules! tinyid_route {
    ($fn:ident, $route:expr, $path:literal, $id:literal, $summary:literal, $ok:expr, json) => {
        tinyid_route!(@doc $fn, $route, $path, $id, $summary, $ok,
            (status = 400, description = "`bizType` missing or not a valid name; `batchSize` not a whole number from 1 to 100,000", body = TinyidErrorDoc),
            (status = 401, description = "`--client-auth on`: no token, or one unknown, expired or revoked", body = TinyidErrorDoc),
            (status = 403, description = "`--client-auth on`: the token does not cover the name", body = TinyidErrorDoc),
            (status = 404, description = "No such sequence", body = TinyidErrorDoc),
            (status = 409, description = "A global sequence (segments) or a serial one; the sequence exhausted", body = TinyidErrorDoc),
            (status = 413, description = "`payload_too_large`: the body is too large", body = ErrorBody),
            (status = 500, description = "The sequence's row holds settings seqd cannot use", body = TinyidErrorDoc),
            (status = 503, description = "The database unreachable or too slow", body = TinyidErrorDoc, headers(("Retry-After" = u64, description = "Seconds to wait")))
        );
    };
    ($fn:ident, $route:expr, $path:literal, $id:literal, $summary:literal, $ok:expr, simple) => {
        tinyid_route!(@doc $fn, $route, $path, $id, $summary, $ok,
            (status = 400, description = "No body: `bizType` missing or not a valid name; `batchSize` not a whole number from 1 to 100,000"),
            (status = 401, description = "No body: `--client-auth on`, no token, or one unknown, expired or revoked"),
            (status = 403, description = "No body: `--client-auth on`, the token does not cover the name"),
            (status = 404, description = "No body: no such sequence"),
            (status = 409, description = "No body: a global sequence (segments) or a serial one; the sequence exhausted"),
            (status = 413, description = "`payload_too_large`: the body is too large", body = ErrorBody),
            (status = 500, description = "No body: the sequence's row holds settings seqd cannot use"),
            (status = 503, description = "No body: the database unreachable or too slow", headers(("Retry-After" = u64, description = "Seconds to wait")))
        );
    };
    (@doc $fn:ident, $route:expr, $path:literal, $id:literal, $summary:literal, $ok:expr, $($err:expr),+) => {
        #[utoipa::path(
            method(get, post), path = $path, operation_id = $id, tag = "tinyid", summary = $summary,
            description = "Tinyid's route under `--tinyid-prefix` (default `/tinyid`, shown). `bizType`, `token` \
                           and `batchSize` from the query string or an `application/x-www-form-urlencoded` body \
                           (the query's win; not described here as a body, being the same fields); an empty \
                           POST is read as no parameters. Errors keep a real status: the Simple routes answer \
                           no body, the others Tinyid's JSON (code 5: the token, 6: the rest).",
            params(
                ("bizType" = String, Query, description = "The sequence (or in a form body)", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", example = "order"),
                ("token" = Option<String>, Query, description = "A client token (`--client-auth on`; or `Authorization: Bearer`; or in a form body)"),
                ("batchSize" = Option<u32>, Query, description = "How many IDs, 1 to 100,000 (`nextId` routes; default 1; or in a form body)", minimum = 1, maximum = 100000, example = 10),
            ),
            responses($ok, $($err),+)
        )]
        #[doc = concat!("`", $path, "`: ", $summary, ".")]
        pub async fn $fn(
            State(st): State<AppState>,
            who: Who,
            RawQuery(q): RawQuery,
            headers: HeaderMap,
            RawForm(body): RawForm,
        ) -> Response {
            serve(st, $route, who, q, headers, body).await
        }
    };
}

tinyid_route!(
    next_segment_id_simple, Route::SegmentSimple, "/tinyid/id/nextSegmentIdSimple",
    "tinyid_next_segment_id_simple", "A segment as currentId,loadingId,maxId,delta,remainder",
    (status = 200, description = "`currentId,loadingId,maxId,1,0`: the IDs `(currentId, maxId]` are the caller's (a lease of the sequence's step)", content_type = "text/plain", body = String, example = json!("1000,1200,2000,1,0")),
    simple
);
tinyid_route!(
    next_segment_id,
    Route::Segment,
    "/tinyid/id/nextSegmentId",
    "tinyid_next_segment_id",
    "A segment in Tinyid's JSON",
    (
        status = 200,
        description = "The segment: the IDs `(currentId, maxId]` are the caller's",
        body = TinyidSegmentAnswerDoc
    ),
    json
);
tinyid_route!(
    next_id_simple,
    Route::IdsSimple,
    "/tinyid/id/nextIdSimple",
    "tinyid_next_id_simple",
    "IDs joined by commas",
    (
        status = 200,
        description = "`batchSize` IDs, strictly increasing, joined by commas",
        content_type = "text/plain",
        body = String,
        example = json!("2001,2002,2003")
    ),
    simple
);
tinyid_route!(
    next_id,
    Route::Ids,
    "/tinyid/id/nextId",
    "tinyid_next_id",
    "IDs in Tinyid's JSON",
    (
        status = 200,
        description = "`batchSize` IDs, strictly increasing",
        body = TinyidIdsAnswerDoc
    ),
    json
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_checked() {
        assert_eq!(parse_prefix("/tinyid").unwrap(), "/tinyid");
        assert_eq!(parse_prefix("/a/b-c.d_e").unwrap(), "/a/b-c.d_e");
        assert_eq!(parse_prefix("").unwrap(), "");
        for bad in [
            "tinyid", "/", "/tinyid/", "//x", "/a b", "/{name}", "/x?y", "/*rest",
        ] {
            assert!(parse_prefix(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn templates_are_made_once() {
        let a = template("/t1", Route::Ids);
        let b = template("/t1", Route::Ids);
        assert_eq!(a, "/t1/id/nextId");
        assert!(std::ptr::eq(a, b));
        assert_eq!(
            template("", Route::SegmentSimple),
            "/id/nextSegmentIdSimple"
        );
    }

    #[test]
    fn the_query_comes_before_the_body_and_the_first_value_counts() {
        let mut headers = HeaderMap::new();
        let p = Params::read(
            Some("bizType=a&bizType=b&batchSize=3"),
            &headers,
            b"bizType=c&token=t",
        );
        assert_eq!(p.biz_type.as_deref(), Some("a"));
        assert_eq!(p.batch_size.as_deref(), Some("3"));
        assert_eq!(p.token.as_deref(), Some("t"));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let p = Params::read(None, &headers, b"bizType=c");
        assert!(p.biz_type.is_none(), "a JSON body is not a form");
    }

    #[test]
    fn batch_sizes_outside_one_to_a_hundred_thousand_are_refused() {
        let size = |raw: &str| {
            batch_size(&Params {
                batch_size: Some(raw.into()),
                ..Params::default()
            })
            .ok()
        };
        assert_eq!(size("1"), Some(1));
        assert_eq!(size("100000"), Some(100_000));
        for bad in ["0", "100001", "-1", "+5", "1.0", "x", "", "99999999999"] {
            assert_eq!(size(bad), None, "{bad:?}");
        }
        assert_eq!(batch_size(&Params::default()).ok(), Some(1));
    }
}
