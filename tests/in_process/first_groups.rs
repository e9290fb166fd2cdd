//! Grouped first reservations (docs/design.md, "Grouped first
//! reservations"): the first fetches of names new to an instance are
//! reserved in groups, one statement per group, each name answered as it
//! would have been alone.
//!
//! The allocator's queue on the in-memory store (a manual clock, groups
//! recorded), then on every backend: a group with plain, duplicate,
//! missing, serial, global, nearly full and full names; two instances
//! warming the same names at once; a group whose database fails under
//! it (PostgreSQL and MariaDB: a row locked by another session and the
//! group's connection killed by the server; SQLite: the write lock held by
//! another connection past the busy timeout), which changes no row; and
//! (PostgreSQL, MariaDB) a row locked by another session among first uses,
//! which holds its own name only.

use crate::support::common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use common::lock::HeldLock;
use common::{name, new_seq, TestDb};
use seqd::allocator::{AllocError, Allocator, AllocatorConfig};
use seqd::domain::{IdOrdering, SeqName};
use seqd::store::forwarding::{Call, Counting, Forwarding};
use seqd::store::memory::MemoryStore;
use seqd::store::{prelude::*, Reservation, Store, StoreError};
use sqlx::Executor;

/// An allocator over `store` on a manual clock, fetching each row's step.
fn allocator<S: Segments>(store: &Arc<S>) -> Allocator {
    common::fixed_step_allocator(store, AllocatorConfig::default())
}

/// Draws the first ID of each of `names` at once, one task per name;
/// answers each name's first ID or error.
async fn first_ids(
    alloc: &Allocator,
    names: &[String],
) -> BTreeMap<String, Result<i64, AllocError>> {
    let tasks: Vec<_> = names
        .iter()
        .map(|n| {
            let (alloc, n) = (alloc.clone(), n.clone());
            tokio::spawn(async move {
                let id = alloc.next(&name(&n)).await;
                (n, id)
            })
        })
        .collect();
    let mut out = BTreeMap::new();
    for t in tasks {
        let (n, id) = t.await.unwrap();
        out.insert(n, id);
    }
    out
}

// ---------------------------------------------------------------------------
// The queue, on the in-memory store

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn first_uses_that_arrive_together_are_reserved_in_groups_each_answered_alone() {
    let store = Arc::new(MemoryStore::new());
    store.set_group_limit(16);
    let names: Vec<String> = (0..200).map(|i| format!("tenant-{i:03}")).collect();
    for (i, n) in names.iter().enumerate() {
        // Every tenth name is missing.
        if i % 10 != 7 {
            store.insert(n, 0, 100 + i as i64);
        }
    }
    // Each reservation takes a while, so that names queue behind the
    // groups in flight.
    for n in &names {
        store.set_delay(n, Duration::from_millis(2));
    }
    let alloc = allocator(&store);
    let ids = first_ids(&alloc, &names).await;
    for (i, n) in names.iter().enumerate() {
        match (i % 10, &ids[n]) {
            (7, answer) => assert_eq!(answer, &Err(AllocError::NotFound), "{n}"),
            (_, answer) => assert_eq!(answer, &Ok(1), "{n}"),
        }
        if i % 10 != 7 {
            // One segment of the row's own step, nothing more.
            assert_eq!(store.max_id(n), Some(100 + i as i64), "{n}");
        }
    }
    let groups = store.groups();
    assert!(groups.iter().all(|&g| (1..=16).contains(&g)), "{groups:?}");
    assert!(
        groups.iter().any(|&g| g > 1),
        "no group formed of 200 first uses at once: {groups:?}"
    );
    // Every name was asked once by a group (the missing ones too: each
    // failed alone, and is remembered as missing).
    assert_eq!(groups.iter().sum::<usize>(), 200, "{groups:?}");
    // The second use of every name is served from memory: no group.
    let before = store.groups().len();
    for n in names.iter().step_by(10) {
        assert_eq!(alloc.next(&name(n)).await, Ok(2));
    }
    assert_eq!(store.groups().len(), before);
}

