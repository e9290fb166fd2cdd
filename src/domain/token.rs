//! Client tokens as values (docs/design.md, "Client tokens"): a label, the
//! names a token covers, its rights, and the token itself, which seqd
//! shows once when it makes it and keeps only as a SHA-256.

use std::fmt;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use super::{NamePrefix, Secret, SeqNameRef};

/// What every token begins with.
pub const TOKEN_PREFIX: &str = "seqd_";

/// Random bytes in a token (shown as twice as many hex digits).
pub const TOKEN_BYTES: usize = 32;

/// Longest label, in bytes.
pub const MAX_LABEL_LEN: usize = 64;

/// Most name prefixes one token may cover.
pub const MAX_PREFIXES: usize = 64;

/// The labels the `seqd_ids_drawn_total{token}` series use for calls without
/// a client token; no client token may take them.
pub const RESERVED_LABELS: [&str; 2] = ["admin", "none"];

/// Why a token's field was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// A label that is not `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$` or is reserved.
    #[error(
        "invalid label: 1 to 64 characters of A-Z a-z 0-9 . _ -, beginning with a letter or a digit, \
         and not \"admin\" or \"none\""
    )]
    Label,
    /// A prefix that is neither `*` nor a valid name prefix.
    #[error("invalid prefix {0:?}: `*` (every name) or the beginning of a sequence name")]
    Prefix(String),
    /// No prefix, or more than [`MAX_PREFIXES`].
    #[error("a token covers 1 to 64 prefixes")]
    PrefixCount,
    /// A right other than `draw` and `read`, or none.
    #[error("invalid rights {0:?}: `draw`, `read` or `draw,read`")]
    Rights(String),
    /// A hash that is not 64 hex digits (a row written by SQL).
    #[error("invalid hash: 64 hex digits expected")]
    Hash,
}

/// A token's label: `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`, not reserved.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TokenLabel(String);

impl TokenLabel {
    /// Checks `s`.
    pub fn parse(s: &str) -> Result<Self, TokenError> {
        let b = s.as_bytes();
        let ok = b.first().is_some_and(u8::is_ascii_alphanumeric)
            && b.len() <= MAX_LABEL_LEN
            && b.iter()
                .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
            && !RESERVED_LABELS.contains(&s);
        ok.then(|| TokenLabel(s.to_owned()))
            .ok_or(TokenError::Label)
    }

    /// The label as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TokenLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The names a token covers: every name (`*`) or those beginning with one
/// of its prefixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every name.
    All,
    /// The names beginning with one of these.
    Prefixes(Vec<NamePrefix>),
}

impl Scope {
    /// Parses prefixes as given (`*` alone means every name).
    pub fn parse<S: AsRef<str>>(given: &[S]) -> Result<Self, TokenError> {
        if given.is_empty() || given.len() > MAX_PREFIXES {
            return Err(TokenError::PrefixCount);
        }
        // Every prefix is checked, `*` or not: a bad one beside `*` is refused too.
        let all = given.iter().any(|p| p.as_ref() == "*");
        let prefixes = given
            .iter()
            .filter(|p| p.as_ref() != "*")
            .map(|p| {
                NamePrefix::parse(p.as_ref()).map_err(|_| TokenError::Prefix(p.as_ref().into()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(if all {
            Scope::All
        } else {
            Scope::Prefixes(prefixes)
        })
    }

    /// Parses the column: prefixes joined by commas (no name holds one).
    pub fn from_column(s: &str) -> Result<Self, TokenError> {
        Scope::parse(&s.split(',').collect::<Vec<_>>())
    }

    /// The column: prefixes joined by commas, or `*`.
    pub fn to_column(&self) -> String {
        match self {
            Scope::All => "*".into(),
            Scope::Prefixes(p) => p
                .iter()
                .map(NamePrefix::as_str)
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// The prefixes as text (`["*"]` for every name).
    pub fn to_list(&self) -> Vec<String> {
        match self {
            Scope::All => vec!["*".into()],
            Scope::Prefixes(p) => p.iter().map(|p| p.as_str().to_owned()).collect(),
        }
    }

    /// Whether `name` is covered.
    #[inline]
    pub fn covers(&self, name: SeqNameRef<'_>) -> bool {
        match self {
            Scope::All => true,
            Scope::Prefixes(p) => p.iter().any(|p| p.matches(name.as_str())),
        }
    }

    /// The name ranges a list under `asked` (a caller's `prefix`, if any)
    /// may read for this scope: `None` when every name is covered (`asked`
    /// alone decides), otherwise the prefixes whose names are both covered
    /// and asked for, none the start of another, in byte order. Their
    /// ranges are disjoint and ascending, so reading them one after another
    /// is a walk in name order that never reads a name the scope does not
    /// cover.
    pub fn ranges(&self, asked: Option<&NamePrefix>) -> Option<Vec<NamePrefix>> {
        let Scope::Prefixes(own) = self else {
            return None;
        };
        let mut both: Vec<NamePrefix> = own
            .iter()
            .filter_map(|p| match asked {
                None => Some(p.clone()),
                Some(q) if q.matches(p.as_str()) => Some(p.clone()),
                Some(q) if p.matches(q.as_str()) => Some(q.clone()),
                Some(_) => None,
            })
            .collect();
        both.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        // Sorted, a prefix's extensions follow it directly.
        both.dedup_by(|later, kept| kept.matches(later.as_str()));
        Some(both)
    }
}

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rights {
    /// Draw IDs (every route and door that hands out IDs).
    pub draw: bool,
    /// List and read sequences.
    pub read: bool,
}

impl Rights {
    /// Parses `draw`, `read` or both, separated by commas.
    pub fn parse(s: &str) -> Result<Self, TokenError> {
        let mut rights = Rights::default();
        for part in s.split(',').map(str::trim) {
            match part {
                "draw" => rights.draw = true,
                "read" => rights.read = true,
                _ => return Err(TokenError::Rights(s.into())),
            }
        }
        Ok(rights)
    }

    /// The column: `draw`, `read` or `draw,read`.
    pub fn to_column(self) -> &'static str {
        match (self.draw, self.read) {
            (true, true) => "draw,read",
            (true, false) => "draw",
            (false, true) => "read",
            (false, false) => "",
        }
    }
}

/// The SHA-256 of a token's text: all that is stored of it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenHash(pub [u8; 32]);

impl TokenHash {
    /// The hash of `token` as presented.
    pub fn of(token: &str) -> Self {
        Self::of_bytes(token.as_bytes())
    }

    /// The hash of `token` as presented, in bytes (a door need not check
    /// that they are text).
    pub fn of_bytes(token: &[u8]) -> Self {
        TokenHash(Sha256::digest(token).into())
    }

    /// The column: 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Reads the column.
    pub fn from_hex(s: &str) -> Result<Self, TokenError> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(s.trim(), &mut out).map_err(|_| TokenError::Hash)?;
        Ok(TokenHash(out))
    }
}

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenHash({}…)", &self.to_hex()[..8])
    }
}

/// A token as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// Its unique label.
    pub label: TokenLabel,
    /// The SHA-256 of the token.
    pub hash: TokenHash,
    /// The names it covers.
    pub scope: Scope,
    /// What it may do.
    pub rights: Rights,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it stops working, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<DateTime<Utc>>,
}

impl TokenRecord {
    /// Whether it is in force at `now`: not revoked, not expired.
    pub fn in_force(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|e| now < e)
    }
}

