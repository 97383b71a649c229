//! Limits on connections: how long a client may take over each part of an exchange,
//! and how many connections may be open at once (issue 46).
//!
//! Placement is served behind Apache or uWSGI, whose timeouts bound a client that
//! sends half a request and waits. allot is its own HTTP server, so it bounds them
//! itself; without this, one client on the network could hold every file descriptor
//! and as much memory as it liked.
//!
//! **A connection's clock** ([`Activity`], one per connection, told of its reads by
//! `graceful`'s stream and of its requests and answers by the service around the
//! application) is in one of four phases, each with its limit ([`ConnectionLimits`]):
//!
//! | phase | from | until | limit |
//! |---|---|---|---|
//! | a request head | acceptance, or the first byte after an answer | the head is read | `head_timeout` |
//! | a request body | the head is read | the body is read | `body_timeout` (the handler answers 408) |
//! | handling | the body is read | the answer is ready | none: the server's own time |
//! | an answer | the answer is ready | its last byte is handed to the socket | `body_timeout` |
//! | idle (keep-alive) | an answer is sent | the next request's first byte | `idle_timeout` |
//!
//! A connection past its limit is closed; nothing is lost, since no request on it is
//! being handled (a body that did not come in time is answered 408 by the handler
//! that waited for it, [`BodyDeadline`]). HTTP/2 multiplexes, and its frames flow
//! while no request does, so there only the idle limit applies (from its last
//! answer; the head limit until its first request); its streams are capped
//! ([`H2_MAX_STREAMS`]) and each stream's window bounds what an answer holds.
//!
//! **The cap** ([`Connections`], one per listener): once `max_connections` are open,
//! the accept loop makes room by closing the connection that has waited longest for
//! a request (idle, or its head unfinished), if it has waited at least
//! [`shed_grace`]; a connection with a request under way is never closed for room.
//! When every open connection is busy, or has only just been accepted, new
//! connections wait in the kernel's listen queue until one closes. So a flood of
//! connections that send nothing cannot keep out a client that sends its request at
//! once, and memory stays bounded by the cap. The cap is kept below the process's
//! open-file limit, less [`fd_reserve`] for the store and the outgoing connections
//! (Keystone, the cluster's writer), so that the connections alone never exhaust it;
//! an accept that fails anyway (out of descriptors) is retried after a growing pause
//! ([`Backoff`]), with the longest-waiting connection closed to free one.
//!
//! **What happened is visible**: `/metrics` has the connections open, accepted,
//! closed by reason, and accept errors ([`Connections::register`]); the log has one
//! line per reason at most every [`LOG_EVERY`], counting the closes since the last.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;

/// The default [`ConnectionLimits::head_timeout`]: a request head is a few hundred
/// bytes, which a client on the same network sends in a millisecond; ten seconds
/// leave room for a loaded client (Apache's `RequestReadTimeout` gives 20 to 40).
pub const DEFAULT_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The default [`ConnectionLimits::body_timeout`]: the largest body allot reads
/// ([`crate::MAX_BODY_BYTES`]) at half a megabyte a second.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The default [`ConnectionLimits::idle_timeout`]: nginx's `keepalive_timeout`,
/// longer than the minute between a compute node's periodic reports, so that its
/// connection is reused rather than made anew each time.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(75);
/// The default [`ConnectionLimits::max_connections`]: a compute node's report
/// client keeps one or two connections, so this serves a few thousand hosts per
/// node, in some 130 MB at worst (about 31 KB a connection, measured in
/// docs/operations.md, "Connection limits").
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// The largest request head (HTTP/1) or header list (HTTP/2): Apache's limits take
/// a request line of 8 KB and 100 fields of 8 KB, and a Keystone token is a few
/// hundred bytes; a longer head is answered 431.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// The most requests one HTTP/2 connection may have under way (RFC 9113 asks for at
/// least 100; nginx allows 128).
pub const H2_MAX_STREAMS: u32 = 100;
/// How often, at most, the log tells of connections closed for one reason.
pub const LOG_EVERY: Duration = Duration::from_secs(5);

