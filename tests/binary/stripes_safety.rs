//! Stripes on real databases, through the `seqd` binary: start-up refuses
//! URLs that do not match the stripe records (reordered, missing, extra, one
//! database twice), a fresh set starts, `seqd stripes init` turns a single
//! database or a set into a larger set without reissuing an ID (and writes
//! nothing in a dry run), and `seqd sequences list` reports rows missing on
//! a stripe. docs/design.md, "Stripes: records and checks".

use crate::support::common;
use crate::support::server;

use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use common::{ok, Backend, TestDb};
use seqd::store::stripes::StripeLayout;
use seqd::store::{Store, StoreError};
use server::Process;

/// Runs `seqd <args>` with every URL of `dbs` as `--database-url`, in
/// order; killed if it runs for a minute (a server that should have
/// refused to start).
async fn seqd_with(args: &[&str], dbs: &[&TestDb]) -> Output {
    let urls: Vec<&str> = dbs.iter().map(|d| d.url.as_str()).collect();
    seqd_on_urls(args, &urls).await
}

/// [`seqd_with`] on URLs.
async fn seqd_on_urls(args: &[&str], urls: &[&str]) -> Output {
    let mut all: Vec<&str> = args.to_vec();
    for url in urls {
        all.extend(["--database-url", url]);
    }
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_seqd"));
    cmd.args(&all).env("RUST_LOG", "warn").kill_on_drop(true);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("SEQD_") || key == "DATABASE_URL" {
            cmd.env_remove(key);
        }
    }
    tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("seqd {all:?} still running after 60 s"))
        .expect("run seqd")
}

/// `seqd serve` on `dbs` must refuse to start (exit status 2, the stripes'
/// configuration error) with `needle` on stderr.
async fn serve_refuses(dbs: &[&TestDb], needle: &str) {
    let urls: Vec<&str> = dbs.iter().map(|d| d.url.as_str()).collect();
    serve_refuses_urls(&urls, needle).await
}

/// [`serve_refuses`] on URLs.
async fn serve_refuses_urls(urls: &[&str], needle: &str) {
    let out = seqd_on_urls(&["serve", "--listen", "127.0.0.1:0"], urls).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
}

/// Fresh SQLite databases.
async fn sqlite_dbs(n: usize) -> Vec<TestDb> {
    let mut dbs = Vec::new();
    for _ in 0..n {
        dbs.push(
            common::test_db(Backend::Sqlite)
                .await
                .expect("SQLite is always available"),
        );
    }
    dbs
}

/// The stripe layout recorded in `store` (panics without a record).
async fn layout_of(store: &Arc<dyn Store>) -> StripeLayout {
    let record = store
        .stripe_record()
        .await
        .expect("read the stripe record")
        .expect("a stripe record");
    record.layout().expect("a valid record")
}

/// Reserves `want` IDs of `name` on a stripe as the striped store will:
/// the range [`StripeLayout::next_range`] gives above the row's `max_id`,
/// taken by compare-and-set.
async fn reserve_on(
    store: &Arc<dyn Store>,
    layout: StripeLayout,
    name: &str,
    want: i64,
) -> (i64, i64) {
    loop {
        let max_id = common::row(store, name).await.max_id;
        let (first, last) = layout
            .next_range(max_id, 0, want)
            .expect("room on the stripe");
        if store
            .compare_and_set_max_id(&common::name(name), max_id, last)
            .await
            .expect("compare-and-set")
        {
            return (first, last);
        }
    }
}

/// Reserves `rounds` ranges of `want` IDs of `name` on every stripe (each
/// with its recorded layout), checking each range lies in its stripe's
/// blocks; all ranges reserved.
async fn reserve_everywhere(
    stores: &[Arc<dyn Store>],
    name: &str,
    want: i64,
    rounds: usize,
) -> Vec<(i64, i64)> {
    let mut ranges = Vec::new();
    for store in stores {
        let layout = layout_of(store).await;
        for _ in 0..rounds {
            let (first, last) = reserve_on(store, layout, name, want).await;
            assert!(
                layout.owns(first) && layout.owns(last),
                "{first}..={last} outside {layout:?}"
            );
            ranges.push((first, last));
        }
    }
    ranges
}

