//! TLS on the doors (`--tls-cert`, `--tls-key`, `--tls-client-ca`;
//! docs/design.md, "TLS on the doors"): the one certificate store the HTTP
//! and the RESP listener share.
//!
//! The store holds the rustls configurations built from the files, behind
//! an [`ArcSwap`]: a handshake takes the one in force when it starts, and
//! [`TlsStore::reload`] (SIGHUP) swaps in new ones for the handshakes after
//! it. A connection keeps the configuration of its handshake, so a reload
//! never touches an open connection; files that do not load leave the store
//! as it was. The handshake itself runs on the connection's task, under the
//! door's deadline for a request head (src/http/serve.rs, src/resp/mod.rs).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// The files TLS is served from, read at start and again on each reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server's certificate, then the chain up to (not necessarily
    /// including) the root, PEM (`--tls-cert`).
    pub cert: PathBuf,
    /// Its private key, PEM: PKCS#8, PKCS#1 (RSA) or SEC1 (EC) (`--tls-key`).
    pub key: PathBuf,
    /// The CA certificates a client's certificate must chain to; no client
    /// certificate is asked for when `None` (`--tls-client-ca`).
    pub client_ca: Option<PathBuf>,
}

/// A TLS file that does not load: the flag, the file and what is wrong.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{flag} {}: {problem}", path.display())]
pub struct TlsError {
    flag: &'static str,
    path: PathBuf,
    problem: String,
}

impl TlsError {
    fn new(flag: &'static str, path: &Path, problem: impl Into<String>) -> Self {
        TlsError {
            flag,
            path: path.to_owned(),
            problem: problem.into(),
        }
    }

    /// The file that did not load.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Which listener a handshake is for: HTTP offers ALPN `http/1.1`, RESP
/// offers no application protocol (Redis clients send none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsDoor {
    /// The HTTP listener.
    Http,
    /// The RESP listener.
    Resp,
}

/// The configurations built from one reading of the files.
struct Configs {
    http: Arc<ServerConfig>,
    resp: Arc<ServerConfig>,
}

/// The certificate store both listeners share.
pub struct TlsStore {
    files: TlsFiles,
    current: ArcSwap<Configs>,
}

impl std::fmt::Debug for TlsStore {
    /// The files only: the configurations hold the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TlsStore").field(&self.files).finish()
    }
}

impl TlsStore {
    /// Reads `files`: the first problem found is the error (a missing or
    /// unreadable file, one with no certificate or no key, a key that does
    /// not match the certificate, a CA file with no usable certificate).
    pub fn load(files: &TlsFiles) -> Result<Arc<TlsStore>, TlsError> {
        Ok(Arc::new(TlsStore {
            current: ArcSwap::from_pointee(configs(files)?),
            files: files.clone(),
        }))
    }

    /// Reads the files again: the handshakes from now on use what they
    /// hold. When they do not load, the store keeps what it had and the
    /// problem is the error.
    pub fn reload(&self) -> Result<(), TlsError> {
        self.current.store(Arc::new(configs(&self.files)?));
        Ok(())
    }

    /// An acceptor for one handshake on `door`, with the configuration in
    /// force now.
    pub fn acceptor(&self, door: TlsDoor) -> TlsAcceptor {
        let configs = self.current.load();
        TlsAcceptor::from(match door {
            TlsDoor::Http => configs.http.clone(),
            TlsDoor::Resp => configs.resp.clone(),
        })
    }

    /// The files it reads.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }
}

/// Reloads `store` on every SIGHUP, logging the outcome (one line), until
/// the store is dropped; a reload that fails keeps the certificate in force.
pub async fn reload_on_hangup(store: Weak<TlsStore>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "SIGHUP cannot be caught: the TLS files are read at start only");
                return;
            }
        };
        while hangups.recv().await.is_some() {
            let Some(store) = store.upgrade() else {
                return;
            };
            match store.reload() {
                Ok(()) => tracing::info!(
                    cert = %store.files.cert.display(),
                    "TLS files reloaded: new handshakes use the new certificate"
                ),
                Err(e) => tracing::error!(
                    file = %e.path().display(),
                    error = %e,
                    "TLS files not reloaded: the certificate in force is kept"
                ),
            }
        }
    }
    #[cfg(not(unix))]
    let _ = store;
}

