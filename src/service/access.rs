//! Who may do what (docs/design.md, "Client tokens"): the admin token, the
//! client tokens and `--client-auth`, checked the same way for every door.
//!
//! The token set is held in memory ([`TokenSet`] behind an `ArcSwap`): every
//! request reads it without a lock and without the database, and the
//! refresh task ([`Access::spawn_refresh`]) replaces it whole every
//! [`REFRESH_EVERY`], so a token made or revoked on any instance is in
//! force here within one interval plus one read. A token nobody knows
//! costs a SHA-256 and a map lookup, never a query; it may ask for an early
//! refresh, at most one per [`NUDGE_EVERY`] whatever the number of guesses.
//!
//! A token is checked by the SHA-256 of what was presented, compared in
//! constant time with the stored hash. Once a presented token has matched,
//! the set remembers it (until the set is replaced) so that its next
//! requests cost a hash-map lookup and a constant-time comparison of the
//! text instead of a SHA-256 (docs/design.md, "The cost of a token").

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use chrono::{DateTime, Utc};
use subtle::ConstantTimeEq;

use super::ServiceError;
use crate::domain::token::{Rights, TokenHash, TokenRecord};
use crate::domain::NamePrefix;
use crate::domain::{Secret, SeqNameRef};
use crate::store::Tokens;

/// How often every instance reads the token set again.
pub const REFRESH_EVERY: Duration = Duration::from_secs(2);

/// The shortest time between two early refreshes asked for by unknown tokens.
pub const NUDGE_EVERY: Duration = Duration::from_secs(1);

/// The name snowflake draws are checked against: a token covering
/// `snowflake` (or `*`) may draw snowflake IDs.
pub const SNOWFLAKE_NAME: &str = "snowflake";

/// `--client-auth`: whether drawing and reading need a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ClientAuth {
    /// Anyone who reaches the port may draw and read (the default).
    #[default]
    Off,
    /// Drawing needs a token with `draw` covering the name, reading one
    /// with `read`; the admin token may do everything.
    On,
}

/// Who may call the admin routes.
#[derive(Debug, Clone)]
pub enum AdminAuth {
    /// Callers must present this token.
    Token(Secret),
    /// No token set and a loopback listener: admin calls are open to
    /// callers the door vouches are local.
    OpenOnLoopback,
    /// No token set and a non-loopback listener: admin calls are refused.
    Refused,
}

impl AdminAuth {
    /// The mode for a token (if any) and whether the listener is loopback.
    pub fn decide(token: Option<Secret>, loopback: bool) -> Self {
        match (token, loopback) {
            (Some(t), _) => AdminAuth::Token(t),
            (None, true) => AdminAuth::OpenOnLoopback,
            (None, false) => AdminAuth::Refused,
        }
    }

    /// A short description for the start-up log and the monitor.
    pub fn describe(&self) -> &'static str {
        match self {
            AdminAuth::Token(_) => "bearer token required",
            AdminAuth::OpenOnLoopback => "open (no token set, loopback listener only)",
            AdminAuth::Refused => "disabled (no token set, non-loopback listener)",
        }
    }
}

/// What a call asks to do.
#[derive(Debug, Clone, Copy)]
pub enum Want<'a> {
    /// Draw IDs of this name.
    Draw(SeqNameRef<'a>),
    /// Read this sequence.
    Read(SeqNameRef<'a>),
    /// List sequences (each token sees the names it covers).
    List,
    /// An admin call.
    Admin,
}

/// What a door knows of its caller. `Debug` never shows the token.
#[derive(Clone, Copy, Default)]
pub struct Presented<'a> {
    /// The token presented, if any (a Bearer header, a `token` parameter,
    /// RESP `AUTH`).
    pub token: Option<&'a [u8]>,
    /// Whether the door vouches the caller is on this machine (HTTP: a
    /// loopback `Host`), which opens admin calls when no admin token is set.
    pub local: bool,
}

impl Presented<'static> {
    /// What `seqd`'s own commands present: nothing but being on this
    /// machine, run by whoever holds the database's credentials. It opens
    /// the admin calls of a service built without an admin token (as the
    /// commands build theirs), like a loopback `Host` on the HTTP door.
    pub const LOCAL: Presented<'static> = Presented {
        token: None,
        local: true,
    };
}

