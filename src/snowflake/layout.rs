//! The bit layout of a snowflake ID and its encoding.
//!
//! ```text
//!  63  62 ........................ 22 21 ......... 12 11 ......... 0
//! [0 ][ timestamp: time units since epoch ][ worker ID ][ sequence ]
//!       41 bits (default)                    10 bits      12 bits
//! ```
//!
//! The sign bit is always 0, so IDs are positive `i64`s and sort by time,
//! then worker, then sequence. The split is configurable (`--snowflake-bits`,
//! e.g. `36/5/22` with `--snowflake-time-unit 1s`); the three parts must sum
//! to 63.

use std::fmt;
use std::str::FromStr;

/// Default epoch: 2024-01-01T00:00:00Z, in milliseconds since the Unix epoch.
pub const DEFAULT_EPOCH_MS: i64 = 1_704_067_200_000;

/// Most worker bits accepted: 65,536 worker IDs (one row each in `workers`).
pub const MAX_WORKER_BITS: u8 = 16;

/// How the 63 value bits are split: timestamp / worker ID / sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bits {
    /// Bits of the timestamp (time units since the epoch).
    pub time: u8,
    /// Bits of the worker ID.
    pub worker: u8,
    /// Bits of the per-time-unit sequence.
    pub sequence: u8,
}

impl Default for Bits {
    fn default() -> Self {
        Bits {
            time: 41,
            worker: 10,
            sequence: 12,
        }
    }
}

impl fmt::Display for Bits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.time, self.worker, self.sequence)
    }
}

impl Bits {
    /// Checks the split: 63 bits in all, at least one of time and sequence,
    /// at most [`MAX_WORKER_BITS`] of worker.
    pub fn validate(self) -> Result<Self, LayoutError> {
        let sum = self.time as u32 + self.worker as u32 + self.sequence as u32;
        if sum != 63 {
            return Err(LayoutError::BitsSum(self, sum));
        }
        if self.time == 0 || self.sequence == 0 {
            return Err(LayoutError::ZeroPart(self));
        }
        if self.worker > MAX_WORKER_BITS {
            return Err(LayoutError::TooManyWorkerBits(self.worker));
        }
        Ok(self)
    }
}

impl FromStr for Bits {
    type Err = LayoutError;

    /// Parses `time/worker/sequence`, e.g. `41/10/12`, and validates it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = s.split('/').map(str::trim).collect();
        let bad = || LayoutError::BitsSyntax(s.to_string());
        let [t, w, q] = parts.as_slice() else {
            return Err(bad());
        };
        let n = |p: &str| p.parse::<u8>().map_err(|_| bad());
        Bits {
            time: n(t)?,
            worker: n(w)?,
            sequence: n(q)?,
        }
        .validate()
    }
}

/// A layout that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// Not `time/worker/sequence`.
    #[error("snowflake bits {0:?}: expected time/worker/sequence, e.g. 41/10/12")]
    BitsSyntax(String),
    /// The parts do not sum to 63.
    #[error("snowflake bits {0}: the parts must sum to 63 (the sign bit is the 64th), not {1}")]
    BitsSum(Bits, u32),
    /// No time or no sequence bits.
    #[error("snowflake bits {0}: time and sequence need at least one bit each")]
    ZeroPart(Bits),
    /// Too many worker bits.
    #[error("snowflake bits: {0} worker bits is more than the {MAX_WORKER_BITS} supported")]
    TooManyWorkerBits(u8),
    /// The time unit is not a whole number of milliseconds in 1 ms ..= 1 day.
    #[error("snowflake time unit must be a whole number of milliseconds between 1ms and 1 day")]
    Unit,
    /// The epoch is before 1970 or in the future.
    #[error("snowflake epoch {0} must be in the past (and not before 1970)")]
    Epoch(String),
    /// The timestamp field is already full.
    #[error("snowflake timestamps ran out at {0}: choose a later epoch, more time bits or a coarser time unit")]
    RanOut(String),
}

/// A validated layout: bit split, time unit and epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    bits: Bits,
    unit_ms: i64,
    epoch_ms: i64,
}

impl Default for Layout {
    /// 41/10/12, milliseconds since 2024-01-01T00:00:00Z.
    fn default() -> Self {
        Layout {
            bits: Bits::default(),
            unit_ms: 1,
            epoch_ms: DEFAULT_EPOCH_MS,
        }
    }
}

