//! The client against a real seqd server (in-process, SQLite): IDs unique
//! and increasing across many tasks, beside other clients and `/next`; one
//! fetch at a time; the give-back on close; batches of every size.

use crate::support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use seqd_client::{Client, CloseSummary, Error};
use support::{guarded, in_tasks, Server};

/// A server holding the sequence `name` (from 1 by `step`), and a client
/// of it leasing `lease_size` IDs at a time.
async fn serving(name: &str, step: i64, lease_size: u64) -> (Server, Client) {
    let s = Server::with_sequence(name, step).await;
    let c = s.client(lease_size);
    (s, c)
}

/// A new client's first ID of `name` is `expected`: where the closed one
/// left off. Stops the server.
async fn goes_on_at(s: Server, name: &str, expected: i64) {
    assert_eq!(s.client(100).next(name).await.unwrap(), expected);
    s.stop().await;
}

/// Closes `c`, asserting what it gave back and what it kept.
async fn close_gives(c: &Client, returned: u64, kept: u64) {
    let summary = guarded(c.close()).await;
    assert_eq!(summary, CloseSummary { returned, kept });
}

/// Many tasks of one client, through `next`, `batch` and a `Sequence`
/// handle, over leases far smaller than what they draw: each task's IDs
/// strictly increase, and no ID comes out twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_tasks_of_one_client_get_unique_increasing_ids() {
    let (s, c) = serving("c", 100, 37).await;
    let handle = c.sequence("c").unwrap();
    let each = in_tasks(16, |t| {
        let (c, handle) = (c.clone(), handle.clone());
        async move {
            let mut ids = Vec::new();
            for i in 0..300 {
                match (t + i) % 4 {
                    0 => ids.push(c.next("c").await.unwrap()),
                    1 => ids.push(handle.next().await.unwrap()),
                    2 => ids.extend(c.batch("c", 7).await.unwrap()),
                    _ => ids.extend(handle.batch(50).await.unwrap()),
                }
            }
            ids
        }
    })
    .await;
    let mut seen = HashSet::new();
    for ids in each {
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "one task's IDs not strictly increasing"
        );
        for id in ids {
            assert!(seen.insert(id), "ID {id} handed out twice");
        }
    }
    assert_eq!(seen.len(), 16 * (75 + 75 + 75 * 7 + 75 * 50));
    s.stop().await;
}

/// The order across tasks: a call that starts after another one returned
/// (in any task) gets a higher ID, across lease switches.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_after_another_returned_gets_a_higher_id_whatever_the_task() {
    let (s, c) = serving("o", 10, 10).await;
    // The highest ID returned so far, by any task.
    let returned = Arc::new(AtomicI64::new(0));
    in_tasks(8, |t| {
        let (c, returned) = (c.clone(), returned.clone());
        async move {
            for i in 0..400 {
                let before = returned.load(Ordering::SeqCst);
                let id = if (t + i) % 5 == 0 {
                    let ids = c.batch("o", 3).await.unwrap();
                    assert!(ids[0] > before, "batch {ids:?} after {before} returned");
                    ids[2]
                } else {
                    let id = c.next("o").await.unwrap();
                    assert!(id > before, "ID {id} after {before} returned");
                    id
                };
                returned.fetch_max(id, Ordering::SeqCst);
            }
        }
    })
    .await;
    s.stop().await;
}

/// Two clients and `/next` over HTTP on one sequence, all at once: no ID
/// comes out twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_clients_and_http_next_never_share_an_id() {
    let s = Arc::new(Server::start().await);
    s.create("shared", 1, 20).await;
    let clients = [s.client(25), s.client(40)];
    let each = in_tasks(12, |t| {
        let (c, s) = (clients[t % 2].clone(), s.clone());
        async move {
            let mut ids = Vec::new();
            for i in 0..120 {
                match (t / 2 + i) % 3 {
                    0 => ids.push(s.next("shared").await),
                    1 => ids.push(c.next("shared").await.unwrap()),
                    _ => ids.extend(c.batch("shared", 9).await.unwrap()),
                }
            }
            ids
        }
    })
    .await;
    let mut seen = HashSet::new();
    for ids in each {
        for id in ids {
            assert!(seen.insert(id), "ID {id} handed out twice");
        }
    }
    for c in &clients {
        c.close().await;
    }
}

/// Many callers on a sequence no lease of which is held yet: one fetch
/// serves them all (the row moved by one lease only).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn callers_that_find_both_leases_empty_share_one_fetch() {
    let (s, c) = serving("herd", 100, 100).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(40));
    let mut ids = in_tasks(40, |_| {
        let (c, barrier) = (c.clone(), barrier.clone());
        async move {
            barrier.wait().await;
            c.next("herd").await.unwrap()
        }
    })
    .await;
    ids.sort();
    assert_eq!(ids, (1..=40).collect::<Vec<_>>());
    // 40 of 100 IDs: below the prefetch mark, so one lease in all.
    assert_eq!(s.max_id("herd").await, 100, "more than one lease fetched");
    s.stop().await;
}