impl std::fmt::Debug for Presented<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Presented")
            .field("token", &self.token.map(|_| "***"))
            .field("local", &self.local)
            .finish()
    }
}

/// Who a call was allowed as.
#[derive(Debug, Clone)]
pub enum Caller {
    /// `--client-auth off`: anyone.
    Open,
    /// The admin token (or an open admin on loopback, for admin calls).
    Admin,
    /// A client token.
    Token(Arc<Entry>),
}

impl Caller {
    /// Whether this caller sees sequence `name` in a list.
    pub fn sees(&self, name: &str) -> bool {
        match self {
            Caller::Open | Caller::Admin => true,
            Caller::Token(e) => SeqNameRef::parse(name).is_ok_and(|n| e.record.scope.covers(n)),
        }
    }

    /// The name ranges a list under `asked` may read for this caller
    /// ([`Scope::ranges`](crate::domain::token::Scope::ranges)): `None` when it
    /// sees every name.
    pub fn ranges(&self, asked: Option<&NamePrefix>) -> Option<Vec<NamePrefix>> {
        match self {
            Caller::Open | Caller::Admin => None,
            Caller::Token(e) => e.record.scope.ranges(asked),
        }
    }

    /// Counts `n` IDs drawn by this caller (`seqd_ids_drawn_total{token}`)
    /// and in the instance's total ([`Access::ids_drawn`]).
    pub fn drew(&self, access: &Access, n: u64) {
        access.inner.drawn_total.0.fetch_add(n, Ordering::Relaxed);
        match self {
            // Taken at first use: the metrics recorder is installed with
            // the first router, after the rules are made.
            Caller::Open => access
                .inner
                .drawn_open
                .get_or_init(|| drawn("none"))
                .increment(n),
            Caller::Admin => access
                .inner
                .drawn_admin
                .get_or_init(|| drawn("admin"))
                .increment(n),
            Caller::Token(e) => e.drawn.increment(n),
        }
    }
}

/// A token in force, as the set holds it.
#[derive(Debug)]
pub struct Entry {
    /// Its row, checked.
    pub record: TokenRecord,
    drawn: metrics::Counter,
}

/// A presented text that matched, and the entry it matched.
type Remembered = (Box<[u8]>, Arc<Entry>);

/// The tokens in force at the last read, and the presented texts found to
/// match one of them since.
#[derive(Debug, Default, Clone)]
pub struct TokenSet {
    /// By the first 8 bytes of the hash (the whole hash is compared).
    by_hash: HashMap<u64, Vec<Arc<Entry>>, Keys>,
    /// Presented texts that matched, by a keyed hash of the text.
    known: HashMap<u64, Remembered, Keys>,
    /// Which read this set came from; `known` is only added to the set
    /// of the same read.
    generation: u64,
}

impl TokenSet {
    /// How many tokens are in force.
    pub fn len(&self) -> usize {
        self.by_hash.values().map(Vec::len).sum()
    }

    /// Whether no token is in force.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }
}

/// The access rules of one instance. Cheap to clone (shared).
#[derive(Clone)]
pub struct Access {
    inner: Arc<Inner>,
}

struct Inner {
    client_auth: ClientAuth,
    admin: AdminAuth,
    set: ArcSwap<TokenSet>,
    /// The key of the hash of presented texts in `known`.
    keys: foldhash::fast::RandomState,
    /// The generation of the set in force, stored after the set: what a
    /// thread's [`hot`] entry is checked against.
    published: AtomicU64,
    /// Milliseconds since `epoch` of the last early refresh asked for.
    last_nudge: AtomicU64,
    epoch: Instant,
    nudge: tokio::sync::Notify,
    drawn_open: OnceLock<metrics::Counter>,
    drawn_admin: OnceLock<metrics::Counter>,
    /// IDs drawn by every caller together, on every door.
    drawn_total: OwnLine,
    reads: AtomicU64,
}

/// A counter on cache lines of its own: it is written on every draw, and the
/// fields beside it are read on every draw.
#[derive(Default)]
#[repr(align(128))]
struct OwnLine(AtomicU64);

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("client_auth", &self.inner.client_auth)
            .field("admin", &self.inner.admin.describe())
            .field("tokens", &self.inner.set.load().len())
            .finish()
    }
}

/// The drawn-IDs counter of a caller label.
fn drawn(label: &str) -> metrics::Counter {
    metrics::counter!("seqd_ids_drawn_total", "token" => label.to_owned())
}

