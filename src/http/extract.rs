//! Request extractors that turn raw input into domain values, or into the
//! documented 400s (never axum's plain-text rejections).

use axum::extract::path::ErrorKind;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, RawPathParams, Request};
use axum::http::header::{AUTHORIZATION, HOST};
use axum::http::request::Parts;
use axum::http::HeaderValue;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::AppState;
use crate::domain::{Count, SeqName, SeqNameRef};
use crate::service::{AdminCalls, ClientAuth, Presented};

/// The `{name}` path segment as an owned [`SeqName`], validated at
/// extraction (`invalid_name` otherwise).
#[derive(Debug)]
pub struct PathSeqName(pub SeqName);

impl<S: Send + Sync> FromRequestParts<S> for PathSeqName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::InvalidName(crate::domain::ParseError::Name))?;
        SeqName::parse(&raw)
            .map(PathSeqName)
            .map_err(ApiError::InvalidName)
    }
}

/// The `{name}` path segment as a borrowed [`SeqNameRef`], validated at
/// extraction (`invalid_name` otherwise): what the ID routes use, so that an
/// ID served from memory allocates nothing for the name (against two
/// allocations for [`PathSeqName`]: the decoded `String` and the `SeqName`).
#[derive(Debug)]
pub struct PathSeqNameRef(RawPathParams);

impl PathSeqNameRef {
    /// The raw value of the (only) path parameter.
    fn raw(&self) -> &str {
        self.0.iter().next().map_or("", |(_, v)| v)
    }

    /// The name, validated when the request was extracted.
    pub fn get(&self) -> SeqNameRef<'_> {
        SeqNameRef::validated(self.raw())
    }
}

impl<S: Send + Sync> FromRequestParts<S> for PathSeqNameRef {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map(PathSeqNameRef)
            .map_err(|_| ApiError::InvalidName(crate::domain::ParseError::Name))?;
        SeqNameRef::parse(params.raw()).map_err(ApiError::InvalidName)?;
        Ok(params)
    }
}

/// A path parameter (or, with a tuple or `Vec`, all of them) whose
/// rejection (bad percent-encoding, invalid UTF-8, the wrong type) is the
/// documented 400 `invalid_request`, never axum's plain text.
#[derive(Debug)]
pub struct PathParam<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send + 'static> FromRequestParts<S> for PathParam<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(v)| PathParam(v))
            .map_err(path_rejection)
    }
}

/// The `invalid_request` for a path axum could not read.
pub fn path_rejection(e: PathRejection) -> ApiError {
    let why = match &e {
        PathRejection::FailedToDeserializePathParams(d) => match d.kind() {
            ErrorKind::InvalidUtf8InPathParam { key } => {
                format!("path segment `{key}` is not valid UTF-8 once percent-decoded")
            }
            _ => d.body_text(),
        },
        other => other.body_text(),
    };
    ApiError::InvalidRequest(format!("invalid path: {why}"))
}

/// The value of parameter `key` in a query string, if given; an error when
/// it is given more than once.
pub fn one_param(query: Option<&str>, key: &str) -> Result<Option<String>, String> {
    let mut found = None;
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if k == key {
            if found.is_some() {
                return Err(format!("{key} given more than once"));
            }
            found = Some(v.into_owned());
        }
    }
    Ok(found)
}

/// Refuses a query string holding a parameter other than `known` (a
/// misspelt `SIZE` is an error, not a default).
pub fn known_params(query: Option<&str>, known: &[&str]) -> Result<(), String> {
    for (k, _) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if !known.contains(&k.as_ref()) {
            return Err(format!(
                "unknown query parameter {k:?}: this route takes {}",
                known.join(", ")
            ));
        }
    }
    Ok(())
}

/// The `as` parameter, as the OpenAPI document shows it ([`IdsAs`]).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = IdsAs)]
pub enum IdsAsDoc {
    /// IDs as JSON strings of digits.
    String,
    /// IDs as JSON numbers (the default).
    Number,
}

