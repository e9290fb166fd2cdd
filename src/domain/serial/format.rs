//! The `format` of a serial number, its `reset` period and its `overflow`
//! rule, parsed once (docs/design.md, "Serial numbers"), and the
//! rendering of one serial from a civil date and a counter.
//!
//! A format is literal text (ASCII letters, digits, `-_./:#`) and the tokens
//! `{yyyy}` `{yy}` `{MM}` `{dd}` `{seq}` `{seq:0N}` (1 <= N <= 18), with
//! exactly one counter token: `ORD{yyyy}{MM}{dd}{seq:06}`.

use std::fmt::{self, Write as _};
use std::str::FromStr;

use jiff::civil::Date;

use super::error::SerialError;
use super::words::{Overflow, Reset};

/// The widest `{seq:0N}`: 10^18 - 1 still fits an `i64` counter.
pub const MAX_WIDTH: u8 = 18;

/// One piece of a parsed format, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Text copied as is (never empty; adjacent characters are one part).
    Literal(String),
    /// `{yyyy}`: the year, four digits.
    Year4,
    /// `{yy}`: the year's last two digits.
    Year2,
    /// `{MM}`: the month, 01 to 12.
    Month,
    /// `{dd}`: the day of the month, 01 to 31.
    Day,
    /// `{seq}` (width `None`: the counter as is) or `{seq:0N}` (zero-padded
    /// to N digits).
    Seq {
        /// `N` of `{seq:0N}`; `None` for `{seq}`.
        width: Option<u8>,
    },
}

/// A validated format: made only by [`SerialFormat::parse`] (or `FromStr`),
/// so it always holds exactly one [`Part::Seq`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SerialFormat {
    parts: Vec<Part>,
}

/// The counter no longer fits `{seq:0N}` and the overflow rule is `refuse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "serial exhausted: counter {counter} does not fit {{seq:0{width}}} \
     (at most {capacity} in a period)"
)]
pub struct Exhausted {
    /// The counter that did not fit.
    pub counter: u64,
    /// N of `{seq:0N}`.
    pub width: u8,
    /// The largest counter that fits, 10^N - 1.
    pub capacity: u64,
}

impl SerialFormat {
    /// Parses and validates a format; the error names the first problem and
    /// its position.
    pub fn parse(format: &str) -> Result<SerialFormat, SerialError> {
        let chars: Vec<char> = format.chars().collect();
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut seq_at: Option<usize> = None;
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            match c {
                '{' => {
                    let close = token_end(&chars, i)?;
                    let token: String = chars[i..=close].iter().collect();
                    let part = parse_token(&token, i)?;
                    if let Part::Seq { .. } = part {
                        if let Some(first) = seq_at {
                            return Err(SerialError::SecondSeq { position: i, first });
                        }
                        seq_at = Some(i);
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Literal(std::mem::take(&mut literal)));
                    }
                    parts.push(part);
                    i = close + 1;
                }
                c if is_literal(c) => {
                    literal.push(c);
                    i += 1;
                }
                character => {
                    return Err(SerialError::ForbiddenCharacter {
                        character,
                        position: i,
                    })
                }
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        if seq_at.is_none() {
            return Err(SerialError::MissingSeq);
        }
        Ok(SerialFormat { parts })
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// N of `{seq:0N}`, or `None` for a plain `{seq}`.
    pub fn width(&self) -> Option<u8> {
        self.parts.iter().find_map(|p| match p {
            Part::Seq { width } => *width,
            _ => None,
        })
    }

    /// The largest counter `{seq:0N}` holds, 10^N - 1; `None` for a plain
    /// `{seq}`, which never runs out.
    pub fn capacity(&self) -> Option<u64> {
        self.width().map(capacity_of)
    }

    /// Whether the format holds `{yyyy}` or `{yy}`, `{MM}`, `{dd}`.
    fn has(&self, wanted: &[Part]) -> bool {
        self.parts.iter().any(|p| wanted.contains(p))
    }

    /// Checks that the format contains the date tokens of `reset`'s period
    /// (a year token for `year`; also `{MM}` for `month`; also `{dd}` for
    /// `day`), else serials would repeat from one period to the next.
    pub fn check_reset(&self, reset: Reset) -> Result<(), SerialError> {
        let year = self.has(&[Part::Year4, Part::Year2]);
        let month = self.has(&[Part::Month]);
        let day = self.has(&[Part::Day]);
        let (needs, wanted): (&'static str, &[(bool, &str)]) = match reset {
            Reset::Never => return Ok(()),
            Reset::Year => ("{yyyy} or {yy}", &[(year, "{yyyy} or {yy}")]),
            Reset::Month => (
                "{yyyy} or {yy}, and {MM}",
                &[(year, "{yyyy} or {yy}"), (month, "{MM}")],
            ),
            Reset::Day => (
                "{yyyy} or {yy}, {MM} and {dd}",
                &[(year, "{yyyy} or {yy}"), (month, "{MM}"), (day, "{dd}")],
            ),
        };
        let missing: Vec<&str> = wanted
            .iter()
            .filter(|(present, _)| !present)
            .map(|(_, token)| *token)
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(SerialError::MissingDateToken {
                reset,
                needs,
                missing: missing.join(", "),
            })
        }
    }

