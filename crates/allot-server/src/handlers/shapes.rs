//! Named shapes, an allot extension (issue 47) available at every microversion:
//! `GET /shapes`, `GET/PUT/DELETE /shapes/{name}`. `GET /headroom?shape=NAME`
//! (`super::headroom`) and `/metrics`' `allot_headroom` and `allot_stranded`
//! (`crate::metrics::shapes`) count them.
//!
//! A shape's request is checked here, as `GET /allocation_candidates` checks a
//! query string, before it is written; the core keeps the text
//! (`allot_core::shapes`).

use allot_core::shapes::Shape;
use allot_store::WriteKind;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;

use crate::auth::format_utc;
use crate::context::Ctx;
use crate::error::ApiResult;
use crate::policy::{authorize, Action};
use crate::request::shapes::{name_in_path, read_put};
use crate::request::JsonBody;
use crate::{http, AppState};

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/shapes", get(list))
        .route("/shapes/{shape}", get(show).put(put).delete(delete))
}

/// A shape as the answers write it.
pub fn shape_body(shape: &Shape) -> allot_client::shapes::Shape {
    allot_client::shapes::Shape {
        created_at: format_utc(shape.created_at),
        name: shape.name.to_string(),
        request: shape.request.clone(),
        updated_at: format_utc(shape.updated_at),
    }
}

/// `GET /shapes`: every shape, by name.
pub async fn list(ctx: Ctx, State(app): State<AppState>) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::ShapesShow)?;
    let now = app.host.now();
    let body = allot_client::shapes::ShapeList {
        shapes: app.host.read().shapes().map(shape_body).collect(),
    };
    Ok(ctx.cached(http::json(StatusCode::OK, &body), now))
}

/// `GET /shapes/{name}`.
pub async fn show(ctx: Ctx, State(app): State<AppState>, Path(raw): Path<String>) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::ShapesShow)?;
    let name = name_in_path(&raw)?;
    let now = app.host.now();
    let body = {
        let view = app.host.read();
        shape_body(super::headroom::named(&view, name.as_str())?)
    };
    Ok(ctx.cached(http::json(StatusCode::OK, &body), now))
}

/// `PUT /shapes/{name}` with `{"request": QUERY}`: 201 with the shape when it is
/// new, 200 when its request was replaced.
pub async fn put(
    ctx: Ctx,
    State(app): State<AppState>,
    Path(raw): Path<String>,
    body: JsonBody,
) -> ApiResult {
    ctx.require_json_accept()?;
    body.require_json()?;
    authorize(&ctx, app.config.settings.policy, Action::ShapesUpdate)?;
    let name = name_in_path(&raw)?;
    let request = read_put(&body)?;
    let (shape, new) = app
        .write(WriteKind::Other, move |view, now| {
            let (shape, new, changes) = view.plan_put_shape(name, request, now)?;
            Ok(((shape, new), changes))
        })
        .await?;
    let status = if new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(http::json(status, &shape_body(&shape)))
}

/// `DELETE /shapes/{name}`.
pub async fn delete(ctx: Ctx, State(app): State<AppState>, Path(raw): Path<String>) -> ApiResult {
    authorize(&ctx, app.config.settings.policy, Action::ShapesDelete)?;
    let name = name_in_path(&raw)?;
    app.write(WriteKind::Other, move |view, _| {
        Ok(((), view.plan_delete_shape(name.as_str())?))
    })
    .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}