/// An ID in a JSON answer as the OpenAPI document shows it: a number, or,
/// with `as=string`, a string of digits.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(untagged)]
#[schema(as = Id)]
pub enum IdDoc {
    /// `1001`.
    Number(i64),
    /// `"1001"`: digits only.
    String(String),
}

/// The schema of an ID a request sends (a lease's return): a 64-bit
/// integer of at least `min`, or a string of its digits (as `as=string`
/// answered it; up to 18 digits in the document, 19 accepted).
pub fn sent_id_schema(min: i64) -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, OneOfBuilder, SchemaFormat, Type};
    let first = if min <= 1 { "[1-9]" } else { "[2-9]" };
    OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
                .minimum(Some(min as f64)),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(format!("^({first}|[1-9][0-9]{{1,17}})$"))),
        )
        .build()
        .into()
}

/// How a JSON answer writes the IDs it holds: as numbers, or, asked with
/// the query parameter `as=string`, as strings of digits, for clients that
/// read JSON numbers as doubles (exact only up to 2^53).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdsAs {
    /// `{"id":1001}` (absent, or `as=number`).
    #[default]
    Number,
    /// `{"id":"1001"}` (`as=string`).
    String,
}

impl IdsAs {
    /// The one `as` parameter of a query string: absent or `number`, or
    /// `string`; anything else is refused.
    pub fn from_query(query: Option<&str>) -> Result<IdsAs, ApiError> {
        let Some(query) = query else {
            return Ok(IdsAs::Number);
        };
        match one_param(Some(query), "as")
            .map_err(ApiError::InvalidRequest)?
            .as_deref()
        {
            None | Some("number") => Ok(IdsAs::Number),
            Some("string") => Ok(IdsAs::String),
            Some(other) => Err(ApiError::InvalidRequest(format!(
                "as must be string or number, not {other:?}"
            ))),
        }
    }

    /// Writes `id` at the end of `body`, as a number or a string.
    pub fn push(self, body: &mut String, id: i64) {
        let mut buf = itoa::Buffer::new();
        let digits = buf.format(id);
        match self {
            IdsAs::Number => body.push_str(digits),
            IdsAs::String => {
                body.push('"');
                body.push_str(digits);
                body.push('"');
            }
        }
    }
}

/// Reads the one `count` parameter of a query string.
pub fn count_from_query(query: Option<&str>) -> Result<Count, ApiError> {
    let raw = one_param(query, "count")
        .map_err(ApiError::InvalidCount)?
        .ok_or_else(|| ApiError::InvalidCount("count is required, e.g. ?count=100".into()))?;
    Count::parse(&raw).map_err(|e| ApiError::InvalidCount(e.to_string()))
}

/// Largest magnitude a number written with a fraction or an exponent may
/// have: 2^53 - 1, below which every integer is exact as a double.
pub const MAX_EXACT_DOUBLE_INTEGER: i64 = (1 << 53) - 1;

/// The integer a JSON value's text stands for, read from its digits.
///
/// - Plain integers (`1000`, `-5`) are taken as written when they fit an
///   `i64`; beyond it they are refused.
/// - Numbers with a fraction or an exponent (`1000.0`, `1e3`, `1.5e3`) are
///   accepted when their exact value is a whole number of magnitude at most
///   [`MAX_EXACT_DOUBLE_INTEGER`]: a client that sent a double then meant
///   exactly that number. `9007199254740993.0` is refused, since as a double
///   it would be 9007199254740992; such values must be sent as plain digits.
/// - Anything else (strings, `null`, booleans) is refused.
///
/// The error says why, for the field's `invalid_request` message.
pub fn exact_integer(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    if !unsigned.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("expected an integer, got {}", json_kind(text)));
    }
    if unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse()
            .map_err(|_| "integer outside the 64-bit signed range".to_string());
    }
    whole_within_doubles(text.starts_with('-'), unsigned).ok_or_else(|| {
        format!(
            "a number written with a fraction or an exponent must be a whole number within \
             ±{MAX_EXACT_DOUBLE_INTEGER} (exact as a double); write other integers as plain digits"
        )
    })
}

