//! [`Client`], its builder and the [`Sequence`] handle.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::buffer::{Buffer, Shared};
use crate::error::{seq_name, Error};
use crate::names::Names;
use crate::transport::{Tls, Transport};

/// The default of [`ClientBuilder::timeout`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The default of [`ClientBuilder::prefetch_at`].
pub const DEFAULT_PREFETCH_AT: f64 = 0.5;
/// The default of [`ClientBuilder::max_batch`].
pub const DEFAULT_MAX_BATCH: usize = 1_000_000;
/// The default of [`ClientBuilder::retry_after`].
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_millis(250);

/// Builds a [`Client`]: [`Client::builder`].
#[derive(Clone)]
pub struct ClientBuilder {
    servers: Vec<String>,
    token: Option<String>,
    lease_size: Option<u64>,
    prefetch_at: f64,
    timeout: Duration,
    max_batch: usize,
    retry_after: Duration,
    tls: Tls,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("servers", &self.servers)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("lease_size", &self.lease_size)
            .field("prefetch_at", &self.prefetch_at)
            .field("timeout", &self.timeout)
            .field("max_batch", &self.max_batch)
            .field("retry_after", &self.retry_after)
            .field("ca_certificates", &self.tls.cas.len())
            .field(
                "identity",
                &self.tls.identity.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            servers: Vec::new(),
            token: None,
            lease_size: None,
            prefetch_at: DEFAULT_PREFETCH_AT,
            timeout: DEFAULT_TIMEOUT,
            max_batch: DEFAULT_MAX_BATCH,
            retry_after: DEFAULT_RETRY_AFTER,
            tls: Tls::default(),
        }
    }
}

impl ClientBuilder {
    /// Adds one server's base URL (`http://host:port`, optionally with a
    /// path prefix). Servers are tried in the order added.
    pub fn server(mut self, url: impl Into<String>) -> Self {
        self.servers.push(url.into());
        self
    }

    /// Adds several servers' base URLs, in order (see [`Self::server`]).
    pub fn servers<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.servers.extend(urls.into_iter().map(Into::into));
        self
    }

    /// The client token sent as `Authorization: Bearer <token>` (needed
    /// under `--client-auth on`: a token with `draw` on the names). Never
    /// shown by `Debug` or in an error.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// How many IDs each lease asks for (`?size=`), from 1 to the server's
    /// `--max-lease` (1,000,000 by default). Without it each lease is the
    /// sequence's step.
    pub fn lease_size(mut self, size: u64) -> Self {
        self.lease_size = Some(size);
        self
    }

    /// The fraction of a lease handed out after which the next lease is
    /// fetched in the background, from 0.0 (at once) to 1.0 (at its last
    /// ID); 0.5 by default.
    pub fn prefetch_at(mut self, fraction: f64) -> Self {
        self.prefetch_at = fraction;
        self
    }

    /// How long one request to one server may take, connection included
    /// (5 s by default). A lease fetch that tries every server takes at
    /// most this times the number of servers.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The largest [`Client::batch`] (1,000,000 by default); a larger one is
    /// [`Error::InvalidCount`].
    pub fn max_batch(mut self, max: usize) -> Self {
        self.max_batch = max;
        self
    }

    /// How long after a failed background fetch the next one may start
    /// (250 ms by default). Callers that run out of IDs never wait for it:
    /// they fetch at once.
    pub fn retry_after(mut self, pause: Duration) -> Self {
        self.retry_after = pause;
        self
    }

    /// Trusts the CA certificates in `pem` (one or more, PEM) for
    /// `https://` servers, beside the system's CA store: a server whose
    /// certificate a private CA signed (`seqd serve --tls-cert`).
    pub fn ca_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.cas.push(pem.into());
        self
    }

    /// Presents a client certificate to servers that require one
    /// (`seqd serve --tls-client-ca`): `pem` holds the certificate, its
    /// chain and its private key, PEM. Never shown by `Debug` or in an
    /// error.
    pub fn identity_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.identity = Some(pem.into());
        self
    }

    /// The client. [`Error::Config`] when no server is given, a URL is not
    /// `http://` or `https://`, a CA certificate or the identity is not
    /// PEM this client can use, the lease size is 0, the prefetch fraction
    /// is outside 0.0..=1.0, the timeout is zero, or the token cannot be
    /// sent in a header.
    pub fn build(self) -> Result<Client, Error> {
        if self.servers.is_empty() {
            return Err(Error::Config("no server URL given".into()));
        }
        let mut servers = Vec::with_capacity(self.servers.len());
        for raw in &self.servers {
            servers.push(base_url(raw)?);
        }
        if self.lease_size == Some(0) {
            return Err(Error::Config("lease_size must be at least 1".into()));
        }
        if !(0.0..=1.0).contains(&self.prefetch_at) {
            return Err(Error::Config(format!(
                "prefetch_at must be a fraction from 0.0 to 1.0, not {}",
                self.prefetch_at
            )));
        }
        if self.timeout.is_zero() {
            return Err(Error::Config("timeout must be above zero".into()));
        }
        let transport = Transport::new(
            servers,
            self.token.as_deref(),
            self.lease_size,
            self.timeout,
            &self.tls,
        )?;
        let shared = Arc::new(Shared {
            transport,
            prefetch_ratio: self.prefetch_at,
            retry_after: self.retry_after,
        });
        Ok(Client {
            inner: Arc::new(Inner {
                shared,
                names: Names::default(),
                max_batch: self.max_batch,
            }),
        })
    }
}

