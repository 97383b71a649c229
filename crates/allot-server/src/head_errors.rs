//! Refusals of unreadable HTTP/1 request heads in the error envelope.
//!
//! When hyper's HTTP/1 parser (httparse) refuses a request head (a control byte in a
//! header, a bad method, URI or version, a head larger than its buffer, a URI too
//! long) hyper answers by itself, before any service sees a request: a bare
//! `400 Bad Request` (or 431, 414) with `content-length: 0`, then closes the
//! connection. hyper has no option to change that answer, and checking the head's
//! bytes before hyper does would mean parsing HTTP twice (and tracking where each
//! pipelined request ends). So [`Enveloped`] wraps the connection's stream and
//! watches what hyper writes instead: a write that begins with one of those
//! automatic heads is replaced, whole, by the same status in Placement's error
//! envelope (JSON, a request id in the body and the headers, `Connection: close`).
//!
//! The match is narrow on purpose. A head allot itself writes for a 400, 414 or 431
//! always has a body (the envelope), so its `content-length` is never 0 and it always
//! has a `content-type`; hyper's automatic head has neither a body nor a
//! `content-type`. Only a write that *starts* with such a head is looked at (hyper
//! writes a response's head at the start of its buffer), so no body is ever read
//! as a head. HTTP/2 has no such answer: the h2 crate refuses a malformed header
//! block by resetting the stream (`PROTOCOL_ERROR`, `codec::framed_read`), which is
//! not an HTTP response, and a connection's h2 frames never begin with `HTTP/1.`.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::http::StatusCode;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::error::{ErrorCode, ErrorContext, ErrorFormat, ErrorInfo};

/// The statuses hyper answers a refused head with (`proto::h1::role::Server::on_error`).
const AUTOMATIC: [u16; 3] = [400, 414, 431];

/// The longest automatic head looked for (hyper's is under 100 bytes).
const MAX_HEAD: usize = 512;

/// A connection's stream whose hyper-made refusals are rewritten (see the module
/// doc). Reads pass through untouched.
pub struct Enveloped<S> {
    stream: S,
    /// The envelope answer being written in place of hyper's head, and how much of
    /// it is out; with the length of hyper's head, reported as written once ours is.
    replacing: Option<(Vec<u8>, usize, usize)>,
}

impl<S> Enveloped<S> {
    /// Wraps a connection's stream.
    pub fn new(stream: S) -> Self {
        Enveloped {
            stream,
            replacing: None,
        }
    }

    /// The stream inside.
    pub fn get_ref(&self) -> &S {
        &self.stream
    }
}

/// The status of hyper's automatic answer that `buf` begins with, and that head's
/// length; `None` for anything else.
pub fn automatic_head(buf: &[u8]) -> Option<(StatusCode, usize)> {
    let rest = buf
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| buf.strip_prefix(b"HTTP/1.0 "))?;
    let code: u16 = std::str::from_utf8(rest.get(..3)?).ok()?.parse().ok()?;
    if !AUTOMATIC.contains(&code) {
        return None;
    }
    let window = &buf[..buf.len().min(MAX_HEAD)];
    let end = window.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let mut zero_length = false;
    for line in head.split("\r\n").skip(1) {
        match line.split_once(':').map(|(k, v)| (k.trim(), v.trim())) {
            Some(("content-length", "0")) => zero_length = true,
            Some(("content-type" | "transfer-encoding", _)) => return None,
            _ => {}
        }
    }
    let status = StatusCode::from_u16(code).ok()?;
    zero_length.then_some((status, end))
}

/// The whole answer that replaces hyper's: the status in the envelope, closing.
pub fn envelope_answer(status: StatusCode) -> Vec<u8> {
    let request_id = format!("req-{}", uuid::Uuid::new_v4());
    let message = match status.as_u16() {
        414 => "The request's URI is too long.",
        431 => "The request's header fields are too large.",
        _ => "The request's head cannot be read (a header holds a byte HTTP does not allow, or the request line is malformed).",
    };
    let info = ErrorInfo {
        message: message.to_owned(),
        code: ErrorCode::Undefined,
    };
    let context = ErrorContext {
        method: "GET",
        request_id: &request_id,
        // Unknown: the version header was never read. The latest one's envelope
        // (with its `code`) is what a current client parses.
        version: Some(crate::microversion::MAX),
        format: ErrorFormat::Json,
    };
    let (content_type, body) = crate::error::body(status, &info, &context);
    tracing::debug!(
        status = status.as_u16(),
        request_id,
        "a request head was refused"
    );
    let mut answer = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
         openstack-request-id: {request_id}\r\nx-openstack-request-id: {request_id}\r\n\
         connection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("Error"),
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    answer
}

impl<S: AsyncWrite + Unpin> Enveloped<S> {
    /// Writes `buf`, or our answer in place of the automatic head it begins with.
    fn write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        if self.replacing.is_none() {
            match automatic_head(buf) {
                Some((status, head_len)) => {
                    self.replacing = Some((envelope_answer(status), 0, head_len));
                }
                None => return Pin::new(&mut self.stream).poll_write(cx, buf),
            }
        }
        let Some((answer, out, head_len)) = &mut self.replacing else {
            return Poll::Ready(Ok(0));
        };
        while *out < answer.len() {
            match Pin::new(&mut self.stream).poll_write(cx, &answer[*out..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Ok(0)),
                Poll::Ready(Ok(n)) => *out += n,
                other => return other,
            }
        }
        let head_len = *head_len;
        self.replacing = None;
        Poll::Ready(Ok(head_len))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Enveloped<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Enveloped<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        // A head is the first slice hyper queues for a message.
        match bufs.iter().find(|b| !b.is_empty()) {
            Some(first) if self.replacing.is_some() || automatic_head(first).is_some() => {
                self.write(cx, first)
            }
            _ => Pin::new(&mut self.stream).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_bare_heads_are_taken() {
        let bare = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        assert_eq!(
            automatic_head(bare),
            Some((StatusCode::BAD_REQUEST, bare.len()))
        );
        let h431 = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(automatic_head(h431).unwrap().0.as_u16(), 431);
        for other in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 120\r\n\r\n{",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n",
            b"{\"HTTP/1.1 400 \"}",
        ] {
            assert_eq!(automatic_head(other), None, "{}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn the_answer_is_the_envelope() {
        let answer = String::from_utf8(envelope_answer(StatusCode::BAD_REQUEST)).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        assert!(head.contains("connection: close"), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["errors"][0]["status"], 400);
        assert!(v["errors"][0]["request_id"]
            .as_str()
            .unwrap()
            .starts_with("req-"));
    }
}