/// The listen queue's length asked for (the kernel caps it at
/// `net.core.somaxconn`, 4,096 on current Linux): connections completed while the
/// server is at its cap, or busy accepting a burst, wait there. Past a full queue
/// the kernel drops handshakes, and a client may even believe itself connected to a
/// connection no one will ever accept; std's and tokio's 128 or 1,024 fill up under
/// a burst that the server would have taken in a moment.
pub const LISTEN_BACKLOG: i32 = 4096;

/// A listening socket on `addr` with a [`LISTEN_BACKLOG`]-long queue (and
/// `SO_REUSEADDR`, as tokio's `bind` sets, so that a restart can bind at once).
pub fn listen(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    #[cfg(unix)]
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    tokio::net::TcpListener::from_std(socket.into())
}

/// What the operator set (`allot serve --head-timeout` and the others).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// How long a request head may take, from the connection's acceptance or, on a
    /// kept-alive connection, from its first byte.
    pub head_timeout: Duration,
    /// How long a request body may take once its head is read, and an answer once
    /// it is ready.
    pub body_timeout: Duration,
    /// How long a connection may stay open between an answer and the next request.
    pub idle_timeout: Duration,
    /// The most connections open at once (kept below the open-file limit).
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            head_timeout: DEFAULT_HEAD_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Why a connection ended, for `/metrics` and the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// The client closed it, or asked for it to close, or the server stopped.
    Ended,
    /// Its request head took longer than `head_timeout`.
    HeadTimeout,
    /// Its answer was not taken within `body_timeout`.
    BodyTimeout,
    /// Idle for longer than `idle_timeout`.
    IdleTimeout,
    /// Closed to make room for a new connection at the cap.
    Shed,
}

impl Closed {
    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            Closed::Ended => "ended",
            Closed::HeadTimeout => "head_timeout",
            Closed::BodyTimeout => "body_timeout",
            Closed::IdleTimeout => "idle_timeout",
            Closed::Shed => "shed",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The process's open-file limit (soft), if it can be read.
pub fn open_file_limit() -> Option<u64> {
    rlimit::getrlimit(rlimit::Resource::NOFILE)
        .ok()
        .map(|(soft, _)| soft)
}

/// Descriptors left to everything but the listener's connections: the store's
/// files or connections, the outgoing clients, the log. A quarter of a small limit.
pub fn fd_reserve(limit: u64) -> u64 {
    (limit / 4).clamp(16, 256)
}

/// The cap that applies: the configured one, kept below the open-file limit.
pub fn effective_cap(configured: usize, open_files: Option<u64>) -> usize {
    let room = open_files.map_or(usize::MAX, |limit| {
        usize::try_from(limit.saturating_sub(fd_reserve(limit))).unwrap_or(usize::MAX)
    });
    configured.min(room).max(1)
}

/// How long a waiting connection is kept at the cap before it may be closed for
/// room: a client that has only just connected is about to send its request. Short,
/// because it also sets how fast a flood that fills the listen queue is worked
/// through (a cap's worth per grace): at 250 ms and a cap of 768, the 4,096
/// connections a full queue holds are taken in under 1.5 s, so that a client queued
/// behind them is answered within the head's limit.
pub fn shed_grace(limits: &ConnectionLimits) -> Duration {
    (limits.head_timeout / 8).min(Duration::from_millis(250))
}

/// The connections of one listener, their cap, and what became of them. Clones
/// share everything.
#[derive(Clone)]
pub struct Connections(Arc<Shared>);

struct Shared {
    limits: ConnectionLimits,
    cap: usize,
    /// What the waiting times of [`Activity`] count from.
    epoch: Instant,
    table: Mutex<HashMap<u64, Arc<Activity>>>,
    next_id: AtomicU64,
    open: AtomicUsize,
    /// A connection closed: room for the next.
    room: Notify,
    open_gauge: Gauge,
    cap_gauge: Gauge,
    accepted: Counter,
    closed: Family<ReasonLabels, Counter>,
    accept_errors: Counter,
    logs: [Throttle; 6],
}

/// The `reason` label of `allot_connections_closed`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("limits", &self.0.limits)
            .field("cap", &self.0.cap)
            .field("open", &self.open())
            .finish()
    }
}

impl Default for Connections {
    fn default() -> Self {
        Connections::new(ConnectionLimits::default())
    }
}

