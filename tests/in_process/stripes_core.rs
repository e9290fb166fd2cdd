//! The striped store and the allocator over it, on in-memory stripes with
//! fault injection and tokio's paused clock: preferred stripe, failover on
//! failure and on slowness, probes bringing a stripe back, the lift past the
//! instance's high-water mark, admin writes on every stripe, missing rows.

use crate::support::recording;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use recording::{recording, Recording};
use seqd::allocator::{Allocator, AllocatorConfig, FixedStep, ManualClock};
use seqd::domain::{NewSequence, SeqName};
use seqd::store::memory::MemoryStore;
use seqd::store::stripes::{StripeLayout, StripedStore};
use seqd::store::{prelude::*, SequencePatch, StoreError};

const BLOCK: i64 = 1_000;
const FAILOVER: Duration = Duration::from_millis(200);

fn name(s: &str) -> SeqName {
    SeqName::parse(s).unwrap()
}

/// `n` in-memory stripes, each with the row `a` (max_id 0, step 10), and
/// the striped store over them.
fn stripes(n: u32) -> (Vec<Arc<MemoryStore>>, StripedStore) {
    let mems: Vec<Arc<MemoryStore>> = (0..n).map(|_| Arc::new(MemoryStore::new())).collect();
    for m in &mems {
        m.insert("a", 0, 10);
    }
    let set = (0..n)
        .map(|i| {
            let store: Arc<dyn Store> = mems[i as usize].clone();
            (store, StripeLayout::new(i, n, BLOCK).unwrap())
        })
        .collect();
    (mems, StripedStore::new(set, FAILOVER).unwrap())
}

/// Which stripe of `n` (blocks of [`BLOCK`]) owns `id`.
fn owner(id: i64, n: u32) -> u32 {
    ((id / BLOCK) % i64::from(n)) as u32
}

#[tokio::test(start_paused = true)]
async fn reservations_come_from_stripe_zero_while_it_answers() {
    let (mems, set) = stripes(3);
    let r = set.reserve_above(&name("a"), 1, 0).await.unwrap();
    assert_eq!((r.first(), r.max_id), (1, 10));
    let r = set.reserve_above(&name("a"), 1, 10).await.unwrap();
    assert_eq!((r.first(), r.max_id), (11, 20));
    assert_eq!(mems[1].reserves("a") + mems[2].reserves("a"), 0);
    assert!(set.status().iter().all(|s| s.up));
}

