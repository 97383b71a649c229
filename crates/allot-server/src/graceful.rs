//! The accept loop, with a graceful stop that drops no request a client has sent.
//!
//! `axum::serve` (and hyper-util's `GracefulShutdown`) would do, but their graceful
//! stop loses requests in three ways, each of which a client sees as a connection
//! closed with no answer: a connection whose first bytes hyper-util's protocol
//! sniffing has not read is cancelled; hyper closes at once a connection that has
//! read nothing yet (its request may be on the wire, or in the socket's buffer, not
//! yet polled); and the connections the kernel has completed but nobody has accepted
//! are reset when the listener closes. So here:
//!
//! - connections are served as HTTP/1 straight away (no sniffing: allot speaks
//!   nothing else);
//! - once `shutdown` resolves, the listener stops taking new connections (on Linux a
//!   socket filter that drops every SYN makes the kernel ignore new handshakes, so
//!   their clients are refused once the listener closes rather than reset), and the
//!   connections already waiting in the listen queue are accepted and served too
//!   before it closes. Handshakes half done when the filter goes on still complete
//!   (their last ACK passes it), so the listener takes connections for
//!   [`HANDSHAKES`] more before it closes: dropping those ACKs instead would leave
//!   clients that believe they are connected, whose requests are reset;
//! - a connection is told to stop only once its request has begun to arrive: one
//!   accepted before the stop but whose client has not written yet (a client thread
//!   between `connect` and `write`) is driven on for up to [`FIRST_BYTES`] until its
//!   first bytes are read ([`Watched`] notes them), and one accepted after the stop
//!   waits as long for them before hyper sees it.
//!
//! With a certificate ([`Tls`]), every connection is HTTPS: the TLS handshake comes
//! first (within the head's time limit), then HTTP/2 if the client asked for `h2` by ALPN,
//! else HTTP/1.1. The certificate is looked up at each handshake, so a reload (SIGHUP)
//! reaches the next connection and leaves those open as they are.
//!
//! hyper's graceful stop then lets every connection finish the request it has begun,
//! answers it with `connection: close`, and closes the connections idle between
//! requests. Every connection's task holds a clone of one channel's sender, so that
//! the stop can wait for the last of them (mini-redis's pattern). How long to wait in
//! all is the caller's business (`--shutdown-grace`).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::graceful::GracefulConnection;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::context::Arrival;
use crate::limits::{
    Activity, Backoff, BodyDeadline, Closed, ConnectionLimits, Connections, Open, SentBody,
    TimedBody, H2_MAX_STREAMS, MAX_HEADER_BYTES,
};

/// The certificate a listener serves HTTPS with (`None`: plain HTTP).
pub type Tls = Option<Arc<allot_tls::ServerTls>>;

/// How long a client that spoke plain HTTP to the HTTPS port is given to send the
/// request it is answered 400 for.
pub const HANDSHAKE: Duration = Duration::from_secs(10);

/// How long, once the stop has come, a connection that has sent nothing yet is given
/// to send its request: one accepted an instant before the stop, whose client is
/// writing.
pub const FIRST_BYTES: Duration = Duration::from_secs(1);

/// How long, once new handshakes are refused, the listener goes on accepting the
/// handshakes that were half done: a round trip, with room for a loaded host.
pub const HANDSHAKES: Duration = Duration::from_millis(200);

