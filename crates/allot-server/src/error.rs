//! The one error type of the HTTP layer and the one place that renders errors.
//!
//! Handlers return [`ApiError`]; it becomes a bodiless response carrying an
//! [`ErrorInfo`] extension. The request middleware (`crate::context`) then renders
//! every error response, including axum's own 404/405/413, into Placement's envelope
//! `{"errors": [{"status", "title", "detail", "code", "request_id"}]}`, because only
//! it knows the request id, the microversion (the `code` appears from 1.23) and what
//! the client accepts.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::microversion::Version;

/// Placement's stable error codes, which clients branch on.
pub mod codes {
    /// Any error without a more specific code.
    pub const UNDEFINED: &str = "placement.undefined_code";
    /// A generation did not match.
    pub const CONCURRENT_UPDATE: &str = "placement.concurrent_update";
    /// A name or uuid is taken.
    pub const DUPLICATE_NAME: &str = "placement.duplicate_name";
    /// Inventory is used by allocations.
    pub const INVENTORY_INUSE: &str = "placement.inventory.inuse";
    /// A provider is used by allocations.
    pub const PROVIDER_IN_USE: &str = "placement.resource_provider.inuse";
    /// A provider with children cannot be deleted.
    pub const PROVIDER_CANNOT_DELETE_PARENT: &str =
        "placement.resource_provider.cannot_delete_parent";
    /// A provider named in the request does not exist.
    pub const PROVIDER_NOT_FOUND: &str = "placement.resource_provider.not_found";
    /// A query parameter was given twice where once is allowed.
    pub const QUERY_DUPLICATE_KEY: &str = "placement.query.duplicate_key";
    /// A query parameter's value is invalid.
    pub const QUERY_BAD_VALUE: &str = "placement.query.bad_value";
    /// A query parameter has no value.
    pub const QUERY_MISSING_VALUE: &str = "placement.query.missing_value";
    /// A pending claim does not fit (allot's extension API).
    pub const CLAIM_DOES_NOT_FIT: &str = "allot.claim.does_not_fit";
    /// A claim that is no longer pending cannot be confirmed (allot's extension API).
    pub const CLAIM_NOT_PENDING: &str = "allot.claim.not_pending";
    /// This node's view may be out of date: it could not follow the database's
    /// change log for longer than its bound (several nodes on one database).
    pub const VIEW_STALE: &str = "allot.view.stale";
    /// The database could not complete a write.
    pub const STORE_UNAVAILABLE: &str = "allot.store.unavailable";
}

/// An error answer: status, message and Placement error code.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// The specific message (the envelope's `detail` adds the status's explanation).
    pub message: String,
    /// Placement error code.
    pub code: &'static str,
}

/// What an error response carries until the middleware renders it.
#[derive(Debug, Clone)]
pub struct ErrorInfo {
    /// The specific message, if any.
    pub message: String,
    /// Placement error code.
    pub code: &'static str,
}

/// A handler result.
pub type ApiResult<T = Response> = Result<T, ApiError>;

impl ApiError {
    /// An error with the undefined code.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            code: codes::UNDEFINED,
        }
    }
    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }
    /// 409.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::CONFLICT,
            message: message.into(),
            code,
        }
    }
    /// 406 for a response type the client does not accept.
    pub fn not_acceptable() -> Self {
        Self::new(
            StatusCode::NOT_ACCEPTABLE,
            "Only application/json is provided",
        )
    }
    /// 403.
    pub fn forbidden(action: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            format!("Policy does not allow {action} to be performed."),
        )
    }
    /// The same error with a different code.
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = code;
        self
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
                    ConflictCode::ConcurrentUpdate => codes::CONCURRENT_UPDATE,
                    ConflictCode::Duplicate => codes::DUPLICATE_NAME,
                    ConflictCode::InventoryInUse => codes::INVENTORY_INUSE,
                    ConflictCode::ProviderInUse => codes::PROVIDER_IN_USE,
                    ConflictCode::CannotDeleteParent => codes::PROVIDER_CANNOT_DELETE_PARENT,
                    ConflictCode::ClaimDoesNotFit => codes::CLAIM_DOES_NOT_FIT,
                    ConflictCode::ClaimNotPending => codes::CLAIM_NOT_PENDING,
                    ConflictCode::Other => codes::UNDEFINED,
                };
                ApiError::conflict(code, message)
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
                // that must be loaded again), which a client may retry.
                tracing::error!(error = %e, "store failure");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The database could not complete this write; try again.",
                )
                .with_code(codes::STORE_UNAVAILABLE)
            }
            allot_store::WriteError::Stopped => {
                tracing::error!("the writer is not running");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "")
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = self.status.into_response();
        response.extensions_mut().insert(ErrorInfo {
            message: self.message,
            code: self.code,
        });
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

/// Renders an error into its final body.
pub fn render(
    status: StatusCode,
    info: &ErrorInfo,
    method: &str,
    request_id: &str,
    version: Option<Version>,
    format: ErrorFormat,
) -> (&'static str, Vec<u8>) {
    let title = status.canonical_reason().unwrap_or("Error");
    let explanation = explanation(status, method);
    // Placement strips webob's HTML from the body, and that turns every line break of
    // the message into a space: a multi-line message (a JSON Schema failure) reaches
    // the client as one line, which is what clients that show the detail's last line
    // (osc-placement) print in full. The HTML page keeps the message as it is.
    let message = match format {
        ErrorFormat::Json => info.message.replace('\r', "").replace('\n', " "),
        ErrorFormat::Html => info.message.clone(),
    };
    let detail = match (explanation.is_empty(), message.is_empty()) {
        (_, true) => explanation,
        (true, false) => message,
        (false, false) => format!("{explanation}\n\n {message}  "),
    };
    match format {
        ErrorFormat::Json => {
            let mut error = json!({
                "status": status.as_u16(),
                "title": title,
                "detail": detail,
                "request_id": request_id,
            });
            match version {
                Some(v) if v.at_least(23) => error["code"] = json!(info.code),
                Some(_) => {}
                // The version header itself was refused: say which versions exist.
                None => {
                    if status == StatusCode::NOT_ACCEPTABLE {
                        error["max_version"] = json!(crate::microversion::MAX.to_string());
                        error["min_version"] = json!(crate::microversion::MIN.to_string());
                    }
                }
            }
            let body = serde_json::to_vec(&json!({ "errors": [error] })).unwrap_or_default();
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