#[tokio::test(start_paused = true)]
async fn a_failed_group_fails_each_name_and_each_retries_on_its_own() {
    let store = Arc::new(MemoryStore::new());
    store.set_group_limit(64);
    let names: Vec<String> = (0..20).map(|i| format!("t{i:02}")).collect();
    for n in &names {
        store.insert(n, 0, 100);
    }
    // The first two reservations of t03 fail: its group's answer for it
    // is an error, its retry is grouped again.
    store.fail_next("t03", 2);
    let alloc = allocator(&store);
    let ids = first_ids(&alloc, &names).await;
    assert!(ids.values().all(|id| id == &Ok(1)), "{ids:?}");
    assert_eq!(store.reserves("t03"), 3);
    // Each name went through a group once: t03's retries went alone.
    assert_eq!(
        store.groups().iter().sum::<usize>(),
        20,
        "{:?}",
        store.groups()
    );
    let stats = alloc.snapshot(&name("t03")).expect("live");
    assert_eq!(stats.fetch_errors, 2);
    for n in &names {
        assert_eq!(store.max_id(n), Some(100), "{n}: one segment");
    }
}

/// Ten names and `stuck`, whose reservation hangs past the fetch timeout
/// (5 s) as a statement waiting on a row another session holds; the first
/// use of `stuck` in flight, `after` later, alone in its group. Then the
/// ten names' first uses at once: each served within the wait timeout
/// (3 s), and `stuck` answered "unavailable". Answers the group sizes.
async fn first_uses_after_a_stuck_group(after: Duration) -> Vec<usize> {
    let store = Arc::new(MemoryStore::new());
    store.set_group_limit(64);
    store.insert("stuck", 0, 100);
    store.set_delay("stuck", Duration::from_secs(30));
    let names: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
    for n in &names {
        store.insert(n, 0, 100);
    }
    let alloc = allocator(&store);
    let stuck = {
        let alloc = alloc.clone();
        tokio::spawn(async move { alloc.next(&name("stuck")).await })
    };
    tokio::time::sleep(after).await;
    assert_eq!(store.groups(), [1], "the stuck name's group is in flight");
    let started = tokio::time::Instant::now();
    let ids = first_ids(&alloc, &names).await;
    assert!(ids.values().all(|id| id == &Ok(1)), "{ids:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(matches!(
        stuck.await.unwrap(),
        Err(AllocError::Unavailable { .. })
    ));
    store.groups()
}

#[tokio::test(start_paused = true)]
async fn a_stuck_group_does_not_hold_the_first_uses_behind_it() {
    // Past the slow-group mark: the next ask starts a group beside it.
    first_uses_after_a_stuck_group(Duration::from_millis(100)).await;
}

#[tokio::test(start_paused = true)]
async fn first_uses_queued_behind_a_stuck_group_get_a_group_beside_it() {
    // Queued 1 ms after it began, well inside the slow-group mark, and no
    // ask comes after them: the stuck group's own timer starts their group
    // (without it they would wait for its 5 s fetch timeout, past the 3 s
    // wait timeout).
    let groups = first_uses_after_a_stuck_group(Duration::from_millis(1)).await;
    assert_eq!(groups[0], 1);
    assert_eq!(groups[1..].iter().sum::<usize>(), 10, "{groups:?}");
}

#[tokio::test]
async fn a_store_that_groups_nothing_is_asked_alone() {
    let store = Arc::new(MemoryStore::new());
    for i in 0..50 {
        store.insert(&format!("n{i}"), 0, 100);
    }
    let alloc = allocator(&store);
    let names: Vec<String> = (0..50).map(|i| format!("n{i}")).collect();
    let ids = first_ids(&alloc, &names).await;
    assert!(ids.values().all(|id| id == &Ok(1)));
    assert!(store.groups().is_empty(), "group_limit 1 groups nothing");
    assert_eq!(store.total_reserves(), 50);
}