/// Serves `app` on `listener` (HTTPS with `tls`) until `shutdown` resolves, then
/// stops accepting and waits for the connections under way to finish their requests.
/// `connections` bounds how many are open and how long each part of an exchange may
/// take ([`crate::limits`]).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    tls: Tls,
    connections: Connections,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let acceptor = match &tls {
        Some(tls) => {
            let config = tls
                .config(&[b"h2", b"http/1.1"])
                .map_err(std::io::Error::other)?;
            Some(TlsAcceptor::from(Arc::new(config)))
        }
        None => None,
    };
    let (stop, stopping) = watch::channel(false);
    let (running, mut all_done) = mpsc::channel::<()>(1);
    let spawn = |stream: TcpStream| {
        tokio::spawn(connection(
            stream,
            connections.accepted(),
            app.clone(),
            acceptor.clone(),
            stopping.clone(),
            running.clone(),
        ));
    };
    let mut shutdown = std::pin::pin!(shutdown);
    let mut backoff = Backoff::default();
    loop {
        tokio::select! {
            // At the cap, nothing is accepted until there is room (new connections
            // wait in the listen queue).
            accepted = async {
                connections.admit().await;
                listener.accept().await
            } => match accepted {
                Ok((stream, _)) => {
                    backoff.reset();
                    spawn(stream);
                }
                Err(e) => accept_failed(e, &connections, &mut backoff).await,
            },
            () = &mut shutdown => break,
        }
    }
    // No new handshakes from here on: a connection the kernel completed between the
    // last accept below and the close would be reset with its request sent.
    refuse_new_connections(&listener);
    // Connections the kernel completed before the stop, and those whose handshake
    // completes within the window: their clients have sent their requests (or are
    // about to), and a closed listener would reset them.
    let mut window = std::pin::pin!(tokio::time::sleep(HANDSHAKES));
    loop {
        tokio::select! {
            biased;
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => spawn(stream),
                Err(e) => accept_failed(e, &connections, &mut backoff).await,
            },
            () = &mut window => break,
        }
    }
    // The reactor may not have told of the last arrivals yet: one sweep that asks the
    // kernel itself.
    let listener = listener.into_std()?;
    loop {
        match listener.accept() {
            // An accepted socket does not inherit the listener's non-blocking mode,
            // which tokio's stream needs.
            Ok((stream, _)) => match stream
                .set_nonblocking(true)
                .and_then(|()| TcpStream::from_std(stream))
            {
                Ok(stream) => spawn(stream),
                Err(e) => tracing::debug!("a queued connection: {e}"),
            },
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => {
                tracing::debug!("accepting the queued connections: {e}");
                break;
            }
        }
    }
    drop(listener);
    stop.send_replace(true);
    drop(running);
    // Every task holds a sender: `None` once the last one has finished.
    let _ = all_done.recv().await;
    Ok(())
}

/// Makes the kernel drop every SYN that reaches `listener`, so that no new handshake
/// begins (a client's SYN is retransmitted until the listener is gone, then refused),
/// while the ACKs that finish the handshakes already begun still pass. Not on other
/// systems: there the connections completed in the instant between the queue's last
/// accept and the close are reset.
fn refuse_new_connections(listener: &TcpListener) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Err(e) = drop_syns(listener) {
        tracing::debug!("filtering the listener's new connections: {e}");
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = listener;
}

/// Attaches [`DROP_SYN`] to a TCP socket.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn drop_syns(socket: &impl std::os::fd::AsFd) -> std::io::Result<()> {
    socket2::SockRef::from(socket).attach_filter(&DROP_SYN)
}

/// A classic BPF program for a TCP socket, which sees each segment from its TCP header
/// on: drop a segment whose flags hold SYN without ACK, keep any other whole.
#[cfg(any(target_os = "linux", target_os = "android"))]
const DROP_SYN: [socket2::SockFilter; 5] = {
    use socket2::SockFilter;
    const FLAGS: u32 = 13; // the TCP header's flags byte
    const SYN: u32 = 0x02;
    const ACK: u32 = 0x10;
    [
        SockFilter::new(0x30, 0, 0, FLAGS),     // BPF_LD | BPF_B | BPF_ABS
        SockFilter::new(0x54, 0, 0, SYN | ACK), // BPF_ALU | BPF_AND | BPF_K
        SockFilter::new(0x15, 0, 1, SYN),       // BPF_JMP | BPF_JEQ | BPF_K: SYN alone?
        SockFilter::new(0x06, 0, 0, 0),         // BPF_RET | BPF_K: drop
        SockFilter::new(0x06, 0, 0, u32::MAX),  // BPF_RET | BPF_K: keep it all
    ]
};

