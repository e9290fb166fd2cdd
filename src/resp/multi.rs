//! Transactions: `MULTI`, then commands queued, then `EXEC` runs them in
//! order or `DISCARD` drops them, as Redis answers them (docs/design.md,
//! "The RESP door"). Nothing is drawn before `EXEC`: a queued command is
//! only read and checked (its arity, name and count, as `execute` in `command.rs` reads
//! it), and one refused then aborts the transaction, so that `EXEC` draws
//! nothing for the others. The queue is bounded ([`MAX_QUEUED`],
//! [`MAX_QUEUED_BYTES`]): a client that never sends `EXEC` holds no more.

use std::ops::Range;

use super::reply::Out;
use super::request::{simple, Answer, Cmd, Fail, Outcome, Request};

/// What the connection does after a command.
#[derive(Debug)]
pub enum After {
    /// Read the next command.
    Continue,
    /// Write what is buffered and close (`QUIT`).
    Close,
    /// Run these commands in order with `execute` (`command.rs`), their replies the
    /// elements of the array whose header `EXEC` wrote.
    Exec(Queued),
}

/// The most commands one transaction queues.
pub const MAX_QUEUED: usize = 10_000;

/// The most bytes of arguments one transaction queues, each argument
/// counted with the `ARG_COST` of keeping it (a command of a thousand
/// empty arguments is not free).
pub const MAX_QUEUED_BYTES: usize = 1024 * 1024;

/// The bytes an argument costs the queue besides its own: its offsets.
const ARG_COST: usize = std::mem::size_of::<Range<usize>>();

/// A transaction being queued: `MULTI` answered, `EXEC` or `DISCARD` not
/// yet.
#[derive(Debug, Default)]
pub struct Transaction {
    queue: Queued,
    /// A command was refused while queuing: `EXEC` answers `EXECABORT`,
    /// and the queue keeps nothing more.
    aborted: bool,
}

impl Transaction {
    fn abort(&mut self) {
        self.aborted = true;
        self.queue = Queued::default();
    }
}

/// A transaction's commands, their arguments copied out of the read
/// buffer: what `EXEC` runs, in order.
#[derive(Debug, Default)]
pub struct Queued {
    bytes: Vec<u8>,
    args: Vec<Range<usize>>,
    /// Each command's arguments: a range of `args`.
    commands: Vec<Range<usize>>,
}

impl Queued {
    /// Appends the command `args` (offsets into `buf`); `false`, keeping
    /// nothing, when it would pass [`MAX_QUEUED`] or [`MAX_QUEUED_BYTES`].
    fn push(&mut self, buf: &[u8], args: &[Range<usize>]) -> bool {
        let held = self.bytes.len() + self.args.len() * ARG_COST;
        let size: usize = args.iter().map(|r| r.len() + ARG_COST).sum();
        if self.commands.len() == MAX_QUEUED || held + size > MAX_QUEUED_BYTES {
            return false;
        }
        let first = self.args.len();
        for r in args {
            let at = self.bytes.len();
            self.bytes.extend_from_slice(&buf[r.clone()]);
            self.args.push(at..self.bytes.len());
        }
        self.commands.push(first..self.args.len());
        true
    }

    /// How many commands are queued.
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    /// True when no command is queued.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// The bytes the commands' arguments are offsets into.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Each command's arguments, in order: offsets into [`Queued::bytes`].
    pub fn commands(&self) -> impl Iterator<Item = &[Range<usize>]> {
        self.commands.iter().map(|c| &self.args[c.clone()])
    }
}

