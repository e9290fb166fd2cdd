//! Database servers that speak TLS with certificates of the tests' own, for
//! tests/db_tls.rs: a small PKI ([`Pki`]: a CA, another CA, server
//! certificates for 127.0.0.1 and localhost, for another host, expired and
//! self-signed, client certificates), PostgreSQL clusters (one per server
//! certificate, [`postgres`]) and a MariaDB server ([`mariadb`]), each on a
//! free port in a temporary directory.
//!
//! Each is started once per test binary, on first use, and shared by the
//! tests. It is stopped and its directory removed when the test process
//! ends, however it ends: a guard process (a shell reading its standard
//! input, a pipe only this process holds) does it once that pipe closes.
//!
//! PostgreSQL runs as the user `postgres`, through `runuser`, which needs
//! the tests to run as root (as they do on the CI machines); MariaDB runs as
//! root. A server that cannot be started skips the test that needs it
//! (`skipped: ...`), or fails it under `SEQD_TEST_REQUIRE_ALL=1`.

#![allow(dead_code)]

use std::net::IpAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// How long a server may take to start.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The write ends of the guards' standard input: held until the process
/// exits, when closing them makes each guard clean up.
static GUARDS: Mutex<Vec<ChildStdin>> = Mutex::new(Vec::new());

/// Starts the guard of `dir`: a shell that reads its standard input to the
/// end (the test process exited), then runs `stop` (which may name the
/// directory as `$dir`) and removes the directory.
fn guard(dir: &Path, stop: &str) -> Result<(), String> {
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
fn scratch_dir(prefix: &str, stop: &str) -> Result<PathBuf, String> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| format!("temporary directory: {e}"))?
        .keep();
    guard(&dir, stop)?;
    Ok(dir)
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// Writes `contents` to `path` with the permission bits `mode`.
fn write_file(path: &Path, contents: &str, mode: u32) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("{}: {e}", path.display());
    std::fs::write(path, contents).map_err(fail)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(fail)
}

/// Runs `command` to its end; its failure with what it printed.
fn run(command: &mut Command) -> Result<(), String> {
    let out = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{:?}: {e}", command.get_program()))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{command:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// A port free on 127.0.0.1 right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// Waits until `server` accepts TCP connections on 127.0.0.1:`port`; if it
/// exits or takes too long, why, with its `log`.
fn wait_for_port(server: &mut Child, port: u16, log: &Path) -> Result<(), String> {
    let start = Instant::now();
    let failure = loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = server.try_wait() {
            break format!("it exited ({status})");
        }
        if start.elapsed() > START_TIMEOUT {
            break format!("nothing listens on port {port} after {START_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = std::fs::read_to_string(log).unwrap_or_default();
    Err(format!("{failure}:\n{log}"))
}

/// `thing`, or a skip (`None`, after saying so) or a failure under
/// `SEQD_TEST_REQUIRE_ALL=1` when it could not be made.
fn required<T>(what: &str, thing: &'static Result<T, String>) -> Option<&'static T> {
    match thing {
        Ok(t) => Some(t),
        Err(e) if crate::common::require_all() => {
            panic!("{what} could not be started and SEQD_TEST_REQUIRE_ALL=1: {e}")
        }
        Err(e) => {
            eprintln!("skipped: {what} could not be started: {e}");
            None
        }
    }
}

/// A certificate and its key, as PEM files.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// The certificate.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

/// The server certificates the PKI makes, one PostgreSQL cluster each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerCert {
    /// Signed by the CA, for 127.0.0.1 and localhost.
    Good,
    /// Signed by the CA, for 127.0.0.1 only (not for localhost).
    IpOnly,
    /// Signed by the CA, for `db.elsewhere.example` only.
    OtherHost,
    /// Signed by the CA, for 127.0.0.1 and localhost, expired in 2021.
    Expired,
    /// Signed by its own key, for 127.0.0.1 and localhost.
    SelfSigned,
}

impl ServerCert {
    const ALL: [ServerCert; 5] = [
        ServerCert::Good,
        ServerCert::IpOnly,
        ServerCert::OtherHost,
        ServerCert::Expired,
        ServerCert::SelfSigned,
    ];

    fn name(self) -> &'static str {
        match self {
            ServerCert::Good => "server",
            ServerCert::IpOnly => "server-ip-only",
            ServerCert::OtherHost => "server-other-host",
            ServerCert::Expired => "server-expired",
            ServerCert::SelfSigned => "server-self-signed",
        }
    }
}

/// The tests' certificates, as PEM files in a directory of their own.
#[derive(Debug)]
pub struct Pki {
    /// The CA that signs the servers' and the clients' certificates.
    pub ca: PathBuf,
    /// Another CA, which signed none of the servers' certificates.
    pub other_ca: PathBuf,
    servers: Vec<(ServerCert, CertFiles)>,
    /// The client certificate of the user `certuser`, signed by the CA.
    pub client: CertFiles,
    /// A client certificate of the user `certuser` signed by the other CA.
    pub client_other_ca: CertFiles,
}

/// The tests' PKI, made on first use.
pub fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| Pki::make().unwrap_or_else(|e| panic!("making the test PKI: {e}")))
}