impl Connections {
    /// A listener's connections under `limits`, capped below the open-file limit.
    pub fn new(limits: ConnectionLimits) -> Self {
        let cap = effective_cap(limits.max_connections, open_file_limit());
        if cap < limits.max_connections {
            tracing::warn!(
                max_connections = limits.max_connections,
                cap,
                open_files = open_file_limit(),
                "the open-file limit leaves room for fewer connections than \
                 max_connections: the cap is lower (raise LimitNOFILE or ulimit -n)"
            );
        }
        let cap_gauge = Gauge::default();
        cap_gauge.set(i64::try_from(cap).unwrap_or(i64::MAX));
        Connections(Arc::new(Shared {
            limits,
            cap,
            epoch: Instant::now(),
            table: Mutex::default(),
            next_id: AtomicU64::new(0),
            open: AtomicUsize::new(0),
            room: Notify::new(),
            open_gauge: Gauge::default(),
            cap_gauge,
            accepted: Counter::default(),
            closed: Family::default(),
            accept_errors: Counter::default(),
            logs: Default::default(),
        }))
    }

    /// The limits in force.
    pub fn limits(&self) -> &ConnectionLimits {
        &self.0.limits
    }

    /// The cap in force.
    pub fn cap(&self) -> usize {
        self.0.cap
    }

    /// How many connections are open.
    pub fn open(&self) -> usize {
        self.0.open.load(Ordering::Acquire)
    }

    /// Resolves when a new connection may be accepted: at once below the cap; at the
    /// cap, once the connection that has waited longest (past [`shed_grace`]) has
    /// been closed for it, or another has closed.
    pub async fn admit(&self) {
        let grace = shed_grace(&self.0.limits);
        loop {
            let room = self.0.room.notified();
            let mut room = std::pin::pin!(room);
            room.as_mut().enable();
            if self.open() < self.0.cap {
                return;
            }
            match self.longest_waiting() {
                Some((activity, waited)) if waited >= grace => {
                    activity.shed();
                    // Its task closes it at once; the bound is a safety net.
                    let _ = tokio::time::timeout(Duration::from_millis(100), room).await;
                }
                Some((_, waited)) => {
                    let _ = tokio::time::timeout(grace - waited, room).await;
                }
                None => room.await,
            }
        }
    }

    /// After a failed accept (descriptors exhausted): closes the connection that has
    /// waited longest, whatever its grace, to free one, and counts the failure.
    pub fn accept_failed(&self, error: &std::io::Error) {
        self.0.accept_errors.inc();
        if let Some((activity, _)) = self.longest_waiting() {
            activity.shed();
        }
        let (n, since) = self.0.logs[5].note();
        if n > 0 {
            tracing::warn!(
                "accepting connections failed {n} times in the last {since:.0?} \
                 ({error}): pausing, and closing the longest-waiting connections"
            );
        }
    }

    /// The open connection, not yet told to close, that has waited longest for a
    /// request, and for how long. One pass over the atomics of every connection, so
    /// cheap at any cap; only made at the cap.
    fn longest_waiting(&self) -> Option<(Arc<Activity>, Duration)> {
        let table = self.0.table.lock().unwrap_or_else(|e| e.into_inner());
        let oldest = table
            .values()
            .filter(|a| !a.shed.load(Ordering::Acquire))
            .min_by_key(|a| a.waiting_since.load(Ordering::Acquire))?;
        let since = oldest.waiting_since.load(Ordering::Acquire);
        if since == BUSY {
            return None;
        }
        let waited = self.elapsed().saturating_sub(Duration::from_millis(since));
        Some((oldest.clone(), waited))
    }

    fn elapsed(&self) -> Duration {
        self.0.epoch.elapsed()
    }

