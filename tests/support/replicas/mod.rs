//! Real database replication for tests of failover: a primary server of the
//! tests' own ([`primary`]) and its asynchronous streaming replicas
//! ([`Node::replica`]), PostgreSQL or MariaDB, each on a free port in a
//! temporary directory, which can be paused, crashed, restarted, promoted and
//! rebuilt from another node.
//!
//! Include it with the helpers it uses: `mod db_servers; mod replicas;` (in
//! tests/binary/replicas.rs, whose own name it shares, by `#[path =
//! "replicas/mod.rs"] mod replicas;`).
//!
//! ```ignore
//! let Some(mut primary) = replicas::primary(Engine::Postgres) else { return }; // skipped
//! let replica = primary.replica();
//! primary.sql("CREATE TABLE t (i int); INSERT INTO t VALUES (1)").unwrap();
//! primary.wait_caught_up(&replica);
//! replica.pause_replication();
//! primary.sql("INSERT INTO t VALUES (2)").unwrap(); // never reaches the replica
//! primary.kill();
//! replica.promote(); // has 1, not 2; takes writes
//! primary.rebuild_as_replica_of(&replica); // the old primary follows the new one
//! ```
//!
//! - PostgreSQL: a primary is a copy of one `initdb` (tests/support/db_servers); a
//!   replica is made by `pg_basebackup -R` (a standby with `primary_conninfo`
//!   over TCP, no replication slot) and is a hot standby. A replica shares
//!   its primary's system identifier (`pg_control_system()`); promotion
//!   starts a new timeline (read it on a primary from its WAL file's name,
//!   the first 8 hex digits of `pg_walfile_name(pg_current_wal_lsn())`:
//!   `pg_control_checkpoint()` shows it only after the next checkpoint).
//!   A kill is SIGKILL to the postmaster's process group, all of the
//!   server's processes. `fsync` is left on.
//! - MariaDB: every server writes a binary log (`log_slave_updates` too, so
//!   that a promoted replica can feed others everything) and has a
//!   `server_id` of its own; a replica starts empty, as a copy of one
//!   `mariadb-install-db`, and replicates with GTID
//!   (`MASTER_USE_GTID=slave_pos`) from the start of its primary's binary
//!   log, `read_only`. So that `read_only` refuses `root`'s writes as a
//!   standby refuses PostgreSQL's, `root` lacks `READ_ONLY ADMIN`; the
//!   harness itself acts as the user `harness` (made, like that change, on
//!   each server alone: `sql_log_bin=0`).
//!
//! Every call blocks (it runs the engine's programs) and panics when the
//! server does not do what it is asked, with the server's log.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::support::db_servers::{
    as_postgres, copy_dir, free_port, give_to_postgres, mariadb, mariadb_start, mariadb_template,
    output, pg_bin, pg_start, pg_stop, pg_template, psql, required, run, scratch_dir, MARIADB_STOP,
};

/// How long a replica may take to catch up, to stop receiving or to be
/// promoted, and a crashed server's processes to be gone.
const WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// The database the nodes' [`Node::sql`] and [`Node::url`] use.
pub const DATABASE: &str = "seqd";

/// PostgreSQL's settings on every node besides port and sockets: small, and
/// a replica that asks its primary (again) for WAL every 200 ms, not 5 s.
const PG_SETTINGS: [&str; 4] = [
    "shared_buffers=16MB",
    "max_connections=40",
    "hot_standby=on",
    "wal_retrieve_retry_interval=200ms",
];

/// A database engine whose replication the harness drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// PostgreSQL: physical streaming replication.
    Postgres,
    /// MariaDB: binary-log replication with GTID.
    MariaDb,
}

impl Engine {
    fn name(self) -> &'static str {
        match self {
            Engine::Postgres => "postgres",
            Engine::MariaDb => "mariadb",
        }
    }
}

/// A fresh primary server of `engine` on a free port, with the database
/// [`DATABASE`]; `None` (the test is skipped) when it could not be started,
/// or a failure under `SEQD_TEST_REQUIRE_ALL=1`.
pub fn primary(engine: Engine) -> Option<Node> {
    required(&format!("a {engine:?} primary"), Node::new(engine, None))
}