/// A CA: its certificate and key.
struct Ca {
    cert: rcgen::Certificate,
    params: CertificateParams,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Result<Ca, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        Ok(Ca {
            cert: params.self_signed(&key)?,
            params,
            key,
        })
    }

    /// A certificate with common name `cn` and `names` (IP addresses or host
    /// names) signed by this CA, or by its own key when `self_signed`.
    fn issue(
        &self,
        cn: &str,
        names: &[&str],
        expired: bool,
        self_signed: bool,
    ) -> Result<(String, String), rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, cn);
        for name in names {
            params.subject_alt_names.push(match name.parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName((*name).try_into()?),
            });
        }
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = if self_signed {
            params.self_signed(&key)?
        } else {
            params.signed_by(&key, &Issuer::from_params(&self.params, &self.key))?
        };
        Ok((cert.pem(), key.serialize_pem()))
    }
}

impl Pki {
    fn make() -> Result<Pki, String> {
        let dir = scratch_dir("seqd-pki-", "")?;
        let err = |e: rcgen::Error| e.to_string();
        let ca = Ca::new("seqd test CA").map_err(err)?;
        let other = Ca::new("seqd other test CA").map_err(err)?;
        let save = |name: &str, (cert, key): (String, String)| -> Result<CertFiles, String> {
            let files = CertFiles {
                cert: dir.join(format!("{name}.pem")),
                key: dir.join(format!("{name}.key")),
            };
            write_file(&files.cert, &cert, 0o644)?;
            write_file(&files.key, &key, 0o600)?;
            Ok(files)
        };
        let here = ["127.0.0.1", "localhost"];
        let mut servers = Vec::new();
        for kind in ServerCert::ALL {
            let issued = match kind {
                ServerCert::Good => ca.issue("127.0.0.1", &here, false, false),
                ServerCert::IpOnly => ca.issue("127.0.0.1", &["127.0.0.1"], false, false),
                ServerCert::OtherHost => ca.issue(
                    "db.elsewhere.example",
                    &["db.elsewhere.example"],
                    false,
                    false,
                ),
                ServerCert::Expired => ca.issue("127.0.0.1", &here, true, false),
                ServerCert::SelfSigned => ca.issue("127.0.0.1", &here, false, true),
            };
            servers.push((kind, save(kind.name(), issued.map_err(err)?)?));
        }
        let client = save(
            "client",
            ca.issue("certuser", &[], false, false).map_err(err)?,
        )?;
        let client_other_ca = save(
            "client-other-ca",
            other.issue("certuser", &[], false, false).map_err(err)?,
        )?;
        let ca_path = dir.join("ca.pem");
        write_file(&ca_path, &ca.cert.pem(), 0o644)?;
        let other_ca = dir.join("other-ca.pem");
        write_file(&other_ca, &other.cert.pem(), 0o644)?;
        Ok(Pki {
            ca: ca_path,
            other_ca,
            servers,
            client,
            client_other_ca,
        })
    }

