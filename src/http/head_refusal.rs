//! The refusals hyper writes itself, given the API's error body.
//!
//! A request head the server cannot read is refused by hyper before any
//! service sees it: over [`MAX_HEAD_BYTES`] or with more than
//! [`MAX_HEADERS`] headers, 431; a malformed request line or header, or two
//! `Content-Length`s, 400. hyper writes that answer with an empty body and
//! closes the connection. [`JsonRefusals`] sits between hyper and the
//! connection (above TLS, so it sees what hyper writes) and puts the API's
//! `{"error": ...}` body in its place, so that every refusal the server
//! writes names a documented code, whichever layer refuses.
//!
//! hyper's refusal head is recognised by its exact shape as the last thing
//! written: `HTTP/1.1 400 Bad Request` or `HTTP/1.1 431 Request Header
//! Fields Too Large`, then only `connection: close`, `content-length: 0` and
//! `date`. No answer of the API has that shape (every error of the API has a
//! JSON body, and every answer of its routes an `x-request-id`), and an
//! answer written before it on the same connection (pipelined requests) is
//! written unchanged.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::error::{ErrorBody, ErrorCode, ErrorDetail};

/// Most bytes buffered per connection while reading a request head: what a
/// client that never finishes its head can hold (a larger head answers 431).
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Most headers in a request head (hyper's default, named here): more
/// answer 431.
pub const MAX_HEADERS: usize = 100;

/// A connection whose hyper refusals are rewritten with the error body.
pub struct JsonRefusals<I> {
    inner: I,
    /// The bytes written in place of hyper's write, while they are written.
    pending: Option<Rewritten>,
}

/// Bytes written in place of a write of hyper's.
struct Rewritten {
    bytes: Vec<u8>,
    written: usize,
    /// The length of hyper's write, reported as written once `bytes` are.
    claimed: usize,
}

impl<I: Unpin> JsonRefusals<I> {
    /// Wraps a connection (the socket, or TLS over it).
    pub fn new(inner: I) -> Self {
        JsonRefusals {
            inner,
            pending: None,
        }
    }

    /// The connection, for what passes through unchanged.
    fn connection(self: Pin<&mut Self>) -> Pin<&mut I> {
        Pin::new(&mut self.get_mut().inner)
    }
}

/// The longest refusal head hyper writes, with room to spare: only the end
/// of a write is looked at.
const LONGEST_REFUSAL: usize = 160;

/// Where hyper's refusal head starts in `buf`, and the code it stands for;
/// `None` when `buf` does not end with one.
fn refusal_at(buf: &[u8]) -> Option<(usize, ErrorCode)> {
    if !buf.ends_with(b"\r\n\r\n") {
        return None;
    }
    let from = buf.len().saturating_sub(LONGEST_REFUSAL);
    let start = from
        + buf[from..]
            .windows(b"HTTP/1.1 ".len())
            .rposition(|w| w == b"HTTP/1.1 ")?;
    let head = std::str::from_utf8(&buf[start..]).ok()?;
    let mut lines = head.strip_suffix("\r\n\r\n")?.split("\r\n");
    let code = match lines.next()? {
        "HTTP/1.1 400 Bad Request" => ErrorCode::InvalidRequest,
        "HTTP/1.1 431 Request Header Fields Too Large" => ErrorCode::RequestHeadTooLarge,
        _ => return None,
    };
    let mut empty = false;
    for line in lines {
        match line.split_once(": ")? {
            ("content-length", "0") => empty = true,
            ("connection", "close") | ("date", _) => {}
            _ => return None,
        }
    }
    empty.then_some((start, code))
}

/// The message of each refusal (the client learns what to change).
fn message(code: ErrorCode) -> String {
    match code {
        ErrorCode::RequestHeadTooLarge => format!(
            "request head too large: the request line and headers may take at most {} KiB \
             and {MAX_HEADERS} headers; nothing was done",
            MAX_HEAD_BYTES / 1024
        ),
        _ => "malformed request head (its request line, a header's syntax, or conflicting \
              Content-Length or Transfer-Encoding headers); nothing was done"
            .to_owned(),
    }
}

/// `buf` with hyper's refusal head (from `start`) replaced by the same
/// answer with the error body.
fn rewrite(buf: &[u8], start: usize, code: ErrorCode) -> Vec<u8> {
    let status = code.status();
    let body = serde_json::to_vec(&ErrorBody {
        error: ErrorDetail {
            code,
            message: message(code),
        },
    })
    .expect("an error body serialises");
    let date = std::str::from_utf8(&buf[start..])
        .ok()
        .and_then(|head| head.split("\r\n").find(|l| l.starts_with("date: ")));
    let mut out = buf[..start].to_vec();
    out.extend_from_slice(
        format!(
            "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or(""),
            body.len()
        )
        .as_bytes(),
    );
    if let Some(date) = date {
        out.extend_from_slice(date.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&body);
    out
}

impl<I: AsyncRead + Unpin> AsyncRead for JsonRefusals<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.connection().poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for JsonRefusals<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.pending.is_none() {
            let Some((start, code)) = refusal_at(buf) else {
                return Pin::new(&mut this.inner).poll_write(cx, buf);
            };
            tracing::debug!(
                status = code.status().as_u16(),
                "refused a request head that could not be read"
            );
            this.pending = Some(Rewritten {
                bytes: rewrite(buf, start, code),
                written: 0,
                claimed: buf.len(),
            });
        }
        let Some(p) = this.pending.as_mut() else {
            unreachable!("set above");
        };
        while p.written < p.bytes.len() {
            let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &p.bytes[p.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            p.written += n;
        }
        // hyper asks again with the same bytes while the write is pending.
        let claimed = p.claimed.min(buf.len());
        this.pending = None;
        Poll::Ready(Ok(claimed))
    }

    // Not vectored (the default): hyper then writes each answer from one
    // buffer, so a refusal head is always whole at the end of a write.

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.connection().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.connection().poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &str = "date: Mon, 07 Dec 2026 18:35:50 GMT";

    fn hyper_refusal(status_line: &str) -> String {
        format!("{status_line}\r\nconnection: close\r\ncontent-length: 0\r\n{DATE}\r\n\r\n")
    }

    #[test]
    fn hypers_refusals_are_found_after_a_pipelined_answer() {
        let ok = "HTTP/1.1 200 OK\r\ncontent-length: 15\r\n\r\n{\"status\":\"ok\"}";
        let refusal = hyper_refusal("HTTP/1.1 431 Request Header Fields Too Large");
        let buf = format!("{ok}{refusal}");
        assert_eq!(
            refusal_at(buf.as_bytes()),
            Some((ok.len(), ErrorCode::RequestHeadTooLarge))
        );
        let out = String::from_utf8(rewrite(
            buf.as_bytes(),
            ok.len(),
            ErrorCode::RequestHeadTooLarge,
        ))
        .unwrap();
        let (before, after) = out.split_at(ok.len());
        assert_eq!(before, ok);
        let (head, body) = after.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(DATE), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "request_head_too_large");
    }

    #[test]
    fn answers_of_the_api_are_left_alone() {
        for buf in [
            // An empty 400 with a request id is not hyper's.
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nx-request-id: a-1\r\n\r\n".to_owned(),
            hyper_refusal("HTTP/1.1 404 Not Found"),
            "HTTP/1.1 204 No Content\r\ndate: x\r\n\r\n".to_owned(),
            format!("{}x", hyper_refusal("HTTP/1.1 400 Bad Request")),
        ] {
            assert_eq!(refusal_at(buf.as_bytes()), None, "{buf}");
        }
        let bad = hyper_refusal("HTTP/1.1 400 Bad Request");
        assert_eq!(
            refusal_at(bad.as_bytes()),
            Some((0, ErrorCode::InvalidRequest))
        );
    }
}
