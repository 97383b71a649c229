//! `GET /`: version discovery. Needs no token.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;

use crate::context::Ctx;
use crate::http;
use crate::microversion::{MAX, MIN};
use crate::AppState;

/// The one version document: min and max microversions.
pub async fn home(ctx: Ctx, axum::extract::State(app): axum::extract::State<AppState>) -> Response {
    let body = json!({
        "versions": [{
            "id": format!("v{MIN}"),
            "max_version": MAX.to_string(),
            "min_version": MIN.to_string(),
            "status": "CURRENT",
            // A relative "this same URL": we never need to know how we are proxied.
            "links": [{"rel": "self", "href": ""}],
        }]
    });
    let response = http::json(StatusCode::OK, &body);
    ctx.cached(response, app.host.now())
}
