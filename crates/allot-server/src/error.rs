//! The one error type of the HTTP layer and the one place that decides and renders
//! errors.
//!
//! Handlers return [`ApiError`], built with one of its named constructors (a kind of
//! error each: `query_bad_value`, `method_not_allowed`, `store_unavailable`, ...) or
//! converted from a domain error; the status and the Placement error code of every
//! error are decided here and nowhere else. An `ApiError` becomes a bodiless response
//! carrying an [`ErrorInfo`] extension. The request middleware (`crate::context`) then
//! has [`render`] write every error response, including axum's own 404/405/413, as
//! Placement's envelope `{"errors": [{"status", "title", "detail", "code",
//! "request_id"}]}` ([`Envelope`]), because only it knows the request id, the
//! microversion (the `code` appears from 1.23) and what the client accepts.

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Serialize, Serializer};

use crate::auth::AuthError;
use crate::microversion::{Version, VersionError};

/// Placement's stable error codes, which clients branch on (allot's extension API adds
/// its own under `allot.`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ErrorCode {
    /// Any error without a more specific code.
    #[default]
    Undefined,
    /// A generation did not match.
    ConcurrentUpdate,
    /// A name or uuid is taken.
    DuplicateName,
    /// Inventory is used by allocations.
    InventoryInUse,
    /// A provider is used by allocations.
    ProviderInUse,
    /// A provider with children cannot be deleted.
    ProviderCannotDeleteParent,
    /// A provider named in the request does not exist.
    ProviderNotFound,
    /// A query parameter was given twice where once is allowed.
    QueryDuplicateKey,
    /// A query parameter's value is invalid.
    QueryBadValue,
    /// A query parameter has no value.
    QueryMissingValue,
    /// A pending claim does not fit (allot's extension API).
    ClaimDoesNotFit,
    /// A claim that is no longer pending cannot be confirmed (allot's extension API).
    ClaimNotPending,
    /// A write would break a hard server group rule (allot's extension API).
    ServerGroupViolated,
    /// This node's view may be out of date: it could not follow the database's
    /// change log for longer than its bound (several nodes on one database).
    ViewStale,
    /// The database could not complete a write.
    StoreUnavailable,
}

impl ErrorCode {
    /// The code as clients see it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Undefined => "placement.undefined_code",
            ErrorCode::ConcurrentUpdate => "placement.concurrent_update",
            ErrorCode::DuplicateName => "placement.duplicate_name",
            ErrorCode::InventoryInUse => "placement.inventory.inuse",
            ErrorCode::ProviderInUse => "placement.resource_provider.inuse",
            ErrorCode::ProviderCannotDeleteParent => {
                "placement.resource_provider.cannot_delete_parent"
            }
            ErrorCode::ProviderNotFound => "placement.resource_provider.not_found",
            ErrorCode::QueryDuplicateKey => "placement.query.duplicate_key",
            ErrorCode::QueryBadValue => "placement.query.bad_value",
            ErrorCode::QueryMissingValue => "placement.query.missing_value",
            ErrorCode::ClaimDoesNotFit => "allot.claim.does_not_fit",
            ErrorCode::ClaimNotPending => "allot.claim.not_pending",
            ErrorCode::ServerGroupViolated => "allot.server_group.violated",
            ErrorCode::ViewStale => "allot.view.stale",
            ErrorCode::StoreUnavailable => "allot.store.unavailable",
        }
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// An error answer: status, message and Placement error code.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// The specific message (the envelope's `detail` adds the status's explanation).
    pub message: String,
    /// Placement error code.
    pub code: ErrorCode,
}

/// What an error response carries until the middleware renders it.
#[derive(Debug, Clone, Default)]
pub struct ErrorInfo {
    /// The specific message, if any.
    pub message: String,
    /// Placement error code.
    pub code: ErrorCode,
}

/// A handler result.
pub type ApiResult<T = Response> = Result<T, ApiError>;