    /// Records a new connection; dropping the guard records its end.
    pub fn accepted(&self) -> Open {
        let id = self.0.next_id.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let activity = Arc::new(Activity {
            phase: Mutex::new(Phase {
                in_flight: 0,
                handling: 0,
                since: now,
                head_begun: false,
                served: false,
            }),
            changed: Notify::new(),
            waiting_since: AtomicU64::new(millis(now.duration_since(self.0.epoch))),
            epoch: self.0.epoch,
            shed: AtomicBool::new(false),
            read_any: AtomicBool::new(false),
            first_read: Notify::new(),
            h2: AtomicBool::new(false),
        });
        self.0
            .table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, activity.clone());
        let open = self.0.open.fetch_add(1, Ordering::AcqRel) + 1;
        self.0
            .open_gauge
            .set(i64::try_from(open).unwrap_or(i64::MAX));
        self.0.accepted.inc();
        Open {
            connections: self.clone(),
            id,
            activity,
            closed: Closed::Ended,
        }
    }

    /// The series of `/metrics`.
    pub(crate) fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "allot_connections_open",
            "Connections open on the API's listener",
            self.0.open_gauge.clone(),
        );
        registry.register(
            "allot_connections_max",
            "The cap on open connections in force (max_connections, kept below the \
             open-file limit)",
            self.0.cap_gauge.clone(),
        );
        registry.register(
            "allot_connections_accepted",
            "Connections accepted on the API's listener",
            self.0.accepted.clone(),
        );
        registry.register(
            "allot_connections_closed",
            "Connections closed, by reason: ended (by the client, or after its \
             answer), head_timeout, body_timeout, idle_timeout, shed (closed for \
             room at the cap)",
            self.0.closed.clone(),
        );
        registry.register(
            "allot_connection_accept_errors",
            "Accepts that failed (descriptors exhausted), each followed by a pause",
            self.0.accept_errors.clone(),
        );
    }

    fn closed(&self, id: u64, why: Closed) {
        self.0
            .table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        let open = self.0.open.fetch_sub(1, Ordering::AcqRel) - 1;
        self.0
            .open_gauge
            .set(i64::try_from(open).unwrap_or(i64::MAX));
        self.0
            .closed
            .get_or_create(&ReasonLabels {
                reason: why.label(),
            })
            .inc();
        self.0.room.notify_one();
        if why == Closed::Ended {
            return;
        }
        let (n, since) = self.0.logs[why.index()].note();
        if n == 0 {
            return;
        }
        let limits = &self.0.limits;
        match why {
            Closed::IdleTimeout => tracing::debug!(
                "closed {n} idle connections in the last {since:.0?} (idle_timeout {:?})",
                limits.idle_timeout
            ),
            Closed::Shed => tracing::warn!(
                "closed {n} waiting connections in the last {since:.0?} to make room: \
                 {} connections are open, the cap",
                self.0.cap
            ),
            Closed::HeadTimeout | Closed::BodyTimeout => tracing::info!(
                "closed {n} connections in the last {since:.0?}: {} (head_timeout {:?}, \
                 body_timeout {:?})",
                why.label(),
                limits.head_timeout,
                limits.body_timeout
            ),
            Closed::Ended => {}
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX - 1)
}

/// `Activity::waiting_since` while a request is under way.
const BUSY: u64 = u64::MAX;

/// One log line per reason at most every [`LOG_EVERY`].
#[derive(Default)]
struct Throttle {
    /// Events since the last line.
    pending: AtomicU64,
    last: Mutex<Option<Instant>>,
}

impl Throttle {
    /// Counts an event; returns how many to report now (0: not yet), and over how
    /// long.
    fn note(&self) -> (u64, Duration) {
        self.pending.fetch_add(1, Ordering::Relaxed);
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        match *last {
            Some(at) if now.duration_since(at) < LOG_EVERY => (0, Duration::ZERO),
            at => {
                *last = Some(now);
                let since = at.map_or(Duration::ZERO, |at| now.duration_since(at));
                (self.pending.swap(0, Ordering::Relaxed), since)
            }
        }
    }
}

/// An open connection, recorded in its listener's [`Connections`]; dropped when the
/// connection ends.
pub struct Open {
    connections: Connections,
    id: u64,
    /// The connection's clock.
    pub activity: Arc<Activity>,
    closed: Closed,
}

impl Open {
    /// Records why the connection is being closed (else: [`Closed::Ended`]).
    pub fn close_for(&mut self, why: Closed) {
        self.closed = why;
    }

    /// The limits in force.
    pub fn limits(&self) -> &ConnectionLimits {
        self.connections.limits()
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.connections.closed(self.id, self.closed);
    }
}

/// One connection's clock (see the module doc): what phase it is in and since when.
pub struct Activity {
    phase: Mutex<Phase>,
    /// Told of every change of phase (one waiter: the connection's task).
    changed: Notify,
    /// Milliseconds from the listener's epoch since which the connection has waited
    /// for a request, or [`BUSY`]: read without a lock when choosing whom to shed.
    waiting_since: AtomicU64,
    epoch: Instant,
    shed: AtomicBool,
    read_any: AtomicBool,
    first_read: Notify,
    h2: AtomicBool,
}

