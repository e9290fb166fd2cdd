//! How big the next segment should be.
//!
//! The row's `step` is always the floor (the store enforces it in the same
//! statement that reserves); a policy only proposes a size on top of it.

use std::time::Duration;

/// What a policy knows when a fetch starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepInput {
    /// The row's `step` as last seen (0 before the first fetch).
    pub row_step: i64,
    /// Size of the previous segment fetched (0 before the first fetch).
    pub prev_size: i64,
    /// Measured consumption rate, IDs per second (smoothed).
    pub rate_per_sec: f64,
    /// How long the previous fetch's segment has been in service so far, if any.
    pub prev_lifetime: Option<Duration>,
}

/// Proposes the size of the next segment.
pub trait StepPolicy: Send + Sync + 'static {
    /// The proposed size; the store raises it to the row's step if lower.
    fn next_size(&self, input: &StepInput) -> i64;

    /// A short name for reports.
    fn name(&self) -> &'static str;
}

/// seqd's default: size a segment so it lasts about `target` at the measured
/// rate, within `[1, max_step]` (and never below the row's step).
#[derive(Debug, Clone, Copy)]
pub struct RateStep {
    /// How long a segment should last.
    pub target: Duration,
    /// The largest size proposed.
    pub max_step: i64,
}

impl StepPolicy for RateStep {
    fn next_size(&self, input: &StepInput) -> i64 {
        let wanted = (input.rate_per_sec * self.target.as_secs_f64()).ceil();
        // `as` saturates for floats out of range (and maps NaN to 0).
        (wanted as i64).clamp(1, self.max_step.max(1))
    }

    fn name(&self) -> &'static str {
        "rate"
    }
}

/// Always the row's step.
#[derive(Debug, Clone, Copy, Default)]
pub struct FixedStep;

impl StepPolicy for FixedStep {
    fn next_size(&self, _input: &StepInput) -> i64 {
        1
    }

    fn name(&self) -> &'static str {
        "fixed"
    }
}

/// Leaf's rule, kept for comparison: double when the previous segment lasted
/// under 15 minutes (up to `max_step`), halve when it lasted over 30 minutes
/// (never below the row's step), keep it otherwise.
#[derive(Debug, Clone, Copy)]
pub struct LeafStep {
    /// Leaf's cap (1,000,000 in Leaf).
    pub max_step: i64,
}

impl StepPolicy for LeafStep {
    fn next_size(&self, input: &StepInput) -> i64 {
        let prev = input.prev_size.max(input.row_step).max(1);
        match input.prev_lifetime {
            None => input.row_step.max(1),
            Some(t) if t < Duration::from_secs(15 * 60) => {
                let doubled = prev.saturating_mul(2);
                if doubled > self.max_step {
                    prev
                } else {
                    doubled
                }
            }
            Some(t) if t < Duration::from_secs(30 * 60) => prev,
            Some(_) => (prev / 2).max(input.row_step),
        }
    }

    fn name(&self) -> &'static str {
        "leaf"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(rate: f64) -> StepInput {
        StepInput {
            row_step: 10,
            prev_size: 10,
            rate_per_sec: rate,
            prev_lifetime: None,
        }
    }

    #[test]
    fn rate_step_targets_the_segment_lifetime() {
        let p = RateStep {
            target: Duration::from_secs(600),
            max_step: 1_000_000,
        };
        assert_eq!(p.next_size(&input(100.0)), 60_000);
        assert_eq!(
            p.next_size(&input(0.0)),
            1,
            "idle: the store's floor applies"
        );
        assert_eq!(p.next_size(&input(1e12)), 1_000_000, "capped at max_step");
        assert_eq!(p.next_size(&input(f64::NAN)), 1);
    }

    #[test]
    fn leaf_step_doubles_keeps_and_halves() {
        let p = LeafStep {
            max_step: 1_000_000,
        };
        let mut i = StepInput {
            row_step: 10,
            prev_size: 40,
            rate_per_sec: 0.0,
            prev_lifetime: Some(Duration::from_secs(60)),
        };
        assert_eq!(p.next_size(&i), 80);
        i.prev_lifetime = Some(Duration::from_secs(20 * 60));
        assert_eq!(p.next_size(&i), 40);
        i.prev_lifetime = Some(Duration::from_secs(40 * 60));
        assert_eq!(p.next_size(&i), 20);
        i.prev_size = 10;
        assert_eq!(p.next_size(&i), 10, "never below the row step");
    }
}
