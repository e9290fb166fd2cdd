//! The commands of the RESP door and their answers: each one a call of the
//! service, its errors mapped to RESP error codes in one table
//! (`error_reply`); docs/design.md, "The RESP door".

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use metrics::Counter;

use super::frame::integer;
use super::multi::{self, Queued, Transaction};
use super::reply::Out;
use crate::domain::{Count, SeqNameRef, MAX_BATCH};
use crate::service::{Many, One, Presented, Service, ServiceError};

/// The largest `INCRBY` count (and `SEQD.BATCH` size).
pub const MAX_INCRBY: u32 = MAX_BATCH;

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

/// What the connection does after a command.
#[derive(Debug)]
pub enum After {
    /// Read the next command.
    Continue,
    /// Write what is buffered and close (`QUIT`).
    Close,
    /// Run these commands in order with [`execute`], their replies the
    /// elements of the array whose header `EXEC` wrote.
    Exec(Queued),
}

/// The commands seqd knows, as metric labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cmd {
    Incr,
    IncrBy,
    Next,
    Batch,
    Ping,
    Echo,
    Hello,
    Auth,
    Select,
    Client,
    Command,
    Info,
    Quit,
    Reset,
    Multi,
    Exec,
    Discard,
    Watch,
    Other,
}

const CMD_LABELS: [&str; 19] = [
    "incr",
    "incrby",
    "seqd.next",
    "seqd.batch",
    "ping",
    "echo",
    "hello",
    "auth",
    "select",
    "client",
    "command",
    "info",
    "quit",
    "reset",
    "multi",
    "exec",
    "discard",
    "watch",
    "other",
];

impl Cmd {
    fn of(name: &[u8]) -> Cmd {
        const TABLE: [(&[u8], Cmd); 18] = [
            (b"incr", Cmd::Incr),
            (b"incrby", Cmd::IncrBy),
            (b"seqd.next", Cmd::Next),
            (b"seqd.batch", Cmd::Batch),
            (b"ping", Cmd::Ping),
            (b"echo", Cmd::Echo),
            (b"hello", Cmd::Hello),
            (b"auth", Cmd::Auth),
            (b"select", Cmd::Select),
            (b"client", Cmd::Client),
            (b"command", Cmd::Command),
            (b"info", Cmd::Info),
            (b"quit", Cmd::Quit),
            (b"reset", Cmd::Reset),
            (b"multi", Cmd::Multi),
            (b"exec", Cmd::Exec),
            (b"discard", Cmd::Discard),
            (b"watch", Cmd::Watch),
        ];
        TABLE
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map_or(Cmd::Other, |&(_, c)| c)
    }
}

/// How a command ended, as metric labels: `ok`, `queued` (in a
/// transaction; counted again when `EXEC` runs it) or the error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Ok,
    Queued,
    Err,
    NoSeq,
    NoAuth,
    NoPerm,
    Unavailable,
    Exhausted,
    WrongType,
    WrongPass,
    NoProto,
    ExecAbort,
}

const OUTCOME_LABELS: [&str; 12] = [
    "ok",
    "queued",
    "err",
    "noseq",
    "noauth",
    "noperm",
    "unavailable",
    "exhausted",
    "wrongtype",
    "wrongpass",
    "noproto",
    "execabort",
];

impl Outcome {
    fn code(self) -> &'static str {
        match self {
            Outcome::Ok => "OK",
            Outcome::Queued => "QUEUED",
            Outcome::Err => "ERR",
            Outcome::NoSeq => "NOSEQ",
            Outcome::NoAuth => "NOAUTH",
            Outcome::NoPerm => "NOPERM",
            Outcome::Unavailable => "UNAVAILABLE",
            Outcome::Exhausted => "EXHAUSTED",
            Outcome::WrongType => "WRONGTYPE",
            Outcome::WrongPass => "WRONGPASS",
            Outcome::NoProto => "NOPROTO",
            Outcome::ExecAbort => "EXECABORT",
        }
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

/// A command's failure: the code and the message the client reads.
pub(super) struct Fail(pub(super) Outcome, pub(super) String);

impl Fail {
    pub(super) fn err(message: impl Into<String>) -> Self {
        Fail(Outcome::Err, message.into())
    }
}

pub(super) type Answer = Result<Outcome, Fail>;

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
        E::Exists(_)
        | E::BumpRefused(_)
        | E::TokenExists(_)
        | E::TokenNotFound(_)
        | E::Internal => Fail::err("internal error"),
    }
}