    /// The files of the server certificate `kind`.
    pub fn server(&self, kind: ServerCert) -> &CertFiles {
        &self.servers.iter().find(|(k, _)| *k == kind).unwrap().1
    }
}

/// Where PostgreSQL's programs are: the directory of `initdb` on the
/// `PATH`, else the newest `/usr/lib/postgresql/*/bin` (Debian's place).
fn pg_bin() -> Result<PathBuf, String> {
    let on_path = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).find(|dir| dir.join("initdb").is_file()));
    if let Some(dir) = on_path {
        return Ok(dir);
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
fn as_postgres(bin: &Path, program: &str, dir: &Path) -> Command {
    let mut c = Command::new("runuser");
    c.args(["-u", "postgres", "--"])
        .arg(bin.join(program))
        .current_dir(dir);
    c
}

/// Hands `path` to the user `postgres`.
fn give_to_postgres(path: &Path) -> Result<(), String> {
    run(Command::new("chown").args(["-R", "postgres:postgres", path_str(path)]))
}

/// A data directory made by `initdb` once, copied by every cluster.
fn template() -> Result<&'static PathBuf, String> {
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

/// Who may connect to the tests' clusters: over TLS only (`hostssl`), the
/// user `certuser` by its client certificate, anyone else without a
/// password; the socket for the tests' own set-up.
const PG_HBA: &str = "\
local all all trust
hostssl all certuser 127.0.0.1/32 cert
hostssl all all 127.0.0.1/32 trust
";

/// A PostgreSQL cluster of the tests' own that takes TLS connections only.
#[derive(Debug)]
pub struct PgCluster {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its directory (data, certificates, socket, log).
    dir: PathBuf,
}

/// The cluster presenting the server certificate `kind`, started on first
/// use; `None` when it could not be (see [`required`]).
pub fn postgres(kind: ServerCert) -> Option<&'static PgCluster> {
    static CLUSTERS: [OnceLock<Result<PgCluster, String>>; 5] = [const { OnceLock::new() }; 5];
    let i = ServerCert::ALL.iter().position(|k| *k == kind).unwrap();
    let cluster = CLUSTERS[i].get_or_init(|| PgCluster::start(kind));
    required(
        &format!("a PostgreSQL cluster with the {kind:?} certificate"),
        cluster,
    )
}

impl PgCluster {
    fn start(kind: ServerCert) -> Result<PgCluster, String> {
        let bin = pg_bin()?;
        let template = template()?;
        let pki = pki();
        let stop = format!(
            r#"runuser -u postgres -- "{}" -D "$dir/data" -m immediate stop;"#,
            bin.join("pg_ctl").display()
        );
        let dir = scratch_dir("seqd-pg-tls-", &stop)?;
        let data = dir.join("data");
        run(Command::new("cp").args(["-a", path_str(template), path_str(&data)]))?;
        let server = pki.server(kind);
        let read =
            |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
        write_file(&dir.join("server.pem"), &read(&server.cert)?, 0o644)?;
        write_file(&dir.join("server.key"), &read(&server.key)?, 0o600)?;
        write_file(&dir.join("ca.pem"), &read(&pki.ca)?, 0o644)?;
        write_file(&data.join("pg_hba.conf"), PG_HBA, 0o600)?;
        give_to_postgres(&dir)?;
        let port = free_port();
        let d = path_str(&dir);
        let settings = format!(
            "-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={d} \
             -c ssl=on -c ssl_cert_file={d}/server.pem -c ssl_key_file={d}/server.key \
             -c ssl_ca_file={d}/ca.pem -c fsync=off -c shared_buffers=16MB \
             -c max_connections=40"
        );
        run(as_postgres(&bin, "pg_ctl", &dir).args([
            "-D", "data", "-l", "log", "-w", "-t", "60", "-o", &settings, "start",
        ]))
        .map_err(|e| {
            let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
            format!("{e}\n{log}")
        })?;
        let cluster = PgCluster { port, dir };
        cluster.psql("postgres", "CREATE ROLE certuser LOGIN")?;
        Ok(cluster)
    }

