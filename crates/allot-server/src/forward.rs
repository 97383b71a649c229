//! Writes forwarded to the cluster's writer (several nodes on one PostgreSQL
//! database, issue 25).
//!
//! Every node's writer takes the change log's lock for each batch, so nodes that
//! write for themselves split one lock's rate between them, each with a third of the
//! batch. Instead, the node that holds the writer's lease (`allot_store::Lease`,
//! whose thread sets [`Forwarding::set_role`]) batches the writes of every node:
//! the others send it theirs over HTTP, as the client sent them, marked with
//! [`FORWARDED`]. This is only a matter of speed, never of correctness: the writer
//! still plans each batch under the log's lock against its latest commits, so a
//! node that writes for itself (no writer known yet, or the writer out of reach)
//! can never over-commit either.
//!
//! - **Which requests:** every method but `GET`, `HEAD` and `OPTIONS`, and but the
//!   reads posted for their long input ([`POSTED_READS`]), with a body
//!   of a stated length within [`crate::MAX_BODY_BYTES`] (anything else is handled
//!   here, where the usual limits answer it). The caller has been authenticated
//!   here already (this layer runs inside `context::around`).
//! - **Who the writer trusts** (issue 46): only another node of the cluster. The
//!   forward carries, in [`FORWARDED`], the identity authenticated here, proven
//!   with the cluster key ([`crate::cluster::Trust::prove`]: an HMAC over it, the
//!   method, path and query, the body's hash, the time and a nonce). The writer
//!   takes that identity without authenticating the request again (a Keystone
//!   token is validated once per write) and applies the policy to it. A request
//!   whose [`FORWARDED`] proves nothing (a client that sends the header, a forged
//!   or replayed proof, a stale one) is any client's: authenticated from its own
//!   headers, and forwarded with a proof if it arrived at a node that is not the
//!   writer.
//! - **The writer's answer** is passed back as it is (its request id included,
//!   which the writer's log names), and carries [`CURSOR`], the last commit its view
//!   holds once the write is answered. The forwarding node answers at once and notes
//!   that commit as owed; a read it handles later waits (at most the staleness bound)
//!   until its own view holds every commit it has answered so far, so that a read
//!   sent here after the answer sees the write, as it would on the node that wrote
//!   it. The wait is the read's, not the write's: under a storm of writes the
//!   clients' next writes do not wait for this node to follow the log, and a read
//!   waits only while the view lags what was answered (the follow takes about a
//!   millisecond).
//! - **When the writer cannot be reached** (no connection could be made: it
//!   stopped, or lost its lease a moment ago), the write is handled here. When the
//!   connection fails after the request went out, the write may or may not have
//!   happened, so it is not tried again: the answer is 503, as for a database
//!   connection lost during a write.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use allot_store::{Cursor, WriterRole};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::auth::Identity;
use crate::error::ApiError;
use crate::AppState;

/// Carries a forwarded write's proof ([`crate::cluster::Trust::prove`]): the
/// identity the forwarding node authenticated, under the cluster key's HMAC. A
/// request whose proof holds is handled where it arrives, whoever that node
/// thinks the writer is (so a request is forwarded once at most), as the identity
/// the proof names; any other request that carries it is any client's.
pub const FORWARDED: &str = "x-allot-forwarded";

/// Marks a request whose [`FORWARDED`] proof held (an extension, set by
/// [`proven`]).
#[derive(Debug, Clone, Copy)]
struct Proven;

/// On the answer to a forwarded request: the last commit the writer's view holds.
pub const CURSOR: &str = "x-allot-cursor";

/// How long a connection to the writer may take to open before the write is
/// handled here instead.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Headers that belong to one connection (RFC 9110, 7.6.1): not passed on.
const NOT_PASSED_ON: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Marks an answer the writer made (an extension of the response): it is finished
/// already, error envelope and request id included, so `context::around` leaves it
/// as it is (the request id is the writer's, which its log names).
#[derive(Debug, Clone, Copy)]
pub struct Answered;

