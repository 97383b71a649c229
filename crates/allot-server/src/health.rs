//! `/healthcheck`: oslo.middleware's health check contract, so that HAProxy, Kubernetes
//! probes and kolla's `healthcheck_curl` can point at allot unchanged.
//!
//! The answer, as oslo's `Healthcheck` (non-detailed) gives it, byte for byte: `200 OK`
//! with `OK` as `text/plain; charset=UTF-8`, or `503` with the reasons, one a line;
//! `HEAD` gets `204` (or `503`) with no body; `Accept: application/json` gets
//! `{"detailed": false, "reasons": [...]}` as Python's `json.dumps(indent=4,
//! sort_keys=True)` writes it, and `text/html` oslo's table. Any method is answered,
//! as oslo does. No token is asked for, and the reasons are fixed words: nothing of
//! the deployment is disclosed (the log has the details).
//!
//! The checks, in this order, each adding its reason when it fails:
//!
//! 1. `DISABLED BY FILE`: the drain file (`--healthcheck-disable-file`, oslo's
//!    `disable_by_file_path`) exists, so that an operator can take the node out of a
//!    load balancer before stopping it. One `stat` a request.
//! 2. `STORE UNAVAILABLE` / `STORE NOT RESPONDING`: the writer could not write the
//!    store (SQLite: a full disk, a read-only or immutable file) or reach it
//!    (PostgreSQL), or did not answer within [`PROBE_TIMEOUT`]. The probe
//!    ([`allot_store::Host::probe`]) runs on the writer's own connection, between
//!    batches, and its outcome is kept for [`PROBE_EVERY`]: however often the check is
//!    polled, the store sees at most one probe a second (one small fsync on SQLite).
//! 3. `VIEW STALE`: on a database other nodes write to, this node's view was last known
//!    to hold every commit longer ago than [`crate::Settings::max_staleness`] (2 s by
//!    default), the bound past which reads are refused too. One atomic read.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use serde::Serialize;

use crate::AppState;

/// Where the health check answers.
pub const PATH: &str = "/healthcheck";

/// How long a probe's outcome is kept: the most often the store is probed.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// How long the check waits for the writer to answer a probe. A writer that takes
/// longer is busy beyond what a healthy node does, or stuck.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// oslo's reason for a node taken out by the drain file.
const DISABLED_BY_FILE: &str = "DISABLED BY FILE";
const STORE_UNAVAILABLE: &str = "STORE UNAVAILABLE";
const STORE_NOT_RESPONDING: &str = "STORE NOT RESPONDING";
const VIEW_STALE: &str = "VIEW STALE";

/// The last probe's outcome and when it was taken; shared by every request of one
/// application (see [`crate::Config::health`]).
#[derive(Debug, Default, Clone)]
pub struct ProbeCache(Arc<tokio::sync::Mutex<Option<Probed>>>);

/// When the store was last probed, and its reason to fail then (None: it passed).
type Probed = (Instant, Option<&'static str>);

impl ProbeCache {
    /// The store's reason to fail, if any, probing it again when the kept outcome is
    /// older than [`PROBE_EVERY`]. Concurrent checks wait for the one probe.
    async fn store_reason(&self, app: &AppState) -> Option<&'static str> {
        let mut kept = self.0.lock().await;
        if let Some((at, reason)) = *kept {
            if at.elapsed() < PROBE_EVERY {
                return reason;
            }
        }
        let reason = match tokio::time::timeout(PROBE_TIMEOUT, app.host.probe()).await {
            Ok(Ok(())) => None,
            Ok(Err(allot_store::WriteError::Stopped)) | Err(_) => {
                tracing::warn!("health check: the writer did not answer its probe");
                Some(STORE_NOT_RESPONDING)
            }
            // The writer logged the store's error.
            Ok(Err(_)) => Some(STORE_UNAVAILABLE),
        };
        *kept = Some((Instant::now(), reason));
        reason
    }
}

/// The health check's route, outside the API's middleware: no token, no
/// microversion, and its own 503 rather than the API's stale-read refusal.
pub fn routes(state: AppState) -> Router {
    Router::new().route(PATH, any(check)).with_state(state)
}

/// Answers the health check (see the module doc).
pub async fn check(State(app): State<AppState>, method: Method, headers: HeaderMap) -> Response {
    answer(&method, &headers, &reasons(&app).await)
}

/// The node's reasons to fail the health check, in the module doc's order (none:
/// healthy). `/status` reports the same.
pub async fn reasons(app: &AppState) -> Vec<&'static str> {
    let mut reasons = Vec::new();
    if let Some(path) = &app.config.settings.healthcheck_disable_file {
        if drained(path) {
            reasons.push(DISABLED_BY_FILE);
        }
    }
    if let Some(reason) = app.config.health.store_reason(app).await {
        reasons.push(reason);
    }
    let stale = app.host.staleness();
    if stale > app.config.settings.max_staleness {
        tracing::warn!(?stale, "health check: the view may be stale");
        reasons.push(VIEW_STALE);
    }
    reasons
}

/// Whether the drain file is there (oslo: `os.path.exists`).
fn drained(path: &Path) -> bool {
    path.exists()
}

