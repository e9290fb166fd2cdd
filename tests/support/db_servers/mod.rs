//! Database servers of the tests' own: PostgreSQL clusters and MariaDB
//! servers started on free ports in temporary directories, for
//! tests/support/tls_peers (servers speaking TLS) and tests/support/replicas (primaries and
//! their streaming replicas). Include it beside them in a test binary:
//! `mod db_servers; mod tls_peers;` or `mod db_servers; mod replicas;`.
//!
//! Each server's directory is a [`scratch_dir`] whose guard process (a shell
//! reading its standard input, a pipe only this process holds) stops the
//! server and removes the directory once the test process ends, however it
//! ends.
//!
//! PostgreSQL runs as the user `postgres` (its programs through `runuser`,
//! its server with that user's ids), which needs the tests to run as root (as
//! they do on the CI machines); each cluster starts from a copy of one data
//! directory made by `initdb` once per test binary ([`pg_template`]).
//! MariaDB runs as root, each server from a copy of one data directory made
//! by `mariadb-install-db` once per test binary ([`mariadb_template`]).
//!
//! A server that cannot be started skips the test that needs it (`skipped:
//! ...`), or fails it under `SEQD_TEST_REQUIRE_ALL=1` ([`required`]).

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a server may take to start.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The write ends of the guards' standard input: held until the process
/// exits, when closing them makes each guard clean up.
static GUARDS: Mutex<Vec<ChildStdin>> = Mutex::new(Vec::new());

/// Starts the guard of `dir`: a shell that reads its standard input to the
/// end (the test process exited), then runs `stop` (which may name the
/// directory as `$dir`) and removes the directory.
pub fn guard(dir: &Path, stop: &str) -> Result<(), String> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(r#"dir=$1; cat >/dev/null; {stop} rm -rf "$dir""#))
        .arg("guard")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("sh: {e}"))?;
    GUARDS.lock().unwrap().push(child.stdin.take().unwrap());
    Ok(())
}

/// A fresh directory under the system's temporary directory, kept until the
/// test process ends (when its guard runs `stop`, then removes it).
pub fn scratch_dir(prefix: &str, stop: &str) -> Result<PathBuf, String> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| format!("temporary directory: {e}"))?
        .keep();
    guard(&dir, stop)?;
    Ok(dir)
}

/// `p` as a string (the tests' paths are UTF-8).
pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// Writes `contents` to `path` with the permission bits `mode`.
pub fn write_file(path: &Path, contents: &str, mode: u32) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("{}: {e}", path.display());
    std::fs::write(path, contents).map_err(fail)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(fail)
}

/// Runs `command` to its end: what it printed on its standard output, or
/// its failure with all it printed.
pub fn output(command: &mut Command) -> Result<String, String> {
    let out = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{:?}: {e}", command.get_program()))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    Err(format!(
        "{command:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Runs `command` to its end; its failure with what it printed.
pub fn run(command: &mut Command) -> Result<(), String> {
    output(command).map(drop)
}

/// Copies the directory `from` to `to` (which must not exist), keeping
/// owners and modes.
pub fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    run(Command::new("cp").args(["-a", path_str(from), path_str(to)]))
}