impl ApiError {
    fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            code,
        }
    }
    /// 408: the request body did not arrive within `body_timeout`
    /// ([`crate::limits`]).
    pub fn request_timeout(limit: std::time::Duration) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            ErrorCode::Undefined,
            format!(
                "The request body did not arrive within the time limit ({} s).",
                limit.as_secs()
            ),
        )
    }
    /// 400: the request is malformed or otherwise wrong.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::Undefined, message)
    }
    /// 400: a query parameter's value is invalid.
    pub fn query_bad_value(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::QueryBadValue, message)
    }
    /// 400: a query parameter was given twice where once is allowed.
    pub fn query_duplicate_key(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::QueryDuplicateKey,
            message,
        )
    }
    /// 400: a query parameter that is needed has no value.
    pub fn query_missing_value(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::QueryMissingValue,
            message,
        )
    }
    /// 400: a provider the request's body names does not exist (a 400, not a 404:
    /// the URL itself was found).
    pub fn provider_not_found(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::ProviderNotFound,
            message,
        )
    }
    /// 403: the policy refuses `action` to this caller.
    pub fn forbidden(action: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Undefined,
            format!("Policy does not allow {action} to be performed."),
        )
    }
    /// 404: what the URL names does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, ErrorCode::Undefined, message)
    }
    /// 405 with no message of its own: the method exists for this URL only at other
    /// microversions.
    pub fn method_not_allowed() -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, ErrorCode::Undefined, "")
    }
    /// 406 for a response type the client does not accept.
    pub fn not_acceptable() -> Self {
        Self::new(
            StatusCode::NOT_ACCEPTABLE,
            ErrorCode::Undefined,
            "Only application/json is provided",
        )
    }
    /// 409: the generation the request gave is not the provider's.
    pub fn concurrent_update(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, ErrorCode::ConcurrentUpdate, message)
    }
    /// 415: a body of another type than JSON; `media` is the type the request gave,
    /// `None` when it gave a body without one (worded as Python prints `None`).
    pub fn unsupported_media_type(media: Option<&str>) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::Undefined,
            format!(
                "The media type {} is not supported, use application/json",
                media.unwrap_or("None")
            ),
        )
    }
    /// 500 with nothing said: what went wrong is for the operator's log, which the
    /// caller has written to already.
    pub fn internal() -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Undefined, "")
    }
    /// 503: the database could not take a write; the client may try again.
    pub fn store_unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::StoreUnavailable,
            "The database could not complete this write; try again.",
        )
    }
    /// 503: this node has not followed the database for `stale`, so a read could
    /// answer from an out-of-date view (the middleware adds `Retry-After`).
    pub fn view_stale(stale: Duration) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::ViewStale,
            format!(
                "This node has not been able to follow the database for {} ms; its answers \
                 may be out of date. Try again or use another node.",
                stale.as_millis()
            ),
        )
    }

    /// The status and what the middleware renders.
    pub fn into_parts(self) -> (StatusCode, ErrorInfo) {
        let info = ErrorInfo {
            message: self.message,
            code: self.code,
        };
        (self.status, info)
    }
}

impl From<allot_core::Error> for ApiError {
    fn from(e: allot_core::Error) -> Self {
        use allot_core::{ConflictCode, Error};
        match e {
            Error::Invalid(m) => ApiError::bad_request(m),
            Error::NotFound(m) => ApiError::not_found(m),
            Error::Conflict { code, message } => {
                let code = match code {
                    ConflictCode::ConcurrentUpdate => ErrorCode::ConcurrentUpdate,
                    ConflictCode::Duplicate => ErrorCode::DuplicateName,
                    ConflictCode::InventoryInUse => ErrorCode::InventoryInUse,
                    ConflictCode::ProviderInUse => ErrorCode::ProviderInUse,
                    ConflictCode::CannotDeleteParent => ErrorCode::ProviderCannotDeleteParent,
                    ConflictCode::ClaimDoesNotFit => ErrorCode::ClaimDoesNotFit,
                    ConflictCode::ClaimNotPending => ErrorCode::ClaimNotPending,
                    ConflictCode::ServerGroupViolated => ErrorCode::ServerGroupViolated,
                    ConflictCode::Other => ErrorCode::Undefined,
                };
                ApiError::new(StatusCode::CONFLICT, code, message)
            }
        }
    }
}

impl From<allot_store::WriteError> for ApiError {
    fn from(e: allot_store::WriteError) -> Self {
        match e {
            allot_store::WriteError::Refused(e) => e.into(),
            allot_store::WriteError::Store(e) => {
                // The details are for the operator's log, never for the client. A
                // database that cannot take the write is the service being
                // unavailable for a moment (a lost connection, a full disk, a view
                // that must be loaded again), which a client may retry. A node
                // that may not write for itself (MariaDB, no lease held: a
                // takeover under way, or no writer to forward to) or a commit that
                // lost a conflict to another node is the cluster at work, not a
                // failure.
                match &*e {
                    allot_store::StoreError::NotWriter(_)
                    | allot_store::StoreError::Conflict(_) => {
                        tracing::warn!(error = %e, "write not taken")
                    }
                    _ => tracing::error!(error = %e, "store failure"),
                }
                ApiError::store_unavailable()
            }
            allot_store::WriteError::Stopped => {
                tracing::error!("the writer is not running");
                ApiError::internal()
            }
        }
    }
}

