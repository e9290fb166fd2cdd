//! Sequence resources: create, list, read, patch.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::extract::{exact_integer, JsonBody, PathSeqName, Who};
use super::AppState;
use crate::allocator::{BufferSnapshot, SegmentView};
use crate::domain::{NamePrefix, SeqName};
use crate::serial::PeriodStatus;
use crate::service::{AdminCalls, CreateRequest, PatchRequest, SerialFields};
use crate::store::{SequenceRow, MAX_PAGE};

pub use crate::service::admin::{DEFAULT_START, DEFAULT_STEP};

/// A sequence as the API shows it: its row and this instance's buffer.
#[derive(Debug, Serialize)]
pub struct SequenceView {
    /// The database row.
    #[serde(flatten)]
    pub row: SequenceRow,
    /// This instance's buffer, if it has served the sequence.
    pub buffer: Option<BufferSnapshot>,
    /// For a serial sequence this instance served: its current period.
    pub period: Option<PeriodView>,
    /// Over stripes, once a segment is loaded: which stripe's blocks the
    /// buffer's segments came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stripes: Option<StripesView>,
}

/// Which stripes served a buffer's segments (stripes only).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = StripesServed)]
pub struct StripesView {
    /// The stripe of the segment being served; `null` when none is loaded.
    pub current: Option<u32>,
    /// The stripe of the segment fetched ahead; `null` when none is ready.
    pub next: Option<u32>,
}

/// A serial sequence's current period in this instance.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Period)]
pub struct PeriodView {
    /// The key: `20261130` (day), `202611` (month), `2026` (year), empty
    /// for `never`.
    pub key: String,
    /// Its first instant, UTC; `null` for `never`.
    pub start: Option<String>,
    /// The first instant of the next period, UTC; `null` for `never`.
    pub end: Option<String>,
    /// The highest counter this instance reserved in the period.
    pub reserved_up_to: Option<i64>,
    /// The largest counter `{seq:0N}` holds; `null` for `{seq}`.
    pub capacity: Option<u64>,
    /// The share of the capacity reserved by this instance, 0 to 1.
    pub fill: Option<f64>,
}

impl From<PeriodStatus> for PeriodView {
    fn from(s: PeriodStatus) -> Self {
        PeriodView {
            fill: s.fill(),
            key: s.key,
            start: s.start.map(|t| t.to_string()),
            end: s.end.map(|t| t.to_string()),
            reserved_up_to: s.reserved_up_to,
            capacity: s.capacity,
        }
    }
}

/// Rows per page of `GET /v1/sequences` when `limit` is not given.
pub const DEFAULT_PAGE: u32 = 100;

/// Body of `GET /v1/sequences`: one page, and where the next one starts.
#[derive(Debug, Serialize)]
pub struct SequencePageView {
    /// The page's sequences, ordered by name in byte order.
    pub sequences: Vec<SequenceView>,
    /// The last name of the page when more rows follow (pass it as `after`),
    /// `None` on the last page.
    pub next: Option<SeqName>,
}

/// The query of `GET /v1/sequences`: `limit` (1..=1000, default 100),
/// `after` (a sequence name, exclusive) and `prefix` (the start of the
/// names to list).
#[derive(Debug, PartialEq, Eq)]
pub struct PageQuery {
    /// Rows to return at most.
    pub limit: u32,
    /// Only names above this one.
    pub after: Option<SeqName>,
    /// Only names that start with this.
    pub prefix: Option<NamePrefix>,
}

impl PageQuery {
    /// Parses a raw query string; other parameters are ignored.
    pub fn parse(query: Option<&str>) -> Result<Self, ApiError> {
        let (mut limit, mut after, mut prefix) = (None, None, None);
        for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            match k.as_ref() {
                "limit" => once(&mut limit, "limit", parse_limit(&v)?)?,
                "after" => once(
                    &mut after,
                    "after",
                    SeqName::parse(&v).map_err(ApiError::InvalidName)?,
                )?,
                "prefix" => once(
                    &mut prefix,
                    "prefix",
                    NamePrefix::parse(&v).map_err(ApiError::InvalidName)?,
                )?,
                _ => {}
            }
        }
        Ok(PageQuery {
            limit: limit.unwrap_or(DEFAULT_PAGE),
            after,
            prefix,
        })
    }
}