/// Asserts no two ranges share an ID.
#[track_caller]
fn assert_disjoint(ranges: &[(i64, i64)]) {
    let mut sorted = ranges.to_vec();
    sorted.sort();
    for pair in sorted.windows(2) {
        assert!(
            pair[0].1 < pair[1].0,
            "overlap: {:?} and {:?}",
            pair[0],
            pair[1]
        );
    }
}

/// Migrated stores on `dbs`.
async fn stores_of(dbs: &[TestDb]) -> Vec<Arc<dyn Store>> {
    let mut stores = Vec::new();
    for db in dbs {
        stores.push(common::store(db).await);
    }
    stores
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_refuses_reordered_missing_extra_and_duplicate_sqlite_urls() {
    let dbs = sqlite_dbs(4).await;
    let [a, b, c, d] = [&dbs[0], &dbs[1], &dbs[2], &dbs[3]];
    // `seqd migrate` claims the fresh set, as `serve` would.
    ok(&seqd_with(&["migrate"], &[a, b, c]).await);

    serve_refuses(
        &[b, a, c],
        "URL #1 is stripe 2 of 3, not stripe 1: the URLs are in a different order than when the stripes were set up",
    )
    .await;
    serve_refuses(
        &[a, b],
        "the databases were set up as 3 stripes; 2 URLs given",
    )
    .await;
    serve_refuses(&[a, b, c, d], "URL #4 is not a stripe of this set").await;
    serve_refuses(&[a, b, b], "URL #3 and URL #2 are the same database").await;
    // The extra database was left as it was: no record written.
    let extra = common::store(d).await;
    assert_eq!(extra.stripe_record().await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_refuses_one_fresh_sqlite_file_given_twice() {
    let dbs = sqlite_dbs(1).await;
    serve_refuses(
        &[&dbs[0], &dbs[0]],
        "URL #2 and URL #1 are the same database",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fresh_set_of_three_starts_and_records_each_stripe_in_order() {
    let dbs = sqlite_dbs(3).await;
    let urls: Vec<&str> = dbs.iter().map(|d| d.url.as_str()).collect();
    let process = Process::spawn(&urls.join(" "), &[]).await;
    let health = reqwest::get(format!("{}/healthz", process.base))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    process.kill().await;
    for (i, store) in stores_of(&dbs).await.iter().enumerate() {
        assert_eq!(
            layout_of(store).await,
            StripeLayout::new(i as u32, 3, seqd::store::stripes::DEFAULT_BLOCK).unwrap()
        );
    }
    // Started again in the same order: accepted.
    let again = Process::spawn(&urls.join(" "), &["--migrate", "check"]).await;
    again.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_mariadb_and_sqlite_stripes_are_checked_alike() {
    let Some([pg, my]) = common::test_dbs([Backend::Postgres, Backend::Mysql]).await else {
        return;
    };
    let lite = sqlite_dbs(1).await.remove(0);
    ok(&seqd_with(&["migrate"], &[&pg, &my, &lite]).await);
    for (i, db) in [&pg, &my, &lite].into_iter().enumerate() {
        let layout = layout_of(&common::store(db).await).await;
        assert_eq!((layout.index(), layout.count()), (i as u32, 3));
    }
    serve_refuses(&[&my, &pg, &lite], "URL #1 is stripe 2 of 3, not stripe 1").await;
    serve_refuses(&[&pg, &my], "set up as 3 stripes; 2 URLs given").await;
}

/// PostgreSQL, MariaDB, then the PostgreSQL schema again under a second URL:
/// refused (exit 2, "same database") after the first two were claimed, and
/// the refused start removes the records it wrote, so the same databases
/// given right start as a fresh set (before, the two records stayed and
/// every later start or `stripes init` with them was refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_refuses_one_postgres_database_given_twice_and_leaves_no_record() {
    let Some([pg, my]) = common::test_dbs([Backend::Postgres, Backend::Mysql]).await else {
        return;
    };
    // The same schema under a second URL (another application name).
    let twin = format!("{}&application_name=seqd_twin", pg.url);
    let urls = [pg.url.as_str(), my.url.as_str(), twin.as_str()];
    serve_refuses_urls(&urls, "URL #3 and URL #1 are the same database").await;
    let (pg_store, my_store) = (common::connect(&pg).await, common::connect(&my).await);
    for store in [&pg_store, &my_store] {
        let left = store.stripe_record().await.expect("read the stripe record");
        assert_eq!(left, None, "the refused start left a record");
    }
    // Given twice again: refused the same way, nothing left either.
    serve_refuses_urls(&urls, "URL #3 and URL #1 are the same database").await;
    assert_eq!(pg_store.stripe_record().await.unwrap(), None);
    // Given right: a fresh set of two.
    let out = seqd_on_urls(&["migrate"], &urls[..2]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let claimed = [
        pg_store
            .stripe_record()
            .await
            .unwrap()
            .expect("stripe 1 recorded"),
        my_store
            .stripe_record()
            .await
            .unwrap()
            .expect("stripe 2 recorded"),
    ];
    assert_eq!((claimed[0].index, claimed[0].count), (0, 2));
    assert_eq!((claimed[1].index, claimed[1].count), (1, 2));
}

/// Two sets of two stripes set up apart, (PostgreSQL a, MariaDB a) and
/// (PostgreSQL b, MariaDB b), each recorded by `seqd migrate`: an instance
/// given stripe 1 of the first and stripe 2 of the second (each at its own
/// position, same count and block) is refused with exit status 2, where it
/// used to start and hand out IDs the other set also hands out; so is
/// `stripes init` with them. Records made before the set identity existed
/// (set to NULL here) take one at the next `migrate`, the same on both
/// stripes, and the mix is refused again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stripes_of_two_separately_set_up_sets_are_refused() {
    let Some([pg_a, my_a, pg_b, my_b]) = common::test_dbs([
        Backend::Postgres,
        Backend::Mysql,
        Backend::Postgres,
        Backend::Mysql,
    ])
    .await
    else {
        return;
    };
    ok(&seqd_with(&["migrate"], &[&pg_a, &my_a]).await);
    ok(&seqd_with(&["migrate"], &[&pg_b, &my_b]).await);
    let two_sets = "URL #1 and URL #2 are stripes of two different stripe sets";
    serve_refuses(&[&pg_a, &my_b], two_sets).await;
    let init = seqd_with(&["stripes", "init"], &[&pg_a, &my_b]).await;
    assert_eq!(init.status.code(), Some(2), "{init:?}");

    for db in [&pg_a, &my_a] {
        common::execute(db, "UPDATE seqd_stripe SET set_id = NULL").await;
    }
    ok(&seqd_with(&["migrate"], &[&pg_a, &my_a]).await);
    let (a, b) = (common::connect(&pg_a).await, common::connect(&my_a).await);
    let (a, b) = (
        a.stripe_record().await.unwrap().unwrap(),
        b.stripe_record().await.unwrap().unwrap(),
    );
    assert!(a.set_id.is_some() && a.set_id == b.set_id, "{a:?} {b:?}");
    serve_refuses(&[&pg_a, &my_b], two_sets).await;
}

/// `seqd stripes init` of a single PostgreSQL database holding a global
/// sequence (global ordering needs one database) onto PostgreSQL +
/// MariaDB: the sequence is switched to instance ordering on both stripes
/// and named in the summary, where it used to be copied as global without
/// a word (and then answer 503 on the stripes).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn init_switches_global_sequences_to_instance_and_says_which() {
    let Some([pg, my]) = common::test_dbs([Backend::Postgres, Backend::Mysql]).await else {
        return;
    };
    ok(&seqd_with(&["migrate"], &[&pg]).await);
    common::execute(
        &pg,
        "INSERT INTO sequences (name, max_id, step, ordering) VALUES ('g', 40, 10, 'global')",
    )
    .await;
    let dry = ok(&seqd_with(&["stripes", "init", "--dry-run"], &[&pg, &my]).await);
    assert!(
        dry.contains("would switch 1 sequences from global to instance ordering")
            && dry.contains(": g"),
        "{dry}"
    );
    let done = ok(&seqd_with(&["stripes", "init"], &[&pg, &my]).await);
    assert!(
        done.contains("switched 1 sequences from global to instance ordering")
            && done.contains(": g"),
        "{done}"
    );
    for db in [&pg, &my] {
        let row = common::row(&common::connect(db).await, "g").await;
        assert_eq!(
            row.ordering,
            seqd::domain::IdOrdering::Instance,
            "{}",
            db.url
        );
        assert_eq!(row.max_id, 40);
    }
}

/// `seqd stripes init` of a PostgreSQL database holding a serial sequence
/// onto PostgreSQL + MariaDB is refused, dry run too, naming it, and
/// writes nothing: it used to copy the row, which the striped instance
/// then answered 503 for while `/readyz` said ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn init_refuses_serial_sequences_dry_run_too_and_writes_nothing() {
    let Some([pg, my]) = common::test_dbs([Backend::Postgres, Backend::Mysql]).await else {
        return;
    };
    ok(&seqd_with(&["migrate"], &[&pg]).await);
    ok(&seqd_with(&["migrate"], &[&my]).await);
    let store = common::connect(&pg).await;
    common::create_daily_serial(&store, "receipt", 100, "RC{yyyy}{MM}{dd}-{seq:05}").await;
    common::create_seq(&store, "plain", 1, 10).await;
    let other = common::connect(&my).await;
    let before = [
        store.stripe_record().await.unwrap(),
        other.stripe_record().await.unwrap(),
    ];
    for args in [&["stripes", "init", "--dry-run"][..], &["stripes", "init"]] {
        let out = seqd_with(args, &[&pg, &my]).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded: {err}");
        assert!(
            err.contains("'receipt'") && err.contains("serial"),
            "{args:?}: {err}"
        );
    }
    for ((db, s), before) in [(&pg, &store), (&my, &other)].into_iter().zip(before) {
        assert_eq!(s.stripe_record().await.unwrap(), before, "{}", db.url);
    }
    assert!(other.get(&common::name("plain")).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn init_turns_a_used_database_into_stripe_0_of_3_above_every_id_it_issued() {
    let dbs = sqlite_dbs(3).await;
    let single = common::store(&dbs[0]).await;
    common::create_seq(&single, "order", 1, 70).await;
    common::create_seq(&single, "user", 4_000, 10).await;
    let mut old_max = 0;
    for _ in 0..20 {
        old_max = single
            .reserve(&common::name("order"), 70)
            .await
            .unwrap()
            .max_id;
    }
    assert_eq!(old_max, 1400);

    let out = ok(&seqd_with(
        &["stripes", "init", "--block", "100"],
        &[&dbs[0], &dbs[1], &dbs[2]],
    )
    .await);
    assert!(out.contains("stripe 2 of 3"), "{out}");
    assert!(out.contains("created 2 rows"), "{out}");

    let stores = stores_of(&dbs).await;
    for (i, store) in stores.iter().enumerate() {
        assert_eq!(
            layout_of(store).await,
            StripeLayout::new(i as u32, 3, 100).unwrap()
        );
        assert_eq!(common::row(store, "order").await.max_id, 1400);
        assert_eq!(common::row(store, "user").await.step, 10);
    }
    let ranges = reserve_everywhere(&stores, "order", 60, 8).await;
    assert!(
        ranges.iter().all(|(first, _)| *first > old_max),
        "{ranges:?}"
    );
    assert_disjoint(&ranges);
    let users = reserve_everywhere(&stores, "user", 30, 3).await;
    assert!(users.iter().all(|(first, _)| *first > 3_999), "{users:?}");
    assert_disjoint(&users);
    // The set now starts.
    let urls: Vec<&str> = dbs.iter().map(|d| d.url.as_str()).collect();
    Process::spawn(&urls.join(" "), &["--migrate", "check"])
        .await
        .kill()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn init_re_stripes_two_to_three_above_every_id_of_the_old_layout() {
    let dbs = sqlite_dbs(3).await;
    ok(&seqd_with(&["stripes", "init", "--block", "100"], &[&dbs[0], &dbs[1]]).await);
    let old = stores_of(&dbs[..2]).await;
    for store in &old {
        common::create_seq(store, "order", 1, 10).await;
    }
    // Stripe 2 runs far ahead: its rows and blocks are what the new layout
    // moves under the other stripes.
    let mut issued = reserve_everywhere(&old[..1], "order", 50, 3).await;
    issued.extend(reserve_everywhere(&old[1..], "order", 90, 9).await);
    assert_disjoint(&issued);
    let old_top = issued.iter().map(|r| r.1).max().unwrap();

    // Re-striped to 3 with another block size.
    let out = ok(&seqd_with(
        &["stripes", "init", "--block", "70"],
        &[&dbs[0], &dbs[1], &dbs[2]],
    )
    .await);
    assert!(out.contains("was stripe 1 of 2"), "{out}");
    // Running it again right away changes nothing.
    let again = ok(&seqd_with(&["stripes", "init"], &[&dbs[0], &dbs[1], &dbs[2]]).await);
    assert!(again.contains("0 rows created, 0 raised"), "{again}");
    assert!(again.contains("blocks of 70 IDs"), "{again}");
    let stores = stores_of(&dbs).await;
    let fresh = reserve_everywhere(&stores, "order", 40, 6).await;
    assert!(
        fresh.iter().all(|(first, _)| *first > old_top),
        "old top {old_top}: {fresh:?}"
    );
    let mut all = issued.clone();
    all.extend(&fresh);
    assert_disjoint(&all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn init_dry_run_writes_nothing() {
    let dbs = sqlite_dbs(2).await;
    let single = common::store(&dbs[0]).await;
    common::create_seq(&single, "order", 500, 10).await;
    let out = ok(&seqd_with(&["stripes", "init", "--dry-run"], &[&dbs[0], &dbs[1]]).await);
    assert!(out.contains("would create 1 rows"), "{out}");
    assert!(out.contains("nothing written"), "{out}");
    assert_eq!(single.stripe_record().await.unwrap(), None);
    assert_eq!(common::row(&single, "order").await.max_id, 499);
    // The new database got no schema at all.
    let untouched = common::connect(&dbs[1]).await;
    assert!(
        matches!(
            untouched.stripe_record().await,
            Err(StoreError::Migration(_))
        ),
        "no seqd_stripe table"
    );
    assert!(untouched.check_schema().await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sequences_list_reports_a_row_added_by_sql_to_one_stripe() {
    let dbs = sqlite_dbs(2).await;
    ok(&seqd_with(&["migrate"], &[&dbs[0], &dbs[1]]).await);
    for store in stores_of(&dbs).await {
        store.create(&common::new_seq("both", 1, 10)).await.unwrap();
    }
    common::execute(
        &dbs[1],
        "INSERT INTO sequences (name, max_id, step) VALUES ('only-on-2', 0, 10)",
    )
    .await;
    let out = ok(&seqd_with(&["sequences", "list"], &[&dbs[0], &dbs[1]]).await);
    let report = out
        .split("MISSING ON STRIPES")
        .nth(1)
        .unwrap_or_else(|| panic!("no missing-row report: {out}"));
    let lines: Vec<Vec<&str>> = report
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines, vec![vec!["only-on-2", "1"]], "{out}");
    // Nothing missing: said so.
    common::execute(
        &dbs[0],
        "INSERT INTO sequences (name, max_id, step) VALUES ('only-on-2', 0, 10)",
    )
    .await;
    let out = ok(&seqd_with(&["sequences", "list"], &[&dbs[0], &dbs[1]]).await);
    assert!(
        out.contains("every sequence has its row on all 2 stripes"),
        "{out}"
    );
}

async fn the_record_is_one_row_claimed_once_and_replaced_keeping_its_id(db: TestDb) {
    use seqd::store::StripeRecord;

    let store = common::store(&db).await;
    assert_eq!(store.stripe_record().await.unwrap(), None);
    // Eight claims at once: one row, the same for all.
    let claims: Vec<_> = (0..8)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .put_stripe_record(&StripeRecord::new(i % 2, 2, 100), false)
                    .await
            })
        })
        .collect();
    let mut ids = std::collections::HashSet::new();
    for claim in claims {
        ids.insert(claim.await.unwrap().unwrap().database_id);
    }
    assert_eq!(ids.len(), 1, "{ids:?}");
    let first = store.stripe_record().await.unwrap().unwrap();
    // Replaced by stripe 2 of 3, kept its ID; stripe 3 of 3 does not exist.
    let (record, impossible) = (StripeRecord::new(2, 3, 70), StripeRecord::new(3, 3, 70));
    let replaced = store.put_stripe_record(&record, true).await.unwrap();
    assert_eq!((replaced.index, replaced.count, replaced.block), (2, 3, 70));
    assert_eq!(replaced.database_id, first.database_id);
    assert!(store.put_stripe_record(&impossible, true).await.is_err());
    // The table refuses a second row or an impossible one, by SQL too.
    for sql in [
        "INSERT INTO seqd_stripe (id, stripe_index, stripe_count, block, database_id) VALUES (2, 0, 1, 1, 'x')",
        "UPDATE seqd_stripe SET stripe_index = 5",
        "UPDATE seqd_stripe SET block = 0",
    ] {
        assert!(common::try_execute(&db, sql).await.is_err(), "{sql}");
    }
}

per_backend!(the_record_is_one_row_claimed_once_and_replaced_keeping_its_id);
