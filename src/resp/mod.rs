//! The RESP door: Redis clients draw IDs with `INCR`, `INCRBY`,
//! `SEQD.NEXT` and `SEQD.BATCH` (`--resp-listen`; docs/design.md, "The
//! RESP door"). Each command is a call of the same service as HTTP.
//!
//! - [`frame`]: commands read off the buffer, the caps checked on headers.
//! - [`reply`]: RESP2 and RESP3 replies.
//! - [`command`]: the commands and the one table of their errors.
//! - [`multi`]: transactions (`MULTI`, `EXEC`, `DISCARD`) and their queue.
//! - [`connection`]: one connection, its buffers, session and deadlines.
//!
//! A connection reads what the socket has, answers every complete command
//! in it in order, and writes those replies with one write (pipelining);
//! `EXEC` runs a transaction's queue the same way, its replies written as
//! they grow.
//! The edge ([`crate::edge`]) HTTP stands on holds here too: at most `max_connections` open
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
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::edge::{self, Conn, Cut, Deadlines, Drain, Edge, Io, PastCap};
use crate::service::Service;
use crate::tls::{TlsDoor, TlsStore};

pub mod command;
pub mod connection;
pub mod frame;
pub mod multi;
pub mod reply;
pub mod request;

pub use command::Door;
pub use connection::Connection;
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

impl RespLimits {
    /// The RESP door at the edge: past the cap, answered as Redis answers
    /// and closed; deadlines kept by each connection's timers (its loop
    /// makes every read and knows where a command ends: see
    /// [`Connection`]); at shutdown, the listener closed at once.
    fn edge(&self) -> Edge {
        Edge {
            door: TlsDoor::Resp,
            accept_failed: "accepting a RESP connection failed",
            max_connections: self.max_connections,
            past_cap: PastCap::Refuse(b"-ERR max number of clients reached\r\n"),
            deadlines: Deadlines::Timed {
                handshake: self.frame_timeout,
            },
            drain: Drain::AtOnce,
            nodelay: true,
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
    let door = Arc::new(RespDoor {
        door: Arc::new(Door::new(service)),
        limits,
    });
    let shutdown = async move { edge::stopped(&mut stop).await };
    edge::serve(listener, door, limits.edge(), tls, shutdown).await;
    Ok(())
}

/// The RESP door at the edge: what every connection shares, and its limits.
struct RespDoor {
    door: Arc<Door>,
    limits: RespLimits,
}

impl edge::Door for RespDoor {
    fn serve<S: Io>(self: Arc<Self>, io: S, conn: Conn) -> impl Future<Output = ()> + Send {
        Connection::new(io, self.door.clone(), self.limits, conn.stop()).serve()
    }

    fn cut(&self, why: Cut) {
        closed(match why {
            Cut::PastCap => "max_connections",
            Cut::Tls => "tls",
            Cut::SlowHandshake => "slow_frame",
            Cut::Shutdown => "shutdown",
        });
    }

    fn opened(&self) {
        self.door.connections.fetch_add(1, Ordering::Relaxed);
        metrics::gauge!(command::CONNECTIONS_METRIC).increment(1.0);
    }

    fn ended(&self) {
        self.door.connections.fetch_sub(1, Ordering::Relaxed);
        metrics::gauge!(command::CONNECTIONS_METRIC).decrement(1.0);
    }
}

/// Counts a connection seqd closed, by reason.
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