/// The parts of an ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    /// Time units since the layout's epoch.
    pub timestamp: i64,
    /// The worker ID.
    pub worker: u32,
    /// The sequence within the time unit.
    pub sequence: u64,
}

impl Layout {
    /// A layout; `now_ms` (wall clock) checks the epoch is past and the
    /// timestamp field not yet full.
    pub fn new(bits: Bits, unit_ms: i64, epoch_ms: i64, now_ms: i64) -> Result<Self, LayoutError> {
        let bits = bits.validate()?;
        if !(1..=86_400_000).contains(&unit_ms) {
            return Err(LayoutError::Unit);
        }
        if epoch_ms < 0 || epoch_ms > now_ms {
            return Err(LayoutError::Epoch(iso_ms(epoch_ms)));
        }
        let layout = Layout {
            bits,
            unit_ms,
            epoch_ms,
        };
        if layout.unit_at(now_ms) > layout.max_timestamp() {
            return Err(LayoutError::RanOut(iso_ms(layout.runs_out_at_ms())));
        }
        Ok(layout)
    }

    /// The bit split.
    pub fn bits(&self) -> Bits {
        self.bits
    }

    /// Milliseconds per time unit.
    pub fn unit_ms(&self) -> i64 {
        self.unit_ms
    }

    /// The epoch, in milliseconds since the Unix epoch.
    pub fn epoch_ms(&self) -> i64 {
        self.epoch_ms
    }

    /// How many worker IDs there are (`2^worker_bits`).
    pub fn worker_count(&self) -> u32 {
        1u32 << self.bits.worker
    }

    /// The largest sequence number in one time unit.
    pub fn max_sequence(&self) -> u64 {
        (1u64 << self.bits.sequence) - 1
    }

    /// The largest timestamp the field holds.
    pub fn max_timestamp(&self) -> i64 {
        ((1u64 << self.bits.time) - 1) as i64
    }

    /// The time unit containing `ms` (negative before the epoch).
    pub fn unit_at(&self, ms: i64) -> i64 {
        (ms - self.epoch_ms).div_euclid(self.unit_ms)
    }

    /// First millisecond of time unit `t` (saturating).
    pub fn unit_start_ms(&self, t: i64) -> i64 {
        let ms = self.epoch_ms as i128 + t as i128 * self.unit_ms as i128;
        ms.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// Last millisecond of time unit `t` (saturating).
    pub fn unit_end_ms(&self, t: i64) -> i64 {
        self.unit_start_ms(t.saturating_add(1)).saturating_sub(1)
    }

    /// The first millisecond whose time unit no longer fits the field.
    pub fn runs_out_at_ms(&self) -> i64 {
        self.unit_start_ms(self.max_timestamp().saturating_add(1))
    }

    /// The ID of (`timestamp`, `worker`, `sequence`). The parts must fit
    /// their fields (checked in debug builds).
    pub fn encode(&self, timestamp: i64, worker: u32, sequence: u64) -> i64 {
        debug_assert!(
            (0..=self.max_timestamp()).contains(&timestamp),
            "timestamp {timestamp}"
        );
        debug_assert!(worker < self.worker_count(), "worker {worker}");
        debug_assert!(sequence <= self.max_sequence(), "sequence {sequence}");
        let shift_t = self.bits.worker + self.bits.sequence;
        ((timestamp as u64) << shift_t | (worker as u64) << self.bits.sequence | sequence) as i64
    }

    /// The parts of `id`; `None` for a negative number (never an ID).
    pub fn decode(&self, id: i64) -> Option<Decoded> {
        if id < 0 {
            return None;
        }
        let id = id as u64;
        let shift_t = self.bits.worker + self.bits.sequence;
        Some(Decoded {
            timestamp: (id >> shift_t) as i64,
            worker: ((id >> self.bits.sequence) & ((1u64 << self.bits.worker) - 1)) as u32,
            sequence: id & self.max_sequence(),
        })
    }

    /// `41/10/12 bits, 1ms units since 2024-01-01T00:00:00.000Z`.
    pub fn describe(&self) -> String {
        format!(
            "{} bits, {}ms units since {}",
            self.bits,
            self.unit_ms,
            iso_ms(self.epoch_ms)
        )
    }
}

/// RFC 3339 UTC with milliseconds, e.g. `2024-01-01T00:00:00.000Z`.
pub fn iso_ms(ms: i64) -> String {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        None => format!("{ms} ms since the Unix epoch"),
    }
}