impl From<&AuthError> for ApiError {
    /// The status and wording of each way authentication fails; the headers that go
    /// with them (`WWW-Authenticate`, `Retry-After`) are `crate::auth`'s.
    fn from(e: &AuthError) -> Self {
        match e {
            AuthError::Missing => ApiError::new(
                StatusCode::UNAUTHORIZED,
                ErrorCode::Undefined,
                "This server could not verify that you are authorized: no X-Auth-Token was \
                 sent.",
            ),
            AuthError::Invalid(why) => ApiError::new(
                StatusCode::UNAUTHORIZED,
                ErrorCode::Undefined,
                format!("This server could not verify that you are authorized: {why}."),
            ),
            AuthError::BadHeader(why) => ApiError::bad_request(why.clone()),
            AuthError::Unavailable(why) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Undefined,
                format!("The identity service is unavailable: {why}. Try again later."),
            ),
        }
    }
}

impl From<VersionError> for ApiError {
    fn from(e: VersionError) -> Self {
        match e {
            VersionError::Malformed(m) => ApiError::bad_request(m),
            VersionError::Unacceptable(m) => {
                ApiError::new(StatusCode::NOT_ACCEPTABLE, ErrorCode::Undefined, m)
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, info) = self.into_parts();
        let mut response = status.into_response();
        response.extensions_mut().insert(info);
        response
    }
}

/// The general explanation webob puts before every message of a status; Placement's
/// `detail` is this explanation, a blank line, then the specific message.
fn explanation(status: StatusCode, method: &str) -> String {
    match status.as_u16() {
        400 => "The server could not comply with the request since it is either malformed or otherwise incorrect.".into(),
        401 => "This server could not verify that you are authorized to access the document you requested. Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the credentials required.".into(),
        403 => "Access was denied to this resource.".into(),
        404 => "The resource could not be found.".into(),
        405 => format!("The method {method} is not allowed for this resource."),
        406 => "The resource could not be generated that was acceptable to your browser.".into(),
        408 => "The server has waited too long for the request to be sent by the client.".into(),
        409 => "There was a conflict when trying to complete your request.".into(),
        413 => "The request body is larger than this server accepts.".into(),
        415 => "The request media type is not supported by this server.".into(),
        500 => "The server has either erred or is incapable of performing the requested operation.".into(),
        _ => String::new(),
    }
}

/// How an error is written, by what the client accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorFormat {
    /// The JSON envelope (the default).
    Json,
    /// A small HTML page, for clients that accept HTML and not JSON (browsers).
    Html,
}

/// What an error answer needs to know of its request, which only the middleware has.
#[derive(Debug, Clone, Copy)]
pub struct ErrorContext<'a> {
    /// The request's method (the 405 explanation names it).
    pub method: &'a str,
    /// The request id, repeated in the body.
    pub request_id: &'a str,
    /// The negotiated microversion; `None` when the version header itself was refused.
    pub version: Option<Version>,
    /// JSON or HTML.
    pub format: ErrorFormat,
}

/// Placement's error envelope: a list that always holds one error.
#[derive(Debug, Serialize)]
pub struct Envelope<'a> {
    /// The error.
    pub errors: [EnvelopeError<'a>; 1],
}

/// One error of the [`Envelope`]. The fields are in the order clients have always
/// seen (the order the envelope was first built in, not alphabetical).
#[derive(Debug, Serialize)]
pub struct EnvelopeError<'a> {
    /// The HTTP status, as a number.
    pub status: u16,
    /// The status's reason phrase.
    pub title: &'a str,
    /// The status's explanation, then the specific message.
    pub detail: &'a str,
    /// The request id.
    pub request_id: &'a str,
    /// From 1.23: the Placement error code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<ErrorCode>,
    /// Only when the version header was refused with a 406: the newest microversion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_version: Option<String>,
    /// Only when the version header was refused with a 406: the oldest microversion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_version: Option<String>,
}

/// Renders an error into its final response: the envelope (or the HTML page) with
/// its content type.
pub fn render(status: StatusCode, info: &ErrorInfo, request: &ErrorContext) -> Response {
    let (content_type, body) = body(status, info, request);
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // For the layers outside, which count refusals by code (`metrics`).
    response.extensions_mut().insert(info.code);
    response
}