/// This node's view of who writes for the cluster, and the client that forwards to
/// it. The default knows no writer: every write is handled here (one node, or
/// SQLite). Clones share everything.
#[derive(Clone)]
pub struct Forwarding {
    role: Arc<RwLock<WriterRole>>,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    counts: Family<OutcomeLabels, Counter>,
    /// 1 while this node holds the lease, for `/metrics`.
    writer: Gauge,
    /// Whether another node has forwarded a write here since this one started.
    forwarded_to: Arc<AtomicBool>,
    /// The last commit of a write this node forwarded and answered: what a read
    /// here waits for its view to hold.
    owed: Arc<AtomicI64>,
}

/// What became of a write this node was sent, for `/metrics`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

impl Default for Forwarding {
    fn default() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        connector.enforce_http(false);
        // An https:// writer is checked against the system's roots, by the name in
        // its advertised URL. Without them, only http:// writers are reached.
        let tls = allot_tls::ClientTls::default()
            .config()
            .unwrap_or_else(|_| allot_tls::trusting_no_one());
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        Forwarding {
            role: Arc::new(RwLock::new(WriterRole::Unknown)),
            client: Client::builder(TokioExecutor::new()).build(connector),
            counts: Family::default(),
            writer: Gauge::default(),
            forwarded_to: Arc::default(),
            owed: Arc::default(),
        }
    }
}

impl std::fmt::Debug for Forwarding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarding")
            .field("role", &self.role())
            .finish_non_exhaustive()
    }
}

impl Forwarding {
    /// Who writes for the cluster now (the lease's thread says).
    pub fn set_role(&self, role: WriterRole) {
        let mut current = self.role.write().unwrap_or_else(|e| e.into_inner());
        self.writer.set(i64::from(role == WriterRole::This));
        if *current != role {
            tracing::info!(?role, "the cluster's writer");
            *current = role;
        }
    }

    /// Who writes for the cluster, as this node last heard.
    pub fn role(&self) -> WriterRole {
        self.role.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether another node has forwarded a write here since this node started: if
    /// none has, no other node holds a connection to this one that a stop could cut
    /// under a forward (a forward that finds no listener is handled where it was
    /// sent), so a stopping writer has nobody to hand over to first.
    pub fn forwarded_to(&self) -> bool {
        self.forwarded_to.load(Ordering::Relaxed)
    }

    /// Registers `allot_cluster_writer` and `allot_forwarded_writes_total` in
    /// `registry`.
    pub(crate) fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "allot_cluster_writer",
            "1 while this node holds the writer's lease of the nodes on its database \
             (it writes for all of them), else 0",
            self.writer.clone(),
        );
        registry.register(
            "allot_forwarded_writes",
            "Writes sent to this node that it forwarded to the cluster's writer \
             (outcome=forwarded), handled itself because the writer could not be \
             reached (outcome=unreachable), or lost with the connection to the writer \
             (outcome=lost)",
            self.counts.clone(),
        );
    }

    fn count(&self, outcome: &'static str) {
        self.counts.get_or_create(&OutcomeLabels { outcome }).inc();
    }
}

/// Where this request goes, if not here: the writer's URL for a write this node
/// should forward.
fn target(app: &AppState, request: &Request) -> Option<String> {
    if reads(request) || request.extensions().get::<Proven>().is_some() {
        return None;
    }
    if !forwardable_body(request) {
        return None;
    }
    match app.config.forwarding.role() {
        WriterRole::At(url) => Some(url),
        WriterRole::This | WriterRole::Unknown => None,
    }
}

/// Whether a request's body is one a node forwards: of a stated length, within
/// Reads sent as a `POST` because their input is long (allot's query forms, the
/// audit, a dry run): answered by the node they arrive at, from its view, as a `GET`
/// is, never forwarded to the writer, which would then answer every node's reads.
const POSTED_READS: [&str; 4] = [
    "/allocation_candidates/query",
    "/resource_providers/query",
    "/audit",
    "/dry_run",
];