#[derive(Debug)]
struct Phase {
    /// Requests whose answer has not been sent.
    in_flight: u32,
    /// Requests whose answer is not ready.
    handling: u32,
    /// When the current phase began.
    since: Instant,
    /// Bytes of a request head have come since the last answer.
    head_begun: bool,
    /// A request has been read on this connection.
    served: bool,
}

impl Activity {
    fn lock(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The connection speaks HTTP/2 (only the idle limit applies).
    pub fn speaks_h2(&self) {
        self.h2.store(true, Ordering::Release);
    }

    /// `n` bytes were read from the connection.
    pub fn read(&self, n: usize) {
        if n == 0 {
            return;
        }
        if !self.read_any.swap(true, Ordering::AcqRel) {
            self.first_read.notify_waiters();
        }
        let mut phase = self.lock();
        if phase.in_flight == 0 && !phase.head_begun {
            phase.head_begun = true;
            // The first request's head is timed from the acceptance.
            if phase.served {
                phase.since = Instant::now();
                self.changed.notify_one();
            }
        }
    }

    /// A request's head was read: it goes to the application.
    pub fn request_began(&self) {
        let mut phase = self.lock();
        phase.in_flight += 1;
        phase.handling += 1;
        phase.head_begun = false;
        phase.served = true;
        self.waiting_since.store(BUSY, Ordering::Release);
        self.changed.notify_one();
    }

    /// A request's answer is ready: its sending is timed.
    pub fn answered(&self) {
        let mut phase = self.lock();
        phase.handling = phase.handling.saturating_sub(1);
        phase.since = Instant::now();
        self.changed.notify_one();
    }

    /// A request's answer has been sent (or dropped with the connection).
    pub fn answer_sent(&self) {
        let mut phase = self.lock();
        phase.in_flight = phase.in_flight.saturating_sub(1);
        let now = Instant::now();
        phase.since = now;
        if phase.in_flight == 0 {
            self.waiting_since
                .store(millis(now.duration_since(self.epoch)), Ordering::Release);
        }
        self.changed.notify_one();
    }

    /// Asks the connection's task to close it, for room.
    fn shed(&self) {
        self.shed.store(true, Ordering::Release);
        self.changed.notify_one();
    }

    /// When the current phase's limit runs out, and what closes the connection then.
    fn deadline(&self, limits: &ConnectionLimits) -> Option<(Instant, Closed)> {
        let phase = self.lock();
        let (limit, why) = if phase.in_flight == 0 {
            if !phase.served || (phase.head_begun && !self.h2.load(Ordering::Acquire)) {
                (limits.head_timeout, Closed::HeadTimeout)
            } else {
                (limits.idle_timeout, Closed::IdleTimeout)
            }
        } else if phase.handling == 0 {
            (limits.body_timeout, Closed::BodyTimeout)
        } else {
            return None;
        };
        Some((phase.since + limit, why))
    }

    /// Resolves when the connection is past its phase's limit, or is to be shed.
    pub async fn expired(&self, limits: &ConnectionLimits) -> Closed {
        loop {
            let changed = self.changed.notified();
            if self.shed.load(Ordering::Acquire) {
                return Closed::Shed;
            }
            match self.deadline(limits) {
                Some((at, why)) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at.into()) => {
                            if self.deadline(limits) == Some((at, why)) {
                                return why;
                            }
                        }
                        () = changed => {}
                    }
                }
                None => changed.await,
            }
        }
    }

    /// Resolves once the connection has read some bytes (`graceful`'s stop waits
    /// for a request that may be on its way).
    pub async fn first_bytes(&self) {
        let notified = self.first_read.notified();
        let mut notified = std::pin::pin!(notified);
        // Registered before the check, so that a read between the two still wakes it.
        notified.as_mut().enable();
        if !self.read_any.load(Ordering::Acquire) {
            notified.await;
        }
    }
}

/// On a request: when its body must have come. A handler whose body read failed
/// past it answers 408 ([`crate::request`]).
#[derive(Debug, Clone, Copy)]
pub struct BodyDeadline {
    at: Instant,
    limit: Duration,
}