/// Sets a query parameter seen for the first time; a repeat is refused.
fn once<T>(slot: &mut Option<T>, key: &str, value: T) -> Result<(), ApiError> {
    if slot.replace(value).is_some() {
        return Err(ApiError::InvalidRequest(format!(
            "{key} given more than once"
        )));
    }
    Ok(())
}

fn parse_limit(raw: &str) -> Result<u32, ApiError> {
    raw.parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_PAGE).contains(n))
        .ok_or_else(|| {
            ApiError::InvalidRequest(format!("limit must be an integer from 1 to {MAX_PAGE}"))
        })
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
    #[schema(
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]*$",
        example = "order IDs",
        nullable = false
    )]
    #[serde(default, deserialize_with = "text")]
    description: Option<String>,
    /// `instance` (default: segments in memory, IDs increasing per instance)
    /// or `global` (every ID from the database at request time, increasing
    /// across instances in real-time order; one database only).
    #[schema(
        example = "instance",
        pattern = "^(instance|global)$",
        nullable = false
    )]
    #[serde(default, deserialize_with = "text")]
    ordering: Option<String>,
    /// Makes it a serial sequence: literal text (letters, digits, `-_./:#`)
    /// and the tokens `{yyyy}` `{yy}` `{MM}` `{dd}` `{seq}` `{seq:0N}`
    /// (1 <= N <= 18), exactly one `{seq}`; at most 64 characters.
    #[schema(
        example = "ORD{yyyy}{MM}{dd}{seq:06}",
        max_length = 64,
        pattern = r"^(?:[A-Za-z0-9._/:#-]|\{(?:yyyy|yy|MM|dd)\})*\{seq(?::0+(?:[1-9]|1[0-8]))?\}(?:[A-Za-z0-9._/:#-]|\{(?:yyyy|yy|MM|dd)\})*$",
        nullable = false
    )]
    #[serde(default, deserialize_with = "text")]
    format: Option<String>,
    /// When the counter starts again at `start`: `never` (default), `day`,
    /// `month`, `year`. Needs `format`, with the reset's date tokens.
    #[schema(
        example = "day",
        pattern = "^(never|day|month|year)$",
        nullable = false
    )]
    #[serde(default, deserialize_with = "text")]
    reset: Option<String>,
    /// The IANA time zone whose days, months and years the periods follow
    /// (default `UTC`). Needs `format`.
    #[schema(example = "Asia/Shanghai", nullable = false)]
    #[serde(default, deserialize_with = "text")]
    time_zone: Option<String>,
    /// A counter wider than `{seq:0N}`: `refuse` (default: 409
    /// `serial_exhausted`) or `widen` (printed in full). Needs `format`.
    #[schema(example = "refuse", pattern = "^(refuse|widen)$", nullable = false)]
    #[serde(default, deserialize_with = "text")]
    overflow: Option<String>,
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
    #[schema(
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]*$",
        nullable = false
    )]
    #[serde(default, deserialize_with = "text")]
    description: Option<String>,
    /// New ordering, `instance` or `global`: the instance answering switches
    /// at once, the others at their next fetch.
    #[schema(example = "global", pattern = "^(instance|global)$", nullable = false)]
    #[serde(default, deserialize_with = "text")]
    ordering: Option<String>,
    /// New serial format (see create), or `null` to make the sequence plain
    /// again. Serial settings take effect at once on the instance
    /// answering, within seconds on the others.
    #[schema(
        example = "ORD{yyyy}{MM}{dd}{seq:06}",
        max_length = 64,
        pattern = r"^(?:[A-Za-z0-9._/:#-]|\{(?:yyyy|yy|MM|dd)\})*\{seq(?::0+(?:[1-9]|1[0-8]))?\}(?:[A-Za-z0-9._/:#-]|\{(?:yyyy|yy|MM|dd)\})*$",
        nullable = true
    )]
    #[serde(default, deserialize_with = "nullable_text")]
    format: Option<Option<String>>,
    /// New reset: `never`, `day`, `month`, `year`.
    #[schema(
        example = "day",
        pattern = "^(never|day|month|year)$",
        nullable = false
    )]
    #[serde(default, deserialize_with = "text")]
    reset: Option<String>,
    /// New IANA time zone.
    #[schema(example = "Europe/Paris", nullable = false)]
    #[serde(default, deserialize_with = "text")]
    time_zone: Option<String>,
    /// New overflow rule: `refuse` or `widen`.
    #[schema(example = "widen", pattern = "^(refuse|widen)$", nullable = false)]
    #[serde(default, deserialize_with = "text")]
    overflow: Option<String>,
}