/// A port free on 127.0.0.1 right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// Waits until `ready()`; if `server` exits first or it takes longer than
/// [`START_TIMEOUT`], why (`not_ready` names what is missing), with its
/// `log`.
fn wait_until(
    server: &mut Child,
    log: &Path,
    not_ready: &str,
    mut ready: impl FnMut() -> bool,
) -> Result<(), String> {
    let start = Instant::now();
    let failure = loop {
        if ready() {
            return Ok(());
        }
        if let Ok(Some(status)) = server.try_wait() {
            break format!("it exited ({status})");
        }
        if start.elapsed() > START_TIMEOUT {
            break format!("{not_ready} after {START_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = std::fs::read_to_string(log).unwrap_or_default();
    Err(format!("{failure}:\n{log}"))
}

/// Waits until `server` accepts TCP connections on 127.0.0.1:`port`; if it
/// exits or takes too long, why, with its `log`.
pub fn wait_for_port(server: &mut Child, port: u16, log: &Path) -> Result<(), String> {
    wait_until(
        server,
        log,
        &format!("nothing listens on port {port}"),
        || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
    )
}

/// The file `path` opened for appending (made if missing), as the standard
/// output and error of a server.
fn log_file(path: &Path) -> Result<(Stdio, Stdio), String> {
    let fail = |e: std::io::Error| format!("{}: {e}", path.display());
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(fail)?;
    let copy = file.try_clone().map_err(fail)?;
    Ok((file.into(), copy.into()))
}

/// Whether servers that cannot be started must fail the tests
/// (`SEQD_TEST_REQUIRE_ALL=1`, as tests/support/common's `require_all`).
pub fn require_all() -> bool {
    std::env::var("SEQD_TEST_REQUIRE_ALL").is_ok_and(|v| v == "1")
}

/// `thing`, or a skip (`None`, after saying so) or a failure under
/// `SEQD_TEST_REQUIRE_ALL=1` when `what` could not be started.
pub fn required<T>(what: &str, thing: Result<T, String>) -> Option<T> {
    match thing {
        Ok(t) => Some(t),
        Err(e) if require_all() => {
            panic!("{what} could not be started and SEQD_TEST_REQUIRE_ALL=1: {e}")
        }
        Err(e) => {
            eprintln!("skipped: {what} could not be started: {e}");
            None
        }
    }
}

/// Where PostgreSQL's programs are: the directory of `initdb` on the
/// `PATH` (or, where that is a link, as `/usr/local/bin/initdb` is on the
/// CI machines, of the file it links to: the other programs are beside it),
/// else the newest `/usr/lib/postgresql/*/bin` (Debian's place).
pub fn pg_bin() -> Result<PathBuf, String> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("initdb"))
            .find(|initdb| initdb.is_file())
    });
    if let Some(initdb) = on_path {
        let real = initdb
            .canonicalize()
            .map_err(|e| format!("{}: {e}", initdb.display()))?;
        return Ok(real.parent().expect("a file's directory").to_path_buf());
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| format!("no initdb on the PATH nor /usr/lib/postgresql: {e}"))?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    dirs.sort_by_key(|d| {
        let version = d
            .parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str());
        version.and_then(|v| v.parse::<u32>().ok()).unwrap_or(0)
    });
    dirs.pop()
        .ok_or_else(|| "no PostgreSQL installation (initdb) found".to_string())
}

/// Runs `program` of PostgreSQL's with `args` as the user `postgres`, in
/// `dir` (which that user can enter).
pub fn as_postgres(bin: &Path, program: &str, dir: &Path) -> Command {
    let mut c = Command::new("runuser");
    c.args(["-u", "postgres", "--"])
        .arg(bin.join(program))
        .current_dir(dir);
    c
}

/// Hands `path` to the user `postgres`.
pub fn give_to_postgres(path: &Path) -> Result<(), String> {
    run(Command::new("chown").args(["-R", "postgres:postgres", path_str(path)]))
}

/// The user and group ids of the user `postgres`.
fn postgres_ids() -> Result<(u32, u32), String> {
    static IDS: OnceLock<Result<(u32, u32), String>> = OnceLock::new();
    IDS.get_or_init(|| {
        let id = |flag: &str| -> Result<u32, String> {
            let out = output(Command::new("id").args([flag, "postgres"]))?;
            out.trim()
                .parse()
                .map_err(|e| format!("id {flag} postgres: {out:?}: {e}"))
        };
        Ok((id("-u")?, id("-g")?))
    })
    .clone()
}

/// The guard's `stop` for a PostgreSQL cluster whose data directory is
/// `$dir/data`.
pub fn pg_stop(bin: &Path) -> String {
    format!(
        r#"runuser -u postgres -- "{}" -D "$dir/data" -m immediate stop;"#,
        bin.join("pg_ctl").display()
    )
}

