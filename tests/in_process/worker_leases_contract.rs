//! The worker-lease contract: every `WorkerLeases` backend (SQLite,
//! PostgreSQL, MariaDB) must pass this one suite, the preconditions of
//! `seqd::store::workers` statement by statement. Each test runs once per
//! backend on a fresh database (see `common`); run one backend with e.g.
//! `cargo test --test in_process worker_leases_contract:: -- --skip sqlite --skip mysql`.

use crate::support::common;

use std::sync::Arc;

use common::TestDb;
use seqd::store::workers::{WorkerLeases, WorkerRow, MAX_OWNER_LEN};
use seqd::store::{StoreError, StoreOptions};

/// A wall-clock time (ms since the Unix epoch): "now" in these tests.
const NOW: i64 = 1_750_000_000_000;
/// A lease of 30 s.
const TTL: i64 = 30_000;

fn row(worker_id: u32, owner: &str, lease_until: i64, last_timestamp: i64) -> WorkerRow {
    WorkerRow {
        worker_id,
        owner: owner.into(),
        lease_until,
        last_timestamp,
    }
}

/// Lease storage on `db` with its own pool, not migrated.
async fn connect(db: &TestDb) -> Arc<dyn WorkerLeases> {
    connect_url(&db.url).await
}

/// Lease storage on the database of `url` with its own small pool (one
/// connection and the leases' own), not migrated.
async fn connect_url(url: &str) -> Arc<dyn WorkerLeases> {
    let options = StoreOptions::default().with_max_connections(1);
    seqd::store::connect(url, &options)
        .await
        .unwrap_or_else(|e| panic!("lease storage on {url:?}: {e}"))
        .leases()
}

/// Lease storage on `db`, migrated.
async fn leases(db: &TestDb) -> Arc<dyn WorkerLeases> {
    let leases = connect(db).await;
    leases
        .migrate()
        .await
        .unwrap_or_else(|e| panic!("migrating {:?}: {e}", db.backend));
    leases
}

/// Lease storage on `db`, migrated, holding `rows`.
async fn leases_with(db: &TestDb, rows: &[WorkerRow]) -> Arc<dyn WorkerLeases> {
    let leases = leases(db).await;
    for r in rows {
        assert!(leases.insert(r).await.unwrap(), "inserting {r:?}");
    }
    leases
}

/// The stored row of `worker_id` (panics if it is missing).
async fn stored(leases: &Arc<dyn WorkerLeases>, worker_id: u32) -> WorkerRow {
    leases
        .list(u32::MAX)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.worker_id == worker_id)
        .unwrap_or_else(|| panic!("no row for worker {worker_id}"))
}

/// An expired row of a previous holder: free to take at `NOW`.
/// Whether `owner` takes `seen` at `now`, leased until `until` (which is
/// also the `last_timestamp` it writes).
async fn take(
    leases: &Arc<dyn WorkerLeases>,
    seen: &WorkerRow,
    owner: &str,
    until: i64,
    now: i64,
) -> bool {
    let new = seen.claimed_by(owner, until, until);
    leases.claim(seen, &new, now).await.unwrap()
}

fn expired() -> WorkerRow {
    row(2, "previous", NOW - 1, NOW + 500)
}

// ---------------------------------------------------------------------------
// migrate, list, insert

async fn migrate_is_idempotent_and_keeps_rows(db: TestDb) {
    let leases = leases_with(&db, &[expired()]).await;
    leases.migrate().await.unwrap();
    connect(&db).await.migrate().await.unwrap();
    assert_eq!(leases.list(u32::MAX).await.unwrap(), vec![expired()]);
    assert_eq!(leases.backend(), db.backend.store_name());
}

async fn list_orders_by_worker_id_and_keeps_only_those_below(db: TestDb) {
    let rows = [
        row(5, "e", NOW + 5, 1 << 52),
        row(1, "a", 0, 0),
        row(65_535, "z", NOW, NOW),
        row(3, "c", -1, NOW + 3),
        row(0, "0", NOW, i64::MAX),
    ];
    let leases = leases_with(&db, &rows).await;
    let ids = |rows: Vec<WorkerRow>| rows.iter().map(|r| r.worker_id).collect::<Vec<_>>();
    assert_eq!(
        ids(leases.list(u32::MAX).await.unwrap()),
        [0, 1, 3, 5, 65_535]
    );
    assert_eq!(ids(leases.list(65_535).await.unwrap()), [0, 1, 3, 5]);
    assert_eq!(ids(leases.list(4).await.unwrap()), [0, 1, 3]);
    assert_eq!(ids(leases.list(1).await.unwrap()), [0]);
    assert!(leases.list(0).await.unwrap().is_empty());
    // Every value round-trips.
    let mut sorted = rows.to_vec();
    sorted.sort_by_key(|r| r.worker_id);
    assert_eq!(leases.list(u32::MAX).await.unwrap(), sorted);
}

