//! TLS on the doors (`--tls-cert`, `--tls-key`, `--tls-client-ca`;
//! docs/design.md, "TLS on the doors"): the one certificate store the HTTP
//! and the RESP listener share.
//!
//! The store holds the rustls configurations built from the files, behind
//! an [`ArcSwap`]: a handshake takes the one in force when it starts, and a
//! reload swaps in new ones for the handshakes after it: on SIGHUP
//! ([`TlsStore::reload`]) and when the files' contents change
//! ([`TlsStore::check`], polled by [`keep_current`]; a Kubernetes Secret's
//! mount is renewed by swapping a symbolic link, which reading through the
//! paths follows). A connection keeps the configuration of its handshake, so
//! a reload never touches an open connection; files that do not load leave
//! the store as it was. The handshake itself runs on the connection's task,
//! under the door's deadline for a request head (src/http/serve.rs,
//! src/resp/mod.rs).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::{RootCertStore, ServerConfig};
use sha2::{Digest, Sha256};
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
    /// What the files held when `current` was built, and the readings that
    /// did not load; locked for a whole reload, so reloads take turns.
    seen: Mutex<Seen>,
}

/// A digest of one reading of the files: their contents, or the error that
/// kept them from being read.
type Fingerprint = [u8; 32];

/// What the store has made of the files so far.
struct Seen {
    /// The reading `current` was built from.
    loaded: Fingerprint,
    /// A reading that did not load at the last check, not reported yet.
    failing: Option<Fingerprint>,
    /// The last reading that did not load and was reported.
    reported: Option<Fingerprint>,
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
        let (loaded, contents) = read(files);
        Ok(Arc::new(TlsStore {
            current: ArcSwap::from_pointee(configs(files, &contents?, jiff::Timestamp::now())?),
            files: files.clone(),
            seen: Mutex::new(Seen {
                loaded,
                failing: None,
                reported: None,
            }),
        }))
    }

    /// Reads the files again (SIGHUP): the handshakes from now on use what
    /// they hold. When they do not load, the store keeps what it had and
    /// the problem is the error ([`TlsStore::check`] does not report the
    /// same files again).
    pub fn reload(&self) -> Result<(), TlsError> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let (read, contents) = read(&self.files);
        let built = contents.and_then(|c| configs(&self.files, &c, jiff::Timestamp::now()));
        self.take(&mut seen, read, built)
    }

    /// Reads the files and reloads when what they hold is not what is in
    /// force (the file watch): `None` when there is nothing to say (the
    /// files are unchanged, or do not load but were reported already, or
    /// were first seen not loading at this check), else the outcome to
    /// report. Files that do not load are retried at every check (a
    /// certificate not valid yet may become valid) and reported once, when
    /// a second check in a row finds them the same: a renewal written file
    /// by file passes through states that do not load (a new certificate
    /// beside the old key), and the next check takes the finished one.
    pub fn check(&self) -> Option<Result<(), TlsError>> {
        self.check_at(jiff::Timestamp::now())
    }

    /// [`TlsStore::check`] with certificates checked for validity at `now`.
    fn check_at(&self, now: jiff::Timestamp) -> Option<Result<(), TlsError>> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let (read, contents) = read(&self.files);
        if read == seen.loaded {
            seen.failing = None;
            seen.reported = None;
            return None;
        }
        match contents.and_then(|c| configs(&self.files, &c, now)) {
            Err(_) if seen.reported == Some(read) => None,
            Err(_) if seen.failing != Some(read) => {
                seen.failing = Some(read);
                None
            }
            built => Some(self.take(&mut seen, read, built)),
        }
    }

    /// Puts `built`, from the reading `read`, in force, or records that the
    /// reading did not load.
    fn take(
        &self,
        seen: &mut Seen,
        read: Fingerprint,
        built: Result<Configs, TlsError>,
    ) -> Result<(), TlsError> {
        seen.failing = None;
        match built {
            Ok(configs) => {
                self.current.store(Arc::new(configs));
                seen.loaded = read;
                seen.reported = None;
                Ok(())
            }
            Err(e) => {
                seen.reported = Some(read);
                Err(e)
            }
        }
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

/// Keeps `store` on what the files hold until it is dropped: reloads it on
/// every SIGHUP ([`reload_on_hangup`]) and when the files change, checked
/// every `every` ([`reload_on_change`]).
pub async fn keep_current(store: Weak<TlsStore>, every: Duration) {
    tokio::join!(
        reload_on_hangup(store.clone()),
        reload_on_change(store, every)
    );
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
                tracing::warn!(error = %e, "SIGHUP cannot be caught: the TLS files are reloaded when they change only");
                return;
            }
        };
        while hangups.recv().await.is_some() {
            let Some(store) = store.upgrade() else {
                return;
            };
            log_reload(&store, "SIGHUP", store.reload());
        }
    }
    #[cfg(not(unix))]
    let _ = store;
}

/// How often the files are checked for a change by default
/// (`--tls-watch-interval`).
pub const DEFAULT_WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// The shortest interval between two checks of the files.
const MIN_WATCH: Duration = Duration::from_millis(10);