impl Access {
    /// The rules of an instance: `client_auth` for drawing and reading,
    /// `admin` for admin calls; the token set empty until the first read.
    pub fn new(client_auth: ClientAuth, admin: AdminAuth) -> Self {
        Access {
            inner: Arc::new(Inner {
                client_auth,
                admin,
                set: ArcSwap::from_pointee(TokenSet::default()),
                keys: foldhash::fast::RandomState::default(),
                published: AtomicU64::new(0),
                last_nudge: AtomicU64::new(0),
                epoch: Instant::now(),
                nudge: tokio::sync::Notify::new(),
                drawn_open: OnceLock::new(),
                drawn_admin: OnceLock::new(),
                drawn_total: OwnLine::default(),
                reads: AtomicU64::new(0),
            }),
        }
    }

    /// `--client-auth`.
    pub fn client_auth(&self) -> ClientAuth {
        self.inner.client_auth
    }

    /// The admin rule.
    pub fn admin(&self) -> &AdminAuth {
        &self.inner.admin
    }

    /// IDs drawn since start by every caller together, on every door (the
    /// sum of `seqd_ids_drawn_total` over its labels): what the monitor's
    /// instance chart draws.
    pub fn ids_drawn(&self) -> u64 {
        self.inner.drawn_total.0.load(Ordering::Relaxed)
    }

    /// How many tokens are in force in this instance's set.
    pub fn tokens_in_force(&self) -> usize {
        self.inner.set.load().len()
    }

    /// How many times this instance read the token set.
    pub fn reads(&self) -> u64 {
        self.inner.reads.load(Ordering::Relaxed)
    }

    /// Whether `presented` may do `want`, and as whom.
    pub fn authorize(
        &self,
        presented: Presented<'_>,
        want: Want<'_>,
    ) -> Result<Caller, ServiceError> {
        let inner = &*self.inner;
        if let Want::Admin = want {
            return self.admin_call(presented);
        }
        if inner.client_auth == ClientAuth::Off {
            return Ok(Caller::Open);
        }
        let Some(token) = presented.token else {
            return Err(ServiceError::Unauthorized(
                "this call needs a client token: Authorization: Bearer <token> (--client-auth on)",
            ));
        };
        if self.is_admin_token(token) {
            return Ok(Caller::Admin);
        }
        let entry = self.in_force(token)?;
        let Rights { draw, read } = entry.record.rights;
        let allowed = match want {
            Want::Draw(name) => draw && entry.record.scope.covers(name),
            Want::Read(name) => read && entry.record.scope.covers(name),
            Want::List => read,
            Want::Admin => false,
        };
        if allowed {
            Ok(Caller::Token(entry))
        } else {
            Err(ServiceError::Forbidden)
        }
    }

    /// Whether `token` is one this instance would accept for some call (the
    /// admin token, or a client token neither expired nor revoked): what
    /// RESP `AUTH` checks before the connection keeps the token. Under
    /// `--client-auth off` every call is open, and any token passes.
    pub fn authenticate(&self, token: &[u8]) -> Result<(), ServiceError> {
        if self.inner.client_auth == ClientAuth::Off || self.is_admin_token(token) {
            return Ok(());
        }
        self.in_force(token).map(drop)
    }

    /// The client token `token`, if it is known and not expired (a revoked
    /// one is not in the set); an unknown text nudges the refresh.
    fn in_force(&self, token: &[u8]) -> Result<Arc<Entry>, ServiceError> {
        let refused = || ServiceError::Unauthorized("unknown, expired or revoked token");
        let Some(entry) = self.find(token) else {
            self.nudge();
            return Err(refused());
        };
        if entry.record.expires_at.is_some_and(|e| Utc::now() >= e) {
            return Err(refused());
        }
        Ok(entry)
    }