    /// One serial: the date tokens from `date` (the civil date of the
    /// counter's period, never a second clock reading), the counter
    /// zero-padded to N digits for `{seq:0N}`. A counter of more than N
    /// digits is [`Exhausted`] under [`Overflow::Refuse`] and printed in full
    /// under [`Overflow::Widen`]; a plain `{seq}` never runs out.
    pub fn render(
        &self,
        date: Date,
        counter: u64,
        overflow: Overflow,
    ) -> Result<String, Exhausted> {
        if let Some(width) = self.width() {
            let capacity = capacity_of(width);
            if counter > capacity && overflow == Overflow::Refuse {
                return Err(Exhausted {
                    counter,
                    width,
                    capacity,
                });
            }
        }
        let mut out = String::with_capacity(32);
        for part in &self.parts {
            // Writing to a String cannot fail.
            let _ = match part {
                Part::Literal(text) => out.write_str(text),
                Part::Year4 => write!(out, "{:04}", date.year()),
                Part::Year2 => write!(out, "{:02}", date.year().rem_euclid(100)),
                Part::Month => write!(out, "{:02}", date.month()),
                Part::Day => write!(out, "{:02}", date.day()),
                Part::Seq { width: None } => write!(out, "{counter}"),
                Part::Seq { width: Some(w) } => write!(out, "{counter:0w$}", w = *w as usize),
            };
        }
        Ok(out)
    }
}

impl FromStr for SerialFormat {
    type Err = SerialError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SerialFormat::parse(s)
    }
}

/// The format as written, in its canonical spelling (`parse(display)` gives
/// the same format back).
impl fmt::Display for SerialFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.parts {
            match part {
                Part::Literal(text) => f.write_str(text)?,
                Part::Year4 => f.write_str("{yyyy}")?,
                Part::Year2 => f.write_str("{yy}")?,
                Part::Month => f.write_str("{MM}")?,
                Part::Day => f.write_str("{dd}")?,
                Part::Seq { width: None } => f.write_str("{seq}")?,
                Part::Seq { width: Some(w) } => write!(f, "{{seq:0{w}}}")?,
            }
        }
        Ok(())
    }
}

/// 10^width - 1 (width <= 18, so no overflow).
fn capacity_of(width: u8) -> u64 {
    10u64.pow(u32::from(width)) - 1
}

fn is_literal(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | ':' | '#')
}

/// The index of the `}` closing the `{` at `open`; a `{` met first, or the
/// end of the format, leaves `open` unclosed.
fn token_end(chars: &[char], open: usize) -> Result<usize, SerialError> {
    for (i, c) in chars.iter().enumerate().skip(open + 1) {
        match c {
            '}' => return Ok(i),
            '{' => break,
            _ => {}
        }
    }
    Err(SerialError::Unclosed { position: open })
}