async fn insert_of_an_existing_worker_id_answers_false_and_changes_nothing(db: TestDb) {
    let leases = leases_with(&db, &[row(7, "first", NOW + TTL, NOW + TTL)]).await;
    assert!(!leases.insert(&row(7, "second", NOW, NOW)).await.unwrap());
    assert_eq!(
        leases.list(u32::MAX).await.unwrap(),
        vec![row(7, "first", NOW + TTL, NOW + TTL)]
    );
}

async fn owners_are_ascii_up_to_64_characters_and_compared_exactly(db: TestDb) {
    let long = "o".repeat(MAX_OWNER_LEN);
    let leases = leases_with(&db, &[row(0, &long, NOW + TTL, NOW + TTL)]).await;
    assert_eq!(stored(&leases, 0).await.owner, long);
    for bad in ["", "é", &"o".repeat(MAX_OWNER_LEN + 1)] {
        assert!(
            matches!(
                leases.insert(&row(1, bad, NOW, NOW)).await,
                Err(StoreError::Config(_))
            ),
            "{bad:?}"
        );
    }
    // Another case is another owner: no renewal, no claim of a live lease.
    let upper = long.to_uppercase();
    assert!(!leases.renew(0, &upper, NOW + 2 * TTL).await.unwrap());
    let seen = stored(&leases, 0).await;
    assert!(!take(&leases, &seen, &upper, NOW + TTL, NOW).await);
    assert_eq!(stored(&leases, 0).await, seen);
}

// ---------------------------------------------------------------------------
// claim

async fn claim_of_an_expired_row_takes_it_and_writes_the_values(db: TestDb) {
    let leases = leases_with(&db, &[expired()]).await;
    assert!(take(&leases, &expired(), "next", NOW + TTL, NOW).await);
    assert_eq!(
        stored(&leases, 2).await,
        row(2, "next", NOW + TTL, NOW + TTL)
    );
}

async fn claim_with_a_stale_view_of_the_row_answers_false(db: TestDb) {
    let leases = leases_with(&db, &[expired()]).await;
    let e = expired();
    let stale = [
        WorkerRow {
            owner: "someone-else".into(),
            ..e.clone()
        },
        WorkerRow {
            lease_until: e.lease_until - 1,
            ..e.clone()
        },
        WorkerRow {
            last_timestamp: e.last_timestamp - 1,
            ..e.clone()
        },
        WorkerRow {
            worker_id: 3,
            ..e.clone()
        },
    ];
    for seen in &stale {
        assert!(
            !take(&leases, seen, "next", NOW + TTL, NOW).await,
            "{seen:?}"
        );
        assert_eq!(stored(&leases, 2).await, e, "after {seen:?}");
    }
}

async fn claim_of_a_live_lease_of_someone_else_answers_false(db: TestDb) {
    let live = row(4, "holder", NOW, NOW);
    let leases = leases_with(&db, std::slice::from_ref(&live)).await;
    // `lease_until < now` is strict: a lease ending at `now` is still live.
    for now in [NOW - TTL, NOW - 1, NOW] {
        assert!(
            !take(&leases, &live, "taker", now + TTL, now).await,
            "at {now}"
        );
    }
    assert_eq!(stored(&leases, 4).await, live);
}

async fn claim_of_an_own_row_succeeds_while_its_lease_is_live(db: TestDb) {
    let own = row(1, "me", NOW + TTL, NOW + TTL);
    let leases = leases_with(&db, std::slice::from_ref(&own)).await;
    assert!(take(&leases, &own, "me", NOW + 2 * TTL, NOW).await);
    assert_eq!(
        stored(&leases, 1).await,
        row(1, "me", NOW + 2 * TTL, NOW + 2 * TTL)
    );
    // Writing the values the row already holds still answers true.
    let same = stored(&leases, 1).await;
    assert!(leases
        .claim(
            &same,
            &same.claimed_by("me", same.lease_until, same.last_timestamp),
            NOW
        )
        .await
        .unwrap());
    assert_eq!(stored(&leases, 1).await, same);
}

async fn an_applied_claim_retried_with_the_same_view_answers_false(db: TestDb) {
    // A claim whose answer was lost (a timeout) and is sent again.
    let leases = leases_with(&db, &[expired()]).await;
    let written = row(2, "claimer", NOW + TTL, NOW + TTL);
    assert!(take(&leases, &expired(), "claimer", NOW + TTL, NOW).await);
    assert!(!take(&leases, &expired(), "claimer", NOW + TTL, NOW + 1).await);
    assert_eq!(leases.list(u32::MAX).await.unwrap(), vec![written]);
}