    fn admin_call(&self, presented: Presented<'_>) -> Result<Caller, ServiceError> {
        match &self.inner.admin {
            AdminAuth::OpenOnLoopback if presented.local => Ok(Caller::Admin),
            AdminAuth::OpenOnLoopback => Err(ServiceError::Unauthorized(
                "admin calls without a token need a loopback Host header (localhost, 127.0.0.0/8 or \
                 [::1]); this request names another host, as a web page reaching this port through \
                 DNS rebinding would. Call through a loopback address, or set SEQD_ADMIN_TOKEN",
            )),
            AdminAuth::Refused => Err(ServiceError::Unauthorized(
                "admin calls are disabled: the server listens on a non-loopback address and no \
                 SEQD_ADMIN_TOKEN is set",
            )),
            AdminAuth::Token(_) if presented.token.is_some_and(|t| self.is_admin_token(t)) => {
                Ok(Caller::Admin)
            }
            AdminAuth::Token(_) => Err(ServiceError::Unauthorized(
                "admin calls need Authorization: Bearer <SEQD_ADMIN_TOKEN>",
            )),
        }
    }

    fn is_admin_token(&self, token: &[u8]) -> bool {
        match &self.inner.admin {
            AdminAuth::Token(t) => same_text(token, t.expose().as_bytes()),
            _ => false,
        }
    }

    /// The entry `token` matches, if any: this thread's last match first,
    /// then the set ([`Access::find_in_set`]).
    #[inline]
    fn find(&self, token: &[u8]) -> Option<Arc<Entry>> {
        let published = self.inner.published.load(Ordering::Acquire);
        if let Some(entry) = hot::get(published, token) {
            return Some(entry);
        }
        self.find_in_set(token)
    }

    /// The entry `token` matches in the set in force. Kept out of line: the
    /// thread's last match answers nearly every request, and the frame this
    /// path needs (a SHA-256, a map probe, a new set) would otherwise be
    /// set up on each of them.
    #[cold]
    #[inline(never)]
    fn find_in_set(&self, token: &[u8]) -> Option<Arc<Entry>> {
        let set = self.inner.set.load();
        let key = self.inner.keys.hash_one(token);
        if let Some((text, entry)) = set.known.get(&key) {
            if same_text(text, token) {
                hot::put(set.generation, token, entry);
                return Some(entry.clone());
            }
        }
        let hash = TokenHash::of_bytes(token);
        let entry = set
            .by_hash
            .get(&hash_key(&hash))?
            .iter()
            .find(|e| bool::from(e.record.hash.0.ct_eq(&hash.0)))?
            .clone();
        self.remember(set.generation, key, token, &entry);
        hot::put(set.generation, token, &entry);
        Some(entry)
    }

    /// Adds a matched text to the set of read `generation` (a new set in
    /// its place); nothing when the set was replaced since.
    fn remember(&self, generation: u64, key: u64, token: &[u8], entry: &Arc<Entry>) {
        self.inner.set.rcu(|cur| {
            let mut next = TokenSet::clone(cur);
            if next.generation == generation {
                next.known.insert(key, (token.into(), entry.clone()));
            }
            next
        });
    }