/// Parses an RFC 3339 time (`2024-01-01T00:00:00Z`) into milliseconds since
/// the Unix epoch.
pub fn parse_epoch(s: &str) -> Result<i64, String> {
    chrono::DateTime::parse_from_rfc3339(s.trim())
        .map(|t| t.timestamp_millis())
        .map_err(|e| format!("{s:?} is not an RFC 3339 time such as 2024-01-01T00:00:00Z: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_750_000_000_000;

    #[test]
    fn default_layout_is_41_10_12_ms_since_2024() {
        let l = Layout::default();
        assert_eq!(
            l,
            Layout::new(
                Bits::default(),
                1,
                parse_epoch("2024-01-01T00:00:00Z").unwrap(),
                NOW
            )
            .unwrap()
        );
        assert_eq!(l.worker_count(), 1024);
        assert_eq!(l.max_sequence(), 4095);
        // 2^41 ms is about 69.7 years.
        assert!(
            iso_ms(l.runs_out_at_ms()).starts_with("2093-09-0"),
            "{}",
            iso_ms(l.runs_out_at_ms())
        );
    }

    #[test]
    fn bits_parse_and_validate() {
        assert_eq!(
            "36/5/22".parse::<Bits>().unwrap(),
            Bits {
                time: 36,
                worker: 5,
                sequence: 22
            }
        );
        assert_eq!(" 41 / 10 / 12 ".parse::<Bits>().unwrap(), Bits::default());
        assert!(matches!(
            "41/10/13".parse::<Bits>(),
            Err(LayoutError::BitsSum(_, 64))
        ));
        assert!(matches!(
            "41/10".parse::<Bits>(),
            Err(LayoutError::BitsSyntax(_))
        ));
        assert!(matches!(
            "a/b/c".parse::<Bits>(),
            Err(LayoutError::BitsSyntax(_))
        ));
        assert!(matches!(
            "63/0/0".parse::<Bits>(),
            Err(LayoutError::ZeroPart(_))
        ));
        assert!(matches!(
            "30/17/16".parse::<Bits>(),
            Err(LayoutError::TooManyWorkerBits(17))
        ));
        assert!("51/0/12".parse::<Bits>().is_ok());
    }

    #[test]
    fn layouts_that_cannot_work_are_refused() {
        let b = Bits::default();
        assert_eq!(
            Layout::new(b, 0, DEFAULT_EPOCH_MS, NOW),
            Err(LayoutError::Unit)
        );
        assert!(matches!(
            Layout::new(b, 1, NOW + 1, NOW),
            Err(LayoutError::Epoch(_))
        ));
        assert!(matches!(
            Layout::new(b, 1, -1, NOW),
            Err(LayoutError::Epoch(_))
        ));
        // 24 time bits of milliseconds last 4.6 hours.
        let short = Bits {
            time: 24,
            worker: 16,
            sequence: 23,
        };
        assert!(matches!(
            Layout::new(short, 1, DEFAULT_EPOCH_MS, NOW),
            Err(LayoutError::RanOut(_))
        ));
        assert!(Layout::new(short, 1, NOW - 1000, NOW).is_ok());
    }

    #[test]
    fn encode_puts_each_part_in_its_field() {
        let l = Layout::default();
        assert_eq!(l.encode(1, 0, 0), 1 << 22);
        assert_eq!(l.encode(0, 1, 0), 1 << 12);
        assert_eq!(l.encode(0, 0, 1), 1);
        let max = l.encode(l.max_timestamp(), 1023, 4095);
        assert_eq!(max, i64::MAX);
        assert_eq!(
            l.decode(max),
            Some(Decoded {
                timestamp: l.max_timestamp(),
                worker: 1023,
                sequence: 4095
            })
        );
        assert_eq!(l.decode(-1), None);
    }

    #[test]
    fn units_cover_whole_milliseconds() {
        let l = Layout::new("36/5/22".parse().unwrap(), 1000, DEFAULT_EPOCH_MS, NOW).unwrap();
        assert_eq!(l.unit_at(DEFAULT_EPOCH_MS + 999), 0);
        assert_eq!(l.unit_at(DEFAULT_EPOCH_MS + 1000), 1);
        assert_eq!(l.unit_at(DEFAULT_EPOCH_MS - 1), -1);
        assert_eq!(l.unit_start_ms(1), DEFAULT_EPOCH_MS + 1000);
        assert_eq!(l.unit_end_ms(1), DEFAULT_EPOCH_MS + 1999);
    }
}
