//! The commands of the RESP door and their answers: each one a call of the
//! service, its errors mapped to RESP error codes in one table
//! (`error_reply`); docs/design.md, "The RESP door".

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use metrics::Counter;

use super::multi::{self, After, Transaction};
use super::reply::Out;
use super::request::{
    request, simple, Answer, ClientCall, Cmd, Fail, Hello, Outcome, Request, CMD_LABELS,
    OUTCOME_LABELS,
};
use crate::domain::{Count, SeqNameRef};
use crate::service::{Many, One, Presented, Service, ServiceError};
use crate::snowflake::SnowflakeError;

pub use super::request::MAX_INCRBY;

/// `seqd_resp_commands_total{command, outcome}`.
pub const COMMANDS_METRIC: &str = "seqd_resp_commands_total";
/// `seqd_resp_connections`: open RESP connections.
pub const CONNECTIONS_METRIC: &str = "seqd_resp_connections";
/// `seqd_resp_closed_total{reason}`: connections seqd closed.
pub const CLOSED_METRIC: &str = "seqd_resp_closed_total";

/// What every connection of the listener shares.
pub struct Door {
    /// The service every door calls.
    pub service: Service,
    /// Open connections (for `INFO` and the gauge).
    pub connections: AtomicUsize,
    next_client: AtomicU64,
    counters: Counters,
}

impl Door {
    /// The door over `service`.
    pub fn new(service: Service) -> Self {
        Door {
            service,
            connections: AtomicUsize::new(0),
            next_client: AtomicU64::new(1),
            counters: Counters::default(),
        }
    }

    /// A new connection's state, with its client id.
    pub fn session(&self) -> Session {
        Session {
            id: self.next_client.fetch_add(1, Ordering::Relaxed),
            token: None,
            name: None,
            transaction: None,
        }
    }
}

/// One connection's state: its id, the token of its last good `AUTH`, its
/// name, its transaction while one is open. `Debug` never shows the token.
pub struct Session {
    id: u64,
    token: Option<Vec<u8>>,
    name: Option<Vec<u8>>,
    pub(super) transaction: Option<Transaction>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("transaction", &self.transaction.is_some())
            .finish()
    }
}

/// The counters of `seqd_resp_commands_total`, each registered at its
/// first use: a command costs one atomic add, no label lookup.
#[derive(Default)]
struct Counters {
    cells: [[OnceLock<Counter>; OUTCOME_LABELS.len()]; CMD_LABELS.len()],
}

impl Counters {
    fn count(&self, cmd: Cmd, outcome: Outcome) {
        let (c, o) = (cmd as usize, outcome as usize);
        self.cells[c][o]
            .get_or_init(|| {
                metrics::counter!(COMMANDS_METRIC, "command" => CMD_LABELS[c], "outcome" => OUTCOME_LABELS[o])
            })
            .increment(1);
    }
}

/// The RESP door's one table of the service's errors: each to its code and
/// a message in seqd's own words (the service logged any internals).
fn error_reply(e: ServiceError) -> Fail {
    use ServiceError as E;
    match e {
        E::InvalidName(e) => Fail::err(format!("invalid sequence name: {e}")),
        E::InvalidRequest(m) => Fail::err(m),
        E::NotFound(n) => Fail(
            Outcome::NoSeq,
            format!(
                "sequence '{n}' not found; create it with `seqd sequences create {n}` or POST \
                 /v1/sequences"
            ),
        ),
        e @ (E::Exhausted(_) | E::SerialExhausted(..)) => Fail(Outcome::Exhausted, e.to_string()),
        E::NotLeasable(n, "serial") => Fail(
            Outcome::WrongType,
            format!(
                "sequence '{n}' is serial: its IDs are serial numbers, not integers; draw them \
                 with SEQD.NEXT or SEQD.BATCH"
            ),
        ),
        E::NotLeasable(..) | E::Unavailable => Fail(
            Outcome::Unavailable,
            "no IDs in memory and the database is unreachable or too slow; retry in 1 s".into(),
        ),
        E::Unreachable => Fail(
            Outcome::Unavailable,
            "the database is unreachable or too slow; retry in 1 s".into(),
        ),
        E::Unauthorized(_) => Fail(
            Outcome::NoAuth,
            "this command needs a client token: AUTH <token> (--client-auth on)".into(),
        ),
        E::Forbidden => Fail(
            Outcome::NoPerm,
            "this token may not draw from this sequence".into(),
        ),
        e @ E::Misconfigured(..) => Fail::err(e.to_string()),
        E::Snowflake(e @ SnowflakeError::Exhausted) => Fail(Outcome::Exhausted, e.to_string()),
        E::Snowflake(e) => Fail(Outcome::Unavailable, e.to_string()),
        e @ E::SnowflakeDisabled => Fail::err(e.to_string()),
        E::Exists(_)
        | E::BumpRefused(_)
        | E::TokenExists(_)
        | E::TokenNotFound(_)
        | E::Internal => Fail::err("internal error"),
    }
}

