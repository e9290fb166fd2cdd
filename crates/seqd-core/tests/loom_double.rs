//! Model checking of the allocator's lock-free core (`allocator::double`) with loom: every interleaving (up to a preemption
//! bound) of takers racing across a segment switch, a batch racing single
//! takes, the installation of the next segment racing takers that found
//! the current one empty, and a run racing single takes.
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

/// A buffer serving `first..first+len` with `next` installed (if any).
fn buffer(first: i64, len: u64, next: Option<(i64, u64)>) -> Arc<DoubleBuffer> {
    let b = DoubleBuffer::new(seg(first, len));
    if let Some((f, l)) = next {
        b.install_next(seg(f, l))
            .map_err(|_| ())
            .expect("no next yet");
    }
    Arc::new(b)
}

/// What the allocator does for one request of `n` IDs: the lock-free
/// `take_fast` first, then `take` (switching segments) for the rest.
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

fn ids(runs: &[IdRange]) -> Vec<i64> {
    runs.iter().flat_map(|r| r.iter()).collect()
}

fn assert_increasing(ids: &[i64], who: &str) {
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "{who}: not strictly increasing: {ids:?}"
    );
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
        let b1 = b.clone();
        let t1 = thread::spawn(move || {
            let mut out = Vec::new();
            for _ in 0..2 {
                assert_eq!(request(&b1, 1, &mut out), 0, "an ID was available");
            }
            ids(&out)
        });
        let mut out = Vec::new();
        for _ in 0..2 {
            assert_eq!(b.take(1, &mut out).missing, 0, "an ID was available");
        }
        let mine = ids(&out);
        let theirs = t1.join().unwrap();
        assert_increasing(&mine, "main");
        assert_increasing(&theirs, "t1");
        assert_exactly(mine.into_iter().chain(theirs).collect(), 1..=4);
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
        let b1 = b.clone();
        let t1 = thread::spawn(move || {
            // Either request may find nothing: main can drain both segments
            // before t1 runs, or t1 can outrun main's install.
            let mut out = Vec::new();
            let missing = request(&b1, 1, &mut out) + request(&b1, 1, &mut out);
            (ids(&out), missing)
        });
        let mut out = Vec::new();
        let mut missing = request(&b, 1, &mut out);
        // The third segment arrives while t1 may still be switching; it is
        // refused while the second one is still waiting.
        let installed = b.install_next(seg(3, 1)).is_ok();
        missing += request(&b, 1, &mut out);
        let mine = ids(&out);
        let (theirs, their_missing) = t1.join().unwrap();
        assert_increasing(&mine, "main");
        assert_increasing(&theirs, "t1");
        // Every request of one ID got it or reported it missing.
        let mut all: Vec<i64> = mine.into_iter().chain(theirs).collect();
        assert_eq!(missing + their_missing + all.len() as u64, 4);
        // Whatever is left is still obtainable: drain it.
        let mut rest = Vec::new();
        while b.take(1, &mut rest).missing == 0 {}
        all.extend(ids(&rest));
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
        let b1 = b.clone();
        let batcher = thread::spawn(move || {
            let mut out = Vec::new();
            assert_eq!(request(&b1, 4, &mut out), 0, "6 IDs for 6 asked");
            out
        });
        let mut singles = Vec::new();
        for _ in 0..2 {
            assert_eq!(request(&b, 1, &mut singles), 0);
        }
        let runs = batcher.join().unwrap();
        let batch = ids(&runs);
        assert_eq!(batch.len(), 4);
        for w in runs.windows(2) {
            assert!(w[0].last < w[1].first, "runs in increasing order: {runs:?}");
        }
        assert_increasing(&batch, "batch");
        let singles = ids(&singles);
        assert_increasing(&singles, "singles");
        assert_exactly(batch.into_iter().chain(singles).collect(), 1..=6);
    });
}

/// (b') Two batches race across the boundary, each wanting more than one
/// segment holds: 2 + 2 of 1..=2 and 3..=4 (one batch may need both).
#[test]
fn two_batches_racing_across_a_boundary_split_the_ids_without_overlap() {
    model(|| {
        let b = buffer(1, 2, Some((3, 2)));
        let b1 = b.clone();
        let t = thread::spawn(move || {
            let mut out = Vec::new();
            assert_eq!(request(&b1, 2, &mut out), 0);
            out
        });
        let mut mine = Vec::new();
        assert_eq!(request(&b, 2, &mut mine), 0);
        let theirs = t.join().unwrap();
        let (m, o) = (ids(&mine), ids(&theirs));
        assert_increasing(&m, "main");
        assert_increasing(&o, "t");
        assert_exactly(m.into_iter().chain(o).collect(), 1..=4);
    });
}

