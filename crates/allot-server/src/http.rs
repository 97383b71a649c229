//! Helpers every handler uses: the content type check and JSON parse under
//! `request::JsonBody`, the plain query string parse under `request`'s forms, and
//! JSON responses with Placement's caching headers.

use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

use crate::error::ApiError;

/// Checks the content type and parses a JSON body (the schema and the typed form are
/// `request`'s).
pub fn json_value(headers: &HeaderMap, body: &Bytes) -> Result<Value, ApiError> {
    require_json_content(headers, body)?;
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("Malformed JSON: {e}")))
}

/// Checks only the request's content type, as [`json_value`] does (400 without one when
/// there is a body, 415 for anything but JSON), for handlers where Placement checks it
/// before the microversion and parses the body later.
pub fn require_json_content(headers: &HeaderMap, body: &Bytes) -> Result<(), ApiError> {
    match headers
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or(""))
    {
        None if !body.is_empty() => {
            return Err(ApiError::bad_request("content-type header required"))
        }
        None => return Err(ApiError::unsupported_media_type(None)),
        Some(ct) => {
            let media = ct.split(';').next().unwrap_or("").trim();
            if !media.eq_ignore_ascii_case("application/json") {
                return Err(ApiError::unsupported_media_type(Some(media)));
            }
        }
    }
    Ok(())
}

/// A parsed query string: every key with all its values, in order.
#[derive(Debug, Default, Clone)]
pub struct Query(pub Vec<(String, String)>);

impl Query {
    /// Parses a raw query string (`None` for no query).
    pub fn parse(raw: Option<&str>) -> Self {
        Query(
            form_urlencoded::parse(raw.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// All values of a key.
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The value of a single-valued key: its last one if repeated, as Placement reads
    /// `req.GET[key]`.
    pub fn last(&self, key: &str) -> Option<&str> {
        self.all(key).last().copied()
    }

    /// Refuses keys outside `allowed`, with jsonschema's wording.
    pub fn only(&self, allowed: &[&str]) -> Result<(), ApiError> {
        let mut extra: Vec<&str> = self
            .0
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| !allowed.contains(k))
            .collect();
        extra.dedup();
        if extra.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = extra.iter().map(|k| format!("'{k}'")).collect();
        let verb = if names.len() == 1 { "was" } else { "were" };
        Err(ApiError::bad_request(format!(
            "Invalid query string parameters: Additional properties are not allowed ({} {verb} unexpected)",
            names.join(", ")
        )))
    }
}

/// A JSON response: a [`crate::wire`] type, or a `Value` for the handlers not yet
/// converted, serialized straight into the body's bytes.
pub fn json<T: Serialize + ?Sized>(status: StatusCode, value: &T) -> Response {
    // The wire types have string keys only and no failing `Serialize`: this cannot fail.
    json_bytes(status, serde_json::to_vec(value).unwrap_or_default())
}

/// A JSON response from a body already serialized, for handlers that serialize where
/// the data they borrow lives (a blocking task holding the view).
pub fn json_bytes(status: StatusCode, body: Vec<u8>) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// A bodiless response (Placement sends no content type on these).
pub fn empty(status: StatusCode) -> Response {
    status.into_response()
}

/// Adds `last-modified` and `cache-control: no-cache` (what Placement sends from 1.15
/// on GETs: the data may change at any time, but the time of the change is known).
pub fn cache_headers(mut response: Response, last_modified: allot_core::Timestamp) -> Response {
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(last_modified.max(0) as u64);
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&httpdate::fmt_http_date(when)) {
        h.insert(header::LAST_MODIFIED, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Sets the `location` header to a path (`/resource_providers/...`); the middleware
/// makes it absolute against the request's host on the way out, as webob does for
/// Placement (see `crate::context`).
pub fn location(mut response: Response, url: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(url) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    response
}
