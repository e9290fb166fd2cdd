//! Validated domain values: a sequence name and its borrowed form, a name
//! prefix, a batch count, the ordering of a sequence's IDs, the names of
//! period counter rows, and the checks of steps and descriptions.
//!
//! These types can only be built through their `parse` constructors, so any
//! value of them that reaches the allocator or a store is known to be valid.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// Longest accepted sequence name, in bytes (all accepted characters are ASCII).
pub const MAX_NAME_LEN: usize = 128;
/// Largest number of IDs one batch request may ask for.
pub const MAX_BATCH: u32 = 10_000;
/// Longest accepted description, in characters.
pub const MAX_DESCRIPTION_LEN: usize = 256;

/// A sequence name matching `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`.
///
/// Cheap to clone (shared string).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeqName(Arc<str>);

/// Why `s` is not a sequence name, in a few words, or `None` when it is one:
/// the rule of [`SeqNameRef::parse`] and [`SeqName::parse`],
/// `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`. For callers that explain a refusal
/// (the Rust client's `Error::InvalidName`, checked before any request).
pub fn name_problem(s: &str) -> Option<&'static str> {
    let bytes = s.as_bytes();
    match bytes.first() {
        None => return Some("empty"),
        Some(b) if !b.is_ascii_alphanumeric() => {
            return Some("must start with a letter or a digit")
        }
        _ => {}
    }
    // The characters first: once they are all ASCII, bytes and characters
    // count the same for the length.
    let allowed = |&b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-');
    if !bytes.iter().all(allowed) {
        return Some("only letters, digits and . _ : - are allowed");
    }
    const _: () = assert!(MAX_NAME_LEN == 128, "the message below says 128");
    (bytes.len() > MAX_NAME_LEN).then_some("longer than 128 characters")
}

/// A valid sequence name borrowed from elsewhere (a request path): what the
/// allocator's hot path looks up, without allocating a [`SeqName`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SeqNameRef<'a>(&'a str);

impl<'a> SeqNameRef<'a> {
    /// Checks `s` against `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`.
    pub fn parse(s: &'a str) -> Result<Self, ParseError> {
        match name_problem(s) {
            None => Ok(SeqNameRef(s)),
            Some(_) => Err(ParseError::Name),
        }
    }

    /// A name already checked by [`SeqNameRef::parse`] (an extractor that
    /// validated it when the request arrived). Checked again in debug builds
    /// only.
    pub fn validated(s: &'a str) -> Self {
        debug_assert!(SeqNameRef::parse(s).is_ok(), "{s:?} was not validated");
        SeqNameRef(s)
    }

    /// The name as a string slice.
    pub fn as_str(self) -> &'a str {
        self.0
    }

    /// An owned copy (allocates).
    pub fn to_owned(self) -> SeqName {
        SeqName(Arc::from(self.0))
    }
}

impl<'a> From<&'a SeqName> for SeqNameRef<'a> {
    fn from(name: &'a SeqName) -> Self {
        SeqNameRef(&name.0)
    }
}

impl fmt::Display for SeqNameRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Debug for SeqNameRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

/// Why a value was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The name does not match the allowed pattern.
    #[error("invalid sequence name: must match ^[A-Za-z0-9][A-Za-z0-9._:-]{{0,127}}$")]
    Name,
    /// The name prefix does not match the pattern of a name's start.
    #[error(
        "invalid prefix: must be the start of a sequence name, 1 to 128 characters matching \
         ^[A-Za-z0-9][A-Za-z0-9._:-]{{0,127}}$"
    )]
    Prefix,
    /// The batch count is not an integer in 1..=10000.
    #[error("invalid count: must be an integer from 1 to {MAX_BATCH}")]
    Count,
    /// The step is not an integer in 1..=max_step.
    #[error("invalid step: must be an integer from 1 to {max}")]
    Step {
        /// The largest step allowed by this server.
        max: i64,
    },
    /// The start is not an integer in 1..=i64::MAX.
    #[error("invalid start: must be an integer from 1 to 9223372036854775807")]
    Start,
    /// The description is too long.
    #[error("invalid description: at most {MAX_DESCRIPTION_LEN} characters")]
    Description,
    /// The description holds a control character, which would reach
    /// terminals and logs as raw bytes.
    #[error(
        "invalid description: control character U+{code:04X} at character {at}; \
         control characters (U+0000 to U+001F, U+007F to U+009F) are not allowed"
    )]
    DescriptionControl {
        /// The control character's code point.
        code: u32,
        /// Its position, counted in characters from 1.
        at: usize,
    },
    /// The ordering is neither `instance` nor `global`.
    #[error("invalid ordering: must be \"instance\" or \"global\"")]
    Ordering,
}