impl BodyDeadline {
    /// `limit` from now.
    pub fn after(limit: Duration) -> Self {
        BodyDeadline {
            at: Instant::now() + limit,
            limit,
        }
    }

    /// When it passes.
    pub fn at(&self) -> Instant {
        self.at
    }

    /// The limit it was set with.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// Whether it has passed.
    pub fn passed(&self) -> bool {
        Instant::now() >= self.at
    }
}

/// A request body that fails once its deadline passes.
pub struct TimedBody {
    body: Body,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl TimedBody {
    /// `body`, to be read by `deadline` (no timer for a body that is empty).
    pub fn new(body: Body, deadline: Instant) -> Self {
        let sleep = (!HttpBody::is_end_stream(&body))
            .then(|| Box::pin(tokio::time::sleep_until(deadline.into())));
        TimedBody { body, sleep }
    }
}

/// The error a [`TimedBody`] ends with.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within the time limit")]
pub struct BodyTimedOut;

impl HttpBody for TimedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        let late = self
            .sleep
            .as_mut()
            .is_some_and(|sleep| sleep.as_mut().poll(cx).is_ready());
        if late {
            return Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// An answer's body that tells its connection's clock when it has been sent (hyper
/// drops it then, or when the connection goes).
pub struct SentBody {
    body: Body,
    activity: Arc<Activity>,
}

impl SentBody {
    /// `body`, whose end is told to `activity`.
    pub fn new(body: Body, activity: Arc<Activity>) -> Self {
        SentBody { body, activity }
    }
}

impl Drop for SentBody {
    fn drop(&mut self) {
        self.activity.answer_sent();
    }
}

impl HttpBody for SentBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The pause after a failed accept: 10 ms, doubling to a second, back to 10 ms after
/// an accept that works.
#[derive(Debug, Default)]
pub struct Backoff(Option<Duration>);

impl Backoff {
    /// The next pause.
    pub fn pause(&mut self) -> Duration {
        let next = self.0.map_or(Duration::from_millis(10), |d| {
            (d * 2).min(Duration::from_secs(1))
        });
        self.0 = Some(next);
        next
    }

    /// An accept worked.
    pub fn reset(&mut self) {
        self.0 = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            head_timeout: Duration::from_secs(3),
            body_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(7),
            max_connections: 10,
        }
    }

    fn limit_of(activity: &Activity) -> Option<(Duration, Closed)> {
        let since = activity.lock().since;
        activity
            .deadline(&limits())
            .map(|(at, why)| (at.duration_since(since), why))
    }

    /// Each phase has its limit: the head from acceptance, then none while handled,
    /// the body limit while the answer goes out, then idle, then the head again
    /// from the next request's first byte.
    #[test]
    fn each_phase_has_its_limit() {
        let connections = Connections::new(limits());
        let open = connections.accepted();
        let a = &open.activity;
        let head = Some((Duration::from_secs(3), Closed::HeadTimeout));
        assert_eq!(limit_of(a), head);
        a.read(10);
        assert_eq!(limit_of(a), head, "the first head is timed from acceptance");
        a.request_began();
        assert_eq!(limit_of(a), None, "no limit on the server's own time");
        a.answered();
        assert_eq!(
            limit_of(a),
            Some((Duration::from_secs(5), Closed::BodyTimeout))
        );
        a.answer_sent();
        assert_eq!(
            limit_of(a),
            Some((Duration::from_secs(7), Closed::IdleTimeout))
        );
        a.read(0);
        assert_eq!(
            limit_of(a),
            Some((Duration::from_secs(7), Closed::IdleTimeout))
        );
        a.read(1);
        assert_eq!(limit_of(a), head);
        // HTTP/2's frames flow while no request does: only the idle limit.
        a.speaks_h2();
        assert_eq!(
            limit_of(a),
            Some((Duration::from_secs(7), Closed::IdleTimeout))
        );
    }

    /// Dropping a connection's guard records it closed, for its reason.
    #[test]
    fn closes_are_counted_by_reason() {
        let connections = Connections::new(limits());
        let first = connections.accepted();
        let mut second = connections.accepted();
        assert_eq!(connections.open(), 2);
        second.close_for(Closed::HeadTimeout);
        drop(second);
        drop(first);
        assert_eq!(connections.open(), 0);
        let mut registry = prometheus_client::registry::Registry::default();
        connections.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("allot_connections_closed_total{reason=\"head_timeout\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("allot_connections_closed_total{reason=\"ended\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("allot_connections_accepted_total 2"),
            "{text}"
        );
        assert!(text.contains("allot_connections_open 0"), "{text}");
    }

    fn quick() -> ConnectionLimits {
        ConnectionLimits {
            head_timeout: Duration::from_millis(800),
            body_timeout: Duration::from_millis(300),
            idle_timeout: Duration::from_millis(400),
            max_connections: 2,
        }
    }

    fn poll_once<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(std::task::Waker::noop()))
    }

