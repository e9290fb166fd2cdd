//! One RESP connection ([`Connection`]): its stream, the bytes read and not
//! yet run, the replies not yet written, its session and its deadlines
//! (docs/design.md, "The RESP door").
//!
//! It reads what the socket has, runs every complete command in it in
//! order, and writes those replies with one write (pipelining). The
//! deadlines are one timer, armed once and re-armed only when it fires
//! early, so a read costs no timer work: a partial command must complete
//! within `frame_timeout` of its first byte, and a connection with no
//! command for `idle_timeout` is closed, as is one whose client reads no
//! reply for `idle_timeout`.

use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};

use super::command::{self, Door, Session};
use super::multi::{After, Queued};
use super::{closed, frame, reply, RespLimits};
use crate::edge::stopped;

/// Bytes read from the socket at a time (more when a command is larger).
const READ_CHUNK: usize = 16 * 1024;

/// Replies buffered past this are written before the next command runs.
const FLUSH_AT: usize = 64 * 1024;

/// One connection (`S`: the socket, or TLS over it) and all it holds.
pub struct Connection<S> {
    stream: S,
    door: Arc<Door>,
    limits: RespLimits,
    /// Read and not yet run: at most the start of one command after
    /// [`Connection::run_read`].
    read: BytesMut,
    /// The offsets of the arguments of the command being run.
    args: Vec<Range<usize>>,
    /// Replies not yet written.
    out: reply::Out,
    session: Session,
    deadlines: Deadlines,
    /// Turns true at shutdown.
    stop: watch::Receiver<bool>,
    /// Shutdown was seen while reading.
    stop_seen: bool,
}

/// The deadlines: one timer, and what it is for.
struct Deadlines {
    timer: Pin<Box<Sleep>>,
    last_command: Instant,
    /// When the partial command in the buffer began.
    partial_since: Option<Instant>,
}

/// What a read brought.
enum Read {
    /// Bytes (or shutdown with a partial command left to finish).
    More,
    /// The connection is done for.
    Done,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
    /// A new connection of `door` over `stream`.
    pub fn new(
        stream: S,
        door: Arc<Door>,
        limits: RespLimits,
        stop: watch::Receiver<bool>,
    ) -> Self {
        Connection {
            stream,
            session: door.session(),
            door,
            limits,
            read: BytesMut::with_capacity(READ_CHUNK),
            args: Vec::with_capacity(4),
            out: reply::Out::new(),
            deadlines: Deadlines {
                timer: Box::pin(tokio::time::sleep(
                    limits.idle_timeout.min(limits.frame_timeout),
                )),
                last_command: Instant::now(),
                partial_since: None,
            },
            stop,
            stop_seen: false,
        }
    }

    /// Serves the connection until the client closes it, a deadline
    /// passes, a frame breaks the protocol, `QUIT`, or shutdown.
    pub async fn serve(mut self) {
        // Shutdown, waited for by one future for the connection's life: it
        // registers with the watch once, not on every read.
        let mut stop_wait = self.stop.clone();
        let shutdown = stopped(&mut stop_wait);
        tokio::pin!(shutdown);
        loop {
            let Some((used, close)) = self.run_read().await else {
                return;
            };
            let _ = self.read.split_to(used);
            self.commands_ran(used);
            if !self.out.buf.is_empty() && !self.write_frame().await {
                return;
            }
            let stopping = *self.stop.borrow();
            if close || stopping {
                if stopping {
                    closed("shutdown");
                }
                let _ = self.stream.shutdown().await;
                return;
            }
            if let Read::Done = self.read_frame(shutdown.as_mut()).await {
                return;
            }
        }
    }