impl SeqName {
    /// Parses a sequence name, accepting only `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        SeqNameRef::parse(s).map(SeqNameRef::to_owned)
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SeqName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for SeqName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SeqName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SeqName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl serde::Serialize for SeqName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// The start of sequence names: lists are narrowed to the names that begin
/// with it (`GET /v1/sequences?prefix=`, `seqd sequences list --prefix`).
///
/// Every non-empty start of a valid name is itself a valid name (the first
/// character is a letter or digit, the others from `._:-` too), and every
/// valid name is a start of itself, so a prefix is checked against the same
/// pattern, `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`: 1 to 128 characters.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NamePrefix(SeqName);

/// A character above every character a name may hold, in byte order: names
/// are ASCII `[A-Za-z0-9._:-]`, the highest of which is `z` (0x7A), and `{`
/// is 0x7B. See [`NamePrefix::upper_bound`].
pub const ABOVE_NAME_CHARS: char = '{';

impl NamePrefix {
    /// Parses a prefix: `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        SeqNameRef::parse(s)
            .map(|n| NamePrefix(n.to_owned()))
            .map_err(|_| ParseError::Prefix)
    }

    /// The prefix as a string slice.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Whether `name` begins with this prefix.
    #[inline]
    pub fn matches(&self, name: &str) -> bool {
        name.starts_with(self.as_str())
    }

    /// The exclusive upper end of the names with this prefix, in byte order:
    /// the prefix followed by [`ABOVE_NAME_CHARS`] (`{`), so that for every
    /// valid name `n`, `prefix <= n < prefix + "{"` holds exactly when `n`
    /// begins with `prefix`. A range that an index on the names serves,
    /// unlike `LIKE 'prefix%'` under most collations.
    ///
    /// - `n = prefix + rest`: `n >= prefix`, and either `rest` is empty
    ///   (`n` is a proper start of `prefix{`) or its first byte is a name
    ///   character, below `{`: `n < prefix{`.
    /// - `n` does not begin with `prefix` but `n >= prefix`: `n` is not a
    ///   proper start of `prefix` (it would be below it), so at the first
    ///   byte where they differ, within the prefix, `n`'s is higher; the
    ///   same byte decides against `prefix{`: `n > prefix{`.
    pub fn upper_bound(&self) -> String {
        let mut upper = String::with_capacity(self.as_str().len() + 1);
        upper.push_str(self.as_str());
        upper.push(ABOVE_NAME_CHARS);
        upper
    }
}

impl fmt::Display for NamePrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for NamePrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// Number of IDs in one batch: 1..=10000.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count(u32);

impl Count {
    /// Accepts 1..=[`MAX_BATCH`].
    pub fn new(n: u32) -> Result<Self, ParseError> {
        if (1..=MAX_BATCH).contains(&n) {
            Ok(Count(n))
        } else {
            Err(ParseError::Count)
        }
    }

    /// Parses a decimal count as it appears in a query string.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let n: u32 = s.parse().map_err(|_| ParseError::Count)?;
        Self::new(n)
    }

    /// The count as a number.
    pub fn get(self) -> u32 {
        self.0
    }
}

/// How a sequence orders its IDs (the `ordering` column).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum IdOrdering {
    /// Segments in memory: IDs strictly increase within each instance, and
    /// only trend upward across instances.
    #[default]
    Instance,
    /// Every ID reserved in the database at request time (concurrent
    /// requests of an instance merged): an ID handed out after another's
    /// answer was received, by any instance, is larger.
    Global,
}

impl IdOrdering {
    /// The column's value.
    pub fn as_str(self) -> &'static str {
        match self {
            IdOrdering::Instance => "instance",
            IdOrdering::Global => "global",
        }
    }

    /// From the column's value; anything unknown reads as `Instance` (the
    /// table's CHECK allows only the two).
    pub fn from_column(s: &str) -> Self {
        if s == "global" {
            IdOrdering::Global
        } else {
            IdOrdering::Instance
        }
    }
}

