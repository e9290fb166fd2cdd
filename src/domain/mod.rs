//! Validated domain values: a sequence name, a batch count, a new sequence.
//!
//! These types can only be built through their `parse` constructors, so any
//! value of them that reaches the allocator or a store is known to be valid.
//! The values the allocator needs (names, counts, the ordering, period row
//! names, the checks of steps and descriptions) live in the core crate,
//! [`seqd_core::domain`], and are re-exported here unchanged.

pub mod clock;
pub mod secret;
pub mod serial;
pub mod token;

pub use secret::Secret;
pub use seqd_core::domain::*;

pub use serial::SerialSettings;

/// A sequence to create: validated name, first ID, base step and description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSequence {
    /// The sequence's name.
    pub name: SeqName,
    /// The first ID it will issue (>= 1). The row stores `max_id = start - 1`.
    pub start: i64,
    /// The base segment size (>= 1).
    pub step: i64,
    /// Free text for operators.
    pub description: String,
    /// How its IDs are ordered (default [`IdOrdering::Instance`]).
    pub ordering: IdOrdering,
    /// Its serial-number settings, if it issues serial numbers.
    pub serial: Option<SerialSettings>,
}

impl NewSequence {
    /// The same sequence with `ordering`.
    pub fn with_ordering(mut self, ordering: IdOrdering) -> Self {
        self.ordering = ordering;
        self
    }

    /// The same sequence issuing serial numbers with `serial`.
    pub fn with_serial(mut self, serial: SerialSettings) -> Self {
        self.serial = Some(serial);
        self
    }

    /// Validates a creation request against the limits of docs/design.md
    /// ("Names and limits").
    pub fn new(
        name: SeqName,
        start: i64,
        step: i64,
        description: String,
        max_step: i64,
    ) -> Result<Self, ParseError> {
        if start < 1 {
            return Err(ParseError::Start);
        }
        validate_step(step, max_step)?;
        validate_description(&description)?;
        Ok(NewSequence {
            name,
            start,
            step,
            description,
            ordering: IdOrdering::Instance,
            serial: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_sequence_validates_start_step_description() {
        let n = SeqName::parse("x").unwrap();
        assert!(NewSequence::new(n.clone(), 1, 1, String::new(), 10).is_ok());
        assert_eq!(
            NewSequence::new(n.clone(), 0, 1, String::new(), 10),
            Err(ParseError::Start)
        );
        assert_eq!(
            NewSequence::new(n.clone(), 1, 11, String::new(), 10),
            Err(ParseError::Step { max: 10 })
        );
        assert_eq!(
            NewSequence::new(n, 1, 1, "d".repeat(257), 10),
            Err(ParseError::Description)
        );
    }
}
