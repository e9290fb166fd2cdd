//! The replication harness of tests/support/replicas (for tests of failover) does
//! what it says, on PostgreSQL and on MariaDB: a replica applies its
//! primary's writes and refuses its own; once paused it receives nothing,
//! so that what the primary wrote after the pause is lost when the primary
//! crashes and the replica is promoted; the promoted replica takes writes;
//! the old primary, rebuilt as its replica, gets them and can be promoted
//! back (a failback). Replicas share PostgreSQL's system identifier and each
//! promotion starts a new timeline; MariaDB's servers each have their own
//! `server_id`. A killed primary restarts on its data and its replica
//! follows it again; a paused replica resumes. Skipped when the engine's
//! server cannot be started.

use crate::support::replicas;

use std::time::Instant;

use replicas::{Engine, Node};
use sqlx::Connection;

/// `sql`'s output on `node`, or a panic.
fn query(node: &Node, sql: &str) -> String {
    node.sql(sql)
        .unwrap_or_else(|e| panic!("{sql} on port {}: {e}", node.port()))
}

/// The rows of the test's table, in order, one a line.
fn rows(node: &Node) -> String {
    query(node, "SELECT i FROM t ORDER BY i")
}

/// PostgreSQL: the timeline of a primary (the first 8 hex digits of its
/// current WAL file's name).
fn timeline(node: &Node) -> u32 {
    let name = query(node, "SELECT pg_walfile_name(pg_current_wal_lsn())");
    u32::from_str_radix(&name[..8], 16).unwrap()
}

/// The server's identity: PostgreSQL's system identifier, MariaDB's
/// `server_id`.
fn identity(node: &Node) -> String {
    match node.engine() {
        Engine::Postgres => query(node, "SELECT system_identifier FROM pg_control_system()"),
        Engine::MariaDb => query(node, "SELECT @@server_id"),
    }
}

/// Whether a write through `node`'s URL (seqd's driver, over TCP) succeeds.
fn url_writes(node: &Node, value: i32) -> Result<(), String> {
    let url = node.url();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let sql = format!("INSERT INTO t VALUES ({value})");
        let result = match node.engine() {
            Engine::Postgres => {
                let mut c = sqlx::PgConnection::connect(&url)
                    .await
                    .map_err(|e| e.to_string())?;
                sqlx::query(&sql).execute(&mut c).await.map(drop)
            }
            Engine::MariaDb => {
                let mut c = sqlx::MySqlConnection::connect(&url)
                    .await
                    .map_err(|e| e.to_string())?;
                sqlx::query(&sql).execute(&mut c).await.map(drop)
            }
        };
        result.map_err(|e| e.to_string())
    })
}

/// Failover after a pause, then failback, on `engine`.
fn failover_and_failback(engine: Engine) {
    let start = Instant::now();
    let Some(mut a) = replicas::primary(engine) else {
        return;
    };
    let mut b = a.replica();
    eprintln!(
        "{engine:?}: primary {} ({}), replica {} ({}), made in {:?}",
        a.addr(),
        identity(&a),
        b.addr(),
        identity(&b),
        start.elapsed()
    );
    match engine {
        Engine::Postgres => {
            assert_eq!(identity(&a), identity(&b), "one system identifier");
            assert_eq!(timeline(&a), 1);
        }
        Engine::MariaDb => assert_ne!(identity(&a), identity(&b), "server_id"),
    }

    query(&a, "CREATE TABLE t (i int PRIMARY KEY)");
    query(&a, "INSERT INTO t VALUES (1)");
    url_writes(&a, 10).unwrap();
    a.wait_caught_up(&b);
    assert_eq!(rows(&b), "1\n10");
    assert!(
        b.sql("INSERT INTO t VALUES (100)").is_err(),
        "a replica took a write"
    );
    let refused = url_writes(&b, 100).expect_err("a replica took a write through its URL");
    eprintln!("{engine:?}: the replica refuses: {refused}");

    // Paused: what the primary writes now is lost when it dies.
    b.pause_replication();
    query(&a, "INSERT INTO t VALUES (2)");
    std::thread::sleep(std::time::Duration::from_millis(300));
    a.kill();
    b.promote();
    assert_eq!(rows(&b), "1\n10", "the promoted replica has what it got");
    query(&b, "INSERT INTO t VALUES (3)");
    url_writes(&b, 30).unwrap();
    assert_eq!(rows(&b), "1\n3\n10\n30");
    if engine == Engine::Postgres {
        assert_eq!(timeline(&b), 2, "promotion starts a timeline");
    }
    eprintln!("{engine:?}: failed over in {:?}", start.elapsed());

    // Failback: the old primary, rebuilt from the promoted one.
    let first_id = identity(&b);
    a.rebuild_as_replica_of(&b);
    b.wait_caught_up(&a);
    assert_eq!(
        rows(&a),
        "1\n3\n10\n30",
        "the rebuilt node has the new writes"
    );
    assert!(
        a.sql("INSERT INTO t VALUES (100)").is_err(),
        "a replica took a write"
    );
    match engine {
        Engine::Postgres => assert_eq!(identity(&a), first_id),
        Engine::MariaDb => assert_ne!(identity(&a), first_id),
    }
    eprintln!(
        "{engine:?}: rebuilt {} ({}) from {} ({})",
        a.addr(),
        identity(&a),
        b.addr(),
        first_id
    );
    b.kill();
    a.promote();
    query(&a, "INSERT INTO t VALUES (4)");
    assert_eq!(rows(&a), "1\n3\n4\n10\n30");
    if engine == Engine::Postgres {
        assert_eq!(timeline(&a), 3, "a second promotion, a third timeline");
    }
    eprintln!("{engine:?}: failed back in {:?}", start.elapsed());
}

/// A crashed primary restarts on its data and its replica follows it
/// again; a paused replica resumes where it stopped.
fn restart_and_resume(engine: Engine) {
    let start = Instant::now();
    let Some(mut primary) = replicas::primary(engine) else {
        return;
    };
    let replica = primary.replica();
    query(&primary, "CREATE TABLE t (i int PRIMARY KEY)");
    query(&primary, "INSERT INTO t VALUES (1)");
    primary.kill();
    assert!(primary.sql("SELECT 1").is_err(), "a killed server answers");
    primary.restart();
    assert_eq!(rows(&primary), "1", "a commit survives the crash");
    query(&primary, "INSERT INTO t VALUES (2)");
    primary.wait_caught_up(&replica);
    assert_eq!(rows(&replica), "1\n2");

    replica.pause_replication();
    query(&primary, "INSERT INTO t VALUES (3)");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(rows(&replica), "1\n2", "a paused replica received");
    replica.resume_replication();
    primary.wait_caught_up(&replica);
    assert_eq!(rows(&replica), "1\n2\n3");
    eprintln!("{engine:?}: restarted and resumed in {:?}", start.elapsed());
}

/// For each function `f(Engine)` named: `mod f { fn postgres(), fn
/// mariadb() }`, tests that call it with that engine.
macro_rules! per_engine {
    ($($f:ident),+) => {$(
        mod $f {
            #[test]
            fn postgres() {
                super::$f(super::Engine::Postgres);
            }

            #[test]
            fn mariadb() {
                super::$f(super::Engine::MariaDb);
            }
        }
    )+};
}

per_engine!(failover_and_failback, restart_and_resume);