/// The value of a JSON number in fraction/exponent form (`unsigned` has no
/// sign), if it is whole and within ±[`MAX_EXACT_DOUBLE_INTEGER`].
fn whole_within_doubles(negative: bool, unsigned: &str) -> Option<i64> {
    let (mantissa, exp) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (
            m,
            e.parse::<i64>().unwrap_or(if e.starts_with('-') {
                i64::MIN
            } else {
                i64::MAX
            }),
        ),
        None => (unsigned, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{int}{frac}");
    let digits = all.trim_start_matches('0');
    if digits.is_empty() {
        return Some(0);
    }
    // The value is digits * 10^scale.
    let scale = exp.saturating_sub(i64::try_from(frac.len()).ok()?);
    let whole = if scale < 0 {
        let cut = usize::try_from(scale.unsigned_abs()).ok()?;
        let keep = digits.len().checked_sub(cut)?;
        let (kept, dropped) = digits.split_at(keep);
        if kept.is_empty() || dropped.bytes().any(|b| b != b'0') {
            return None;
        }
        kept.to_string()
    } else {
        let zeros = usize::try_from(scale)
            .ok()
            .filter(|z| digits.len() + z <= 16)?;
        format!("{digits}{}", "0".repeat(zeros))
    };
    let value: i64 = whole
        .parse()
        .ok()
        .filter(|v| *v <= MAX_EXACT_DOUBLE_INTEGER)?;
    Some(if negative { -value } else { value })
}

/// What a JSON value that is not a number is, for error messages.
fn json_kind(text: &str) -> &'static str {
    match text.as_bytes().first() {
        Some(b'"') => "a string",
        Some(b'n') => "null",
        Some(b't' | b'f') => "a boolean",
        Some(b'[') => "an array",
        Some(b'{') => "an object",
        _ => "something else",
    }
}

/// A JSON body whose rejections become `invalid_request` (or 413).
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(JsonBody(v)),
            Err(JsonRejection::MissingJsonContentType(_)) => Err(ApiError::InvalidRequest(
                "expected a JSON body with Content-Type: application/json".into(),
            )),
            Err(JsonRejection::BytesRejection(e))
                if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE =>
            {
                Err(ApiError::PayloadTooLarge)
            }
            Err(e) => Err(ApiError::InvalidRequest(format!(
                "invalid JSON body: {}",
                e.body_text()
            ))),
        }
    }
}

/// The admin calls (create, patch, tokens), for a caller the service let
/// in: the door hands it the Bearer token and whether the request names a
/// loopback host ([`crate::service::Service::admin`] decides).
impl FromRequestParts<AppState> for AdminCalls {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let presented = Presented {
            token: bearer_of(parts).map(str::as_bytes),
            local: names_loopback(parts),
        };
        Ok(state.service.admin(presented)?)
    }
}

/// What a caller of a drawing or reading route presented: its Bearer
/// token, read only under `--client-auth on` (otherwise nothing is looked
/// at). [`Who::presented`] hands it to the service, which decides.
/// Its `Debug` never shows the token.
#[derive(Default)]
pub struct Who(Option<HeaderValue>);

impl std::fmt::Debug for Who {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Who(***)"
        } else {
            "Who(none)"
        })
    }
}

impl Who {
    /// The credentials, for the service.
    pub fn presented(&self) -> Presented<'_> {
        Presented {
            token: self.0.as_ref().and_then(|v| bearer_bytes(v.as_bytes())),
            local: false,
        }
    }
}

impl FromRequestParts<AppState> for Who {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(Who::take(state, &mut parts.headers))
    }
}

impl Who {
    /// What the extractor does, on a request's headers: under
    /// `--client-auth on` the `Authorization` value is taken out of them.
    pub fn take(state: &AppState, headers: &mut axum::http::HeaderMap) -> Self {
        match state.service.access().client_auth() {
            ClientAuth::Off => Who(None),
            ClientAuth::On => Who(take_authorization(headers)),
        }
    }
}