/// One `{...}` token (braces included) starting at `position`.
fn parse_token(token: &str, position: usize) -> Result<Part, SerialError> {
    let inner = &token[1..token.len() - 1];
    match inner {
        "yyyy" => return Ok(Part::Year4),
        "yy" => return Ok(Part::Year2),
        "MM" => return Ok(Part::Month),
        "dd" => return Ok(Part::Day),
        "seq" => return Ok(Part::Seq { width: None }),
        _ => {}
    }
    let Some(spec) = inner.strip_prefix("seq:") else {
        return Err(SerialError::UnknownToken {
            token: token.to_owned(),
            position,
        });
    };
    let malformed = || SerialError::MalformedWidth {
        token: token.to_owned(),
        position,
    };
    let digits = spec.strip_prefix('0').ok_or_else(malformed)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed());
    }
    // Saturates on absurd widths so the error can still say the number.
    let width = digits.bytes().fold(0u64, |n, b| {
        n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    });
    if width == 0 || width > u64::from(MAX_WIDTH) {
        return Err(SerialError::WidthOutOfRange { width, position });
    }
    Ok(Part::Seq {
        width: Some(width as u8),
    })
}

#[cfg(test)]
mod tests {
    use jiff::civil::date;
    use proptest::prelude::*;

    use super::*;

    fn parse_err(format: &str) -> SerialError {
        SerialFormat::parse(format).unwrap_err()
    }

    #[test]
    fn a_daily_order_format_parses_into_its_parts() {
        let f = SerialFormat::parse("ORD-{yyyy}{MM}{dd}/{seq:06}").unwrap();
        assert_eq!(
            f.parts(),
            &[
                Part::Literal("ORD-".into()),
                Part::Year4,
                Part::Month,
                Part::Day,
                Part::Literal("/".into()),
                Part::Seq { width: Some(6) },
            ]
        );
        assert_eq!(f.to_string(), "ORD-{yyyy}{MM}{dd}/{seq:06}");
    }

    #[test]
    fn every_allowed_literal_character_is_kept() {
        let f = SerialFormat::parse("aZ09-_./:#{yy}{seq}").unwrap();
        assert_eq!(f.parts()[0], Part::Literal("aZ09-_./:#".into()));
        assert_eq!(f.parts()[1], Part::Year2);
    }

    #[test]
    fn an_unknown_token_is_named_with_its_position() {
        let e = parse_err("AB{hh}{seq}");
        assert_eq!(
            e,
            SerialError::UnknownToken {
                token: "{hh}".into(),
                position: 2
            }
        );
        assert!(e.to_string().contains("`{hh}` at position 2"), "{e}");
    }

    #[test]
    fn tokens_are_case_sensitive() {
        assert!(matches!(
            parse_err("{mm}{seq}"),
            SerialError::UnknownToken { .. }
        ));
        assert!(matches!(
            parse_err("{YYYY}{seq}"),
            SerialError::UnknownToken { .. }
        ));
        assert!(matches!(
            parse_err("{SEQ}"),
            SerialError::UnknownToken { .. }
        ));
    }

    #[test]
    fn a_second_seq_is_refused_whatever_its_width() {
        assert_eq!(
            parse_err("{seq}-{seq}"),
            SerialError::SecondSeq {
                position: 6,
                first: 0
            }
        );
        assert_eq!(
            parse_err("A{seq:04}{seq}"),
            SerialError::SecondSeq {
                position: 9,
                first: 1
            }
        );
        assert!(parse_err("{seq}{seq:02}")
            .to_string()
            .contains("exactly one"));
    }

    #[test]
    fn a_format_without_seq_is_refused() {
        assert_eq!(parse_err("ORD{yyyy}"), SerialError::MissingSeq);
        assert_eq!(parse_err(""), SerialError::MissingSeq);
    }

    #[test]
    fn widths_from_1_to_18_are_accepted() {
        for n in 1..=18u8 {
            let f = SerialFormat::parse(&format!("{{seq:0{n}}}")).unwrap();
            assert_eq!(f.width(), Some(n));
        }
    }

    #[test]
    fn a_width_of_0_or_over_18_is_refused() {
        assert_eq!(
            parse_err("X{seq:00}"),
            SerialError::WidthOutOfRange {
                width: 0,
                position: 1
            }
        );
        assert_eq!(
            parse_err("{seq:019}"),
            SerialError::WidthOutOfRange {
                width: 19,
                position: 0
            }
        );
        let e = parse_err("{seq:099999999999999999999999}");
        assert!(matches!(
            e,
            SerialError::WidthOutOfRange {
                width: u64::MAX,
                ..
            }
        ));
        assert!(parse_err("{seq:019}").to_string().contains("1 <= N <= 18"));
    }