/// Serves one connection until it closes, within its limits; on the stop, lets it
/// finish its request (see the module doc). How it arrived goes into every request,
/// as [`Arrival`] (see `context::base_url`). `_running` tells [`serve`] when it ends;
/// `open` records its end and why.
async fn connection(
    stream: TcpStream,
    mut open: Open,
    app: Router,
    tls: Option<TlsAcceptor>,
    stopping: watch::Receiver<bool>,
    _running: mpsc::Sender<()>,
) {
    let limits = *open.limits();
    let local = stream
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)));
    // Stopping already, with nothing to read yet: the request may be on its way.
    let stopped = *stopping.borrow();
    if stopped
        && tokio::time::timeout(FIRST_BYTES, stream.readable())
            .await
            .is_err()
    {
        return;
    }
    let arrival = Arrival {
        local,
        https: tls.is_some(),
    };
    let activity = open.activity.clone();
    let service = TowerToHyperService::new(service(app, arrival, &activity, limits));
    let outcome = match tls {
        None => {
            let stream = Watched::new(crate::head_errors::Enveloped::new(stream), activity.clone());
            let connection = http1().serve_connection(TokioIo::new(stream), service);
            drive(connection, &activity, &limits, stopping).await
        }
        Some(acceptor) => {
            // The handshake is part of the first request's head, and has its time.
            let handshake = async {
                if speaks_plain_http(&stream).await {
                    https_required(stream, local).await;
                    return None;
                }
                Some(acceptor.accept(stream).await)
            };
            let stream = match tokio::time::timeout(limits.head_timeout, handshake).await {
                Ok(Some(Ok(stream))) => stream,
                Ok(None) => return,
                Ok(Some(Err(e))) => return tracing::debug!("a TLS handshake failed: {e}"),
                Err(_) => {
                    open.close_for(Closed::HeadTimeout);
                    return tracing::debug!("a TLS handshake took over {:?}", limits.head_timeout);
                }
            };
            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
            let stream = crate::head_errors::Enveloped::new(stream);
            let io = TokioIo::new(Watched::new(stream, activity.clone()));
            if h2 {
                activity.speaks_h2();
                let connection = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .max_concurrent_streams(H2_MAX_STREAMS)
                    .max_header_list_size(u32::try_from(MAX_HEADER_BYTES).unwrap_or(u32::MAX))
                    .serve_connection(io, service);
                drive(connection, &activity, &limits, stopping).await
            } else {
                let connection = http1().serve_connection(io, service);
                drive(connection, &activity, &limits, stopping).await
            }
        }
    };
    match outcome {
        Ok(why) => open.close_for(why),
        Err(e) => tracing::debug!("serving a connection: {e}"),
    }
}

/// HTTP/1.1 as allot serves it: a head of at most [`MAX_HEADER_BYTES`] (431 past
/// it). No timer of hyper's: the connection's clock ([`crate::limits`]) bounds each
/// phase.
fn http1() -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.max_buf_size(MAX_HEADER_BYTES);
    builder
}

/// The application as one connection serves it: each request carries its
/// [`Arrival`] and its body's deadline, and the connection's clock is told when a
/// request begins, when its answer is ready and when it has been sent.
fn service(
    app: Router,
    arrival: Arrival,
    activity: &Arc<Activity>,
    limits: ConnectionLimits,
) -> impl tower::Service<
    Request<Incoming>,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<axum::response::Response, std::convert::Infallible>> + Send,
> + Clone {
    let began = activity.clone();
    let answered = activity.clone();
    app.map_request(move |req: Request<Incoming>| {
        began.request_began();
        let deadline = BodyDeadline::after(limits.body_timeout);
        let mut req = req.map(|body| Body::new(TimedBody::new(Body::new(body), deadline.at())));
        req.extensions_mut().insert(arrival);
        req.extensions_mut().insert(deadline);
        req
    })
    .map_response(move |response: axum::response::Response| {
        answered.answered();
        let activity = answered.clone();
        response.map(|body| Body::new(SentBody::new(body, activity)))
    })
}

/// Whether a connection to the HTTPS port begins with an HTTP method rather than a
/// TLS record (whose first byte, a handshake's, is 0x16).
async fn speaks_plain_http(stream: &TcpStream) -> bool {
    let mut first = [0u8; 1];
    matches!(
        tokio::time::timeout(HANDSHAKE, stream.peek(&mut first)).await,
        Ok(Ok(1)) if first[0].is_ascii_uppercase()
    )
}