    /// Runs `sql` in database `db` as `postgres` over the cluster's socket.
    pub fn psql(&self, db: &str, sql: &str) -> Result<(), String> {
        run(Command::new("psql")
            .args([
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                path_str(&self.dir),
            ])
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                db,
                "-c",
                sql,
            ]))
    }

    /// A fresh database `name` (owned by `postgres`).
    pub fn create_database(&self, name: &str) {
        self.psql("postgres", &format!("CREATE DATABASE \"{name}\""))
            .unwrap_or_else(|e| panic!("creating {name}: {e}"));
    }

    /// `postgres://{userinfo}@{host}:{port}/{db}?{params}`.
    pub fn url(&self, userinfo: &str, host: &str, db: &str, params: &str) -> String {
        format!("postgres://{userinfo}@{host}:{}/{db}?{params}", self.port)
    }
}

/// A MariaDB server of the tests' own with the [`ServerCert::IpOnly`]
/// certificate, taking secure connections only (`require_secure_transport`).
#[derive(Debug)]
pub struct MariaDb {
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
}

/// The tests' MariaDB server, started on first use; `None` when it could
/// not be (see [`required`]).
pub fn mariadb() -> Option<&'static MariaDb> {
    static SERVER: OnceLock<Result<MariaDb, String>> = OnceLock::new();
    required(
        "a MariaDB server with TLS",
        SERVER.get_or_init(MariaDb::start),
    )
}

/// InnoDB sized for a test: small files, fast to make.
const INNODB_SMALL: [&str; 2] = ["--innodb-log-file-size=4M", "--innodb-buffer-pool-size=16M"];

impl MariaDb {
    fn start() -> Result<MariaDb, String> {
        let pki = pki();
        // The guard stops the server by the process id written below.
        let stop =
            r#"p=$(cat "$dir/server.pid") && kill $p && while kill -0 $p; do sleep 0.1; done;"#;
        let dir = scratch_dir("seqd-mariadb-tls-", stop)?;
        let d = path_str(&dir);
        run(Command::new("mariadb-install-db")
            .args([
                "--no-defaults",
                &format!("--datadir={d}/data"),
                "--user=root",
            ])
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .args(INNODB_SMALL))?;
        let server = pki.server(ServerCert::IpOnly);
        let port = free_port();
        let log = std::fs::File::create(dir.join("log")).map_err(|e| format!("log: {e}"))?;
        let log_err = log.try_clone().map_err(|e| format!("log: {e}"))?;
        let mut child = Command::new("mariadbd")
            .args([
                "--no-defaults",
                &format!("--datadir={d}/data"),
                "--user=root",
            ])
            .args([format!("--port={port}"), "--bind-address=127.0.0.1".into()])
            .args([format!("--socket={d}/sock"), format!("--pid-file={d}/pid")])
            .arg(format!("--ssl-ca={}", pki.ca.display()))
            .arg(format!("--ssl-cert={}", server.cert.display()))
            .arg(format!("--ssl-key={}", server.key.display()))
            .arg("--require-secure-transport=ON")
            .args(INNODB_SMALL)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("mariadbd: {e}"))?;
        std::fs::write(dir.join("server.pid"), child.id().to_string())
            .map_err(|e| format!("server.pid: {e}"))?;
        wait_for_port(&mut child, port, &dir.join("log"))?;
        let server = MariaDb { port, dir };
        server.sql(
            "CREATE USER certuser@'%' REQUIRE SUBJECT '/CN=certuser'; \
             GRANT ALL ON *.* TO certuser@'%'",
        )?;
        Ok(server)
    }

    /// Runs `sql` as root over the server's socket.
    pub fn sql(&self, sql: &str) -> Result<(), String> {
        run(Command::new("mariadb")
            .args([
                "--no-defaults",
                "-uroot",
                &format!("--socket={}/sock", path_str(&self.dir)),
            ])
            .args(["-e", sql]))
    }

    /// `mysql://{userinfo}@{host}:{port}/{db}?{params}`.
    pub fn url(&self, userinfo: &str, host: &str, db: &str, params: &str) -> String {
        format!("mysql://{userinfo}@{host}:{}/{db}?{params}", self.port)
    }
}
