//! The settings refresh (docs/design.md, "Settings changes reach every
//! instance"): one background task per instance that, every
//! `--settings-refresh` (default 2 s), reads the rows of the sequences this
//! instance holds in memory (allocator buffers and serial sequences) and
//! applies what changed: plain <-> serial, ordering, serial settings. A
//! change made by another instance or by SQL is so in force here within
//! one interval plus one read, whatever the sequence's traffic; requests
//! never read settings. (`step` needs nothing here: every reservation
//! takes the row's step as its floor in the same statement; `description`
//! changes nothing served.)
//!
//! Cost: one statement per [`SETTINGS_CHUNK`] names per round. A round
//! reads at most [`NAMES_PER_ROUND`] names; with more live names, rounds
//! take turns over slices of them (by a hash of the name), so each name is
//! read every `ceil(live / NAMES_PER_ROUND)` rounds.
//!
//! The task holds the instance's [`Serials`] weakly: it ends at its next
//! tick once the instance is dropped.

use std::collections::HashSet;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::time::Duration;

use super::service::{Serials, WeakSerials};
use crate::domain::{is_period_counter, SeqName};
use crate::store::SETTINGS_CHUNK;

/// How often the settings of live sequences are read again, by default:
/// 2 s, so that a change is in force within the promised 5 s with room for
/// a slow read.
pub const DEFAULT_EVERY: Duration = Duration::from_secs(2);

/// Most names one round reads (40 statements of [`SETTINGS_CHUNK`]).
pub const NAMES_PER_ROUND: usize = 20_000;

/// Starts the settings refresh of `serials` (and its allocator), one round
/// every `every`, the first one `every` from now. It ends once every handle
/// on `serials` is dropped.
pub fn spawn(serials: &Serials, every: Duration) -> tokio::task::JoinHandle<()> {
    let weak = serials.downgrade();
    let every = every.max(Duration::from_millis(1));
    tokio::spawn(run(weak, every))
}

async fn run(weak: WeakSerials, every: Duration) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    for round in 0u64.. {
        ticks.tick().await;
        let Some(serials) = weak.upgrade() else {
            return;
        };
        let ok = one_round(&serials, round, NAMES_PER_ROUND).await;
        if ok && failing {
            tracing::info!("reading the settings of live sequences works again");
        }
        failing = !ok;
        serials.count_round();
    }
}

/// One round: reads the settings of this round's names and applies them.
/// False when a read failed (logged once until a round succeeds again, by
/// the caller's `failing`; the next round reads again).
pub async fn one_round(serials: &Serials, round: u64, budget: usize) -> bool {
    let names = names_of_round(serials, round, budget);
    let store = serials.store().clone();
    let timeout = serials.allocator().config().fetch_timeout;
    let mut ok = true;
    for chunk in names.chunks(SETTINGS_CHUNK) {
        let changes = serials.changes();
        match tokio::time::timeout(timeout, store.settings_of(chunk)).await {
            Ok(Ok(rows)) => {
                // Dropped when a PATCH answered here came between: read again
                // at the next round.
                serials.apply_read(changes, &rows);
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, names = chunk.len(), "reading the settings of live sequences failed");
                ok = false;
            }
            Err(_) => {
                tracing::warn!(
                    ?timeout,
                    names = chunk.len(),
                    "reading the settings of live sequences timed out"
                );
                ok = false;
            }
        }
    }
    ok
}

/// The names round `round` reads: every live sequence (the allocator's
/// buffers, period counters left out, and the serial sequences), or, with
/// more than `budget` of them, the slice of them whose turn it is.
fn names_of_round(serials: &Serials, round: u64, budget: usize) -> Vec<SeqName> {
    let live = serials.allocator().names_in_memory().live + serials.len();
    let slices = live.div_ceil(budget.max(1)).max(1) as u64;
    let slice = round % slices;
    let hasher = BuildHasherDefault::<DefaultHasher>::default();
    let mut names: HashSet<SeqName, foldhash::fast::RandomState> = HashSet::default();
    let mut pick = |name: &SeqName| {
        if is_period_counter(name.as_str()) || names.contains(name) {
            return;
        }
        if slices > 1 && hasher.hash_one(name.as_str()) % slices != slice {
            return;
        }
        names.insert(name.clone());
    };
    serials.allocator().for_each_name(&mut pick);
    serials.for_each_name(&mut pick);
    names.into_iter().collect()
}