    /// At the cap, the connection that has waited longest is shed, never one with a
    /// request under way, and only past the grace (100 ms here).
    #[tokio::test]
    async fn the_cap_sheds_the_longest_waiting() {
        let connections = Connections::new(quick());
        let busy = connections.accepted();
        busy.activity.request_began();
        let waiting = connections.accepted();
        let admitted = connections.admit();
        let mut admitted = std::pin::pin!(admitted);
        assert!(poll_once(admitted.as_mut()).is_pending());
        assert!(!waiting.activity.shed.load(Ordering::Acquire), "too fresh");
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(poll_once(admitted.as_mut()).is_pending());
        assert!(waiting.activity.shed.load(Ordering::Acquire));
        assert!(!busy.activity.shed.load(Ordering::Acquire));
        assert_eq!(waiting.activity.expired(&quick()).await, Closed::Shed);
        drop(waiting);
        admitted.await;
        assert_eq!(connections.open(), 1);
    }

    /// A connection past its limit expires; while handled, it does not.
    #[tokio::test]
    async fn a_connection_expires_past_its_limit() {
        let connections = Connections::new(quick());
        let open = connections.accepted();
        let a = &open.activity;
        let limits = quick();
        let expired = a.expired(&limits);
        let mut expired = std::pin::pin!(expired);
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(poll_once(expired.as_mut()).is_pending());
        a.request_began();
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert!(
            poll_once(expired.as_mut()).is_pending(),
            "handled: no limit"
        );
        a.answered();
        a.answer_sent();
        let idle = Instant::now();
        assert_eq!(expired.await, Closed::IdleTimeout);
        assert!(idle.elapsed() >= Duration::from_millis(400));
    }

    /// A body that never comes.
    struct Never;

    impl HttpBody for Never {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Pending
        }
    }

    /// A body that does not come in time ends in an error; one that does is read.
    #[tokio::test]
    async fn a_late_body_fails() {
        use http_body_util::BodyExt;
        let deadline = Instant::now() + Duration::from_millis(100);
        let error = TimedBody::new(Body::new(Never), deadline)
            .collect()
            .await
            .unwrap_err();
        assert!(Instant::now() >= deadline);
        assert!(error.to_string().contains("time limit"), "{error}");
        let on_time = TimedBody::new(Body::from("{}"), deadline);
        assert_eq!(on_time.collect().await.unwrap().to_bytes(), "{}");
    }

    /// The cap stays below the open-file limit, with room for the rest.
    #[test]
    fn the_cap_leaves_room_below_the_open_file_limit() {
        assert_eq!(effective_cap(4096, Some(1024)), 768);
        assert_eq!(effective_cap(4096, Some(65_536)), 4096);
        assert_eq!(effective_cap(100, Some(1024)), 100);
        assert_eq!(effective_cap(4096, Some(32)), 16);
        assert_eq!(effective_cap(4096, None), 4096);
    }

    /// 10 ms doubling to a second, and back after an accept that works.
    #[test]
    fn backoff_grows_to_a_second() {
        let mut b = Backoff::default();
        let pauses: Vec<_> = (0..9).map(|_| b.pause().as_millis()).collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.reset();
        assert_eq!(b.pause().as_millis(), 10);
    }

    /// One line, then none until LOG_EVERY has passed, then the count since.
    #[test]
    fn the_log_is_throttled() {
        let t = Throttle::default();
        assert_eq!(t.note().0, 1);
        assert_eq!(t.note().0, 0);
        assert_eq!(t.note().0, 0);
        *t.last.lock().unwrap() = Some(Instant::now() - LOG_EVERY);
        assert_eq!(t.note().0, 3);
    }
}