async fn exactly_one_of_sixteen_racing_claimers_wins(db: TestDb) {
    let leases = leases_with(&db, &[expired()]).await;
    let start = Arc::new(tokio::sync::Barrier::new(16));
    let racers: Vec<_> = (0..16)
        .map(|i| {
            let url = db.url.clone();
            let start = start.clone();
            tokio::spawn(async move {
                // Each racer its own pool, so the claims meet in the database.
                let mine = connect_url(&url).await;
                let owner = format!("racer-{i}");
                start.wait().await;
                let won = mine
                    .claim(
                        &expired(),
                        &expired().claimed_by(&owner, NOW + TTL + i, NOW + TTL + i),
                        NOW,
                    )
                    .await
                    .unwrap_or_else(|e| panic!("{owner}: {e}"));
                (i, won)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for r in racers {
        let (i, won) = r.await.unwrap();
        if won {
            winners.push(i);
        }
    }
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    let w = winners[0];
    assert_eq!(
        stored(&leases, 2).await,
        row(2, &format!("racer-{w}"), NOW + TTL + w, NOW + TTL + w),
        "the row names the winner"
    );
}

// ---------------------------------------------------------------------------
// renew, release, expiry

async fn renew_extends_the_lease_and_raises_last_timestamp_to_it(db: TestDb) {
    let leases = leases_with(&db, &[row(0, "me", NOW, NOW)]).await;
    assert!(leases.renew(0, "me", NOW + TTL).await.unwrap());
    assert_eq!(stored(&leases, 0).await, row(0, "me", NOW + TTL, NOW + TTL));
    // The same renewal again (a frozen clock) still holds the row.
    assert!(leases.renew(0, "me", NOW + TTL).await.unwrap());
    assert_eq!(stored(&leases, 0).await, row(0, "me", NOW + TTL, NOW + TTL));
}

async fn renew_never_lowers_last_timestamp(db: TestDb) {
    // A bound written earlier from a clock that was ahead.
    let leases = leases_with(&db, &[row(0, "me", NOW, NOW + 5 * TTL)]).await;
    assert!(leases.renew(0, "me", NOW + TTL).await.unwrap());
    assert_eq!(
        stored(&leases, 0).await,
        row(0, "me", NOW + TTL, NOW + 5 * TTL)
    );
}

async fn renew_and_release_by_a_non_owner_answer_false_and_change_nothing(db: TestDb) {
    let held = row(0, "me", NOW + TTL, NOW + TTL);
    let leases = leases_with(&db, std::slice::from_ref(&held)).await;
    assert!(!leases.renew(0, "other", NOW + 2 * TTL).await.unwrap());
    assert!(!leases.release(0, "other", NOW).await.unwrap());
    assert!(
        !leases.renew(9, "me", NOW + 2 * TTL).await.unwrap(),
        "no row"
    );
    assert!(!leases.release(9, "me", NOW).await.unwrap(), "no row");
    assert_eq!(leases.list(u32::MAX).await.unwrap(), vec![held]);
}

async fn release_frees_the_row_with_the_exact_last_timestamp(db: TestDb) {
    let leases = leases_with(&db, &[row(0, "me", NOW + TTL, NOW + TTL)]).await;
    // Exact: lower than the bound the renewals wrote.
    assert!(leases.release(0, "me", NOW + 7).await.unwrap());
    let released = stored(&leases, 0).await;
    assert_eq!(released, row(0, "me", 0, NOW + 7));
    // Free at once for anyone.
    assert!(take(&leases, &released, "next", NOW + TTL, NOW).await);
}

async fn a_lease_that_ran_out_can_be_claimed_by_another_owner(db: TestDb) {
    let lapsed = row(0, "me", NOW + TTL, NOW + TTL);
    let leases = leases_with(&db, std::slice::from_ref(&lapsed)).await;
    let claim_at = |now: i64| {
        let (leases, lapsed) = (leases.clone(), lapsed.clone());
        async move { take(&leases, &lapsed, "other", now + TTL, now).await }
    };
    assert!(!claim_at(NOW + TTL).await, "not before it has run out");
    assert!(claim_at(NOW + TTL + 1).await);
    assert_eq!(
        stored(&leases, 0).await,
        row(0, "other", NOW + 2 * TTL + 1, NOW + 2 * TTL + 1)
    );
    // The previous owner has lost it: no renewal, no release.
    assert!(!leases.renew(0, "me", NOW + 3 * TTL).await.unwrap());
    assert!(!leases.release(0, "me", NOW).await.unwrap());
    assert_eq!(stored(&leases, 0).await.owner, "other");
}

per_backend!(
    migrate_is_idempotent_and_keeps_rows,
    list_orders_by_worker_id_and_keeps_only_those_below,
    insert_of_an_existing_worker_id_answers_false_and_changes_nothing,
    owners_are_ascii_up_to_64_characters_and_compared_exactly,
    claim_of_an_expired_row_takes_it_and_writes_the_values,
    claim_with_a_stale_view_of_the_row_answers_false,
    claim_of_a_live_lease_of_someone_else_answers_false,
    claim_of_an_own_row_succeeds_while_its_lease_is_live,
    an_applied_claim_retried_with_the_same_view_answers_false,
    exactly_one_of_sixteen_racing_claimers_wins,
    renew_extends_the_lease_and_raises_last_timestamp_to_it,
    renew_never_lowers_last_timestamp,
    renew_and_release_by_a_non_owner_answer_false_and_change_nothing,
    release_frees_the_row_with_the_exact_last_timestamp,
    a_lease_that_ran_out_can_be_claimed_by_another_owner,
);
