//! The per-request context and the middleware that builds it and finishes every
//! response.
//!
//! On the way in: a request id, the negotiated microversion, the caller's identity
//! (from the [`crate::auth::Authenticator`] chosen at start-up; `/` needs none), CORS.
//! On the way out: the request id (as both `openstack-request-id` and `x-openstack-request-id`),
//! `openstack-api-version` and `vary` headers on every response, a relative `Location`
//! made absolute, and every error rendered into the envelope (see `crate::error`).

use std::net::SocketAddr;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::{header, request::Parts, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{render, ApiError, ErrorContext, ErrorFormat, ErrorInfo};
use crate::forward;
use crate::microversion::{self, Version};
use crate::AppState;

/// The two names the request id goes out under: Placement's own, and the one oslo's
/// request-id middleware uses, which is what keystoneauth, Nova's report client and
/// openstacksdk read. Placement sends both, with the same value.
pub const REQUEST_ID_HEADERS: [&str; 2] = ["openstack-request-id", "x-openstack-request-id"];

/// How a request's connection came in: the local address it was accepted on and
/// whether it is TLS. [`crate::graceful`] records it per connection so that a
/// `Location` header can be made absolute with the right scheme, and still when the
/// request names no usable host (WSGI's `SERVER_NAME` and `SERVER_PORT`, which webob
/// falls back on).
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    /// The address the connection was accepted on.
    pub local: SocketAddr,
    /// Whether the connection is HTTPS.
    pub https: bool,
}

/// Who is calling. Serialised only into a forwarded write's proof
/// (`crate::cluster`), which the nodes of the cluster alone can make.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    /// The user id (the token's first part).
    pub user_id: String,
    /// The project id, if the request is project-scoped.
    pub project_id: Option<String>,
    /// Roles.
    pub roles: Vec<String>,
    /// Whether the request is system-scoped (`openstack-system-scope: all`, or any
    /// other non-empty value, in `noauth2`; `system: {all: true}` in a Keystone token).
    pub system_scope: bool,
    /// The domain of the token's project, or the domain of a domain-scoped token
    /// (Keystone only; no rule of Placement's looks at it yet).
    pub domain_id: Option<String>,
}

impl Identity {
    /// Whether the caller has a role.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r.eq_ignore_ascii_case(role))
    }
}

/// What every handler knows about its request.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// `req-<uuid>`, echoed in the `openstack-request-id` header and error bodies.
    pub request_id: String,
    /// The negotiated microversion.
    pub version: Version,
    /// The caller (absent only on `/`, which needs no token).
    pub identity: Option<Identity>,
    /// The request's headers (for content negotiation in handlers).
    pub accept: Option<String>,
    /// The operator's policy overrides as they were when the request came in (a
    /// reload mid-request does not change its answer).
    pub policy_rules: Option<std::sync::Arc<crate::policy_file::Rules>>,
}

impl Ctx {
    /// Refuses (404, as Placement does) a route that exists only from `1.minor`.
    pub fn require(&self, minor: u16) -> Result<(), ApiError> {
        if self.version.at_least(minor) {
            Ok(())
        } else {
            Err(ApiError::not_found("The resource could not be found."))
        }
    }

    /// Refuses (406) a client that does not accept JSON, for handlers that answer with
    /// a JSON body.
    pub fn require_json_accept(&self) -> Result<(), ApiError> {
        match &self.accept {
            Some(accept) if !accepts_json(accept) => Err(ApiError::not_acceptable()),
            _ => Ok(()),
        }
    }

    /// Whether responses carry `last-modified` and `cache-control` (1.15).
    pub fn wants_cache_headers(&self) -> bool {
        self.version.at_least(15)
    }