/// A new random token: `seqd_` and 64 hex digits (32 bytes from the
/// operating system's generator).
pub fn new_token() -> Secret {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).expect("the operating system's random generator failed");
    Secret::new(format!("{TOKEN_PREFIX}{}", hex::encode(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_token_has_the_prefix_64_hex_digits_and_differs_each_time() {
        let (a, b) = (new_token(), new_token());
        let hex = a.expose().strip_prefix(TOKEN_PREFIX).unwrap();
        assert_eq!(hex.len(), 64);
        assert!(hex.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a.expose(), b.expose());
        assert_ne!(TokenHash::of(a.expose()), TokenHash::of(b.expose()));
    }

    #[test]
    fn the_hash_is_sha256_and_round_trips_as_hex() {
        // SHA-256("abc"), FIPS 180-2's first example.
        let h = TokenHash::of("abc");
        assert_eq!(
            h.to_hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(TokenHash::from_hex(&h.to_hex()).unwrap(), h);
        assert_eq!(TokenHash::from_hex("zz"), Err(TokenError::Hash));
    }

    #[test]
    fn scopes_cover_by_prefix_and_star_covers_all() {
        let s = Scope::parse(&["shop1-", "pay."]).unwrap();
        let n = |s| SeqNameRef::parse(s).unwrap();
        assert!(s.covers(n("shop1-order")));
        assert!(s.covers(n("pay.x")));
        assert!(!s.covers(n("shop2-order")));
        assert!(!s.covers(n("shop1")));
        assert_eq!(Scope::from_column(&s.to_column()).unwrap(), s);
        assert!(Scope::parse(&["*"]).unwrap().covers(n("anything")));
        assert_eq!(Scope::parse(&["*", "shop1-"]), Ok(Scope::All));
        assert!(matches!(
            Scope::parse(&["*", "bad prefix"]),
            Err(TokenError::Prefix(p)) if p == "bad prefix"
        ));
        assert_eq!(Scope::parse::<&str>(&[]), Err(TokenError::PrefixCount));
        assert!(matches!(
            Scope::parse(&["bad prefix"]),
            Err(TokenError::Prefix(_))
        ));
    }

    #[test]
    fn a_scope_ranges_are_what_it_covers_within_the_asked_prefix_disjoint_in_order() {
        let p = |s| NamePrefix::parse(s).unwrap();
        let strs = |r: Option<Vec<NamePrefix>>| {
            r.map(|v| v.iter().map(|p| p.as_str().to_owned()).collect::<Vec<_>>())
        };
        let s = Scope::parse(&["pay.", "order.", "order.eu", "ord", "x"]).unwrap();
        assert_eq!(
            strs(s.ranges(None)),
            Some(vec!["ord".into(), "pay.".into(), "x".into()])
        );
        assert_eq!(
            strs(s.ranges(Some(&p("order.e")))),
            Some(vec!["order.e".into()])
        );
        assert_eq!(strs(s.ranges(Some(&p("o")))), Some(vec!["ord".into()]));
        assert_eq!(strs(s.ranges(Some(&p("q")))), Some(vec![]));
        assert_eq!(Scope::All.ranges(Some(&p("q"))), None);
    }

    #[test]
    fn labels_and_rights_are_checked() {
        assert!(TokenLabel::parse("shop-1.v2_a").is_ok());
        for bad in ["", "-x", "a b", "admin", "none", &"x".repeat(65)] {
            assert_eq!(TokenLabel::parse(bad), Err(TokenError::Label), "{bad:?}");
        }
        assert_eq!(Rights::parse("read,draw").unwrap().to_column(), "draw,read");
        assert!(Rights::parse("write").is_err());
        assert!(Rights::parse("").is_err());
    }
}
