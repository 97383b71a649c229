//! Drains, an allot extension (issue 44) available at every microversion:
//! `POST/GET /drains`, `GET/DELETE /drains/{uuid}` and `POST /drains/{uuid}/confirm`.
//!
//! The rules (which consumers move, what each needs, where it may go, what a
//! confirm writes) are the core's (`allot_core::ops::drains`); here are the HTTP
//! concerns, in the order of every handler, and the write through the host: a drain
//! is planned against the view it applies to, in one write, like a mass start.

use allot_core::Uuid;
use allot_store::WriteKind;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult};
use crate::policy::{authorize, Action};
use crate::request::drains::{drain_in_path, read_create};
use crate::request::JsonBody;
use crate::wire::drains::drain_body;
use crate::{http, AppState};

/// The routes of this module.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/drains", get(list).post(create))
        .route("/drains/{uuid}", get(show).delete(abandon))
        .route("/drains/{uuid}/confirm", post(confirm))
}

/// `POST /drains`: 201 with the drain, each consumer's claim and the consumers
/// left (with `partial`); all or none otherwise (409 `allot.claim.does_not_fit`).
pub async fn create(ctx: Ctx, State(app): State<AppState>, body: JsonBody) -> ApiResult {
    ctx.require_json_accept()?;
    body.require_json()?;
    authorize(&ctx, app.config.settings.policy, Action::DrainsCreate)?;
    let seed = Uuid::new_v4().as_u64_pair().0;
    let options = app.config.settings.search_options();
    let (mut new, expiry) = read_create(&body, Uuid::new_v4(), options, seed)?;
    let (drained, now) = app
        .write(WriteKind::Drain, move |view, now| {
            new.expires_at = expiry.at(None, now)?;
            let (drained, changes) = view.plan_drain(new, &mut Uuid::new_v4, now)?;
            Ok(((drained, now), changes))
        })
        .await?;
    let view = app.host.read();
    let body = drain_body(&view, &drained.drain, now, &drained.unplaced);
    let response = http::json(StatusCode::CREATED, &body);
    Ok(http::location(
        response,
        &format!("/drains/{}", drained.drain.uuid),
    ))
}

/// `GET /drains`: every drain, oldest first.
pub async fn list(ctx: Ctx, State(app): State<AppState>) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::DrainsShow)?;
    let now = app.host.now();
    let response = {
        let view = app.host.read();
        let body = allot_client::drains::DrainList {
            drains: view
                .drains()
                .map(|d| drain_body(&view, d, now, &[]))
                .collect(),
        };
        http::json(StatusCode::OK, &body)
    };
    Ok(ctx.cached(response, now))
}

/// `GET /drains/{uuid}`: the drain and its claims as they are now.
pub async fn show(ctx: Ctx, State(app): State<AppState>, Path(raw): Path<String>) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::DrainsShow)?;
    let uuid = drain_in_path(&raw)?;
    let now = app.host.now();
    let response = {
        let view = app.host.read();
        let drain = view.drain(&uuid).ok_or_else(|| unknown(&uuid))?;
        http::json(StatusCode::OK, &drain_body(&view, drain, now, &[]))
    };
    Ok(ctx.cached(response, now))
}

/// `POST /drains/{uuid}/confirm`: every claim still pending confirmed in one write
/// (each replacing what its consumer holds in the drained trees); the roots open.
pub async fn confirm(ctx: Ctx, State(app): State<AppState>, Path(raw): Path<String>) -> ApiResult {
    ctx.require_json_accept()?;
    authorize(&ctx, app.config.settings.policy, Action::DrainsConfirm)?;
    let uuid = drain_in_path(&raw)?;
    let (drain, now) = app
        .write(WriteKind::Drain, move |view, now| {
            let (drain, changes) = view.plan_confirm_drain(&uuid, now)?;
            Ok(((drain, now), changes))
        })
        .await?;
    let view = app.host.read();
    Ok(http::json(
        StatusCode::OK,
        &drain_body(&view, &drain, now, &[]),
    ))
}

/// `DELETE /drains/{uuid}`: the drain abandoned; its pending claims released, its
/// roots open again.
pub async fn abandon(ctx: Ctx, State(app): State<AppState>, Path(raw): Path<String>) -> ApiResult {
    authorize(&ctx, app.config.settings.policy, Action::DrainsDelete)?;
    let uuid = drain_in_path(&raw)?;
    app.write(WriteKind::Drain, move |view, now| {
        view.plan_abandon_drain(&uuid, now)
    })
    .await?;
    Ok(http::empty(StatusCode::NO_CONTENT))
}

fn unknown(uuid: &Uuid) -> ApiError {
    ApiError::not_found(format!("No drain with uuid {uuid} found."))
}