    /// The response with `last-modified` and `cache-control` when the microversion
    /// wants them (1.15), unchanged otherwise.
    pub fn cached(&self, response: Response, last_modified: allot_core::Timestamp) -> Response {
        if self.wants_cache_headers() {
            crate::http::cache_headers(response, last_modified)
        } else {
            response
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Ctx {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Ctx>()
            .cloned()
            .ok_or_else(ApiError::internal)
    }
}

/// Whether an `Accept` header admits `application/json` (with a non-zero quality).
pub fn accepts_json(accept: &str) -> bool {
    accept.split(',').any(|item| {
        let mut parts = item.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let zero_q = parts.any(|p| {
            p.trim()
                .strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        !zero_q && matches!(media.as_str(), "application/json" | "application/*" | "*/*")
    })
}

fn error_format(accept: Option<&str>) -> ErrorFormat {
    match accept {
        Some(a) if !accepts_json(a) && a.to_ascii_lowercase().contains("text/html") => {
            ErrorFormat::Html
        }
        _ => ErrorFormat::Json,
    }
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether a `Host` header is a plain `host[:port]` we may copy into a `Location`: a
/// name of letters, digits and `-._` or a bracketed IPv6 address, then optionally a
/// numeric port (no user info, path, query or spaces). Anything else is ignored
/// rather than echoed back.
fn usable_host(host: &str) -> bool {
    let (name, port) = match host.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, rest)) => {
                if addr.parse::<std::net::Ipv6Addr>().is_err() {
                    return false;
                }
                match rest {
                    "" => ("v6", None),
                    _ => match rest.strip_prefix(':') {
                        Some(port) => ("v6", Some(port)),
                        None => return false,
                    },
                }
            }
            None => return false,
        },
        None => match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        },
    };
    !name.is_empty()
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
        && port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.parse::<u16>().is_ok())
}

/// The `http[s]://host[:port]` that relative `Location`s are resolved against, as
/// webob does it: the request's `Host` header (HTTP/2's `:authority`, in the URI),
/// else the address the connection came in on (else `localhost`, for requests that
/// did not come through a socket), without the scheme's default port.
fn base_url(headers: &HeaderMap, uri: &axum::http::Uri, arrival: Option<Arrival>) -> String {
    let https = arrival.is_some_and(|a| a.https);
    let authority = match header_str(headers, "host")
        .or_else(|| uri.authority().map(|a| a.as_str()))
        .filter(|h| usable_host(h))
    {
        Some(host) => host.to_owned(),
        None => arrival.map_or_else(|| "localhost".to_owned(), |a| a.local.to_string()),
    };
    let (scheme, default_port) = if https {
        ("https", ":443")
    } else {
        ("http", ":80")
    };
    let authority = authority.strip_suffix(default_port).unwrap_or(&authority);
    format!("{scheme}://{authority}")
}

/// Makes a relative (`/...`) `Location` header absolute against `base`.
fn absolute_location(response: &mut Response, base: &str) {
    let Some(relative) = response
        .headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.starts_with('/'))
    else {
        return;
    };
    if let Ok(v) = HeaderValue::from_str(&format!("{base}{relative}")) {
        response.headers_mut().insert(header::LOCATION, v);
    }
}