/// A command read and checked whole, without the service: its arity, its
/// sequence name and count, its options. What [`execute`] runs, and what
/// a transaction checks before it queues a command.
pub(super) enum Request<'a> {
    Incr(SeqNameRef<'a>),
    IncrBy(SeqNameRef<'a>, Count),
    Next(SeqNameRef<'a>),
    Batch(SeqNameRef<'a>, Count),
    Ping,
    Echo(&'a [u8]),
    Hello(Hello<'a>),
    Auth(&'a [u8]),
    Select,
    Client(ClientCall<'a>),
    Command(Option<&'a [u8]>),
    Info,
    Quit,
    Reset,
    Multi,
    Exec,
    Discard,
    Watch,
}

/// Reads the command `args` (offsets into `buf`; at least one), named
/// `name` (its first argument), whose kind is `cmd`.
fn request<'a>(
    cmd: Cmd,
    name: &[u8],
    buf: &'a [u8],
    args: &[Range<usize>],
) -> Result<Request<'a>, Fail> {
    let arg = |i: usize| -> &'a [u8] { &buf[args[i].clone()] };
    let argc = args.len();
    Ok(match cmd {
        Cmd::Incr if argc == 2 => Request::Incr(seq_name(arg(1))?),
        Cmd::IncrBy if argc == 3 => Request::IncrBy(seq_name(arg(1))?, count(arg(2), "INCRBY")?),
        Cmd::Next if argc == 2 => Request::Next(seq_name(arg(1))?),
        Cmd::Batch if argc == 3 => Request::Batch(seq_name(arg(1))?, count(arg(2), "SEQD.BATCH")?),
        Cmd::Ping if argc == 1 => Request::Ping,
        Cmd::Ping | Cmd::Echo if argc == 2 => Request::Echo(arg(1)),
        Cmd::Hello => Request::Hello(Hello::read(&args[1..], buf)?),
        Cmd::Auth if argc == 2 || argc == 3 => Request::Auth(arg(argc - 1)),
        Cmd::Select if argc == 2 => match arg(1) {
            b"0" => Request::Select,
            _ => {
                return Err(Fail::err(
                    "seqd has one database: SELECT 0 only (sequences are named, not numbered)",
                ))
            }
        },
        Cmd::Client if argc >= 2 => Request::Client(ClientCall::read(&args[1..], buf)?),
        Cmd::Command => Request::Command(args.get(1).map(|r| &buf[r.clone()])),
        Cmd::Info => Request::Info,
        Cmd::Quit => Request::Quit,
        Cmd::Reset if argc == 1 => Request::Reset,
        Cmd::Multi if argc == 1 => Request::Multi,
        Cmd::Exec if argc == 1 => Request::Exec,
        Cmd::Discard if argc == 1 => Request::Discard,
        Cmd::Watch if argc >= 2 => Request::Watch,
        Cmd::Other => {
            return Err(Fail::err(format!(
                "unknown command '{}': seqd serves IDs, not data (INCR, INCRBY, SEQD.NEXT, \
                 SEQD.BATCH)",
                shown(name)
            )))
        }
        _ => {
            return Err(Fail::err(format!(
                "wrong number of arguments for '{}' command",
                CMD_LABELS[cmd as usize]
            )))
        }
    })
}

/// Runs the command `args` (offsets into `buf`; at least one) of `session`
/// and writes its answer to `out`; in a transaction, most commands are
/// checked and queued instead ([`multi::queue`]).
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

/// `+text`, an `ok` answer.
pub(super) fn simple(out: &mut Out, text: &str) -> Answer {
    out.simple(text);
    Ok(Outcome::Ok)
}

/// A client's command name as shown in an error: at most 32 printable
/// characters.
fn shown(name: &[u8]) -> String {
    name.iter()
        .take(32)
        .map(|&b| if b.is_ascii_graphic() { b as char } else { '?' })
        .collect()
}

fn presented(session: &Session) -> Presented<'_> {
    Presented {
        token: session.token.as_deref(),
        local: false,
    }
}

fn seq_name(arg: &[u8]) -> Result<SeqNameRef<'_>, Fail> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| SeqNameRef::parse(s).ok())
        .ok_or_else(|| {
            Fail::err(format!(
                "invalid sequence name '{}': 1 to 128 of A-Z a-z 0-9 . _ : -, starting with a letter or digit",
                shown(arg)
            ))
        })
}

/// A count argument: a whole number from 1 to [`MAX_INCRBY`], written as
/// Redis reads integers ([`integer`]: no `+`, no leading zero, no blank).
fn count(arg: &[u8], what: &str) -> Result<Count, Fail> {
    let n = integer(arg).ok_or_else(|| Fail::err("value is not an integer or out of range"))?;
    u32::try_from(n)
        .ok()
        .filter(|n| (1..=MAX_INCRBY).contains(n))
        .and_then(|n| Count::new(n).ok())
        .ok_or_else(|| {
            Fail::err(format!(
                "{what} takes a count from 1 to {MAX_INCRBY}, not {n}"
            ))
        })
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

/// `HELLO [protover [AUTH user token] [SETNAME name]]`, read.
pub(super) struct Hello<'a> {
    proto: Option<u8>,
    token: Option<&'a [u8]>,
    name: Option<&'a [u8]>,
}

impl<'a> Hello<'a> {
    /// Reads `HELLO`'s arguments (its name left out).
    fn read(args: &[Range<usize>], buf: &'a [u8]) -> Result<Self, Fail> {
        let arg = |i: usize| -> &'a [u8] { &buf[args[i].clone()] };
        let mut hello = Hello {
            proto: None,
            token: None,
            name: None,
        };
        let mut i = 0;
        if !args.is_empty() {
            hello.proto = Some(match arg(0) {
                b"2" => 2,
                b"3" => 3,
                _ => {
                    return Err(Fail(
                        Outcome::NoProto,
                        "unsupported protocol version (seqd speaks 2 and 3)".into(),
                    ))
                }
            });
            i = 1;
        }
        while i < args.len() {
            let opt = arg(i);
            if opt.eq_ignore_ascii_case(b"auth") && i + 2 < args.len() {
                hello.token = Some(arg(i + 2));
                i += 3;
            } else if opt.eq_ignore_ascii_case(b"setname") && i + 1 < args.len() {
                hello.name = Some(arg(i + 1));
                i += 2;
            } else {
                return Err(Fail::err(format!(
                    "syntax error in HELLO option '{}'",
                    shown(opt)
                )));
            }
        }
        Ok(hello)
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

/// `CLIENT SETNAME name`, `GETNAME`, `SETINFO attr value`, `ID`, read.
pub(super) enum ClientCall<'a> {
    SetName(&'a [u8]),
    GetName,
    SetInfo,
    Id,
}

impl<'a> ClientCall<'a> {
    /// Reads `CLIENT`'s arguments (its name left out; at least one).
    fn read(args: &[Range<usize>], buf: &'a [u8]) -> Result<Self, Fail> {
        let sub = &buf[args[0].clone()];
        let argc = args.len();
        Ok(if sub.eq_ignore_ascii_case(b"setname") && argc == 2 {
            ClientCall::SetName(&buf[args[1].clone()])
        } else if sub.eq_ignore_ascii_case(b"getname") && argc == 1 {
            ClientCall::GetName
        } else if sub.eq_ignore_ascii_case(b"setinfo") && argc == 3 {
            ClientCall::SetInfo
        } else if sub.eq_ignore_ascii_case(b"id") && argc == 1 {
            ClientCall::Id
        } else {
            return Err(Fail::err(format!(
                "unknown subcommand or wrong number of arguments for 'CLIENT|{}'",
                shown(sub)
            )));
        })
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_integers_as_redis_reads_them_from_1_to_10000() {
        let refused = |arg: &[u8]| count(arg, "INCRBY").err().map(|Fail(_, m)| m);
        assert_eq!(count(b"5", "INCRBY").ok().map(|c| c.get()), Some(5));
        assert_eq!(
            count(b"10000", "INCRBY").ok().map(|c| c.get()),
            Some(10_000)
        );
        for arg in [&b"+5"[..], b"05", b" 5", b"5 ", b"-0", b"5.0", b""] {
            assert_eq!(
                refused(arg).as_deref(),
                Some("value is not an integer or out of range"),
                "{:?}",
                String::from_utf8_lossy(arg)
            );
        }
        for (arg, n) in [(&b"0"[..], "0"), (b"-5", "-5"), (b"10001", "10001")] {
            assert_eq!(
                refused(arg),
                Some(format!("INCRBY takes a count from 1 to 10000, not {n}"))
            );
        }
    }
}