    /// Runs every complete command read so far, in order: the bytes they
    /// took and whether the connection is to close after their replies;
    /// `None` when it is done for already.
    async fn run_read(&mut self) -> Option<(usize, bool)> {
        let mut at = 0;
        loop {
            match frame::parse(&mut self.read[at..], &self.limits.frame, &mut self.args) {
                Ok(Some(used)) => {
                    if !self.args.is_empty() {
                        let cmd = &self.read[at..at + used];
                        let session = &mut self.session;
                        match command::execute(&self.door, session, cmd, &self.args, &mut self.out)
                            .await
                        {
                            After::Continue => {}
                            After::Close => return Some((at + used, true)),
                            After::Exec(queued) => {
                                if !self.exec(&queued).await {
                                    return None;
                                }
                            }
                        }
                        // A long pipeline of large answers is written as it
                        // grows, so a connection holds at most this much.
                        if self.out.buf.len() >= FLUSH_AT && !self.write_frame().await {
                            return None;
                        }
                    }
                    at += used;
                }
                Ok(None) => return Some((at, false)),
                Err(e) => {
                    self.out.error("ERR", &format!("Protocol error: {e}"));
                    closed("protocol");
                    return Some((at, true));
                }
            }
        }
    }

    /// Runs a transaction's commands in order (`EXEC`, its array's header
    /// written), their replies written as they pass [`FLUSH_AT`] as a
    /// pipeline's are; `false` when the connection is done for.
    async fn exec(&mut self, queued: &Queued) -> bool {
        for args in queued.commands() {
            // Never QUIT, EXEC or another transaction: those are not queued.
            let session = &mut self.session;
            let _ =
                command::execute(&self.door, session, queued.bytes(), args, &mut self.out).await;
            if self.out.buf.len() >= FLUSH_AT && !self.write_frame().await {
                return false;
            }
        }
        true
    }

    /// The deadlines after commands took `used` bytes off the buffer.
    fn commands_ran(&mut self, used: usize) {
        let d = &mut self.deadlines;
        if used > 0 {
            d.last_command = Instant::now();
        }
        d.partial_since = match (self.read.is_empty(), d.partial_since) {
            (true, _) => None,
            (false, Some(t)) if used == 0 => Some(t),
            (false, _) => {
                // A command began: its deadline comes before the idle one.
                let now = Instant::now();
                let due = now + self.limits.frame_timeout;
                if d.timer.deadline() > due {
                    d.timer.as_mut().reset(due);
                }
                Some(now)
            }
        };
    }

    /// Writes the buffered replies; `false` when the connection is done
    /// for: the write failed, or the client read none of it for
    /// `idle_timeout` (a client that pipelines and never reads holds no
    /// connection forever).
    async fn write_frame(&mut self) -> bool {
        let write = self.stream.write_all(&self.out.buf);
        tokio::pin!(write);
        // Most writes complete at once (the socket's buffer has room): those
        // arm no deadline, so read no clock.
        let at_once = std::future::poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx).map(Ok))).await;
        let written = match at_once {
            Poll::Ready(done) => done,
            Poll::Pending => tokio::time::timeout(self.limits.idle_timeout, write).await,
        };
        match written {
            Ok(Ok(())) => {
                self.out.buf.clear();
                true
            }
            Ok(Err(_)) => false,
            Err(_) => {
                closed("slow_reader");
                false
            }
        }
    }

    /// Reads more bytes under the deadlines, or until `shutdown`.
    async fn read_frame(&mut self, mut shutdown: Pin<&mut impl Future<Output = ()>>) -> Read {
        if self.read.capacity() - self.read.len() < READ_CHUNK / 4 {
            self.read.reserve(READ_CHUNK);
        }
        let d = &mut self.deadlines;
        loop {
            tokio::select! {
                biased;
                read = self.stream.read_buf(&mut self.read) => match read {
                    Ok(0) | Err(_) => return Read::Done,
                    Ok(_) => return Read::More,
                },
                _ = d.timer.as_mut() => {
                    let now = Instant::now();
                    let (deadline, reason) = match d.partial_since {
                        Some(t) => (t + self.limits.frame_timeout, "slow_frame"),
                        None => (d.last_command + self.limits.idle_timeout, "idle"),
                    };
                    if now >= deadline {
                        closed(reason);
                        return Read::Done;
                    }
                    d.timer.as_mut().reset(deadline);
                }
                () = shutdown.as_mut(), if !self.stop_seen => {
                    self.stop_seen = true;
                    if self.read.is_empty() {
                        closed("shutdown");
                        return Read::Done;
                    }
                    return Read::More;
                }
            }
        }
    }
}