/// The middleware around every request (see the module doc).
pub async fn around(State(app): State<AppState>, mut req: Request, next: Next) -> Response {
    let request_id = format!("req-{}", uuid::Uuid::new_v4());
    let method = req.method().clone();
    let headers = req.headers().clone();
    let arrival = req.extensions().get::<Arrival>().copied();
    let uri = req.uri().clone();
    let accept = header_str(&headers, "accept").map(str::to_owned);
    let format = error_format(accept.as_deref());
    let origin = header_str(&headers, "origin").map(str::to_owned);

    let negotiated = microversion::negotiate(
        headers
            .get_all("openstack-api-version")
            .iter()
            .filter_map(|v| v.to_str().ok()),
    );

    let mut response = match negotiated {
        Err(e) => {
            let (status, info) = ApiError::from(e).into_parts();
            let request = ErrorContext {
                method: method.as_str(),
                request_id: &request_id,
                version: None,
                format,
            };
            let mut r = render(status, &info, &request);
            set_version_headers(&mut r, microversion::MIN);
            r
        }
        Ok(version) => {
            let preflight =
                method == Method::OPTIONS && headers.contains_key("access-control-request-method");
            let mut response = if let (Some(cors), true) = (&app.config.settings.cors, preflight) {
                cors.preflight(origin.as_deref())
            } else {
                let identity = caller(&app, &mut req, &headers).await;
                let stale = app.host.staleness();
                if let Err(e) = &identity {
                    e.clone().into_response(app.config.auth.challenge())
                } else if stale > app.config.settings.max_staleness
                    && !needs_no_token(req.uri().path())
                    && (method == Method::GET || method == Method::HEAD)
                {
                    // Writes are safe (they catch up under the log's lock); reads
                    // would answer from a view that may be out of date.
                    tracing::warn!(?stale, "refusing a read: the view may be stale");
                    let mut r = ApiError::view_stale(stale).into_response();
                    r.headers_mut()
                        .insert("retry-after", axum::http::HeaderValue::from_static("1"));
                    r
                } else {
                    req.extensions_mut().insert(Ctx {
                        request_id: request_id.clone(),
                        version,
                        identity: identity.ok().flatten(),
                        accept: accept.clone(),
                        policy_rules: app.config.policy_file.as_ref().map(|f| f.current()),
                    });
                    next.run(req).await
                }
            };
            // The cluster's writer answered this one (`forward`): it is finished.
            if response.extensions().get::<forward::Answered>().is_some() {
                return response;
            }
            finish_errors(&mut response, method.as_str(), &request_id, version, format);
            set_version_headers(&mut response, version);
            response
        }
    };
    if let (Some(cors), Some(origin)) = (&app.config.settings.cors, origin.as_deref()) {
        cors.decorate(&mut response, origin);
    }
    absolute_location(&mut response, &base_url(&headers, &uri, arrival));
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        for name in REQUEST_ID_HEADERS {
            response.headers_mut().insert(name, v.clone());
        }
    }
    response
}

/// Who is calling: nobody on the paths anyone may read ([`needs_no_token`]); for a
/// write another node of the cluster forwarded with a valid proof, the identity that
/// node authenticated ([`forward::proven`]: the caller is authenticated once); else
/// whoever the request's own headers say.
async fn caller(
    app: &AppState,
    req: &mut Request,
    headers: &HeaderMap,
) -> Result<Option<Identity>, crate::auth::AuthError> {
    if needs_no_token(req.uri().path()) {
        return Ok(None);
    }
    if let Some(identity) = forward::proven(app, req).await {
        return Ok(Some(identity));
    }
    app.config.auth.authenticate(headers).await.map(Some)
}

/// The paths anyone may read: version discovery, and the API's document (which says
/// nothing a caller could not learn by calling). Neither reads the view.
fn needs_no_token(path: &str) -> bool {
    path == "/" || path == crate::openapi::PATH
}

fn set_version_headers(response: &mut Response, version: Version) {
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("placement {version}")) {
        headers.insert("openstack-api-version", v);
    }
    headers.insert(
        header::VARY,
        HeaderValue::from_static("openstack-api-version"),
    );
}

/// Renders an error response that has no envelope yet: ours (with [`ErrorInfo`]) and
/// axum's own (404 fallback, 405 with `Allow`, 413 body limit, ...).
fn finish_errors(
    response: &mut Response,
    method: &str,
    request_id: &str,
    version: Version,
    format: ErrorFormat,
) {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return;
    }
    // axum's own rejections carry a plain-text reason; Placement's wording for these
    // statuses is the explanation alone.
    let info = response
        .extensions_mut()
        .remove::<ErrorInfo>()
        .unwrap_or_default();
    let request = ErrorContext {
        method,
        request_id,
        version: Some(version),
        format,
    };
    let mut rendered = render(status, &info, &request);
    // Keep headers the inner response set (Allow on 405, Location, ...).
    for (name, value) in response.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            rendered.headers_mut().insert(name.clone(), value.clone());
        }
    }
    if status == StatusCode::METHOD_NOT_ALLOWED {
        // axum lists HEAD (implied by GET) and separates with bare commas; Placement
        // lists the methods a URL declares, separated by ", ".
        if let Some(allow) = rendered
            .headers()
            .get(header::ALLOW)
            .and_then(|v| v.to_str().ok())
        {
            let methods: Vec<&str> = allow
                .split(',')
                .map(str::trim)
                .filter(|m| *m != "HEAD")
                .collect();
            if let Ok(v) = HeaderValue::from_str(&methods.join(", ")) {
                rendered.headers_mut().insert(header::ALLOW, v);
            }
        }
    }
    *response = rendered;
}
