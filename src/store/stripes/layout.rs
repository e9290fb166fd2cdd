//! Which IDs each stripe may hand out: interleaved blocks.
//!
//! With `count` stripes and blocks of `block` IDs, the ID space is cut into
//! rounds of `count * block` IDs; in every round stripe `i` owns the `i`-th
//! block. Stripe `i` of 3 with blocks of 1,000,000,000 owns
//! `[i * 10^9, (i + 1) * 10^9)`, then `[(3 + i) * 10^9, (4 + i) * 10^9)`, and
//! so on. Every stripe keeps its own `sequences` row per name, and a
//! reservation from stripe `i` only ever covers IDs of blocks `i` owns, so
//! two stripes never hand out the same ID, whatever their rows say.
//!
//! A reservation is [`StripeLayout::next_range`]: from the row's `max_id`
//! (or the caller's floor, if higher: the lift that keeps per-instance order
//! when an instance moves between stripes), the first ID above it that the
//! stripe owns, then up to the asked size, never past the end of that block.
//! A segment is therefore one contiguous run, as with a single database, and
//! the hot path does not change. docs/design.md, "Stripes".

/// The block size a stripe set is created with when none is given: a power
/// of ten, so block boundaries are easy to read in IDs.
pub const DEFAULT_BLOCK: i64 = 1_000_000_000;

/// Stripe `index` of `count`, owning every `count`-th block of `block` IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StripeLayout {
    index: u32,
    count: u32,
    block: i64,
}

/// Why a [`StripeLayout`] cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// `count` is 0 or `index` is not below it.
    #[error(
        "stripe {index} of {count}: the index must be below the count, and the count at least 1"
    )]
    Index {
        /// The stripe index given.
        index: u32,
        /// The number of stripes.
        count: u32,
    },
    /// `block` is below 1, or a round of `count` blocks does not fit an i64.
    #[error("block size {block} with {count} stripes: the block must be at least 1 and count * block at most i64::MAX")]
    Block {
        /// The number of stripes.
        count: u32,
        /// The block size given.
        block: i64,
    },
}

impl StripeLayout {
    /// The layout of one database: it owns every ID.
    pub const SINGLE: StripeLayout = StripeLayout {
        index: 0,
        count: 1,
        block: DEFAULT_BLOCK,
    };

    /// Stripe `index` of `count` with blocks of `block` IDs.
    pub fn new(index: u32, count: u32, block: i64) -> Result<Self, LayoutError> {
        if count == 0 || index >= count {
            return Err(LayoutError::Index { index, count });
        }
        if block < 1 || block.checked_mul(i64::from(count)).is_none() {
            return Err(LayoutError::Block { count, block });
        }
        Ok(StripeLayout {
            index,
            count,
            block,
        })
    }

    /// This stripe's position, from 0.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// How many stripes the set has.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// IDs per block.
    pub fn block(&self) -> i64 {
        self.block
    }

    /// IDs per round (`count * block`).
    fn round(&self) -> i128 {
        i128::from(self.count) * i128::from(self.block)
    }

    /// Where this stripe's block starts within a round.
    fn offset(&self) -> i128 {
        i128::from(self.index) * i128::from(self.block)
    }

    /// How far `id` lies past the start of this stripe's block in its round
    /// (`0..round`): below `block` exactly when this stripe owns `id`.
    fn position(&self, id: i128) -> i128 {
        (id - self.offset()).rem_euclid(self.round())
    }

    /// Whether this stripe may hand out `id`.
    pub fn owns(&self, id: i64) -> bool {
        self.count == 1 || self.position(i128::from(id)) < i128::from(self.block)
    }