/// Past half of a lease the next one is fetched ahead; the one after it
/// only once that one is half used.
#[tokio::test]
async fn the_next_lease_is_fetched_once_half_is_used() {
    let (s, c) = serving("ahead", 100, 100).await;
    for expected in 1..=49 {
        assert_eq!(c.next("ahead").await.unwrap(), expected);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(s.max_id("ahead").await, 100, "fetched before the mark");
    assert_eq!(c.next("ahead").await.unwrap(), 50);
    s.wait_for_max_id("ahead", 200).await;
    // The rest of the first lease, then the second, with no third fetch
    // before its mark.
    for expected in 51..=149 {
        assert_eq!(c.next("ahead").await.unwrap(), expected);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        s.max_id("ahead").await,
        200,
        "a second fetch ahead too soon"
    );
    s.stop().await;
}

/// A client closed before its fetch ahead gives back the current lease's
/// rest: a new client, with nothing else drawn, goes on right after the
/// last ID handed out. Once closed, every call is `Closed`.
#[tokio::test]
async fn a_closed_and_reopened_client_goes_on_where_it_stopped() {
    let (s, c) = serving("g", 100, 100).await;
    let handle = c.sequence("g").unwrap();
    let first: Vec<i64> = guarded(c.batch("g", 10)).await.unwrap();
    assert_eq!(first, (1..=10).collect::<Vec<_>>());
    assert_eq!(handle.next().await.unwrap(), 11);
    close_gives(&c, 89, 0).await;
    assert_eq!(s.max_id("g").await, 11);
    assert_eq!(c.next("g").await, Err(Error::Closed));
    assert_eq!(c.batch("g", 3).await, Err(Error::Closed));
    assert_eq!(handle.next().await, Err(Error::Closed));
    assert_eq!(handle.batch(2).await, Err(Error::Closed));
    assert_eq!(c.next("other").await, Err(Error::Closed));
    assert!(matches!(c.sequence("other"), Err(Error::Closed)));
    assert_eq!(c.close().await, CloseSummary::default(), "a second close");
    goes_on_at(s, "g", 12).await;
}

/// With a lease fetched ahead, the close gives that one back whole (it is
/// the last one the server issued) and the current lease's rest stays a
/// gap: a new client goes on after the current lease.
#[tokio::test]
async fn a_close_with_a_lease_fetched_ahead_gives_that_one_back() {
    let (s, c) = serving("h", 100, 100).await;
    for expected in 1..=60 {
        assert_eq!(c.next("h").await.unwrap(), expected);
    }
    s.wait_for_max_id("h", 200).await;
    close_gives(&c, 100, 40).await;
    assert_eq!(s.max_id("h").await, 100);
    goes_on_at(s, "h", 101).await;
}

/// A close gives nothing back once something was reserved above the
/// client's lease: the IDs stay unused and are never handed out twice.
#[tokio::test]
async fn a_close_after_others_reserved_above_keeps_the_rest_unused() {
    let (s, c) = serving("k", 100, 100).await;
    assert_eq!(c.next("k").await.unwrap(), 1);
    // The server's own buffer reserves above the client's lease.
    let above = s.next("k").await;
    assert!(above > 100, "{above}");
    close_gives(&c, 0, 99).await;
    let again = s.client(100);
    assert!(again.next("k").await.unwrap() > above);
    s.stop().await;
}

/// A close while callers wait for a fetch: they get `Closed` (or an ID the
/// fetch brought before), and the fetched lease goes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_during_a_fetch_waits_for_it_and_gives_it_back() {
    let (s, c) = serving("w", 100, 100).await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move { c.next("w").await }));
    }
    let summary = guarded(c.close()).await;
    let mut served = 0;
    for t in tasks {
        match guarded(t).await.unwrap() {
            Ok(id) => {
                assert!((1..=100).contains(&id));
                served += 1;
            }
            Err(e) => assert_eq!(e, Error::Closed),
        }
    }
    let unused = summary.returned + summary.kept;
    if unused > 0 {
        assert_eq!(unused + served, 100, "{summary:?}, {served} served");
    }
    s.stop().await;
}

/// `batch(0)` is empty and asks nothing; a batch over `max_batch` is
/// `InvalidCount`; a batch of many leases is served whole, increasing.
#[tokio::test]
async fn batches_of_zero_of_many_leases_and_too_many() {
    let s = Server::with_sequence("b", 100).await;
    let c = Client::builder()
        .server(&s.base)
        .lease_size(100)
        .max_batch(5000)
        .build()
        .unwrap();
    assert_eq!(c.batch("b", 0).await, Ok(Vec::new()));
    assert_eq!(s.max_id("b").await, 0, "batch(0) reserved IDs");
    let err = c.batch("b", 5001).await.unwrap_err();
    assert_eq!(
        err,
        Error::InvalidCount {
            requested: 5001,
            max: 5000
        }
    );
    assert!(err.to_string().contains("max_batch (5000)"), "{err}");
    let many = guarded(c.batch("b", 5000)).await.unwrap();
    assert_eq!(many, (1..=5000).collect::<Vec<_>>());
    assert_eq!(c.next("b").await.unwrap(), 5001);
    let handle = c.sequence("b").unwrap();
    assert_eq!(handle.batch(0).await, Ok(Vec::new()));
    assert!(matches!(
        handle.batch(usize::MAX).await,
        Err(Error::InvalidCount { .. })
    ));
    s.stop().await;
}

/// Without `lease_size`, each lease is the sequence's step.
#[tokio::test]
async fn leases_default_to_the_step() {
    let s = Server::with_sequence("st", 30).await;
    let c = Client::builder().server(&s.base).build().unwrap();
    assert_eq!(c.next("st").await.unwrap(), 1);
    assert_eq!(s.max_id("st").await, 30);
    s.stop().await;
}