/// The `server_id` of the next MariaDB server: each its own, in this test
/// process.
fn next_server_id() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// One database server of the tests' own: a primary or a replica, running
/// or killed. Dropping it kills the server and removes its directory (its
/// guard does so if the test process dies first).
#[derive(Debug)]
pub struct Node {
    engine: Engine,
    port: u16,
    /// Its directory: `data`, `log` (all its runs), its socket(s).
    dir: PathBuf,
    /// The server process while it runs (PostgreSQL: the postmaster, leader
    /// of its process group).
    server: Option<Child>,
    /// MariaDB: its `server_id`.
    server_id: u32,
    /// The port of the node it replicates from; 0 on a primary.
    upstream: AtomicU16,
    /// Whether [`Node::pause_replication`] stopped its receiving.
    paused: AtomicBool,
}

impl Node {
    /// A node of `engine` in a directory of its own: a primary, or when
    /// `upstream` is given, a replica of that node.
    fn new(engine: Engine, upstream: Option<&Node>) -> Result<Node, String> {
        let stop = match engine {
            Engine::Postgres => pg_stop(&pg_bin()?),
            Engine::MariaDb => MARIADB_STOP.to_string(),
        };
        let role = if upstream.is_some() {
            "replica"
        } else {
            "primary"
        };
        let dir = scratch_dir(&format!("seqd-{}-{role}-", engine.name()), &stop)?;
        let mut node = Node {
            engine,
            port: free_port(),
            dir,
            server: None,
            server_id: 0,
            upstream: AtomicU16::new(0),
            paused: AtomicBool::new(false),
        };
        node.make(upstream)?;
        Ok(node)
    }

    /// Makes the data directory (missing), starts the server and sets it up
    /// as a primary or a replica of `upstream`.
    fn make(&mut self, upstream: Option<&Node>) -> Result<(), String> {
        if let Some(up) = upstream {
            assert_eq!(up.engine, self.engine, "a replica of another engine");
        }
        self.upstream
            .store(upstream.map_or(0, |up| up.port), Ordering::SeqCst);
        self.paused.store(false, Ordering::SeqCst);
        let data = self.dir.join("data");
        match self.engine {
            Engine::Postgres => {
                give_to_postgres(&self.dir)?;
                match upstream {
                    None => copy_dir(pg_template()?, &data)?,
                    Some(up) => run(as_postgres(&pg_bin()?, "pg_basebackup", &self.dir)
                        .args(["-h", "127.0.0.1", "-p", &up.port.to_string()])
                        .args(["-U", "postgres", "-D", "data", "-R"])
                        // The server syncs all on starting (fsync is on).
                        .args(["--checkpoint=fast", "--no-sync"]))?,
                }
                self.start()?;
                if upstream.is_none() {
                    self.admin(&format!("CREATE DATABASE {DATABASE}"))?;
                }
            }
            Engine::MariaDb => {
                self.server_id = next_server_id();
                copy_dir(mariadb_template()?, &data)?;
                self.start()?;
                self.mariadb_accounts()?;
                match upstream {
                    None => self.admin(&format!("CREATE DATABASE {DATABASE}"))?,
                    Some(up) => self.admin(&format!(
                        "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={}, \
                         MASTER_USER='root', MASTER_USE_GTID=slave_pos, \
                         MASTER_CONNECT_RETRY=1; START SLAVE",
                        up.port
                    ))?,
                };
            }
        }
        if let Some(up) = upstream {
            // A clone: all its primary has, as a base backup is.
            up.wait_caught_up(self);
        }
        Ok(())
    }

    /// MariaDB, on a fresh server: the user `harness` (all privileges), and
    /// `root` without `READ_ONLY ADMIN`; on this server alone.
    fn mariadb_accounts(&self) -> Result<(), String> {
        let revokes = self.mariadb_as(
            "root",
            "SELECT CONCAT('REVOKE READ_ONLY ADMIN ON *.* FROM root@''', host, ''';') \
             FROM mysql.user WHERE user = 'root'",
        )?;
        self.mariadb_as(
            "root",
            &format!(
                "SET sql_log_bin = 0; CREATE USER harness@localhost; \
                 GRANT ALL ON *.* TO harness@localhost WITH GRANT OPTION; {revokes}"
            ),
        )?;
        Ok(())
    }

