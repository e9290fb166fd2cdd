//! Why a sequence's last segment fetch failed, in seqd's own words.
//!
//! A buffer's `last_error` is shown to anyone who can read the sequences
//! (`GET /v1/sequences...`, the monitor page), so it is a category and a
//! fixed sentence, never the store's error: driver text (table names,
//! users, hosts) goes to the log only, where the fetch loop writes it.

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::store::StoreError;

/// The category of a failed segment fetch. Serialised as
/// `{"kind": "...", "message": "..."}` (see [`FetchFailure::kind`] and
/// [`FetchFailure::message`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchFailure {
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

impl FetchFailure {
    /// Every category, for documentation and tests.
    pub const ALL: [FetchFailure; 6] = [
        FetchFailure::Timeout,
        FetchFailure::Unavailable,
        FetchFailure::Misconfigured,
        FetchFailure::NotFound,
        FetchFailure::Exhausted,
        FetchFailure::Regression,
    ];

    /// The category of a store error (its text is not kept).
    pub fn of_store(e: &StoreError) -> Self {
        match e {
            StoreError::NotFound => FetchFailure::NotFound,
            StoreError::Exhausted => FetchFailure::Exhausted,
            StoreError::Config(_) | StoreError::Migration(_) | StoreError::Invalid(_) => {
                FetchFailure::Misconfigured
            }
            StoreError::Unavailable(_)
            | StoreError::AlreadyExists
            | StoreError::BumpRefused(_)
            | StoreError::Serial
            | StoreError::Global => FetchFailure::Unavailable,
        }
    }

    /// The stable, machine-readable category.
    pub fn kind(self) -> &'static str {
        match self {
            FetchFailure::Timeout => "timeout",
            FetchFailure::Unavailable => "unavailable",
            FetchFailure::Misconfigured => "misconfigured",
            FetchFailure::NotFound => "not_found",
            FetchFailure::Exhausted => "exhausted",
            FetchFailure::Regression => "regression",
        }
    }

    /// A fixed sentence for people; the details are in the server log.
    pub fn message(self) -> &'static str {
        match self {
            FetchFailure::Timeout => "segment fetch timed out",
            FetchFailure::Unavailable => {
                "the database was unreachable or failed the segment fetch; details in the server log"
            }
            FetchFailure::Misconfigured => {
                "the storage configuration is unusable; details in the server log"
            }
            FetchFailure::NotFound => "the sequence has no row in the database",
            FetchFailure::Exhausted => "the sequence reached its upper bound",
            FetchFailure::Regression => {
                "the database handed out IDs this instance had already reserved; skipping past them"
            }
        }
    }
}

impl Serialize for FetchFailure {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("FetchFailure", 2)?;
        st.serialize_field("kind", self.kind())?;
        st.serialize_field("message", self.message())?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_keep_only_their_category() {
        let e = StoreError::Unavailable("permission denied for table sequences".into());
        let shown = serde_json::to_string(&FetchFailure::of_store(&e)).unwrap();
        assert!(
            shown.starts_with(r#"{"kind":"unavailable","message":"#),
            "{shown}"
        );
        assert!(!shown.contains("permission denied"), "{shown}");
        let config = FetchFailure::of_store(&StoreError::Config("user=root".into()));
        assert_eq!(config.kind(), "misconfigured");
    }

    #[test]
    fn every_kind_is_distinct_snake_case_with_a_message() {
        let kinds: std::collections::BTreeSet<_> =
            FetchFailure::ALL.iter().map(|f| f.kind()).collect();
        assert_eq!(kinds.len(), FetchFailure::ALL.len());
        for f in FetchFailure::ALL {
            assert!(f.kind().chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            assert!(!f.message().is_empty());
        }
    }
}