/// The command `args` (offsets into `buf`), of kind `cmd` and `read` as
/// `read`, in the open transaction `tx`: `EXEC` ends it (the queue to
/// run, or `EXECABORT`), `DISCARD` drops it, a nested `MULTI` or a `WATCH`
/// is refused (the transaction goes on), any other command is queued
/// (`QUEUED`) or refused (the transaction aborted). The answer, what the
/// connection does next, and the transaction if it is still open.
pub(super) fn queue(
    mut tx: Transaction,
    cmd: Cmd,
    read: Result<Request<'_>, Fail>,
    buf: &[u8],
    args: &[Range<usize>],
    out: &mut Out,
) -> (Answer, After, Option<Transaction>) {
    let answer = match read {
        Ok(Request::Exec) if tx.aborted => {
            let why = "Transaction discarded because of previous errors.";
            return (
                Err(Fail(Outcome::ExecAbort, why.into())),
                After::Continue,
                None,
            );
        }
        Ok(Request::Exec) => {
            out.array(tx.queue.len());
            return (Ok(Outcome::Ok), After::Exec(tx.queue), None);
        }
        Ok(Request::Discard) => return (simple(out, "OK"), After::Continue, None),
        // EXEC itself misread ends the transaction at once, as in Redis.
        Err(Fail(_, message)) if cmd == Cmd::Exec => {
            let why = format!("Transaction discarded because of: {message}");
            return (Err(Fail(Outcome::ExecAbort, why)), After::Continue, None);
        }
        Ok(Request::Multi) => Err(Fail::err("MULTI calls can not be nested")),
        Ok(Request::Watch) => Err(Fail::err("WATCH inside MULTI is not allowed")),
        Ok(_) if tx.aborted || tx.queue.push(buf, args) => queued(out),
        Ok(_) => {
            tx.abort();
            Err(Fail::err(format!(
                "a transaction holds at most {MAX_QUEUED} commands and {MAX_QUEUED_BYTES} bytes \
                 of arguments: this one is discarded at EXEC"
            )))
        }
        Err(fail) => {
            tx.abort();
            Err(fail)
        }
    };
    (answer, After::Continue, Some(tx))
}

/// `QUEUED`.
fn queued(out: &mut Out) -> Answer {
    out.simple("QUEUED");
    Ok(Outcome::Queued)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `args` laid out one after the other: the bytes and their offsets.
    fn laid_out(args: &[&[u8]]) -> (Vec<u8>, Vec<Range<usize>>) {
        let mut buf = Vec::new();
        let mut ranges = Vec::new();
        for a in args {
            let at = buf.len();
            buf.extend_from_slice(a);
            ranges.push(at..buf.len());
        }
        (buf, ranges)
    }

    fn push(q: &mut Queued, args: &[&[u8]]) -> bool {
        let (buf, ranges) = laid_out(args);
        q.push(&buf, &ranges)
    }

    #[test]
    fn the_queue_gives_back_each_command_in_order() {
        let mut q = Queued::default();
        assert!(push(&mut q, &[b"INCR", b"order"]));
        assert!(push(&mut q, &[b"PING"]));
        assert!(push(&mut q, &[b"ECHO", b""]));
        let read: Vec<Vec<&[u8]>> = q
            .commands()
            .map(|args| args.iter().map(|r| &q.bytes()[r.clone()]).collect())
            .collect();
        assert_eq!(
            read,
            vec![
                vec![&b"INCR"[..], b"order"],
                vec![b"PING"],
                vec![b"ECHO", b""]
            ]
        );
        assert_eq!(q.len(), 3);
    }

    #[test]
    fn the_queue_refuses_a_command_past_its_caps_keeping_nothing_of_it() {
        let mut q = Queued::default();
        for _ in 0..MAX_QUEUED {
            assert!(push(&mut q, &[b"PING"]));
        }
        assert!(!push(&mut q, &[b"PING"]));
        assert_eq!(q.len(), MAX_QUEUED);

        // Empty arguments cost their offsets: a thousand of them are not
        // free, so far fewer than MAX_QUEUED such commands fit.
        let mut q = Queued::default();
        let empty = vec![&b""[..]; 1024];
        let mut fitted = 0;
        while push(&mut q, &empty) {
            fitted += 1;
        }
        assert_eq!(fitted, MAX_QUEUED_BYTES / (1024 * ARG_COST));
        assert_eq!(q.len(), fitted);
        assert!(q.bytes().is_empty());
    }
}
