//! One log line per request: method, route template, status, duration, bytes, request
//! id, global request id and project, at INFO (target `allot::request`), or at WARN
//! with `slow=true` when it took longer than [`crate::Settings::slow_request`].
//!
//! The route is axum's template (`/resource_providers/{uuid}`), never the raw path, so
//! that a field or label built from it has a bounded set of values. The API's routes
//! sit inside the context middleware (see [`crate::router`]), where the outer layers
//! cannot see which route matched; [`note_route`], a route layer on them, writes the
//! template (and the caller's project, known once the context ran) into the
//! [`Noted`] slot that [`log`] put in the request. A request refused before routing
//! (an unknown token, a bad microversion) or matching no route has no template.
//!
//! The same middleware counts the request in the metrics ([`crate::metrics::Metrics`]),
//! with the same route template, and the error code the response carries.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::HttpBody;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::context::{Ctx, REQUEST_ID_HEADERS};
use crate::error::ErrorCode;
use crate::AppState;

/// What the routing inside the API learns about a request, for the layers outside.
#[derive(Debug, Clone, Default)]
pub struct Noted(Arc<Mutex<Seen>>);

#[derive(Debug, Default)]
struct Seen {
    route: Option<MatchedPath>,
    project: Option<String>,
}

impl Noted {
    /// The route template that matched, if routing got that far.
    pub fn route(&self) -> Option<MatchedPath> {
        self.seen().route.clone()
    }

    /// The caller's project, once identified.
    pub fn project(&self) -> Option<String> {
        self.seen().project.clone()
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        // Only ever held to copy a field in or out, so a poisoned lock is whole.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The route template of a request: the one axum matched at this level, or the one
/// the API's routing noted further in (read after the response).
pub fn route_of(matched: Option<&MatchedPath>, noted: &Noted) -> Option<MatchedPath> {
    matched.cloned().or_else(|| noted.route())
}

/// The route layer on the API's routes that fills the [`Noted`] slot.
pub async fn note_route(req: Request, next: Next) -> Response {
    if let Some(noted) = req.extensions().get::<Noted>() {
        let mut seen = noted.seen();
        seen.route = req.extensions().get::<MatchedPath>().cloned();
        seen.project = req
            .extensions()
            .get::<Ctx>()
            .and_then(|ctx| ctx.identity.as_ref())
            .and_then(|identity| identity.project_id.clone());
    }
    next.run(req).await
}

/// The middleware around the whole application that writes the line.
pub async fn log(State(app): State<AppState>, mut req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let matched = req.extensions().get::<MatchedPath>().cloned();
    let global_request_id = global_request_id(&req);
    let noted = Noted::default();
    req.extensions_mut().insert(noted.clone());
    let response = next.run(req).await;
    let elapsed = started.elapsed();
    let route = route_of(matched.as_ref(), &noted);
    let project = noted.project();
    let request_id = response
        .headers()
        .get(REQUEST_ID_HEADERS[0])
        .and_then(|v| v.to_str().ok());
    // Ours are whole bodies, whose length is known before they are sent.
    let bytes = response.body().size_hint().exact();
    macro_rules! line {
        ($level:expr, $slow:expr) => {
            tracing::event!(
                target: "allot::request",
                $level,
                method = method.as_str(),
                route = route.as_ref().map(MatchedPath::as_str),
                status = response.status().as_u16(),
                duration_ms = elapsed.as_micros() as f64 / 1000.0,
                bytes,
                request_id,
                global_request_id = global_request_id.as_deref(),
                project = project.as_deref(),
                slow = $slow,
                "request"
            )
        };
    }
    app.config.metrics.record(
        &method,
        route.as_ref().map(MatchedPath::as_str),
        response.status(),
        response.extensions().get::<ErrorCode>().copied(),
        elapsed.as_secs_f64(),
    );
    if is_slow(elapsed, app.config.settings.slow_request) {
        line!(tracing::Level::WARN, true);
    } else {
        line!(tracing::Level::INFO, false);
    }
    response
}

fn is_slow(elapsed: Duration, bound: Option<Duration>) -> bool {
    bound.is_some_and(|bound| elapsed > bound)
}

/// The caller's `X-OpenStack-Request-ID`, when it is one (`req-` and a uuid), as
/// oslo's request-id middleware takes it for the global request id; anything else is
/// ignored, so that the log holds no text a caller chose.
fn global_request_id(req: &Request) -> Option<String> {
    let value = req.headers().get("x-openstack-request-id")?.to_str().ok()?;
    let id = value.strip_prefix("req-")?;
    // A header for the log, not a lookup: any standard spelling, logged canonically.
    let uuid = uuid::Uuid::try_parse(id).ok()?;
    Some(format!("req-{}", uuid.hyphenated()))
}