/// A data directory made by `initdb` once, copied by every cluster (with
/// [`copy_dir`]).
pub fn pg_template() -> Result<&'static PathBuf, String> {
    static TEMPLATE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    TEMPLATE
        .get_or_init(|| {
            let bin = pg_bin()?;
            let dir = scratch_dir("seqd-pg-template-", "")?;
            give_to_postgres(&dir)?;
            run(as_postgres(&bin, "initdb", &dir).args([
                "-D",
                "data",
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "--encoding=UTF8",
                "--locale=C",
            ]))?;
            Ok(dir.join("data"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Starts PostgreSQL's server on the data directory `dir/data` (owned by
/// `postgres`) as the user `postgres`, listening on 127.0.0.1:`port` and on
/// a socket in `dir`, with `settings` (`name=value`) besides; what it prints
/// is appended to `dir/log`. The server (the postmaster) is a child of this
/// process, the leader of a process group of its own that its processes
/// join: killing that group crashes the whole server. Returns once it
/// accepts connections.
pub fn pg_start(dir: &Path, port: u16, settings: &[&str]) -> Result<Child, String> {
    let bin = pg_bin()?;
    let (uid, gid) = postgres_ids()?;
    let (out, err) = log_file(&dir.join("log"))?;
    let mut command = Command::new(bin.join("postgres"));
    command
        .args(["-D", path_str(&dir.join("data"))])
        .args(["-c", &format!("port={port}")])
        .args(["-c", "listen_addresses=127.0.0.1"])
        .args(["-c", &format!("unix_socket_directories={}", path_str(dir))]);
    for setting in settings {
        command.args(["-c", setting]);
    }
    let mut server = command
        .current_dir(dir)
        .uid(uid)
        .gid(gid)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("postgres: {e}"))?;
    let mut ready = Command::new(bin.join("pg_isready"));
    ready.args(["-q", "-h", path_str(dir), "-p", &port.to_string()]);
    let accepting = || {
        ready
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    match wait_until(
        &mut server,
        &dir.join("log"),
        "it accepts no connections",
        accepting,
    ) {
        Ok(()) => Ok(server),
        Err(e) => {
            let _ = server.kill();
            let _ = server.wait();
            Err(e)
        }
    }
}

/// `psql` connecting as `postgres` over the socket in `dir` to the cluster
/// on `port`, stopping at the first error, without reading `~/.psqlrc`; the
/// database and what to run are left to the caller.
pub fn psql(dir: &Path, port: u16) -> Command {
    let mut c = Command::new("psql");
    c.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", path_str(dir)])
        .args(["-p", &port.to_string(), "-U", "postgres"]);
    c
}

/// InnoDB sized for a test: small files, fast to make.
pub const INNODB_SMALL: [&str; 2] = ["--innodb-log-file-size=4M", "--innodb-buffer-pool-size=16M"];

/// The guard's `stop` for a MariaDB server started by [`mariadb_start`]
/// (whose process id is in `$dir/server.pid`).
pub const MARIADB_STOP: &str =
    r#"p=$(cat "$dir/server.pid") && kill $p && while kill -0 $p; do sleep 0.1; done;"#;

/// A data directory made by `mariadb-install-db` once (`root` without a
/// password, no `test` database), copied by every server (with
/// [`copy_dir`]).
pub fn mariadb_template() -> Result<&'static PathBuf, String> {
    static TEMPLATE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    TEMPLATE
        .get_or_init(|| {
            let dir = scratch_dir("seqd-mariadb-template-", "")?;
            let data = dir.join("data");
            run(Command::new("mariadb-install-db")
                .args(["--no-defaults", &format!("--datadir={}", path_str(&data))])
                .args(["--user=root", "--auth-root-authentication-method=normal"])
                .arg("--skip-test-db")
                .arg(mariadb_tmpdir(&dir)?)
                .args(INNODB_SMALL))?;
            Ok(data)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// `--tmpdir=` a directory `tmp` of its own in `dir` (made if missing):
/// MariaDB's server deletes all the files named `#sql*` in its `tmpdir` on
/// starting, the temporary tables of any other server sharing that
/// directory (`/tmp` by default, and the machine's own server's) included.
fn mariadb_tmpdir(dir: &Path) -> Result<String, String> {
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    Ok(format!("--tmpdir={}", path_str(&tmp)))
}

/// Starts MariaDB's server as root on the data directory `dir/data`,
/// listening on 127.0.0.1:`port` and on the socket `dir/sock`, with `args`
/// besides; what it prints is appended to `dir/log`, its process id written
/// to `dir/server.pid` (for [`MARIADB_STOP`]). Returns once it accepts TCP
/// connections.
pub fn mariadb_start(dir: &Path, port: u16, args: &[String]) -> Result<Child, String> {
    let d = path_str(dir);
    let (out, err) = log_file(&dir.join("log"))?;
    let mut server = Command::new("mariadbd")
        .args([
            "--no-defaults",
            &format!("--datadir={d}/data"),
            "--user=root",
        ])
        .args([format!("--port={port}"), "--bind-address=127.0.0.1".into()])
        .args([format!("--socket={d}/sock"), format!("--pid-file={d}/pid")])
        .arg(mariadb_tmpdir(dir)?)
        .args(INNODB_SMALL)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("mariadbd: {e}"))?;
    let started = std::fs::write(dir.join("server.pid"), server.id().to_string())
        .map_err(|e| format!("server.pid: {e}"))
        .and_then(|()| wait_for_port(&mut server, port, &dir.join("log")));
    match started {
        Ok(()) => Ok(server),
        Err(e) => {
            let _ = server.kill();
            let _ = server.wait();
            Err(e)
        }
    }
}

/// The `mariadb` client connecting as `user` over the socket of the server
/// in `dir`, without reading option files; what to run is left to the
/// caller.
pub fn mariadb(dir: &Path, user: &str) -> Command {
    let mut c = Command::new("mariadb");
    c.args(["--no-defaults", &format!("-u{user}")])
        .arg(format!("--socket={}/sock", path_str(dir)));
    c
}
