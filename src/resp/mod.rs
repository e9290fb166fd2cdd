//! The RESP door: Redis clients draw IDs with `INCR`, `INCRBY`,
//! `SEQD.NEXT` and `SEQD.BATCH` (`--resp-listen`; docs/design.md, "The
//! RESP door"). Each command is a call of the same service as HTTP.
//!
//! - [`frame`]: commands read off the buffer, the caps checked on headers.
//! - [`reply`]: RESP2 and RESP3 replies.
//! - [`command`]: the commands and the one table of their errors.
//! - [`multi`]: transactions (`MULTI`, `EXEC`, `DISCARD`) and their queue.
//!
//! A connection reads what the socket has, answers every complete command
//! in it in order, and writes those replies with one write (pipelining);
//! `EXEC` runs a transaction's queue the same way, its replies written as
//! they grow.
//! The edge rules of HTTP hold here too: at most `max_connections` open
//! (one more is answered `-ERR max number of clients reached` and closed),
//! a partial command must complete within `frame_timeout`, an idle
//! connection is closed after `idle_timeout`, and a frame that breaks the
//! protocol or a cap is answered with an error and the connection closed.
//! A command's own error leaves the connection serving.
//!
//! Under TLS the handshake runs on the connection's task, holding its place
//! under the cap, and must be done within `frame_timeout` of the accept; one
//! connection past the cap is closed without a word (no handshake is spent
//! on it).

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;
use tokio_rustls::server::TlsStream;

use crate::service::Service;
use crate::tls::{TlsDoor, TlsStore};

pub mod command;
pub mod frame;
pub mod multi;
pub mod reply;
pub mod request;

pub use command::Door;
pub use frame::FrameLimits;

/// The RESP listener's limits. See `seqd serve --help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RespLimits {
    /// Caps of one command.
    pub frame: FrameLimits,
    /// Longest a partial command may wait for its remaining bytes.
    pub frame_timeout: Duration,
    /// A connection with no command for this long is closed.
    pub idle_timeout: Duration,
    /// Most open connections.
    pub max_connections: usize,
}

impl Default for RespLimits {
    fn default() -> Self {
        RespLimits {
            frame: FrameLimits::default(),
            frame_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(300),
            max_connections: 10_000,
        }
    }
}

/// Serves RESP on `listener` (TLS only, with the certificates of `tls`,
/// when given) until `stop` turns true, then lets each connection finish
/// the commands it has read and closes it; returns when every connection
/// is closed.
pub async fn serve(
    listener: TcpListener,
    service: Service,
    limits: RespLimits,
    tls: Option<Arc<TlsStore>>,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    describe_metrics();
    let door = Arc::new(Door::new(service));
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: wait, never spin.
                    tracing::warn!(error = %e, "accepting a RESP connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stopped(&mut stop) => break,
        };
        let _ = stream.set_nodelay(true);
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            closed("max_connections");
            if tls.is_none() {
                tokio::spawn(refuse(stream));
            }
            continue;
        };
        let (door, tls, mut stop) = (door.clone(), tls.clone(), stop.clone());
        tokio::spawn(async move {
            door.connections.fetch_add(1, Ordering::Relaxed);
            metrics::gauge!(command::CONNECTIONS_METRIC).increment(1.0);
            match tls {
                None => connection(stream, &door, &limits, stop).await,
                Some(tls) => {
                    if let Some(stream) = handshake(stream, &tls, &limits, &mut stop).await {
                        connection(stream, &door, &limits, stop).await;
                    }
                }
            }
            door.connections.fetch_sub(1, Ordering::Relaxed);
            metrics::gauge!(command::CONNECTIONS_METRIC).decrement(1.0);
            drop(permit);
        });
    }
    drop(listener);
    // Every permit back: every connection closed.
    let _ = permits.acquire_many(limits.max_connections as u32).await;
    Ok(())
}

/// Resolves once `stop` is true (holding no borrow of it).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// One connection past the cap: told so, as Redis tells it, and closed.
async fn refuse(mut stream: TcpStream) {
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        stream.write_all(b"-ERR max number of clients reached\r\n"),
    )
    .await;
}

/// The TLS handshake of a connection, within `frame_timeout` of now;
/// `None` when it failed, took too long or shutdown began.
async fn handshake(
    stream: TcpStream,
    tls: &TlsStore,
    limits: &RespLimits,
    stop: &mut watch::Receiver<bool>,
) -> Option<TlsStream<TcpStream>> {
    let accept = tls.acceptor(TlsDoor::Resp).accept(stream);
    tokio::select! {
        accepted = tokio::time::timeout(limits.frame_timeout, accept) => match accepted {
            Ok(Ok(stream)) => Some(stream),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "RESP TLS handshake failed");
                closed("tls");
                None
            }
            Err(_) => {
                closed("slow_frame");
                None
            }
        },
        () = stopped(stop) => {
            closed("shutdown");
            None
        }
    }
}

fn closed(reason: &'static str) {
    metrics::counter!(command::CLOSED_METRIC, "reason" => reason).increment(1);
}

fn describe_metrics() {
    metrics::describe_counter!(
        command::COMMANDS_METRIC,
        "RESP commands answered, by command and outcome (ok, queued in a transaction, or the error code)."
    );
    metrics::describe_gauge!(command::CONNECTIONS_METRIC, "Open RESP connections.");
    metrics::describe_counter!(
        command::CLOSED_METRIC,
        "RESP connections seqd closed, by reason (idle, slow_frame, slow_reader, protocol, tls, max_connections, shutdown)."
    );
}

