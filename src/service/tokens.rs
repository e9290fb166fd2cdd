//! Making, listing and revoking client tokens (docs/api.md, "Client
//! tokens"): the admin API and `seqd tokens` both call these.

use chrono::{DateTime, Utc};

use super::{AdminCalls, ServiceError};
use crate::domain::token::{new_token, Rights, Scope, TokenHash, TokenLabel, TokenRecord};
use crate::domain::Secret;
use crate::store::{StoreError, TokenRow};

/// What a new token is to be.
#[derive(Debug, Clone, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// Unique label: 1 to 64 characters of `A-Z a-z 0-9 . _ -` (not
    /// `admin` or `none`, the labels of calls without a client token).
    #[schema(example = "shop-42", pattern = "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    pub label: String,
    /// The name prefixes it covers (1 to 64); `*` covers every name.
    #[schema(example = json!(["shop-42:"]), value_type = Vec<PrefixDoc>, min_items = 1, max_items = 64)]
    pub prefixes: Vec<String>,
    /// `draw`, `read` or both.
    #[schema(example = json!(["draw"]), value_type = Vec<RightDoc>, min_items = 1, max_items = 2)]
    pub rights: Vec<String>,
    /// How long it works: a number and a unit (`ms`, `s`, `m`, `h`, `d`,
    /// `w`), e.g. `90d` or `12h`, nothing else (the CLI's `--expires`
    /// the same); forever when absent.
    #[schema(example = "90d", pattern = "^[1-9][0-9]{0,5}(ms|s|m|h|d|w)$")]
    pub expires_in: Option<String>,
}

/// A name prefix a token covers, or `*` (documentation of [`NewToken`]).
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, pattern = "^(\\*|[A-Za-z0-9][A-Za-z0-9._:-]{0,127})$")]
pub struct PrefixDoc(#[allow(dead_code)] String);

/// A right of a token (documentation of [`NewToken`]).
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum RightDoc {
    /// Draw IDs.
    Draw,
    /// List and read sequences.
    Read,
}

/// A token just made: the only time its text is shown.
#[derive(Debug, Clone)]
pub struct MadeToken {
    /// The token (`seqd_` and 64 hex digits).
    pub token: Secret,
    /// Its record as stored.
    pub record: TokenRecord,
}

/// A token as listed: its row, and what state it is in.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct TokenView {
    /// Its label.
    pub label: String,
    /// The prefixes it covers (`*`: every name).
    pub prefixes: Vec<String>,
    /// Its rights.
    pub rights: Vec<String>,
    /// When it was made.
    pub created_at: Option<DateTime<Utc>>,
    /// When it stops working, if set.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<DateTime<Utc>>,
    /// `active`, `expired`, `revoked`, or `unusable: ...` (a row written by
    /// SQL that seqd cannot read; it is skipped).
    pub state: String,
}

impl TokenView {
    /// The view of `record` at `now`.
    pub fn of(record: &TokenRecord, now: DateTime<Utc>) -> Self {
        let state = if record.revoked_at.is_some() {
            "revoked"
        } else if !record.in_force(now) {
            "expired"
        } else {
            "active"
        };
        TokenView {
            label: record.label.to_string(),
            prefixes: record.scope.to_list(),
            rights: record
                .rights
                .to_column()
                .split(',')
                .map(str::to_owned)
                .collect(),
            created_at: Some(record.created_at),
            expires_at: record.expires_at,
            revoked_at: record.revoked_at,
            state: state.into(),
        }
    }
}

fn invalid(e: impl ToString) -> ServiceError {
    ServiceError::InvalidRequest(e.to_string())
}

impl AdminCalls {
    /// Makes a token and puts it in force on this instance at once (the
    /// others within their token refresh). Its text is in the answer only.
    pub async fn create_token(&self, req: NewToken) -> Result<MadeToken, ServiceError> {
        let label = TokenLabel::parse(&req.label).map_err(invalid)?;
        let scope = Scope::parse(&req.prefixes).map_err(invalid)?;
        let rights = Rights::parse(&req.rights.join(",")).map_err(invalid)?;
        let now = Utc::now();
        let expires_at = match req.expires_in.as_deref() {
            None => None,
            Some(text) => {
                let d = expiry(text)
                    .and_then(|d| now.checked_add_signed(d))
                    .ok_or_else(|| {
                        invalid(format!(
                            "invalid expires_in {text:?}: a positive duration such as 90d or 12h"
                        ))
                    })?;
                Some(d)
            }
        };
        let token = new_token();
        let record = TokenRecord {
            label,
            hash: TokenHash::of(token.expose()),
            scope,
            rights,
            created_at: now,
            expires_at,
            revoked_at: None,
        };
        self.import_token(&record).await?;
        Ok(MadeToken { token, record })
    }