/// Checks the files every `every` ([`TlsStore::check`]: their contents,
/// read through their paths) and logs what a check reports, until `store`
/// is dropped. Polling the contents, rather than watching the files for
/// events, sees a renewal however it is made: a file written in place or
/// renamed over, or the symbolic link of a Kubernetes Secret's mount
/// (`..data`) swapped to a new directory, which no event on the path names.
pub async fn reload_on_change(store: Weak<TlsStore>, every: Duration) {
    let every = every.max(MIN_WATCH);
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(store) = store.upgrade() else {
            return;
        };
        // Reading files may block (a network file system).
        let checking = store.clone();
        match tokio::task::spawn_blocking(move || checking.check()).await {
            Ok(Some(outcome)) => log_reload(&store, "file change", outcome),
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, "checking the TLS files failed"),
        }
    }
}

/// Logs the outcome of a reload of `store` (one line) and what triggered it.
fn log_reload(store: &TlsStore, trigger: &'static str, outcome: Result<(), TlsError>) {
    match outcome {
        Ok(()) => tracing::info!(
            trigger,
            cert = %store.files.cert.display(),
            "TLS files reloaded: new handshakes use the new certificate"
        ),
        Err(e) => tracing::error!(
            trigger,
            file = %e.path().display(),
            error = %e,
            "TLS files not reloaded: the certificate in force is kept"
        ),
    }
}

/// What the files hold, read once: each file whole, so that what is built
/// is what was compared.
struct Contents {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

/// Reads `files` through their paths (following symbolic links): the
/// fingerprint of what was read (the contents, or the error) and the
/// contents.
fn read(files: &TlsFiles) -> (Fingerprint, Result<Contents, TlsError>) {
    let file = |flag: &'static str, path: &Path| {
        std::fs::read(path).map_err(|e| TlsError::new(flag, path, format!("cannot read it: {e}")))
    };
    let contents = (|| {
        Ok(Contents {
            cert: file("--tls-cert", &files.cert)?,
            key: file("--tls-key", &files.key)?,
            client_ca: files
                .client_ca
                .as_deref()
                .map(|ca| file("--tls-client-ca", ca))
                .transpose()?,
        })
    })();
    let mut digest = Sha256::new();
    match &contents {
        Ok(c) => {
            for part in [Some(&c.cert), Some(&c.key), c.client_ca.as_ref()] {
                // Each part's length first, so that no two readings run together.
                let part = part.map_or(&[][..], |p| &p[..]);
                digest.update((part.len() as u64).to_le_bytes());
                digest.update(part);
            }
        }
        Err(e) => digest.update(format!("unreadable: {e}")),
    }
    (digest.finalize().into(), contents)
}