/// The configurations for `files`.
fn configs(files: &TlsFiles) -> Result<Configs, TlsError> {
    let chain = certificates("--tls-cert", &files.cert)?;
    in_force(&chain[0], jiff::Timestamp::now())
        .map_err(|problem| TlsError::new("--tls-cert", &files.cert, problem))?;
    let key = private_key(&files.key)?;
    // ring (rustls marks its provider deprecated for offering no
    // post-quantum key exchange; X25519, P-256 and P-384 are offered).
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("ring offers TLS 1.2 and 1.3");
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => builder.with_client_cert_verifier(client_verifier(ca, provider)?),
    };
    let mut http = builder.with_single_cert(chain, key).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => TlsError::new(
            "--tls-key",
            &files.key,
            format!(
                "the private key does not match the certificate of --tls-cert {} (the first in it)",
                files.cert.display()
            ),
        ),
        other => TlsError::new(
            "--tls-key",
            &files.key,
            format!("the private key is not usable: {other}"),
        ),
    })?;
    // Each door resumes its own sessions.
    let mut resp = http.clone();
    resp.session_storage = ServerSessionMemoryCache::new(256);
    http.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Configs {
        http: Arc::new(http),
        resp: Arc::new(resp),
    })
}

/// Every certificate in the PEM file `path` (at least one).
fn certificates(flag: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::new(flag, path, pem_problem(e, "certificate")))?;
    if chain.is_empty() {
        return Err(TlsError::new(flag, path, no_item("certificate")));
    }
    Ok(chain)
}

/// Refuses a certificate that is not valid at `now` (expired, or not valid
/// yet): every client would refuse it, so it must not replace one in force.
fn in_force(cert: &CertificateDer<'_>, now: jiff::Timestamp) -> Result<(), String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| format!("the certificate cannot be read: {e}"))?;
    let validity = parsed.validity();
    let at = |t: &x509_parser::time::ASN1Time| {
        jiff::Timestamp::from_second(t.timestamp())
            .map_or_else(|_| t.to_string(), |ts| ts.to_string())
    };
    let now_s = now.as_second();
    if now_s > validity.not_after.timestamp() {
        return Err(format!(
            "the certificate expired at {} (now {now}): every client would refuse it",
            at(&validity.not_after)
        ));
    }
    if now_s < validity.not_before.timestamp() {
        return Err(format!(
            "the certificate is not valid before {} (now {now}): every client would refuse it",
            at(&validity.not_before)
        ));
    }
    Ok(())
}

/// The first private key in the PEM file `path`.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| TlsError::new("--tls-key", path, pem_problem(e, "private key")))
}

/// The verifier of clients' certificates: signed by a CA of the file `ca`.
fn client_verifier(
    ca: &Path,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    let flag = "--tls-client-ca";
    let mut roots = RootCertStore::empty();
    for cert in certificates(flag, ca)? {
        roots
            .add(cert)
            .map_err(|e| TlsError::new(flag, ca, format!("a certificate is not usable: {e}")))?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| TlsError::new(flag, ca, format!("not usable as a CA: {e}")))
}

/// What a PEM reading error means for a file that should hold a `what`.
fn pem_problem(e: pem::Error, what: &str) -> String {
    match e {
        pem::Error::Io(e) => format!("cannot read it: {e}"),
        pem::Error::NoItemsFound => no_item(what),
        pem::Error::MissingSectionEnd { end_marker } => format!(
            "not a valid PEM file: its `-----END {}-----` line is missing (a truncated file?)",
            String::from_utf8_lossy(&end_marker).trim()
        ),
        pem::Error::IllegalSectionStart { line } => format!(
            "not a valid PEM file: `{}` does not start a section",
            String::from_utf8_lossy(&line).trim()
        ),
        other => format!("not a valid PEM file: {other}"),
    }
}

fn no_item(what: &str) -> String {
    format!("no {what} in it (a PEM file is expected)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_named_with_its_flag() {
        let files = TlsFiles {
            cert: "/nonexistent/cert.pem".into(),
            key: "/nonexistent/key.pem".into(),
            client_ca: None,
        };
        let e = TlsStore::load(&files).unwrap_err().to_string();
        assert!(
            e.starts_with("--tls-cert /nonexistent/cert.pem: cannot read it:"),
            "{e}"
        );
    }
}