    /// Puts `record` in force as it is, its hash made elsewhere (an import
    /// of another system's tokens, whose texts seqd never sees):
    /// [`ServiceError::TokenExists`] when its label or hash is taken.
    pub async fn import_token(&self, record: &TokenRecord) -> Result<(), ServiceError> {
        match self.store.insert_token(&TokenRow::of(record)).await {
            Err(StoreError::AlreadyExists) => {
                return Err(ServiceError::TokenExists(record.label.to_string()))
            }
            other => other?,
        }
        self.token_changed().await;
        tracing::info!(label = %record.label, "client token created");
        Ok(())
    }

    /// The token rows as stored (their hashes, never a text), for an import
    /// to tell which of its tokens seqd holds already.
    pub async fn token_rows(&self) -> Result<Vec<TokenRow>, ServiceError> {
        Ok(self.store.token_rows().await?)
    }

    /// Every token, by label, revoked and expired ones too.
    pub async fn tokens(&self) -> Result<Vec<TokenView>, ServiceError> {
        let now = Utc::now();
        Ok(self
            .store
            .token_rows()
            .await?
            .into_iter()
            .map(|row| match row.record() {
                Ok(r) => TokenView::of(&r, now),
                Err(problem) => TokenView {
                    label: row.label,
                    prefixes: Vec::new(),
                    rights: Vec::new(),
                    created_at: DateTime::from_timestamp_millis(row.created_at),
                    expires_at: None,
                    revoked_at: None,
                    state: format!("unusable: {problem}"),
                },
            })
            .collect())
    }

    /// Revokes token `label`: refused on this instance at once, on the
    /// others within their token refresh. `false` when it was revoked
    /// already.
    pub async fn revoke_token(&self, label: &str) -> Result<bool, ServiceError> {
        let at = Utc::now().timestamp_millis();
        let revoked = match self.store.revoke_token(label, at).await {
            Err(StoreError::NotFound) => return Err(ServiceError::TokenNotFound(label.to_owned())),
            other => other?,
        };
        self.token_changed().await;
        tracing::info!(label, "client token revoked");
        Ok(revoked)
    }

    /// Reads the set again so that a change made here is in force here
    /// before the answer (when tokens are checked at all).
    async fn token_changed(&self) {
        if self.access.client_auth() == super::ClientAuth::On {
            if let Err(e) = self.access.refresh(&*self.store).await {
                tracing::warn!(error = %e, "reading the client tokens after a change failed; the refresh reads again");
            }
        }
    }
}

/// How long a token works, written as [`NewToken::expires_in`] documents
/// it: 1 to 6 digits (no leading zero) and one unit of `ms`, `s`, `m`, `h`,
/// `d`, `w`, nothing before, between or after.
fn expiry(text: &str) -> Option<chrono::Duration> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (digits, unit) = text.split_at(split);
    if !(1..=6).contains(&digits.len()) || digits.starts_with('0') {
        return None;
    }
    let n: i64 = digits.parse().ok()?;
    Some(match unit {
        "ms" => chrono::Duration::milliseconds(n),
        "s" => chrono::Duration::seconds(n),
        "m" => chrono::Duration::minutes(n),
        "h" => chrono::Duration::hours(n),
        "d" => chrono::Duration::days(n),
        "w" => chrono::Duration::weeks(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::expiry;

    #[test]
    fn expiry_is_read_only_as_documented() {
        assert_eq!(expiry("90d"), Some(chrono::Duration::days(90)));
        assert_eq!(expiry("12h"), Some(chrono::Duration::hours(12)));
        assert_eq!(
            expiry("999999ms"),
            Some(chrono::Duration::milliseconds(999_999))
        );
        assert_eq!(expiry("2w"), Some(chrono::Duration::weeks(2)));
        for bad in [
            "1 s", "1y", "0d", "01d", "1000000s", "+5d", "-5d", "5", "d", "", " 5d", "5d ", "5D",
            "1h30m", "5days", "1.5h",
        ] {
            assert_eq!(expiry(bad), None, "{bad:?}");
        }
    }
}