    /// Asks for an early refresh, at most once per [`NUDGE_EVERY`].
    fn nudge(&self) {
        let every = NUDGE_EVERY.as_millis() as u64;
        // Offset by one interval so that the first nudge (last = 0) passes.
        let now = self.inner.epoch.elapsed().as_millis() as u64 + every;
        let last = self.inner.last_nudge.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= every
            && self
                .inner
                .last_nudge
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.inner.nudge.notify_one();
        }
    }

    /// Replaces the set with `rows` as read: the usable rows in force at
    /// `now` (an unusable row is logged with its label and skipped; it
    /// never hides the others). Matched texts of tokens whose row is
    /// unchanged are kept.
    pub fn replace(&self, records: Vec<TokenRecord>, now: DateTime<Utc>) {
        let old = self.inner.set.load_full();
        let generation = GENERATIONS.fetch_add(1, Ordering::Relaxed) + 1;
        let mut next = TokenSet {
            generation,
            ..TokenSet::default()
        };
        let mut by_label: HashMap<String, Arc<Entry>> = HashMap::new();
        for record in records.into_iter().filter(|r| r.in_force(now)) {
            let entry = Arc::new(Entry {
                drawn: drawn(record.label.as_str()),
                record,
            });
            by_label.insert(entry.record.label.as_str().to_owned(), entry.clone());
            next.by_hash
                .entry(hash_key(&entry.record.hash))
                .or_default()
                .push(entry);
        }
        for (key, (text, was)) in &old.known {
            if let Some(now) = by_label.get(was.record.label.as_str()) {
                if now.record == was.record {
                    next.known.insert(*key, (text.clone(), now.clone()));
                }
            }
        }
        self.inner.set.store(Arc::new(next));
        self.inner.published.store(generation, Ordering::Release);
    }

    /// Reads the token set from `store` once and puts it in force.
    pub async fn refresh(&self, store: &dyn Tokens) -> Result<(), crate::store::StoreError> {
        self.inner.reads.fetch_add(1, Ordering::Relaxed);
        let rows = store.token_rows().await?;
        let mut records = Vec::with_capacity(rows.len());
        for row in rows {
            match row.record() {
                Ok(r) => records.push(r),
                Err(problem) => crate::log_throttle::throttled!(
                    warn,
                    "a row of seqd_tokens cannot be used; it is skipped",
                    Some(row.label.as_str()),
                    label = %row.label,
                    %problem
                ),
            }
        }
        self.replace(records, Utc::now());
        Ok(())
    }

    /// Starts the refresh task: a read every [`REFRESH_EVERY`] and on an
    /// early request; nothing under `--client-auth off`. It ends once every
    /// handle on this `Access` is dropped.
    pub fn spawn_refresh(&self, store: Arc<dyn Tokens>) -> Option<tokio::task::JoinHandle<()>> {
        if self.inner.client_auth == ClientAuth::Off {
            return None;
        }
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        Some(tokio::spawn(async move {
            let mut failing = false;
            loop {
                let Some(inner) = weak.upgrade() else { return };
                let access = Access { inner };
                let outcome = tokio::time::timeout(REFRESH_EVERY, access.refresh(&*store)).await;
                match outcome {
                    Ok(Ok(())) if failing => {
                        failing = false;
                        tracing::info!("reading the client tokens works again");
                    }
                    Ok(Ok(())) => {}
                    Ok(Err(e)) if !failing => {
                        failing = true;
                        tracing::warn!(error = %e, "reading the client tokens failed; the last set read stays in force");
                    }
                    Err(_) if !failing => {
                        failing = true;
                        tracing::warn!(
                            "reading the client tokens timed out; the last set read stays in force"
                        );
                    }
                    _ => {}
                }
                // Held while waiting (at most one interval), then let go so
                // that the task ends once nobody else holds the rules.
                let _ = tokio::time::timeout(REFRESH_EVERY, access.inner.nudge.notified()).await;
            }
        }))
    }
}

/// The generations of every set read in this process, from 1: unique
/// across instances of [`Access`], so that a thread's [`hot`] entry made
/// for one instance's set never matches another's.
static GENERATIONS: AtomicU64 = AtomicU64::new(0);

/// The last token each thread matched (docs/design.md, "The cost of a
/// token"): a request whose token is that text, while the set of the
/// same read is in force, is answered from here without the set's
/// `ArcSwap` load, the keyed hash or the map probe. The text is compared
/// whole in constant time; a new set (a new generation) misses.
mod hot {
    use std::cell::RefCell;
    use std::sync::Arc;

    use super::{same_text, Entry};

    struct Hot {
        generation: u64,
        text: Vec<u8>,
        entry: Arc<Entry>,
    }

    thread_local! {
        static HOT: RefCell<Option<Hot>> = const { RefCell::new(None) };
    }

    /// The entry of `token` if it is this thread's last match and still of
    /// the set of `generation`.
    pub(super) fn get(generation: u64, token: &[u8]) -> Option<Arc<Entry>> {
        HOT.try_with(|hot| {
            let hot = hot.try_borrow().ok()?;
            let hot = hot.as_ref()?;
            (hot.generation == generation && same_text(&hot.text, token)).then(|| hot.entry.clone())
        })
        .ok()
        .flatten()
    }

    /// Makes `token`, matched to `entry` in the set of `generation`, this
    /// thread's last match.
    pub(super) fn put(generation: u64, token: &[u8], entry: &Arc<Entry>) {
        let _ = HOT.try_with(|hot| {
            let Ok(mut hot) = hot.try_borrow_mut() else {
                return;
            };
            match &mut *hot {
                Some(h) => {
                    h.generation = generation;
                    h.text.clear();
                    h.text.extend_from_slice(token);
                    h.entry = entry.clone();
                }
                None => {
                    *hot = Some(Hot {
                        generation,
                        text: token.to_vec(),
                        entry: entry.clone(),
                    })
                }
            }
        });
    }
}

