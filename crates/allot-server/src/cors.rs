//! CORS, off unless origins are configured (as Placement's `[cors] allowed_origin`).

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// CORS settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cors {
    /// Origins allowed to call us (exact match).
    pub allowed_origins: Vec<String>,
    /// Headers a preflight may ask for, beyond the simple ones.
    pub allow_headers: Vec<String>,
}

const METHODS: &str = "GET, POST, PUT, DELETE, PATCH";

impl Cors {
    fn allows(&self, origin: &str) -> bool {
        self.allowed_origins.iter().any(|o| o == origin || o == "*")
    }

    /// Answers a preflight (`OPTIONS` with `Access-Control-Request-Method`): 200, with
    /// the allow headers only when the origin is allowed.
    pub fn preflight(&self, origin: Option<&str>) -> Response {
        let mut response = StatusCode::OK.into_response();
        if origin.is_some_and(|o| self.allows(o)) {
            let h = response.headers_mut();
            h.insert(
                "access-control-allow-methods",
                HeaderValue::from_static(METHODS),
            );
            if !self.allow_headers.is_empty() {
                if let Ok(v) = HeaderValue::from_str(&self.allow_headers.join(", ")) {
                    h.insert("access-control-allow-headers", v);
                }
            }
        }
        response
    }

    /// Adds `Access-Control-Allow-Origin` to a response for an allowed origin.
    pub fn decorate(&self, response: &mut Response, origin: &str) {
        if self.allows(origin) {
            if let Ok(v) = HeaderValue::from_str(origin) {
                response
                    .headers_mut()
                    .insert("access-control-allow-origin", v);
                response
                    .headers_mut()
                    .append("vary", HeaderValue::from_static("origin"));
            }
        }
    }
}
