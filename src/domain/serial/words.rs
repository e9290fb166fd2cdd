//! The words of a serial sequence's settings: [`Reset`] (when its counter
//! starts again) and [`Overflow`] (what a counter too wide for `{seq:0N}`
//! does), as the API and the `sequences` columns spell them.

use std::fmt;
use std::str::FromStr;

/// A `reset` that is not `never`, `day`, `month` or `year`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown reset `{0}`: one of never, day, month, year")]
pub struct UnknownReset(pub String);

/// An `overflow` that is not `refuse` or `widen`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown overflow `{0}`: one of refuse, widen")]
pub struct UnknownOverflow(pub String);

/// An enum whose variants are the words of the API, each spelled once:
/// `as_str`, [`FromStr`] (refusing any other word with `$unknown`) and
/// [`fmt::Display`].
macro_rules! api_words {
    (
        $(#[$meta:meta])*
        pub enum $name:ident / $unknown:ident {
            $($(#[$vmeta:meta])* $variant:ident = $word:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            #[doc = concat!("The word of the API: ", $("`", $word, "` ",)+ ".")]
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl FromStr for $name {
            type Err = $unknown;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($word => Ok($name::$variant),)+
                    other => Err($unknown(other.to_owned())),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

api_words! {
    /// When the counter starts again at `start`.
    pub enum Reset / UnknownReset {
        /// One counter for the sequence's whole life.
        #[default]
        Never = "never",
        /// A counter per local calendar day.
        Day = "day",
        /// A counter per local calendar month.
        Month = "month",
        /// A counter per local calendar year.
        Year = "year",
    }
}

api_words! {
    /// What a counter wider than `{seq:0N}` does.
    pub enum Overflow / UnknownOverflow {
        /// The serial is refused ([`Exhausted`](super::format::Exhausted); 409 `serial_exhausted`).
        #[default]
        Refuse = "refuse",
        /// The counter is printed in full, wider than N.
        Widen = "widen",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_and_overflow_parse_from_their_words() {
        for r in [Reset::Never, Reset::Day, Reset::Month, Reset::Year] {
            assert_eq!(r.as_str().parse::<Reset>().unwrap(), r);
        }
        assert_eq!(Reset::default(), Reset::Never);
        assert_eq!(
            "hourly".parse::<Reset>().unwrap_err(),
            UnknownReset("hourly".into())
        );
        assert!("Day".parse::<Reset>().is_err());
        for o in [Overflow::Refuse, Overflow::Widen] {
            assert_eq!(o.as_str().parse::<Overflow>().unwrap(), o);
        }
        assert_eq!(Overflow::default(), Overflow::Refuse);
        assert_eq!(
            "wrap".parse::<Overflow>().unwrap_err(),
            UnknownOverflow("wrap".into())
        );
    }
}