/// `raw` checked and without a trailing `/`.
fn base_url(raw: &str) -> Result<String, Error> {
    // Checked first, so that no message below can show a password.
    if raw.contains('@') {
        return Err(Error::Config(
            "a server URL with credentials in it (an '@'): give the token with .token() instead"
                .into(),
        ));
    }
    let url =
        reqwest::Url::parse(raw).map_err(|e| Error::Config(format!("server URL {raw:?}: {e}")))?;
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(Error::Config(format!(
                "server URL {raw:?}: scheme {other:?}, expected http or https"
            )))
        }
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(Error::Config(format!(
            "server URL {raw:?}: a base URL has no query or fragment"
        )));
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// An ID allocator client of seqd: IDs handed out in process from ranges
/// leased from the servers (docs/api.md, "Leases"), with a double buffer
/// per sequence.
///
/// Cheap to clone (one `Arc`); every clone shares the leases. Needs a Tokio
/// runtime: fetches run in tasks of their own.
///
/// **Order.** For one sequence, every ID a client (and its clones) hands
/// out is higher than every ID it handed out before: a call that starts
/// after another returned gets higher IDs, whichever tasks made them, so the
/// IDs one task gets from successive calls strictly increase. Calls that run
/// at the same time are ordered by the moment each takes its IDs, which need
/// not be the order they return in. The IDs of one [`Client::batch`]
/// increase, but need not be consecutive (a batch can span leases, and calls
/// running beside it can take IDs between its own). Two clients hold
/// different leases: their IDs never meet, and are not ordered between them.
///
/// **Gaps.** IDs not handed out are given back only by [`Client::close`],
/// and only as far as the server can (see there); a client dropped without
/// `close` leaves its leases' rest unused, as does an error in the middle of
/// a batch. IDs are never handed out twice.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    /// The sequences by name: read on every call without a lock.
    names: Names,
    max_batch: usize,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("transport", &self.inner.shared.transport)
            .field("sequences", &self.inner.names.len())
            .finish_non_exhaustive()
    }
}

/// What [`Client::close`] gave back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CloseSummary {
    /// Unused IDs the servers took back: later leases hand them out again.
    pub returned: u64,
    /// Unused IDs the servers refused to take back (something was reserved
    /// above them since, or the lease is not the last one its server issued
    /// of that name) or that could not be sent: they stay unused, a gap.
    pub kept: u64,
}

impl Client {
    /// A builder: [`ClientBuilder`].
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The next ID of sequence `name`.
    ///
    /// In process from the current lease while it lasts (one compare-and-swap,
    /// no lock, no await); when it is used up, from the lease fetched ahead,
    /// or after waiting for the fetch in flight.
    pub async fn next(&self, name: &str) -> Result<i64, Error> {
        if let Some(buffer) = self.inner.names.get(name) {
            if let Some(id) = buffer.take_one() {
                return Ok(id);
            }
        }
        self.buffer(name)?.next_slow().await
    }

