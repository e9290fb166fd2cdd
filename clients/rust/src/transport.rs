//! The two lease routes over HTTP (docs/api.md, "Leases"), with failover
//! across the configured servers for a lease and none for a give-back
//! (only the instance that issued a lease can take its rest back).

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use reqwest::header::{HeaderValue, AUTHORIZATION};
use reqwest::StatusCode;
use serde::{Deserialize, Serialize};

use crate::error::{Attempt, Error};

/// What HTTPS trusts and presents beyond the system's CA store: CA
/// certificates (PEM) and a client identity (certificate chain and key,
/// PEM).
#[derive(Clone, Default)]
pub(crate) struct Tls {
    /// CA certificates trusted besides the system's, one PEM bundle each.
    pub cas: Vec<Vec<u8>>,
    /// The client certificate and key presented to servers that ask.
    pub identity: Option<Vec<u8>>,
}

/// A range `[start, end)` leased from one server, with what its give-back
/// needs.
#[derive(Clone)]
pub(crate) struct Lease {
    /// The lease's first ID, as answered.
    pub start: i64,
    /// One past its last ID, as answered.
    pub end: i64,
    /// Proves this client holds the lease when it gives the rest back.
    pub key: String,
    /// Index of the server that issued it (in [`Transport::servers`]).
    pub server: usize,
}

impl fmt::Debug for Lease {
    // The key is a credential for the give-back: never shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("start", &self.start)
            .field("end", &self.end)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// `200` body of `POST /v1/sequences/{name}/lease`.
#[derive(Deserialize)]
struct LeaseBody {
    start: i64,
    end: i64,
    key: String,
}

/// Body of `POST /v1/sequences/{name}/lease/return`.
#[derive(Serialize)]
struct ReturnBody<'a> {
    start: i64,
    end: i64,
    next: i64,
    key: &'a str,
}

/// `200` body of the give-back.
#[derive(Deserialize)]
struct ReturnedBody {
    returned: bool,
}

/// Every error body: `{"error": {"code": "...", "message": "..."}}`.
#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    code: String,
    message: String,
}

/// The servers, the HTTP client and the credentials.
pub(crate) struct Transport {
    http: reqwest::Client,
    /// Base URLs without a trailing `/`.
    servers: Vec<String>,
    /// `Bearer <token>`, marked sensitive.
    auth: Option<HeaderValue>,
    /// The server a lease is asked of first: the last one that answered.
    preferred: AtomicUsize,
    /// `?size=` of every lease; the sequence's step when `None`.
    lease_size: Option<u64>,
    timeout: Duration,
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("servers", &self.servers)
            .field("token", &self.auth.as_ref().map(|_| "<redacted>"))
            .field("lease_size", &self.lease_size)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// How one server's answer to a lease ends the fetch: a lease, an answer
/// that holds for every server (the sequence does not exist, ...), or a
/// failure of that server alone (try the next).
enum Outcome {
    Leased(Lease),
    Final(Error),
    Failed(String),
}

impl Transport {
    pub(crate) fn new(
        servers: Vec<String>,
        token: Option<&str>,
        lease_size: Option<u64>,
        timeout: Duration,
        tls: &Tls,
    ) -> Result<Transport, Error> {
        let auth = match token {
            None => None,
            Some(t) => {
                let mut v = HeaderValue::from_str(&format!("Bearer {t}")).map_err(|_| {
                    Error::Config("the token holds characters a header cannot carry".into())
                })?;
                v.set_sensitive(true);
                Some(v)
            }
        };
        let mut http = reqwest::Client::builder()
            .use_rustls_tls()
            .timeout(timeout)
            .connect_timeout(timeout);
        for pem in &tls.cas {
            let cas = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| Error::Config(format!("CA certificate: {}", describe(&e))))?;
            if cas.is_empty() {
                return Err(Error::Config(
                    "CA certificate: no PEM certificate in what was given".into(),
                ));
            }
            for ca in cas {
                http = http.add_root_certificate(ca);
            }
        }
        if let Some(pem) = &tls.identity {
            // The error names no part of the key.
            let identity = reqwest::Identity::from_pem(pem).map_err(|_| {
                Error::Config(
                    "client identity: not a PEM certificate chain with its private key".into(),
                )
            })?;
            http = http.identity(identity);
        }
        let http = http
            .build()
            .map_err(|e| Error::Config(format!("HTTP client: {}", describe(&e))))?;
        Ok(Transport {
            http,
            servers,
            auth,
            preferred: AtomicUsize::new(0),
            lease_size,
            timeout,
        })
    }

    /// The configured servers' base URLs.
    pub(crate) fn servers(&self) -> &[String] {
        &self.servers
    }