/// A stripe's row below the caller's mark, when that stripe owns the mark,
/// went back (only it hands that ID out): the lifted reservation says so
/// (`regressed`), for the allocator to report. A row below a mark that
/// another stripe owns only lags: lifted, not a regression.
#[tokio::test(start_paused = true)]
async fn a_row_below_a_mark_its_stripe_owns_went_back_and_a_lagging_one_did_not() {
    let (mems, set) = stripes(3);
    let r = set.reserve_above(&name("a"), 1, 0).await.unwrap();
    assert_eq!(((r.first(), r.max_id), r.regressed), ((1, 10), false));
    let r = set.reserve_above(&name("a"), 1, 10).await.unwrap();
    assert_eq!(((r.first(), r.max_id), r.regressed), ((11, 20), false));
    // stripe 0's row goes back to 0 (a restore): lifted past the mark, reported
    mems[0].insert("a", 0, 10);
    let r = set.reserve_above(&name("a"), 1, 20).await.unwrap();
    assert_eq!(((r.first(), r.max_id), r.regressed), ((21, 30), true));
    // stripe 0 fails: stripe 1's row (0) lies below the mark 30 that stripe 0
    // owns: a lag, lifted into stripe 1's block without a report
    mems[0].set_failing("a", true);
    let r = set.reserve_above(&name("a"), 1, 30).await.unwrap();
    assert_eq!(
        ((r.first(), r.max_id), r.regressed),
        ((BLOCK, BLOCK + 9), false)
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_stripe_is_skipped_at_once_and_used_again_after_a_probe() {
    let (mems, set) = stripes(3);
    set.reserve_above(&name("a"), 1, 0).await.unwrap();
    mems[0].set_failing("a", true);
    // stripe 0 fails: stripe 1 answers, lifted into its own block
    let started = tokio::time::Instant::now();
    let r = set.reserve_above(&name("a"), 1, 10).await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO, "no wait for a failure");
    assert_eq!((r.first(), r.max_id), (BLOCK, BLOCK + 9));
    assert!(!set.status()[0].up);
    // while down, stripe 0 is not asked first
    let before = mems[0].reserves("a");
    let r = set.reserve_above(&name("a"), 1, BLOCK + 9).await.unwrap();
    assert_eq!(r.first(), BLOCK + 10);
    assert_eq!(mems[0].reserves("a"), before, "a down stripe is tried last");
    // healed: the probe (a ping) marks it up, and it is preferred again,
    // lifted past what this instance holds: its next block
    mems[0].set_failing("a", false);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(set.status()[0].up, "the probe brought stripe 0 back");
    let r = set.reserve_above(&name("a"), 1, BLOCK + 19).await.unwrap();
    assert_eq!((r.first(), r.max_id), (3 * BLOCK, 3 * BLOCK + 9));
    assert_eq!(owner(r.first(), 3), 0);
}

#[tokio::test(start_paused = true)]
async fn a_slow_stripe_is_raced_after_failover_after_and_marked_down() {
    let (mems, set) = stripes(2);
    mems[0].set_delay("a", Duration::from_secs(30));
    let started = tokio::time::Instant::now();
    let r = set.reserve_above(&name("a"), 1, 0).await.unwrap();
    assert_eq!(started.elapsed(), FAILOVER, "raced after --failover-after");
    assert_eq!(owner(r.first(), 2), 1);
    assert!(!set.status()[0].up, "the slow stripe is marked down");
    // the next fetch does not wait for it
    let started = tokio::time::Instant::now();
    set.reserve_above(&name("a"), 1, r.max_id).await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn with_every_stripe_down_the_error_is_an_outage_and_then_it_recovers() {
    let (mems, set) = stripes(2);
    for m in &mems {
        m.set_failing("a", true);
    }
    assert!(matches!(
        set.reserve_above(&name("a"), 1, 0).await,
        Err(StoreError::Unavailable(_))
    ));
    mems[1].set_failing("a", false);
    // down stripes are still tried (last) when none is up
    let r = set.reserve_above(&name("a"), 1, 0).await.unwrap();
    assert_eq!(owner(r.first(), 2), 1);
}

#[tokio::test(start_paused = true)]
async fn a_row_missing_on_one_stripe_is_served_by_another_and_reported() {
    let (mems, set) = stripes(3);
    mems[0].remove("a");
    let r = set.reserve_above(&name("a"), 1, 0).await.unwrap();
    assert_eq!(owner(r.first(), 3), 1);
    let status = set.status();
    assert_eq!(status[0].missing_rows, vec!["a".to_string()]);
    assert!(status[0].up, "a missing row is not an outage");
    // missing everywhere: not found
    for m in &mems {
        m.remove("a");
    }
    assert!(matches!(
        set.reserve_above(&name("a"), 1, 0).await,
        Err(StoreError::NotFound)
    ));
}

/// A row noted missing on a stripe is read again by the next ping
/// (`/readyz`): once it is there, the stripe is no longer reported, without
/// waiting for the next audit; a row still missing stays reported.
#[tokio::test(start_paused = true)]
async fn a_ping_forgets_a_missing_row_once_the_stripe_has_it() {
    let (mems, set) = stripes(3);
    mems[0].insert("b", 0, 10);
    mems[1].insert("b", 0, 10);
    mems[0].remove("a");
    mems[0].remove("b");
    set.reserve_above(&name("a"), 1, 0).await.unwrap();
    set.reserve_above(&name("b"), 1, 0).await.unwrap();
    assert_eq!(set.status()[0].missing_rows, vec!["a", "b"]);
    set.ping().await.unwrap();
    assert_eq!(
        set.status()[0].missing_rows,
        vec!["a", "b"],
        "still missing"
    );
    // The operator adds `a` by SQL; reservations keep going to stripe 1.
    mems[0].insert("a", 0, 10);
    set.ping().await.unwrap();
    assert_eq!(set.status()[0].missing_rows, vec!["b"]);
}

/// A serial row on the stripes (made before `seqd stripes init`) hands out
/// no plain range, as its database's own statements refuse it, and period
/// counters are refused with the reason.
#[tokio::test(start_paused = true)]
async fn a_serial_row_hands_out_no_plain_range_on_stripes() {
    let (mems, set) = stripes(2);
    let settings = seqd::domain::SerialSettings::new(
        "S{yyyy}{seq}",
        seqd::serial::Reset::Year,
        "UTC",
        seqd::serial::Overflow::Refuse,
    )
    .unwrap();
    let seq = NewSequence::new(name("s"), 1, 10, String::new(), 1_000_000)
        .unwrap()
        .with_serial(settings);
    for m in &mems {
        m.create(&seq).await.unwrap();
    }
    assert!(matches!(
        set.reserve_above(&name("s"), 1, 0).await,
        Err(StoreError::Serial)
    ));
    assert_eq!(mems[0].max_id("s"), Some(0), "nothing reserved");
    match set.create_period(&name("s"), "2026").await {
        Err(StoreError::Config(why)) => assert!(why.contains("single database"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn admin_writes_reach_every_stripe_and_are_refused_while_one_is_down() {
    let (mems, set) = stripes(3);
    let seq = NewSequence::new(name("b"), 5, 100, String::new(), 1_000_000).unwrap();
    set.create(&seq).await.unwrap();
    for m in &mems {
        assert_eq!(m.max_id("b"), Some(4));
    }
    assert!(matches!(
        set.create(&seq).await,
        Err(StoreError::AlreadyExists)
    ));
    // a create that reached only some stripes is completed by the next one
    let c = NewSequence::new(name("c"), 1, 100, String::new(), 1_000_000).unwrap();
    mems[0].create(&c).await.unwrap();
    set.create(&c).await.unwrap();
    assert!(mems.iter().all(|m| m.max_id("c") == Some(0)));
    // one stripe down: refused, nothing written
    mems[2].set_failing("a", true);
    set.reserve_above(&name("a"), 1, 0).await.unwrap();
    mems[0].set_failing("a", true);
    set.reserve_above(&name("a"), 1, 0).await.unwrap();
    assert!(!set.status()[0].up);
    let d = NewSequence::new(name("d"), 1, 100, String::new(), 1_000_000).unwrap();
    assert!(matches!(
        set.create(&d).await,
        Err(StoreError::Unavailable(_))
    ));
    let patch = SequencePatch {
        step: Some(50),
        ..Default::default()
    };
    assert!(matches!(
        set.update(&name("b"), &patch).await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(mems.iter().all(|m| m.max_id("d").is_none()));
}

/// The allocator over three stripes that fail in turn: every ID unique,
/// strictly increasing in the order this instance hands them out, and
/// owned by the stripe whose block it lies in: the stripe whose row
/// reserved it (read from the rows' recorded writes, not from the ID) is
/// the one whose block holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_allocator_keeps_order_and_uniqueness_while_stripes_fail_in_turn() {
    let (mems, _) = stripes(3);
    // Each stripe behind a recorder of its row's `max_id` moves.
    let recorders: Vec<Arc<Recording>> = mems.iter().map(|m| recording(m.clone())).collect();
    let set = StripedStore::new(
        (0..3)
            .map(|i| {
                let store: Arc<dyn Store> = recorders[i as usize].clone();
                (store, StripeLayout::new(i, 3, BLOCK).unwrap())
            })
            .collect(),
        FAILOVER,
    )
    .unwrap();
    let alloc = Allocator::with_parts(
        Arc::new(set.clone()),
        AllocatorConfig {
            wait_timeout: Duration::from_secs(5),
            ..AllocatorConfig::default()
        },
        Arc::new(ManualClock::new()),
        Arc::new(FixedStep),
    );
    let mut seen = HashSet::new();
    let mut last = 0;
    for round in 0..12 {
        let down = round % 4; // 3: none down
        for (i, m) in mems.iter().enumerate() {
            m.set_failing("a", i == down);
        }
        for _ in 0..35 {
            let id = alloc.next(&name("a")).await.unwrap();
            assert!(id > last, "{id} after {last}");
            assert!(seen.insert(id));
            last = id;
        }
    }
    // Which stripe reserved each ID, from the rows' writes: every range
    // ends at the `max_id` its stripe's row was set to, and ranges are
    // handed out in increasing order, so an ID's range ends at the lowest
    // recorded end at or above it (ends of different stripes never meet:
    // they lie in different blocks). That row moved over the ID.
    let mut ends: Vec<(i64, i64, u32)> = Vec::new(); // (to, from, stripe)
    for (i, r) in recorders.iter().enumerate() {
        for (from, to) in r.hook().moves() {
            ends.push((to, from, i as u32));
        }
    }
    ends.sort_unstable();
    let mut served = HashSet::new();
    for &id in &seen {
        let at = ends.partition_point(|&(to, _, _)| to < id);
        let Some(&(to, from, stripe)) = ends.get(at) else {
            panic!("ID {id} is above every range the stripes' rows reserved: {ends:?}");
        };
        assert!(
            from < id,
            "ID {id}: stripe {stripe}'s row moved {from} -> {to}, not over it"
        );
        assert_eq!(
            stripe,
            owner(id, 3),
            "ID {id} reserved by stripe {stripe}'s row ({from} -> {to}), outside its blocks"
        );
        served.insert(stripe);
    }
    // every stripe served some of them
    assert_eq!(served.len(), 3, "{served:?}");
}

/// The client tokens of a stripe set live on its first stripe: written
/// there only, read from there, revoked there (docs/api.md, "Client tokens").
#[tokio::test]
async fn tokens_live_on_the_first_stripe() {
    let (mems, set) = stripes(3);
    let row = seqd::store::TokenRow {
        label: "t".into(),
        hash: "ab".repeat(32),
        prefixes: "*".into(),
        rights: "draw".into(),
        created_at: 1,
        expires_at: None,
        revoked_at: None,
    };
    set.insert_token(&row).await.unwrap();
    assert!(matches!(
        set.insert_token(&row).await,
        Err(StoreError::AlreadyExists)
    ));
    assert_eq!(mems[0].token_rows().await.unwrap(), vec![row.clone()]);
    for m in &mems[1..] {
        assert!(m.token_rows().await.unwrap().is_empty());
    }
    assert_eq!(set.token_rows().await.unwrap(), vec![row]);
    assert!(set.revoke_token("t", 5).await.unwrap());
    assert_eq!(mems[0].token_rows().await.unwrap()[0].revoked_at, Some(5));
    assert!(!set.revoke_token("t", 6).await.unwrap());
    assert!(matches!(
        set.revoke_token("nobody", 6).await,
        Err(StoreError::NotFound)
    ));
}

/// Fails the catalog's writes while `cut` is set: a stripe lost in the
/// middle of an admin write.
struct CutWrites(std::sync::atomic::AtomicBool);

impl seqd::store::forwarding::Hook for CutWrites {
    fn before(&self, call: seqd::store::forwarding::Call) -> Result<(), StoreError> {
        if call == seqd::store::forwarding::Call::Write
            && self.0.load(std::sync::atomic::Ordering::SeqCst)
        {
            return Err(StoreError::Unavailable("cut".into()));
        }
        Ok(())
    }
}

/// A create cut short by the last stripe's outage: refused, the row on
/// the stripes before it, reported missing on the one that failed (as an
/// audit would report it) although the stripe itself is not read; once the
/// stripe is back, the same create is accepted and writes the missing row,
/// and the next ping forgets it; a third create is "exists".
#[tokio::test(start_paused = true)]
async fn a_create_cut_short_by_a_stripe_is_reported_and_finished_by_the_same_create() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let mems: Vec<Arc<MemoryStore>> = (0..3).map(|_| Arc::new(MemoryStore::new())).collect();
    let cut = seqd::store::forwarding::Forwarding::new(
        mems[2].clone(),
        CutWrites(AtomicBool::new(false)),
    );
    let set = StripedStore::new(
        (0..3u32)
            .map(|i| {
                let store: Arc<dyn Store> = if i == 2 {
                    cut.clone()
                } else {
                    mems[i as usize].clone()
                };
                (store, StripeLayout::new(i, 3, BLOCK).unwrap())
            })
            .collect(),
        FAILOVER,
    )
    .unwrap();
    let seq = NewSequence::new(name("hc4"), 1, 100, String::new(), 1_000_000).unwrap();
    cut.hook().0.store(true, Ordering::SeqCst);
    assert!(matches!(
        set.create(&seq).await,
        Err(StoreError::Unavailable(_))
    ));
    assert_eq!(mems[0].max_id("hc4"), Some(0));
    assert_eq!(mems[1].max_id("hc4"), Some(0));
    assert_eq!(mems[2].max_id("hc4"), None);
    let status = set.status();
    assert_eq!(status[2].missing_rows, vec!["hc4"]);
    assert!(status[0].missing_rows.is_empty() && status[1].missing_rows.is_empty());
    // Served meanwhile, from the stripes that have the row.
    let r = set.reserve_above(&name("hc4"), 1, 0).await.unwrap();
    assert_ne!(owner(r.first(), 3), 2);

    cut.hook().0.store(false, Ordering::SeqCst);
    let mut finished = None;
    for _ in 0..100 {
        match set.create(&seq).await {
            Err(StoreError::Unavailable(_)) => tokio::time::sleep(FAILOVER).await, // until a probe
            other => {
                finished = Some(other);
                break;
            }
        }
    }
    assert!(matches!(finished, Some(Ok(_))), "{finished:?}");
    assert_eq!(mems[2].max_id("hc4"), Some(0), "the missing row, created");
    set.ping().await.unwrap();
    assert!(set.status()[2].missing_rows.is_empty());
    assert!(matches!(
        set.create(&seq).await,
        Err(StoreError::AlreadyExists)
    ));
}

/// A row set to `global` by SQL on a stripe (the API refuses it there) is
/// served as `instance`: reservations, reads and the settings the
/// allocator refreshes all say `instance`, and the allocator keeps drawing
/// from memory and from the stripes, before and after the row is set
/// back.
#[tokio::test(start_paused = true)]
async fn a_global_row_on_a_stripe_is_served_as_instance() {
    use seqd::domain::IdOrdering;
    let (mems, set) = stripes(2);
    mems[0].set_ordering("a", IdOrdering::Global);
    let r = set.reserve_above(&name("a"), 1, 0).await.unwrap();
    assert_eq!(r.ordering, IdOrdering::Instance);
    assert_eq!(
        set.get(&name("a")).await.unwrap().unwrap().ordering,
        IdOrdering::Instance
    );
    assert_eq!(
        set.settings_of(&[name("a")]).await.unwrap()[0].ordering,
        IdOrdering::Instance
    );
    assert!(set
        .list()
        .await
        .unwrap()
        .iter()
        .all(|row| row.ordering == IdOrdering::Instance));
    let page = set.list_page(None, None, 10).await.unwrap();
    assert_eq!(page.rows[0].ordering, IdOrdering::Instance);

    let alloc = Allocator::with_parts(
        Arc::new(set.clone()),
        AllocatorConfig::default(),
        Arc::new(ManualClock::new()),
        Arc::new(FixedStep),
    );
    let mut last = 0;
    for i in 0..30 {
        if i == 15 {
            mems[0].set_ordering("a", IdOrdering::Instance);
        }
        let id = alloc.next(&name("a")).await.unwrap();
        assert!(id > last, "{id} after {last}");
        last = id;
    }
}

/// The audit reads every stripe's record; when the one behind a URL
/// changes while the instance runs (another set's database put in its
/// place), that stripe is fenced: marked down, kept down by pings and
/// probes, reservations served by the others.
#[tokio::test(start_paused = true)]
async fn a_stripe_whose_record_changes_while_running_is_fenced() {
    use seqd::store::stripes::record::StripeRecord;
    let (mems, set) = stripes(2);
    for (i, m) in mems.iter().enumerate() {
        m.put_stripe_record(
            &StripeRecord::new(i as u32, 2, BLOCK).in_set("set-a"),
            false,
        )
        .await
        .unwrap();
    }
    set.start_audit(Duration::from_secs(1));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    set.ping().await.unwrap();
    assert!(set.status().iter().all(|s| s.up), "{:?}", set.status());

    mems[1]
        .put_stripe_record(&StripeRecord::new(1, 2, BLOCK).in_set("set-b"), true)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    set.ping().await.unwrap();
    tokio::time::sleep(Duration::from_secs(30)).await; // probes run meanwhile
    let status = set.status();
    assert!(!status[1].up, "{status:?}");
    assert!(
        status[1]
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("record changed")),
        "{status:?}"
    );
    mems[0].set_failing("a", true);
    assert!(
        set.reserve_above(&name("a"), 1, 0).await.is_err(),
        "the fenced stripe is not used even when the other fails"
    );
    mems[0].set_failing("a", false);
    let r = set.reserve_above(&name("a"), 1, 0).await.unwrap();
    assert_eq!(owner(r.first(), 2), 0);
}