/// Bytes read from the socket at a time (more when a command is larger).
const READ_CHUNK: usize = 16 * 1024;

/// Replies buffered past this are written before the next command runs.
const FLUSH_AT: usize = 64 * 1024;

/// Writes the buffered replies; `false` when the connection is done for:
/// the write failed, or the client read none of it for `idle_timeout` (a
/// client that pipelines and never reads holds no connection forever).
async fn flush<S: AsyncWrite + Unpin>(
    stream: &mut S,
    out: &mut reply::Out,
    limits: &RespLimits,
) -> bool {
    let write = stream.write_all(&out.buf);
    tokio::pin!(write);
    // Most writes complete at once (the socket's buffer has room): those
    // arm no deadline, so read no clock.
    let at_once = std::future::poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx).map(Ok))).await;
    let written = match at_once {
        Poll::Ready(done) => done,
        Poll::Pending => tokio::time::timeout(limits.idle_timeout, write).await,
    };
    match written {
        Ok(Ok(())) => {
            out.buf.clear();
            true
        }
        Ok(Err(_)) => false,
        Err(_) => {
            closed("slow_reader");
            false
        }
    }
}

/// Runs a transaction's commands in order (`EXEC`, its array's header
/// written), their replies written as they pass [`FLUSH_AT`] as a
/// pipeline's are; `false` when the connection is done for.
async fn exec<S: AsyncWrite + Unpin>(
    door: &Door,
    session: &mut command::Session,
    queued: &multi::Queued,
    stream: &mut S,
    out: &mut reply::Out,
    limits: &RespLimits,
) -> bool {
    for args in queued.commands() {
        // Never QUIT, EXEC or another transaction: those are not queued.
        let _ = command::execute(door, session, queued.bytes(), args, out).await;
        if out.buf.len() >= FLUSH_AT && !flush(stream, out, limits).await {
            return false;
        }
    }
    true
}

/// Serves one connection (`stream`: the socket, or TLS over it).
async fn connection<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    door: &Door,
    limits: &RespLimits,
    stop: watch::Receiver<bool>,
) {
    let mut session = door.session();
    let mut out = reply::Out::new();
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let mut args = Vec::with_capacity(4);
    // The deadlines: the timer is armed once and re-armed only when it
    // fires early, so a read costs no timer work.
    let mut last_command = Instant::now();
    let mut partial_since: Option<Instant> = None;
    let timer = tokio::time::sleep(limits.idle_timeout.min(limits.frame_timeout));
    tokio::pin!(timer);
    // Shutdown, waited for by one future for the connection's life: it
    // registers with the watch once, not on every read.
    let mut stop_wait = stop.clone();
    let shutdown = stopped(&mut stop_wait);
    tokio::pin!(shutdown);
    let mut stop_seen = false;
    loop {
        // Every complete command read so far, in order.
        let mut at = 0;
        let mut close = false;
        loop {
            match frame::parse(&mut buf[at..], &limits.frame, &mut args) {
                Ok(Some(used)) => {
                    if !args.is_empty() {
                        let slice = &buf[at..at + used];
                        match command::execute(door, &mut session, slice, &args, &mut out).await {
                            multi::After::Continue => {}
                            multi::After::Close => {
                                close = true;
                                break;
                            }
                            multi::After::Exec(queued) => {
                                let done = exec(
                                    door,
                                    &mut session,
                                    &queued,
                                    &mut stream,
                                    &mut out,
                                    limits,
                                );
                                if !done.await {
                                    return;
                                }
                            }
                        }
                        // A long pipeline of large answers is written as it
                        // grows, so a connection holds at most this much.
                        if out.buf.len() >= FLUSH_AT && !flush(&mut stream, &mut out, limits).await
                        {
                            return;
                        }
                    }
                    at += used;
                }
                Ok(None) => break,
                Err(e) => {
                    out.error("ERR", &format!("Protocol error: {e}"));
                    closed("protocol");
                    close = true;
                    break;
                }
            }
        }
        let _ = buf.split_to(at);
        if at > 0 {
            last_command = Instant::now();
        }
        partial_since = match (buf.is_empty(), partial_since) {
            (true, _) => None,
            (false, Some(t)) if at == 0 => Some(t),
            (false, _) => {
                // A command began: its deadline comes before the idle one.
                let now = Instant::now();
                let due = now + limits.frame_timeout;
                if timer.deadline() > due {
                    timer.as_mut().reset(due);
                }
                Some(now)
            }
        };
        if !out.buf.is_empty() && !flush(&mut stream, &mut out, limits).await {
            return;
        }
        let stopping = *stop.borrow();
        if close || stopping {
            if stopping {
                closed("shutdown");
            }
            let _ = stream.shutdown().await;
            return;
        }
        if buf.capacity() - buf.len() < READ_CHUNK / 4 {
            buf.reserve(READ_CHUNK);
        }
        loop {
            tokio::select! {
                biased;
                read = stream.read_buf(&mut buf) => match read {
                    Ok(0) | Err(_) => return,
                    Ok(_) => break,
                },
                _ = &mut timer => {
                    let now = Instant::now();
                    let (deadline, reason) = match partial_since {
                        Some(t) => (t + limits.frame_timeout, "slow_frame"),
                        None => (last_command + limits.idle_timeout, "idle"),
                    };
                    if now >= deadline {
                        closed(reason);
                        return;
                    }
                    timer.as_mut().reset(deadline);
                }
                () = &mut shutdown, if !stop_seen => {
                    stop_seen = true;
                    if buf.is_empty() {
                        closed("shutdown");
                        return;
                    }
                    break;
                }
            }
        }
    }
}