/// The hasher of the set's maps, whose keys are hashes already (of the
/// token, or a keyed one of the presented text): a few instructions per
/// lookup; what a key finds is then compared whole.
type Keys = foldhash::fast::FixedState;

/// Whether `a` and `b` are the same bytes, in time that depends on their
/// length only (a token's length is public: every token has 69 bytes):
/// every byte is looked at, sixteen at a time, with no early exit.
/// Inlined: a call costs a tenth of the comparison.
#[inline(always)]
fn same_text(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let n = a.len();
    // The differences, byte by byte, folded into 16 bytes: a loop the
    // compiler makes one vector XOR and OR a lane.
    let mut diff = [0u8; 16];
    let mut fold = |x: &[u8; 16], y: &[u8; 16]| {
        for k in 0..16 {
            diff[k] |= x[k] ^ y[k];
        }
    };
    let lane = |s: &[u8], at: usize| -> [u8; 16] { s[at..at + 16].try_into().expect("16 bytes") };
    if (64..=80).contains(&n) {
        // A token's length (`seqd_` and 64 hex digits): five lanes, the
        // last overlapping the fourth, unrolled.
        for at in [0, 16, 32, 48, n - 16] {
            fold(&lane(a, at), &lane(b, at));
        }
    } else if n >= 16 {
        let (wa, _) = a.as_chunks::<16>();
        let (wb, _) = b.as_chunks::<16>();
        for (x, y) in wa.iter().zip(wb) {
            fold(x, y);
        }
        // The last 16 bytes, overlapping the lanes above: the bytes past
        // the last whole lane are looked at too, with no loop over them.
        fold(&lane(a, n - 16), &lane(b, n - 16));
    } else {
        let mut x = [0u8; 16];
        let mut y = [0u8; 16];
        x[..n].copy_from_slice(a);
        y[..n].copy_from_slice(b);
        fold(&x, &y);
    }
    let diff = u128::from_ne_bytes(diff);
    bool::from((diff as u64 | (diff >> 64) as u64).ct_eq(&0))
}

