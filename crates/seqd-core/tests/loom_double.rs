//! Model checking of the allocator's lock-free core (`allocator::double`)
//! with loom: every interleaving (up to a preemption bound) of takers racing
//! across a segment switch, a batch racing single takes, the installation of
//! the next segment racing takers that found the current one empty, a run
//! racing single takes, the seal racing a taker, and prefetch marks passed
//! across a switch.
//!
//! Two users run this buffer, and the scenarios cover every operation each
//! runs on it:
//!
//! - the server's per-sequence buffer (`allocator/buffer/`): `take_fast` then
//!   `take` for a request ([`request`]), `take_run` for `INCRBY`,
//!   `install_next` from its fetch, `seal` at the give-back, `issued`,
//!   `counts` and `current` for monitoring;
//! - the Rust client (`clients/rust/src/buffer.rs`): `take_fast(1)` then
//!   `take(1)` for `next` ([`client_next`], starting the fetch ahead when
//!   `past_prefetch_mark` and no `has_next`), `take_fast(n)` then `take` for
//!   a batch (as [`request`]), `install_next` from its lease fetch, `seal` at
//!   the close (its `current` read meanwhile), on segments made by
//!   `Segment::with_prefetch_at`.
//!
//! Built only under `--cfg seqd_loom` (plain `cargo test` compiles this file
//! to nothing). Run with a separate target directory:
//!
//! ```text
//! RUSTFLAGS="--cfg seqd_loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test --release -p seqd-core --test loom_double
//! ```
#![cfg(seqd_loom)]

use loom::sync::Arc;
use loom::thread;

use seqd_core::allocator::double::{DoubleBuffer, Run};
use seqd_core::allocator::segment::{IdRange, Segment};

/// Default preemption bound (`LOOM_MAX_PREEMPTIONS` overrides it): 3 covers
/// the bug classes these scenarios target (a stale segment, a lost or doubled
/// switch, an install lost between a look and a switch) and keeps the whole
/// file to seconds in release builds.
const PREEMPTIONS: usize = 3;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(PREEMPTIONS);
    }
    b.check(f);
}

fn seg(first: i64, len: u64) -> Segment {
    Segment::new(first, len, 0.1)
}

/// A buffer serving `current` with `next` installed (if any).
fn buffer_of(current: Segment, next: Option<Segment>) -> Arc<DoubleBuffer> {
    let b = DoubleBuffer::new(current);
    if let Some(next) = next {
        install(&b, next);
    }
    Arc::new(b)
}

/// A buffer serving `first..first+len` with `next` installed (if any).
fn buffer(first: i64, len: u64, next: Option<(i64, u64)>) -> Arc<DoubleBuffer> {
    buffer_of(seg(first, len), next.map(|(f, l)| seg(f, l)))
}

/// Installs `next`, which the scenario knows to be accepted.
fn install(b: &DoubleBuffer, next: Segment) {
    b.install_next(next)
        .map_err(|_| ())
        .expect("nothing waiting");
}

/// A thread running `f` on its own handle of `b`.
fn spawn<T: Send + 'static>(
    b: &Arc<DoubleBuffer>,
    f: impl FnOnce(&DoubleBuffer) -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    let b = b.clone();
    thread::spawn(move || f(&b))
}

/// What the server's allocator does for one request of `n` IDs: the
/// lock-free `take_fast` first, then `take` (switching segments) for the
/// rest. Appends the runs to `out`; how many IDs were missing.
fn request(b: &DoubleBuffer, n: u64, out: &mut Vec<IdRange>) -> u64 {
    let mut missing = n;
    if let Some(r) = b.take_fast(n).range {
        out.push(r);
        missing -= r.len();
    }
    if missing > 0 {
        missing = b.take(missing, out).missing;
    }
    missing
}

/// Requests of `sizes` IDs one after another: the runs obtained and how
/// many IDs were missing in all (each request got or missed every ID).
fn requests(b: &DoubleBuffer, sizes: &[u64]) -> (Vec<IdRange>, u64) {
    let mut out = Vec::new();
    let missing = sizes.iter().map(|&n| request(b, n, &mut out)).sum();
    assert_eq!(
        ids(&out).len() as u64 + missing,
        sizes.iter().sum::<u64>(),
        "a request got more or fewer IDs than it reports"
    );
    (out, missing)
}

