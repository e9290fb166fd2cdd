//! [`Secret`]: a token that never reaches a log.

use std::fmt;

/// A secret string: shown as `***` in `Debug` (it has no `Display`). Shared, so
/// cloning it (with the router state, once per request) does not allocate.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(std::sync::Arc<str>);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into().into())
    }

    /// The secret itself; keep it out of logs.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for Secret {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            Err("the token must not be empty".into())
        } else {
            Ok(Secret(s.into()))
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}