    /// Starts the server on its data directory.
    fn start(&mut self) -> Result<(), String> {
        assert!(self.server.is_none(), "the server is running");
        let server = match self.engine {
            Engine::Postgres => pg_start(&self.dir, self.port, &PG_SETTINGS)?,
            Engine::MariaDb => {
                let mut args = vec![
                    format!("--server-id={}", self.server_id),
                    "--log-bin=binlog".into(),
                    "--relay-log=relay-bin".into(),
                    "--log-slave-updates".into(),
                ];
                if self.is_replica() {
                    args.push("--read-only".into());
                }
                if self.paused.load(Ordering::SeqCst) {
                    args.push("--skip-slave-start".into());
                }
                mariadb_start(&self.dir, self.port, &args)?
            }
        };
        self.server = Some(server);
        Ok(())
    }

    /// Its engine.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// Its port on 127.0.0.1 (the same for all its life, restarts and
    /// rebuilds included).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// 127.0.0.1:[`Node::port`].
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The URL of its database [`DATABASE`], for seqd:
    /// `postgres://postgres@127.0.0.1:P/seqd?sslmode=disable` or
    /// `mysql://root@127.0.0.1:P/seqd`.
    pub fn url(&self) -> String {
        match self.engine {
            Engine::Postgres => format!(
                "postgres://postgres@127.0.0.1:{}/{DATABASE}?sslmode=disable",
                self.port
            ),
            Engine::MariaDb => format!("mysql://root@127.0.0.1:{}/{DATABASE}", self.port),
        }
    }

    /// Whether it replicates from another node (it was made a replica and
    /// not promoted since).
    pub fn is_replica(&self) -> bool {
        self.upstream.load(Ordering::SeqCst) != 0
    }

    /// Runs `sql` in the database [`DATABASE`] as the URL's user (over the
    /// socket, `psql` or `mariadb`): what it printed, rows by lines, columns
    /// by tabs, no headers (the output's last newline taken off); or the
    /// client's error. PostgreSQL runs several statements in one string as
    /// one transaction; MariaDB each on its own.
    pub fn sql(&self, sql: &str) -> Result<String, String> {
        match self.engine {
            Engine::Postgres => self.psql(DATABASE, sql),
            Engine::MariaDb => self.mariadb_in(DATABASE, "root", sql),
        }
    }

    /// Runs `sql` as the harness (PostgreSQL: in the database `postgres`;
    /// MariaDB: as the user `harness`, in no database).
    fn admin(&self, sql: &str) -> Result<String, String> {
        match self.engine {
            Engine::Postgres => self.psql("postgres", sql),
            Engine::MariaDb => self.mariadb_as("harness", sql),
        }
    }

    /// [`Node::admin`], or a panic with the server's log.
    fn must(&self, sql: &str) -> String {
        self.admin(sql).unwrap_or_else(|e| self.fail(&e))
    }

    fn psql(&self, db: &str, sql: &str) -> Result<String, String> {
        let out =
            output(psql(&self.dir, self.port).args(["-t", "-A", "-F", "\t", "-d", db, "-c", sql]))?;
        Ok(out.strip_suffix('\n').unwrap_or(&out).to_string())
    }

    fn mariadb_as(&self, user: &str, sql: &str) -> Result<String, String> {
        self.mariadb_in("", user, sql)
    }

    fn mariadb_in(&self, db: &str, user: &str, sql: &str) -> Result<String, String> {
        let mut client = mariadb(&self.dir, user);
        if !db.is_empty() {
            client.args(["-D", db]);
        }
        let out = output(client.args(["-N", "-B", "-e", sql]))?;
        Ok(out.strip_suffix('\n').unwrap_or(&out).to_string())
    }