    /// `n` IDs of sequence `name`, in increasing order (across as many leases
    /// as it takes). `n == 0` gives an empty vector (once the name is checked)
    /// and asks nothing of the servers; above [`ClientBuilder::max_batch`], [`Error::InvalidCount`].
    pub async fn batch(&self, name: &str, n: usize) -> Result<Vec<i64>, Error> {
        check_batch(n, self.inner.max_batch)?;
        if n == 0 {
            seq_name(name)?;
            return Ok(Vec::new());
        }
        self.buffer(name)?.batch(n).await
    }

    /// A handle on sequence `name`, whose calls skip the look-up of the name
    /// that [`Client::next`] makes. Fails only on an invalid name or a closed
    /// client: whether the sequence exists is known at its first ID.
    pub fn sequence(&self, name: &str) -> Result<Sequence, Error> {
        Ok(Sequence {
            buffer: self.buffer(name)?,
            max_batch: self.inner.max_batch,
        })
    }

    /// The buffer of `name`, made on first use.
    fn buffer(&self, name: &str) -> Result<Arc<Buffer>, Error> {
        let names = &self.inner.names;
        if let Some(b) = names.get(name) {
            return Ok(b.clone());
        }
        let name = seq_name(name)?;
        let shared = &self.inner.shared;
        names
            .get_or_insert(&mut names.adding(), name.as_str(), || {
                Buffer::new(name.clone(), shared.clone())
            })
            .ok_or(Error::Closed)
    }

    /// Closes the client: every sequence stops handing out IDs (calls then
    /// fail with [`Error::Closed`], in every clone and [`Sequence`]), fetches
    /// in flight are waited for, and the unused rest of each sequence's
    /// leases is given back to the server that issued it, with its key.
    ///
    /// The server takes a rest back only while its lease is the top of the
    /// sequence's row and the last lease it issued of that name: the lease
    /// fetched ahead (given back first, whole) usually goes back; the current
    /// one then goes back only if it came from another server and nothing
    /// was reserved between them. What is refused stays unused (counted in
    /// [`CloseSummary::kept`]). A second close does nothing.
    pub async fn close(&self) -> CloseSummary {
        let buffers = {
            let mut adding = self.inner.names.adding();
            if adding.closed {
                return CloseSummary::default();
            }
            adding.closed = true;
            self.inner.names.all()
        };
        let mut summary = CloseSummary::default();
        for buffer in buffers {
            let sealed = buffer.seal().await;
            for (lease, next) in sealed.rests {
                if next >= lease.end {
                    continue;
                }
                let unused = (lease.end - next) as u64;
                let transport = &self.inner.shared.transport;
                match transport.give_back(buffer.name(), &lease, next).await {
                    Ok(true) => summary.returned += unused,
                    Ok(false) | Err(_) => summary.kept += unused,
                }
            }
        }
        summary
    }
}

fn check_batch(n: usize, max: usize) -> Result<(), Error> {
    if n > max {
        return Err(Error::InvalidCount { requested: n, max });
    }
    Ok(())
}

/// One sequence of a [`Client`] ([`Client::sequence`]): the same IDs as
/// [`Client::next`] and [`Client::batch`] with that name (the same buffer),
/// without looking the name up on each call. Cheap to clone.
#[derive(Clone)]
pub struct Sequence {
    buffer: Arc<Buffer>,
    max_batch: usize,
}

impl fmt::Debug for Sequence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sequence")
            .field("name", &self.buffer.name())
            .finish_non_exhaustive()
    }
}

impl Sequence {
    /// The sequence's name.
    pub fn name(&self) -> &str {
        self.buffer.name()
    }

    /// The next ID: [`Client::next`].
    #[inline]
    pub async fn next(&self) -> Result<i64, Error> {
        match self.buffer.take_one() {
            Some(id) => Ok(id),
            None => self.buffer.next_slow().await,
        }
    }

    /// `n` IDs in increasing order: [`Client::batch`].
    pub async fn batch(&self, n: usize) -> Result<Vec<i64>, Error> {
        check_batch(n, self.max_batch)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        self.buffer.batch(n).await
    }
}