/// The configurations for `files`, from `contents`, what they hold, with a
/// certificate valid at `now`.
fn configs(
    files: &TlsFiles,
    contents: &Contents,
    now: jiff::Timestamp,
) -> Result<Configs, TlsError> {
    let chain = certificates("--tls-cert", &files.cert, &contents.cert)?;
    in_force(&chain[0], now)
        .map_err(|problem| TlsError::new("--tls-cert", &files.cert, problem))?;
    let key = private_key(&files.key, &contents.key)?;
    // ring (rustls marks its provider deprecated for offering no
    // post-quantum key exchange; X25519, P-256 and P-384 are offered).
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("ring offers TLS 1.2 and 1.3");
    let builder = match (&files.client_ca, &contents.client_ca) {
        (Some(ca), Some(pem)) => {
            builder.with_client_cert_verifier(client_verifier(ca, pem, provider)?)
        }
        _ => builder.with_no_client_auth(),
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

/// Every certificate in `pem`, the PEM file `path` (at least one).
fn certificates(
    flag: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
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

/// The first private key in `pem`, the PEM file `path`.
fn private_key(path: &Path, pem: &[u8]) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem)
        .map_err(|e| TlsError::new("--tls-key", path, pem_problem(e, "private key")))
}

/// The verifier of clients' certificates: signed by a CA of `pem`, the
/// file `ca`.
fn client_verifier(
    ca: &Path,
    pem: &[u8],
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    let flag = "--tls-client-ca";
    let mut roots = RootCertStore::empty();
    for cert in certificates(flag, ca, pem)? {
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

    /// A self-signed certificate for localhost and its key, as PEM.
    fn pair() -> (String, String) {
        pair_from(None)
    }

    /// [`pair`], valid from the start of `year` when given.
    fn pair_from(year: Option<i32>) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        if let Some(year) = year {
            params.not_before = rcgen::date_time_ymd(year, 1, 1);
            params.not_after = rcgen::date_time_ymd(year + 1, 1, 1);
        }
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// The store over `cert.pem` and `key.pem` in `dir`, holding `first`.
    fn store_in(dir: &Path, first: &(String, String)) -> Arc<TlsStore> {
        let files = TlsFiles {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
            client_ca: None,
        };
        std::fs::write(&files.cert, &first.0).unwrap();
        std::fs::write(&files.key, &first.1).unwrap();
        TlsStore::load(&files).unwrap()
    }

    /// What the first check and the next ones report, as `-` (nothing),
    /// `ok` or the error.
    fn checks(store: &TlsStore, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| match store.check() {
                None => "-".to_owned(),
                Some(Ok(())) => "ok".to_owned(),
                Some(Err(e)) => e.to_string(),
            })
            .collect()
    }

    #[test]
    fn a_renewal_written_file_by_file_is_taken_without_a_report_of_the_half_way_state() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(dir.path(), &pair());
        assert_eq!(checks(&store, 2), ["-", "-"], "unchanged files");
        let second = pair();
        std::fs::write(&store.files.cert, &second.0).unwrap();
        // The new certificate beside the old key does not load: not reported
        // when the next check finds the key written.
        assert_eq!(checks(&store, 1), ["-"]);
        std::fs::write(&store.files.key, &second.1).unwrap();
        assert_eq!(checks(&store, 3), ["ok", "-", "-"]);
    }

    #[test]
    fn files_that_do_not_load_are_reported_once_per_change_and_retried() {
        let dir = tempfile::tempdir().unwrap();
        let first = pair();
        let store = store_in(dir.path(), &first);
        let key = store.files.key.clone();
        std::fs::write(&key, "not a key\n").unwrap();
        let no_key = format!("--tls-key {}: no private key in it", key.display());
        let said = checks(&store, 5);
        assert_eq!(said[0], "-");
        assert!(said[1].starts_with(&no_key), "{said:?}");
        assert_eq!(said[2..], ["-", "-", "-"]);
        // Another content that does not load is another change.
        std::fs::write(&key, "still not a key\n").unwrap();
        let said = checks(&store, 3);
        assert!(said[1].starts_with(&no_key), "{said:?}");
        assert_eq!([&said[0], &said[2]], ["-", "-"]);
        // Back to what is in force, then bad again: reported again.
        std::fs::write(&key, &first.1).unwrap();
        assert_eq!(checks(&store, 1), ["-"]);
        std::fs::write(&key, "not a key\n").unwrap();
        assert!(checks(&store, 2)[1].starts_with(&no_key));
        // A missing file too, once.
        std::fs::remove_file(&key).unwrap();
        let said = checks(&store, 4);
        assert!(said[1].contains("cannot read it"), "{said:?}");
        assert_eq!([&said[0], &said[2], &said[3]], ["-", "-", "-"]);
        // What SIGHUP reported is not reported again by a check.
        std::fs::write(&key, "bad for SIGHUP\n").unwrap();
        assert!(store.reload().is_err());
        assert_eq!(checks(&store, 3), ["-", "-", "-"]);
        // And a good reload by SIGHUP leaves the checks nothing to do.
        let second = pair();
        std::fs::write(&store.files.cert, &second.0).unwrap();
        std::fs::write(&key, &second.1).unwrap();
        store.reload().unwrap();
        assert_eq!(checks(&store, 2), ["-", "-"]);
    }

    #[test]
    fn a_certificate_not_valid_yet_is_reported_once_and_taken_once_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(dir.path(), &pair());
        let early = pair_from(Some(2090));
        std::fs::write(&store.files.cert, &early.0).unwrap();
        std::fs::write(&store.files.key, &early.1).unwrap();
        let said = checks(&store, 3);
        assert!(said[1].contains("is not valid before 2090"), "{said:?}");
        assert_eq!([&said[0], &said[2]], ["-", "-"]);
        let in_2090 = "2090-06-01T00:00:00Z".parse().unwrap();
        assert!(matches!(store.check_at(in_2090), Some(Ok(()))));
        assert!(store.check_at(in_2090).is_none());
    }

    #[cfg(unix)]
    #[test]
    fn a_kubernetes_secret_mount_swapped_by_its_link_is_seen() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path();
        let version = |name: &str, (cert, key): &(String, String)| {
            std::fs::create_dir(mount.join(name)).unwrap();
            std::fs::write(mount.join(name).join("tls.crt"), cert).unwrap();
            std::fs::write(mount.join(name).join("tls.key"), key).unwrap();
        };
        version("..2026_01_01_00_00_00.1", &pair());
        symlink("..2026_01_01_00_00_00.1", mount.join("..data")).unwrap();
        symlink("..data/tls.crt", mount.join("tls.crt")).unwrap();
        symlink("..data/tls.key", mount.join("tls.key")).unwrap();
        let store = TlsStore::load(&TlsFiles {
            cert: mount.join("tls.crt"),
            key: mount.join("tls.key"),
            client_ca: None,
        })
        .unwrap();
        assert_eq!(checks(&store, 1), ["-"]);
        version("..2026_02_01_00_00_00.2", &pair());
        symlink("..2026_02_01_00_00_00.2", mount.join("..data_tmp")).unwrap();
        std::fs::rename(mount.join("..data_tmp"), mount.join("..data")).unwrap();
        std::fs::remove_dir_all(mount.join("..2026_01_01_00_00_00.1")).unwrap();
        assert_eq!(checks(&store, 2), ["ok", "-"]);
    }
}
