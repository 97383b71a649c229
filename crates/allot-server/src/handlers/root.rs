//! `GET /`: version discovery. Needs no token.

use axum::http::StatusCode;
use axum::response::Response;

use crate::context::Ctx;
use crate::http;
use crate::microversion::{MAX, MIN};
use crate::{wire, AppState};

/// The one version document: min and max microversions.
pub async fn home(ctx: Ctx, axum::extract::State(app): axum::extract::State<AppState>) -> Response {
    let body = wire::Versions {
        versions: [wire::ApiVersion {
            id: format!("v{MIN}"),
            // A relative "this same URL": we never need to know how we are proxied.
            links: vec![wire::Link::to_self("")],
            max_version: MAX.to_string(),
            min_version: MIN.to_string(),
            status: "CURRENT",
        }],
    };
    let response = http::json(StatusCode::OK, &body);
    ctx.cached(response, app.host.now())
}