/// Takes the first `Authorization` value out of `headers`, leaving an
/// empty value in its place: nothing that runs after the extractor (a
/// handler, a log line, an error) can see the token, and no copy of it is
/// made. A scan of the entries: a request carries a handful of headers,
/// fewer than a hashed lookup costs to set up (docs/design.md, "Client
/// tokens").
fn take_authorization(headers: &mut axum::http::HeaderMap) -> Option<HeaderValue> {
    let (_, value) = headers
        .iter_mut()
        .find(|(name, _)| *name == AUTHORIZATION)?;
    Some(std::mem::replace(value, HeaderValue::from_static("")))
}

/// [`bearer_token`] on an `Authorization` value's bytes, without checking
/// the whole value first: the hot path of `--client-auth on`. The token's
/// bytes go to the service as they are (a token that is not ASCII matches
/// nothing).
fn bearer_bytes(value: &[u8]) -> Option<&[u8]> {
    // `Bearer <token>` with one space, as clients send it, first: spelled
    // as the RFC spells it, then in any case.
    if let (Some(scheme), Some(&first)) = (value.get(..7), value.get(7)) {
        if (scheme == b"Bearer " || scheme.eq_ignore_ascii_case(b"bearer ")) && first != b' ' {
            return Some(&value[7..]);
        }
    }
    let space = value.iter().position(|&b| b == b' ')?;
    let (scheme, rest) = value.split_at(space);
    let start = rest.iter().position(|&b| b != b' ')?;
    scheme
        .eq_ignore_ascii_case(b"bearer")
        .then_some(&rest[start..])
}

/// The Bearer token of the request's `Authorization` header, if any.
fn bearer_of(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
}

/// The token of an `Authorization` value in the Bearer scheme, whose name
/// is case-insensitive (RFC 9110, 11.1): `Bearer t`, `bearer t`, `BEARER  t`.
pub fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Whether the request names a loopback host: exactly one `Host` header
/// (and the authority of an absolute-form target, if any), each
/// [`is_loopback_host`]. Without a token this is what keeps a web page
/// that reached the port through DNS rebinding (its own host name in
/// `Host`) out of the admin calls.
fn names_loopback(parts: &Parts) -> bool {
    let mut hosts = parts.headers.get_all(HOST).iter();
    let (Some(host), None) = (hosts.next(), hosts.next()) else {
        return false;
    };
    let target_ok = parts
        .uri
        .authority()
        .is_none_or(|a| is_loopback_host(a.as_str()));
    target_ok && host.to_str().is_ok_and(is_loopback_host)
}

/// `localhost`, an IPv4 address in 127.0.0.0/8 or `[::1]`, with an
/// optional port: what a `Host` header says when a client on this machine
/// called a loopback address.
pub fn is_loopback_host(host: &str) -> bool {
    let (name, port) = match host.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, rest)) => {
                let ok = addr
                    .parse::<std::net::Ipv6Addr>()
                    .is_ok_and(|a| a.is_loopback());
                return ok && (rest.is_empty() || rest.strip_prefix(':').is_some_and(is_port));
            }
            None => return false,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        },
    };
    let name_ok = name.eq_ignore_ascii_case("localhost")
        || name.eq_ignore_ascii_case("localhost.")
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.is_loopback());
    name_ok && port.is_none_or(is_port)
}