// ---------------------------------------------------------------------------
// The group statement, on every backend

per_backend!(
    a_group_answers_each_name_as_it_would_alone,
    two_instances_warming_the_same_names_never_overlap,
    a_database_failing_under_a_group_changes_nothing,
);

/// The rows of the mixed group, each made twice: `{n}` for the group and
/// `{n}-alone` to be reserved alone. `full` cannot take even its step;
/// `nearly-full` cannot take the asked 100 but can take its step (10).
async fn mixed_rows(store: &Arc<dyn Store>) {
    for suffix in ["", "-alone"] {
        let create = |seq: seqd::domain::NewSequence| {
            let store = store.clone();
            async move { store.create(&seq).await.unwrap() }
        };
        create(new_seq(&format!("plain-a{suffix}"), 1, 10)).await;
        create(new_seq(&format!("plain-b{suffix}"), 501, 1000)).await;
        create(new_seq(&format!("global{suffix}"), 1, 10).with_ordering(IdOrdering::Global)).await;
        create(new_seq(&format!("nearly-full{suffix}"), i64::MAX - 49, 10)).await;
        create(new_seq(&format!("full{suffix}"), i64::MAX - 4, 10)).await;
        common::create_daily_serial(
            store,
            &format!("serial{suffix}"),
            10,
            "S{yyyy}{MM}{dd}-{seq:04}",
        )
        .await;
    }
}

/// A reservation or the name of its error, to compare answers.
fn outcome(answer: &Result<Reservation, StoreError>) -> Result<Reservation, String> {
    answer.clone().map_err(|e| format!("{e:?}"))
}

async fn a_group_answers_each_name_as_it_would_alone(db: TestDb) {
    let store = common::store(&db).await;
    assert!(store.group_limit() > 1, "a SQL store groups");
    mixed_rows(&store).await;
    let names = [
        "plain-a",
        "missing",
        "serial",
        "plain-b",
        "global",
        "nearly-full",
        "full",
        "plain-a",
    ];
    let asks: Vec<(SeqName, i64)> = names.iter().map(|n| (name(n), 100)).collect();
    let grouped = store.reserve_group(&asks).await;
    assert_eq!(grouped.len(), asks.len());
    let mut alone = Vec::new();
    for n in names {
        let twin = if n == "missing" {
            n.to_owned()
        } else {
            format!("{n}-alone")
        };
        alone.push(store.reserve(&name(&twin), 100).await);
    }
    for ((n, g), a) in names.iter().zip(&grouped).zip(&alone) {
        assert_eq!(outcome(g), outcome(a), "{n}: grouped, then alone");
    }
    // What alone answers, written out.
    let plain_a: Vec<i64> = [&grouped[0], &grouped[7]]
        .iter()
        .map(|r| r.as_ref().unwrap().first())
        .collect();
    let mut plain_a_sorted = plain_a.clone();
    plain_a_sorted.sort();
    assert_eq!(plain_a_sorted, [1, 101], "plain-a asked twice: two ranges");
    assert!(matches!(grouped[1], Err(StoreError::NotFound)));
    assert!(matches!(grouped[2], Err(StoreError::Serial)));
    let b = grouped[3].as_ref().unwrap();
    assert_eq!((b.first(), b.size, b.row_step), (501, 1000, 1000));
    let global = grouped[4].as_ref().unwrap();
    assert_eq!((global.first(), global.ordering), (1, IdOrdering::Global));
    let nearly = grouped[5].as_ref().unwrap();
    assert_eq!((nearly.first(), nearly.size), (i64::MAX - 49, 10));
    assert!(matches!(grouped[6], Err(StoreError::Exhausted)));
    // The rows moved by exactly what was answered.
    for (n, max_id) in [
        ("plain-a", 200),
        ("plain-b", 1500),
        ("global", 100),
        ("nearly-full", i64::MAX - 40),
        ("full", i64::MAX - 5),
        ("serial", 0),
    ] {
        assert_eq!(common::row(&store, n).await.max_id, max_id, "{n}");
    }
}