fn hash_key(hash: &TokenHash) -> u64 {
    u64::from_le_bytes(hash.0[..8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::token::{new_token, Scope, TokenLabel};

    fn record(
        label: &str,
        token: &str,
        rights: Rights,
        expires_at: Option<DateTime<Utc>>,
    ) -> TokenRecord {
        TokenRecord {
            label: TokenLabel::parse(label).unwrap(),
            hash: TokenHash::of(token),
            scope: Scope::parse(&["shop-"]).unwrap(),
            rights,
            created_at: Utc::now(),
            expires_at,
            revoked_at: None,
        }
    }

    const DRAW: Rights = Rights {
        draw: true,
        read: false,
    };

    const READ: Rights = Rights {
        draw: false,
        read: true,
    };

    fn draw<'a>(token: &'a str, name: &'a str) -> (Presented<'a>, Want<'a>) {
        let p = Presented {
            token: Some(token.as_bytes()),
            local: false,
        };
        assert!(!format!("{p:?}").contains(token), "Debug shows the token");
        (p, Want::Draw(SeqNameRef::parse(name).unwrap()))
    }

    fn outcome(access: &Access, token: &str, name: &str) -> Result<(), String> {
        let (p, w) = draw(token, name);
        access
            .authorize(p, w)
            .map(drop)
            .map_err(|e| format!("{e:?}"))
    }

    #[test]
    fn a_threads_last_token_is_not_taken_for_another_instances_or_a_later_set() {
        let a = Access::new(ClientAuth::On, AdminAuth::Refused);
        let b = Access::new(ClientAuth::On, AdminAuth::Refused);
        let t = new_token();
        a.replace(vec![record("a", t.expose(), DRAW, None)], Utc::now());
        b.replace(
            vec![record("b", new_token().expose(), DRAW, None)],
            Utc::now(),
        );
        // Matched on `a`: this thread's last token, served from it next.
        assert_eq!(outcome(&a, t.expose(), "shop-1"), Ok(()));
        assert_eq!(outcome(&a, t.expose(), "shop-1"), Ok(()));
        // `b` on the same thread does not hold it.
        assert!(outcome(&b, t.expose(), "shop-1").is_err());
        assert_eq!(outcome(&a, t.expose(), "shop-1"), Ok(()));
        // Narrowed to read only: the new set's row decides, not the thread's entry.
        a.replace(vec![record("a", t.expose(), READ, None)], Utc::now());
        assert_eq!(
            outcome(&a, t.expose(), "shop-1"),
            Err("Forbidden".to_owned())
        );
        // Revoked: gone from the set, refused although it was this thread's last.
        a.replace(vec![], Utc::now());
        assert!(outcome(&a, t.expose(), "shop-1").is_err());
    }

    #[test]
    fn same_text_compares_every_byte() {
        let a = b"seqd_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        assert!(same_text(a, a));
        for i in 0..a.len() {
            let mut b = *a;
            b[i] ^= 1;
            assert!(!same_text(a, &b), "a difference at byte {i}");
        }
        assert!(!same_text(a, &a[..68]));
        assert!(same_text(b"", b""));
        // Every length, below a lane, of whole lanes and between them.
        for n in 0..=a.len() {
            let x = &a[..n];
            assert!(same_text(x, x));
            for i in 0..n {
                let mut y = x.to_vec();
                y[i] ^= 0x80;
                assert!(!same_text(x, &y), "length {n}: a difference at byte {i}");
            }
        }
    }

    #[test]
    fn a_remembered_token_is_refused_once_the_set_no_longer_holds_it() {
        let access = Access::new(ClientAuth::On, AdminAuth::Refused);
        let t = new_token();
        access.replace(vec![record("a", t.expose(), DRAW, None)], Utc::now());
        assert_eq!(outcome(&access, t.expose(), "shop-1"), Ok(()));
        // The second check is served from the remembered text.
        assert_eq!(access.inner.set.load().known.len(), 1);
        assert_eq!(outcome(&access, t.expose(), "shop-1"), Ok(()));
        // A text differing in its last character is not taken for it.
        let mut near = t.expose().to_owned();
        near.pop();
        near.push(if t.expose().ends_with('0') { '1' } else { '0' });
        assert!(outcome(&access, &near, "shop-1")
            .unwrap_err()
            .contains("Unauthorized"));
        // Revoked (the set read again without it): refused, cache or not.
        access.replace(Vec::new(), Utc::now());
        assert!(outcome(&access, t.expose(), "shop-1")
            .unwrap_err()
            .contains("Unauthorized"));
        assert!(access.inner.set.load().known.is_empty());
    }

    #[test]
    fn a_changed_row_is_not_served_from_the_remembered_entry() {
        let access = Access::new(ClientAuth::On, AdminAuth::Refused);
        let t = new_token();
        access.replace(vec![record("a", t.expose(), DRAW, None)], Utc::now());
        assert_eq!(outcome(&access, t.expose(), "shop-1"), Ok(()));
        // The same token with its right narrowed to `read`.
        access.replace(vec![record("a", t.expose(), READ, None)], Utc::now());
        assert_eq!(
            outcome(&access, t.expose(), "shop-1"),
            Err("Forbidden".into())
        );
    }

    #[test]
    fn expiry_rights_scope_and_the_admin_token() {
        let access = Access::new(ClientAuth::On, AdminAuth::Token(Secret::new("root")));
        let (live, old) = (new_token(), new_token());
        let past = Utc::now() - chrono::Duration::seconds(1);
        let soon = Utc::now() + chrono::Duration::milliseconds(30);
        access.replace(
            vec![
                record("live", live.expose(), DRAW, Some(soon)),
                record("old", old.expose(), DRAW, Some(past)),
            ],
            Utc::now(),
        );
        assert_eq!(outcome(&access, live.expose(), "shop-1"), Ok(()));
        assert_eq!(
            outcome(&access, live.expose(), "other"),
            Err("Forbidden".into())
        );
        assert!(outcome(&access, old.expose(), "shop-1")
            .unwrap_err()
            .contains("Unauthorized"));
        std::thread::sleep(std::time::Duration::from_millis(40));
        // Expired between two reads of the set: refused at the request.
        assert!(outcome(&access, live.expose(), "shop-1")
            .unwrap_err()
            .contains("Unauthorized"));
        assert_eq!(outcome(&access, "root", "anything"), Ok(()));
        let none = Presented::default();
        assert!(access.authorize(none, Want::List).is_err());
        let off = Access::new(ClientAuth::Off, AdminAuth::Refused);
        assert!(matches!(off.authorize(none, Want::List), Ok(Caller::Open)));
        assert!(off.authorize(none, Want::Admin).is_err());
    }
}