/// What the Rust client's `next` does: `take_fast(1)`, then `take(1)` when
/// it comes back empty. The ID and whether the client then starts the fetch
/// ahead: its claim passed its segment's prefetch mark and no segment is
/// ahead (`has_next`), as `clients/rust/src/buffer.rs` decides.
fn client_next(b: &DoubleBuffer) -> Option<(i64, bool)> {
    let taken = b.take_fast(1);
    if let Some(r) = taken.range {
        return Some((r.first, taken.past_prefetch_mark && !b.has_next()));
    }
    let mut out = Vec::new();
    let progress = b.take(1, &mut out);
    out.first()
        .map(|r| (r.first, progress.past_prefetch_mark && !b.has_next()))
}

fn ids(runs: &[IdRange]) -> Vec<i64> {
    runs.iter().flat_map(|r| r.iter()).collect()
}

/// The IDs of every thread's runs, each thread's strictly increasing.
fn increasing(threads: &[(&str, &[IdRange])]) -> Vec<i64> {
    let mut all = Vec::new();
    for (who, runs) in threads {
        let ids = ids(runs);
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "{who}: not strictly increasing: {ids:?}"
        );
        all.extend(ids);
    }
    all
}

/// Takes what is left, one ID at a time, until both segments are used up.
fn drain(b: &DoubleBuffer) -> Vec<i64> {
    let mut rest = Vec::new();
    while b.take(1, &mut rest).missing == 0 {}
    ids(&rest)
}

/// Every ID of `all` once, and exactly `expected`.
fn assert_exactly(mut all: Vec<i64>, expected: std::ops::RangeInclusive<i64>) {
    all.sort_unstable();
    assert_eq!(
        all,
        expected.collect::<Vec<_>>(),
        "duplicated, skipped or foreign IDs"
    );
}

/// (a) Two threads race across a switch: current 1..=2, next 3..=4 already
/// installed. One asks through the fast path then the slow path, the other
/// only through `take`. Four IDs asked, four handed out: no duplicate, no ID
/// skipped at the handover, each thread's IDs increasing.
#[test]
fn two_takers_racing_across_a_switch_get_every_id_once_in_order() {
    model(|| {
        let b = buffer(1, 2, Some((3, 2)));
        let t1 = spawn(&b, |b| requests(b, &[1, 1]));
        let mut out = Vec::new();
        for _ in 0..2 {
            assert_eq!(b.take(1, &mut out).missing, 0, "an ID was available");
        }
        let (theirs, missing) = t1.join().unwrap();
        assert_eq!(missing, 0, "an ID was available");
        assert_exactly(increasing(&[("main", &out), ("t1", &theirs)]), 1..=4);
        assert_eq!(b.issued(), 4);
        assert!(!b.has_next(), "the next segment was switched to");
        assert_eq!(b.current().0.first(), 3);
    });
}

/// (a') The same race on the lock-free path alone: both threads use
/// `take_fast` and fall back to `take` only when it comes back empty or short,
/// with three segments (two switches) in play.
#[test]
fn fast_path_takers_racing_across_two_switches_lose_and_double_nothing() {
    model(|| {
        let b = buffer(1, 1, Some((2, 1)));
        // Either request may find nothing: main can drain both segments
        // before t1 runs, or t1 can outrun main's install.
        let t1 = spawn(&b, |b| requests(b, &[1, 1]));
        let (mut mine, mut missing) = requests(&b, &[1]);
        // The third segment arrives while t1 may still be switching; it is
        // refused while the second one is still waiting.
        let installed = b.install_next(seg(3, 1)).is_ok();
        let (more, more_missing) = requests(&b, &[1]);
        mine.extend(more);
        missing += more_missing;
        let (theirs, their_missing) = t1.join().unwrap();
        let mut all = increasing(&[("main", &mine), ("t1", &theirs)]);
        // Every request of one ID got it or reported it missing.
        assert_eq!(missing + their_missing + all.len() as u64, 4);
        // Whatever is left is still obtainable.
        all.extend(drain(&b));
        assert_exactly(all, 1..=if installed { 3 } else { 2 });
    });
}

/// (b) A batch (take of 4, fast path then slow path) races two single takes
/// across the boundary between 1..=3 and 4..=6. The batch's runs are
/// increasing and contiguous within each run, the single takes are
/// increasing, and the six IDs are handed out once each.
#[test]
fn a_batch_racing_single_takes_across_a_boundary_is_increasing_and_disjoint() {
    model(|| {
        let b = buffer(1, 3, Some((4, 3)));
        let batcher = spawn(&b, |b| requests(b, &[4]));
        let (singles, missing) = requests(&b, &[1, 1]);
        assert_eq!(missing, 0);
        let (runs, batch_missing) = batcher.join().unwrap();
        assert_eq!(batch_missing, 0, "6 IDs for 6 asked");
        for w in runs.windows(2) {
            assert!(w[0].last < w[1].first, "runs in increasing order: {runs:?}");
        }
        let all = increasing(&[("batch", &runs), ("singles", &singles)]);
        assert_exactly(all, 1..=6);
    });
}