fn is_port(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {

    #[test]
    fn bearer_bytes_reads_what_bearer_token_reads() {
        for v in [
            "Bearer t",
            "bearer  t",
            "BEARER t",
            "Basic t",
            "Bearer ",
            "Bearer",
            "t",
            "",
        ] {
            assert_eq!(
                bearer_bytes(v.as_bytes()),
                bearer_token(v).map(str::as_bytes),
                "{v:?}"
            );
        }
        assert_eq!(bearer_bytes(b"Bearer \xff"), Some(&b"\xff"[..]));
    }
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive_and_the_token_exact() {
        for (value, want) in [
            ("Bearer s3cret", Some("s3cret")),
            ("bearer s3cret", Some("s3cret")),
            ("BEARER  s3cret", Some("s3cret")),
            ("Basic s3cret", None),
            ("Bearer", None),
            ("Bearer ", None),
            ("Bearers3cret", None),
        ] {
            assert_eq!(bearer_token(value), want, "{value:?}");
        }
    }

    #[test]
    fn exact_integer_takes_digits_as_written_and_whole_doubles_only_when_exact() {
        for (text, want) in [
            ("1000", 1000),
            ("-5", -5),
            ("9223372036854775807", i64::MAX),
            ("-9223372036854775808", i64::MIN),
            ("9007199254740993", 9_007_199_254_740_993),
            ("1000.0", 1000),
            ("1e3", 1000),
            ("1E+3", 1000),
            ("1.5e3", 1500),
            ("1000e-2", 10),
            ("0.0", 0),
            ("0e999999999999999999999", 0),
            ("-2.0", -2),
            ("9007199254740991.0", MAX_EXACT_DOUBLE_INTEGER),
            ("9.007199254740991e15", MAX_EXACT_DOUBLE_INTEGER),
        ] {
            assert_eq!(exact_integer(text), Ok(want), "{text}");
        }
        for text in [
            "9223372036854775808",
            "-9223372036854775809",
            "9007199254740993.0",
            "9007199254740992.0",
            "9.007199254740993e15",
            "1e19",
            "1e999999999999999999999",
            "10.5",
            "1.5e-1",
            "5e-1",
            "1e-999999999999999999999",
            "\"10\"",
            "null",
            "true",
            "[1]",
            "{}",
        ] {
            assert!(exact_integer(text).is_err(), "{text} accepted");
        }
        assert!(exact_integer("null").unwrap_err().contains("null"));
    }

    #[test]
    fn only_loopback_hosts_pass_with_or_without_a_port() {
        for ok in [
            "localhost",
            "LOCALHOST:8080",
            "localhost.",
            "127.0.0.1",
            "127.255.0.9:1",
            "[::1]",
            "[::1]:65535",
            "[0:0:0:0:0:0:0:1]:80",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "",
            ":80",
            "evil.example",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "evil-localhost",
            "127.1",
            "0.0.0.0",
            "128.0.0.1",
            "[::2]",
            "[::1",
            "[::1]x",
            "[::ffff:127.0.0.1]",
            "localhost:",
            "localhost:80:80",
            "localhost:http",
            "127.0.0.1:123456",
            "user@localhost",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn count_must_appear_exactly_once_and_in_range() {
        assert_eq!(count_from_query(Some("count=5")).unwrap().get(), 5);
        assert_eq!(
            count_from_query(Some("x=1&count=10000")).unwrap().get(),
            10000
        );
        for bad in [
            None,
            Some(""),
            Some("count=0"),
            Some("count=-1"),
            Some("count=10001"),
            Some("count=1e9"),
            Some("count=abc"),
            Some("count=1&count=2"),
            Some("count="),
        ] {
            assert!(
                matches!(count_from_query(bad), Err(ApiError::InvalidCount(_))),
                "{bad:?}"
            );
        }
    }
}

/// Whether the client asked for a plain-text answer (`Accept: text/plain`
/// without `application/json`). Reads the header in place: no copy of the
/// header map on the ID path.
#[derive(Debug, Clone, Copy)]
pub struct WantsText(pub bool);

impl<S: Send + Sync> FromRequestParts<S> for WantsText {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(WantsText::of(&parts.headers))
    }
}

impl WantsText {
    /// What the extractor reads, from a request's headers.
    pub fn of(headers: &axum::http::HeaderMap) -> Self {
        let text = headers
            .get(axum::http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/plain") && !a.contains("application/json"));
        WantsText(text)
    }
}