    fn post(&self, url: String) -> reqwest::RequestBuilder {
        let req = self.http.post(url);
        match &self.auth {
            Some(v) => req.header(AUTHORIZATION, v.clone()),
            None => req,
        }
    }

    /// Leases a range of `name`: asks the servers in turn, from the last one
    /// that answered, until one leases or one gives an answer that would be
    /// the same everywhere; [`Error::Unavailable`] once every server failed.
    pub(crate) async fn lease(&self, name: &str) -> Result<Lease, Error> {
        let n = self.servers.len();
        let first = self.preferred.load(Ordering::Relaxed) % n;
        let mut attempts = Vec::new();
        for i in 0..n {
            let server = (first + i) % n;
            match self.lease_from(server, name).await {
                Outcome::Leased(lease) => {
                    self.preferred.store(server, Ordering::Relaxed);
                    return Ok(lease);
                }
                Outcome::Final(e) => {
                    // That server answered as seqd does: it is healthy.
                    self.preferred.store(server, Ordering::Relaxed);
                    return Err(e);
                }
                Outcome::Failed(reason) => attempts.push(Attempt {
                    server: self.servers[server].clone(),
                    reason,
                }),
            }
        }
        Err(Error::Unavailable {
            name: name.to_owned(),
            attempts,
        })
    }

    async fn lease_from(&self, server: usize, name: &str) -> Outcome {
        let mut url = format!("{}/v1/sequences/{name}/lease", self.servers[server]);
        if let Some(size) = self.lease_size {
            url.push_str(&format!("?size={size}"));
        }
        let resp = match self.post(url).send().await {
            Ok(r) => r,
            Err(e) => return Outcome::Failed(self.describe_send(&e)),
        };
        let status = resp.status();
        let body = match resp.bytes().await {
            Ok(b) => b,
            Err(e) => return Outcome::Failed(self.describe_send(&e)),
        };
        if status == StatusCode::OK {
            return match serde_json::from_slice::<LeaseBody>(&body) {
                Ok(b) if b.start < b.end && !b.key.is_empty() => Outcome::Leased(Lease {
                    start: b.start,
                    end: b.end,
                    key: b.key,
                    server,
                }),
                Ok(b) => Outcome::Failed(format!(
                    "an empty or inverted lease [{}, {}) in a 200 answer",
                    b.start, b.end
                )),
                Err(_) => Outcome::Failed("a 200 answer that is not a seqd lease".into()),
            };
        }
        let Ok(ErrorBody { error }) = serde_json::from_slice::<ErrorBody>(&body) else {
            return Outcome::Failed(format!("{status} without a seqd error body"));
        };
        let name = name.to_owned();
        let ErrorDetail { code, message } = error;
        match (status.as_u16(), code.as_str()) {
            (404, "sequence_not_found") => Outcome::Final(Error::SequenceNotFound { name }),
            (401, _) => Outcome::Final(Error::Unauthorized { name, message }),
            (403, _) => Outcome::Final(Error::Forbidden { name, message }),
            (409, "not_leasable") => Outcome::Final(Error::NotLeasable { name, message }),
            (409, "sequence_exhausted") => Outcome::Final(Error::Exhausted { name }),
            (400, _) => Outcome::Final(Error::Rejected {
                name,
                code,
                message,
            }),
            // 5xx (503 storage_unavailable, overloaded), 408, a 404 of a
            // route this server lacks, ...: this server only.
            _ => Outcome::Failed(format!("{} {code}: {message}", status.as_u16())),
        }
    }

    /// Gives back `[next, lease.end)` to the server that issued `lease`:
    /// `Ok(true)` when the server took it back, `Ok(false)` when it refused
    /// (something was reserved since; the IDs stay unused).
    pub(crate) async fn give_back(
        &self,
        name: &str,
        lease: &Lease,
        next: i64,
    ) -> Result<bool, String> {
        let url = format!(
            "{}/v1/sequences/{name}/lease/return",
            self.servers[lease.server]
        );
        let body = ReturnBody {
            start: lease.start,
            end: lease.end,
            next,
            key: &lease.key,
        };
        let resp = self
            .post(url)
            .json(&body)
            .send()
            .await
            .map_err(|e| self.describe_send(&e))?;
        let status = resp.status();
        if status != StatusCode::OK {
            return Err(format!("{status}"));
        }
        let body: ReturnedBody = resp
            .json()
            .await
            .map_err(|_| "a 200 answer that is not seqd's".to_owned())?;
        Ok(body.returned)
    }

    fn describe_send(&self, e: &reqwest::Error) -> String {
        if e.is_timeout() {
            format!("no answer within {:?}", self.timeout)
        } else {
            describe(e)
        }
    }
}

/// A transport error and its causes, without its URL.
fn describe(e: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut text = if e.is_connect() {
        "connection failed".to_owned()
    } else {
        "request failed".to_owned()
    };
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}