/// (b') Two batches race across the boundary, each wanting more than one
/// segment holds: 2 + 2 of 1..=2 and 3..=4 (one batch may need both).
#[test]
fn two_batches_racing_across_a_boundary_split_the_ids_without_overlap() {
    model(|| {
        let b = buffer(1, 2, Some((3, 2)));
        let t = spawn(&b, |b| requests(b, &[2]));
        let (mine, missing) = requests(&b, &[2]);
        let (theirs, their_missing) = t.join().unwrap();
        assert_eq!(missing + their_missing, 0);
        assert_exactly(increasing(&[("main", &mine), ("t", &theirs)]), 1..=4);
    });
}

/// `install_next` of `next` races a taker of 2 and a taker of 1 on a
/// buffer serving `current`. A taker may come back with IDs missing (it
/// would then wait for the fetch), but no ID is handed out twice, and after
/// the install every ID is obtainable: exactly those of both segments.
fn install_racing_two_takers(current: Segment, next: Segment) {
    model(move || {
        let b = buffer_of(current, None);
        let installer = spawn(&b, move |b| install(b, next));
        let taker = spawn(&b, |b| requests(b, &[2]));
        let (mine, _) = requests(&b, &[1]);
        installer.join().unwrap();
        let (theirs, _) = taker.join().unwrap();
        let mut all = increasing(&[("main", &mine), ("taker", &theirs)]);
        all.extend(drain(&b));
        let first = if current.is_empty() {
            next.first()
        } else {
            current.first()
        };
        assert_exactly(all, first..=next.last());
        assert_eq!(b.issued(), current.len() + next.len());
    });
}

/// (c) The install races two takers that find the current segment (the
/// empty placeholder of a sequence not loaded yet) empty.
#[test]
fn install_next_racing_takers_on_an_empty_current_loses_nothing() {
    install_racing_two_takers(Segment::EMPTY, seg(1, 2));
}

/// (c') The next segment lands while a taker is mid-switch on a current
/// segment that just ran dry: 1..=1 is current, a taker of 2 drains it and
/// races the install of 2..=3 against another single taker.
#[test]
fn install_next_racing_a_drained_current_hands_out_each_id_once() {
    install_racing_two_takers(seg(1, 1), seg(2, 2));
}

/// (d) Segments with a hole between them (1..=1, then 5..=6: the row was
/// moved on by another instance): a taker that read the old cursor and the
/// new end, or the new cursor and the old end, must never hand out an ID of
/// the hole (2..=4) nor any ID twice.
#[test]
fn takers_racing_a_switch_over_a_hole_never_hand_out_an_id_of_the_hole() {
    model(|| {
        let b = buffer(1, 1, Some((5, 2)));
        let t = spawn(&b, |b| requests(b, &[2]).0);
        let (mine, _) = requests(&b, &[1, 1]);
        let theirs = t.join().unwrap();
        let mut all = increasing(&[("main", &mine), ("t", &theirs)]);
        all.extend(drain(&b));
        all.sort_unstable();
        assert_eq!(all, vec![1, 5, 6], "an ID of the hole, or one twice");
    });
}

/// The run of `take_run`, or `None` when it was refused.
fn got(run: Run) -> Option<IdRange> {
    match run {
        Run::Got { run, .. } => Some(run),
        Run::Dry | Run::TooShort { .. } => None,
    }
}

/// (e) A run (`take_run`, what `INCRBY` draws) races single takes across
/// a switch: current 1..=3, next 4..=6. The run is two consecutive IDs of
/// one segment, nothing is handed out twice, and the only IDs never
/// handed out are the rest of 1..=3 that the run's switch gave up.
#[test]
fn a_run_racing_single_takes_is_whole_and_leaves_only_the_rest_it_gave_up() {
    model(|| {
        let b = buffer(1, 3, Some((4, 3)));
        let t = spawn(&b, |b| got(b.take_run(2)));
        let (singles, missing) = requests(&b, &[1, 1]);
        assert_eq!(missing, 0);
        let run = t.join().unwrap().expect("a segment of 3 holds a run of 2");
        assert_eq!(run.len(), 2);
        assert_eq!((run.first - 1) / 3, (run.last - 1) / 3, "one segment");
        let singles = increasing(&[("singles", &singles)]);
        let all: Vec<i64> = run.iter().chain(singles).chain(drain(&b)).collect();
        let mut seen = all.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), all.len(), "an ID twice: {all:?}");
        let expected: Vec<i64> = if run.first >= 4 {
            // 1..=3 up to what the singles took before the switch, then 4..=6.
            let taken_before = seen.iter().filter(|&&id| id <= 3).count() as i64;
            (1..=taken_before).chain(4..=6).collect()
        } else {
            (1..=6).collect()
        };
        assert_eq!(seen, expected, "run {run:?}");
    });
}