/// Runs the command `args` (offsets into `buf`; at least one) of `session`
/// and writes its answer to `out`; in a transaction, most commands are
/// checked and queued instead (`multi::queue`).
pub async fn execute(
    door: &Door,
    session: &mut Session,
    buf: &[u8],
    args: &[Range<usize>],
    out: &mut Out,
) -> After {
    let name = args.first().map_or(&b""[..], |r| &buf[r.clone()]);
    let cmd = Cmd::of(name);
    let read = request(cmd, name, buf, args);
    // QUIT and RESET act at once, in a transaction too (RESET ends it).
    let acts_now = matches!(read, Ok(Request::Quit | Request::Reset));
    let (answer, after) = match session.transaction.take() {
        Some(tx) if !acts_now => {
            let (answer, after, open) = multi::queue(tx, cmd, read, buf, args, out);
            session.transaction = open;
            (answer, after)
        }
        tx => {
            session.transaction = tx;
            match read {
                Ok(request) => run(door, session, request, out).await,
                Err(fail) => (Err(fail), After::Continue),
            }
        }
    };
    let outcome = match answer {
        Ok(o) => o,
        Err(Fail(o, message)) => {
            out.error(o.code(), &message);
            o
        }
    };
    door.counters.count(cmd, outcome);
    after
}

/// Runs `request` now.
async fn run(
    door: &Door,
    session: &mut Session,
    request: Request<'_>,
    out: &mut Out,
) -> (Answer, After) {
    let answer = match request {
        Request::Incr(name) => incr(door, session, name, out).await,
        Request::IncrBy(name, n) => incrby(door, session, name, n, out).await,
        Request::Next(name) => next(door, session, name, out).await,
        Request::Batch(name, n) => batch(door, session, name, n, out).await,
        Request::Snowflake(n) => snowflake(door, session, n, out).await,
        Request::Ping => simple(out, "PONG"),
        Request::Echo(text) => {
            out.bulk(text);
            Ok(Outcome::Ok)
        }
        Request::Hello(h) => hello(door, session, h, out),
        Request::Auth(token) => auth(door, session, token, out),
        Request::Select => simple(out, "OK"),
        Request::Client(call) => client(session, call, out),
        Request::Command(sub) => command(sub, out),
        Request::Info => {
            info(door, out);
            Ok(Outcome::Ok)
        }
        Request::Quit => return (simple(out, "OK"), After::Close),
        Request::Reset => {
            session.token = None;
            session.name = None;
            session.transaction = None;
            out.proto = 2;
            simple(out, "RESET")
        }
        Request::Multi => {
            session.transaction = Some(Transaction::default());
            simple(out, "OK")
        }
        Request::Exec => Err(Fail::err("EXEC without MULTI")),
        Request::Discard => Err(Fail::err("DISCARD without MULTI")),
        Request::Watch => Err(Fail::err(
            "WATCH is not supported: seqd's sequences change only by drawing, and MULTI/EXEC \
             runs its commands in order without it",
        )),
    };
    (answer, After::Continue)
}

fn presented(session: &Session) -> Presented<'_> {
    Presented {
        token: session.token.as_deref(),
        local: false,
    }
}

async fn incr(door: &Door, s: &Session, name: SeqNameRef<'_>, out: &mut Out) -> Answer {
    let id = door
        .service
        .next_id(presented(s), name)
        .await
        .map_err(error_reply)?;
    out.int(id);
    Ok(Outcome::Ok)
}

async fn incrby(door: &Door, s: &Session, name: SeqNameRef<'_>, n: Count, out: &mut Out) -> Answer {
    let run = door
        .service
        .consecutive(presented(s), name, n)
        .await
        .map_err(error_reply)?;
    out.int(run.last);
    Ok(Outcome::Ok)
}

