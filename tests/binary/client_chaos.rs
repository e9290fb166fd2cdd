//! `seqd-client` (clients/rust) against two real `seqd serve` processes on
//! one PostgreSQL or MariaDB database, the second through a fault proxy:
//! three clients draw from one sequence together while the second
//! instance's database is cut and healed and then the first instance is
//! killed. Every ID is unique across the clients; each task's IDs increase;
//! every client draws on after each fault.

use crate::support::common;
use crate::support::proxy;
use crate::support::server;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::TestDb;
use proxy::{upstream_of, Proxy};
use seqd_client::Client;
use server::Process;

/// Draws from `order` until `stop`, counting successes in `drawn`; the
/// IDs, in the order this task got them.
async fn draw(client: Arc<Client>, stop: Arc<AtomicBool>, drawn: Arc<AtomicU64>) -> Vec<i64> {
    let mut ids = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let got = if ids.len() % 7 == 3 {
            client.batch("order", 5).await
        } else {
            client.next("order").await.map(|id| vec![id])
        };
        match got {
            Ok(v) => {
                drawn.fetch_add(v.len() as u64, Ordering::Relaxed);
                ids.extend(v);
            }
            // A fault in progress: both servers tried; try again shortly.
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    ids
}

/// Waits until every client drew 2,000 more IDs (a dozen leases or more)
/// than it had; 30 s without is a failure (a hang guard only).
async fn progress(counters: &[Arc<AtomicU64>], what: &str) {
    let before: Vec<u64> = counters.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    for _ in 0..600 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if counters
            .iter()
            .zip(&before)
            .all(|(c, b)| c.load(Ordering::Relaxed) > *b + 2_000)
        {
            return;
        }
    }
    panic!("{what}: a client drew nothing for 30 s");
}

async fn three_clients_two_instances_a_kill_and_a_cut(db: TestDb) {
    let proxy = Proxy::start(upstream_of(&db.url)).await;
    let a = Process::spawn(&db.url, &[]).await;
    let b = Process::spawn(&proxy.url_for(&db.url), &[]).await;
    let http = server::client(Duration::from_secs(10));
    server::create_at(&http, &a.base, "order", 1, 200).await;

    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    let mut counters = Vec::new();
    let mut tasks = Vec::new();
    let orders = [[&a.base, &b.base], [&b.base, &a.base], [&a.base, &b.base]];
    for (i, servers) in orders.into_iter().enumerate() {
        let client = Arc::new(
            Client::builder()
                .servers(servers.map(|s| s.to_string()))
                .lease_size(100 + 50 * i as u64)
                .timeout(Duration::from_secs(2))
                .build()
                .unwrap(),
        );
        let drawn = Arc::new(AtomicU64::new(0));
        for _ in 0..3 {
            tasks.push((
                i,
                tokio::spawn(draw(client.clone(), stop.clone(), drawn.clone())),
            ));
        }
        clients.push(client);
        counters.push(drawn);
    }
    progress(&counters, "at first").await;
    proxy.cut();
    progress(&counters, "with the second instance's database cut").await;
    proxy.heal();
    progress(&counters, "healed").await;
    a.kill().await;
    progress(&counters, "with the first instance killed").await;
    stop.store(true, Ordering::Relaxed);

    let seen = Mutex::new(HashSet::new());
    let mut total = 0;
    for (client, task) in tasks {
        let ids = task.await.unwrap();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "client {client}: a task's IDs went down"
        );
        let mut seen = seen.lock().unwrap();
        for id in &ids {
            assert!(seen.insert(*id), "{id} handed out twice");
        }
        total += ids.len();
    }
    for client in &clients {
        client.close().await;
    }
    assert!(total > 24_000, "{total} IDs");
    b.kill().await;
}

network_backends!(three_clients_two_instances_a_kill_and_a_cut);
