//! Certificates made by the tests (rcgen, into a temporary directory): a CA,
//! servers' and clients' certificates signed by it, and the bad ones a
//! client or a server must refuse (expired, for another host, self-signed,
//! from another CA); and a TLS client (rustls) that trusts the CA, for the
//! tests that hold connections open or count bytes.

#![allow(dead_code)] // each test binary uses a part

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls;

/// A certificate and its key, as PEM files.
#[derive(Debug, Clone)]
pub struct Pair {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM, PKCS#8).
    pub key: PathBuf,
    /// The certificate's DER, to compare with what a peer presents.
    pub der: Vec<u8>,
}

impl Pair {
    /// `cert` and `key` as strings, for command lines.
    pub fn paths(&self) -> (&str, &str) {
        (self.cert.to_str().unwrap(), self.key.to_str().unwrap())
    }
}

/// What a leaf certificate is like.
#[derive(Debug, Clone, Copy)]
pub struct Leaf<'a> {
    /// Its subject alternative names (DNS names or IP addresses).
    pub hosts: &'a [&'a str],
    /// Its serial number.
    pub serial: u64,
    /// Valid in 2000 only.
    pub expired: bool,
    /// Valid from 2090 only.
    pub not_yet_valid: bool,
    /// Signed by its own key rather than the CA's.
    pub self_signed: bool,
    /// For a client (TLS client authentication) rather than a server.
    pub client: bool,
}

impl Default for Leaf<'_> {
    fn default() -> Self {
        Leaf {
            hosts: &["localhost", "127.0.0.1"],
            serial: 1,
            expired: false,
            not_yet_valid: false,
            self_signed: false,
            client: false,
        }
    }
}

/// A CA in a temporary directory, and the certificates it signs there.
pub struct Pki {
    dir: tempfile::TempDir,
    params: CertificateParams,
    key: KeyPair,
    /// The CA's certificate (PEM).
    pub ca: PathBuf,
}

impl Pki {
    /// A new CA named `name`, its certificate written to `ca.pem`.
    pub fn new(name: &str) -> Pki {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, cert.pem()).unwrap();
        Pki {
            dir,
            params,
            key,
            ca,
        }
    }

    /// The directory the files are in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A path `name` in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Makes the leaf certificate `leaf` as `{name}.pem` and `{name}.key`.
    pub fn leaf(&self, name: &str, leaf: Leaf<'_>) -> Pair {
        let key = KeyPair::generate().unwrap();
        let hosts: Vec<String> = leaf.hosts.iter().map(|h| h.to_string()).collect();
        let mut params = CertificateParams::new(hosts).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("seqd test {name}"));
        params.serial_number = Some(SerialNumber::from(leaf.serial));
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![if leaf.client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        if leaf.expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        }
        if leaf.not_yet_valid {
            params.not_before = rcgen::date_time_ymd(2090, 1, 1);
            params.not_after = rcgen::date_time_ymd(2091, 1, 1);
        }
        let cert = if leaf.self_signed {
            params.self_signed(&key).unwrap()
        } else {
            params
                .signed_by(&key, &Issuer::from_params(&self.params, &self.key))
                .unwrap()
        };
        let pair = Pair {
            cert: self.path(&format!("{name}.pem")),
            key: self.path(&format!("{name}.key")),
            der: cert.der().to_vec(),
        };
        std::fs::write(&pair.cert, cert.pem()).unwrap();
        std::fs::write(&pair.key, key.serialize_pem()).unwrap();
        pair
    }

    /// A server certificate for localhost and 127.0.0.1 with `serial`.
    pub fn server(&self, name: &str, serial: u64) -> Pair {
        self.leaf(
            name,
            Leaf {
                serial,
                ..Leaf::default()
            },
        )
    }

    /// A client certificate.
    pub fn client(&self, name: &str) -> Pair {
        self.leaf(
            name,
            Leaf {
                client: true,
                ..Leaf::default()
            },
        )
    }
}

/// A rustls client configuration that trusts `ca` and presents `identity`
/// (when given).
pub fn client_config(ca: &Path, identity: Option<&Pair>) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    #[allow(deprecated)] // the ring provider, as the server's
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some(pair) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_file(&pair.cert).unwrap()],
                PrivateKeyDer::from_pem_file(&pair.key).unwrap(),
            )
            .unwrap(),
    };
    Arc::new(config)
}

/// A TLS connection to `addr` as `localhost`, within 10 s.
pub async fn connect(
    addr: SocketAddr,
    config: &Arc<rustls::ClientConfig>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        tokio_rustls::TlsConnector::from(config.clone()).connect(name, tcp),
    )
    .await
    .map_err(|_| std::io::Error::other("TLS handshake timed out"))?
}

/// The DER of the certificate the server presented on `stream`.
pub fn served(stream: &TlsStream<TcpStream>) -> Vec<u8> {
    stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .expect("a server certificate")
        .to_vec()
}

/// One `GET path` over `stream`, kept alive; the status and the body.
pub async fn get<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    path: &str,
) -> std::io::Result<(u16, String)> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept: text/plain\r\n\r\n");
    stream.write_all(req.as_bytes()).await?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buf))
            .await
            .map_err(|_| std::io::Error::other("no answer within 30 s"))??;
        if n == 0 {
            return Err(std::io::Error::other(format!(
                "closed after {:?}",
                String::from_utf8_lossy(&got)
            )));
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            continue;
        };
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .expect("a content-length");
        if body.len() >= length {
            let status = head
                .split(' ')
                .nth(1)
                .and_then(|s| s.parse().ok())
                .expect("a status");
            return Ok((status, body.to_owned()));
        }
    }
}

/// One RESP command over `stream`: its reply's first line (`:5`, `+PONG`,
/// `-ERR ...`), without the line end.
pub async fn resp_call<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    args: &[&str],
) -> std::io::Result<String> {
    let mut frame = format!("*{}\r\n", args.len());
    for a in args {
        frame.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    stream.write_all(frame.as_bytes()).await?;
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !got.ends_with(b"\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buf))
            .await
            .map_err(|_| std::io::Error::other("no reply within 30 s"))??;
        if n == 0 {
            return Err(std::io::Error::other("closed"));
        }
        got.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&got).trim_end().to_owned())
}

/// Reads until the peer closes (EOF, reset or a TLS alert), at most
/// `bound`; `false` if it stayed open.
pub async fn closed_within<S: AsyncRead + Unpin>(stream: &mut S, bound: Duration) -> bool {
    let read_all = async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(bound, read_all).await.is_ok()
}