/// The answer to a plain-HTTP request that reached the HTTPS port (see `graceful`):
/// a 400 that says which scheme to use, rather than the TLS alert a client would
/// show as garbage.
pub fn https_required(authority: &str) -> Response {
    let request_id = format!("req-{}", uuid::Uuid::new_v4());
    let info = ErrorInfo {
        message: format!("This port speaks HTTPS: use https://{authority}/."),
        code: ErrorCode::Undefined,
    };
    let request = ErrorContext {
        method: "GET",
        request_id: &request_id,
        version: None,
        format: ErrorFormat::Json,
    };
    render(StatusCode::BAD_REQUEST, &info, &request)
}

/// The content type and bytes of an error's body.
pub(crate) fn body(
    status: StatusCode,
    info: &ErrorInfo,
    request: &ErrorContext,
) -> (&'static str, Vec<u8>) {
    let title = status.canonical_reason().unwrap_or("Error");
    let explanation = explanation(status, request.method);
    // Placement strips webob's HTML from the body, and that turns every line break of
    // the message into a space: a multi-line message (a JSON Schema failure) reaches
    // the client as one line, which is what clients that show the detail's last line
    // (osc-placement) print in full. The HTML page keeps the message as it is.
    let message = match request.format {
        ErrorFormat::Json => info.message.replace('\r', "").replace('\n', " "),
        ErrorFormat::Html => info.message.clone(),
    };
    let detail = match (explanation.is_empty(), message.is_empty()) {
        (_, true) => explanation,
        (true, false) => message,
        (false, false) => format!("{explanation}\n\n {message}  "),
    };
    match request.format {
        ErrorFormat::Json => {
            // The version header itself was refused: a 406 says which versions exist.
            let refused_version = request.version.is_none() && status == StatusCode::NOT_ACCEPTABLE;
            let error = EnvelopeError {
                status: status.as_u16(),
                title,
                detail: &detail,
                request_id: request.request_id,
                code: request
                    .version
                    .filter(|v| v.at_least(23))
                    .map(|_| info.code),
                max_version: refused_version.then(|| crate::microversion::MAX.to_string()),
                min_version: refused_version.then(|| crate::microversion::MIN.to_string()),
            };
            let envelope = Envelope { errors: [error] };
            let body = serde_json::to_vec(&envelope).unwrap_or_default();
            ("application/json", body)
        }
        ErrorFormat::Html => {
            let esc = |s: &str| {
                s.replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;")
            };
            let body = format!(
                "<html>\n <head>\n  <title>{code} {title}</title>\n </head>\n <body>\n  <h1>{code} {title}</h1>\n  {detail}<br /><br />\n\n\n\n </body>\n</html>",
                code = status.as_u16(),
                title = esc(title),
                detail = esc(&detail),
            );
            ("text/html; charset=UTF-8", body.into_bytes())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(status: StatusCode, info: &ErrorInfo, version: Option<Version>) -> String {
        let request = ErrorContext {
            method: "GET",
            request_id: "req-1",
            version,
            format: ErrorFormat::Json,
        };
        String::from_utf8(body(status, info, &request).1).unwrap()
    }

    /// The envelope's bytes, key order included, as clients have always seen them:
    /// the code from 1.23, the version range only on a refused version header.
    #[test]
    fn envelope_bytes() {
        let e = ApiError::query_bad_value("bad");
        let (status, info) = e.into_parts();
        let head = "{\"errors\":[{\"status\":400,\"title\":\"Bad Request\",\"detail\":\"The \
                    server could not comply with the request since it is either malformed \
                    or otherwise incorrect.\\n\\n bad  \",\"request_id\":\"req-1\"";
        assert_eq!(
            json(status, &info, Some(Version(23))),
            format!("{head},\"code\":\"placement.query.bad_value\"}}]}}")
        );
        assert_eq!(
            json(status, &info, Some(Version(22))),
            format!("{head}}}]}}")
        );
        let (status, info) = ApiError::from(VersionError::Unacceptable("no".into())).into_parts();
        let refused = json(status, &info, None);
        assert!(
            refused.ends_with(&format!(
                "\"request_id\":\"req-1\",\"max_version\":\"{}\",\"min_version\":\"{}\"}}]}}",
                crate::microversion::MAX,
                crate::microversion::MIN
            )),
            "{refused}"
        );
    }

    /// Every code is spelt as Placement spells it, and serializes as that text.
    #[test]
    fn codes_as_placement_spells_them() {
        let code = ErrorCode::ProviderCannotDeleteParent;
        assert_eq!(
            code.as_str(),
            "placement.resource_provider.cannot_delete_parent"
        );
        assert_eq!(
            serde_json::to_string(&code).unwrap(),
            "\"placement.resource_provider.cannot_delete_parent\""
        );
        assert_eq!(
            ErrorInfo::default().code.as_str(),
            "placement.undefined_code"
        );
    }
}
