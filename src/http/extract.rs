//! Request extractors that turn raw input into domain values, or into the
//! documented 400s (never axum's plain-text rejections).

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, RawPathParams, Request};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::{AdminAuth, AppState};
use crate::domain::{Count, NameRef, SeqName};

/// The `{name}` path segment, parsed as a [`SeqName`].
#[derive(Debug)]
pub struct Name(pub SeqName);

impl<S: Send + Sync> FromRequestParts<S> for Name {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::InvalidName(crate::domain::ParseError::Name))?;
        SeqName::parse(&raw)
            .map(Name)
            .map_err(ApiError::InvalidName)
    }
}

/// The `{name}` path segment, borrowed: what the ID routes use, so that an
/// ID served from memory allocates nothing for the name (against two
/// allocations for [`Name`]: the decoded `String` and the `SeqName`).
/// Validated once, by [`NameParam::get`].
#[derive(Debug)]
pub struct NameParam(RawPathParams);

impl NameParam {
    /// The name, or `invalid_name`.
    pub fn get(&self) -> Result<NameRef<'_>, ApiError> {
        let raw = self.0.iter().next().map_or("", |(_, v)| v);
        NameRef::parse(raw).map_err(ApiError::InvalidName)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for NameParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        RawPathParams::from_request_parts(parts, state)
            .await
            .map(NameParam)
            .map_err(|_| ApiError::InvalidName(crate::domain::ParseError::Name))
    }
}

/// Reads the one `count` parameter of a query string.
pub fn count_from_query(query: Option<&str>) -> Result<Count, ApiError> {
    let mut found = None;
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if k == "count" {
            if found.is_some() {
                return Err(ApiError::InvalidCount("count given more than once".into()));
            }
            found = Some(v.into_owned());
        }
    }
    let raw =
        found.ok_or_else(|| ApiError::InvalidCount("count is required, e.g. ?count=100".into()))?;
    Count::parse(&raw).map_err(|e| ApiError::InvalidCount(e.to_string()))
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

/// Proof that the caller may use admin calls (create, patch).
#[derive(Debug)]
pub struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        match &state.admin {
            AdminAuth::OpenOnLoopback => Ok(Admin),
            AdminAuth::Refused => Err(ApiError::Unauthorized(
                "admin calls are disabled: the server listens on a non-loopback address and no \
                 SEQD_ADMIN_TOKEN is set",
            )),
            AdminAuth::Token(expected) => {
                let given = parts
                    .headers
                    .get(AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .unwrap_or("");
                if bool::from(given.as_bytes().ct_eq(expected.expose().as_bytes())) {
                    Ok(Admin)
                } else {
                    Err(ApiError::Unauthorized(
                        "admin calls need Authorization: Bearer <SEQD_ADMIN_TOKEN>",
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let text = parts
            .headers
            .get(axum::http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/plain") && !a.contains("application/json"));
        Ok(WantsText(text))
    }
}