impl std::str::FromStr for IdOrdering {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "instance" => Ok(IdOrdering::Instance),
            "global" => Ok(IdOrdering::Global),
            _ => Err(ParseError::Ordering),
        }
    }
}

/// Separates a serial sequence's name from a period key in the name of the
/// row that holds the period's counter: `order@20261201` (docs/design.md,
/// "Serial numbers"). Not a name character, so no name a client can send
/// is a counter row, and lists of names leave counter rows out.
pub const PERIOD_SEPARATOR: char = '@';

/// Longest period key: `yyyyMMdd`.
pub const MAX_PERIOD_KEY_LEN: usize = 8;

/// Longest name of a stored row: a sequence name, the separator and a
/// period key (the `name` column is this wide).
pub const MAX_ROW_NAME_LEN: usize = MAX_NAME_LEN + 1 + MAX_PERIOD_KEY_LEN;

impl SeqName {
    /// The name of the row holding the counter of period `key` of this
    /// serial sequence: `name@key` (`name@` for a counter that never
    /// resets). Not a valid client name, by construction; `key` is digits.
    pub fn period_counter(&self, key: &str) -> SeqName {
        debug_assert!(key.len() <= MAX_PERIOD_KEY_LEN && key.bytes().all(|b| b.is_ascii_digit()));
        let mut s = String::with_capacity(self.0.len() + 1 + key.len());
        s.push_str(&self.0);
        s.push(PERIOD_SEPARATOR);
        s.push_str(key);
        SeqName(Arc::from(s))
    }

    /// For a counter row's name, the sequence and the period key.
    pub fn split_period(&self) -> Option<(&str, &str)> {
        self.0.split_once(PERIOD_SEPARATOR)
    }
}

/// Whether a stored row name is a period counter (`name@key`) rather than a
/// sequence.
pub fn is_period_counter(row_name: &str) -> bool {
    row_name.contains(PERIOD_SEPARATOR)
}

/// The counter rows of serial sequence `parent`, as a range of names in
/// byte order: `[parent@, parent@:)` (keys are digits, and `:` follows `9`),
/// which the index on the names serves.
pub fn period_rows_range(parent: &SeqName) -> (String, String) {
    let low = format!("{}{PERIOD_SEPARATOR}", parent.as_str());
    let high = format!("{low}:");
    (low, high)
}

/// Checks `1 <= step <= max_step`.
pub fn validate_step(step: i64, max_step: i64) -> Result<i64, ParseError> {
    if (1..=max_step).contains(&step) {
        Ok(step)
    } else {
        Err(ParseError::Step { max: max_step })
    }
}

/// Checks that a description fits the column and holds no control
/// character (C0, DEL or C1: what [`char::is_control`] matches). The one
/// check of descriptions, for the API and the CLI alike.
pub fn validate_description(d: &str) -> Result<(), ParseError> {
    if let Some((i, c)) = d.chars().enumerate().find(|(_, c)| c.is_control()) {
        return Err(ParseError::DescriptionControl {
            code: u32::from(c),
            at: i + 1,
        });
    }
    if d.chars().count() <= MAX_DESCRIPTION_LEN {
        Ok(())
    } else {
        Err(ParseError::Description)
    }
}