/// Whether a request only reads (a read waits for the writes this node forwarded).
fn reads(request: &Request) -> bool {
    match *request.method() {
        Method::GET | Method::HEAD | Method::OPTIONS => true,
        Method::POST => POSTED_READS.contains(&request.uri().path()),
        _ => false,
    }
}

/// [`crate::MAX_BODY_BYTES`] (anything else is handled where it arrived, where the
/// usual limits answer it).
fn forwardable_body(request: &Request) -> bool {
    request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| n <= crate::MAX_BODY_BYTES)
}

/// The middleware: forwards a write to the cluster's writer, or handles the request
/// here (and, for a request another node forwarded, says which commit answered it).
pub async fn forward(State(app): State<AppState>, request: Request, next: Next) -> Response {
    let Some(writer) = target(&app, &request) else {
        return handled_here(&app, request, next).await;
    };
    // The identity `context::around` authenticated, which the proof carries.
    let Some(identity) = request
        .extensions()
        .get::<crate::context::Ctx>()
        .and_then(|ctx| ctx.identity.clone())
    else {
        return next.run(request).await;
    };
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(body) => body.to_bytes(),
        // Too slow (408), or the client went away while sending.
        Err(_) => {
            let deadline = parts.extensions.get().copied();
            return crate::request::body_timed_out(deadline).unwrap_or_else(|| {
                ApiError::bad_request("The request body could not be read.").into_response()
            });
        }
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let uri = match format!("{}{path}", writer.trim_end_matches('/')).parse::<hyper::Uri>() {
        Ok(uri) => uri,
        Err(_) => {
            tracing::warn!(%writer, "the cluster's writer has a URL that cannot be used");
            return next.run(Request::from_parts(parts, Body::from(body))).await;
        }
    };
    let mut out = hyper::Request::builder()
        .method(parts.method.clone())
        .uri(uri)
        .body(Full::new(body.clone()))
        .expect("a method and a URI that parsed make a request");
    *out.headers_mut() = passed_on(&parts.headers);
    let proof = app.config.trust.prove(
        &identity,
        parts.method.as_str(),
        target_of(out.uri()),
        &body,
    );
    match HeaderValue::from_str(&proof) {
        Ok(proof) => {
            out.headers_mut().insert(FORWARDED, proof);
        }
        // An identity the proof cannot carry (a header value's limits): written here.
        Err(_) => return next.run(Request::from_parts(parts, Body::from(body))).await,
    }
    let forwarding = &app.config.forwarding;
    // The request went out and the connection failed before the whole answer came
    // back: the write may or may not have happened.
    let lost = |e: &dyn std::fmt::Display| {
        forwarding.count("lost");
        tracing::warn!(%writer, error = %e, "the connection to the cluster's writer was lost during a write");
        ApiError::store_unavailable().into_response()
    };
    let answer = match forwarding.client.request(out).await {
        Ok(answer) => answer,
        Err(e) if e.is_connect() => {
            forwarding.count("unreachable");
            tracing::warn!(%writer, error = %e, "the cluster's writer cannot be reached: writing here");
            // Until the lease's next tick says who writes now (the same node if it
            // still holds the lease, as while it stops): not one warning per write.
            forwarding.set_role(WriterRole::Unknown);
            return next.run(Request::from_parts(parts, Body::from(body))).await;
        }
        Err(e) => return lost(&e),
    };
    let (mut head, body) = answer.into_parts();
    let body = match body.collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => return lost(&e),
    };
    forwarding.count("forwarded");
    let cursor = head
        .headers
        .get(CURSOR)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok());
    if let Some(cursor) = cursor {
        forwarding.owed.fetch_max(cursor, Ordering::AcqRel);
    }
    head.headers = passed_on(&head.headers);
    head.headers.remove(CURSOR);
    head.extensions.insert(Answered);
    Response::from_parts(head, Body::from(body))
}