async fn next(door: &Door, s: &Session, name: SeqNameRef<'_>, out: &mut Out) -> Answer {
    match door
        .service
        .next(presented(s), name)
        .await
        .map_err(error_reply)?
    {
        One::Plain(id) => out.int(id),
        One::Serial { serial, .. } => out.bulk(serial.as_bytes()),
    }
    Ok(Outcome::Ok)
}

async fn batch(door: &Door, s: &Session, name: SeqNameRef<'_>, n: Count, out: &mut Out) -> Answer {
    match door
        .service
        .batch(presented(s), name, n)
        .await
        .map_err(error_reply)?
    {
        Many::Plain(ids) => {
            out.array(ids.len() as usize);
            ids.ids().for_each(|id| out.int(id));
        }
        Many::Serial { serials, .. } => {
            out.array(serials.len());
            serials.iter().for_each(|s| out.bulk(s.as_bytes()));
        }
    }
    Ok(Outcome::Ok)
}

/// `SEQD.SNOWFLAKE`: an integer; with a count, an array of them.
async fn snowflake(door: &Door, s: &Session, n: Option<Count>, out: &mut Out) -> Answer {
    let service = &door.service;
    match n {
        None => out.int(
            service
                .snowflake_next(presented(s))
                .await
                .map_err(error_reply)?,
        ),
        Some(n) => {
            let ids = service
                .snowflake_batch(presented(s), n)
                .await
                .map_err(error_reply)?;
            out.array(ids.len());
            ids.iter().for_each(|&id| out.int(id));
        }
    }
    Ok(Outcome::Ok)
}

fn auth(door: &Door, s: &mut Session, token: &[u8], out: &mut Out) -> Answer {
    match door.service.access().authenticate(token) {
        Ok(()) => {
            s.token = Some(token.to_vec());
            out.simple("OK");
            Ok(Outcome::Ok)
        }
        Err(_) => Err(Fail(
            Outcome::WrongPass,
            "invalid token: unknown, expired or revoked".into(),
        )),
    }
}

fn hello(door: &Door, s: &mut Session, h: Hello<'_>, out: &mut Out) -> Answer {
    if let Some(t) = h.token {
        if door.service.access().authenticate(t).is_err() {
            return Err(Fail(
                Outcome::WrongPass,
                "invalid token: unknown, expired or revoked".into(),
            ));
        }
        s.token = Some(t.to_vec());
    }
    if let Some(n) = h.name {
        s.name = Some(n.to_vec());
    }
    let proto = h.proto.unwrap_or(out.proto);
    out.proto = proto;
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"seqd");
    out.bulk(b"version");
    out.bulk(REDIS_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(i64::from(proto));
    out.bulk(b"id");
    out.int(s.id as i64);
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(b"master");
    out.bulk(b"modules");
    out.array(0);
    Ok(Outcome::Ok)
}

/// The Redis version whose protocol and commands this door follows, as
/// `HELLO` and `INFO` report it (clients read it to pick features).
const REDIS_VERSION: &str = "7.0.0";

fn client(s: &mut Session, call: ClientCall<'_>, out: &mut Out) -> Answer {
    match call {
        ClientCall::SetName(name) => {
            s.name = Some(name.to_vec());
            out.simple("OK");
        }
        ClientCall::GetName => match &s.name {
            Some(n) => out.bulk(n),
            None => out.null(),
        },
        ClientCall::SetInfo => out.simple("OK"),
        ClientCall::Id => out.int(s.id as i64),
    }
    Ok(Outcome::Ok)
}

/// `COMMAND`, `COMMAND DOCS`, `COMMAND COUNT`: enough for `redis-cli`,
/// which asks at start and does without the answer.
fn command(sub: Option<&[u8]>, out: &mut Out) -> Answer {
    match sub {
        Some(s) if s.eq_ignore_ascii_case(b"count") => out.int(0),
        Some(s) if s.eq_ignore_ascii_case(b"docs") => out.map(0),
        _ => out.array(0),
    }
    Ok(Outcome::Ok)
}

fn info(door: &Door, out: &mut Out) {
    let text = format!(
        "# Server\r\nredis_version:{REDIS_VERSION}\r\nseqd_version:{}\r\nredis_mode:standalone\r\n\
         # Clients\r\nconnected_clients:{}\r\n# Keyspace\r\n",
        env!("CARGO_PKG_VERSION"),
        door.connections.load(Ordering::Relaxed)
    );
    out.bulk(text.as_bytes());
}
