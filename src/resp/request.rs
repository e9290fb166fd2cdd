//! A command read and checked whole, before anything runs: which command
//! it is (`Cmd`, also its metric label), its arguments (`Request`: the
//! arity, the sequence name and count, the options of `HELLO` and
//! `CLIENT`) and how a command fails (`Fail`, `Outcome`). What
//! `command.rs` runs and what a transaction (`multi.rs`) checks before it
//! queues a command; it knows no service and no connection.

use std::ops::Range;

use super::frame::integer;
use super::reply::Out;
use crate::domain::{Count, SeqNameRef, MAX_BATCH};

/// The largest `INCRBY` count (and `SEQD.BATCH` size).
pub const MAX_INCRBY: u32 = MAX_BATCH;

/// The commands seqd knows, as metric labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cmd {
    Incr,
    IncrBy,
    Next,
    Batch,
    Snowflake,
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

pub(super) const CMD_LABELS: [&str; 20] = [
    "incr",
    "incrby",
    "seqd.next",
    "seqd.batch",
    "seqd.snowflake",
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
    pub(super) fn of(name: &[u8]) -> Cmd {
        const TABLE: [(&[u8], Cmd); 19] = [
            (b"incr", Cmd::Incr),
            (b"incrby", Cmd::IncrBy),
            (b"seqd.next", Cmd::Next),
            (b"seqd.batch", Cmd::Batch),
            (b"seqd.snowflake", Cmd::Snowflake),
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

pub(super) const OUTCOME_LABELS: [&str; 12] = [
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
    pub(super) fn code(self) -> &'static str {
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

/// A command's failure: the code and the message the client reads.
pub(super) struct Fail(pub(super) Outcome, pub(super) String);

impl Fail {
    pub(super) fn err(message: impl Into<String>) -> Self {
        Fail(Outcome::Err, message.into())
    }
}

pub(super) type Answer = Result<Outcome, Fail>;
/// A command read and checked whole, without the service: its arity, its
/// sequence name and count, its options. What `execute` (`command.rs`) runs, and what
/// a transaction checks before it queues a command.
pub(super) enum Request<'a> {
    Incr(SeqNameRef<'a>),
    IncrBy(SeqNameRef<'a>, Count),
    Next(SeqNameRef<'a>),
    Batch(SeqNameRef<'a>, Count),
    /// `SEQD.SNOWFLAKE [count]`: one snowflake ID, or `count` of them.
    Snowflake(Option<Count>),
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
pub(super) fn request<'a>(
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
        Cmd::Snowflake if argc == 1 => Request::Snowflake(None),
        Cmd::Snowflake if argc == 2 => Request::Snowflake(Some(count(arg(1), "SEQD.SNOWFLAKE")?)),
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
                 SEQD.BATCH, SEQD.SNOWFLAKE)",
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

/// `+text`, an `ok` answer.
pub(super) fn simple(out: &mut Out, text: &str) -> Answer {
    out.simple(text);
    Ok(Outcome::Ok)
}

/// A client's command name as shown in an error: at most 32 printable
/// characters.
pub(super) fn shown(name: &[u8]) -> String {
    name.iter()
        .take(32)
        .map(|&b| if b.is_ascii_graphic() { b as char } else { '?' })
        .collect()
}

pub(super) fn seq_name(arg: &[u8]) -> Result<SeqNameRef<'_>, Fail> {
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
pub(super) fn count(arg: &[u8], what: &str) -> Result<Count, Fail> {
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

/// `HELLO [protover [AUTH user token] [SETNAME name]]`, read.
pub(super) struct Hello<'a> {
    pub(super) proto: Option<u8>,
    pub(super) token: Option<&'a [u8]>,
    pub(super) name: Option<&'a [u8]>,
}

impl<'a> Hello<'a> {
    /// Reads `HELLO`'s arguments (its name left out).
    pub(super) fn read(args: &[Range<usize>], buf: &'a [u8]) -> Result<Self, Fail> {
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

/// `CLIENT SETNAME name`, `GETNAME`, `SETINFO attr value`, `ID`, read.
pub(super) enum ClientCall<'a> {
    SetName(&'a [u8]),
    GetName,
    SetInfo,
    Id,
}

impl<'a> ClientCall<'a> {
    /// Reads `CLIENT`'s arguments (its name left out; at least one).
    pub(super) fn read(args: &[Range<usize>], buf: &'a [u8]) -> Result<Self, Fail> {
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
