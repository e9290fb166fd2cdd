//! Certificates renewed under load, through the real binary and real
//! clients (as tls_clients.rs): SIGHUP swaps the certificate on both doors
//! while keep-alive connections draw IDs, a bad file keeps the one in force
//! with one error line, and a Secret's volume renewed as the kubelet does it
//! (the `..data` swap) is served without a signal.

use crate::support::pki;
use pki::{Leaf, Pair};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::tls_clients::*;

/// Connections held open, each drawing IDs in a loop until told to stop
/// (at most 100,000 each): HTTP keep-alives and RESP connections.
struct Load {
    config: Arc<tokio_rustls::rustls::ClientConfig>,
    done: Vec<Arc<AtomicU64>>,
    tasks: Vec<tokio::task::JoinHandle<Result<Vec<u8>, String>>>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Load {
    /// `http` keep-alive connections to `http_addr` and `resp` connections
    /// to `resp_addr`, each handshaken before this returns.
    async fn start(
        config: &Arc<tokio_rustls::rustls::ClientConfig>,
        http_addr: SocketAddr,
        resp_addr: SocketAddr,
        (http, resp): (usize, usize),
    ) -> Load {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let mut load = Load {
            config: config.clone(),
            done: Vec::new(),
            tasks: Vec::new(),
            stop,
        };
        for i in 0..http + resp {
            let on_http = i < http;
            let addr = if on_http { http_addr } else { resp_addr };
            let mut conn = pki::connect(addr, config).await.unwrap();
            let done = Arc::new(AtomicU64::new(0));
            load.done.push(done.clone());
            let stopped = stopped.clone();
            load.tasks.push(tokio::spawn(async move {
                for n in 0..100_000u64 {
                    if *stopped.borrow() {
                        break;
                    }
                    let answer = if on_http {
                        pki::get(&mut conn, "/v1/sequences/order/next")
                            .await
                            .map(|(status, body)| (status == 200, body))
                    } else {
                        pki::resp_call(&mut conn, &["INCR", "order"])
                            .await
                            .map(|reply| (reply.starts_with(':'), reply))
                    };
                    match answer {
                        Ok((true, _)) => done.store(n + 1, Ordering::Relaxed),
                        Ok((false, text)) => return Err(format!("request {n}: {text}")),
                        Err(e) => return Err(format!("request {n}: {e}")),
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                Ok(pki::served(&conn))
            }));
        }
        load
    }

    /// 8 keep-alive connections to the HTTP door at `http` and 4 to the
    /// RESP door at `resp`, trusting `ca`, each having answered a request.
    async fn on_both_doors(ca: &std::path::Path, http: &str, resp: &str) -> Load {
        let config = pki::client_config(ca, None);
        let load = Load::start(
            &config,
            http.parse().unwrap(),
            resp.parse().unwrap(),
            (8, 4),
        )
        .await;
        load.progressed(&[0; 12]).await;
        load
    }

    /// A new handshake at `http` gets `pair`'s certificate, and every open
    /// connection answers again.
    async fn new_handshake_gets(&self, http: &str, pair: &Pair) {
        let fresh = pki::connect(http.parse().unwrap(), &self.config)
            .await
            .unwrap();
        assert_eq!(pki::served(&fresh), pair.der, "a new handshake at {http}");
        self.progressed(&self.counts()).await;
    }

    /// Stops the connections once each answered again: none failed a
    /// request (a failure panics in `stop`) and each kept `first`, the
    /// certificate of its handshake; the server at `base` still serves.
    async fn finish(self, first: &Pair, base: &str, ca: &std::path::Path) {
        self.progressed(&self.counts()).await;
        let served = self.stop().await;
        assert!(
            served.iter().all(|der| *der == first.der),
            "a connection opened before the certificate was swapped changed certificate"
        );
        assert!(curl_next(base, ca, None).await > 1);
    }

    /// Requests answered so far, per connection.
    fn counts(&self) -> Vec<u64> {
        self.done
            .iter()
            .map(|d| d.load(Ordering::Relaxed))
            .collect()
    }

    /// Waits until every connection answered more than `since`, at most [`BOUND`].
    async fn progressed(&self, since: &[u64]) {
        let waited = tokio::time::timeout(BOUND, async {
            while self
                .counts()
                .iter()
                .zip(since)
                .any(|(now, then)| now <= then)
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "stalled: {:?} since {since:?}",
            self.counts()
        );
    }

    /// Stops the connections: the certificate each was served.
    async fn stop(self) -> Vec<Vec<u8>> {
        self.stop.send(true).unwrap();
        let mut served = Vec::new();
        for task in self.tasks {
            served.push(
                task.await
                    .unwrap()
                    .unwrap_or_else(|e| panic!("a failed request: {e}")),
            );
        }
        served
    }
}

/// Writes `text` to `path` whole (a new file renamed over it), as a
/// deployment tool replaces a certificate.
fn replace(path: &std::path::Path, text: &[u8]) {
    let new = path.with_extension("new");
    std::fs::write(&new, text).unwrap();
    std::fs::rename(&new, path).unwrap();
}

/// Asserts `kept` is the one error line of a reload that kept the old
/// files: after `trigger`, naming `file`, its error saying both of `says`.
#[track_caller]
fn assert_kept(kept: &serde_json::Value, trigger: &str, file: &std::path::Path, says: [&str; 2]) {
    assert_eq!(kept["level"], "ERROR", "{kept}");
    assert_eq!(kept["trigger"], trigger, "{kept}");
    assert_eq!(kept["file"], file.to_str().unwrap(), "{kept}");
    let why = kept["error"].as_str().unwrap();
    assert!(says.iter().all(|s| why.contains(s)), "{kept}");
}

const RELOADED: &str = "TLS files reloaded: new handshakes use the new certificate";
const KEPT: &str = "TLS files not reloaded: the certificate in force is kept";

/// Under load on both doors, SIGHUP swaps in a new certificate: new
/// handshakes on both doors get it (openssl s_client: its serial and
/// fingerprint) while the connections opened before keep theirs and fail
/// no request; then a file that does not load (a key that is not PEM, an
/// expired certificate, a certificate whose key is not the one given) is
/// logged, one line naming the file and the problem, and the certificate in
/// force stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_swaps_the_certificate_under_load_and_a_bad_file_keeps_the_old_one() {
    let Some((db, pki)) = ready(&["curl", "openssl"]).await else {
        return;
    };
    let first = pki.server("first", 0xa1);
    // The files seqd reads: the first pair, later replaced.
    let files = Pair {
        cert: pki.path("live.pem"),
        key: pki.path("live.key"),
        der: first.der.clone(),
    };
    std::fs::copy(&first.cert, &files.cert).unwrap();
    std::fs::copy(&first.key, &files.key).unwrap();
    // SIGHUP alone: the watch of the files would take the changes first.
    let (p, base, resp) =
        tls_process(&db, &pki, &files, None, &["--tls-watch-interval", "1h"]).await;
    let http = base.strip_prefix("https://").unwrap().to_owned();
    let load = Load::on_both_doors(&pki.ca, &http, &resp).await;
    for addr in [&http, &resp] {
        assert_eq!(
            s_client(addr, &pki.ca, "tls1_3").await.1,
            printed(&first, "A1")
        );
    }

    let second = pki.server("second", 0xb2);
    replace(&files.cert, &std::fs::read(&second.cert).unwrap());
    replace(&files.key, &std::fs::read(&second.key).unwrap());
    p.signal("HUP");
    let reloaded = nth_log(&p, RELOADED, 1).await;
    assert_eq!(reloaded["trigger"], "SIGHUP", "{reloaded}");
    for addr in [&http, &resp] {
        for version in ["tls1_2", "tls1_3"] {
            let (_, cert) = s_client(addr, &pki.ca, version).await;
            assert_eq!(
                cert,
                printed(&second, "B2"),
                "{addr} {version} after SIGHUP"
            );
        }
    }
    load.new_handshake_gets(&http, &second).await;

    // A key file that is not PEM: logged, the second certificate kept.
    replace(&files.key, b"not a key\n");
    p.signal("HUP");
    let kept = nth_log(&p, KEPT, 1).await;
    assert_kept(&kept, "SIGHUP", &files.key, ["--tls-key", "no private key"]);
    // An expired certificate, its own key beside it: every client would
    // refuse it, so it is not taken.
    let expired = pki.leaf(
        "expired",
        pki::Leaf {
            expired: true,
            ..pki::Leaf::default()
        },
    );
    replace(&files.cert, &std::fs::read(&expired.cert).unwrap());
    replace(&files.key, &std::fs::read(&expired.key).unwrap());
    p.signal("HUP");
    let kept = nth_log(&p, KEPT, 2).await;
    let why = kept["error"].as_str().unwrap();
    assert!(
        why.contains("--tls-cert") && why.contains("the certificate expired at 2001-01-01"),
        "{kept}"
    );
    // A certificate whose key is not the one in --tls-key.
    let third = pki.server("third", 0xc3);
    replace(&files.cert, &std::fs::read(&third.cert).unwrap());
    replace(&files.key, &std::fs::read(&second.key).unwrap());
    p.signal("HUP");
    let kept = nth_log(&p, KEPT, 3).await;
    assert!(
        kept["error"]
            .as_str()
            .unwrap()
            .contains("does not match the certificate"),
        "{kept}"
    );
    assert_eq!(p.log_lines(RELOADED).len(), 1, "{:?}", p.all_logs());
    for addr in [&http, &resp] {
        assert_eq!(
            s_client(addr, &pki.ca, "tls1_3").await.1,
            printed(&second, "B2")
        );
    }
    load.finish(&first, &base, &pki.ca).await;
    drop(p);
}

/// A Kubernetes Secret's volume as the kubelet writes it: `tls.crt` and
/// `tls.key` are links into `..data`, itself a link to a timestamped
/// directory that holds the files.
struct SecretMount {
    dir: std::path::PathBuf,
    /// The timestamped directory `..data` points at.
    version: String,
    /// Versions written so far.
    written: u32,
}

impl SecretMount {
    /// The volume at `dir`, holding `pair`.
    fn new(dir: std::path::PathBuf, pair: &Pair) -> SecretMount {
        use std::os::unix::fs::symlink;
        std::fs::create_dir(&dir).unwrap();
        let mut mount = SecretMount {
            dir,
            version: String::new(),
            written: 0,
        };
        mount.version = mount.write(pair);
        symlink(&mount.version, mount.dir.join("..data")).unwrap();
        for file in ["tls.crt", "tls.key"] {
            symlink(format!("..data/{file}"), mount.dir.join(file)).unwrap();
        }
        mount
    }

    /// A new timestamped directory holding `pair`'s files; its name.
    fn write(&mut self, pair: &Pair) -> String {
        self.written += 1;
        let version = format!("..2026_12_07_19_00_{:02}.123", self.written);
        let at = self.dir.join(&version);
        std::fs::create_dir(&at).unwrap();
        std::fs::copy(&pair.cert, at.join("tls.crt")).unwrap();
        std::fs::copy(&pair.key, at.join("tls.key")).unwrap();
        version
    }

    /// The paths seqd is given, `tls.crt` and `tls.key`, for the
    /// certificate `der`.
    fn files(&self, der: &[u8]) -> Pair {
        Pair {
            cert: self.dir.join("tls.crt"),
            key: self.dir.join("tls.key"),
            der: der.to_vec(),
        }
    }

    /// Renews the volume to `pair` as the kubelet does: a new timestamped
    /// directory, a link `..data_tmp` to it renamed over `..data` (the
    /// swap, atomic), then the old directory removed.
    fn swap(&mut self, pair: &Pair) {
        let version = self.write(pair);
        let tmp = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&version, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.join("..data")).unwrap();
        let old = std::mem::replace(&mut self.version, version);
        std::fs::remove_dir_all(self.dir.join(old)).unwrap();
    }
}

/// Waits until new handshakes at both `addrs` (`openssl s_client`, TLS 1.3)
/// get the certificate `openssl x509` prints as `expected`, at most [`BOUND`].
async fn serves(addrs: [&str; 2], ca: &std::path::Path, expected: &str) {
    for addr in addrs {
        let waited = tokio::time::timeout(BOUND, async {
            while s_client(addr, ca, "tls1_3").await.1 != expected {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "{addr} never served {expected}");
    }
}

/// Under load on both doors, a Secret's volume renewed as the kubelet does
/// it (the `..data` link swapped to a new directory, the old one removed)
/// is served without a signal: new handshakes on both doors get the new
/// certificate (its serial, from `openssl s_client`) while the connections
/// opened before keep theirs and fail no request. A renewal to an expired
/// certificate keeps the one in force and is logged once, however many
/// checks of the files see it; SIGHUP still reloads (and reports the same
/// files again, once); the next good renewal is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_renewed_as_the_kubelet_does_is_served_under_load_without_a_signal() {
    let Some((db, pki)) = ready(&["curl", "openssl"]).await else {
        return;
    };
    const EVERY_MS: u64 = 100;
    let first = pki.server("first", 0xa1);
    let mut mount = SecretMount::new(pki.path("secret"), &first);
    let files = mount.files(&first.der);
    let interval = format!("{EVERY_MS}ms");
    let (p, base, resp) = tls_process(
        &db,
        &pki,
        &files,
        None,
        &["--tls-watch-interval", &interval],
    )
    .await;
    let http = base.strip_prefix("https://").unwrap().to_owned();
    let doors = [http.as_str(), resp.as_str()];
    let load = Load::on_both_doors(&pki.ca, &http, &resp).await;
    serves(doors, &pki.ca, &printed(&first, "A1")).await;

    let second = pki.server("second", 0xb2);
    mount.swap(&second);
    serves(doors, &pki.ca, &printed(&second, "B2")).await;
    let reloaded = nth_log(&p, RELOADED, 1).await;
    assert_eq!(reloaded["trigger"], "file change", "{reloaded}");
    assert_eq!(reloaded["cert"], files.cert.to_str().unwrap(), "{reloaded}");
    for addr in doors {
        let (_, cert) = s_client(addr, &pki.ca, "tls1_2").await;
        assert_eq!(cert, printed(&second, "B2"), "{addr} tls1_2");
    }
    load.new_handshake_gets(&http, &second).await;

    // An expired certificate with its own key: not taken, one line.
    let expired = pki.leaf(
        "expired",
        Leaf {
            expired: true,
            ..Leaf::default()
        },
    );
    mount.swap(&expired);
    let kept = nth_log(&p, KEPT, 1).await;
    let expiry = "the certificate expired at 2001-01-01";
    assert_kept(&kept, "file change", &files.cert, ["--tls-cert", expiry]);
    // Twenty checks or so see the same files: none logs again.
    tokio::time::sleep(Duration::from_millis(20 * EVERY_MS)).await;
    serves(doors, &pki.ca, &printed(&second, "B2")).await;
    // SIGHUP reads the files too, and says so.
    p.signal("HUP");
    let kept = nth_log(&p, KEPT, 2).await;
    assert_eq!(kept["trigger"], "SIGHUP", "{kept}");
    tokio::time::sleep(Duration::from_millis(20 * EVERY_MS)).await;

    let third = pki.server("third", 0xc3);
    mount.swap(&third);
    serves(doors, &pki.ca, &printed(&third, "C3")).await;
    let reloaded = nth_log(&p, RELOADED, 2).await;
    assert_eq!(reloaded["trigger"], "file change", "{reloaded}");
    p.signal("HUP");
    let reloaded = nth_log(&p, RELOADED, 3).await;
    assert_eq!(reloaded["trigger"], "SIGHUP", "{reloaded}");
    serves(doors, &pki.ca, &printed(&third, "C3")).await;
    assert_eq!(p.log_lines(KEPT).len(), 2, "{:?}", p.all_logs());
    assert_eq!(p.log_lines(RELOADED).len(), 3, "{:?}", p.all_logs());

    load.finish(&first, &base, &pki.ca).await;
    drop(p);
}