    /// The range a reservation of `want` IDs (at least 1) takes from a row
    /// whose `max_id` is given, lifted above `floor`: its first ID is the
    /// lowest ID above `max(max_id, floor, 0)` this stripe owns, and it holds
    /// `want` IDs or as many as are left in that block (or below
    /// `i64::MAX`), whichever is fewer. `None` when no such ID exists (the
    /// sequence is exhausted on this stripe).
    ///
    /// With one stripe this is `max_id + 1 ..= max_id + want` (above the
    /// floor), as a single database reserves.
    pub fn next_range(&self, max_id: i64, floor: i64, want: i64) -> Option<(i64, i64)> {
        let want = i128::from(want.max(1));
        let x = i128::from(max_id.max(floor).max(0)) + 1;
        let (start, room) = if self.count == 1 {
            (x, want)
        } else {
            let p = self.position(x);
            let block = i128::from(self.block);
            let start = if p < block { x } else { x + self.round() - p };
            (start, block - self.position(start))
        };
        let max = i128::from(i64::MAX);
        if start > max {
            return None;
        }
        let last = (start + want.min(room) - 1).min(max);
        Some((start as i64, last as i64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn layout(index: u32, count: u32, block: i64) -> StripeLayout {
        StripeLayout::new(index, count, block).unwrap()
    }

    #[test]
    fn one_stripe_reserves_as_a_single_database() {
        let l = StripeLayout::SINGLE;
        assert_eq!(l.next_range(0, 0, 1000), Some((1, 1000)));
        assert_eq!(l.next_range(1000, 0, 10), Some((1001, 1010)));
        // the floor lifts
        assert_eq!(l.next_range(5, 2000, 10), Some((2001, 2010)));
        // a row below zero starts at 1
        assert_eq!(l.next_range(-7, 0, 3), Some((1, 3)));
        // never past i64::MAX, and nothing above it
        assert_eq!(
            l.next_range(i64::MAX - 2, 0, 10),
            Some((i64::MAX - 1, i64::MAX))
        );
        assert_eq!(l.next_range(i64::MAX, 0, 1), None);
    }

    #[test]
    fn stripes_take_their_own_blocks_in_turn() {
        // blocks of 10, three stripes: 0 owns 0..10, 30..40; 1 owns 10..20, 40..50
        let s0 = layout(0, 3, 10);
        let s1 = layout(1, 3, 10);
        let s2 = layout(2, 3, 10);
        assert_eq!(s0.next_range(0, 0, 4), Some((1, 4)));
        assert_eq!(s1.next_range(0, 0, 4), Some((10, 13)));
        assert_eq!(s2.next_range(0, 0, 4), Some((20, 23)));
        // a reservation stops at the end of its block
        assert_eq!(s0.next_range(7, 0, 100), Some((8, 9)));
        // and the next one jumps to the stripe's next block
        assert_eq!(s0.next_range(9, 0, 100), Some((30, 39)));
        assert_eq!(s1.next_range(19, 0, 5), Some((40, 44)));
    }

    #[test]
    fn a_lagging_stripe_is_lifted_past_the_floor_into_its_next_block() {
        let s0 = layout(0, 3, 10);
        // this instance served up to 44 (stripe 1's block 40..50): stripe 0,
        // whose row says 3, starts at 60, its first block above 44
        assert_eq!(s0.next_range(3, 44, 5), Some((60, 64)));
        // inside its own block, the lift is to the next ID
        assert_eq!(s0.next_range(3, 33, 5), Some((34, 38)));
    }

    #[test]
    fn layouts_refuse_impossible_shapes() {
        assert!(StripeLayout::new(3, 3, 10).is_err());
        assert!(StripeLayout::new(0, 0, 10).is_err());
        assert!(StripeLayout::new(0, 2, 0).is_err());
        assert!(StripeLayout::new(0, 3, i64::MAX / 2).is_err());
        assert!(StripeLayout::new(2, 3, i64::MAX / 3).is_ok());
    }

    #[test]
    fn the_last_block_near_i64_max_is_cut_at_the_top() {
        let count = 3;
        let block = i64::MAX / 3;
        let top = layout(2, count, block);
        let (first, last) = top.next_range(0, 0, 10).unwrap();
        assert_eq!((first, last), (2 * block, 2 * block + 9));
        // 3 * block = i64::MAX - 1: stripe 2's block ends just below that,
        let end = 3 * block - 1;
        assert_eq!(top.next_range(end - 3, 0, 10), Some((end - 2, end)));
        // and its next one would start past i64::MAX
        assert_eq!(top.next_range(end, 0, 10), None);
        // stripe 0's block of the next round is cut at i64::MAX
        assert_eq!(
            layout(0, count, block).next_range(block, 0, 10),
            Some((i64::MAX - 1, i64::MAX))
        );
        assert_eq!(layout(0, count, block).next_range(i64::MAX, 0, 1), None);
    }

    proptest! {
        /// Whatever the rows and floors, a range is non-empty, owned by its
        /// stripe from end to end, above the row and the floor, and no longer
        /// than asked.
        #[test]
        fn ranges_are_owned_lifted_and_bounded(
            count in 1u32..6,
            index_seed in 0u32..6,
            block in 1i64..50,
            max_id in -5i64..2_000,
            floor in 0i64..2_000,
            want in 1i64..120,
        ) {
            let l = layout(index_seed % count, count, block);
            let (first, last) = l.next_range(max_id, floor, want).unwrap();
            prop_assert!(first <= last);
            prop_assert!(first > max_id.max(floor).max(0));
            prop_assert!(last - first < want);
            for id in first..=last {
                prop_assert!(l.owns(id), "{id} not owned by {l:?}");
            }
            // no owned ID is skipped between the lift and the range
            for id in (max_id.max(floor).max(0) + 1)..first {
                prop_assert!(!l.owns(id), "{id} skipped by {l:?}");
            }
        }

        /// Stripes of one set never share an ID, however their rows move.
        #[test]
        fn stripes_of_one_set_are_disjoint(
            count in 2u32..5,
            block in 1i64..20,
            steps in proptest::collection::vec((0u32..5, 1i64..40, 0i64..500), 1..60),
        ) {
            let mut rows = vec![0i64; count as usize];
            let mut seen = std::collections::HashSet::new();
            for (pick, want, floor) in steps {
                let i = pick % count;
                let l = layout(i, count, block);
                let (first, last) = l.next_range(rows[i as usize], floor, want).unwrap();
                rows[i as usize] = last;
                for id in first..=last {
                    prop_assert!(seen.insert(id), "{id} handed out twice");
                }
            }
        }
    }
}