/// Sends a web UI form to the cluster's writer, as this node's own page would
/// (`Sec-Fetch-Site: same-origin`, the session's `cookie` header), for a write this node
/// could not make itself: on MariaDB a node without the writer's lease writes
/// nothing. The writer checks the form as any other (its session and CSRF token),
/// so nothing here needs its trust. The writer's status, or None when no other node
/// writes or it could not be reached.
pub(crate) async fn relay_form(
    app: &AppState,
    path: &str,
    cookie: &str,
    form: String,
) -> Option<axum::http::StatusCode> {
    let WriterRole::At(writer) = app.config.forwarding.role() else {
        return None;
    };
    let request = hyper::Request::builder()
        .method(Method::POST)
        .uri(format!("{}{path}", writer.trim_end_matches('/')))
        .header(header::COOKIE, cookie)
        .header("sec-fetch-site", "same-origin")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Full::new(Bytes::from(form)))
        .ok()?;
    match app.config.forwarding.client.request(request).await {
        Ok(answer) => Some(answer.status()),
        Err(e) => {
            tracing::warn!(%writer, error = %e, "relaying a web UI form to the cluster's writer");
            None
        }
    }
}

/// A request this node handles itself: a read waits for the commits this node has
/// answered for; a write another node forwarded (proven) is answered with the commit
/// that holds it.
async fn handled_here(app: &AppState, request: Request, next: Next) -> Response {
    if reads(&request) {
        owed_commits(app).await;
    }
    let forwarded = request.extensions().get::<Proven>().is_some();
    if forwarded {
        app.config
            .forwarding
            .forwarded_to
            .store(true, Ordering::Relaxed);
    }
    let mut response = next.run(request).await;
    if forwarded {
        // After the handler: a write is answered only once its commit is in the
        // view, so the view's cursor covers it.
        let cursor = app.host.cursor().0;
        response
            .headers_mut()
            .insert(CURSOR, HeaderValue::from(cursor));
    }
    response
}

/// Before a read: waits (at most the staleness bound) until this node's view holds
/// every commit of the writes it has forwarded and answered, so that the read sees
/// them. Nothing to wait for on a node that forwarded nothing, or whose view has
/// followed the log that far already.
async fn owed_commits(app: &AppState) {
    let owed = app.config.forwarding.owed.load(Ordering::Acquire);
    if owed <= app.host.cursor().0 {
        return;
    }
    if !app
        .host
        .caught_up(Cursor(owed), app.config.settings.max_staleness)
        .await
    {
        tracing::warn!(
            owed,
            "answering a read before this node's view holds the writes it forwarded"
        );
    }
}

/// The path and query a proof is made and checked over.
fn target_of(uri: &axum::http::Uri) -> &str {
    uri.path_and_query().map_or("/", |p| p.as_str())
}

/// The identity a forwarded write's proof names, if the request carries a proof
/// ([`FORWARDED`]) that holds for it (its method, path, query and body, under
/// this cluster's key, fresh and not seen before): the request is then marked
/// [`Proven`]. Its body is read for that, within [`crate::MAX_BODY_BYTES`], and
/// put back. `None` for any other request, which is then authenticated from its
/// own headers, as any client's.
pub(crate) async fn proven(app: &AppState, request: &mut Request) -> Option<Identity> {
    let proof = request.headers().get(FORWARDED)?.to_str().ok()?.to_owned();
    // Only a body as a node forwards it.
    if !forwardable_body(request) {
        return None;
    }
    let body = std::mem::take(request.body_mut());
    let body = http_body_util::Limited::new(body, crate::MAX_BODY_BYTES)
        .collect()
        .await
        .map(|b| b.to_bytes())
        // The client went away while sending: the handler finds the body empty.
        .unwrap_or_default();
    let identity = app.config.trust.verify(
        &proof,
        request.method().as_str(),
        target_of(request.uri()),
        &body,
    );
    *request.body_mut() = Body::from(body);
    if identity.is_some() {
        request.extensions_mut().insert(Proven);
    } else {
        tracing::debug!("a request with a forwarding proof that does not hold: any client's");
    }
    identity
}

/// `headers` without those that are not passed on.
fn passed_on(headers: &HeaderMap) -> HeaderMap {
    let mut out = headers.clone();
    for name in NOT_PASSED_ON {
        out.remove(HeaderName::from_static(name));
    }
    out
}