    #[test]
    fn a_width_not_written_0n_is_malformed() {
        for bad in [
            "{seq:6}",
            "{seq:0}",
            "{seq:}",
            "{seq:0x}",
            "{seq:0-1}",
            "{seq:06 }",
        ] {
            assert!(
                matches!(
                    parse_err(bad),
                    SerialError::MalformedWidth { position: 0, .. }
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_forbidden_character_is_named_with_its_position() {
        assert_eq!(
            parse_err("OR D{seq}"),
            SerialError::ForbiddenCharacter {
                character: ' ',
                position: 2
            }
        );
        assert_eq!(
            parse_err("{seq}}"),
            SerialError::ForbiddenCharacter {
                character: '}',
                position: 5
            }
        );
        // Positions count characters, not bytes.
        assert_eq!(
            parse_err("é{seq}%"),
            SerialError::ForbiddenCharacter {
                character: 'é',
                position: 0
            }
        );
        for c in ['%', '+', '?', '&', '\n', '"', '\''] {
            let e = parse_err(&format!("A{c}{{seq}}"));
            assert_eq!(
                e,
                SerialError::ForbiddenCharacter {
                    character: c,
                    position: 1
                }
            );
        }
    }

    #[test]
    fn an_unclosed_brace_is_named_with_its_position() {
        assert_eq!(parse_err("AB{seq"), SerialError::Unclosed { position: 2 });
        assert_eq!(parse_err("{yy{seq}"), SerialError::Unclosed { position: 0 });
        assert_eq!(parse_err("{seq}{"), SerialError::Unclosed { position: 5 });
        assert!(parse_err("{").to_string().contains("not closed"));
    }

    #[test]
    fn a_daily_reset_needs_a_year_the_month_and_the_day() {
        let f = |s: &str| SerialFormat::parse(s).unwrap();
        assert!(f("{yyyy}{MM}{dd}{seq}").check_reset(Reset::Day).is_ok());
        assert!(f("{yy}{MM}{dd}{seq}").check_reset(Reset::Day).is_ok());
        let e = f("{yyyy}{MM}{seq:04}").check_reset(Reset::Day).unwrap_err();
        assert_eq!(
            e,
            SerialError::MissingDateToken {
                reset: Reset::Day,
                needs: "{yyyy} or {yy}, {MM} and {dd}",
                missing: "{dd}".into()
            }
        );
        assert!(e.to_string().contains("missing: {dd}"), "{e}");
        assert!(e.to_string().contains("every day"), "{e}");
        let e = f("ORD{seq}").check_reset(Reset::Day).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("missing: {yyyy} or {yy}, {MM}, {dd}"),
            "{e}"
        );
    }

    #[test]
    fn a_monthly_reset_needs_a_year_and_the_month() {
        let f = |s: &str| SerialFormat::parse(s).unwrap();
        assert!(f("{yy}{MM}{seq}").check_reset(Reset::Month).is_ok());
        let e = f("{MM}{dd}{seq}").check_reset(Reset::Month).unwrap_err();
        assert!(e.to_string().ends_with("missing: {yyyy} or {yy}"), "{e}");
        let e = f("{yyyy}{seq}").check_reset(Reset::Month).unwrap_err();
        assert!(e.to_string().ends_with("missing: {MM}"), "{e}");
    }

    #[test]
    fn a_yearly_reset_needs_a_year_and_never_needs_nothing() {
        let f = |s: &str| SerialFormat::parse(s).unwrap();
        assert!(f("{yy}{seq}").check_reset(Reset::Year).is_ok());
        assert!(f("{yyyy}{seq}").check_reset(Reset::Year).is_ok());
        let e = f("{MM}{dd}{seq}").check_reset(Reset::Year).unwrap_err();
        assert!(e.to_string().ends_with("missing: {yyyy} or {yy}"), "{e}");
        assert!(f("{seq}").check_reset(Reset::Never).is_ok());
    }

    #[test]
    fn rendering_pads_the_counter_and_prints_the_date() {
        let f = SerialFormat::parse("ORD{yyyy}{MM}{dd}{seq:06}").unwrap();
        let d = date(2026, 3, 8);
        assert_eq!(
            f.render(d, 123, Overflow::Refuse).unwrap(),
            "ORD20260308000123"
        );
        assert_eq!(
            f.render(d, 0, Overflow::Refuse).unwrap(),
            "ORD20260308000000"
        );
        let f = SerialFormat::parse("{yy}.{MM}.{dd}-{seq}").unwrap();
        assert_eq!(
            f.render(date(2028, 2, 29), 7, Overflow::Refuse).unwrap(),
            "28.02.29-7"
        );
        assert_eq!(
            f.render(date(2000, 12, 1), 7, Overflow::Refuse).unwrap(),
            "00.12.01-7"
        );
    }

    #[test]
    fn a_counter_wider_than_n_is_exhausted_under_refuse_and_printed_under_widen() {
        let f = SerialFormat::parse("A{seq:03}").unwrap();
        let d = date(2026, 1, 1);
        assert_eq!(f.capacity(), Some(999));
        assert_eq!(f.render(d, 999, Overflow::Refuse).unwrap(), "A999");
        let e = f.render(d, 1000, Overflow::Refuse).unwrap_err();
        assert_eq!(
            e,
            Exhausted {
                counter: 1000,
                width: 3,
                capacity: 999
            }
        );
        assert!(e.to_string().contains("{seq:03}"), "{e}");
        assert_eq!(f.render(d, 1000, Overflow::Widen).unwrap(), "A1000");
        assert_eq!(f.render(d, 42, Overflow::Widen).unwrap(), "A042");
    }

    #[test]
    fn a_plain_seq_never_runs_out() {
        let f = SerialFormat::parse("{seq}").unwrap();
        assert_eq!(f.capacity(), None);
        assert_eq!(f.width(), None);
        assert_eq!(
            f.render(date(2026, 1, 1), u64::MAX, Overflow::Refuse)
                .unwrap(),
            u64::MAX.to_string()
        );
    }

    #[test]
    fn capacity_is_ten_to_the_n_minus_one() {
        let cap = |n: u8| {
            SerialFormat::parse(&format!("{{seq:0{n}}}"))
                .unwrap()
                .capacity()
        };
        assert_eq!(cap(1), Some(9));
        assert_eq!(cap(6), Some(999_999));
        assert_eq!(cap(18), Some(999_999_999_999_999_999));
    }

    fn part() -> impl Strategy<Value = String> {
        prop_oneof![
            "[A-Za-z0-9_./:#-]{1,4}",
            Just("{yyyy}".to_owned()),
            Just("{yy}".to_owned()),
            Just("{MM}".to_owned()),
            Just("{dd}".to_owned()),
        ]
    }

    proptest! {
        /// Any format built from valid pieces parses, prints back to an
        /// equivalent format, and renders a padded counter of exactly N
        /// digits while it fits.
        #[test]
        fn valid_formats_parse_print_back_and_pad(
            before in proptest::collection::vec(part(), 0..4),
            after in proptest::collection::vec(part(), 0..4),
            width in 1u8..=18,
            counter in any::<u64>(),
        ) {
            let source = format!("{}{{seq:0{width}}}{}", before.concat(), after.concat());
            let f = SerialFormat::parse(&source).unwrap();
            prop_assert_eq!(SerialFormat::parse(&f.to_string()).unwrap(), f.clone());
            let counter = counter % (f.capacity().unwrap() + 1);
            let plain = SerialFormat::parse(&format!(
                "{}{{seq}}{}", before.concat(), after.concat()
            )).unwrap();
            let d = date(2026, 11, 30);
            let padded = f.render(d, counter, Overflow::Refuse).unwrap();
            let unpadded = plain.render(d, counter, Overflow::Refuse).unwrap();
            let digits = counter.to_string().len();
            prop_assert_eq!(padded.len(), unpadded.len() - digits + width as usize);
        }

        /// Parsing never panics, whatever the input.
        #[test]
        fn parsing_arbitrary_text_never_panics(s in "\\PC{0,40}") {
            let _ = SerialFormat::parse(&s);
        }
    }
}