/// (c) `install_next` races two takers that find the current segment (the
/// empty placeholder of a sequence not loaded yet) empty. A taker may come
/// back with `missing > 0` (it would then wait for the fetch), but no ID is
/// handed out twice, and after the install every ID is obtainable.
#[test]
fn install_next_racing_takers_on_an_empty_current_loses_nothing() {
    model(|| {
        let b = Arc::new(DoubleBuffer::new(Segment::EMPTY));
        let installer = {
            let b = b.clone();
            thread::spawn(move || {
                b.install_next(seg(1, 2))
                    .map_err(|_| ())
                    .expect("nothing waiting");
            })
        };
        let taker = {
            let b = b.clone();
            thread::spawn(move || {
                let mut out = Vec::new();
                let missing = request(&b, 2, &mut out);
                assert_eq!(missing + ids(&out).len() as u64, 2);
                ids(&out)
            })
        };
        let mut out = Vec::new();
        let missing = request(&b, 1, &mut out);
        assert_eq!(missing + ids(&out).len() as u64, 1);
        let mut all = ids(&out);
        installer.join().unwrap();
        let theirs = taker.join().unwrap();
        assert_increasing(&theirs, "taker");
        all.extend(theirs);
        // After the install, the rest is obtainable.
        let mut rest = Vec::new();
        while b.take(1, &mut rest).missing == 0 {}
        all.extend(ids(&rest));
        assert_exactly(all, 1..=2);
        assert_eq!(b.issued(), 2);
    });
}

/// (c') The next segment lands while a taker is mid-switch on a current
/// segment that just ran dry: 1..=1 is current, a taker of 2 drains it and
/// races the install of 2..=3 against another single taker.
#[test]
fn install_next_racing_a_drained_current_hands_out_each_id_once() {
    model(|| {
        let b = buffer(1, 1, None);
        let installer = {
            let b = b.clone();
            thread::spawn(move || {
                b.install_next(seg(2, 2))
                    .map_err(|_| ())
                    .expect("nothing waiting");
            })
        };
        let taker = {
            let b = b.clone();
            thread::spawn(move || {
                let mut out = Vec::new();
                let missing = request(&b, 2, &mut out);
                (ids(&out), missing)
            })
        };
        let mut out = Vec::new();
        let missing = request(&b, 1, &mut out);
        let mut all = ids(&out);
        installer.join().unwrap();
        let (theirs, their_missing) = taker.join().unwrap();
        assert_increasing(&theirs, "taker");
        assert_eq!(
            missing + their_missing + (all.len() + theirs.len()) as u64,
            3
        );
        all.extend(theirs);
        let mut rest = Vec::new();
        while b.take(1, &mut rest).missing == 0 {}
        all.extend(ids(&rest));
        assert_exactly(all, 1..=3);
        assert_eq!(b.issued(), 3);
    });
}

/// (d) Segments with a hole between them (1..=1, then 5..=6: the row was
/// moved on by another instance): a taker that read the old cursor and the
/// new end, or the new cursor and the old end, must never hand out an ID of
/// the hole (2..=4) nor any ID twice.
#[test]
fn takers_racing_a_switch_over_a_hole_never_hand_out_an_id_of_the_hole() {
    model(|| {
        let b = buffer(1, 1, Some((5, 2)));
        let b1 = b.clone();
        let t = thread::spawn(move || {
            let mut out = Vec::new();
            request(&b1, 2, &mut out);
            ids(&out)
        });
        let mut out = Vec::new();
        request(&b, 1, &mut out);
        request(&b, 1, &mut out);
        let mine = ids(&out);
        let theirs = t.join().unwrap();
        assert_increasing(&mine, "main");
        assert_increasing(&theirs, "t");
        let mut all: Vec<i64> = mine.into_iter().chain(theirs).collect();
        let mut rest = Vec::new();
        while b.take(1, &mut rest).missing == 0 {}
        all.extend(ids(&rest));
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
        let b1 = b.clone();
        let t = thread::spawn(move || got(b1.take_run(2)));
        let mut singles = Vec::new();
        for _ in 0..2 {
            assert_eq!(request(&b, 1, &mut singles), 0);
        }
        let run = t.join().unwrap().expect("a segment of 3 holds a run of 2");
        assert_eq!(run.len(), 2);
        assert_eq!((run.first - 1) / 3, (run.last - 1) / 3, "one segment");
        let singles = ids(&singles);
        assert_increasing(&singles, "singles");
        let mut rest = Vec::new();
        while b.take(1, &mut rest).missing == 0 {}
        let all: Vec<i64> = run.iter().chain(singles).chain(ids(&rest)).collect();
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
        let b1 = b.clone();
        let t = thread::spawn(move || got(b1.take_run(2)));
        let mut out = Vec::new();
        assert_eq!(request(&b, 1, &mut out), 0);
        let run = t.join().unwrap();
        while b.take(1, &mut out).missing == 0 {}
        let mut all = ids(&out);
        if let Some(run) = run {
            assert_eq!((run.first, run.last), (1, 2));
            all.extend(run.iter());
        }
        assert_exactly(all, 1..=3);
    });
}
