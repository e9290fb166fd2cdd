//! Database servers that speak TLS with certificates of the tests' own, for
//! tests/binary/db_tls.rs: a small PKI ([`Pki`]: a CA, another CA, server
//! certificates for 127.0.0.1 and localhost, for another host, expired and
//! self-signed, client certificates), PostgreSQL clusters (one per server
//! certificate, [`postgres`]) and a MariaDB server ([`mariadb`]), each on a
//! free port in a temporary directory.
//!
//! Each is started once per test binary, on first use, and shared by the
//! tests, by the helpers of tests/support/db_servers (include both: `mod
//! db_servers; mod tls_peers;`). It is stopped and its directory removed
//! when the test process ends, however it ends (by its guard). A server
//! that cannot be started skips the test that needs it (`skipped: ...`), or
//! fails it under `SEQD_TEST_REQUIRE_ALL=1`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use crate::support::db_servers::{
    copy_dir, free_port, give_to_postgres, mariadb_start, mariadb_template, pg_bin, pg_start,
    pg_stop, pg_template, psql, required, run, scratch_dir, write_file, MARIADB_STOP,
};

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
        cluster.as_ref().map_err(Clone::clone),
    )
}

impl PgCluster {
    fn start(kind: ServerCert) -> Result<PgCluster, String> {
        let template = pg_template()?;
        let pki = pki();
        let dir = scratch_dir("seqd-pg-tls-", &pg_stop(&pg_bin()?))?;
        let data = dir.join("data");
        copy_dir(template, &data)?;
        let server = pki.server(kind);
        let read =
            |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
        write_file(&dir.join("server.pem"), &read(&server.cert)?, 0o644)?;
        write_file(&dir.join("server.key"), &read(&server.key)?, 0o600)?;
        write_file(&dir.join("ca.pem"), &read(&pki.ca)?, 0o644)?;
        write_file(&data.join("pg_hba.conf"), PG_HBA, 0o600)?;
        give_to_postgres(&dir)?;
        let port = free_port();
        let d = dir.display();
        pg_start(
            &dir,
            port,
            &[
                "ssl=on",
                &format!("ssl_cert_file={d}/server.pem"),
                &format!("ssl_key_file={d}/server.key"),
                &format!("ssl_ca_file={d}/ca.pem"),
                "fsync=off",
                "shared_buffers=16MB",
                "max_connections=40",
            ],
        )?;
        let cluster = PgCluster { port, dir };
        cluster.psql("postgres", "CREATE ROLE certuser LOGIN")?;
        Ok(cluster)
    }

    /// Runs `sql` in database `db` as `postgres` over the cluster's socket.
    pub fn psql(&self, db: &str, sql: &str) -> Result<(), String> {
        run(psql(&self.dir, self.port).args(["-d", db, "-c", sql]))
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
        SERVER
            .get_or_init(MariaDb::start)
            .as_ref()
            .map_err(Clone::clone),
    )
}

impl MariaDb {
    fn start() -> Result<MariaDb, String> {
        let template = mariadb_template()?;
        let pki = pki();
        let dir = scratch_dir("seqd-mariadb-tls-", MARIADB_STOP)?;
        copy_dir(template, &dir.join("data"))?;
        let server = pki.server(ServerCert::IpOnly);
        let port = free_port();
        mariadb_start(
            &dir,
            port,
            &[
                format!("--ssl-ca={}", pki.ca.display()),
                format!("--ssl-cert={}", server.cert.display()),
                format!("--ssl-key={}", server.key.display()),
                "--require-secure-transport=ON".into(),
            ],
        )?;
        let server = MariaDb { port, dir };
        server.sql(
            "CREATE USER certuser@'%' REQUIRE SUBJECT '/CN=certuser'; \
             GRANT ALL ON *.* TO certuser@'%'",
        )?;
        Ok(server)
    }

    /// Runs `sql` as root over the server's socket.
    pub fn sql(&self, sql: &str) -> Result<(), String> {
        run(crate::support::db_servers::mariadb(&self.dir, "root").args(["-e", sql]))
    }

    /// `mysql://{userinfo}@{host}:{port}/{db}?{params}`.
    pub fn url(&self, userinfo: &str, host: &str, db: &str, params: &str) -> String {
        format!("mysql://{userinfo}@{host}:{}/{db}?{params}", self.port)
    }
}
