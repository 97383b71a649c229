//! The OpenAPI 3.1 document of the whole API (`GET /openapi.json`, no token needed,
//! kept in the repository as `docs/openapi.json`).
//!
//! It is built here, from the definitions the server itself uses, so that it cannot
//! drift from what is served: every request body's schema is the function of
//! `crate::schemas` the handler validates with (at microversion 1.39 where the shape
//! depends on it), the query parameters of `GET /resource_providers`, `/usages`,
//! the claims, server groups and pending totals come from the query schemas the
//! handlers check, and the tests (`openapi/tests.rs`) compare the paths and methods
//! with the router's and the served document with the file. The response schemas are
//! written beside the operations ([`components`]), from the types of `crate::wire` and
//! `allot_client`.
//!
//! OpenAPI cannot choose a schema by a header, so the document describes microversion
//! 1.39 (what `placement latest` answers); what earlier microversions change is said
//! in each operation's description. The request schemas are Placement's, written for
//! its draft-4 `jsonschema` validator; every keyword they use means the same in JSON
//! Schema 2020-12, OpenAPI 3.1's dialect (`type` lists, `patternProperties`,
//! `additionalProperties`, `format: uuid`), so they are used as they are.
//!
//! The web UI (`/ui`) is for people, not part of the API, and is left out.

mod components;
mod extensions;
mod op;
mod placement;
#[cfg(test)]
mod tests;

use std::sync::OnceLock;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use crate::microversion::MAX;
use op::Op;

/// Where the document is served.
pub const PATH: &str = "/openapi.json";

/// Where the document is kept in the repository, relative to the workspace root.
pub const FILE: &str = "docs/openapi.json";

/// The document, built once.
pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(build)
}

/// The document as the file holds it: pretty, with a final newline.
pub fn text() -> String {
    let mut text = serde_json::to_string_pretty(document()).unwrap_or_default();
    text.push('\n');
    text
}

/// `GET /openapi.json`: the document, to anyone (like `/`, it says nothing a client
/// could not learn by calling).
pub async fn serve() -> Response {
    static BODY: OnceLock<Vec<u8>> = OnceLock::new();
    let body = BODY.get_or_init(|| text().into_bytes()).clone();
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Every operation, Placement's then allot's.
pub(crate) fn operations() -> Vec<Op> {
    let mut ops = placement::operations();
    ops.extend(extensions::operations());
    ops
}

fn build() -> Value {
    let mut paths = Map::new();
    for op in operations() {
        let entry = paths.entry(op.path.to_owned()).or_insert_with(|| json!({}));
        entry[op.method.to_ascii_lowercase()] = op.to_json();
    }
    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
        "info": {
            "title": "allot",
            "version": MAX.to_string(),
            "summary": "The OpenStack Placement API (microversions 1.0 to 1.39) and allot's extensions.",
            "description": DESCRIPTION,
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "servers": [{"url": "/"}],
        "tags": components::tags(),
        "security": [{"token": []}],
        "paths": paths,
        "components": {
            "securitySchemes": components::security(),
            "parameters": components::parameters(),
            "schemas": components::schemas(),
        },
    })
}

const DESCRIPTION: &str = "\
allot serves the OpenStack Placement HTTP API, microversions 1.0 to 1.39, and its own \
extensions beside it (claims, pending totals, weighed candidates and pick-and-claim, \
headroom, explain, server groups, drains, class metadata, status, metrics). This \
document describes microversion 1.39: every Placement operation takes the \
`OpenStack-API-Version: placement 1.39` header here, and what earlier microversions \
change is said in each operation's description (a request without the header is \
served at 1.0). The extensions answer alike at every microversion.\n\n\
Every error is Placement's envelope (`Error`). docs/api.md is the contract in words, \
with every difference from Placement 16.0.";