/// `n` rows `w-0000`.. of step 1000 at 0, in one `INSERT`.
async fn warm_rows(db: &TestDb, n: usize) -> Vec<String> {
    let names: Vec<String> = (0..n).map(|i| format!("w-{i:04}")).collect();
    let values: Vec<String> = names.iter().map(|n| format!("('{n}', 0, 1000)")).collect();
    common::execute(
        db,
        &format!(
            "INSERT INTO sequences (name, max_id, step) VALUES {}",
            values.join(", ")
        ),
    )
    .await;
    names
}

async fn two_instances_warming_the_same_names_never_overlap(db: TestDb) {
    let names = {
        common::store(&db).await;
        warm_rows(&db, 2_000).await
    };
    let mut instances = Vec::new();
    for _ in 0..2 {
        let hook = Forwarding::new(common::connect(&db).await, Counting::of(Call::Reserve));
        let alloc = allocator(&hook);
        instances.push((hook, alloc));
    }
    // 64 tasks per instance; the second walks the names backwards.
    let mut runs = Vec::new();
    for (i, (_, alloc)) in instances.iter().enumerate() {
        for task in 0..64 {
            let alloc = alloc.clone();
            let mut mine: Vec<String> = names.iter().skip(task).step_by(64).cloned().collect();
            if i == 1 {
                mine.reverse();
            }
            runs.push(tokio::spawn(async move {
                let mut got = Vec::new();
                for n in mine {
                    let id = alloc
                        .next(&name(&n))
                        .await
                        .unwrap_or_else(|e| panic!("{n}: {e}"));
                    got.push((n, id));
                }
                (i, got)
            }));
        }
    }
    let mut ids: HashMap<String, [i64; 2]> = HashMap::new();
    for run in runs {
        let (i, got) = run.await.unwrap();
        for (n, id) in got {
            ids.entry(n).or_default()[i] = id;
        }
    }
    let store = common::connect(&db).await;
    let rows: HashMap<String, i64> = store
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.name.to_string(), r.max_id))
        .collect();
    for n in &names {
        let mut pair = ids[n];
        pair.sort();
        // Each instance reserved one segment of its own: [1, 1000] and
        // [1001, 2000], in either order.
        assert_eq!(pair, [1, 1001], "{n}: the two instances' first IDs");
        assert_eq!(rows[n], 2000, "{n}: two segments reserved, no more");
    }
    for (i, (hook, _)) in instances.iter().enumerate() {
        let calls = hook.hook().count();
        assert!(
            calls < names.len() as u64,
            "instance {i}: {calls} reserving calls for {} first uses: nothing grouped",
            names.len()
        );
    }
}

network_backends!(a_locked_row_holds_only_its_own_first_use);

/// SQLite has no row locks: its write lock holds every name, so it is cut
/// above and not here.
async fn a_locked_row_holds_only_its_own_first_use(db: TestDb) {
    let store = common::store(&db).await;
    let names: Vec<String> = (0..40).map(|i| format!("lk-{i:02}")).collect();
    for n in &names {
        store.create(&new_seq(n, 1, 100)).await.unwrap();
    }
    // Another session holds lk-00 `FOR UPDATE` for the whole test.
    let blocker = HeldLock::take(&db, "lk-00").await;
    // A wait timeout far past the lock bound (2 s): a first use held behind
    // the lock for good shows as a wait, not as an early timeout.
    let config = AllocatorConfig {
        wait_timeout: Duration::from_secs(60),
        ..AllocatorConfig::default()
    };
    let alloc = common::fixed_step_allocator(
        &Forwarding::new(store.clone(), Counting::of(Call::Reserve)),
        config,
    );
    let locked = {
        let alloc = alloc.clone();
        tokio::spawn(async move { alloc.next(&name("lk-00")).await })
    };
    // The other 39 first uses at once, with lk-00's: whichever group holds
    // lk-00 waits on its lock; every other name is served while it is held.
    let ids = first_ids(&alloc, &names[1..]).await;
    assert!(ids.values().all(|id| id == &Ok(1)), "{ids:?}");
    assert!(
        !locked.is_finished(),
        "lk-00 answered while its row was locked"
    );
    assert_eq!(common::row(&store, "lk-00").await.max_id, 0);
    blocker.release().await;
    assert_eq!(locked.await.unwrap(), Ok(1));
    for n in &names {
        assert_eq!(common::row(&store, n).await.max_id, 100, "{n}: one segment");
    }
}