/// A 64-bit integer field that may be left out but not set to `null`, read
/// from the number's own digits (never through a double): see
/// [`super::extract::exact_integer`] for what is accepted.
fn integer<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    use serde::de::Error;
    let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
    exact_integer(raw.get()).map(Some).map_err(D::Error::custom)
}

/// A string field that may be left out (outer `None`) or set to `null`
/// (`Some(None)`).
fn nullable_text<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// A string field that may be left out but not set to `null`.
fn text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

fn view(st: &AppState, row: SequenceRow) -> SequenceView {
    let buffer = st.service.buffer(&row.name);
    let period = row
        .serial
        .as_ref()
        .and_then(|_| st.service.period(&row.name))
        .map(PeriodView::from);
    // `stripe_of` is a lookup in the layouts (no stripe state is read per
    // row); `None` on a single database, so the field is left out there.
    let of = |seg: Option<&SegmentView>| seg.and_then(|s| st.service.stripe_of(s.first));
    let stripes = buffer.as_ref().and_then(|b| {
        let (current, next) = (of(b.current.as_ref()), of(b.next.as_ref()));
        (current.is_some() || next.is_some()).then_some(StripesView { current, next })
    });
    SequenceView {
        row,
        buffer,
        period,
        stripes,
    }
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
        (status = 400, description = "`invalid_name` or `invalid_request` (step, start, description, ordering, a bad format, reset, time zone or overflow, a `start` past the capacity of `{seq:0N}` under `overflow: refuse`, unknown field, not JSON)", body = ErrorBody),
        (status = 401, description = "`unauthorized`: no or wrong admin token, or admin calls disabled", body = ErrorBody),
        (status = 409, description = "`sequence_exists`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: body over 64 KiB", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn create(
    State(st): State<AppState>,
    admin: AdminCalls,
    JsonBody(body): JsonBody<CreateBody>,
) -> Result<impl IntoResponse, ApiError> {
    let row = admin
        .create(CreateRequest {
            name: body.name,
            start: body.start,
            step: body.step,
            description: body.description,
            ordering: body.ordering,
            serial: SerialFields {
                format: body.format,
                reset: body.reset,
                time_zone: body.time_zone,
                overflow: body.overflow,
            },
        })
        .await?;
    Ok((StatusCode::CREATED, Json(view(&st, row))))
}

/// `GET /v1/sequences`.
#[utoipa::path(
    get,
    path = "/v1/sequences",
    operation_id = "list_sequences",
    tag = "sequences",
    summary = "One page of sequences by name, each with this instance's buffer",
    description = "Sequences in byte order of their names, optionally only those whose name starts with \
                   `prefix`. Walk the pages by passing each page's `next` as `after` (with the same \
                   `prefix`) until `next` is null. The database reads one page, whatever the number of sequences.",
    params(
        ("limit" = Option<u32>, Query, description = "Sequences per page, 1..=1000 (default 100)", minimum = 1, maximum = 1000, example = 100),
        ("after" = Option<String>, Query, description = "Only names above this one (byte order): the `next` of the previous page", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", min_length = 1, max_length = 128, example = "order"),
        ("prefix" = Option<String>, Query, description = "Only names that start with this (case-sensitive): the start of a sequence name, 1 to 128 characters", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", min_length = 1, max_length = 128, example = "shop-42:"),
    ),
    responses(
        (status = 200, description = "One page, ordered by name in byte order; `next` is null on the last page (of the names with `prefix`, when given)", body = SequenceListDoc),
        (status = 400, description = "`invalid_request` (`limit` not an integer from 1 to 1000, or a parameter given twice) or `invalid_name` (`after` not a sequence name, `prefix` not the start of one)", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`, or `overloaded`: too many database reads in flight", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn list(
    State(st): State<AppState>,
    who: Who,
    RawQuery(query): RawQuery,
) -> Result<Json<SequencePageView>, ApiError> {
    let q = PageQuery::parse(query.as_deref())?;
    let list = st.service.list_for(
        who.presented(),
        q.prefix.as_ref(),
        q.after.as_ref(),
        q.limit,
    );
    let page = st.reads.run(list).await??;
    let sequences = page.rows.into_iter().map(|r| view(&st, r)).collect();
    Ok(Json(SequencePageView {
        sequences,
        next: page.next,
    }))
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
        (status = 503, description = "`storage_unavailable`, or `overloaded`: too many database reads in flight", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn get(
    State(st): State<AppState>,
    PathSeqName(name): PathSeqName,
    who: Who,
) -> Result<impl IntoResponse, ApiError> {
    let row = st
        .reads
        .run(st.service.get_for(who.presented(), &name))
        .await??;
    Ok(Json(view(&st, row)))
}

/// `PATCH /v1/sequences/{name}` (admin): change `step`, `description` and/or `ordering`.
#[utoipa::path(
    patch,
    path = "/v1/sequences/{name}",
    operation_id = "update_sequence",
    tag = "sequences",
    summary = "Change a sequence's step, description, ordering and/or serial-number settings",
    params(("name" = String, Path, description = "The sequence", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", example = "order")),
    request_body = PatchBody,
    security(("admin_token" = [])),
    responses(
        (status = 200, description = "The changed sequence", body = SequenceDoc),
        (status = 400, description = "`invalid_name` or `invalid_request` (empty patch, step out of range, description too long, a bad format, reset, time zone or overflow, a format under `overflow: refuse` whose `{seq:0N}` cannot print the sequence's `start`, unknown field, not JSON)", body = ErrorBody),
        (status = 401, description = "`unauthorized`: no or wrong admin token, or admin calls disabled", body = ErrorBody),
        (status = 404, description = "`sequence_not_found`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: body over 64 KiB", body = ErrorBody),
        (status = 503, description = "`storage_unavailable`", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait"))),
    )
)]
pub async fn patch(
    State(st): State<AppState>,
    admin: AdminCalls,
    PathSeqName(name): PathSeqName,
    JsonBody(body): JsonBody<PatchBody>,
) -> Result<impl IntoResponse, ApiError> {
    let req = PatchRequest {
        step: body.step,
        description: body.description,
        ordering: body.ordering,
        format: body.format,
        serial: SerialFields {
            format: None,
            reset: body.reset,
            time_zone: body.time_zone,
            overflow: body.overflow,
        },
    };
    let row = admin.patch(&name, req).await?;
    Ok(Json(view(&st, row)))
}

/// A sequence: its database row and this instance's buffer.
#[derive(ToSchema)]
#[schema(as = Sequence)]
pub struct SequenceDoc {
    /// The sequence's name.
    #[schema(example = "order")]
    pub name: String,
    /// The highest ID reserved so far; the next segment starts at `max_id + 1`.
    pub max_id: i64,
    /// The base segment size (the floor of the adapted step).
    pub step: i64,
    /// Free text for operators.
    pub description: String,
    /// When the row was created (UTC).
    pub created_at: DateTime<Utc>,
    /// When the row was last changed, by a reservation or an update (UTC).
    pub updated_at: DateTime<Utc>,
    /// `instance` or `global`.
    #[schema(example = "instance", pattern = "^(instance|global)$")]
    pub ordering: String,
    /// Where each period's counter starts (the `start` given at create).
    pub counter_start: i64,
    /// The serial-number settings; `null` for a plain sequence (and for a
    /// row whose settings seqd cannot use: see `problem`).
    pub serial: Option<SerialDoc>,
    /// Present only when seqd cannot use the row (serial settings written by
    /// SQL that do not parse): the field and why. Its ID requests answer 500
    /// `sequence_misconfigured` until a PATCH or SQL repairs it.
    #[schema(nullable = false)]
    pub problem: Option<ProblemDoc>,
    /// This instance's buffer; `null` until this instance served the
    /// sequence. For a serial sequence, the buffer of its current period's
    /// counter (its `name` is the counter's), which issues its serials.
    pub buffer: Option<BufferDoc>,
    /// A serial sequence's current period in this instance; `null` until
    /// this instance served it.
    pub period: Option<PeriodView>,
    /// Over stripes only, once a segment is loaded: which stripe's blocks
    /// the buffer's segments came from.
    #[schema(nullable = false)]
    pub stripes: Option<StripesView>,
}

/// What is wrong with a row seqd cannot use.
#[derive(ToSchema)]
#[schema(as = RowProblem)]
pub struct ProblemDoc {
    /// The column at fault: `format`, `reset`, `time_zone` or `overflow`.
    #[schema(pattern = "^(format|reset|time_zone|overflow)$")]
    pub field: String,
    /// Why its value is refused, in seqd's words.
    pub message: String,
}

/// A sequence's serial-number settings.
#[derive(ToSchema)]
#[schema(as = Serial)]
pub struct SerialDoc {
    /// The format, e.g. `ORD{yyyy}{MM}{dd}{seq:06}`.
    pub format: String,
    /// `never`, `day`, `month` or `year`.
    #[schema(pattern = "^(never|day|month|year)$")]
    pub reset: String,
    /// The IANA time zone of the periods.
    pub time_zone: String,
    /// `refuse` or `widen`.
    #[schema(pattern = "^(refuse|widen)$")]
    pub overflow: String,
}

/// `{"sequences":[...],"next":"NAME"}`: one page of sequences.
#[derive(ToSchema)]
#[schema(as = SequenceList)]
pub struct SequenceListDoc {
    /// The page's sequences, ordered by name in byte order.
    pub sequences: Vec<SequenceDoc>,
    /// The last name of this page when more follow: pass it as `after` for
    /// the next page. `null` on the last page.
    #[schema(example = "order")]
    pub next: Option<String>,
}

/// One sequence's double buffer in this instance.
#[derive(ToSchema)]
#[schema(as = Buffer)]
pub struct BufferDoc {
    /// The sequence.
    pub name: String,
    /// The segment being served, unless none was loaded yet.
    pub current: Option<SegmentDoc>,
    /// The segment fetched ahead, if ready.
    pub next: Option<SegmentDoc>,
    /// True while a fetch is in flight.
    pub loading: bool,
    /// Size of the most recent segment fetched (the adapted step).
    pub current_step: i64,
    /// The row's step as the last fetch saw it.
    pub row_step: i64,
    /// Smoothed consumption rate, IDs per second.
    pub rate_per_sec: f64,
    /// IDs handed out by this instance.
    pub issued: u64,
    /// Successful segment fetches.
    pub fetches: u64,
    /// Failed segment fetches.
    pub fetch_errors: u64,
    /// Requests that found both segments empty and had to wait.
    pub waits: u64,
    /// Milliseconds since the last successful fetch started.
    pub last_fetch_ago_ms: Option<u64>,
    /// How long the last successful fetch took, in milliseconds.
    pub last_fetch_latency_ms: Option<f64>,
    /// Why the last fetch failed, if it did (`null` once a fetch succeeds).
    pub last_error: Option<FetchFailureDoc>,
}

/// Why a segment fetch failed, in seqd's words: the store's own error text
/// is only in the server log.
#[derive(ToSchema)]
#[schema(as = FetchFailure)]
pub struct FetchFailureDoc {
    /// The category.
    pub kind: FetchFailureKindDoc,
    /// A fixed sentence for the category.
    #[schema(example = "segment fetch timed out")]
    pub message: String,
}

/// The categories of a failed segment fetch.
#[derive(ToSchema)]
#[schema(as = FetchFailureKind, rename_all = "snake_case")]
pub enum FetchFailureKindDoc {
    /// The fetch did not finish within the fetch timeout.
    Timeout,
    /// The database was unreachable or failed the statement.
    Unavailable,
    /// The storage configuration is unusable.
    Misconfigured,
    /// The sequence has no row.
    NotFound,
    /// The sequence cannot go higher.
    Exhausted,
    /// The database handed out IDs this instance had already reserved.
    Regression,
}

/// One reserved segment.
#[derive(ToSchema)]
#[schema(as = Segment)]
pub struct SegmentDoc {
    /// First ID of the segment.
    pub first: i64,
    /// Last ID of the segment.
    pub last: i64,
    /// The next ID this segment would hand out (`null` when used up).
    pub cursor: Option<i64>,
    /// IDs still available in it.
    pub remaining: u64,
}