/// Answers a plain-HTTP request on the HTTPS port with a 400 that names the scheme
/// (nginx answers its 497 to the same mistake), then closes the connection.
async fn https_required(stream: TcpStream, local: SocketAddr) {
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let authority = req
            .headers()
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok())
            .map_or_else(|| local.to_string(), str::to_owned);
        std::future::ready(Ok::<_, std::convert::Infallible>(
            crate::error::https_required(&authority),
        ))
    });
    let served = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    if let Err(e) = tokio::time::timeout(HANDSHAKE, served)
        .await
        .unwrap_or(Ok(()))
    {
        tracing::debug!("answering plain HTTP on the HTTPS port: {e}");
    }
}

/// Drives one HTTP connection to its end, or until its clock runs out (then it is
/// dropped, which closes it: no request on it is being handled); once the stop
/// comes, tells it to stop when its request has begun to arrive (see the module doc).
async fn drive<C: GracefulConnection>(
    connection: C,
    activity: &Activity,
    limits: &ConnectionLimits,
    mut stopping: watch::Receiver<bool>,
) -> Result<Closed, C::Error> {
    let mut connection = std::pin::pin!(connection);
    let expired = activity.expired(limits);
    let mut expired = std::pin::pin!(expired);
    tokio::select! {
        // The connection first, so that it has read what has arrived before it is
        // told to stop.
        biased;
        outcome = connection.as_mut() => outcome.map(|()| Closed::Ended),
        why = expired.as_mut() => Ok(why),
        // The stop is the one change the channel ever sees; the clone has not seen
        // it even if it came before this task began.
        _ = stopping.changed() => {
            // hyper would close at once a connection that has read nothing: its
            // client may be about to write. It is served on until the first bytes
            // come (then the request under way is finished) or FIRST_BYTES passes.
            let waited = tokio::select! {
                biased;
                outcome = connection.as_mut() => Some(outcome.map(|()| Closed::Ended)),
                why = expired.as_mut() => Some(Ok(why)),
                () = activity.first_bytes() => None,
                () = tokio::time::sleep(FIRST_BYTES) => None,
            };
            match waited {
                Some(outcome) => outcome,
                None => {
                    connection.as_mut().graceful_shutdown();
                    tokio::select! {
                        biased;
                        outcome = connection.as_mut() => outcome.map(|()| Closed::Ended),
                        why = expired.as_mut() => Ok(why),
                    }
                }
            }
        }
    }
}

/// A connection's stream that tells the connection's clock of what it reads.
struct Watched<S> {
    stream: S,
    activity: Arc<Activity>,
}

impl<S> Watched<S> {
    fn new(stream: S, activity: Arc<Activity>) -> Self {
        Watched { stream, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        self.activity.read(buf.filled().len() - before);
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
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

/// A failed accept: a connection that went away before it was accepted is nothing;
/// anything else (out of file descriptors) is counted, frees a descriptor by closing
/// the connection that has waited longest, and gets a growing pause, so that the loop
/// neither spins nor stops.
async fn accept_failed(e: std::io::Error, connections: &Connections, backoff: &mut Backoff) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    connections.accept_failed(&e);
    tokio::time::sleep(backoff.pause()).await;
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// The filter ignores a new handshake: the client's connect does not complete.
    #[tokio::test]
    async fn the_filter_drops_new_handshakes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        refuse_new_connections(&listener);
        let connect = tokio::task::spawn_blocking(move || {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300))
        });
        let outcome = connect.await.unwrap();
        assert!(
            outcome
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::TimedOut),
            "a SYN passed the filter: {outcome:?}"
        );
    }

    /// The filter reads the flags where they are: segments with ACK set (every one
    /// after the SYN) pass, so data still reaches a socket that runs it.
    #[test]
    fn the_filter_keeps_what_follows_a_handshake() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut served, _) = listener.accept().unwrap();
        drop_syns(&served).unwrap();
        served
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        client.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        served.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
    }
}