/// (e') A run that no segment can hold races a single take: current 1..=2,
/// next 3..=3. The run is served from the current segment or refused;
/// refused, it claimed nothing: every ID is handed out once.
#[test]
fn a_refused_run_racing_a_take_claims_nothing() {
    model(|| {
        let b = buffer(1, 2, Some((3, 1)));
        let t = spawn(&b, |b| got(b.take_run(2)));
        let (out, missing) = requests(&b, &[1]);
        assert_eq!(missing, 0);
        let run = t.join().unwrap();
        let mut all = ids(&out);
        all.extend(drain(&b));
        if let Some(run) = run {
            assert_eq!((run.first, run.last), (1, 2));
            all.extend(run.iter());
        }
        assert_exactly(all, 1..=3);
    });
}

/// (f) The seal (the server's give-back, the client's close) races a taker
/// of two single IDs across a switch: current 1..=1, next 2..=3. The taker's
/// IDs of the sealed current segment are exactly those before the first ID
/// the seal reports unissued; the next segment comes back whole unless it
/// was switched to; every ID is handed out or given back, once; after the
/// seal nothing comes out. Monitoring's `current` reads one of the two
/// segments with a count within it meanwhile.
#[test]
fn the_seal_racing_a_taker_gives_back_exactly_what_was_not_handed_out() {
    model(|| {
        let b = buffer(1, 1, Some((2, 2)));
        let taker = spawn(&b, |b| requests(b, &[1, 1]).0);
        let (seen, used) = b.current();
        assert!(
            (seen == seg(1, 1) && used <= 1) || (seen == seg(2, 2) && used <= 2),
            "{used} used of {seen:?}"
        );
        let (current, unissued, next) = b.seal();
        let handed = increasing(&[("taker", &taker.join().unwrap())]);
        assert!(drain(&b).is_empty(), "IDs after the seal");
        let of_current: Vec<i64> = handed
            .iter()
            .copied()
            .filter(|id| (current.first()..=current.last()).contains(id))
            .collect();
        assert_eq!(of_current, (current.first()..unissued).collect::<Vec<_>>());
        let mut all = handed;
        all.extend(unissued..=current.last());
        match next {
            Some(next) => {
                assert_eq!((current, next), (seg(1, 1), seg(2, 2)), "not switched");
                all.extend(next.first()..=next.last());
            }
            None => assert_eq!(current, seg(2, 2), "switched to the next"),
        }
        assert_exactly(all, 1..=3);
    });
}

/// (g) Two clients' `next` calls race across a switch between segments
/// whose prefetch marks the client placed (`Segment::with_prefetch_at`):
/// 1..=2 starting the fetch ahead at its second ID, 3..=4 (the last, no
/// segment ahead of it) at its first. Whoever takes an ID of the last
/// segment starts the fetch ahead: it is past the mark and sees no segment
/// ahead (`has_next` is cleared before the switch publishes the new
/// cursor), so the fetch ahead is never missed. (The mark of 1..=2 may go unseen by the taker of 2 when
/// the switch to 3..=4 came first: the segment that fetch would bring is
/// there already.) Every ID is handed out once, each caller's increasing.
#[test]
fn the_client_s_next_calls_never_miss_the_last_segment_s_prefetch_mark() {
    model(|| {
        let b = buffer_of(
            Segment::with_prefetch_at(1, 2, 1),
            Some(Segment::with_prefetch_at(3, 2, 0)),
        );
        let t = spawn(&b, |b| [client_next(b), client_next(b)]);
        let mine = [client_next(&b), client_next(&b)];
        let theirs = t.join().unwrap();
        let mut all = Vec::new();
        for calls in [mine, theirs] {
            let calls: Vec<(i64, bool)> = calls.into_iter().map(|c| c.expect("4 IDs")).collect();
            assert!(calls[0].0 < calls[1].0, "not increasing: {calls:?}");
            for (id, past) in calls {
                assert!(
                    past || id < 3,
                    "ID {id} of the last segment started no fetch"
                );
                all.push(id);
            }
        }
        assert_exactly(all, 1..=4);
    });
}