/// The response for `reasons` (none: healthy), in the form the request asks for.
fn answer(method: &Method, headers: &HeaderMap, reasons: &[&str]) -> Response {
    let healthy = reasons.is_empty();
    let reasons: &[&str] = if healthy { &["OK"] } else { reasons };
    if method == Method::HEAD {
        if healthy {
            // webob drops the content type of a 204.
            return StatusCode::NO_CONTENT.into_response();
        }
        return with_type(StatusCode::SERVICE_UNAVAILABLE, TEXT, String::new());
    }
    let status = if healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match negotiate(accept) {
        Form::Text => with_type(status, TEXT, reasons.join("\n")),
        Form::Html => with_type(status, HTML, html(reasons)),
        Form::Json => with_type(status, JSON, json(reasons)),
    }
}

const TEXT: &str = "text/plain; charset=UTF-8";
const HTML: &str = "text/html; charset=UTF-8";
const JSON: &str = "application/json";

fn with_type(status: StatusCode, content_type: &'static str, body: String) -> Response {
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// The forms oslo offers, in its order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Text,
    Html,
    Json,
}

const OFFERS: [(Form, &str, &str); 3] = [
    (Form::Text, "text", "plain"),
    (Form::Html, "text", "html"),
    (Form::Json, "application", "json"),
];

/// The offer the `Accept` header prefers (webob's `acceptable_offers`: the highest
/// quality, ties to the earlier offer, each offer judged by the most specific range
/// that matches it); text when there is no header or nothing is acceptable, as oslo
/// answers rather than send a 406.
fn negotiate(accept: &str) -> Form {
    if accept.trim().is_empty() {
        return Form::Text;
    }
    let ranges: Vec<(&str, &str, f32)> = accept.split(',').filter_map(media_range).collect();
    let mut best = (Form::Text, 0.0_f32);
    for (form, kind, sub) in OFFERS {
        let quality = ranges
            .iter()
            .filter_map(|&(k, s, q)| {
                let specificity = match (k, s) {
                    ("*", "*") => 0,
                    (k, "*") if k.eq_ignore_ascii_case(kind) => 1,
                    (k, s) if k.eq_ignore_ascii_case(kind) && s.eq_ignore_ascii_case(sub) => 2,
                    _ => return None,
                };
                Some((specificity, q))
            })
            .max_by_key(|&(specificity, _)| specificity)
            .map_or(0.0, |(_, q)| q);
        if quality > best.1 {
            best = (form, quality);
        }
    }
    best.0
}

/// One `type/subtype;q=..` of an `Accept` header; None when it does not parse.
fn media_range(item: &str) -> Option<(&str, &str, f32)> {
    let mut parts = item.split(';');
    let (kind, sub) = parts.next()?.trim().split_once('/')?;
    let mut quality = 1.0;
    for param in parts {
        if let Some((name, value)) = param.split_once('=') {
            if name.trim().eq_ignore_ascii_case("q") {
                quality = value.trim().parse().ok()?;
            }
        }
    }
    Some((kind.trim(), sub.trim(), quality))
}

/// oslo's non-detailed JSON body.
#[derive(Serialize)]
struct Body<'a> {
    detailed: bool,
    reasons: &'a [&'a str],
}

/// The JSON body as Python's `json.dumps(indent=4, sort_keys=True)` writes it (the
/// fields are declared in sorted order).
fn json(reasons: &[&str]) -> String {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    Body {
        detailed: false,
        reasons,
    }
    .serialize(&mut serializer)
    .expect("writing to a Vec cannot fail");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// oslo's non-detailed HTML page (its Jinja template, rendered). The reasons are
/// fixed words with nothing to escape.
fn html(reasons: &[&str]) -> String {
    let rows: String = reasons
        .iter()
        .map(|r| format!("<TR>\n\n    <TD>{r}</TD>\n\n</TR>"))
        .collect();
    format!(
        "<HTML>\n<HEAD><TITLE>Healthcheck Status</TITLE></HEAD>\n<BODY>\n\n\
         <H2>Result of {} checks:</H2>\n<TABLE bgcolor=\"#ffffff\" border=\"1\">\n<TBODY>\n\
         <TR>\n\n<TH>\nReason\n</TH>\n</TR>\n{rows}\n</TBODY>\n</TABLE>\n<HR></HR>\n\n\
         </BODY>\n</HTML>",
        reasons.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_follows_webob() {
        assert_eq!(negotiate(""), Form::Text);
        assert_eq!(negotiate("*/*"), Form::Text);
        assert_eq!(negotiate("application/xml"), Form::Text);
        assert_eq!(negotiate("application/json"), Form::Json);
        assert_eq!(negotiate("text/html"), Form::Html);
        assert_eq!(
            negotiate("application/json;q=0.5, text/plain;q=0.4"),
            Form::Json
        );
        assert_eq!(negotiate("text/*, application/json"), Form::Text);
        assert_eq!(negotiate("text/plain;q=0, */*"), Form::Html);
    }

    /// The bodies oslo.middleware's `Healthcheck` gives, taken from the real one.
    #[test]
    fn bodies_are_oslos() {
        assert_eq!(
            json(&["OK"]),
            "{\n    \"detailed\": false,\n    \"reasons\": [\n        \"OK\"\n    ]\n}"
        );
        let page = html(&["DISABLED BY FILE"]);
        assert_eq!(page.len(), 253);
        assert!(page.contains("<TR>\n\n    <TD>DISABLED BY FILE</TD>\n\n</TR>\n</TBODY>"));
        assert_eq!(html(&["OK"]).len(), 239);
    }
}