/// Kills, from this session, the connection of a group's statement
/// waiting on the lock (PostgreSQL, MariaDB); true once one was killed.
/// Only a statement of this test's database (blocked by this session on
/// PostgreSQL): other tests' run in the same process and on the same servers.
/// SQLite's waiting statement fails by itself at the busy timeout.
async fn cut_group(lock: &mut HeldLock) -> bool {
    match lock {
        HeldLock::Postgres(c) => {
            // This session is inside its transaction, where
            // pg_stat_activity is read once and kept: read it afresh.
            c.execute("SELECT pg_stat_clear_snapshot()").await.unwrap();
            let killed: Vec<(bool,)> = sqlx::query_as(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE sequences SET max_id%IN (%' \
                 AND pg_backend_pid() = ANY(pg_blocking_pids(pid))",
            )
            .fetch_all(&mut *c)
            .await
            .unwrap();
            killed.iter().any(|k| k.0)
        }
        HeldLock::Mysql(c) => {
            let ids: Vec<(i64,)> = sqlx::query_as(
                "SELECT CAST(id AS SIGNED) FROM information_schema.processlist \
                 WHERE info LIKE 'SELECT name, max_id%FOR UPDATE' AND db = DATABASE()",
            )
            .fetch_all(&mut *c)
            .await
            .unwrap();
            for (id,) in &ids {
                // Gone already (it timed out): nothing to kill.
                let _ = c.execute(format!("KILL {id}").as_str()).await;
            }
            !ids.is_empty()
        }
        HeldLock::Sqlite(_) => true,
    }
}

async fn a_database_failing_under_a_group_changes_nothing(db: TestDb) {
    let store = common::store(&db).await;
    let names: Vec<String> = (0..40).map(|i| format!("cut-{i:02}")).collect();
    for n in &names {
        store.create(&new_seq(n, 1, 100)).await.unwrap();
    }
    let mut blocker = HeldLock::take(&db, "cut-00").await;
    // A look before the group waits (as a slow start makes it in CI): the
    // looks after it must still see the group.
    cut_group(&mut blocker).await;
    // One group of the 40 names, waiting on the lock.
    let group = {
        let store = store.clone();
        let asks: Vec<(SeqName, i64)> = names.iter().map(|n| (name(n), 1)).collect();
        tokio::spawn(async move { store.reserve_group(&asks).await })
    };
    let mut cut = false;
    for _ in 0..100 {
        if cut_group(&mut blocker).await {
            cut = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(cut, "no group waited on the lock");
    // Killed (PostgreSQL, MariaDB) or failed at the busy timeout while
    // the lock is held (SQLite): the whole group failed.
    let answers = group.await.unwrap();
    blocker.release().await;
    assert_eq!(answers.len(), names.len());
    for (n, answer) in names.iter().zip(&answers) {
        assert!(
            matches!(answer, Err(StoreError::Unavailable(_))),
            "{n}: {answer:?}"
        );
        // And changed no row.
        assert_eq!(common::row(&store, n).await.max_id, 0, "{n}");
    }
    // An allocator then serves every name from its row's start.
    let alloc = allocator(&Forwarding::new(store.clone(), Counting::of(Call::Reserve)));
    let ids = first_ids(&alloc, &names).await;
    assert!(ids.values().all(|id| id == &Ok(1)), "{ids:?}");
    for n in &names {
        assert_eq!(common::row(&store, n).await.max_id, 100, "{n}");
    }
}