/// `s` with its control characters escaped (`\n`, `\u{1b}`), for terminal
/// output of text read from the database, where rows inserted by SQL may
/// hold what the API refuses. Borrows when there is nothing to escape.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_accepts_the_documented_alphabet() {
        for ok in [
            "a",
            "order",
            "Order-2024",
            "biz:order.v1_x",
            &"a".repeat(128),
        ] {
            assert!(SeqName::parse(ok).is_ok(), "{ok:?} should parse");
        }
    }

    #[test]
    fn name_rejects_everything_else() {
        let long = "a".repeat(129);
        for bad in [
            "", "-a", ".a", "_a", "a b", "a/b", "../x", "é", "a\0", "a;drop", &long,
        ] {
            assert_eq!(
                SeqName::parse(bad),
                Err(ParseError::Name),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn a_borrowed_name_follows_the_same_rule_and_converts_both_ways() {
        for s in ["a", "biz:order.v1_x", "", "-a", "a b", "é"] {
            assert_eq!(
                SeqNameRef::parse(s).map(SeqNameRef::to_owned),
                SeqName::parse(s),
                "{s:?}"
            );
        }
        let owned = SeqName::parse("order").unwrap();
        let borrowed = SeqNameRef::from(&owned);
        assert_eq!(borrowed.as_str(), "order");
        assert_eq!(borrowed.to_owned(), owned);
        assert_eq!(format!("{borrowed} {borrowed:?}"), "order \"order\"");
    }

    #[test]
    fn count_bounds_are_inclusive() {
        assert!(Count::parse("1").is_ok());
        assert!(Count::parse("10000").is_ok());
        for bad in ["0", "10001", "-1", "1e3", "abc", "", " 5"] {
            assert_eq!(Count::parse(bad), Err(ParseError::Count), "{bad:?}");
        }
    }

    #[test]
    fn descriptions_refuse_c0_del_and_c1_controls_and_say_where() {
        for ok in ["", "order IDs", "ünïcode ✓", "tabs\u{a0}nbsp", "\u{200b}"] {
            assert_eq!(validate_description(ok), Ok(()), "{ok:?}");
        }
        for (bad, code, at) in [
            ("a\0b", 0, 2),
            ("\t", 9, 1),
            ("line\n", 10, 5),
            ("x\u{1b}[2J", 0x1b, 2),
            ("del\u{7f}", 0x7f, 4),
            ("é\u{85}", 0x85, 2),
            ("\u{9f}", 0x9f, 1),
        ] {
            let e = validate_description(bad).unwrap_err();
            assert_eq!(e, ParseError::DescriptionControl { code, at }, "{bad:?}");
            assert!(e.to_string().contains("control character"), "{e}");
        }
    }

    #[test]
    fn escape_controls_escapes_only_controls_and_borrows_clean_text() {
        assert!(matches!(
            escape_controls("plain \\ \"é\""),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            escape_controls("a\u{1b}[31m\n\0\u{9b}\u{7f}z"),
            r"a\u{1b}[31m\n\0\u{9b}\u{7f}z"
        );
    }

    #[test]
    fn a_prefix_is_a_name_start_of_1_to_128_characters() {
        for ok in ["a", "A", "0", "a.", "a-", "a:", "a_", &"z".repeat(128)] {
            assert_eq!(NamePrefix::parse(ok).unwrap().as_str(), ok);
        }
        for bad in ["", ".", "-a", "_", "a b", "a{", "é", &"z".repeat(129)] {
            assert_eq!(NamePrefix::parse(bad), Err(ParseError::Prefix), "{bad:?}");
        }
    }

    /// `prefix <= n < prefix{` in byte order exactly when `n` starts with
    /// `prefix`: every name of up to 3 characters over the alphabet's edges
    /// (the lowest and highest of each class) against every prefix of up to
    /// 2 characters over it.
    #[test]
    fn the_upper_bound_selects_exactly_the_names_with_the_prefix() {
        let chars = ['-', '.', '0', '9', ':', 'A', 'Z', '_', 'a', 'z'];
        let mut names: Vec<String> = chars.iter().map(|c| c.to_string()).collect();
        for _ in 1..3 {
            let longer: Vec<String> = names
                .iter()
                .filter(|n| n.len() == names.last().unwrap().len())
                .flat_map(|n| chars.iter().map(move |c| format!("{n}{c}")))
                .collect();
            names.extend(longer);
        }
        names.retain(|n| SeqName::parse(n).is_ok());
        let prefixes: Vec<NamePrefix> = names
            .iter()
            .filter(|n| n.len() <= 2)
            .map(|n| NamePrefix::parse(n).unwrap())
            .collect();
        assert_eq!((names.len(), prefixes.len()), (6 * 111, 6 * 11));
        for p in &prefixes {
            let upper = p.upper_bound();
            for n in &names {
                let in_range = p.as_str() <= n.as_str() && n.as_str() < upper.as_str();
                assert_eq!(in_range, p.matches(n), "prefix {p:?}, name {n:?}");
            }
        }
    }
}