    /// MariaDB: the field `field` of `SHOW SLAVE STATUS` (all of it for
    /// `""`), or a panic.
    fn slave_status(&self, field: &str) -> String {
        let status = output(mariadb(&self.dir, "harness").args(["-E", "-e", "SHOW SLAVE STATUS"]))
            .unwrap_or_else(|e| self.fail(&e));
        if field.is_empty() {
            return status;
        }
        status
            .lines()
            .find_map(|l| l.trim().strip_prefix(field)?.strip_prefix(':'))
            .unwrap_or_else(|| self.fail(&format!("no {field} in {status}")))
            .trim()
            .to_string()
    }

    /// Panics with `why`, the node and the end of its server's log.
    fn fail(&self, why: &str) -> ! {
        let log = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        panic!(
            "{:?} node on port {}: {why}\n--- the end of its log ---\n{tail}",
            self.engine, self.port
        )
    }

    /// Polls `done` until it is true; after [`WAIT_TIMEOUT`], a panic that
    /// `what` did not happen.
    fn wait_for(&self, what: &str, mut done: impl FnMut() -> bool) {
        let start = Instant::now();
        while !done() {
            if start.elapsed() > WAIT_TIMEOUT {
                self.fail(&format!("{what}: not after {WAIT_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A new asynchronous streaming replica of this node (which must be
    /// running): its own directory and port, read-only; returned once it
    /// has all this node had written, it then receives what it writes.
    pub fn replica(&self) -> Node {
        Node::new(self.engine, Some(self))
            .unwrap_or_else(|e| self.fail(&format!("making a replica: {e}")))
    }

    /// Waits until `replica` has applied all that this node (its primary)
    /// had written when called.
    pub fn wait_caught_up(&self, replica: &Node) {
        assert_eq!(self.engine, replica.engine, "a replica of another engine");
        match self.engine {
            Engine::Postgres => {
                let lsn = self.must("SELECT pg_current_wal_lsn()");
                replica.wait_for(&format!("replaying up to {lsn}"), || {
                    replica.must(&format!("SELECT pg_last_wal_replay_lsn() >= '{lsn}'")) == "t"
                });
            }
            Engine::MariaDb => {
                let gtid = self.must("SELECT @@gtid_binlog_pos");
                let waited = replica.must(&format!(
                    "SELECT MASTER_GTID_WAIT('{gtid}', {})",
                    WAIT_TIMEOUT.as_secs()
                ));
                if waited != "0" {
                    let status = replica.slave_status("");
                    replica.fail(&format!("applying up to {gtid}: {waited}\n{status}"));
                }
            }
        }
    }

    /// On a replica: stops receiving from its primary, so that nothing its
    /// primary writes from now on reaches it (what it received before it
    /// still applies). PostgreSQL: `primary_conninfo` emptied (`ALTER
    /// SYSTEM`, so also across restarts) and reloaded, until no WAL receiver
    /// runs; MariaDB: `STOP SLAVE IO_THREAD` (and it stays stopped across
    /// restarts).
    pub fn pause_replication(&self) {
        assert!(self.is_replica(), "not a replica");
        match self.engine {
            Engine::Postgres => {
                self.must("ALTER SYSTEM SET primary_conninfo = ''");
                self.must("SELECT pg_reload_conf()");
                // No receiver, seen for longer than a receiver takes to be
                // started again (wal_retrieve_retry_interval).
                let mut since: Option<Instant> = None;
                self.wait_for("the WAL receiver stopping", || {
                    let none = self.must("SELECT count(*) FROM pg_stat_wal_receiver") == "0";
                    since = match (none, since) {
                        (false, _) => None,
                        (true, None) => Some(Instant::now()),
                        (true, Some(t)) => Some(t),
                    };
                    since.is_some_and(|t| t.elapsed() > Duration::from_millis(600))
                });
            }
            Engine::MariaDb => {
                self.must("STOP SLAVE IO_THREAD");
            }
        }
        self.paused.store(true, Ordering::SeqCst);
    }

    /// On a replica paused by [`Node::pause_replication`]: receives from its
    /// primary again (from where it stopped).
    pub fn resume_replication(&self) {
        let up = self.upstream.load(Ordering::SeqCst);
        assert!(up != 0, "not a replica");
        match self.engine {
            Engine::Postgres => {
                self.must(&format!(
                    "ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port={up} user=postgres'"
                ));
                self.must("SELECT pg_reload_conf()");
            }
            Engine::MariaDb => {
                self.must("START SLAVE IO_THREAD");
            }
        }
        self.paused.store(false, Ordering::SeqCst);
    }

    /// Kills the server with SIGKILL, as a crash would (PostgreSQL: all its
    /// processes, the postmaster's process group), and waits until it is
    /// gone. Nothing if it is not running.
    pub fn kill(&mut self) {
        if let Err(e) = self.kill_server() {
            self.fail(&format!("killing it: {e}"));
        }
    }

    fn kill_server(&mut self) -> Result<(), String> {
        let Some(mut server) = self.server.take() else {
            return Ok(());
        };
        let pid = server.id();
        match self.engine {
            Engine::Postgres => {
                let group = run(Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]));
                let _ = server.wait();
                group?;
                // Its other processes, orphans now, may take a moment.
                let start = Instant::now();
                while process_group_alive(pid) {
                    if start.elapsed() > WAIT_TIMEOUT {
                        return Err(format!("process group {pid} still alive"));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            Engine::MariaDb => {
                let _ = server.kill();
                let _ = server.wait();
            }
        }
        Ok(())
    }

    /// Starts the server again on its port and data (after [`Node::kill`]:
    /// crash recovery); one still running is killed first. A replica
    /// replicates again, unless paused.
    pub fn restart(&mut self) {
        self.kill();
        if let Err(e) = self.start() {
            self.fail(&format!("restarting: {e}"));
        }
    }

    /// Makes a replica a primary that takes writes, once it has applied
    /// all it received (its primary need not be alive). PostgreSQL:
    /// `pg_ctl promote` (a new timeline), until `pg_is_in_recovery()` is
    /// false; MariaDB: `STOP SLAVE IO_THREAD`, its relay log applied, `STOP
    /// SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = 0`.
    pub fn promote(&self) {
        assert!(self.is_replica(), "not a replica");
        match self.engine {
            Engine::Postgres => {
                let promoted = run(as_postgres(&pg_bin().unwrap(), "pg_ctl", &self.dir)
                    .args(["-D", "data", "-w", "-t", "60", "promote"]));
                if let Err(e) = promoted {
                    self.fail(&e);
                }
                self.wait_for("the end of recovery", || {
                    self.must("SELECT pg_is_in_recovery()") == "f"
                });
            }
            Engine::MariaDb => {
                self.must("STOP SLAVE IO_THREAD");
                let received = self.slave_status("Gtid_IO_Pos");
                let waited = self.must(&format!(
                    "SELECT MASTER_GTID_WAIT('{received}', {})",
                    WAIT_TIMEOUT.as_secs()
                ));
                if waited != "0" {
                    self.fail(&format!(
                        "applying its relay log up to {received}: {waited}"
                    ));
                }
                self.must("STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = 0");
            }
        }
        self.upstream.store(0, Ordering::SeqCst);
        self.paused.store(false, Ordering::SeqCst);
    }

    /// Makes this node (an old primary that failed, say) a new replica of
    /// `primary`: its server killed if running, its data wiped, cloned again
    /// from `primary` (PostgreSQL: `pg_basebackup -R`; MariaDB: a fresh
    /// server with a new `server_id`, replicating all of `primary`'s binary
    /// log), on the same port; it returns once this node has all `primary`
    /// had written.
    pub fn rebuild_as_replica_of(&mut self, primary: &Node) {
        assert_ne!(self.port, primary.port, "a node cannot replicate itself");
        self.kill();
        let data = self.dir.join("data");
        if let Err(e) = std::fs::remove_dir_all(&data) {
            self.fail(&format!("removing {}: {e}", data.display()));
        }
        if let Err(e) = self.make(Some(primary)) {
            self.fail(&format!("rebuilding it as a replica: {e}"));
        }
    }
}

// A node may be shared by threads (its calls block: `spawn_blocking`).
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<Node>();
};

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.kill_server();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether a process of the process group `pgid` is alive (not a zombie).
fn process_group_alive(pgid: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.filter_map(Result::ok).any(|entry| {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string()
    })
}
